"""A pyqtgraph legend that can live in a plot's layout (under the plot, beside it) instead of over the data.

``pg.LegendItem.updateSize`` sets the legend's geometry from its entries' *current* widths; inside a layout the
entries are stretched to the cell, so each update made the legend wider than the last and pushed the plot past
its window.  This one takes its size from its grid's size hint and keeps it fixed (minimum = maximum = hint),
and :meth:`fit_columns` picks as many columns as fit a given width.
"""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import QSizeF, Qt


class FittedLegend(pg.LegendItem):
    def __init__(self, **kw):
        kw.setdefault("frame", False)
        kw.setdefault("offset", None)
        super().__init__(**kw)

    def updateSize(self):
        lay = self.layout
        lay.invalidate()
        hint = lay.effectiveSizeHint(Qt.PreferredSize)
        size = QSizeF(hint.width(), max(hint.height(), 1.0))
        self.setMinimumSize(size)
        self.setMaximumSize(size)
        self.resize(size)
        self.updateGeometry()

    def fit_columns(self, width: float, most: int = 3) -> None:
        """The most columns (up to ``most``) whose legend is no wider than ``width`` pixels (at least one)."""
        for n in range(most, 0, -1):
            if self.columnCount != n:
                self.setColumnCount(n)
            self.updateSize()
            if n == 1 or self.minimumWidth() <= width:
                return
