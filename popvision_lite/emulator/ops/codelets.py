"""Codelets the op library adds to the core set (elementwise specials and row-wise ops).

Row ops work on Regions that cover whole rows of length ``row`` (a scalar param); numerics run
once per vertex group over all rows (vectorised).  Cycle costs follow the core's conventions
(worker-thread cycles, 64-bit vectors: 4 fp16 / 2 fp32 per instruction); the per-vector
instruction counts are modelling assumptions stated next to each codelet.
"""

from __future__ import annotations

import numpy as np

from popvision_lite.emulator import codelets as C
from popvision_lite.emulator.codelets import ELEMENTWISE_OVERHEAD, VECTOR_BYTES, Codelet
from popvision_lite.emulator.graph import DTYPES, Regions
from popvision_lite.emulator.ops import reference as R
from popvision_lite.errors import EmulatorError


def _f32(x):
    return np.asarray(x, dtype=np.float32)


def _segment_sum(values: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Sum consecutive runs of ``counts[v]`` rows of ``values`` (every count >= 1)."""
    offs = np.cumsum(counts) - counts
    return np.add.reduceat(values, offs, axis=0)


# -------------------------------------------------------------------- elementwise specials
# gelu: tanh approximation ~ 10 instructions per vector (poly + tanh); its backward ~ 14 (assumption)
GELU = C.unary("Gelu", lambda x: R.gelu(x), cycles_per_vector=10, flops_per_element=12)
GELU_BWD = C.binary("GeluGrad", lambda x, dy: R.gelu_bwd(x, dy), cycles_per_vector=14, flops_per_element=18)
RELU_BWD = C.binary("ReluGrad", lambda x, dy: R.relu_bwd(x, dy), cycles_per_vector=3, flops_per_element=1)
# out = scale * (a - b): MSE gradient
SCALED_SUB = C.binary("ScaledSub", lambda a, b, scale: (_f32(a) - _f32(b)) * scale, cycles_per_vector=4,
                      flops_per_element=2, params=("scale",))
# w -= lr * g in place (out = w is inout)
SGD = C.Elementwise("SgdUpdate", lambda w, g, lr: _f32(w) - lr * _f32(g), inputs=("in",), cycles_per_vector=4,
                    flops_per_element=2, params=("lr",), inplace=True)


class RowCodelet(Codelet):
    """Base of row-wise codelets: every field is Regions of whole rows, ``row`` param = row length.

    ``row_fields`` are the per-row fields (same size per vertex); ``vec_fields`` hold one row-length
    vector per vertex (gamma, beta, partial sums)."""

    row_fields: tuple[str, ...] = ()
    vec_fields: tuple[str, ...] = ()
    vectors_per_element = 4  # instructions per 64-bit vector of a row (passes over the data)
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
        f = self._main(group)
        per = max(VECTOR_BYTES // f.tensor.itemsize, 1)
        rows = f.sizes // int(group.param("row"))
        vec = -(-f.sizes // per)
        return ELEMENTWISE_OVERHEAD + self.vectors_per_element * vec + 20 * rows  # 20: per-row set-up/divide

    def flops(self, group):
        return int(self.flops_per_element * self._main(group).sizes.sum())

    def rows(self, group, data, fname):
        row = int(group.param("row"))
        return _f32(group.fields[fname].gather(data)).reshape(-1, row)

    def put(self, group, data, fname, values):
        f = group.fields[fname]
        f.scatter(data, np.asarray(values).reshape(-1).astype(DTYPES[f.tensor.dtype], copy=False))

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
    vectors_per_element = 12
    flops_per_element = 6

    def compute(self, group, data):
        self.put(group, data, "out", R.softmax(self.rows(group, data, "in")))


class SoftmaxGrad(RowCodelet):
    name = "SoftmaxGradRows"
    fields = {"y": "in", "dy": "in", "out": "out"}
    row_fields = ("y", "dy", "out")
    vectors_per_element = 6
    flops_per_element = 4

    def compute(self, group, data):
        self.put(group, data, "out", R.softmax_bwd(self.rows(group, data, "y"), self.rows(group, data, "dy")))


class LayerNorm(RowCodelet):
    name = "LayerNormRows"
    fields = {"in": "in", "gamma": "in", "beta": "in", "out": "out"}
    row_fields = ("in", "out")
    vec_fields = ("gamma", "beta")
    vectors_per_element = 8
    flops_per_element = 8

    def compute(self, group, data):
        x = self.rows(group, data, "in")
        g = self.vec_per_row(group, data, "gamma")
        b = self.vec_per_row(group, data, "beta")
        mu = x.mean(-1, keepdims=True)
        var = x.var(-1, keepdims=True)
        self.put(group, data, "out", (x - mu) / np.sqrt(var + R.LN_EPS) * g + b)


class LayerNormGrad(RowCodelet):
    """dx for the rows, plus per-vertex partial dgamma / dbeta (fp32, reduced across vertices later)."""

    name = "LayerNormGradRows"
    fields = {"x": "in", "gamma": "in", "dy": "in", "dx": "out", "dgamma": "out", "dbeta": "out"}
    row_fields = ("x", "dy", "dx")
    vec_fields = ("gamma", "dgamma", "dbeta")
    vectors_per_element = 14
    flops_per_element = 14

    def compute(self, group, data):
        x = self.rows(group, data, "x")
        dy = self.rows(group, data, "dy")
        g = self.vec_per_row(group, data, "gamma")
        h = x.shape[-1]
        mu = x.mean(-1, keepdims=True)
        rstd = 1.0 / np.sqrt(x.var(-1, keepdims=True) + R.LN_EPS)
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
    vectors_per_element = 2
    flops_per_element = 1

    def compute(self, group, data):
        x = self.rows(group, data, "in")
        rows_per_v = self._main(group).sizes // x.shape[-1]
        self.put(group, data, "out", _segment_sum(x, rows_per_v))


SOFTMAX = Softmax()
SOFTMAX_GRAD = SoftmaxGrad()
LAYER_NORM = LayerNorm()
LAYER_NORM_GRAD = LayerNormGrad()
COLUMN_SUM = ColumnSum()



class BlockMatMulT(C.BlockMatMul):
    """AMP block matmul with operands stored transposed: out (bm, bn) [+]= op(a) @ op(b) where
    op(a) = a.T when ``ta`` (a block is (bk, bm)) and op(b) = b.T when ``tb`` (b block is (bn, bk)).
    Same cost as the core BlockMatMul (the AMP unit reads either layout)."""

    def __init__(self, ta: bool, tb: bool, accumulate: bool = False):
        super().__init__(accumulate)
        self.ta, self.tb = ta, tb
        self.name = f"BlockMatMul{'T' if ta else 'N'}{'T' if tb else 'N'}" + ("Acc" if accumulate else "")

    def dims(self, group):
        from popvision_lite.emulator.codelets import _block2

        ar, ac = _block2(group.fields["a"], "a", self.name)
        br, bc = _block2(group.fields["b"], "b", self.name)
        om, on = _block2(group.fields["out"], "out", self.name)
        bm, bk = (ac, ar) if self.ta else (ar, ac)
        bk2, bn = (bc, br) if self.tb else (br, bc)
        if bk != bk2 or (om, on) != (bm, bn):
            raise EmulatorError(
                f"codelet '{self.name}' in '{group.cs.name}': blocks a {(ar, ac)} b {(br, bc)} -> out {(om, on)} "
                f"do not chain for op(a) @ op(b) (ta={self.ta}, tb={self.tb})")
        return bm, bk, bn

    def compute(self, group, data):
        bm, bk, bn = self.dims(group)
        n = group.n
        a = group.fields["a"].gather(data).reshape((n, bk, bm) if self.ta else (n, bm, bk)).astype(np.float32, copy=False)
        b = group.fields["b"].gather(data).reshape((n, bn, bk) if self.tb else (n, bk, bn)).astype(np.float32, copy=False)
        if self.ta:
            a = a.transpose(0, 2, 1)
        if self.tb:
            b = b.transpose(0, 2, 1)
        out = group.fields["out"]
        res = np.matmul(a, b)
        if self.accumulate:
            res += out.gather(data).reshape(n, bm, bn)
        out.scatter(data, res.reshape((n, *out.block_shape)).astype(DTYPES[out.tensor.dtype], copy=False))


MATMUL_T = {(ta, tb, acc): BlockMatMulT(ta, tb, acc) for ta in (False, True) for tb in (False, True)
            for acc in (False, True)}


class TileMatMul(C.BlockMatMul):
    """A worker's share of a tile's block matmul: out (m, n) [+]= op(a) @ op(b), FP32 accumulate.

    ``a`` and ``b`` are single contiguous Regions (m*k and k*n elements, stored transposed when
    ``ta`` / ``tb``), ``out`` is a 2-D Blocks field (or (1, m, n)).  Cost as the core BlockMatMul."""

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
        """(tensor, per-vertex start) of a Regions field, looking through a deferred broadcast copy."""
        al = aliases.get(f.tensor.id) if aliases else None
        if al is None:
            return f.tensor, f.starts
        src, _dst = al
        L = int(src.sizes[0])
        q, o = np.divmod(f.starts, L)
        if np.any(o + f.sizes > L):  # a vertex's piece spans two source regions
            return None
        return src.tensor, src.starts[q] + o

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
                    plan = (ra[0], SA, rb[0], SB, G, nr, nc)
        cache[key] = plan
        return plan

    def _compute_whole(self, group, data, plan):
        bm, bk, bn = self.dims(group)
        TA, SA, TB, SB, G, nr, nc = plan
        win = np.lib.stride_tricks.sliding_window_view
        a = win(data[TA.id], bm * bk)[SA.ravel()].astype(np.float32)
        b = win(data[TB.id], bk * bn)[SB.ravel()].astype(np.float32)
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
        a = a.astype(np.float32, copy=False)
        b = b.astype(np.float32, copy=False)
        if self.ta:
            a = a.swapaxes(-1, -2)
        if self.tb:
            b = b.swapaxes(-1, -2)
        out = group.fields["out"]
        res = np.matmul(a, b).reshape(n, bm, bn)
        if self.accumulate:
            res += out.gather(data).reshape(n, bm, bn)
        out.scatter(data, res.reshape((n, *out.block_shape)).astype(DTYPES[out.tensor.dtype], copy=False))


TILE_MATMUL = {(ta, tb, acc): TileMatMul(ta, tb, acc) for ta in (False, True) for tb in (False, True)
               for acc in (False, True)}
