"""``TileBandItem``: tiles selected elsewhere (the Memory view's tiles, an op's tiles) as bands across the
Execution view's tile lanes, one bar per run of consecutive tiles."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg


def tile_runs(tiles) -> tuple[np.ndarray, np.ndarray]:
    """(first, end) of each run of consecutive tiles in ``tiles`` (any order, repeats allowed)."""
    t = np.unique(np.asarray(tiles, dtype=np.int64))
    if len(t) == 0:
        return t, t
    brk = np.flatnonzero(np.diff(t) != 1) + 1
    return t[np.concatenate([[0], brk])], t[np.concatenate([brk - 1, [len(t) - 1]])] + 1


class TileBandItem(pg.BarGraphItem):
    """Bands over selected tiles (y = global tile) across the visible x range."""

    def __init__(self):
        super().__init__(x0=[], width=[], y0=[], height=[], brush=pg.mkBrush(0, 160, 255, 60),
                         pen=pg.mkPen(0, 160, 255, 160))

    def set_tiles(self, tiles, x0: float, x1: float) -> None:
        """Band ``tiles`` across [x0, x1); none hides the item."""
        a, b = tile_runs(tiles)
        if len(a) == 0:
            self.hide()
            return
        self.setOpts(x0=np.zeros(len(a)), width=np.full(len(a), x1 - x0), y0=a.astype(float),
                     height=(b - a).astype(float))
        self.setPos(x0, 0)
        self.show()
