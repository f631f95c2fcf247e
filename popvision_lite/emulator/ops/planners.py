"""Tile planners: pure functions that decide how an op is split over the tiles of an IPU.

A planner never touches a graph.  It takes the op's shape and a :class:`PlanTarget` (the few
device numbers a planner needs, read from the device spec by the caller) and returns a plan
object that says what it chose and why, in a human string that ends up in the profile's
``ops.plan`` column.

Cost model used for choosing (the emulator charges the real cycles later):

* compute cycles of a tile  = its FLOPs / ``flops_per_cycle`` (AMP peak per tile for fp16,
  the fp32 peak for fp32),
* exchange cycles of a tile = bytes it receives / ``exchange_bytes_per_cycle``,
* the slowest tile sets the time of a BSP step (so the cost is the max over tiles, i.e. the
  per-tile block of the largest partition).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

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
    usable_fraction: float = 0.5
    threads: int = 6  # worker contexts per tile

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


def _candidates(dim: int, limit: int, exact: bool = False) -> list[int]:
    """Split counts worth trying for a dimension: powers of two and divisors, <= min(dim, limit).
    With ``exact`` only divisors of ``dim`` (every block the same size, no padding)."""
    top = max(1, min(dim, limit))
    if exact:
        return [d for d in range(1, top + 1) if dim % d == 0]
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
    return sorted(out)


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


# Planner heuristics (not device facts): a vertex's fixed cost and the exchange cost of a piece.
VERTEX_OVERHEAD = 40  # worker cycles to start a block-matmul vertex (core codelet's MATMUL_OVERHEAD)
ROW_OVERHEAD = 4  # worker cycles per output row of a block
PIECE_CYCLES = 8  # exchange set-up per contiguous piece received (assumption: address + send/receive pair + gap)
PIECE_CODE_BYTES = 8  # exchange code per piece (core's EXCHANGE_CODE_PER_PIECE), on sender and receiver


def workers_for(bm: int, threads: int) -> int:
    """Worker vertices a tile's output block is split into (by rows): the largest divisor of bm <= threads."""
    for w in range(min(threads, bm), 0, -1):
        if bm % w == 0:
            return w
    return 1


def _matmul_cost(M, N, K, pm, pn, pk, ps, target: PlanTarget, in_b: int, acc_b: int, fpc: float,
                 ta: bool = False, tb: bool = False):
    """Per-tile footprint and cycle estimate of one split.  ``ps`` serial passes over K: each pass
    brings in 1/ps of the operand blocks, so only that part has to be on the tile at once.

    Compute follows the barrel-threaded tile: the block is split by rows over up to ``threads``
    worker vertices; a tile cycle retires one worker instruction, so the tile takes
    ``threads x`` the worker cycles of its slowest worker."""
    bm, bn, bk = _ceil_div(M, pm), _ceil_div(N, pn), _ceil_div(K, pk)
    bks = _ceil_div(bk, ps)
    a_bytes = bm * bks * in_b
    b_bytes = bks * bn * in_b
    out_bytes = bm * bn * (acc_b if (pk > 1 or ps > 1) else in_b)
    # each partial-output block is finally owned by one of the pk tiles (1/pk of it each)
    final_bytes = _ceil_div(bm * bn, pk) * in_b if (pk > 1 or ps > 1) else 0
    w = workers_for(bm, target.threads)
    rows_w = _ceil_div(bm, w)
    # exchange pieces per tile: operands are first rearranged block-major (pieces = the tile's share
    # of the operand / contiguous run length of a block in the stored layout), then broadcast (a
    # few pieces per block).  ta / tb: the operand is stored transposed.
    share = max(1, target.tiles)
    pieces = 4 * ps
    if ta:
        pieces += _ceil_div(_ceil_div(M * K, share), rows_w)
    elif ps > 1 or pk > 1:
        pieces += _ceil_div(_ceil_div(M * K, share), bks)
    if tb:
        if ps > 1 or pk > 1:
            pieces += _ceil_div(_ceil_div(K * N, share), bks)
    elif pn > 1:
        pieces += _ceil_div(_ceil_div(K * N, share), bn)
    per_tile = a_bytes + b_bytes + out_bytes + final_bytes + 2 * PIECE_CODE_BYTES * pieces
    worker = ps * (VERTEX_OVERHEAD + ROW_OVERHEAD * rows_w) + 2 * rows_w * bk * bn / fpc
    compute = math.ceil(target.threads * worker)
    # operands arrive from wherever they live (linear mapping): at worst all of them are received
    exchange = ps * math.ceil((a_bytes + b_bytes) / target.exchange_bytes_per_cycle) + PIECE_CYCLES * pieces
    reduce = 0
    if pk > 1:
        piece = _ceil_div(bm * bn, pk)
        recv = (pk - 1) * piece * acc_b
        reduce = math.ceil(recv / target.exchange_bytes_per_cycle) + math.ceil((pk - 1) * piece / 4)
    return bm, bn, bk, per_tile, compute, exchange, reduce


