"""popops codelets: the elementwise vertices (BinaryOp1D / UnaryOp1D / Cast / Fill / ScaledAdd), the ReduceAdd
of a ConvReduce, and the ONNX importer's extra elementwise codelets (named ``Onnx`` + the kind), each costed by
popops' per-vector table for the storage dtype, except the exact GELU pair, which borrows the library's popnn GELU
cost model (``LIBRARY_MODELS``; vertex_types.py files those two under popnn).  Row passes and reductions are in
popops_rows.py."""

from __future__ import annotations

import numpy as np

from popvision_lite.emulator.codelets import base as C
from popvision_lite.emulator.codelets import popnn as NN
from popvision_lite.emulator.codelets.base import Codelet, Elementwise, _expand, _f32, binary, unary
from popvision_lite.emulator.estimators import popops
from popvision_lite.emulator.estimators.popops import strided_reduce_cycles
from popvision_lite.emulator.graph import DTYPES, Blocks
from popvision_lite.emulator.reference import f32 as _ref_f32
from popvision_lite.errors import EmulatorError

# Binary ops: popops BinaryOp1D (see estimators.popops.binary_op_worker_cycles).
ADD = binary("Add", np.add, model=("binary", "add"))


SUB = binary("Sub", np.subtract, model=("binary", "sub"))


MUL = binary("Mul", np.multiply, model=("binary", "mul"))


MAX = binary("Max", np.maximum, model=("binary", "max"))


# out += in (inout 'out', in 'in'): popops BinaryOp1DInPlace ADD (getBinaryOp1DInPlaceEstimate)
ADD_INPLACE = Elementwise("AddInPlace", np.add, inputs=("in",), inplace=True,
                          model=("binary_inplace", "add"))


# Unary ops: popops UnaryOp1D (see estimators.popops.unary_op_worker_cycles).
RELU = unary("Relu", lambda x: np.maximum(x, 0), model=("unary", "relu"))


NEG = unary("Neg", np.negative, model=("unary", "neg"))


# A copy of a region on its tile: the same-size cast path (64-bit load/store per vector).
COPY = unary("Copy", lambda x: x, flops_per_element=0, model=("cast",))


CAST = unary("Cast", lambda x: x, flops_per_element=0, model=("cast",))


EXP = unary("Exp", np.exp, flops_per_element=4, model=("unary", "exp"))


# x * scalar: popops BinaryOp1D MULTIPLY with a broadcast scalar operand (same inner loop)
SCALE = unary("Scale", lambda x, scale: x * scale, params=("scale",), model=("binary", "mul"))


FILL = Elementwise("Fill", lambda value: value, inputs=(), flops_per_element=0,
                   params=("value",), code_bytes=128, model=("fill",))


def _fill_compute(group, data):
    out = group.fields["out"]
    vals = np.broadcast_to(_expand(group.params["value"], out.sizes), (int(out.sizes.sum()),))
    out.scatter(data, vals.astype(DTYPES[out.tensor.dtype]))


class ReduceAdd(Codelet):
    """out = sum over the first block axis of ``in`` (partials (k, ...) -> (...)); fp32 accumulation."""

    name = "ReduceAdd"
    fields = {"in": "in", "out": "out"}
    code_bytes = 512
    state_bytes = 8

    def _shape(self, group):
        fi, fo = group.fields["in"], group.fields["out"]
        if not isinstance(fi, Blocks) or not isinstance(fo, Blocks):
            raise EmulatorError(f"codelet '{self.name}' in '{group.cs.name}': fields must be tensor.blocks(...)")
        k = fi.block_shape[0]
        if fi.block_elems != k * fo.block_elems:
            raise EmulatorError(
                f"codelet '{self.name}' in '{group.cs.name}': 'in' block {fi.block_shape} is not k x 'out' block "
                f"{fo.block_shape}; fix: in block (k, *out block)"
            )
        return k, fo.block_elems

    def check(self, group):
        self._shape(group)

    def cycles(self, group, target):
        k, m = self._shape(group)
        # popops strided reduce (getCyclesEstimateForStridedReduce): k partials of m outputs
        c = strided_reduce_cycles(k, m, group.fields["in"].tensor.itemsize, group.fields["out"].tensor.itemsize)
        return np.full(group.n, int(c), np.int64)

    def flops(self, group):
        k, m = self._shape(group)
        return int((k - 1) * m * group.n)

    def compute(self, group, data):
        k, m = self._shape(group)
        x = group.fields["in"].gather(data).reshape(group.n, k, m)
        res = x.sum(axis=1, dtype=np.float32)
        out = group.fields["out"]
        out.scatter(data, res.reshape((group.n, *out.block_shape)).astype(DTYPES[out.tensor.dtype], copy=False))


