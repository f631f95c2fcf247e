"""popvision-lite: an open profiler and tile-level emulator for Graphcore-style IPUs.

Notebook use::

    import popvision_lite as pvl
    p = pvl.open("run.pvl")
    p.memory.by_tile()      # pandas DataFrame, one row per tile
    p.steps, p.ops, p.tiles
"""

from __future__ import annotations

__version__ = "0.1.0"

from popvision_lite.errors import (  # noqa: E402
    ConfigError,
    DeviceSpecError,
    EmulatorError,
    OutOfMemoryError,
    PopvisionError,
    ProfileError,
)


def open(path):  # noqa: A001 - mirrors builtins.open on purpose: pvl.open("run.pvl")
    """Open a profile lazily; see :class:`popvision_lite.profile.reader.Profile`."""
    from popvision_lite.profile.reader import open_profile

    return open_profile(path)


def open_sweep(path):
    """The results table of a ``popvision-lite sweep`` (its sweep.csv or folder) as a DataFrame;
    see :func:`popvision_lite.sweep.results.open_sweep`."""
    from popvision_lite.sweep.results import open_sweep as _open_sweep

    return _open_sweep(path)


__all__ = [
    "__version__",
    "open",
    "open_sweep",
    "PopvisionError",
    "ProfileError",
    "DeviceSpecError",
    "EmulatorError",
    "OutOfMemoryError",
    "ConfigError",
]
