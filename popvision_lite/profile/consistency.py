"""Consistency of a profile's content, checked before any view or analysis sees it.

The reader checks the file's structure (``h5safety``) and each column's dtype and sign; this module checks
what the format promises *between* values (``docs/profile-format.md``):

* the target is a physically possible machine (:func:`check_target`, at open): tile and IPU counts,
  SRAM, clock and threads within the bounds of the bundled device spec the profile names (looked up by
  id only), or generic bounds for another device id;
* ids are unique and dense from 0 (``step``, ``op_id``, ``prog_id``, ``cs_id``, ``var_id``, ``lstep``);
* references point at rows that exist (an ``op_id`` below the ops count, a step below the steps count...);
* programs form a tree: every ``parent_id`` is -1 or an earlier program ("parent before child"), so
  there are no cycles and a path to the root is at most as long as the table;
* ``(var_id, tile)`` pairs of ``variable_tiles`` and ``(cs_id, codelet, tile)`` of ``vertices`` are unique;
* byte counts of one tile are at most 1 TiB (a variable's total at most that per tile);
* inclusive ranges (``first_step``..``last_step``, ``first_lstep``..``last_lstep``) are ordered;
* strings are at most :data:`MAX_STRING` characters (the views also clip them with :func:`clip`);
* the training step's phases (:func:`check_phases`) are at most ``phases.MAX_PHASES``, tile the step from cycle 0
  without gap or overlap, and end at the schedule's step within ``phases.STEP_TOLERANCE_RELATIVE`` and one
  cycle per phase;
* a variable's live intervals (:func:`check_intervals`) lie inside its own first..last liveness step.

:func:`check_table` runs once per table, when the reader first loads it (lazily), so every table is
checked before use.  A violation is a :class:`ProfileError` naming the file, the table, the column and
the first bad row.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from popvision_lite.profile.phases import MAX_PHASES, PHASE_KINDS, STEP_TOLERANCE_RELATIVE
from popvision_lite.profile.run_record import STEP_LIMIT
from popvision_lite.profile.schema import ID_COLUMNS, PARENT_COLUMNS, REFERENCES, STEP_KINDS

MAX_STRING = 4096  # characters in one stored name / plan / shape (today's longest is ~120)
DISPLAY_CHARS = 160  # what a view shows of one string before an ellipsis
MAX_IPUS = 1024  # largest IPU system built (IPU-POD1024 / Bow Pod1024)
# Bounds for a device id that is not a bundled spec (e.g. a future chip): generous, but physical.
GENERIC_BOUNDS = dict(tiles_per_ipu=16384, sram_bytes_per_tile=64 << 20, threads_per_tile=64,
                      clock_hz=(1e6, 1e10))

# rows that identify one thing (vertices are aggregated per compute set, codelet and tile)
UNIQUE = {"variable_tiles": (("var_id", "tile"),), "vertices": (("cs_id", "codelet", "tile"),)}
MAX_TILE_BYTES = 2 ** 40  # one tile's bytes above this (1 TiB) are corrupt, not an out-of-memory run
BYTE_LIMITS = {"variable_tiles": {"bytes": MAX_TILE_BYTES}, "variables": {"bytes": MAX_TILE_BYTES},
               "vertices": {"state_bytes": MAX_TILE_BYTES, "code_bytes": MAX_TILE_BYTES},
               "liveness_steps": {"max_tile_bytes": MAX_TILE_BYTES}}
RANGES = [("programs", "first_step", "last_step"), ("variables", "first_lstep", "last_lstep"),
          ("phases", "first_step", "last_step"), ("variable_intervals", "first_lstep", "last_lstep")]


def clip(text, limit: int = DISPLAY_CHARS) -> str:
    """``text`` shortened to ``limit`` characters for display (an ellipsis says it was cut)."""
    s = str(text)
    return s if len(s) <= limit else s[: max(0, limit - 1)] + "\u2026"


def _first(mask: np.ndarray) -> int:
    return int(np.flatnonzero(mask)[0])


def check_target(target, err) -> None:
    """Refuse a target no machine can be (16 x 2^20 tiles, a 1e300 Hz clock, 10^12-byte tiles)."""
    from popvision_lite import devices
    from popvision_lite.errors import PopvisionError

    bounds = dict(GENERIC_BOUNDS)
    basis = "any IPU"
    try:
        spec = devices.load_bundled_device(target.device)
    except PopvisionError:
        spec = None
    if spec is not None and spec.kind == "ipu":
        clk = float(spec.value("compute.clock_hz"))
        bounds = dict(tiles_per_ipu=int(spec.value("compute.tiles")),
                      sram_bytes_per_tile=int(spec.value("compute.sram_bytes_per_tile")),
                      threads_per_tile=int(spec.value("compute.threads_per_tile")),
                      clock_hz=(clk / 4, clk * 4))
        basis = f"device spec '{target.device}'"
    if target.num_ipus > MAX_IPUS:
        raise err(f"header field 'target.num_ipus' is {target.num_ipus}; the largest IPU system has {MAX_IPUS}")
    for key in ("tiles_per_ipu", "sram_bytes_per_tile", "threads_per_tile"):
        v = getattr(target, key)
        if v > bounds[key]:
            raise err(f"header field 'target.{key}' is {v}, above {bounds[key]} ({basis})")
    lo, hi = bounds["clock_hz"]
    if not (lo <= float(target.clock_hz) <= hi):
        raise err(f"header field 'target.clock_hz' is {target.clock_hz!r}, outside {lo:.3g}..{hi:.3g} Hz ({basis})")
    for key in ("device", "name"):
        v = getattr(target, key)
        if len(v) > MAX_STRING:
            raise err(f"header field 'target.{key}' is {len(v)} characters long (max {MAX_STRING})")


def check_table(name: str, df: pd.DataFrame, counts: dict[str, int], err, num_tiles: int = 1,
                codes: dict[str, np.ndarray] | None = None) -> None:
    """Every rule of the module doc that concerns table ``name``; ``counts`` = rows of every table.  ``codes``:
    for a text column, integer codes one-to-one with its texts (the stored dictionary codes, whose categories
    are distinct), which the uniqueness check factorizes instead of the texts (the same key, far cheaper)."""
    n = len(df)
    where = f"table '{name}'"
    idc = ID_COLUMNS.get(name)
    if idc is not None and n:
        v = df[idc].to_numpy()
        bad = v != np.arange(n, dtype=v.dtype)
        if bad.any():
            i = _first(bad)
            raise err(f"{where} column '{idc}' row {i}: id {int(v[i])}, expected {i} (ids are unique and "
                      f"dense from 0, in row order)")
    for (t, col), (ref, minus_one) in REFERENCES.items():
        if t != name or not n:
            continue
        v = df[col].to_numpy()
        hi = counts[ref]
        lo = -1 if minus_one else 0
        bad = (v < lo) | (v >= hi)
        if bad.any():
            i = _first(bad)
            raise err(f"{where} column '{col}' row {i}: {int(v[i])} is not a row of table '{ref}' "
                      f"({lo}..{hi - 1})")
    pcol = PARENT_COLUMNS.get(name)
    if pcol and n:
        parent = df[pcol].to_numpy()
        ids = np.arange(n)
        bad = (parent < -1) | (parent >= ids)
        if bad.any():
            i = _first(bad)
            raise err(f"{where} column '{pcol}' row {i}: parent {int(parent[i])} is not an earlier row "
                      f"(parents come before children; a cycle or a missing parent)")
    for t, a, b in RANGES:
        if t == name and n:
            va, vb = df[a].to_numpy(), df[b].to_numpy()
            bad = (va >= 0) & (vb >= 0) & (vb < va)
            if bad.any():
                i = _first(bad)
                raise err(f"{where} column '{b}' row {i}: {int(vb[i])} is before '{a}' {int(va[i])}")
    for cols in UNIQUE.get(name, ()):
        if n:
            # one int64 key per row (text columns by their dictionary code): far faster than
            # DataFrame.duplicated on strings (vertices can have 10^5..10^6 rows)
            key = np.zeros(n, dtype=np.int64)
            for c in cols:
                v = df[c].to_numpy()
                if v.dtype.kind in "iu":
                    k = v if v.dtype.kind == "i" else v.astype(np.int64)
                else:  # factorized in order of first appearance: the same for texts and codes one-to-one with them
                    k = pd.factorize((codes or {}).get(c, v))[0]
                # key * (max + 2) + k + 1, in place (int64 arithmetic, as before): no temporaries of n rows
                key *= int(k.max(initial=0)) + 2
                key += k
                key += 1
            # a key that only grows has no duplicate (the emulator writes its tables in key order): one pass
            # instead of a hash table of every row (variable_tiles holds millions on a deep pipeline)
            if n > 1 and bool((key[1:] > key[:-1]).all()):
                continue
            dup = pd.Series(key).duplicated().to_numpy()
            if dup.any():
                i = _first(dup)
                vals = ", ".join(f"{c}={clip(df[c].iat[i], 40)}" for c in cols)
                raise err(f"{where} columns {', '.join(repr(c) for c in cols)} row {i}: ({vals}) is listed twice")
    for col, limit in (BYTE_LIMITS.get(name) or {}).items():
        v = df[col].to_numpy()
        lim = limit * (num_tiles if col == "bytes" and name == "variables" else 1)
        bad = v > lim
        if n and bad.any():
            i = _first(bad)
            raise err(f"{where} column '{col}' row {i}: {int(v[i])} bytes is beyond any tile memory "
                      f"(max {lim})")
    # string lengths: checked on each column's dictionary (check_categories), before expansion
    if name == "phases" and n:
        for col, allowed in (("kind", PHASE_KINDS), ("time_kind", ("", *STEP_KINDS))):
            bad = ~df[col].astype(str).isin(allowed).to_numpy()
            if bad.any():
                i = _first(bad)
                raise err(f"{where} column '{col}' row {i}: {clip(df[col].iat[i], 40)!r} is not one of "
                          f"{', '.join(repr(a) for a in allowed)}")
        runs, stored, first = (df[c].to_numpy() for c in ("runs_per_step", "stored_runs", "first_step"))
        bad = (runs < 1) | ((first >= 0) & ((stored < 1) | (stored > runs)))
        if bad.any():
            i = _first(bad)
            raise err(f"{where} row {i}: runs_per_step {int(runs[i])} / stored_runs {int(stored[i])} are not "
                      "1 <= stored_runs <= runs_per_step")


def check_phases(df: pd.DataFrame, step_cycles: float | None, err) -> None:
    """The phases tile one training step: at most MAX_PHASES, the first starting at cycle 0, each starting where
    the runs of the one before end (no gap, no overlap: a gap gave a 708-hour step, overlaps a 220 % step), none
    past STEP_LIMIT, and - when the schedule says how long the step is (``step_cycles``) - the last ending
    there within one cycle per phase (host terms are rounded to whole cycles) plus STEP_TOLERANCE_RELATIVE."""
    n = len(df)
    where = "table 'phases'"
    if n > MAX_PHASES:
        raise err(f"{where} has {n:,} rows; a training step has at most {MAX_PHASES} phases")
    if not n:
        return
    start, cycles, runs = ([int(x) for x in df[c].to_numpy()] for c in ("start_cycle", "cycles", "runs_per_step"))
    t = 0
    for i in range(n):  # Python integers: products of bounded columns never wrap
        if start[i] != t:
            what = "a gap" if start[i] > t else "an overlap"
            raise err(f"{where} row {i}: starts at cycle {start[i]:,}, but the phases before end at {t:,} ({what}; "
                      "the phases tile the step, each starting where the runs of the one before end)")
        t = start[i] + cycles[i] * runs[i]
        if t > STEP_LIMIT:
            raise err(f"{where} row {i}: {cycles[i]:,} cycles x {runs[i]:,} runs end at cycle {t:,}, past "
                      f"{STEP_LIMIT:,} (beyond any training step)")
    if step_cycles is not None and step_cycles > 0:
        tol = n + STEP_TOLERANCE_RELATIVE * step_cycles
        if abs(t - step_cycles) > tol:
            raise err(f"{where}: the phases add up to {t:,} cycles, but the schedule's step is {step_cycles:,.0f} "
                      f"cycles (step_seconds x clock); they must agree within {tol:,.1f} cycles")


def check_intervals(iv: pd.DataFrame, variables: pd.DataFrame, err) -> None:
    """Each live interval of ``variable_intervals`` lies inside its variable's own ``first_lstep``..``last_lstep``
    (schema: "one with rows only inside them"); an always-live variable has none."""
    if not len(iv):
        return
    vid = iv["var_id"].to_numpy(np.int64)
    lo = variables["first_lstep"].to_numpy(np.int64)[vid]
    hi = variables["last_lstep"].to_numpy(np.int64)[vid]
    a, b = iv["first_lstep"].to_numpy(np.int64), iv["last_lstep"].to_numpy(np.int64)
    bad = (lo < 0) | (a < lo) | (b > hi)
    if bad.any():
        i = _first(bad)
        raise err(f"table 'variable_intervals' row {i}: interval {int(a[i])}..{int(b[i])} of variable {int(vid[i])} "
                  f"is outside its live range {int(lo[i])}..{int(hi[i])} (table 'variables')")


def check_categories(name: str, col: str, cats: np.ndarray, err) -> None:
    """A dictionary's strings are bounded before they are expanded into a column."""
    if len(cats):
        lengths = np.fromiter((len(c) for c in cats), dtype=np.int64, count=len(cats))
        if lengths.max() > MAX_STRING:
            i = _first(lengths > MAX_STRING)
            raise err(f"table '{name}' column '{col}' category {i}: text of {int(lengths[i])} characters "
                      f"(max {MAX_STRING})")


