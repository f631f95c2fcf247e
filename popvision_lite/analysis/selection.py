"""Resolve what a selection means, as pure functions over a profile (no Qt).

A selection names an op, a program node or a step range; views need to know which
BSP steps and which tiles that covers:

* an op        -> the steps it owns (``steps.op_id == op``) and the tiles that took part in
                  them (busy cycles or bytes moved > 0 in those steps, plus the tiles that
                  run its vertices);
* a program    -> ``[first, last + 1)`` over the node and all its descendants, and the exact
                  steps issued by the leaves below it;
* a step range -> the ops that own steps inside it.

``profile`` is anything with the reader's tables (``steps``, ``ops``, ``programs``,
``compute_sets``, ``vertices``) and ``step_tiles.window``; see docs/architecture.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from popvision_lite.profile.schema import stored_table

# bound on the step x tile cells read at once when resolving an op's tiles
_WINDOW_CELLS = 8_000_000


@dataclass(frozen=True)
class Resolved:
    """What a selection covers: exact steps, their enclosing [start, stop) range and tiles."""

    steps: np.ndarray                      # sorted int64 BSP step ids
    step_range: tuple[int, int] | None     # [first, last + 1) or None when no step
    tiles: np.ndarray                      # sorted int64 global tile ids


def _runs(sorted_ids: np.ndarray) -> list[tuple[int, int]]:
    """Contiguous [start, stop) runs of a sorted array of unique ints."""
    if len(sorted_ids) == 0:
        return []
    breaks = np.flatnonzero(np.diff(sorted_ids) != 1) + 1
    starts = np.concatenate([[0], breaks])
    stops = np.concatenate([breaks, [len(sorted_ids)]])
    return [(int(sorted_ids[a]), int(sorted_ids[b - 1]) + 1) for a, b in zip(starts, stops, strict=True)]


def step_range_of(steps: np.ndarray) -> tuple[int, int] | None:
    """[first, last + 1) of some steps, None if there are none."""
    if len(steps) == 0:
        return None
    return int(np.min(steps)), int(np.max(steps)) + 1


# ---------------------------------------------------------------- ops

def op_steps(profile, op_id: int) -> np.ndarray:
    """Sorted BSP steps owned by ``op_id``."""
    st = stored_table(profile, "steps")
    return np.sort(st["step"].to_numpy()[st["op_id"].to_numpy() == op_id]).astype(np.int64)


def tiles_active_in_steps(profile, steps: np.ndarray) -> np.ndarray:
    """Tiles with busy cycles or bytes in/out > 0 in any of ``steps`` (read window by window)."""
    n_tiles = int(profile.target.num_tiles)
    used = np.zeros(n_tiles, dtype=bool)
    chunk = max(1, _WINDOW_CELLS // max(n_tiles, 1))
    for start, stop in _runs(np.unique(np.asarray(steps, dtype=np.int64))):
        for a in range(start, stop, chunk):
            b = min(stop, a + chunk)
            w = profile.step_tiles.window(a, b)
            active = (np.asarray(w.cycles) > 0) | (np.asarray(w.bytes_in) > 0) | (np.asarray(w.bytes_out) > 0)
            used |= active.any(axis=0)
    return np.flatnonzero(used).astype(np.int64)


def op_vertex_tiles(profile, op_id: int) -> np.ndarray:
    """Tiles that hold vertices of the op's compute sets."""
    cs = stored_table(profile, "compute_sets")
    cs_ids = cs["cs_id"].to_numpy()[cs["op_id"].to_numpy() == op_id]
    if len(cs_ids) == 0:
        return np.zeros(0, dtype=np.int64)
    v = stored_table(profile, "vertices")
    return np.unique(v["tile"].to_numpy()[np.isin(v["cs_id"].to_numpy(), cs_ids)]).astype(np.int64)


