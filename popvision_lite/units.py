"""Human-readable quantities (bytes, seconds) shared by the CLI, the analysis layer and the views."""

from __future__ import annotations

import numpy as np


def format_bytes(n: float) -> str:
    """Human bytes with binary prefixes: 1536 -> '1.50 KiB'."""
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return f"{n:.2f} TiB"


def format_seconds(s: float) -> str:
    if not np.isfinite(s):
        return "?"
    for unit, f in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)):
        if abs(s) >= f or unit == "ns":
            return f"{s / f:.3g} {unit}"
    return f"{s} s"
