"""``Shape``: a tensor's shape and dtype without values, what the plan-only backend (backends/planning.py)
and the plan-only norm/pool ops (ops/norm_pool.py) pass around.  Below both, so neither imports the other
for it."""

from __future__ import annotations

import numpy as np


class Shape:
    __slots__ = ("shape", "dtype")

    def __init__(self, shape, dtype):
        self.shape = tuple(int(s) for s in shape)
        self.dtype = dtype

    @property
    def size(self):
        return int(np.prod(self.shape))
