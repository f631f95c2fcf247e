"""Lowering an ONNX graph onto the backend op vocabulary (``models/backend.py`` + ``ops.py``).

Values are either numpy arrays (constants: initializers, ``Constant`` nodes and everything folded
from them and from shapes) or :class:`Act` (a tensor on the device: a backend handle plus its
ONNX shape).  Nodes whose inputs are all constants are evaluated here with ``onnx.reference``
(constant folding: ``Shape``/``Gather``/``Concat``/``Range``/... on shapes, masks, ...); the rest
become backend ops named after the ONNX node.

Layout: activations are stored row-major in their ONNX shape, except convolution / pooling
results, kept as rows of channels ``(N*H*W, C)`` (the op library's NHWC layout, ``nhwc=True``);
a consumer that needs NCHW order reads them through a view (a rearranging copy on the device).
Reshape / Transpose / Slice / Split / Squeeze / Unsqueeze / Flatten / Expand / Gather with
constant indices are views (flat element indices), so they cost nothing until an op must
rearrange the data (as Poplar's views).

Fused patterns: the Erf-based GELU (``x * 0.5 * (1 + erf(x / sqrt 2))``) becomes one ``gelu``
op and the decomposed layer norm (``ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div [, Mul, Add]``)
one ``layer_norm`` op, as exporters emit them for ``torch.nn.GELU`` / ``LayerNorm``.
"""

from __future__ import annotations

import math
import re

import numpy as np

from popvision_lite.emulator.ops.context import View
from popvision_lite.emulator.ops.norm_pool import global_windows

from .loader import OnnxImportError

# Op types lowered onto device ops.  A node whose inputs are all known when the graph is built (initializers,
# Constant nodes, integer inputs, shapes and everything computed from those) is evaluated then, whatever its
# type (constant folding with ONNX's reference implementation, ``onnx.reference``).
DEVICE_OPS = (
    "Abs", "Add", "AveragePool", "BatchNormalization", "Cast", "Concat", "Conv", "CumSum", "DepthToSpace", "Div",
    "Dropout", "Einsum", "Erf", "Exp", "Expand", "Flatten", "Gather", "GatherElements", "GatherND", "Gelu", "Gemm",
    "GlobalAveragePool", "HardSigmoid", "HardSwish", "Identity", "IsInf", "IsNaN", "LayerNormalization",
    "LeakyRelu", "MatMul", "Max", "MaxPool", "Min", "Mul", "Neg", "Pad", "Pow", "Reciprocal", "ReduceL2",
    "ReduceMean", "ReduceSum", "ReduceSumSquare", "Relu", "Reshape", "Sigmoid", "Slice", "Softmax", "SpaceToDepth",
    "Split", "Sqrt", "Squeeze", "Sub", "Tanh", "Tile", "Transpose", "Trilu", "Unsqueeze", "Where", "Clip",
)
# Examples of ops seen folded in exported models (any op of the default domain folds when its inputs are known).
FOLD_ONLY_OPS = (
    "And", "Ceil", "Constant", "ConstantOfShape", "Equal", "Floor", "Greater", "GreaterOrEqual", "Less",
    "LessOrEqual", "Log", "Not", "Or", "Range", "ReduceMax", "ReduceMin", "ReduceProd", "Shape", "Size",
    "Mod", "Sign", "NonZero", "ScatterND", "OneHot", "Cos", "Sin",
)
SUPPORTED_OPS = tuple(sorted(set(DEVICE_OPS) | set(FOLD_ONLY_OPS)))
# the attributes each device op honours; any other attribute on a node is refused by name (never ignored)
KNOWN_ATTRS = {
    "BatchNormalization": {"epsilon", "momentum", "training_mode", "spatial"}, "Cast": {"to", "saturate"},
    "Concat": {"axis"}, "Conv": {"kernel_shape", "strides", "pads", "dilations", "group", "auto_pad"},
    "CumSum": {"exclusive", "reverse"}, "DepthToSpace": {"blocksize", "mode"}, "Dropout": {"seed"},
    "Einsum": {"equation"}, "Flatten": {"axis"}, "Gather": {"axis"}, "GatherElements": {"axis"},
    "GatherND": {"batch_dims"}, "Gelu": {"approximate"}, "Gemm": {"alpha", "beta", "transA", "transB"},
    "HardSigmoid": {"alpha", "beta"}, "IsInf": {"detect_negative", "detect_positive"},
    "LayerNormalization": {"axis", "epsilon", "stash_type"}, "LeakyRelu": {"alpha"},
    "MaxPool": {"kernel_shape", "strides", "pads", "dilations", "ceil_mode", "auto_pad", "storage_order"},
    "AveragePool": {"kernel_shape", "strides", "pads", "dilations", "ceil_mode", "auto_pad", "count_include_pad"},
    "Pad": {"mode", "pads", "value"}, "ReduceMean": {"axes", "keepdims", "noop_with_empty_axes"},
    "ReduceSum": {"axes", "keepdims", "noop_with_empty_axes"},
    "ReduceSumSquare": {"axes", "keepdims", "noop_with_empty_axes"},
    "ReduceL2": {"axes", "keepdims", "noop_with_empty_axes"},
    "Reshape": {"allowzero", "shape"},
    "Slice": {"starts", "ends", "axes"}, "Softmax": {"axis"}, "SpaceToDepth": {"blocksize"},
    "Split": {"axis", "split", "num_outputs"}, "Squeeze": {"axes"}, "Unsqueeze": {"axes"}, "Transpose": {"perm"},
    "Trilu": {"upper"}, "Clip": {"min", "max"},
}
# device ops with a backward pass (--training); the rest are refused in training runs
TRAINABLE_OPS = ("Add", "AveragePool", "BatchNormalization", "Cast", "Clip", "Concat", "Conv", "CumSum",
                 "DepthToSpace", "Div", "Dropout", "Einsum", "Exp", "Expand", "Flatten", "Gather", "GatherElements",
                 "GatherND", "Gelu", "Gemm", "GlobalAveragePool", "HardSigmoid", "HardSwish", "Identity", "IsInf", "IsNaN",
                 "LayerNormalization", "MatMul", "MaxPool", "Mul", "Neg", "Pad", "Pow", "Reciprocal", "ReduceL2",
                 "ReduceMean", "ReduceSum", "ReduceSumSquare", "Relu", "Reshape", "Sigmoid", "Slice", "Softmax",
                 "SpaceToDepth", "Split", "Sqrt", "Squeeze", "Sub", "Tanh", "Tile", "Transpose", "Trilu",
                 "Unsqueeze", "Where")
# pure data movement: lowered as views, their index computed by the op itself on an index array
INDEX_OPS = ("DepthToSpace", "GatherElements", "GatherND", "Pad", "SpaceToDepth", "Tile", "Trilu")
# rearrangements of a weight that stay a weight when folded
PARAM_FOLDABLE = {"Transpose", "Reshape", "Identity", "Cast", "Squeeze", "Unsqueeze", "Flatten"}


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


_BLOCK = re.compile(r"^(.*?(?:^|[/.])(?:layers?|blocks?|h|stages?|encoder\.layer|decoder\.layer)[./_](\d+))(?=[/.]|$)")


def _block_key(node) -> str | None:
    """The repeated module a node belongs to (``.../layer.3``, ``.../blocks.0``), from its name or, for
    torch.export's generic node names, its ``pkg.torch.onnx.name_scopes`` metadata; None outside one."""
    texts = [node.name.lstrip("/")] + [p.value for p in node.metadata_props if "name_scopes" in p.key]
    for t in texts:
        if t.startswith("["):  # a list of scopes ("['', 'm', 'm.layers', 'm.layers.0', ...]")
            t = t.strip("[]").replace("'", "").replace(" ", "").split(",")[-1]
        m = _BLOCK.match(t)
        if m:
            return m.group(1)
    return None


def find_blocks(nodes) -> list[tuple[int, int]]:
    """Recomputation blocks: for every repeated module (a name ending in a layer number, two numbers or more
    with the same stem), the node range from its first node to its last; ranges that overlap are dropped."""
    first, last = {}, {}
    for i, n in enumerate(nodes):
        k = _block_key(n)
        if k is not None:
            first.setdefault(k, i)
            last[k] = i
    stems: dict = {}
    for k in first:
        stems.setdefault(re.sub(r"\d+$", "", k), []).append(k)
    keys = [k for ks in stems.values() if len(ks) >= 2 for k in ks]
    ranges = sorted((first[k], last[k] + 1) for k in keys)
    out = []
    for r in ranges:
        if out and r[0] < out[-1][1]:
            if r[1] <= out[-1][1]:
                continue  # nested (a block inside a block): keep the outer one
            return []  # interleaved blocks: no clean checkpoints
        out.append(r)
    return out


def evaluate_node(node, feeds: dict, opset: int) -> list:
    """Outputs of one ONNX node on known inputs: ONNX's reference implementation (``onnx.reference``), else
    ONNX Runtime on a one-node model (for the ops the reference implementation gets wrong or lacks)."""
    from onnx.reference import ReferenceEvaluator

    try:
        return ReferenceEvaluator(node, opsets={"": opset}).run(None, feeds)
    except Exception as first:
        try:
            return _evaluate_onnxruntime(node, feeds, opset)
        except Exception as second:
            raise ValueError(f"{type(first).__name__}: {first} (onnx.reference); {type(second).__name__}: "
                             f"{str(second).strip().splitlines()[0] if str(second).strip() else ''} "
                             "(onnxruntime)") from None


