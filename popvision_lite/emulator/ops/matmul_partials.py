"""The K reduction's vertices of a K-split matmul (decision 0472), split from matmul.py by job.

Each output block is cut in ``pk`` even slices, one vertex per slice and row run, ordered by owner tile, or by the
tile's rank in the op's rotated tile order; matmul.py's ``reduce_k_partials`` and the convolution (ops/conv.py)
read them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from popvision_lite.emulator import mapping as M
from popvision_lite.emulator.ops import matmul_layouts as SL
from popvision_lite.emulator.ops.planners import split_even


@dataclass(frozen=True)
class BlockGather:
    """A partials gather described by its op, for the compile (compile.copy_gathers, decision 0480):
    ``vertex_block`` (per destination vertex, its block), ``depth`` (source regions per destination vertex,
    consecutive), ``owner`` (per block, its tiles: (blocks, width); no tile in two rows) and ``block_class`` (per
    block, its class: blocks of one class are one exchange on other tiles, column for column of ``owner``).
    ``first``: where vertices take different numbers of regions (an intermediate stage's row runs), vertex v's
    regions are ``first[v]:first[v + 1]`` (``depth`` is then unused)."""

    vertex_block: np.ndarray
    depth: int
    owner: np.ndarray
    block_class: np.ndarray
    first: np.ndarray | None = None


def k_partial_vertices_uneven(G, pk, pm, pn, msz, moff, nsz, noff, Mm, N, vt, layouts: dict | None = None,
                              rank: tuple[int, int] | None = None) -> dict:
    """k_partial_vertices for blocks of two sizes per dimension: each output block (g, im, in) of
    (msz[im], nsz[in]) elements cut in ``pk`` even slices and at every row boundary.  ``layouts``: a dict the caller
    keeps (an op context's) of the vertices on tile positions 0..len(vt)-1 and their order by output start, which
    depend on the split alone (a layer's matmuls of one shape differ in their tiles only): the tiles are then
    ``vt`` at those positions and only the order by tile is found again (what a layouts dict lacks is taken from, or
    kept in, the process's: ops/matmul_layouts.py).  Without ``layouts`` the vertices are
    built on the tiles themselves (the definition the layouts path is tested against).  ``rank``: (origin, span) of
    the op's tile order (:func:`_rank_of`): the vertices ordered by their tile's rank in it rather than by tile number
    (see :func:`k_partial_vertices`)."""
    if layouts is None:
        red, by_start = _k_partials_on_positions(G, pk, pm, pn, msz, moff, nsz, noff, Mm, N, len(vt), vt)
    else:
        key = ("k_partials", G, pk, pm, pn, Mm, N, len(vt)) + tuple(np.asarray(a, np.int64).tobytes()
                                                                      for a in (msz, moff, nsz, noff))
        hit = M.layout(layouts, key)
        if hit is None:
            hit = _kept(key, lambda: _k_partials_on_positions(G, pk, pm, pn, msz, moff, nsz, noff, Mm, N, len(vt)),
                        lambda h: sum(a.nbytes for a in h[0].values()) + h[1].nbytes)
            M.keep_layout(layouts, key, hit, sum(a.nbytes for a in hit[0].values()) + hit[1].nbytes)
        pos_red, by_start = hit
        vt = np.asarray(vt)
        if rank is not None and _ranks_are_positions(vt, rank):
            # each tile's rank is its position: the vertices' order is the layout's own, kept with it; the call
            # takes the tiles at the ordered positions (one gather) and shares every other array
            ordered = M.layout(layouts, key + ("by_position",))
            if ordered is None:
                ordered = _kept(key + ("by_position",), lambda: _frozen_ordered(pos_red, by_start),
                                lambda o: sum(a.nbytes for a in o.values()))
                M.keep_layout(layouts, key + ("by_position",), ordered, sum(a.nbytes for a in ordered.values()))
            out = dict(ordered, tile=vt[ordered["tile"]])
            return _with_blocks(out, G, pk, pm, pn, msz, moff, nsz, noff, vt)
        red = dict(pos_red, tile=vt[pos_red["tile"]])
    return _with_blocks(_ordered(red, _ranked(red["tile"], rank), by_start), G, pk, pm, pn, msz, moff, nsz, noff,
                        vt)


def _kept(key, make, nbytes):
    """What ``make()`` builds for ``key`` (a split's vertices on tile positions), kept for the process
    (ops/matmul_layouts.py: the graphs of a run build the same split, each with its own layouts dict)."""
    hit = SL.kept(key)
    if hit is None:
        hit = make()
        SL.keep(key, hit, nbytes(hit))
    return hit


def _frozen_ordered(pos_red: dict, by_start: np.ndarray) -> dict:
    """The vertices on positions ordered by position (their tile), read-only."""
    ordered = _ordered(pos_red, pos_red["tile"], by_start)
    for v in ordered.values():
        v.setflags(write=False)
    return ordered


def _ranks_are_positions(vt: np.ndarray, rank: tuple[int, int]) -> bool:
    """Whether tile position i holds the tile of rank i (an op on fewer tiles than the IPU has, from its rotating
    offset): then the order by rank is the order by position."""
    return len(vt) <= rank[1] and bool(np.array_equal(_ranked(vt, rank), np.arange(len(vt))))


def _ordered(red: dict, key: np.ndarray, by_start: np.ndarray) -> dict:
    """The vertices ``red`` ordered by ``key`` (stably) then output start, with ``by_start``: the ordered
    vertices in output order."""
    order = _by_tile_then(key, red["out_start"], by_start)
    out = {k: v[order] for k, v in red.items()}
    # the vertices in output order (their slices are disjoint: distinct starts), for C's mapping: where each of
    # the sorted vertices went, instead of sorting the reordered starts again
    at = np.empty_like(order)
    at[order] = np.arange(len(order))
    out["by_start"] = at[by_start]
    return out


def _with_blocks(out: dict, G, pk, pm, pn, msz, moff, nsz, noff, vt) -> dict:
    """``out`` with its output blocks (k_partial_vertices_uneven's ``blocks``: the multi-stage reduction's)."""
    owner = np.asarray(vt).reshape(G, pk, pm, pn)
    gb, ib, jb = np.unravel_index(np.arange(G * pm * pn), (G, pm, pn))
    out["blocks"] = dict(g=gb, moff=moff[ib], msz=msz[ib], noff=noff[jb], nsz=nsz[jb],
                         owner=owner.transpose(0, 2, 3, 1).reshape(G * pm * pn, pk))
    return out


def _k_partials_on_positions(G, pk, pm, pn, msz, moff, nsz, noff, Mm, N, T: int,
                             tiles=None) -> tuple[dict, np.ndarray]:
    """k_partial_vertices_uneven's vertices before their order by tile, on tile positions 0..T-1 (read-only
    arrays), or on ``tiles`` where given, and their stable order by output start."""
    vt = np.arange(T, dtype=np.int64) if tiles is None else np.asarray(tiles)
    owner = vt.reshape(G, pk, pm, pn)
    parts = {k: [] for k in ("tile", "len", "g", "row", "col", "out_start", "blk", "e")}
    for bm in np.unique(msz):
        for bn in np.unique(nsz):
            ims, ins = np.nonzero(msz == bm)[0], np.nonzero(nsz == bn)[0]
            gg, ii, jj = (x.ravel() for x in np.meshgrid(np.arange(G), ims, ins, indexing="ij"))
            be = int(bm) * int(bn)
            sl_off = np.array([a for a, _ in split_even(be, pk)], np.int64)
            cuts = np.union1d(sl_off, np.arange(0, be, int(bn)))
            seg_len = np.diff(np.append(cuts, be))
            seg_s = np.searchsorted(sl_off, cuts, side="right") - 1
            seg_r, seg_c = np.divmod(cuts, int(bn))
            nb, nseg = len(gg), len(cuts)
            vb = np.repeat(np.arange(nb), nseg)
            vs = np.tile(seg_s, nb)
            row = moff[ii][vb] + np.tile(seg_r, nb)
            col = noff[jj][vb] + np.tile(seg_c, nb)
            parts["tile"].append(owner[gg[vb], vs, ii[vb], jj[vb]])
            parts["len"].append(np.tile(seg_len, nb))
            parts["g"].append(gg[vb])
            parts["row"].append(row)
            parts["col"].append(col)
            parts["out_start"].append((gg[vb] * Mm + row) * N + col)
            parts["blk"].append(((gg * pm + ii) * pn + jj)[vb])
            parts["e"].append(np.tile(cuts, nb))
    red = {k: np.concatenate(v) for k, v in parts.items()}
    for v in red.values():
        v.setflags(write=False)
    by_start = np.argsort(red["out_start"], kind="stable")
    by_start.setflags(write=False)
    return red, by_start


def _stable_by(tile: np.ndarray) -> np.ndarray:
    """``np.lexsort((np.arange(n), tile))``: stable order by tile, by a radix sort where the tiles fit 16 bits."""
    small = len(tile) and int(tile.min()) >= 0 and int(tile.max()) < 1 << 16
    return np.argsort(tile.astype(np.uint16) if small else tile, kind="stable")


def _by_tile_then(tile: np.ndarray, key: np.ndarray, key_order: np.ndarray | None = None) -> np.ndarray:
    """``np.lexsort((key, tile))``: ordered by key, then stably by tile (two stable sorts are the stable sort by
    (tile, key)); ``key_order``: the stable order by key where the caller has it."""
    o = np.argsort(key, kind="stable") if key_order is None else key_order
    return o[_stable_by(tile[o])]


def _ranked(tile: np.ndarray, rank: tuple[int, int] | None) -> np.ndarray:
    """The key the reduce vertices are ordered by: their tile, or its rank ``(tile - origin) % span``."""
    if rank is None:
        return tile
    origin, span = rank
    return (tile - origin) % span


def k_partial_vertices(G, pk, pm, pn, bm, bn, Mm, N, vt, rank: tuple[int, int] | None = None) -> dict:
    """The reduce vertices of a K-split matmul (see reduce_k_partials), ordered by owner tile:
    per vertex its owner tile, output start (flat index in C), length, block, row and column.  ``rank``: (origin,
    span) of the op's tile order (:func:`_rank_of`): ordered by the owner tile's rank ``(tile - origin) % span``
    instead, stably.  On tiles that do not rotate that is the order by tile; on rotated tiles it is the order the
    unrotated op has, moved with its tiles, so the partials' gather (one vertex after another in this order) of
    every op of one split is the same exchange on rotated tiles, which the copy memo replays
    (compile.copies: its key takes tiles relative to the first source tile).  A tile's vertices keep their
    order either way; only the order between tiles changes."""
    be = bm * bn
    sl_off = np.array([s for s, _ in split_even(be, pk)], np.int64)
    cuts = np.union1d(sl_off, np.arange(0, be, bn))
    seg_len = np.diff(np.append(cuts, be))
    seg_s = np.searchsorted(sl_off, cuts, side="right") - 1  # slice (owner) of each segment
    seg_r, seg_c = np.divmod(cuts, bn)
    nb = G * pm * pn
    owner = vt.reshape(G, pk, pm, pn).transpose(0, 2, 3, 1).reshape(nb, pk)
    gb, ib, jb = np.unravel_index(np.arange(nb), (G, pm, pn))
    nseg = len(cuts)
    vb = np.repeat(np.arange(nb), nseg)
    vs = np.tile(seg_s, nb)
    row0 = ib[vb] * bm + np.tile(seg_r, nb)
    col0 = jb[vb] * bn + np.tile(seg_c, nb)
    red = dict(tile=owner[vb, vs], len=np.tile(seg_len, nb), g=gb[vb], row=row0, col=col0,
               out_start=(gb[vb] * Mm + row0) * N + col0, blk=vb, e=np.tile(cuts, nb))
    order = _stable_by(_ranked(red["tile"], rank))
    out = {k: v[order] for k, v in red.items()}
    out["blocks"] = dict(g=gb, moff=ib * bm, msz=np.full(nb, bm), noff=jb * bn, nsz=np.full(nb, bn), owner=owner)
    return out
