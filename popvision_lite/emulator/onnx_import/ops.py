"""Ops the ONNX importer needs beyond the bundled models' vocabulary, on all three backends.

``OnnxNumpyBackend`` / ``OnnxEmulatorBackend`` / ``OnnxPlanBackend`` are the model backends of
``models/`` plus the methods below (same names and arguments on each):

* ``unary(x, kind, name, s=None)``: elementwise ``tanh sigmoid sqrt rsqrt reciprocal erf exp neg
  square abs add_scalar(s) pow_scalar(s) max_scalar(s) min_scalar(s)``;
* ``binary(a, b, kind, name)``: elementwise ``sub div max min pow`` (equal element counts; the
  importer builds broadcast views first);
* ``select(cond, a, b, name)``: ``where(cond != 0, a, b)`` elementwise;
* ``concat(parts, axis, shape, name)``: parts (handles with their logical shapes) joined along
  ``axis`` into a new tensor of logical ``shape`` (row-major).

Cycle costs of the new elementwise codelets are poplibs' popops elementwise estimator figures per
64-bit vector (``estimators.popops.vector_cycles``), on top of the per-vertex set-up every
elementwise codelet without a poplibs vertex estimator has (``fallback_worker_cycles``).
"""

from __future__ import annotations

import numpy as np

from popvision_lite.emulator import programs as P
from popvision_lite.emulator.backends.backend import NumpyBackend
from popvision_lite.emulator.backends.planning import PlanOnlyBackend, Shape
from popvision_lite.emulator.codelets import Elementwise
from popvision_lite.emulator.estimators import popops
from popvision_lite.emulator.models.emulated import EmulatorBackend
from popvision_lite.emulator.ops import basic
from popvision_lite.emulator.ops import library_codelets as _OC
from popvision_lite.emulator.ops import reference as R
from popvision_lite.emulator.ops.context import View
from popvision_lite.emulator.ops.reference import f32 as _f32


def _erf(x):
    """erf in fp32 (Abramowitz & Stegun 7.1.26, |error| < 1.5e-7: below fp16 and fp32 storage
    rounding of the results it feeds)."""
    x = _f32(x)
    s = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t \
        * np.exp(-a * a)
    return (s * y).astype(np.float32)


def _gelu_erf(x):
    x = _f32(x)
    return (0.5 * x * (1.0 + _erf(x / np.float32(np.sqrt(2.0))))).astype(np.float32)


def _gelu_erf_bwd(x, dy):
    x = _f32(x)
    cdf = 0.5 * (1.0 + _erf(x / np.float32(np.sqrt(2.0))))
    pdf = np.exp(-0.5 * x * x) / np.float32(np.sqrt(2.0 * np.pi))
    return (_f32(dy) * (cdf + x * pdf)).astype(np.float32)


def _sigmoid(x):
    x = _f32(x)
    return (0.5 * (1.0 + np.tanh(0.5 * x))).astype(np.float32)


def _softplus(x):
    x = _f32(x)
    return (np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x)))).astype(np.float32)


def _mish(x):
    x = _f32(x)
    return (x * np.tanh(_softplus(x))).astype(np.float32)


def _mish_bwd(x, dy):
    x = _f32(x)
    t = np.tanh(_softplus(x))
    return (_f32(dy) * (t + x * _sigmoid(x) * (1 - t * t))).astype(np.float32)


def _elu(x, s):  # s: alpha
    x = _f32(x)
    return np.where(x > 0, x, s * np.expm1(np.minimum(x, 0))).astype(np.float32)


def _celu(x, s):  # s: alpha
    x = _f32(x)
    return (np.maximum(x, 0) + np.minimum(0, s * np.expm1(np.minimum(x, 0) / s))).astype(np.float32)


def _log(x):
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.log(_f32(x))


def _pow(a, b):
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.power(_f32(a), _f32(b))


