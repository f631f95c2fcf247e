"""``StepCyclesItem``: the Execution view's cycles per step (per bucket when zoomed out) stacked by kind, drawn
from one :class:`~popvision_lite.analysis.execution.StepBins`; ``set_bins`` returns the top of the y range,
which the view gives its plot.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF

from popvision_lite.analysis import execution as ex
from popvision_lite.gui.theme import STEP_KIND_COLORS, STEP_KIND_LABELS
from popvision_lite.profile.schema import STEP_KINDS

# bottom to top of the stacked bars
STACK_ORDER = ("compute", "exchange_internal", "exchange_global", "stream_copy", "sync")


class StepCyclesItem(pg.GraphicsObject):
    """Cycles per step (or mean per step of each bucket) stacked by kind, one ``BarGraphItem`` per kind."""

    def __init__(self):
        super().__init__()
        self.bars = [pg.BarGraphItem(x0=[], width=[], y0=[], height=[], brush=pg.mkBrush(STEP_KIND_COLORS[k]),
                                     pen=pg.mkPen(None), name=STEP_KIND_LABELS[k]) for k in STEP_KINDS]
        for b in self.bars:
            b.setParentItem(self)

    def boundingRect(self) -> QRectF:  # noqa: N802 - Qt's name
        return self.childrenBoundingRect()

    def paint(self, painter, option, widget=None) -> None:
        """Nothing of its own: the bars are child items."""

    def set_bins(self, b: ex.StepBins, origin: float) -> float:
        """Draw ``b``; the y range top that shows the tallest stack whole, with its top edge."""
        base = np.zeros(len(b.left))
        for k in (STEP_KINDS.index(k) for k in STACK_ORDER):
            hgt = b.per_step_cycles[k]
            self.bars[k].setOpts(x0=b.left - origin, width=b.right - b.left, y0=base.copy(), height=hgt)
            self.bars[k].setPos(origin, 0)
            base = base + hgt
        top = float(np.nanmax(base)) if len(base) else 1.0
        return max(top, 1.0) * 1.1
