"""The weight-update convolution (dW) on the halo path: each tile receives its pixel range of the forward
input with the halo once and the same pixels of the output gradient, and computes a partial dW for its
pixels, reading the k x k windows in place (no im2col block); the partials are reduced over the tiles.

poplin: ``calculateWeightDeltas`` (graphcore/poplibs 7eac0f26, ``lib/poplin/Convolution.cpp``) runs dW
as a convolution with the parameters of ``getWeightUpdateParams``: batch = the forward input channels,
input channels = the forward batch, input field = the forward input field, kernel = the output
gradient's field, output field = the forward kernel (k x k), output channels = the forward output
channels.  Its reduction runs over the images and the output-gradient field - the convolution's input
channels and kernel positions - which the plan splits over tiles (poplin's ``inChanSplit`` /
``kernelSplit``) and whose partials it reduces (``ConvReduce.cpp``).

Layout: as ``ops/conv.py``: x ``(N*H*W, Ci)``, dY ``(N*OH*OW, Co)``, dW ``(k*k*Ci, Co)`` with row
``(ky*k + kx)*Ci + ci``.

Plan (``plan_conv_wu``, the reduced search of ``ops/conv.py``'s ``plan_conv``): the ``N*OH`` (image,
output row) pairs of dY cut into ``pr`` contiguous ranges, the input channels into ``pci`` and the output
channels into ``pco`` equal parts of whole AMP groups, ``pr = min(N*OH, tiles // (pci * pco))``; cost =
the fullest tile's vertex estimate + its exchange receive time (x rows with halo, dY rows, the partial
slices it reduces) + its ReduceAdd estimate, the cheapest among those whose per-tile blocks fit
``available_memory_proportion`` of the tile (the smallest footprint when none fits).

Vertex (``ConvPartialWeightUpdate``): the tile's partial dW (k*k*cik, cop) = per kernel position the
product of its shifted input pixels (transposed) and its dY pixels.  The AMP runs it as poplin's
``ConvPartial1x1Out`` over field = (kernel position, input channel) pairs, input channels = the tile's dY
pixels (the weight-update convolution with its kernel - dY's field - folded into the input channels at
the tile level, poplin's vertex-level expandDims, ``ConvPlan.cpp`` canUseVertexLevelExpandDims), output
channels = cop: cost ``estimators.poplin.amp_matmul_tile_cycles(k*k*cik, pixels, cop)``
(``PerformanceEstimation.hpp`` getConvPartial1x1SupervisorOuterLoop / InnerLoopCycleEstimateHalfFloat).
Assumed (docs/decisions/0155): the vertex reads each kernel position's shifted pixels in place and the
positions whose input lies in the padding contribute zeros without being stored (poplin allows the
vertex-level expandDims only on an unpadded input, and pads it otherwise); no on-tile transposition of
the pixels into the AMP's input-channel grouping is charged.

Programs: one exchange of every tile's input rows with halo (``ops/conv.py``'s ``exchange_input_rows``), one of
its dY rows (its channel slice), one compute set of one supervisor vertex per tile writing its partial
block (``ctx.partials_dtype``, the block contiguous on the tile), then the reduction over the ``pr``
partials of every (input-channel part, output-channel part) block: each block cut into ``pr`` slices, the
owner of a slice receives it from the other tiles (one contiguous piece each: a reduction over each
kernel position's block separately, as the matmul's K-partials reduction cuts its output blocks, cost
four times the pieces and the exchange code), one ReduceAdd per owner, and an on-tile copy of the slice
into dW's (k*k*Ci, Co) order.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from popvision_lite.emulator import mapping as M
from popvision_lite.emulator import programs as P
from popvision_lite.emulator.codelets import popops_rows as CR
from popvision_lite.emulator.codelets.poplin_conv import (
    CONV_PARTIAL_WEIGHT_UPDATE,
    GEOMETRY,
    ConvShape,
    split_parts,
    wu_vertex_tile_cycles,
)
from popvision_lite.emulator.estimators.poplin import reduce_add_cycles
from popvision_lite.emulator.ops.common import _nbytes, mark_split
from popvision_lite.emulator.ops.context import OpContext
from popvision_lite.emulator.ops.conv import (
    choose_channel_split,
    copy_units,
    exchange_input_rows,
    record_plan_and_operands,
    tile_partition,
)
from popvision_lite.emulator.ops.matmul_partials import BlockGather
from popvision_lite.emulator.ops.planners import split_even
from popvision_lite.errors import EmulatorError


@dataclass(frozen=True)
class WuPlan:
    pr: int  # dY row parts: the partials of every dW block, reduced over these tiles
    pco: int  # output-channel parts
    pci: int  # input-channel parts
    compute_cycles: int  # the fullest tile's vertex estimate + its share of the partials reduction
    exchange_cycles: int  # the fullest tile's receive time (x rows with halo, dY rows, partial slices)
    tile_bytes: int  # the fullest tile's x rows, dY rows, partial block and gathered slices
    fits: bool

    def describe(self, s: ConvShape) -> str:
        return (f"weight-update ConvPartial1x1Out {s.k}x{s.k}/{s.stride}: {s.out_rows} dY rows in {self.pr} parts "
                f"(partials reduced) x {s.co} output channels in {self.pco} x {s.ci} input channels in {self.pci}; "
                f"input rows with halo and dY rows exchanged once per tile; est. {self.compute_cycles} compute + "
                f"{self.exchange_cycles} exchange cycles, {self.tile_bytes} B per tile"
                + ("" if self.fits else " (over available_memory_proportion)"))


def _candidate(s: ConvShape, pci: int, pco: int, tiles: int, fp16: bool, target, usable_bytes: float,
               pb: int) -> WuPlan:
    """One partition's cost: the fullest tile's vertex, its receive time (x rows with halo and dY rows in
    the run's type, then the pr - 1 partial slices of its blocks, ``pb`` bytes an element) and its
    ReduceAdd over them (estimators.poplin.reduce_add_cycles)."""
    item = 2 if fp16 else 4
    xbytes = float(target.em["exchange_bytes_per_cycle"])
    pr = max(1, min(s.out_rows, tiles // (pci * pco)))
    cik, cop = s.ci // pci, s.co // pco
    sk = dataclasses.replace(s, ci=cik)
    sz, off = split_parts(s.out_rows, pr)
    nr = int(sz[0])
    in_el = max(sk.input_elems(int(o), nr) for o in off[:min(len(off), s.oh + 1)])
    dy_el = nr * s.ow * cop
    blk = s.k * s.k * cik * cop
    slice_el = -(-blk // pr)
    comp = wu_vertex_tile_cycles(s, nr, cik, cop, fp16, target)
    comp += reduce_add_cycles(slice_el, pr, item, pb, int(target.threads_per_tile))
    recv = (in_el + dy_el) * item + (pr - 1) * slice_el * pb
    byts = (in_el + dy_el) * item + blk * pb + pr * slice_el * pb
    return WuPlan(pr, pco, pci, int(comp), int(-(-recv // xbytes)), int(byts), byts <= usable_bytes)


def plan_conv_wu(s: ConvShape, target, fp16: bool, tiles: int, usable_bytes: float, partials_bytes: int = 4) -> WuPlan:
    """The partition of a weight-update convolution over ``tiles`` tiles (see the module docstring)."""
    return choose_channel_split(s, fp16, target, tiles, lambda pci, pco: _candidate(
        s, pci, pco, tiles, fp16, target, usable_bytes, partials_bytes))


def ref_conv2d_weight_update(x, dy, s: ConvShape) -> np.ndarray:
    """Numpy reference: dW (k*k*Ci, Co) of a convolution of x (N*H*W, Ci) whose output gradient is dy
    (N*OH*OW, Co), FP32: per kernel position the shifted input pixels (transposed) times dy."""
    xp = np.pad(np.asarray(x, np.float32).reshape(s.n, s.h, s.w, s.ci), ((0, 0), (s.pad, s.upper), (s.pad, s.upper),
                                                                         (0, 0)))
    d = np.asarray(dy, np.float32).reshape(-1, s.co)
    out = np.zeros((s.k, s.k, s.ci, s.co), np.float32)
    for ky in range(s.k):
        for kx in range(s.k):
            xs = xp[:, ky:ky + s.stride * (s.oh - 1) + 1:s.stride, kx:kx + s.stride * (s.ow - 1) + 1:s.stride]
            out[ky, kx] = xs.reshape(-1, s.ci).T @ d
    return out.reshape(-1, s.co)


def _dy_regions(s: ConvShape, r0, nr, pco: int, ic) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(starts, sizes) in dY (N*OH*OW, Co) of every tile's dY rows [r0[t], r0[t] + nr[t]) one tile after another,
    and each tile's regions: one run of whole rows a tile, or with an output-channel split the tile's channel
    slice (part ``ic[t]``) of every pixel."""
    r0, nr, ic = (np.asarray(a, np.int64).reshape(-1) for a in (r0, nr, ic))
    if pco == 1:
        return r0 * s.ow * s.co, nr * s.ow * s.co, np.ones(len(r0), np.int64)
    cop = s.co // pco
    cnt = nr * s.ow
    px = np.arange(int(cnt.sum()), dtype=np.int64) + np.repeat(r0 * s.ow - (np.cumsum(cnt) - cnt), cnt)
    return px * s.co + np.repeat(ic * cop, cnt), np.full(len(px), cop, np.int64), cnt


def conv2d_weight_update(ctx: OpContext, x, dy, s: ConvShape, name: str):
    """dW (k*k*Ci, Co) of the convolution ``s`` from its input x (N*H*W, Ci) and output gradient dy
    (N*OH*OW, Co): the plan of :func:`plan_conv_wu`, each tile's input rows with halo and dY rows exchanged
    once, one ConvPartialWeightUpdate vertex per tile writing partials (ctx.partials_dtype), reduced over
    the dY-row parts by the matmul's K-partials reduction."""
    if s.dil != 1:
        raise EmulatorError(f"conv weight update '{name}': input dilation {s.dil} is not supported (a forward "
                            "convolution's input is never dilated)")
    if tuple(x.shape) != (s.n * s.h * s.w, s.ci) or tuple(dy.shape) != (s.out_rows * s.ow, s.co):
        raise EmulatorError(f"conv weight update '{name}': shapes {tuple(x.shape)}, {tuple(dy.shape)} do not match {s}")
    fp16 = ctx.dtype == "float16"
    kk = s.k * s.k
    op = ctx.begin_op(name, "conv", min_bytes=_nbytes(x) + _nbytes(dy) + kk * s.ci * s.co * (2 if fp16 else 4))
    ntiles = ctx.n_tiles
    pb = 2 if ctx.partials_dtype == "float16" else 4
    plan = plan_conv_wu(s, ctx.target, fp16, ntiles, ctx.available_memory_proportion * ctx.target.sram_bytes_per_tile,
                        pb)
    X, DY = record_plan_and_operands(ctx, op, plan.describe(s), (x, "in"), (dy, "dy"))
    pr, pci, pco = plan.pr, plan.pci, plan.pco
    # tiles in the reduction's (k part, m part, n part) order
    T, tiles, rsz, roff, (ir, ik, ic) = tile_partition(ctx, s, plan, ("pr", "pci", "pco"))
    cik, cop = s.ci // pci, s.co // pco
    # --- input rows with halo (the tile's channel slice) and dY rows (its channel slice), once per tile
    xin, in_start, in_sizes = exchange_input_rows(ctx, X, s, tiles, roff[ir], rsz[ir], pci, ik, op)
    d_starts, d_sizes, d_regions = _dy_regions(s, roff[ir], rsz[ir], pco, ic)
    dy_sizes = rsz[ir] * s.ow * cop
    dy_start = np.cumsum(dy_sizes) - dy_sizes
    dyin = ctx.variable(f"{op}/output_grad_rows", (int(dy_sizes.sum()),), DY.dtype,
                        mapping=M.intervals(tiles, dy_start, dy_start + dy_sizes), op=op)
    # (a broadcast: the tiles of one (row part, co part) take the same dY regions, whatever their ci part; its
    # units, a tile each, labelled by (row part, co part): decision 0479)
    cp = P.Copy(DY.regions(d_starts, d_sizes), dyin.whole(), name=f"{op}/exchange_output_grad", op=op,
                broadcast=True)
    ctx.add(copy_units(cp, d_regions, ir * pco + ic))
    # --- the vertices write each tile's partial block (kk, cik, cop) contiguously, in ctx.partials_dtype
    blk = kk * cik * cop
    part = ctx.variable(f"{op}/partials", (T * blk,), ctx.partials_dtype, op=op,
                        mapping=M.intervals(tiles, np.arange(T) * blk, (np.arange(T) + 1) * blk))
    cs = ctx.graph.add_compute_set(ctx.unique(f"{op}/weight_update_partials"), op=op)
    sk = dataclasses.replace(s, ci=cik, co=cop)
    geom = {k: np.int64(sk.upper if k == "pad_hi" else getattr(sk, k)) for k in GEOMETRY}
    for nr in np.unique(rsz):
        sel = np.nonzero(rsz[ir] == nr)[0]
        ctx.graph.add_vertices(cs, CONV_PARTIAL_WEIGHT_UPDATE, tiles=tiles[sel], fields={
            "in": xin.regions(in_start[sel], in_sizes[sel]), "dy": dyin.regions(dy_start[sel], dy_sizes[sel]),
            "out": part.regions(sel * blk, blk)},
            params={**geom, "nr": np.int64(nr), "r0": roff[ir[sel]].astype(np.int64)})
    ctx.add(P.Execute(cs, name=cs.name, op=op))
    return _reduce_partials(ctx, op, s, part, tiles, pr, pci, pco, cik, cop)


def _reduce_partials(ctx: OpContext, op: str, s: ConvShape, part, tiles, pr: int, pci: int, pco: int, cik: int,
                     cop: int):
    """Sum the ``pr`` partial blocks of every (input-channel part, output-channel part) into dW, as poplin
    reduces a convolution's partials (ConvReduce.cpp): each block cut into ``pr`` even slices, slice q
    owned by the tile of partial q, which receives the slice from the other pr - 1 tiles (one contiguous
    piece each) and runs one ReduceAdd over it (codelets.popops_rows.ConvReducePartials) into a block-major
    buffer in the run's type; an on-tile copy then puts the slice's elements in dW's (k*k*Ci, Co) order
    (the weight's layout), on the same tile."""
    kk = s.k * s.k
    blk = kk * cik * cop
    nb = pci * pco
    sl = np.array(split_even(blk, pr), np.int64)  # (slices, 2): fewer than pr when blk < pr
    ns = len(sl)
    slen = sl[:, 1] - sl[:, 0]
    b_i, s_i = (x.ravel() for x in np.meshgrid(np.arange(nb), np.arange(ns), indexing="ij"))  # (block, slice)
    owner = tiles[s_i * nb + b_i]  # partial q = s of block b sits on tile (q, ik, ic) = q * nb + b
    g_len = pr * slen[s_i]
    g_start = np.cumsum(g_len) - g_len
    gathered = ctx.variable(f"{op}/partials_gathered", (int(g_len.sum()),), part.dtype,
                            mapping=M.intervals(owner, g_start, g_start + g_len), op=op)
    q = np.arange(pr)
    src = ((q[None, :] * nb + b_i[:, None]) * blk + sl[s_i, 0][:, None]).ravel()  # (block, slice, partial)
    gather = P.Copy(part.regions(src, np.repeat(slen[s_i], pr)), gathered.whole(), name=f"{op}/gather_partials",
                    op=op)
    # (its blocks: block b's pr partials on tiles q * nb + b, its slices owned by the first of them, one interval
    # of the partials and of the gathered slices a tile: every block the same exchange, column q for column q;
    # compiled per block class, decision 0480)
    gather.gather = BlockGather(b_i, pr, tiles[np.arange(pr)[None, :] * nb + np.arange(nb)[:, None]],
                                np.zeros(nb, np.int64))
    ctx.add(gather)
    out_start = b_i * blk + sl[s_i, 0]
    dwb = ctx.variable(f"{op}/reduced_blocks", (nb * blk,), ctx.dtype,
                       mapping=M.intervals(owner, out_start, out_start + slen[s_i]), op=op)
    cs = ctx.graph.add_compute_set(ctx.unique(f"{op}/reduce_partials"), op=op)
    in_f, out_f = gathered.regions(g_start, g_len), dwb.regions(out_start, slen[s_i])
    grp = ctx.graph.add_vertices(cs, CR.CONV_REDUCE_PARTIALS, tiles=owner, fields={"in": in_f, "out": out_f},
                                 params={"k": np.int64(pr)})
    # each field is its tensor's own mapping intervals (built above from the same arrays) on the vertices' tiles
    mark_split(in_f, gathered.mapping, grp.tiles)
    mark_split(out_f, dwb.mapping, grp.tiles)
    ctx.add(P.Execute(cs, name=cs.name, op=op))
    # dW element of block b = (ik, ic), block element e = (kp * cik + c) * cop + o: ((kp * Ci + ik * cik + c) * Co
    # + ic * cop + o); runs of cop elements, cut where a slice ends
    cuts = np.union1d(sl[:, 0], np.arange(0, blk, cop))
    seg_len = np.diff(np.append(cuts, blk))
    seg_owner_slice = np.searchsorted(sl[:, 0], cuts, side="right") - 1
    row, col = np.divmod(cuts, cop)
    kp, c = np.divmod(row, cik)
    ik, ic = np.divmod(np.arange(nb), pco)
    dst = ((kp[None, :] * s.ci + (ik * cik)[:, None] + c[None, :]) * s.co + (ic * cop)[:, None] + col[None, :]).ravel()
    src_b = (np.arange(nb)[:, None] * blk + cuts[None, :]).ravel()
    lens = np.tile(seg_len, nb)
    seg_tile = tiles[(seg_owner_slice[None, :] * nb + np.arange(nb)[:, None]).ravel()]
    o = np.argsort(dst, kind="stable")
    Y = ctx.variable(op, (kk * s.ci, s.co), ctx.dtype, op=op,
                     mapping=M.intervals(seg_tile[o], dst[o], dst[o] + lens[o]))
    ctx.add(P.Copy(dwb.regions(src_b, lens), Y.regions(dst, lens), name=f"{op}/to_weight_layout", op=op))
    return Y
