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
from popvision_lite.emulator.ops.planners import (
    plan_elementwise,
    plan_matmul,
    rearrangements,
    split_even,
)
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


def _lay_out_weight(ctx, B, bks, bn, pk, ps, pm, pn, block_tile):
    """Map a weight B (K, N) that nothing has used yet for the plan of its first matmul (as Poplar's
    createMatMulInputRHS creates it): block (i, j) of shape (bks, bn) is spread by rows over the
    ``pm`` tiles that consume it (consumer q holds rows q/pm of it; with pm = 1 the block sits on its
    only consumer and is never exchanged), so the weight is never rearranged and each tile sends only
    its share when the block is broadcast.  (The rows of a block are separate regions of a row-major
    tensor: elementwise updates of the weight then run as 2D vertices, see codelets._MODEL_2D.)"""
    r = max(d for d in range(1, min(pm, bks) + 1) if bks % d == 0)
    tl = np.array([block_tile(i // ps, q, j) for i in range(pk * ps) for q in range(r) for j in range(pn)], np.int64)
    ctx.graph.set_mapping(B, M.by_blocks(B.shape, (bks // r, bn), tl))
    ctx.mark_used(B)


def matmul(ctx: OpContext, a, b, name: str, out_dtype=None):
    """C = A @ B with A (M, K) or (G, M, K) and B (K, N) or (G, K, N); AMP matmul on tiles.

    As poplin: the planner splits M, N and K over the IPU's tiles (``pm x pn x pk`` blocks, plus
    serial passes over a tile's K chunk when one pass would not fit ``available_memory_proportion``
    of the tile).  Every tile runs ONE AMP supervisor vertex over its block (all six workers).  With
    a K split each tile produces an FP32 partial of its output block, and the ``pk`` partials are
    reduced on the tiles that own the output (one exchange, then strided-reduce worker vertices).
    Operands that are transposed views are read in their stored layout (no transpose copy); operands
    whose blocks are not contiguous are rearranged block-major (one exchange) before being
    broadcast, except a weight that nothing has used yet: it is laid out in the plan's block order
    once (``_lay_out_weight``) and broadcast from there."""
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
    ab3, bb3 = len(ash) == 3, len(bsh) == 3
    b_blocks = not tb and not bb3  # broadcast B straight from its (bks, bn) blocks
    weight = b_blocks and B.kind == "variable" and not ctx.is_used(B)  # lay it out for this plan first
    plan = plan_matmul(Mm, N, K, ctx.plan_target, ctx.precision, tiles=per_group, exact=True, ta=ta, tb=tb,
                       b_laid_out=b_blocks)
    pm, pn, pk, ps = plan.pm, plan.pn, plan.pk, plan.ps
    bm, bn, bkt = Mm // pm, N // pn, K // pk
    bks = bkt // ps
    rearr_a, rearr_b = rearrangements(pk, pn, ps, ta, tb, b_blocks)
    desc = plan.describe() + (f"; {G} independent products" if G > 1 else "") + \
        ("; A read transposed" if ta else "") + ("; B read transposed" if tb else "") + \
        ("; B laid out for this plan once" if weight else "")
    ctx.graph.add_op(op, plan=desc)
    ctx.records[-1]["plan"] = desc
    T = G * pk * pm * pn  # tile blocks in (g, ik, im, in) order
    n_t = ctx.target.tiles_per_ipu
    tiles_arr = ctx.tiles_array(rotate=T if T < n_t else 0)
    vt = tiles_arr[np.arange(T) % len(tiles_arr)]
    g_i, k_i, im_i, in_i = np.unravel_index(np.arange(T), (G, pk, pm, pn))
    blk_a, blk_b = bm * bks, bks * bn

    # --- A: blocks (bm, bks) [stored (bks, bm) when transposed]; source offsets per (g, ik, im, p)
    if not rearr_a:
        A_src = A  # row blocks of a row-major A with the whole K on the tile are contiguous
        a_src = lambda g, ik, im, p: A_src.regions((g * Mm + im * bm) * K, blk_a)  # noqa: E731
    else:
        gg, ii, kk, pp = (x.ravel() for x in np.meshgrid(np.arange(G), np.arange(pm), np.arange(pk), np.arange(ps),
                                                         indexing="ij"))
        kc = kk * ps + pp
        coord = np.stack([kc, ii], 1) if ta else np.stack([ii, kc], 1)
        grid = np.concatenate([gg[:, None], coord], 1) if ab3 else coord
        A_src = _block_major(ctx, A, ((1,) if ab3 else ()) + ((bks, bm) if ta else (bm, bks)), grid, "a", op)
        a_src = lambda g, ik, im, p: A_src.regions(((((g * pm + im) * pk + ik) * ps) + p) * blk_a, blk_a)  # noqa: E731
    # --- B: blocks (bks, bn) [stored (bn, bks) when transposed]
    Gb = G if bb3 else 1
    if weight:
        _lay_out_weight(ctx, B, bks, bn, pk, ps, pm, pn, lambda ik, q, j: int(vt[(ik * pm + q) * pn + j]))
    if b_blocks:
        b_src = lambda g, ik, p, j: B.blocks((bks, bn), np.stack([ik * ps + p, j], 1))  # noqa: E731
    elif not rearr_b:
        if tb:
            b_src = lambda g, ik, p, j: B.regions((g * N + j * bn) * K, blk_b)  # noqa: E731
        else:
            b_src = lambda g, ik, p, j: B.regions((g * K + (ik * ps + p) * bks) * N, blk_b)  # noqa: E731
    else:
        gg, kk, pp, nn = (x.ravel() for x in np.meshgrid(np.arange(Gb), np.arange(pk), np.arange(ps), np.arange(pn),
                                                         indexing="ij"))
        kc = kk * ps + pp
        coord = np.stack([nn, kc], 1) if tb else np.stack([kc, nn], 1)
        grid = np.concatenate([gg[:, None], coord], 1) if bb3 else coord
        B_src = _block_major(ctx, B, ((1,) if bb3 else ()) + ((bn, bks) if tb else (bks, bn)), grid, "b", op)
        b_src = lambda g, ik, p, j: B_src.regions((((g * pk + ik) * ps + p) * pn + j) * blk_b, blk_b)  # noqa: E731

    tstart = np.arange(T, dtype=np.int64)
    a_rep = ctx.variable(f"{op}/a_tile_blocks", (T, blk_a), A.dtype,
                         mapping=M.intervals(vt, tstart * blk_a, (tstart + 1) * blk_a), op=op)
    b_rep = ctx.variable(f"{op}/b_tile_blocks", (T, bks, bn) if b_blocks else (T, blk_b), B.dtype,
                         mapping=M.intervals(vt, tstart * blk_b, (tstart + 1) * blk_b), op=op)
    # output of the AMP vertices: C itself, or FP32 partials (pk, per product) / an FP32 accumulator
    if pk > 1:
        acc_shape = (G * pk, Mm, N)
        acc = ctx.variable(f"{op}/partials", acc_shape, "float32",
                           mapping=M.by_blocks(acc_shape, (1, bm, bn), vt), op=op)
        c_index = np.stack([g_i * pk + k_i, im_i, in_i], 1)
        cblock = (1, bm, bn)
    else:
        cblock = (1, bm, bn) if ab3 else (bm, bn)
        c_index = np.stack([g_i, im_i, in_i], 1) if ab3 else np.stack([im_i, in_i], 1)
        acc = None
    if pk > 1:  # the output lives where its slices are reduced
        red = _k_partial_vertices(G, pk, pm, pn, bm, bn, Mm, N, vt)
        o = np.argsort(red["out_start"], kind="stable")
        st = red["out_start"][o]
        cmap = M.intervals(red["tile"][o], st, st + red["len"][o])
    else:
        cmap = M.by_blocks(out_shape, (1, bm, bn) if ab3 else (bm, bn), vt)
    C_out = ctx.variable(op, out_shape, out_dtype, mapping=cmap, op=op)
    if pk == 1 and ps > 1:
        acc = ctx.variable(f"{op}/acc", out_shape, "float32", mapping=C_out.mapping, op=op)
    target_t = acc if acc is not None else C_out
    a_field = a_rep.regions(tstart * blk_a, blk_a)
    b_field = b_rep.regions(tstart * blk_b, blk_b)
    gb_i = g_i if bb3 else np.zeros_like(g_i)
    for p in range(ps):
        sfx = f" pass {p}" if ps > 1 else ""
        ctx.add(P.Copy(a_src(g_i, k_i, im_i, p), a_rep.whole(), name=f"{op}/broadcast_a{sfx}", op=op))
        b_dst = b_rep.blocks((1, bks, bn), np.stack([tstart, 0 * tstart, 0 * tstart], 1)) if b_blocks else b_rep.whole()
        ctx.add(P.Copy(b_src(gb_i, k_i, p, in_i), b_dst, name=f"{op}/broadcast_b{sfx}", op=op))
        cs = ctx.graph.add_compute_set(ctx.unique(f"{op}/amp{sfx}"), op=op)
        ctx.graph.add_vertices(cs, OC.TILE_MATMUL[(ta, tb, p > 0)], tiles=vt, fields={
            "a": a_field, "b": b_field, "out": target_t.blocks(cblock, c_index)}, params={"k": np.int64(bks)})
        ctx.add(P.Execute(cs, name=cs.name, op=op))
    if pk > 1:
        _reduce_k_partials(ctx, acc, C_out, red, pk, op)
    elif ps > 1:
        _elementwise_cs(ctx, C.CAST, {"in": acc}, C_out, op, f"{op}/cast_out")
    return C_out


def _k_partial_vertices(G, pk, pm, pn, bm, bn, Mm, N, vt) -> dict:
    """The reduce vertices of a K-split matmul (see _reduce_k_partials), ordered by owner tile:
    per vertex its owner tile, output start (flat index in C), length, block, row and column."""
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
               out_start=(gb[vb] * Mm + row0) * N + col0)
    order = np.lexsort((np.arange(len(vb)), red["tile"]))
    return {k: v[order] for k, v in red.items()}


def _reduce_k_partials(ctx, part, C_out, red, pk, op):
    """Reduce the ``pk`` FP32 partials of every output block on the tiles that computed them, as
    poplibs reduces conv partials: the block's elements are cut in ``pk`` even slices, slice s
    owned by the tile of partial s; every owner gathers its slice from the other pk - 1 tiles (one
    exchange) and reduces it with strided-reduce worker vertices (one per row run of the slice,
    handed to the six workers in turn), writing the output type."""
    Mm, N = part.shape[-2], part.shape[-1]
    vlen, vtile = red["len"], red["tile"]
    g_len = pk * vlen
    g_start = np.cumsum(g_len) - g_len
    gathered = ctx.variable(f"{op}/partials_gathered", (int(g_len.sum()),), "float32",
                            mapping=M.intervals(vtile, g_start, g_start + g_len), op=op)
    q = np.arange(pk)
    src_start = (((red["g"][:, None] * pk + q[None, :]) * Mm + red["row"][:, None]) * N + red["col"][:, None]).ravel()
    ctx.add(P.Copy(part.regions(src_start, np.repeat(vlen, pk)), gathered.whole(), name=f"{op}/gather_partials",
                   op=op))
    cs = ctx.graph.add_compute_set(ctx.unique(f"{op}/reduce_partials"), op=op)
    ctx.graph.add_vertices(cs, OC.REDUCE_PARTIALS, tiles=vtile, fields={
        "in": gathered.regions(g_start, g_len), "out": C_out.regions(red["out_start"], vlen)},
        params={"k": np.int64(pk)})
    ctx.add(P.Execute(cs, name=cs.name, op=op))


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


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _reduce_stage(ctx, srcs, k, row, lc, outs, op, stage):
    """One stage of a reduction tree: for every source (tensor (R, row) fp32 with R = groups x k) and
    every group of ``k`` consecutive rows and every chunk of ``lc`` columns, one strided-reduce
    vertex (ReducePartials) gathers its (k, lc) partials (one exchange for the whole stage) and
    writes (lc) elements of row ``group`` of the matching output (tensor (groups, row) or (row,)).
    Vertices are spread round-robin over all the IPU's tiles, six per tile at most per round."""
    tiles_arr = ctx.tiles_array(rotate=0)
    nt = len(tiles_arr)
    verts = []  # (src index, group, chunk)
    for i, src in enumerate(srcs):
        groups = src.shape[0] // k
        for gidx in range(groups):
            for c in range(row // lc):
                verts.append((i, gidx, c))
    nv = len(verts)
    vi = np.array([v[0] for v in verts], np.int64)
    vg = np.array([v[1] for v in verts], np.int64)
    vc = np.array([v[2] for v in verts], np.int64)
    vt = np.sort(tiles_arr[np.arange(nv) % nt]) if nv <= nt else tiles_arr[(np.arange(nv) * nt) // nv]
    per = k * lc
    gstart = np.arange(nv, dtype=np.int64) * per
    gathered = ctx.variable(f"{op}/reduce{stage}_partials", (nv * per,), "float32",
                            mapping=M.intervals(vt, gstart, gstart + per), op=op)
    q = np.arange(k, dtype=np.int64)
    cs = ctx.graph.add_compute_set(ctx.unique(f"{op}/reduce{stage}"), op=op)
    for i, src in enumerate(srcs):
        sel = np.nonzero(vi == i)[0]
        rows = vg[sel][:, None] * k + q[None, :]
        st = (rows * row + vc[sel][:, None] * lc).ravel()
        ctx.add(P.Copy(src.regions(st, lc), flat_view(gathered, (gstart[sel][:, None] + np.arange(per)).ravel()),
                       name=f"{op}/gather{stage}_{i}", op=op))
        out = outs[i]
        ostart = (vg[sel] * row if len(out.shape) == 2 else 0) + vc[sel] * lc
        o = np.argsort(ostart, kind="stable")
        ctx.graph.set_mapping(out, M.intervals(vt[sel][o], ostart[o], ostart[o] + lc))  # written where reduced
        ctx.graph.add_vertices(cs, OC.REDUCE_PARTIALS, tiles=vt[sel], fields={
            "in": gathered.regions(gstart[sel], per), "out": out.regions(ostart, lc)}, params={"k": np.int64(k)})
    ctx.add(P.Execute(cs, name=cs.name, op=op))


def _reduce_partials(ctx, items, op):
    """Sum the rows of FP32 partial tensors (V, row) -> (row,) each, as popops' multi-stage reduction
    does: a tree over many tiles with all workers.  ``items`` = [(partial, name, out_dtype)];
    returns the outputs.  With many partials a first stage reduces groups of ~32 rows into an
    intermediate (V/g, row) over all tiles (strided-reduce vertices, six per tile), the second stage
    reduces the groups; every stage's chunks of columns are sized to give about six vertices per
    tile."""
    V, row = items[0][0].shape
    nt = ctx.target.tiles_per_ipu
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

    if V > 64:
        s = min(_divisors(V), key=lambda d: abs(V // d - 32))  # groups of ~32 partials
        k1 = V // s
        inter = [ctx.variable(f"{op}/{name or 'sum'}_stage1", (s, row), "float32",
                              mapping=ctx.linear_mapping(s * row), op=op) for _p, name, _dt in items]
        _reduce_stage(ctx, srcs, k1, row, chunk(s * len(items)), inter, op, 1)
        # the outputs take the mapping the last stage writes them with
        srcs, V = inter, s
    _reduce_stage(ctx, srcs, V, row, chunk(len(items)), outs, op, 2)
    return outs


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
    ctx.graph.add_vertices(cs, OC.COLUMN_SUM, tiles=tiles, fields={
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
