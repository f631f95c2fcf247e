"""On-tile kernel transposes described by their op and compiled per class of tiles (decision 0490).

A convolution's dX kernel is its forward kernel spatially flipped with its channels transposed, moved on the tiles
that hold it (``ops.conv.flip_transpose_kernel``): one copy of one-element pieces (3.1 M in the ResNet row, every
element its own piece), each on its own tile.  Its effects (``copies._compile_copy_fresh``: no exchange, the
on-tile bytes, the copy descriptors, the on-tile step) depend per tile only on that tile's pieces in tile-memory
order: their source positions (the kernel's elements on the tile, in flat order) and destination positions (their
places among the result's elements on the tile).  The kernel is laid out in blocks dealt round the tiles
(``ops.conv.map_kernel``: block j on ``tiles[j % len(tiles)]``), so a tile's blocks are fixed by its place p among
the tiles, and two tiles whose blocks lie the same way relative to their first block (p mod the block columns, the
first block row's place within its kernel position, the number of blocks) hold the same pieces up to a shift of
rows, columns and kernel positions, which changes neither order: the same copy-descriptor patterns.  The op says so
(``ops.conv.KernelTranspose``, set on the ``Copy`` as ``transpose``); the compile forms one representative tile's
pieces per class, counts their patterns with the expanded path's own function
(``copy_plans.exchange_code_counts``) and gives every tile of the class the counts.

What the compile checks (exact, cheap): the source and destination mappings are the ones the op made (by identity:
the kernel's ``by_blocks`` layout, the result's on-tile image of it), the source index is the flipped index (by
value), the shapes, and that the expanded path would count with its packed key (else it counts per pattern and this
path gives way).  With outlining on, the expanded pieces are still cut for the copy's signature
(``copy_memo.plan_signature``).  Any other copy takes the expanded path."""

from __future__ import annotations

import types

import numpy as np

from popvision_lite.emulator import cost_model as cm
from popvision_lite.emulator.compile.compiled import Compiled, CopyPlan, ProgInfo
from popvision_lite.emulator.compile.copy_plans import copy_pieces, exchange_code_counts
from popvision_lite.emulator.graph import TensorView
from popvision_lite.emulator.ops.conv import KernelTranspose


def compile_transpose(c: Compiled, info: ProgInfo, t: KernelTranspose, on_tile_step) -> bool:
    """_compile_copy_fresh's effects for a kernel transpose its op described (:class:`KernelTranspose`): per tile
    the on-tile bytes and the copy descriptors of its class's representative, then the on-tile step
    (``on_tile_step``: copies._on_tile_step).  False, with nothing done, where the description does not hold."""
    prog = info.prog
    blocks = _tile_blocks(c, prog, t)
    if blocks is None:
        return False
    p, count, cls, rep = blocks
    T = c.num_tiles
    gi, go = t.block
    tiles = np.asarray(t.tiles, np.int64)
    m = count * (gi * go)  # elements on tiles[p]
    n = prog.src.size
    # the expanded path's packed key (source positions up to the fullest tile's, piece indices up to n) must fit
    if 2 * max(T - 1, 1).bit_length() + max(int(m.max()) - 1, 1).bit_length() + (n - 1).bit_length() > 62:
        return False
    n_pat = np.zeros(T, np.int64)
    n_loop = np.zeros(T, np.int64)
    for ci, r in enumerate(rep):
        got = _representative_counts(t, int(p[r]), int(count[r]), int(tiles[p[r]]), T)
        if got is None:
            return False
        on = tiles[p[cls == ci]]
        n_pat[on], n_loop[on] = got
    if c.outline:  # outlining signs the expanded pieces (copy_memo.plan_signature): they are cut for it
        c.copy_plans[info.prog_id] = copy_pieces(prog.src, prog.dst, c.caches.copy_runs)
    local = np.zeros(T, np.int64)
    local[tiles[p]] = m * prog.src.tensor.itemsize
    # the effects, in _compile_copy_fresh's order: the copy descriptors (_copy_descriptors), then the on-tile step
    ut = np.nonzero(n_pat)[0]
    c.add_mem("copyDescriptor", ut, n_pat[ut] * cm.COPY_DESCRIPTOR_PER_PIECE + n_loop[ut] * cm.EXCHANGE_CODE_PER_LOOP)
    z = np.zeros(T, np.int64)
    busy = cm.exchange_tile_cycles(c.target, z, z.copy(), local)
    on_tile_step(c, info, types.SimpleNamespace(src_tile=tiles[p]), busy, int(local.sum()))
    return True


