"""``RooflineCeilingsItem``: one device's roofline on the Roofline plot (log10 FLOP/byte x log10 FLOP/s): its
memory roofs as diagonals up to the top compute peak, its compute ceilings as horizontal lines from the first
ridge to the right edge, its ridge points as diamonds (hover: which peak over which roof).  The IPU's lines
are solid, a GPU's dashed.  The item only draws lines: what its labels say and where they may go are
``roof_labels`` and ``peak_labels``, placed by :class:`~.ceiling_labels.CeilingLabelsItem` (over the points,
which lie over these lines); ``legend_entry`` is the (line, name) the plot's legend lists for it.
"""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, Qt

from popvision_lite.analysis import roofline as rl

LABEL_INSET = 0.05   # decades between a label and the plot edge or ridge it starts from


class RooflineCeilingsItem(pg.GraphicsObject):
    """The roofline ``r`` in ``color`` across x [lx0, lx1] (log10 FLOP/byte); ``solid`` for the IPU."""

    def __init__(self, r: rl.Roofline, color: str, lx0: float, lx1: float, solid: bool):
        super().__init__()
        self.roofline = r
        self.color = color
        # (log10 bandwidth, first x, last x, text) of each memory roof labelled on its diagonal (the IPU's:
        # decades apart; a GPU's roofs lie a fraction of a decade apart, so its legend entry names them)
        self.roof_labels: list[tuple[float, float, float, str]] = []
        # (log10 peak, x of its ridge, text, prefers the right edge) of each compute ceiling
        self.peak_labels: list[tuple[float, float, str, bool]] = []
        self.legend_entry: tuple[pg.PlotDataItem, str] | None = None
        self._draw_roofs(lx0, solid)
        self._draw_peaks(lx1, solid)
        self.ridges = self._draw_ridges()

    def boundingRect(self) -> QRectF:  # noqa: N802 - Qt's name
        return self.childrenBoundingRect()

    def paint(self, painter, option, widget=None) -> None:
        """Nothing of its own: the lines and ridge points are child items."""

    def _line(self, x, y, pen) -> pg.PlotDataItem:
        item = pg.PlotDataItem(x, y, pen=pen)
        item.setParentItem(self)
        return item

    def _draw_roofs(self, lx0: float, solid: bool) -> None:
        """Bandwidth diagonals up to the top compute peak, highest first (the order of the GPU's dashed lines
        from the top, as its legend entry lists them)."""
        r = self.roofline
        top = max(c.value for c in r.compute)
        style = Qt.SolidLine if solid else Qt.DashLine
        roofs = sorted(r.bandwidth, key=lambda b: -b.value)
        for k, b in enumerate(roofs):
            xr = math.log10(top / b.value)
            x = np.array([lx0, xr])
            item = self._line(x, np.log10(b.value) + x, pg.mkPen(self.color, width=2 if solid else 1.5, style=style))
            if k == 0:
                short = r.name.replace("NVIDIA ", "")
                self.legend_entry = (item, r.name if solid else f"{short} ({', '.join(b.text() for b in roofs)})")
            if solid:  # somewhere between the left edge and its ridge, above or below the line
                self.roof_labels.append((math.log10(b.value), lx0 + LABEL_INSET, xr - 0.3, b.text()))

    def _draw_peaks(self, lx1: float, solid: bool) -> None:
        """Compute ceilings from the first ridge to the right edge, the top one in the roofs' style, the others
        dotted.  IPU labels prefer the right edge, GPU labels (with the GPU's name) the start of their line."""
        r = self.roofline
        top = max(c.value for c in r.compute)
        bw_max = max(b.value for b in r.bandwidth)
        for c in r.compute:
            x0 = math.log10(c.value / bw_max)
            style = (Qt.SolidLine if solid else Qt.DashLine) if c.value == top else Qt.DotLine
            self._line([x0, lx1], [math.log10(c.value)] * 2, pg.mkPen(self.color, width=2 if solid else 1.5,
                                                                       style=style))
            text = c.text() if solid else f"{r.name.replace('NVIDIA ', '')} {c.text()}"
            self.peak_labels.append((math.log10(c.value), x0 + LABEL_INSET, text, solid))

    def _draw_ridges(self) -> pg.ScatterPlotItem:
        """A diamond where each compute peak meets each memory roof; its hover tip names both."""
        ridges = self.roofline.ridges()
        tips = [f"ridge {cc.label} / {bb.label}: {x:.3g} FLOP/B" for cc, bb, x, _ in ridges]
        item = pg.ScatterPlotItem([math.log10(x) for _, _, x, _ in ridges], [math.log10(y) for _, _, _, y in ridges],
                                  size=8, symbol="d", brush=pg.mkBrush(self.color), pen=pg.mkPen("#000"),
                                  data=tips, hoverable=True, tip=lambda x, y, data: data)
        item.setParentItem(self)
        return item

    def ridge_tip(self, i: int) -> str:
        """The hover text of ridge point ``i``."""
        return str(self.ridges.data["data"][i])
