"""Liveness: which tensors each leaf program reads and writes, the steps over which each tensor is
live, and the per-tile bytes of not-always-live tensors at every liveness step."""

from __future__ import annotations

import numpy as np

from popvision_lite.emulator import programs as P
from popvision_lite.emulator.compile.compiled import Compiled, ProgInfo
from popvision_lite.profile.schema import CATEGORY_CODE


def accesses(c: Compiled, info: ProgInfo) -> tuple[set, set]:
    """(read tensor ids, written tensor ids) of a leaf program."""
    p = info.prog
    reads, writes = set(), set()
    if isinstance(p, P.Execute):
        for g in p.cs.groups:
            for fname, f in g.fields.items():
                d = g.codelet.fields[fname]
                if d in ("in", "inout"):
                    reads.add(f.tensor.id)
                if d in ("out", "inout"):
                    writes.add(f.tensor.id)
    elif isinstance(p, P.Copy):
        reads.add(p.src.tensor.id)
        writes.add(p.dst.tensor.id)
    elif isinstance(p, P.StreamCopy):
        (writes if p.to_device else reads).add(p.view.tensor.id)
    return reads, writes


def compute_liveness(c: Compiled) -> None:
    g = c.graph
    L = len(c.leaves)
    nT = len(g.tensors)
    first_w = np.full(nT, -1, np.int64)
    first_r = np.full(nT, -1, np.int64)
    last_acc = np.full(nT, -1, np.int64)
    last_r = np.full(nT, -1, np.int64)
    reads_at: list[set] = []
    seen_prog: set = set()
    rewrites: dict[int, list[int]] = {}  # tensor -> liveness steps where a re-run program writes it again
    read_steps: dict[int, list[int]] = {}
    for ls, pid in enumerate(c.leaves):
        r, w = accesses(c, c.progs[pid])
        reads_at.append(r)
        again = id(c.progs[pid].prog) in seen_prog
        seen_prog.add(id(c.progs[pid].prog))
        if again:
            for t in w - r:
                rewrites.setdefault(t, []).append(ls)
        for t in r:
            read_steps.setdefault(t, []).append(ls)
        for t in r:
            if first_r[t] < 0:
                first_r[t] = ls
            last_r[t] = ls
            last_acc[t] = ls
        for t in w:
            if first_w[t] < 0:
                first_w[t] = ls
            last_acc[t] = ls
    for ls, ids in c.call_writes:  # a call's arguments are written as it starts
        for t in ids:
            rewrites.setdefault(t, []).append(ls)
    c.last_access = last_acc  # each tensor's last liveness step of any program (-1: none reads or writes it)
    c.first_lstep = np.full(nT, -1, np.int64)
    c.last_lstep = np.full(nT, max(L - 1, 0), np.int64)
    c.always_live = np.ones(nT, bool)
    for t in g.tensors:
        i = t.id
        if t.kind == "constant" or first_w[i] < 0:
            continue  # constants, inputs/weights the host sets, unused tensors: always live
        if first_r[i] >= 0 and first_r[i] <= first_w[i]:
            continue  # read before (or as) it is first written: carries a value in, always live
        w = int(first_w[i])
        r = int(last_r[i]) if last_r[i] > w else L - 1  # never read after: the host reads it at the end
        r = max(r, int(last_acc[i]))
        for a, b in c.repeat_ranges:
            if w < a <= r <= b:
                r = b  # live into a loop and read in it: read again by later iterations
            if a <= w <= b and any(i in reads_at[k] for k in range(a, w + 1)):
                w, r = a, max(r, b)  # loop-carried: read in the body before this iteration writes it
        c.always_live[i] = False
        c.first_lstep[i], c.last_lstep[i] = w, r
    # per-tile bytes of every tensor
    T = c.num_tiles
    c.tensor_tiles: list[tuple[np.ndarray, np.ndarray]] = []
    # int32: per-tile bytes stay far below 2 GiB even for graphs that do not fit; halves memory
    delta = np.zeros((L + 1, T), np.int32) if L else np.zeros((1, T), np.int32)
    c.live_intervals: dict[int, list[tuple[int, int]]] = {}  # tensors live in more than one interval
    per_map: dict = {}  # mapping -> (its tiles, elements on each), once for the tensors that share one mapping
    # object (an elementwise output mapped like its input: ~1 in 8 of a GPT-2-XL stage graph's tensors)
    for t in g.tensors:
        hit = per_map.get(id(t.mapping))
        if hit is None:
            ept = t.mapping.elements_per_tile(T)
            nz = np.nonzero(ept)[0]
            hit = per_map[id(t.mapping)] = (t.mapping, nz, ept[nz])  # (the mapping kept: its id stays unique)
        tiles, b = hit[1], hit[2] * t.itemsize
        c.tensor_tiles.append((tiles, b))
        cat = "constant" if t.kind == "constant" else "variable"
        if c.always_live[t.id] or L == 0:
            c.add_mem(cat, tiles, b, 0)
        else:
            spans = _intervals(int(c.first_lstep[t.id]), int(c.last_lstep[t.id]), rewrites.get(t.id),
                               read_steps.get(t.id))
            if len(spans) > 1:
                c.live_intervals[t.id] = spans
            if _DENSE_ROW_SHARE * len(tiles) >= T:
                # on most tiles (a ResNet-50 graph's tensors: ~900 of 1,472 on average): the bytes as a whole
                # tile row, added to each change step's row in one contiguous pass instead of a gather and a
                # scatter at the tiles (the same int32 sums: the bytes wrap to int32 either way)
                row = np.zeros(T, np.int32)
                row[tiles] = b
                for a, z in spans:
                    delta[a] += row
                    delta[z + 1] -= row
                continue
            for a, z in spans:
                delta[a, tiles] += b
                delta[z + 1, tiles] -= b
    nal = _running_sum(delta[:L]) if L else np.zeros((0, T), np.int32)
    c.liveness_tile_bytes = nal
    if L:
        c.memory[:, CATEGORY_CODE["variable"], 1] = nal.max(axis=0)


