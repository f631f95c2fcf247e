"""Execution timeline analysis: level of detail, range summaries, search (pure numpy/pandas).

Everything the execution view draws comes from here, and every function costs in
proportion to what is *shown* (pixels, visible steps x visible tiles), never to the whole
step x tile matrix:

* :class:`StepIndex` holds the per-step columns (O(steps) memory) plus prefix sums so that
  "cycles of each kind inside [x0, x1)" is exact for any set of bins in O(bins log steps),
  even when steps of different IPUs overlap in time.
* :func:`exact_cells` returns the busy / wait rectangles of a small visible window
  (read with ``profile.step_tiles.window``).
* :func:`tile_raster` returns min / mean / max busy cycles and the busy fraction of time per
  (row of tiles, pixel column) for a large visible range, from the stored summaries
  (``profile.step_tiles.summary``) or, when the window is small enough, from exact data.
* :func:`step_bins` feeds the per-step chart (one bar per step zoomed in, per pixel bucket
  zoomed out), :meth:`StepIndex.kind_cycles` the step lane's kind mix per pixel when zoomed out;
  :func:`range_summary` the range panel; :func:`search_ops` / :func:`match_steps`
  the search; :func:`step_details` the click panel.

Coordinates are BSP cycles since run start (int64); the view rebases them before drawing.

Over 600 lines on purpose: the level-of-detail index, the exact-window cells, the raster and the range
summary all read the one prefix-sum layout of :class:`StepIndex`; kept together so that the layout has one
owner (the execution view and its bench read only the functions above).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from popvision_lite.errors import ProfileError
from popvision_lite.profile.schema import STEP_KIND_CODE, STEP_KINDS, stored_table

N_KINDS = len(STEP_KINDS)
COMPUTE = STEP_KIND_CODE["compute"]
SYNC = STEP_KIND_CODE["sync"]

# bounds on what one frame may read / build
MAX_EXACT_RECTS = 30_000          # exact rectangles drawn at once (busy + wait)
MAX_WINDOW_CELLS = 1_000_000      # step x tile cells read exactly for a raster (else summaries)
STEP_SPREAD_PER_COL = 1           # summary blocks are spread over their steps at <= 1 step per px
MAX_RANGE_CELLS = 40_000_000      # step x tile cells read (in chunks) for an exact range summary
_CHUNK_CELLS = 4_000_000


# ---------------------------------------------------------------- step index

def own_tiles_mean(busy_mean, ipu, num_ipus: int) -> np.ndarray:
    """Each step's mean busy cycles over the tiles it runs on: the steps table's ``busy_mean`` is over every tile
    of the replica, and a step of one IPU (``ipu`` >= 0) leaves the other IPUs' tiles at 0, so its mean over its
    own IPU's tiles is ``num_ipus`` x the stored one (a step on every IPU, ``ipu`` -1, runs on them all).  The one
    definition of a step's tile statistics (the Execution view's imbalance, Insights' idle tiles): over the replica's
    5,888 tiles a POD16 BERT step on one IPU read 77 % idle, over its IPU's 1,472 tiles 9 %."""
    bm = np.asarray(busy_mean, np.float64)
    return np.where(np.asarray(ipu) >= 0, bm * max(int(num_ipus), 1), bm)



