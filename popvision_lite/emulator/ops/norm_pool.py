"""Batch norm: numpy reference, emulator ops and codelets, and the backend methods (whose pooling
halves are in ``ops/pooling.py``).

Tensors are NHWC activations stored as rows of channels, ``(N*H*W, C)``.

Semantics (the numpy reference below is the ground truth the emulator is checked against):

* batch norm, training mode: per-channel mean and biased variance over all rows,
  ``y = (x - mean) * invstd * gamma + beta`` with ``invstd = 1 / sqrt(var + BN_EPS)``;
  returns ``(y, mean, invstd)`` (fp32 statistics, as ``popnn::bn::batchNormStatistics``).

The batch-norm pieces follow the row-codelet conventions of ``codelets/popops_rows.py`` (their codelets
live there and in ``codelets/popnn.py``):
instructions per 64-bit vector per pass over the data, stated next to each codelet (modelling
assumptions).
"""

from __future__ import annotations

import numpy as np

from popvision_lite.emulator import mapping as M
from popvision_lite.emulator import programs as P
from popvision_lite.emulator.codelets.base import _f32
from popvision_lite.emulator.codelets.popnn import BN_COEFFS, BN_EPS, BN_GRAD_COEFFS
from popvision_lite.emulator.codelets.popops_rows import (
    BN_GRAD_STATS,
    BN_STATS,
    CHANNEL_AFFINE,
    CHANNEL_GRAD_APPLY,
)
from popvision_lite.emulator.ops.context import OpContext, View
from popvision_lite.emulator.ops.pooling import EmulatorPool, NumpyPool, PlanPool, _as_tensor, _basic
from popvision_lite.errors import EmulatorError

# ============================================================================ numpy reference


def ref_batch_norm(x, gamma, beta, eps=BN_EPS):
    x = np.asarray(x, dtype=np.float32)
    mean = x.mean(0)
    invstd = 1.0 / np.sqrt(x.var(0) + eps)
    y = (x - mean) * invstd * _f32(gamma) + _f32(beta)
    return y, mean.astype(np.float32), invstd.astype(np.float32)


def ref_batch_norm_bwd(x, dy, mean, invstd, gamma):
    """(dx, dgamma, dbeta) of training-mode batch norm given its saved statistics."""
    x, dy = np.asarray(x, dtype=np.float32), np.asarray(dy, dtype=np.float32)
    n = x.shape[0]
    xhat = (x - _f32(mean)) * _f32(invstd)
    dbeta = dy.sum(0)
    dgamma = (dy * xhat).sum(0)
    dx = _f32(gamma) * _f32(invstd) / n * (n * dy - dbeta - xhat * dgamma)
    return dx, dgamma, dbeta


# ============================================================================ codelets


# ============================================================================ emulator ops


def _channel_cs(ctx, codelet, ins: dict, outs: dict, op, count):
    """One compute set of a per-channel codelet over the mapping of the first output.  An input given as
    (tensor, offset) is read in place at that offset (laid out like the output there)."""
    ref = next(iter(outs.values()))
    tiles, starts, sizes = M.worker_split(ref, workers=ctx.target.threads_per_tile)
    fields = {}
    for k, v in ins.items():
        if isinstance(v, tuple):
            fields[k] = v[0].regions(starts + v[1], sizes)
        else:
            fields[k] = _basic().materialize(ctx, v, k, op, mapping=ref.mapping, shape=ref.shape).regions(starts, sizes)
    fields.update({k: v.regions(starts, sizes) for k, v in outs.items()})
    cs = ctx.graph.add_compute_set(ctx.unique(f"{op}/coefficients"), op=op)
    ctx.graph.add_vertices(cs, codelet, tiles=tiles, fields=fields, params={"count": np.float32(count)})
    ctx.add(P.Execute(cs, name=cs.name, op=op))


