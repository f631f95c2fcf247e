"""poplin codelet cycle estimators: the AMP (Accumulating Matrix Product) matmul partials.

A matmul block on a tile is a 1x1 convolution: field positions = rows of A (m), input channels =
K, output channels = N; poplin runs it as the ConvPartial1x1Out supervisor vertex.  Per
(input-channel group, output-channel group) every worker runs the AMP inner loop over its share of
the rows.  Sources (graphcore/poplibs 7eac0f26): ``lib/poplin/PerformanceEstimation.hpp``
(getConvPartial1x1SupervisorOuterLoopCycleEstimateHalfFloat,
getConvPartial1x1SupervisorInnerLoopCycleEstimateHalfFloat,
getConvPartialAmpSupervisorWeightLoadCycleEstimate), ``lib/poplin/ConvModel.cpp``
(addPartialCalcCycleEstimate, how they combine) and ``poplinCycleEstimators.cpp``
(MAKE_PERF_ESTIMATOR_NAME(ConvPartial1x1Out)).
"""

from __future__ import annotations

import functools
import math

import numpy as np

# Mk2 (IPU2) parameters, half inputs / float partials: 16 conv units (tests/poplin/codelets/
# ConvPartial1x1Out.cpp: numConvUnits = 16 on IPU2), 16 input channels per group
# (weightsPerConvUnit = 16) and 16 output channels per group, 4 worker cycles per field position
# (getConvPartial1x1SupervisorInnerLoopCycleEstimateHalfFloat coreCycles = 4): 6 workers x 16 x 16
# MACs / (6 x 4) tile cycles = 64 MAC = 128 FLOP per tile cycle, the spec's AMP rate.  Coefficient
# loads: 16 units x 32 bytes / 16 B per cycle (ld128) = 32 cycles per group
# (getConvPartialAmpSupervisorWeightLoadCycleEstimate).
# Float inputs: 8 conv units, coreCycles 8 (same function, floatActivations); channel groups of
# 8 in x 16 out are our assumption chosen so that the loop runs at the spec's fp32 rate (32 FLOP).
AMP_FP16 = dict(in_group=16, out_group=16, core=4, loads=32, float_acts=False)
AMP_FP32 = dict(in_group=8, out_group=16, core=8, loads=16, float_acts=True)


def _rate(target, fp16: bool) -> float:
    return float(target.em["fp16_flops_per_cycle_per_tile" if fp16 else "fp32_flops_per_cycle_per_tile"])


def amp_params(fp16: bool, target=None, rate: float | None = None) -> dict:
    """AMP loop parameters; with a ``target`` or ``rate`` (FLOP per tile cycle) the core loop is
    scaled so that it runs at that rate (Mk1: 64 FLOP/cycle)."""
    p = dict(AMP_FP16 if fp16 else AMP_FP32)
    if target is not None and rate is None:
        rate = _rate(target, fp16)
    if rate is not None:
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
        rate = _rate(target, fp16)
    return _amp_matmul_tile_cycles(int(m), int(k), int(n), bool(fp16), None if rate is None else float(rate))


@functools.lru_cache(maxsize=65536)
def _amp_matmul_tile_cycles(m: int, k: int, n: int, fp16: bool, rate: float | None) -> int:
    """Tile cycles of poplin's ConvPartial1x1Out supervisor vertex for out (m, n) = a (m, k) @ b (k, n)
    with FP32 partials (getConvPartial1x1SupervisorOuterLoopCycleEstimateHalfFloat + the inner-loop
    estimate, as ConvModel.cpp addPartialCalcCycleEstimate combines them): rows split over the 6
    workers, K in groups of in_group, N in groups of out_group, the first in-group pass zeroes the
    partials."""
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


def amp_supervisor_cycles(m: int, k: int, n: int, fp16: bool, target) -> int:
    """A supervisor vertex (one per tile, all workers) in worker-slot units: the tile estimate / threads."""
    t = amp_matmul_tile_cycles(m, k, n, fp16, target)
    return -(-t // int(target.threads_per_tile))


def reduce_add_cycles(out_size: int, num_partials: int, out_itemsize: int, partials_itemsize: int = 4,
                      threads: int = 6, data_path_bits: int = 64) -> int:
    """Tile cycles of poplin's ReduceAdd supervisor vertex: the vertex Poplar reduces a convolution's /
    matmul's partials with, ONE per tile over the concatenation of the tile's output regions
    (lib/poplin/ConvReduce.cpp reduce(); estimator poplinCycleEstimators.cpp ReduceAdd ->
    PerformanceEstimation.hpp getReduceCycleEstimate).  The multi-input form: ConvOptions'
    enableFastReduce is false by default and the single-input form's other condition (partials under
    1/16 of tile memory rounded up to memory elements, checkPartialsSizeForSingleInputReduce) needs the
    memory-element size, which no public source gives for Mk2/Bow."""
    out_size, k = int(out_size), int(num_partials)
    float_out, float_partials = out_itemsize == 4, partials_itemsize == 4
    acc_w = 4 if float_partials else 8
    in_dp = data_path_bits // ((4 if float_partials else 2) * 8)
    per_loop = acc_w // min(acc_w, in_dp) + 1
    loops = out_size // acc_w
    for i in range(int(math.ceil(math.log2(acc_w)))):
        if out_size & (1 << i):
            loops += 1
    per_worker, rem = divmod(loops, threads)
    cycles = 32
    if rem:
        if out_size & (acc_w - 1):
            cycles += 2 * k + (13 if float_partials else 11)
        else:
            per_worker += 1
    tail = (7 if float_partials else 9) if float_out else (6 if float_partials else 8)
    cycles += (per_loop * k + tail) * per_worker
    return cycles * threads


def reduce_add_tile_vertex_cycles(tiles, out_sizes, num_partials: int, out_itemsize: int, partials_itemsize: int,
                                  threads: int) -> np.ndarray:
    """Vertices (one per output region, on ``tiles``) that are the regions of ONE ReduceAdd supervisor
    vertex per tile: the tile's estimate for its total outputs (reduce_add_cycles), in worker-slot
    units, charged on the tile's first region; the others add nothing."""
    tiles = np.asarray(tiles, np.int64)
    if not len(tiles):
        return np.zeros(0, np.int64)
    sizes = np.asarray(out_sizes, np.int64)
    if np.all(tiles[1:] >= tiles[:-1]):  # by tile (as the K reductions' vertices are): each tile's first region
        first = np.flatnonzero(np.r_[True, tiles[1:] != tiles[:-1]])
        total = np.add.reduceat(sizes, first)
    else:
        ut, first, inv = np.unique(tiles, return_index=True, return_inverse=True)
        total = np.bincount(inv.ravel(), weights=sizes, minlength=len(ut)).astype(np.int64)
    # the estimate of each distinct total once (a split's tiles hold a few)
    tot, at = np.unique(total, return_inverse=True)
    est = np.array([reduce_add_cycles(int(n), num_partials, out_itemsize, partials_itemsize, threads)
                    for n in tot], np.int64)[at.ravel()]
    out = np.zeros(len(tiles), np.int64)
    out[first] = -(-est // threads)
    return out
