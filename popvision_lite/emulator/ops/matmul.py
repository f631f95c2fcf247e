"""Matmul on the emulator graph (poplin's matmul as the op library implements it).

The planner (``planners.plan_matmul``) splits M, N and K over the IPU's tiles; this module builds the
plan: operand rearrangements, broadcasts, one AMP supervisor vertex per tile, and the reduction of K
partials.  Splits need not divide M and N (Poplar cuts a dimension into parts of ceil and floor
elements, so a power-of-two shape can use all 1472 tiles of a Mk2, not only 1024): the blocks of an
uneven split have at most two sizes per dimension, one vertex group (and one Windows field) per block
shape, all in the same compute set and moved by the same exchanges.
"""

from __future__ import annotations

import numpy as np

from popvision_lite.emulator import mapping as M
from popvision_lite.emulator import programs as P
from popvision_lite.emulator.codelets import poplin as CL
from popvision_lite.emulator.codelets import popops as CO
from popvision_lite.emulator.codelets import popops_rows as CR
from popvision_lite.emulator.graph import Concat
from popvision_lite.emulator.ops.common import _elementwise_cs, _nbytes, mark_split, materialize, unit_steps
from popvision_lite.emulator.ops.context import OpContext, View
from popvision_lite.emulator.ops.matmul_layouts import planes_by_windows, shape_groups
from popvision_lite.emulator.ops.matmul_partials import (  # noqa: F401 - also used by ops/conv.py and the tests
    BlockGather,
    _by_tile_then,
    _k_partials_on_positions,
    _ranked,
    _stable_by,
    k_partial_vertices,
    k_partial_vertices_uneven,
)
from popvision_lite.emulator.ops.planners import (
    multi_stage_reduce_depths,
    plan_matmul,
    rearrangements,
    reduce_stage_sections,
)
from popvision_lite.errors import EmulatorError


def _as_operand(ctx, x, name, op):
    """(tensor, transposed): a Tensor as is; a View that swaps the last two axes of its base tensor
    becomes (base, True) - no data moves; any other View is materialised (a rearranging copy)."""
    if isinstance(x, View):
        base = x.base
        if len(base.shape) in (2, 3) and len(x.shape) == len(base.shape):
            sh = base.shape
            want = sh[:-2] + (sh[-1], sh[-2])
            if tuple(x.shape) == want:
                axes = tuple(range(len(sh) - 2)) + (len(sh) - 1, len(sh) - 2)
                if x.axes == axes:  # a transpose view (Backend.t): no index to compare
                    return base, True
                # (the first row first: a view that is no transpose mostly differs there, without an index of
                # the whole base to compare)
                first = x.index[(0,) * (len(sh) - 1)]
                if np.array_equal(first, np.arange(sh[-2], dtype=np.int64) * sh[-1]) and \
                        np.array_equal(x.index, np.arange(base.size, dtype=np.int64).reshape(sh).transpose(axes)):
                    return base, True
            if tuple(x.index.shape) == sh and np.array_equal(x.index[(0,) * (len(sh) - 1)], np.arange(sh[-1])) and \
                    np.array_equal(x.index.ravel(), np.arange(base.size)):
                return base, False
        if x.index.ndim >= 2 and x.index.shape[-1] > 1 and x.index.shape[-2] > 1:
            # a transposed view of a view: materialise the untransposed one (longer contiguous runs)
            runs_x = unit_steps(x.index, -1)
            runs_in = unit_steps(x.index, -2)  # along the last axis of the untransposed view
            if runs_in > runs_x:
                return materialize(ctx, View(base, np.swapaxes(x.index, -1, -2)), name, op), True
        return materialize(ctx, x, name, op), False
    return x, False


def _per_pass_mapping(ctx, seg_sizes):
    """Mapping of a staging buffer that holds one segment per serial pass, one after another: each
    segment spread linearly over the IPU's tiles on its own, so that every pass's broadcast is sent
    by all the tiles (one linear spread of the whole buffer left each pass on 1 / passes of them,
    whose send side then bounded the exchange; poplin's estimate assumes the operands spread evenly)."""
    tiles, starts, stops, off = [], [], [], 0
    for n in seg_sizes:
        m = ctx.linear_mapping(int(n), grain=4)
        tiles.append(m.tile)
        starts.append(m.start + off)
        stops.append(m.stop + off)
        off += int(n)
    return M.intervals(np.concatenate(tiles), np.concatenate(starts), np.concatenate(stops))