SERIAL_CANDIDATES = (1, 2, 4, 8, 16, 32)
PASS_OVERHEAD_CYCLES = 600  # one extra sync + exchange setup per serial pass (order of globalSyncCycles)


@functools.lru_cache(maxsize=4096)
def plan_matmul(M: int, N: int, K: int, target: PlanTarget, precision: str = "fp16",
                tiles: int | None = None, exact: bool = False, max_pk: int | None = None,
                ta: bool = False, tb: bool = False) -> MatmulPlan:
    """Choose the M, N, K split of a matmul over ``tiles`` (default: all tiles of the target).

    Among splits that fit ``target.budget_bytes`` per tile, the one with the fewest estimated
    cycles (compute + exchange + reduction) wins; ties go to fewer tiles.  When none fits the
    split with the smallest per-tile footprint is returned with ``fits=False``.
    ``exact`` keeps only splits that divide the dimensions (and serial passes that divide the K
    block); ``max_pk`` caps the K split (1 = no cross-tile reduction); ``ta`` / ``tb`` say the
    operand is stored transposed (changes how fragmented its rearrangement is).
    """
    for name, v in (("M", M), ("N", N), ("K", K)):
        if int(v) < 1:
            raise ValueError(f"matmul dimension {name}={v} must be >= 1")
    tiles = target.tiles if tiles is None else int(tiles)
    in_b = dtype_bytes(precision)
    acc_b = 4  # FP32 accumulate (AMP) for fp16 inputs; fp32 stays fp32
    fpc = target.flops_per_cycle(precision)
    best = None
    smallest = None
    considered = 0
    for pm in _candidates(M, tiles, exact):
        for pn in _candidates(N, tiles // pm, exact):
            kcap = tiles // (pm * pn) if max_pk is None else min(max_pk, tiles // (pm * pn))
            for pk in _candidates(K, kcap, exact):
                if pm * pn * pk > tiles:
                    continue
                for ps in SERIAL_CANDIDATES:
                    if ps > 1 and ps > _ceil_div(K, pk):
                        break
                    if exact and (K // pk) % ps:
                        continue  # more passes only cost more: the first fitting ps is this split's best
                    considered += 1
                    bm, bn, bk, per_tile, comp, exch, red = _matmul_cost(
                        M, N, K, pm, pn, pk, ps, target, in_b, acc_b, fpc, ta, tb)
                    exch += (ps - 1) * PASS_OVERHEAD_CYCLES
                    cand = (pm, pn, pk, ps, bm, bn, bk, per_tile, comp, exch, red)
                    key_small = (per_tile, comp + exch + red)
                    if smallest is None or key_small < smallest[0]:
                        smallest = (key_small, cand)
                    if per_tile <= target.budget_bytes:
                        key = (comp + exch + red, pm * pn * pk, pk, ps)
                        if best is None or key < best[0]:
                            best = (key, cand)
                        break
    if best is not None:
        pm, pn, pk, ps, bm, bn, bk, per_tile, comp, exch, red = best[1]
        bound = "compute-bound" if comp >= exch + red else "exchange-bound"
        reason = (f"fastest of {considered} splits fitting {_kib(target.budget_bytes)}/tile ({bound})")
        fits = True
    else:
        pm, pn, pk, ps, bm, bn, bk, per_tile, comp, exch, red = smallest[1]
        reason = (f"no split fits {_kib(target.budget_bytes)}/tile; smallest footprint of {considered} chosen")
        fits = False
    return MatmulPlan(M, N, K, pm, pn, pk, ps, bm, bn, bk, in_b, acc_b if precision in ("fp16", "float16") else 4,
                      per_tile, comp, exch, red, fits, reason, considered)


# --------------------------------------------------------------------------------------------
# conv2d as implicit GEMM


@dataclass(frozen=True)
class ConvPlan:
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
                stride: int = 1, padding: int = 0, precision: str = "fp16", tiles: int | None = None) -> ConvPlan:
    oh, ow = conv_output_hw(h, w, kh, kw, stride, padding)
    gemm = plan_matmul(batch * oh * ow, cout, kh * kw * cin, target, precision, tiles)
    return ConvPlan(batch, oh, ow, cin, cout, kh, kw, stride, padding, gemm)


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
    "PlanTarget", "MatmulPlan", "ConvPlan", "ElementwisePlan", "ReductionPlan", "plan_matmul",
    "plan_conv2d", "plan_elementwise", "plan_reduction", "conv_output_hw", "split_even", "dtype_bytes",
]
