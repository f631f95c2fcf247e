"""CSV exports of profile tables (written atomically).

``export_csv(profile, table, path)`` writes a table in its notebook form (``profile.table(name)``,
``profile/public.py``: snake_case names with units, an empty cell for none), its index (the id column: ``step``,
``op_id``, ``tile`` ...) as the first column, where ``table`` is one of:

* ``memory_by_tile`` - ``profile.memory.by_tile()`` plus ``ipu`` and ``tile_in_ipu``;
* ``ops`` - the ops table (FLOPs, bytes per memory level, cycles split) plus ``seconds``
  (cycles / clock) and ``arithmetic_intensity`` (FLOPs per SRAM byte);
* ``steps`` - ``profile.steps`` (with ``kind_name``, ``cycles``, ``seconds``, ``runs``, ``ipu_cycles``) plus
  ``op_name``;
* any other name of ``schema.TABLES`` as ``profile.table(name)`` returns it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from popvision_lite.atomic_io import atomic_text
from popvision_lite.errors import ConfigError
from popvision_lite.profile import schema

CSV_TABLES: tuple[str, ...] = schema.TABLES


def table_frame(profile, table: str) -> pd.DataFrame:
    """The DataFrame ``export_csv`` writes for ``table`` (any of ``schema.TABLES``): what
    ``profile.table(table)`` returns, its index as the first column, plus the columns a spreadsheet cannot derive
    from other tables."""
    if not isinstance(table, str) or table not in schema.TABLES:
        raise ConfigError(f"unknown CSV table '{table}'; choose one of {', '.join(CSV_TABLES)}")
    df = pd.DataFrame(profile.table(table))
    if table == "memory_by_tile":
        tiles = profile.stored_table("tiles")
        df.insert(0, "tile_in_ipu", tiles["tile_in_ipu"].to_numpy())
        df.insert(0, "ipu", tiles["ipu"].to_numpy())
    elif table == "ops":
        df["seconds"] = df["cycles"] / float(profile.target.clock_hz)
        with np.errstate(divide="ignore", invalid="ignore"):
            ai = df["flops"].to_numpy(np.float64) / df["bytes_sram"].to_numpy(np.float64)
        df["arithmetic_intensity"] = np.where(np.isfinite(ai), ai, np.nan)
    elif table == "steps":
        ops = profile.stored_table("ops")
        names = ops["name"].astype(str).to_numpy()
        op = profile.stored_table("steps")["op_id"].to_numpy(np.int64)
        op_name = pd.array(np.where(op >= 0, names[op.clip(0, max(len(names) - 1, 0))] if len(names) else "", ""),
                           dtype="string")
        op_name[op < 0] = pd.NA
        df.insert(df.columns.get_loc("op_id") + 1, "op_name", op_name)
    return df.reset_index() if df.index.name is not None else df


FORMULA_CHARS = ("=", "+", "-", "@")
CONTROL_START = ("\t", "\r", "\n")


def formula_like(text: str) -> bool:
    """True for text a spreadsheet could run as a formula (OWASP "CSV injection"): after any leading
    whitespace it starts with =, +, - or @, or it starts (after spaces) with a tab, CR or LF."""
    return text.lstrip(" ").startswith(CONTROL_START) or text.lstrip().startswith(FORMULA_CHARS)


def neutralise_formulas(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with every text cell that :func:`formula_like` flags prefixed with a single quote.  Text
    comes from profiles, traces and sweep grids, which are shared files: an op named ``=HYPERLINK(...)``
    or ``\r=cmd|...`` must stay text.  Numbers are left alone; so are the column names, which are
    neutralised the same way when they are text."""
    out = None
    for col in df.columns:
        if df[col].dtype != object and not pd.api.types.is_string_dtype(df[col].dtype):
            continue
        v = df[col]
        bad = v.map(lambda x: isinstance(x, str) and formula_like(x))
        if bad.any():
            if out is None:
                out = df.copy()
            out[col] = v.astype(object).where(~bad, "'" + v.astype(str))
    if any(isinstance(c, str) and formula_like(c) for c in df.columns):
        out = (df if out is None else out).rename(
            columns=lambda c: "'" + c if isinstance(c, str) and formula_like(c) else c)
    return df if out is None else out


def write_csv(df: pd.DataFrame, fh) -> None:
    """The one CSV writer of every export and of ``sweep.csv``: formulas neutralised, and every field
    that holds a CR or LF quoted, so no cell can start a record of its own.  Python's csv module quotes
    a field only for the characters of its line terminator, so a table with a CR anywhere in its text is
    written with CRLF line ends (RFC 4180's own), every other table with LF."""
    df = neutralise_formulas(df)
    has_cr = any("\r" in c for c in df.columns if isinstance(c, str)) or any(
        df[c].map(lambda x: isinstance(x, str) and "\r" in x).any()
        for c in df.columns if df[c].dtype == object or pd.api.types.is_string_dtype(df[c].dtype))
    df.to_csv(fh, index=False, lineterminator="\r\n" if has_cr else "\n")


def whole_numbers_whole(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with the whole values of float columns written as integers ("960", not "960.0"): a float
    column that mixes counts and seconds (the compare headline) or holds a mean that happens to be whole
    reads as the numbers people expect; other values keep their shortest round-trip form."""
    out = None
    for col in df.columns:
        if df[col].dtype.kind != "f":
            continue
        arr = df[col].to_numpy(np.float64)
        whole = np.isfinite(arr) & (np.abs(arr) < 2.0**53)
        whole[whole] = arr[whole] == np.round(arr[whole])
        if not whole.any():
            continue
        if out is None:
            out = df.copy()
        obj = arr.astype(object)
        obj[whole] = arr[whole].astype(np.int64)
        obj[np.isnan(arr)] = None
        out[col] = pd.Series(obj, index=df.index, dtype=object)
    return df if out is None else out


def write_frame_csv(df: pd.DataFrame, path) -> int:
    """CSV of ``df`` at ``path`` (atomic, formulas neutralised, whole numbers whole); returns the row count."""
    with atomic_text(path, newline="") as fh:
        write_csv(whole_numbers_whole(df), fh)
    return len(df)


def export_csv(profile, table: str, path) -> int:
    """Write ``table`` of ``profile`` as CSV to ``path`` atomically; returns the number of rows."""
    return write_frame_csv(table_frame(profile, table), path)