UNARY_FNS = {
    "tanh": lambda x: np.tanh(_f32(x)),
    "sigmoid": _sigmoid,
    "sqrt": lambda x: np.sqrt(np.maximum(_f32(x), 0)),
    "rsqrt": lambda x: 1.0 / np.sqrt(np.maximum(_f32(x), 0)),
    "reciprocal": lambda x: 1.0 / _f32(x),
    "erf": _erf,
    "gelu_erf": _gelu_erf,
    "exp": lambda x: np.exp(_f32(x)),
    "neg": lambda x: -_f32(x),
    "square": lambda x: _f32(x) * _f32(x),
    "abs": lambda x: np.abs(_f32(x)),
    "add_scalar": lambda x, s: _f32(x) + s,
    "pow_scalar": lambda x, s: _pow(x, s),
    "max_scalar": lambda x, s: np.maximum(_f32(x), s),
    "min_scalar": lambda x, s: np.minimum(_f32(x), s),
    "hard_sigmoid": lambda x: np.clip(_f32(x) * np.float32(1 / 6) + np.float32(0.5), 0, 1),
    "hard_swish": lambda x: _f32(x) * np.clip(_f32(x) * np.float32(1 / 6) + np.float32(0.5), 0, 1),
    "gt_scalar": lambda x, s: (_f32(x) > s).astype(np.float32),
    "lt_scalar": lambda x, s: (_f32(x) < s).astype(np.float32),
    "isnan": lambda x: np.isnan(_f32(x)).astype(np.float32),
    "isinf": lambda x: np.isinf(_f32(x)).astype(np.float32),
    "log": _log,
    "round": lambda x: np.rint(_f32(x)),
    "softplus": _softplus,
    "softsign": lambda x: _f32(x) / (1 + np.abs(_f32(x))),
    "mish": _mish,
    "elu_scalar": _elu,
    "celu_scalar": _celu,
    "thresholded_relu_scalar": lambda x, s: np.where(_f32(x) > s, _f32(x), 0).astype(np.float32),
}
BINARY_FNS = {
    "sub": lambda a, b: _f32(a) - _f32(b),
    "div": lambda a, b: _f32(a) / _f32(b),
    "max": lambda a, b: np.maximum(_f32(a), _f32(b)),
    "min": lambda a, b: np.minimum(_f32(a), _f32(b)),
    "pow": _pow,
    "gelu_erf_bwd": _gelu_erf_bwd,
    "hard_sigmoid_bwd": lambda x, dy: _f32(dy) * ((_f32(x) > -3) & (_f32(x) < 3)) / np.float32(6),
    "hard_swish_bwd": lambda x, dy: _f32(dy) * np.where(_f32(x) <= -3, 0, np.where(_f32(x) >= 3, 1,
                                                                                      _f32(x) / 3 + 0.5)),
    "softplus_bwd": lambda x, dy: _f32(dy) * _sigmoid(x),
    "softsign_bwd": lambda x, dy: _f32(dy) / np.square(1 + np.abs(_f32(x))),
    "mish_bwd": _mish_bwd,
}

FLOPS = {"softplus": 8, "softsign": 3, "mish": 14, "elu_scalar": 6, "celu_scalar": 8, "thresholded_relu_scalar": 2,
         "log": 4, "softplus_bwd": 10, "softsign_bwd": 5, "mish_bwd": 30, "hard_sigmoid": 4, "hard_swish": 5, "gelu_erf": 12, "gelu_erf_bwd": 18, "erf": 12, "tanh": 8, "sigmoid": 8, "exp": 4, "pow_scalar": 8, "pow": 8, "sqrt": 4, "rsqrt": 4,
         "reciprocal": 4, "div": 4}


# ops whose cost is the op library's own codelet cost model (emulator/codelets.py ``model``), taken
# from the library's codelet objects so the two stay equal when that model changes: the exact GELU is
# costed as the library's GELU / GeluGrad (popnn NonLinearity1D / NonLinearityGrad1D)
LIBRARY_MODELS = {"gelu_erf": _OC.GELU.model, "gelu_erf_bwd": _OC.GELU_BWD.model}


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
SELECT = PopopsElementwise("select", lambda c, a, b: np.where(_f32(c) != 0, _f32(a), _f32(b)), ("c", "a", "b"))


TYPE_NAMES = {"gelu_erf": "gelu", "gelu_erf_bwd": "gelu_bwd", "elu_scalar": "elu", "celu_scalar": "celu",
              "thresholded_relu_scalar": "thresholded_relu"}  # op types in the profile


def _check_kind(kind, table, what):
    if kind not in table:
        raise ValueError(f"{what} kind {kind!r}: expected one of {', '.join(sorted(table))}")


def concat_index(shapes, axis):
    """For parts of ``shapes`` joined on ``axis``: per part, the flat positions of its elements in
    the result (row-major), in the part's own row-major order."""
    total = sum(s[axis] for s in shapes)
    out_shape = list(shapes[0])
    out_shape[axis] = total
    full = np.arange(int(np.prod(out_shape)), dtype=np.int64).reshape(out_shape)
    res, off = [], 0
    for s in shapes:
        sl = [slice(None)] * len(out_shape)
        sl[axis] = slice(off, off + s[axis])
        res.append(full[tuple(sl)].ravel())
        off += s[axis]
    return res, tuple(out_shape)


# ============================================================================ backends


