"""popnn codelet cycle estimators: non-linearities, pooling, batch-norm coefficients.

Sources (graphcore/poplibs 7eac0f26): ``lib/popnn/PerformanceEstimation.hpp``
(getNonLinearityOpCycles, getNonLinearityGradOpCycles, getPoolingCycles) and
``lib/popnn/popnnCycleEstimators.cpp`` (nonLinearity1DCycleEstimator,
MAKE_PERF_ESTIMATOR_NAME(NonLinearityGrad1D)).
"""

from __future__ import annotations

import numpy as np

from popvision_lite.emulator.estimators.popops import (
    ELEMENTWISE_OVERHEAD,
    UNARY_SUPERVISOR_EXTRA,
    vector_width,
)

# getNonLinearityOpCycles / getNonLinearityGradOpCycles (isVector = True): GELU 5 (half) / 10
# (float) cycles per vector, forward and gradient; ReLU 1 forward, 3 gradient.
NONLINEARITY_VECTOR_CYCLES = {("gelu", 2): 5, ("gelu", 4): 10, ("relu", 2): 1, ("relu", 4): 1}
NONLINEARITY_GRAD_VECTOR_CYCLES = {("gelu", 2): 5, ("gelu", 4): 10, ("relu", 2): 3, ("relu", 4): 3}
# nonLinearity1DCycleEstimator's set-up before the vector loop (3 + 5 + 2 + 2 + 5 + 3), as the 1D
# worker prologue that a 2D vertex's per-region cost replaces.
NONLINEARITY_1D_PROLOGUE = 20


def nonlinearity_worker_cycles(kind: str, itemsize: int, n, grad: bool = False) -> np.ndarray:
    """Worker share of popnn NonLinearity1D / NonLinearityGrad1D (nonLinearity1DCycleEstimator,
    MAKE_PERF_ESTIMATOR_NAME(NonLinearityGrad1D)), aligned path, remainder checks included; the
    9-cycle supervisor overhead is spread as 2 worker cycles."""
    vw = vector_width(itemsize)
    n = np.asarray(n, dtype=np.int64)
    nv = n // vw
    rem = n % vw
    if grad:
        vc = NONLINEARITY_GRAD_VECTOR_CYCLES[(kind, int(itemsize))]
        body = np.where(nv > 0, 4 + np.maximum(nv - 1, 0) * vc + 1, 0)
        c = 3 + 5 + 2 + 3 + 3 + 3 + 1 + body
        c = c + (4 + (rem > 0) * (vc + 1) if itemsize == 4 else 6 + ((rem & 2) > 0) * (vc + 2) + ((rem & 1) > 0) * (vc + 4))
    else:
        vc = NONLINEARITY_VECTOR_CYCLES[(kind, int(itemsize))]
        body = np.where(nv > 0, 2 + vc + np.maximum(nv - 1, 0) * vc + 1 + vc, 0)
        c = 3 + 5 + 2 + 2 + 5 + 3 + body
        c = c + (3 + (rem & 1) * (2 + vc) if itemsize == 4 else 4 + ((rem & 2) > 0) * (2 + vc) + (rem & 1) * (3 + vc))
    return c + UNARY_SUPERVISOR_EXTRA


# getPoolingCycles: vertex set-up (4 state + 1 + 2 + 7), per output row 13, per window slot a work
# item of an inner ``rpt`` loop of 3 cycles per 64-bit vector: 4 + 3 n for max pooling, 5 + 3 n
# for sum pooling, 7 + 5 n for the max-pool gradient.
POOL_VERTEX_CYCLES = 4 + 1 + 2 + 7
POOL_ROW_CYCLES = 13
POOL_WORK_ITEM = {"max": (4, 3), "sum": (5, 3), "max_grad": (7, 5)}  # (per item, per vector)


def pooling_cycles(kind: str, rows, k: int, vectors: int):
    """Worker cycles of a pooling vertex of ``rows`` output rows, ``k`` window slots per row and
    ``vectors`` 64-bit vectors of channels per slot (getPoolingCycles)."""
    per_item, per_vector = POOL_WORK_ITEM[kind]
    return POOL_VERTEX_CYCLES + rows * (POOL_ROW_CYCLES + k * (per_item + per_vector * vectors))


# Batch-norm per-channel coefficient arithmetic (mean, invstd, scale / shift, the gradient's a, b,
# c): fp32 scalar code per channel, 20 instructions (assumption: the divide / rsqrt dominates;
# popops RSQRT and DIVIDE are ~tens of cycles per element in fp32).
BN_COEFF_CYCLES_PER_CHANNEL = 20


def bn_coeff_cycles(channels):
    return ELEMENTWISE_OVERHEAD + BN_COEFF_CYCLES_PER_CHANNEL * channels
