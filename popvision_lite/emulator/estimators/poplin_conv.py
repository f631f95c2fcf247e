"""poplin's ConvPartialnx1 supervisor vertex: a convolution's partials computed by the AMP over the
kernel positions, reading the input windows in place through work lists.

Sources (graphcore/poplibs 7eac0f26 "mk2-main"): ``lib/poplin/poplinCycleEstimators.cpp``
(MAKE_PERF_ESTIMATOR_NAME(ConvPartialnx1): zeroing + getConvPartialnx1SupervisorCycleEstimate) and
``lib/poplin/PerformanceEstimation.hpp``: getConvPartialnx1WorkerCycles (one worker's pass over its
work list for one kernel position), getConvPartialnx1SupervisorKernelLoopCycleEstimateHalfFloat (the
per-kernel-position worker time, ``max(max, min + 9)`` over the six workers), ...InnerLoopCycleEstimate
(supervisor loop over kernel positions with the coefficient loads), ...OuterLoopCycleEstimateHalfFloat
(conv / in / out group loops, convNx1Overhead = 109, retention savings) and
getZeroSupervisorVertexCycleEstimate (zeroing the FP32 partials).

A work list entry is a run of output field positions that one kernel position maps onto a run of
input positions (one output row of the tile's block, clipped where the kernel reads padding).
``amp`` is the AMP parameter dict of :func:`.poplin.amp_params` (input / output channels per group,
core cycles per field position, coefficient-load cycles), so the conv units run at the same rate as
the matmul's ConvPartial1x1Out.  Units: tile cycles (all workers), as poplibs' supervisor estimates.
"""

from __future__ import annotations

NX1_OVERHEAD = 109  # convNx1Overhead()
NX1_RETENTION = 9  # convnx1WorkerRetentionSavings(half or float activations)
ZERO_RETENTION_FLOAT = 9  # zeroPartialsRetentionSavings(floatPartials = true)
AMP_KERNEL_HEIGHT = 1  # ampKernelHeight: one kernel row per AMP pass (the 16-unit Mk2 half path)
FILTER_HEIGHT_1_LOAD = 15  # InnerLoopCycleEstimateHalfFloat: extra load cycles for filterHeight == 1
DATA_PATH_BITS = 64  # target.getDataPathWidth() on Mk2


def nx1_worker_cycles(entries, core: int, float_acts: bool) -> int:
    """Worker cycles of one ConvPartialnx1 worker pass over a work list of ``entries`` (field positions
    per entry), FP32 partials (getConvPartialnx1WorkerCycles)."""
    c = 17  # worker start to <PartitionLoop>, float partials
    for n in entries:
        c += 3
        if n == 0:
            c += 17
        elif n == 1:
            c += 33 if float_acts else 29
        elif n == 2:
            c += 44 if float_acts else 33
        else:
            c += (45 if float_acts else 34) + (n - 3) * core
        c -= NX1_RETENTION
    return c


def nx1_kernel_loop_cycles(worklists, core: int, float_acts: bool, workers: int = 6) -> int:
    """Tile cycles of the workers over all kernel positions: ``worklists[kpos][worker]`` = entries
    (getConvPartialnx1SupervisorKernelLoopCycleEstimateHalfFloat, one output-channel pass)."""
    total = 0
    for per_worker in worklists:
        c = [workers * nx1_worker_cycles(e, core, float_acts) for e in per_worker]
        lo = min(c) if len(c) >= workers else 0
        total += max(max(c), lo + 9)
    return total


def nx1_tile_cycles(worklists, kh: int, kw: int, in_groups: int, out_groups: int, field_elems: int,
                    amp: dict, workers: int = 6) -> int:
    """Tile cycles of one ConvPartialnx1 vertex: zero the partials, then for every (in group, out group)
    the kernel loop (kh x kw positions, each a coefficient load and a worker pass over its work lists).
    ``field_elems``: output field positions of the vertex (zerosInfo / outChansPerGroup)."""
    float_acts = bool(amp["float_acts"])
    out_chans = int(amp["out_group"])
    # zeroing: field_elems * out_chans FP32 partials per out group, split over the workers, 2 per 64-bit vector
    per_worker = -(-field_elems * out_chans // workers)
    vectors = -(-per_worker // (DATA_PATH_BITS // 32))
    zero = (vectors + 14 - ZERO_RETENTION_FLOAT) * workers * out_groups
    load = int(amp["loads"]) + FILTER_HEIGHT_1_LOAD + 3  # innermostLoopCycles, one output-channel pass
    inner = kh * (14 + kw * (17 - 5 + load)) + nx1_kernel_loop_cycles(worklists, int(amp["core"]), float_acts,
                                                                      workers)
    outer = (NX1_OVERHEAD + workers * NX1_RETENTION + workers * ZERO_RETENTION_FLOAT
             + (out_groups * 17 + (out_groups - 1) * 6 + 1) + 1
             + 16 + in_groups * (14 + out_groups * (14 + inner)))
    return int(zero + outer)
