"""Model backends: one model definition, two ways to run it.

Every bundled model is written once against the small op vocabulary below.  ``NumpyBackend``
executes it eagerly with the numpy reference ops (``emulator/reference.py``) - that is the ground
truth.  ``EmulatorBackend`` (``backends/emulator_backend.py``) builds the same ops into an emulator graph.

Tensors are backend handles with ``.shape`` and ``.dtype``.  ``view(x, index)`` makes an operand
from arbitrary flat element indices of ``x`` (transposes, head splits) - accepted by ``matmul``
and ``copy``.  Stored values are rounded to the storage dtype after every op, as on the device.
"""

from __future__ import annotations

import contextlib

import numpy as np

from popvision_lite.emulator import reference as R
from popvision_lite.emulator.ops.context import View
from popvision_lite.emulator.ops.norm_pool import NumpyNormPool

NP_DTYPE = {"fp16": np.float16, "fp32": np.float32, "float16": np.float16, "float32": np.float32,
            "int32": np.int32}


class Backend:
    """Shared bookkeeping: name scopes, the current IPU, precision."""

    def __init__(self, precision: str = "fp16", num_ipus: int = 1):
        if precision not in ("fp16", "fp32"):
            raise ValueError(f"precision {precision!r}: expected fp16 or fp32")
        self.precision = precision
        self.dtype = "float16" if precision == "fp16" else "float32"
        self.num_ipus = num_ipus
        self.ipu = 0
        self._scopes: list[str] = []

    # ------------------------------------------------------------ naming and placement
    @contextlib.contextmanager
    def scope(self, name: str):
        self._scopes.append(name)
        try:
            yield
        finally:
            self._scopes.pop()

    @contextlib.contextmanager
    def on_ipu(self, ipu: int):
        old, self.ipu = self.ipu, int(ipu) % max(1, self.num_ipus)
        try:
            yield
        finally:
            self.ipu = old

    def mark(self, name: str) -> None:
        """Start of a named phase of the program (used by the pipeline composition); no-op here."""

    def replay(self, phase: str, args=()) -> None:
        """Run the programs of an earlier phase again (recomputation, a call of an outlined body whose
        parameters ``args`` take this call's values); the reference needs nothing."""

    def qual(self, name: str) -> str:
        return "/".join([*self._scopes, name])

    @staticmethod
    def view(x, index) -> View:
        return View(x, np.asarray(index, dtype=np.int64))

    @staticmethod
    def transpose_index(shape, axes) -> np.ndarray:
        """Flat indices of ``x.transpose(axes)`` for a tensor of ``shape``."""
        return np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape).transpose(axes)

    def t(self, x, axes=None):
        """View of x transposed (default: swap the last two axes)."""
        nd = len(x.shape)
        if axes is None:
            axes = tuple(range(nd - 2)) + (nd - 1, nd - 2)
        if isinstance(x, View):
            return View(x.base, x.index.transpose(axes))
        return View(x, axes=axes)  # index built lazily (transpose_index), if ever

    def reshaped(self, x, shape):
        if isinstance(x, View):
            return View(x.base, x.index.reshape(shape))
        return self.view(x, np.arange(int(np.prod(x.shape)), dtype=np.int64).reshape(shape))

    @staticmethod
    def repeat(x, reps: int) -> View:
        """View of x repeated ``reps`` times along its first axis (``take`` of ``np.tile`` of its positions), whose
        index is built only if something reads it."""
        return View(x, reps=reps)

    def take(self, x, index):
        """View of x at flat positions ``index`` of x (composes with an existing view)."""
        index = np.asarray(index, dtype=np.int64)
        if isinstance(x, View):
            return View(x.base, x.index.reshape(-1)[index])
        return View(x, index)


