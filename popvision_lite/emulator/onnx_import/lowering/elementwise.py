"""Elementwise lowerings: one-input ops (popops' unary ops, relu, gelu, clamps) and two-input ops with
ONNX broadcasting (a one-element constant becomes a scalar op), with their backward passes."""

from __future__ import annotations

import numpy as np

from popvision_lite.emulator.ops.context import View

from ..loader import OnnxImportError
from .values import Act, attrs, canon
from .views import lower_identity


def unary(kind):
    """Lowering of a one-input elementwise op of ``kind`` (popops' unary op, or relu / gelu)."""
    def lower(low, i, node, ins, name):
        low.set_output(node, unary_act(low, kind, ins[0], name))
    lower.__name__ = f"lower_{kind}"
    return lower


def unary_act(low, kind, a, name, s=None):
    be = low.be
    if kind == "relu":
        h = be.relu(a.h, name)
    elif kind == "gelu":
        h = be.gelu(a.h, name)
    elif kind == "scale":
        h = be.scale(a.h, s, name)
    else:
        h = be.unary(a.h, kind, name, s=s)
    out = Act(h, a.shape, a.nhwc)
    if low.training and kind in ("isnan", "isinf", "gt_scalar", "lt_scalar"):  # a mask: no gradient flows through it
        return out
    if low.training:
        bn = name + "/bwd"
        if kind == "relu":
            g = lambda dy: be.relu_bwd(a.h, dy, bn)  # noqa: E731
        elif kind == "gelu":
            g = lambda dy: be.gelu_bwd(a.h, dy, bn)  # noqa: E731
        elif kind == "gelu_erf":
            g = lambda dy: be.binary(a.h, dy, "gelu_erf_bwd", bn)  # noqa: E731
        elif kind == "pow_scalar":  # dy s x^(s-1)
            g = lambda dy: be.mul(be.scale(be.unary(a.h, "pow_scalar", bn + "/pow", s=s - 1.0), s,  # noqa: E731
                                           bn + "/scale"), dy, bn)
        elif kind == "sqrt":  # dy 0.5 / y
            g = lambda dy: be.mul(be.scale(be.unary(h, "reciprocal", bn + "/inv"), 0.5, bn + "/half"), dy, bn)  # noqa: E731
        elif kind == "reciprocal":  # -dy y^2
            g = lambda dy: be.mul(be.unary(be.mul(h, h, bn + "/y2"), "neg", bn + "/neg"), dy, bn)  # noqa: E731
        elif kind == "exp":
            g = lambda dy: be.mul(h, dy, bn)  # noqa: E731
        elif kind == "scale":
            g = lambda dy: be.scale(dy, s, bn)  # noqa: E731
        elif kind in ("hard_sigmoid", "hard_swish", "softplus", "softsign", "mish"):
            g = lambda dy: be.binary(a.h, dy, kind + "_bwd", bn)  # noqa: E731
        elif kind == "log":  # dy / x
            g = lambda dy: be.binary(dy, a.h, "div", bn)  # noqa: E731
        elif kind == "elu_scalar":  # dy where x > 0, else dy (y + alpha)
            g = lambda dy: be.select(be.unary(a.h, "gt_scalar", bn + "/mask", s=0.0), dy, be.mul(  # noqa: E731
                dy, be.unary(h, "add_scalar", bn + "/y_alpha", s=s), bn + "/neg_side"), bn)
        elif kind == "celu_scalar":  # dy where x > 0, else dy (y / alpha + 1)
            g = lambda dy: be.select(be.unary(a.h, "gt_scalar", bn + "/mask", s=0.0), dy, be.mul(  # noqa: E731
                dy, be.unary(be.scale(h, 1.0 / s, bn + "/y_over_alpha"), "add_scalar", bn + "/plus_one", s=1.0),
                bn + "/neg_side"), bn)
        elif kind == "thresholded_relu_scalar":  # dy where x > alpha
            g = lambda dy: be.mul(be.unary(a.h, "gt_scalar", bn + "/mask", s=s), dy, bn)  # noqa: E731
        elif kind == "add_scalar":
            g = lambda dy: dy  # noqa: E731
        elif kind in ("max_scalar", "min_scalar"):  # dy where x passed (x > s for max, x < s for min)
            cmp = "gt_scalar" if kind == "max_scalar" else "lt_scalar"
            g = lambda dy: be.mul(be.unary(a.h, cmp, bn + "/mask", s=s), dy, bn)  # noqa: E731
        elif kind == "neg":
            g = lambda dy: be.unary(dy, "neg", bn)  # noqa: E731
        elif kind == "square":
            g = lambda dy: be.mul(be.scale(a.h, 2.0, bn + "/2x"), dy, bn)  # noqa: E731
        elif kind == "tanh":  # dy (1 - y^2)
            g = lambda dy: be.mul(be.unary(be.unary(be.mul(h, h, bn + "/y2"), "neg", bn + "/neg"),  # noqa: E731
                                           "add_scalar", bn + "/one_minus", s=1.0), dy, bn)
        elif kind == "sigmoid":  # dy y (1 - y)
            g = lambda dy: be.mul(be.mul(h, be.unary(be.unary(h, "neg", bn + "/neg"), "add_scalar",  # noqa: E731
                                                      bn + "/one_minus", s=1.0), bn + "/y1y"), dy, bn)
        else:
            g = None
        if g is None and id(a) in low.rg:
            low.no_backward(f"elementwise '{kind}'", name)
        if g is not None:
            low.rec(out, [a], lambda dy: [(a, lambda: g(dy))])
    return out


