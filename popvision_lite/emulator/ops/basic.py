"""Op functions on the emulator graph.

Every op takes an :class:`OpContext` (graph, program list, IPU, precision), its inputs (graph
Tensors or :class:`View` operands) and a name; it adds compute sets, copies (exchanges) and
programs - all carrying the op's name - records the op (type, plan, compulsory bytes) and returns
its output tensors.  Vertices are always added a whole group at a time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from popvision_lite.emulator import mapping as M
from popvision_lite.emulator import mapping as M_
from popvision_lite.emulator import programs as P
from popvision_lite.emulator.codelets import poplin as CL
from popvision_lite.emulator.codelets import popnn as CN
from popvision_lite.emulator.codelets import popops as CO
from popvision_lite.emulator.codelets import popops_rows as CR
from popvision_lite.emulator.ops.common import (  # noqa: F401 - re-exported: other op modules use basic.X
    _copy_src,
    _elementwise_cs,
    _nbytes,
    _same_mapping,
    flat_view,
    mark_split,
    materialize,
    ranges_view,
    regions_on,
    worker_field,
)
from popvision_lite.emulator.ops.context import OpContext, View
from popvision_lite.emulator.ops.matmul import _as_operand, _block_major, matmul  # noqa: F401 - the op lives in matmul.py
from popvision_lite.emulator.ops.planners import plan_elementwise, split_even
from popvision_lite.errors import EmulatorError


@dataclass(frozen=True)
class RowGather:
    """A reduction stage's gather described by its op, for the compile (compile.copy_gathers.compile_rows,
    decision 0491): the source's rows are ``row`` elements each, and destination vertex v's regions are the copy's
    regions ``first[v]:first[v + 1]`` (one column chunk of each of its group's rows), written one after another
    into the vertex's partials.  The compile checks the layouts that make every region one piece."""

    row: int
    first: np.ndarray

# ============================================================================ elementwise


def _out_like(ctx, ref, name, op, dtype=None, shape=None):
    """Output tensor: same mapping as ``ref`` when it is a tensor on the current IPU, else linear."""
    shape = tuple(shape or ref.shape)
    size = int(np.prod(shape))
    if not isinstance(ref, View) and ref.mapping is not None and ref.size == size:
        tiles = ref.mapping.tile
        if len(tiles) and np.all(ctx.target.ipu_of(tiles) == ctx.ipu):
            return ctx.variable(op, shape, dtype or ctx.dtype, mapping=ref.mapping, op=op)
    plan = plan_elementwise(size, ctx.plan_target)
    n_t = ctx.n_tiles
    tiles = np.sort(ctx.tiles_array(rotate=plan.tiles_used if plan.tiles_used < n_t else 0)[:plan.tiles_used])
    return ctx.variable(op, shape, dtype or ctx.dtype, mapping=M.linear(size, tiles, grain=1), op=op)


def elementwise(ctx: OpContext, codelet, inputs: dict, name: str, type_: str, params=None, dtype=None):
    """out = codelet(inputs) elementwise; inputs are brought to the output's mapping first."""
    first = next(iter(inputs.values()))
    size = int(np.prod(first.shape))
    for k, v in inputs.items():
        if int(np.prod(v.shape)) != size:
            raise EmulatorError(f"{type_} '{name}': input '{k}' has shape {v.shape}, expected {first.shape}")
    ref = next((v for v in inputs.values() if not isinstance(v, View)), first)
    nb = sum(_nbytes(v) for v in inputs.values()) + size * (2 if (dtype or ctx.dtype) == "float16" else 4)
    op = ctx.begin_op(name, type_, plan=f"{size} elements, mapped like its input", min_bytes=nb)
    out = _out_like(ctx, ref, name, op, dtype=dtype, shape=first.shape)
    ins = {k: materialize(ctx, v, k, op, mapping=out.mapping, shape=out.shape) for k, v in inputs.items()}
    _elementwise_cs(ctx, codelet, ins, out, op, op, params=params)
    return out


def add(ctx, a, b, name):
    return elementwise(ctx, CO.ADD, {"a": a, "b": b}, name, "add")


def mul(ctx, a, b, name):
    return elementwise(ctx, CO.MUL, {"a": a, "b": b}, name, "mul")


def relu(ctx, x, name):
    return elementwise(ctx, CO.RELU, {"in": x}, name, "relu")


def relu_bwd(ctx, x, dy, name):
    return elementwise(ctx, CN.RELU_BWD, {"a": x, "b": dy}, name, "relu_bwd")


def gelu(ctx, x, name):
    return elementwise(ctx, CN.GELU, {"in": x}, name, "gelu")


def gelu_bwd(ctx, x, dy, name):
    return elementwise(ctx, CN.GELU_BWD, {"a": x, "b": dy}, name, "gelu_bwd")


def scale(ctx, x, s, name):
    return elementwise(ctx, CO.SCALE, {"in": x}, name, "scale", params={"scale": np.float32(s)})


def cast(ctx, x, dtype, name):
    return elementwise(ctx, CO.CAST, {"in": x}, name, "cast", dtype=dtype)


def mse_grad(ctx, y, target, name):
    n = int(np.prod(y.shape))
    return elementwise(ctx, CO.SCALED_SUB, {"a": y, "b": target}, name, "mse_grad",
                       params={"scale": np.float32(2.0 / n)})


def add_bias(ctx, x, bias, name):
    """x (R, N) + bias (N,) broadcast over rows (the bias is copied to where the rows live)."""
    rows = int(np.prod(x.shape[:-1]))
    n = x.shape[-1]
    bview = View(bias, np.tile(np.arange(n, dtype=np.int64), rows).reshape(x.shape))
    return elementwise(ctx, CO.ADD, {"a": x, "b": bview}, name, "add")


def sgd(ctx, w, g, lr, name):
    """w -= lr * g in place on w's tiles; returns w."""
    op = ctx.begin_op(name, "sgd_update", plan="in place on the weight's tiles",
                      min_bytes=2 * _nbytes(w) + _nbytes(g))
    ctx_ipu = ctx.ipu
    try:
        ctx.ipu = int(ctx.target.ipu_of(w.mapping.tile[0]))
        gm = materialize(ctx, g, "grad", op, mapping=w.mapping, shape=w.shape, dtype=w.dtype)
    finally:
        ctx.ipu = ctx_ipu
    cs = ctx.graph.add_compute_set(ctx.unique(op), op=op)
    tiles, out_f = worker_field(ctx, w)
    in_f = regions_on(out_f, gm)
    grp = ctx.graph.add_vertices(cs, CO.SGD, tiles=tiles, fields={"in": in_f, "out": out_f},
                                 params={"lr": np.float32(lr)})
    # both fields are w's own worker pieces on their tiles, and gm's mapping is w's (materialize keeps g only when
    # its mapping equals w's, else maps the copy with w's): local by construction, as an elementwise op's fields
    mark_split(out_f, w.mapping, grp.tiles)
    mark_split(in_f, gm.mapping, grp.tiles)
    ctx.add(P.Execute(cs, name=cs.name, op=op))
    return w


# ============================================================================ row ops


def _row_layout(ctx, x, name, op, row):
    """x as a tensor mapped by whole rows over the IPU's tiles; returns (tensor, tiles, starts, sizes)."""
    rows = int(np.prod(x.shape)) // row
    mapping = ctx.row_mapping(rows, row)
    t = materialize(ctx, x, name, op, mapping=mapping, shape=(rows, row))
    tiles, starts, sizes = M.worker_split(t, workers=ctx.target.threads_per_tile, grain=row)
    return t, tiles, starts, sizes


def _replicate_rows(ctx, vec, tiles_used, row, name, op):
    """A (n_tiles, row) copy of a length-``row`` vector, one row on each tile in ``tiles_used``."""
    n = len(tiles_used)
    rep = ctx.variable(f"{op}/{name}_rep", (n, row), vec.dtype, mapping=M.by_rows((n, row), tiles_used), op=op)
    ctx.add(P.Copy(ranges_view(vec, np.zeros(n, np.int64), np.full(n, row, np.int64)), rep.whole(),
                   name=f"{op}/broadcast_{name}", op=op, broadcast=True))
    return rep


def softmax(ctx, x, name):
    row = x.shape[-1]
    op = ctx.begin_op(name, "softmax", plan=f"rows of {row} spread over tiles", min_bytes=2 * _nbytes(x))
    xt, tiles, starts, sizes = _row_layout(ctx, x, "in", op, row)
    out = ctx.variable(op, x.shape, ctx.dtype, mapping=xt.mapping, op=op)
    cs = ctx.graph.add_compute_set(ctx.unique(op), op=op)
    ctx.graph.add_vertices(cs, CR.SOFTMAX, tiles=tiles, fields={"in": xt.regions(starts, sizes),
                                                                 "out": out.regions(starts, sizes)},
                           params={"row": np.int64(row)})
    ctx.add(P.Execute(cs, name=cs.name, op=op))
    return out


def softmax_bwd(ctx, y, dy, name):
    row = y.shape[-1]
    op = ctx.begin_op(name, "softmax_bwd", plan=f"rows of {row} spread over tiles", min_bytes=3 * _nbytes(y))
    yt, tiles, starts, sizes = _row_layout(ctx, y, "y", op, row)
    dyt = materialize(ctx, dy, "dy", op, mapping=yt.mapping, shape=yt.shape)
    out = ctx.variable(op, y.shape, ctx.dtype, mapping=yt.mapping, op=op)
    cs = ctx.graph.add_compute_set(ctx.unique(op), op=op)
    ctx.graph.add_vertices(cs, CR.SOFTMAX_GRAD, tiles=tiles, fields={
        "y": yt.regions(starts, sizes), "dy": dyt.regions(starts, sizes), "out": out.regions(starts, sizes)},
        params={"row": np.int64(row)})
    ctx.add(P.Execute(cs, name=cs.name, op=op))
    return out


def _vec_fields(rep, tiles, tile_list, row):
    """Regions of the replicated vector row on each vertex's tile."""
    pos = np.searchsorted(tile_list, tiles)
    return rep.regions(pos * row, row)


def layer_norm(ctx, x, gamma, beta, name, eps=None):
    """Layer norm of the rows of ``x``; ``eps`` (None: the op library's 1e-5) added to the variance."""
    row = x.shape[-1]
    op = ctx.begin_op(name, "layer_norm", plan=f"rows of {row} spread over tiles",
                      min_bytes=2 * _nbytes(x) + _nbytes(gamma) + _nbytes(beta))
    xt, tiles, starts, sizes = _row_layout(ctx, x, "in", op, row)
    tl = np.unique(tiles)
    g = _replicate_rows(ctx, gamma, tl, row, "gamma", op)
    b = _replicate_rows(ctx, beta, tl, row, "beta", op)
    out = ctx.variable(op, x.shape, ctx.dtype, mapping=xt.mapping, op=op)
    cs = ctx.graph.add_compute_set(ctx.unique(op), op=op)
    ctx.graph.add_vertices(cs, CR.LAYER_NORM, tiles=tiles, fields={
        "in": xt.regions(starts, sizes), "gamma": _vec_fields(g, tiles, tl, row),
        "beta": _vec_fields(b, tiles, tl, row), "out": out.regions(starts, sizes)},
        params={"row": np.int64(row), **({} if eps is None else {"eps": np.float32(eps)})})
    ctx.add(P.Execute(cs, name=cs.name, op=op))
    return out


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _reduce_stage(ctx, srcs, k, row, lc, outs, op, stage, per_piece: int = 1):
    """One stage of a reduction tree: for every source (tensor (R, row) fp32) and every group of rows
    and every chunk of ``lc`` columns, one strided-reduce vertex (ReducePartials) gathers its
    (rows of the group, lc) partials (one exchange for the whole stage) and writes (lc) elements of
    row ``group`` of the matching output (tensor (groups, row) or (row,)).  ``k``: rows per group
    (an int), or the row count of each group (groups of two sizes when R is not a multiple: the
    ceil / floor split, one vertex group per size).  Vertices are spread round-robin over all the
    IPU's tiles, six per tile at most per round; with ``per_piece`` > 1, that many consecutive column
    chunks of a group are one piece on one tile (its worker vertices)."""
    tiles_arr = ctx.tiles_array(rotate=0)
    nt = len(tiles_arr)
    R0 = srcs[0].shape[0]
    gk = np.full(R0 // k, k, np.int64) if np.ndim(k) == 0 else np.asarray(k, np.int64)
    gs = np.concatenate([[0], np.cumsum(gk)[:-1]]).astype(np.int64)
    ng = len(gk)
    nc = row // lc
    vi, vg, vc = (x.ravel() for x in np.meshgrid(np.arange(len(srcs)), np.arange(ng), np.arange(nc), indexing="ij"))
    npc = len(srcs) * ng * (nc // per_piece)
    pt = np.sort(tiles_arr[np.arange(npc) % nt]) if npc <= nt else tiles_arr[(np.arange(npc) * nt) // npc]
    vt = pt[(vi * ng + vg) * (nc // per_piece) + vc // per_piece]
    per = gk[vg] * lc
    gstart = np.cumsum(per) - per
    gathered = ctx.variable(f"{op}/reduce{stage}_partials", (int(per.sum()),), "float32",
                            mapping=M.intervals(vt, gstart, gstart + per), op=op)
    cs = ctx.graph.add_compute_set(ctx.unique(f"{op}/reduce{stage}"), op=op)
    for i, src in enumerate(srcs):
        sel = np.nonzero(vi == i)[0]
        # every row of every group of this source, in vertex order
        cnt = gk[vg[sel]]
        rows = np.repeat(gs[vg[sel]], cnt) + np.arange(int(cnt.sum()), dtype=np.int64) - np.repeat(np.cumsum(cnt) - cnt, cnt)
        cols = np.repeat(vc[sel] * lc, gk[vg[sel]])
        gather = P.Copy(src.regions(rows * row + cols, lc), ranges_view(gathered, gstart[sel], per[sel]),
                        name=f"{op}/gather{stage}_{i}", op=op)
        gather.gather = RowGather(row, np.concatenate([[0], np.cumsum(cnt)]))  # (the pieces, decision 0491)
        ctx.add(gather)
        out = outs[i]
        ostart = (vg[sel] * row if len(out.shape) == 2 else 0) + vc[sel] * lc
        o = np.argsort(ostart, kind="stable")
        ctx.graph.set_mapping(out, M.intervals(vt[sel][o], ostart[o], ostart[o] + lc))  # written where reduced
        for kk in np.unique(gk[vg[sel]]):  # one vertex group per group size
            s2 = sel[gk[vg[sel]] == kk]
            ctx.graph.add_vertices(cs, CR.REDUCE_PARTIALS, tiles=vt[s2], fields={
                "in": gathered.regions(gstart[s2], per[s2]),
                "out": out.regions((vg[s2] * row if len(out.shape) == 2 else 0) + vc[s2] * lc, lc)},
                params={"k": np.int64(kk)})
    ctx.add(P.Execute(cs, name=cs.name, op=op))


# popops' reduction planner (lib/popops/reduction/ReductionPlan.cpp, ReductionStages.cpp, Reduction.cpp):
# an ADD over float partials splits columns at twice the float vector width (findGrainSizeForOp: 2 x 2),
# pieces of at least 64 partials (reductionFactorThresholdToAddMoreStages) and 2 rows (minPieceRows)
REDUCE_GRAIN = 4
REDUCE_MIN_PIECE = 64
REDUCE_MIN_ROWS = 2


def popops_stage_split(depth: int, row: int, tiles: int) -> tuple[list[int], int]:
    """One intermediate stage of popops' reduction of ``depth`` partial rows of ``row`` columns over
    ``tiles`` tiles (ReductionPlan.cpp calculateSplit): the columns in pieces of at least max(grain, grain x
    ((row / grain) / sqrt(depth))) (the piece width chosen so that each output gets about sqrt(depth)
    reductions), the rows in N groups so that a piece holds about depth x row / tiles partials (one piece a
    tile), at least 64 partials and 2 rows a piece.  Returns (rows of each group, column chunk); the chunk is
    the smallest divisor of ``row`` at least that width (the op library's vertices take equal chunks)."""
    avg = max(1, int(np.sqrt(depth)))
    width = max(REDUCE_GRAIN, ((row // REDUCE_GRAIN) // avg) * REDUCE_GRAIN)
    lc = next(d for d in _divisors(row) if d >= min(width, row))
    ideal = max(1, depth * row // tiles)
    n = max(1, depth * lc // ideal)
    if depth * lc // n < REDUCE_MIN_PIECE:
        n = max(1, depth * lc // REDUCE_MIN_PIECE)
    if depth // n < REDUCE_MIN_ROWS:
        n = max(1, depth // REDUCE_MIN_ROWS)
    return [b_ - a_ for a_, b_ in split_even(depth, n)], lc


def popops_next_is_output(depth: int, row: int, tiles_used: int, tiles: int) -> bool:
    """popops' choice after a stage (ReductionPlan.cpp calculateNextStep): straight to the output when the
    fan-in is low (under 2 sqrt(tiles) partials an output) and the partials occupy most tiles, or when
    no more than 64 partials an output are left; another intermediate stage otherwise."""
    if depth < 2 * np.sqrt(tiles) and tiles_used > tiles * 3 // 4:
        return True
    return depth <= REDUCE_MIN_PIECE


def _reduce_partials(ctx, items, op):
    """Sum the rows of FP32 partial tensors (V, row) -> (row,) each, as popops' multi-stage reduction
    does (:func:`popops_stage_split`, :func:`popops_next_is_output`): intermediate stages reduce groups of
    rows in column pieces over the tiles (strided-reduce vertices) while the fan-in is high, then a last
    stage reduces what is left into the outputs, its chunks of columns sized to give about six vertices
    per tile.  ``items`` = [(partial, name, out_dtype)]; returns the outputs."""
    V, row = items[0][0].shape
    nt = ctx.n_tiles
    want = 6 * nt
    srcs = [p for p, _, _ in items]
    outs = []
    for _p, name, dt in items:
        outs.append(ctx.variable(f"{op}/{name}" if name else op, (row,), dt, mapping=ctx.linear_mapping(row), op=op))

    def chunk(groups_total):
        even = [d for d in _divisors(row) if d % 2 == 0] or [1]
        for d in even:
            if groups_total * (row // d) <= want:
                return d
        return even[-1]

    stage, used = 1, min(V, nt)  # the partial rows sit on the tiles that made them
    while not popops_next_is_output(V, row, used, nt):
        groups, lc = popops_stage_split(V, row, nt)
        s = len(groups)
        inter = [ctx.variable(f"{op}/{name or 'sum'}_stage{stage}", (s, row), "float32",
                              mapping=ctx.linear_mapping(s * row), op=op) for _p, name, _dt in items]
        # a piece's columns are split over the tile's workers in grains (splitOutputRegionsForWorkers)
        w = max(d for d in _divisors(lc) if d <= max(1, min(ctx.target.threads_per_tile, lc // REDUCE_GRAIN)))
        _reduce_stage(ctx, srcs, np.asarray(groups, np.int64), row, lc // w, inter, op, stage, per_piece=w)
        srcs, V, used, stage = inter, s, min(nt, s * (row // lc) * len(items)), stage + 1
    _reduce_stage(ctx, srcs, V, row, chunk(len(items)), outs, op, stage)
    return outs


def layer_norm_bwd(ctx, x, gamma, dy, name, eps=None):
    row = x.shape[-1]
    op = ctx.begin_op(name, "layer_norm_bwd", plan=f"rows of {row} spread over tiles; dgamma/dbeta reduced "
                      "over vertices in a second stage", min_bytes=3 * _nbytes(x) + 3 * _nbytes(gamma))
    xt, tiles, starts, sizes = _row_layout(ctx, x, "x", op, row)
    dyt = materialize(ctx, dy, "dy", op, mapping=xt.mapping, shape=xt.shape)
    tl = np.unique(tiles)
    g = _replicate_rows(ctx, gamma, tl, row, "gamma", op)
    V = len(tiles)
    dx = ctx.variable(f"{op}/dx", x.shape, ctx.dtype, mapping=xt.mapping, op=op)
    vid = np.arange(V, dtype=np.int64) * row
    pg = ctx.variable(f"{op}/dgamma_partial", (V, row), "float32", mapping=M.intervals(tiles, vid, vid + row), op=op)
    pb = ctx.variable(f"{op}/dbeta_partial", (V, row), "float32", mapping=M.intervals(tiles, vid, vid + row), op=op)
    cs = ctx.graph.add_compute_set(ctx.unique(op), op=op)
    ctx.graph.add_vertices(cs, CR.LAYER_NORM_GRAD, tiles=tiles, fields={
        "x": xt.regions(starts, sizes), "dy": dyt.regions(starts, sizes), "gamma": _vec_fields(g, tiles, tl, row),
        "dx": dx.regions(starts, sizes), "dgamma": pg.regions(vid, row), "dbeta": pb.regions(vid, row)},
        params={"row": np.int64(row), **({} if eps is None else {"eps": np.float32(eps)})})
    ctx.add(P.Execute(cs, name=cs.name, op=op))
    dgamma, dbeta = _reduce_partials(ctx, [(pg, "dgamma", gamma.dtype), (pb, "dbeta", gamma.dtype)], op)
    return dx, dgamma, dbeta


def reduce_rows(ctx, x, name):
    """Sum over all leading axes: (..., N) -> (N,) (e.g. bias gradients); two stages."""
    row = x.shape[-1]
    op = ctx.begin_op(name, "reduce", plan=f"per-vertex column sums, then {row} columns reduced over tiles",
                      min_bytes=_nbytes(x) + row * 4)
    xt, tiles, starts, sizes = _row_layout(ctx, x, "in", op, row)
    V = len(tiles)
    part = ctx.variable(f"{op}/partial", (V, row), "float32", mapping=M.intervals(
        tiles, np.arange(V) * row, np.arange(V) * row + row), op=op)
    cs = ctx.graph.add_compute_set(ctx.unique(op), op=op)
    ctx.graph.add_vertices(cs, CR.COLUMN_SUM, tiles=tiles, fields={
        "in": xt.regions(starts, sizes), "out": part.regions(np.arange(V) * row, row)},
        params={"row": np.int64(row)})
    ctx.add(P.Execute(cs, name=cs.name, op=op))
    return _reduce_partials(ctx, [(part, "", ctx.dtype)], op)[0]


# ============================================================================ data movement


def gather_rows(ctx, table, ids, name):
    """out[i] = table[ids[i]] with ``ids`` known when the graph is built (a planned exchange)."""
    ids = np.asarray(ids, dtype=np.int64).ravel()
    row = table.shape[-1]
    op = ctx.begin_op(name, "embedding", plan=f"{len(ids)} rows of {row} gathered by exchange",
                      min_bytes=2 * len(ids) * row * table.itemsize)
    out = ctx.variable(op, (len(ids), row), table.dtype, mapping=ctx.row_mapping(len(ids), row), op=op)
    # (the rows' ranges: flat_view's endpoint without the index of every element, 25 M for GPT-3's tokens)
    src = ranges_view(table, ids * row, np.full(len(ids), row, np.int64))
    ctx.add(P.Copy(src, out.whole(), name=f"{op}/gather", op=op))
    return out


def pad_hw(ctx, x, nhwc, p, name):
    n, h, w, c = nhwc
    shape = (n, h + 2 * p, w + 2 * p, c)
    size = int(np.prod(shape))
    op = ctx.begin_op(name, "pad", plan=f"zero fill + interior copy, {size} elements",
                      min_bytes=_nbytes(x) + size * 2)
    out = ctx.variable(op, shape, x.dtype, mapping=ctx.linear_mapping(size), op=op)
    cs = ctx.graph.add_compute_set(ctx.unique(f"{op}/zero"), op=op)
    tiles, starts, sizes = M.worker_split(out, workers=ctx.target.threads_per_tile)
    ctx.graph.add_vertices(cs, CO.FILL, tiles=tiles, fields={"out": out.regions(starts, sizes)},
                           params={"value": np.float32(0)})
    ctx.add(P.Execute(cs, name=cs.name, op=op))
    inner = np.arange(size, dtype=np.int64).reshape(shape)[:, p:p + h, p:p + w, :].ravel()
    src = _copy_src(x) if isinstance(x, View) else x.whole()
    ctx.add(P.Copy(src, flat_view(out, inner), name=f"{op}/interior", op=op))
    return out


def copy(ctx, x, name):
    op = ctx.begin_op(name, "copy", plan="rearrangement", min_bytes=2 * _nbytes(x))
    return materialize(ctx, x, "out", op, mapping=ctx.linear_mapping(int(np.prod(x.shape))))


# ============================================================================ block-sparse matmul


def block_sparse_matmul(ctx, a, b, mask, block: int, name: str):
    """C = A @ (B with only the blocks of ``mask`` [K/block, N/block] non-zero); only non-zero
    blocks are stored (block-major), moved and multiplied.  Output rows are split over the IPU's
    tiles; pass r adds the r-th non-zero block of every block column (FP32 accumulate)."""
    mask = np.asarray(mask, dtype=bool)
    M, K = a.shape
    N = b.shape[-1]
    KB, NB = mask.shape
    if KB * block != K or NB * block != N or b.shape[0] != K:
        raise EmulatorError(f"block_sparse_matmul '{name}': mask {mask.shape} x block {block} does not tile "
                            f"B {tuple(b.shape)} / A {tuple(a.shape)}")
    n_t = ctx.n_tiles
    pm = max(d for d in range(1, M + 1) if M % d == 0 and d * NB <= max(n_t, NB))
    bm = M // pm
    nnz_col = mask.sum(0)
    passes = int(nnz_col.max()) if mask.any() else 0
    flops = 2 * M * block * block * int(mask.sum())
    op = ctx.begin_op(name, "block_sparse_matmul",
                      plan=f"density {mask.mean():.2f}: {int(mask.sum())} of {mask.size} blocks of {block}x{block}; "
                           f"rows split {pm} ways ({bm} rows), {passes} accumulation passes",
                      min_bytes=_nbytes(a) + int(mask.sum()) * block * block * 2 + M * N * 2)
    ctx.graph.add_op(op, flops=flops)
    A, _ = _as_operand(ctx, materialize(ctx, a, "a", op), "a", op)
    B = materialize(ctx, b, "b", op)
    T = pm * NB
    tiles_arr = ctx.tiles_array(rotate=T if T < n_t else 0)
    vt = tiles_arr[np.arange(T) % len(tiles_arr)]  # output block (im, nb) -> tile
    acc = ctx.variable(f"{op}/acc", (M, N), "float32", mapping=M_.by_blocks((M, N), (bm, block), vt), op=op)
    zero = ctx.graph.add_compute_set(ctx.unique(f"{op}/zero"), op=op)
    ztiles, zs, zn = M_.worker_split(acc, workers=ctx.target.threads_per_tile)
    ctx.graph.add_vertices(zero, CO.FILL, tiles=ztiles, fields={"out": acc.regions(zs, zn)},
                           params={"value": np.float32(0)})
    ctx.add(P.Execute(zero, name=zero.name, op=op))
    kb_idx, nb_idx = np.nonzero(mask.T)  # sorted by column: (nb, kb)
    kb_idx, nb_idx = nb_idx, kb_idx
    # only the non-zero blocks of B are kept, block-major
    Bs = _block_major(ctx, B, (block, block), np.stack([kb_idx, nb_idx], 1), "b_nonzero", op)
    col_first = np.concatenate([[0], np.cumsum(nnz_col)[:-1]])
    A_bm = _block_major(ctx, A, (bm, block), np.stack(np.meshgrid(np.arange(pm), np.arange(KB), indexing="ij"),
                                                      -1).reshape(-1, 2), "a", op)
    w = 1  # one AMP supervisor vertex per tile (uses all six workers)
    bmw = bm // w
    for r in range(passes):
        cols = np.nonzero(nnz_col > r)[0]
        im, nb = (x.ravel() for x in np.meshgrid(np.arange(pm), cols, indexing="ij"))
        nv = len(im)
        tl = vt[im * NB + nb]
        kb = kb_idx[col_first[nb] + r]
        sa, sb = bm * block, block * block
        start = np.arange(nv, dtype=np.int64)
        a_rep = ctx.variable(f"{op}/a_tile_blocks", (nv, sa), A.dtype, mapping=M_.intervals(tl, start * sa, start * sa + sa), op=op)
        b_rep = ctx.variable(f"{op}/b_tile_blocks", (nv, sb), B.dtype, mapping=M_.intervals(tl, start * sb, start * sb + sb), op=op)
        ctx.add(P.Copy(A_bm.regions((im * KB + kb) * sa, sa), a_rep.whole(), name=f"{op}/broadcast_a pass {r}", op=op,
                       broadcast=True))
        ctx.add(P.Copy(Bs.regions((col_first[nb] + r) * sb, sb), b_rep.whole(), name=f"{op}/broadcast_b pass {r}", op=op,
                       broadcast=True))
        vj = np.tile(np.arange(w, dtype=np.int64), nv)
        vv = np.repeat(start, w)
        cs = ctx.graph.add_compute_set(ctx.unique(f"{op}/blocks pass {r}"), op=op)
        ctx.graph.add_vertices(cs, CL.TILE_MATMUL[(False, False, True)], tiles=np.repeat(tl, w), fields={
            "a": a_rep.regions(vv * sa + vj * bmw * block, bmw * block), "b": b_rep.regions(vv * sb, sb),
            "out": acc.blocks((bmw, block), np.stack([np.repeat(im, w) * w + vj, np.repeat(nb, w)], 1))},
            params={"k": np.int64(block)})
        ctx.add(P.Execute(cs, name=cs.name, op=op))
    out = ctx.variable(op, (M, N), ctx.dtype, mapping=acc.mapping, op=op)
    _elementwise_cs(ctx, CO.CAST, {"in": acc}, out, op, f"{op}/cast_out")
    return out