class StepIndex:
    """Per-step arrays of a profile with the prefix sums the timeline needs."""

    def __init__(self, steps: pd.DataFrame, num_ipus: int = 1):
        s = steps.sort_values("step", kind="stable")
        self.n = len(s)
        self.num_ipus = int(num_ipus)
        self.step = s["step"].to_numpy(np.int64)
        self.start = s["start_cycle"].to_numpy(np.int64)
        self.end = np.maximum(s["end_cycle"].to_numpy(np.int64), self.start)
        self.kind = s["kind"].to_numpy(np.int64)
        self.op_id = s["op_id"].to_numpy(np.int64)
        self.ipu = s["ipu"].to_numpy(np.int64)
        self.busy_max = s["busy_max"].to_numpy(np.float64)
        self.busy_mean = s["busy_mean"].to_numpy(np.float64)  # over every tile of the replica (as stored)
        self.busy_mean_own = own_tiles_mean(self.busy_mean, self.ipu, self.num_ipus)  # over the step's own tiles
        self.tiles_active = s["tiles_active"].to_numpy(np.int64)
        self.bytes_in = s["bytes_in"].to_numpy(np.int64)
        self.bytes_out = s["bytes_out"].to_numpy(np.int64)
        self.dur = self.end - self.start
        # steps are in time order: starts non-decreasing; ends may not be (overlapping IPUs)
        self.cummax_end = np.maximum.accumulate(self.end) if self.n else self.end
        self.t0 = int(self.start.min()) if self.n else 0
        self.t1 = int(self.end.max()) if self.n else 1
        # per kind: starts sorted with prefix sums, ends sorted with prefix sums of (start, dur)
        self._kind_tables = []
        for k in range(N_KINDS):
            m = self.kind == k
            st = np.sort(self.start[m])
            order = np.argsort(self.end[m], kind="stable")
            en = self.end[m][order]
            st_by_end = self.start[m][order]
            du_by_end = self.dur[m][order]
            self._kind_tables.append((
                st, np.concatenate([[0], np.cumsum(st, dtype=np.float64)]),
                en, np.concatenate([[0], np.cumsum(st_by_end, dtype=np.float64)]),
                np.concatenate([[0], np.cumsum(du_by_end, dtype=np.float64)]),
            ))

    @classmethod
    def from_profile(cls, profile) -> StepIndex:
        return cls(stored_table(profile, "steps"), int(profile.target.num_ipus))

    # -- ranges
    def visible(self, x0: float, x1: float) -> tuple[int, int]:
        """[i0, i1) of the steps that overlap the cycle interval [x0, x1)."""
        i0 = int(np.searchsorted(self.cummax_end, x0, side="right"))
        i1 = int(np.searchsorted(self.start, x1, side="left"))
        return i0, max(i0, i1)

    def step_at(self, x: float, ipu: int | None = None) -> int:
        """The step whose [start, end) holds cycle ``x`` (on ``ipu`` if given), or -1."""
        i0, i1 = self.visible(x, x + 1)
        for i in range(i1 - 1, i0 - 1, -1):  # few candidates: only steps overlapping x
            if self.start[i] <= x < self.end[i] and (ipu is None or self.ipu[i] in (-1, ipu)):
                return i
        return -1

    def cumulative_kind_cycles(self, x: np.ndarray) -> np.ndarray:
        """(N_KINDS, len(x)): cycles of each kind spent before cycle ``x`` (overlaps summed)."""
        x = np.asarray(x, dtype=np.float64)
        out = np.zeros((N_KINDS, len(x)))
        for k, (st, cst, en, cst_e, cdu_e) in enumerate(self._kind_tables):
            if len(st) == 0:
                continue
            ns = np.searchsorted(st, x, side="right")   # steps started by x
            ne = np.searchsorted(en, x, side="right")   # steps ended by x
            done = cdu_e[ne]
            running = (ns - ne) * x - (cst[ns] - cst_e[ne])
            out[k] = done + running
        return out

    def kind_cycles(self, edges: np.ndarray) -> np.ndarray:
        """(N_KINDS, len(edges)-1): cycles of each kind inside each bin [edges[i], edges[i+1])."""
        return np.diff(self.cumulative_kind_cycles(edges), axis=1)

    def participates(self, i: np.ndarray, ipu_of_tile: np.ndarray) -> np.ndarray:
        """(len(i), len(tiles)) bool: does each tile's IPU take part in each step."""
        si = self.ipu[np.asarray(i)][:, None]
        return (si < 0) | (si == ipu_of_tile[None, :])


# ---------------------------------------------------------------- exact rectangles

@dataclass
class ExactCells:
    """Busy and wait rectangles of a visible window, one entry per (step, tile) that takes part.

    ``busy`` of a tile in a step is ``[start, start + cycles)``; it then waits (at the sync that
    ends the step) for ``[start + cycles, end)``.
    """

    step: np.ndarray    # int64 step index
    tile: np.ndarray    # int64 global tile
    start: np.ndarray   # int64 cycle the step starts
    busy: np.ndarray    # int64 busy cycles of the tile in the step
    wait: np.ndarray    # int64 cycles the tile waits (step duration - busy, >= 0)
    kind: np.ndarray    # int64 step kind code


