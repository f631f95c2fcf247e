"""Partial-sum gathers described by their op and costed per block class (decision 0480).

A K-split matmul's (or a convolution's) ``gather_partials`` copy takes, for every output block, the same slice of
each of the block's ``pk`` partials onto the tile that reduces it: the block's pieces lie on the block's own tiles
(its partials' owners), and blocks of one shape are the same exchange on other tiles.  The op says so
(``ops.matmul_partials.BlockGather``, set on the ``Copy`` as ``gather``); the compile then cuts, addresses and patterns one
representative block per shape (``copy_plans.copy_pieces``, ``memory.tile_addr``,
``copy_plans.exchange_code_counts``: the expanded path's own steps) and moves its per-tile results to every
other block's tiles.  The effects are the expanded compile's (``copies._compile_copy_fresh``): the same bytes per
tile, exchange code, copy descriptors and steps.

What the op promises (``reduce_k_partials`` builds it so; ``tests/emulator/compile/test_copy_gathers.py`` compiles
its copies both ways on the ops' real shapes):

* destination vertex v (``depth`` consecutive source regions each, the copy's source a ``Regions`` field, its
  destination a whole tensor) belongs to block ``vertex_block[v]``;
* every piece of block b has its source and destination tiles among ``owner[b]``, and no tile is in two blocks'
  rows (checked: the rows' tiles are distinct);
* two blocks of one class (``block_class``) are the same pieces on their rows' tiles, column for column: the same
  lengths, the same positions in tile memory;
* no source element is read twice (the partials' slices are disjoint): every piece is its own send.

The compile checks what it can in O(blocks + one block's pieces): distinct tiles, the representative's pieces on
its row's tiles, one IPU.  With outlining on, the expanded pieces are still cut for the copy's signature
(``copy_memo.plan_signature``), and only the steps after the cut are per class.  Any other copy, or a description
it cannot use, takes the expanded path."""

from __future__ import annotations

import numpy as np

from popvision_lite.emulator import cost_model as cm
from popvision_lite.emulator.compile.compiled import K_SYNC, K_XI, Compiled, CopyPlan, ProgInfo
from popvision_lite.emulator.compile.copy_plans import (
    _starts_of,
    charge_exchange_code,
    code_patterns,
    copy_pieces,
    exchange_code_counts,
)
from popvision_lite.emulator.compile.memory import tile_addr
from popvision_lite.emulator.graph import Regions, TensorView
from popvision_lite.emulator.mapping import interval_index
from popvision_lite.emulator.ops.basic import RowGather
from popvision_lite.emulator.ops.matmul_partials import BlockGather


def usable(c: Compiled, prog, g: BlockGather | RowGather) -> bool:
    """Whether the compact compile applies: one IPU, a Regions source whose regions are the vertices'
    ``depth`` pieces, a whole destination, and blocks on distinct tiles (a :class:`RowGather`: one IPU and a
    Regions source; :func:`compile_rows` checks the rest)."""
    src, dst = prog.src, prog.dst
    if isinstance(g, RowGather):
        return c.target.num_ipus == 1 and isinstance(src, Regions) and isinstance(dst, (Regions, TensorView))
    if c.target.num_ipus != 1 or not isinstance(src, Regions):
        return False
    if not isinstance(dst, TensorView) or dst.contiguous != (0, dst.tensor.size):
        return False
    n = len(g.vertex_block) * g.depth if g.first is None else int(g.first[-1])
    if src.n != n or g.owner.ndim != 2 or len(g.block_class) != len(g.owner):
        return False
    tiles = g.owner.ravel()
    if len(tiles) == 0 or int(tiles.min()) < 0 or int(tiles.max()) >= c.num_tiles:
        return False
    seen = np.zeros(c.num_tiles, bool)
    seen[tiles] = True
    return int(np.count_nonzero(seen)) == len(tiles)


