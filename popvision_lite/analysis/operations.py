"""The operations table: one row per model op with its cost, as a pandas DataFrame (pure)."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from popvision_lite.analysis.run_totals import STEP_PARTS, run_totals
from popvision_lite.profile.schema import stored_table

# (column in the returned frame, header shown by views); numeric unless noted
COLUMNS: tuple[tuple[str, str], ...] = (
    ("name", "op"),
    ("type", "type"),
    ("cycles", "cycles / step"),
    ("pct_run", "% of IPU time"),
    ("compute_cycles", "compute cyc"),
    ("exchange_cycles", "exchange cyc"),
    ("sync_cycles", "sync cyc"),
    ("stream_cycles", "stream cyc"),
    ("flops", "FLOPs"),
    ("bytes_sram", "SRAM B"),
    ("bytes_exchange", "exchange B"),
    ("bytes_ipu_link", "IPU-link B"),
    ("bytes_ddr", "DDR B"),
    ("tiles_used", "tiles"),
    ("plan", "plan"),
)
TEXT_COLUMNS = frozenset({"name", "type", "plan"})


def ops_table(profile) -> pd.DataFrame:
    """Ops with their cycles per training step (one replica; ``run_totals.op_cycles``), their split into
    compute / exchange / sync / stream, and ``pct_run`` = the op's share of the IPU time summed over the
    replica's IPUs x 100 (``run_totals.op_share``); index is op_id, ordered by op_id."""
    ops = stored_table(profile, "ops")
    df = pd.DataFrame({c: ops[c] for c, _ in COLUMNS if c in ops.columns and c != "pct_run"})
    df.index = pd.Index(ops["op_id"].to_numpy().astype(np.int64), name="op_id")
    rt = run_totals(profile)
    df["cycles"] = np.rint(rt.op_cycles).astype(np.int64)
    for i, part in enumerate(STEP_PARTS):
        df[f"{part}_cycles"] = np.rint(rt.op_part_cycles[:, i]).astype(np.int64)
    df["pct_run"] = rt.op_share * 100.0
    for c in TEXT_COLUMNS:
        df[c] = df[c].astype(str)
    return df[[c for c, _ in COLUMNS]].sort_index()


def name_mask(names, pattern: str, regex: bool = False) -> np.ndarray:
    """Case-insensitive match of ``pattern`` in each name (substring, or regex search).

    An invalid regex raises ``re.error``; views show it instead of filtering.
    """
    names = pd.Series(list(names), dtype=object).astype(str)
    if not pattern:
        return np.ones(len(names), dtype=bool)
    if regex:
        rx = re.compile(pattern, re.IGNORECASE)
        return names.map(lambda s: rx.search(s) is not None).to_numpy(dtype=bool)
    return names.str.lower().str.contains(pattern.lower(), regex=False).to_numpy(dtype=bool)


def filter_ops(df: pd.DataFrame, pattern: str, regex: bool = False) -> pd.DataFrame:
    return df[name_mask(df["name"], pattern, regex)]
