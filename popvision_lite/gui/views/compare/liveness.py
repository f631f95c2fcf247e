"""Compare Liveness: both not-always-live curves overlaid, with a step cursor."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import (
    QVBoxLayout,
    QWidget,
)

from popvision_lite.analysis import compare as C
from popvision_lite.gui import theme
from popvision_lite.gui.items.menu_on_demand import plot_kwargs
from popvision_lite.gui.text import plain_label
from popvision_lite.gui.theme import RUN_A_COLOR, RUN_B_COLOR
from popvision_lite.units import KIB, format_bytes


class CompareLivenessPage(QWidget):
    def __init__(self, cmp: C.Comparison, parent=None):
        super().__init__(parent)
        self.cmp = cmp
        self.la, self.lb = C.liveness_curves(cmp.a, cmp.b)
        self.plot = pg.PlotWidget(**plot_kwargs())
        pi = self.plot.getPlotItem()
        pi.setTitle("Not-always-live memory on the fullest tile, A and B overlaid")
        pi.setLabel("bottom", "liveness step (leaf program, compile order)")
        pi.setLabel("left", "not-always-live bytes on the fullest tile (KiB)")
        pi.getAxis("left").enableAutoSIPrefix(False)
        pi.showGrid(x=True, y=True, alpha=0.25)
        pi.addLegend(offset=(10, 10))
        ya = self.la["max_tile_bytes"].to_numpy(np.float64) / KIB
        yb = self.lb["max_tile_bytes"].to_numpy(np.float64) / KIB
        self.curve_a = pi.plot(self.la["lstep"].to_numpy(np.float64), ya, pen=pg.mkPen(RUN_A_COLOR, width=2),
                               name=f"A: {cmp.label_a} (peak {format_bytes(ya.max() * KIB if len(ya) else 0)})")
        self.curve_b = pi.plot(self.lb["lstep"].to_numpy(np.float64), yb, pen=pg.mkPen(RUN_B_COLOR, width=2),
                               name=f"B: {cmp.label_b} (peak {format_bytes(yb.max() * KIB if len(yb) else 0)})")
        self.cursor = pg.InfiniteLine(angle=90, movable=False, pen=pg.mkPen(theme.colors()["select"], width=1))
        pi.addItem(self.cursor)
        self.info = plain_label("Move the mouse over the plot: both runs' bytes at that step")
        self.plot.scene().sigMouseMoved.connect(self._moved)
        lay = QVBoxLayout(self)
        lay.addWidget(self.info)
        lay.addWidget(self.plot, 1)

    def _moved(self, pos) -> None:
        vb = self.plot.getPlotItem().getViewBox()
        if vb.sceneBoundingRect().contains(pos):
            self.set_cursor(int(round(vb.mapSceneToView(pos).x())))

    def set_cursor(self, lstep: int) -> None:
        self.cursor.setValue(lstep)

        def at(df):
            r = df[df["lstep"] == lstep]
            return "—" if len(r) == 0 else f"{format_bytes(r['max_tile_bytes'].iloc[0])} ({r['name'].iloc[0]})"
        self.info.setText(f"step {lstep}: A {at(self.la)};  B {at(self.lb)}")

    def plot_items(self) -> dict:
        return {"liveness": self.plot.getPlotItem()}

    def tables(self) -> dict:
        m = self.la.merge(self.lb, on="lstep", how="outer", suffixes=("_a", "_b"))
        for c in ("max_tile_bytes_a", "total_bytes_a", "max_tile_bytes_b", "total_bytes_b"):
            m[c] = m[c].astype("Int64")  # bytes stay whole numbers; the shorter run's missing steps are <NA>
        return {"liveness": m}
