"""popops codelet cycle estimators: elementwise ops, cast, fill, scaled add, reductions.

Sources (graphcore/poplibs 7eac0f26): ``lib/popops/popopsCycleEstimators.hpp`` (the op tables
``unaryOpPerfInfo`` / ``binaryOpPerfInfo``), ``lib/popops/popopsCycleEstimators.cpp``
(``unaryOpInnerLoopCycles``, ``binaryOpInnerLoopCycles``, the ``UnaryOp1D`` / ``BinaryOp1D``
estimators), ``lib/popops/PerformanceEstimation.cpp`` (cast, fill, scaled add,
``basicOpSupervisorOverhead``) and ``lib/popops/reduction/CycleEstimationFunctions.cpp``.

The op library splits an elementwise op on a tile into up to 6 worker pieces (one per worker),
which is exactly a poplibs MultiVertex whose supervisor hands ceil(n/6) elements to each worker, so
a piece's worker cycles below are the poplibs worker term for that piece, and the engine's
``6 x max worker + vertex_launch_cycles`` (cost_model.compute_tile_cycles) reproduces the poplibs
tile estimate (vertex_launch_cycles = ``SUPERVISOR_OVERHEAD``).
"""

from __future__ import annotations

import numpy as np

DATA_PATH_BYTES = 8          # poplar Target::getDataPathWidth() = 64 bits on Mk1/Mk2
SUPERVISOR_OVERHEAD = 11     # PerformanceEstimation.cpp basicOpSupervisorOverhead()
# Fallback for user-made codelets (codelets.base.unary / binary with an explicit cycles_per_vector and no
# poplibs op), and the per-vector form of the ONNX-only ops: loop set-up per vertex, in worker
# cycles (assumption; the BinaryOp1D worker prologue is 26, UnaryOp1D 17).
ELEMENTWISE_OVERHEAD = 14
# The per-vector figure a user-made codelet gets when it gives none (assumption): a unary loop
# loads, operates and stores (2 paired instructions), a binary loop loads twice (3).
FALLBACK_UNARY_VECTOR_CYCLES = 2
FALLBACK_BINARY_VECTOR_CYCLES = 3


