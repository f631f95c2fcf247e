"""Row ops: Softmax (any axis), layer norms, reductions (ReduceMean / Sum / SumSquare / L2 as a matmul with a
ones vector), with their backward passes."""

from __future__ import annotations

import numpy as np

from ..loader import OnnxImportError
from .elementwise import unary_act
from .values import Act, attrs, ints


def lower_softmax(low, i, node, ins, name):
    a = ins[0]
    nd = len(a.shape)
    ax = attrs(node).get("axis", -1 if low.opset >= 13 else 1)
    ax = ax + nd if ax < 0 else ax
    if ax == nd - 1 or low.opset < 13:
        row = int(np.prod(a.shape[ax:]))
        low.set_output(node, softmax(low, a, row, name))
        return
    perm = [j for j in range(nd) if j != ax] + [ax]
    idx = np.arange(a.size).reshape(a.shape).transpose(perm)
    t = low.view(a, idx, idx.shape)
    y = softmax(low, t, t.shape[-1], name)
    inv = np.argsort(perm)
    back = np.arange(y.size).reshape(y.shape).transpose(inv)
    low.set_output(node, low.view(y, back, back.shape))


def softmax(low, a, row, name):
    p = low.plain(a)
    out = Act(low.be.softmax(low.rows(p, row), name), a.shape)
    if low.training:
        low.rec(out, [p], lambda dy: [(p, lambda: low.be.softmax_bwd(
            out.h, low.operand_raw(dy, tuple(out.h.shape)), name + "/bwd"))])
    return out


def layer_norm(low, a, row, gam, bet, gname, bname, name, eps):
    p = low.plain(a)
    x = low.rows(p, row)
    out = Act(low.be.layer_norm(x, gam, bet, name, eps=eps), a.shape)
    if low.training:
        def bwd(dy):
            dx, dg, db = low.be.layer_norm_bwd(x, gam, low.operand_raw(dy, tuple(out.h.shape)), name + "/bwd",
                                                eps=eps)
            return [(p, lambda: dx), (gname, lambda: dg), (bname, lambda: db)]
        low.rec(out, [p], bwd, force=gname in low.params or bname in low.params)
    return out


def lower_layer_normalization(low, i, node, ins, name):
    a, g = low.data(node, ins), ins[1]
    b = ins[2] if len(ins) > 2 else None
    nd = len(a.shape)
    at = attrs(node)
    if at.get("stash_type", 1) != 1:
        raise OnnxImportError(f"{low.lm.path}: node '{name}': LayerNormalization stash_type "
                              f"{at['stash_type']} cannot be honoured (the op library computes the statistics "
                              "in float32: stash_type 1)")
    ax = at.get("axis", -1)
    ax = ax + nd if ax < 0 else ax
    row = int(np.prod(a.shape[ax:]))
    if isinstance(g, Act) or isinstance(b, Act):
        raise OnnxImportError(f"{low.lm.path}: node '{name}': LayerNormalization with a computed scale or bias "
                              "is not supported (they must be initializers)")
    if np.size(g) != row or (b is not None and np.size(b) != row):
        raise OnnxImportError(f"{low.lm.path}: node '{name}': scale / bias have {np.size(g)} / {np.size(b)} "
                              f"elements, expected {row}")
    gname = node.input[1] if np.ndim(g) == 1 else node.input[1] + "/flat"
    bname = (node.input[2] if np.ndim(b) == 1 else node.input[2] + "/flat") if b is not None else name + "/zero_bias"
    for nm, src in ((gname, node.input[1]), (bname, node.input[2] if b is not None else "")):
        if src in low.params:
            low.params.add(nm)
    gam = low.tensor_of(gname, np.asarray(g).reshape(row))
    bet = low.tensor_of(bname, np.zeros(row, np.float32) if b is None else np.asarray(b).reshape(row))
    low.set_output(node, layer_norm(low, a, row, gam, bet, gname, bname, name, float(at.get("epsilon", 1e-5))))
    if len(node.output) > 1 and any(node.output[1:]):
        raise OnnxImportError(f"{low.lm.path}: node '{name}': LayerNormalization's mean / inv-std outputs "
                              "are not supported (training-mode exports)")


