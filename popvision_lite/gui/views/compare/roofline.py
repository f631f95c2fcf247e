"""Compare Roofline: both runs' ops on one log-log roofline with both targets' roofs."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QVBoxLayout,
    QWidget,
)

from popvision_lite.analysis import compare as C
from popvision_lite.analysis import roofline as rl
from popvision_lite.gui.items.menu_on_demand import plot_kwargs
from popvision_lite.gui.items.power_of_ten_axis import PowerOfTenAxis
from popvision_lite.gui.theme import RUN_A_COLOR, RUN_B_COLOR
from popvision_lite.gui.views.compare.common import notes_label


class CompareRooflinePage(QWidget):
    """Both runs' ops on one log-log roofline with both targets' roofs (A solid blue, B dashed orange)."""

    def __init__(self, cmp: C.Comparison, parent=None):
        super().__init__(parent)
        self.cmp = cmp
        self.ra = rl.analyze(cmp.a, gpus=())
        self.rb = rl.analyze(cmp.b, gpus=())
        # powers of ten on both log axes, as in the Roofline view (pyqtgraph's own mixed '0.1' and '10¹')
        self.plot = pg.PlotWidget(**plot_kwargs(axisItems={"bottom": PowerOfTenAxis("bottom"), "left": PowerOfTenAxis("left")}))
        pi = self.plot.getPlotItem()
        pi.setTitle("Roofline of both runs, per chip: ops' achieved FLOP/s per chip vs operational intensity")
        pi.setLogMode(x=True, y=True)
        pi.setLabel("bottom", "operational intensity at the op's bounding memory level (FLOP/byte)")
        pi.setLabel("left", "achieved performance (FLOP/s)")
        pi.getAxis("left").enableAutoSIPrefix(False)
        pi.getAxis("bottom").enableAutoSIPrefix(False)
        pi.showGrid(x=True, y=True, alpha=0.25)
        pi.addLegend(offset=(-10, -10))
        pts = [r.points for r in (self.ra, self.rb)]
        xs = np.concatenate([p["intensity"].to_numpy(np.float64) for p in pts] + [np.array([1e-2, 1e4])])
        lx0, lx1 = np.log10(max(xs.min(), 1e-3)) - 0.5, np.log10(xs.max()) + 0.5
        grid = np.logspace(lx0, lx1, 200)
        self.curves = {}
        # every legend entry tells itself apart: run by colour, memory level by line style (A solid / dotted,
        # B dashed / dash-dot), and the roof's own bandwidth in its name
        styles = {("A", "sram"): Qt.SolidLine, ("A", "exchange"): Qt.DotLine,
                  ("B", "sram"): Qt.DashLine, ("B", "exchange"): Qt.DashDotLine}
        for who, r, color, label in (("A", self.ra, RUN_A_COLOR, cmp.label_a), ("B", self.rb, RUN_B_COLOR, cmp.label_b)):
            for lvl in ("sram", "exchange"):
                if r.ipu.has(lvl):
                    y = r.ipu.attainable(grid, "fp16", lvl)
                    bw = next(c for c in r.ipu.bandwidth if c.key == lvl)
                    name = f"{who} ({label}) roof: {r.ipu.name}, {bw.text()}"
                    self.curves[(who, lvl)] = pi.plot(grid, y, pen=pg.mkPen(color, width=2 if lvl == "sram" else 1.5,
                                                                            style=styles[(who, lvl)]), name=name)
            p = r.points
            size = 6 + 30 * np.sqrt(np.clip(p["share"].to_numpy(np.float64), 0, 1))
            sc = pg.ScatterPlotItem(x=np.log10(p["intensity"].to_numpy(np.float64)),
                                    y=np.log10(np.maximum(p["chip_flops"].to_numpy(np.float64), 1.0)),
                                    size=size, symbol="o" if who == "A" else "t",
                                    brush=pg.mkBrush(color + "b0"), pen=pg.mkPen("#333333", width=0.5),
                                    name=f"{who}: {label} ops ({len(p)})")
            pi.addItem(sc)
            self.curves[(who, "ops")] = sc
        self.note = notes_label("Points sized by the op's share of its run's cycles. A op and B op with the "
                                 "same name are listed side by side in the Operations tab.")
        lay = QVBoxLayout(self)
        lay.addWidget(self.note)
        lay.addWidget(self.plot, 1)

    def plot_items(self) -> dict:
        return {"roofline": self.plot.getPlotItem()}

    def tables(self) -> dict:
        a = self.ra.ops[["name", "intensity", "achieved_flops", "bound"]]
        b = self.rb.ops[["name", "intensity", "achieved_flops", "bound"]]
        return {"roofline": a.merge(b, on="name", how="outer", suffixes=("_a", "_b"))}
