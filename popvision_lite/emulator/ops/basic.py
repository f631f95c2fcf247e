"""Op functions on the emulator graph.

Every op takes an :class:`OpContext` (graph, program list, IPU, precision), its inputs (graph
Tensors or :class:`View` operands) and a name; it adds compute sets, copies (exchanges) and
programs - all carrying the op's name - records the op (type, plan, compulsory bytes) and returns
its output tensors.  Vertices are always added a whole group at a time.
"""

from __future__ import annotations

import numpy as np

from popvision_lite.emulator import codelets as C
from popvision_lite.emulator import mapping as M
from popvision_lite.emulator import mapping as M_
from popvision_lite.emulator import programs as P
from popvision_lite.emulator.graph import TensorView
from popvision_lite.emulator.ops import codelets as OC
from popvision_lite.emulator.ops.context import OpContext, View
from popvision_lite.emulator.ops.planners import plan_elementwise, plan_matmul, workers_for
from popvision_lite.errors import EmulatorError


def _nbytes(x) -> int:
    if isinstance(x, View):
        return int(x.index.size) * x.base.itemsize
    return int(x.nbytes)


def _same_mapping(a, b) -> bool:
    return (a is not None and b is not None and len(a) == len(b) and np.array_equal(a.tile, b.tile)
            and np.array_equal(a.start, b.start) and np.array_equal(a.stop, b.stop))


def flat_view(t, index):
    """Copy endpoint: elements of tensor ``t`` at flat positions ``index`` (in that order).

    Stored as contiguous runs (a Regions endpoint) when the index has long runs - e.g. a head
    split moves rows of 64 - so the program keeps (start, length) pairs, not one int per element."""
    index = np.asarray(index, dtype=np.int64).ravel()
    n = len(index)
    if n > 1:
        brk = np.flatnonzero(np.diff(index) != 1) + 1
        if len(brk) + 1 <= n // 4:
            first = np.concatenate([[0], brk])
            sizes = np.diff(np.concatenate([first, [n]]))
            return t.regions(index[first], sizes)
    return TensorView(t, index, (n,))


def _copy_src(x):
    if isinstance(x, View):
        return flat_view(x.base, x.index)
    return x.whole()


def materialize(ctx: OpContext, x, name: str, op: str, mapping=None, shape=None, dtype=None):
    """A graph Tensor holding x with ``mapping`` (default linear over the IPU); copies when needed."""
    if not isinstance(x, View) and (mapping is None or _same_mapping(x.mapping, mapping)) \
            and (shape is None or tuple(shape) == x.shape) and (dtype is None or dtype == x.dtype):
        return x
    shape = tuple(shape) if shape is not None else tuple(x.shape)
    size = int(np.prod(shape))
    if mapping is None:
        mapping = ctx.linear_mapping(size)
    t = ctx.variable(f"{op}/{name}", shape, dtype or x.dtype, mapping=mapping, op=op)
    if dtype is not None and dtype != x.dtype:
        src = materialize(ctx, x, name + "_src", op, mapping=mapping, shape=shape)
        _elementwise_cs(ctx, C.CAST, {"in": src}, t, op, f"{op}/cast_{name}")
    else:
        ctx.add(P.Copy(_copy_src(x), t.whole(), name=f"{op}/copy_{name}", op=op))
    return t


def _elementwise_cs(ctx, codelet, inputs: dict, out, op, cs_name, params=None):
    """One compute set: codelet over every worker piece of ``out``'s mapping; inputs share it."""
    cs = ctx.graph.add_compute_set(ctx.unique(cs_name), op=op)
    tiles, starts, sizes = M.worker_split(out, workers=ctx.target.threads_per_tile)
    fields = {k: v.regions(starts, sizes) for k, v in inputs.items()}
    fields["out"] = out.regions(starts, sizes)
    ctx.graph.add_vertices(cs, codelet, tiles=tiles, fields=fields, params=params or {})
    ctx.add(P.Execute(cs, name=cs.name, op=op))
    return cs


# ============================================================================ matmul


