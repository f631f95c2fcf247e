"""``LaneAxis``: the left axis of a step lane split into one sub-lane per IPU (lane ``i`` at y = (i + 0.5) / n;
the views invert y, so IPU 0 is at the top as in the tile lanes), naming as many IPUs as the axis' pixels allow: every ``k``-th IPU, ``k`` the smallest of
1, 2, 4, 5, 8, 10, 16, 20, ... that keeps two names at least :data:`MIN_LABEL_PX` apart, so that 64 IPUs on a
60-pixel lane do not print on top of each other (issue 46); a name that would be cut at the axis' end is left out.  One lane: its ``single`` name ("steps")."""

from __future__ import annotations

import math

import pyqtgraph as pg
from PySide6.QtGui import QFont

MIN_LABEL_PX = 13.0   # the height of one 7-point name and a little gap
NICE = (1, 2, 4, 5, 8, 10)


def label_stride(num_lanes: int, size_px: float, min_px: float = MIN_LABEL_PX) -> int:
    """Every how many lanes a name fits on an axis ``size_px`` pixels high (0: none fits)."""
    if num_lanes <= 1:
        return 1
    per = float(size_px) / num_lanes
    if per <= 0:
        return 0
    need = math.ceil(min_px / per)
    scale = 1
    while True:
        for k in NICE:
            if k * scale >= need:
                return k * scale if k * scale < num_lanes or num_lanes * per >= min_px else 0
        scale *= 10


class LaneAxis(pg.AxisItem):
    """Left axis of ``num_lanes`` sub-lanes named "``prefix`` i", thinned to the axis' height."""

    def __init__(self, num_lanes: int, prefix: str = "IPU", single: str = "steps", **kw):
        super().__init__("left", **kw)
        self.n = max(1, int(num_lanes))
        self.prefix = prefix
        self.single = single
        self.setStyle(tickFont=QFont("Sans", 7))

    def lane_labels(self, size_px: float) -> list[tuple[float, str]]:
        """(y, name) of the lanes named on an axis ``size_px`` pixels high."""
        if self.n == 1:
            return [(0.5, self.single)]
        k = label_stride(self.n, size_px)
        if k == 0:
            return []
        out = [((i + 0.5) / self.n, f"{self.prefix} {i}") for i in range(0, self.n, k)]
        if k > 1:  # lanes thinner than a name: one centred on a lane at the edge would be cut in half
            half = MIN_LABEL_PX / 2 / float(size_px)
            out = [(y, t) for y, t in out if half <= y <= 1 - half]
        return out

    def tickValues(self, minVal, maxVal, size):  # noqa: N802 - pyqtgraph's name
        lo, hi = min(minVal, maxVal), max(minVal, maxVal)
        span = max(hi - lo, 1e-12)
        # the labels of the lanes in view, thinned for the pixels one lane gets at this zoom
        labels = self.lane_labels(size / span)
        k = max(1, label_stride(self.n, size / span)) if self.n > 1 else 1
        return [(k / self.n, [y for y, _ in labels if lo <= y <= hi])]

    def tickStrings(self, values, scale, spacing):  # noqa: N802 - pyqtgraph's name
        if self.n == 1:
            return [self.single for _ in values]
        return [f"{self.prefix} {int(math.floor(v * self.n))}" for v in values]
