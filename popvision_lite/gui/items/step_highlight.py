"""``StepHighlightItem``: steps selected elsewhere (an op, a program, a search) as bars across a lane of the
Execution view: the step lane outlines them, the tile lanes fill them.  When more are visible than two per
pixel column they are merged to one bar per pixel column (the bars would be sub-pixel anyway)."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg

from popvision_lite.analysis import execution as ex


def highlight_spans(index: ex.StepIndex, steps: np.ndarray, x0: float, x1: float,
                    width_px: int) -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends) in cycles of the visible ``steps``, merged to pixel columns when more than two a column."""
    i0, i1 = index.visible(x0, x1)
    vis = steps[(steps >= i0) & (steps < i1)]
    starts, ends = index.start[vis].astype(float), index.end[vis].astype(float)
    if len(vis) > 2 * width_px:
        px = (x1 - x0) / width_px
        cells = np.unique(((starts - x0) // px).astype(np.int64))
        starts = x0 + cells * px
        ends = starts + px
    return starts, ends


class StepHighlightItem(pg.BarGraphItem):
    """Bars over highlighted steps of ``index``, ``height`` high from y = 0, in ``brush`` / ``pen``."""

    def __init__(self, index: ex.StepIndex, height: float, brush, pen):
        super().__init__(x0=[], width=[], y0=[], height=[], brush=brush, pen=pen)
        self.index = index
        self.lane_height = float(height)

    def set_steps(self, steps: np.ndarray, x0: float, x1: float, width_px: int, origin: float) -> None:
        """Highlight ``steps`` (sorted step indexes) in the view [x0, x1); none hides the item."""
        if len(steps) == 0:
            self.hide()
            return
        starts, ends = highlight_spans(self.index, steps, x0, x1, width_px)
        self.setOpts(x0=starts - origin, width=ends - starts, y0=np.zeros(len(starts)),
                     height=np.full(len(starts), self.lane_height))
        self.setPos(origin, 0)
        self.show()