class _NumpyOnnx:
    # elementwise operands may hold the same elements in different shapes (the emulator only
    # needs equal element counts): reshape to the first operand's shape
    def add(self, a, b, name):
        va = self._val(a)
        return self._out(name, "add", _f32(va) + _f32(self._val(b)).reshape(va.shape))

    def mul(self, a, b, name):
        va = self._val(a)
        return self._out(name, "mul", _f32(va) * _f32(self._val(b)).reshape(va.shape))

    def unary(self, x, kind, name, s=None):
        _check_kind(kind, UNARY_FNS, "unary")
        fn = UNARY_FNS[kind]
        v = self._val(x)
        return self._out(name, TYPE_NAMES.get(kind, kind), fn(v, np.float32(s)) if kind.endswith("_scalar") else fn(v))

    def binary(self, a, b, kind, name):
        _check_kind(kind, BINARY_FNS, "binary")
        va, vb = self._val(a), self._val(b)
        return self._out(name, kind, BINARY_FNS[kind](va, vb.reshape(va.shape)))

    def select(self, cond, a, b, name):
        va = self._val(a)
        return self._out(name, "select", np.where(_f32(self._val(cond)).reshape(va.shape) != 0, _f32(va),
                                                  _f32(self._val(b)).reshape(va.shape)))

    def concat(self, parts, axis, shape, name):
        shapes = [tuple(s) for _, s in parts]
        pos, out_shape = concat_index(shapes, axis)
        out = np.zeros(int(np.prod(out_shape)), np.float32)
        for (h, _), p in zip(parts, pos, strict=True):
            out[p] = _f32(self._val(h)).ravel()
        return self._out(name, "concat", out.reshape(shape))


    def layer_norm(self, x, gamma, beta, name, eps=None):
        return self._out(name, "layer_norm", R.layer_norm(self._val(x), self._val(gamma), self._val(beta),
                                                          R.LN_EPS if eps is None else eps))

    def layer_norm_bwd(self, x, gamma, dy, name, eps=None):
        dx, dg, db = R.layer_norm_bwd(self._val(x), self._val(gamma), self._val(dy), R.LN_EPS if eps is None else eps)
        return (self._out(name + "/dx", "layer_norm_bwd", dx), self._out(name + "/dgamma", "layer_norm_bwd", dg),
                self._out(name + "/dbeta", "layer_norm_bwd", db))


class _EmulatorOnnx:
    # the model's layer-norm epsilon (ONNX LayerNormalization / the exporters' decomposed pattern)
    def layer_norm(self, x, gamma, beta, name, eps=None):
        return self._op(basic.layer_norm, x, gamma, beta, self.qual(name), eps)

    def layer_norm_bwd(self, x, gamma, dy, name, eps=None):
        return self._op(basic.layer_norm_bwd, x, gamma, dy, self.qual(name), eps)

    def unary(self, x, kind, name, s=None):
        _check_kind(kind, UNARY_FNS, "unary")
        params = {"s": np.float32(s)} if kind.endswith("_scalar") else None
        return self._op(basic.elementwise, UNARY_CODELETS[kind], {"in": x}, self.qual(name), TYPE_NAMES.get(kind, kind),
                        params)

    def binary(self, a, b, kind, name):
        _check_kind(kind, BINARY_FNS, "binary")
        return self._op(basic.elementwise, BINARY_CODELETS[kind], {"a": a, "b": b}, self.qual(name),
                        TYPE_NAMES.get(kind, kind))

    def select(self, cond, a, b, name):
        # the output follows the first operand that is a tensor: put the data operand first
        return self._op(basic.elementwise, SELECT, {"a": a, "c": cond, "b": b}, self.qual(name), "select")

    def concat(self, parts, axis, shape, name):
        self._sync()
        ctx = self.ctx
        shapes = [tuple(s) for _, s in parts]
        pos, out_shape = concat_index(shapes, axis)
        size = int(np.prod(out_shape))
        nb = sum(basic._nbytes(h) for h, _ in parts)
        op = ctx.begin_op(self.qual(name), "concat", plan=f"{len(parts)} parts copied into {size} elements",
                          min_bytes=2 * nb)
        out = ctx.variable(op, tuple(shape), ctx.dtype, mapping=ctx.linear_mapping(size), op=op)
        for i, ((h, _), p) in enumerate(zip(parts, pos, strict=True)):
            src = basic._copy_src(h) if isinstance(h, View) else h.whole()
            ctx.add(P.Copy(src, basic.flat_view(out, p), name=f"{op}/part{i}", op=op))
        return out


class _PlanOnnx:
    def layer_norm(self, x, gamma, beta, name, eps=None):  # eps changes no plan
        return super().layer_norm(x, gamma, beta, name)

    def layer_norm_bwd(self, x, gamma, dy, name, eps=None):
        return super().layer_norm_bwd(x, gamma, dy, name)

    def mul(self, a, b, name):  # PlanOnlyBackend records mul as "add"; the importer's tables say "mul"
        return self._ew(a, name, "mul")

    def unary(self, x, kind, name, s=None):
        return self._ew(x, name, TYPE_NAMES.get(kind, kind))

    def binary(self, a, b, kind, name):
        return self._ew(a, name, TYPE_NAMES.get(kind, kind))

    def select(self, cond, a, b, name):
        return self._ew(a, name, "select")

    def concat(self, parts, axis, shape, name):
        return self._ew(Shape(shape, self.dtype), name, "concat")


class OnnxNumpyBackend(_NumpyOnnx, NumpyBackend):
    pass


class OnnxEmulatorBackend(_EmulatorOnnx, EmulatorBackend):
    pass


class OnnxPlanBackend(_PlanOnnx, PlanOnlyBackend):
    pass

