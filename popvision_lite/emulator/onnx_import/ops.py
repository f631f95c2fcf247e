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
from popvision_lite.emulator import reference as R
from popvision_lite.emulator.backends.backend import NumpyBackend
from popvision_lite.emulator.backends.planning import PlanOnlyBackend, Shape
from popvision_lite.emulator.codelets.popops import (
    BINARY_CODELETS,
    BINARY_FNS,
    SELECT,
    UNARY_CODELETS,
    UNARY_FNS,
)
from popvision_lite.emulator.models.emulated import EmulatorBackend
from popvision_lite.emulator.ops import basic
from popvision_lite.emulator.ops.context import View
from popvision_lite.emulator.reference import f32 as _f32

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