# dtype kind each stored numeric column must have ('i' int, 'f' float, 'b' bool, 'u' unsigned)
NUMERIC_KINDS = "iufb"

# Value checks on read (a file from another producer, or corrupted on disk, must not hand garbage to
# the views): id-like columns may be -1 ("none"), every other number is a count, size or cycle >= 0.
_MINUS_ONE_OK = frozenset({"op_id", "prog_id", "parent_id", "cs_id", "ipu", "first_step", "last_step",
                           "lstep", "first_lstep", "last_lstep", "max_tile", "ipu_compute", "ipu_sync",
                           "ipu_exchange_internal", "ipu_exchange_global", "ipu_stream_copy"})
_MAX_VALUE = 2 ** 53  # beyond this no count / byte / cycle number is plausible, and sums would overflow
_TILE_COLUMNS = {("vertices", "tile"), ("variable_tiles", "tile"), ("liveness_steps", "max_tile")}


def checked_numbers(name: str, col: str, vals: np.ndarray, want: str, target, err) -> np.ndarray:
    """A stored numeric column cast to its schema dtype ``want``, refusing values that cannot be right
    (``err(problem)`` builds the error; ``target`` bounds tile and IPU ids)."""
    where = f"table '{name}' column '{col}'"
    want_dt = np.dtype(want)
    if vals.size == 0:
        return vals.astype(want_dt)
    if want_dt.kind == "b":
        return vals.astype(want_dt)
    if vals.dtype.kind == "f":
        if not np.isfinite(vals).all():
            raise err(f"{where} has NaN or infinite values")
        if want_dt.kind != "f" and (vals != np.round(vals)).any():
            raise err(f"{where} has fractional values, expected {want}")
    lo = -1 if col in _MINUS_ONE_OK else 0
    vmin, vmax = vals.min(), vals.max()
    if vmin < lo:
        raise err(f"{where} has value {vmin}, below {lo}")
    hi = _MAX_VALUE
    if want_dt.kind in "iu":
        hi = min(hi, np.iinfo(want_dt).max)
    if (name, col) in _TILE_COLUMNS:
        hi = target.num_tiles - 1
    elif name == "steps" and col == "kind":
        hi = len(STEP_KINDS) - 1
    elif col == "ipu":
        hi = target.num_ipus - 1
    if vmax > hi:
        raise err(f"{where} has value {vmax}, above {hi}")
    return vals if vals.dtype == want_dt else vals.astype(want_dt)
