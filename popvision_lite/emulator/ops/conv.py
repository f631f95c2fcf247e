"""Convolution on the emulator graph as poplin runs it: each tile receives its input region with the
halo once and its ConvPartialnx1 vertex reads the k x k windows in place (no im2col block).

Layout: NHWC activations stored as rows of channels ``(N*H*W, C)``; the kernel is ``(k*k*Ci, Co)``
with row ``(ky*k + kx)*Ci + ci`` (the im2col column order, ``pooling.conv_windows``).

Plan (a reduced form of poplin's ``ConvPlan`` search, ``lib/poplin/ConvPlan.cpp``): the output is
partitioned over the tiles by output rows - the ``N*OH`` (image, output row) pairs cut into ``pr``
contiguous ranges of ceil / floor size, as poplin splits the batch and the field's height - by output
channels into ``pco`` and by input channels into ``pci`` equal parts of whole AMP groups.  The field's
width is not split.  Candidates: every pair of powers of two ``pci``, ``pco`` dividing the input / output
groups, with ``pr = min(N*OH, tiles // (pci * pco))``; the chosen one minimises the fullest tile's
ConvPartialnx1 estimate plus its exchange receive time (input rows with halo, kernel block and, with an
input-channel split, the partial slices it reduces, at the target's exchange bytes per cycle) plus that
reduction's ReduceAdd estimate, among those whose per-tile blocks fit ``available_memory_proportion`` of
the tile (the smallest footprint when none fits).

Programs: one exchange of every tile's input rows (the rows its output rows read, halo included, each
image's rows once, the tile's channel slice of them; padding is never materialised: the work lists skip
it), one exchange of every tile's kernel block, then one compute set of one ConvPartialnx1 supervisor
vertex per tile writing its output block in the output type (FP32 partials inside the vertex, as the
matmul's AMP) or, with an input-channel split, partials (ctx.partials_dtype) that the matmul's K-partials reduction sums
on the output's tiles.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from popvision_lite.emulator import mapping as M
from popvision_lite.emulator import programs as P
from popvision_lite.emulator.codelets.poplin_conv import (
    CONV_PARTIAL_NX1,
    GEOMETRY,
    ConvShape,
    split_parts,
    vertex_tile_cycles,
)
from popvision_lite.emulator.estimators.poplin import amp_params, reduce_add_cycles
from popvision_lite.emulator.graph import TensorView
from popvision_lite.emulator.ops.common import _nbytes, flat_view, materialize
from popvision_lite.emulator.ops.context import OpContext, View
from popvision_lite.emulator.ops.matmul import k_partial_vertices_uneven, reduce_k_partials
from popvision_lite.errors import EmulatorError


def transposed_shape(n: int, h: int, w: int, ci: int, co: int, k: int, stride: int, pad: int) -> ConvShape:
    """The convolution that gives dX of a (n, h, w, ci) -> co convolution (k, stride, pad) from its dY:
    dY dilated by the stride, padded ``k - 1 - pad`` before and ``k - 1 - pad`` plus the rows the forward
    stride left unread after, convolved with the flipped, transposed kernel (co -> ci channels)."""
    oh = (h + 2 * pad - k) // stride + 1
    ow = (w + 2 * pad - k) // stride + 1
    extra = (h + 2 * pad - k) % stride
    if (w + 2 * pad - k) % stride != extra or k - 1 - pad < 0:
        raise EmulatorError(f"transposed convolution of {h}x{w} k {k} stride {stride} pad {pad}: unsupported")
    return ConvShape(n, oh, ow, co, ci, k, 1, k - 1 - pad, k - 1 - pad + extra, stride)


@dataclass(frozen=True)
class HaloConvPlan:
    pr: int  # output-row parts
    pco: int  # output-channel parts
    pci: int  # input-channel parts (partials reduced on the output's tiles when > 1)
    compute_cycles: int  # the fullest tile's vertex estimate (+ its share of the partials reduction)
    exchange_cycles: int  # the fullest tile's receive time (input rows, kernel block, partials)
    tile_bytes: int  # the fullest tile's input, kernel, output / partials blocks
    fits: bool

    def describe(self, s: ConvShape) -> str:
        return (f"ConvPartialnx1 {s.k}x{s.k}/{s.stride}" + (f" over an input dilated x{s.dil}" if s.dil > 1 else "")
                + f": {s.out_rows} output rows in {self.pr} parts x {s.co} output "
                f"channels in {self.pco} x {s.ci} input channels in {self.pci}"
                + (" (partials reduced)" if self.pci > 1 else "")
                + f"; input rows with halo exchanged once per tile; est. {self.compute_cycles} compute + "
                f"{self.exchange_cycles} exchange cycles, {self.tile_bytes} B per tile"
                + ("" if self.fits else " (over available_memory_proportion)"))


def powers_dividing(n: int, limit: int) -> list[int]:
    out, p = [], 1
    while p <= limit and n % p == 0:
        out.append(p)
        p *= 2
    return out


def _candidate(s: ConvShape, pci: int, pco: int, tiles: int, fp16: bool, target, usable_bytes: float,
               pb: int = 4) -> HaloConvPlan:
    """The cost of one partition: the fullest tile's ConvPartialnx1 estimate and exchange receive time,
    and with an input-channel split the partials reduction (each output tile gathers pci - 1 partial
    slices of its block, ``pb`` bytes an element (poplin's partialsType), and runs poplin's ReduceAdd over
    them, estimators.poplin.reduce_add_cycles)."""
    item = 2 if fp16 else 4
    xbytes = float(target.em["exchange_bytes_per_cycle"])
    pr = max(1, min(s.out_rows, tiles // (pci * pco)))
    cop, sk = s.co // pco, dataclasses.replace(s, ci=s.ci // pci)
    sz, off = split_parts(s.out_rows, pr)
    nr = int(sz[0])
    in_el = max(sk.input_elems(int(o), nr) for o in off[:min(len(off), s.oh + 1)])
    w_el = s.k * s.k * sk.ci * cop
    out_el = nr * s.ow * cop
    comp = vertex_tile_cycles(sk, 0, nr, cop, fp16, target)
    recv = (in_el + w_el) * item
    byts = (in_el + w_el) * item + out_el * (pb if pci > 1 else item)
    if pci > 1:
        slice_el = -(-out_el // pci)
        recv += (pci - 1) * slice_el * pb
        byts += pci * slice_el * pb
        comp += reduce_add_cycles(slice_el, pci, item, pb, int(target.threads_per_tile))
    return HaloConvPlan(pr, pco, pci, int(comp), int(-(-recv // xbytes)), int(byts), byts <= usable_bytes)


def plan_conv(s: ConvShape, target, fp16: bool, tiles: int, usable_bytes: float, partials_bytes: int = 4) -> HaloConvPlan:
    """The partition of a convolution over ``tiles`` tiles (see the module docstring); ``partials_bytes``:
    poplin's partialsType of an input-channel split's partials (4 float, 2 half)."""
    return choose_channel_split(s, fp16, target, tiles, lambda pci, pco: _candidate(
        s, pci, pco, tiles, fp16, target, usable_bytes, partials_bytes))


def choose_channel_split(s: ConvShape, fp16: bool, target, tiles: int, candidate):
    """The plan among ``candidate(pci, pco)`` for every power-of-two split of the input and output channels
    in whole AMP groups (pci x pco <= tiles): the fastest (compute + exchange cycles) of those that fit,
    else the smallest per tile; ties to fewer splits."""
    amp = amp_params(fp16, target)
    gi = s.ci // amp["in_group"] if s.ci % amp["in_group"] == 0 else 1
    go = s.co // amp["out_group"] if s.co % amp["out_group"] == 0 else 1
    cands = [candidate(pci, pco) for pci in powers_dividing(gi, tiles) for pco in powers_dividing(go, tiles // pci)]
    fitting = [c for c in cands if c.fits]
    if fitting:
        return min(fitting, key=lambda c: (c.compute_cycles + c.exchange_cycles, c.pci, c.pco))
    return min(cands, key=lambda c: (c.tile_bytes, c.pci, c.pco))


def ref_conv2d(x, w, s: ConvShape) -> np.ndarray:
    """Numpy reference: (N*OH*OW, Co) of x (N*H*W, Ci) with kernel w (k*k*Ci, Co), FP32."""
    xd = np.zeros((s.n, s.he, s.we, s.ci), np.float32)
    xd[:, ::s.dil, ::s.dil] = np.asarray(x, np.float32).reshape(s.n, s.h, s.w, s.ci)
    xp = np.pad(xd, ((0, 0), (s.pad, s.upper), (s.pad, s.upper), (0, 0)))
    kern = np.asarray(w, np.float32).reshape(s.k, s.k, s.ci, s.co)
    out = np.zeros((s.n, s.oh, s.ow, s.co), np.float32)
    for ky in range(s.k):
        for kx in range(s.k):
            xs = xp[:, ky:ky + s.stride * (s.oh - 1) + 1:s.stride, kx:kx + s.stride * (s.ow - 1) + 1:s.stride]
            out += xs @ kern[ky, kx]
    return out.reshape(-1, s.co)


@dataclass(frozen=True, eq=False)
class KernelTranspose:
    """An on-tile transpose of a kernel laid out in blocks (``mapping.by_blocks``, as :func:`map_kernel` lays it out;
    ``Copy.transpose``, decision 0490): the copy
    takes ``flipped_kernel_index(k, cin, cout)`` (``index``) of a (k*k*cin, cout) kernel whose mapping
    (``src_mapping``) is ``mapping.by_blocks`` of ``block`` blocks on ``tiles`` (block j on ``tiles[j % len]``), into
    the whole (k*k*cout, cin) result whose mapping (``dst_mapping``) puts each element on its source element's tile.
    The op made both mappings; the compile checks them by identity and the index by value
    (compile/copy_windows.py)."""

    k: int
    cin: int
    cout: int
    block: tuple
    tiles: np.ndarray
    src_mapping: object
    dst_mapping: object
    index: np.ndarray


def map_kernel(ctx: OpContext, W, ci: int, co: int, fp16: bool) -> None:
    """Lay out a convolution kernel (k*k*Ci, Co) nothing has used yet as poplin's createWeights does: in
    blocks of one AMP input group x one output group (16 x 16 for fp16), each block whole on one tile
    (lib/poplin/Convolution.cpp createWeights / mapActivationsOrWeights: grain = in x out channels per
    group, at least 256 bytes a tile), blocks spread over the tiles in order; channels that are not whole
    groups: linear, as before."""
    amp = amp_params(fp16, ctx.target)
    gi, go = int(amp["in_group"]), int(amp["out_group"])
    if ci % gi or co % go:
        ctx.graph.set_mapping(W, ctx.linear_mapping(W.size, grain=4))
    else:
        nb = (W.shape[0] // gi) * (co // go)
        n = ctx.n_tiles
        tiles = ctx.tiles_array(rotate=nb if nb < n else 0)[:min(nb, n)]
        ctx.graph.set_mapping(W, M.by_blocks(W.shape, (gi, go), tiles))
    ctx.mark_used(W)


def flipped_kernel_index(k: int, cin: int, cout: int) -> np.ndarray:
    """Flat indices into a (k*k*cin, cout) kernel of its spatially flipped transpose (k*k*cout, cin):
    block s' of the result is block (k*k - 1 - s') of the kernel, transposed."""
    w = np.arange(k * k * cin * cout, dtype=np.int64).reshape(k * k, cin, cout)
    return np.ascontiguousarray(w[::-1].transpose(0, 2, 1).reshape(k * k * cout, cin))


def flip_transpose_kernel(ctx: OpContext, w, k: int, cin: int, cout: int, name: str):
    """The kernel of a convolution's dX: ``w`` (k*k*cin, cout) spatially flipped with its channels
    transposed, (k*k*cout, cin), as poplin's weightsTransposeChansFlipXY makes it (lib/poplin/
    Convolution.cpp): the transposition is done on the tiles that hold the kernel (a partial transpose
    that "avoids exchange"), so each element of the result sits on the tile of its source element and
    the dX convolution then exchanges whole blocks; an on-tile copy here (copy descriptors and on-tile
    copy cycles; poplin uses Transpose vertices, not modelled separately)."""
    fp16 = ctx.dtype == "float16"
    op = ctx.begin_op(name, "rearrange", min_bytes=2 * _nbytes(w))
    (W,) = record_plan_and_operands(ctx, op, "kernel flipped and transposed on the tiles that hold it", (w, "w"))
    if not ctx.is_used(W):
        map_kernel(ctx, W, cin, cout, fp16)
    idx = flipped_kernel_index(k, cin, cout).ravel()
    lay = M.dealt_blocks(W.mapping)  # (block shape, tiles) of a kernel laid out in blocks, as map_kernel lays it out
    if lay is not None and (len(lay[0]) != 2 or cin % lay[0][0] or cout % lay[0][1]):
        lay = None  # (blocks across kernel positions: no segment of gi elements from one block)
    # each element of the result on its source element's tile: runs of one tile in the result's order (from the
    # kernel's blocks, a tile per gi elements, where map_kernel laid it out; else a tile per element)
    seg = 1 if lay is None else lay[0][0]
    tile = W.mapping.tile_of(idx) if lay is None else _flipped_block_tiles(k, cin, cout, *lay)
    brk = np.flatnonzero(np.diff(tile)) + 1
    starts = np.concatenate([[0], brk]).astype(np.int64)
    stops = np.concatenate([brk, [len(tile)]]).astype(np.int64)
    WT = ctx.variable(op, (k * k * cout, cin), W.dtype, op=op,
                      mapping=M.intervals(tile[starts], starts * seg, stops * seg))
    ctx.mark_used(WT)
    # (with two channels or more each way no two neighbours of the index are neighbours in the kernel: flat_view's
    # endpoint, with no scan for runs)
    src = TensorView(W, idx, (len(idx),)) if cin > 1 and cout > 1 else flat_view(W, idx)
    cp = P.Copy(src, WT.whole(), name=f"{op}/transpose_on_tile", op=op)
    if lay is not None:  # (blocks dealt round tiles: the compile's classes of tiles)
        idx.setflags(write=False)
        cp.transpose = KernelTranspose(k, cin, cout, lay[0], lay[1], W.mapping, WT.mapping, idx)
    ctx.add(cp)
    return WT


def _flipped_block_tiles(k: int, cin: int, cout: int, block: tuple, tiles: np.ndarray) -> np.ndarray:
    """The tile of each gi-element segment (one kernel position, output channel and input-channel block) of a
    kernel's flipped transpose (flipped_kernel_index's order), the kernel laid out by map_kernel in ``block``
    blocks on ``tiles`` (mapping.by_blocks: block j on ``tiles[j % len(tiles)]``): a segment's elements all come
    from one block, the block of its input-channel rows and output-channel column."""
    gi, go = block
    kk, rpb = k * k, cin // gi
    s = np.arange(kk - 1, -1, -1, dtype=np.int64)[:, None, None]  # (the result's position s' reads kernel position s)
    a = s * rpb + np.arange(rpb, dtype=np.int64)[None, None, :]  # block row
    b = (np.arange(cout, dtype=np.int64) // go)[None, :, None]  # block column
    return np.asarray(tiles, np.int64)[(a * (cout // go) + b) % len(tiles)].ravel()


def tile_partition(ctx: OpContext, s: ConvShape, plan, order: tuple[str, str, str]):
    """The tiles of a halo convolution's plan (``pr`` output-row parts x ``pci`` x ``pco`` channel parts, placed
    from the op's rotating start tile) and each part's output rows: (T, tiles, row-part sizes, row-part
    offsets, (index of each tile along ``order``'s three splits))."""
    parts = {"pr": plan.pr, "pci": plan.pci, "pco": plan.pco}
    T = plan.pr * plan.pci * plan.pco
    n = ctx.n_tiles
    tiles = ctx.tiles_array(rotate=T if T < n else 0)[:T]
    rsz, roff = split_parts(s.out_rows, plan.pr)
    return T, tiles, rsz, roff, np.unravel_index(np.arange(T), tuple(parts[k] for k in order))


def record_plan_and_operands(ctx: OpContext, op: str, desc: str, *operands):
    """Record the op's plan text (the graph's op and the ops record) and return its operands as tensors: a
    view (``(x, name)`` pairs) is materialised once."""
    ctx.graph.add_op(op, plan=desc)
    ctx.records[-1]["plan"] = desc
    return tuple(materialize(ctx, x, name, op) if isinstance(x, View) else x for x, name in operands)


def exchange_input_rows(ctx: OpContext, X, s: ConvShape, tiles, r0, nr, pci: int, ik, op: str):
    """Each tile's input rows with halo (its channel slice: part ``ik[t]`` of ``pci``) for its output rows
    ``r0[t]``, ``nr[t]``, received once (one exchange into a buffer laid out tile by tile); returns the
    buffer and each tile's (start, size) in it."""
    # (the source regions in int32 where X has fewer than 2^31 elements, read-only: the field takes them as they are)
    dt = np.int32 if X.size < 2**31 else np.int64
    starts, sizes, in_sizes, regions = tiles_input_regions(s, r0, nr, pci, ik, vertices=True, dtype=dt)
    in_start = np.cumsum(in_sizes) - in_sizes
    xin = ctx.variable(f"{op}/input_with_halo", (int(in_sizes.sum()),), X.dtype,
                       mapping=M.intervals(tiles, in_start, in_start + in_sizes), op=op)
    cp = P.Copy(X.regions(starts, sizes), xin.whole(), name=f"{op}/exchange_input", op=op, broadcast=True)
    # the destination units and their blocks, as the op knows them: a tile (one interval of xin) per unit, its
    # regions, labelled by what they depend on (channel part, output rows): the tiles of one (ci part, row part)
    # take the same regions (copy_broadcasts.broadcast_plan checks them, decision 0479)
    m = s.out_rows + 1
    ctx.add(copy_units(cp, regions, (np.asarray(ik, np.int64) * m + r0) * m + nr))
    return xin, in_start, in_sizes


def copy_units(cp, vertices: np.ndarray, label: np.ndarray):
    """Mark a broadcast copy's destination units for the compile (``cp.units``, read by copy_broadcasts.
    broadcast_plan, decision 0479): per destination interval in copy order, how many source vertices it takes
    (regions or windows) and a label equal for intervals that take the same vertices.  The compile checks them
    against the vertices; they change no result.  Returns ``cp``."""
    cp.units = (np.asarray(vertices, np.int64), np.asarray(label, np.int64))
    return cp


def tiles_input_regions(s: ConvShape, r0, nr, pci: int, ik, vertices: bool = False, dtype=np.int64):
    """:func:`input_regions` of every tile at once (tile ``t``: output rows ``r0[t]``, ``nr[t]`` (> 0), channel
    part ``ik[t]``): (the tiles' starts one tile after another, their sizes, each tile's elements, and with
    ``vertices`` each tile's regions).  The same arrays as concatenating :func:`input_regions` tile by tile,
    without a Python pass per tile and image.  ``dtype`` np.int32 (x with fewer than 2^31 elements): the starts
    and sizes read-only int32, as a field holds them (with an input-channel split the sizes one broadcast size)."""
    r0, nr, ik = (np.asarray(a, np.int64).reshape(-1) for a in (r0, nr, ik))
    # the images each tile's output rows cross: one (tile, image) segment each, in tile then image order
    b0, b1 = r0 // s.oh, (r0 + nr - 1) // s.oh
    nseg = b1 - b0 + 1
    tile = np.repeat(np.arange(len(r0)), nseg)
    b = b0[tile] + (np.arange(int(nseg.sum())) - np.repeat(np.cumsum(nseg) - nseg, nseg))
    y0 = np.maximum(r0[tile] - b * s.oh, 0)
    y1 = np.minimum(s.oh, r0[tile] + nr[tile] - b * s.oh)
    lo = np.maximum(0, y0 * s.stride - s.pad)  # dilated coordinates (ConvShape.input_rows)
    hi = np.minimum(s.he, (y1 - 1) * s.stride - s.pad + s.k)
    first = -(-lo // s.dil)
    stop = np.maximum(first, np.where(hi > lo, (hi - 1) // s.dil + 1, 0))
    px0, npx = (b * s.h + first) * s.w, (stop - first) * s.w
    if pci == 1:
        starts, sizes, owner = px0 * s.ci, npx * s.ci, tile
        regions = nseg
        per_tile = np.bincount(owner, weights=sizes, minlength=len(r0)).astype(np.int64)
    else:  # every pixel of a segment, the tile's channel slice of it: pixel j of the segments (all of them in
        # order) starts at its segment's first pixel's channel slice plus (j - the segment's first j) pixels, one
        # repeat of a per-segment base and one arange (no per-pixel segment, owner or gather)
        cik = s.ci // pci
        n_px = int(npx.sum())
        base = px0 - (np.cumsum(npx) - npx)
        base *= s.ci
        base += ik[tile] * cik
        starts = np.arange(n_px, dtype=dtype)
        starts *= s.ci
        starts += np.repeat(base.astype(dtype, copy=False), npx)
        sizes = np.full(n_px, cik, np.int64) if dtype == np.int64 else np.broadcast_to(np.int32(cik), (n_px,))
        regions = np.bincount(tile, weights=npx, minlength=len(r0)).astype(np.int64)
        per_tile = regions * cik
    out = starts.astype(dtype, copy=False), sizes.astype(dtype, copy=False), per_tile
    if dtype != np.int64:
        out[0].setflags(write=False)
        out[1].setflags(write=False)
    return (*out, regions) if vertices else out


def input_regions(s: ConvShape, r0: int, nr: int, pci: int, ik: int) -> tuple[np.ndarray, np.ndarray]:
    """(starts, sizes) in x (N*H*W, Ci) of a tile's input: the rows its output rows read, halo included,
    each image's rows once; with an input-channel split, the tile's channel slice of every pixel."""
    cik = s.ci // pci
    starts, sizes = [], []
    for b, lo, hi in s.input_rows(r0, nr):
        first = (b * s.h + lo) * s.w
        if pci == 1:
            starts.append(np.array([first * s.ci]))
            sizes.append(np.array([(hi - lo) * s.w * s.ci]))
        else:
            px = first + np.arange((hi - lo) * s.w, dtype=np.int64)
            starts.append(px * s.ci + ik * cik)
            sizes.append(np.full(len(px), cik, np.int64))
    return np.concatenate(starts).astype(np.int64), np.concatenate(sizes).astype(np.int64)


def conv2d(ctx: OpContext, x, w, s: ConvShape, name: str):
    """y (N*OH*OW, Co) = x (N*H*W, Ci) convolved with w (k*k*Ci, Co): the plan of :func:`plan_conv`,
    each tile's input rows with halo exchanged once, one ConvPartialnx1 vertex per tile, and with an
    input-channel split the partials (ctx.partials_dtype) reduced on the output's tiles (the matmul's K reduction)."""
    if tuple(x.shape) != (s.n * s.h * s.w, s.ci) or tuple(w.shape) != (s.k * s.k * s.ci, s.co):
        raise EmulatorError(f"conv '{name}': shapes {tuple(x.shape)} * {tuple(w.shape)} do not match {s}")
    fp16 = ctx.dtype == "float16"
    R = s.n * s.oh * s.ow
    op = ctx.begin_op(name, "conv", min_bytes=_nbytes(x) + _nbytes(w) + R * s.co * (2 if fp16 else 4))
    ntiles = ctx.n_tiles
    plan = plan_conv(s, ctx.target, fp16, ntiles, ctx.available_memory_proportion * ctx.target.sram_bytes_per_tile,
                     2 if ctx.partials_dtype == "float16" else 4)
    X, W = record_plan_and_operands(ctx, op, plan.describe(s), (x, "in"), (w, "w"))
    if not ctx.is_used(W):  # a weight nothing has used yet: poplin's createWeights layout
        map_kernel(ctx, W, s.ci, s.co, fp16)
    pci, pr, pco = plan.pci, plan.pr, plan.pco
    # tiles in the matmul's (k part, m part, n part) order
    T, tiles, rsz, roff, (ik, ir, ic) = tile_partition(ctx, s, plan, ("pci", "pr", "pco"))
    cop, cik = s.co // pco, s.ci // pci
    xin, in_start, in_sizes = exchange_input_rows(ctx, X, s, tiles, roff[ir], rsz[ir], pci, ik, op)
    # --- kernel blocks: per tile its k*k (cik, cop) windows, kernel position outermost
    kk, blk = s.k * s.k, s.k * s.k * cik * cop
    kpos = np.tile(np.arange(kk), T)
    worg = np.stack([kpos * s.ci + np.repeat(ik, kk) * cik, np.repeat(ic, kk) * cop], 1)
    wbuf = ctx.variable(f"{op}/kernel_blocks", (T * blk,), W.dtype,
                        mapping=M.intervals(tiles, np.arange(T) * blk, (np.arange(T) + 1) * blk), op=op)
    # (a broadcast: the tiles of one (ci part, co part) take the same k x k windows; decision 0445; its units, a
    # tile of k x k windows each, labelled by (ci part, co part): decision 0479)
    ctx.add(copy_units(P.Copy(W.windows((cik, cop), worg), wbuf.whole(), name=f"{op}/broadcast_kernel", op=op,
                              broadcast=True), np.full(T, kk), ik * pco + ic))
    # --- the vertices write the output blocks, or partials (pci, R, Co) reduced afterwards
    shapes = np.stack([np.ones(T, np.int64), rsz[ir] * s.ow, np.full(T, cop)], 1)
    origins = np.stack([ik, roff[ir] * s.ow, ic * cop], 1)
    if pci > 1:
        target = ctx.variable(f"{op}/partials", (pci, R, s.co), ctx.partials_dtype,
                              mapping=M.by_windows((pci, R, s.co), shapes, origins, tiles), op=op)
        red = k_partial_vertices_uneven(1, pci, pr, pco, rsz * s.ow, roff * s.ow, np.full(pco, cop),
                                         np.arange(pco) * cop, R, s.co, tiles)
        o = red["by_start"]  # (k_partial_vertices_uneven: the vertices by output start)
        Y = ctx.variable(op, (R, s.co), ctx.dtype, op=op, mapping=M.intervals(
            red["tile"][o], red["out_start"][o], red["out_start"][o] + red["len"][o]))
    else:
        Y = target = ctx.variable(op, (R, s.co), ctx.dtype, mapping=M.by_windows(
            (R, s.co), shapes[:, 1:], origins[:, 1:], tiles), op=op)
    cs = ctx.graph.add_compute_set(ctx.unique(f"{op}/conv_partials"), op=op)
    sk = dataclasses.replace(s, ci=cik)
    geom = {k: np.int64(sk.upper if k == "pad_hi" else getattr(sk, k)) for k in GEOMETRY}
    for nr in np.unique(rsz):
        sel = np.nonzero(rsz[ir] == nr)[0]
        out = (target.windows((1, int(nr) * s.ow, cop), origins[sel]) if pci > 1
               else target.windows((int(nr) * s.ow, cop), origins[sel, 1:]))
        ctx.graph.add_vertices(cs, CONV_PARTIAL_NX1, tiles=tiles[sel], fields={
            "in": xin.regions(in_start[sel], in_sizes[sel]), "w": wbuf.regions(sel * blk, blk), "out": out},
            params={**geom, "nr": np.int64(nr), "r0": roff[ir[sel]].astype(np.int64)})
    ctx.add(P.Execute(cs, name=cs.name, op=op))
    if pci > 1:
        reduce_k_partials(ctx, target, Y, red, pci, op)
    return Y