class NumpyBackend(NumpyNormPool, Backend):
    """Eager reference execution; handles are numpy arrays in the storage dtype."""

    def __init__(self, precision="fp16", num_ipus=1):
        super().__init__(precision, num_ipus)
        self.records: list[tuple[str, str]] = []  # (qualified op name, type) in program order
        self.tensors: dict[str, np.ndarray] = {}

    def _out(self, name, typ, value, dtype=None):
        q = self.qual(name)
        self.records.append((q, typ))
        arr = np.asarray(value).astype(NP_DTYPE[dtype or self.dtype])
        self.tensors[q] = arr
        return arr

    def _val(self, x):
        if isinstance(x, View):
            return np.asarray(x.base).reshape(-1)[x.index]
        return np.asarray(x)

    # ------------------------------------------------------------ tensors
    def input(self, name, values, dtype=None):
        arr = np.asarray(values).astype(NP_DTYPE[dtype or self.dtype])
        self.tensors[self.qual(name)] = arr
        return arr

    def weight(self, name, values, dtype=None, streamed=False):
        return self.input(name, values, dtype)

    def constant(self, name, values, dtype=None):
        return self.input(name, values, dtype)

    def copy(self, x, name):
        return self._out(name, "copy", self._val(x))

    def gather_rows(self, table, ids, name):
        """out[i] = table[ids[i]] (ids fixed when the graph is built)."""
        return self._out(name, "embedding", R.embedding(table, ids))

    # ------------------------------------------------------------ ops
    def matmul(self, a, b, name):
        """(..., M, K) @ (..., K, N); leading dims must agree (or b is 2-D)."""
        return self._out(name, "matmul", np.matmul(self._val(a).astype(np.float32), self._val(b).astype(np.float32)))

    def block_sparse_matmul(self, a, b, mask, block, name):
        return self._out(name, "block_sparse_matmul", R.block_sparse_matmul(self._val(a), self._val(b), mask, block))

    def add(self, a, b, name):
        return self._out(name, "add", R.add(self._val(a), self._val(b)))

    def mul(self, a, b, name):
        return self._out(name, "mul", R.mul(self._val(a), self._val(b)))

    def add_bias(self, x, bias, name):
        return self._out(name, "add", R.add(self._val(x), self._val(bias)))

    def scale(self, x, s, name):
        return self._out(name, "scale", R.scale(self._val(x), s))

    def relu(self, x, name):
        return self._out(name, "relu", R.relu(self._val(x)))

    def relu_bwd(self, x, dy, name):
        return self._out(name, "relu_bwd", R.relu_bwd(self._val(x), self._val(dy)))

    def gelu(self, x, name):
        return self._out(name, "gelu", R.gelu(self._val(x)))

    def gelu_bwd(self, x, dy, name):
        return self._out(name, "gelu_bwd", R.gelu_bwd(self._val(x), self._val(dy)))

    def cast(self, x, dtype, name):
        return self._out(name, "cast", self._val(x), dtype=dtype)

    def softmax(self, x, name):
        return self._out(name, "softmax", R.softmax(self._val(x)))

    def softmax_bwd(self, y, dy, name):
        return self._out(name, "softmax_bwd", R.softmax_bwd(self._val(y), self._val(dy)))

    def layer_norm(self, x, gamma, beta, name):
        return self._out(name, "layer_norm", R.layer_norm(self._val(x), self._val(gamma), self._val(beta)))

    def layer_norm_bwd(self, x, gamma, dy, name):
        dx, dg, db = R.layer_norm_bwd(self._val(x), self._val(gamma), self._val(dy))
        return (self._out(name + "/dx", "layer_norm_bwd", dx), self._out(name + "/dgamma", "layer_norm_bwd", dg),
                self._out(name + "/dbeta", "layer_norm_bwd", db))

    def reduce_rows(self, x, name):
        """Sum over all leading axes: (..., N) -> (N,) (bias gradients)."""
        v = self._val(x)
        return self._out(name, "reduce", v.reshape(-1, v.shape[-1]).sum(0, dtype=np.float32))

    def scatter_add(self, rows, idx, values, name):
        return self._out(name, "scatter_add", R.scatter_add(rows, idx, self._val(values)))

    def sgd(self, w, g, lr, name):
        """w <- w - lr * g (returns the updated weight)."""
        return self._out(name, "sgd_update", R.sgd_update(self._val(w), self._val(g), lr), dtype=str(w.dtype))

    def pad_hw(self, x, nhwc, p, name):
        """Zero-pad H and W of x (any shape holding an NHWC tensor of shape ``nhwc``) by p each side;
        returns an (N, H+2p, W+2p, C) tensor."""
        v = self._val(x).reshape(nhwc)
        return self._out(name, "pad", np.pad(v, ((0, 0), (p, p), (p, p), (0, 0))))

    def mse_grad(self, y, target, name):
        """d(mean((y-t)^2))/dy."""
        return self._out(name, "mse_grad", R.mse_loss(self._val(y), self._val(target))[1])
