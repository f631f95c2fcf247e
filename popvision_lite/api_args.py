"""Checks of the Python API's arguments where a notebook calls in (``pvl.open``, ``pvl.insights``, ``plot.roofline``,
``Profile.step_tiles.window`` ...): a wrong type is a ``TypeError``, a wrong value a ``ValueError``, each naming the
argument and what it takes, before the work starts.  Without them a string of GPU names was iterated letter by
letter ("unknown device 'a'"), a ``slice`` of tiles reached numpy as a raw TypeError and an int given as a profile
failed deep inside with an AttributeError.

The command line checks its options with ``value_checks`` (ConfigError, exit 2); these are the notebook's.  Each
error is both: ``errors.ArgumentTypeError`` is a TypeError and a ConfigError, ``errors.ArgumentValueError`` a
ValueError and a ConfigError, so code that caught the package's ConfigError still does.
"""

from __future__ import annotations

import numbers
import os

import numpy as np

from popvision_lite.errors import ArgumentTypeError, ArgumentValueError


def _what(value) -> str:
    return f"{type(value).__name__} {value!r}"[:80]


def is_path(value) -> bool:
    """A file name: ``str``, ``bytes`` or an ``os.PathLike``."""
    return isinstance(value, str | bytes) or isinstance(value, os.PathLike)


def path(value, name: str):
    """``value`` when it is a file name; else TypeError naming ``name``."""
    if not is_path(value):
        raise ArgumentTypeError(f"{name} must be a file path (str or os.PathLike), got {_what(value)}")
    if not os.fspath(value):
        raise ArgumentValueError(f"{name} must not be empty")
    return value


def profile(value, name: str = "profile") -> bool:
    """True when ``value`` is a file name to open, False when it is an open profile (anything with the tables
    and the target: ``pvl.open``'s Profile, a ``ProfileData``); TypeError naming ``name`` otherwise."""
    if is_path(value):
        path(value, name)
        return True
    if hasattr(value, "target") and (hasattr(value, "stored_table") or hasattr(value, "ops")):
        return False
    raise ArgumentTypeError(f"{name} must be a profile path or an open profile (pvl.open(path)), got {_what(value)}")


def text(value, name: str, choices=None, none_ok: bool = False):
    """``value`` when it is a str (one of ``choices`` when given); TypeError / ValueError naming ``name``."""
    if value is None and none_ok:
        return None
    if not isinstance(value, str):
        raise ArgumentTypeError(f"{name} must be text{' or None' if none_ok else ''}, got {_what(value)}")
    if choices is not None and value not in choices:
        raise ArgumentValueError(f"{name} must be one of {', '.join(map(str, choices))}; got {value!r}")
    return value


def whole(value, name: str, lo: int | None = None, hi: int | None = None, none_ok: bool = False) -> int | None:
    """``value`` as an int when it is a whole number (an int, a numpy integer, or a float such as 1e6 with no
    fraction) within ``lo..hi``; bool is not a number here.  TypeError / ValueError naming ``name``."""
    if value is None and none_ok:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ArgumentTypeError(f"{name} must be a whole number{' or None' if none_ok else ''}, got {_what(value)}")
    if isinstance(value, numbers.Integral):
        v = int(value)
    else:
        f = float(value)
        if not np.isfinite(f) or f != int(f):
            raise ArgumentValueError(f"{name} must be a whole number, got {value!r}")
        v = int(f)
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        rng = f">= {lo}" if hi is None else f"in {lo} .. {hi}" if lo is not None else f"<= {hi}"
        raise ArgumentValueError(f"{name} must be a whole number {rng}, got {v}")
    return v


def tile_ids(value, n_tiles: int, name: str = "tiles") -> np.ndarray | None:
    """Global tile ids as an int64 array: None (all tiles: None), a ``slice`` or ``range`` of tiles, one int,
    or an array-like of whole numbers (a boolean mask of ``n_tiles`` entries picks those tiles); each within
    ``0 .. n_tiles - 1``.  TypeError / ValueError naming ``name``."""
    if value is None:
        return None
    if isinstance(value, slice):
        for part in ("start", "stop", "step"):
            v = getattr(value, part)
            if v is not None:
                whole(v, f"{name}.{part}")
        return np.arange(n_tiles, dtype=np.int64)[value]
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        value = [int(value)]
    if isinstance(value, str | bytes | dict) or not hasattr(value, "__len__") and not hasattr(value, "__iter__"):
        raise ArgumentTypeError(f"{name} must be tile ids (ints, a range, a slice or a boolean mask), got {_what(value)}")
    arr = np.asarray(list(value) if not hasattr(value, "__array__") and not isinstance(value, list | tuple)
                     else value)
    if arr.dtype == bool:
        if arr.shape != (n_tiles,):
            raise ArgumentValueError(f"{name}: a boolean mask must have one entry per tile ({n_tiles}), got shape {arr.shape}")
        return np.flatnonzero(arr).astype(np.int64)
    if arr.ndim != 1 and arr.size:
        raise ArgumentValueError(f"{name} must be a flat list of tile ids, got shape {arr.shape}")
    arr = arr.reshape(-1)
    if arr.size and arr.dtype.kind not in "iu":
        if arr.dtype.kind != "f" or not np.isfinite(arr).all() or (arr != np.round(arr)).any():
            raise ArgumentTypeError(f"{name} must be whole tile ids, got {arr.dtype} values such as {arr.flat[0]!r}")
    ids = arr.astype(np.int64)
    if ids.size and (ids.min() < 0 or ids.max() >= n_tiles):
        bad = int(ids[(ids < 0) | (ids >= n_tiles)][0])
        raise ArgumentValueError(f"{name}: tile {bad} is out of range 0 .. {n_tiles - 1}")
    return ids


def step_bound(value, name: str) -> int | None:
    """A bound of a window of steps (or liveness steps): None or a whole number, clipped to the run by the
    reader; TypeError naming ``name``."""
    return whole(value, name, none_ok=True)
