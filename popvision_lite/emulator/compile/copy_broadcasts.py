"""A broadcast copy compiled in its compact form (decision 0440): the op says a copy sends each of a few source
blocks to several destination tiles (``programs.Copy(..., broadcast=True)``: the matmul's B blocks), and the
compile costs it per distinct block's pieces and per destination vertex, never listing the 8-12x more pieces
of the expanded copy.  :func:`broadcast_plan` finds the compact form where the copy's shape allows it (else
None: the expanded path); :func:`expand` gives back the expanded pieces (the plan ``copy_plans.copy_pieces``
cuts; the tests read it: outlining signs the compact form itself, ``copy_memo.broadcast_signature``, decision
0441); :func:`code_counts` and
:func:`~popvision_lite.emulator.cost_model.broadcast_bus_receive_bytes` are the per-tile exchange code and shared
bus receive bytes of the expanded plan, computed on the compact one.  Decision 0445 widens it to the convolution's
exchanges: a destination unit (one destination interval, one tile) may hold several vertices (the kernel's k x k
windows per tile), and distinct blocks may share pieces (the input rows' halo), each then sent once
(:func:`shared_pieces`, :func:`shared_send_counts`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from popvision_lite.emulator.compile.compiled import CopyPlan
from popvision_lite.emulator.graph import Concat, Regions, TensorView, Windows, _ranges_index
from popvision_lite.emulator.mapping import interval_index


@dataclass
class BroadcastPlan:
    """The pieces of a broadcast copy in compact form.  The distinct blocks' pieces (``se`` .. ``off``: source
    element, length, source tile, source interval, block, offset in the block), in block order, each block's
    pieces in copy order; per destination vertex (in copy order) its block ``rep``, first destination element
    ``d0``, destination interval ``dk`` and tile ``dt`` (one interval, one tile per vertex, no two vertices on
    one tile).  The expanded copy is, vertex by vertex, its block's pieces moved to the vertex.  (A "vertex" here
    is a destination unit: the source's vertices that one destination interval takes, decision 0445.)"""

    se: np.ndarray
    ln: np.ndarray
    st: np.ndarray
    sk: np.ndarray
    blk: np.ndarray
    off: np.ndarray
    first: np.ndarray  # per block: its first piece
    count: np.ndarray  # per block: its pieces
    rep: np.ndarray
    d0: np.ndarray
    dk: np.ndarray
    dt: np.ndarray

    @property
    def length(self) -> np.ndarray:  # (the expanded plan's lengths are these, repeated: the same bounds)
        return self.ln


def _field_runs(f, known: dict | None):
    """(run starts (n, r), run ends (n, r), per vertex a key equal for equal vertices) of a Regions or Windows
    field, or None for any other endpoint."""
    if isinstance(f, Regions):
        s, e = f.run_bounds()
        return s, e, s[:, 0] * (int((e - s).max(initial=0)) + 1) + (e[:, 0] - s[:, 0])
    if isinstance(f, Windows):
        hit = known.get(id(f)) if known else None
        s, e = (hit[1], hit[2]) if hit is not None and hit[0] == "bounds" else f.run_bounds()
        return s, e, f.start_offsets()
    return None


def _vertex_runs(src, known: dict | None):
    """A Regions / Windows source, or a Concat of them, vertex by vertex: (run starts, run lengths (flat, vertex
    order), runs per vertex, per vertex a key equal for equal vertices (in a Concat, of one part)), or None."""
    parts = src.parts if isinstance(src, Concat) else [src]
    got = [_field_runs(f, known) for f in parts]
    if any(g is None for g in got):
        return None
    rs = np.concatenate([g[0].ravel() for g in got])
    rl = np.concatenate([(g[1] - g[0]).ravel() for g in got])
    per = np.concatenate([np.full(len(g[0]), g[0].shape[1], np.int64) for g in got])
    keys = [g[2] for g in got]
    if len(keys) > 1:  # (the part in the low digits: windows of two shapes at one origin are two blocks)
        keys = [k * len(keys) + i for i, k in enumerate(keys)]
    return rs, rl, per, np.concatenate(keys)


