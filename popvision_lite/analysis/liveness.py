"""Not-always-live memory over liveness steps (pure numpy/pandas over a Profile, no Qt).

A liveness step (``lstep``) is one leaf program in compile-time order, as in Poplar's
liveness report.  A variable is live at ``lstep`` when ``first_lstep <= lstep <= last_lstep``
and it is not always live.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def liveness_curve(profile) -> pd.DataFrame:
    """One row per liveness step: lstep, name, max_tile_bytes, max_tile, total_bytes (not-always-live)."""
    ls = profile.liveness_steps
    return ls[["lstep", "name", "max_tile_bytes", "max_tile", "total_bytes"]].sort_values("lstep") \
        .reset_index(drop=True)


def tile_curve(profile, tile: int) -> np.ndarray:
    """(lsteps,) not-always-live bytes on one global tile at every liveness step."""
    a = profile.liveness.tile_bytes(tiles=[int(tile)])
    return np.asarray(a, dtype=np.int64).reshape(-1)


def live_variables(profile, lstep: int, tile: int | None = None) -> pd.DataFrame:
    """Not-always-live variables live at ``lstep``, largest first.

    Columns: name, kind, dtype, shape, bytes, first_lstep, last_lstep, op_id, var_id, and
    ``bytes_on_tile`` when ``tile`` is given (then only variables with bytes on that tile).
    """
    v = profile.variables
    live = v[(~v["always_live"].astype(bool)) & (v["first_lstep"] <= lstep) & (v["last_lstep"] >= lstep)]
    cols = ["name", "kind", "dtype", "shape", "bytes", "first_lstep", "last_lstep", "op_id", "var_id"]
    out = live[cols].copy()
    if tile is not None:
        vt = profile.variable_tiles
        on = vt[(vt["tile"] == int(tile)) & vt["var_id"].isin(out["var_id"])]
        per = on.groupby("var_id")["bytes"].sum()
        out = out[out["var_id"].isin(per.index)].copy()
        out.insert(5, "bytes_on_tile", out["var_id"].map(per).astype(np.int64))
        out = out.sort_values(["bytes_on_tile", "var_id"], ascending=[False, True])
    else:
        out = out.sort_values(["bytes", "var_id"], ascending=[False, True])
    return out.reset_index(drop=True)


def always_live_variables(profile) -> pd.DataFrame:
    v = profile.variables
    out = v[v["always_live"].astype(bool)][["name", "kind", "dtype", "shape", "bytes", "var_id"]]
    return out.sort_values(["bytes", "var_id"], ascending=[False, True]).reset_index(drop=True)


def peak_step(profile) -> int:
    """The liveness step with the most not-always-live bytes on the fullest tile (-1 when none)."""
    c = liveness_curve(profile)
    if len(c) == 0:
        return -1
    return int(c["lstep"].iloc[int(np.argmax(c["max_tile_bytes"].to_numpy()))])