def unary_with(kind, attr, default):
    """Lowering of a one-input op with one scalar attribute (Elu / Celu / ThresholdedRelu's ``alpha``)."""
    def lower(low, i, node, ins, name):
        s = float(attrs(node).get(attr, default))
        if kind == "celu_scalar" and s == 0.0:
            raise OnnxImportError(f"{low.lm.path}: node '{name}': Celu with alpha 0 is undefined (x / alpha)")
        low.set_output(node, unary_act(low, kind, low.data(node, ins), name, s))
    lower.__name__ = f"lower_{kind}"
    return lower


def lower_selu(low, i, node, ins, name):
    """gamma x (x > 0), gamma alpha (e^x - 1) (x <= 0): the ELU of alpha, scaled by gamma."""
    at = attrs(node)
    alpha, gamma = float(at.get("alpha", 1.67326319217681884765625)), float(at.get("gamma", 1.05070102214813232421875))
    y = unary_act(low, "elu_scalar", low.data(node, ins), name + "/elu", alpha)
    low.set_output(node, unary_act(low, "scale", y, name, gamma))


def lower_prelu(low, i, node, ins, name):
    """x (x >= 0), slope x (x < 0), the slope broadcast (a weight, per channel): max(x, 0) + slope min(x, 0),
    so the slope's gradient is the broadcast's reduction."""
    x = low.data(node, ins)
    pos = unary_act(low, "max_scalar", x, name + "/pos", 0.0)
    neg = unary_act(low, "min_scalar", x, name + "/neg", 0.0)
    scaled = binary_op(low, "mul", node, neg, ins[1], name + "/slope", "", node.input[1])
    low.set_output(node, binary_op(low, "add", node, pos, scaled, name, "", ""))


