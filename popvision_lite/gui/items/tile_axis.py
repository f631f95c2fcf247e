"""``TileAxis``: the left axis of tile lanes (execution view)."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg


class TileAxis(pg.AxisItem):
    """Left axis of the tile lanes: "IPU n" at IPU starts when zoomed out, tile ids when zoomed in."""

    def __init__(self, tiles_per_ipu: int, num_ipus: int, **kw):
        super().__init__("left", **kw)
        self.tpi = max(1, tiles_per_ipu)
        self.nipu = num_ipus

    def tickValues(self, minVal, maxVal, size):
        minVal, maxVal = min(minVal, maxVal), max(minVal, maxVal)  # the lanes' y is inverted
        span = maxVal - minVal
        if span > 1.5 * self.tpi or (self.nipu > 1 and span > 0.6 * self.tpi):
            first = max(0, int(np.floor(minVal / self.tpi)))
            last = min(self.nipu, int(np.ceil(maxVal / self.tpi)) + 1)
            centres = [i * self.tpi + self.tpi / 2 for i in range(first, last)]
            step = max(1, int(np.ceil(len(centres) / max(size / 18, 1))))
            return [(self.tpi, centres[::step])]
        return super().tickValues(minVal, maxVal, size)

    def tickStrings(self, values, scale, spacing):
        if spacing == self.tpi:
            return [f"IPU {int(v // self.tpi)}" for v in values]
        out = []
        for v in values:
            t = int(np.floor(v))
            out.append(f"{t // self.tpi}:{t % self.tpi}" if self.nipu > 1 else str(t))
        return out