def _row_vertices(ctx, codelet, rows: dict, vecs: dict, outs_vec: dict, tiles, starts, sizes, c, op):
    """A row codelet over the rows (same per-vertex pieces) with replicated per-channel vectors."""
    B = _basic()
    tl = np.unique(tiles)
    fields = {k: v.regions(starts, sizes) for k, v in rows.items()}
    for k, v in vecs.items():
        rep = B._replicate_rows(ctx, _grouped_vector(ctx, v, k, op), tl, c, k, op)
        fields[k] = B._vec_fields(rep, tiles, tl, c)
    fields.update(outs_vec)
    cs = ctx.graph.add_compute_set(ctx.unique(op), op=op)
    ctx.graph.add_vertices(cs, codelet, tiles=tiles, fields=fields, params={"row": np.int64(c)})
    ctx.add(P.Execute(cs, name=cs.name, op=op))


def _tile_partials(ctx, partial, tiles, c, name, op):
    """Sum the per-vertex partial rows (V, c) of each tile on that tile -> (T, c) fp32, one row per
    tile, so that the reduction across tiles moves one row per tile instead of one per vertex."""
    from popvision_lite.emulator.codelets import popops_rows as CR

    ut, first, counts = np.unique(tiles, return_index=True, return_counts=True)
    order = np.argsort(first)
    ut, first, counts = ut[order], first[order], counts[order]
    if np.any(np.diff(first) != counts[:-1]):
        raise EmulatorError(f"{op}: vertices of a tile are not consecutive")
    T = len(ut)
    tid = np.arange(T, dtype=np.int64) * c
    out = ctx.variable(f"{op}/{name}_tile", (T, c), "float32", mapping=M.intervals(ut, tid, tid + c), op=op)
    cs = ctx.graph.add_compute_set(ctx.unique(f"{op}/{name}_tile_sum"), op=op)
    ctx.graph.add_vertices(cs, CR.COLUMN_SUM, tiles=ut, fields={"in": partial.regions(first * c, counts * c),
                                                                 "out": out.regions(tid, c)},
                           params={"row": np.int64(c)})
    ctx.add(P.Execute(cs, name=cs.name, op=op))
    return out


# The per-channel vectors that batch norm broadcasts to its row tiles (scale and shift; mean, invstd and the
# input-gradient coefficients) are first brought to the layout poplibs gives the norm parameters of a rank-2
# activation: linear, at least 128 bytes per tile (popnn/Norms.cpp createNormParam -> poputil::mapTensorLinearly,
# whose calcLinearTileMapping takes minBytesPerTile = 128).  A vector of c fp32 channels then lives on c / 32
# tiles and a row tile receives it in c / 32 pieces; left where the reduction tree wrote it (chunks of two
# channels on c / 2 tiles) every row tile received it in c / 2 pieces, one exchange instruction each.
STAT_CHUNK_BYTES = 128