def _block_major(ctx, X, blk, grid_index, name, op, passes: int = 1):
    """Copy the blocks ``grid_index`` (n, ndim) of shape ``blk`` of X, in that order (serial pass
    outermost), into a block-major temporary (each block contiguous) whose every pass is spread
    linearly over the IPU's tiles (_per_pass_mapping), so that broadcasting a block later is one
    piece per source tile it spans."""
    n = len(grid_index)
    belems = int(np.prod(blk))
    T = ctx.variable(f"{op}/{name}_blocks_major", (n, belems), X.dtype,
                     mapping=_per_pass_mapping(ctx, [n // passes * belems] * passes), op=op)
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


def _even_sources(ctx, op, A, ta, B, tb, plan, G, Mm, N, K, ab3, bb3, b_blocks, weight, rearr_a, rearr_b, vt):
    """Copy sources of the even plan's broadcasts: ``a_src(g, ik, im, p)`` the A blocks (bm, bks) [stored
    (bks, bm) when transposed] and ``b_src(g, ik, p, j)`` the B blocks (bks, bn) [stored (bn, bks)], straight
    from the operand or from a block-major staging buffer (one exchange, serial pass outermost)."""
    pm, pn, pk, ps = plan.pm, plan.pn, plan.pk, plan.ps
    bm, bn = Mm // pm, N // pn
    bks = K // pk // ps
    blk_a, blk_b = bm * bks, bks * bn
    if not rearr_a:
        A_src = A  # row blocks of a row-major A with the whole K on the tile are contiguous
        a_src = lambda g, ik, im, p: A_src.regions((g * Mm + im * bm) * K, blk_a)  # noqa: E731
    else:
        pp, gg, ii, kk = (x.ravel() for x in np.meshgrid(np.arange(ps), np.arange(G), np.arange(pm), np.arange(pk),
                                                         indexing="ij"))
        kc = kk * ps + pp
        coord = np.stack([kc, ii], 1) if ta else np.stack([ii, kc], 1)
        grid = np.concatenate([gg[:, None], coord], 1) if ab3 else coord
        A_src = _block_major(ctx, A, ((1,) if ab3 else ()) + ((bks, bm) if ta else (bm, bks)), grid, "a", op, ps)
        a_src = lambda g, ik, im, p: A_src.regions((((p * G + g) * pm + im) * pk + ik) * blk_a, blk_a)  # noqa: E731
    # --- B: blocks (bks, bn) [stored (bn, bks) when transposed]
    Gb = G if bb3 else 1
    if weight:
        _lay_out_weight(ctx, B, bks, bn, pk, ps, pm, pn, lambda ik, q, j: int(vt[(ik * pm + q) * pn + j]))
    if b_blocks:  # (windows at the blocks' origins: a Windows source, which the compile takes in compact form)
        b_src = lambda g, ik, p, j: B.windows((bks, bn), np.stack([(ik * ps + p) * bks, j * bn], 1))  # noqa: E731
    elif not rearr_b:
        if tb:
            b_src = lambda g, ik, p, j: B.regions((g * N + j * bn) * K, blk_b)  # noqa: E731
        else:
            b_src = lambda g, ik, p, j: B.regions((g * K + (ik * ps + p) * bks) * N, blk_b)  # noqa: E731
    else:
        pp, gg, kk, nn = (x.ravel() for x in np.meshgrid(np.arange(ps), np.arange(Gb), np.arange(pk), np.arange(pn),
                                                         indexing="ij"))
        kc = kk * ps + pp
        coord = np.stack([nn, kc], 1) if tb else np.stack([kc, nn], 1)
        grid = np.concatenate([gg[:, None], coord], 1) if bb3 else coord
        B_src = _block_major(ctx, B, ((1,) if bb3 else ()) + ((bn, bks) if tb else (bks, bn)), grid, "b", op, ps)
        b_src = lambda g, ik, p, j: B_src.regions((((p * Gb + g) * pk + ik) * pn + j) * blk_b, blk_b)  # noqa: E731
    return a_src, b_src


def matmul(ctx: OpContext, a, b, name: str, out_dtype=None):
    """C = A @ B with A (M, K) or (G, M, K) and B (K, N) or (G, K, N); AMP matmul on tiles.

    As poplin: the planner splits M, N and K over the IPU's tiles (``pm x pn x pk`` blocks, plus
    serial passes over a tile's K chunk when one pass would not fit ``available_memory_proportion``
    of the tile).  Every tile runs ONE AMP supervisor vertex over its block (all six workers).  With
    a K split each tile produces a partial of its output block (``ctx.partials_dtype``: FP32 unless
    the run asks for half partials), and the ``pk`` partials are
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
    ntiles = ctx.n_tiles
    per_group = max(1, ntiles // G)
    out_shape = (G, Mm, N) if len(ash) == 3 else (Mm, N)
    min_bytes = _nbytes(a) + _nbytes(b) + int(np.prod(out_shape)) * (2 if out_dtype == "float16" else 4)
    op = ctx.begin_op(name, "matmul", min_bytes=min_bytes)
    A, ta = _as_operand(ctx, a, "a", op)
    B, tb = _as_operand(ctx, b, "b", op)
    ab3, bb3 = len(ash) == 3, len(bsh) == 3
    b_blocks = not tb and not bb3  # broadcast B straight from its (bks, bn) blocks
    weight = b_blocks and B.kind == "variable" and not ctx.is_used(B)  # lay it out for this plan first
    # M and N may be split unevenly (parts of ceil and floor size, as poplin's planner partitions);
    # K is split exactly (every K chunk the same size: partial sums and serial passes stay uniform)
    plan = plan_matmul(Mm, N, K, ctx.plan_target, ctx.precision, tiles=per_group, exact=False, exact_k=True,
                       ta=ta, tb=tb, b_laid_out=b_blocks)
    pm, pn, pk, ps = plan.pm, plan.pn, plan.pk, plan.ps
    rearr_a, rearr_b = rearrangements(pk, pn, ps, ta, tb, b_blocks)
    desc = plan.describe() + (f"; {G} independent products" if G > 1 else "") + \
        ("; A read transposed" if ta else "") + ("; B read transposed" if tb else "") + \
        ("; B laid out for this plan once" if weight else "")
    ctx.graph.add_op(op, plan=desc)
    ctx.records[-1]["plan"] = desc
    T = G * pk * pm * pn  # tile blocks in (g, ik, im, in) order
    n_t = ctx.n_tiles
    tiles_arr = ctx.tiles_array(rotate=T if T < n_t else 0)
    vt = tiles_arr[np.arange(T) % len(tiles_arr)]
    g_i, k_i, im_i, in_i = np.unravel_index(np.arange(T), (G, pk, pm, pn))
    if Mm % pm or N % pn:
        return _build_uneven(ctx, op, A, ta, B, tb, plan, G, Mm, N, K, ab3, bb3, b_blocks, weight, rearr_a, rearr_b,
                             out_shape, out_dtype, vt, (g_i, k_i, im_i, in_i))
    return _build_even(ctx, op, A, ta, B, tb, plan, G, Mm, N, K, ab3, bb3, b_blocks, weight, rearr_a, rearr_b, out_shape,
                       out_dtype, vt, (g_i, k_i, im_i, in_i))


def _rank_of(ctx, vt) -> tuple[int, int]:
    """(origin, span) of the op's tile order: the IPU's tiles from the rotating offset ``vt`` starts at
    (``ctx.tiles_array``).  A tile's rank in it is ``(tile - origin) % span``; on tiles that do not rotate it is the
    tile less the IPU's first, so an order by rank is the order by tile."""
    r = ctx.tiles()
    return int(vt[0]) if len(vt) else r.start, len(r)


def _build_even(ctx, op, A, ta, B, tb, plan, G, Mm, N, K, ab3, bb3, b_blocks, weight, rearr_a, rearr_b, out_shape,
                out_dtype, vt, idx):
    """The plan of ``matmul`` when pm divides M and pn divides N: every tile's blocks the same size (the
    arguments as ``_build_uneven``'s)."""
    g_i, k_i, im_i, in_i = idx
    pm, pn, pk, ps = plan.pm, plan.pn, plan.pk, plan.ps
    T = len(vt)
    bm, bn, bkt = Mm // pm, N // pn, K // pk
    bks = bkt // ps
    blk_a, blk_b = bm * bks, bks * bn

    a_src, b_src = _even_sources(ctx, op, A, ta, B, tb, plan, G, Mm, N, K, ab3, bb3, b_blocks, weight,
                                 rearr_a, rearr_b, vt)

    tstart = np.arange(T, dtype=np.int64)
    a_rep = ctx.variable(f"{op}/a_tile_blocks", (T, blk_a), A.dtype,
                         mapping=M.intervals(vt, tstart * blk_a, (tstart + 1) * blk_a), op=op)
    b_rep = ctx.variable(f"{op}/b_tile_blocks", (T, bks, bn) if b_blocks else (T, blk_b), B.dtype,
                         mapping=M.intervals(vt, tstart * blk_b, (tstart + 1) * blk_b), op=op)
    # output of the AMP vertices: C itself, or partials (pk, per product) / an accumulator in ctx.partials_dtype
    if pk > 1:
        acc_shape = (G * pk, Mm, N)
        acc = ctx.variable(f"{op}/partials", acc_shape, ctx.partials_dtype,
                           mapping=M.by_blocks(acc_shape, (1, bm, bn), vt), op=op)
        c_index = np.stack([g_i * pk + k_i, im_i, in_i], 1)
        cblock = (1, bm, bn)
    else:
        cblock = (1, bm, bn) if ab3 else (bm, bn)
        c_index = np.stack([g_i, im_i, in_i], 1) if ab3 else np.stack([im_i, in_i], 1)
        acc = None
    if pk > 1:  # the output lives where its slices are reduced
        red = k_partial_vertices(G, pk, pm, pn, bm, bn, Mm, N, vt, _rank_of(ctx, vt))
        o = np.argsort(red["out_start"], kind="stable")
        st = red["out_start"][o]
        cmap = M.intervals(red["tile"][o], st, st + red["len"][o])
    else:
        cmap = M.by_blocks(out_shape, (1, bm, bn) if ab3 else (bm, bn), vt)
    C_out = ctx.variable(op, out_shape, out_dtype, mapping=cmap, op=op)
    if pk == 1 and ps > 1:
        acc = ctx.variable(f"{op}/acc", out_shape, ctx.partials_dtype, mapping=C_out.mapping, op=op)
    target_t = acc if acc is not None else C_out
    a_field = a_rep.regions(tstart * blk_a, blk_a)
    b_field = b_rep.regions(tstart * blk_b, blk_b)
    gb_i = g_i if bb3 else np.zeros_like(g_i)
    for p in range(ps):
        sfx = f" pass {p}" if ps > 1 else ""
        ctx.add(P.Copy(a_src(g_i, k_i, im_i, p), a_rep.whole(), name=f"{op}/broadcast_a{sfx}", op=op, broadcast=True))
        # (tile t's block is b_rep[t]: the whole of b_rep in order, a contiguous destination)
        ctx.add(P.Copy(b_src(gb_i, k_i, p, in_i), b_rep.whole(), name=f"{op}/broadcast_b{sfx}", op=op, broadcast=True))
        cs = ctx.graph.add_compute_set(ctx.unique(f"{op}/amp{sfx}"), op=op)
        ctx.graph.add_vertices(cs, CL.TILE_MATMUL[(ta, tb, p > 0)], tiles=vt, fields={
            "a": a_field, "b": b_field, "out": target_t.blocks(cblock, c_index)}, params={"k": np.int64(bks)})
        ctx.add(P.Execute(cs, name=cs.name, op=op))
    return _finish_output(ctx, acc, C_out, red if pk > 1 else None, pk, ps, op)


def _finish_output(ctx, acc, C_out, red, pk: int, ps: int, op: str):
    """After the AMP passes: the K partials reduced into C (pk > 1), or the serial passes' accumulator cast to C."""
    if pk > 1:
        reduce_k_partials(ctx, acc, C_out, red, pk, op)
    elif ps > 1:
        _elementwise_cs(ctx, CO.CAST, {"in": acc}, C_out, op, f"{op}/cast_out")
    return C_out


def _parts(n: int, p: int) -> tuple[np.ndarray, np.ndarray]:
    """(sizes, offsets) of ``p`` contiguous parts of ``n`` elements, ceil-sized parts first (as
    planners.split_even); the largest part is ceil(n / p), the size the planner costs."""
    q, r = divmod(int(n), int(p))
    sz = np.full(int(p), q, np.int64)
    sz[:r] += 1
    return sz, np.concatenate([[0], np.cumsum(sz)[:-1]]).astype(np.int64)


def _class_concat(X, shapes, origins, outer=None):
    """Copy source: the windows ``shapes[i]`` at ``origins[i]`` of X, grouped by shape (one Windows
    field per shape, in the order of the distinct shapes; with ``outer``, grouped by (outer[i], shape)
    in that order); returns (endpoint, order) with ``order`` the window indices in the endpoint's
    element order."""
    shapes = np.asarray(shapes, np.int64)
    lead = 0 if outer is None else 1
    if outer is not None:
        shapes = np.concatenate([np.asarray(outer, np.int64)[:, None], shapes], 1)
    keys, sels, order = shape_groups(shapes)
    parts = [X.windows(tuple(int(b) for b in key[lead:]), origins[sel]) for key, sel in zip(keys, sels, strict=True)]
    return (parts[0] if len(parts) == 1 else Concat(parts)), order


def _offsets(order, sizes) -> np.ndarray:
    """Start of every item in a buffer that holds the items in ``order``."""
    sizes = np.asarray(sizes, np.int64)
    st = np.zeros(len(sizes), np.int64)
    st[order] = np.cumsum(sizes[order]) - sizes[order]
    return st


def _to_block_major(ctx, X, op: str, tag: str, g, kc, sz, off, bks: int, k_first: bool, batched: bool, p):
    """One exchange of operand ``X`` into a block-major temporary ``{op}/{tag}_blocks_major``: block i is the
    (bks x sz[i]) window at K offset kc[i] and other-dimension offset off[i] (K the first stored dimension when
    ``k_first``; a leading batch index g[i] when ``batched``), broadcast in serial pass p[i]: the blocks of a
    pass are together and spread over the tiles (_per_pass_mapping).  Returns (temporary, each block's
    offset in it)."""
    kcol = np.full(len(kc), bks)
    shp = np.stack([kcol, sz], 1) if k_first else np.stack([sz, kcol], 1)
    org = np.stack([kc, off], 1) if k_first else np.stack([off, kc], 1)
    if batched:
        shp = np.concatenate([np.ones((len(kc), 1), np.int64), shp], 1)
        org = np.concatenate([g[:, None], org], 1)
    src, order = _class_concat(X, shp, org, outer=p)
    sizes = sz * bks
    tot = int(sizes.sum())
    seg = np.bincount(p, weights=sizes).astype(np.int64)
    T = ctx.variable(f"{op}/{tag}_blocks_major", (tot,), X.dtype, mapping=_per_pass_mapping(ctx, seg), op=op)
    ctx.add(P.Copy(src, T.whole(), name=f"{op}/rearrange_{tag}", op=op))
    return T, _offsets(order, sizes)


def _build_uneven(ctx, op, A, ta, B, tb, plan, G, Mm, N, K, ab3, bb3, b_blocks, weight, rearr_a, rearr_b,
                  out_shape, out_dtype, vt, idx):
    """The plan of ``matmul`` when pm does not divide M or pn does not divide N: the same programs
    (operand rearrangements, one broadcast of A and of B per pass, one AMP compute set per pass, the K
    reduction), with blocks of two sizes per dimension.  Each tile's A / B block sits contiguously in
    its staging buffer; the AMP vertices form one group per block shape; their outputs are Windows of
    C (or of the partials)."""
    g_i, k_i, im_i, in_i = idx
    pm, pn, pk, ps = plan.pm, plan.pn, plan.pk, plan.ps
    T = len(vt)
    bks = K // pk // ps
    msz, moff = _parts(Mm, pm)
    nsz, noff = _parts(N, pn)
    bm_t, bn_t = msz[im_i], nsz[in_i]
    Gb = G if bb3 else 1

    a_src = _uneven_a_source(ctx, op, A, ta, rearr_a, G, Mm, K, plan, bks, msz, moff, ab3, idx)
    b_src, b_order = _uneven_b_source(ctx, op, B, tb, rearr_b, b_blocks, weight, Gb, N, K, plan, bks, nsz, noff, bb3,
                                      vt, idx)

    a_size, b_size = bm_t * bks, bks * bn_t
    a_start = _offsets(np.arange(T), a_size)
    b_start = _offsets(b_order, b_size)
    a_rep = ctx.variable(f"{op}/a_tile_blocks", (int(a_size.sum()),), A.dtype,
                         mapping=M.intervals(vt, a_start, a_start + a_size), op=op)
    b_rep = ctx.variable(f"{op}/b_tile_blocks", (int(b_size.sum()),), B.dtype,
                         mapping=M.intervals(vt, b_start, b_start + b_size), op=op)
    acc, red, cmap, c_shape, c_org = _uneven_outputs(ctx, op, plan, G, Mm, N, ab3, out_shape, msz, moff, nsz, noff,
                                                      vt, idx)
    C_out = ctx.variable(op, out_shape, out_dtype, mapping=cmap, op=op)
    if pk == 1 and ps > 1:
        acc = ctx.variable(f"{op}/acc", out_shape, ctx.partials_dtype, mapping=C_out.mapping, op=op)
    target_t = acc if acc is not None else C_out
    classes, class_sel, _ = shape_groups(np.stack([bm_t, bn_t], 1))
    for p in range(ps):
        sfx = f" pass {p}" if ps > 1 else ""
        ctx.add(P.Copy(a_src(p), a_rep.whole(), name=f"{op}/broadcast_a{sfx}", op=op, broadcast=True))
        ctx.add(P.Copy(b_src(p)[0], b_rep.whole(), name=f"{op}/broadcast_b{sfx}", op=op, broadcast=True))
        cs = ctx.graph.add_compute_set(ctx.unique(f"{op}/amp{sfx}"), op=op)
        for (m_c, n_c), sel in zip(classes, class_sel, strict=True):  # one vertex group per block shape
            ctx.graph.add_vertices(cs, CL.TILE_MATMUL[(ta, tb, p > 0)], tiles=vt[sel], fields={
                "a": a_rep.regions(a_start[sel], int(m_c) * bks), "b": b_rep.regions(b_start[sel], bks * int(n_c)),
                "out": target_t.windows(tuple(int(x) for x in c_shape[sel[0]]), c_org[sel])},
                params={"k": np.int64(bks)})
        ctx.add(P.Execute(cs, name=cs.name, op=op))
    return _finish_output(ctx, acc, C_out, red if pk > 1 else None, pk, ps, op)


def _uneven_a_source(ctx, op, A, ta, rearr_a, G, Mm, K, plan, bks, msz, moff, ab3, idx):
    """``_build_uneven``'s A side: pass p -> the copy source of every tile's (bm_t, bks) block [stored (bks, bm_t)
    when transposed]; a block-major temporary (one exchange from A's layout) when A needs rearranging."""
    g_i, k_i, im_i, _in_i = idx
    pm, pk, ps = plan.pm, plan.pk, plan.ps
    bm_t, r0 = msz[im_i], moff[im_i]
    if not rearr_a:  # row-major A, whole K on the tile: a block is bm_t contiguous rows
        def a_src(p):
            return A.regions((g_i * Mm + r0) * K, bm_t * K)
        return a_src
    # block-major temporary: blocks (g, im, ik, p)
    gg, ii, kk, pp = (x.ravel() for x in np.meshgrid(np.arange(G), np.arange(pm), np.arange(pk), np.arange(ps),
                                                     indexing="ij"))
    TA, offA = _to_block_major(ctx, A, op, "a", gg, (kk * ps + pp) * bks, msz[ii], moff[ii], bks, ta, ab3, pp)
    offA = offA.reshape(G, pm, pk, ps)

    def a_src(p):
        return TA.regions(offA[g_i, im_i, k_i, p], bm_t * bks)
    return a_src


def _uneven_b_source(ctx, op, B, tb, rearr_b, b_blocks, weight, Gb, N, K, plan, bks, nsz, noff, bb3, vt, idx):
    """``_build_uneven``'s B side: (pass p -> (copy source of every tile's (bks, bn_t) block [stored (bn_t, bks)
    when transposed], its block order or None), the tiles' order in the B staging buffer).  A weight nothing has
    used yet is first laid out in the plan's blocks, spread by rows over the blocks' consumers."""
    g_i, k_i, _im_i, in_i = idx
    pm, pn, pk, ps = plan.pm, plan.pn, plan.pk, plan.ps
    T = len(vt)
    bn_t, c0 = nsz[in_i], noff[in_i]
    gb_i = g_i if bb3 else np.zeros_like(g_i)
    b_order = np.arange(T)
    if weight:
        r = max(d for d in range(1, min(pm, bks) + 1) if bks % d == 0)
        ii, qq, jj = (x.ravel() for x in np.meshgrid(np.arange(pk * ps), np.arange(r), np.arange(pn), indexing="ij"))
        shp = np.stack([np.full(len(jj), bks // r), nsz[jj]], 1)
        org = np.stack([ii * bks + qq * (bks // r), noff[jj]], 1)
        tl = vt[((ii // ps) * pm + qq) * pn + jj]
        ctx.graph.set_mapping(B, M.by_windows(B.shape, shp, org, tl, ctx.window_layouts))
        ctx.mark_used(B)
    if b_blocks:
        def b_src(p):
            shp = np.stack([np.full(T, bks), bn_t], 1)
            org = np.stack([(k_i * ps + p) * bks, c0], 1)
            return _class_concat(B, shp, org)
        b_order = b_src(0)[1]
    elif not rearr_b:
        if tb:  # B stored (N, K), whole K on the tile: bn_t contiguous rows
            def b_src(p):
                return B.regions((gb_i * N + c0) * K, bn_t * K), None
        else:  # pn == 1 (whole rows of a row-major B): N is not split
            def b_src(p):
                return B.regions((gb_i * K + (k_i * ps + p) * bks) * N, bks * N), None
    else:
        gg, kk, pp, nn = (x.ravel() for x in np.meshgrid(np.arange(Gb), np.arange(pk), np.arange(ps), np.arange(pn),
                                                         indexing="ij"))
        TB, offB = _to_block_major(ctx, B, op, "b", gg, (kk * ps + pp) * bks, nsz[nn], noff[nn], bks, not tb, bb3,
                                   pp)
        offB = offB.reshape(Gb, pk, ps, pn)

        def b_src(p):
            return TB.regions(offB[gb_i, k_i, p, in_i], bks * bn_t), None
    return b_src, b_order


def _uneven_outputs(ctx, op, plan, G, Mm, N, ab3, out_shape, msz, moff, nsz, noff, vt, idx):
    """``_build_uneven``'s outputs: (the partials variable (pk > 1) or None, the K reduction's vertices or None,
    C's mapping, each tile's output window shape and origin)."""
    g_i, k_i, im_i, in_i = idx
    pm, pn, pk = plan.pm, plan.pn, plan.pk
    T = len(vt)
    bm_t, bn_t, r0, c0 = msz[im_i], nsz[in_i], moff[im_i], noff[in_i]
    if pk > 1:
        acc_shape = (G * pk, Mm, N)
        c_shape = np.stack([np.ones(T, np.int64), bm_t, bn_t], 1)
        c_org = np.stack([g_i * pk + k_i, r0, c0], 1)
        acc = ctx.variable(f"{op}/partials", acc_shape, ctx.partials_dtype,
                           mapping=_planes_by_windows(ctx, acc_shape, c_shape, c_org, vt), op=op)
        red = k_partial_vertices_uneven(G, pk, pm, pn, msz, moff, nsz, noff, Mm, N, vt, ctx.window_layouts,
                                        _rank_of(ctx, vt))
        return acc, red, _c_mapping(ctx, red), c_shape, c_org
    c_shape = np.stack([bm_t, bn_t], 1)
    c_org = np.stack([r0, c0], 1)
    if ab3:
        c_shape = np.concatenate([np.ones((T, 1), np.int64), c_shape], 1)
        c_org = np.concatenate([g_i[:, None], c_org], 1)
    return None, None, M.by_windows(out_shape, c_shape, c_org, vt, ctx.window_layouts), c_shape, c_org


def _c_mapping(ctx, red) -> M.Mapping:
    """C's mapping with a K split: the reduce vertices' outputs in output order.  Where the vertices are a split's
    kept ones (read-only: k_partial_vertices_uneven's on tile positions), the starts and stops are those of the
    split's first op's mapping, kept beside them: only the tiles are the op's."""
    o = red["by_start"]
    key = ("c_map", id(o)) if not o.flags.writeable else None
    hit = M.layout(ctx.window_layouts, key) if key is not None else None
    if hit is not None and hit[0] is o:
        return M.Mapping(red["tile"][o], hit[1][0], hit[1][1], _fresh=True)
    st = red["out_start"][o]
    m = M.intervals(red["tile"][o], st, st + red["len"][o])
    if key is not None:
        M.keep_layout(ctx.window_layouts, key, (o, (m.start, m.stop)), m.start.nbytes + m.stop.nbytes)
    return m


def _planes_by_windows(ctx, shape, c_shape, c_org, vt):
    """The partials' mapping: ``M.by_windows(shape, c_shape, c_org, vt, ctx.window_layouts)`` placed from one
    plane's layout kept for the split (ops/matmul_layouts.py)."""
    return planes_by_windows(shape, c_shape, c_org, vt, ctx.window_layouts)


def reduce_k_partials(ctx, part, C_out, red, pk, op):
    """Reduce the ``pk`` partials of every output block on the tiles that computed them, as
    poplibs reduces conv partials (lib/poplin/ConvReduce.cpp): the block's elements are cut in ``pk``
    even slices, slice s owned by the tile of partial s; every owner gathers its slice (one exchange)
    and reduces it with one poplin ReduceAdd supervisor vertex over its slice (one region per row run of
    the slice: codelets.popops_rows.ConvReducePartials), writing the output type.  From 16 partials
    poplin reduces in stages first (planners.multi_stage_reduce_depths; :func:`_intermediate_stage`), so
    that an owner receives a few messages per stage instead of one from each of the pk - 1 other tiles;
    the last stage then gathers the last intermediate's depth."""
    Mm, N = part.shape[-2], part.shape[-1]
    vlen, vtile = red["len"], red["tile"]
    blocks = red.get("blocks")
    depths = multi_stage_reduce_depths(pk) if blocks is not None else []
    src, depth, ioff = None, pk, None
    for j, d in enumerate(depths):
        src, ioff = _intermediate_stage(ctx, part, src, ioff, blocks, pk, depth, d, op, j)
        depth = d
    # the vertices as k_partial_vertices_uneven keeps them per split (read-only, shared by the split's rotated ops):
    # the gather's arrays below depend on them and the split alone, so they are kept beside them, as the arrays the
    # first op's mapping and fields hold (a later op's are those very arrays: no copy, no comparison to share them)
    key = ("reduce", id(vlen), pk, depth, Mm, N) if not depths and not vlen.flags.writeable and blocks is not None \
        else None
    hit = M.layout(ctx.window_layouts, key) if key is not None else None
    if hit is not None and hit[0] is vlen:
        g_map, src_f, in_f, out_f, classes = hit[1]
        gathered = ctx.variable(f"{op}/partials_gathered", (int(g_map[2]),), part.dtype,
                                mapping=M.Mapping(np.array(vtile), g_map[0], g_map[1], _fresh=True), op=op)
        gather = P.Copy(part.regions(*src_f), gathered.whole(), name=f"{op}/gather_partials", op=op)
        gather.gather = BlockGather(np.asarray(red["blk"]), int(depth), np.asarray(blocks["owner"]), classes)
        _reduce_vertices(ctx, gather, gathered.regions(*in_f), C_out.regions(*out_f), vtile, depth, op)
        return
    g_len = depth * vlen
    g_start = np.cumsum(g_len) - g_len
    q = np.arange(depth)
    if src is None:
        # ((g * pk + q) * Mm + row) * N + col: the vertex's part once, then each partial's plane offset; in int32
        # where the partials have fewer than 2^31 elements (as the field holds them: made read-only, it takes them as
        # they are, without a converted copy)
        dt = np.int32 if part.size < 2**31 else np.int64
        base = (((red["g"] * pk) * Mm + red["row"]) * N + red["col"]).astype(dt)
        src_start = (base[:, None] + (q * (Mm * N)).astype(dt)[None, :]).ravel()
        src_len = np.repeat(vlen.astype(dt), depth)
        src_start.setflags(write=False)
        src_len.setflags(write=False)
        src = part
    else:  # the last intermediate: (block, depth, block elements), contiguous per (block, partial)
        be = (blocks["msz"] * blocks["nsz"])[red["blk"]]
        src_start = _held((ioff[red["blk"]][:, None] + q[None, :] * be[:, None] + red["e"][:, None]).ravel(), src)
        src_len = _held(np.repeat(vlen, depth), src)
    gm = M.intervals(vtile, g_start, g_start + g_len)
    gathered = ctx.variable(f"{op}/partials_gathered", (int(g_len.sum()),), part.dtype, mapping=gm, op=op)
    gather = P.Copy(src.regions(src_start, src_len), gathered.whole(), name=f"{op}/gather_partials", op=op)
    if blocks is not None:
        gather.gather = _block_gather(red, blocks, depth)
    in_f = gathered.regions(_held(g_start, gathered), _held(g_len, gathered))
    out_f = C_out.regions(_held(red["out_start"], C_out), _held(vlen, C_out))
    _reduce_vertices(ctx, gather, in_f, out_f, vtile, depth, op)
    if key is not None:
        sf = gather.src
        held = ((gm.start, gm.stop, gathered.size), (sf.starts, sf.sizes), (in_f.starts, in_f.sizes),
                (out_f.starts, out_f.sizes), gather.gather.block_class)
        M.keep_layout(ctx.window_layouts, key, (vlen, held),
                      sum(a.nbytes for a in (gm.start, gm.stop, sf.starts, sf.sizes, in_f.starts, in_f.sizes)))


def _held(a: np.ndarray, t) -> np.ndarray:
    """``a`` (starts or sizes inside ``t``) as a field holds them: a read-only int32 copy where ``t`` has fewer than
    2^31 elements, which the field takes as it is (``a`` itself, int64, otherwise)."""
    if t.size >= 2**31 or (a.dtype == np.int32 and not a.flags.writeable):
        return a
    r = a.astype(np.int32)
    r.setflags(write=False)
    return r


def _reduce_vertices(ctx, gather, in_f, out_f, vtile, depth: int, op: str) -> None:
    """The gather of the partials, then one ReduceAdd vertex per slice run (``in_f`` its gathered partials,
    ``out_f`` its outputs).  Both fields are their tensors' own mapping intervals on the vertices' tiles, so they
    are marked local by construction (``ops.common.mark_split``; the graph check skips their interval search):
    ``in_f`` is ``gathered.regions(g_start, g_len)`` of ``gathered`` mapped ``intervals(vtile, g_start, g_start +
    g_len)`` (reduce_k_partials), and ``out_f`` is ``C_out.regions(out_start, len)`` of the vertices ``red``
    whose output ``C_out`` every caller maps ``intervals(red["tile"], out_start, out_start + len)`` in start order
    (matmul's ``cmap``, ``_uneven_outputs``, ops/conv.py's ``Y``: the output lives where its slices are reduced)."""
    ctx.add(gather)
    cs = ctx.graph.add_compute_set(ctx.unique(f"{op}/reduce_partials"), op=op)
    grp = ctx.graph.add_vertices(cs, CR.CONV_REDUCE_PARTIALS, tiles=vtile, fields={"in": in_f, "out": out_f},
                                 params={"k": np.int64(depth)})
    mark_split(in_f, in_f.tensor.mapping, grp.tiles)
    mark_split(out_f, out_f.tensor.mapping, grp.tiles)
    ctx.add(P.Execute(cs, name=cs.name, op=op))


def _block_gather(red, blocks, depth: int) -> BlockGather:
    """The partials gather's description (compile.copy_gathers, decision 0480): reduce vertex v takes ``depth``
    pieces, one from each partial of its block ``red["blk"][v]``; a block's partials and slices are on its owner
    tiles (``blocks["owner"]``, one row per block), and blocks of one shape (msz, nsz) are the same exchange on
    their own tiles: each partial one (1, msz, nsz) window on its tile (the partials' mapping), each tile's reduce
    vertices in block element order (k_partial_vertices: ordered by tile, then output start).  After intermediate
    stages the partials are the last intermediate's: each block's on its owner tiles too, the same per shape."""
    return BlockGather(np.asarray(red["blk"]), int(depth), np.asarray(blocks["owner"]), _block_classes(blocks))


def _block_classes(blocks) -> np.ndarray:
    """Per block, its class: its shape (msz, nsz)."""
    shape = np.stack([np.asarray(blocks["msz"], np.int64), np.asarray(blocks["nsz"], np.int64)], 1)
    return np.unique(shape, axis=0, return_inverse=True)[1].ravel()


def _row_runs(s0: np.ndarray, ln: np.ndarray, width: np.ndarray):
    """The runs of the element ranges [s0, s0 + ln) of row-major blocks of ``width`` columns cut at row
    boundaries: (range index, start, length) per run, in range then element order."""
    first = s0 // width
    last = (s0 + ln - 1) // width
    cnt = last - first + 1
    idx = np.repeat(np.arange(len(s0)), cnt)
    k = np.arange(int(cnt.sum())) - np.repeat(np.cumsum(cnt) - cnt, cnt)
    row = first[idx] + k
    start = np.maximum(s0[idx], row * width[idx])
    stop = np.minimum(s0[idx] + ln[idx], (row + 1) * width[idx])
    return idx, start, stop - start


def _plane_runs(blocks, b_, s0, ln, x, q, pk: int, Mm: int, N: int):
    """(start, length) in the partials' (G * pk, Mm, N) planes of the row runs of owner slice ``x[i]`` (block
    ``b_``, elements [s0, s0 + ln) of it) in plane (g, q[i]), in that order: a slice's runs are the same in
    every plane, so they are cut once per slice and placed at each of its planes."""
    nsz = blocks["nsz"]
    ri, st, lens = _row_runs(s0, ln, nsz[b_])
    bx = b_[ri]
    row, col = np.divmod(st, nsz[bx])
    base = ((blocks["g"][bx] * pk) * Mm + blocks["moff"][bx] + row) * N + blocks["noff"][bx] + col
    cnt = np.bincount(ri, minlength=len(b_))  # runs per slice
    first = np.cumsum(cnt) - cnt
    per_x = cnt[x]
    run = np.arange(int(per_x.sum())) + np.repeat(first[x] - (np.cumsum(per_x) - per_x), per_x)
    return base[run] + np.repeat(q * (Mm * N), per_x), lens[run]


def _intermediate_stage(ctx, part, src, ioff, blocks, pk, depth, d, op, j):
    """One intermediate stage of poplin's multi-stage reduction (ConvReduce.cpp partialGroupedReduce):
    the ``depth`` partials of every block (``part``'s (G * pk, Mm, N) planes when ``src`` is None, else the
    previous intermediate ``src``, block b at ``ioff[b]``, (depth, block elements)) become ``d``: section i
    (planners.reduce_stage_sections) sums its partials into an intermediate spread over its tiles of the
    block's group, each of those tiles owning an even slice, gathered from the section's partials and
    reduced by one ReduceAdd vertex.  Returns the intermediate (block, d, block elements) and the
    blocks' offsets in it."""
    Mm, N = part.shape[-2], part.shape[-1]
    nb = len(blocks["g"])
    be = blocks["msz"] * blocks["nsz"]
    secs = reduce_stage_sections(depth, d, pk)
    # per section, per block, its slices (split_even of the block's elements over the section's tiles), vectorised:
    # (block, section, slice start, slice length, first partial, partials, owner tile) per owner slice
    cols = [[] for _ in range(7)]
    for i, (q0, k, t0, nt) in enumerate(secs):
        p = np.maximum(1, np.minimum(nt, be))  # slices of each block (no empty one)
        base, extra = np.divmod(be, p)
        bb = np.repeat(np.arange(nb), p)
        sl = np.arange(int(p.sum())) - np.repeat(np.cumsum(p) - p, p)  # slice of its block
        ln = base[bb] + (sl < extra[bb])
        for c, v in enumerate((bb, np.full(len(bb), i), sl * base[bb] + np.minimum(sl, extra[bb]), ln,
                               np.full(len(bb), q0), np.full(len(bb), k), blocks["owner"][bb, t0 + sl])):
            cols[c].append(np.asarray(v, np.int64))
    b_, i_, s0, ln, q0, k, own = (np.concatenate(c) for c in cols)
    new_off = np.cumsum(d * be) - d * be
    out_start = new_off[b_] + i_ * be[b_] + s0
    o = np.argsort(out_start, kind="stable")
    inter = ctx.variable(f"{op}/partials_stage{j + 1}", (int((d * be).sum()),), part.dtype, op=op,
                         mapping=M.intervals(own[o], out_start[o], out_start[o] + ln[o]))
    g_len = k * ln
    g_start = np.cumsum(g_len) - g_len
    gathered = ctx.variable(f"{op}/partials_gathered_stage{j + 1}", (int(g_len.sum()),), part.dtype, op=op,
                            mapping=M.intervals(own, g_start, g_start + g_len))
    # sources in the gathered order: per owner slice, per partial of its section, the slice's elements
    x = np.repeat(np.arange(len(b_)), k)
    q = q0[x] + (np.arange(len(x)) - np.repeat(np.cumsum(k) - k, k))
    if src is None:  # the partial planes: the slice's row runs of block b in plane (g, q)
        starts, lens = _plane_runs(blocks, b_, s0, ln, x, q, pk, Mm, N)
        nsz = blocks["nsz"][b_]
        runs = (s0 + ln - 1) // nsz - s0 // nsz + 1  # (each slice's row runs in a plane: _row_runs')
        src = part
    else:
        starts, lens, runs = ioff[b_[x]] + q * be[b_[x]] + s0[x], ln[x], 1
    stage = P.Copy(src.regions(_held(starts, src), _held(lens, src)), gathered.whole(),
                   name=f"{op}/gather_partials_stage{j + 1}", op=op)
    # (compile.copy_gathers: owner slice i takes its section's k[i] partials' runs, on its block's owner tiles)
    per_v = k * runs
    stage.gather = BlockGather(b_, 0, np.asarray(blocks["owner"]), _block_classes(blocks),
                               np.concatenate([[0], np.cumsum(per_v)]))
    ctx.add(stage)
    cs = ctx.graph.add_compute_set(ctx.unique(f"{op}/reduce_partials_stage{j + 1}"), op=op)
    for kk in np.unique(k):  # sections of floor and ceil depth: the partials count is a vertex field
        sel = np.nonzero(k == kk)[0]
        ctx.graph.add_vertices(cs, CR.CONV_REDUCE_PARTIALS, tiles=own[sel], fields={
            "in": gathered.regions(_held(g_start[sel], gathered), _held(g_len[sel], gathered)),
            "out": inter.regions(_held(out_start[sel], inter), _held(ln[sel], inter))},
            params={"k": np.int64(kk)})
    ctx.add(P.Execute(cs, name=cs.name, op=op))
    return inter, new_off