def reduce(low, i, node, ins, name, mean):
    a = ins[0]
    nd = len(a.shape)
    at = attrs(node)
    axes = at.get("axes")
    if axes is None and len(node.input) > 1 and node.input[1]:
        axes = ints(ins[1])
    if axes is None or len(axes) == 0:
        if at.get("noop_with_empty_axes", 0):
            low.set_output(node, a)
            return
        axes = list(range(nd))
    axes = sorted({x + nd if x < 0 else x for x in axes})
    keep = [j for j in range(nd) if j not in axes]
    idx = np.arange(a.size).reshape(a.shape).transpose(keep + axes)
    t = low.view(a, idx, idx.shape) if keep + axes != list(range(nd)) else a
    row = int(np.prod([a.shape[j] for j in axes]))
    ones = low.tensor_of(f"{name}/ones", np.ones((row, 1), np.float32))
    p = low.plain(t)
    be = low.be
    h = be.matmul(low.rows(p, row), ones, name + "/sum")
    if mean:
        h = be.scale(h, 1.0 / row, name)
    shape = tuple(1 if j in axes else a.shape[j] for j in range(nd)) if at.get("keepdims", 1) else \
        tuple(a.shape[j] for j in keep)
    out = Act(h, shape)
    if low.training:  # dx = dy broadcast over the reduced elements (/ their count for the mean)
        def bwd(dy):
            g = be.matmul(low.operand_raw(dy, (p.size // row, 1)), be.t(ones), name + "/bwd")
            return [(p, lambda: be.scale(g, 1.0 / row, name + "/bwd_mean") if mean else g)]
        low.rec(out, [p], bwd)
    low.set_output(node, out)


def lower_reduce_mean(low, i, node, ins, name):
    reduce(low, i, node, ins, name, True)


def lower_reduce_sum(low, i, node, ins, name):
    reduce(low, i, node, ins, name, False)


def lower_reduce_sum_square(low, i, node, ins, name):
    sq = unary_act(low, "square", low.data(node, ins), name + "/square")
    reduce(low, i, node, [sq, *ins[1:]], name, False)


def lower_reduce_l2(low, i, node, ins, name):  # sqrt of the sum of squares (torch's vector_norm, normalize)
    lower_reduce_sum_square(low, i, node, ins, name + "/sum_square")
    low.set_output(node, unary_act(low, "sqrt", low.vals[node.output[0]], name))


def group_norm(low, node, x, groups, scale, bias, eps, name):
    """Group normalisation of ``x`` (N, C, spatial...): each (sample, group of C / ``groups`` channels) normalised
    over its channels and positions (the op library's layer norm on rows of that size), then the per-channel
    ``scale`` and ``bias`` (C,) (a broadcast mul and add, as BatchNormalization's shift)."""
    from .elementwise import binary_op

    n, c = x.shape[:2]
    if np.size(scale) != c or np.size(bias) != c:
        raise OnnxImportError(f"{low.lm.path}: node '{name}': scale / bias have {np.size(scale)} / {np.size(bias)} "
                              f"elements, expected {c} (one per channel)")
    if c % groups:
        raise OnnxImportError(f"{low.lm.path}: node '{name}': {c} channels do not split into {groups} groups")
    if isinstance(scale, Act) or isinstance(bias, Act):
        raise OnnxImportError(f"{low.lm.path}: node '{name}': {node.op_type} with a computed scale or bias is not "
                              "supported (they must be initializers)")
    row = x.size // (n * groups)
    un, zn = f"{name}/unit_scale", f"{name}/zero_bias"
    gam = low.tensor_of(un, np.ones(row, np.float32))
    bet = low.tensor_of(zn, np.zeros(row, np.float32))
    y = layer_norm(low, low.reshape(low.plain(x), (n * groups, row)), row, gam, bet, un, zn, name, eps)
    y = low.reshape(y, x.shape)
    shp = (1, c) + (1,) * (len(x.shape) - 2)
    for kind, v, src in zip(("mul", "add"), (scale, bias), node.input[1:3], strict=True):
        vn = f"{src}/nchw"
        low.vals[vn] = np.asarray(v, np.float32).reshape(shp)
        if src in low.params:
            low.params.add(vn)
        y = binary_op(low, kind, node, y, low.vals[vn], f"{name}/{'scale' if kind == 'mul' else 'shift'}", "", vn)
    return y


def lower_instance_normalization(low, i, node, ins, name):
    x = low.data(node, ins)
    if len(x.shape) < 3:
        raise OnnxImportError(f"{low.lm.path}: node '{name}': InstanceNormalization needs (N, C, spatial...) input, "
                              f"got shape {x.shape}")
    low.set_output(node, group_norm(low, node, x, x.shape[1], ins[1], ins[2], float(attrs(node).get("epsilon", 1e-5)),
                                    name))


def lower_group_normalization(low, i, node, ins, name):
    """GroupNormalization (opset 21: per-channel scale and bias; the checker rejects opset 18's per-group form)."""
    x = low.data(node, ins)
    at = attrs(node)
    if at.get("stash_type", 1) != 1:
        raise OnnxImportError(f"{low.lm.path}: node '{name}': GroupNormalization stash_type {at['stash_type']} cannot "
                              "be honoured (the op library computes the statistics in float32: stash_type 1)")
    low.set_output(node, group_norm(low, node, x, int(at["num_groups"]), ins[1], ins[2],
                                    float(at.get("epsilon", 1e-5)), name))
