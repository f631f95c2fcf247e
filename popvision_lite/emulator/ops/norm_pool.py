"""Batch norm and pooling: numpy reference, emulator ops and codelets, and the backend methods.

Tensors are NHWC activations stored as rows of channels, ``(N*H*W, C)``.  Windowed ops (im2col,
max / average pooling and their gradients) are described by a *window index*: an int array
``(R_out, k)`` of input rows (``-1`` = padding), built once when the graph is built
(:func:`conv_windows`, :func:`global_windows`).  Its inverse (:func:`invert_windows`) lists, for
every input row, the ``(window, slot)`` positions that read it - the gather form of col2im and of
the pooling gradients, so every windowed op is "gather rows, then reduce each row's windows".

Semantics (the numpy reference below is the ground truth the emulator is checked against):

* batch norm, training mode: per-channel mean and biased variance over all rows,
  ``y = (x - mean) * invstd * gamma + beta`` with ``invstd = 1 / sqrt(var + BN_EPS)``;
  returns ``(y, mean, invstd)`` (fp32 statistics, as ``popnn::bn::batchNormStatistics``);
* max pool: padding never wins (``-inf``); its gradient goes to every input element equal to its
  window's maximum (the comparison ``in == out`` of poplibs' ``MaxPoolingGrad`` vertex);
* average pool divides by the window size including padding (``count_include_pad``); global
  average pooling is one window over all of an image's rows.

Cycle costs of the pooling vertices are poplibs' pooling estimator (``estimators.popnn.pooling_cycles``,
from ``getPoolingCycles``).  The batch-norm pieces follow
the op library's row-codelet conventions (``ops/codelets.py``): instructions per 64-bit vector per
pass over the data, stated next to each codelet (modelling assumptions).
"""

from __future__ import annotations

import numpy as np

from popvision_lite.emulator import codelets as C
from popvision_lite.emulator import mapping as M
from popvision_lite.emulator import programs as P
from popvision_lite.emulator.codelets import Codelet
from popvision_lite.emulator.estimators import popnn, popops
from popvision_lite.emulator.estimators.popops import vectors
from popvision_lite.emulator.graph import DTYPES, Regions
from popvision_lite.emulator.ops.codelets import RowCodelet, _f32, _segment_sum
from popvision_lite.emulator.ops.context import OpContext, View
from popvision_lite.errors import EmulatorError

BN_EPS = 1e-5

# ============================================================================ window indices