def _as_operand(ctx, x, name, op):
    """(tensor, transposed): a Tensor as is; a View that swaps the last two axes of its base tensor
    becomes (base, True) - no data moves; any other View is materialised (a rearranging copy)."""
    if isinstance(x, View):
        base = x.base
        if len(base.shape) in (2, 3) and x.index.ndim == len(base.shape):
            sh = base.shape
            want = sh[:-2] + (sh[-1], sh[-2])
            if tuple(x.index.shape) == want:
                axes = tuple(range(len(sh) - 2)) + (len(sh) - 1, len(sh) - 2)
                if np.array_equal(x.index, np.arange(base.size, dtype=np.int64).reshape(sh).transpose(axes)):
                    return base, True
            if tuple(x.index.shape) == sh and np.array_equal(x.index.ravel(), np.arange(base.size)):
                return base, False
        if x.index.ndim >= 2 and x.index.shape[-1] > 1 and x.index.shape[-2] > 1:
            # a transposed view of a view: materialise the untransposed one (longer contiguous runs)
            inner = np.swapaxes(x.index, -1, -2)
            runs_x = np.count_nonzero(np.diff(x.index, axis=-1) == 1)
            runs_in = np.count_nonzero(np.diff(inner, axis=-1) == 1)
            if runs_in > runs_x:
                return materialize(ctx, View(base, inner), name, op), True
        return materialize(ctx, x, name, op), False
    return x, False


def _block_major(ctx, X, blk, grid_index, name, op):
    """Copy the blocks ``grid_index`` (n, ndim) of shape ``blk`` of X, in that order, into a
    block-major temporary (each block contiguous) spread linearly over the IPU's tiles, so that
    broadcasting a block later is one piece per source tile it spans."""
    n = len(grid_index)
    belems = int(np.prod(blk))
    T = ctx.variable(f"{op}/{name}_blocks_major", (n, belems), X.dtype,
                     mapping=ctx.linear_mapping(n * belems, grain=4), op=op)
    ctx.add(P.Copy(X.blocks(blk, grid_index), T.whole(), name=f"{op}/rearrange_{name}", op=op))
    return T


