"""Quantized models (ONNX Runtime's quantization tool: static QDQ, QOperator, dynamic) emulated as an IPU runs
them: in the run's float precision (fp16 by default) with the weights dequantized when the graph is built.

The IPU's matmul and convolution units (AMP) take fp16 / fp32 operands, so a quantized graph runs there in float:
its integer weights are dequantized once (``DequantizeLinear`` of an initializer is evaluated when the graph is
built) and its quantize / dequantize steps on activations are lowered as poplibs' cast ops would run them, each
a few elementwise ops on the float tensor, which holds the integers exactly (fp16 holds every integer up to
2048):

* ``QuantizeLinear``: ``q = clamp(round(x / s) + zp, qmin, qmax)`` (round to nearest even, saturate to the
  integer type's range, as popops' cast to an integer type); ``DequantizeLinear``: ``(q - zp) s``;
* ``QLinearMatMul`` / ``QLinearConv`` / ``QLinearAdd`` (com.microsoft): dequantize, the float op with the weights
  (and QLinearConv's int32 bias, scale x_s * w_s) dequantized, quantize;
* ``MatMulInteger`` / ``ConvInteger``: ``(a - a_zp) (w - w_zp)`` in float;
* ``DynamicQuantizeLinear``: its scale is computed from the data on the device, which the emulator does not
  do: the value passes on with scale 1 and zero point 0 (so the integer ops after it see the real value), i.e.
  the activations are not rounded to 8 bits.

The run's notes say so (the profile's ``run["notes"]``, shown with the summary), and the numerics check allows
one 8-bit rounding step moved (``QUANT_REL_TOL``)."""

from __future__ import annotations

import numpy as np

from ..loader import OnnxImportError
from .values import Act

# the relative tolerance of a quantized model's outputs: a value at a rounding boundary can land one 8-bit step
# (1/255 of the range) either side in two correct implementations, and dynamic quantization's rounding of the
# activations (done by ONNX Runtime, not emulated) moves each by half a step: 2^-5 of the max (the fp16 bar)
QUANT_REL_TOL = 2.0 ** -5
CONTRIB_OPS = ("QLinearAdd",)  # com.microsoft ops the quantization tool writes in QOperator format
NOTE = ("quantized model emulated as an IPU runs it: in the run's precision with the weights dequantized when the "
        "graph is built; QuantizeLinear / DequantizeLinear of activations as poplibs' casts (round, saturate, "
        "scale){dyn}; the numerics check allows 8-bit rounding ({tol:.3g} of the output's max)")
RANGES = {2: (0, 255), 3: (-128, 127), 4: (0, 65535), 5: (-32768, 32767), 6: (-2 ** 31, 2 ** 31 - 1)}


def _mark(low, dynamic=False):
    """The run's note, once; ``dynamic``: it also says the activations are not rounded."""
    if not low.quantized:
        low.quantized = True
        low.notes.append(NOTE.format(tol=QUANT_REL_TOL, dyn="{dyn}"))
    low.quant_dynamic = getattr(low, "quant_dynamic", False) or dynamic


def finish_notes(low):
    dyn = ("; DynamicQuantizeLinear keeps the real values (its scale comes from the data on the device: the "
           "activations are not rounded to 8 bits)") if getattr(low, "quant_dynamic", False) else ""
    low.notes[:] = [n.replace("{dyn}", dyn) for n in low.notes]


def _scalar(low, node, name, v, what):
    if isinstance(v, Act):
        raise OnnxImportError(f"{low.lm.path}: node '{name}': {node.op_type} with a {what} computed on the device "
                              "is not supported")
    arr = np.asarray(v, np.float64)
    if arr.size != 1:
        raise OnnxImportError(f"{low.lm.path}: node '{name}': {node.op_type} with a per-channel {what} of a device "
                              "tensor is not supported (only of weights)")
    return float(arr.ravel()[0])


