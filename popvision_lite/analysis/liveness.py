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
    # which rows and what they show, in numpy over the table's columns; one frame is built of the rows kept
    # (pandas' masks, maps and inserts per call were most of a call's CPU: 10 ms on a 2-layer BERT)
    vid_all = v["var_id"].to_numpy()
    rows = np.flatnonzero(~v["always_live"].to_numpy().astype(bool) & (v["first_lstep"].to_numpy() <= lstep)
                          & (v["last_lstep"].to_numpy() >= lstep))
    vid = vid_all[rows]
    first = v["first_lstep"].to_numpy()[rows]  # copies (fancy indexing): changed below, the table is not
    last = v["last_lstep"].to_numpy()[rows]
    intervals = np.ones(len(rows), np.int64)
    iv = _variable_intervals(profile)
    if len(iv) and len(rows):
        iv_var = iv["var_id"].to_numpy()
        iv_first, iv_last = iv["first_lstep"].to_numpy(), iv["last_lstep"].to_numpy()
        ids, counts = np.unique(iv_var, return_counts=True)
        several = np.isin(vid, ids)
        h = np.flatnonzero((iv_first <= lstep) & (iv_last >= lstep))  # the intervals holding the step
        here_ids, at = np.unique(iv_var[h], return_index=True)  # each variable's first of them, in table order
        h = h[at]
        inside = np.isin(vid, here_ids)
        j = h[np.searchsorted(here_ids, vid[inside])]
        first[inside] = iv_first[j]
        last[inside] = iv_last[j]
        intervals[several] = counts[np.searchsorted(ids, vid[several])]
        keep = ~several | inside
        rows, vid, first, last, intervals = rows[keep], vid[keep], first[keep], last[keep], intervals[keep]
    on_tile = None
    if tile is not None:
        vt = stored_table(profile, "variable_tiles")
        vt_var = vt["var_id"].to_numpy()
        on = np.flatnonzero(vt["tile"].to_numpy() == int(tile))
        on = on[np.isin(vt_var[on], vid)]
        ids = np.unique(vt_var[on])
        on_tile = np.zeros(len(ids), np.int64)
        np.add.at(on_tile, np.searchsorted(ids, vt_var[on]), vt["bytes"].to_numpy()[on].astype(np.int64))
        has = np.isin(vid, ids)
        rows, vid, first, last, intervals = rows[has], vid[has], first[has], last[has], intervals[has]
        on_tile = on_tile[np.searchsorted(ids, vid)]
    # largest first (on the tile when given), then by var_id: np.lexsort is stable, as sort_values of two keys
    order = np.lexsort((vid, -(on_tile if on_tile is not None else v["bytes"].to_numpy()[rows]).astype(np.int64)))
    cols = ["name", "kind", "dtype", "shape", "bytes", "first_lstep", "last_lstep", "op_id", "var_id"]
    out = v.iloc[rows[order], [v.columns.get_loc(c) for c in cols]].reset_index(drop=True)
    out["first_lstep"] = first[order]
    out["last_lstep"] = last[order]
    out.insert(7, "intervals", intervals[order])
    if on_tile is not None:
        out.insert(5, "bytes_on_tile", on_tile[order])
    return out


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