REDUCE_ADD = ReduceAdd()


# out = scale * (a - b): MSE gradient = popops BinaryOp SUBTRACT then MULTIPLY by a scalar
SCALED_SUB = C.binary("ScaledSub", lambda a, b, scale: (_f32(a) - _f32(b)) * scale, flops_per_element=2,
                      params=("scale",), model=("composite", [("binary", "sub"), ("binary", "mul")]))


# w -= lr * g in place (out = w is inout): popops ScaledSubtractSupervisor
SGD = C.Elementwise("SgdUpdate", lambda w, g, lr: _f32(w) - lr * _f32(g), inputs=("in",), flops_per_element=2,
                    params=("lr",), inplace=True, model=("scaled_add",))


def _erf(x):
    """erf in fp32 (Abramowitz & Stegun 7.1.26, |error| < 1.5e-7: below fp16 and fp32 storage
    rounding of the results it feeds)."""
    x = _ref_f32(x)
    s = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t \
        * np.exp(-a * a)
    return (s * y).astype(np.float32)


def _gelu_erf(x):
    x = _ref_f32(x)
    return (0.5 * x * (1.0 + _erf(x / np.float32(np.sqrt(2.0))))).astype(np.float32)


def _gelu_erf_bwd(x, dy):
    x = _ref_f32(x)
    cdf = 0.5 * (1.0 + _erf(x / np.float32(np.sqrt(2.0))))
    pdf = np.exp(-0.5 * x * x) / np.float32(np.sqrt(2.0 * np.pi))
    return (_ref_f32(dy) * (cdf + x * pdf)).astype(np.float32)


def _sigmoid(x):
    x = _ref_f32(x)
    return (0.5 * (1.0 + np.tanh(0.5 * x))).astype(np.float32)


def _softplus(x):
    x = _ref_f32(x)
    return (np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x)))).astype(np.float32)


def _mish(x):
    x = _ref_f32(x)
    return (x * np.tanh(_softplus(x))).astype(np.float32)


def _mish_bwd(x, dy):
    x = _ref_f32(x)
    t = np.tanh(_softplus(x))
    return (_ref_f32(dy) * (t + x * _sigmoid(x) * (1 - t * t))).astype(np.float32)


def _elu(x, s):  # s: alpha
    x = _ref_f32(x)
    return np.where(x > 0, x, s * np.expm1(np.minimum(x, 0))).astype(np.float32)


def _celu(x, s):  # s: alpha
    x = _ref_f32(x)
    return (np.maximum(x, 0) + np.minimum(0, s * np.expm1(np.minimum(x, 0) / s))).astype(np.float32)


def _log(x):
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.log(_ref_f32(x))


def _pow(a, b):
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.power(_ref_f32(a), _ref_f32(b))


UNARY_FNS = {
    "tanh": lambda x: np.tanh(_ref_f32(x)),
    "sigmoid": _sigmoid,
    "sqrt": lambda x: np.sqrt(np.maximum(_ref_f32(x), 0)),
    "rsqrt": lambda x: 1.0 / np.sqrt(np.maximum(_ref_f32(x), 0)),
    "reciprocal": lambda x: 1.0 / _ref_f32(x),
    "erf": _erf,
    "gelu_erf": _gelu_erf,
    "exp": lambda x: np.exp(_ref_f32(x)),
    "neg": lambda x: -_ref_f32(x),
    "square": lambda x: _ref_f32(x) * _ref_f32(x),
    "abs": lambda x: np.abs(_ref_f32(x)),
    "add_scalar": lambda x, s: _ref_f32(x) + s,
    "pow_scalar": lambda x, s: _pow(x, s),
    "max_scalar": lambda x, s: np.maximum(_ref_f32(x), s),
    "min_scalar": lambda x, s: np.minimum(_ref_f32(x), s),
    "hard_sigmoid": lambda x: np.clip(_ref_f32(x) * np.float32(1 / 6) + np.float32(0.5), 0, 1),
    "hard_swish": lambda x: _ref_f32(x) * np.clip(_ref_f32(x) * np.float32(1 / 6) + np.float32(0.5), 0, 1),
    "gt_scalar": lambda x, s: (_ref_f32(x) > s).astype(np.float32),
    "lt_scalar": lambda x, s: (_ref_f32(x) < s).astype(np.float32),
    "isnan": lambda x: np.isnan(_ref_f32(x)).astype(np.float32),
    "isinf": lambda x: np.isinf(_ref_f32(x)).astype(np.float32),
    "log": _log,
    "round": lambda x: np.rint(_ref_f32(x)),
    "softplus": _softplus,
    "softsign": lambda x: _ref_f32(x) / (1 + np.abs(_ref_f32(x))),
    "mish": _mish,
    "elu_scalar": _elu,
    "celu_scalar": _celu,
    "thresholded_relu_scalar": lambda x, s: np.where(_ref_f32(x) > s, _ref_f32(x), 0).astype(np.float32),
}


