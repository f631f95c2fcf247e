"""popops codelets of whole rows: the row passes (softmax, layer norm, column sums, the batch-norm statistics and
channel passes) and the partials reductions (ReducePartials).

Row ops work on Regions that cover whole rows of length ``row`` (a scalar param); numerics run
once per vertex group over all rows (vectorised).  Cycle costs are compositions of the poplibs
estimators of the popops / popnn vertices Poplar runs for the same op (``emulator/estimators``:
binary/unary op loops, single-input reductions), with the op list of each row op taken from
poplibs (popnn/Norms.cpp getNormFwdFlops / getNormBwdFlops / getNormWuFlops for layer norm;
popnn non-linearity SOFTMAX_STABLE and its gradient for softmax).
"""

from __future__ import annotations

import numpy as np

from popvision_lite.emulator import reference as R
from popvision_lite.emulator.codelets.base import Codelet, _f32
from popvision_lite.emulator.estimators import popops
from popvision_lite.emulator.estimators.poplin import (
    reduce_add_tile_vertex_cycles,
)
from popvision_lite.emulator.graph import Regions, to_dtype
from popvision_lite.errors import EmulatorError


def _segment_sum(values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Sum consecutive runs of ``counts[v]`` rows of ``values`` (every count >= 1)."""
    offs = np.cumsum(counts) - counts
    return np.add.reduceat(values, offs, axis=0)


class RowCodelet(Codelet):
    """Base of row-wise codelets: every field is Regions of whole rows, ``row`` param = row length.

    ``row_fields`` are the per-row fields (same size per vertex); ``vec_fields`` hold one row-length
    vector per vertex (gamma, beta, partial sums)."""

    row_fields: tuple[str, ...] = ()
    vec_fields: tuple[str, ...] = ()
    parts: tuple = ()  # poplibs vertex loops run per row (see estimators.popops.row_pass_cycles)
    flops_per_element = 5
    code_bytes = 640
    state_bytes = 12

    def check(self, group):
        row = self.scalar_param(group, "row")
        first = None
        for fname in self.fields:
            f = group.fields[fname]
            if not isinstance(f, Regions):
                raise EmulatorError(f"codelet '{self.name}' in '{group.cs.name}': field '{fname}' must be regions")
            if fname in self.vec_fields:
                if np.any(f.sizes != row):
                    raise EmulatorError(f"codelet '{self.name}' in '{group.cs.name}': field '{fname}' must hold "
                                        f"{row} elements per vertex")
                continue
            if np.any(f.sizes % row):
                raise EmulatorError(f"codelet '{self.name}' in '{group.cs.name}': field '{fname}' is not whole "
                                    f"rows of {row}")
            if first is None:
                first = f.sizes
            elif not np.array_equal(first, f.sizes):
                raise EmulatorError(f"codelet '{self.name}' in '{group.cs.name}': row fields differ in size")

    def _main(self, group):
        return group.fields[self.row_fields[0]]

    def cycles(self, group, target):
        """Worker cycles: prologues of the parts + per row their loops.  A vertex that has its tile
        (nearly) to itself spreads each row over the idle workers (as poplibs' MultiVertex / the
        reduction planner's worker split do): k = threads // vertices on the tile workers each take
        1/k of the row, plus combining the k partial results of every reduction."""
        f = self._main(group)
        L = int(group.param("row"))
        rows = np.asarray(f.sizes // L, dtype=np.int64)
        threads = int(target.threads_per_tile)
        on_tile = np.bincount(group.tiles)[group.tiles]
        k = np.maximum(1, threads // np.maximum(on_tile, 1))
        return popops.row_vertex_cycles(self.parts, L, f.tensor.itemsize, rows, k)

    def flops(self, group):
        return int(self.flops_per_element * self._main(group).sizes.sum())

    def rows(self, group, data, fname):
        row = int(group.param("row"))
        return _f32(group.fields[fname].gather(data)).reshape(-1, row)

    def put(self, group, data, fname, values):
        f = group.fields[fname]
        f.scatter(data, to_dtype(np.asarray(values).reshape(-1), f.tensor.dtype))

    def vec_per_row(self, group, data, fname):
        """Per-row copy of each vertex's vector field, aligned with the rows of the main field."""
        row = int(group.param("row"))
        vecs = _f32(group.fields[fname].gather(data)).reshape(group.n, row)
        rows_per_v = self._main(group).sizes // row
        return np.repeat(vecs, rows_per_v, axis=0)


class Softmax(RowCodelet):
    # max pass, exp+sum pass (exp ~8 instr/vector), scale pass
    name = "SoftmaxRows"
    fields = {"in": "in", "out": "out"}
    row_fields = ("in", "out")
    # popnn SOFTMAX_STABLE: max reduce, x - max, exp, sum reduce, x * (1 / sum)
    parts = (("r", "max"), ("b", "sub"), ("u", "exp"), ("r", "add"), ("b", "mul"))
    flops_per_element = 6

    def compute(self, group, data):
        self.put(group, data, "out", R.softmax(self.rows(group, data, "in")))


class SoftmaxGrad(RowCodelet):
    name = "SoftmaxGradRows"
    fields = {"y": "in", "dy": "in", "out": "out"}
    row_fields = ("y", "dy", "out")
    # popnn softmax gradient: y * dy, sum reduce, dy - sum, y * (dy - sum)
    parts = (("b", "mul"), ("r", "add"), ("b", "sub"), ("b", "mul"))
    flops_per_element = 4

    def compute(self, group, data):
        self.put(group, data, "out", R.softmax_bwd(self.rows(group, data, "y"), self.rows(group, data, "dy")))


class LayerNorm(RowCodelet):
    name = "LayerNormRows"
    fields = {"in": "in", "gamma": "in", "beta": "in", "out": "out"}
    row_fields = ("in", "out")
    vec_fields = ("gamma", "beta")
    # popnn/Norms.cpp getNormFwdFlops (computeStats): sum and sum-of-squares reductions, whiten
    # (x - mean, * invStdDev), normalise (* gamma, + beta)
    parts = (("r", "add"), ("r", "add"), ("b", "sub"), ("b", "mul"), ("b", "mul"), ("b", "add"))
    flops_per_element = 8

    def compute(self, group, data):
        x = self.rows(group, data, "in")
        g = self.vec_per_row(group, data, "gamma")
        b = self.vec_per_row(group, data, "beta")
        mu = x.mean(-1, keepdims=True)
        var = x.var(-1, keepdims=True)
        eps = float(group.param("eps", R.LN_EPS))  # the model's epsilon (ONNX LayerNormalization), else poplibs'
        self.put(group, data, "out", (x - mu) / np.sqrt(var + eps) * g + b)


class LayerNormGrad(RowCodelet):
    """dx for the rows, plus per-vertex partial dgamma / dbeta (fp32, reduced across vertices later)."""

    name = "LayerNormGradRows"
    fields = {"x": "in", "gamma": "in", "dy": "in", "dx": "out", "dgamma": "out", "dbeta": "out"}
    row_fields = ("x", "dy", "dx")
    vec_fields = ("gamma", "dgamma", "dbeta")
    # whitened acts recomputed from the saved statistics (x - mean, * invStdDev), then
    # popnn/Norms.cpp getNormBwdFlops: grads * gamma, grads * whitened, reduce1, reduce2,
    # reduce1 * whitened, two subtractions, * invStdDev; getNormWuFlops: grads * whitened and the
    # dGamma / dBeta accumulations of this vertex's rows (two adds into the fp32 partials)
    parts = (("b", "sub"), ("b", "mul"), ("b", "mul"), ("b", "mul"), ("r", "add"), ("r", "add"), ("b", "mul"),
             ("b", "sub"), ("b", "sub"), ("b", "mul"), ("b", "mul"), ("b", "add"), ("b", "add"))
    flops_per_element = 14

    def compute(self, group, data):
        x = self.rows(group, data, "x")
        dy = self.rows(group, data, "dy")
        g = self.vec_per_row(group, data, "gamma")
        h = x.shape[-1]
        mu = x.mean(-1, keepdims=True)
        rstd = 1.0 / np.sqrt(x.var(-1, keepdims=True) + float(group.param("eps", R.LN_EPS)))
        xhat = (x - mu) * rstd
        dxhat = dy * g
        dx = rstd / h * (h * dxhat - dxhat.sum(-1, keepdims=True) - xhat * (dxhat * xhat).sum(-1, keepdims=True))
        self.put(group, data, "dx", dx)
        rows_per_v = self._main(group).sizes // h
        self.put(group, data, "dgamma", _segment_sum(dy * xhat, rows_per_v))
        self.put(group, data, "dbeta", _segment_sum(dy, rows_per_v))


class ColumnSum(RowCodelet):
    """Per-vertex column sums of its rows (stage 1 of a reduction over rows)."""

    name = "ColumnSumRows"
    fields = {"in": "in", "out": "out"}
    row_fields = ("in",)
    vec_fields = ("out",)
    # stage 1 of a reduction over rows: accumulate each row into the vertex's partial (one add)
    parts = (("b", "add"),)
    flops_per_element = 1

    def compute(self, group, data):
        x = self.rows(group, data, "in")
        rows_per_v = self._main(group).sizes // x.shape[-1]
        self.put(group, data, "out", _segment_sum(x, rows_per_v))


class ReducePartials(Codelet):
    """out (m) = sum over k of in (k, m) (FP32 partials, row-major per vertex), cast to out's type:
    popops strided reduce (estimators.popops.strided_reduce_cycles), the vertex that reduces conv/matmul
    partials across tiles."""

    name = "ReducePartials"
    fields = {"in": "in", "out": "out"}
    group_caches = ("_reduce_widths",)  # the gather indices of _width_groups (as large as the partials)
    code_bytes = 512
    state_bytes = 10

    def check(self, group):
        k = self.scalar_param(group, "k")
        fi, fo = group.fields["in"], group.fields["out"]
        if not isinstance(fi, Regions) or not isinstance(fo, Regions) or np.any(fi.sizes != k * fo.sizes):
            raise EmulatorError(f"codelet '{self.name}' in '{group.cs.name}': 'in' must be k x 'out' elements "
                                "per vertex (regions)")

    # beyond six on a tile, the pieces are regions of the tile's six reduce worker vertices (poplibs
    # reduce vertices take lists of regions): the strided reduce's entry/exit is shared by a worker's regions
    multi_region = True

    def cycles(self, group, target):
        fi, fo = group.fields["in"], group.fields["out"]
        c = popops.strided_reduce_cycles(int(group.param("k")), fo.sizes, fi.tensor.itemsize, fo.tensor.itemsize)
        threads = int(target.threads_per_tile)
        on_tile = np.bincount(group.tiles)[group.tiles] if group.n else np.zeros(0, np.int64)
        frag = on_tile > threads
        o = popops.STRIDED_REDUCE_OVERHEAD
        return np.where(frag, c - o + -(-o * threads // np.maximum(on_tile, 1)), c)

    def flops(self, group):
        return int((int(group.param("k")) - 1) * group.fields["out"].sizes.sum())

    # The partials of a matmul are gathered from the tiles that made them into one tensor (a Copy of
    # Regions into a whole staging tensor) and reduced from there.  The engine defers that copy; the
    # reduce reads the partials where they were made, with one cached gather index per group.
    reads_through_copies = True

    def compute(self, group, data):
        k = int(group.param("k"))
        fi, fo = group.fields["in"], group.fields["out"]
        m = fo.sizes
        aliases = getattr(data, "aliases", None)
        al = aliases.get(fi.tensor.id) if aliases else None
        if al is not None and not (isinstance(al[0], Regions) and al[0].tensor.dtype == fi.tensor.dtype):
            data.materialize(fi.tensor.id)  # a copy this codelet does not read through
            al = None
        src = fi.tensor if al is None else al[0].tensor
        res = _reduce_by_width(data[src.id], k, m, _width_groups(group, m, None if al is None else al[0]))
        fo.scatter(data, to_dtype(res, fo.tensor.dtype))


def _width_groups(group, m, through=None) -> list:
    """How a ReducePartials group reads its partials, built once per group and copy source:
    [(layout, element indices of the partials, positions of the outputs)].  The indices are into the
    'in' tensor, or with ``through`` (the Regions a deferred copy fills the whole 'in' tensor from) into
    that copy's source tensor.

    A vertex of width w sums k rows of w partials (``reshape(k, w).sum(0)``).  For w >= 2 numpy adds
    those rows one after another, so every such vertex of the group is one column block of a single
    (k, N) array summed over axis 0 (layout "kn": the same additions in the same order, with an inner
    loop over all N outputs instead of over w).  For w = 1 numpy sums the k values of a row pairwise,
    so those vertices keep a (v, k) layout summed over axis 1 (layout "vk")."""
    cache = group.__dict__.setdefault("_reduce_widths", {})
    key = None if through is None else id(through)
    if key not in cache:
        k = int(group.param("k"))
        src_all = group.fields["in"].index()
        if through is not None:
            src_all = through.index()[src_all]
        offs = np.cumsum(m * k) - m * k
        out_offs = np.cumsum(m) - m
        groups = []
        one = np.flatnonzero(m == 1)
        if len(one):
            groups.append(("vk", src_all[offs[one, None] + np.arange(k)], out_offs[one]))
        wide = np.flatnonzero(m > 1)
        if len(wide):
            w = m[wide]
            # output j of vertex v, partial row q: element offs[v] + q * w[v] + j of 'in'
            v_of = np.repeat(wide, w)
            j = np.arange(int(w.sum()), dtype=np.int64) - np.repeat(np.cumsum(w) - w, w)
            rows = src_all[offs[v_of][None, :] + np.arange(k)[:, None] * m[v_of][None, :] + j[None, :]]
            stride = int(rows[1, 0] - rows[0, 0]) if k > 1 else 0
            src_size = (group.fields["in"].tensor if through is None else through.tensor).size
            if (k > 1 and stride > 0 and src_size == k * stride and rows[0].max() < stride
                    and np.array_equal(rows, rows[0] + stride * np.arange(k)[:, None])):
                # partial q of every output is in plane q of the source (a matmul's (k, M, N) partials):
                # the k planes summed over axis 0, then the group's outputs picked; when the group reads
                # at least half the planes that is cheaper than gathering (the same additions per output)
                layout = "planes" if 2 * len(j) >= stride else "kn_take"
                groups.append((layout, (k, stride, rows[0]), out_offs[v_of] + j))
            else:
                groups.append(("kn", rows, out_offs[v_of] + j))
        cache[key] = groups
    return cache[key]


def _reduce_by_width(flat, k, m, groups) -> np.ndarray:
    """The sums of every vertex of a ReducePartials group (fp32, in output order): one gather and one
    sum per layout of :func:`_width_groups`, equal bit for bit to a per-vertex ``reshape(k, w).sum(0)``."""
    res = np.empty(int(m.sum()), np.float32)
    for layout, src, dst in groups:
        if layout == "planes":
            res[dst] = _f32(flat.reshape(src[0], src[1])).sum(axis=0)[src[2]]
        elif layout == "kn_take":
            res[dst] = _f32(np.take(flat.reshape(src[0], src[1]), src[2], axis=1)).sum(axis=0)
        else:
            res[dst] = _f32(flat[src]).sum(axis=1 if layout == "vk" else 0)
    return res


class ConvReducePartials(ReducePartials):
    """The reduction of a matmul's / convolution's K partials as poplin does it: the vertices on a tile
    are the regions of ONE ``poplin::ReduceAdd`` supervisor vertex over the concatenation of the tile's
    output regions (lib/poplin/ConvReduce.cpp reduce()), costed by its estimator
    (estimators.poplin.reduce_add_cycles, getReduceCycleEstimate) for the tile's total output
    elements.  The tile's estimate is charged on its first region; the others add nothing, and so
    is its vertex state (``one_vertex_per_tile``).  Same numerics as ReducePartials."""

    name = "ReduceAdd"
    supervisor = True
    multi_region = False
    one_vertex_per_tile = True  # its vertex state once a tile (cost_model.vertex_instances)

    def cycles(self, group, target):
        fi, fo = group.fields["in"], group.fields["out"]
        return reduce_add_tile_vertex_cycles(group.tiles, fo.sizes, int(group.param("k")), fo.tensor.itemsize,
                                             fi.tensor.itemsize, int(target.threads_per_tile))


REDUCE_PARTIALS = ReducePartials()


CONV_REDUCE_PARTIALS = ConvReducePartials()


SOFTMAX = Softmax()


SOFTMAX_GRAD = SoftmaxGrad()


LAYER_NORM = LayerNorm()


LAYER_NORM_GRAD = LayerNormGrad()


COLUMN_SUM = ColumnSum()


class BatchNormStats(RowCodelet):
    """Per-vertex partial per-channel sum and sum of squares of its rows (fp32).  Costed as popnn's
    batch-norm statistics (popnn/BatchNorm.cpp batchNormStatistics -> poplin/Norms.cpp
    normStatisticsImpl, the non-stable path the TensorFlow IPU backend's training batch norm runs):
    one popops reduceMany of ADD and SQUARE_ADD over the rows, whose first stage is a strided reduce
    per tile (estimators.popops.tile_strided_reduce_share) - not elementwise loops."""

    name = "BatchNormStatsRows"
    fields = {"in": "in", "sum": "out", "sumsq": "out"}
    row_fields = ("in",)
    vec_fields = ("sum", "sumsq")
    flops_per_element = 3

    def cycles(self, group, target):
        f = self._main(group)
        L = int(group.param("row"))
        return popops.tile_strided_reduce_share(group.tiles, f.sizes // L, L, ("add", "square_add"),
                                                f.tensor.itemsize, int(target.threads_per_tile))

    def compute(self, group, data):
        x = self.rows(group, data, "in")
        per_v = self._main(group).sizes // x.shape[-1]
        self.put(group, data, "sum", _segment_sum(x, per_v))
        self.put(group, data, "sumsq", _segment_sum(x * x, per_v))


class ChannelAffine(RowCodelet):
    """out = x * scale + shift per channel (the normalise step; poplibs does it with the popops
    channel-op vertices): per row a multiply and an add loop."""

    name = "ChannelAffineRows"
    fields = {"in": "in", "scale": "in", "shift": "in", "out": "out"}
    row_fields = ("in", "out")
    vec_fields = ("scale", "shift")
    parts = (("b", "mul"), ("b", "add"))
    flops_per_element = 2

    def compute(self, group, data):
        x = self.rows(group, data, "in")
        self.put(group, data, "out", x * self.vec_per_row(group, data, "scale") + self.vec_per_row(group, data, "shift"))


class BatchNormGradStats(RowCodelet):
    """Per-vertex partial sum(dy) and sum(dy * xhat), xhat = (x - mean) * invstd (fp32).  As popnn's
    gradients run it (poplin/Norms.cpp normStatisticsGradients / normParamGradients, after
    batchNormWhiten): per row the elementwise loops xhat = (x - mean) * invstd and dy * xhat, then ONE
    popops reduction of [dy * xhat, dy] over the rows (normReduce: a strided reduce per tile,
    estimators.popops.tile_strided_reduce_share) - the two sums are not elementwise loops."""

    name = "BatchNormGradStatsRows"
    fields = {"x": "in", "dy": "in", "mean": "in", "invstd": "in", "dsum": "out", "dxsum": "out"}
    row_fields = ("x", "dy")
    vec_fields = ("mean", "invstd", "dsum", "dxsum")
    parts = (("b", "sub"), ("b", "mul"), ("b", "mul"))
    flops_per_element = 5

    def cycles(self, group, target):
        f = self._main(group)
        L = int(group.param("row"))
        return super().cycles(group, target) + popops.tile_strided_reduce_share(
            group.tiles, f.sizes // L, L, ("add", "add"), f.tensor.itemsize, int(target.threads_per_tile))

    def compute(self, group, data):
        x = self.rows(group, data, "x")
        dy = self.rows(group, data, "dy")
        xhat = (x - self.vec_per_row(group, data, "mean")) * self.vec_per_row(group, data, "invstd")
        per_v = self._main(group).sizes // x.shape[-1]
        self.put(group, data, "dsum", _segment_sum(dy, per_v))
        self.put(group, data, "dxsum", _segment_sum(dy * xhat, per_v))


class ChannelGradApply(RowCodelet):
    """dx = a * dy + b * x + c per channel (batch-norm input gradient with per-channel
    coefficients): per row two multiplies and two adds (binary-op loops)."""

    name = "BatchNormGradApplyRows"
    fields = {"x": "in", "dy": "in", "a": "in", "b": "in", "c": "in", "out": "out"}
    row_fields = ("x", "dy", "out")
    vec_fields = ("a", "b", "c")
    parts = (("b", "mul"), ("b", "mul"), ("b", "add"), ("b", "add"))
    flops_per_element = 5

    def compute(self, group, data):
        x = self.rows(group, data, "x")
        dy = self.rows(group, data, "dy")
        v = lambda n: self.vec_per_row(group, data, n)  # noqa: E731
        self.put(group, data, "out", v("a") * dy + v("b") * x + v("c"))


BN_STATS = BatchNormStats()


CHANNEL_AFFINE = ChannelAffine()


BN_GRAD_STATS = BatchNormGradStats()


CHANNEL_GRAD_APPLY = ChannelGradApply()
