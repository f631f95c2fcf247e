"""The value / layout algebra of a lowering: constants and weights as backend tensors, and views (flat element
indices into a base tensor) for Reshape / Transpose / Slice / broadcasts ..., which cost nothing until an op
must rearrange the data (as Poplar's views); row-major and rows-of-channels (NHWC) layouts."""

from __future__ import annotations

import numpy as np

from popvision_lite.emulator.ops.context import View

from .tape import Tape
from .values import Act, canon, is_identity


class Layout(Tape):
    """Values by ONNX name (``vals``: numpy constants or :class:`Act`) and the views between layouts."""

    def node_name(self, i, node) -> str:
        return (node.name or f"{node.op_type}_{i}").strip("/") or f"{node.op_type}_{i}"

    def tensor_of(self, name, value=None):
        """Backend tensor of a constant value (weights for float initializers, constants otherwise)."""
        if name in self.handles:
            return self.handles[name]
        v = np.asarray(self.vals[name] if value is None else value)
        if not getattr(self.be, "needs_values", True):  # timing only: shapes, no data
            v = np.broadcast_to(np.float32(0), canon(v.shape))
        else:
            v = v.astype(np.float32, copy=False).reshape(canon(v.shape))
        if name in self.params:
            h = self.be.weight(name, v)
        else:
            h = self.be.constant(name, v)
        self.handles[name] = h
        return h

    def act(self, name) -> Act:
        v = self.vals[name]
        if isinstance(v, Act):
            return v
        if name not in self._const_acts:
            a = Act(self.tensor_of(name), np.shape(v))
            self._const_acts[name] = a
            if name in self.params:
                self.act_param[id(a)] = name
                self.rg.add(id(a))
        return self._const_acts[name]

    def view(self, a: Act, idx, shape, fill_last=False) -> Act:
        """Act of logical ``shape`` whose elements are ``a``'s logical elements ``idx`` (``fill_last``: ``a``'s
        last element is a constant fill, ``Tape.view_bwd``)."""
        idx = np.asarray(idx, dtype=np.int64)
        p = a.phys()
        if p is not None:
            idx = p[idx]
        flat = idx.ravel()
        pidx = flat
        base = a.h.base if isinstance(a.h, View) else a.h
        if isinstance(a.h, View):
            flat = a.h.index.reshape(-1)[flat]
        if is_identity(flat, int(np.prod(base.shape))):
            out = Act(base, shape)
        else:
            out = Act(View(base, flat.reshape(canon(shape))), shape)
        if self.training:
            self.rec(out, [a], lambda dy: [(a, lambda: self.view_bwd(dy, pidx, a.size, fill_last))])
        return out

    def reshape(self, a: Act, shape) -> Act:
        """``a`` with the same elements in the same order, as ``shape`` (free: no index arrays)."""
        shape = tuple(int(x) for x in shape)
        if a.nhwc:
            return self.view(a, np.arange(a.size, dtype=np.int64).reshape(shape), shape)
        if isinstance(a.h, View):
            out = Act(View(a.h.base, a.h.index.reshape(canon(shape))), shape)
        else:
            out = Act(a.h, shape)
        if self.training:
            self.rec(out, [a], lambda dy: [(a, lambda: dy)])
        return out

    def plain(self, a: Act) -> Act:
        """``a`` in row-major order (a view when it is held as rows of channels)."""
        if not a.nhwc:
            return a
        return self.view(a, np.arange(a.size, dtype=np.int64).reshape(a.shape), a.shape)

    def operand(self, a: Act, shape):
        """Handle of ``a`` (row-major) with exactly ``shape`` (for matmul)."""
        a = self.plain(a)
        h = a.h
        shape = tuple(int(s) for s in shape)
        if isinstance(h, View):
            return View(h.base, h.index.reshape(shape))
        if tuple(h.shape) == shape:
            return h
        return self.be.reshaped(h, shape)

    def rows(self, a: Act, row: int):
        """Handle of ``a`` as rows of ``row`` (row ops read only the last dim: a tensor whose last dim
        is ``row`` is passed as it is, so the output keeps its shape and later reads need no copy)."""
        a = self.plain(a)
        h = a.h
        if not isinstance(h, View) and h.shape[-1] == row:
            return h
        return self.operand(a, (a.size // row, row))

    def operand_raw(self, h, shape):
        if isinstance(h, View):
            return View(h.base, h.index.reshape(shape))
        if tuple(h.shape) == tuple(shape):
            return h
        return self.be.reshaped(h, shape)

    def in_layout(self, v, name, out_shape, nhwc):
        """Handle of value ``v`` (Act or constant) broadcast to ``out_shape``, in the output's order
        (rows of channels when ``nhwc``)."""
        a = v if isinstance(v, Act) else self.act(name)
        out_shape = tuple(out_shape)
        if a.shape == out_shape and a.nhwc == nhwc:
            return a.h
        nd = len(out_shape)
        src_shape = (1,) * (nd - len(a.shape)) + a.shape
        idx = np.broadcast_to(np.arange(a.size, dtype=np.int64).reshape(src_shape), out_shape)
        if nhwc:
            idx = idx.transpose(0, 2, 3, 1)
        return self.view(a, idx, idx.shape).h

    def bcast(self, v, name, out_shape, nhwc) -> Act:
        """Act of value ``v`` broadcast to ``out_shape`` in the output's order (a recorded view)."""
        a = v if isinstance(v, Act) else self.act(name)
        out_shape = tuple(out_shape)
        if a.shape == out_shape and a.nhwc == nhwc:
            return a
        idx = np.broadcast_to(np.arange(a.size, dtype=np.int64).reshape((1,) * (len(out_shape) - len(a.shape))
                                                                         + a.shape), out_shape)
        if nhwc:
            idx = idx.transpose(0, 2, 3, 1)
        return self.view(a, idx, idx.shape)

    def nhwc_act(self, x: Act):
        """(Act whose handle holds x as rows of channels, that handle shaped (N*H*W, C))."""
        n, c, hh, w = x.shape
        if x.nhwc:
            return x, self.operand_raw(x.h, (n * hh * w, c))
        idx = np.arange(x.size, dtype=np.int64).reshape(x.shape).transpose(0, 2, 3, 1)
        v = self.view(x, idx, (n, hh, w, c))
        return v, self.operand_raw(v.h, (n * hh * w, c))

    def data(self, node, ins) -> Act:
        """The first input as an Act (a constant or weight gets a device tensor)."""
        return ins[0] if isinstance(ins[0], Act) else self.act(node.input[0])

    def set_output(self, node, act):
        self.vals[node.output[0]] = act
