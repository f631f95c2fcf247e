"""Codelets (vertex types): numerics as vectorised numpy over a whole vertex group, plus a
vectorised cycle-cost function, code size and state size.

Cycle unit: **worker-thread cycles** = instructions a worker context issues.  A tile's barrel
scheduler gives each of its ``threads_per_tile`` workers one issue slot in turn, so a vertex of
``c`` thread cycles occupies ``c * threads_per_tile`` tile cycles of wall time, and a tile whose
workers are all busy retires one worker instruction per tile cycle (see cost_model.py).

The cycle formulas of the elementwise, cast, fill, scaled-add, reduce and AMP matmul codelets are
derived from Poplar's own codelet cycle estimators in graphcore/poplibs (file and function cited
next to every constant below; tests/emulator/test_codelet_costs.py pins them, docs/emulator-fidelity.md
tabulates ours against poplibs').  A codelet may also be a *supervisor* vertex (``supervisor =
True``, e.g. the AMP matmul): one vertex per tile that uses all six workers; its ``cycles`` are the
poplibs tile estimate divided by the number of workers (worker-slot units), so the engine's
``6 x cycles + vertex_launch_cycles`` gives the poplibs tile cycles.  Device rates come from the
target's device spec ``[emulator]`` section.
"""

from __future__ import annotations

import functools

import numpy as np

from popvision_lite.emulator.graph import DTYPES, Blocks, Regions, VertexGroup, Windows, to_dtype
from popvision_lite.errors import EmulatorError

# bytes moved by one 64-bit vector load/store: 4 x fp16 or 2 x fp32/int32 per instruction
VECTOR_BYTES = 8
# Fallback for user-made codelets (C.unary / C.binary with an explicit cycles_per_vector and no
# poplibs op): loop set-up per vertex, in worker cycles (assumption; the BinaryOp1D worker prologue
# is 26, UnaryOp1D 17).
ELEMENTWISE_OVERHEAD = 14

# =============================================================================================
# Cycle formulas derived from Poplar's own codelet cycle estimators (graphcore/poplibs, commit
# 7eac0f26 "mk2-main").  Facts and formulas carried over, code our own.  Units:
#   * "worker cycles": cycles one worker context issues (what our codelets' ``cycles`` return);
#   * "tile cycles": wall cycles of the tile = 6 x the slowest worker's cycles + supervisor cycles
#     (poplibs returns supervisor/MultiVertex estimates in tile cycles:
#     ``numWorkers * workerCycles + supervisorOverhead``).
# The op library splits an elementwise op on a tile into up to 6 worker pieces (one per worker),
# which is exactly a poplibs MultiVertex whose supervisor hands ceil(n/6) elements to each worker,
# so a piece's worker cycles below are the poplibs worker term for that piece, and the engine's
# ``6 x max worker + vertex_launch_cycles`` (cost_model.compute_tile_cycles) reproduces the
# poplibs tile estimate (vertex_launch_cycles = popops basicOpSupervisorOverhead = 11).
# =============================================================================================

DATA_PATH_BYTES = 8          # poplar Target::getDataPathWidth() = 64 bits on Mk1/Mk2
SUPERVISOR_OVERHEAD = 11     # popops/PerformanceEstimation.cpp basicOpSupervisorOverhead()