def compile_gather(c: Compiled, info: ProgInfo, g: BlockGather | RowGather) -> bool:
    """_compile_copy_fresh's effects for a gather its op described (:class:`BlockGather`): per class, the
    representative block's per-tile sums, moved to every block of the class (a :class:`RowGather`:
    :func:`compile_rows`).  False, with nothing done, where the description cannot be used (the copy then takes
    the expanded path)."""
    if isinstance(g, RowGather):
        return compile_rows(c, info, g)
    prog = info.prog
    src = prog.src
    T = c.num_tiles
    isz = prog.src.tensor.itemsize
    sizes, starts = src.sizes, src.starts
    # the destination's element of each region: the whole destination in region order
    d_end = np.cumsum(sizes, dtype=np.int64)
    classes, rep = np.unique(g.block_class, return_index=True)
    vb = g.vertex_block
    per = [np.zeros(T, np.int64) for _ in range(7)]  # bout, bin, local, n_pat, n_loop, l_pat, l_loop
    any_local = False
    for ci, r in zip(classes, rep, strict=True):
        v = np.nonzero(vb == r)[0]
        if g.first is None:
            ri = (v[:, None] * g.depth + np.arange(g.depth)[None, :]).ravel()
        else:  # vertex v's regions first[v]:first[v + 1]
            cnt = g.first[v + 1] - g.first[v]
            ri = np.arange(int(cnt.sum())) + np.repeat(g.first[v] - (np.cumsum(cnt) - cnt), cnt)
        ln = sizes[ri].astype(np.int64)
        keep = ln > 0
        ri, ln = ri[keep], ln[keep]
        if len(ri) == 0:
            return False
        sub_src = src.tensor.regions(starts[ri].astype(np.int64), ln)
        sub_dst = prog.dst.tensor.regions(d_end[ri] - ln, ln)
        plan = copy_pieces(sub_src, sub_dst)
        row = g.owner[r]
        on_row = np.zeros(T, bool)
        on_row[row] = True
        if not (on_row[plan.src_tile].all() and on_row[plan.dst_tile].all()):
            return False
        cross = plan.src_tile != plan.dst_tile
        nb = plan.length * isz
        vals = [np.bincount(plan.src_tile[cross], weights=nb[cross], minlength=T),
                np.bincount(plan.dst_tile[cross], weights=nb[cross], minlength=T),
                np.bincount(plan.dst_tile[~cross], weights=nb[~cross], minlength=T)]
        src_addr = _row_addr(src.tensor.mapping, on_row, plan.src_elem, plan.src_k)
        dst_addr = _row_addr(prog.dst.tensor.mapping, on_row, plan.dst_elem, plan.dst_k)
        z = np.zeros(T, np.int64)
        if cross.any():
            counts = exchange_code_counts(plan, cross, cross, src_addr, dst_addr, T)
            if counts is None:  # (the packed key does not fit: the expanded path's two-step counts)
                return False
        else:
            counts = (z, z)
        if not cross.all():
            any_local = True
            lc = exchange_code_counts(plan, ~cross, None, src_addr, dst_addr, T)
            if lc is None:
                ps_, _pd, cnt = code_patterns(plan, ~cross, src_addr, dst_addr, T)
                lc = (np.bincount(ps_, minlength=T), np.bincount(ps_[cnt > 1], minlength=T))
        else:
            lc = (z, z)
        vals += [*counts, *lc]
        blocks = np.nonzero(g.block_class == ci)[0]
        dst_tiles = g.owner[blocks]  # (blocks of the class, width): column j takes the representative's row[j]
        for acc, val in zip(per, vals, strict=True):
            acc[dst_tiles] = np.asarray(val, np.int64)[row][None, :]
    bout, bin_, local, n_pat, n_loop, l_pat, l_loop = per
    if not bin_.any():
        return False  # (nothing crosses: the expanded path's on-tile step)
    if c.outline:  # outlining signs the expanded pieces (copy_memo.plan_signature): they are cut for it
        c.copy_plans[info.prog_id] = copy_pieces(src, prog.dst, c.caches.copy_runs)
    _effects(c, info, bout, bin_, local, (n_pat, n_loop), (l_pat, l_loop) if any_local else None)
    return True


def _row_addr(mp, on_row: np.ndarray, elems: np.ndarray, k: np.ndarray) -> np.ndarray:
    """memory.tile_addr of ``elems`` (in mapping intervals ``k``, all on the tiles ``on_row`` marks) from those
    tiles' intervals alone: an element's position is its offset among its tile's elements of the tensor, which only
    that tile's intervals decide, so the tensor's other tiles (the other blocks': the whole mapping is what
    memory._tile_base sorts) are not looked at.  (A step that reads the whole tensor's offsets later computes them
    there, as it would have read them here.)"""
    sub = np.nonzero(on_row[mp.tile])[0]  # (in start order, as the mapping keeps its intervals)
    t = mp.tile[sub]
    sizes = mp.stop[sub] - mp.start[sub]
    o = np.argsort(t, kind="stable")
    cs = np.cumsum(sizes[o]) - sizes[o]
    first = np.ones(len(o), bool)
    first[1:] = t[o][1:] != t[o][:-1]
    base = np.maximum.accumulate(np.where(first, cs, 0))
    rel = np.empty(len(o), np.int64)
    rel[o] = cs - base
    rel -= mp.start[sub]
    return rel[np.searchsorted(sub, k)] + elems