def broadcast_plan(src, dst, num_tiles: int, known: dict | None = None, units=None) -> BroadcastPlan | None:
    """The compact form of a copy of a Regions / Windows ``src`` (or a Concat of them) whose vertices repeat a few
    blocks into a whole contiguous ``dst`` view, where the expanded pieces are each vertex's block cut at the
    source's interval starts (no destination interval starts inside a vertex), the destination units' tiles
    are distinct and some block goes to more than one unit; else None (the copy is compiled from its expanded
    pieces).  A unit is the vertices one destination interval takes, its block their blocks in order.
    ``units``: the op's word on them (``Copy.units``, :func:`_op_units`: a Regions source's vertices per unit and
    a label per unit, equal for units that take the same vertices): checked, then used in place of the per-vertex
    keys and interval searches; the same plan, array for array, as without it (decision 0479)."""
    if not isinstance(dst, TensorView) or dst.contiguous is None:
        return None
    got = _op_units(src, dst, units, known) if units is not None else None
    if got is None:
        got = _found_units(src, dst, known)
        if got is None:
            return None
    return _plan_of_units(src, dst, *got)


def _found_units(src, dst, known: dict | None):
    """The destination units and their blocks found from the source's vertices: (run starts, run lengths, per
    block its runs' first index and count, per unit its block, per block its first unit, per unit its first
    destination element and interval), or None."""
    vr = _vertex_runs(src, known)
    if vr is None or len(vr[2]) < 2:
        return None
    runs_s, runs_l, per, vkey = vr
    if int(per.max()) == 1:  # (a run per vertex: Regions)
        vfirst, elems = np.arange(len(per), dtype=np.int64), runs_l
    else:
        vfirst = np.cumsum(per) - per
        csum = np.cumsum(runs_l)
        elems = csum[vfirst + per - 1] - csum[vfirst] + runs_l[vfirst]
    if int(elems.min()) <= 0:
        return None
    # destination: vertex t's elements are dst elements d0[t] .. d0[t] + elems[t] - 1, in one interval
    dm = dst.tensor.mapping
    d0 = dst.contiguous[0] + np.cumsum(elems) - elems
    dk = interval_index(dm.start, d0)
    if int(dk.min()) < 0 or not np.array_equal(interval_index(dm.start, d0 + elems - 1), dk):
        return None
    # the destination units: the vertices of one destination interval (consecutive: dst is contiguous), one per
    # interval, each unit's block the sequence of its vertices' blocks (the convolution's kernel windows, k x k
    # of them on each tile); a unit is one vertex where each interval takes one
    new_u = np.empty(len(dk), bool)
    new_u[0] = True
    np.not_equal(dk[1:], dk[:-1], out=new_u[1:])
    if new_u.all():
        ukey, t0, rep = np.unique(vkey, return_index=True, return_inverse=True)
        if len(ukey) == len(vkey):
            return None  # no block repeats: not a broadcast
        uf, un = vfirst[t0], per[t0]  # the distinct blocks' runs: their first vertex's
    else:
        units = _units(vkey, new_u)
        if units is None:
            return None
        rep, t0, uv = units
        d0, dk = d0[uv], dk[uv]
        uper = np.add.reduceat(per, uv)
        uf, un = vfirst[uv[t0]], uper[t0]  # the distinct blocks' runs: their first unit's vertices' runs
    return runs_s, runs_l, uf, un, rep, t0, d0, dk