BINARY_FNS = {
    "sub": lambda a, b: _ref_f32(a) - _ref_f32(b),
    "div": lambda a, b: _ref_f32(a) / _ref_f32(b),
    "max": lambda a, b: np.maximum(_ref_f32(a), _ref_f32(b)),
    "min": lambda a, b: np.minimum(_ref_f32(a), _ref_f32(b)),
    "pow": _pow,
    "gelu_erf_bwd": _gelu_erf_bwd,
    "hard_sigmoid_bwd": lambda x, dy: _ref_f32(dy) * ((_ref_f32(x) > -3) & (_ref_f32(x) < 3)) / np.float32(6),
    "hard_swish_bwd": lambda x, dy: _ref_f32(dy) * np.where(_ref_f32(x) <= -3, 0, np.where(_ref_f32(x) >= 3, 1,
                                                                                      _ref_f32(x) / 3 + 0.5)),
    "softplus_bwd": lambda x, dy: _ref_f32(dy) * _sigmoid(x),
    "softsign_bwd": lambda x, dy: _ref_f32(dy) / np.square(1 + np.abs(_ref_f32(x))),
    "mish_bwd": _mish_bwd,
}


FLOPS = {"softplus": 8, "softsign": 3, "mish": 14, "elu_scalar": 6, "celu_scalar": 8, "thresholded_relu_scalar": 2,
         "log": 4, "softplus_bwd": 10, "softsign_bwd": 5, "mish_bwd": 30, "hard_sigmoid": 4, "hard_swish": 5, "gelu_erf": 12, "gelu_erf_bwd": 18, "erf": 12, "tanh": 8, "sigmoid": 8, "exp": 4, "pow_scalar": 8, "pow": 8, "sqrt": 4, "rsqrt": 4,
         "reciprocal": 4, "div": 4}


# ops whose cost is the op library's own codelet cost model (codelets/base.py ``model``), taken
# from the library's codelet objects so the two stay equal when that model changes: the exact GELU is
# costed as the library's GELU / GeluGrad (popnn NonLinearity1D / NonLinearityGrad1D)
LIBRARY_MODELS = {"gelu_erf": NN.GELU.model, "gelu_erf_bwd": NN.GELU_BWD.model}


class PopopsElementwise(Elementwise):
    """Elementwise codelet whose cycles per vector depend on the storage dtype (fp16 / fp32); the kinds in
    LIBRARY_MODELS use the op library's cost model instead."""

    def __init__(self, kind, fn, inputs, params=()):
        super().__init__(f"Onnx{kind.title().replace('_', '')}", fn, inputs, flops_per_element=FLOPS.get(kind, 1),
                         params=params, model=LIBRARY_MODELS.get(kind))
        self.kind = kind

    def cycles(self, group, target):
        if self.model is not None:
            return super().cycles(group, target)
        out = group.fields["out"]
        per = popops.vector_cycles(self.kind, out.tensor.itemsize)
        return popops.fallback_worker_cycles(out.sizes, out.tensor.itemsize, per)


UNARY_CODELETS = {k: PopopsElementwise(k, f, ("in",), params=("s",) if k.endswith("_scalar") else ())
                  for k, f in UNARY_FNS.items()}


BINARY_CODELETS = {k: PopopsElementwise(k, f, ("a", "b")) for k, f in BINARY_FNS.items()}


SELECT = PopopsElementwise("select", lambda c, a, b: np.where(_ref_f32(c) != 0, _ref_f32(a), _ref_f32(b)), ("c", "a", "b"))
FILL.compute = _fill_compute