def vector_layout(ctx, c: int, itemsize: int = 4):
    """Mapping of a per-channel vector of ``c`` elements: chunks of STAT_CHUNK_BYTES on consecutive tiles."""
    per = max(1, STAT_CHUNK_BYTES // itemsize)
    used = min(ctx.n_tiles, -(-c // per))
    tiles = np.sort(ctx.tiles_array(rotate=used)[:used])
    return M.linear(c, tiles, grain=per)


def _grouped_vector(ctx, v, name, op):
    """``v`` (c,) on :func:`vector_layout`: one copy when it is spread over more tiles than that."""
    v = _as_tensor(ctx, v, name, op)
    c = int(np.prod(v.shape))
    if len(np.unique(v.mapping.tile)) <= -(-c * v.itemsize // STAT_CHUNK_BYTES):
        return v
    out = ctx.variable(f"{op}/{name}_grouped", (c,), v.dtype, mapping=vector_layout(ctx, c, v.itemsize), op=op)
    ctx.add(P.Copy(v.whole(), out.whole(), name=f"{op}/group_{name}", op=op))
    return out


def _reduce_channels(ctx, partials, tiles, c, op):
    """[((V, c) per-vertex fp32 partial sums, name)] -> [(c,) fp32]: on each tile, then across tiles in one
    reduction (one exchange per stage for all the vectors)."""
    items = [(_tile_partials(ctx, p, tiles, c, name, op), name, "float32") for p, name in partials]
    return _basic()._reduce_partials(ctx, items, op)


def batch_norm(ctx: OpContext, x, gamma, beta, name: str):
    """Training-mode batch norm of x (R, C) over its rows -> (y, mean, invstd); statistics in fp32:
    per-vertex partial sums, a reduction over vertices, per-channel coefficients, then the
    normalise step with the coefficients broadcast to the row tiles."""
    B = _basic()
    c = x.shape[-1]
    R = int(np.prod(x.shape)) // c
    op = ctx.begin_op(name, "batch_norm", plan=f"{R} rows of {c} channels spread over tiles; statistics reduced "
                      "over vertices", min_bytes=2 * B._nbytes(x) + B._nbytes(gamma) + B._nbytes(beta))
    xt, tiles, starts, sizes = B._row_layout(ctx, x, "in", op, c)
    V = len(tiles)
    vid = np.arange(V, dtype=np.int64) * c
    ps = ctx.variable(f"{op}/sum_partial", (V, c), "float32", mapping=M.intervals(tiles, vid, vid + c), op=op)
    pq = ctx.variable(f"{op}/sumsq_partial", (V, c), "float32", mapping=M.intervals(tiles, vid, vid + c), op=op)
    cs = ctx.graph.add_compute_set(ctx.unique(f"{op}/stats"), op=op)
    ctx.graph.add_vertices(cs, BN_STATS, tiles=tiles, fields={
        "in": xt.regions(starts, sizes), "sum": ps.regions(vid, c), "sumsq": pq.regions(vid, c)},
        params={"row": np.int64(c)})
    ctx.add(P.Execute(cs, name=cs.name, op=op))
    s, q = _reduce_channels(ctx, [(ps, "sum"), (pq, "sumsq")], tiles, c, op)
    g = B.materialize(ctx, gamma, "gamma", op, mapping=s.mapping, shape=(c,))
    b = B.materialize(ctx, beta, "beta", op, mapping=s.mapping, shape=(c,))
    mk = lambda n: ctx.variable(f"{op}/{n}", (c,), "float32", mapping=s.mapping, op=op)  # noqa: E731
    mean, invstd, scale, shift = mk("mean"), mk("invstd"), mk("scale"), mk("shift")
    _channel_cs(ctx, BN_COEFFS, {"sum": s, "sumsq": q, "gamma": g, "beta": b},
                {"mean": mean, "invstd": invstd, "scale": scale, "shift": shift}, op, R)
    out = ctx.variable(op, x.shape, ctx.dtype, mapping=xt.mapping, op=op)
    _row_vertices(ctx, CHANNEL_AFFINE, {"in": xt, "out": out}, {"scale": scale, "shift": shift}, {},
                  tiles, starts, sizes, c, op)
    return out, mean, invstd


def batch_norm_bwd(ctx: OpContext, x, dy, mean, invstd, gamma, name: str):
    """(dx, dgamma, dbeta) of training-mode batch norm from its saved fp32 statistics."""
    B = _basic()
    c = x.shape[-1]
    R = int(np.prod(x.shape)) // c
    op = ctx.begin_op(name, "batch_norm_bwd", plan=f"{R} rows of {c} channels spread over tiles; sum(dy) and "
                      "sum(dy xhat) reduced over vertices", min_bytes=3 * B._nbytes(x) + 3 * B._nbytes(gamma))
    xt, tiles, starts, sizes = B._row_layout(ctx, x, "x", op, c)
    dyt = B.materialize(ctx, dy, "dy", op, mapping=xt.mapping, shape=xt.shape)
    V = len(tiles)
    # poplin (Norms.cpp normParamGradients) reduces sum(dy xhat) and sum(dy) as one reduction of their
    # concatenation along the channels: one (V, 2c) partial, [dxsum | dsum] per vertex
    vid = np.arange(V, dtype=np.int64) * 2 * c
    pj = ctx.variable(f"{op}/deltas_partial", (V, 2 * c), "float32", mapping=M.intervals(tiles, vid, vid + 2 * c),
                      op=op)
    _row_vertices(ctx, BN_GRAD_STATS, {"x": xt, "dy": dyt}, {"mean": mean, "invstd": invstd},
                  {"dxsum": pj.regions(vid, c), "dsum": pj.regions(vid + c, c)}, tiles, starts, sizes, c, op)
    (deltas,) = _reduce_channels(ctx, [(pj, "deltas")], tiles, 2 * c, op)
    # the per-channel coefficients are laid out like the first half (dxsum, read in place); the second
    # half (dsum) is brought to it, as popops' elementwise ops bring an operand to the output's layout
    half = deltas.mapping.restrict(0, c)
    ds = B.materialize(ctx, View(deltas, np.arange(c, 2 * c)), "dsum", op, mapping=half, shape=(c,))
    on = lambda t, n: B.materialize(ctx, t, n, op, mapping=half, shape=(c,))  # noqa: E731
    g, m, s = on(gamma, "gamma"), on(mean, "mean"), on(invstd, "invstd")
    mk = lambda n, dt="float32": ctx.variable(f"{op}/{n}", (c,), dt, mapping=half, op=op)  # noqa: E731
    a, b, cc = mk("a"), mk("b"), mk("c")
    dgamma, dbeta = mk("dgamma", gamma.dtype), mk("dbeta", gamma.dtype)
    _channel_cs(ctx, BN_GRAD_COEFFS, {"dsum": ds, "dxsum": (deltas, 0), "gamma": g, "mean": m, "invstd": s},
                {"a": a, "b": b, "c": cc, "dgamma": dgamma, "dbeta": dbeta}, op, R)
    dx = ctx.variable(f"{op}/dx", x.shape, ctx.dtype, mapping=xt.mapping, op=op)
    _row_vertices(ctx, CHANNEL_GRAD_APPLY, {"x": xt, "dy": dyt, "out": dx}, {"a": a, "b": b, "c": cc}, {},
                  tiles, starts, sizes, c, op)
    return dx, dgamma, dbeta


# ============================================================================ backend methods
# One mixin per backend (models/backend.py NumpyBackend, models/emulated.py EmulatorBackend,
# models/planning.py PlanOnlyBackend): the same vocabulary on all three; each adds batch norm to its
# backend's pooling mixin (ops/pooling.py).


class NumpyNormPool(NumpyPool):
    """Reference execution (NumpyBackend)."""

    def batch_norm(self, x, gamma, beta, name):
        y, mean, invstd = ref_batch_norm(self._val(x), self._val(gamma), self._val(beta))
        return (self._out(name, "batch_norm", y), self._out(name + "/mean", "batch_norm", mean, dtype="fp32"),
                self._out(name + "/invstd", "batch_norm", invstd, dtype="fp32"))

    def batch_norm_bwd(self, x, dy, mean, invstd, gamma, name):
        dx, dg, db = ref_batch_norm_bwd(self._val(x), self._val(dy), self._val(mean), self._val(invstd),
                                        self._val(gamma))
        wdt = str(np.asarray(gamma).dtype)
        return (self._out(name + "/dx", "batch_norm_bwd", dx),
                self._out(name + "/dgamma", "batch_norm_bwd", dg, dtype=wdt),
                self._out(name + "/dbeta", "batch_norm_bwd", db, dtype=wdt))


class EmulatorNormPool(EmulatorPool):
    """Graph building (EmulatorBackend).  With ``function_cache`` (a dict; None: off) every norm is a call
    of a graph function per operand signature, as Graphcore's TensorFlow builds them (ops/graph_function.py)."""

    function_cache: dict | None = None

    def _norm(self, fn, args, name):
        from popvision_lite.emulator.ops import graph_function as GF

        q = self.qual(name)
        return GF.backend_call(self, (fn.__name__,), lambda *p: fn(self.ctx, *p, q), list(args), name)

    def batch_norm(self, x, gamma, beta, name):
        return self._norm(batch_norm, (x, gamma, beta), name)

    def batch_norm_bwd(self, x, dy, mean, invstd, gamma, name):
        return self._norm(batch_norm_bwd, (x, dy, mean, invstd, gamma), name)


class PlanNormPool(PlanPool):
    """Shapes and plan records only (PlanOnlyBackend)."""

    def batch_norm(self, x, gamma, beta, name):
        from ..shape import Shape

        y = self._rows(x, name, "batch_norm")
        return y, Shape(gamma.shape, "float32"), Shape(gamma.shape, "float32")

    def batch_norm_bwd(self, x, dy, mean, invstd, gamma, name):
        from ..shape import Shape

        dx = self._rows(x, name, "batch_norm_bwd")
        return dx, Shape(gamma.shape, gamma.dtype), Shape(gamma.shape, gamma.dtype)
