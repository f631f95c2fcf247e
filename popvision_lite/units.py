"""Human-readable quantities, one definition each, for the CLI, the analysis layer and the views.

Bytes use binary prefixes (KiB, like PopVision); times and rates three significant digits with the
prefix that keeps the number between 1 and 1000 (``160 µs``, ``1.25 ms``), the same on the command line,
in the app, in exports and in reports.
"""

from __future__ import annotations

import math

KIB = 1024.0
MIB = 1024.0**2
GIB = 1024.0**3


def _finite(v) -> bool:
    try:
        return v is not None and math.isfinite(float(v))
    except (TypeError, ValueError):
        return False


def format_bytes(n: float) -> str:
    """Human bytes with binary prefixes: 1536 -> '1.50 KiB'."""
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return f"{n:.2f} TiB"


def format_bytes_exact(n: float) -> str:
    """'1,234,567 B (1.18 MiB)': exact bytes plus a readable size (findings, tooltips)."""
    n = float(n)
    exact = f"{int(round(n)):,} B"
    return exact if abs(n) < 1024 else f"{exact} ({format_bytes(n)})"


TIME_UNITS = (("h", 3600.0), ("min", 60.0), ("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9))


def time_unit(s: float) -> tuple[str, float]:
    """The unit of :func:`format_seconds` that fits ``s`` seconds, and its size in seconds: an axis whose largest
    value is ``s`` reads in it (2.02 -> ('s', 1.0), 4.4e-4 -> ('µs', 1e-6)); ('s', 1.0) when not finite."""
    if not _finite(s):
        return "s", 1.0
    for unit, f in TIME_UNITS:
        if abs(s) >= f or unit == "ns":
            return unit, f
    return "s", 1.0


def format_seconds(s: float) -> str:
    """3 significant digits with the unit that fits: 0.00016 -> '160 µs', 1.25e-3 -> '1.25 ms', 90 -> '1.5 min',
    7200 -> '2 h'; '?' when not finite."""
    if not _finite(s):
        return "?"
    unit, f = time_unit(s)
    return f"{s / f:.3g} {unit}"


def _decimal(v: float, prefixed: tuple, unit: str) -> str:
    """3 significant digits with the largest decimal prefix ``v`` reaches (``prefixed``: (unit, scale),
    largest first), else ``unit``; 'n/a' when not finite."""
    if not _finite(v):
        return "n/a"
    for name, scale in prefixed:
        if abs(v) >= scale:
            return f"{v / scale:.3g} {name}"
    return f"{v:.3g} {unit}"


def format_flops(f: float) -> str:
    """A rate of floating-point operations: 2.5e14 -> '250 TFLOP/s'; 'n/a' when not finite."""
    return _decimal(f, (("PFLOP/s", 1e15), ("TFLOP/s", 1e12), ("GFLOP/s", 1e9), ("MFLOP/s", 1e6)), "FLOP/s")


def format_bandwidth(b: float) -> str:
    """Bytes per second, decimal prefixes as bandwidths are quoted: 1.9e14 -> '190 TB/s'."""
    return _decimal(b, (("TB/s", 1e12), ("GB/s", 1e9), ("MB/s", 1e6)), "B/s")


def format_count(n: float) -> str:
    """A count (cycles, steps) with a decimal prefix, 3 significant digits: 2.5e6 -> '2.5 M', 950 -> '950'."""
    return _decimal(n, (("G", 1e9), ("M", 1e6), ("k", 1e3)), "").strip()


def format_usd(c: float) -> str:
    """Dollars with at least 3 significant digits and never an exponent, so two prices side by side show
    their ratio: '$1,234', '$12.35', '$0.0123', '$0.0000981'; 'n/a' when not finite."""
    if not _finite(c):
        return "n/a"
    c = float(c)
    if c == 0:
        return "$0.00"
    sign, a = ("-" if c < 0 else ""), abs(c)
    if a >= 1000:
        return f"{sign}${a:,.0f}"
    decimals = max(2, 2 - math.floor(math.log10(a)))
    return f"{sign}${a:,.{decimals}f}"


def format_number(v: float) -> str:
    """A plain quantity (samples/s, counts) without an exponent: whole numbers with thousands separators from
    1,000 up ('600,300'), else 4 significant digits ('1,687', '12.35', '0.01234'); 'n/a' when not finite."""
    if not _finite(v):
        return "n/a"
    v = float(v)
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    if v == 0:
        return "0"
    decimals = max(0, 3 - math.floor(math.log10(abs(v))))
    return f"{v:,.{decimals}f}"


def format_ratio(v: float) -> str:
    """'2.50x'; 'n/a' when not finite."""
    return f"{v:.2f}x" if _finite(v) else "n/a"


def format_speedup(ipu_over_gpu: float) -> str:
    """'GPU 2.50x faster' / 'IPU 1.30x faster' from IPU time / GPU time."""
    r = ipu_over_gpu
    if not _finite(r) or r <= 0:
        return "n/a"
    return f"GPU {r:.2f}x faster" if r >= 1 else f"IPU {1 / r:.2f}x faster"


def format_percent(fraction: float, digits: int = 1) -> str:
    """0.1234 -> '12.3%'."""
    return f"{100 * fraction:.{digits}f}%" if _finite(fraction) else "n/a"


def format_change(ratio: float, digits: int = 1) -> str:
    """A ratio B / A as a signed change: 1.123 -> '+12.3%', 0.9 -> '-10.0%'; 'n/a' when not finite."""
    return f"{(ratio - 1) * 100:+.{digits}f}%" if _finite(ratio) else "n/a"


def format_hz(hz: float) -> str:
    """1.325e9 -> '1.325 GHz'."""
    return f"{hz / 1e9:.3f} GHz" if _finite(hz) else "n/a"


__all__ = ["GIB", "KIB", "MIB", "format_bandwidth", "format_bytes", "format_bytes_exact", "format_change",
           "format_count", "format_flops", "format_hz", "format_number", "format_percent", "format_ratio",
           "format_seconds", "format_speedup", "format_usd"]