def conv_windows(n: int, h: int, w: int, k: int, stride: int = 1, pad: int = 0):
    """Window index of a k x k, ``stride``, ``pad`` window over an (n, h, w) grid of rows.

    Returns ``(index (n*oh*ow, k*k) int64 of input rows, -1 where the window reads padding), (oh, ow))``;
    slot ``s = kh * k + kw`` (the im2col column order of a (k, k, C, Co) kernel)."""
    oh, ow = (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1
    if oh < 1 or ow < 1:
        raise ValueError(f"window {k}x{k} stride {stride} pad {pad} does not fit a {h}x{w} image")
    hi = (np.arange(oh) * stride - pad)[:, None] + np.arange(k)[None, :]  # (oh, k)
    wi = (np.arange(ow) * stride - pad)[:, None] + np.arange(k)[None, :]  # (ow, k)
    okh = (hi >= 0) & (hi < h)
    okw = (wi >= 0) & (wi < w)
    row = hi[:, None, :, None] * w + wi[None, :, None, :]  # (oh, ow, k, k)
    ok = okh[:, None, :, None] & okw[None, :, None, :]
    base = np.arange(n, dtype=np.int64)[:, None, None, None, None] * (h * w)
    idx = np.where(ok[None], base + row[None], -1).reshape(n * oh * ow, k * k)
    return idx.astype(np.int64), (oh, ow)


def global_windows(n: int, rows_per_image: int) -> np.ndarray:
    """One window over all rows of each image: (n, rows_per_image)."""
    return np.arange(n * rows_per_image, dtype=np.int64).reshape(n, rows_per_image)


def invert_windows(index: np.ndarray, n_rows: int) -> np.ndarray:
    """For each input row r, the flat positions ``o * k + s`` with ``index[o, s] == r``.

    Returns ``(n_rows, kc)`` int64 (``kc`` = most windows reading one row), ``-1`` padded."""
    index = np.asarray(index, dtype=np.int64)
    flat = index.ravel()
    pos = np.flatnonzero(flat >= 0)
    rows = flat[pos]
    order = np.argsort(rows, kind="stable")
    rows, pos = rows[order], pos[order]
    counts = np.bincount(rows, minlength=n_rows)
    kc = max(1, int(counts.max()) if counts.size else 1)
    first = np.cumsum(counts) - counts
    rank = np.arange(len(rows)) - first[rows]
    out = np.full((n_rows, kc), -1, dtype=np.int64)
    out[rows, rank] = pos
    return out


# ============================================================================ numpy reference


def ref_gather_windows(x, index, row_len=None, fill=0.0):
    """(R, k * C): rows ``index`` of x viewed as rows of ``row_len`` (default: last dim), ``fill`` at -1."""
    x = np.asarray(x)
    c = int(row_len or x.shape[-1])
    xr = x.reshape(-1, c)
    idx = np.asarray(index, dtype=np.int64)
    out = xr[np.maximum(idx, 0)].astype(np.float32)
    out[idx < 0] = fill
    return out.reshape(idx.shape[0], idx.shape[1] * c)


def ref_pool(x, index, mode: str, scale: float = 1.0, row_len=None):
    """Max or (scaled) sum over each window of rows; ``mode`` "max" (padding = -inf) or "sum"."""
    c = int(row_len or np.asarray(x).shape[-1])
    idx = np.asarray(index)
    fill = -np.inf if mode == "max" else 0.0
    g = ref_gather_windows(x, idx, c, fill).reshape(idx.shape[0], idx.shape[1], c)
    if mode == "max":
        return g.max(1)
    if mode == "sum":
        return g.sum(1) * np.float32(scale)
    raise ValueError(f"pool mode {mode!r}: expected 'max' or 'sum'")


def ref_col2im(dcols, index, n_rows):
    """Gradient of gather_windows: input row r gets the sum of every (window, slot) that read it."""
    idx = np.asarray(index)
    c = np.asarray(dcols).shape[-1] // idx.shape[1]
    return ref_pool(dcols, invert_windows(idx, n_rows), "sum", row_len=c)


def ref_avg_pool_bwd(dy, index, n_rows):
    idx = np.asarray(index)
    inv = invert_windows(idx, n_rows)
    win = np.where(inv >= 0, inv // idx.shape[1], -1)
    return ref_pool(dy, win, "sum", scale=1.0 / idx.shape[1])


def ref_max_pool_bwd(x, y, dy, index):
    """dx[r] = sum over windows o reading r of dy[o] * (x[r] == y[o])."""
    x = np.asarray(x, dtype=np.float32)
    idx = np.asarray(index)
    inv = invert_windows(idx, x.shape[0])
    win = np.where(inv >= 0, inv // idx.shape[1], -1)
    c = x.shape[-1]
    yw = ref_gather_windows(y, win, c, 0.0).reshape(x.shape[0], -1, c)
    dyw = ref_gather_windows(dy, win, c, 0.0).reshape(x.shape[0], -1, c)
    return (dyw * (x[:, None, :] == yw)).sum(1)


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


class _WindowCodelet(Codelet):
    """Base of window reductions: field ``in`` holds rows of ``k * row`` (a row's k window slots,
    each ``row`` channels), ``out`` rows of ``row``.  Params ``row`` and ``k`` (scalars)."""

    fields = {"in": "in", "out": "out"}
    code_bytes = 512
    state_bytes = 16
    pool_kind = "max"  # the work item of popnn.pooling_cycles

    def _dims(self, group):
        row, k = group.param("row"), group.param("k")
        if row is None or k is None or np.ndim(row) or np.ndim(k):
            raise EmulatorError(f"codelet '{self.name}' in '{group.cs.name}': needs scalar params 'row' and 'k'")
        return int(row), int(k)

    def check(self, group):
        row, k = self._dims(group)
        fi, fo = group.fields.get("in"), group.fields.get("out")
        for fname in self.fields:
            if not isinstance(group.fields[fname], Regions):
                raise EmulatorError(f"codelet '{self.name}' in '{group.cs.name}': field '{fname}' must be regions")
        if np.any(fo.sizes % row) or not np.array_equal(fi.sizes, fo.sizes * k):
            raise EmulatorError(f"codelet '{self.name}' in '{group.cs.name}': 'in' must hold {k} windows of "
                                f"{row} channels per output row of 'out'")

    def cycles(self, group, target):
        row, k = self._dims(group)
        fo = group.fields["out"]
        return popnn.pooling_cycles(self.pool_kind, fo.sizes // row, k, int(vectors(row, fo.tensor.itemsize)))

    def flops(self, group):
        row, k = self._dims(group)
        return int(group.fields["out"].sizes.sum()) * k

    def _gathered(self, group, data):
        row, k = self._dims(group)
        return _f32(group.fields["in"].gather(data)).reshape(-1, k, row)

    def _put(self, group, data, values):
        f = group.fields["out"]
        f.scatter(data, np.asarray(values).reshape(-1).astype(DTYPES[f.tensor.dtype], copy=False))


class WindowMax(_WindowCodelet):
    name = "MaxPoolWindows"

    def compute(self, group, data):
        self._put(group, data, self._gathered(group, data).max(1))


class WindowSum(_WindowCodelet):
    """out = scale * sum of the windows (sum / average pooling, col2im)."""

    name = "SumPoolWindows"
    pool_kind = "sum"

    def check(self, group):
        super().check(group)
        if "scale" not in group.params:
            raise EmulatorError(f"codelet '{self.name}' in '{group.cs.name}': missing param 'scale'")

    def compute(self, group, data):
        self._put(group, data, self._gathered(group, data).sum(1) * np.float32(group.param("scale")))


class MaxPoolGrad(Codelet):
    """dx (rows of ``row``) = sum over the k windows that read the row of dy_w * (x == y_w);
    ``y`` and ``dy`` hold the k windows' forward outputs and gradients (rows of k * row)."""

    name = "MaxPoolingGradRows"
    fields = {"x": "in", "y": "in", "dy": "in", "out": "out"}
    code_bytes = 640
    state_bytes = 20

    def _dims(self, group):
        row, k = group.param("row"), group.param("k")
        if row is None or k is None or np.ndim(row) or np.ndim(k):
            raise EmulatorError(f"codelet '{self.name}' in '{group.cs.name}': needs scalar params 'row' and 'k'")
        return int(row), int(k)

    def check(self, group):
        row, k = self._dims(group)
        for fname in self.fields:
            if not isinstance(group.fields[fname], Regions):
                raise EmulatorError(f"codelet '{self.name}' in '{group.cs.name}': field '{fname}' must be regions")
        fx, fo = group.fields["x"].sizes, group.fields["out"].sizes
        if (not np.array_equal(fx, fo) or np.any(fo % row) or not np.array_equal(group.fields["y"].sizes, fo * k)
                or not np.array_equal(group.fields["dy"].sizes, fo * k)):
            raise EmulatorError(f"codelet '{self.name}' in '{group.cs.name}': x/out rows of {row}, y/dy {k} windows "
                                "per row")

    def cycles(self, group, target):
        row, k = self._dims(group)
        fo = group.fields["out"]
        return popnn.pooling_cycles("max_grad", fo.sizes // row, k, int(vectors(row, fo.tensor.itemsize)))

    def flops(self, group):
        row, k = self._dims(group)
        return int(group.fields["out"].sizes.sum()) * 2 * k

    def compute(self, group, data):
        row, k = self._dims(group)
        x = _f32(group.fields["x"].gather(data)).reshape(-1, 1, row)
        y = _f32(group.fields["y"].gather(data)).reshape(-1, k, row)
        dy = _f32(group.fields["dy"].gather(data)).reshape(-1, k, row)
        f = group.fields["out"]
        f.scatter(data, (dy * (x == y)).sum(1).reshape(-1).astype(DTYPES[f.tensor.dtype], copy=False))


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


class _ChannelVectors(Codelet):
    """Per-channel coefficient arithmetic over equal-sized Regions (a few hundred channels per
    vertex), costed by ``estimators.popnn.bn_coeff_cycles``."""

    code_bytes = 384
    state_bytes = 12

    def check(self, group):
        sizes = None
        for fname in self.fields:
            f = group.fields[fname]
            if not isinstance(f, Regions):
                raise EmulatorError(f"codelet '{self.name}' in '{group.cs.name}': field '{fname}' must be regions")
            if sizes is None:
                sizes = f.sizes
            elif not np.array_equal(sizes, f.sizes):
                raise EmulatorError(f"codelet '{self.name}' in '{group.cs.name}': fields differ in size")
        if "count" not in group.params:
            raise EmulatorError(f"codelet '{self.name}' in '{group.cs.name}': missing param 'count'")

    def cycles(self, group, target):
        f = next(iter(group.fields.values()))
        return popnn.bn_coeff_cycles(f.sizes)

    def flops(self, group):
        return int(next(iter(group.fields.values())).sizes.sum()) * 8

    def get(self, group, data, fname):
        return _f32(group.fields[fname].gather(data))

    def put(self, group, data, fname, values):
        f = group.fields[fname]
        f.scatter(data, np.asarray(values).reshape(-1).astype(DTYPES[f.tensor.dtype], copy=False))


class BatchNormCoeffs(_ChannelVectors):
    """mean, invstd and the affine scale / shift of each channel from its sum and sum of squares."""

    name = "BatchNormCoeffs"
    fields = {"sum": "in", "sumsq": "in", "gamma": "in", "beta": "in", "mean": "out", "invstd": "out",
              "scale": "out", "shift": "out"}

    def compute(self, group, data):
        n = float(group.param("count"))
        mean = self.get(group, data, "sum") / n
        var = np.maximum(self.get(group, data, "sumsq") / n - mean * mean, 0.0)
        invstd = 1.0 / np.sqrt(var + BN_EPS)
        scale = invstd * self.get(group, data, "gamma")
        self.put(group, data, "mean", mean)
        self.put(group, data, "invstd", invstd)
        self.put(group, data, "scale", scale)
        self.put(group, data, "shift", self.get(group, data, "beta") - mean * scale)


class BatchNormGradCoeffs(_ChannelVectors):
    """Per-channel coefficients a, b, c of dx = a dy + b x + c, and dgamma / dbeta."""

    name = "BatchNormGradCoeffs"
    fields = {"dsum": "in", "dxsum": "in", "gamma": "in", "mean": "in", "invstd": "in", "a": "out", "b": "out",
              "c": "out", "dgamma": "out", "dbeta": "out"}

    def compute(self, group, data):
        n = float(group.param("count"))
        g = lambda f: self.get(group, data, f)  # noqa: E731
        dbeta, dgamma, invstd, mean = g("dsum"), g("dxsum"), g("invstd"), g("mean")
        a = g("gamma") * invstd
        b = -a * invstd * dgamma / n
        self.put(group, data, "a", a)
        self.put(group, data, "b", b)
        self.put(group, data, "c", -a * dbeta / n - b * mean)
        self.put(group, data, "dgamma", dgamma)
        self.put(group, data, "dbeta", dbeta)


WINDOW_MAX = WindowMax()
WINDOW_SUM = WindowSum()
MAX_POOL_GRAD = MaxPoolGrad()
BN_STATS = BatchNormStats()
CHANNEL_AFFINE = ChannelAffine()
BN_GRAD_STATS = BatchNormGradStats()
CHANNEL_GRAD_APPLY = ChannelGradApply()
BN_COEFFS = BatchNormCoeffs()
BN_GRAD_COEFFS = BatchNormGradCoeffs()


# ============================================================================ emulator ops


def _basic():
    from popvision_lite.emulator.ops import basic

    return basic


def _as_tensor(ctx, x, name, op):
    """A graph Tensor holding x (a View is materialised linearly)."""
    if isinstance(x, View):
        return _basic().materialize(ctx, x, name, op)
    return x


def _window_runs(index: np.ndarray):
    """Contiguous runs of a window index: (src_row_start, dst_position_start, length) for the valid
    entries, merging neighbouring slots that read neighbouring rows (a kernel row of an image row)."""
    flat = np.asarray(index, dtype=np.int64).ravel()
    k = index.shape[1]
    pos = np.flatnonzero(flat >= 0)
    if not len(pos):
        return pos, pos, pos
    src = flat[pos]
    brk = np.ones(len(pos), dtype=bool)
    brk[1:] = (np.diff(pos) != 1) | (np.diff(src) != 1) | (pos[1:] % k == 0)
    first = np.flatnonzero(brk)
    lengths = np.diff(np.concatenate([first, [len(pos)]]))
    return src[first], pos[first], lengths


def gather_windows(ctx: OpContext, x, index, op: str, fill: float = 0.0, row_len=None, mapping=None,
                   label: str = "windows"):
    """Tensor (R, k * C) of rows ``index`` of x (rows of ``row_len`` elements; -1 -> ``fill``),
    rows spread over the IPU's tiles (or on ``mapping``): a fill step when padding is read, then one
    exchange of whole runs of rows."""
    index = np.asarray(index, dtype=np.int64)
    R, k = index.shape
    c = int(row_len or x.shape[-1])
    xt = _as_tensor(ctx, x, f"{label}_src", op)
    if mapping is None:
        mapping = ctx.row_mapping(R, k * c)
    out = ctx.variable(f"{op}/{label}", (R, k * c), xt.dtype, mapping=mapping, op=op)
    if np.any(index < 0):
        cs = ctx.graph.add_compute_set(ctx.unique(f"{op}/{label}_fill"), op=op)
        tiles, starts, sizes = M.worker_split(out, workers=ctx.target.threads_per_tile)
        ctx.graph.add_vertices(cs, C.FILL, tiles=tiles, fields={"out": out.regions(starts, sizes)},
                               params={"value": np.float32(fill)})
        ctx.add(P.Execute(cs, name=cs.name, op=op))
    src, dst, length = _window_runs(index)
    if len(src):
        ctx.add(P.Copy(xt.regions(src * c, length * c), out.regions(dst * c, length * c),
                       name=f"{op}/gather_{label}", op=op))
    return out


def _per_row_mapping(ctx, t, k):
    """Mapping of an (R, c) tensor whose row r lives where row r of the (R, k*c) tensor ``t`` does."""
    m = t.mapping
    return M.intervals(m.tile, m.start // k, m.stop // k)


def _window_reduce(ctx, win, k, c, codelet, op, out_dtype, params=None, out_shape=None):
    R = win.shape[0]
    out = ctx.variable(op, out_shape or (R, c), out_dtype, mapping=_per_row_mapping(ctx, win, k), op=op)
    tiles, starts, sizes = M.worker_split(win, workers=ctx.target.threads_per_tile, grain=k * c)
    cs = ctx.graph.add_compute_set(ctx.unique(op), op=op)
    ctx.graph.add_vertices(cs, codelet, tiles=tiles, fields={"in": win.regions(starts, sizes),
                                                             "out": out.regions(starts // k, sizes // k)},
                           params={"row": np.int64(c), "k": np.int64(k), **(params or {})})
    ctx.add(P.Execute(cs, name=cs.name, op=op))
    return out


def im2col(ctx: OpContext, x, index, name: str):
    """(R, k * C) window rows of x (zero padding): the A operand of a convolution as a GEMM."""
    index = np.asarray(index)
    R, k = index.shape
    c = x.shape[-1]
    op = ctx.begin_op(name, "im2col", plan=f"{R} windows of {k} rows of {c} gathered by exchange",
                      min_bytes=_basic()._nbytes(x) + R * k * c * 2)
    return gather_windows(ctx, x, index, op, fill=0.0)


def pool(ctx: OpContext, x, index, mode: str, name: str, scale: float = 1.0, row_len=None):
    """Max (padding -inf) or scaled-sum pooling of the rows of x over ``index`` -> (R, C)."""
    index = np.asarray(index)
    R, k = index.shape
    c = int(row_len or x.shape[-1])
    if mode not in ("max", "sum"):
        raise EmulatorError(f"pool '{name}': mode {mode!r} is not 'max' or 'sum'")
    type_ = "max_pool" if mode == "max" else ("avg_pool" if scale != 1.0 else "sum_pool")
    op = ctx.begin_op(name, type_, plan=f"{R} windows of {k} rows of {c}; windows gathered by exchange, "
                      "reduced on tile", min_bytes=_basic()._nbytes(x) + R * c * 2)
    fill = float(np.finfo(np.float16).min) if mode == "max" else 0.0
    if mode == "max" and x.dtype == "float32":
        fill = float(np.finfo(np.float32).min)
    codelet = WINDOW_MAX if mode == "max" else WINDOW_SUM
    params = {} if mode == "max" else {"scale": np.float32(scale)}
    groups = channel_groups(R, c, ctx.target.tiles_per_ipu)
    if groups > 1:
        # few windows (global pooling: one per image): split the channels into groups so that the
        # windows spread over the tiles; window (r, g) reads channel group g of window r's rows, and its
        # output row is row r's channels g*c/G.. -- the (R, c) output's own flat layout
        cg = c // groups
        gidx = np.where(index[:, None, :] >= 0, index[:, None, :] * groups + np.arange(groups)[None, :, None], -1)
        win = gather_windows(ctx, x, gidx.reshape(R * groups, k), op, fill=fill, row_len=cg)
        return _window_reduce(ctx, win, k, cg, codelet, op, ctx.dtype, params, out_shape=(R, c))
    win = gather_windows(ctx, x, index, op, fill=fill, row_len=c)
    return _window_reduce(ctx, win, k, c, codelet, op, ctx.dtype, params)


MIN_GROUP_CHANNELS = 16  # a channel group's row: 16 fp16 = 32 B, whole 8-byte exchange words


def channel_groups(windows: int, channels: int, tiles: int) -> int:
    """Channel groups G of a pooling with few windows: the largest power of two that divides the channels,
    leaves at least MIN_GROUP_CHANNELS per group and keeps windows x G within the tiles (1 when the windows
    alone cover a quarter of the tiles: ordinary pooling)."""
    if windows * 4 > tiles:
        return 1
    g = 1
    while channels % (2 * g) == 0 and channels // (2 * g) >= MIN_GROUP_CHANNELS and windows * 2 * g <= tiles:
        g *= 2
    return g


def col2im(ctx: OpContext, dcols, index, n_rows: int, name: str):
    """Gradient of im2col: (n_rows, C) sums of every window slot that read each row."""
    index = np.asarray(index)
    k = index.shape[1]
    c = dcols.shape[-1] // k
    inv = invert_windows(index, n_rows)
    return pool(ctx, dcols, inv, "sum", name, row_len=c)


def avg_pool_bwd(ctx: OpContext, dy, index, n_rows: int, name: str):
    index = np.asarray(index)
    inv = invert_windows(index, n_rows)
    win = np.where(inv >= 0, inv // index.shape[1], -1)
    return pool(ctx, dy, win, "sum", name, scale=1.0 / index.shape[1])


def max_pool_bwd(ctx: OpContext, x, y, dy, index, name: str):
    """dx of max pooling: every element equal to its window's max gets the window's gradient."""
    index = np.asarray(index)
    c = x.shape[-1]
    R_in = int(np.prod(x.shape)) // c
    inv = invert_windows(index, R_in)
    kc = inv.shape[1]
    win = np.where(inv >= 0, inv // index.shape[1], -1)
    op = ctx.begin_op(name, "max_pool_bwd", plan=f"{R_in} rows of {c}, up to {kc} windows each; forward output "
                      "and gradient gathered per input row", min_bytes=3 * _basic()._nbytes(x))
    yw = gather_windows(ctx, y, win, op, 0.0, label="fwd_out")
    dyw = gather_windows(ctx, dy, win, op, 0.0, mapping=yw.mapping, label="grad_windows")
    rows_map = _per_row_mapping(ctx, yw, kc)
    xt = _basic().materialize(ctx, x, "x", op, mapping=rows_map, shape=(R_in, c))
    out = ctx.variable(op, (R_in, c), ctx.dtype, mapping=rows_map, op=op)
    tiles, starts, sizes = M.worker_split(xt, workers=ctx.target.threads_per_tile, grain=c)
    cs = ctx.graph.add_compute_set(ctx.unique(op), op=op)
    ctx.graph.add_vertices(cs, MAX_POOL_GRAD, tiles=tiles, fields={
        "x": xt.regions(starts, sizes), "y": yw.regions(starts * kc, sizes * kc),
        "dy": dyw.regions(starts * kc, sizes * kc), "out": out.regions(starts, sizes)},
        params={"row": np.int64(c), "k": np.int64(kc)})
    ctx.add(P.Execute(cs, name=cs.name, op=op))
    return out


def _channel_cs(ctx, codelet, ins: dict, outs: dict, op, count):
    """One compute set of a per-channel codelet over the mapping of the first output."""
    ref = next(iter(outs.values()))
    ins = {k: _basic().materialize(ctx, v, k, op, mapping=ref.mapping, shape=ref.shape) for k, v in ins.items()}
    tiles, starts, sizes = M.worker_split(ref, workers=ctx.target.threads_per_tile)
    fields = {k: v.regions(starts, sizes) for k, v in {**ins, **outs}.items()}
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
    from popvision_lite.emulator.ops import codelets as OC

    ut, first, counts = np.unique(tiles, return_index=True, return_counts=True)
    order = np.argsort(first)
    ut, first, counts = ut[order], first[order], counts[order]
    if np.any(np.diff(first) != counts[:-1]):
        raise EmulatorError(f"{op}: vertices of a tile are not consecutive")
    T = len(ut)
    tid = np.arange(T, dtype=np.int64) * c
    out = ctx.variable(f"{op}/{name}_tile", (T, c), "float32", mapping=M.intervals(ut, tid, tid + c), op=op)
    cs = ctx.graph.add_compute_set(ctx.unique(f"{op}/{name}_tile_sum"), op=op)
    ctx.graph.add_vertices(cs, OC.COLUMN_SUM, tiles=ut, fields={"in": partial.regions(first * c, counts * c),
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
    used = min(ctx.target.tiles_per_ipu, -(-c // per))
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
    vid = np.arange(V, dtype=np.int64) * c
    pd = ctx.variable(f"{op}/dsum_partial", (V, c), "float32", mapping=M.intervals(tiles, vid, vid + c), op=op)
    px = ctx.variable(f"{op}/dxsum_partial", (V, c), "float32", mapping=M.intervals(tiles, vid, vid + c), op=op)
    _row_vertices(ctx, BN_GRAD_STATS, {"x": xt, "dy": dyt}, {"mean": mean, "invstd": invstd},
                  {"dsum": pd.regions(vid, c), "dxsum": px.regions(vid, c)}, tiles, starts, sizes, c, op)
    ds, dxs = _reduce_channels(ctx, [(pd, "dsum"), (px, "dxsum")], tiles, c, op)
    on = lambda t, n: B.materialize(ctx, t, n, op, mapping=ds.mapping, shape=(c,))  # noqa: E731
    g, m, s = on(gamma, "gamma"), on(mean, "mean"), on(invstd, "invstd")
    mk = lambda n, dt="float32": ctx.variable(f"{op}/{n}", (c,), dt, mapping=ds.mapping, op=op)  # noqa: E731
    a, b, cc = mk("a"), mk("b"), mk("c")
    dgamma, dbeta = mk("dgamma", gamma.dtype), mk("dbeta", gamma.dtype)
    _channel_cs(ctx, BN_GRAD_COEFFS, {"dsum": ds, "dxsum": dxs, "gamma": g, "mean": m, "invstd": s},
                {"a": a, "b": b, "c": cc, "dgamma": dgamma, "dbeta": dbeta}, op, R)
    dx = ctx.variable(f"{op}/dx", x.shape, ctx.dtype, mapping=xt.mapping, op=op)
    _row_vertices(ctx, CHANNEL_GRAD_APPLY, {"x": xt, "dy": dyt, "out": dx}, {"a": a, "b": b, "c": cc}, {},
                  tiles, starts, sizes, c, op)
    return dx, dgamma, dbeta


# ============================================================================ backend methods
# One mixin per backend (models/backend.py NumpyBackend, models/emulated.py EmulatorBackend,
# models/planning.py PlanOnlyBackend): the same vocabulary on all three.


class NumpyNormPool:
    """Reference execution (NumpyBackend)."""

    def gather_windows(self, x, index, name):
        return self._out(name, "im2col", ref_gather_windows(self._val(x), index))

    def col2im(self, dcols, index, n_rows, name):
        return self._out(name, "sum_pool", ref_col2im(self._val(dcols), index, n_rows))

    def max_pool(self, x, index, name):
        return self._out(name, "max_pool", ref_pool(self._val(x), index, "max"))

    def avg_pool(self, x, index, name):
        return self._out(name, "avg_pool", ref_pool(self._val(x), index, "sum", scale=1.0 / np.shape(index)[1]))

    def max_pool_bwd(self, x, y, dy, index, name):
        return self._out(name, "max_pool_bwd", ref_max_pool_bwd(self._val(x), self._val(y), self._val(dy), index))

    def avg_pool_bwd(self, dy, index, n_rows, name):
        return self._out(name, "avg_pool", ref_avg_pool_bwd(self._val(dy), index, n_rows))

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


class EmulatorNormPool:
    """Graph building (EmulatorBackend)."""

    def gather_windows(self, x, index, name):
        return self._op(im2col, x, index, self.qual(name))

    def col2im(self, dcols, index, n_rows, name):
        return self._op(col2im, dcols, index, n_rows, self.qual(name))

    def max_pool(self, x, index, name):
        return self._op(pool, x, index, "max", self.qual(name))

    def avg_pool(self, x, index, name):
        return self._op(pool, x, index, "sum", self.qual(name), 1.0 / np.shape(index)[1])

    def max_pool_bwd(self, x, y, dy, index, name):
        return self._op(max_pool_bwd, x, y, dy, index, self.qual(name))

    def avg_pool_bwd(self, dy, index, n_rows, name):
        return self._op(avg_pool_bwd, dy, index, n_rows, self.qual(name))

    def batch_norm(self, x, gamma, beta, name):
        return self._op(batch_norm, x, gamma, beta, self.qual(name))

    def batch_norm_bwd(self, x, dy, mean, invstd, gamma, name):
        return self._op(batch_norm_bwd, x, dy, mean, invstd, gamma, self.qual(name))


class PlanNormPool:
    """Shapes and plan records only (PlanOnlyBackend)."""

    def _windows(self, x, index, name, typ, c=None):
        from popvision_lite.emulator.ops.planners import plan_elementwise

        from ..shape import Shape

        R, k = np.shape(index)
        c = int(c or x.shape[-1])
        self._rec(name, typ, plan_elementwise(R * k * c, self.pt))
        return Shape((R, c), self.dtype)

    def gather_windows(self, x, index, name):
        from ..shape import Shape

        R, k = np.shape(index)
        self._windows(x, index, name, "im2col")
        return Shape((R, k * x.shape[-1]), self.dtype)

    def col2im(self, dcols, index, n_rows, name):
        from ..shape import Shape

        c = dcols.shape[-1] // np.shape(index)[1]
        self._windows(dcols, index, name, "sum_pool", c)
        return Shape((n_rows, c), self.dtype)

    def max_pool(self, x, index, name):
        return self._windows(x, index, name, "max_pool")

    def avg_pool(self, x, index, name):
        return self._windows(x, index, name, "avg_pool")

    def max_pool_bwd(self, x, y, dy, index, name):
        return self._ew(x, name, "max_pool_bwd")

    def avg_pool_bwd(self, dy, index, n_rows, name):
        from ..shape import Shape

        self._rec(name, "avg_pool", f"{n_rows} rows")
        return Shape((n_rows, dy.shape[-1]), self.dtype)

    def batch_norm(self, x, gamma, beta, name):
        from ..shape import Shape

        y = self._rows(x, name, "batch_norm")
        return y, Shape(gamma.shape, "float32"), Shape(gamma.shape, "float32")

    def batch_norm_bwd(self, x, dy, mean, invstd, gamma, name):
        from ..shape import Shape

        dx = self._rows(x, name, "batch_norm_bwd")
        return dx, Shape(gamma.shape, gamma.dtype), Shape(gamma.shape, gamma.dtype)
