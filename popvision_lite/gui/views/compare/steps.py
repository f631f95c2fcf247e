"""Compare Steps: the IPU time of both runs by part (one time base) and the matched step table."""

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
from popvision_lite.gui.items.menu_on_demand import plot_kwargs
from popvision_lite.gui.table_model import DataFrameModel, make_table_view
from popvision_lite.gui.theme import RUN_A_COLOR, RUN_B_COLOR
from popvision_lite.gui.views.compare.common import fit_columns
from popvision_lite.units import format_seconds, time_unit


class CompareStepsPage(QWidget):
    def __init__(self, cmp: C.Comparison, parent=None):
        super().__init__(parent)
        self.cmp = cmp
        self.steps = C.step_table(cmp.a, cmp.b)
        self.plot = pg.PlotWidget(**plot_kwargs())
        pi = self.plot.getPlotItem()
        ph = cmp.phases.set_index("phase")
        # one time base: the parts of the IPU time and their sum (summed over a replica's IPUs); the step's wall
        # time is another base (S x shorter) and is said in the title, never drawn beside them (issue 46: a compute
        # bar summed over 4 IPUs stood taller than the wall-time "total" bar)
        names = [n for n in ph.index if ph.loc[n, "basis"] == "IPU time"]
        self.names = names
        ta_s = ph.loc[names, "time_a_s"].to_numpy(np.float64)
        tb_s = ph.loc[names, "time_b_s"].to_numpy(np.float64)
        unit, scale = time_unit(max(float(ta_s.max(initial=0)), float(tb_s.max(initial=0))))
        self.unit = unit
        ta, tb = ta_s / scale, tb_s / scale
        wall = ph.loc[C.WALL_ROW]
        pi.setTitle(f"IPU time by part (summed over each replica's IPUs), A and B\none step's wall time (another "
                    f"time base, not drawn): A {format_seconds(wall['time_a_s'])}, B {format_seconds(wall['time_b_s'])}",
                    size="9pt")
        pi.setLabel("left", f"IPU time ({unit})")
        pi.getAxis("left").enableAutoSIPrefix(False)
        pi.setMouseEnabled(False, False)
        pi.hideButtons()
        x = np.arange(len(names), dtype=np.float64)
        pi.addItem(pg.BarGraphItem(x=x - 0.2, height=ta, width=0.38, brush=RUN_A_COLOR, pen=None))
        pi.addItem(pg.BarGraphItem(x=x + 0.2, height=tb, width=0.38, brush=RUN_B_COLOR, pen=None))
        # the legend sits top left over the shortest bars, with headroom above the tallest (the IPU time)
        pi.setYRange(0, max(float(ta.max(initial=0)), float(tb.max(initial=0)), 1e-9) * 1.35, padding=0)
        leg = pi.addLegend(offset=(10, 10))
        leg.addItem(pg.BarGraphItem(x=[0], height=[0], width=0, brush=RUN_A_COLOR), f"A: {cmp.label_a}")
        leg.addItem(pg.BarGraphItem(x=[0], height=[0], width=0, brush=RUN_B_COLOR), f"B: {cmp.label_b}")
        ca = ph.loc[names, "cycles_a"].to_numpy()
        cb = ph.loc[names, "cycles_b"].to_numpy()
        pi.getAxis("bottom").setTicks([[(i, f"{n}\n{int(a):,} / {int(b):,} cyc") for i, (n, a, b)
                                        in enumerate(zip(names, ca, cb, strict=True))]])
        pi.setLabel("bottom", "part of the IPU time (cycles A / B)")
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
