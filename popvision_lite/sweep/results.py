"""The sweep results table: one CSV row per point (decision: docs/decisions/0008-sweeps-on-dask.md).

``<folder>/sweep.csv`` holds, per point: its index and status (ok / failed) with the error, the grid
values and every resolved config field, fits, peak tile memory %, samples/s (and what it is based
on), cycles, step time, compute / exchange / sync / stream-copy shares of the BSP step time, the price
per chip-hour and the estimated cost per 1 M samples (empty with the reason when the device spec has
no price), the profile path (relative to the folder) and the config hash.
``<folder>/sweep.json`` records the grid and the base config.

``open_sweep(path)`` reads it back as a DataFrame (``pvl.open_sweep``); ``pareto_front`` marks the
points no other point beats on both throughput and cost.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from popvision_lite.errors import ConfigError, ProfileError

RESULTS = "sweep.csv"
META = "sweep.json"
LEAD = ["point", "status", "error"]
METRICS = ["fits", "chips", "peak_tile_memory_pct", "peak_tile", "samples_per_second", "samples_per_second_basis",
           "total_cycles", "step_seconds", "compute_share", "exchange_share", "sync_share",
           "stream_copy_share", "host_share", "usd_per_chip_hour", "cost_per_1m_samples_usd", "cost_note"]
TAIL = ["profile", "config_hash", "key", "wall_seconds", "cpu_seconds", "host"]
REQUIRED = {"status", "config_hash", "profile", "samples_per_second", "fits"}


def columns(rows: list[dict], grid_names: list[str]) -> list[str]:
    """Lead columns, the grid fields, the other config fields (in first-seen order), metrics, tail."""
    seen: list[str] = []
    fixed = set(LEAD) | set(METRICS) | set(TAIL) | {"pid"}
    for r in rows:
        for k in r:
            if k not in fixed and k not in grid_names and k not in seen:
                seen.append(k)
    return LEAD + list(grid_names) + seen + METRICS + TAIL


def write_results(out_dir, rows: list[dict], grid_names: list[str]) -> Path:
    """Write ``sweep.csv`` atomically (rows in point order)."""
    from popvision_lite.atomic_io import atomic_text
    from popvision_lite.profile.csv_export import write_csv

    path = Path(out_dir) / RESULTS
    df = pd.DataFrame(rows)
    cols = columns(rows, grid_names)
    df = df.reindex(columns=cols)
    if len(df):
        df = df.sort_values("point", kind="stable")
    with atomic_text(path, newline="") as fh:
        write_csv(df, fh)  # formulas in grid values / error text neutralised, CR/LF fields quoted
    return path


def write_meta(out_dir, meta: dict) -> Path:
    from popvision_lite.atomic_io import atomic_text

    path = Path(out_dir) / META
    with atomic_text(path) as fh:
        json.dump(meta, fh, indent=1, default=str)
    return path


# whole-number columns of the table besides the run config's int fields: <NA> for a failed point
INT_COLUMNS = ("point", "chips", "peak_tile", "total_cycles")


def open_sweep(path) -> pd.DataFrame:
    """The results of a sweep as a DataFrame, one row per point (the notebook form, ``pvl.open_sweep``).

    ``path`` is the results CSV or the sweep folder.  Whole numbers (``point``, ``chips``, ``total_cycles``,
    ``peak_tile`` and the run config's integer fields: ``batch``, ``ipus`` ...) are ``Int64``, yes / no fields
    (``fits``, ``recompute`` ...) ``boolean``, other numbers ``float64``; a failed point has ``<NA>`` in each.
    ``profile`` holds absolute paths (empty for failed points); ``df.attrs`` has ``path``, ``folder`` and, when
    ``sweep.json`` is there, ``grid`` ({field: [values]}) and ``base``.  Index: row numbers.  Raises
    ProfileError naming the file when it is not a sweep table."""
    return typed(read_results(path))


def typed(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` (:func:`read_results`) with its whole-number and yes / no columns in nullable dtypes."""
    from popvision_lite.emulator.run_config import FIELDS

    out = df.copy()
    ints = [c for c in INT_COLUMNS if c in out] + [c for c, f in FIELDS.items() if f.kind == "int" and c in out]
    for col in ints:
        num = pd.to_numeric(out[col], errors="coerce")
        v = num.to_numpy(np.float64)
        ok = np.isfinite(v)
        if (ok | out[col].isna().to_numpy()).all() and (v[ok] == np.round(v[ok])).all() \
                and (np.abs(v[ok]) < 2.0**63).all():
            out[col] = num.astype("Int64")
    for col in [c for c, f in FIELDS.items() if f.kind == "bool" and c in out]:
        vals = out[col].map({True: True, False: False, "True": True, "False": False})
        if (vals.notna() | out[col].isin(["", None]) | out[col].isna()).all():
            out[col] = vals.astype("boolean")
    return out


def read_results(path) -> pd.DataFrame:
    """The results of a sweep as the views read them: numbers as float64 (NaN for a failed point), text as
    text, ``fits`` and ``timing_only`` as nullable booleans; see :func:`open_sweep` for the rest."""
    p = Path(path)
    in_folder = p.is_dir()  # the folder is the trust boundary: its sweep.csv is not followed out of it
    if in_folder:
        p = p / RESULTS
    if not p.exists() and not p.is_symlink():
        raise ProfileError(p, "no such sweep results file (popvision-lite sweep writes <folder>/sweep.csv)")
    import io

    from popvision_lite import input_files

    # a regular file within the CSV limit (a FIFO named sweep.csv would block the reader for ever)
    data = input_files.read_bytes(p, "csv", "sweep results file", error=lambda problem: ProfileError(p, problem),
                                  follow_links=not in_folder)
    try:
        df = pd.read_csv(io.BytesIO(data), keep_default_na=True)
    except (OSError, UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as e:
        raise ProfileError(p, f"cannot read as a sweep results table: {e}") from None
    missing = REQUIRED - set(df.columns)
    if missing:
        raise ProfileError(p, f"not a sweep results table: column(s) {', '.join(sorted(missing))} missing")
    _check_numbers(df, p)
    folder = p.parent.resolve()
    if "error" in df:
        df["error"] = [v if isinstance(v, str) else "" for v in df["error"]]
    # a point's profile stays inside the sweep folder: an absolute or ../ path (or a symlink out) is dropped
    # and said in its error, so clicking the point never opens a file elsewhere
    inside = [_inside(folder, v) for v in df["profile"]]
    for i, (v, ok) in enumerate(zip(df["profile"], inside, strict=True)):
        if isinstance(v, str) and v and not ok:
            note = f"profile path {v[:120]!r} is outside the sweep folder; not opened"
            if "error" in df:
                df.at[i, "error"] = note if not df.at[i, "error"] else f"{df.at[i, 'error']}; {note}"
    df["profile"] = [str(folder / v) if ok else "" for v, ok in zip(df["profile"], inside, strict=True)]
    for col in ("fits", "timing_only"):  # nullable booleans: a failed point has <NA>, and df[df.fits] works
        if col in df:
            df[col] = df[col].map({True: True, False: False, "True": True, "False": False}).astype("boolean")
    for col in df.columns:  # a text column mixing strings with numbers or missing cells: make it all text
        if col not in ("fits", "timing_only") and (df[col].dtype == object or pd.api.types.is_string_dtype(df[col])):
            df[col] = pd.Series(["" if v is None or (isinstance(v, float) and np.isnan(v)) else v
                                 if isinstance(v, str) else str(v) for v in df[col].astype(object)],
                                index=df.index, dtype=object)
    df.attrs["path"] = str(p.resolve())
    df.attrs["folder"] = str(folder)
    meta = p.parent / META
    if meta.is_file() and not meta.is_symlink():
        try:
            data = input_files.read_bytes(meta, "sweep_meta", "sweep metadata", follow_links=False)
            m = input_files.parse_json(data, "sweep metadata", lambda problem: ConfigError(f"{meta}: {problem}"))
            df.attrs["grid"] = m.get("grid", {})
            df.attrs["base"] = m.get("base", {})
        except (ConfigError, AttributeError):  # the table is usable without it
            pass
    return df


NUMBER_COLUMNS = ("point", "chips", "peak_tile_memory_pct", "peak_tile", "samples_per_second", "total_cycles",
                  "step_seconds", "compute_share", "exchange_share", "sync_share", "stream_copy_share",
                  "host_share", "usd_per_chip_hour", "cost_per_1m_samples_usd")


MAX_ROW_KEYS = 512  # a row holds ~60 fields (config fields, metrics, tail)
MAX_ROW_TEXT = 4096  # characters of one text value (an error message is the longest, a few hundred)
MAX_ROW_LIST = 1024  # entries of a list-valued config field (layer_split: one per IPU)
MAX_ROW_NUMBER = 2.0 ** 63  # beyond any count, byte, cycle or price a row holds
ROW_NUMBERS = (*NUMBER_COLUMNS, "wall_seconds", "cpu_seconds", "pid")
ROW_FLAGS = ("fits", "timing_only")
ROW_STATUSES = ("ok", "failed", "cancelled")


def _scalar(x) -> bool:
    if isinstance(x, str):
        return len(x) <= 64
    if isinstance(x, float):
        return math.isfinite(x)
    return isinstance(x, bool | int) and abs(x) <= MAX_ROW_NUMBER


def _cell_problem(key: str, v) -> str | None:
    if v is None:
        return None
    if key in ROW_FLAGS:
        return None if isinstance(v, bool) else f"{key!r} is {str(v)[:40]!r}, not true or false"
    if key in ROW_NUMBERS:
        if isinstance(v, bool) or not isinstance(v, int | float):
            return f"{key!r} is {str(v)[:40]!r}, not a number"
        if isinstance(v, float) and math.isnan(v):  # a missing number (no price, no throughput)
            return None
        if not (isinstance(v, int) or math.isfinite(v)) or abs(v) > MAX_ROW_NUMBER:
            return f"{key!r} is {str(v)[:40]!r}, not a finite number below 2^63"
        return None
    if isinstance(v, str):
        return None if len(v) <= MAX_ROW_TEXT else f"{key!r} holds {len(v):,} characters (at most {MAX_ROW_TEXT:,})"
    if isinstance(v, bool | int | float):
        return None if _scalar(v) else f"{key!r} is {str(v)[:40]!r}, not a finite number below 2^63"
    if isinstance(v, list):
        if len(v) > MAX_ROW_LIST:
            return f"{key!r} lists {len(v):,} values (at most {MAX_ROW_LIST:,})"
        for x in v:
            items = x if isinstance(x, list) and len(x) <= 8 else [x]  # a pair per IPU, e.g. (attention, FFN)
            if not all(_scalar(y) for y in items):
                return f"{key!r} holds {str(x)[:40]!r}, not a config value"
        return None
    return f"{key!r} is a {type(v).__name__}, not a table cell"


def check_row(row) -> str | None:
    """The problem with a point's results row, or None when it is a valid row.  Every row goes through this
    before it reaches the table: a row a worker sends back and a ``rows/<key>.json`` read on resume (which
    may be anyone's file).  A row is a JSON object of at most MAX_ROW_KEYS text keys; the number columns hold
    finite numbers below 2^63 (or NaN / nothing: a missing value), the flags true or false, text at most
    MAX_ROW_TEXT characters, config values scalars or short lists of them; ``status`` is one of ROW_STATUSES."""
    if not isinstance(row, dict):
        return f"a row is a JSON object, not a {type(row).__name__}"
    if len(row) > MAX_ROW_KEYS:
        return f"{len(row):,} fields (at most {MAX_ROW_KEYS})"
    for k, v in row.items():
        if not isinstance(k, str) or not 0 < len(k) <= 64:
            return f"field name {str(k)[:40]!r} is not a name of at most 64 characters"
        problem = _cell_problem(k, v)
        if problem:
            return problem
    if row.get("status") not in ROW_STATUSES:
        return f"'status' is {str(row.get('status'))[:40]!r}, not one of {', '.join(ROW_STATUSES)}"
    return None


def _check_numbers(df: pd.DataFrame, p: Path) -> None:
    """Number columns hold finite numbers or nothing (a failed point); ProfileError naming the column and
    the CSV line otherwise, so no view meets text or infinity where it plots a number."""
    for col in NUMBER_COLUMNS:
        if col not in df:
            continue
        v = df[col]
        num = pd.to_numeric(v, errors="coerce").astype(float)
        bad = (num.isna() & v.notna() & (v.astype(str).str.strip() != "")) | np.isinf(num.to_numpy())
        if bad.any():
            i = int(np.flatnonzero(bad.to_numpy())[0])
            raise ProfileError(p, f"column {col!r}, line {i + 2}: {str(v.iloc[i])[:40]!r} is not a finite number")
        df[col] = num


def _inside(folder: Path, rel) -> bool:
    if not isinstance(rel, str) or not rel or "\0" in rel:
        return False
    try:
        return (folder / rel).resolve().is_relative_to(folder)
    except (OSError, ValueError, RuntimeError):
        return False


def grid_names(df: pd.DataFrame) -> list[str]:
    """The fields the sweep varied: from sweep.json, else the config columns with more than one value."""
    grid = df.attrs.get("grid")
    if grid:
        return [k for k in grid if k in df.columns]
    fixed = set(LEAD) | set(METRICS) | set(TAIL) | {"pid"}
    return [c for c in df.columns if c not in fixed and df[c].nunique(dropna=True) > 1]


def pareto_front(throughput, cost) -> np.ndarray:
    """Boolean mask of the points on the Pareto front: no other point has higher-or-equal throughput and
    lower-or-equal cost with at least one strictly better.  NaN / non-positive entries are never on it."""
    x = np.asarray(throughput, dtype=float)
    y = np.asarray(cost, dtype=float)
    ok = np.isfinite(x) & np.isfinite(y) & (x > 0)
    front = np.zeros(len(x), dtype=bool)
    idx = np.flatnonzero(ok)
    # sort by throughput descending, then cost ascending: a point is on the front when its cost is below
    # every cost seen so far (those have at least its throughput)
    order = idx[np.lexsort((y[idx], -x[idx]))]
    best = np.inf
    for i in order:
        if y[i] < best:
            front[i] = True
            best = y[i]
    return front