def lower_compare(low, i, node, ins, name):
    """Greater / Less of a device tensor and a one-element constant (either side): a 0 / 1 mask (popops' GREATER
    THAN / LESS THAN with a scalar), e.g. Mamba's softplus threshold ``where(x > 20, x, softplus(x))``."""
    a, b = ins
    op = node.op_type
    if isinstance(a, Act) and scalar(b) is not None:
        x, s, kind = a, scalar(b), "gt_scalar" if op == "Greater" else "lt_scalar"
    elif isinstance(b, Act) and scalar(a) is not None:  # s > x is x < s
        x, s, kind = b, scalar(a), "lt_scalar" if op == "Greater" else "gt_scalar"
    else:
        raise OnnxImportError(f"{low.lm.path}: node '{name}': {op} of two device tensors is not supported (only "
                              "against a one-element constant); instead: compare with a constant threshold")
    low.set_output(node, unary_act(low, kind, x, name, s))


def lower_is_inf(low, i, node, ins, name):
    at = attrs(node)
    if (at.get("detect_negative", 1), at.get("detect_positive", 1)) != (1, 1):
        raise OnnxImportError(f"{low.lm.path}: node '{name}': IsInf with detect_negative "
                              f"{at.get('detect_negative', 1)} / detect_positive {at.get('detect_positive', 1)}"
                              " cannot be honoured (the op library's IS_INF detects both signs)")
    low.set_output(node, unary_act(low, "isinf", low.data(node, ins), name))


def lower_hard_sigmoid(low, i, node, ins, name):
    at = attrs(node)
    alpha, beta = float(at.get("alpha", 0.2)), float(at.get("beta", 0.5))
    if abs(alpha - 1 / 6) < 1e-7 and beta == 0.5:  # torch's hardsigmoid: one fused elementwise op
        low.set_output(node, unary_act(low, "hard_sigmoid", low.data(node, ins), name))
        return
    low.set_output(node, hard_sigmoid_chain(low, low.data(node, ins), alpha, beta, name))


def hard_sigmoid_chain(low, a, alpha, beta, name):
    """max(0, min(1, alpha x + beta)): popops' scaled add, then clamps (one elementwise op each)."""
    t = unary_act(low, "scale", a, name + "/scale", alpha)
    t = unary_act(low, "add_scalar", t, name + "/shift", beta)
    t = unary_act(low, "max_scalar", t, name + "/max", 0.0)
    return unary_act(low, "min_scalar", t, name, 1.0)


def lower_hard_swish(low, i, node, ins, name):
    low.set_output(node, unary_act(low, "hard_swish", low.data(node, ins), name))


def lower_clip(low, i, node, ins, name):
    a = low.data(node, ins)
    at = attrs(node)
    bounds = [ins[1] if len(ins) > 1 else at.get("min"), ins[2] if len(ins) > 2 else at.get("max")]
    if any(isinstance(b, Act) for b in bounds):
        raise OnnxImportError(f"{low.lm.path}: node '{name}': Clip with bounds computed on the device is not "
                              "supported (they must be known when the graph is built)")
    lo, hi = (None if b is None or np.size(b) == 0 else float(np.asarray(b).ravel()[0]) for b in bounds)
    if lo is None and hi is None:
        return lower_identity(low, i, node, [a], name)
    y = a
    if lo is not None:
        y = unary_act(low, "max_scalar", y, name + ("/min" if hi is not None else ""), lo)
    if hi is not None:
        y = unary_act(low, "min_scalar", y, name, hi)
    low.set_output(node, y)
    return None


def lower_leaky_relu(low, i, node, ins, name):
    a = low.data(node, ins)
    alpha = float(attrs(node).get("alpha", 0.01))
    t = unary_act(low, "scale", a, name + "/alpha", alpha)
    low.set_output(node, binary_op(low, "max" if alpha <= 1.0 else "min", node, a, t, name, node.input[0], ""))


def lower_gelu(low, i, node, ins, name):
    approx = attrs(node).get("approximate", b"none")
    approx = approx.decode() if isinstance(approx, bytes) else str(approx)
    low.set_output(node, unary_act(low, "gelu" if approx == "tanh" else "gelu_erf", ins[0], name))


def scalar(v):
    if isinstance(v, Act) or v is None:
        return None
    arr = np.asarray(v)
    return float(arr.ravel()[0]) if arr.size == 1 else None


