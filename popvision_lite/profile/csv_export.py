"""CSV exports of profile tables (written atomically).

``export_csv(profile, table, path)`` where ``table`` is one of:

* ``memory_by_tile`` - one row per tile: tile, ipu, tile_in_ipu, bytes per memory category,
  always_live, not_always_live, total, capacity, over_capacity;
* ``ops`` - the ops table (FLOPs, bytes per memory level, cycles split) plus ``time_s``
  (cycles / clock) and ``arithmetic_intensity`` (FLOPs per SRAM byte);
* ``steps`` - the steps table plus ``kind_name``, ``op_name`` and ``duration_cycles``;
* any other table of ``schema.TABLE_COLUMNS`` as stored.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from popvision_lite.atomic_io import atomic_text
from popvision_lite.errors import ConfigError
from popvision_lite.profile import schema

EXTRA_TABLES = ("memory_by_tile",)
CSV_TABLES: tuple[str, ...] = EXTRA_TABLES + tuple(schema.TABLE_COLUMNS)


def table_frame(profile, table: str) -> pd.DataFrame:
    """The DataFrame ``export_csv`` writes for ``table``."""
    if table == "memory_by_tile":
        m = profile.memory.by_tile()
        tiles = profile.tiles.set_index("tile")
        df = m.copy()
        df.insert(0, "tile_in_ipu", tiles["tile_in_ipu"].to_numpy())
        df.insert(0, "ipu", tiles["ipu"].to_numpy())
        return df.reset_index()
    if table == "ops":
        df = profile.ops.copy()
        df["time_s"] = df["cycles"] / float(profile.target.clock_hz)
        with np.errstate(divide="ignore", invalid="ignore"):
            ai = df["flops"].to_numpy(np.float64) / df["bytes_sram"].to_numpy(np.float64)
        df["arithmetic_intensity"] = np.where(np.isfinite(ai), ai, np.nan)
        return df
    if table == "steps":
        df = profile.steps.copy()
        df.insert(2, "kind_name", [schema.STEP_KINDS[int(k)] for k in df["kind"]])
        names = dict(zip(profile.ops["op_id"], profile.ops["name"], strict=False))
        df.insert(4, "op_name", [names.get(int(o), "") for o in df["op_id"]])
        df["duration_cycles"] = df["end_cycle"] - df["start_cycle"]
        return df
    if table in schema.TABLE_COLUMNS:
        return profile.table(table)
    raise ConfigError(f"unknown CSV table '{table}'; choose one of {', '.join(CSV_TABLES)}")


FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def neutralise_formulas(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with every text cell that a spreadsheet would run as a formula (starting with =, +, -, @,
    tab or CR; OWASP "CSV injection") prefixed with a single quote.  Text comes from profiles, which are
    shared files: an op named ``=HYPERLINK(...)`` must stay text.  Numbers are left alone."""
    out = None
    for col in df.columns:
        if df[col].dtype != object and not pd.api.types.is_string_dtype(df[col].dtype):
            continue
        v = df[col]
        bad = v.map(lambda x: isinstance(x, str) and x.startswith(FORMULA_START))
        if bad.any():
            if out is None:
                out = df.copy()
            out[col] = v.astype(object).where(~bad, "'" + v.astype(str))
    return df if out is None else out


def write_frame_csv(df: pd.DataFrame, path) -> int:
    """CSV of ``df`` at ``path`` (atomic, formulas neutralised); returns the row count."""
    df = neutralise_formulas(df)
    with atomic_text(path, newline="") as fh:
        df.to_csv(fh, index=False, lineterminator="\n")
    return len(df)


def export_csv(profile, table: str, path) -> int:
    """Write ``table`` of ``profile`` as CSV to ``path`` atomically; returns the number of rows."""
    df = neutralise_formulas(table_frame(profile, table))
    with atomic_text(path, newline="") as fh:
        df.to_csv(fh, index=False, lineterminator="\n")
    return len(df)