def _tile_blocks(c: Compiled, prog, t: KernelTranspose):
    """(the places p of the kernel's tiles, the blocks on each, each one's class, each class's first place) where the
    copy is the transpose ``t`` describes and the expanded path would give it one-element pieces, else None."""
    src, dst = prog.src, prog.dst
    if not isinstance(src, TensorView) or not isinstance(dst, TensorView) or src._index is None:
        return None
    W, WT = src.tensor, dst.tensor
    kk, cin, cout = t.k * t.k, t.cin, t.cout
    gi, go = t.block
    if W.mapping is not t.src_mapping or WT.mapping is not t.dst_mapping or dst.contiguous != (0, WT.size):
        return None
    if tuple(W.shape) != (kk * cin, cout) or tuple(WT.shape) != (kk * cout, cin) or cin < 2 or cout < 2:
        return None  # (one input or output channel: runs of several elements, cut by the expanded path)
    if cin % gi or cout % go or W.dtype != WT.dtype:
        return None
    tiles = np.asarray(t.tiles, np.int64)
    nb = (kk * cin // gi) * (cout // go)
    if len(tiles) == 0 or int(tiles.min()) < 0 or int(tiles.max()) >= c.num_tiles or len(tiles) > nb:
        return None
    if int(np.bincount(tiles).max()) > 1 or not np.array_equal(src._index, t.index):
        return None
    ntl, nbc, rpb = len(tiles), cout // go, cin // gi
    p = np.arange(ntl, dtype=np.int64)
    count = (nb - p + ntl - 1) // ntl  # blocks p, p + ntl, ... on tiles[p]
    # a tile's blocks relative to its first: block rows and columns on (the first's column u = p mod the columns
    # decides the carries), and the first block row's place among its kernel position's rows; then the count
    u = p % nbc
    j = np.arange(int(count.max()), dtype=np.int64) * ntl
    rel = np.where(j[None, :] < (count * ntl)[:, None], ((u[:, None] + j) // nbc) * nbc + (u[:, None] + j) % nbc - u[:, None],
                   -1)
    key = np.concatenate([((p // nbc) % rpb)[:, None], count[:, None], rel], axis=1)
    _, rep, cls = np.unique(key, axis=0, return_index=True, return_inverse=True)
    return p, count, cls.reshape(-1), rep


def _representative_counts(t: KernelTranspose, p: int, count: int, tile: int, T: int):
    """(copy-descriptor patterns, loops) on ``tile`` (place ``p``, ``count`` blocks): its pieces in tile-memory order,
    counted by copy_plans.exchange_code_counts as the expanded path counts them."""
    kk, cin, cout = t.k * t.k, t.cin, t.cout
    gi, go = t.block
    k = p + np.arange(count, dtype=np.int64) * len(t.tiles)
    a, b = k // (cout // go), k % (cout // go)
    r = (a[:, None, None] * gi + np.arange(gi)[None, :, None]) + np.zeros(go, np.int64)[None, None, :]
    co = np.broadcast_to(b[:, None, None] * go + np.arange(go)[None, None, :], r.shape)
    e = (r * cout + co).ravel()
    o = np.argsort(e, kind="stable")  # the kernel's elements on the tile in flat order: tile-memory order
    r, co = r.ravel()[o], co.ravel()[o]
    s, ci = np.divmod(r, cin)
    f = ((kk - 1 - s) * cout + co) * cin + ci  # each one's element of the result (flipped_kernel_index inverted)
    rank = np.empty(len(f), np.int64)
    rank[np.argsort(f, kind="stable")] = np.arange(len(f), dtype=np.int64)  # its place on the tile
    m = len(f)
    on = np.full(m, tile, np.int64)
    one = np.ones(m, np.int64)
    plan = CopyPlan(e[o], f, one, on, on)
    counts = exchange_code_counts(plan, np.ones(m, bool), None, np.arange(m, dtype=np.int64), rank, T)
    if counts is None:
        return None
    return int(counts[0][tile]), int(counts[1][tile])