def _op_units(src, dst, units, known: dict | None = None):
    """:func:`_found_units` from the op's units (``units``: per unit its vertices of the Regions or Windows
    ``src`` and a label), where they are the units and blocks the source's vertices give: every vertex
    non-empty; each unit's vertices equal, one by one, to its label's first unit's (a region's start and size, a
    window's start); each unit inside one destination interval and consecutive units in distinct ones; and the
    blocks, ordered as _found_units orders them (np.unique of the vertex keys, or of (count, first key, last key)
    per unit), distinct in that key.  Else None (the copy's units are found from its vertices).  O(vertices) in
    gathers and comparisons only (no per-vertex key, interval search or sort); only the blocks' runs are read."""
    if isinstance(src, Regions):
        vstart, vsize = src.starts, src.sizes
        smin, smax = (int(vsize.min()), int(vsize.max())) if src.n else (0, 0)
    elif isinstance(src, Windows):
        vstart, vsize = src.start_offsets(), None
        smin = smax = src.block_elems
    else:
        return None
    cnt, label = (np.asarray(a, np.int64) for a in units)
    if len(cnt) < 2 or len(label) != len(cnt) or int(cnt.min()) <= 0 or int(cnt.sum()) != src.n or smin <= 0:
        return None
    _lab, t0, rep = np.unique(label, return_index=True, return_inverse=True)  # (units: a few hundred)
    rep = rep.reshape(-1).astype(np.int64)
    if len(t0) == len(cnt):
        return None  # no block repeats: not a broadcast
    uv = np.cumsum(cnt) - cnt
    if not np.array_equal(cnt, cnt[t0][rep]):
        return None
    # every unit's vertices are its block's first unit's, one by one (the units cover the vertices in order)
    ref = _ranges_index(uv[t0][rep], cnt)
    if not np.array_equal(vstart, vstart[ref]) or (smin != smax and not np.array_equal(vsize, vsize[ref])):
        return None
    elems = np.add.reduceat(vsize, uv, dtype=np.int64) if smin != smax else cnt * smin
    dm = dst.tensor.mapping
    d0 = dst.contiguous[0] + np.cumsum(elems) - elems
    dk = interval_index(dm.start, d0)
    if int(dk.min()) < 0 or not np.array_equal(interval_index(dm.start, d0 + elems - 1), dk) or \
            not np.all(dk[1:] != dk[:-1]):
        return None
    # the blocks in _found_units' order: by vertex key (_field_runs': a region's start * (largest size + 1) +
    # size, a window's start) where every unit is one vertex, else by (count, first vertex's key, last vertex's
    # key); distinct keys, or that order is not the blocks'
    bu = uv[t0]
    bl = bu + cnt[t0] - 1
    fkey, lkey = (vstart[v].astype(np.int64) * (smax + 1) + vsize[v] if vsize is not None else vstart[v]
                  for v in (bu, bl))
    if int(cnt.max()) == 1:
        order = np.argsort(fkey, kind="stable")
        ks = fkey[order]
        if not np.all(ks[1:] > ks[:-1]):
            return None
    else:
        order = np.lexsort((lkey, fkey, cnt[t0]))
        c, f, la = cnt[t0][order], fkey[order], lkey[order]
        if not np.all((c[1:] != c[:-1]) | (f[1:] != f[:-1]) | (la[1:] != la[:-1])):
            return None
    t0 = t0[order]
    inv = np.empty(len(order), np.int64)
    inv[order] = np.arange(len(order))
    rep = inv[rep]
    if vsize is not None:  # a run per region
        return vstart, vsize, uv[t0], cnt[t0], rep, t0, d0, dk
    # a window's runs: the blocks' windows' only (as the structure key read them, where it did)
    bi = _ranges_index(uv[t0], cnt[t0])
    hit = known.get(id(src)) if known else None
    if hit is not None and hit[0] == "bounds":
        s, e = hit[1][bi], hit[2][bi]
    else:
        s, e = Windows(src.tensor, src.block_shape, src.origins[bi]).run_bounds()
    r = s.shape[1]
    bc = cnt[t0]
    return s.ravel(), (e - s).ravel(), (np.cumsum(bc) - bc) * r, bc * r, rep, t0, d0, dk


