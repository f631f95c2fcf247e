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
from popvision_lite.emulator.compile.compiled import K_SYNC, K_XI, Compiled, ProgInfo
from popvision_lite.emulator.compile.copy_plans import (
    charge_exchange_code,
    code_patterns,
    copy_pieces,
    exchange_code_counts,
)
from popvision_lite.emulator.graph import Regions, TensorView
from popvision_lite.emulator.ops.matmul_partials import BlockGather


def usable(c: Compiled, prog, g: BlockGather) -> bool:
    """Whether the compact compile applies: one IPU, a Regions source whose regions are the vertices'
    ``depth`` pieces, a whole destination, and blocks on distinct tiles."""
    src, dst = prog.src, prog.dst
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


def compile_gather(c: Compiled, info: ProgInfo, g: BlockGather) -> bool:
    """_compile_copy_fresh's effects for a gather its op described (:class:`BlockGather`): per class, the
    representative block's per-tile sums, moved to every block of the class.  False, with nothing done, where the
    description cannot be used (the copy then takes the expanded path)."""
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
    # the effects, in _compile_copy_fresh's order
    charge_exchange_code(c, info, "internalExchangeCode", n_pat, n_loop)
    if any_local:
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
