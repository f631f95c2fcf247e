"""Compare Steps: time per BSP phase of both runs and the matched step table."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from popvision_lite.analysis import compare as C
from popvision_lite.analysis.summary import PHASES
from popvision_lite.gui.table_model import DataFrameModel, make_table_view
from popvision_lite.gui.theme import RUN_A_COLOR, RUN_B_COLOR
from popvision_lite.gui.views.compare.common import fit_columns


class CompareStepsPage(QWidget):
    def __init__(self, cmp: C.Comparison, parent=None):
        super().__init__(parent)
        self.cmp = cmp
        self.steps = C.step_table(cmp.a, cmp.b)
        self.plot = pg.PlotWidget()
        pi = self.plot.getPlotItem()
        pi.setTitle("Time per BSP phase (cycles / clock), A and B")
        pi.setLabel("left", "time (µs)")
        pi.getAxis("left").enableAutoSIPrefix(False)
        pi.setMouseEnabled(False, False)
        pi.hideButtons()
        ph = cmp.phases.set_index("phase")
        x = np.arange(len(PHASES) + 1, dtype=np.float64)
        names = list(PHASES) + ["total"]
        ta = ph.loc[names, "time_a_s"].to_numpy(np.float64) * 1e6
        tb = ph.loc[names, "time_b_s"].to_numpy(np.float64) * 1e6
        pi.addItem(pg.BarGraphItem(x=x - 0.2, height=ta, width=0.38, brush=RUN_A_COLOR, pen=None))
        pi.addItem(pg.BarGraphItem(x=x + 0.2, height=tb, width=0.38, brush=RUN_B_COLOR, pen=None))
        # the legend sits top left over the shortest bars, with headroom above the tallest (the total)
        pi.setYRange(0, max(float(ta.max(initial=0)), float(tb.max(initial=0)), 1e-9) * 1.35, padding=0)
        leg = pi.addLegend(offset=(10, 10))
        leg.addItem(pg.BarGraphItem(x=[0], height=[0], width=0, brush=RUN_A_COLOR), f"A: {cmp.label_a}")
        leg.addItem(pg.BarGraphItem(x=[0], height=[0], width=0, brush=RUN_B_COLOR), f"B: {cmp.label_b}")
        ca = ph.loc[names, "cycles_a"].to_numpy()
        cb = ph.loc[names, "cycles_b"].to_numpy()
        pi.getAxis("bottom").setTicks([[(i, f"{n}\n{int(a):,} / {int(b):,} cyc") for i, (n, a, b)
                                        in enumerate(zip(names, ca, cb, strict=True))]])
        pi.setLabel("bottom", "phase (cycles A / B)")
        self.model = DataFrameModel(self.steps)
        self.table = make_table_view(self.model, "BSP steps matched by (op, kind, n-th occurrence); "
                                     "-1 = no such step in that run")
        self.table.setObjectName("steps")
        fit_columns(self.table)
        split = QSplitter(Qt.Vertical)
        split.addWidget(self.plot)
        split.addWidget(self.table)
        split.setSizes([420, 420])
        lay = QVBoxLayout(self)
        lay.addWidget(split)

    def plot_items(self) -> dict:
        return {"phases": self.plot.getPlotItem()}

    def tables(self) -> dict:
        return {"steps": self.steps, "phases": self.cmp.phases}
