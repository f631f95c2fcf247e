"""PlanOnlyBackend: walks a model with shapes only and runs the tile planners, nothing else.

Used to measure "planning alone" (bench/emulate_models.py) and to list every op's plan quickly.
"""

from __future__ import annotations

import numpy as np

from popvision_lite.emulator.backends.backend import Backend
from popvision_lite.emulator.ops.context import View
from popvision_lite.emulator.ops.norm_pool import PlanNormPool
from popvision_lite.emulator.ops.planners import PlanTarget, plan_elementwise, plan_matmul, plan_reduction
from popvision_lite.emulator.shape import Shape

__all__ = ["PlanOnlyBackend", "Shape"]


class PlanOnlyBackend(PlanNormPool, Backend):
    def __init__(self, plan_target: PlanTarget, precision="fp16", num_ipus=1):
        super().__init__(precision, num_ipus)
        self.pt = plan_target
        self.needs_values = False
        self.plans: list[tuple[str, str, str]] = []  # (op name, type, plan)

    def _rec(self, name, typ, plan):
        self.plans.append((self.qual(name), typ, plan.describe() if hasattr(plan, "describe") else str(plan)))

    def _ew(self, x, name, typ, dtype=None):
        x_shape = x.shape
        self._rec(name, typ, plan_elementwise(int(np.prod(x_shape)), self.pt))
        return Shape(x_shape, dtype or self.dtype)

    def _rows(self, x, name, typ):
        row = x.shape[-1]
        self._rec(name, typ, plan_reduction(int(np.prod(x.shape)) // row, row, self.pt))
        return Shape(x.shape, self.dtype)

    def input(self, name, values, dtype=None):
        return Shape(np.shape(values), dtype or self.dtype)

    def weight(self, name, values, dtype=None, streamed=False):
        return self.input(name, values, dtype)

    constant = input

    def copy(self, x, name):
        return self._ew(x, name, "copy")

    def gather_rows(self, table, ids, name):
        return Shape((len(np.ravel(ids)), table.shape[-1]), table.dtype)

    def matmul(self, a, b, name):
        G = a.shape[0] if len(a.shape) == 3 else 1
        M, K, N = a.shape[-2], a.shape[-1], b.shape[-1]
        ta = isinstance(a, View)
        tb = isinstance(b, View)
        plan = plan_matmul(M, N, K, self.pt, self.precision, tiles=max(1, self.pt.tiles // G), exact_k=True,
                           ta=ta, tb=tb)
        self._rec(name, "matmul", plan)
        return Shape(a.shape[:-1] + (N,), self.dtype)

    def add(self, a, b, name):
        return self._ew(a, name, "add")

    mul = add

    def add_bias(self, x, bias, name):
        return self._ew(x, name, "add")

    def scale(self, x, s, name):
        return self._ew(x, name, "scale")

    def relu(self, x, name):
        return self._ew(x, name, "relu")

    def relu_bwd(self, x, dy, name):
        return self._ew(x, name, "relu_bwd")

    def gelu(self, x, name):
        return self._ew(x, name, "gelu")

    def gelu_bwd(self, x, dy, name):
        return self._ew(x, name, "gelu_bwd")

    def cast(self, x, dtype, name):
        return self._ew(x, name, "cast", dtype)

    def softmax(self, x, name):
        return self._rows(x, name, "softmax")

    def softmax_bwd(self, y, dy, name):
        return self._rows(y, name, "softmax_bwd")

    def layer_norm(self, x, gamma, beta, name):
        return self._rows(x, name, "layer_norm")

    def layer_norm_bwd(self, x, gamma, dy, name):
        dx = self._rows(x, name, "layer_norm_bwd")
        return dx, Shape(gamma.shape, gamma.dtype), Shape(gamma.shape, gamma.dtype)

    def reduce_rows(self, x, name):
        self._rows(x, name, "reduce")
        return Shape(x.shape[-1:], self.dtype)

    def sgd(self, w, g, lr, name):
        self._ew(w, name, "sgd_update")
        return w

    def pad_hw(self, x, nhwc, p, name):
        n, h, w, c = nhwc
        return self._ew(Shape((n, h + 2 * p, w + 2 * p, c), x.dtype), name, "pad")

    def mse_grad(self, y, target, name):
        return self._ew(y, name, "mse_grad")
