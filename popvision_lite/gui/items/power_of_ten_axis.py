"""``PowerOfTenAxis``: a log-mode axis labelled with powers of ten only (``10⁻¹ 10⁰ 10¹``), where
pyqtgraph's own log axis mixes plain numbers and powers (``0.1, 1, 10¹``)."""

from __future__ import annotations

import math

import pyqtgraph as pg

_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def power_of_ten_label(log_value: float) -> str:
    """Tick label of log10 value ``log_value``: '10⁻¹', '10⁰', '10¹⁵', or '2·10³' between decades.

    pyqtgraph's log axis mixes plain numbers and powers ('0.1, 1, 10¹, 10²'); every label here has
    the same form."""
    e = math.floor(log_value + 1e-9)
    m = 10 ** (log_value - e)
    power = "10" + str(int(e)).translate(_SUPERSCRIPT)
    return power if abs(m - 1) < 1e-6 else f"{m:.2g}·{power}"


class PowerOfTenAxis(pg.AxisItem):
    """Log-mode axis labelled with powers of ten only."""

    def logTickStrings(self, values, scale, spacing):
        return [power_of_ten_label(float(v) + math.log10(scale)) for v in values]