def _evaluate_onnxruntime(node, feeds, opset):
    import onnxruntime as ort
    from onnx import helper, shape_inference

    ins = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(np.asarray(v).dtype), np.shape(v))
           for k, v in feeds.items()]
    outs = [helper.make_empty_tensor_value_info(o) for o in node.output if o]
    m = helper.make_model(helper.make_graph([node], "fold", ins, outs),
                          opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = min(m.ir_version, 10)
    inferred = shape_inference.infer_shapes(m)
    types = {v.name: v for v in inferred.graph.value_info}
    del m.graph.output[:]
    m.graph.output.extend(types.get(o) or helper.make_empty_tensor_value_info(o) for o in node.output if o)
    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def _ints(v) -> list[int]:
    return [int(x) for x in np.asarray(v).ravel()]


def _attrs(node) -> dict:
    from onnx import helper

    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _is_identity(idx: np.ndarray, n: int) -> bool:
    flat = idx.ravel()
    if flat.size != n or n == 0:
        return flat.size == n
    if flat[0] != 0 or flat[-1] != n - 1 or (n > 64 and not np.array_equal(flat[:64], np.arange(64))):
        return False
    return bool(np.array_equal(flat, np.arange(n, dtype=flat.dtype)))


class Lowerer:
    """Walks the graph in order and builds it on backend ``be``."""

    def __init__(self, be, lm, input_values: dict, ipus: int = 1, training: bool = False, ipu_split=None,
                 recompute: bool = False):
        self.be = be
        self.training = bool(training)
        self.tape: list = []        # (output Act, backward fn(dy) -> [(Act or param name, grad handle)])
        self.tape_block: list = []  # the recomputation block (index into self.blocks) of each tape entry, or -1
        self._cur_block = -1
        self._const_acts: dict = {}  # constant / weight name -> its Act (one per name, so grads add up)
        self.act_param: dict = {}    # id(Act) -> weight name
        self.rg: set = set()         # ids of Acts a weight flows into (they need gradients)
        self._perm_cache: dict = {}
        self.lm = lm
        self.graph = lm.model.graph
        self.opset = lm.opset
        self.vals: dict = {}
        self.params: set[str] = set()
        self.handles: dict = {}   # const name -> backend tensor
        self.notes: list[str] = []
        self.ipus = max(1, int(ipus))
        self.ipu_split = list(ipu_split or [])
        self.placement: dict[str, int] = {}
        self.op_count = 0
        for name, arr in lm.initializers.items():
            self.vals[name] = arr
            if np.issubdtype(arr.dtype, np.floating) and arr.size > 1:
                self.params.add(name)
        for name, (shape, _et) in lm.inputs.items():
            v = input_values[name]
            if np.issubdtype(np.asarray(v).dtype, np.floating):
                self.vals[name] = Act(be.input(name, np.asarray(v).reshape(canon(shape))), shape)
            else:  # integer / bool inputs (ids, masks) are known when the graph is built
                self.vals[name] = np.asarray(v)
        self._consumers = {}
        for i, n in enumerate(self.graph.node):
            for x in n.input:
                if x:
                    self._consumers.setdefault(x, []).append(i)
        self._producer = {o: i for i, n in enumerate(self.graph.node) for o in n.output if o}
        self._ranks = {}
        for vi in list(self.graph.value_info) + list(self.graph.input) + list(self.graph.output):
            if vi.type.HasField("tensor_type") and vi.type.tensor_type.HasField("shape"):
                self._ranks[vi.name] = len(vi.type.tensor_type.shape.dim)
        self.skip, self.fused = self._find_patterns()
        self._place()
        self.blocks = find_blocks(self.graph.node) if recompute and self.training else []
        self.block_of = np.full(len(self.graph.node), -1, dtype=np.int64)
        for b, (s0, e0) in enumerate(self.blocks):
            self.block_of[s0:e0] = b

    # ------------------------------------------------------------------ placement
    def _place(self):
        """IPU of each node: layers balanced by the bytes of the weights they read (in graph order)."""
        nodes = self.graph.node
        own = np.array([sum(self.lm.initializers[x].nbytes for x in n.input if x in self.params) for n in nodes],
                       dtype=np.float64)
        total = own.sum()
        if self.ipu_split:
            self._user_split(nodes, own)
            return
        if self.ipus == 1 or total == 0:
            self.ipu_of = np.zeros(len(nodes), dtype=np.int64)
            self.weight_bytes_per_ipu = [int(total)] + [0] * (self.ipus - 1)
            return
        mid = np.cumsum(own) - own / 2
        ipu = np.minimum(self.ipus - 1, (mid / total * self.ipus).astype(np.int64))
        self.ipu_of = np.maximum.accumulate(ipu)  # never move back to an earlier IPU
        self.weight_bytes_per_ipu = [int(own[self.ipu_of == k].sum()) for k in range(self.ipus)]

    def _user_split(self, nodes, own):
        """IPU k + 1 starts at the k-th node named in ``ipu_split`` (graph order)."""
        if len(self.ipu_split) != self.ipus - 1:
            raise OnnxImportError(f"--ipu-split: {len(self.ipu_split)} node name(s) for {self.ipus} IPUs; give "
                                  f"{self.ipus - 1} (the first node of IPU 1, 2, ...)")
        names = [self.node_name(i, n) for i, n in enumerate(nodes)]
        pos = []
        for nm in self.ipu_split:
            hits = [i for i, (a, n) in enumerate(zip(names, nodes, strict=True)) if nm in (a, n.name)]
            if not hits:
                raise OnnxImportError(f"--ipu-split: {self.lm.path} has no node named '{nm}' (e.g. "
                                      f"{', '.join(names[:3])})")
            pos.append(hits[0])
        if pos != sorted(pos) or len(set(pos)) != len(pos):
            raise OnnxImportError("--ipu-split: the nodes must be given in graph order, each once")
        self.ipu_of = np.zeros(len(nodes), dtype=np.int64)
        for p_ in pos:
            self.ipu_of[p_:] += 1
        self.weight_bytes_per_ipu = [int(own[self.ipu_of == k].sum()) for k in range(self.ipus)]

    # ------------------------------------------------------------------ helpers
    def node_name(self, i, node) -> str:
        return (node.name or f"{node.op_type}_{i}").strip("/") or f"{node.op_type}_{i}"

    def static_const(self, name):
        """Value of ``name`` if it is an initializer or a Constant node's output (pattern matching)."""
        if name in self.lm.initializers:
            return self.lm.initializers[name]
        i = self._producer.get(name)
        if i is not None and self.graph.node[i].op_type == "Constant":
            from onnx import numpy_helper

            a = _attrs(self.graph.node[i])
            if "value" in a:
                return numpy_helper.to_array(a["value"])
            for k in ("value_float", "value_int"):
                if k in a:
                    return np.asarray(a[k])
        return None

    def tensor_of(self, name, value=None):
        """Backend tensor of a constant value (weights for float initializers, constants otherwise)."""
        if name in self.handles:
            return self.handles[name]
        v = np.asarray(self.vals[name] if value is None else value)
        if not getattr(self.be, "needs_values", True):  # timing only: shapes, no data
            v = np.broadcast_to(np.float32(0), canon(v.shape))
        else:
            v = v.astype(np.float32).reshape(canon(v.shape))
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

    def view(self, a: Act, idx, shape) -> Act:
        """Act of logical ``shape`` whose elements are ``a``'s logical elements ``idx``."""
        idx = np.asarray(idx, dtype=np.int64)
        p = a.phys()
        if p is not None:
            idx = p[idx]
        flat = idx.ravel()
        pidx = flat
        base = a.h.base if isinstance(a.h, View) else a.h
        if isinstance(a.h, View):
            flat = a.h.index.reshape(-1)[flat]
        if _is_identity(flat, int(np.prod(base.shape))):
            out = Act(base, shape)
        else:
            out = Act(View(base, flat.reshape(canon(shape))), shape)
        if self.training:
            self._rec(out, [a], lambda dy: [(a, lambda: self._view_bwd(dy, pidx, a.size))])
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
            self._rec(out, [a], lambda dy: [(a, lambda: dy)])
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

    # ------------------------------------------------------------------ training
    def _rec(self, out, deps, fn, force=False):
        """Record ``out``'s backward ``fn(dy) -> [(input Act or weight name, thunk of its gradient)]``
        when a weight is upstream (``deps`` need gradients, or ``force``)."""
        if force or any(id(d) in self.rg for d in deps if d is not None):
            self.rg.add(id(out))
            self.tape.append((out, fn))
            self.tape_block.append(self._cur_block)

    def _need(self, target) -> bool:
        return (target in self.params) if isinstance(target, str) else id(target) in self.rg

    def _no_backward(self, what, name):
        raise OnnxImportError(f"{self.lm.path}: node '{name}': --training: {what} has no backward pass yet; "
                              f"training supports: {', '.join(TRAINABLE_OPS)} (run without --training)")

    def _view_bwd(self, dy, pidx, n):
        """Gradient of a view (elements ``pidx`` of a tensor of ``n`` elements) given ``dy``."""
        be = self.be
        m = int(pidx.size)
        counts = np.bincount(pidx, minlength=n)
        if m == n and counts.max(initial=0) == 1:  # a permutation: the inverse view
            inv = np.empty(n, dtype=np.int64)
            inv[pidx] = np.arange(n, dtype=np.int64)
            if _is_identity(inv, n):
                return dy
            return be.take(dy, inv)
        if counts.max(initial=0) <= 1:  # a subset (slice / split): zeros where nothing was read
            zero = self.tensor_of(f"zero/{n}_{m}", np.zeros(1, np.float32))
            cat = be.concat([(self.operand_raw(dy, (m,)), (m,)), (zero, (1,))], 0, (m + 1,), f"view_bwd/{n}_{m}")
            src = np.full(n, m, dtype=np.int64)
            src[pidx] = np.arange(m, dtype=np.int64)
            return be.take(cat, src)
        if n * m > 1 << 24:
            raise OnnxImportError(f"{self.lm.path}: --training: the gradient of a broadcast of a {n}-element "
                                  "tensor is not supported at this size")
        S = np.zeros((n, m), np.float32)
        S[pidx, np.arange(m)] = 1.0
        key = f"scatter/{n}_{m}_{self.op_count}_{len(self.tape)}"
        return be.matmul(self.tensor_of(key, S), self.operand_raw(dy, (m, 1)), key)

    def backward(self, outputs: dict, loss_output=None, lr: float = 0.01):
        """Backward pass from loss = mean of ``loss_output`` (default: sum of the means of all device
        outputs), then SGD on every weight that got a gradient; returns {weight name: updated handle}."""
        be = self.be
        names = [loss_output] if loss_output else [k for k, v in outputs.items() if isinstance(v, Act)]
        if loss_output and loss_output not in outputs:
            raise OnnxImportError(f"--loss-output: '{loss_output}' is not a graph output (outputs: "
                                  f"{', '.join(outputs)})")
        grads: dict = {}

        def like(g, ref):  # the same elements in the other gradient's handle shape
            return g if tuple(g.shape) == tuple(ref.shape) else self.operand_raw(g, tuple(ref.shape))

        def acc(key, g):
            grads[key] = be.add(grads[key], like(g, grads[key]), f"grad_acc/{len(grads)}") if key in grads else g

        for nm in names:
            a = outputs[nm]
            if not isinstance(a, Act):
                continue
            seed = self.tensor_of(f"loss/{nm}/dy", np.full(canon(a.shape), 1.0 / a.size, np.float32))
            acc(id(a), seed)
        objs = {}
        for out, _ in self.tape:
            objs[id(out)] = out
        def step(out, fn):
            g = grads.pop(id(out), None)
            if g is None:
                return
            if hasattr(out.h, "shape") and int(np.prod(out.h.shape)) == int(np.prod(g.shape)):
                g = like(g, out.h)  # the backward reads dy in its forward output's handle shape
            for target, thunk in fn(g):
                if target is None:
                    continue
                key = target if isinstance(target, str) else self.act_param.get(id(target), None)
                if key is None:
                    if id(target) not in self.rg:
                        continue
                    key = id(target)
                elif key not in self.params:
                    continue
                acc(key, thunk())

        done = set()
        with be.scope("bwd"):
            n_fwd = len(self.tape)
            for k in range(n_fwd - 1, -1, -1):
                b = self.tape_block[k]
                if b < 0:
                    step(*self.tape[k])
                elif b not in done:  # recomputation: the block's forward again, then its backward on that
                    done.add(b)
                    for out, fn in reversed(self._recompute_block(b, grads, acc)):
                        step(out, fn)
        updated = {}
        for key, g in grads.items():
            if isinstance(key, str) and key in self.handles and key in self.params:
                updated[key] = be.sgd(self.handles[key], like(g, self.handles[key]), lr, f"{key}/sgd")
        return updated

    def _recompute_block(self, b, grads, acc):
        """Lower block ``b``'s nodes again (from its inputs, kept from the forward pass: the checkpoints) and
        return the tape entries of that second forward; the gradients waiting on the block's first-forward
        outputs move to the recomputed ones.  The first forward's activations inside the block are then read
        by nothing after the forward pass, so they are not live during the backward (the memory recomputation
        saves)."""
        s0, e0 = self.blocks[b]
        nodes = self.graph.node
        produced = [o for i in range(s0, e0) for o in nodes[i].output if o]
        old = {o: self.vals.get(o) for o in produced}
        n0 = len(self.tape)
        with self.be.scope("recompute"):
            self._lower_range(s0, e0)
        self._cur_block = -1
        for o in produced:
            a, new = old[o], self.vals.get(o)
            if isinstance(a, Act) and isinstance(new, Act) and id(a) in grads:
                acc(id(new), grads.pop(id(a)))
        entries = self.tape[n0:]
        del self.tape[n0:], self.tape_block[n0:]
        return entries

    # ------------------------------------------------------------------ patterns
    def _sole(self, name):
        c = self._consumers.get(name, [])
        outs = {o.name for o in self.graph.output}
        return c[0] if len(c) == 1 and name not in outs else None

    def _const_near(self, name, target, tol=1e-3):
        v = self.static_const(name)
        return v is not None and np.asarray(v).size == 1 and abs(float(np.asarray(v).ravel()[0]) - target) <= tol

    def _other(self, node, name):
        ins = list(node.input)
        if len(ins) != 2 or name not in ins:
            return None
        return ins[1] if ins[0] == name else ins[0]

    def _find_patterns(self):
        nodes = self.graph.node
        skip, fused = set(), {}
        for i, n in enumerate(nodes):
            if n.op_type == "Erf":
                r = self._match_gelu(i)
                if r:
                    members, last, x = r
                    skip |= set(members) - {last}
                    fused[last] = ("gelu", x)
            elif n.op_type == "ReduceMean":
                r = self._match_layer_norm(i)
                if r:
                    members, last, x, g, b, eps = r
                    skip |= set(members) - {last}
                    fused[last] = ("layer_norm", x, g, b, eps)
        return skip, fused

    def _match_gelu(self, ie):
        nodes = self.graph.node
        e = nodes[ie]
        ip = self._producer.get(e.input[0])
        if ip is None or self._sole(e.input[0]) != ie:
            return None
        p = nodes[ip]
        x = None
        if p.op_type == "Div" and self._const_near(p.input[1], math.sqrt(2.0)):
            x = p.input[0]
        elif p.op_type == "Mul":
            for a, b in ((0, 1), (1, 0)):
                if self._const_near(p.input[b], 1 / math.sqrt(2.0)):
                    x = p.input[a]
        if x is None:
            return None
        ia = self._sole(e.output[0])
        if ia is None or nodes[ia].op_type != "Add" or not self._const_near(self._other(nodes[ia], e.output[0]) or "", 1.0):
            return None
        im = self._sole(nodes[ia].output[0])
        if im is None or nodes[im].op_type != "Mul":
            return None
        other = self._other(nodes[im], nodes[ia].output[0])
        members = [ip, ie, ia, im]
        if other is not None and other != x and self._const_near(other, 0.5):  # (0.5 * (1 + erf)) * x
            ix = self._sole(nodes[im].output[0])
            if ix is None or nodes[ix].op_type != "Mul" or self._other(nodes[ix], nodes[im].output[0]) != x:
                return None
            return [*members, ix], ix, x
        if other == x:  # x * (1 + erf) then * 0.5
            ih = self._sole(nodes[im].output[0])
            if ih is None or nodes[ih].op_type != "Mul" or not self._const_near(
                    self._other(nodes[ih], nodes[im].output[0]) or "", 0.5):
                return None
            return [*members, ih], ih, x
        ih = self._producer.get(other or "")
        if ih is None or nodes[ih].op_type != "Mul" or self._sole(other) != im:
            return None
        h = nodes[ih]
        if x in h.input and self._const_near(self._other(h, x) or "", 0.5):
            return [*members, ih], im, x
        return None

    def _axes_last(self, node, x):
        a = _attrs(node)
        axes = a.get("axes")
        if axes is None and len(node.input) > 1 and node.input[1]:
            v = self.static_const(node.input[1])
            axes = None if v is None else _ints(v)
        if axes is None or len(axes) != 1:
            return False
        r = self._ranks.get(x)
        return axes[0] == -1 or (r is not None and axes[0] == r - 1)

    def _match_layer_norm(self, ir):
        nodes = self.graph.node
        m = nodes[ir]
        x = m.input[0]
        if not self._axes_last(m, x):
            return None
        isub = self._sole(m.output[0])
        if isub is None or nodes[isub].op_type != "Sub" or list(nodes[isub].input) != [x, m.output[0]]:
            return None
        d = nodes[isub].output[0]
        cons = self._consumers.get(d, [])
        if len(cons) != 2 or d in {o.name for o in self.graph.output}:
            return None
        ipow = next((c for c in cons if nodes[c].op_type == "Pow" and self._const_near(nodes[c].input[1], 2.0)
                     or nodes[c].op_type == "Mul" and list(nodes[c].input) == [d, d]), None)
        idiv = next((c for c in cons if nodes[c].op_type == "Div" and nodes[c].input[0] == d), None)
        if ipow is None or idiv is None:
            return None
        im2 = self._sole(nodes[ipow].output[0])
        if im2 is None or nodes[im2].op_type != "ReduceMean" or not self._axes_last(nodes[im2], x):
            return None
        iadd = self._sole(nodes[im2].output[0])
        if iadd is None or nodes[iadd].op_type != "Add":
            return None
        eps = self._other(nodes[iadd], nodes[im2].output[0])
        if eps is None or self.static_const(eps) is None or np.size(self.static_const(eps)) != 1:
            return None
        eps = float(np.asarray(self.static_const(eps)).ravel()[0])
        isq = self._sole(nodes[iadd].output[0])
        if isq is None or nodes[isq].op_type != "Sqrt" or self._sole(nodes[isq].output[0]) != idiv:
            return None
        if list(nodes[idiv].input) != [d, nodes[isq].output[0]]:
            return None
        members = [ir, isub, ipow, im2, iadd, isq, idiv]
        last, g, b = idiv, None, None
        inext = self._sole(nodes[idiv].output[0])
        if inext is not None and nodes[inext].op_type == "Mul":
            gg = self._other(nodes[inext], nodes[idiv].output[0])
            if gg is not None and gg in self.lm.initializers and self.lm.initializers[gg].ndim == 1:
                g, last = gg, inext
                members.append(inext)
                inext = self._sole(nodes[inext].output[0])
                if inext is not None and nodes[inext].op_type == "Add":
                    bb = self._other(nodes[inext], nodes[last].output[0])
                    if bb is not None and bb in self.lm.initializers and self.lm.initializers[bb].ndim == 1:
                        b, last = bb, inext
                        members.append(inext)
        return members, last, x, g, b, eps

    # ------------------------------------------------------------------ the walk
    def run(self, progress=None):
        self._lower_range(0, len(self.graph.node), progress)
        return {o: self.vals[o] for o in self.lm.outputs}

    def _lower_range(self, start, stop, progress=None):
        nodes = self.graph.node
        n = len(nodes)
        for i in range(start, stop):
            node = nodes[i]
            self._cur_block = int(self.block_of[i])
            if progress and i % 50 == 0:
                progress(i / max(1, n))
            if i in self.skip:
                continue
            with self.be.on_ipu(int(self.ipu_of[i])):
                try:
                    if i in self.fused:
                        self._lower_fused(i, node, self.fused[i])
                    else:
                        self._lower(i, node)
                except (ValueError, IndexError, KeyError, TypeError, AttributeError) as e:
                    # a malformed node (attributes / shapes the op cannot have): name it, no traceback
                    raise OnnxImportError(f"{self.lm.path}: node '{self.node_name(i, node)}' ({node.op_type}) cannot "
                                          f"be lowered: {type(e).__name__}: {e}") from None
        self._cur_block = -1

    def _lower_fused(self, i, node, spec):
        name = self.node_name(i, node)
        out = node.output[0]
        if spec[0] == "gelu":
            x = self.act(spec[1])
            self.vals[out] = self._unary_act("gelu_erf", x, name + "/gelu")
        else:
            _, xn, g, b, eps = spec
            x = self.act(xn)
            row = x.shape[-1]
            gname, bname = g or f"{name}/gamma", b or f"{name}/beta"
            gam = self.tensor_of(g) if g else self.tensor_of(gname, np.ones(row, np.float32))
            bet = self.tensor_of(b) if b else self.tensor_of(bname, np.zeros(row, np.float32))
            self.vals[out] = self._layer_norm(x, row, gam, bet, gname, bname, name + "/layer_norm", eps)
        self.op_count += 1

    def _fold(self, i, node, ins):
        feeds = {nm: np.asarray(v) for nm, v in zip(node.input, ins, strict=False) if nm}
        try:
            res = evaluate_node(node, feeds, self.opset)
        except Exception as e:
            raise OnnxImportError(f"{self.lm.path}: node '{self.node_name(i, node)}' ({node.op_type}) could not be "
                                  f"evaluated on its constant inputs: {e}") from None
        for o, r in zip(node.output, res, strict=False):
            if o:
                self.vals[o] = np.asarray(r)

    def _lower(self, i, node):
        op = node.op_type
        name = self.node_name(i, node)
        default_domain = node.domain in ("", "ai.onnx")
        if op == "Constant" and default_domain:
            return self._fold(i, node, [])
        ins = []
        for x in node.input:
            if not x:
                ins.append(None)
                continue
            if x not in self.vals:
                raise OnnxImportError(f"{self.lm.path}: node '{name}' reads '{x}', which no "
                                      "node, input or initializer defines")
            ins.append(self.vals[x])
        acts = [v for v in ins if isinstance(v, Act)]
        if op in ("Shape", "Size") and acts and default_domain:
            shape = acts[0].shape
            a = _attrs(node)
            if op == "Size":
                self.vals[node.output[0]] = np.asarray(int(np.prod(shape)), np.int64)
            else:
                self.vals[node.output[0]] = np.asarray(shape[a.get("start", 0):a.get("end", len(shape))], np.int64)
            return None
        has_param = any(x in self.params for x in node.input if x)
        device = default_domain and op in DEVICE_OPS
        if not acts and default_domain and not (op == "Gather" and has_param) and (
                not has_param or op in PARAM_FOLDABLE or not self.training or not device):
            # every input known when the graph is built: evaluate the node now.  A weight folded through a
            # rearrangement (or, in inference, any op) stays a weight (it is held in tile memory as one).
            self._fold(i, node, ins)
            if has_param:
                if self.training and op not in PARAM_FOLDABLE:
                    self.notes.append(f"node '{name}': {op} of weights evaluated when the graph is built; the "
                                      "result is not trained")
                for o in node.output:
                    v = self.vals.get(o)
                    if v is not None and np.issubdtype(np.asarray(v).dtype, np.floating) and np.size(v) > 1:
                        self.params.add(o)
            return None
        if not device:
            dom = f" (domain '{node.domain}')" if not default_domain else ""
            raise OnnxImportError(
                f"{self.lm.path}: node '{name}': op type '{op}'{dom} is not supported on values computed on the "
                f"device (any node whose inputs are all constants is evaluated when the graph is built); supported: {', '.join(DEVICE_OPS)}")
        unknown = sorted({a.name for a in node.attribute} - KNOWN_ATTRS.get(op, set()))
        if unknown:
            raise OnnxImportError(f"{self.lm.path}: node '{name}': attribute{'s' if len(unknown) > 1 else ''} "
                                  f"{', '.join(unknown)} of {op} cannot be honoured by the emulator's op library "
                                  f"(honoured: {', '.join(sorted(KNOWN_ATTRS.get(op, ()))) or 'none'})")
        self.op_count += 1
        if self.training and op not in TRAINABLE_OPS and (
                any(isinstance(v, Act) and id(v) in self.rg for v in ins) or any(x in self.params for x in node.input)):
            self._no_backward(f"op type '{op}'", name)
        if op in INDEX_OPS:
            return self._index_op(i, node, ins, name)
        getattr(self, "_op_" + op)(i, node, ins, name)
        return None
    def _set(self, node, act):
        self.vals[node.output[0]] = act

    # ------------------------------------------------------------------ elementwise
    def _unary(self, kind):
        def f(i, node, ins, name):
            self._set(node, self._unary_act(kind, ins[0], name))
        return f

    def _unary_act(self, kind, a, name, s=None):
        be = self.be
        if kind == "relu":
            h = be.relu(a.h, name)
        elif kind == "gelu":
            h = be.gelu(a.h, name)
        elif kind == "scale":
            h = be.scale(a.h, s, name)
        else:
            h = be.unary(a.h, kind, name, s=s)
        out = Act(h, a.shape, a.nhwc)
        if self.training and kind in ("isnan", "isinf"):  # a mask: no gradient flows through it
            return out
        if self.training:
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
            elif kind in ("hard_sigmoid", "hard_swish"):
                g = lambda dy: be.binary(a.h, dy, kind + "_bwd", bn)  # noqa: E731
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
            if g is None and id(a) in self.rg:
                self._no_backward(f"elementwise '{kind}'", name)
            if g is not None:
                self._rec(out, [a], lambda dy: [(a, lambda: g(dy))])
        return out

    def __getattr__(self, item):
        table = {"_op_Relu": "relu", "_op_Tanh": "tanh", "_op_Sigmoid": "sigmoid",
                 "_op_Sqrt": "sqrt", "_op_Reciprocal": "reciprocal", "_op_Erf": "erf", "_op_Exp": "exp",
                 "_op_Neg": "neg", "_op_Abs": "abs", "_op_IsNaN": "isnan"}
        if item in table:
            return self._unary(table[item])
        raise AttributeError(item)

    def _op_IsInf(self, i, node, ins, name):
        at = _attrs(node)
        if (at.get("detect_negative", 1), at.get("detect_positive", 1)) != (1, 1):
            raise OnnxImportError(f"{self.lm.path}: node '{name}': IsInf with detect_negative "
                                  f"{at.get('detect_negative', 1)} / detect_positive {at.get('detect_positive', 1)}"
                                  " cannot be honoured (the op library's IS_INF detects both signs)")
        self._set(node, self._unary_act("isinf", self._data(node, ins), name))

    def _op_HardSigmoid(self, i, node, ins, name):
        at = _attrs(node)
        alpha, beta = float(at.get("alpha", 0.2)), float(at.get("beta", 0.5))
        if abs(alpha - 1 / 6) < 1e-7 and beta == 0.5:  # torch's hardsigmoid: one fused elementwise op
            self._set(node, self._unary_act("hard_sigmoid", self._data(node, ins), name))
            return
        self._set(node, self._hard_sigmoid(self._data(node, ins), alpha, beta, name))

    def _hard_sigmoid(self, a, alpha, beta, name):
        """max(0, min(1, alpha x + beta)): popops' scaled add, then clamps (one elementwise op each)."""
        t = self._unary_act("scale", a, name + "/scale", alpha)
        t = self._unary_act("add_scalar", t, name + "/shift", beta)
        t = self._unary_act("max_scalar", t, name + "/max", 0.0)
        return self._unary_act("min_scalar", t, name, 1.0)

    def _op_HardSwish(self, i, node, ins, name):
        self._set(node, self._unary_act("hard_swish", self._data(node, ins), name))

    def _op_Clip(self, i, node, ins, name):
        a = self._data(node, ins)
        at = _attrs(node)
        bounds = [ins[1] if len(ins) > 1 else at.get("min"), ins[2] if len(ins) > 2 else at.get("max")]
        if any(isinstance(b, Act) for b in bounds):
            raise OnnxImportError(f"{self.lm.path}: node '{name}': Clip with bounds computed on the device is not "
                                  "supported (they must be known when the graph is built)")
        lo, hi = (None if b is None or np.size(b) == 0 else float(np.asarray(b).ravel()[0]) for b in bounds)
        if lo is None and hi is None:
            return self._op_Identity(i, node, [a], name)
        y = a
        if lo is not None:
            y = self._unary_act("max_scalar", y, name + ("/min" if hi is not None else ""), lo)
        if hi is not None:
            y = self._unary_act("min_scalar", y, name, hi)
        self._set(node, y)
        return None

    def _op_LeakyRelu(self, i, node, ins, name):
        a = self._data(node, ins)
        alpha = float(_attrs(node).get("alpha", 0.01))
        t = self._unary_act("scale", a, name + "/alpha", alpha)
        self._set(node, self._binary_op("max" if alpha <= 1.0 else "min", node, a, t, name, node.input[0], ""))

    def _op_Gelu(self, i, node, ins, name):
        approx = _attrs(node).get("approximate", b"none")
        approx = approx.decode() if isinstance(approx, bytes) else str(approx)
        self._set(node, self._unary_act("gelu" if approx == "tanh" else "gelu_erf", ins[0], name))

    def _scalar(self, v):
        if isinstance(v, Act) or v is None:
            return None
        arr = np.asarray(v)
        return float(arr.ravel()[0]) if arr.size == 1 else None

    def _binary_op(self, kind, node, a, b, name, a_name, b_name):
        """Elementwise binary with ONNX broadcasting; constants of one element become scalars."""
        be = self.be
        sa = a.shape if isinstance(a, Act) else np.shape(a)
        sb = b.shape if isinstance(b, Act) else np.shape(b)
        out_shape = tuple(int(x) for x in np.broadcast_shapes(tuple(sa), tuple(sb)))
        s = self._scalar(b)
        if s is not None and isinstance(a, Act) and a.shape == out_shape:
            if kind == "add":
                return self._unary_act("add_scalar", a, name, s)
            if kind == "sub":
                return self._unary_act("add_scalar", a, name, -s)
            if kind == "mul":
                return self._unary_act("scale", a, name, s)
            if kind == "div" and s != 0:
                return self._unary_act("scale", a, name, 1.0 / s)
            if kind == "pow":
                if s == 1.0:
                    return a
                k = {2.0: "square", 0.5: "sqrt", -1.0: "reciprocal"}.get(s, "pow_scalar")
                return self._unary_act(k, a, name, s if k == "pow_scalar" else None)
            if kind in ("max", "min"):
                return self._unary_act(f"{kind}_scalar", a, name, s)
        s = self._scalar(a)
        if s is not None and isinstance(b, Act) and b.shape == out_shape:
            if kind in ("add", "mul", "max", "min"):
                return self._binary_op(kind, node, b, a, name, b_name, a_name)
            if kind == "sub":
                t = self._unary_act("neg", b, name + "/neg")
                return self._unary_act("add_scalar", t, name, s) if s else t
            if kind == "div":
                t = self._unary_act("reciprocal", b, name + ("/reciprocal" if s != 1.0 else ""))
                return self._unary_act("scale", t, name, s) if s != 1.0 else t
        nhwc = (isinstance(a, Act) and a.nhwc and a.shape == out_shape) or \
            (isinstance(b, Act) and b.nhwc and b.shape == out_shape)
        # the first operand decides where the output lives: keep a device tensor first
        if not isinstance(a, Act) and kind in ("add", "mul", "max", "min"):
            a, b, a_name, b_name = b, a, b_name, a_name
        A = self.bcast(a, a_name, out_shape, nhwc)
        if kind == "add" and not isinstance(b, Act) and not isinstance(A.h, View) and len(A.h.shape) >= 1:
            last = A.h.shape[-1]
            bv = np.asarray(b)
            if bv.size == last and bv.size > 1:
                hb = self.in_layout(b, b_name, out_shape, nhwc)
                if isinstance(hb, View) and np.array_equal(
                        hb.index.reshape(-1, last), np.broadcast_to(np.arange(last), (hb.index.size // last, last))):
                    vec = b_name + "/vec" if np.ndim(bv) != 1 else b_name
                    if b_name in self.params:
                        self.params.add(vec)
                    bias = self.tensor_of(vec, bv.reshape(last)) if vec != b_name else hb.base
                    out = Act(be.add_bias(A.h, bias, name), out_shape, nhwc)
                    if self.training:
                        self._rec(out, [A], lambda dy: [(A, lambda: dy), (vec, lambda: be.reduce_rows(
                            self.operand_raw(dy, (A.size // last, last)), name + "/bias_bwd"))],
                            force=vec in self.params)
                    return out
        B = self.bcast(b, b_name, out_shape, nhwc)
        if kind == "add":
            h = be.add(A.h, B.h, name)
        elif kind == "mul":
            h = be.mul(A.h, B.h, name)
        else:
            h = be.binary(A.h, B.h, kind, name)
        out = Act(h, out_shape, nhwc)
        if self.training:
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
                if id(A) in self.rg or id(B) in self.rg:
                    self._no_backward(f"elementwise '{kind}' of two tensors", name)
            if fn is not None:
                self._rec(out, [A, B], fn)
        return out

    def _bin(self, kind):
        def f(i, node, ins, name):
            self._set(node, self._binary_op(kind, node, ins[0], ins[1], name, node.input[0], node.input[1]))
        return f

    def _op_Add(self, i, node, ins, name):
        self._bin("add")(i, node, ins, name)

    def _op_Sub(self, i, node, ins, name):
        self._bin("sub")(i, node, ins, name)

    def _op_Mul(self, i, node, ins, name):
        self._bin("mul")(i, node, ins, name)

    def _op_Div(self, i, node, ins, name):
        self._bin("div")(i, node, ins, name)

    def _op_Pow(self, i, node, ins, name):
        self._bin("pow")(i, node, ins, name)

    def _op_Max(self, i, node, ins, name):
        if len(ins) != 2:
            raise OnnxImportError(f"{self.lm.path}: node '{name}': Max of {len(ins)} inputs; only 2 are supported")
        self._bin("max")(i, node, ins, name)

    def _op_Min(self, i, node, ins, name):
        if len(ins) != 2:
            raise OnnxImportError(f"{self.lm.path}: node '{name}': Min of {len(ins)} inputs; only 2 are supported")
        self._bin("min")(i, node, ins, name)

    def _op_Where(self, i, node, ins, name):
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
                    big = float(np.finfo(np.float16).max if self.be.precision == "fp16" else np.finfo(np.float32).max)
                    arr = np.clip(np.nan_to_num(arr.astype(np.float32), posinf=big, neginf=-big), -big, big)
                self.vals[nm + "/f"] = arr
                hs.append(self.in_layout(arr, nm + "/f", out_shape, nhwc))
                acts.append(None)
            else:
                acts.append(self.bcast(v, nm, out_shape, nhwc))
                hs.append(acts[-1].h)
        out = Act(self.be.select(hs[0], hs[1], hs[2], name), out_shape, nhwc)
        if self.training:
            if isinstance(c, Act) and id(c) in self.rg:
                self._no_backward("Where with a computed condition", name)
            zero = (self.tensor_of(f"{name}/zeros", np.zeros(canon(out_shape), np.float32))
                    if any(isinstance(v, Act) and id(v) in self.rg for v in (a, b)) else None)
            A, B = acts[1], acts[2]
            self._rec(out, [A, B], lambda dy: ([(A, lambda: self.be.select(hs[0], dy, zero, name + "/bwd_a"))] if A
                                               else [])
                      + ([(B, lambda: self.be.select(hs[0], zero, dy, name + "/bwd_b"))] if B else []))
        self._set(node, out)

    # ------------------------------------------------------------------ matmul family
    def _matmul(self, a, b, name, a_name, b_name):
        be = self.be
        A = a if isinstance(a, Act) else self.act(a_name)
        B = b if isinstance(b, Act) else self.act(b_name)
        sa, sb = A.shape, B.shape
        sq_a = sq_b = False
        if len(sa) == 1:
            A = self.view(A, np.arange(A.size).reshape(1, -1), (1, sa[0]))
            sa, sq_a = A.shape, True
        if len(sb) == 1:
            B = self.view(B, np.arange(B.size).reshape(-1, 1), (sb[0], 1))
            sb, sq_b = B.shape, True
        K, N = sb[-2], sb[-1]
        if sa[-1] != K:
            raise OnnxImportError(f"{self.lm.path}: node '{name}': MatMul shapes {sa} @ {sb} do not chain")
        if len(sb) == 2:
            lead = sa[:-1]
            A, B = self.plain(A), self.plain(B)
            ha, hb = self.operand(A, (int(np.prod(lead)), K)), self.operand(B, (K, N))
            h = be.matmul(ha, hb, name)
            out_shape = lead + (N,)
        else:
            batch = tuple(int(s) for s in np.broadcast_shapes(sa[:-2], sb[:-2]))
            G = int(np.prod(batch))
            M = sa[-2]

            def expand(X, tail):
                s = X.shape
                src = (1,) * (len(batch) + 2 - len(s)) + s
                idx = np.broadcast_to(np.arange(X.size).reshape(src), batch + tail)
                return X if idx.shape == s else self.view(X, idx, batch + tail)
            A, B = self.plain(expand(A, (M, K))), self.plain(expand(B, (K, N)))
            ha, hb = self.operand(A, (G, M, K)), self.operand(B, (G, K, N))
            h = be.matmul(ha, hb, name)
            out_shape = batch + (M, N)
        out = Act(h, out_shape)
        if self.training:
            def bwd(dy, A=A, B=B, ha=ha, hb=hb, name=name):
                d = self.operand_raw(dy, tuple(h.shape))
                return [(A, lambda: be.matmul(d, be.t(hb), name + "/bwd_dx")),
                        (B, lambda: be.matmul(be.t(ha), d, name + "/bwd_dw"))]
            self._rec(out, [A, B], bwd)
        if sq_a or sq_b:
            shape = tuple(s for j, s in enumerate(out_shape)
                          if not ((sq_a and j == len(out_shape) - 2) or (sq_b and j == len(out_shape) - 1)))
            out = self.view(out, np.arange(out.size).reshape(shape), shape)
        return out

    def _op_MatMul(self, i, node, ins, name):
        self._set(node, self._matmul(ins[0], ins[1], name, node.input[0], node.input[1]))

    def _op_Gemm(self, i, node, ins, name):
        at = _attrs(node)
        alpha, beta = float(at.get("alpha", 1.0)), float(at.get("beta", 1.0))
        a, b = ins[0], ins[1]
        an, bn = node.input[0], node.input[1]
        if not isinstance(b, Act):
            w = np.asarray(b, dtype=np.float32)
            if at.get("transB", 0):
                w = w.T
            if alpha != 1.0:
                w = w * alpha
                alpha = 1.0
            bn = node.input[1] + ("/T" if at.get("transB", 0) else "")
            self.vals[bn] = np.ascontiguousarray(w)
            if node.input[1] in self.params:
                self.params.add(bn)
            b = self.vals[bn]
        elif at.get("transB", 0):
            b = self.view(b, np.arange(b.size).reshape(b.shape).T, b.shape[::-1])
        if at.get("transA", 0):
            A = a if isinstance(a, Act) else self.act(an)
            a = self.view(A, np.arange(A.size).reshape(A.shape).T, A.shape[::-1])
        y = self._matmul(a, b, name, an, bn)
        if alpha != 1.0:
            y = self._unary_act("scale", y, name + "/alpha", alpha)
        if len(ins) > 2 and ins[2] is not None and beta != 0.0:
            c = ins[2]
            cn = node.input[2]
            if beta != 1.0:
                if isinstance(c, Act):
                    c = self._unary_act("scale", c, name + "/beta", beta)
                else:
                    cn = cn + "/beta"
                    self.vals[cn] = np.asarray(c, np.float32) * beta
                    c = self.vals[cn]
            y = self._binary_op("add", node, y, c, name + "/bias", "", cn)
        self._set(node, y)

    # ------------------------------------------------------------------ rows
    def _op_Softmax(self, i, node, ins, name):
        a = ins[0]
        nd = len(a.shape)
        ax = _attrs(node).get("axis", -1 if self.opset >= 13 else 1)
        ax = ax + nd if ax < 0 else ax
        if ax == nd - 1 or self.opset < 13:
            row = int(np.prod(a.shape[ax:]))
            self._set(node, self._softmax(a, row, name))
            return
        perm = [j for j in range(nd) if j != ax] + [ax]
        idx = np.arange(a.size).reshape(a.shape).transpose(perm)
        t = self.view(a, idx, idx.shape)
        y = self._softmax(t, t.shape[-1], name)
        inv = np.argsort(perm)
        back = np.arange(y.size).reshape(y.shape).transpose(inv)
        self._set(node, self.view(y, back, back.shape))

    def _softmax(self, a, row, name):
        p = self.plain(a)
        out = Act(self.be.softmax(self.rows(p, row), name), a.shape)
        if self.training:
            self._rec(out, [p], lambda dy: [(p, lambda: self.be.softmax_bwd(
                out.h, self.operand_raw(dy, tuple(out.h.shape)), name + "/bwd"))])
        return out

    def _layer_norm(self, a, row, gam, bet, gname, bname, name, eps):
        p = self.plain(a)
        x = self.rows(p, row)
        out = Act(self.be.layer_norm(x, gam, bet, name, eps=eps), a.shape)
        if self.training:
            def bwd(dy):
                dx, dg, db = self.be.layer_norm_bwd(x, gam, self.operand_raw(dy, tuple(out.h.shape)), name + "/bwd",
                                                    eps=eps)
                return [(p, lambda: dx), (gname, lambda: dg), (bname, lambda: db)]
            self._rec(out, [p], bwd, force=gname in self.params or bname in self.params)
        return out

    def _op_LayerNormalization(self, i, node, ins, name):
        a, g = self._data(node, ins), ins[1]
        b = ins[2] if len(ins) > 2 else None
        nd = len(a.shape)
        at = _attrs(node)
        if at.get("stash_type", 1) != 1:
            raise OnnxImportError(f"{self.lm.path}: node '{name}': LayerNormalization stash_type "
                                  f"{at['stash_type']} cannot be honoured (the op library computes the statistics "
                                  "in float32: stash_type 1)")
        ax = at.get("axis", -1)
        ax = ax + nd if ax < 0 else ax
        row = int(np.prod(a.shape[ax:]))
        if isinstance(g, Act) or isinstance(b, Act):
            raise OnnxImportError(f"{self.lm.path}: node '{name}': LayerNormalization with a computed scale or bias "
                                  "is not supported (they must be initializers)")
        if np.size(g) != row or (b is not None and np.size(b) != row):
            raise OnnxImportError(f"{self.lm.path}: node '{name}': scale / bias have {np.size(g)} / {np.size(b)} "
                                  f"elements, expected {row}")
        gname = node.input[1] if np.ndim(g) == 1 else node.input[1] + "/flat"
        bname = (node.input[2] if np.ndim(b) == 1 else node.input[2] + "/flat") if b is not None else name + "/zero_bias"
        for nm, src in ((gname, node.input[1]), (bname, node.input[2] if b is not None else "")):
            if src in self.params:
                self.params.add(nm)
        gam = self.tensor_of(gname, np.asarray(g).reshape(row))
        bet = self.tensor_of(bname, np.zeros(row, np.float32) if b is None else np.asarray(b).reshape(row))
        self._set(node, self._layer_norm(a, row, gam, bet, gname, bname, name, float(at.get("epsilon", 1e-5))))
        if len(node.output) > 1 and any(node.output[1:]):
            raise OnnxImportError(f"{self.lm.path}: node '{name}': LayerNormalization's mean / inv-std outputs "
                                  "are not supported (training-mode exports)")

    def _reduce(self, i, node, ins, name, mean):
        a = ins[0]
        nd = len(a.shape)
        at = _attrs(node)
        axes = at.get("axes")
        if axes is None and len(node.input) > 1 and node.input[1]:
            axes = _ints(ins[1])
        if axes is None or len(axes) == 0:
            if at.get("noop_with_empty_axes", 0):
                self._set(node, a)
                return
            axes = list(range(nd))
        axes = sorted({x + nd if x < 0 else x for x in axes})
        keep = [j for j in range(nd) if j not in axes]
        idx = np.arange(a.size).reshape(a.shape).transpose(keep + axes)
        t = self.view(a, idx, idx.shape) if keep + axes != list(range(nd)) else a
        row = int(np.prod([a.shape[j] for j in axes]))
        ones = self.tensor_of(f"{name}/ones", np.ones((row, 1), np.float32))
        p = self.plain(t)
        be = self.be
        h = be.matmul(self.rows(p, row), ones, name + "/sum")
        if mean:
            h = be.scale(h, 1.0 / row, name)
        shape = tuple(1 if j in axes else a.shape[j] for j in range(nd)) if at.get("keepdims", 1) else \
            tuple(a.shape[j] for j in keep)
        out = Act(h, shape)
        if self.training:  # dx = dy broadcast over the reduced elements (/ their count for the mean)
            def bwd(dy):
                g = be.matmul(self.operand_raw(dy, (p.size // row, 1)), be.t(ones), name + "/bwd")
                return [(p, lambda: be.scale(g, 1.0 / row, name + "/bwd_mean") if mean else g)]
            self._rec(out, [p], bwd)
        self._set(node, out)

    def _op_ReduceMean(self, i, node, ins, name):
        self._reduce(i, node, ins, name, True)

    def _op_ReduceSum(self, i, node, ins, name):
        self._reduce(i, node, ins, name, False)

    def _op_ReduceSumSquare(self, i, node, ins, name):
        sq = self._unary_act("square", self._data(node, ins), name + "/square")
        self._reduce(i, node, [sq, *ins[1:]], name, False)

    def _op_ReduceL2(self, i, node, ins, name):  # sqrt of the sum of squares (torch's vector_norm, normalize)
        self._op_ReduceSumSquare(i, node, ins, name + "/sum_square")
        self._set(node, self._unary_act("sqrt", self.vals[node.output[0]], name))

    # ------------------------------------------------------------------ conv / pool / batch norm
    def _window_attrs(self, node, name, kshape, spatial):
        """(kh, kw, (sh, sw), (top, left, bottom, right), (dh, dw), ceil_mode) of a Conv / pooling node over
        ``spatial`` = (h, w); a 1-D window is the 2-D one with a height of 1."""
        at = _attrs(node)
        k = [int(v) for v in kshape]
        nd = len(k)
        if nd not in (1, 2) or len(spatial) != nd:
            raise OnnxImportError(f"{self.lm.path}: node '{name}': {node.op_type} kernel {k}: only 1-D and 2-D "
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
            raise OnnxImportError(f"{self.lm.path}: node '{name}': auto_pad {auto!r} is not an ONNX value")
        if nd == 1:
            return 1, k[0], (1, strides[0]), (0, pads[0], 0, pads[1]), (1, dil[0]), bool(at.get("ceil_mode", 0))
        return k[0], k[1], tuple(strides), (pads[0], pads[1], pads[2], pads[3]), tuple(dil), \
            bool(at.get("ceil_mode", 0))

    def _op_Conv(self, i, node, ins, name):
        x, w = self._data(node, ins), ins[1]
        at = _attrs(node)
        groups = int(at.get("group", 1))
        if isinstance(w, Act):
            raise OnnxImportError(f"{self.lm.path}: node '{name}': Conv weights must be initializers")
        if len(x.shape) not in (3, 4):
            raise OnnxImportError(f"{self.lm.path}: node '{name}': only 1-D and 2-D Conv (NCL / NCHW input) are "
                                  f"supported, got input shape {x.shape}")
        w = np.asarray(w, np.float32)
        one_d = len(x.shape) == 3
        if one_d:  # (N, C, L) as (N, C, 1, L)
            x = self.reshape(x, (x.shape[0], x.shape[1], 1, x.shape[2]))
            w = w.reshape(w.shape[0], w.shape[1], 1, w.shape[2])
        co, cg, kh, kw = w.shape
        n, c, hh, ww = x.shape
        if c != cg * groups or co % groups:
            raise OnnxImportError(f"{self.lm.path}: node '{name}': Conv of {c} channels with weights {w.shape} and "
                                  f"group {groups} do not agree")
        kshape = at.get("kernel_shape", [kw] if one_d else [kh, kw])
        kh_, kw_, strides, pads, dil, _ = self._window_attrs(node, name, kshape, (ww,) if one_d else (hh, ww))
        if (kh_, kw_) != (kh, kw):
            raise OnnxImportError(f"{self.lm.path}: node '{name}': kernel_shape {list(kshape)} does not match the "
                                  f"weights {tuple(ins[1].shape)}")
        X, xh = self.nhwc_act(x)
        be = self.be
        if (kh, kw) == (1, 1) and strides == (1, 1) and not any(pads):
            cols, oh, ow, idx = xh, hh, ww, None
        else:
            idx, (oh, ow) = windows(n, hh, ww, kh, kw, strides, pads, dil)
            cols = be.gather_windows(xh, idx, name + "/im2col")
        if groups == 1:
            wn = node.input[1] + "/hwio"
            self.vals[wn] = np.ascontiguousarray(w.transpose(2, 3, 1, 0).reshape(kh * kw * c, co))
            if node.input[1] in self.params:
                self.params.add(wn)
            wt = self.tensor_of(wn)
            Y = Act(be.matmul(cols, wt, name), (n, co, oh, ow), nhwc=True)
            if self.training:
                def bwd(dy):
                    d = self.operand_raw(dy, (n * oh * ow, co))
                    dcols = lambda: be.matmul(d, be.t(wt), name + "/bwd_dx")  # noqa: E731
                    dx = dcols if idx is None else (lambda: be.col2im(dcols(), idx, n * hh * ww, name + "/bwd_col2im"))
                    return [(X, dx), (wn, lambda: be.matmul(be.t(cols), d, name + "/bwd_dw"))]
                self._rec(Y, [X], bwd, force=wn in self.params)
        else:
            Y = self._grouped_conv(node, name, X, cols, idx, w, groups, (n, hh, ww, oh, ow))
        if len(ins) > 2 and ins[2] is not None:
            bn = node.input[2] + "/nchw"
            self.vals[bn] = np.asarray(ins[2]).reshape(1, co, 1, 1)
            if node.input[2] in self.params:
                self.params.add(bn)
            Y = self._binary_op("add", node, Y, self.vals[bn], name + "/bias", "", bn)
        if one_d:
            Y = self.reshape(Y, (n, co, ow))
        self._set(node, Y)

    def _grouped_conv(self, node, name, X, cols, idx, w, groups, dims):
        """Grouped / depthwise Conv: the im2col columns of each group times that group's weights, one batched
        matmul over the groups (Poplar's convolution planner also splits a grouped convolution by group)."""
        n, hh, ww, oh, ow = dims
        co, cg, kh, kw = w.shape
        g, cog, kk = groups, co // groups, kh * kw
        rows = n * oh * ow
        C = Act(cols, (rows, kk, g, cg))  # im2col column order: (window slot, channel)
        if self.training and idx is not None:
            self._rec(C, [X], lambda dy: [(X, lambda: self.be.col2im(self.operand_raw(dy, (rows, kk * g * cg)), idx,
                                                                     n * hh * ww, name + "/bwd_col2im"))])
        elif self.training:
            self._rec(C, [X], lambda dy: [(X, lambda: dy)])
        ic = np.arange(C.size).reshape(C.shape).transpose(2, 0, 1, 3).reshape(g, rows, kk * cg)
        A = self.view(C, ic, ic.shape)
        wn = node.input[1] + "/groups"
        self.vals[wn] = np.ascontiguousarray(
            w.reshape(g, cog, cg, kh, kw).transpose(0, 3, 4, 2, 1).reshape(g, kk * cg, cog))
        if node.input[1] in self.params:
            self.params.add(wn)
        Yg = self._matmul(A, self.vals[wn], name, "", wn)  # (g, rows, cog)
        iy = np.arange(Yg.size).reshape(g, rows, cog).transpose(1, 0, 2).reshape(n, oh, ow, co).transpose(0, 3, 1, 2)
        return self.view(Yg, iy, iy.shape)

    def nhwc_act(self, x: Act):
        """(Act whose handle holds x as rows of channels, that handle shaped (N*H*W, C))."""
        n, c, hh, w = x.shape
        if x.nhwc:
            return x, self.operand_raw(x.h, (n * hh * w, c))
        idx = np.arange(x.size, dtype=np.int64).reshape(x.shape).transpose(0, 2, 3, 1)
        v = self.view(x, idx, (n, hh, w, c))
        return v, self.operand_raw(v.h, (n * hh * w, c))

    def _pool(self, i, node, ins, name, mode):
        x = self._data(node, ins)
        at = _attrs(node)
        if len(x.shape) not in (3, 4):
            raise OnnxImportError(f"{self.lm.path}: node '{name}': only 1-D and 2-D pooling (NCL / NCHW input) "
                                  "is supported")
        one_d = len(x.shape) == 3
        if one_d:
            x = self.reshape(x, (x.shape[0], x.shape[1], 1, x.shape[2]))
        n, c, hh, ww = x.shape
        kh, kw, strides, pads, dil, ceil = self._window_attrs(node, name, at.get("kernel_shape", []),
                                                              (ww,) if one_d else (hh, ww))
        if mode == "max" and len(node.output) > 1 and node.output[1]:
            raise OnnxImportError(f"{self.lm.path}: node '{name}': MaxPool's indices output is not supported")
        idx, (oh, ow) = windows(n, hh, ww, kh, kw, strides, pads, dil, ceil)
        Y = self._window_pool(x, idx, (n, c, oh, ow), mode, name)
        if mode == "avg":
            # the op library divides by the window's size; ONNX divides by the elements counted: the real ones
            # (count_include_pad 0) or those inside the padded image (1; a ceil_mode window's overhang is not)
            counted = windows(n, hh, ww, kh, kw, strides, pads, dil, ceil, count_pads=bool(
                at.get("count_include_pad", 0)))[0] if at.get("count_include_pad", 0) else idx
            valid = (counted >= 0).sum(1).astype(np.float32)
            corr = (kh * kw) / np.maximum(valid, 1)
            if np.any(corr != 1.0):
                cn = f"{name}/pad_correction"
                self.vals[cn] = corr.reshape(n, 1, oh, ow)
                Y = self._binary_op("mul", node, Y, self.vals[cn], name + "/exclude_pad", "", cn)
        if one_d:
            Y = self.reshape(Y, (n, c, ow))
        self._set(node, Y)

    def _window_pool(self, x, idx, out_shape, mode, name):
        be = self.be
        X, xh = self.nhwc_act(x)
        n_rows = xh.shape[0]
        y = be.max_pool(xh, idx, name) if mode == "max" else be.avg_pool(xh, idx, name)
        Y = Act(y, out_shape, nhwc=True)
        if self.training:
            if mode == "max":
                g = lambda dy: be.max_pool_bwd(xh, y, self.operand_raw(dy, tuple(y.shape)), idx, name + "/bwd")  # noqa: E731
            else:
                g = lambda dy: be.avg_pool_bwd(self.operand_raw(dy, tuple(y.shape)), idx, n_rows, name + "/bwd")  # noqa: E731
            self._rec(Y, [X], lambda dy: [(X, lambda: g(dy))])
        return Y

    def _op_MaxPool(self, i, node, ins, name):
        self._pool(i, node, ins, name, "max")

    def _op_AveragePool(self, i, node, ins, name):
        self._pool(i, node, ins, name, "avg")

    def _op_GlobalAveragePool(self, i, node, ins, name):
        x = ins[0]
        if len(x.shape) != 4:
            raise OnnxImportError(f"{self.lm.path}: node '{name}': only NCHW GlobalAveragePool is supported")
        n, c, hh, ww = x.shape
        self._set(node, self._window_pool(x, global_windows(n, hh * ww), (n, c, 1, 1), "avg", name))

    def _op_BatchNormalization(self, i, node, ins, name):
        x = ins[0]
        at = _attrs(node)
        if any(isinstance(v, Act) for v in ins[1:5]):
            raise OnnxImportError(f"{self.lm.path}: node '{name}': BatchNormalization parameters must be "
                                  "initializers")
        if at.get("training_mode", 0) or (len(node.output) > 1 and any(node.output[1:])):
            raise OnnxImportError(f"{self.lm.path}: node '{name}': training-mode BatchNormalization exports are not "
                                  "supported; export the model in eval mode (model.eval())")
        gamma, beta, mean, var = (np.asarray(v, np.float32) for v in ins[1:5])
        eps = float(at.get("epsilon", 1e-5))
        scale = gamma / np.sqrt(var + eps)
        shift = beta - mean * scale
        shp = (1, len(scale)) + (1,) * (len(x.shape) - 2)
        sn, tn = f"{name}/scale", f"{name}/shift"
        self.vals[sn], self.vals[tn] = scale.reshape(shp), shift.reshape(shp)
        if not self.training:  # weights in memory; in --training batch norm is frozen (running statistics)
            self.params |= {sn, tn}
        y = self._binary_op("mul", node, x, self.vals[sn], name + "/scale", node.input[0], sn)
        y = self._binary_op("add", node, y, self.vals[tn], name + "/shift", "", tn)
        self._set(node, y)

    # ------------------------------------------------------------------ views and data movement
    def _op_Identity(self, i, node, ins, name):
        self.vals[node.output[0]] = ins[0]
        self.op_count -= 1

    _op_Dropout = _op_Identity

    def _op_Cast(self, i, node, ins, name):
        from .loader import dtype_info, elem_name

        to = int(_attrs(node)["to"])
        info = dtype_info(to)
        if info is None or not np.issubdtype(info[0], np.floating):
            raise OnnxImportError(f"{self.lm.path}: node '{name}': Cast of a device tensor to {elem_name(to)} is not "
                                  "supported (the emulator keeps activations in the run's float precision)")
        self.notes.append(f"node '{name}': Cast to {elem_name(to)} kept in the run's precision "
                          f"({self.be.precision})")
        self._op_Identity(i, node, ins, name)

    def _op_Reshape(self, i, node, ins, name):
        a, shp = self._data(node, ins), _ints(ins[1])
        allowzero = _attrs(node).get("allowzero", 0)
        shp = [a.shape[j] if (s == 0 and not allowzero) else s for j, s in enumerate(shp)]
        if -1 in shp:
            known = int(np.prod([s for s in shp if s != -1]))
            shp[shp.index(-1)] = a.size // max(1, known)
        if int(np.prod(shp)) != a.size:
            raise OnnxImportError(f"{self.lm.path}: node '{name}': cannot reshape {a.shape} to {tuple(shp)}")
        self._set(node, self.reshape(a, shp))
        self.op_count -= 1

    def _op_Flatten(self, i, node, ins, name):
        a = self._data(node, ins)
        ax = _attrs(node).get("axis", 1)
        ax = ax + len(a.shape) if ax < 0 else ax
        shp = (int(np.prod(a.shape[:ax])), int(np.prod(a.shape[ax:])))
        self._set(node, self.reshape(a, shp))
        self.op_count -= 1

    def _axes_of(self, node, ins):
        at = _attrs(node)
        if "axes" in at:
            return list(at["axes"])
        if len(ins) > 1 and ins[1] is not None:
            return _ints(ins[1])
        return None

    def _op_Squeeze(self, i, node, ins, name):
        a = self._data(node, ins)
        axes = self._axes_of(node, ins)
        nd = len(a.shape)
        axes = [x + nd if x < 0 else x for x in axes] if axes is not None else [j for j, s in enumerate(a.shape)
                                                                              if s == 1]
        shp = tuple(s for j, s in enumerate(a.shape) if j not in axes)
        self._set(node, self.reshape(a, shp))
        self.op_count -= 1

    def _op_Unsqueeze(self, i, node, ins, name):
        a = self._data(node, ins)
        axes = self._axes_of(node, ins)
        nd = len(a.shape) + len(axes)
        axes = sorted(x + nd if x < 0 else x for x in axes)
        shp = list(a.shape)
        for x in axes:
            shp.insert(x, 1)
        self._set(node, self.reshape(a, shp))
        self.op_count -= 1

    def _op_Transpose(self, i, node, ins, name):
        a = self._data(node, ins)
        perm = tuple(_attrs(node).get("perm", list(range(len(a.shape)))[::-1]))
        key = (a.shape, perm)
        idx = self._perm_cache.get(key)
        if idx is None:  # every layer of a transformer transposes the same shapes: build the index once
            idx = self._perm_cache[key] = np.arange(a.size, dtype=np.int64).reshape(a.shape).transpose(perm)
        self._set(node, self.view(a, idx, idx.shape))
        self.op_count -= 1

    def _data(self, node, ins) -> Act:
        """The first input as an Act (a constant or weight gets a device tensor)."""
        return ins[0] if isinstance(ins[0], Act) else self.act(node.input[0])

    def _op_Expand(self, i, node, ins, name):
        a = self._data(node, ins)
        shp = tuple(int(s) for s in np.broadcast_shapes(a.shape, tuple(_ints(ins[1]))))
        src = (1,) * (len(shp) - len(a.shape)) + a.shape
        idx = np.broadcast_to(np.arange(a.size).reshape(src), shp)
        self._set(node, self.view(a, idx, shp))
        self.op_count -= 1

    def _op_Slice(self, i, node, ins, name):
        a = self._data(node, ins)
        nd = len(a.shape)
        at = _attrs(node)
        if self.opset < 10:
            starts, ends = at["starts"], at["ends"]
            axes = at.get("axes", list(range(len(starts))))
            steps = [1] * len(starts)
        else:
            starts, ends = _ints(ins[1]), _ints(ins[2])
            axes = _ints(ins[3]) if len(ins) > 3 and ins[3] is not None else list(range(len(starts)))
            steps = _ints(ins[4]) if len(ins) > 4 and ins[4] is not None else [1] * len(starts)
        sl = [slice(None)] * nd
        for s, e, ax, st in zip(starts, ends, axes, steps, strict=True):
            ax = ax + nd if ax < 0 else ax
            big = 2 ** 62
            e = None if (st > 0 and e >= big) or (st < 0 and e <= -big) else e
            sl[ax] = slice(s, e, st)
        idx = np.arange(a.size).reshape(a.shape)[tuple(sl)]
        self._set(node, self.view(a, idx, idx.shape))
        self.op_count -= 1

    def _op_Split(self, i, node, ins, name):
        a = self._data(node, ins)
        nd = len(a.shape)
        at = _attrs(node)
        ax = at.get("axis", 0)
        ax = ax + nd if ax < 0 else ax
        sizes = at.get("split")
        if sizes is None and len(ins) > 1 and ins[1] is not None:
            sizes = _ints(ins[1])
        nout = len(node.output)
        if sizes is None:
            d = a.shape[ax]
            per = -(-d // nout)
            sizes = [min(per, d - per * j) for j in range(nout)]
        full = np.arange(a.size).reshape(a.shape)
        off = 0
        for o, s in zip(node.output, sizes, strict=True):
            sl = [slice(None)] * nd
            sl[ax] = slice(off, off + s)
            idx = full[tuple(sl)]
            if o:
                self.vals[o] = self.view(a, idx, idx.shape)
            off += s
        self.op_count -= 1

    def _op_Gather(self, i, node, ins, name):
        data, ids = ins
        if isinstance(ids, Act):
            raise OnnxImportError(f"{self.lm.path}: node '{name}': Gather with indices computed on the device is "
                                  "not supported (indices must be inputs or constants, known when the graph is built)")
        ids = np.asarray(ids).astype(np.int64)
        ax = _attrs(node).get("axis", 0)
        shape = data.shape if isinstance(data, Act) else np.shape(data)
        nd = len(shape)
        ax = ax + nd if ax < 0 else ax
        n = shape[ax]
        if ids.size and (ids.min() < -n or ids.max() >= n):
            raise OnnxImportError(f"{self.lm.path}: node '{name}': Gather indices out of range [-{n}, {n}) on axis "
                                  f"{ax}")
        ids = np.where(ids < 0, ids + n, ids)
        if not isinstance(data, Act) and ax == 0 and nd == 2:
            table = self.tensor_of(node.input[0])
            h = self.be.gather_rows(table, ids.ravel(), name)
            self._set(node, Act(h, ids.shape + (shape[1],)))
            return
        a = data if isinstance(data, Act) else self.act(node.input[0])
        idx = np.take(np.arange(a.size).reshape(a.shape), ids, axis=ax)
        self._set(node, self.view(a, idx, idx.shape))
        self.op_count -= 1

    def _index_op(self, i, node, ins, name):
        """A data-movement op (Pad, Tile, Trilu, GatherElements, GatherND, DepthToSpace, SpaceToDepth) as a view:
        the op itself, evaluated by ONNX's reference implementation on the 1-based positions of its data input
        (its other inputs must be known when the graph is built), says which element each output element
        reads; 0 there is a fill value (Pad's constant, Trilu's zeros), read from a one-element constant
        appended to the data (a copy, as Poplar's pad)."""
        a = self._data(node, ins)
        if any(isinstance(v, Act) for v in ins[1:]):
            raise OnnxImportError(f"{self.lm.path}: node '{name}': {node.op_type} with indices / sizes computed on "
                                  "the device is not supported (they must be known when the graph is built)")
        fill = 0.0
        feeds = {node.input[0]: np.arange(1, a.size + 1, dtype=np.int64).reshape(a.shape)}
        for nm, v in zip(node.input[1:], ins[1:], strict=True):
            if nm:
                feeds[nm] = np.asarray(v)
        if node.op_type == "Pad":
            mode = _attrs(node).get("mode", b"constant")
            mode = mode.decode() if isinstance(mode, bytes) else str(mode)
            if mode == "constant":
                if len(node.input) > 2 and node.input[2]:
                    fill = float(np.asarray(ins[2]).ravel()[0]) if np.size(ins[2]) else 0.0
                    feeds[node.input[2]] = np.zeros((), np.int64)
                elif "value" in _attrs(node):  # opset < 11
                    fill = float(_attrs(node)["value"])
        try:
            pos = np.asarray(evaluate_node(node, feeds, self.opset)[0])
        except Exception as e:
            raise OnnxImportError(f"{self.lm.path}: node '{name}' ({node.op_type}) could not be evaluated on its "
                                  f"index: {type(e).__name__}: {e}") from None
        idx = pos.astype(np.int64) - 1
        if (idx < 0).any():
            cn = f"{name}/fill"
            self.vals[cn] = np.full(1, fill, np.float32)
            src = self.plain(a)
            flat = self.reshape(src, (a.size,))
            one = self.act(cn)
            h = self.be.concat([(self.operand_raw(flat.h, (a.size,)), (a.size,)), (one.h, (1,))], 0, (a.size + 1,),
                               name + "/fill")
            joined = Act(h, (a.size + 1,))
            if self.training:
                self._rec(joined, [flat], lambda dy: [(flat, lambda: self.be.take(dy, np.arange(a.size)))])
            idx = np.where(idx < 0, a.size, idx)
            a = joined
        self._set(node, self.view(a, idx, idx.shape))

    def _op_Einsum(self, i, node, ins, name):
        """Two-operand Einsum as a batched matmul (batch letters, free letters of each side, contracted letters)
        between views; one operand: a transpose."""
        eq = _attrs(node)["equation"]
        eq = (eq.decode() if isinstance(eq, bytes) else str(eq)).replace(" ", "")
        if "..." in eq or "->" not in eq:
            raise OnnxImportError(f"{self.lm.path}: node '{name}': Einsum '{eq}': only explicit equations without "
                                  "'...' are supported")
        lhs, out = eq.split("->")
        terms = lhs.split(",")
        ops = [v if isinstance(v, Act) else self.act(nm) for v, nm in zip(ins, node.input, strict=True)]
        if any(len(set(t)) != len(t) for t in terms) or len(set(out)) != len(out):
            raise OnnxImportError(f"{self.lm.path}: node '{name}': Einsum '{eq}': repeated letters in a term "
                                  "(diagonals, traces) are not supported")
        if len(terms) == 1:
            if sorted(terms[0]) != sorted(out):
                raise OnnxImportError(f"{self.lm.path}: node '{name}': Einsum '{eq}': a sum over letters of one "
                                      "operand is not supported (only a transpose)")
            perm = [terms[0].index(c) for c in out]
            a = ops[0]
            idx = np.arange(a.size).reshape(a.shape).transpose(perm)
            self._set(node, self.view(a, idx, idx.shape))
            return
        if len(terms) != 2:
            raise OnnxImportError(f"{self.lm.path}: node '{name}': Einsum '{eq}' of {len(terms)} operands: 1 or 2 "
                                  "are supported")
        ta, tb = terms
        A, B = ops
        size = {}
        for t, X in ((ta, A), (tb, B)):
            for c, d in zip(t, X.shape, strict=True):
                if size.setdefault(c, d) != d:
                    raise OnnxImportError(f"{self.lm.path}: node '{name}': Einsum '{eq}': letter {c} has sizes "
                                          f"{size[c]} and {d}")
        batch = [c for c in out if c in ta and c in tb]
        lfree = [c for c in out if c in ta and c not in tb]
        rfree = [c for c in out if c in tb and c not in ta]
        contract = [c for c in ta if c in tb and c not in out]
        if any(c not in out and c not in tb for c in ta) or any(c not in out and c not in ta for c in tb):
            raise OnnxImportError(f"{self.lm.path}: node '{name}': Einsum '{eq}': a letter summed within one "
                                  "operand is not supported")
        prod = lambda cs: int(np.prod([size[c] for c in cs]))  # noqa: E731
        G, M, K, N = prod(batch), prod(lfree), prod(contract), prod(rfree)
        ia = np.arange(A.size).reshape(A.shape).transpose([ta.index(c) for c in batch + lfree + contract])
        ib = np.arange(B.size).reshape(B.shape).transpose([tb.index(c) for c in batch + contract + rfree])
        Av = self.view(A, ia.reshape(G, M, K), (G, M, K))
        Bv = self.view(B, ib.reshape(G, K, N), (G, K, N))
        Y = self._matmul(Av, Bv, name, "", "")
        mid = [size[c] for c in batch + lfree + rfree]
        order = batch + lfree + rfree
        iy = np.arange(Y.size).reshape(mid).transpose([order.index(c) for c in out])
        self._set(node, self.view(Y, iy, iy.shape))

    def _op_CumSum(self, i, node, ins, name):
        """Cumulative sum along an axis: a matmul of the rows with a triangular matrix of ones."""
        a = self._data(node, ins)
        if isinstance(ins[1], Act):
            raise OnnxImportError(f"{self.lm.path}: node '{name}': CumSum with an axis computed on the device")
        at = _attrs(node)
        nd = len(a.shape)
        ax = int(np.asarray(ins[1]).ravel()[0])
        ax = ax + nd if ax < 0 else ax
        n = a.shape[ax]
        j, k = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")  # out[k] = sum_j x[j] T[j, k]
        if at.get("reverse", 0):
            tri = (j > k) if at.get("exclusive", 0) else (j >= k)
        else:
            tri = (j < k) if at.get("exclusive", 0) else (j <= k)
        tn = f"{name}/triangle"
        self.vals[tn] = tri.astype(np.float32)
        perm = [d for d in range(nd) if d != ax] + [ax]
        idx = np.arange(a.size).reshape(a.shape).transpose(perm)
        t = self.view(a, idx, idx.shape) if perm != list(range(nd)) else a
        y = self._matmul(t, self.vals[tn], name, "", tn)
        back = np.arange(y.size).reshape(y.shape).transpose(np.argsort(perm))
        self._set(node, self.view(y, back, back.shape) if perm != list(range(nd)) else y)

    def _op_Concat(self, i, node, ins, name):
        ax = _attrs(node)["axis"]
        parts = []
        for v, nm in zip(ins, node.input, strict=True):
            a = v if isinstance(v, Act) else self.act(nm)
            if a.size:
                parts.append(a)
        nd = len(parts[0].shape)
        ax = ax + nd if ax < 0 else ax
        shp = list(parts[0].shape)
        shp[ax] = sum(p.shape[ax] for p in parts)
        handles, plains = [], []
        for p in parts:
            pp = self.plain(p)
            plains.append(pp)
            handles.append((pp.h, pp.shape))
        out = Act(self.be.concat(handles, ax, canon(shp), name), tuple(shp))
        if self.training:
            from .ops import concat_index

            pos, _ = concat_index([p.shape for p in plains], ax)
            self._rec(out, plains, lambda dy: [(pp, lambda q=q: self.be.take(dy, q))
                                               for pp, q in zip(plains, pos, strict=True)])
        self._set(node, out)
