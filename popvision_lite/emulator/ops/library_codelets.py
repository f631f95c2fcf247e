"""Codelets the op library adds to the core set (elementwise specials and row-wise ops).

Row ops work on Regions that cover whole rows of length ``row`` (a scalar param); numerics run
once per vertex group over all rows (vectorised).  Cycle costs are compositions of the poplibs
estimators of the popops / popnn vertices Poplar runs for the same op (``emulator/estimators``:
binary/unary op loops, single-input reductions), with the op list of each row op taken from
poplibs (popnn/Norms.cpp getNormFwdFlops / getNormBwdFlops / getNormWuFlops for layer norm;
popnn non-linearity SOFTMAX_STABLE and its gradient for softmax).
"""

from __future__ import annotations

import numpy as np

from popvision_lite.emulator import codelets as C
from popvision_lite.emulator.codelets import Codelet
from popvision_lite.emulator.estimators import popops
from popvision_lite.emulator.estimators.poplin import amp_supervisor_cycles, reduce_add_tile_vertex_cycles
from popvision_lite.emulator.graph import Blocks, Regions, Windows, to_dtype
from popvision_lite.emulator.ops import reference as R
from popvision_lite.errors import EmulatorError


def _f32(x):
    """``x`` as float32 for a vertex's compute: ``graph.to_dtype`` (the bits of ``astype``, without numpy's
    slow path for fp16 subnormals) for arrays."""
    return to_dtype(x, "float32") if isinstance(x, np.ndarray) else np.asarray(x, dtype=np.float32)