def exact_cells(profile, index: StepIndex, i0: int, i1: int, t0: int, t1: int) -> ExactCells:
    """Exact per-(step, tile) cells for steps [i0, i1) and global tiles [t0, t1)."""
    if i1 <= i0 or t1 <= t0:
        z = np.zeros(0, np.int64)
        return ExactCells(z, z, z, z, z, z)
    tiles = np.arange(t0, t1)
    w = profile.step_tiles.window(i0, i1, tiles=tiles)
    cyc = np.asarray(w.cycles, dtype=np.int64)
    tpi = int(profile.target.tiles_per_ipu)
    ii = np.arange(i0, i1)
    part = index.participates(ii, tiles // tpi)
    dur = index.dur[i0:i1, None]
    busy = np.minimum(cyc, dur)
    si, ti = np.nonzero(part)
    return ExactCells(
        step=ii[si], tile=tiles[ti], start=index.start[i0:i1][si], busy=busy[si, ti],
        wait=(dur - busy)[si, ti], kind=index.kind[i0:i1][si],
    )


# ---------------------------------------------------------------- raster (zoomed out)

class TileRaster:
    """Busy cycles per (row of tiles, pixel column) for the visible range.

    ``util`` (rows, cols) is the fraction of wall time the row's tiles were busy (mean over its
    tiles).  ``bmin`` / ``bmean`` / ``bmax`` (rows, cols) are the min / mean / max of per-(step,
    tile) busy cycles over the cells behind each pixel, so ``bmin <= exact <= bmax`` for every
    cell drawn there; they are computed on first use (hover, tests), not for every frame.
    """

    def __init__(self, util, edges, row_tiles, source, level=(1, 1), step_range=(0, 0), blocks=None):
        self.util = util                  # (rows, cols) float32, nan where no step
        self.edges = edges                # (cols+1,) cycle edges of the columns
        self.row_tiles = row_tiles        # (rows+1,) global tile edges of the rows
        self.source = source              # "window" (exact data), "summary(SxT)" or "empty"
        self.level = level
        self.step_range = step_range
        self._blocks = blocks             # (bmin, bmean, bmax, lo, hi, empty) per-block inputs
        self._stats = None

    def _compute(self):
        if self._stats is None:
            if self._blocks is None:
                nan = np.full(self.util.shape, np.nan)
                self._stats = (nan, nan, nan)
            else:
                minmax, bmean, lo, hi, centre, empty = self._blocks
                bmin, bmax = minmax() if callable(minmax) else minmax
                cmin = np.minimum(np.minimum.reduceat(bmin, lo, axis=0), bmin[hi])
                cmax = np.maximum(np.maximum.reduceat(bmax, lo, axis=0), bmax[hi])
                nb = bmin.shape[0]
                seg_end = np.maximum(np.concatenate([lo[1:], [nb]]), lo + 1)
                for c in np.flatnonzero(hi > seg_end):  # blocks overlapping beyond the next column
                    cmin[c] = bmin[lo[c]:hi[c] + 1].min(axis=0)
                    cmax[c] = bmax[lo[c]:hi[c] + 1].max(axis=0)
                cmean = bmean[centre].astype(np.float64)
                out = []
                for arr in (cmin, cmean, cmax):
                    arr = arr.astype(np.float64)
                    arr[~np.isfinite(arr)] = np.nan
                    arr[empty] = np.nan
                    out.append(arr.T)
                self._stats = tuple(out)
        return self._stats

    @property
    def bmin(self):
        return self._compute()[0]

    @property
    def bmean(self):
        return self._compute()[1]

    @property
    def bmax(self):
        return self._compute()[2]


def choose_level(levels, steps_visible: int, cols: int, tiles_per_row: int):
    """The stored summary level for a view: tile blocks no bigger than a pixel row, and the
    coarsest step block that still leaves >= ~1 block per pixel column."""
    if not levels:
        return None
    levels = sorted(levels)
    want_sb = max(1, steps_visible // max(cols, 1))
    fitting = [lv for lv in levels if lv[1] <= max(1, tiles_per_row)]
    if not fitting:  # rows finer than the finest tile block: use the finest tile block
        tb_min = min(lv[1] for lv in levels)
        fitting = [lv for lv in levels if lv[1] == tb_min]
    under = [lv for lv in fitting if lv[0] <= want_sb]
    if under:
        return max(under, key=lambda lv: (lv[0], lv[1]))
    return min(fitting, key=lambda lv: (lv[0], -lv[1]))


def _norm_levels(levels, tiles_per_ipu: int):
    """(step_block, effective tile_block, stored tile_block): tile_block 0 means a whole IPU."""
    return [(sb, tb if tb > 0 else tiles_per_ipu, tb) for sb, tb in levels]


def _row_edges(t0: int, t1: int, rows: int, align: int = 1, tpi: int | None = None) -> np.ndarray:
    """Tile edges splitting [t0, t1) into ~rows rows of equal (aligned) size; rows restart at each
    IPU boundary so none straddles two IPUs."""
    n = t1 - t0
    per = max(align, int(np.ceil(n / max(rows, 1) / align)) * align)
    cuts = [t0] + (list(range((t0 // tpi + 1) * tpi, t1, tpi)) if tpi else []) + [t1]
    edges: list[int] = []
    for a, b in zip(cuts[:-1], cuts[1:], strict=True):
        edges.extend(range(a, b, per))
    edges.append(t1)
    return np.asarray(edges, dtype=np.int64)


def _columns_from_steps(sb_start: np.ndarray, sb_end: np.ndarray, busy_sum: np.ndarray,
                        edges: np.ndarray):
    """Resample per-block busy cycles (blocks, rows) onto the pixel columns given by ``edges``.

    Busy cycles are spread uniformly over each block's span [start_k, start_k+1); returns the
    busy fraction (rows, cols) and the per-column block ranges used for min/max/mean.
    The per-block inputs are (blocks, rows); the output is gathered row by row from the small
    (rows, blocks) rate table, so it is written once, already in image order.
    """
    nb, rows = busy_sum.shape
    bounds = np.concatenate([sb_start, [sb_end[-1]]]).astype(np.float64)
    bounds = np.maximum.accumulate(bounds)
    span = np.maximum(np.diff(bounds), 1.0)
    pos = np.clip(np.searchsorted(bounds, edges, side="right") - 1, 0, nb - 1)
    width = np.maximum(np.diff(edges), 1e-9)
    # a column inside one block gets that block's rate (busy / span): one gather of small rows
    rate_t = np.ascontiguousarray((busy_sum / span[:, None]).T, dtype=np.float32)   # (rows, blocks)
    util = rate_t[:, pos[:-1]]                                                        # (rows, cols)
    # columns that cross block boundaries (at most one per block): exact piecewise-linear integral
    cross = np.flatnonzero((pos[1:] != pos[:-1]) | (edges[1:] > bounds[-1]) | (edges[:-1] < bounds[0]))
    if len(cross):
        # util * width = the rest of block p0 + the blocks strictly between + the start of block p1
        p0, p1 = pos[cross], pos[cross + 1]
        f0 = np.clip((edges[cross] - bounds[p0]) / span[p0], 0.0, 1.0)
        f1 = np.clip((edges[cross + 1] - bounds[p1]) / span[p1], 0.0, 1.0)
        same = p1 == p0                      # both edges clipped into one block (ends of the run)
        whole = np.where(same, f1 - f0, 1.0 - f0)[:, None] * busy_sum[p0]
        whole += np.where(same, 0.0, f1)[:, None] * busy_sum[p1]
        far = np.flatnonzero(p1 - p0 > 1)    # columns spanning whole blocks (zoomed far out)
        if len(far):
            cum = np.empty((nb + 1, rows), dtype=np.float64)
            cum[0] = 0
            np.cumsum(busy_sum, axis=0, out=cum[1:])
            whole[far] += cum[p1[far]] - cum[p0[far] + 1]
        whole /= width[cross, None]
        util[:, cross] = whole.T
    # blocks touching each column: [lo, hi] inclusive
    sb_end = np.maximum.accumulate(sb_end)
    lo = np.clip(np.searchsorted(sb_end, edges[:-1], side="right"), 0, nb - 1)
    hi = np.clip(np.searchsorted(sb_start, edges[1:], side="left") - 1, 0, nb - 1)
    hi = np.maximum(hi, lo)
    empty = (sb_end[lo] <= edges[:-1]) | (sb_start[lo] >= edges[1:])
    util[:, empty] = np.nan
    centre = np.clip(np.searchsorted(sb_start, (edges[:-1] + edges[1:]) / 2, side="right") - 1, 0, nb - 1)
    return util, (lo, hi, centre, empty)


def tile_raster(profile, index: StepIndex, x0: float, x1: float, cols: int,
                t0: int, t1: int, rows: int, max_cells: int = MAX_WINDOW_CELLS) -> TileRaster:
    """Busy raster for cycles [x0, x1) in ``cols`` columns and global tiles [t0, t1) in <= ``rows`` rows."""
    cols = max(1, int(cols))
    edges = np.linspace(x0, x1, cols + 1)
    i0, i1 = index.visible(x0, x1)
    tpi = int(profile.target.tiles_per_ipu)
    t0, t1 = max(0, int(t0)), min(int(profile.target.num_tiles), int(t1))
    nsteps = i1 - i0
    if nsteps <= 0 or t1 <= t0:
        return TileRaster(np.full((1, cols), np.nan, dtype=np.float32), edges,
                          np.array([t0, max(t1, t0 + 1)]), "empty")
    tiles_per_row = max(1, (t1 - t0) // max(rows, 1))
    levels = list(getattr(profile.step_tiles, "levels", []) or [])
    if nsteps * (t1 - t0) <= max_cells or not levels:
        return _raster_exact(profile, index, i0, i1, t0, t1, rows, edges, tpi)
    norm = {(sb, eff): tb for sb, eff, tb in _norm_levels(levels, tpi)}
    sb, eff = choose_level(list(norm), nsteps, cols, tiles_per_row)
    tb = norm[(sb, eff)]
    return _raster_summary(profile, index, i0, i1, t0, t1, rows, edges, tpi, sb, tb)


def _raster_exact(profile, index, i0, i1, t0, t1, rows, edges, tpi) -> TileRaster:
    tiles = np.arange(t0, t1)
    cyc = np.asarray(profile.step_tiles.cycles(i0, i1, tiles=tiles), dtype=np.float32)
    part = index.participates(np.arange(i0, i1), tiles // tpi)
    redges = _row_edges(t0, t1, rows, 1, tpi)
    idx = redges[:-1] - t0
    counts = np.diff(redges).astype(np.float32)
    allp = bool(part.all())
    busy = cyc if allp else np.where(part, cyc, 0)
    # per-tile mean of each row: reduce contiguous tile rows of the transposed window (reduceat
    # along the last axis with short segments is slow)
    bt = np.ascontiguousarray(busy.T)                                          # (tiles, steps)
    mean = np.ascontiguousarray((np.add.reduceat(bt, idx, axis=0) / counts[:, None]).T)  # (steps, rows)

    def minmax():  # only when asked (hover, tests): not part of a frame's cost
        if allp:
            return np.minimum.reduceat(cyc, idx, axis=1), np.maximum.reduceat(cyc, idx, axis=1)
        return (np.minimum.reduceat(np.where(part, cyc, np.inf), idx, axis=1),
                np.maximum.reduceat(np.where(part, cyc, -np.inf), idx, axis=1))

    util, (lo, hi, centre, empty) = _columns_from_steps(index.start[i0:i1], index.end[i0:i1], mean, edges)
    return TileRaster(util, edges, redges, "window", (1, 1), (i0, i1),
                      blocks=(minmax, mean, lo, hi, centre, empty))


SUMMARY_CACHE_BYTES = 96 * 2**20   # whole summary levels kept in memory when at most this big


def cached_summary(profile, index: StepIndex, sb: int, tb: int, a: int, b: int) -> dict:
    try:
        return _cached_summary(profile, index, sb, tb, a, b)
    except (TypeError, ValueError, IndexError, KeyError, AttributeError) as e:
        # a summary dataset of the wrong shape or type (a null-shaped tile_edges is h5py's Empty)
        raise ProfileError(getattr(profile, "path", "profile"),
                           f"summaries/s{sb}_t{tb} (steps {a}..{b}): unreadable step x tile summary: "
                           f"{type(e).__name__}: {str(e)[:200]}") from None


def _cached_summary(profile, index: StepIndex, sb: int, tb: int, a: int, b: int) -> dict:
    """``profile.step_tiles.summary(sb, tb, a, b)`` as float32 arrays; a whole level is read once
    and kept (on ``index``) when it is small (<= SUMMARY_CACHE_BYTES for min+mean+max), so pans
    and zooms over the overview cost no file reads.  Larger levels are read by window."""
    cache = index.__dict__.setdefault("_summary_cache", {})
    key = (sb, tb)
    if key not in cache:
        n_sb = -(-index.n // sb)
        n_tb = len(profile.step_tiles.tile_edges(sb, tb)) if hasattr(profile.step_tiles, "tile_edges") else 0
        if n_tb and 12 * n_sb * n_tb <= SUMMARY_CACHE_BYTES:
            full = profile.step_tiles.summary(sb, tb)
            cache[key] = {k: np.asarray(full[k], dtype=np.float32) for k in ("min", "mean", "max")}
            cache[key]["tile_edges"] = np.asarray(full["tile_edges"], dtype=np.int64)
        else:
            cache[key] = None
    full = cache[key]
    if full is None:
        part = profile.step_tiles.summary(sb, tb, start=a, stop=b)
        out = {k: np.asarray(part[k], dtype=np.float32) for k in ("min", "mean", "max")}
        out["tile_edges"] = np.asarray(part["tile_edges"], dtype=np.int64)
        return out
    ba, bb = a // sb, -(-b // sb)
    out = {k: full[k][ba:bb] for k in ("min", "mean", "max")}
    out["tile_edges"] = full["tile_edges"]
    out.update(_full=full, _ba=ba, _bb=bb)
    return out


def _raster_summary(profile, index, i0, i1, t0, t1, rows, edges, tpi, sb, tb) -> TileRaster:
    a = (i0 // sb) * sb
    b = min(index.n, -(-i1 // sb) * sb)
    summ = cached_summary(profile, index, sb, tb, a, b)
    all_t0 = np.asarray(summ["tile_edges"], dtype=np.int64)
    all_t1 = np.append(all_t0[1:], int(profile.target.num_tiles))
    all_t1 = np.minimum(all_t1, (all_t0 // tpi + 1) * tpi)
    keep = np.flatnonzero((all_t1 > t0) & (all_t0 < t1))
    k0, k1 = int(keep[0]), int(keep[-1]) + 1                 # contiguous tile blocks in view
    smean = summ["mean"][:, k0:k1]
    blk_t0, blk_t1 = all_t0[k0:k1], all_t1[k0:k1]
    nblocks = smean.shape[0]
    blk_first = a + np.arange(nblocks) * sb
    blk_last = np.minimum(blk_first + sb, b) - 1
    sb_start = index.start[blk_first]
    sb_end = index.cummax_end[blk_last]
    nsteps_blk = (blk_last - blk_first + 1).astype(np.float32)
    # rows of whole tile blocks, restarting at each IPU boundary
    nb = len(blk_t0)
    per = max(1, int(np.ceil(nb / max(rows, 1))))
    ipu_of = blk_t0 // tpi
    cut = set(range(0, nb, per)) | set((np.flatnonzero(np.diff(ipu_of) != 0) + 1).tolist())
    starts = np.asarray(sorted(cut), dtype=np.int64)
    redges = np.concatenate([blk_t0[starts], [blk_t1[-1]]])
    if per == 1 and len(starts) == nb:
        mean_rows = smean

        def minmax():
            return summ["min"][:, k0:k1], summ["max"][:, k0:k1]
    else:
        # weighted mean over each row's tile blocks, computed for the whole cached level once per
        # row layout (pans at one zoom reuse it) via a cumulative sum (reduceat along the last
        # axis with short segments is slow)
        w = (blk_t1 - blk_t0).astype(np.float32)
        ends = np.append(starts[1:], nb)
        wsum = np.add.reduceat(w, starts)
        full = summ.get("_full")
        rkey = (sb, tb, k0, k1, tuple(starts.tolist()))
        grouped = index.__dict__.setdefault("_grouped_cache", {})
        if full is not None and rkey in grouped:
            mean_rows = grouped[rkey][summ["_ba"]:summ["_bb"]]
        else:
            src = full["mean"][:, k0:k1] if full is not None else smean
            cs = np.zeros((src.shape[0], nb + 1), dtype=np.float64)
            np.cumsum(src * w[None, :], axis=1, out=cs[:, 1:])
            rows_all = ((cs[:, ends] - cs[:, starts]) / wsum[None, :]).astype(np.float32)
            if full is not None:
                grouped.clear()  # one row layout kept: memory stays (level blocks x rows)
                grouped[rkey] = rows_all
                mean_rows = rows_all[summ["_ba"]:summ["_bb"]]
            else:
                mean_rows = rows_all

        def minmax():
            return (np.minimum.reduceat(summ["min"][:, k0:k1], starts, axis=1),
                    np.maximum.reduceat(summ["max"][:, k0:k1], starts, axis=1))
    busy_sum = mean_rows * nsteps_blk[:, None]              # busy cycles per tile over each block
    cols = len(edges) - 1
    if sb > 1 and 0 < b - a <= STEP_SPREAD_PER_COL * cols:
        # Blocks wider than a few pixels: spread each block's busy cycles over its steps in
        # proportion to each step's mean busy over all tiles (exact, from the steps table), so
        # syncs and exchanges show where they happen in time.  Each row's total over a block stays
        # exactly the summary's; min / max stay the block's (they still bracket every cell).
        blk = (np.arange(a, b) - a) // sb
        bm = index.busy_mean[a:b]
        tot = np.bincount(blk, weights=bm, minlength=nblocks)
        wgt = np.where(tot[blk] > 0, bm / np.where(tot[blk] > 0, tot[blk], 1.0), 1.0 / nsteps_blk[blk])
        step_busy = (busy_sum[blk] * wgt[:, None].astype(np.float32)).astype(np.float32)
        util, (lo, hi, centre, empty) = _columns_from_steps(index.start[a:b], index.end[a:b], step_busy, edges)

        def minmax_steps():
            mn, mx = minmax()
            return mn[blk], mx[blk]

        return TileRaster(util, edges, redges, f"summary({sb}x{tb})+steps", (sb, tb), (a, b),
                          blocks=(minmax_steps, step_busy, lo, hi, centre, empty))
    util, (lo, hi, centre, empty) = _columns_from_steps(sb_start, sb_end, busy_sum, edges)
    return TileRaster(util, edges, redges, f"summary({sb}x{tb})", (sb, tb), (a, b),
                      blocks=(minmax, mean_rows, lo, hi, centre, empty))


# ---------------------------------------------------------------- step lane / per-step chart

@dataclass
class StepBins:
    """Per-step (zoomed in) or per-bucket (zoomed out) cycles by kind and tile imbalance.

    ``per_step_cycles`` is what the chart stacks: a step's own cycles zoomed in, and the
    bucket's cycles of each kind divided by the steps starting in it zoomed out (mean cycles
    per step, so both zoom levels share the unit "cycles per step").
    """

    left: np.ndarray        # (n,) cycle where each bar starts
    right: np.ndarray       # (n,) cycle where it ends
    cycles: np.ndarray      # (N_KINDS, n) cycles of each kind inside the bar's span
    per_step_cycles: np.ndarray  # (N_KINDS, n)
    imbalance: np.ndarray   # (n,) max / mean tile busy (compute steps; nan where none)
    per_step: bool
    steps: np.ndarray       # (n,) step index when per_step, else first step of the bucket


def step_bins(index: StepIndex, x0: float, x1: float, cols: int, min_px: float = 3.0) -> StepBins:
    """Bars for the per-step chart: one per visible step if each gets >= ``min_px`` pixels on
    average, else one per bucket of ``min_px`` pixels."""
    i0, i1 = index.visible(x0, x1)
    n = i1 - i0
    if n and n * min_px <= cols:
        ii = np.arange(i0, i1)
        cyc = np.zeros((N_KINDS, n))
        cyc[index.kind[ii], np.arange(n)] = index.dur[ii]
        with np.errstate(all="ignore"):
            imb = np.where((index.kind[ii] == COMPUTE) & (index.busy_mean_own[ii] > 0),
                           index.busy_max[ii] / index.busy_mean_own[ii], np.nan)
        return StepBins(index.start[ii].astype(float), index.end[ii].astype(float), cyc, cyc, imb, True, ii)
    nb = max(1, int(cols / min_px))
    edges = np.linspace(x0, x1, nb + 1)
    cyc = index.kind_cycles(edges)
    # imbalance per bucket: max over the compute steps starting in it (vectorised via reduceat)
    imb = np.full(nb, np.nan)
    if n:
        ii = np.arange(i0, i1)
        with np.errstate(all="ignore"):
            r = np.where((index.kind[ii] == COMPUTE) & (index.busy_mean_own[ii] > 0),
                         index.busy_max[ii] / index.busy_mean_own[ii], -np.inf)
        b = np.clip(np.searchsorted(edges, index.start[ii], side="right") - 1, 0, nb - 1)
        first = np.searchsorted(b, np.arange(nb), side="left")
        has = first < np.searchsorted(b, np.arange(nb), side="right")
        if has.any():
            m = np.maximum.reduceat(r, np.minimum(first[has], n - 1))
            imb[has] = np.where(np.isfinite(m), m, np.nan)
    first_step = np.searchsorted(index.start, edges, side="left")
    nst = np.maximum(np.diff(first_step), 1)
    return StepBins(edges[:-1], edges[1:], cyc, cyc / nst[None, :], imb, False, first_step[:-1])


# ---------------------------------------------------------------- search / details

def op_names(profile) -> dict[int, str]:
    ops = stored_table(profile, "ops")
    return dict(zip(ops["op_id"].astype(int).tolist(), ops["name"].astype(str).tolist(), strict=True))


def search_ops(profile, query: str) -> np.ndarray:
    """op_ids whose name contains ``query`` (case-insensitive); all ops for an empty query -> none."""
    q = (query or "").strip().lower()
    if not q:
        return np.zeros(0, np.int64)
    ops = stored_table(profile, "ops")
    m = ops["name"].astype(str).str.lower().str.contains(q, regex=False).to_numpy()
    return np.sort(ops["op_id"].to_numpy(np.int64)[m])


def match_steps(index: StepIndex, op_ids) -> np.ndarray:
    """Sorted step indices owned by any of ``op_ids``."""
    op_ids = np.asarray(op_ids, dtype=np.int64)
    if len(op_ids) == 0:
        return np.zeros(0, np.int64)
    return np.flatnonzero(np.isin(index.op_id, op_ids)).astype(np.int64)


def next_match(matches: np.ndarray, current: int, forward: bool = True) -> int:
    """The match after (before) step ``current``, wrapping around; -1 when there is none."""
    if len(matches) == 0:
        return -1
    if forward:
        j = np.searchsorted(matches, current, side="right")
        return int(matches[j % len(matches)])
    j = np.searchsorted(matches, current, side="left") - 1
    return int(matches[j % len(matches)])


def step_details(profile, index: StepIndex, i: int, names: dict[int, str] | None = None) -> dict:
    names = names if names is not None else op_names(profile)
    op = int(index.op_id[i])
    return {
        "step": int(index.step[i]),
        "kind": STEP_KINDS[int(index.kind[i])],
        "op_id": op,
        "op": names.get(op, "(none)") if op >= 0 else "(none)",
        "ipu": "all" if index.ipu[i] < 0 else int(index.ipu[i]),
        "start_cycle": int(index.start[i]),
        "end_cycle": int(index.end[i]),
        "cycles": int(index.dur[i]),
        "tiles_active": int(index.tiles_active[i]),
        # the tiles it runs on: its IPU's, or every tile of the replica for a step on all IPUs
        "tiles_of_step": int(profile.target.tiles_per_ipu) if index.ipu[i] >= 0 else int(profile.target.num_tiles),
        "busy_max": int(index.busy_max[i]),
        "busy_mean": float(index.busy_mean_own[i]),  # over the tiles the step runs on
        "bytes_in": int(index.bytes_in[i]),
        "bytes_out": int(index.bytes_out[i]),
    }


# ---------------------------------------------------------------- range summary

@dataclass
class RangeSummary:
    step_range: tuple[int, int]
    cycle_range: tuple[int, int]
    cycles_by_kind: dict[str, int]      # summed step durations per kind
    ops: pd.DataFrame                   # op_id, name, steps, cycles (sorted by cycles desc)
    busiest: pd.DataFrame               # tile (or first tile of block), tiles, busy (per tile)
    imbalance: float                    # max / mean of per-tile busy over the range
    exact: bool                         # False: busiest/imbalance from tile-block summaries
    tile_block: int = 1


def range_summary(profile, index: StepIndex, s0: int, s1: int, top: int = 10,
                  max_cells: int | None = MAX_RANGE_CELLS, names: dict[int, str] | None = None,
                  progress=None) -> RangeSummary:
    """Summary of steps [s0, s1): cycles by kind, ops, busiest tiles and imbalance (max / mean busy).

    Busiest tiles and imbalance are exact (the step x tile window read in chunks) when the range has
    at most ``max_cells`` cells (None: always), else per tile block from the stored summaries
    (``exact`` False).  ``progress(fraction)`` is called after each chunk (it may raise to cancel).
    """
    s0, s1 = max(0, int(s0)), min(index.n, int(s1))
    s1 = max(s0, s1)
    sl = slice(s0, s1)
    by_kind = {k: int(index.dur[sl][index.kind[sl] == c].sum()) for c, k in enumerate(STEP_KINDS)}
    names = names if names is not None else op_names(profile)
    df = pd.DataFrame({"op_id": index.op_id[sl], "cycles": index.dur[sl]})
    df = df[df.op_id >= 0]
    ops = df.groupby("op_id").agg(steps=("cycles", "size"), cycles=("cycles", "sum")).reset_index()
    ops.insert(1, "name", [names.get(int(o), "?") for o in ops.op_id])
    ops = ops.sort_values(["cycles", "op_id"], ascending=[False, True], kind="stable").reset_index(drop=True)
    nt = int(profile.target.num_tiles)
    cyc0 = int(index.start[s0]) if s1 > s0 else 0
    cyc1 = int(index.cummax_end[s1 - 1]) if s1 > s0 else 0
    if s1 <= s0:
        return RangeSummary((s0, s1), (cyc0, cyc1), by_kind, ops,
                            pd.DataFrame({"tile": [], "tiles": [], "busy": []}), float("nan"), True)
    levels = list(getattr(profile.step_tiles, "levels", []) or [])
    if max_cells is None or (s1 - s0) * nt <= max_cells or not levels:
        per_tile = np.zeros(nt)
        chunk = max(1, _CHUNK_CELLS // max(nt, 1))
        for a in range(s0, s1, chunk):
            b = min(s1, a + chunk)
            per_tile += np.asarray(profile.step_tiles.cycles(a, b), dtype=np.float64).sum(axis=0)
            if progress is not None:
                progress((b - s0) / (s1 - s0))
        first, width, exact, tb = np.arange(nt), np.ones(nt, np.int64), True, 1
    else:  # per tile block from the finest-tile stored summary
        tpi = int(profile.target.tiles_per_ipu)
        sb, tb, stored = min(_norm_levels(levels, tpi), key=lambda lv: (lv[1], lv[0]))
        summ = profile.step_tiles.summary(sb, stored, start=s0, stop=s1)
        mean = np.asarray(summ["mean"], dtype=np.float64)
        a = int(summ["step_edges"][0]) if len(summ["step_edges"]) else s0
        firsts = a + np.arange(mean.shape[0]) * sb
        nblk = np.minimum(firsts + sb, index.n) - firsts
        per_tile = (mean * nblk[:, None]).sum(axis=0)
        first = np.asarray(summ["tile_edges"], dtype=np.int64)
        nxt = np.minimum(np.append(first[1:], nt), (first // tpi + 1) * tpi)
        width = nxt - first
        exact = False
    order = np.argsort(-per_tile, kind="stable")[:top]
    busiest = pd.DataFrame({"tile": first[order], "tiles": width[order], "busy": per_tile[order]})
    # the mean over the tiles the range's steps run on (the IPUs taking part), as each step's own imbalance
    tpi = int(profile.target.tiles_per_ipu)
    ipus = np.unique(index.ipu[sl])
    on = np.ones(len(first), bool) if (ipus < 0).any() else np.isin(first // max(tpi, 1), ipus)
    w_on = width[on].astype(np.float64)  # per_tile is per tile (a block's: its tiles' mean)
    mean = float((per_tile[on] * w_on).sum() / w_on.sum()) if w_on.sum() else 0.0
    imb = float(per_tile.max() / mean) if mean > 0 else float("nan")
    return RangeSummary((s0, s1), (cyc0, cyc1), by_kind, ops, busiest, imb, exact, tb)
