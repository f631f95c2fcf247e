"""Tile planners: pure functions that decide how an op is split over the tiles of an IPU.

A planner never touches a graph.  It takes the op's shape and a :class:`PlanTarget` (the few
device numbers a planner needs, read from the device spec by the caller) and returns a plan
object that says what it chose and why, in a human string that ends up in the profile's
``ops.plan`` column.

Cost model used for choosing: the SAME functions the emulator charges (so a plan is chosen for
the cost that is applied; tests/emulator/estimators/test_codelet_costs.py checks planner and engine agree term by term):

* compute of a tile's block = poplin's AMP supervisor-vertex estimate
  (``estimators.poplin.amp_matmul_tile_cycles``, from poplin/PerformanceEstimation.hpp ConvPartial1x1Out),
* exchange of a tile = ``cost_model.exchange_cycles`` (bytes / exchange bytes per cycle, no
  per-piece term, as poplin/popops ExchangeEstimator), plus one internal sync per exchange,
* cross-tile reduction of K partials = exchange of the partials + one poplin ReduceAdd supervisor
  vertex per owner tile (``estimators.poplin.reduce_add_cycles``),
* the slowest tile sets the time of a BSP step.
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import dataclass

import numpy as np

from popvision_lite.emulator.cost_model import exchange_cycles_scalar as exchange_cycles
from popvision_lite.emulator.estimators import poplin, popops
from popvision_lite.emulator.ops.plan_costs import split_cost

DTYPE_BYTES = {"float16": 2, "float32": 4, "int32": 4, "fp16": 2, "fp32": 4}


def dtype_bytes(dtype: str) -> int:
    try:
        return DTYPE_BYTES[dtype]
    except KeyError:
        raise ValueError(f"unknown dtype {dtype!r}; expected one of {sorted(DTYPE_BYTES)}") from None


@dataclass(frozen=True)
class PlanTarget:
    """The device numbers a planner needs (per IPU).

    ``usable_fraction`` is the share of a tile's SRAM a planner may fill with one op's operands;
    the rest is kept for code, exchange buffers, other live tensors and stack.
    """

    tiles: int
    sram_bytes_per_tile: int
    flops_per_cycle_fp16: float  # per tile, AMP
    flops_per_cycle_fp32: float  # per tile
    exchange_bytes_per_cycle: float  # per tile
    usable_fraction: float = 0.5  # Poplar's availableMemoryProportion: share of a tile for an op's temporaries
    threads: int = 6  # worker contexts per tile
    memcpy_bytes_per_cycle: float = 8.0
    sync_cycles: int = 126  # internal sync before every exchange (spec max_ipu_sync_delay_cycles)
    launch_cycles: int = 11  # vertex_launch_cycles (popops basicOpSupervisorOverhead)
    shared_bus_tiles: int = 1  # tiles_per_shared_exchange_bus (2 on Mk2/Bow)
    # bytes of a matmul's / convolution's K partials and serial-pass accumulator: poplin's partialsType
    # option ("float" 4, the default; "half" 2).  It changes memory, the partials' exchange and the
    # ReduceAdd estimate; the AMP loop's rate is the same (estimators.poplin: half inputs take one code
    # path with half or float partials on 16 conv units)
    partials_bytes: int = 4

    def flops_per_cycle(self, precision: str) -> float:
        return self.flops_per_cycle_fp16 if precision in ("fp16", "float16") else self.flops_per_cycle_fp32

    @property
    def budget_bytes(self) -> int:
        return int(self.sram_bytes_per_tile * self.usable_fraction)

    @classmethod
    def from_spec(cls, spec, usable_fraction: float = 0.5) -> PlanTarget:
        """Build from a ``popvision_lite.devices.DeviceSpec`` (or anything with the same attributes).

        Peak FLOP/cycle/tile is derived from the spec's peak FLOP/s, clock and tile count, so the
        numbers stay those of ``resources/devices/*.toml``.
        """
        tiles = int(_get(spec, "tiles_per_ipu"))
        clock = float(_get(spec, "clock_hz"))
        fp16 = _get(spec, "fp16_flops_per_cycle_per_tile", None)
        fp32 = _get(spec, "fp32_flops_per_cycle_per_tile", None)
        if fp16 is None:
            fp16 = float(_get(spec, "peak_fp16_flops")) / (clock * tiles)
        if fp32 is None:
            fp32 = float(_get(spec, "peak_fp32_flops")) / (clock * tiles)
        return cls(
            tiles=tiles,
            sram_bytes_per_tile=int(_get(spec, "sram_bytes_per_tile")),
            flops_per_cycle_fp16=float(fp16),
            flops_per_cycle_fp32=float(fp32),
            exchange_bytes_per_cycle=float(_get(spec, "exchange_bytes_per_cycle")),
            usable_fraction=usable_fraction,
            threads=int(_get(spec, "threads_per_tile", 6)),
        )


_MISSING = object()


def _get(obj, name, default=_MISSING):
    if isinstance(obj, dict):
        if name in obj:
            return obj[name]
    elif hasattr(obj, name):
        return getattr(obj, name)
    if default is _MISSING:
        raise AttributeError(f"device spec has no field {name!r} needed by the tile planner")
    return default


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _kib(n: float) -> str:
    return f"{n / 1024:.1f} KiB"


@functools.lru_cache(maxsize=65536)
def _candidates(dim: int, limit: int, exact: bool = False) -> tuple[int, ...]:
    """Split counts worth trying for a dimension: powers of two and divisors, <= min(dim, limit).
    With ``exact`` only divisors of ``dim`` (every block the same size, no padding).  Kept per (dim, limit,
    exact): a plan's split grid asks the same few (its K candidates under each (pm, pn)'s tile cap), and a
    model's matmuls share their dimensions."""
    top = max(1, min(dim, limit))
    if exact:
        return tuple(d for d in range(1, top + 1) if dim % d == 0)
    out = {1, top}
    p = 1
    while p <= top:
        out.add(p)
        p *= 2
    for d in range(1, int(math.isqrt(dim)) + 1):
        if dim % d == 0:
            if d <= top:
                out.add(d)
            if dim // d <= top:
                out.add(dim // d)
    # a few evenly spread values so odd tile counts can be filled
    for frac in (3, 5, 6, 7, 12, 23, 46):
        if frac <= top:
            out.add(frac)
    return tuple(sorted(out))


# --------------------------------------------------------------------------------------------
# matmul


@dataclass(frozen=True)
class MatmulPlan:
    """How C[M,N] = A[M,K] @ B[K,N] is split: ``pm x pn x pk`` partitions, one per tile.

    With ``pk > 1`` each tile produces a partial sum (FP32 when accumulating FP16 inputs) and a
    second phase reduces the ``pk`` partials of each output block.
    """

    M: int
    N: int
    K: int
    pm: int
    pn: int
    pk: int
    ps: int  # serial passes over K (1 = everything at once)
    bm: int  # block sizes (rows of A / cols of B / depth per tile)
    bn: int
    bk: int
    in_bytes: int
    acc_bytes: int
    bytes_per_tile: int
    compute_cycles: int
    exchange_cycles: int
    reduce_cycles: int
    fits: bool
    reason: str
    considered: int = 0

    @property
    def tiles_used(self) -> int:
        return self.pm * self.pn * self.pk

    @property
    def total_cycles(self) -> int:
        return self.compute_cycles + self.exchange_cycles + self.reduce_cycles

    def describe(self) -> str:
        return (
            f"M={self.pm} N={self.pn} K={self.pk} split"
            + (f" x {self.ps} serial passes" if self.ps > 1 else "")
            + f" ({self.tiles_used} tiles, blocks "
            f"{self.bm}x{self.bn}x{self.bk}); {_kib(self.bytes_per_tile)}/tile; est. "
            f"{self.compute_cycles} compute + {self.exchange_cycles} exchange"
            + (f" + {self.reduce_cycles} reduce" if self.pk > 1 else "")
            + f" cycles; {self.reason}"
        )

    __str__ = describe


def workers_for(bm: int, threads: int) -> int:
    """Worker vertices a block of bm rows is split into (by rows) when worker vertices are used:
    the largest divisor of bm <= threads (block-sparse and the core BlockMatMul path)."""
    for w in range(min(threads, bm), 0, -1):
        if bm % w == 0:
            return w
    return 1


def amp_tile_cycles(bm: int, bk: int, bn: int, target: PlanTarget, precision: str) -> int:
    """Busy cycles of a tile running one AMP supervisor vertex (engine: threads x ceil(t / threads)
    + vertex launch)."""
    fp16 = precision in ("fp16", "float16")
    t = poplin.amp_matmul_tile_cycles(bm, bk, bn, fp16, rate=target.flops_per_cycle(precision))
    return target.threads * _ceil_div(t, target.threads) + target.launch_cycles


def reduce_split(slice_elems: int, threads: int, grain: int = 2) -> list[int]:
    """How the op library splits an owner tile's slice of reduced outputs over worker vertices:
    up to ``threads`` pieces, multiples of ``grain`` (last piece takes the rest)."""
    if slice_elems <= 0:
        return []
    per = _ceil_div(_ceil_div(slice_elems, threads), grain) * grain
    pieces = []
    left = slice_elems
    while left > 0:
        pieces.append(min(per, left))
        left -= per
    return pieces


def k_partial_segments(bm: int, bn: int, pk: int) -> list[np.ndarray]:
    """Lengths of the reduce vertices of each owner slice when the ``pk`` partials of a (bm, bn)
    output block are reduced (ops.matmul.reduce_k_partials): the block's elements cut in ``pk``
    even slices and at every row boundary."""
    be = bm * bn
    sl = split_even(be, pk)
    out = []
    for s0, s1 in sl:
        cuts = np.union1d([s0], np.arange(-(-s0 // bn) * bn, s1, bn))
        out.append(np.diff(np.append(cuts, s1)))
    return out


def multi_stage_reduce_depths(depth: int) -> list[int]:
    """The depths of the intermediate partials when poplin reduces ``depth`` partials of a convolution or
    matmul (lib/poplin/ConvReducePlan.cpp getMultiStageReducePlan, ConvOptions enableMultiStageReduce =
    true by default): one stage below 16 partials, two from 16, three from 125 ("a single stage
    reduction requires each tile to receive p messages; n stages need n p^(1/n)": fewer messages, less
    exchange code).  Each intermediate depth is depth^((n-1)/n) rounded down or up, whichever makes
    the sum over the stages of (depth in / depth out) smaller, recursively; [] for one stage."""
    depth = int(depth)
    stages = 3 if depth >= 125 else 2 if depth >= 16 else 1
    return list(_reduce_depths(depth, stages)[0])


@functools.lru_cache(maxsize=4096)
def _reduce_depths(depth: int, stages: int) -> tuple[tuple[int, ...], float]:
    """(intermediate depths, messages per tile) of a ``stages``-stage reduction of ``depth`` partials."""
    if stages == 1:
        return (), float(depth)
    lo = int((float(depth)) ** ((stages - 1.0) / stages))
    best = None
    for nxt in (lo, lo + 1):
        rest, cost = _reduce_depths(nxt, stages - 1)
        cost += depth / nxt
        if best is None or cost < best[1]:
            best = ((nxt,) + rest, cost)
    return best


def reduce_stage_sections(depth_in: int, depth_out: int, tiles: int) -> list[tuple[int, int, int, int]]:
    """One intermediate stage of the multi-stage reduction (poplin ConvReduce.cpp partialGroupedReduce):
    section i of ``depth_out`` reduces the partials [i * depth_in / depth_out, (i + 1) * ...) and its
    output is spread over the group's tiles [i * tiles / depth_out, max(begin + 1, (i + 1) * ...)).
    Returns (first partial, partials, first tile, tiles) per section."""
    out = []
    for i in range(depth_out):
        q0, q1 = i * depth_in // depth_out, (i + 1) * depth_in // depth_out
        t0 = i * tiles // depth_out
        t1 = max(t0 + 1, (i + 1) * tiles // depth_out)
        out.append((q0, q1 - q0, t0, t1 - t0))
    return out


def k_reduce_cycles(pk: int, bm: int, bn: int, target: PlanTarget, out_bytes: int, bound: float = float("inf")) -> int:
    """Cycles of reducing the ``pk`` partials of a (bm, bn) output block as ops.matmul.reduce_k_partials
    builds it (poplin's multi-stage reduction, :func:`multi_stage_reduce_depths`): per stage the
    gather of the owner's slice from the other partials' tiles (one exchange and sync) and the
    ReduceAdd vertex of the slowest owner; the last stage's slices are the block cut in ``pk``, as a
    single-stage reduction's.  Past ``bound`` the rest is left out (a lower bound)."""
    pb, xb, mb = target.partials_bytes, target.exchange_bytes_per_cycle, target.memcpy_bytes_per_cycle
    be = bm * bn
    total, depth = 0, pk
    for d in multi_stage_reduce_depths(pk):
        k = -(-depth // d)  # the deepest section
        nt = max(1, pk // d)  # the fewest tiles a section's output is spread over
        sl = -(-be // nt)
        total += int(exchange_cycles((k - 1) * sl * pb, (k - 1) * sl * pb, sl * pb, xb, mb)) + target.sync_cycles
        if total > bound:
            return total
        est = poplin.reduce_add_cycles(sl, k, pb, pb, target.threads)
        total += target.threads * _ceil_div(est, target.threads) + target.launch_cycles
        depth = d
    slice_elems = -(-be // pk)
    total += (int(exchange_cycles((depth - 1) * slice_elems * pb, (depth - 1) * slice_elems * pb, slice_elems * pb,
                                  xb, mb)) + target.sync_cycles)
    if total <= bound:
        total += _reduce_tile_cycles(int(pk), int(bm), int(bn), int(target.threads), int(target.launch_cycles),
                                     int(out_bytes), int(pb), int(depth))
    return total


def reduce_tile_cycles(pk: int, bm: int, bn: int, target: PlanTarget, out_bytes: int) -> int:
    """Compute cycles of the slowest owner tile reducing ``pk`` FP32 partials: one poplin ReduceAdd
    supervisor vertex over its slice (codelets.popops_rows.ConvReducePartials, as the engine charges it)."""
    return _reduce_tile_cycles(int(pk), int(bm), int(bn), int(target.threads), int(target.launch_cycles),
                               int(out_bytes), int(target.partials_bytes))


@functools.lru_cache(maxsize=65536)
def _reduce_tile_cycles(pk: int, bm: int, bn: int, threads: int, launch: int, out_bytes: int,
                        partials_bytes: int = 4, depth: int | None = None) -> int:
    """The costliest slice of split_even(bm x bn, pk) (at most two sizes) through poplin's ReduceAdd
    estimate for ``depth`` partials (default pk: a single-stage reduction), in the engine's units:
    threads x ceil(estimate / threads) + one vertex launch."""
    est = max(poplin.reduce_add_cycles(n, pk if depth is None else depth, out_bytes, partials_bytes, threads)
              for n in {s1 - s0 for s0, s1 in split_even(bm * bn, pk)})
    return threads * _ceil_div(est, threads) + launch


def _matmul_cost(M, N, K, pm, pn, pk, ps, target: PlanTarget, in_b: int, precision: str,
                 rearrange_a: bool, rearrange_b: bool, bound: float = float("inf")):
    """Per-tile footprint and the cycles the op library's implementation of this split is charged:
    (bm, bn, bk, bytes per tile, compute, exchange, reduce).  ``bound``: when the cycles before the
    reduce vertices already exceed it, those (the costliest term to evaluate) are left out - the
    split cannot win - and ``reduce`` is a lower bound.

    Temporary memory per tile follows poplin's ConvModel.cpp (totalTempBytes): the partial-calc
    temporaries (the tile's A and B blocks and its output / partials) and the reduction's (the
    partials and the gathered slice) are not live at the same time, so the footprint is their max."""
    pb = target.partials_bytes
    bm, bn, bk, bks, a_bytes, b_bytes, slice_elems, per_tile = _matmul_footprint(M, N, K, pm, pn, pk, ps, in_b, pb)
    xb, mb = target.exchange_bytes_per_cycle, target.memcpy_bytes_per_cycle
    compute = ps * amp_tile_cycles(bm, bks, bn, target, precision)
    # operands are broadcast to each tile every pass, A and B in one exchange each (nothing assumed
    # local: an upper bound).  Tiles (g, ik, im, in) are consecutive in ``in``: with an even N split
    # the two tiles of a shared exchange bus receive the same A block, at twice the rate
    # (cost_model.shared_bus_receive_bytes, poplin ExchangeEstimator's input-element bandwidth).
    a_recv = _ceil_div(a_bytes, 2) if (target.shared_bus_tiles == 2 and pn % 2 == 0) else a_bytes
    exchange = ps * (int(exchange_cycles(0, a_recv, 0, xb, mb)) + int(exchange_cycles(0, b_bytes, 0, xb, mb))
                     + 2 * target.sync_cycles)
    for need, elems in ((rearrange_a, M * K), (rearrange_b, K * N)):
        if need:  # block-major rearrangement between two layouts spread like the op library's linear
            # mapping (all tiles, but at least 64 elements per tile: OpContext.linear_mapping)
            spread = max(1, min(target.tiles, elems // 64))
            exchange += int(exchange_cycles(0, _ceil_div(elems, spread) * in_b, 0, xb, mb)) + target.sync_cycles
    reduce = 0
    if pk > 1:
        reduce = k_reduce_cycles(pk, bm, bn, target, in_b, bound - compute - exchange)
    elif ps > 1:  # FP32 accumulator cast to the output type
        reduce = _cast_out_cycles(bm * bn, target.threads, target.launch_cycles, in_b, pb)
    return bm, bn, bk, per_tile, compute, exchange, reduce


def _matmul_footprint(M, N, K, pm, pn, pk, ps, in_b, partials_bytes: int = 4):
    """Blocks and temporary bytes per tile of a split (see _matmul_cost): (bm, bn, bk, bk per pass,
    A bytes, B bytes, reduce slice elements, bytes per tile).  The split counts may be ints or int64
    arrays of splits (plan_matmul's vectorised search); the arithmetic is the same for both."""
    bm, bn, bk = _ceil_div(M, pm), _ceil_div(N, pn), _ceil_div(K, pk)
    bks = _ceil_div(bk, ps)
    a_bytes = bm * bks * in_b
    b_bytes = bks * bn * in_b
    out_bytes = bm * bn * (in_b + (partials_bytes - in_b) * ((pk > 1) | (ps > 1)))  # FP32 partials when accumulated
    slice_elems = _ceil_div(bm * bn, pk) * (pk > 1)
    red_bytes = pk * slice_elems * partials_bytes + slice_elems * in_b  # 0 without a K split
    calc, reduce = a_bytes + b_bytes + out_bytes, out_bytes + red_bytes
    per_tile = np.maximum(calc, reduce) if isinstance(calc, np.ndarray) else max(calc, reduce)
    return bm, bn, bk, bks, a_bytes, b_bytes, slice_elems, per_tile


@functools.lru_cache(maxsize=65536)
def _cast_out_cycles(elems: int, threads: int, launch: int, in_b: int, partials_bytes: int = 4) -> int:
    worst = max(int(popops.cast_worker_cycles(m, partials_bytes, in_b)) for m in reduce_split(elems, threads, 1))
    return threads * worst + launch


SERIAL_CANDIDATES = (1, 2, 4, 8, 16, 32)


@functools.lru_cache(maxsize=4096)
def plan_matmul(M: int, N: int, K: int, target: PlanTarget, precision: str = "fp16",
                tiles: int | None = None, exact: bool = False, max_pk: int | None = None,
                ta: bool = False, tb: bool = False, b_laid_out: bool = False, exact_k: bool = False) -> MatmulPlan:
    """Choose the M, N, K split (and serial passes over K) of a matmul over ``tiles`` (default: all
    tiles of the target), as poplin's planner does: every split is costed with the emulator's own
    cost functions (see module doc) and the fastest one whose temporaries fit
    ``target.budget_bytes`` per tile (availableMemoryProportion x tile SRAM) wins; ties go to fewer
    tiles.  When none fits, the split with the smallest per-tile footprint is returned with
    ``fits=False``.  ``exact`` keeps only splits that divide the dimensions, ``exact_k`` only those that
    divide K (pk x serial passes; M and N may be split into parts of ceil and floor size, as poplin
    partitions them - the op library builds such plans, ops/matmul.py); ``max_pk`` caps the K
    split; ``ta`` / ``tb``: the operand is stored transposed; ``b_laid_out``: B (a weight) is
    already laid out in the plan's block order (no rearrangement, as createMatMulInputRHS)."""
    for name, v in (("M", M), ("N", N), ("K", K)):
        if int(v) < 1:
            raise ValueError(f"matmul dimension {name}={v} must be >= 1")
    tiles = target.tiles if tiles is None else int(tiles)
    in_b = dtype_bytes(precision)
    pm, pn, pk, ps, group = _split_grid(int(M), int(N), int(K), tiles, bool(exact), bool(exact_k), max_pk)
    foot = _matmul_footprint(M, N, K, pm, pn, pk, ps, in_b, target.partials_bytes)[-1]
    fitting = np.flatnonzero(foot <= target.budget_bytes)
    if not len(fitting):  # nothing fits: the search for the smallest footprint, split by split
        return _plan_matmul_scan(M, N, K, target, precision, tiles, exact, max_pk, ta, tb, b_laid_out, exact_k)
    # Each (pm, pn, pk) is costed at its fewest serial passes that fit (more passes only cost more), in
    # the scan's order, so the running bound and the tie-breaks are the scan's (_plan_matmul_scan); like
    # the scan, a split's passes count as considered up to its first that fits.
    first = fitting[np.r_[True, group[fitting][1:] != group[fitting][:-1]]]
    stop = np.full(int(group[-1]) + 1, len(pm))
    stop[group[first]] = first
    considered = int(np.count_nonzero(np.arange(len(pm)) <= stop[group]))
    # Cost them cheapest-looking first: a split whose lower bound (its operand broadcasts and syncs, one
    # vertex launch per pass: _matmul_cost's terms that need no estimator) exceeds the best total so far
    # cannot win, nor can any after it.  The scan's order breaks exact ties, as in the scan.
    low = _matmul_cost_floor(M, N, K, pm[first], pn[first], pk[first], ps[first], target, in_b)
    best = None
    for j in np.argsort(low, kind="stable").tolist():
        if best is not None and low[j] > best[0][0]:
            break
        i = int(first[j])
        s = (int(pm[i]), int(pn[i]), int(pk[i]), int(ps[i]))
        ra, rb = rearrangements(s[2], s[1], s[3], ta, tb, b_laid_out)
        bm, bn, bk, per_tile, comp, exch, red = split_cost(  # (kept across budgets: ops/plan_costs.py)
            _matmul_cost, M, N, K, *s, target, in_b, precision, ra, rb, best[0][0] if best is not None else math.inf)
        key = (comp + exch + red, s[0] * s[1] * s[2], s[2], s[3], i)
        if best is None or key < best[0]:
            best = (key, s + (bm, bn, bk, per_tile, comp, exch, red))
    return _matmul_plan(M, N, K, target, precision, best[1], True, considered)


def _matmul_cost_floor(M, N, K, pm, pn, pk, ps, target: PlanTarget, in_b: int) -> np.ndarray:
    """A lower bound of _matmul_cost's total for arrays of splits: the A and B broadcasts of every pass
    (A at the shared-bus rate where the scan's cost gives it) with their two syncs, and one vertex launch
    per pass (the AMP vertex's least); rearrangements, the rest of the compute and the reduction are >= 0."""
    bm, bn, bk, bks, a_bytes, b_bytes = _matmul_footprint(M, N, K, pm, pn, pk, ps, in_b, target.partials_bytes)[:6]
    halve = (target.shared_bus_tiles == 2) & (pn % 2 == 0)
    a_recv = np.where(halve, -(-a_bytes // 2), a_bytes)
    xb = float(target.exchange_bytes_per_cycle)
    return ps * (np.ceil(a_recv / xb) + np.ceil(b_bytes / xb) + 2 * target.sync_cycles + target.launch_cycles)


def _matmul_plan(M, N, K, target: PlanTarget, precision: str, cand: tuple, fits: bool, considered: int) -> MatmulPlan:
    pm, pn, pk, ps, bm, bn, bk, per_tile, comp, exch, red = cand
    if fits:
        bound = "compute-bound" if comp >= exch + red else "exchange-bound"
        reason = f"fastest of {considered} splits fitting {_kib(target.budget_bytes)}/tile ({bound})"
    else:
        reason = f"no split fits {_kib(target.budget_bytes)}/tile; smallest footprint of {considered} chosen"
    in_b = dtype_bytes(precision)
    acc_b = target.partials_bytes if precision in ("fp16", "float16") else 4  # AMP partials (poplin partialsType)
    return MatmulPlan(M, N, K, pm, pn, pk, ps, bm, bn, bk, in_b, acc_b, per_tile, comp, exch, red, fits, reason,
                      considered)


# A few kept: a model plans one (M, N, K) with several operand layouts (a grid: up to ~10^4 splits x 5 int64 arrays)
@functools.lru_cache(maxsize=16)
def _split_grid(M: int, N: int, K: int, tiles: int, exact: bool, exact_k: bool, max_pk: int | None):
    """Every split plan_matmul considers, as int64 arrays (pm, pn, pk, serial passes, index of the
    (pm, pn, pk) group) in the scan's order (_plan_matmul_scan): pm, then pn, then pk, then passes ascending."""
    # (pm, pn) pairs and their pk candidates as lists, made into the arrays at once (not a (pm, pn, pk) tuple per
    # split: numpy's conversion of ~10^4 tuples was most of a grid's build)
    pms, pns, pks = [], [], []
    for pm in _candidates(M, tiles, exact):
        for pn in _candidates(N, tiles // pm, exact):
            kcap = tiles // (pm * pn) if max_pk is None else min(max_pk, tiles // (pm * pn))
            pms.append(pm)
            pns.append(pn)
            pks.append(_candidates(K, kcap, exact or exact_k))
    cnt = np.fromiter(map(len, pks), np.int64, len(pks))
    g = np.stack([np.repeat(np.array(pms, np.int64), cnt), np.repeat(np.array(pns, np.int64), cnt),
                  np.fromiter(itertools.chain.from_iterable(pks), np.int64, int(cnt.sum()))], 1)
    g = g[g[:, 0] * g[:, 1] * g[:, 2] <= tiles]
    passes = np.array(SERIAL_CANDIDATES, dtype=np.int64)
    keep = (passes == 1) | (passes <= -(-K // g[:, 2:3]))
    if exact or exact_k:
        keep &= (K // g[:, 2:3]) % passes == 0
    row, col = np.nonzero(keep)
    return g[row, 0], g[row, 1], g[row, 2], passes[col], row


def _plan_matmul_scan(M, N, K, target: PlanTarget, precision, tiles, exact, max_pk, ta, tb, b_laid_out,
                      exact_k) -> MatmulPlan:
    """plan_matmul split by split: costs every split not ruled out by its footprint, keeps the fastest
    fitting one and the smallest footprint.  plan_matmul's answer when no split fits, and the reference
    its vectorised search is tested against (tests/emulator/ops/test_planners.py).  It enumerates the splits
    with its own loops rather than _split_grid's arrays, so that test checks the grid's order and count too."""
    in_b = dtype_bytes(precision)
    best = None
    smallest = None
    considered = 0
    for pm in _candidates(M, tiles, exact):
        for pn in _candidates(N, tiles // pm, exact):
            kcap = tiles // (pm * pn) if max_pk is None else min(max_pk, tiles // (pm * pn))
            for pk in _candidates(K, kcap, exact or exact_k):
                if pm * pn * pk > tiles:
                    continue
                for ps in SERIAL_CANDIDATES:
                    if ps > 1 and ps > _ceil_div(K, pk):
                        break
                    if (exact or exact_k) and (K // pk) % ps:
                        continue  # more passes only cost more: the first fitting ps is this split's best
                    considered += 1
                    foot = _matmul_footprint(M, N, K, pm, pn, pk, ps, in_b, target.partials_bytes)[-1]
                    if foot > target.budget_bytes and smallest is not None and foot > smallest[0][0]:
                        continue  # over budget and larger than a footprint seen: neither the best nor the smallest
                    ra, rb = rearrangements(pk, pn, ps, ta, tb, b_laid_out)
                    bm, bn, bk, per_tile, comp, exch, red = _matmul_cost(
                        M, N, K, pm, pn, pk, ps, target, in_b, precision, ra, rb,
                        bound=best[0][0] if best is not None else float("inf"))
                    cand = (pm, pn, pk, ps, bm, bn, bk, per_tile, comp, exch, red)
                    key_small = (per_tile, comp + exch + red)
                    if smallest is None or key_small < smallest[0]:
                        smallest = (key_small, cand)
                    if per_tile <= target.budget_bytes:
                        key = (comp + exch + red, pm * pn * pk, pk, ps)
                        if best is None or key < best[0]:
                            best = (key, cand)
                        break
    return _matmul_plan(M, N, K, target, precision, (best or smallest)[1], best is not None, considered)


def rearrangements(pk: int, pn: int, ps: int, ta: bool, tb: bool, b_laid_out: bool = False) -> tuple[bool, bool]:
    """Which operands the op library rearranges block-major before broadcasting (ops.basic.matmul):
    A unless its row blocks are contiguous already (row-major A, whole K on a tile); B unless its
    blocks are contiguous (transposed B with whole K, or row-major B with whole N) or B is a 2-D
    row-major operand broadcast straight from its blocks (``b_laid_out``: weights, laid out in
    the plan's order at their first use; with no per-piece exchange cost a rearrangement would
    only add an exchange)."""
    ra = ta or ps > 1 or pk > 1
    rb = not b_laid_out and not ((tb and ps == 1 and pk == 1) or (not tb and pn == 1))
    return ra, rb
    # b_laid_out: a 2-D row-major B (a weight, whether laid out for this plan or not) is broadcast
    # straight from its blocks: with no per-piece exchange cost a rearrangement only adds an exchange


# --------------------------------------------------------------------------------------------
# conv2d as implicit GEMM


@dataclass(frozen=True)
class ImplicitGemmConvPlan:
    """conv2d (NHWC, kernel KHxKW, stride, padding) planned as an implicit GEMM:
    M = N*OH*OW output pixels, N = output channels, K = KH*KW*Cin."""

    batch: int
    out_h: int
    out_w: int
    cin: int
    cout: int
    kh: int
    kw: int
    stride: int
    padding: int
    gemm: MatmulPlan

    @property
    def M(self):
        return self.gemm.M

    @property
    def tiles_used(self):
        return self.gemm.tiles_used

    @property
    def fits(self):
        return self.gemm.fits

    def describe(self) -> str:
        return (f"implicit GEMM {self.gemm.M}x{self.gemm.N}x{self.gemm.K} "
                f"(out {self.batch}x{self.out_h}x{self.out_w}x{self.cout}, k{self.kh}x{self.kw} s{self.stride}); "
                + self.gemm.describe())

    __str__ = describe


def conv_output_hw(h: int, w: int, kh: int, kw: int, stride: int, padding: int) -> tuple[int, int]:
    oh = (h + 2 * padding - kh) // stride + 1
    ow = (w + 2 * padding - kw) // stride + 1
    if oh < 1 or ow < 1:
        raise ValueError(f"conv2d kernel {kh}x{kw} with stride {stride}, padding {padding} "
                         f"does not fit input {h}x{w}")
    return oh, ow


def plan_conv2d(batch: int, h: int, w: int, cin: int, cout: int, kh: int, kw: int, target: PlanTarget,
                stride: int = 1, padding: int = 0, precision: str = "fp16", tiles: int | None = None) -> ImplicitGemmConvPlan:
    oh, ow = conv_output_hw(h, w, kh, kw, stride, padding)
    gemm = plan_matmul(batch * oh * ow, cout, kh * kw * cin, target, precision, tiles)
    return ImplicitGemmConvPlan(batch, oh, ow, cin, cout, kh, kw, stride, padding, gemm)


# --------------------------------------------------------------------------------------------
# elementwise and reductions


@dataclass(frozen=True)
class ElementwisePlan:
    """Elements split in contiguous chunks over tiles; each tile's chunk is split over its workers."""

    elements: int
    tiles_used: int
    per_tile: int  # elements on the fullest tile
    grain: int  # elements per chunk are a multiple of this (vector width)
    reason: str = ""

    def tile_ranges(self):
        """(start, stop) element interval of each used tile, in order."""
        starts = [i * self.per_tile for i in range(self.tiles_used)]
        return [(s, min(s + self.per_tile, self.elements)) for s in starts]

    def describe(self) -> str:
        return f"{self.elements} elements over {self.tiles_used} tiles ({self.per_tile}/tile); {self.reason}"

    __str__ = describe


def plan_elementwise(elements: int, target: PlanTarget, bytes_per_element: int = 2, grain: int = 8,
                     min_per_tile: int = 64, tiles: int | None = None) -> ElementwisePlan:
    """Spread ``elements`` evenly, but not thinner than ``min_per_tile`` (vertex overhead would dominate)."""
    if elements < 1:
        raise ValueError(f"elementwise op over {elements} elements: need at least 1")
    tiles = target.tiles if tiles is None else int(tiles)
    want = max(1, min(tiles, elements // max(1, min_per_tile)))
    per = _ceil_div(elements, want)
    per = _ceil_div(per, grain) * grain
    used = _ceil_div(elements, per)
    reason = "all tiles" if used == tiles else f">= {min_per_tile} elements per tile"
    return ElementwisePlan(elements, used, per, grain, reason)


@dataclass(frozen=True)
class ReductionPlan:
    """Reduce ``rows`` independent rows of length ``length``.  Rows are spread over tiles; when there
    are fewer rows than tiles each row is split in ``parts`` partials reduced in a second stage."""

    rows: int
    length: int
    row_tiles: int  # tiles holding whole rows (or row parts)
    parts: int  # partial reductions per row (1 = single stage)
    rows_per_tile: int
    reason: str = ""

    @property
    def tiles_used(self):
        return self.row_tiles

    @property
    def stages(self):
        return 1 if self.parts == 1 else 2

    def describe(self) -> str:
        return (f"{self.rows} rows x {self.length}: {self.rows_per_tile} rows/tile, {self.parts} part(s)/row "
                f"on {self.row_tiles} tiles, {self.stages} stage(s); {self.reason}")

    __str__ = describe


def plan_reduction(rows: int, length: int, target: PlanTarget, min_per_tile: int = 256,
                   tiles: int | None = None) -> ReductionPlan:
    if rows < 1 or length < 1:
        raise ValueError(f"reduction of {rows} rows x {length}: both must be >= 1")
    tiles = target.tiles if tiles is None else int(tiles)
    if rows >= tiles or length < 2 * min_per_tile:
        per = _ceil_div(rows, min(tiles, rows))
        return ReductionPlan(rows, length, _ceil_div(rows, per), 1, per, "rows spread over tiles, one stage")
    parts = max(1, min(tiles // rows, length // min_per_tile))
    return ReductionPlan(rows, length, rows * parts, parts, 1,
                         f"fewer rows than tiles: each row split in {parts} partials")


def split_even(n: int, parts: int) -> list[tuple[int, int]]:
    """``parts`` contiguous (start, stop) intervals covering 0..n as evenly as possible (no empty ones)."""
    parts = max(1, min(parts, n))
    base, extra = divmod(n, parts)
    out, s = [], 0
    for i in range(parts):
        e = s + base + (1 if i < extra else 0)
        out.append((s, e))
        s = e
    return out


__all__ = [
    "PlanTarget", "MatmulPlan", "ImplicitGemmConvPlan", "ElementwisePlan", "ReductionPlan", "plan_matmul",
    "plan_conv2d", "plan_elementwise", "plan_reduction", "conv_output_hw", "split_even", "dtype_bytes",
]