def vector_width(itemsize: int) -> int:
    """Target::getVectorWidth(type): elements per 64-bit vector (4 x half, 2 x float/int)."""
    return max(DATA_PATH_BYTES // int(itemsize), 1)


def _cdiv(a, b):
    return -(-np.asarray(a, dtype=np.int64) // int(b))


# (cyclesPerLoop, naturalVectorWidth, loopUnrollFactor) per (op, itemsize):
# popops/popopsCycleEstimators.hpp binaryOpPerfInfo / unaryOpPerfInfo (HALF = 2, FLOAT = 4 bytes).
BINARY_OP_INFO = {
    ("add", 2): (1, True, 0), ("add", 4): (1, True, 0),
    ("sub", 2): (1, True, 0), ("sub", 4): (1, True, 0),
    ("mul", 2): (1, True, 0), ("mul", 4): (1, True, 0),
    ("max", 2): (4, False, 4), ("max", 4): (3, False, 2),
    ("div", 2): (21, False, 4), ("div", 4): (10, False, 2),
}
# ADD / SUBTRACT / MULTIPLY of half/float have an assembly ("external") codelet: +2 per vector,
# every other op +5 (popopsCycleEstimators.cpp binaryOpInnerLoopCycles, hasExternalCodelet).
_EXTERNAL_BINARY = {"add", "sub", "mul"}
UNARY_OP_INFO = {
    ("relu", 2): (3, False, 4), ("relu", 4): (3, False, 2),
    ("neg", 2): (2, False, 4), ("neg", 4): (2, False, 2),
    ("exp", 2): (4, False, 4), ("exp", 4): (6, False, 2),
    ("square", 2): (2, False, 4), ("square", 4): (2, False, 2),
    ("tanh", 2): (4, False, 4), ("tanh", 4): (12, False, 2),
    ("rsqrt", 2): (19, False, 4), ("rsqrt", 4): (8, False, 2),
    ("inverse", 2): (15, False, 4), ("inverse", 4): (6, False, 2),
}


def binary_op_loop_cycles(op: str, itemsize: int, n) -> np.ndarray:
    """popopsCycleEstimators.cpp binaryOpInnerLoopCycles (not in place)."""
    cpl, natural, unroll = BINARY_OP_INFO[(op, int(itemsize))]
    if natural:
        return _cdiv(n, vector_width(itemsize)) * (cpl + (2 if op in _EXTERNAL_BINARY else 5))
    return _cdiv(n, unroll) * cpl


def binary_op_worker_cycles(op: str, itemsize: int, n) -> np.ndarray:
    """Worker share of popops BinaryOp1D (MultiVertex): 26 (half) / 29 (float) + inner loop over the
    worker's elements (popopsCycleEstimators.cpp MAKE_PERF_ESTIMATOR_NAME(BinaryOp1D))."""
    return (29 if int(itemsize) == 4 else 26) + binary_op_loop_cycles(op, itemsize, n)


def binary_op_1d_tile_cycles(op: str, itemsize: int, n_total: int) -> int:
    """poplibs' tile estimate of BinaryOp1D over ``n_total`` elements: 6 workers x worker(ceil(n/6)) + 11."""
    return int(6 * binary_op_worker_cycles(op, itemsize, _cdiv(n_total, 6)) + SUPERVISOR_OVERHEAD)


def unary_op_loop_cycles(op: str, itemsize: int, n) -> np.ndarray:
    """popopsCycleEstimators.cpp unaryOpInnerLoopCycles: unrolled ops ceil(n/unroll) x cycles,
    natural-width ops basicOpLoopCycles(n, vectorWidth, cycles + 4)."""
    cpl, natural, unroll = UNARY_OP_INFO[(op, int(itemsize))]
    if not natural and unroll > 0:
        return _cdiv(n, unroll) * cpl
    vw = vector_width(itemsize) if natural else 1
    return _cdiv(n, vw) * (cpl + 4)


# UnaryOp1D supervisor adds 9 cycles to 6 x worker + basicOpSupervisorOverhead; spread over the six
# workers that is ceil(9 / 6) = 2 worker cycles (our engine charges supervisor time per worker slot).
UNARY_SUPERVISOR_EXTRA = 2


def unary_op_worker_cycles(op: str, itemsize: int, n) -> np.ndarray:
    """Worker share of popops UnaryOp1D: 17 (33 for EXPONENT) + inner loop
    (popopsCycleEstimators.cpp MAKE_PERF_ESTIMATOR_NAME(UnaryOp1D))."""
    base = 33 if op == "exp" else 17
    return base + UNARY_SUPERVISOR_EXTRA + unary_op_loop_cycles(op, itemsize, n)


def unary_op_1d_tile_cycles(op: str, itemsize: int, n_total: int) -> int:
    """poplibs' tile estimate of UnaryOp1D: 6 x (base + loop(ceil(n/6))) + 9 + 11."""
    base = 33 if op == "exp" else 17
    return int(6 * (base + unary_op_loop_cycles(op, itemsize, _cdiv(n_total, 6))) + 9 + SUPERVISOR_OVERHEAD)


# popnn/PerformanceEstimation.hpp getNonLinearityOpCycles / getNonLinearityGradOpCycles
# (isVector = True): GELU 5 (half) / 10 (float) cycles per vector, forward and gradient; ReLU grad 3.
NONLINEARITY_VECTOR_CYCLES = {("gelu", 2): 5, ("gelu", 4): 10, ("relu", 2): 1, ("relu", 4): 1}
NONLINEARITY_GRAD_VECTOR_CYCLES = {("gelu", 2): 5, ("gelu", 4): 10, ("relu", 2): 3, ("relu", 4): 3}


def nonlinearity_worker_cycles(kind: str, itemsize: int, n, grad: bool = False) -> np.ndarray:
    """Worker share of popnn NonLinearity1D / NonLinearityGrad1D (popnnCycleEstimators.cpp
    nonLinearity1DCycleEstimator, MAKE_PERF_ESTIMATOR_NAME(NonLinearityGrad1D)), aligned path,
    remainder checks included; the 9-cycle supervisor overhead is spread as 2 worker cycles."""
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


def cast_worker_core_cycles(n, from_size: int, to_size: int) -> np.ndarray:
    """popops/PerformanceEstimation.cpp castWorkerCycles for float<->half (aux-pipeline conversion):
    19 prologue + cyclesPerVector x (n / opVectorWidth) + remainder checks; opVectorWidth =
    min(2 x elements per 64-bit load, elements per 64-bit store); load/store cycles per vector."""
    n = np.asarray(n, dtype=np.int64)
    load_w = DATA_PATH_BYTES // from_size
    store_w = DATA_PATH_BYTES // to_size
    if from_size == to_size:  # same-size "cast" (e.g. a copy through the cast path): plain 64-bit moves
        op_w, cpv = load_w, 1
    else:
        op_w = min(load_w * 2, store_w)
        cpv = max(op_w // min(op_w, load_w), op_w // min(op_w, store_w))
    rem = n % op_w
    bits = max(int(np.ceil(np.log2(op_w))), 0)
    c = 19 + cpv * (n // op_w)
    for i in range(bits):
        c = c + 1 + 2 * ((rem >> i) & 1)
    return c


def cast_worker_cycles(n, from_size: int, to_size: int) -> np.ndarray:
    """Worker share of popops Cast1D (getCast1DCycleEstimate: 12 + 6 x (castWorkerCycles(n/6) + 18))."""
    return cast_worker_core_cycles(n, from_size, to_size) + 18 + 2  # + ceil(12 - 11 supervisor) spread


def cast_1d_tile_cycles(n_total: int, from_size: int, to_size: int) -> int:
    return int(12 + 6 * (cast_worker_core_cycles(_cdiv(n_total, 6), from_size, to_size) + 18))


def fill_worker_cycles(n, itemsize: int) -> np.ndarray:
    """popops/PerformanceEstimation.cpp _fillCycleEstimate (Fill worker): half 26 + n/4
    (1 element: 15, 2: 21); float 16 + n/2 + 6 + 1."""
    n = np.asarray(n, dtype=np.int64)
    if itemsize == 2:
        return np.where(n == 1, 15, np.where(n == 2, 21, 26 + n // 4))
    return 16 + n // 2 + 6 + (n % 2 == 1) + 1


def scaled_add_worker_cycles(n, itemsize: int) -> np.ndarray:
    """Worker share of popops ScaledAddSupervisor / ScaledSubtractSupervisor with equal data types
    (PerformanceEstimation.cpp getScaledArithmeticSupervisorCycleEstimate): worker 15 prologue +
    6 loop set-up + 3 x (vectors - 1) + 2 + 1 exit (+ remainder: float 8, half 5..18); supervisor
    21 + 11 + 7 + 12 + 6 = 57 cycles, of which 11 is our vertex launch and 46 is spread as 8 worker
    cycles."""
    vw = vector_width(itemsize)
    n = np.asarray(n, dtype=np.int64)
    nv = n // vw
    rem = n % vw
    c = 15 + np.where(nv > 0, 6 + 3 * np.maximum(nv - 1, 0), 0) + 2 + 1 + 1
    if itemsize == 4:
        c = c + (rem > 0) * 8
    else:
        c = c + (rem > 0) * (5 + (rem >= 2) * 7 + (rem == 3) * 6)
    return c + 8


def scaled_add_tile_cycles(n_total: int, itemsize: int) -> int:
    """poplibs' getScaledArithmeticSupervisorCycleEstimate, (half, half) or (float, float), not
    memory-constrained: 57 + 6 x max worker cycles (remainder on one worker)."""
    vw = vector_width(itemsize)
    total_v, rem = divmod(int(n_total), vw)
    per, extra = divmod(total_v, 6)
    sup = 21 + SUPERVISOR_OVERHEAD + (7 if rem == 0 else 13) + 12 + 6
    worst = 0
    for wid in range(6):
        nv = per  # poplibs gives every worker vectorsPerWorker (the remainder-vector term is always 0)
        c = 15 + (6 + 3 * (nv - 1) if nv else 0) + 2
        if wid == extra:
            c += 1
            if rem:
                c += 8 if itemsize == 4 else 5 + (7 if rem >= 2 else 0) + (6 if rem == 3 else 0)
        worst = max(worst, c + 1)
    return sup + 6 * worst


def strided_reduce_cycles(num_partials, num_outputs, partials_itemsize: int = 4, out_itemsize: int = 4):
    """popops/reduction/CycleEstimationFunctions.cpp getCyclesEstimateForStridedReduce (ADD, not an
    update): a worker vertex reducing ``num_partials`` rows of ``num_outputs`` elements (partials
    laid out with a stride, the layout the reduction's second stage gathers):
    5 + 11 + ceil(outputs / elemsPerLoop) x (3 + post + 3 + (partials - 1));
    elemsPerLoop = min(accumulator vector width, data-path elements) = 2 (float) / 4 (half);
    post = 3 + 2 for float partials, 1 + 7 (half out) / 1 + 6 (float out) for half partials."""
    k = np.asarray(num_partials, dtype=np.int64)
    m = np.asarray(num_outputs, dtype=np.int64)
    acc_w = 4 if partials_itemsize == 4 else 8
    epl = min(acc_w, DATA_PATH_BYTES // partials_itemsize)
    post = 3 + 2 if partials_itemsize == 4 else 1 + (7 if out_itemsize == 2 else 6)
    return 5 + 11 + _cdiv(m, epl) * (3 + post + 3 + (k - 1))


def strided_reduce_cycles_scalar(num_partials: int, num_outputs: int, partials_itemsize: int = 4,
                                 out_itemsize: int = 4) -> int:
    """:func:`strided_reduce_cycles` for one vertex, in plain Python (the planners' inner loop)."""
    acc_w = 4 if partials_itemsize == 4 else 8
    epl = min(acc_w, DATA_PATH_BYTES // partials_itemsize)
    post = 3 + 2 if partials_itemsize == 4 else 1 + (7 if out_itemsize == 2 else 6)
    return 5 + 11 + -(-int(num_outputs) // epl) * (3 + post + 3 + (int(num_partials) - 1))


# ---- AMP (Accumulating Matrix Product) partials: poplin ConvPartial1x1Out supervisor vertex ----
# A matmul block on a tile is a 1x1 convolution: field positions = rows of A (m), input channels =
# K, output channels = N.  Per (input-channel group, output-channel group) every worker runs the
# AMP inner loop over its share of the rows.  Mk2 (IPU2) parameters, half inputs / float partials:
# 16 conv units (tests/poplin/codelets/ConvPartial1x1Out.cpp: numConvUnits = 16 on IPU2), 16 input
# channels per group (weightsPerConvUnit = 16) and 16 output channels per group, 4 worker cycles per
# field position (PerformanceEstimation.hpp getConvPartial1x1SupervisorInnerLoopCycleEstimate-
# HalfFloat coreCycles = 4): 6 workers x 16 x 16 MACs / (6 x 4) tile cycles = 64 MAC = 128 FLOP per
# tile cycle, the spec's AMP rate.  Coefficient loads: 16 units x 32 bytes / 16 B per cycle (ld128)
# = 32 cycles per group (getConvPartialAmpSupervisorWeightLoadCycleEstimate).
# Float inputs: 8 conv units, coreCycles 8 (same function, floatActivations); channel groups of
# 8 in x 16 out are our assumption chosen so that the loop runs at the spec's fp32 rate (32 FLOP).
AMP_FP16 = dict(in_group=16, out_group=16, core=4, loads=32, float_acts=False)
AMP_FP32 = dict(in_group=8, out_group=16, core=8, loads=16, float_acts=True)


def amp_params(fp16: bool, target=None, rate: float | None = None) -> dict:
    p = dict(AMP_FP16 if fp16 else AMP_FP32)
    if target is not None and rate is None:
        rate = float(target.em["fp16_flops_per_cycle_per_tile" if fp16 else "fp32_flops_per_cycle_per_tile"])
    if rate is not None:  # scale the loop so that it runs at the spec's AMP rate (Mk1: 64 FLOP/cycle)
        nominal = 2.0 * p["in_group"] * p["out_group"] / p["core"]
        if abs(rate - nominal) > 1e-6:
            p["core"] = max(1, int(round(p["core"] * nominal / rate)))
    return p


def amp_worker_inner_cycles(n: int, p: dict, zeroing: bool) -> int:
    """Worker cycles of one (in group, out group) pass over ``n`` field positions
    (getConvPartial1x1SupervisorInnerLoopCycleEstimateHalfFloat; half inputs take the common
    half/float-partials path with 16 units; retention saving 7 for half, 0 for float).  Plain ints:
    the planner evaluates it for thousands of candidate block shapes, where numpy's per-call
    overhead on six-element arrays dominated."""
    core = p["core"]
    if not p["float_acts"]:
        z = 1 if zeroing else 2
        c = 20 + z if n == 0 else 31 + z if n == 1 else 40 + z if n == 2 else (37 if zeroing else 38) + (n - 3) * core
        return c - 7 if n > 0 else c
    zc = 4  # zeroCyclesPerGroup: float partials
    zz = 1 if zeroing else 0
    return 24 if n == 0 else 47 + (2 + zc) * zz if n == 1 else 46 + (2 + 2 * zc) * zz if n == 2 else \
        46 + (2 + zc * n) * zz + (n - 3) * core


def amp_matmul_tile_cycles(m: int, k: int, n: int, fp16: bool = True, target=None, rate: float | None = None) -> int:
    if target is not None and rate is None:
        rate = float(target.em["fp16_flops_per_cycle_per_tile" if fp16 else "fp32_flops_per_cycle_per_tile"])
    return _amp_matmul_tile_cycles(int(m), int(k), int(n), bool(fp16), None if rate is None else float(rate))


@functools.lru_cache(maxsize=65536)
def _amp_matmul_tile_cycles(m: int, k: int, n: int, fp16: bool, rate: float | None) -> int:
    """Tile cycles of poplin's ConvPartial1x1Out supervisor vertex for out (m, n) = a (m, k) @ b (k, n)
    with FP32 partials (poplin/PerformanceEstimation.hpp getConvPartial1x1SupervisorOuterLoop-
    CycleEstimateHalfFloat + the inner-loop estimate, as ConvModel.cpp addPartialCalcCycleEstimate
    combines them): rows split over the 6 workers, K in groups of in_group, N in groups of
    out_group, the first in-group pass zeroes the partials."""
    p = amp_params(fp16, None, rate)
    base, extra = divmod(m, 6)
    elems = [base + (1 if w < extra else 0) for w in range(6)]

    def inner(zeroing):
        c = [6 * amp_worker_inner_cycles(e, p, zeroing) for e in elems]
        return max(max(c), min(c) + 14)

    n_in = -(-k // p["in_group"])
    n_out = -(-n // p["out_group"])
    common = 1  # half inputs with 16 conv units, or float partials: the common code path
    ret1, ret2 = (7, 3) if not p["float_acts"] else (0, 0)
    L = p["loads"]
    return int(50 + 6 * (ret1 + ret2 * (n_in - 1))
               + 12 + common
               + (n_in - 1) * (15 - common + 1 + n_out * (19 + 6 + L + inner(False)))
               + 10 + 1 + n_out * (19 - common + 7 + L + inner(True)))


def amp_worker_cycles(rows, k: int, n: int, fp16: bool = True, target=None) -> np.ndarray:
    """A worker vertex holding ``rows`` rows of a block product (the core BlockMatMul): its share of
    the supervisor estimate above when six such vertices share a tile = amp_matmul_tile_cycles(6 x
    rows, k, n) / 6 (rounded up)."""
    rows = np.asarray(rows, dtype=np.int64)
    uniq = np.unique(rows)
    vals = {int(r): -(-amp_matmul_tile_cycles(6 * int(r), k, n, fp16, target) // 6) for r in uniq}
    return np.vectorize(lambda r: vals[int(r)], otypes=[np.int64])(rows) if rows.ndim else np.int64(vals[int(rows)])


class Codelet:
    """Base class.  Subclasses set ``name``, ``fields`` ({name: "in"|"out"|"inout"}), ``code_bytes``
    (per tile, once per codelet), ``state_bytes`` (per vertex) and override ``cycles`` / ``flops`` /
    ``compute`` (vectorised over a group) or ``compute_vertex`` (slow path)."""

    name = "Codelet"
    fields: dict[str, str] = {}
    code_bytes = 256
    state_bytes = 4

    def check(self, group: VertexGroup) -> None:
        """Raise EmulatorError when the group's field shapes do not suit this codelet."""

    def cycles(self, group: VertexGroup, target) -> np.ndarray:
        raise NotImplementedError

    def flops(self, group: VertexGroup) -> int:
        return 0

    def sram_bytes(self, group: VertexGroup) -> int:
        """Bytes the group reads and writes from tile SRAM (inout fields count twice)."""
        total = 0
        for fname, f in group.fields.items():
            b = int(f.elems().sum()) * f.tensor.itemsize
            total += 2 * b if self.fields[fname] == "inout" else b
        return total

    def compute(self, group: VertexGroup, data: dict) -> None:
        for v in range(group.n):
            self.compute_vertex(group, data, v)

    def compute_vertex(self, group: VertexGroup, data: dict, v: int) -> None:
        raise NotImplementedError(f"codelet '{self.name}' has no numerics")

    def __repr__(self) -> str:
        return f"<codelet {self.name}>"


def _per_vector(f, elems: np.ndarray) -> np.ndarray:
    """Vector instructions to stream ``elems`` elements of field ``f`` (64-bit vectors)."""
    per = max(VECTOR_BYTES // f.tensor.itemsize, 1)
    return -(-elems // per)


def _expand(param, sizes: np.ndarray):
    """Per-vertex parameter -> per-element array (scalars pass through)."""
    p = np.asarray(param)
    return p if p.ndim == 0 else np.repeat(p, sizes)


class Elementwise(Codelet):
    """out = fn(inputs...) elementwise over Regions fields of equal size per vertex."""

    def __init__(self, name, fn, inputs=("a", "b"), cycles_per_vector=2, flops_per_element=1,
                 params=(), inplace=False, code_bytes=320, model=None):
        # model: which poplibs estimator gives the worker cycles of a piece: ("binary", op),
        # ("unary", op), ("nonlinearity", kind, grad), ("cast",), ("fill",), ("scaled_add",),
        # ("composite", [models...]) for fused ops (sum of the parts), or None (fallback formula).
        self.model = model
        self.name = name
        self.fn = fn
        self.inputs = tuple(inputs)
        self.inplace = inplace
        self.fields = {i: "in" for i in self.inputs}
        self.fields["out"] = "inout" if inplace else "out"
        self.cycles_per_vector = cycles_per_vector
        self.flops_per_element = flops_per_element
        self.param_names = tuple(params)
        self.code_bytes = code_bytes
        self.state_bytes = 4 + 4 * len(self.param_names)

    def check(self, group):
        sizes = None
        for fname, f in group.fields.items():
            if not isinstance(f, Regions):
                raise EmulatorError(f"codelet '{self.name}' in '{group.cs.name}': field '{fname}' must be tensor.regions(...)")
            if sizes is None:
                sizes = f.sizes
            elif not np.array_equal(sizes, f.sizes):
                v = int(np.nonzero(sizes != f.sizes)[0][0])
                raise EmulatorError(
                    f"codelet '{self.name}' in '{group.cs.name}': vertex {v}: field '{fname}' has {int(f.sizes[v])} "
                    f"elements but another field has {int(sizes[v])}; fix: connect equal-sized regions"
                )
        for p in self.param_names:
            if p not in group.params:
                raise EmulatorError(f"codelet '{self.name}' in '{group.cs.name}': missing param '{p}'")

    def cycles(self, group, target):
        out = group.fields["out"]
        n = np.asarray(out.sizes, dtype=np.int64)
        if self.model is None:
            return ELEMENTWISE_OVERHEAD + self.cycles_per_vector * _per_vector(out, n)
        src = group.fields[self.inputs[0]].tensor.itemsize if self.inputs else out.tensor.itemsize
        c1 = model_worker_cycles(self.model, n, out.tensor.itemsize, src)
        threads = int(target.threads_per_tile)
        on_tile = np.bincount(group.tiles)[group.tiles] if group.n else np.zeros(0, np.int64)
        frag = on_tile > threads
        if not frag.any():
            return c1
        # more pieces than workers on the tile: they are regions of six 2D worker vertices
        reg, pro = model_region_cycles(self.model, n, out.tensor.itemsize, src)
        c2 = reg + -(-pro * threads // np.maximum(on_tile, 1))
        return np.where(frag, c2, c1)

    # pieces beyond the tile's workers are regions of 2D worker vertices, not vertices of their own:
    # the supervisor launches at most ``threads`` of them (cost_model.compute_tile_cycles)
    multi_region = True

    def flops(self, group):
        if group.fields["out"].tensor.dtype == "int32":
            return 0
        return int(self.flops_per_element * group.fields["out"].sizes.sum())

    def compute(self, group, data):
        out = group.fields["out"]
        args = [group.fields[i].gather(data) for i in self.inputs]
        if self.inplace:
            args = [out.gather(data), *args]
        kw = {p: _expand(group.params[p], out.sizes) for p in self.param_names}
        res = self.fn(*args, **kw)
        out.scatter(data, to_dtype(res, out.tensor.dtype))


def model_worker_cycles(model, n, itemsize: int, src_itemsize: int | None = None) -> np.ndarray:
    """Worker cycles of an elementwise piece of ``n`` elements under a poplibs estimator ``model``."""
    kind = model[0]
    if kind == "binary":
        return binary_op_worker_cycles(model[1], itemsize, n)
    if kind == "binary_inplace":  # popops getBinaryOp1DInPlaceEstimate: worker 58 + inner loop
        return 58 + binary_op_loop_cycles(model[1], itemsize, n)
    if kind == "unary":
        return unary_op_worker_cycles(model[1], itemsize, n)
    if kind == "nonlinearity":
        return nonlinearity_worker_cycles(model[1], itemsize, n, grad=bool(model[2]))
    if kind == "cast":
        return cast_worker_cycles(n, int(src_itemsize or itemsize), int(itemsize))
    if kind == "fill":
        return fill_worker_cycles(n, itemsize)
    if kind == "scaled_add":
        return scaled_add_worker_cycles(n, itemsize)
    if kind == "composite":  # a fused op = the parts one after the other on the same piece
        return sum(model_worker_cycles(m, n, itemsize, src_itemsize) for m in model[1])
    raise ValueError(f"unknown cycle model {model!r}")


# When a tile holds more pieces of an op than it has workers (a fragmented mapping, e.g. the rows of
# matmul output blocks), Poplar runs 2D worker vertices, each looping over a list of regions:
# (per-region overhead, per-vertex prologue) of the 2D estimators, and the 1D worker prologue that
# the per-region cost replaces.  popops BinaryOp2D: 5 + sum of inner loops; BinaryOp2DInPlace: 20 +;
# UnaryOp2D: 20 +; getCast2DCycleEstimate: 5 + sum(11 + castWorkerCycles); getFill2DCycleEstimate:
# 5 + sum(fill - 2); popnn nonLinearity2DCycleEstimator: 5 + 9 + per region 12 + loop (half).
# ScaledAdd2D is costed like BinaryOp2D (assumption: its estimator was not read).
_MODEL_2D = {  # kind -> (per-region overhead, per-vertex prologue)
    "binary": (0, 5), "binary_inplace": (0, 20), "unary": (0, 20), "nonlinearity": (12, 14),
    "cast": (11, 5), "fill": (-2, 5), "scaled_add": (0, 5),
}


def _model_1d_prologue(model, itemsize: int) -> int:
    kind = model[0]
    if kind == "binary":
        return 29 if itemsize == 4 else 26
    if kind == "binary_inplace":
        return 58
    if kind == "unary":
        return (33 if model[1] == "exp" else 17) + UNARY_SUPERVISOR_EXTRA
    if kind == "nonlinearity":
        return 20 + UNARY_SUPERVISOR_EXTRA
    if kind == "cast":
        return 18 + 2
    if kind == "fill":
        return 0
    if kind == "scaled_add":
        return 0
    raise ValueError(kind)


def model_region_cycles(model, n, itemsize: int, src_itemsize: int | None = None) -> tuple[np.ndarray, int]:
    """(cycles of one region of a 2D worker vertex, 2D vertex prologue) under ``model``."""
    if model[0] == "composite":
        parts = [model_region_cycles(m, n, itemsize, src_itemsize) for m in model[1]]
        return sum(p[0] for p in parts), sum(p[1] for p in parts)
    if model[0] == "scaled_add":
        loop = binary_op_loop_cycles("add", itemsize, n)
    else:
        loop = model_worker_cycles(model, n, itemsize, src_itemsize) - _model_1d_prologue(model, itemsize)
    per_region, prologue = _MODEL_2D[model[0]]
    return loop + per_region, prologue


def unary(name, fn, cycles_per_vector=2, flops_per_element=1, params=(), code_bytes=256, model=None) -> Elementwise:
    return Elementwise(name, fn, ("in",), cycles_per_vector, flops_per_element, params, code_bytes=code_bytes,
                       model=model)


def binary(name, fn, cycles_per_vector=3, flops_per_element=1, params=(), code_bytes=320, model=None) -> Elementwise:
    return Elementwise(name, fn, ("a", "b"), cycles_per_vector, flops_per_element, params, code_bytes=code_bytes,
                       model=model)


# Binary ops: popops BinaryOp1D (see binary_op_worker_cycles).
ADD = binary("Add", np.add, model=("binary", "add"))
SUB = binary("Sub", np.subtract, model=("binary", "sub"))
MUL = binary("Mul", np.multiply, model=("binary", "mul"))
MAX = binary("Max", np.maximum, model=("binary", "max"))
# out += in (inout 'out', in 'in'): popops BinaryOp1DInPlace ADD (getBinaryOp1DInPlaceEstimate:
# worker 58 + inner loop; the in-place ADD inner loop is the same 3 cycles per vector)
ADD_INPLACE = Elementwise("AddInPlace", np.add, inputs=("in",), cycles_per_vector=3, inplace=True,
                          model=("binary_inplace", "add"))
# Unary ops: popops UnaryOp1D (see unary_op_worker_cycles).
RELU = unary("Relu", lambda x: np.maximum(x, 0), model=("unary", "relu"))
NEG = unary("Neg", np.negative, model=("unary", "neg"))
# A copy of a region on its tile: the same-size cast path (64-bit load/store per vector).
COPY = unary("Copy", lambda x: x, flops_per_element=0, model=("cast",))
CAST = unary("Cast", lambda x: x, flops_per_element=0, model=("cast",))
EXP = unary("Exp", np.exp, cycles_per_vector=8, flops_per_element=4, model=("unary", "exp"))
# x * scalar: popops BinaryOp1D MULTIPLY with a broadcast scalar operand (same inner loop)
SCALE = unary("Scale", lambda x, scale: x * scale, params=("scale",), model=("binary", "mul"))
FILL = Elementwise("Fill", lambda value: value, inputs=(), cycles_per_vector=1, flops_per_element=0,
                   params=("value",), code_bytes=128, model=("fill",))


def _fill_compute(group, data):
    out = group.fields["out"]
    vals = np.broadcast_to(_expand(group.params["value"], out.sizes), (int(out.sizes.sum()),))
    out.scatter(data, vals.astype(DTYPES[out.tensor.dtype]))


FILL.compute = _fill_compute


def _block2(f, fname: str, codelet: str) -> tuple[int, int]:
    if not isinstance(f, Blocks | Windows):
        raise EmulatorError(f"codelet '{codelet}': field '{fname}' must be tensor.blocks(...) or tensor.windows(...)")
    bs = f.block_shape
    if len(bs) < 2 or any(b != 1 for b in bs[:-2]):
        raise EmulatorError(
            f"codelet '{codelet}': field '{fname}' block shape {bs} must be 2-D (leading block dims of 1)"
        )
    return bs[-2], bs[-1]


class BlockMatMul(Codelet):
    """AMP block matmul: out (bm, bn) [+]= a (bm, bk) @ b (bk, bn); fp32 accumulation."""

    code_bytes = 1536
    state_bytes = 8

    def __init__(self, accumulate: bool = False):
        self.accumulate = accumulate
        self.name = "BlockMatMulAcc" if accumulate else "BlockMatMul"
        self.fields = {"a": "in", "b": "in", "out": "inout" if accumulate else "out"}

    def dims(self, group) -> tuple[int, int, int]:
        bm, bk = _block2(group.fields["a"], "a", self.name)
        bk2, bn = _block2(group.fields["b"], "b", self.name)
        om, on = _block2(group.fields["out"], "out", self.name)
        if bk != bk2 or (om, on) != (bm, bn):
            raise EmulatorError(
                f"codelet '{self.name}' in '{group.cs.name}': block shapes a ({bm},{bk}) @ b ({bk2},{bn}) -> "
                f"out ({om},{on}) do not chain; fix: a (m,k), b (k,n), out (m,n)"
            )
        return bm, bk, bn

    def check(self, group):
        self.dims(group)

    def _flops_per_cycle(self, group, target) -> float:
        fp16 = group.fields["a"].tensor.dtype == "float16" and group.fields["b"].tensor.dtype == "float16"
        key = "fp16_flops_per_cycle_per_tile" if fp16 else "fp32_flops_per_cycle_per_tile"
        return float(target.em[key])

    def _fp16(self, group) -> bool:
        return group.fields["a"].tensor.dtype == "float16" and group.fields["b"].tensor.dtype == "float16"

    def cycles(self, group, target):
        bm, bk, bn = self.dims(group)
        # A worker vertex of bm rows: its share of poplin's AMP supervisor estimate when six such
        # vertices share the tile (amp_worker_cycles; the AMP loop runs at the spec's
        # fp16/fp32_flops_per_cycle_per_tile when all six workers are busy).
        return np.full(group.n, int(amp_worker_cycles(bm, bk, bn, self._fp16(group), target)), np.int64)

    def flops(self, group):
        bm, bk, bn = self.dims(group)
        return int(2 * bm * bk * bn * group.n + (bm * bn * group.n if self.accumulate else 0))

    def _shared_b(self, group):
        """r > 1 when consecutive runs of r vertices share one b block (a row-split of one block
        product): the group is then U products of (r*bm, bk) @ (bk, bn), fewer and larger GEMMs."""
        if not hasattr(group, "_mm_shared"):
            idx = group.fields["b"].index
            r = 1
            if group.n > 1:
                change = np.nonzero(np.any(idx[1:] != idx[:-1], axis=1))[0]
                starts = np.concatenate([[0], change + 1])
                runs = np.diff(np.append(starts, group.n))
                if len(runs) and runs.min() == runs.max() and runs[0] > 1:
                    r = int(runs[0])
            group._mm_shared = (r, None)
        return group._mm_shared[0]

    # -- whole-GEMM fast path ---------------------------------------------------------------
    @staticmethod
    def _resolve(f, aliases):
        """(tensor, block_shape (2,), index (n, 2)) of a field over a 2-D tensor, looking through a
        pending broadcast copy (engine lazy copies: staging block t = source block src.index[t])."""
        if not isinstance(f, Blocks):
            return None
        al = aliases.get(f.tensor.id) if aliases else None
        if al is not None:
            src, _dst = al
            if not isinstance(src, Blocks):
                return None
            sb = src.block_shape
            r, c = f.block_shape[-2:]
            if len(f.block_shape) != 3 or f.block_shape[0] != 1 or sb[0] % r or sb[1] % c:
                return None
            t, u, w = f.index[:, 0], f.index[:, 1], f.index[:, 2]
            idx = np.stack([src.index[t, 0] * (sb[0] // r) + u, src.index[t, 1] * (sb[1] // c) + w], 1)
            return src.tensor, (r, c), idx
        if len(f.tensor.shape) != 2:
            return None
        return f.tensor, f.block_shape, f.index

    def gemm_plan(self, group, aliases):
        """When the group is one block-outer-product - every out block (i, j) of C exactly once,
        = A block (i, k0) @ B block (k0, j) for one k0 - return (A, B, C, k-slice): the group is
        then exactly C[:, :] (+)= A[:, k-slice] @ B[k-slice, :], one large GEMM.  Else None."""
        key = tuple(sorted((tid, id(al[0])) for tid, al in (aliases or {}).items()
                           if tid in (group.fields["a"].tensor.id, group.fields["b"].tensor.id)))
        cache = group.__dict__.setdefault("_gemm_plans", {})
        if key in cache:
            return cache[key]
        plan = None
        ra = self._resolve(group.fields["a"], aliases)
        rb = self._resolve(group.fields["b"], aliases)
        ro = self._resolve(group.fields["out"], None)
        if ra and rb and ro:
            (TA, (am, ak), ia), (TB, (bk_, bn_), ib), (TC, (om, on), io) = ra, rb, ro
            n = group.n
            ok = (ak == bk_ and am == om and bn_ == on and TA.shape[0] == TC.shape[0] and TB.shape[1] == TC.shape[1]
                  and n == (TC.shape[0] // om) * (TC.shape[1] // on) and TA.shape[1] == TB.shape[0])
            if ok:
                k0 = int(ia[0, 1])
                ok = (np.all(ia[:, 1] == k0) and np.all(ib[:, 0] == k0) and np.array_equal(io[:, 0], ia[:, 0])
                      and np.array_equal(io[:, 1], ib[:, 1]))
                if ok:
                    lin = io[:, 0] * (TC.shape[1] // on) + io[:, 1]
                    ok = len(np.unique(lin)) == n
                if ok:
                    plan = (TA, TB, TC, slice(k0 * ak, (k0 + 1) * ak))
        cache[key] = plan
        return plan

    def compute_gemm(self, group, data, plan) -> None:
        TA, TB, TC, ks = plan
        a = data[TA.id].reshape(TA.shape)[:, ks].astype(np.float32)
        b = data[TB.id].reshape(TB.shape)[ks, :].astype(np.float32)
        c = data[TC.id].reshape(TC.shape)
        if self.accumulate and c.dtype == np.float32:
            c += a @ b
        elif self.accumulate:
            c[...] = (c.astype(np.float32) + a @ b).astype(c.dtype)
        else:
            np.matmul(a, b, out=c) if c.dtype == np.float32 else c.__setitem__(Ellipsis, a @ b)

    def compute(self, group, data):
        aliases = getattr(data, "aliases", None)
        plan = self.gemm_plan(group, aliases)
        if plan is not None:
            self.compute_gemm(group, data, plan)
            return
        bm, bk, bn = self.dims(group)
        n = group.n
        out = group.fields["out"]
        a = group.fields["a"].gather(data).reshape(n, bm, bk).astype(np.float32, copy=False)
        r = self._shared_b(group)
        if r > 1:
            fb = group.fields["b"]
            bu = fb._blocked(data[fb.tensor.id])[tuple(fb.index[::r].T)]
            bu = bu.reshape(n // r, bk, bn).astype(np.float32, copy=False)
            res = np.matmul(a.reshape(n // r, r * bm, bk), bu).reshape(n, bm, bn)
        else:
            b = group.fields["b"].gather(data).reshape(n, bk, bn).astype(np.float32, copy=False)
            res = np.matmul(a, b)
        if self.accumulate:
            res += out.gather(data).reshape(group.n, bm, bn)
        out.scatter(data, res.reshape((group.n, *out.block_shape)).astype(DTYPES[out.tensor.dtype], copy=False))


BLOCK_MATMUL = BlockMatMul(False)
BLOCK_MATMUL_ACC = BlockMatMul(True)


class ReduceAdd(Codelet):
    """out = sum over the first block axis of ``in`` (partials (k, ...) -> (...)); fp32 accumulation."""

    name = "ReduceAdd"
    fields = {"in": "in", "out": "out"}
    code_bytes = 512
    state_bytes = 8

    def _shape(self, group):
        fi, fo = group.fields["in"], group.fields["out"]
        if not isinstance(fi, Blocks) or not isinstance(fo, Blocks):
            raise EmulatorError(f"codelet '{self.name}' in '{group.cs.name}': fields must be tensor.blocks(...)")
        k = fi.block_shape[0]
        if fi.block_elems != k * fo.block_elems:
            raise EmulatorError(
                f"codelet '{self.name}' in '{group.cs.name}': 'in' block {fi.block_shape} is not k x 'out' block "
                f"{fo.block_shape}; fix: in block (k, *out block)"
            )
        return k, fo.block_elems

    def check(self, group):
        self._shape(group)

    def cycles(self, group, target):
        k, m = self._shape(group)
        # popops strided reduce (getCyclesEstimateForStridedReduce): k partials of m outputs
        c = strided_reduce_cycles(k, m, group.fields["in"].tensor.itemsize, group.fields["out"].tensor.itemsize)
        return np.full(group.n, int(c), np.int64)

    def flops(self, group):
        k, m = self._shape(group)
        return int((k - 1) * m * group.n)

    def compute(self, group, data):
        k, m = self._shape(group)
        x = group.fields["in"].gather(data).reshape(group.n, k, m)
        res = x.sum(axis=1, dtype=np.float32)
        out = group.fields["out"]
        out.scatter(data, res.reshape((group.n, *out.block_shape)).astype(DTYPES[out.tensor.dtype], copy=False))


REDUCE_ADD = ReduceAdd()


class ReadSum(Codelet):
    """Microbenchmark SRAM reader: out[v] = sum of region ``in`` of vertex v.

    ``assembly=True`` models Jia et al.'s hand-written loop (one 128-bit load per instruction,
    spec ``sram_load_bytes_per_cycle``); ``False`` models a compiled C++ loop (a 64-bit load,
    spec ``memcpy_bytes_per_cycle``, plus one add per load: 2 instructions per 64 bits).
    """

    fields = {"in": "in", "out": "out"}
    code_bytes = 192
    state_bytes = 8

    def __init__(self, assembly: bool):
        self.assembly = assembly
        self.name = "ReadSumAsm" if assembly else "ReadSum"

    def check(self, group):
        for fname in ("in", "out"):
            if not isinstance(group.fields[fname], Regions):
                raise EmulatorError(f"codelet '{self.name}': field '{fname}' must be tensor.regions(...)")
        if np.any(group.fields["out"].sizes != 1):
            raise EmulatorError(f"codelet '{self.name}' in '{group.cs.name}': 'out' must be 1 element per vertex")

    def cycles(self, group, target):
        nbytes = group.fields["in"].sizes * group.fields["in"].tensor.itemsize
        if self.assembly:
            per = float(target.em["sram_load_bytes_per_cycle"])
            return ELEMENTWISE_OVERHEAD + np.ceil(nbytes / per).astype(np.int64)
        per = float(target.em["memcpy_bytes_per_cycle"])
        return ELEMENTWISE_OVERHEAD + 2 * np.ceil(nbytes / per).astype(np.int64)

    def flops(self, group):
        return int(group.fields["in"].sizes.sum())

    def compute(self, group, data):
        fi = group.fields["in"]
        x = fi.gather(data).astype(np.float32)
        offs = np.cumsum(fi.sizes) - fi.sizes
        sums = np.add.reduceat(x, offs) if len(x) else np.zeros(group.n, np.float32)
        sums = np.where(fi.sizes > 0, sums, 0)
        group.fields["out"].scatter(data, sums.astype(DTYPES[group.fields["out"].tensor.dtype]))


READ_SUM = ReadSum(False)
READ_SUM_ASM = ReadSum(True)
