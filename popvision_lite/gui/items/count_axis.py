"""An axis whose tick labels are counts with decimal prefixes from :func:`popvision_lite.units.format_count`
('2.5 M', not pyqtgraph's '2.5e+06'), the same formatter as every other count on screen."""

from __future__ import annotations

import pyqtgraph as pg

from popvision_lite.units import format_count


class CountAxis(pg.AxisItem):
    def __init__(self, orientation: str = "left", **kw):
        super().__init__(orientation, **kw)
        self.enableAutoSIPrefix(False)

    def tickStrings(self, values, scale, spacing):
        return [format_count(v * scale) if v * scale != 0 else "0" for v in values]
