"""Values of a lowered graph: :class:`Act` (a device tensor and its ONNX shape), the handle shape of a
row-major tensor, convolution / pooling window indices and the small node-attribute helpers.

Layout: activations are stored row-major in their ONNX shape, except convolution / pooling results, kept
as rows of channels ``(N*H*W, C)`` (the op library's NHWC layout, ``nhwc=True``); a consumer that needs
NCHW order reads them through a view (a rearranging copy on the device)."""

from __future__ import annotations

import numpy as np


def canon(shape) -> tuple:
    """Handle shape of a row-major tensor of ONNX ``shape``: (rows, last) or (n,)."""
    shape = tuple(int(s) for s in shape)
    if len(shape) >= 2:
        return (int(np.prod(shape[:-1])), shape[-1])
    return (int(np.prod(shape)) if shape else 1,)


class Act:
    """A device tensor: backend handle ``h`` holding the ONNX tensor of ``shape``; row-major, or
    rows of channels (N*H*W, C) of an NCHW tensor when ``nhwc``."""

    __slots__ = ("h", "shape", "nhwc")

    def __init__(self, h, shape, nhwc=False):
        self.h = h
        self.shape = tuple(int(s) for s in shape)
        # a 4-D tensor with H*W == 1 (or C == 1) is the same in both orders
        self.nhwc = bool(nhwc) and len(self.shape) == 4 and self.shape[2] * self.shape[3] > 1 and self.shape[1] > 1

    @property
    def size(self):
        return int(np.prod(self.shape))

    def phys(self):
        """Logical flat index -> position in ``h`` (None = the same)."""
        if not self.nhwc:
            return None
        n, c, hh, w = self.shape
        return np.arange(n * hh * w * c, dtype=np.int64).reshape(n, hh, w, c).transpose(0, 3, 1, 2).ravel()


def windows(n, h, w, kh, kw, strides, pads, dil=(1, 1), ceil=False, count_pads=False):
    """Window index of a kh x kw window (``strides``, ``pads`` = (top, left, bottom, right), dilations ``dil``,
    ``ceil_mode``) over an (n, h, w) grid of rows: ``(index (n*oh*ow, kh*kw) int64 of input rows, -1 where the
    window reads padding, (oh, ow))``; slot ``s = i * kw + j`` (the im2col column order of a (kh, kw, C, Co)
    kernel).  ``count_pads``: mark the padding positions inside the padded image 0 instead of -1 (to count
    them, as AveragePool's count_include_pad)."""
    (sh, sw), (pt, pl, pb, pr), (dh, dw) = strides, pads, dil

    def out(size, k, s, p0, p1, d):
        span = size + p0 + p1 - d * (k - 1) - 1
        o = (-(-span // s) if ceil else span // s) + 1
        if ceil and (o - 1) * s >= size + p0:  # the last window must start inside the image or its left pad
            o -= 1
        return o
    oh, ow = out(h, kh, sh, pt, pb, dh), out(w, kw, sw, pl, pr, dw)
    if oh < 1 or ow < 1:
        raise ValueError(f"window {kh}x{kw} stride {strides} pads {pads} does not fit a {h}x{w} image")
    hi = (np.arange(oh) * sh - pt)[:, None] + dh * np.arange(kh)[None, :]  # (oh, kh)
    wi = (np.arange(ow) * sw - pl)[:, None] + dw * np.arange(kw)[None, :]  # (ow, kw)
    if count_pads:
        okh, okw = (hi >= -pt) & (hi < h + pb), (wi >= -pl) & (wi < w + pr)
        row = np.zeros((oh, ow, kh, kw), np.int64)
    else:
        okh, okw = (hi >= 0) & (hi < h), (wi >= 0) & (wi < w)
        row = hi[:, None, :, None] * w + wi[None, :, None, :]
    ok = okh[:, None, :, None] & okw[None, :, None, :]
    base = 0 if count_pads else np.arange(n, dtype=np.int64)[:, None, None, None, None] * (h * w)
    idx = np.where(ok[None], base + row[None], -1)
    idx = np.broadcast_to(idx, (n, oh, ow, kh, kw)).reshape(n * oh * ow, kh * kw)
    return idx.astype(np.int64), (oh, ow)


def ints(v) -> list[int]:
    return [int(x) for x in np.asarray(v).ravel()]


def attrs(node) -> dict:
    from onnx import helper

    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def is_identity(idx: np.ndarray, n: int) -> bool:
    flat = idx.ravel()
    if flat.size != n or n == 0:
        return flat.size == n
    if flat[0] != 0 or flat[-1] != n - 1 or (n > 64 and not np.array_equal(flat[:64], np.arange(64))):
        return False
    return bool(np.array_equal(flat, np.arange(n, dtype=flat.dtype)))