def _zp(low, node, name, v):
    """(zero point, integer element type) of a zero-point input (absent: 0, uint8)."""
    if v is None:
        return 0.0, 2
    from onnx import helper

    return _scalar(low, node, name, v, "zero point"), helper.np_dtype_to_tensor_dtype(np.asarray(v).dtype)


def dequantize(q, scale, zp=None, axis=1) -> np.ndarray:
    """The real values of integers ``q`` (per-tensor or per-axis ``scale`` / ``zp``), float32."""
    q = np.asarray(q, np.float64)
    s = np.asarray(scale, np.float64)
    z = np.zeros_like(s) if zp is None else np.asarray(zp, np.float64)
    if s.size > 1:
        shape = [1] * q.ndim
        shape[axis % q.ndim] = s.size
        s, z = s.reshape(shape), z.reshape(shape)
    return ((q - z) * s).astype(np.float32)


def _opt(ins, k):
    return ins[k] if len(ins) > k and ins[k] is not None else None


def quantize_act(low, x, s, zp, elem, name):
    """clamp(round(x / s) + zp, qmin, qmax): the integers, held in the float tensor."""
    from .elementwise import unary_act

    lo, hi = RANGES.get(int(elem), (-128, 127))
    t = unary_act(low, "scale", x, f"{name}/scale", 1.0 / s)
    t = unary_act(low, "round", t, f"{name}/round")
    if zp:
        t = unary_act(low, "add_scalar", t, f"{name}/zero_point", zp)
    t = unary_act(low, "max_scalar", t, f"{name}/saturate_low", float(lo))
    return unary_act(low, "min_scalar", t, name, float(hi))


def dequantize_act(low, q, s, zp, name):
    """(q - zp) s."""
    from .elementwise import unary_act

    if zp:
        q = unary_act(low, "add_scalar", q, f"{name}/zero_point", -zp)
    return unary_act(low, "scale", q, name, s)


def lower_quantize_linear(low, i, node, ins, name):
    _mark(low)
    zp, elem = _zp(low, node, name, _opt(ins, 2))
    low.set_output(node, quantize_act(low, low.data(node, ins), _scalar(low, node, name, ins[1], "scale"), zp, elem,
                                      name))


def lower_dequantize_linear(low, i, node, ins, name):
    _mark(low)
    zp, _ = _zp(low, node, name, _opt(ins, 2))
    low.set_output(node, dequantize_act(low, low.data(node, ins), _scalar(low, node, name, ins[1], "scale"), zp,
                                        name))


def lower_dynamic_quantize_linear(low, i, node, ins, name):
    """DynamicQuantizeLinear: the value passes on, with scale 1 and zero point 0."""
    _mark(low, dynamic=True)
    low.vals[node.output[0]] = low.data(node, ins)
    low.dynamic_quantized.add(id(low.vals[node.output[0]]))
    if len(node.output) > 1 and node.output[1]:
        low.vals[node.output[1]] = np.asarray(1.0, np.float32)
    if len(node.output) > 2 and node.output[2]:
        low.vals[node.output[2]] = np.asarray(0, np.uint8)


def _weight(low, node, k, scale, zp, axis):
    """Input ``k`` (an integer initializer) dequantized, registered as a constant named after it."""
    v = low.vals.get(node.input[k])
    if isinstance(v, Act) or v is None:
        raise OnnxImportError(f"{low.lm.path}: node '{node.name}': {node.op_type} input '{node.input[k]}' must be a "
                              "weight (an initializer)")
    wn = f"{node.input[k]}/dequantized"
    low.vals[wn] = dequantize(v, scale, zp, axis)
    return wn


def _shifted(low, node, ins, k, name):
    """Input k less its zero point (input k + 2 for the integer ops)."""
    from .elementwise import unary_act

    a = ins[k] if isinstance(ins[k], Act) else low.act(node.input[k])
    zp, _ = _zp(low, node, name, _opt(ins, k + 2))
    return unary_act(low, "add_scalar", a, f"{name}/zero_point", -zp) if zp else a