def _plan_of_units(src, dst, runs_s, runs_l, uf, un, rep, t0, d0, dk) -> BroadcastPlan | None:
    """The plan of the units (:func:`_found_units`' fields): the units' tiles distinct, and the distinct blocks'
    runs (``uf``, ``un``: each block's runs) cut at the source's interval starts."""
    dm = dst.tensor.mapping
    dt = dm.tile[dk].astype(np.int64)
    if len(dt) and int(np.bincount(dt).max()) > 1:  # (a tile count, not a sort: the tiles are a few thousand at most)
        return None
    # the distinct blocks' runs, zero-length runs left out, cut at the source's interval starts inside them (as
    # copy_plans._cut_runs cuts every piece)
    ri = _ranges_index(uf, un)
    rblk = np.repeat(np.arange(len(t0), dtype=np.int64), un)
    rs, rl = runs_s[ri].astype(np.int64, copy=False), runs_l[ri].astype(np.int64, copy=False)
    roff = np.cumsum(rl)  # each run's offset in its block: a cumulative sum restarting at each block
    roff -= rl
    roff -= roff[np.cumsum(un) - un][rblk]
    keep = rl > 0
    if not keep.all():
        rs, rl, roff, rblk = rs[keep], rl[keep], roff[keep], rblk[keep]
    sm = src.tensor.mapping
    k0 = interval_index(sm.start, rs)
    if len(rs) and int(k0.min()) >= 0 and bool(np.all(rs + rl <= sm.stop[k0])):
        # every run inside one interval (no interval starts inside it): the runs are the pieces, their intervals
        # found once (the searches below give the same pieces)
        return _plan(rs, rl, k0, rblk, roff, sm, t0, rep, d0, dk, dt)
    lo = np.searchsorted(sm.start, rs, side="right")
    hi = np.searchsorted(sm.start, rs + rl, side="left")
    cnt = np.maximum(hi - lo, 0) + 1  # pieces per run
    if int(cnt.max()) == 1:
        se, ln, off, blk = rs, rl, roff, rblk
    else:
        n = int(cnt.sum())
        rfirst = np.cumsum(cnt) - cnt
        run = np.repeat(np.arange(len(rs)), cnt)
        j = np.arange(n, dtype=np.int64) - rfirst[run]  # the piece's place in its run
        cut = np.where(j > 0, sm.start[np.minimum(lo[run] + j - 1, len(sm.start) - 1)], rs[run])
        end = np.empty(n, np.int64)
        end[:-1] = cut[1:]
        last = rfirst + cnt - 1
        end[last] = rs + rl
        se, ln, blk = cut, end - cut, rblk[run]
        off = roff[run] + (cut - rs[run])
    return _plan(se, ln, interval_index(sm.start, se), blk, off, sm, t0, rep, d0, dk, dt)


def _plan(se, ln, sk, blk, off, sm, t0, rep, d0, dk, dt) -> BroadcastPlan:
    nb = len(t0)
    count = np.bincount(blk, minlength=nb)
    first = np.cumsum(count) - count
    return BroadcastPlan(se.astype(np.int64), ln.astype(np.int64), sm.tile[sk].astype(np.int64), sk, blk, off,
                         first, count, rep.astype(np.int64), d0, dk, dt)


def _units(vkey: np.ndarray, new_u: np.ndarray):
    """Where the destination units (``new_u``: a unit's first vertex) are sequences of vertex blocks: (per unit
    its block, each block's first unit, each unit's first vertex), or None where no block repeats.  Units are one
    block when their vertex keys are equal, element for element: grouped by (count, first key, last key), then
    checked one by one."""
    uv = np.nonzero(new_u)[0]
    cnt = np.diff(np.append(uv, len(vkey)))
    last = uv + cnt - 1
    cand = np.stack([cnt, vkey[uv], vkey[last]], 1)
    _u, t0, rep = np.unique(cand, axis=0, return_index=True, return_inverse=True)
    rep = rep.reshape(-1).astype(np.int64)
    if len(t0) == len(uv):
        return None  # no block repeats: not a broadcast
    # check: every unit's vertex keys are its block's first unit's, one by one; a unit that differs is a block of
    # its own (were two such units equal, their pieces repeat: the compile takes the expanded path)
    same = vkey[_ranges_index(uv, cnt)] == vkey[_ranges_index(uv[t0[rep]], cnt)]
    if not same.all():
        bad = np.nonzero(np.logical_and.reduceat(same, np.cumsum(cnt) - cnt) == 0)[0]
        rep[bad] = len(t0) + np.arange(len(bad))
        t0 = np.concatenate([t0, bad])
        if len(t0) == len(uv):
            return None
    return rep, t0, uv


