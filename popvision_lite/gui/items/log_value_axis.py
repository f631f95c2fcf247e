"""``LogValueAxis``: a log-mode axis labelled at 1, 2 and 5 x 10ⁿ in the quantity's own format
(``units.format_count`` for samples/s: '600 k', '1 M', '2 M'; ``units.format_usd`` for money: '$0.0002').

pyqtgraph's log axis labels every minor tick it has room for, in '%0.1g' with powers ('6·10⁵ 7·10⁵8·10⁵9·10⁵'
ran together before each decade) and switches to plain decimals from 1e-4 ('0.0001' next to '9·10⁻⁵').
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pyqtgraph as pg

LABELLED_MANTISSAS = (1, 2, 5)


class LogValueAxis(pg.AxisItem):
    """Log-mode axis whose ticks at 1, 2, 5 x 10ⁿ carry ``fmt(value)``; the other ticks are unlabelled."""

    def __init__(self, orientation: str, fmt: Callable[[float], str], **kwargs):
        super().__init__(orientation, **kwargs)
        self.fmt = fmt

    def logTickStrings(self, values, scale, spacing):  # noqa: N802 - pyqtgraph's name
        return [self.tick_label(float(v) + math.log10(scale)) for v in values]

    def tick_label(self, log_value: float) -> str:
        """The label of the tick at log10 value ``log_value`` ('' between the labelled mantissas)."""
        e = math.floor(log_value + 1e-9)
        m = 10 ** (log_value - e)
        if not any(abs(m - k) < 1e-6 * k for k in LABELLED_MANTISSAS):
            return ""
        return self.fmt(round(m) * 10.0**e)