def op_tiles(profile, op_id: int, steps: np.ndarray | None = None) -> np.ndarray:
    """Sorted global tiles the op used: active in its steps or running its vertices."""
    if steps is None:
        steps = op_steps(profile, op_id)
    return np.union1d(tiles_active_in_steps(profile, steps), op_vertex_tiles(profile, op_id)).astype(np.int64)


def resolve_op(profile, op_id: int) -> Resolved:
    steps = op_steps(profile, op_id)
    return Resolved(steps=steps, step_range=step_range_of(steps), tiles=op_tiles(profile, op_id, steps))


# ---------------------------------------------------------------- programs

def program_subtree(profile, prog_id: int) -> np.ndarray:
    """prog_id and all its descendants (programs table is parent-before-child)."""
    pr = stored_table(profile, "programs")
    ids = pr["prog_id"].to_numpy()
    parents = pr["parent_id"].to_numpy()
    if not (ids == prog_id).any():
        raise KeyError(f"program {prog_id} is not in the profile's programs table")
    # row-wise flag; spread down one generation per pass (depth passes, each vectorised)
    row_of = np.full(int(ids.max()) + 1, -1, dtype=np.int64)
    row_of[ids] = np.arange(len(ids))
    prow = np.where(parents >= 0, row_of[np.clip(parents, 0, None)], -1)
    has_parent = prow >= 0
    inside = ids == prog_id
    while True:
        grown = inside.copy()
        grown[has_parent] |= inside[prow[has_parent]]
        if (grown == inside).all():
            break
        inside = grown
    return np.sort(ids[inside]).astype(np.int64)


def program_step_range(profile, prog_id: int) -> tuple[int, int] | None:
    """[first, last + 1) over the node's own first/last_step and all its descendants'."""
    pr = stored_table(profile, "programs")
    sub = program_subtree(profile, prog_id)
    rows = pr[pr["prog_id"].isin(sub)]
    first = rows["first_step"].to_numpy()
    last = rows["last_step"].to_numpy()
    first = first[first >= 0]
    last = last[last >= 0]
    if len(first) == 0 or len(last) == 0:
        return None
    return int(first.min()), int(last.max()) + 1


def program_steps(profile, prog_id: int) -> np.ndarray:
    """Exact BSP steps issued by the node or its descendants (Repeat iterations included)."""
    sub = program_subtree(profile, prog_id)
    st = stored_table(profile, "steps")
    return np.sort(st["step"].to_numpy()[np.isin(st["prog_id"].to_numpy(), sub)]).astype(np.int64)


def resolve_program(profile, prog_id: int, with_tiles: bool = True) -> Resolved:
    steps = program_steps(profile, prog_id)
    rng = program_step_range(profile, prog_id) or step_range_of(steps)
    tiles = tiles_active_in_steps(profile, steps) if with_tiles else np.zeros(0, dtype=np.int64)
    return Resolved(steps=steps, step_range=rng, tiles=tiles)


# ---------------------------------------------------------------- steps

def ops_in_step_range(profile, start: int, stop: int) -> np.ndarray:
    """Sorted op ids owning at least one step in [start, stop)."""
    st = stored_table(profile, "steps")
    s = st["step"].to_numpy()
    ops = st["op_id"].to_numpy()[(s >= start) & (s < stop)]
    return np.unique(ops[ops >= 0]).astype(np.int64)


def program_for_op(profile, op_id: int) -> int | None:
    """The highest program node belonging to ``op_id`` (its parent belongs to another op)."""
    pr = stored_table(profile, "programs")
    ids = pr["prog_id"].to_numpy()
    ops = pr["op_id"].to_numpy()
    parents = pr["parent_id"].to_numpy()
    mine = np.flatnonzero(ops == op_id)
    if len(mine) == 0:
        return None
    op_of = np.full(int(ids.max()) + 1, -1, dtype=np.int64)
    op_of[ids] = ops
    for i in mine:  # table is parent-before-child, so the first top-level match wins
        p = parents[i]
        if p < 0 or op_of[p] != op_id:
            return int(ids[i])
    return int(ids[mine[0]])