def expand(bp: BroadcastPlan) -> CopyPlan:
    """The expanded pieces: vertex by vertex, its block's pieces (the plan copy_plans.copy_pieces cuts)."""
    cnt = bp.count[bp.rep]
    idx = _ranges_index(bp.first[bp.rep], cnt)
    v = np.repeat(np.arange(len(bp.rep)), cnt)
    return CopyPlan(bp.se[idx], bp.d0[v] + bp.off[idx], bp.ln[idx], bp.st[idx], bp.dt[v], bp.sk[idx], bp.dk[v])


@dataclass
class Receivers:
    """Per block and tile, what the expanded copy's crossing pieces add up to: ``per_vertex_local`` (elements of
    the vertex's block whose source tile is the vertex's own tile), ``partner_local`` (... on the tile sharing
    the vertex's exchange bus), ``vertices`` (per block), ``tile_vertex`` (per tile, its vertex or -1)."""

    local: np.ndarray
    partner_local: np.ndarray | None
    vertices: np.ndarray
    tile_vertex: np.ndarray
    own: tuple | None = None  # (given PieceGroups) per vertex: its (block, own tile) group's index, whether any
    group_elems: np.ndarray | None = None  # (given PieceGroups) per (block, source tile) group: its elements


@dataclass
class PieceGroups:
    """The block pieces in code_counts' order, (block, source tile, source position), ties in the block's order:
    ``order``; per piece in that order its key block * T + source tile (``g``, ascending) and its group's index
    (``gid``); per (block, source tile) group its key (``keys``, ascending) and first piece (``starts``).  The
    receivers' sums and the exchange-code counts are both per group: one sort serves them."""

    order: np.ndarray
    g: np.ndarray
    gid: np.ndarray
    keys: np.ndarray
    starts: np.ndarray


def piece_groups(bp: BroadcastPlan, src_addr: np.ndarray, T: int) -> PieceGroups | None:
    """The block pieces grouped by (block, source tile) in code_counts' order; None where a source tile is T or
    more (its key would be another block's)."""
    if len(bp.st) and int(bp.st.max()) >= T:
        return None
    order = _stable_order(bp.blk, bp.st, src_addr)  # (stable: ties in the block's order, as the expanded sort)
    g = (bp.blk * T + bp.st)[order]
    new = np.empty(len(g), bool)
    new[:1] = True
    np.not_equal(g[1:], g[:-1], out=new[1:])
    starts = np.nonzero(new)[0]
    gid = np.cumsum(new)
    gid -= 1
    return PieceGroups(order, g, gid, g[starts], starts)


def _group_sums(bp: BroadcastPlan, T: int, values: np.ndarray):
    """(sorted distinct keys block * T + source tile of the pieces, per key the sum of ``values``)."""
    key = bp.blk * T + bp.st
    order = np.argsort(key, kind="stable")
    ks = key[order]
    new = np.empty(len(ks), bool)
    new[:1] = True
    np.not_equal(ks[1:], ks[:-1], out=new[1:])
    starts = np.nonzero(new)[0]
    return ks[starts], np.add.reduceat(values[order], starts) if len(starts) else values[:0]