def vector_width(itemsize: int) -> int:
    """Target::getVectorWidth(type): elements per 64-bit vector (4 x half, 2 x float/int)."""
    return max(DATA_PATH_BYTES // int(itemsize), 1)


def ceil_div(a, b):
    """ceil(a / b) for int arrays (int64) and positive int ``b``."""
    return -(-np.asarray(a, dtype=np.int64) // int(b))


def vectors(n, itemsize: int):
    """64-bit vector loads / stores to stream ``n`` elements of ``itemsize`` bytes."""
    return ceil_div(n, vector_width(itemsize))


def fallback_worker_cycles(n, itemsize: int, cycles_per_vector) -> np.ndarray:
    """An elementwise vertex with no poplibs estimator: set-up + ``cycles_per_vector`` per vector."""
    return ELEMENTWISE_OVERHEAD + cycles_per_vector * vectors(n, itemsize)


# ---------------------------------------------------------------- unary / binary op tables
# (cyclesPerLoop, naturalVectorWidth, loopUnrollFactor) per (op, itemsize) (HALF = 2, FLOAT = 4
# bytes): popopsCycleEstimators.hpp binaryOpPerfInfo / unaryOpPerfInfo, the non-in-place tables.
BINARY_OP_INFO = {
    ("add", 2): (1, True, 0), ("add", 4): (1, True, 0),          # ADD
    ("sub", 2): (1, True, 0), ("sub", 4): (1, True, 0),          # SUBTRACT
    ("mul", 2): (1, True, 0), ("mul", 4): (1, True, 0),          # MULTIPLY
    ("max", 2): (4, False, 4), ("max", 4): (3, False, 2),        # MAXIMUM
    ("min", 2): (4, False, 4), ("min", 4): (3, False, 2),        # MINIMUM
    ("div", 2): (21, False, 4), ("div", 4): (10, False, 2),      # DIVIDE
    ("pow", 2): (325, False, 1), ("pow", 4): (312, False, 1),    # POWER
    ("gt", 2): (9, False, 4), ("gt", 4): (14, False, 4),         # GREATER_THAN
    ("lt", 2): (9, False, 4), ("lt", 4): (14, False, 4),         # LESS_THAN
}
# ADD / SUBTRACT / MULTIPLY of half/float have an assembly ("external") codelet: +2 per vector,
# every other op +5 (popopsCycleEstimators.cpp binaryOpInnerLoopCycles, hasExternalCodelet).
EXTERNAL_BINARY = {"add", "sub", "mul"}
UNARY_OP_INFO = {
    ("relu", 2): (3, False, 4), ("relu", 4): (3, False, 2),          # RELU
    ("neg", 2): (2, False, 4), ("neg", 4): (2, False, 2),            # NEGATE
    ("exp", 2): (4, False, 4), ("exp", 4): (6, False, 2),            # EXPONENT
    ("square", 2): (2, False, 4), ("square", 4): (2, False, 2),      # SQUARE
    ("tanh", 2): (4, False, 4), ("tanh", 4): (12, False, 2),         # TANH
    ("sigmoid", 2): (6, False, 4), ("sigmoid", 4): (12, False, 2),   # SIGMOID
    ("sqrt", 2): (23, False, 4), ("sqrt", 4): (10, False, 2),        # SQRT
    ("rsqrt", 2): (19, False, 4), ("rsqrt", 4): (8, False, 2),       # RSQRT
    ("inverse", 2): (15, False, 4), ("inverse", 4): (6, False, 2),   # INVERSE
}


def binary_op_loop_cycles(op: str, itemsize: int, n) -> np.ndarray:
    """popopsCycleEstimators.cpp binaryOpInnerLoopCycles (not in place)."""
    cpl, natural, unroll = BINARY_OP_INFO[(op, int(itemsize))]
    if natural:
        return ceil_div(n, vector_width(itemsize)) * (cpl + (2 if op in EXTERNAL_BINARY else 5))
    return ceil_div(n, unroll) * cpl


def binary_op_1d_prologue(itemsize: int) -> int:
    """Worker set-up of popops BinaryOp1D: 26 (half) / 29 (float) (MAKE_PERF_ESTIMATOR_NAME(BinaryOp1D))."""
    return 29 if int(itemsize) == 4 else 26


# popops getBinaryOp1DInPlaceEstimate: worker set-up of BinaryOp1DInPlace (the inner loop is the
# not-in-place one for ADD).
BINARY_INPLACE_1D_PROLOGUE = 58


def binary_op_worker_cycles(op: str, itemsize: int, n) -> np.ndarray:
    """Worker share of popops BinaryOp1D (MultiVertex): set-up + inner loop over the worker's elements."""
    return binary_op_1d_prologue(itemsize) + binary_op_loop_cycles(op, itemsize, n)


def binary_op_inplace_worker_cycles(op: str, itemsize: int, n) -> np.ndarray:
    """Worker share of popops BinaryOp1DInPlace (getBinaryOp1DInPlaceEstimate)."""
    return BINARY_INPLACE_1D_PROLOGUE + binary_op_loop_cycles(op, itemsize, n)


def binary_op_1d_tile_cycles(op: str, itemsize: int, n_total: int) -> int:
    """poplibs' tile estimate of BinaryOp1D over ``n_total`` elements: 6 workers x worker(ceil(n/6)) + 11."""
    return int(6 * binary_op_worker_cycles(op, itemsize, ceil_div(n_total, 6)) + SUPERVISOR_OVERHEAD)


def unary_op_loop_cycles(op: str, itemsize: int, n) -> np.ndarray:
    """popopsCycleEstimators.cpp unaryOpInnerLoopCycles: unrolled ops ceil(n/unroll) x cycles,
    natural-width ops basicOpLoopCycles(n, vectorWidth, cycles + 4)."""
    cpl, natural, unroll = UNARY_OP_INFO[(op, int(itemsize))]
    if not natural and unroll > 0:
        return ceil_div(n, unroll) * cpl
    vw = vector_width(itemsize) if natural else 1
    return ceil_div(n, vw) * (cpl + 4)


# UnaryOp1D supervisor adds 9 cycles to 6 x worker + basicOpSupervisorOverhead; spread over the six
# workers that is ceil(9 / 6) = 2 worker cycles (our engine charges supervisor time per worker slot).
UNARY_SUPERVISOR_EXTRA = 2
UNARY_SUPERVISOR_CYCLES = 9


def unary_op_1d_prologue(op: str) -> int:
    """Worker set-up of popops UnaryOp1D: 17, 33 for EXPONENT (MAKE_PERF_ESTIMATOR_NAME(UnaryOp1D))."""
    return 33 if op == "exp" else 17


def unary_op_worker_cycles(op: str, itemsize: int, n) -> np.ndarray:
    """Worker share of popops UnaryOp1D: set-up + inner loop + the spread supervisor cycles."""
    return unary_op_1d_prologue(op) + UNARY_SUPERVISOR_EXTRA + unary_op_loop_cycles(op, itemsize, n)


def unary_op_1d_tile_cycles(op: str, itemsize: int, n_total: int) -> int:
    """poplibs' tile estimate of UnaryOp1D: 6 x (base + loop(ceil(n/6))) + 9 + 11."""
    return int(6 * (unary_op_1d_prologue(op) + unary_op_loop_cycles(op, itemsize, ceil_div(n_total, 6)))
               + UNARY_SUPERVISOR_CYCLES + SUPERVISOR_OVERHEAD)


# ---------------------------------------------------------------- per-vector form (ONNX-only ops)
# The ONNX importer's own elementwise codelets are charged fallback_worker_cycles with a figure per
# 64-bit vector.  Where the op is in the tables above, that figure is the table's inner loop per
# vector; the entries below are the ops that are not (or that are costed as a sum of table ops).
#   kind -> ("unary" | "binary", op): the table op's cycles per vector;
#   kind -> ("sum", [(table, op), ...]): one popops::map expression, costed as its parts back to back
#           (assumption: the fused expression's vertex runs the parts' instructions in sequence);
#   kind -> (half, float): cycles per vector as stated next to it.
_SCALAR_OP = ("unary", "square")  # ADD / MULTIPLY with a broadcast scalar: ld, op, st paired, as SQUARE (assumption)
VECTOR_OPS = {
    "tanh": ("unary", "tanh"), "sigmoid": ("unary", "sigmoid"), "sqrt": ("unary", "sqrt"),
    "rsqrt": ("unary", "rsqrt"), "reciprocal": ("unary", "inverse"), "exp": ("unary", "exp"),
    "neg": ("unary", "neg"), "square": ("unary", "square"),
    "add_scalar": _SCALAR_OP,
    "pow_scalar": ("binary", "pow"), "max_scalar": ("binary", "max"), "min_scalar": ("binary", "min"),
    "gt_scalar": ("binary", "gt"), "lt_scalar": ("binary", "lt"),
    "sub": ("binary", "sub"), "div": ("binary", "div"), "max": ("binary", "max"), "min": ("binary", "min"),
    "pow": ("binary", "pow"),
    # torch's hardsigmoid (x / 6 + 1/2 clamped to [0, 1]) and hardswish (times x)
    "hard_sigmoid": ("sum", [_SCALAR_OP, _SCALAR_OP, ("binary", "max"), ("binary", "min")]),
    "hard_swish": ("sum", [_SCALAR_OP, _SCALAR_OP, ("binary", "max"), ("binary", "min"), _SCALAR_OP]),
    # SELECT: three loads, a compare-select and a store per vector (assumption: popops has no table
    # entry for the ternary op; MAXIMUM's as the closest)
    "select": ("binary", "max"),
    # ERF: per element {cycles, false, 1} x elements per vector.  The figures read half 16, float 18;
    # unaryOpPerfInfo at 7eac0f26 lists ERF half 13, float 41 (kept as read until a named fix).
    "erf": (64, 36),
    "abs": (1, 1),              # ABSOLUTE {1, false}, taken per vector
    "isnan": (3, 3),            # IS_NAN half {3, true}, float {3, true}
    "isinf": (5, 3),            # IS_INF half {5, true}, float {3, true}
    # as hard_sigmoid / hard_swish: compares, a select and a multiply by dy (assumption)
    "hard_sigmoid_bwd": (14, 14),
    "hard_swish_bwd": (16, 16),
    # the softplus family (ONNX Softplus, Softsign, Mish, Elu, Selu, Celu, ThresholdedRelu), each one popops::map
    # expression.  LOGARITHM has no figure in the tables above: costed as EXPONENT, the instruction of the same
    # kind on the IPU's transcendental unit (assumption); log1p is costed as a scaled add and a LOGARITHM.
    "log": ("unary", "exp"),
    # ROUND (to nearest, ties to even: popops' cast to an integer type rounds so) has no figure here: a
    # single-instruction op per vector, as SQUARE (assumption)
    "round": _SCALAR_OP,
    "softplus": ("sum", [("binary", "max"), ("unary", "exp"), _SCALAR_OP, ("unary", "exp")]),  # max(x,0)+log1p(e^-|x|)
    "softsign": ("sum", [_SCALAR_OP, _SCALAR_OP, ("binary", "div")]),  # x / (1 + |x|)
    "mish": ("sum", [("binary", "max"), ("unary", "exp"), _SCALAR_OP, ("unary", "exp"), ("unary", "tanh"),
                     ("binary", "mul")]),  # x tanh(softplus(x))
    "elu_scalar": ("sum", [("unary", "exp"), _SCALAR_OP, _SCALAR_OP, ("binary", "max")]),  # x > 0 ? x : a (e^x - 1)
    "celu_scalar": ("sum", [_SCALAR_OP, ("unary", "exp"), _SCALAR_OP, _SCALAR_OP, ("binary", "max"),
                            ("binary", "min")]),
    "thresholded_relu_scalar": ("sum", [("binary", "gt"), ("binary", "max")]),  # a compare and a select
    "softplus_bwd": ("sum", [("unary", "sigmoid"), ("binary", "mul")]),  # dy sigmoid(x)
    "softsign_bwd": ("sum", [_SCALAR_OP, _SCALAR_OP, ("unary", "square"), ("binary", "div")]),  # dy / (1 + |x|)^2
    "mish_bwd": ("sum", [("binary", "max"), ("unary", "exp"), _SCALAR_OP, ("unary", "exp"), ("unary", "tanh"),
                         ("unary", "sigmoid"), ("unary", "square"), ("binary", "mul"), ("binary", "mul"),
                         ("binary", "add"), ("binary", "mul")]),
}


def _table_vector_cycles(table: str, op: str, itemsize: int) -> int:
    """Inner-loop cycles per 64-bit vector of a table op: natural-width ops cyclesPerLoop + their
    per-vector overhead (binaryOpInnerLoopCycles), unrolled ops cyclesPerLoop x vectorWidth / unroll."""
    info = (BINARY_OP_INFO if table == "binary" else UNARY_OP_INFO)[(op, int(itemsize))]
    cpl, natural, unroll = info
    if natural:
        if table != "binary":
            raise ValueError(f"no per-vector figure for natural-width unary op {op!r}")
        return cpl + (2 if op in EXTERNAL_BINARY else 5)
    return cpl * vector_width(itemsize) // unroll


def vector_cycles(kind: str, itemsize: int) -> int:
    """Worker cycles per 64-bit vector of an ONNX-only elementwise op ``kind`` (see VECTOR_OPS)."""
    spec = VECTOR_OPS[kind]
    if spec[0] == "sum":
        return sum(_table_vector_cycles(t, op, itemsize) for t, op in spec[1])
    if isinstance(spec[0], str):
        return _table_vector_cycles(spec[0], spec[1], itemsize)
    return spec[0] if int(itemsize) == 2 else spec[1]


# ---------------------------------------------------------------- cast, fill, scaled add
def cast_worker_core_cycles(n, from_size: int, to_size: int) -> np.ndarray:
    """PerformanceEstimation.cpp castWorkerCycles for float<->half (aux-pipeline conversion):
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
    if op_w & (op_w - 1) == 0:  # a power of two: a mask and a shift, the integers of % and // (negative n too)
        rem = n & (op_w - 1)
        c = 19 + cpv * (n >> (op_w.bit_length() - 1))
    else:
        rem = n % op_w
        c = 19 + cpv * (n // op_w)
    bits = max(int(np.ceil(np.log2(op_w))), 0)
    for i in range(bits):
        c = c + 1 + 2 * ((rem >> i) & 1)
    return c


# getCast1DCycleEstimate: 12 + 6 x (castWorkerCycles(n/6) + 18); a worker piece is charged the 18
# plus 2 for the supervisor's 12 beyond our 11-cycle vertex launch, spread (ceil(12 - 11 supervisor)).
CAST_1D_WORKER_EXTRA = 18
CAST_1D_SUPERVISOR = 12
CAST_1D_PROLOGUE = CAST_1D_WORKER_EXTRA + 2


def cast_worker_cycles(n, from_size: int, to_size: int) -> np.ndarray:
    """Worker share of popops Cast1D (getCast1DCycleEstimate)."""
    return cast_worker_core_cycles(n, from_size, to_size) + CAST_1D_PROLOGUE


def cast_1d_tile_cycles(n_total: int, from_size: int, to_size: int) -> int:
    return int(CAST_1D_SUPERVISOR + 6 * (cast_worker_core_cycles(ceil_div(n_total, 6), from_size, to_size)
                                         + CAST_1D_WORKER_EXTRA))


def fill_worker_cycles(n, itemsize: int) -> np.ndarray:
    """PerformanceEstimation.cpp _fillCycleEstimate (Fill worker): half 26 + n/4
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


# ---------------------------------------------------------------- reductions
# getCyclesEstimateForStridedReduce: vertex entry 5 + 11 before the output loop.  Beyond six
# pieces on a tile, the pieces are regions of the tile's six reduce worker vertices, which share it.
STRIDED_REDUCE_OVERHEAD = 5 + 11


def _strided_reduce_terms(partials_itemsize: int, out_itemsize: int, op: str = "add") -> tuple[int, int]:
    """(elemsPerLoop, post-loop cycles) of getCyclesEstimateForStridedReduce (not an update).  Half
    partials: 1 + the result-storage cycles of its table, which has ADD (7 half / 6 float out) but no
    SQUARE_ADD entry (std::map::operator[] reads 0 for it); float partials: 3 (ADD) or 2, + 2."""
    acc_w = 4 if partials_itemsize == 4 else 8
    epl = min(acc_w, DATA_PATH_BYTES // partials_itemsize)
    if partials_itemsize == 4:
        post = (3 if op == "add" else 2) + 2
    else:
        post = 1 + ((7 if out_itemsize == 2 else 6) if op == "add" else 0)
    return epl, post


def strided_reduce_cycles(num_partials, num_outputs, partials_itemsize: int = 4, out_itemsize: int = 4,
                          op: str = "add"):
    """reduction/CycleEstimationFunctions.cpp getCyclesEstimateForStridedReduce (``op`` ADD or
    SQUARE_ADD, not an update): a worker vertex reducing ``num_partials`` rows of ``num_outputs`` elements (partials
    laid out with a stride, the layout the reduction's second stage gathers):
    5 + 11 + ceil(outputs / elemsPerLoop) x (3 + post + 3 + (partials - 1));
    elemsPerLoop = min(accumulator vector width, data-path elements) = 2 (float) / 4 (half);
    post: see _strided_reduce_terms."""
    k = np.asarray(num_partials, dtype=np.int64)
    m = np.asarray(num_outputs, dtype=np.int64)
    epl, post = _strided_reduce_terms(partials_itemsize, out_itemsize, op)
    return STRIDED_REDUCE_OVERHEAD + ceil_div(m, epl) * (3 + post + 3 + (k - 1))


def tile_strided_reduce_share(tiles, rows, L: int, ops: tuple, itemsize: int, threads: int) -> np.ndarray:
    """Per-vertex worker cycles of the first stage of popops' reduction of a tile's rows (``rows`` per
    vertex on ``tiles``, ``L`` channels each) to per-channel float partials, as popnn's batch-norm
    statistics and gradients run it (poplin/Norms.cpp: popops::reduceMany / normReduce over the batch
    dimension): on every tile ONE strided reduce per op of ``ops`` over all the tile's rows, its ``L``
    outputs split over the workers in whole vectors (elemsPerLoop), the ops' vertices sharing the
    compute set (one of each per worker).  Row vertices that split the tile's rows instead are each
    charged that worker time times their share of the tile's rows and of its workers, so the tile
    is busy for what popops' vertices take."""
    rows = np.asarray(rows, np.int64)
    ut, inv = np.unique(np.asarray(tiles, np.int64), return_inverse=True)
    inv = inv.ravel()
    r_tile = np.bincount(inv, weights=rows, minlength=len(ut)).astype(np.int64)
    n_tile = np.bincount(inv, minlength=len(ut))
    epl = _strided_reduce_terms(itemsize, 4)[0]
    per_worker = ceil_div(ceil_div(L, epl), threads) * epl
    worker = sum(strided_reduce_cycles(r_tile, per_worker, itemsize, 4, op) for op in ops)
    share = worker[inv] * rows * np.minimum(n_tile[inv], threads)
    return -(-share.astype(np.int64) // np.maximum(r_tile[inv], 1))


def strided_reduce_cycles_scalar(num_partials: int, num_outputs: int, partials_itemsize: int = 4,
                                 out_itemsize: int = 4) -> int:
    """:func:`strided_reduce_cycles` for one vertex, in plain Python (the planners' inner loop)."""
    epl, post = _strided_reduce_terms(partials_itemsize, out_itemsize)
    return STRIDED_REDUCE_OVERHEAD + -(-int(num_outputs) // epl) * (3 + post + 3 + (int(num_partials) - 1))


def single_input_reduce_cycles(n, itemsize: int, op: str = "add", out_float: bool = False):
    """reduction/CycleEstimationFunctions.cpp getCyclesEstimateForSingleInput: one row of
    ``n`` partials to one output.  ADD/SQUARE_ADD use the accumulator width (8 half / 4 float),
    MAX the vector width (4 / 2); data path 4 half / 2 float elements per cycle:
    3 + 6 + cyclesPerLoop x n / elemsPerLoop + 5 + n % elemsPerLoop + 3 (+ 5 when out is not float)."""
    n = np.asarray(n, dtype=np.int64)
    dpw = DATA_PATH_BYTES // itemsize
    op_w = (8 if itemsize == 2 else 4) if op == "add" else vector_width(itemsize)
    epc = min(op_w, dpw)
    loads = op_w // epc
    cpl = max(loads, 1)
    epl = epc * loads
    return 3 + 6 + cpl * (n // epl) + 5 + n % epl + 3 + (0 if out_float else 5)


# ---------------------------------------------------------------- row ops (compositions)
def row_pass_cycles(parts, L, itemsize: int) -> np.ndarray:
    """Worker cycles of the per-row loops of ``parts`` over a row (piece) of ``L`` elements:
    ("b", op) a popops binary-op loop, ("u", op) a unary-op loop, ("r", op) a single-input
    reduction (its own per-row overhead included)."""
    total = 0
    for kind, op in parts:
        if kind == "b":
            total = total + binary_op_loop_cycles(op, itemsize, L)
        elif kind == "u":
            total = total + unary_op_loop_cycles(op, itemsize, L)
        else:
            total = total + single_input_reduce_cycles(L, itemsize, op)
    return np.asarray(total, dtype=np.int64)


def row_prologue_cycles(parts, itemsize: int) -> int:
    """Per-vertex worker prologues of the parts: BinaryOp1D's and UnaryOp1D's set-up; reductions
    carry theirs per row (single_input_reduce_cycles)."""
    c = 0
    for kind, op in parts:
        if kind == "b":
            c += binary_op_1d_prologue(itemsize)
        elif kind == "u":
            c += unary_op_1d_prologue(op)
    return c


def row_vertex_cycles(parts, L: int, itemsize: int, rows, split) -> np.ndarray:
    """Worker cycles of a row vertex of ``rows`` rows of ``L`` elements whose every row is spread
    over ``split`` workers (1 = none): prologues + per row the parts' loops over ceil(L / split)
    elements, plus combining the ``split`` partial results of each reduction (a strided reduce of
    ``split`` partials of one output)."""
    rows = np.asarray(rows, dtype=np.int64)
    split = np.asarray(split, dtype=np.int64)
    nred = sum(1 for kind, _ in parts if kind == "r")
    kinds, at = np.unique(split, return_inverse=True)  # the per-row cycles of each distinct split, read back
    per_row = np.array([int(row_pass_cycles(parts, -(-L // int(kk)), itemsize))
                        + (nred * int(strided_reduce_cycles(int(kk), 1)) if kk > 1 else 0) for kk in kinds], np.int64)
    pr = per_row[at.reshape(split.shape)] if split.size else np.zeros(split.shape, np.int64)
    return row_prologue_cycles(parts, itemsize) + rows * pr
