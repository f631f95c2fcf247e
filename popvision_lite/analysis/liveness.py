"""Not-always-live memory over liveness steps (pure numpy/pandas over a Profile, no Qt).

A liveness step (``lstep``) is one leaf program in compile-time order, as in Poplar's
liveness report.  A variable is live at ``lstep`` when ``first_lstep <= lstep <= last_lstep``
and it is not always live.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from popvision_lite.profile.schema import stored_table


def liveness_curve(profile) -> pd.DataFrame:
    """One row per liveness step: lstep, name, max_tile_bytes, max_tile, total_bytes (not-always-live)."""
    ls = stored_table(profile, "liveness_steps")
    return ls[["lstep", "name", "max_tile_bytes", "max_tile", "total_bytes"]].sort_values("lstep") \
        .reset_index(drop=True)


def ipu_spans(profile) -> pd.DataFrame:
    """Runs of consecutive liveness steps whose program ran on one IPU (a multi-IPU run's programs follow each
    other in compile order): one row per run with ``ipu``, ``first_lstep``, ``last_lstep``.  An lstep whose
    program issued no step of a single IPU belongs to the run before it.  One row (ipu -1) for single-IPU runs."""
    ls = stored_table(profile, "liveness_steps").sort_values("lstep")
    empty = pd.DataFrame({"ipu": pd.Series([], dtype=np.int64), "first_lstep": pd.Series([], dtype=np.int64),
                          "last_lstep": pd.Series([], dtype=np.int64)})
    if not len(ls):
        return empty
    lsteps = ls["lstep"].to_numpy(np.int64)
    if int(profile.target.num_ipus) <= 1:
        return pd.DataFrame({"ipu": [-1], "first_lstep": [int(lsteps[0])], "last_lstep": [int(lsteps[-1])]})
    progs = stored_table(profile, "programs").set_index("prog_id")
    first = progs["first_step"].reindex(ls["prog_id"].to_numpy()).to_numpy()
    steps = stored_table(profile, "steps")
    ipu_of_step = steps["ipu"].to_numpy(np.int64)
    ok = np.isfinite(first) & (first >= 0) & (first < len(ipu_of_step))
    ipu = np.full(len(ls), -1, dtype=np.int64)
    ipu[ok] = ipu_of_step[first[ok].astype(np.int64)]
    # carry the last known IPU forward over steps of no single IPU (global syncs, all-IPU programs)
    known = ipu >= 0
    if not known.any():
        return pd.DataFrame({"ipu": [-1], "first_lstep": [int(lsteps[0])], "last_lstep": [int(lsteps[-1])]})
    idx = np.where(known, np.arange(len(ipu)), 0)
    np.maximum.accumulate(idx, out=idx)
    ipu = np.where(known | (np.arange(len(ipu)) >= np.argmax(known)), ipu[idx], ipu[np.argmax(known)])
    start = np.r_[0, np.flatnonzero(np.diff(ipu)) + 1]
    end = np.r_[start[1:] - 1, len(ipu) - 1]
    return pd.DataFrame({"ipu": ipu[start], "first_lstep": lsteps[start], "last_lstep": lsteps[end]})


def tile_curve(profile, tile: int) -> np.ndarray:
    """(lsteps,) not-always-live bytes on one global tile at every liveness step."""
    a = profile.liveness.tile_bytes(tiles=[int(tile)])
    return np.asarray(a, dtype=np.int64).reshape(-1)


def live_variables(profile, lstep: int, tile: int | None = None) -> pd.DataFrame:
    """Not-always-live variables live at ``lstep``, largest first: the same variables whose bytes make the
    liveness curve at that step (a variable live in several intervals, ``variable_intervals``, only within
    one of them).

    Columns: name, kind, dtype, shape, bytes, first_lstep, last_lstep (the live interval that holds ``lstep``:
    for a variable live in several intervals, that one, not its whole span), intervals (how many live
    intervals the variable has; 1 for most), op_id, var_id, and ``bytes_on_tile`` when ``tile`` is given
    (then only variables with bytes on that tile).
    """
    v = stored_table(profile, "variables")
    live = v[(~v["always_live"].astype(bool)) & (v["first_lstep"] <= lstep) & (v["last_lstep"] >= lstep)]
    cols = ["name", "kind", "dtype", "shape", "bytes", "first_lstep", "last_lstep", "op_id", "var_id"]
    out = live[cols].copy()
    out.insert(7, "intervals", np.ones(len(out), np.int64))
    iv = _variable_intervals(profile)
    if len(iv):
        several = out["var_id"].isin(iv["var_id"].unique()).to_numpy()
        here = iv[(iv["first_lstep"] <= lstep) & (iv["last_lstep"] >= lstep)].drop_duplicates("var_id")
        here = here.set_index("var_id")
        vid = out["var_id"]
        inside = vid.isin(here.index).to_numpy()
        out.loc[inside, "first_lstep"] = vid[inside].map(here["first_lstep"]).to_numpy()
        out.loc[inside, "last_lstep"] = vid[inside].map(here["last_lstep"]).to_numpy()
        out.loc[several, "intervals"] = vid[several].map(iv.groupby("var_id").size()).to_numpy()
        out = out[~several | inside]
    if tile is not None:
        vt = stored_table(profile, "variable_tiles")
        on = vt[(vt["tile"] == int(tile)) & vt["var_id"].isin(out["var_id"])]
        per = on.groupby("var_id")["bytes"].sum()
        out = out[out["var_id"].isin(per.index)].copy()
        out.insert(5, "bytes_on_tile", out["var_id"].map(per).astype(np.int64))
        out = out.sort_values(["bytes_on_tile", "var_id"], ascending=[False, True])
    else:
        out = out.sort_values(["bytes", "var_id"], ascending=[False, True])
    return out.reset_index(drop=True)


def _variable_intervals(profile) -> pd.DataFrame:
    """The profile's variable_intervals table (empty for a profile object that has none)."""
    iv = stored_table(profile, "variable_intervals")
    return iv if iv is not None else pd.DataFrame(columns=["var_id", "first_lstep", "last_lstep"])


def always_live_variables(profile) -> pd.DataFrame:
    v = stored_table(profile, "variables")
    out = v[v["always_live"].astype(bool)][["name", "kind", "dtype", "shape", "bytes", "var_id"]]
    return out.sort_values(["bytes", "var_id"], ascending=[False, True]).reset_index(drop=True)


def peak_step(profile) -> int:
    """The liveness step with the most not-always-live bytes on the fullest tile (-1 when none)."""
    c = liveness_curve(profile)
    if len(c) == 0:
        return -1
    return int(c["lstep"].iloc[int(np.argmax(c["max_tile_bytes"].to_numpy()))])