def matmul(ctx: OpContext, a, b, name: str, out_dtype=None):
    """C = A @ B with A (M, K) or (G, M, K) and B (K, N) or (G, K, N); AMP block matmul on tiles.

    The planner splits M and N over the IPU's tiles (K stays on one tile; serial passes over K
    accumulate in FP32 when one pass would not fit).  Operands that are transposed views are read
    in their stored layout (no transpose copy).  Operand blocks are first rearranged block-major
    (one exchange) and then broadcast to the tiles that need them (one piece per tile); each tile's
    output block is split by rows over its worker threads."""
    out_dtype = out_dtype or ctx.dtype
    ash, bsh = tuple(a.shape), tuple(b.shape)
    if len(ash) not in (2, 3) or len(bsh) not in (2, 3) or (len(bsh) == 3 and (len(ash) != 3 or bsh[0] != ash[0])):
        raise EmulatorError(f"matmul '{name}': shapes {ash} @ {bsh} are not (M,K)@(K,N) or (G,M,K)@(G,K,N)")
    G = ash[0] if len(ash) == 3 else 1
    Mm, K = ash[-2], ash[-1]
    if bsh[-2] != K:
        raise EmulatorError(f"matmul '{name}': inner dimensions differ: {ash} @ {bsh}")
    N = bsh[-1]
    ntiles = ctx.target.tiles_per_ipu
    per_group = max(1, ntiles // G)
    out_shape = (G, Mm, N) if len(ash) == 3 else (Mm, N)
    min_bytes = _nbytes(a) + _nbytes(b) + int(np.prod(out_shape)) * (2 if out_dtype == "float16" else 4)
    op = ctx.begin_op(name, "matmul", min_bytes=min_bytes)
    A, ta = _as_operand(ctx, a, "a", op)
    B, tb = _as_operand(ctx, b, "b", op)
    plan = plan_matmul(Mm, N, K, ctx.plan_target, ctx.precision, tiles=per_group, exact=True, max_pk=1,
                       ta=ta, tb=tb)
    pm, pn, ps = plan.pm, plan.pn, plan.ps
    bm, bn, bks = Mm // pm, N // pn, K // ps
    desc = plan.describe() + (f"; {G} independent products" if G > 1 else "") + \
        ("; A read transposed" if ta else "") + ("; B read transposed" if tb else "")
    ctx.graph.add_op(op, plan=desc)
    ctx.records[-1]["plan"] = desc
    ab3, bb3 = len(ash) == 3, len(bsh) == 3
    T = G * pm * pn
    n_t = ctx.target.tiles_per_ipu
    tiles_arr = ctx.tiles_array(rotate=T if T < n_t else 0)
    vt = tiles_arr[np.arange(T) % len(tiles_arr)]  # block (g, im, in) in row-major order -> tile
    g_i, im_i, in_i = np.unravel_index(np.arange(T), (G, pm, pn))
    w = workers_for(bm, ctx.target.threads_per_tile)
    bmw = bm // w
    vj = np.tile(np.arange(w, dtype=np.int64), T)
    vtile = np.repeat(vt, w)
    vt_i = np.repeat(np.arange(T, dtype=np.int64), w)
    vg, vim, vin = np.repeat(g_i, w), np.repeat(im_i, w), np.repeat(in_i, w)

    sub_a = bmw * bks  # elements of one worker's slice of A's block
    blk_a, blk_b = bm * bks, bks * bn
    # --- A: worker sub-blocks, stored (bmw, bks), or (bks, bmw) when A is read transposed
    if not ta and ps == 1:
        A_src = A  # row blocks of a row-major A are contiguous already
        a_start = lambda g, im, p: (g * Mm + im * bm) * K  # noqa: E731
    else:
        gg, ii, pp, jj = (x.ravel() for x in np.meshgrid(np.arange(G), np.arange(pm), np.arange(ps), np.arange(w),
                                                         indexing="ij"))
        r = ii * w + jj
        coord = np.stack([pp, r], 1) if ta else np.stack([r, pp], 1)
        grid = np.concatenate([gg[:, None], coord], 1) if ab3 else coord
        sub_shape = (bks, bmw) if ta else (bmw, bks)
        A_src = _block_major(ctx, A, ((1,) if ab3 else ()) + sub_shape, grid, "a", op)
        a_start = lambda g, im, p: ((g * pm + im) * ps + p) * blk_a  # noqa: E731
    # --- B: whole blocks, stored (bks, bn), or (bn, bks) when B is read transposed
    Gb = G if bb3 else 1
    if (tb and ps == 1) or (not tb and pn == 1):
        B_src = B
        if tb:
            b_start = lambda g, p, j: (g * N + j * bn) * K  # noqa: E731
        else:
            b_start = lambda g, p, j: (g * K + p * bks) * N  # noqa: E731
    else:
        gg, pp, nn = (x.ravel() for x in np.meshgrid(np.arange(Gb), np.arange(ps), np.arange(pn), indexing="ij"))
        coord = np.stack([nn, pp], 1) if tb else np.stack([pp, nn], 1)
        grid = np.concatenate([gg[:, None], coord], 1) if bb3 else coord
        B_src = _block_major(ctx, B, ((1,) if bb3 else ()) + ((bn, bks) if tb else (bks, bn)), grid, "b", op)
        b_start = lambda g, p, j: ((g * ps + p) * pn + j) * blk_b  # noqa: E731

    tstart = np.arange(T, dtype=np.int64)
    a_rep = ctx.variable(f"{op}/a_tile_blocks", (T, blk_a), A.dtype,
                         mapping=M.intervals(vt, tstart * blk_a, (tstart + 1) * blk_a), op=op)
    b_rep = ctx.variable(f"{op}/b_tile_blocks", (T, blk_b), B.dtype,
                         mapping=M.intervals(vt, tstart * blk_b, (tstart + 1) * blk_b), op=op)
    cblock = (1, bm, bn) if ab3 else (bm, bn)
    C_out = ctx.variable(op, out_shape, out_dtype, mapping=M.by_blocks(out_shape, cblock, vt), op=op)
    wblock = (1, bmw, bn) if ab3 else (bmw, bn)
    c_index = np.stack([vg, vim * w + vj, vin], 1) if ab3 else np.stack([vim * w + vj, vin], 1)
    acc = C_out
    if ps > 1:
        acc = ctx.variable(f"{op}/acc", out_shape, "float32", mapping=M.by_blocks(out_shape, cblock, vt), op=op)
    a_field = a_rep.regions(vt_i * blk_a + vj * sub_a, sub_a)
    b_field = b_rep.regions(vt_i * blk_b, blk_b)
    gb_i = g_i if bb3 else np.zeros_like(g_i)
    for p in range(ps):
        sfx = f" pass {p}" if ps > 1 else ""
        ctx.add(P.Copy(A_src.regions(a_start(g_i, im_i, p), blk_a), a_rep.whole(), name=f"{op}/broadcast_a{sfx}",
                       op=op))
        ctx.add(P.Copy(B_src.regions(b_start(gb_i, p, in_i), blk_b), b_rep.whole(), name=f"{op}/broadcast_b{sfx}",
                       op=op))
        cs = ctx.graph.add_compute_set(ctx.unique(f"{op}/blocks{sfx}"), op=op)
        ctx.graph.add_vertices(cs, OC.TILE_MATMUL[(ta, tb, p > 0)], tiles=vtile, fields={
            "a": a_field, "b": b_field, "out": acc.blocks(wblock, c_index)}, params={"k": np.int64(bks)})
        ctx.add(P.Execute(cs, name=cs.name, op=op))
    if ps > 1:
        _elementwise_cs(ctx, C.CAST, {"in": acc}, C_out, op, f"{op}/cast_out")
    return C_out


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
    n_t = ctx.target.tiles_per_ipu
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
    return elementwise(ctx, C.ADD, {"a": a, "b": b}, name, "add")


def mul(ctx, a, b, name):
    return elementwise(ctx, C.MUL, {"a": a, "b": b}, name, "mul")


def relu(ctx, x, name):
    return elementwise(ctx, C.RELU, {"in": x}, name, "relu")


def relu_bwd(ctx, x, dy, name):
    return elementwise(ctx, OC.RELU_BWD, {"a": x, "b": dy}, name, "relu_bwd")


def gelu(ctx, x, name):
    return elementwise(ctx, OC.GELU, {"in": x}, name, "gelu")


def gelu_bwd(ctx, x, dy, name):
    return elementwise(ctx, OC.GELU_BWD, {"a": x, "b": dy}, name, "gelu_bwd")


def scale(ctx, x, s, name):
    return elementwise(ctx, C.SCALE, {"in": x}, name, "scale", params={"scale": np.float32(s)})


def cast(ctx, x, dtype, name):
    return elementwise(ctx, C.CAST, {"in": x}, name, "cast", dtype=dtype)


def mse_grad(ctx, y, target, name):
    n = int(np.prod(y.shape))
    return elementwise(ctx, OC.SCALED_SUB, {"a": y, "b": target}, name, "mse_grad",
                       params={"scale": np.float32(2.0 / n)})


def add_bias(ctx, x, bias, name):
    """x (R, N) + bias (N,) broadcast over rows (the bias is copied to where the rows live)."""
    rows = int(np.prod(x.shape[:-1]))
    n = x.shape[-1]
    bview = View(bias, np.tile(np.arange(n, dtype=np.int64), rows).reshape(x.shape))
    return elementwise(ctx, C.ADD, {"a": x, "b": bview}, name, "add")


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
    tiles, starts, sizes = M.worker_split(w, workers=ctx.target.threads_per_tile)
    ctx.graph.add_vertices(cs, OC.SGD, tiles=tiles, fields={"in": gm.regions(starts, sizes),
                                                              "out": w.regions(starts, sizes)},
                           params={"lr": np.float32(lr)})
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
    ctx.add(P.Copy(flat_view(vec, np.tile(np.arange(row, dtype=np.int64), n)), rep.whole(),
                   name=f"{op}/broadcast_{name}", op=op))
    return rep


def softmax(ctx, x, name):
    row = x.shape[-1]
    op = ctx.begin_op(name, "softmax", plan=f"rows of {row} spread over tiles", min_bytes=2 * _nbytes(x))
    xt, tiles, starts, sizes = _row_layout(ctx, x, "in", op, row)
    out = ctx.variable(op, x.shape, ctx.dtype, mapping=xt.mapping, op=op)
    cs = ctx.graph.add_compute_set(ctx.unique(op), op=op)
    ctx.graph.add_vertices(cs, OC.SOFTMAX, tiles=tiles, fields={"in": xt.regions(starts, sizes),
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
    ctx.graph.add_vertices(cs, OC.SOFTMAX_GRAD, tiles=tiles, fields={
        "y": yt.regions(starts, sizes), "dy": dyt.regions(starts, sizes), "out": out.regions(starts, sizes)},
        params={"row": np.int64(row)})
    ctx.add(P.Execute(cs, name=cs.name, op=op))
    return out


def _vec_fields(rep, tiles, tile_list, row):
    """Regions of the replicated vector row on each vertex's tile."""
    pos = np.searchsorted(tile_list, tiles)
    return rep.regions(pos * row, row)


def layer_norm(ctx, x, gamma, beta, name):
    row = x.shape[-1]
    op = ctx.begin_op(name, "layer_norm", plan=f"rows of {row} spread over tiles",
                      min_bytes=2 * _nbytes(x) + _nbytes(gamma) + _nbytes(beta))
    xt, tiles, starts, sizes = _row_layout(ctx, x, "in", op, row)
    tl = np.unique(tiles)
    g = _replicate_rows(ctx, gamma, tl, row, "gamma", op)
    b = _replicate_rows(ctx, beta, tl, row, "beta", op)
    out = ctx.variable(op, x.shape, ctx.dtype, mapping=xt.mapping, op=op)
    cs = ctx.graph.add_compute_set(ctx.unique(op), op=op)
    ctx.graph.add_vertices(cs, OC.LAYER_NORM, tiles=tiles, fields={
        "in": xt.regions(starts, sizes), "gamma": _vec_fields(g, tiles, tl, row),
        "beta": _vec_fields(b, tiles, tl, row), "out": out.regions(starts, sizes)}, params={"row": np.int64(row)})
    ctx.add(P.Execute(cs, name=cs.name, op=op))
    return out


def _reduce_partials(ctx, partial, row, name, op, out_dtype):
    """Sum the rows of ``partial`` (V, row) fp32 -> (row,): columns spread over tiles, REDUCE_ADD."""
    V = partial.shape[0]
    tiles_arr = ctx.tiles_array(rotate=8)
    chunks = max(1, min(len(tiles_arr), row // 8 if row >= 8 else 1))
    while row % chunks:
        chunks -= 1
    lc = row // chunks
    ct = np.sort(tiles_arr[:chunks])
    gathered = ctx.variable(f"{op}/{name}_partials", (chunks * V, lc), "float32",
                            mapping=M.by_blocks((chunks * V, lc), (V, lc), ct), op=op)
    cidx = np.stack([np.zeros(chunks, np.int64), np.arange(chunks)], 1)
    ctx.add(P.Copy(partial.blocks((V, lc), cidx), gathered.whole(), name=f"{op}/gather_{name}", op=op))
    out = ctx.variable(f"{op}/{name}" if name else op, (row,), out_dtype,
                       mapping=M.linear(row, ct, grain=lc), op=op)
    cs = ctx.graph.add_compute_set(ctx.unique(f"{op}/reduce_{name}"), op=op)
    ctx.graph.add_vertices(cs, C.REDUCE_ADD, tiles=ct, fields={
        "in": gathered.blocks((V, lc), np.stack([np.arange(chunks), np.zeros(chunks, np.int64)], 1)),
        "out": out.blocks((lc,), np.arange(chunks)[:, None])})
    ctx.add(P.Execute(cs, name=cs.name, op=op))
    return out


def layer_norm_bwd(ctx, x, gamma, dy, name):
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
    ctx.graph.add_vertices(cs, OC.LAYER_NORM_GRAD, tiles=tiles, fields={
        "x": xt.regions(starts, sizes), "dy": dyt.regions(starts, sizes), "gamma": _vec_fields(g, tiles, tl, row),
        "dx": dx.regions(starts, sizes), "dgamma": pg.regions(vid, row), "dbeta": pb.regions(vid, row)},
        params={"row": np.int64(row)})
    ctx.add(P.Execute(cs, name=cs.name, op=op))
    dgamma = _reduce_partials(ctx, pg, row, "dgamma", op, gamma.dtype)
    dbeta = _reduce_partials(ctx, pb, row, "dbeta", op, gamma.dtype)
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
    ctx.graph.add_vertices(cs, OC.COLUMN_SUM, tiles=tiles, fields={
        "in": xt.regions(starts, sizes), "out": part.regions(np.arange(V) * row, row)},
        params={"row": np.int64(row)})
    ctx.add(P.Execute(cs, name=cs.name, op=op))
    return _reduce_partials(ctx, part, row, "", op, ctx.dtype)


# ============================================================================ data movement


def gather_rows(ctx, table, ids, name):
    """out[i] = table[ids[i]] with ``ids`` known when the graph is built (a planned exchange)."""
    ids = np.asarray(ids, dtype=np.int64).ravel()
    row = table.shape[-1]
    op = ctx.begin_op(name, "embedding", plan=f"{len(ids)} rows of {row} gathered by exchange",
                      min_bytes=2 * len(ids) * row * table.itemsize)
    out = ctx.variable(op, (len(ids), row), table.dtype, mapping=ctx.row_mapping(len(ids), row), op=op)
    idx = (ids[:, None] * row + np.arange(row, dtype=np.int64)[None, :]).ravel()
    ctx.add(P.Copy(flat_view(table, idx), out.whole(), name=f"{op}/gather", op=op))
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
    ctx.graph.add_vertices(cs, C.FILL, tiles=tiles, fields={"out": out.regions(starts, sizes)},
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
    n_t = ctx.target.tiles_per_ipu
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
    ctx.graph.add_vertices(zero, C.FILL, tiles=ztiles, fields={"out": acc.regions(zs, zn)},
                           params={"value": np.float32(0)})
    ctx.add(P.Execute(zero, name=zero.name, op=op))
    kb_idx, nb_idx = np.nonzero(mask.T)  # sorted by column: (nb, kb)
    kb_idx, nb_idx = nb_idx, kb_idx
    # only the non-zero blocks of B are kept, block-major
    Bs = _block_major(ctx, B, (block, block), np.stack([kb_idx, nb_idx], 1), "b_nonzero", op)
    col_first = np.concatenate([[0], np.cumsum(nnz_col)[:-1]])
    A_bm = _block_major(ctx, A, (bm, block), np.stack(np.meshgrid(np.arange(pm), np.arange(KB), indexing="ij"),
                                                      -1).reshape(-1, 2), "a", op)
    w = workers_for(bm, ctx.target.threads_per_tile)
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
        ctx.add(P.Copy(A_bm.regions((im * KB + kb) * sa, sa), a_rep.whole(), name=f"{op}/broadcast_a pass {r}", op=op))
        ctx.add(P.Copy(Bs.regions((col_first[nb] + r) * sb, sb), b_rep.whole(), name=f"{op}/broadcast_b pass {r}", op=op))
        vj = np.tile(np.arange(w, dtype=np.int64), nv)
        vv = np.repeat(start, w)
        cs = ctx.graph.add_compute_set(ctx.unique(f"{op}/blocks pass {r}"), op=op)
        ctx.graph.add_vertices(cs, OC.TILE_MATMUL[(False, False, True)], tiles=np.repeat(tl, w), fields={
            "a": a_rep.regions(vv * sa + vj * bmw * block, bmw * block), "b": b_rep.regions(vv * sb, sb),
            "out": acc.blocks((bmw, block), np.stack([np.repeat(im, w) * w + vj, np.repeat(nb, w)], 1))},
            params={"k": np.int64(block)})
        ctx.add(P.Execute(cs, name=cs.name, op=op))
    out = ctx.variable(op, (M, N), ctx.dtype, mapping=acc.mapping, op=op)
    _elementwise_cs(ctx, C.CAST, {"in": acc}, out, op, f"{op}/cast_out")
    return out
