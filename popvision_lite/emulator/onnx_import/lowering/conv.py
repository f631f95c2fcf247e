"""Convolution (1-D and 2-D, grouped and depthwise: im2col + matmul), pooling and inference batch norm (folded
into a per-channel scale and shift), on the op library's rows-of-channels layout."""

from __future__ import annotations

import numpy as np

from popvision_lite.emulator.ops.pooling import global_windows

from ..loader import OnnxImportError
from .elementwise import binary_op
from .matmul import matmul
from .values import Act, attrs, windows


def window_attrs(low, node, name, kshape, spatial):
    """(kh, kw, (sh, sw), (top, left, bottom, right), (dh, dw), ceil_mode) of a Conv / pooling node over
    ``spatial`` = (h, w); a 1-D window is the 2-D one with a height of 1."""
    at = attrs(node)
    k = [int(v) for v in kshape]
    nd = len(k)
    if nd not in (1, 2) or len(spatial) != nd:
        raise OnnxImportError(f"{low.lm.path}: node '{name}': {node.op_type} kernel {k}: only 1-D and 2-D "
                              "windows are supported")
    strides = [int(v) for v in at.get("strides", [1] * nd)]
    dil = [int(v) for v in at.get("dilations", [1] * nd)]
    pads = [int(v) for v in at.get("pads", [0] * 2 * nd)]
    auto = at.get("auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else str(auto)
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        pads = [0] * 2 * nd
        for d in range(nd):
            o = -(-spatial[d] // strides[d])
            total = max((o - 1) * strides[d] + (k[d] - 1) * dil[d] + 1 - spatial[d], 0)
            small = total // 2
            pads[d], pads[d + nd] = (small, total - small) if auto == "SAME_UPPER" else (total - small, small)
    elif auto == "VALID":
        pads = [0] * 2 * nd
    elif auto != "NOTSET":
        raise OnnxImportError(f"{low.lm.path}: node '{name}': auto_pad {auto!r} is not an ONNX value")
    if nd == 1:
        return 1, k[0], (1, strides[0]), (0, pads[0], 0, pads[1]), (1, dil[0]), bool(at.get("ceil_mode", 0))
    return k[0], k[1], tuple(strides), (pads[0], pads[1], pads[2], pads[3]), tuple(dil), \
        bool(at.get("ceil_mode", 0))


def lower_conv(low, i, node, ins, name):
    x, w = low.data(node, ins), ins[1]
    at = attrs(node)
    groups = int(at.get("group", 1))
    if isinstance(w, Act):
        raise OnnxImportError(f"{low.lm.path}: node '{name}': Conv weights must be initializers")
    if len(x.shape) not in (3, 4):
        raise OnnxImportError(f"{low.lm.path}: node '{name}': only 1-D and 2-D Conv (NCL / NCHW input) are "
                              f"supported, got input shape {x.shape}")
    w = np.asarray(w, np.float32)
    one_d = len(x.shape) == 3
    if one_d:  # (N, C, L) as (N, C, 1, L)
        x = low.reshape(x, (x.shape[0], x.shape[1], 1, x.shape[2]))
        w = w.reshape(w.shape[0], w.shape[1], 1, w.shape[2])
    co, cg, kh, kw = w.shape
    n, c, hh, ww = x.shape
    if c != cg * groups or co % groups:
        raise OnnxImportError(f"{low.lm.path}: node '{name}': Conv of {c} channels with weights {w.shape} and "
                              f"group {groups} do not agree")
    kshape = at.get("kernel_shape", [kw] if one_d else [kh, kw])
    kh_, kw_, strides, pads, dil, _ = window_attrs(low, node, name, kshape, (ww,) if one_d else (hh, ww))
    if (kh_, kw_) != (kh, kw):
        raise OnnxImportError(f"{low.lm.path}: node '{name}': kernel_shape {list(kshape)} does not match the "
                              f"weights {tuple(ins[1].shape)}")
    X, xh = low.nhwc_act(x)
    be = low.be
    if (kh, kw) == (1, 1) and strides == (1, 1) and not any(pads):
        cols, oh, ow, idx = xh, hh, ww, None
    else:
        idx, (oh, ow) = windows(n, hh, ww, kh, kw, strides, pads, dil)
        cols = be.gather_windows(xh, idx, name + "/im2col")
    if groups == 1:
        wn = node.input[1] + "/hwio"
        low.vals[wn] = np.ascontiguousarray(w.transpose(2, 3, 1, 0).reshape(kh * kw * c, co))
        if node.input[1] in low.params:
            low.params.add(wn)
        wt = low.tensor_of(wn)
        Y = Act(be.matmul(cols, wt, name), (n, co, oh, ow), nhwc=True)
        if low.training:
            def bwd(dy):
                d = low.operand_raw(dy, (n * oh * ow, co))
                dcols = lambda: be.matmul(d, be.t(wt), name + "/bwd_dx")  # noqa: E731
                dx = dcols if idx is None else (lambda: be.col2im(dcols(), idx, n * hh * ww, name + "/bwd_col2im"))
                return [(X, dx), (wn, lambda: be.matmul(be.t(cols), d, name + "/bwd_dw"))]
            low.rec(Y, [X], bwd, force=wn in low.params)
    else:
        Y = grouped_conv(low, node, name, X, cols, idx, w, groups, (n, hh, ww, oh, ow))
    if len(ins) > 2 and ins[2] is not None:
        bn = node.input[2] + "/nchw"
        low.vals[bn] = np.asarray(ins[2]).reshape(1, co, 1, 1)
        if node.input[2] in low.params:
            low.params.add(bn)
        Y = binary_op(low, "add", node, Y, low.vals[bn], name + "/bias", "", bn)
    if one_d:
        Y = low.reshape(Y, (n, co, ow))
    low.set_output(node, Y)


def grouped_conv(low, node, name, X, cols, idx, w, groups, dims):
    """Grouped / depthwise Conv: the im2col columns of each group times that group's weights, one batched
    matmul over the groups (Poplar's convolution planner also splits a grouped convolution by group)."""
    n, hh, ww, oh, ow = dims
    co, cg, kh, kw = w.shape
    g, cog, kk = groups, co // groups, kh * kw
    rows = n * oh * ow
    C = Act(cols, (rows, kk, g, cg))  # im2col column order: (window slot, channel)
    if low.training and idx is not None:
        low.rec(C, [X], lambda dy: [(X, lambda: low.be.col2im(low.operand_raw(dy, (rows, kk * g * cg)), idx,
                                                                 n * hh * ww, name + "/bwd_col2im"))])
    elif low.training:
        low.rec(C, [X], lambda dy: [(X, lambda: dy)])
    if cg == 1 and cog == 1 and kk > 1:
        return depthwise_mac(low, node, name, C, w, (n, oh, ow))
    ic = np.arange(C.size).reshape(C.shape).transpose(2, 0, 1, 3).reshape(g, rows, kk * cg)
    A = low.view(C, ic, ic.shape)
    wn = node.input[1] + "/groups"
    low.vals[wn] = np.ascontiguousarray(
        w.reshape(g, cog, cg, kh, kw).transpose(0, 3, 4, 2, 1).reshape(g, kk * cg, cog))
    if node.input[1] in low.params:
        low.params.add(wn)
    Yg = matmul(low, A, low.vals[wn], name, "", wn)  # (g, rows, cog)
    iy = np.arange(Yg.size).reshape(g, rows, cog).transpose(1, 0, 2).reshape(n, oh, ow, co).transpose(0, 3, 1, 2)
    return low.view(Yg, iy, iy.shape)


def depthwise_mac(low, node, name, C, w, dims):
    """A depthwise convolution (one input and one output channel per group) as poplibs runs it with its vertical
    MAC / SLIC conv vertices (``ConvPartialVerticalMac``, ``createConvPartialSlicVertex``: the channels in the
    vector lanes): each window slot's input rows times that slot's per-channel weights, summed over the slots -
    multiply-accumulates along rows of channels, with no transposition of the im2col columns into one matrix per
    channel (a batched matmul of N = 1 per channel, whose element-by-element rearranging copy made MobileNetV2's
    timing-only run 2.3x ResNet-50's CPU).  ``C``: the im2col columns (rows, kk, g, 1)."""
    n, oh, ow = dims
    co, _, kh, kw = w.shape
    kk, rows = kh * kw, n * oh * ow
    wn = node.input[1] + "/slots"
    low.vals[wn] = np.ascontiguousarray(w.reshape(co, kk).T.reshape(kk, co))  # (window slot, channel)
    if node.input[1] in low.params:
        low.params.add(wn)
    P = binary_op(low, "mul", node, low.reshape(C, (rows, kk, co)), low.vals[wn], name + "/mac", "", wn)
    full = np.arange(P.size).reshape(rows, kk, co)
    y = None
    for s in range(kk):
        part = low.view(P, full[:, s, :], (rows, co))
        y = part if y is None else binary_op(low, "add", node, y, part, f"{name}/acc{s}", "", "")
    out = Act(y.h, (n, co, oh, ow), nhwc=True)  # the accumulator is (rows, channels): rows of channels
    if low.training:
        low.rec(out, [y], lambda dy: [(y, lambda: dy)])
    return out


def pool(low, i, node, ins, name, mode):
    x = low.data(node, ins)
    at = attrs(node)
    if len(x.shape) not in (3, 4):
        raise OnnxImportError(f"{low.lm.path}: node '{name}': only 1-D and 2-D pooling (NCL / NCHW input) "
                              "is supported")
    one_d = len(x.shape) == 3
    if one_d:
        x = low.reshape(x, (x.shape[0], x.shape[1], 1, x.shape[2]))
    n, c, hh, ww = x.shape
    kh, kw, strides, pads, dil, ceil = window_attrs(low, node, name, at.get("kernel_shape", []),
                                                          (ww,) if one_d else (hh, ww))
    if mode == "max" and len(node.output) > 1 and node.output[1]:
        raise OnnxImportError(f"{low.lm.path}: node '{name}': MaxPool's indices output is not supported")
    idx, (oh, ow) = windows(n, hh, ww, kh, kw, strides, pads, dil, ceil)
    Y = window_pool(low, x, idx, (n, c, oh, ow), mode, name)
    if mode == "avg":
        # the op library divides by the window's size; ONNX divides by the elements counted: the real ones
        # (count_include_pad 0) or those inside the padded image (1; a ceil_mode window's overhang is not)
        counted = windows(n, hh, ww, kh, kw, strides, pads, dil, ceil, count_pads=bool(
            at.get("count_include_pad", 0)))[0] if at.get("count_include_pad", 0) else idx
        valid = (counted >= 0).sum(1).astype(np.float32)
        corr = (kh * kw) / np.maximum(valid, 1)
        if np.any(corr != 1.0):
            cn = f"{name}/pad_correction"
            low.vals[cn] = corr.reshape(n, 1, oh, ow)
            Y = binary_op(low, "mul", node, Y, low.vals[cn], name + "/exclude_pad", "", cn)
    if one_d:
        Y = low.reshape(Y, (n, c, ow))
    low.set_output(node, Y)


def window_pool(low, x, idx, out_shape, mode, name):
    be = low.be
    X, xh = low.nhwc_act(x)
    n_rows = xh.shape[0]
    y = be.max_pool(xh, idx, name) if mode == "max" else be.avg_pool(xh, idx, name)
    Y = Act(y, out_shape, nhwc=True)
    if low.training:
        if mode == "max":
            g = lambda dy: be.max_pool_bwd(xh, y, low.operand_raw(dy, tuple(y.shape)), idx, name + "/bwd")  # noqa: E731
        else:
            g = lambda dy: be.avg_pool_bwd(low.operand_raw(dy, tuple(y.shape)), idx, n_rows, name + "/bwd")  # noqa: E731
        low.rec(Y, [X], lambda dy: [(X, lambda: g(dy))])
    return Y


def lower_max_pool(low, i, node, ins, name):
    pool(low, i, node, ins, name, "max")


def lower_average_pool(low, i, node, ins, name):
    pool(low, i, node, ins, name, "avg")


def lower_global_average_pool(low, i, node, ins, name):
    x = ins[0]
    if len(x.shape) != 4:
        raise OnnxImportError(f"{low.lm.path}: node '{name}': only NCHW GlobalAveragePool is supported")
    n, c, hh, ww = x.shape
    low.set_output(node, window_pool(low, x, global_windows(n, hh * ww), (n, c, 1, 1), "avg", name))


def lower_batch_normalization(low, i, node, ins, name):
    x = ins[0]
    at = attrs(node)
    if any(isinstance(v, Act) for v in ins[1:5]):
        raise OnnxImportError(f"{low.lm.path}: node '{name}': BatchNormalization parameters must be "
                              "initializers")
    if at.get("training_mode", 0) or (len(node.output) > 1 and any(node.output[1:])):
        raise OnnxImportError(f"{low.lm.path}: node '{name}': training-mode BatchNormalization exports are not "
                              "supported; export the model in eval mode (model.eval())")
    gamma, beta, mean, var = (np.asarray(v, np.float32) for v in ins[1:5])
    eps = float(at.get("epsilon", 1e-5))
    scale = gamma / np.sqrt(var + eps)
    shift = beta - mean * scale
    shp = (1, len(scale)) + (1,) * (len(x.shape) - 2)
    sn, tn = f"{name}/scale", f"{name}/shift"
    low.vals[sn], low.vals[tn] = scale.reshape(shp), shift.reshape(shp)
    if not low.training:  # weights in memory; in --training batch norm is frozen (running statistics)
        low.params |= {sn, tn}
    y = binary_op(low, "mul", node, x, low.vals[sn], name + "/scale", node.input[0], sn)
    y = binary_op(low, "add", node, y, low.vals[tn], name + "/shift", "", tn)
    low.set_output(node, y)