# compute_liveness: a tensor's bytes are added to the change steps as a whole tile row where it is on at least
# 1 / _DENSE_ROW_SHARE of the tiles (a contiguous add of T values costs about a gather and scatter of T / 4)
_DENSE_ROW_SHARE = 4

# _running_sum: row by row (one add of a tile row per step) from this many tiles; below, np.cumsum
_ROW_LOOP_MIN_TILES = 64


def _running_sum(delta: np.ndarray) -> np.ndarray:
    """``np.cumsum(delta, axis=0, dtype=np.int32)`` of the (steps x tiles) int32 changes, computed in place in
    ``delta`` and returned (the same integers, int32 wrapping alike).  numpy accumulates down axis 0 of a
    row-major table column by column, a strided pass over every element (~90 ms on a ResNet-50 graph's
    6.7 k steps x 1,472 tiles); adding each row to the next reads both contiguously (~10 ms), and no second
    table is allocated."""
    if delta.shape[1] < _ROW_LOOP_MIN_TILES:
        return np.cumsum(delta, axis=0, dtype=np.int32)
    add = np.add
    for i in range(1, delta.shape[0]):
        add(delta[i - 1], delta[i], out=delta[i])
    return delta


def _intervals(w: int, r: int, rewrites, reads) -> list[tuple[int, int]]:
    """Live intervals of a tensor live over [w, r]: a program run again (recomputation) that
    rewrites the whole tensor ends the previous interval at its last read before the rewrite, so
    the tensor is not live in between (it is recomputed, not kept)."""
    if not rewrites:
        return [(w, r)]
    out = []
    start = w
    reads = sorted(reads or [])
    for x in sorted(set(rewrites)):
        if x <= start or x > r:
            continue
        before = [q for q in reads if start <= q < x]
        out.append((start, before[-1] if before else start))
        start = x
    out.append((start, r))
    return out
