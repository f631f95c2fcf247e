"""popnn codelets: the non-linearities (GELU, its gradient, the ReLU gradient), the pooling window vertices and the
batch-norm coefficient vertices."""

from __future__ import annotations

import numpy as np

from popvision_lite.emulator import reference as R
from popvision_lite.emulator.codelets import base as C
from popvision_lite.emulator.codelets.base import Codelet, _f32
from popvision_lite.emulator.estimators import popnn
from popvision_lite.emulator.estimators.popops import vectors
from popvision_lite.emulator.graph import DTYPES, Regions
from popvision_lite.errors import EmulatorError

# -------------------------------------------------------------------- elementwise specials
# gelu and its gradient: popnn NonLinearity1D / NonLinearityGrad1D (GELU, 5 cycles per half vector)
GELU = C.unary("Gelu", lambda x: R.gelu(x), flops_per_element=12, model=("nonlinearity", "gelu", False))


GELU_BWD = C.binary("GeluGrad", lambda x, dy: R.gelu_bwd(x, dy), flops_per_element=18,
                    model=("nonlinearity", "gelu", True))


RELU_BWD = C.binary("ReluGrad", lambda x, dy: R.relu_bwd(x, dy), flops_per_element=1,
                    model=("nonlinearity", "relu", True))


BN_EPS = 1e-5


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


BN_COEFFS = BatchNormCoeffs()


BN_GRAD_COEFFS = BatchNormGradCoeffs()


def _row_and_k(codelet, group) -> tuple[int, int]:
    """The scalar params ``row`` (channels of a row) and ``k`` (window slots) of a window codelet's group."""
    row, k = group.param("row"), group.param("k")
    if row is None or k is None or np.ndim(row) or np.ndim(k):
        raise EmulatorError(f"codelet '{codelet.name}' in '{group.cs.name}': needs scalar params 'row' and 'k'")
    return int(row), int(k)


class _WindowCodelet(Codelet):
    """Base of window reductions: field ``in`` holds rows of ``k * row`` (a row's k window slots,
    each ``row`` channels), ``out`` rows of ``row``.  Params ``row`` and ``k`` (scalars)."""

    fields = {"in": "in", "out": "out"}
    code_bytes = 512
    state_bytes = 16
    pool_kind = "max"  # the work item of popnn.pooling_cycles

    def _dims(self, group):
        return _row_and_k(self, group)

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
    """dx (rows of ``row``) = sum over the windows that read the row of dy_w * (x == y_w), as poplibs'
    ``MaxPoolingGrad``: ``y`` and ``dy`` hold the forward outputs and gradients of the windows the
    tile's input rows are read by, once each (rows of ``row``); ``work`` lists, for each input row,
    the ``k`` rows of ``y`` / ``dy`` it reads (-1 = none), counted from the vertex's own ``y`` region."""

    name = "MaxPoolingGradRows"
    fields = {"x": "in", "y": "in", "dy": "in", "work": "in", "out": "out"}
    code_bytes = 640
    state_bytes = 20

    def _dims(self, group):
        return _row_and_k(self, group)

    def check(self, group):
        row, k = self._dims(group)
        for fname in self.fields:
            if not isinstance(group.fields[fname], Regions):
                raise EmulatorError(f"codelet '{self.name}' in '{group.cs.name}': field '{fname}' must be regions")
        fx, fo = group.fields["x"].sizes, group.fields["out"].sizes
        fy, fdy = group.fields["y"].sizes, group.fields["dy"].sizes
        if (not np.array_equal(fx, fo) or np.any(fo % row) or not np.array_equal(fy, fdy) or np.any(fy % row)
                or not np.array_equal(group.fields["work"].sizes, fo // row * k)):
            raise EmulatorError(f"codelet '{self.name}' in '{group.cs.name}': x/out and y/dy rows of {row}, "
                                f"{k} work-list entries per row of out")
        if group.fields["work"].tensor.dtype != "int32":
            raise EmulatorError(f"codelet '{self.name}' in '{group.cs.name}': field 'work' must be int32")

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
        y = _f32(group.fields["y"].gather(data)).reshape(-1, row)
        dy = _f32(group.fields["dy"].gather(data)).reshape(-1, row)
        work = group.fields["work"].gather(data).astype(np.int64).reshape(-1, k)
        # a vertex's work list counts from its own y / dy region; the gathers concatenate every vertex's
        rows_y = group.fields["y"].sizes // row
        base = np.repeat(np.cumsum(rows_y) - rows_y, group.fields["out"].sizes // row)
        idx = np.where(work >= 0, work + base[:, None], 0)
        hit = (dy[idx] * (x == y[idx])) * (work >= 0)[:, :, None]
        f = group.fields["out"]
        f.scatter(data, hit.sum(1).reshape(-1).astype(DTYPES[f.tensor.dtype], copy=False))


WINDOW_MAX = WindowMax()


WINDOW_SUM = WindowSum()


MAX_POOL_GRAD = MaxPoolGrad()