def _incomparable(low, node, ins, out):
    """An integer op on a DynamicQuantizeLinear output holds real values where ONNX Runtime holds integers (until
    the scale multiplies them back): not an intermediate the check can compare."""
    if any(id(v) in low.dynamic_quantized for v in ins if isinstance(v, Act)):
        low.incomparable.add(id(out))


def lower_matmul_integer(low, i, node, ins, name):
    from .matmul import matmul

    _mark(low)
    wn = _weight(low, node, 1, 1.0, _opt(ins, 3), axis=-1)
    low.set_output(node, matmul(low, _shifted(low, node, ins, 0, name), low.vals[wn], name, "", wn))
    _incomparable(low, node, ins, low.vals[node.output[0]])


def _conv(low, i, node, name, x, wn, bias=None):
    """The Conv lowering on a float input and a dequantized weight (a Conv node of the same attributes)."""
    from onnx import helper

    from .conv import lower_conv

    keep = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    names = [node.input[0], wn] + ([f"{wn}/bias"] if bias is not None else [])
    if bias is not None:
        low.vals[f"{wn}/bias"] = bias
    conv = helper.make_node("Conv", names, [node.output[0]], name=node.name, **keep)
    lower_conv(low, i, conv, [x, low.vals[wn]] + ([bias] if bias is not None else []), name)
    return low.vals[node.output[0]]


def lower_conv_integer(low, i, node, ins, name):
    _mark(low)
    wn = _weight(low, node, 1, 1.0, _opt(ins, 3), axis=0)
    _incomparable(low, node, ins, _conv(low, i, node, name, _shifted(low, node, ins, 0, name), wn))


def _dq_input(low, node, ins, k, name):
    zp, _ = _zp(low, node, name, ins[k + 2])
    return dequantize_act(low, low.data(node, ins) if k == 0 else ins[k], _scalar(low, node, name, ins[k + 1],
                                                                                  "scale"), zp, f"{name}/dequantize")


def _q_output(low, node, ins, y, ks, name):
    zp, elem = _zp(low, node, name, _opt(ins, ks + 1))
    low.set_output(node, quantize_act(low, y, _scalar(low, node, name, ins[ks], "scale"), zp, elem, name))


def lower_qlinear_matmul(low, i, node, ins, name):
    from .matmul import matmul

    _mark(low)
    wn = _weight(low, node, 3, ins[4], ins[5], axis=-1)
    y = matmul(low, _dq_input(low, node, ins, 0, name), low.vals[wn], f"{name}/matmul", "", wn)
    _q_output(low, node, ins, y, 6, name)


def lower_qlinear_conv(low, i, node, ins, name):
    _mark(low)
    wn = _weight(low, node, 3, ins[4], ins[5], axis=0)
    b = _opt(ins, 8)
    bias = None if b is None else dequantize(b, np.asarray(ins[1], np.float64) * np.asarray(ins[4], np.float64),
                                             None, axis=0)
    y = _conv(low, i, node, f"{name}/conv", _dq_input(low, node, ins, 0, name), wn, bias)
    _q_output(low, node, ins, y, 6, name)


def lower_qlinear_add(low, i, node, ins, name):
    from .elementwise import binary_op

    _mark(low)
    vals, names = [], []
    for k in (0, 3):
        if isinstance(ins[k], Act):
            zp, _ = _zp(low, node, name, ins[k + 2])
            vals.append(dequantize_act(low, ins[k], _scalar(low, node, name, ins[k + 1], "scale"), zp,
                                       f"{name}/dequantize{k // 3}"))
            names.append("")
        else:
            cn = f"{node.input[k]}/dequantized"
            low.vals[cn] = dequantize(ins[k], ins[k + 1], ins[k + 2])
            vals.append(low.vals[cn])
            names.append(cn)
    y = binary_op(low, "add", node, vals[0], vals[1], f"{name}/add", names[0], names[1])
    _q_output(low, node, ins, y, 6, name)