def binary_op(low, kind, node, a, b, name, a_name, b_name):
    """Elementwise binary with ONNX broadcasting; constants of one element become scalars."""
    be = low.be
    sa = a.shape if isinstance(a, Act) else np.shape(a)
    sb = b.shape if isinstance(b, Act) else np.shape(b)
    out_shape = tuple(int(x) for x in np.broadcast_shapes(tuple(sa), tuple(sb)))
    s = scalar(b)
    if s is not None and isinstance(a, Act) and a.shape == out_shape:
        if kind == "add":
            return unary_act(low, "add_scalar", a, name, s)
        if kind == "sub":
            return unary_act(low, "add_scalar", a, name, -s)
        if kind == "mul":
            return unary_act(low, "scale", a, name, s)
        if kind == "div" and s != 0:
            return unary_act(low, "scale", a, name, 1.0 / s)
        if kind == "pow":
            if s == 1.0:
                return a
            k = {2.0: "square", 0.5: "sqrt", -1.0: "reciprocal"}.get(s, "pow_scalar")
            return unary_act(low, k, a, name, s if k == "pow_scalar" else None)
        if kind in ("max", "min"):
            return unary_act(low, f"{kind}_scalar", a, name, s)
    s = scalar(a)
    if s is not None and isinstance(b, Act) and b.shape == out_shape:
        if kind in ("add", "mul", "max", "min"):
            return binary_op(low, kind, node, b, a, name, b_name, a_name)
        if kind == "sub":
            t = unary_act(low, "neg", b, name + "/neg")
            return unary_act(low, "add_scalar", t, name, s) if s else t
        if kind == "div":
            t = unary_act(low, "reciprocal", b, name + ("/reciprocal" if s != 1.0 else ""))
            return unary_act(low, "scale", t, name, s) if s != 1.0 else t
    nhwc = (isinstance(a, Act) and a.nhwc and a.shape == out_shape) or \
        (isinstance(b, Act) and b.nhwc and b.shape == out_shape)
    # the first operand decides where the output lives: keep a device tensor first
    if not isinstance(a, Act) and kind in ("add", "mul", "max", "min"):
        a, b, a_name, b_name = b, a, b_name, a_name
    A = low.bcast(a, a_name, out_shape, nhwc)
    if kind == "add" and not isinstance(b, Act) and not isinstance(A.h, View) and len(A.h.shape) >= 1:
        last = A.h.shape[-1]
        bv = np.asarray(b)
        if bv.size == last and bv.size > 1:
            hb = low.in_layout(b, b_name, out_shape, nhwc)
            if isinstance(hb, View) and np.array_equal(
                    hb.index.reshape(-1, last), np.broadcast_to(np.arange(last), (hb.index.size // last, last))):
                vec = b_name + "/vec" if np.ndim(bv) != 1 else b_name
                if b_name in low.params:
                    low.params.add(vec)
                bias = low.tensor_of(vec, bv.reshape(last)) if vec != b_name else hb.base
                out = Act(be.add_bias(A.h, bias, name), out_shape, nhwc)
                if low.training:
                    low.rec(out, [A], lambda dy: [(A, lambda: dy), (vec, lambda: be.reduce_rows(
                        low.operand_raw(dy, (A.size // last, last)), name + "/bias_bwd"))],
                        force=vec in low.params)
                return out
    B = low.bcast(b, b_name, out_shape, nhwc)
    if kind == "add":
        h = be.add(A.h, B.h, name)
    elif kind == "mul":
        h = be.mul(A.h, B.h, name)
    else:
        h = be.binary(A.h, B.h, kind, name)
    out = Act(h, out_shape, nhwc)
    if low.training:
        bn = name + "/bwd"
        if kind == "add":
            fn = lambda dy: [(A, lambda: dy), (B, lambda: dy)]  # noqa: E731
        elif kind == "sub":
            fn = lambda dy: [(A, lambda: dy), (B, lambda: be.unary(dy, "neg", bn + "/b"))]  # noqa: E731
        elif kind == "mul":
            fn = lambda dy: [(A, lambda: be.mul(dy, B.h, bn + "/a")),  # noqa: E731
                             (B, lambda: be.mul(dy, A.h, bn + "/b"))]
        elif kind == "div":  # d/da = dy / b, d/db = -dy a / b^2 = -(dy / b) y
            fn = lambda dy: [(A, lambda: be.binary(dy, B.h, "div", bn + "/a")),  # noqa: E731
                             (B, lambda: be.unary(be.mul(be.binary(dy, B.h, "div", bn + "/b_q"), h, bn + "/b_qy"),
                                                  "neg", bn + "/b"))]
        else:
            fn = None
            if id(A) in low.rg or id(B) in low.rg:
                low.no_backward(f"elementwise '{kind}' of two tensors", name)
        if fn is not None:
            low.rec(out, [A, B], fn)
    return out


def binary(kind):
    """Lowering of a two-input elementwise op of ``kind`` with ONNX broadcasting (:func:`binary_op`)."""
    def lower(low, i, node, ins, name):
        low.set_output(node, binary_op(low, kind, node, ins[0], ins[1], name, node.input[0], node.input[1]))
    lower.__name__ = f"lower_{kind}"
    return lower


def lower_max(low, i, node, ins, name):
    if len(ins) != 2:
        raise OnnxImportError(f"{low.lm.path}: node '{name}': Max of {len(ins)} inputs; only 2 are supported")
    binary("max")(low, i, node, ins, name)


def lower_min(low, i, node, ins, name):
    if len(ins) != 2:
        raise OnnxImportError(f"{low.lm.path}: node '{name}': Min of {len(ins)} inputs; only 2 are supported")
    binary("min")(low, i, node, ins, name)


def lower_where(low, i, node, ins, name):
    c, a, b = ins
    shapes = [v.shape if isinstance(v, Act) else np.shape(v) for v in ins]
    out_shape = tuple(int(s) for s in np.broadcast_shapes(*map(tuple, shapes)))
    nhwc = any(isinstance(v, Act) and v.nhwc and v.shape == out_shape for v in ins)
    hs, acts = [], []
    for v, nm in zip(ins, node.input, strict=True):
        if not isinstance(v, Act):
            arr = np.asarray(v)
            if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.floating):
                arr = arr.astype(np.float32)
            if np.issubdtype(arr.dtype, np.floating):
                # -inf / +inf fill values: the largest finite value of the storage type
                big = float(np.finfo(np.float16).max if low.be.precision == "fp16" else np.finfo(np.float32).max)
                arr = np.clip(np.nan_to_num(arr.astype(np.float32), posinf=big, neginf=-big), -big, big)
            low.vals[nm + "/f"] = arr
            hs.append(low.in_layout(arr, nm + "/f", out_shape, nhwc))
            acts.append(None)
        else:
            acts.append(low.bcast(v, nm, out_shape, nhwc))
            hs.append(acts[-1].h)
    out = Act(low.be.select(hs[0], hs[1], hs[2], name), out_shape, nhwc)
    if low.training:
        if isinstance(c, Act) and id(c) in low.rg:
            low.no_backward("Where with a computed condition", name)
        zero = (low.tensor_of(f"{name}/zeros", np.zeros(canon(out_shape), np.float32))
                if any(isinstance(v, Act) and id(v) in low.rg for v in (a, b)) else None)
        A, B = acts[1], acts[2]
        low.rec(out, [A, B], lambda dy: ([(A, lambda: low.be.select(hs[0], dy, zero, name + "/bwd_a"))] if A
                                           else [])
                  + ([(B, lambda: low.be.select(hs[0], zero, dy, name + "/bwd_b"))] if B else []))
    low.set_output(node, out)