def compile_rows(c: Compiled, info: ProgInfo, g: RowGather) -> bool:
    """_compile_copy_fresh's effects for a reduction stage's gather (:class:`RowGather`, ops/basic._reduce_stage,
    decision 0491), without cutting or sorting its pieces where its layout allows.  Conditions (checked; else
    False, with nothing done, and the expanded path): every region (one length) inside one row of a source mapped
    one interval a row; vertex v's regions ``first[v]:first[v + 1]`` one after another inside one interval of
    the destination; no source element read twice.  The pieces are then the regions, in order (copy_pieces'
    paired runs), and each is its own send.

    Exchange-code patterns form between two tiles (copy_plans.exchange_code_counts: pieces sorted by destination
    tile, source tile, source position), so every count is a sum over tile pairs.  Where the source rows lie on
    distinct tiles and a destination tile's vertices are consecutive, of one group of rows (the same first row and
    count) and in ascending columns, each of its pairs (the tile, a row's tile) holds one piece per vertex, in
    vertex order, with the vertices' strides on both sides: the pattern counts of the tile's vertex sequence
    (copy_plans._starts_of), the same for every row of its group, counted once per tile and charged per pair.
    The other destination tiles' pieces are written down and counted by the expanded path's functions."""
    prog = info.prog
    src, dst = prog.src, prog.dst
    T, n, row = c.num_tiles, src.n, int(g.row)
    first = np.asarray(g.first, np.int64)
    cnt = np.diff(first)
    if n == 0 or len(first) < 2 or int(first[0]) != 0 or int(first[-1]) != n or int(cnt.min()) <= 0:
        return False
    L = int(src.sizes[0])
    if L <= 0 or row <= 0 or row % L or int(src.sizes.min()) != L or int(src.sizes.max()) != L:
        return False
    sm, dm = src.tensor.mapping, dst.tensor.mapping
    R = len(sm)
    if src.tensor.size != R * row or not (np.array_equal(sm.start, np.arange(R, dtype=np.int64) * row)
                                          and np.array_equal(sm.stop, sm.start + row)):
        return False
    se = src.starts.astype(np.int64)
    if int(se.min()) < 0 or int(se.max()) + L > src.tensor.size or np.any(se % L):
        return False  # (aligned regions of one length inside their rows: distinct starts, disjoint regions)
    mark = np.zeros(src.tensor.size // L, bool)
    mark[se // L] = True
    if int(np.count_nonzero(mark)) != n:
        return False  # (a source element read twice: a multicast, the expanded path's)
    e, k = _vertex_destinations(c, dst, first, L)
    if e is None:
        return False
    D, a = dm.tile[k], tile_addr(c, dm, e, k)
    bad, per_run = _tile_runs(se, first, cnt, row, D, a, sm.tile, T)
    isz = prog.src.tensor.itemsize
    acc = _pair_sums(per_run, sm.tile, L * isz, T)  # bout, bin, local, n_pat, n_loop, l_pat, l_loop
    if bad.any():  # the other destination tiles: their pieces, counted as the expanded path counts them
        part = _expanded_sums(c, se, first, cnt, row, L, isz, e, k, bad, sm, dm)
        if part is None:
            return False
        acc = [x + y for x, y in zip(acc, part, strict=True)]
    bout, bin_, local, n_pat, n_loop, l_pat, l_loop = acc
    if not bin_.any():
        return False  # (nothing crosses: the expanded path's on-tile step)
    if c.outline:  # (the pieces copy_pieces cuts: outlining signs them)
        step = np.arange(n, dtype=np.int64) - np.repeat(first[:-1], cnt)
        de, dk = np.repeat(e, cnt) + step * L, np.repeat(k, cnt)
        c.copy_plans[info.prog_id] = CopyPlan(se, de, np.full(n, L, np.int64), sm.tile[se // row], dm.tile[dk],
                                              se // row, dk)
    _effects(c, info, bout, bin_, local, (n_pat, n_loop), (l_pat, l_loop) if local.any() else None)
    return True


def _tile_runs(se, first, cnt, row: int, D, a, src_tiles, T: int):
    """The destination tiles whose pairs repeat one vertex sequence (compile_rows): (per vertex, whether its tile
    is not one of them; for those that are, per tile: (tile, first row, rows, vertices, receive-side patterns
    and loops, send-side patterns and loops)).  None of them unless every vertex's regions are its group's rows at
    one column and the source rows lie on distinct tiles."""
    V = len(cnt)
    s0 = se[first[:-1]]
    r0 = s0 // row
    col = s0 - r0 * row
    step = np.arange(len(se), dtype=np.int64) - np.repeat(first[:-1], cnt)
    ok = np.array_equal(se, np.repeat(s0, cnt) + step * row) and int(np.bincount(src_tiles, minlength=T).max()) <= 1
    if not ok:
        return np.ones(V, bool), None
    same = D[1:] == D[:-1]
    start = np.ones(V, bool)
    np.logical_not(same, out=start[1:])
    run = np.cumsum(start) - 1
    heads = np.nonzero(start)[0]
    nr = len(heads)
    bad_run = np.zeros(nr, bool)
    link_bad = same & ((r0[1:] != r0[:-1]) | (cnt[1:] != cnt[:-1]) | (col[1:] <= col[:-1]))
    bad_run[run[1:][link_bad]] = True
    seen = np.bincount(D[heads], minlength=T)
    bad_run |= seen[D[heads]] > 1  # (a tile's vertices in two runs: its pairs would mix them)
    new_r, new_s = _starts_of(same, col, a, True)
    counts = []
    for new in (new_r, new_s):
        st = np.nonzero(new)[0]
        loop = np.diff(np.append(st, V)) > 1
        counts += [np.bincount(run[st], minlength=nr), np.bincount(run[st[loop]], minlength=nr)]
    good = np.nonzero(~bad_run)[0]
    h = heads[good]
    per_run = (D[h], r0[h], cnt[h], np.bincount(run, minlength=nr)[good], *(x[good] for x in counts))
    return bad_run[run], per_run


def _pair_sums(per_run, src_tiles, nb: int, T: int):
    """Per tile, the pairs' sums of :func:`_tile_runs`' destination tiles: bytes sent, received and copied on the
    tile, exchange-code patterns and loops (receive side on the destination tile, send side on the source tile),
    on-tile descriptor patterns and loops (a pair whose row lies on the destination tile).  A tile's pairs are its
    group's rows; the source rows lie on distinct tiles, so at most one of them is on the destination tile, and a
    row's sums are ranges added over the rows (each tile's group is a range of rows)."""
    z = [np.zeros(T, np.int64) for _ in range(7)]
    if per_run is None or len(per_run[0]) == 0:
        return z
    D, r0, gk, m, n_r, l_r, n_s, l_s = per_run
    R = len(src_tiles)
    row_of = np.full(T, -1, np.int64)
    row_of[src_tiles] = np.arange(R)
    lr = row_of[D]
    loc = ((lr >= r0) & (lr < r0 + gk)).astype(np.int64)  # (the destination tile's own row among its group's)
    cr = gk - loc  # (the pairs that cross)
    by = m * nb

    def on_dst(w):
        return np.bincount(D, weights=w, minlength=T).astype(np.int64)

    def on_src(w):  # w on every row of each tile's group, less its own row's: summed per row, put on its tile
        d = np.bincount(r0, weights=w, minlength=R + 1) - np.bincount(r0 + gk, weights=w, minlength=R + 1)
        per_row = np.cumsum(d[:R])
        if loc.any():
            per_row -= np.bincount(lr[loc > 0], weights=w[loc > 0], minlength=R)[:R]
        out = np.zeros(T, np.int64)
        out[src_tiles] = per_row.astype(np.int64)
        return out

    return [on_src(by), on_dst(cr * by), on_dst(loc * by), on_dst(cr * n_r) + on_src(n_s),
            on_dst(cr * l_r) + on_src(l_s), on_dst(loc * n_r), on_dst(loc * l_r)]


def _expanded_sums(c: Compiled, se, first, cnt, row: int, L: int, isz: int, e, k, sel, sm, dm):
    """:func:`_pair_sums`' seven per-tile sums for the vertices ``sel``, from their pieces written down (the regions:
    compile_rows' conditions) and the expanded path's counts; None where its packed key does not fit."""
    T = c.num_tiles
    v = np.nonzero(sel)[0]
    cv = cnt[v]
    nv = int(cv.sum())
    step = np.arange(nv, dtype=np.int64) - np.repeat(np.cumsum(cv) - cv, cv)
    ps = se[np.repeat(first[:-1][v], cv) + step]
    sk, dk = ps // row, np.repeat(k[v], cv)
    pd = np.repeat(e[v], cv) + step * L
    plan = CopyPlan(ps, pd, np.full(nv, L, np.int64), sm.tile[sk], dm.tile[dk], sk, dk)
    src_addr, dst_addr = tile_addr(c, sm, ps, sk), tile_addr(c, dm, pd, dk)
    cross = plan.src_tile != plan.dst_tile
    z = np.zeros(T, np.int64)
    counts = lc = (z, z)
    if cross.any():
        counts = exchange_code_counts(plan, cross, cross, src_addr, dst_addr, T)
        if counts is None:
            return None
    if not cross.all():
        lc = exchange_code_counts(plan, ~cross, None, src_addr, dst_addr, T)
        if lc is None:
            ps_, _pd, pc = code_patterns(plan, ~cross, src_addr, dst_addr, T)
            lc = (np.bincount(ps_, minlength=T), np.bincount(ps_[pc > 1], minlength=T))
    nb = L * isz
    return [np.bincount(plan.src_tile[cross], minlength=T) * nb, np.bincount(plan.dst_tile[cross], minlength=T) * nb,
            np.bincount(plan.dst_tile[~cross], minlength=T) * nb, *counts, *lc]


def _vertex_destinations(c: Compiled, dst, first: np.ndarray, L: int):
    """(destination element, destination mapping interval) of every vertex's first region, where each vertex's
    regions (at least one) land one after another inside one run of ``dst`` and one interval of its mapping;
    (None, None) otherwise."""
    if isinstance(dst, Regions):  # (its regions, the empty ones left out, are its runs: copy_plans._runs)
        rs, rl = dst.starts.astype(np.int64), dst.sizes.astype(np.int64)
        if int(rl.min()) <= 0:
            rs, rl = rs[rl > 0], rl[rl > 0]
    else:
        hit = c.caches.copy_runs.get(id(dst))
        rs, rl = (hit[1], hit[2]) if hit is not None and hit[0] == "runs" else dst.runs()
    if int(np.asarray(rl).sum()) != int(first[-1]) * L:
        return None, None
    vo = first[:-1] * L  # each vertex's offset in the destination view, and its length
    vl = np.diff(first) * L
    r_off = np.cumsum(rl) - rl
    ri = np.searchsorted(r_off, vo, side="right") - 1
    e = rs[ri] + (vo - r_off[ri])
    if np.any(vo + vl > r_off[ri] + rl[ri]):
        return None, None
    dm = dst.tensor.mapping
    k = interval_index(dm.start, e)
    if int(k.min()) < 0 or np.any(e + vl > dm.stop[k]):
        return None, None
    return e, k


def _effects(c: Compiled, info: ProgInfo, bout, bin_, local, counts, local_counts) -> None:
    """A gather's effects from its per-tile sums, in _compile_copy_fresh's order: exchange code ``counts``
    (patterns, loops), on-tile descriptors ``local_counts`` (None: no on-tile piece), the sync and the exchange
    step, the sync's control code."""
    T = c.num_tiles
    charge_exchange_code(c, info, "internalExchangeCode", *counts)
    if local_counts is not None:
        l_pat, l_loop = local_counts
        ut = np.nonzero(l_pat)[0]
        c.add_mem("copyDescriptor", ut, l_pat[ut] * cm.COPY_DESCRIPTOR_PER_PIECE + l_loop[ut] * cm.EXCHANGE_CODE_PER_LOOP)
    busy = cm.exchange_tile_cycles(c.target, bout, bin_, local)
    bytes_cross, bytes_local = int(bin_.sum()), int(local.sum())
    part = np.nonzero(bout + bin_ + local)[0]  # (every piece has a length: the tiles with pieces)
    c.add_template(info, K_SYNC, cm.internal_sync_cycles(c.target), ipu=c.all_ipus(), shared="internal_sync")
    c.add_template(info, K_XI, busy, bin_, bout, ipu=c.ipu_of_tiles(part), bytes_exchange=bytes_cross,
                   bytes_sram=2 * bytes_local)
    c.add_mem("controlCode", np.arange(T), cm.CONTROL_CODE_SYNC)
    info.code_bytes += T * cm.CONTROL_CODE_SYNC