def _segment_sum(values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Sum consecutive runs of ``counts[v]`` rows of ``values`` (every count >= 1)."""
    offs = np.cumsum(counts) - counts
    return np.add.reduceat(values, offs, axis=0)


# -------------------------------------------------------------------- elementwise specials
# gelu and its gradient: popnn NonLinearity1D / NonLinearityGrad1D (GELU, 5 cycles per half vector)
GELU = C.unary("Gelu", lambda x: R.gelu(x), flops_per_element=12, model=("nonlinearity", "gelu", False))
GELU_BWD = C.binary("GeluGrad", lambda x, dy: R.gelu_bwd(x, dy), flops_per_element=18,
                    model=("nonlinearity", "gelu", True))
RELU_BWD = C.binary("ReluGrad", lambda x, dy: R.relu_bwd(x, dy), flops_per_element=1,
                    model=("nonlinearity", "relu", True))
# out = scale * (a - b): MSE gradient = popops BinaryOp SUBTRACT then MULTIPLY by a scalar
SCALED_SUB = C.binary("ScaledSub", lambda a, b, scale: (_f32(a) - _f32(b)) * scale, flops_per_element=2,
                      params=("scale",), model=("composite", [("binary", "sub"), ("binary", "mul")]))
# w -= lr * g in place (out = w is inout): popops ScaledSubtractSupervisor
SGD = C.Elementwise("SgdUpdate", lambda w, g, lr: _f32(w) - lr * _f32(g), inputs=("in",), flops_per_element=2,
                    params=("lr",), inplace=True, model=("scaled_add",))


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
        row = group.param("row")
        if row is None or np.ndim(row) != 0:
            raise EmulatorError(f"codelet '{self.name}' in '{group.cs.name}': needs scalar param 'row'")
        row = int(row)
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
        k = group.param("k")
        if k is None or np.ndim(k) != 0:
            raise EmulatorError(f"codelet '{self.name}' in '{group.cs.name}': needs scalar param 'k'")
        fi, fo = group.fields["in"], group.fields["out"]
        if not isinstance(fi, Regions) or not isinstance(fo, Regions) or np.any(fi.sizes != int(k) * fo.sizes):
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



class TileMatMul(C.BlockMatMul):
    """A tile's block matmul: out (m, n) [+]= op(a) @ op(b), FP32 accumulate.

    ``a`` and ``b`` are single contiguous Regions (m*k and k*n elements, stored transposed when
    ``ta`` / ``tb``), ``out`` is a 2-D Blocks field (or (1, m, n)).  A *supervisor* vertex (one per
    tile) that runs on all six workers: cost = poplin's ConvPartial1x1Out AMP estimate
    (estimators.poplin.amp_matmul_tile_cycles) in worker-slot units (tile cycles / threads)."""

    supervisor = True

    def cycles(self, group, target):
        bm, bk, bn = self.dims(group)
        return np.full(group.n, amp_supervisor_cycles(bm, bk, bn, self._fp16(group), target), np.int64)

    def __init__(self, ta: bool, tb: bool, accumulate: bool = False):
        super().__init__(accumulate)
        self.ta, self.tb = ta, tb
        self.name = f"TileMatMul{'T' if ta else 'N'}{'T' if tb else 'N'}" + ("Acc" if accumulate else "")
        self.state_bytes = 14  # + m, k, n

    def dims(self, group):
        from popvision_lite.emulator.codelets import _block2

        om, on = _block2(group.fields["out"], "out", self.name)
        k = group.param("k")
        if k is None or np.ndim(k) != 0:
            raise EmulatorError(f"codelet '{self.name}' in '{group.cs.name}': needs scalar param 'k'")
        k = int(k)
        fa, fb = group.fields["a"], group.fields["b"]
        for fname, f, want in (("a", fa, om * k), ("b", fb, k * on)):
            if not isinstance(f, Regions) or np.any(f.sizes != want):
                raise EmulatorError(f"codelet '{self.name}' in '{group.cs.name}': field '{fname}' must be regions of "
                                    f"{want} elements (out block {om}x{on}, k={k})")
        return om, k, on

    # Full-numerics speed: the op library broadcasts each operand block to every tile that needs it
    # (a Copy of equal-sized Regions into a whole staging tensor).  The engine defers such copies
    # for codelets that set ``reads_through_copies``; when the group then reads, through them, one
    # consistent source piece per output row block and per output column block and writes every
    # output block once, it is exactly C (+)= op(A) @ op(B) over the un-replicated source pieces:
    # one fp16->fp32 conversion per source element and one batched GEMM, instead of converting and
    # multiplying every replicated per-tile block.  Anything else takes the per-vertex path.
    reads_through_copies = True

    @staticmethod
    def _source(f, aliases):
        """(tensor, per-vertex start, block shape or None) of a Regions field, looking through a
        deferred broadcast copy; a copy of Blocks of a 2-D tensor (a weight laid out in plan order)
        gives per-vertex linear block numbers and the block shape."""
        from popvision_lite.emulator.graph import Blocks

        al = aliases.get(f.tensor.id) if aliases else None
        if al is None:
            return f.tensor, f.starts, None
        src, _dst = al
        wins = [src] if isinstance(src, Windows) else list(getattr(src, "parts", ()))
        if wins and all(isinstance(w, Windows) for w in wins):
            # windows of a 2-D tensor (an uneven split): per vertex the flat offset of its window
            sh = src.tensor.shape
            shapes = {w.block_shape for w in wins}
            if len(sh) != 2:
                return None
            sizes = np.concatenate([np.full(w.n, w.block_elems, np.int64) for w in wins])
            origin = np.concatenate([w.start_offsets() for w in wins])
            shape_of = np.concatenate([np.full(w.n, i, np.int64) for i, w in enumerate(wins)])
            off = np.cumsum(sizes) - sizes
            q = np.searchsorted(off, f.starts, side="right") - 1
            if np.any(f.starts != off[q]) or np.any(f.sizes != sizes[q]) or len(shapes) != len(wins) \
                    or len(np.unique(shape_of[q])) != 1:
                return None  # a vertex reads part of a window, or windows of several shapes
            return src.tensor, origin[q], ("win", wins[int(shape_of[q[0]])].block_shape)
        if isinstance(src, Blocks):
            r, c = src.block_shape
            q, o = np.divmod(f.starts, r * c)
            if np.any(o != 0) or np.any(f.sizes != r * c) or len(src.tensor.shape) != 2:
                return None
            nbc = src.tensor.shape[1] // c
            return src.tensor, src.index[q, 0] * nbc + src.index[q, 1], (r, c)
        if src.sizes.min() == src.sizes.max():
            L = int(src.sizes[0])
            q, o = np.divmod(f.starts, L)
            if np.any(o + f.sizes > L):  # a vertex's piece spans two source regions
                return None
            return src.tensor, src.starts[q] + o, None
        off = np.cumsum(src.sizes) - src.sizes  # where each source region lands in the staging tensor
        q = np.searchsorted(off, f.starts, side="right") - 1
        o = f.starts - off[q]
        if np.any(o + f.sizes > src.sizes[q]):
            return None
        return src.tensor, src.starts[q] + o, None

    def _whole_plan(self, group, aliases):
        """(TA, SA (G, nr), TB, SB (G, nc), G, nr, nc) or None; cached per alias sources."""
        fa, fb, fo = group.fields["a"], group.fields["b"], group.fields["out"]
        key = tuple(id(aliases[t][0]) if aliases and t in aliases else None for t in (fa.tensor.id, fb.tensor.id))
        cache = group.__dict__.setdefault("_whole_plans", {})
        if key in cache:
            return cache[key]
        plan = None
        ra, rb = self._source(fa, aliases), self._source(fb, aliases)
        shp, blk = fo.tensor.shape, fo.block_shape
        if ra is not None and rb is not None and len(shp) in (2, 3) and (len(shp) == 2 or blk[0] == 1):
            windows = not isinstance(fo, Blocks)  # a block shape of an uneven split: a sub-grid of C
            if windows:
                o = fo.origins
                g = o[:, 0] if len(shp) == 3 else np.zeros(group.n, np.int64)
                gs, g = np.unique(g, return_inverse=True)
                rows, r = np.unique(o[:, -2], return_inverse=True)
                cols, c = np.unique(o[:, -1], return_inverse=True)
                G, nr, nc = len(gs), len(rows), len(cols)
                g, r, c = g.ravel(), r.ravel(), c.ravel()
                bm_, bn_ = blk[-2], blk[-1]
                rect = None
                if (np.array_equal(gs, gs[0] + np.arange(G)) and np.array_equal(rows, rows[0] + bm_ * np.arange(nr))
                        and np.array_equal(cols, cols[0] + bn_ * np.arange(nc))):
                    rect = (int(gs[0]), int(rows[0]), int(cols[0]))
            else:
                idx = fo.index
                g = idx[:, 0] if len(shp) == 3 else np.zeros(group.n, np.int64)
                r, c = idx[:, -2], idx[:, -1]
                G = shp[0] if len(shp) == 3 else 1
                nr, nc = shp[-2] // blk[-2], shp[-1] // blk[-1]
            lin = (g * nr + r) * nc + c
            if group.n == G * nr * nc and len(np.unique(lin)) == group.n:
                SA = np.zeros((G, nr), np.int64)
                SB = np.zeros((G, nc), np.int64)
                SA[g, r] = ra[1]
                SB[g, c] = rb[1]
                if np.array_equal(SA[g, r], ra[1]) and np.array_equal(SB[g, c], rb[1]):
                    plan = (ra[0], SA, rb[0], SB, G, nr, nc, ra[2], rb[2], (g, r, c, rect) if windows else None)
        cache[key] = plan
        return plan

    def _compute_whole(self, group, data, plan):
        bm, bk, bn = self.dims(group)
        TA, SA, TB, SB, G, nr, nc, bsa, bsb, win_idx = plan
        win = np.lib.stride_tricks.sliding_window_view

        def fetch(T, S, bs, elems):
            if bs is None:
                return win(data[T.id], elems)[S.ravel()]
            if bs[0] == "win":  # windows (r, c) of a 2-D tensor at flat offsets S
                r, c = bs[1]
                rr, cc = np.divmod(S.ravel(), T.shape[1])
                return win(data[T.id].reshape(T.shape), (r, c))[rr, cc].reshape(-1, r * c)
            r, c = bs
            R, Cn = T.shape
            blocks = data[T.id].reshape(R // r, r, Cn // c, c).transpose(0, 2, 1, 3).reshape(-1, r * c)
            return blocks[S.ravel()]

        a = _f32(fetch(TA, SA, bsa, bm * bk))  # a fresh array (fetch gathers)
        b = _f32(fetch(TB, SB, bsb, bk * bn))
        a = a.reshape(G, nr, *((bk, bm) if self.ta else (bm, bk)))
        b = b.reshape(G, nc, *((bn, bk) if self.tb else (bk, bn)))
        if self.ta:
            a = a.swapaxes(-1, -2)
        if self.tb:
            b = b.swapaxes(-1, -2)
        a = a.reshape(G, nr * bm, bk)
        b = b.transpose(0, 2, 1, 3).reshape(G, bk, nc * bn)
        res = np.matmul(a, b)
        fo = group.fields["out"]
        if win_idx is not None:  # windows: vertex v's block is (g, r, c) of the sub-grid
            g, r, c, rect = win_idx
            if rect is not None:  # the sub-grid is one rectangle of C: write it in place
                g0, r0, c0 = rect
                shp = fo.tensor.shape
                sub = data[fo.tensor.id].reshape(shp if len(shp) == 3 else (1, *shp))[
                    g0:g0 + G, r0:r0 + nr * bm, c0:c0 + nc * bn]
                if self.accumulate:
                    res += sub
                sub[...] = to_dtype(res, fo.tensor.dtype)
                return
            vals = res.reshape(G, nr, bm, nc, bn).transpose(0, 1, 3, 2, 4)[g, r, c]
            if self.accumulate:
                vals += fo.gather(data).reshape(group.n, bm, bn)
            fo.scatter(data, to_dtype(vals, fo.tensor.dtype))
            return
        c = data[fo.tensor.id].reshape(G, nr * bm, nc * bn)
        if self.accumulate:
            res += c
        c[...] = res

    def compute(self, group, data):
        aliases = getattr(data, "aliases", None)
        plan = self._whole_plan(group, aliases)
        if plan is not None:
            self._compute_whole(group, data, plan)
            return
        if aliases:  # the engine left deferred inputs for us to read through: make them current
            for fname in ("a", "b"):
                if group.fields[fname].tensor.id in aliases:
                    data.materialize(group.fields[fname].tensor.id)
        bm, bk, bn = self.dims(group)
        n = group.n
        fb = group.fields["b"]
        # the workers of a tile share its B block: gather it once per tile and broadcast in matmul
        share = 1
        if n > 1:
            change = np.flatnonzero(np.diff(fb.starts) != 0)
            runs = np.diff(np.concatenate([[0], change + 1, [n]]))
            if len(runs) and np.all(runs == runs[0]) and runs[0] > 1:
                share = int(runs[0])
        u = n // share
        a = group.fields["a"].gather(data).reshape((u, share) + ((bk, bm) if self.ta else (bm, bk)))
        if share > 1:
            b = Regions(fb.tensor, fb.starts[::share], fb.sizes[::share]).gather(data)
        else:
            b = fb.gather(data)
        b = b.reshape((u, 1) + ((bn, bk) if self.tb else (bk, bn)))
        a = _f32(a)
        b = _f32(b)
        if self.ta:
            a = a.swapaxes(-1, -2)
        if self.tb:
            b = b.swapaxes(-1, -2)
        out = group.fields["out"]
        res = np.matmul(a, b).reshape(n, bm, bn)
        if self.accumulate:
            res += out.gather(data).reshape(n, bm, bn)
        out.scatter(data, to_dtype(res.reshape((n, *out.block_shape)), out.tensor.dtype))


TILE_MATMUL = {(ta, tb, acc): TileMatMul(ta, tb, acc) for ta in (False, True) for tb in (False, True)
               for acc in (False, True)}
