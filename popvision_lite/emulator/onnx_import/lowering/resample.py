"""Resampling: ConvTranspose (the input spread out by the stride with zeros between, padded, then a Conv with
the flipped, transposed weights: the op library's im2col + matmul, as Poplar's planner does a transposed
convolution) and Resize (separable: per resized axis a constant interpolation matrix, a gather view for nearest
and a matmul with the matrix for linear / cubic; the matrix is the node itself evaluated on an identity)."""

from __future__ import annotations

import numpy as np

from ..loader import OnnxImportError
from .conv import lower_conv
from .fold import evaluate_node
from .matmul import matmul_along
from .values import Act, attrs, ints
from .views import view_with_fill


def _s(v) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def lower_conv_transpose(low, i, node, ins, name):
    """ConvTranspose (1-D / 2-D, grouped, strided, dilated, padded, ``output_padding``): the input spread out
    by the strides with zeros between and padded by ``dilation * (k - 1) - pad`` (a view with a zero fill,
    a crop where that is negative), then a stride-1 Conv with the weights flipped and in / out swapped."""
    x, w = low.data(node, ins), ins[1]
    at = attrs(node)
    path = low.lm.path
    if isinstance(w, Act):
        raise OnnxImportError(f"{path}: node '{name}': ConvTranspose weights must be initializers")
    if len(x.shape) not in (3, 4):
        raise OnnxImportError(f"{path}: node '{name}': only 1-D and 2-D ConvTranspose (NCL / NCHW input) are "
                              f"supported, got input shape {x.shape}")
    auto = _s(at.get("auto_pad", b"NOTSET"))
    if auto not in ("NOTSET", "VALID"):
        raise OnnxImportError(f"{path}: node '{name}': auto_pad {auto} of ConvTranspose is not supported "
                              "(give explicit pads)")
    if "output_shape" in at:
        raise OnnxImportError(f"{path}: node '{name}': attribute output_shape of ConvTranspose is not supported "
                              "(give pads and output_padding)")
    w = np.asarray(w, np.float32)
    nd = len(x.shape) - 2
    g = int(at.get("group", 1))
    cin, cog = w.shape[0], w.shape[1]
    k = list(w.shape[2:])
    if x.shape[1] != cin or cin % g:
        raise OnnxImportError(f"{path}: node '{name}': ConvTranspose of {x.shape[1]} channels with weights "
                              f"{w.shape} and group {g} do not agree")
    if "kernel_shape" in at and list(at["kernel_shape"]) != k:
        raise OnnxImportError(f"{path}: node '{name}': kernel_shape {list(at['kernel_shape'])} does not match the "
                              f"weights {w.shape}")
    strides = [int(v) for v in at.get("strides", [1] * nd)]
    dil = [int(v) for v in at.get("dilations", [1] * nd)]
    pads = [0] * 2 * nd if auto == "VALID" else [int(v) for v in at.get("pads", [0] * 2 * nd)]
    opad = [int(v) for v in at.get("output_padding", [0] * nd)]
    # the spread-out, padded input along each spatial axis: source position per position, -1 for a zero
    maps = []
    for d in range(nd):
        size = x.shape[2 + d]
        lo = dil[d] * (k[d] - 1) - pads[d]
        hi = dil[d] * (k[d] - 1) - pads[nd + d] + opad[d]
        j = np.arange((size - 1) * strides[d] + 1 + lo + hi) - lo
        src = np.where((j % strides[d] == 0) & (j >= 0) & (j // strides[d] < size), j // strides[d], -1)
        maps.append(src)
    n, c = x.shape[:2]
    grids = np.meshgrid(*maps, indexing="ij")
    flat = np.zeros(grids[0].shape, np.int64)
    valid = np.ones(grids[0].shape, bool)
    for d, gd in enumerate(grids):
        flat = flat * x.shape[2 + d] + np.maximum(gd, 0)
        valid &= gd >= 0
    plane = int(np.prod(x.shape[2:]))
    base = (np.arange(n * c) * plane).reshape(n, c, *([1] * nd))
    idx = np.where(valid, base + flat, -1)
    spread = view_with_fill(low, x, idx, 0.0, name + "/spread")
    # Conv weights (Co, Ci / g, k...): per group, in / out swapped, the kernel flipped
    wc = w.reshape(g, cin // g, cog, *k).swapaxes(1, 2).reshape(g * cog, cin // g, *k)
    wc = np.ascontiguousarray(wc[(slice(None), slice(None)) + (slice(None, None, -1),) * nd])
    wn = f"{node.input[1]}/conv_transpose/g{g}"  # run._conv_transpose_weight maps updates back by this name
    low.vals[wn] = wc
    if node.input[1] in low.params:
        low.params.add(wn)
    from onnx import helper

    sn = f"{name}/spread"
    low.vals[sn] = spread
    bias = [node.input[2]] if len(node.input) > 2 and node.input[2] else []
    conv = helper.make_node("Conv", [sn, wn, *bias], list(node.output), name=name, group=g, dilations=dil,
                            kernel_shape=k)
    lower_conv(low, i, conv, [spread, wc, *ins[2:3]] if bias else [spread, wc], name)


_RESIZE_REFUSED = {"coordinate_transformation_mode": ("tf_crop_and_resize",),
                   "keep_aspect_ratio_policy": ("not_larger", "not_smaller")}


def lower_resize(low, i, node, ins, name):
    """Resize (any mode, coordinate transformation, cubic coefficient, antialias) as one interpolation matrix
    per resized axis, each the node's Resize of an identity matrix along that axis: nearest modes give one-hot
    rows, lowered as a gather view (free); linear and cubic a matmul with the matrix along the axis."""
    x = low.data(node, ins)
    at = attrs(node)
    path = low.lm.path
    for key, bad in _RESIZE_REFUSED.items():
        if _s(at.get(key, b"")) in bad:
            raise OnnxImportError(f"{path}: node '{name}': Resize {key} {_s(at[key])} is not supported")
    if any(isinstance(v, Act) for v in ins[1:]):
        raise OnnxImportError(f"{path}: node '{name}': Resize with scales / sizes computed on the device is not "
                              "supported (they must be known when the graph is built)")
    nd = len(x.shape)
    scales_in = 1 if low.opset < 11 else 2
    scales = ins[scales_in] if len(ins) > scales_in and ins[scales_in] is not None and np.size(ins[scales_in]) else None
    sizes = ins[3] if low.opset >= 11 and len(ins) > 3 and ins[3] is not None and np.size(ins[3]) else None
    axes = [a + nd if a < 0 else a for a in at.get("axes", range(nd))]
    if sizes is None and scales is None:
        raise OnnxImportError(f"{path}: node '{name}': Resize has neither scales nor sizes")
    out = list(x.shape)
    scale_of = {}
    for j, ax in enumerate(axes):
        if sizes is not None:
            out[ax] = int(ints(sizes)[j])
        else:
            scale_of[ax] = float(np.asarray(scales, np.float64).ravel()[j])
            out[ax] = int(np.floor(x.shape[ax] * scale_of[ax]))
    y = x
    for ax in range(nd):
        mat = _axis_matrix(low, node, name, x.shape[ax], out[ax], scale_of.get(ax))
        if mat.shape == (out[ax], x.shape[ax]) and out[ax] == x.shape[ax] and np.array_equal(mat, np.eye(out[ax])):
            continue
        y = _apply_along(low, y, ax, mat, f"{name}/axis{ax}")
    low.set_output(node, y)


def _axis_matrix(low, node, name, size, out, scale):
    """(out, size) interpolation matrix of ``node`` along one axis: the node (its attributes, ``axes`` left
    out) evaluated on the (size, size) identity, resized along its second axis only (by ONNX Runtime, else
    ONNX's reference: they differ on align_corners at a non-integer scale)."""
    from onnx import helper

    keep = [a for a in node.attribute if a.name != "axes"]
    feeds = {"x": np.eye(size, dtype=np.float32)}
    if scale is not None:
        feeds["scales"] = np.array([1.0, scale], np.float32)
        inputs = ["x", "", "scales"] if low.opset >= 11 else ["x", "scales"]
    else:
        feeds["sizes"] = np.array([size, out], np.int64)
        inputs = ["x", "", "", "sizes"]
    probe = helper.make_node("Resize", inputs, ["y"])
    probe.attribute.extend(keep)
    try:
        (res,) = evaluate_node(probe, feeds, low.opset, prefer_onnxruntime=True)
    except Exception as e:
        raise OnnxImportError(f"{low.lm.path}: node '{name}' (Resize) could not be evaluated on its interpolation "
                              f"matrix: {type(e).__name__}: {e}") from None
    res = np.asarray(res, np.float64)
    if res.shape != (size, out):
        raise OnnxImportError(f"{low.lm.path}: node '{name}': Resize gives {res.shape[1]} elements along an axis "
                              f"of {size}, expected {out}")
    return res.T  # row o: the weights of the input elements output element o reads


def _apply_along(low, a, ax, mat, name):
    """``a`` resampled along ``ax`` by ``mat`` (out, size): a gather view when every row is one-hot, else a
    matmul along the axis."""
    one_hot = np.all((mat == 0) | (mat == 1)) and np.all(mat.sum(1) == 1)
    if one_hot:
        src = mat.argmax(1)
        idx = np.take(np.arange(a.size).reshape(a.shape), src, axis=ax)
        return low.view(a, idx, idx.shape)
    mn = f"{name}/interpolation"
    low.vals[mn] = np.ascontiguousarray(mat.T.astype(np.float32))  # y[..., o] = sum_s x[..., s] M[s, o]
    return matmul_along(low, a, ax, low.vals[mn], name, mn)