def _find(keys: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(per query its place in the sorted ``keys``, whether it is there); ``keys`` not empty."""
    i = np.minimum(np.searchsorted(keys, q), len(keys) - 1)
    return i, keys[i] == q


def lookup(keys: np.ndarray, sums: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``sums`` at the keys ``q`` (0 where a key is absent)."""
    if len(keys) == 0:
        return np.zeros(len(q), sums.dtype)
    i = np.minimum(np.searchsorted(keys, q), len(keys) - 1)
    return np.where(keys[i] == q, sums[i], 0)


def receivers(bp: BroadcastPlan, T: int, bus: bool, groups: PieceGroups | None = None) -> Receivers:
    """``groups``: the pieces' (block, source tile) groups (:func:`piece_groups`), else grouped here; with them,
    each vertex's own group is found once, for code_counts too (``Receivers.own``)."""
    own = bp.rep * T + bp.dt
    if groups is None:
        keys, sums = _group_sums(bp, T, bp.ln)
        local, at = lookup(keys, sums, own), None
    else:
        keys = groups.keys
        sums = np.add.reduceat(bp.ln[groups.order], groups.starts) if len(keys) else bp.ln[:0]
        at = _find(keys, own)
        local = np.where(at[1], sums[at[0]], 0) if len(keys) else np.zeros(len(own), sums.dtype)
    partner = lookup(keys, sums, bp.rep * T + (bp.dt ^ 1)) if bus else None
    tv = np.full(T, -1, np.int64)
    tv[bp.dt] = np.arange(len(bp.dt))
    return Receivers(local, partner, np.bincount(bp.rep, minlength=len(bp.count)), tv, at,
                     None if groups is None else sums)


def _group_sends(bp: BroadcastPlan, r: Receivers, keys: np.ndarray, T: int) -> np.ndarray:
    """Per (block, source tile) group (``keys``: block * T + source tile): whether its pieces send, i.e. some vertex
    of the block is on another tile (:func:`piece_receivers` > 0 for each of its pieces: the block has more than
    one vertex, or its one vertex is not on the group's source tile)."""
    sb, ss = keys // T, keys % T
    v = r.tile_vertex[ss]
    return (r.vertices[sb] > 1) | ~((v >= 0) & (bp.rep[np.maximum(v, 0)] == sb))


def send_bytes(bp: BroadcastPlan, r: Receivers, groups: PieceGroups, T: int, isz: int) -> np.ndarray:
    """Per tile, the bytes its pieces send where no two blocks share a piece: each piece once if some vertex on
    another tile receives it (``np.bincount(bp.st, weights=np.where(piece_receivers(bp, r) > 0, bp.ln, 0) *
    isz)``), summed per (block, source tile) group, since whether a piece sends is its group's
    (:func:`_group_sends`); ``r`` found from ``groups``."""
    keys = groups.keys
    w = np.where(_group_sends(bp, r, keys, T), r.group_elems, 0) * isz
    return np.bincount(keys % T, weights=w, minlength=T).astype(np.int64)


def piece_receivers(bp: BroadcastPlan, r: Receivers) -> np.ndarray:
    """Per distinct piece, how many vertices receive it over the exchange (its block's vertices less the one on
    its own source tile, where that vertex takes this block)."""
    v = r.tile_vertex[bp.st]
    own = (v >= 0) & (bp.rep[np.maximum(v, 0)] == bp.blk)
    return r.vertices[bp.blk] - own


def _stable_order(*keys: np.ndarray) -> np.ndarray:
    """``np.lexsort(keys[::-1])`` (the first key outermost, ties in the given order) for non-negative int keys:
    the keys and the index packed into one int64 and sorted (~4x faster than lexsort).  Where they do not fit 63
    bits but the keys less the last do, those packed, and their order taken where no two pieces tie on them;
    lexsort otherwise."""
    m = len(keys[0])
    bits = [max(int(k.max(initial=0)), 1).bit_length() for k in keys]
    ib = max(m - 1, 1).bit_length()
    if any(int(k.min(initial=0)) < 0 for k in keys):
        return np.lexsort(keys[::-1])
    if sum(bits) + ib <= 63:
        return _packed_order(keys, bits, ib)[0]
    # too wide with the last key: the others packed, where no two pieces tie on them the last key decides no
    # order, so theirs is lexsort's (the convolution's shared sends: (tile, tile, source position, offset) of
    # 4 x 125-500 k pieces, 68 bits; lexsort took 7-46 ms of them, the packed sort a few)
    if len(keys) > 1 and sum(bits[:-1]) + ib <= 63:
        order, v = _packed_order(keys[:-1], bits[:-1], ib)
        v >>= ib
        if m < 2 or bool(np.all(v[1:] != v[:-1])):
            return order
    return np.lexsort(keys[::-1])


def _packed_order(keys, bits, ib: int) -> tuple[np.ndarray, np.ndarray]:
    """(the stable order of the non-negative int ``keys`` (the first outermost), the sorted packed values): each
    key in its ``bits`` and the index in the low ``ib`` bits of one int64, one sort."""
    m = len(keys[0])
    v = np.zeros(m, np.int64)
    for k, b in zip(keys, bits, strict=True):
        v <<= b
        v |= k
    v <<= ib
    v |= np.arange(m, dtype=np.int64)
    v.sort(kind="stable")  # (distinct values; stable: a run-merging sort, the keys are a few ascending runs)
    return v & ((1 << ib) - 1), v


def shared_pieces(bp: BroadcastPlan):
    """Where distinct blocks hold one piece (the same (source element, length): the halo rows two convolution
    tiles' inputs share), the block pieces grouped by it: (the block pieces in (source element, length) order,
    where each group starts); None where every piece is its block's alone; False where a block holds a piece
    twice (the compact form cannot say that copy)."""
    L1 = int(bp.ln.max()) + 1
    pk = bp.se * L1 + bp.ln
    if np.all(pk[1:] > pk[:-1]):
        return None
    # (a sort, not np.unique: numpy's hash-based unique took ~0.2 s on a convolution kernel's 0.4 M pieces;
    # stable: the pieces are a few ascending runs, which it merges, and a group's pieces stay in block order)
    order = np.argsort(pk, kind="stable")
    ps = pk[order]
    eq = ps[1:] == ps[:-1]
    if not eq.any():
        return None
    if (eq & (bp.blk[order][1:] == bp.blk[order][:-1])).any():
        return False
    starts = np.nonzero(np.concatenate([[True], ~eq]))[0]
    return order, starts


def shared_send_counts(bp: BroadcastPlan, r: Receivers, src_addr: np.ndarray, T: int, shared):
    """The send side of copy_plans.exchange_code_counts where blocks share pieces (:func:`shared_pieces`): each
    distinct piece is sent once, as the expanded copy's first crossing occurrence of it (the first destination
    vertex in copy order not on its source tile), so its patterns are found among the sent pieces grouped by
    (that vertex's tile, source tile), by source position, with source strides only.  Per tile (patterns, loops);
    and per distinct piece (a block piece of it, whether it is sent)."""
    from popvision_lite.emulator.compile.copy_plans import _starts_of

    order, starts = shared
    U = len(bp.rep)
    # per block its first and second vertex (copy order)
    uo = np.argsort(bp.rep, kind="stable")
    bfirst = np.cumsum(r.vertices) - r.vertices
    first_u = uo[bfirst]
    second_u = np.where(r.vertices > 1, uo[np.minimum(bfirst + 1, U - 1)], U)
    # per block piece: its block's first vertex not on the piece's source tile (U: none)
    fu = first_u[bp.blk]
    cand = np.where(bp.dt[fu] != bp.st, fu, second_u[bp.blk])[order]
    fr = np.minimum.reduceat(cand, starts)  # per distinct piece: its first receiver
    sent = fr < U
    cnt = np.diff(np.append(starts, len(order)))
    hit = cand == np.repeat(np.where(sent, fr, -1), cnt)
    bpi = order[hit]  # per sent distinct piece, its block piece in the first receiver's block
    dtf, st, sa = bp.dt[fr[sent]], bp.st[bpi], src_addr[bpi]
    o = _stable_order(dtf, st, sa, bp.off[bpi])  # (ties in copy order: the piece's offset in the vertex)
    g = (dtf * T + st)[o]
    ln = bp.ln[bpi][o]
    same = g[1:] == g[:-1]
    same &= ln[1:] == ln[:-1]
    sao = sa[o]
    new = _starts_of(same, sao, sao, False)[0]
    ps = np.nonzero(new)[0]
    loop = np.diff(np.append(ps, len(o))) > 1
    stp = st[o][ps]
    return (np.bincount(stp, minlength=T).astype(np.int64), np.bincount(stp, weights=loop, minlength=T).astype(np.int64)), \
        (order[starts], sent)


def code_counts(bp: BroadcastPlan, r: Receivers, src_addr: np.ndarray, T: int, send=None,
                groups: PieceGroups | None = None):
    """Per tile (exchange-code patterns, loops) of the expanded copy's crossing pieces (receive side on the
    receiver's tile, send side on the sender's: copy_plans.exchange_code_counts), and per tile (patterns, loops) of
    its on-tile pieces (copy descriptors, on their tile).  A pattern forms within one (destination tile, source
    tile) group of pieces sorted by source position; a destination tile takes one vertex, so its groups are its
    block's pieces per source tile, in the block's order: each (block, source tile) group's patterns are found
    once, with the destination strides of the block's offsets (a vertex's destination positions are its first
    one plus them).  The send side is the pieces that send (:func:`piece_receivers` > 0: whole groups,
    :func:`_group_sends`), with source strides only:
    grouped by (the first receiver's tile, source tile), which a block's groups are too.  ``groups``: the pieces
    in that order, grouped (:func:`piece_groups`, with ``r`` found from them), else sorted here."""
    from popvision_lite.emulator.compile.copy_plans import _starts_of

    m = len(bp.se)
    groups = groups if groups is not None and r.own is not None else None
    if groups is None:
        order = _stable_order(bp.blk, bp.st, src_addr)  # (stable: ties in the block's order, as the expanded sort)
        g = (bp.blk * T + bp.st)[order]
    else:
        order, g = groups.order, groups.g
    ln = bp.ln[order]
    same = g[1:] == g[:-1]
    same &= ln[1:] == ln[:-1]
    new_r, new_s = _starts_of(same, src_addr[order], bp.off[order], True)
    out = []
    for new in (new_r, new_s):
        starts = np.nonzero(new)[0]
        loop = np.diff(np.append(starts, m)) > 1
        if groups is not None:  # (every group starts a pattern: its groups are the pieces' groups)
            gi, nk = groups.gid[starts], len(groups.keys)
            out.append((groups.keys, np.bincount(gi, minlength=nk), np.bincount(gi, weights=loop, minlength=nk)
                        .astype(np.int64)))
            continue
        gk = g[starts]
        # per group: patterns, loops (groups are runs of g: sums over the starts of each group).  g is in order
        # (``order`` sorts by block, then source tile), so its distinct keys are where it changes, without a sort
        if len(gk) < 2 or bool(np.all(gk[1:] >= gk[:-1])):
            newk = np.empty(len(gk), bool)
            newk[:1] = True
            np.not_equal(gk[1:], gk[:-1], out=newk[1:])
            keys, inv = gk[newk], np.cumsum(newk) - 1
        else:  # (a source tile past T: not in order)
            keys, inv = np.unique(gk, return_inverse=True)
        out.append((keys, np.bincount(inv, minlength=len(keys)), np.bincount(inv, weights=loop,
                                                                              minlength=len(keys)).astype(np.int64)))
    (rk, rp, rl), (sk, sp, sl) = out
    nbk = len(bp.count)
    blk_p = np.bincount(rk // T, weights=rp, minlength=nbk).astype(np.int64)
    blk_l = np.bincount(rk // T, weights=rl, minlength=nbk).astype(np.int64)
    if groups is None:
        own = bp.rep * T + bp.dt
        loc_p, loc_l = lookup(rk, rp, own), lookup(rk, rl, own)
    elif len(rk):
        i, hit = r.own
        loc_p, loc_l = np.where(hit, rp[i], 0), np.where(hit, rl[i], 0)
    else:
        loc_p = loc_l = np.zeros(len(bp.rep), np.int64)
    n_pat = np.bincount(bp.dt, weights=blk_p[bp.rep] - loc_p, minlength=T)
    n_loop = np.bincount(bp.dt, weights=blk_l[bp.rep] - loc_l, minlength=T)
    if send is not None:  # (blocks share pieces: the send side as shared_send_counts found it)
        n_pat += send[0]
        n_loop += send[1]
        return _done(bp, n_pat, n_loop, loc_p, loc_l, T)
    # send side: a group sends unless its block's only vertex is on the group's source tile
    ss = sk % T
    sends = _group_sends(bp, r, sk, T)
    n_pat += np.bincount(ss[sends], weights=sp[sends], minlength=T)
    n_loop += np.bincount(ss[sends], weights=sl[sends], minlength=T)
    return _done(bp, n_pat, n_loop, loc_p, loc_l, T)


def _done(bp: BroadcastPlan, n_pat, n_loop, loc_p, loc_l, T: int):
    local_p = np.bincount(bp.dt, weights=loc_p, minlength=T).astype(np.int64)
    local_l = np.bincount(bp.dt, weights=loc_l, minlength=T).astype(np.int64)
    return (n_pat.astype(np.int64), n_loop.astype(np.int64)), (local_p, local_l)
