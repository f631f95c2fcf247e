"""EmulatorBackend: the model backend (``backend.Backend``) that builds a model into an emulator graph of
tensors mapped to tiles, compute sets and programs.  Used by ``emulated.run_model`` (whole graphs) and by
``pipeline`` (BERT / GPT stage programs); below both."""

from __future__ import annotations

import numpy as np

from popvision_lite.emulator import programs as P
from popvision_lite.emulator.graph import Graph
from popvision_lite.emulator.ops import basic as ops
from popvision_lite.emulator.ops.context import OpContext
from popvision_lite.emulator.ops.norm_pool import EmulatorNormPool
from popvision_lite.emulator.target import Target

from .backend import NP_DTYPE, Backend


class EmulatorBackend(EmulatorNormPool, Backend):
    def __init__(self, target: Target, precision="fp16", needs_values: bool = True,
                 available_memory_proportion: float | None = None, partials_type: str = "float"):
        super().__init__(precision, target.num_ipus)
        self.needs_values = needs_values  # False in timing-only mode: no data is generated or kept
        self.graph = Graph(target)
        self.ctx = OpContext(self.graph, precision)
        # Poplar's availableMemoryProportion: the share of tile memory an op's temporaries may use
        # (planners read ctx.available_memory_proportion; None keeps the op library's default)
        if available_memory_proportion is not None:
            self.ctx.available_memory_proportion = float(available_memory_proportion)
        self.ctx.partials_dtype = "float16" if partials_type == "half" else "float32"
        self.inputs: dict[str, np.ndarray] = {}
        self.host_loads: dict[str, tuple] = {}  # streamed weights: name -> (host buffer, tensor)
        self.marks: list[tuple[str, int]] = []  # (phase name, index into ctx.programs)
        self.weights: list = []  # trained parameters (training state is sized from them)
        # outlined timing runs (models/resnet.py): weight tensor id -> blocks sharing it, and the saved
        # inputs of the blocks that reuse another's tensors (their memory is added per tile)
        self.multiplicity: dict[int, int] = {}
        self.saved_copies: list = []
        # per saved copy (a, z): indices into the main sequence's programs (ctx.programs) of the first and the
        # last program it is live over (models/emulated._saved_on_liveness)
        self.saved_spans: list = []
        self.on_mark = None  # called with the marks so far at each mark (progress while a graph is built)
        # ops built in another graph of the run, replayed where they read the same (op_memo.OpMemo; timing only)
        self.op_memo = None

    def mark(self, name):
        self.marks.append((name, len(self.ctx.programs)))
        if self.on_mark is not None:
            self.on_mark(len(self.marks))

    def phase_programs(self, name) -> list:
        """Programs added between mark ``name`` and the next mark."""
        for i, (n, start) in enumerate(self.marks):
            if n == name:
                end = self.marks[i + 1][1] if i + 1 < len(self.marks) else len(self.ctx.programs)
                return self.ctx.programs[start:end]
        return []

    def replay(self, phase, args=()):
        self.ctx.add(P.Sequence(list(self.phase_programs(phase)), name=f"{phase}/replay", call_args=args))

    # the op context follows the backend's IPU
    def _sync(self):
        self.ctx.ipu = self.ipu

    def _name(self, name):
        self._sync()
        return self.qual(name)

    # ------------------------------------------------------------ tensors
    def input(self, name, values, dtype=None):
        q = self._name(name)
        arr = np.asarray(values)
        dt = dtype or self.dtype
        t = self.graph.add_variable(self.ctx.unique(q), arr.shape, dt, mapping=self.ctx.linear_mapping(arr.size))
        if self.needs_values:
            self.inputs[t.name] = arr.astype(NP_DTYPE[dt])
        return t

    def weight(self, name, values, dtype=None, streamed=False):
        t = self.input(name, values, dtype)
        self.weights.append(t)
        if streamed:
            # the weight's home is streaming memory: load it onto the tiles before it is used
            buf = self.graph.add_host_buffer(t.name + "@ddr", t.shape, t.dtype, kind="streaming")
            if t.name in self.inputs:
                self.inputs[buf.name] = self.inputs.pop(t.name)
            op = self.ctx.begin_op(t.name + "/load", "stream_copy", plan="weight streamed from DDR",
                                   min_bytes=t.nbytes)
            self.ctx.add(P.StreamCopy(buf, t, name=f"{t.name}/load", op=op))
            self.host_loads[t.name] = (buf, t)
        return t

    def constant(self, name, values, dtype=None):
        q = self._name(name)
        arr = np.asarray(values).astype(NP_DTYPE[dtype or self.dtype])
        return self.graph.add_constant(self.ctx.unique(q), arr, mapping=self.ctx.linear_mapping(arr.size))

    def _op(self, fn, *args):
        self._sync()
        if self.op_memo is not None and not self.needs_values:
            return self.op_memo.call(self.ctx, fn, args)
        return fn(self.ctx, *args)

    def copy(self, x, name):
        return self._op(ops.copy, x, self.qual(name))

    def gather_rows(self, table, ids, name):
        return self._op(ops.gather_rows, table, ids, self.qual(name))

    def matmul(self, a, b, name):
        return self._op(ops.matmul, a, b, self.qual(name))

    def conv2d(self, x, w, shape, name):
        """Convolution whose tiles receive their input rows with halo once (ops/conv.py); ``shape`` a ConvShape."""
        from popvision_lite.emulator.ops.conv import conv2d

        return self._op(conv2d, x, w, shape, self.qual(name))

    def flip_transpose_kernel(self, w, k, cin, cout, name):
        """A dX convolution's kernel: ``w`` flipped and transposed on the tiles that hold it (ops/conv.py)."""
        from popvision_lite.emulator.ops.conv import flip_transpose_kernel

        return self._op(flip_transpose_kernel, w, k, cin, cout, self.qual(name))

    def conv2d_weight_update(self, x, dy, shape, name):
        """dW of the convolution ``shape`` (a ConvShape) from its input and output gradient, each tile's
        input rows with halo and dY rows exchanged once (ops/conv_wu.py)."""
        from popvision_lite.emulator.ops.conv_wu import conv2d_weight_update

        return self._op(conv2d_weight_update, x, dy, shape, self.qual(name))

    def block_sparse_matmul(self, a, b, mask, block, name):
        return self._op(ops.block_sparse_matmul, a, b, mask, block, self.qual(name))

    def add(self, a, b, name):
        return self._op(ops.add, a, b, self.qual(name))

    def mul(self, a, b, name):
        return self._op(ops.mul, a, b, self.qual(name))

    def add_bias(self, x, bias, name):
        return self._op(ops.add_bias, x, bias, self.qual(name))

    def scale(self, x, s, name):
        return self._op(ops.scale, x, s, self.qual(name))

    def relu(self, x, name):
        return self._op(ops.relu, x, self.qual(name))

    def relu_bwd(self, x, dy, name):
        return self._op(ops.relu_bwd, x, dy, self.qual(name))

    def gelu(self, x, name):
        return self._op(ops.gelu, x, self.qual(name))

    def gelu_bwd(self, x, dy, name):
        return self._op(ops.gelu_bwd, x, dy, self.qual(name))

    def cast(self, x, dtype, name):
        return self._op(ops.cast, x, dtype, self.qual(name))

    def softmax(self, x, name):
        return self._op(ops.softmax, x, self.qual(name))

    def softmax_bwd(self, y, dy, name):
        return self._op(ops.softmax_bwd, y, dy, self.qual(name))

    def layer_norm(self, x, gamma, beta, name):
        return self._op(ops.layer_norm, x, gamma, beta, self.qual(name))

    def layer_norm_bwd(self, x, gamma, dy, name):
        return self._op(ops.layer_norm_bwd, x, gamma, dy, self.qual(name))

    def reduce_rows(self, x, name):
        return self._op(ops.reduce_rows, x, self.qual(name))

    def sgd(self, w, g, lr, name):
        out = self._op(ops.sgd, w, g, lr, self.qual(name))
        if w.name in self.host_loads:  # a streamed weight goes back to streaming memory once updated
            buf, _ = self.host_loads[w.name]
            op = self.ctx.begin_op(w.name + "/store", "stream_copy", plan="updated weight back to DDR",
                                   min_bytes=w.nbytes)
            self.ctx.add(P.StreamCopy(w, buf, name=f"{w.name}/store", op=op))
        return out

    def pad_hw(self, x, nhwc, p, name):
        return self._op(ops.pad_hw, x, nhwc, p, self.qual(name))

    def mse_grad(self, y, target, name):
        return self._op(ops.mse_grad, y, target, self.qual(name))

    def program(self):
        return self.ctx.sequence("main")

    def built(self) -> None:
        """The graph is built: drop what only building used (the op context's window layouts, up to
        ``mapping.LAYOUTS_BYTES``), so that the compile and the run, and a graph kept for later runs, do not hold it."""
        self.ctx.window_layouts.clear()
