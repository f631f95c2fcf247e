"""Per-tile arrays of an open profile: the step x tile window (``Profile.step_tiles``), the memory array
(``Profile.memory``), the liveness array (``Profile.liveness``), and the row reads behind them.

Format 3 stores only the rows (steps) of a step x tile array that hold a non-zero value, marked in
``arrays/step_tile_stored``; format 4 stores a row of one IPU's tiles per (step, IPU) holding a non-zero value,
named in ``arrays/<array>.rows``.  :func:`read_rows` reads the stored rows a step range (and tile subset) holds and
puts them in place in an all-zero result, so every caller sees the dense (steps, tiles) array of older files.
"""

from __future__ import annotations

import threading
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from popvision_lite import api_args
from popvision_lite.profile import schema
from popvision_lite.profile.public import CATEGORY_COLUMNS

# The open profile these read through (reader.Profile, which imports this module) is typed ``Profile = Any``
# here, so the two modules import in one direction only.
Profile = Any

STEP_TILE_ARRAYS = ("step_tile_cycles", "step_tile_bytes_in", "step_tile_bytes_out")
MAX_TILE_BYTES = 2 ** 40  # a memory array entry above this (1 TiB per tile) is corrupt, not an OOM


@dataclass
class StepTileWindow:
    """Per-tile data of a window of steps; each array is (n_steps, n_tiles) uint32, as stored (``to_frame()``:
    int64 columns)."""

    cycles: np.ndarray
    bytes_in: np.ndarray
    bytes_out: np.ndarray
    start: int = 0
    tiles: np.ndarray | None = None  # global tile ids of the columns (None = all tiles)

    def __iter__(self):
        """Unpacks like a tuple: ``cycles, bytes_in, bytes_out = p.step_tiles.window(a, b)``."""
        return iter((self.cycles, self.bytes_in, self.bytes_out))

    def __len__(self) -> int:
        return 3

    def to_frame(self) -> pd.DataFrame:
        """The window as a long table, one row per (step, tile) (index: row numbers): ``step``, ``tile``, and
        int64 ``cycles`` (busy), ``bytes_in``, ``bytes_out`` (the arrays are the stored uint32 counts; these
        subtract without wrapping).  Steps and tiles are global ids: rows join ``Profile.steps`` and
        ``Profile.tiles`` on their index."""
        n_steps, n_tiles = self.cycles.shape
        tiles = np.arange(n_tiles, dtype=np.int64) if self.tiles is None else np.asarray(self.tiles, np.int64)
        return pd.DataFrame({
            "step": np.repeat(np.arange(self.start, self.start + n_steps, dtype=np.int64), n_tiles),
            "tile": np.tile(tiles, n_steps),
            "cycles": self.cycles.ravel().astype(np.int64),
            "bytes_in": self.bytes_in.ravel().astype(np.int64),
            "bytes_out": self.bytes_out.ravel().astype(np.int64),
        })

    def frame(self) -> pd.DataFrame:
        """Deprecated name of :meth:`to_frame` (pandas' name), kept for one release."""
        warnings.warn("StepTileWindow.frame() is now to_frame(); frame() goes in the next release",
                      DeprecationWarning, stacklevel=2)
        return self.to_frame()


class _Memory:
    categories = schema.MEMORY_CATEGORIES  # Poplar's names, in PopVision's order
    category_columns = CATEGORY_COLUMNS    # their columns in by_tile(): variable_bytes, vertex_code_bytes ...

    def __init__(self, profile: Profile):
        self._p = profile
        self._arr: np.ndarray | None = None

    def array(self) -> np.ndarray:
        """(tiles, categories, 2) int64 bytes: [..., 0] always-live, [..., 1] not-always-live."""
        if self._arr is None:
            a = self._p._read_array("memory")
            if a.size and (a.min() < 0 or a.max() > MAX_TILE_BYTES):
                bad = np.flatnonzero(((a < 0) | (a > MAX_TILE_BYTES)).any(axis=(1, 2)))
                raise self._p._err(f"array 'memory' has byte counts outside 0..{MAX_TILE_BYTES} "
                                   f"(tile {int(bad[0])}{' and others' if len(bad) > 1 else ''}); the file is corrupt")
            self._arr = a
        return self._arr

    def by_tile(self) -> pd.DataFrame:
        """One row per tile (index = ``tile``): bytes per Poplar memory category (``variable_bytes``,
        ``constant_bytes``, ``vertex_code_bytes`` ...: Poplar's category names in snake_case), and over them
        ``always_live_bytes``, ``not_always_live_bytes`` (peak), ``total_bytes``, the tile's SRAM
        ``capacity_bytes`` and ``over_capacity``."""
        return self._p.table("memory_by_tile")

    def _stored_by_tile(self) -> pd.DataFrame:
        """:meth:`by_tile` in the stored form the views read (a RangeIndex equal to the ``tile`` column;
        Poplar's category names; ``always_live``, ``not_always_live``, ``total``, ``capacity``)."""
        a = self.array()
        per_cat = a.sum(axis=2)
        df = pd.DataFrame(per_cat, columns=list(self.categories))
        df.insert(0, "tile", np.arange(len(df), dtype=np.int64))
        df["always_live"] = a[:, :, 0].sum(axis=1)
        df["not_always_live"] = a[:, :, 1].sum(axis=1)
        df["total"] = per_cat.sum(axis=1)
        df["capacity"] = np.int64(self._p.target.sram_bytes_per_tile)
        df["over_capacity"] = df["total"] > df["capacity"]
        return df


class _Liveness:
    def __init__(self, profile: Profile):
        self._p = profile

    @property
    def num_lsteps(self) -> int:
        return self._p._shape("liveness_tile_bytes")[0]

    def tile_bytes(self, lstart: int = 0, lstop: int | None = None, tiles=None) -> np.ndarray:
        """(lsteps, tiles) not-always-live bytes, uint32."""
        n = self.num_lsteps
        lstart, lstop = _clip_range(api_args.step_bound(lstart, "lstart"), api_args.step_bound(lstop, "lstop"), n)
        return self._p._read_rows("liveness_tile_bytes", lstart, lstop,
                                  api_args.tile_ids(tiles, self._p.target.num_tiles))


def _clip_range(start, stop, n):
    start = 0 if start is None else int(start)
    stop = n if stop is None else int(stop)
    start = max(0, min(start, n))
    stop = max(start, min(stop, n))
    return start, stop


class _StepTiles:
    def __init__(self, profile: Profile):
        self._p = profile
        self._levels: list[tuple[int, int]] | None = None

    @property
    def shape(self) -> tuple[int, int]:
        return self._p._shape("step_tile_cycles")

    def window(self, start: int, stop: int, tiles=None) -> StepTileWindow:
        """Per-tile data of steps ``start`` .. ``stop - 1`` (clipped to the run) for ``tiles`` (global tile ids: a
        list or array, a ``range`` or ``slice``, one id, or a boolean mask over the tiles; None = all): a :class:`StepTileWindow` of three (steps, tiles) arrays, ``cycles`` (busy),
        ``bytes_in`` and ``bytes_out``, that unpacks like a tuple.  The arrays hold the stored uint32 counts
        (half the memory of int64 for a long window): ``.astype(np.int64)`` before subtracting them;
        ``.to_frame()`` gives a labelled long table of int64 columns."""
        n = self.shape[0]
        start, stop = _clip_range(api_args.step_bound(start, "start"), api_args.step_bound(stop, "stop"), n)
        tl = api_args.tile_ids(tiles, self._p.target.num_tiles)
        return StepTileWindow(
            cycles=self._p._read_rows("step_tile_cycles", start, stop, tl),
            bytes_in=self._p._read_rows("step_tile_bytes_in", start, stop, tl),
            bytes_out=self._p._read_rows("step_tile_bytes_out", start, stop, tl),
            start=start,
            tiles=tl,
        )

    def cycles(self, start: int, stop: int, tiles=None) -> np.ndarray:
        """Only the busy cycles of a window (cheaper than :meth:`window`)."""
        n = self.shape[0]
        start, stop = _clip_range(api_args.step_bound(start, "start"), api_args.step_bound(stop, "stop"), n)
        return self._p._read_rows("step_tile_cycles", start, stop, api_args.tile_ids(tiles, self._p.target.num_tiles))

    @property
    def levels(self) -> list[tuple[int, int]]:
        """Stored summary levels (step_block, tile_block), finest first.

        tile_block 0 means one block per IPU.  Tile blocks restart at each IPU boundary,
        so the last block of an IPU may be shorter than tile_block.
        """
        if self._levels is None:
            self._levels = self._p._summary_levels()
        return list(self._levels)

    def pick_level(self, n_steps: int | None = None, max_step_blocks: int = 4000) -> tuple[int, int]:
        """Finest stored level with at most ``max_step_blocks`` step blocks over ``n_steps``."""
        n = self.shape[0] if n_steps is None else n_steps
        for sb, tb in self.levels:
            if -(-n // sb) <= max_step_blocks:
                return sb, tb
        return self.levels[-1]

    def tile_edges(self, step_block: int, tile_block: int) -> np.ndarray:
        """Global tile index where each tile block of a level starts."""
        g = self._p._summary_group(step_block, tile_block)
        return self._p._guard(lambda: self._p._tile_edges(g, f"summaries/s{step_block}_t{tile_block}/tile_edges"),
                              f"summary {step_block}x{tile_block}")

    def summary(self, step_block: int, tile_block: int, start: int = 0, stop: int | None = None) -> dict:
        """min/mean/max busy cycles over blocks, arrays (n_step_blocks, n_tile_blocks).

        ``start``/``stop`` are step indices; the blocks returned are those overlapping the range.
        Also returns ``step_edges`` (first step of each returned block) and ``tile_edges``.
        """
        n = self.shape[0]
        start, stop = _clip_range(api_args.step_bound(start, "start"), api_args.step_bound(stop, "stop"), n)
        a = start // step_block
        b = -(-stop // step_block)
        what = f"summary {step_block}x{tile_block}"

        def read():
            g = self._p._summary_group(step_block, tile_block)
            edges = self._p._tile_edges(g, f"summaries/s{step_block}_t{tile_block}/tile_edges")
            want = (-(-n // step_block), len(edges))
            out = {}
            for k in ("min", "mean", "max"):
                ds = self._p._safe.get(f"summaries/s{step_block}_t{tile_block}/{k}")
                if tuple(ds.shape) != want:
                    raise self._p._err(f"{what}: '{k}' has shape {tuple(ds.shape)}, expected {want} "
                                       f"(step blocks x tile blocks)")
                v = self._p._chunk_source(f"summaries/s{step_block}_t{tile_block}/{k}", [(a, b), (0, want[1])])[a:b]
                if v.dtype.kind not in "iuf":
                    raise self._p._err(f"{what}: '{k}' has dtype {v.dtype}, expected numbers")
                if v.size and (not np.isfinite(v).all() or v.min() < 0):
                    raise self._p._err(f"{what}: '{k}' has NaN, infinite or negative cycles; the file is corrupt")
                out[k] = v
            out["tile_edges"] = edges
            return out

        out = self._p._guard(read, what)
        out["step_edges"] = np.arange(a, b, dtype=np.int64) * step_block
        out["step_block"] = step_block
        out["tile_block"] = tile_block
        return out




# A window over a tile subset reads each IPU's span of columns, then picks the subset's columns.  The span
# (megabytes for a long window) goes into a buffer kept per thread, grown to the largest span read (at most
# _SPAN_BUFFER_BYTES; larger spans get their own array).  A fresh array each time would make glibc map and
# unmap it (and HDF5's chunk buffers) again and again: those page faults are half the CPU time of a
# one-off 600-step window.
_SPAN_BUFFER_BYTES = 16 << 20
_span_buffers = threading.local()


def _read_span(ds, start: int, stop: int, lo: int, hi: int) -> np.ndarray:
    """``ds[start:stop, lo:hi]``; a view of this thread's span buffer when it fits (valid until the next
    call on this thread)."""
    shape = (stop - start, hi - lo, *ds.shape[2:])
    nbytes = int(np.prod(shape)) * ds.dtype.itemsize
    if nbytes > _SPAN_BUFFER_BYTES:
        return ds[start:stop, lo:hi]
    buf = getattr(_span_buffers, "buf", None)
    if buf is None or buf.nbytes < nbytes:  # grows to the largest span read on this thread
        buf = _span_buffers.buf = np.empty(nbytes, np.uint8)
    out = buf[:nbytes].view(ds.dtype).reshape(shape)
    ds.read_direct(out, np.s_[start:stop, lo:hi])
    return out


def read_rows(p: Profile, name: str, start: int, stop: int, tiles=None) -> np.ndarray:
    """Rows ``start:stop`` (steps, or liveness steps) of array ``name`` for ``tiles`` (global ids; None = all)
    as a dense (rows, tiles) array, from an open profile ``p``."""
    nt = p._shapes[name][1]
    path = f"arrays/{name}"
    tl = None if tiles is None else np.asarray(tiles, dtype=np.int64)

    def read():
        ds = p._safe.get(path)
        if tl is not None and tl.size and (tl.min() < 0 or tl.max() >= nt):
            raise p._err(f"tile index out of range 0..{nt - 1} in read of '{name}'")
        width = nt if tl is None else tl.size
        if stop <= start or width == 0:
            return np.zeros((max(stop - start, 0), width), dtype=ds.dtype)
        keys = p._ipu_rows(name)
        if keys is not None:  # format 4: rows of one IPU's tiles
            return _read_ipu_rows(p, path, keys, start, stop, tl, ds.dtype)
        stored = p._stored_rows(name)
        if stored is None:  # every row stored (older files, liveness)
            return _read_stored(p, ds, path, name, start, stop, tl)
        r0, r1 = (int(x) for x in np.searchsorted(stored, (start, stop)))
        if r1 - r0 == stop - start:  # no row of the range left out
            return _read_stored(p, ds, path, name, r0, r1, tl)
        out = np.zeros((stop - start, width), dtype=ds.dtype)
        if r1 > r0:
            out[stored[r0:r1] - start] = _read_stored(p, ds, path, name, r0, r1, tl)
        return out

    return p._guard(read, f"array '{name}' rows {start}:{stop}")


def _read_stored(p: Profile, ds, path: str, name: str, start: int, stop: int, tl) -> np.ndarray:
    """Stored rows ``start:stop`` of dataset ``ds`` for tiles ``tl`` (None = all; checked in range)."""
    nt = ds.shape[1]
    if tl is None:
        return p._chunk_source(path, [(start, stop), (0, nt)])[start:stop]
    # read each IPU's span separately: chunks never straddle IPUs, so a subset spread over IPUs
    # decompresses only the chunks of the IPUs it touches
    tpi = p.target.tiles_per_ipu if name != "memory" else nt
    out = np.empty((stop - start, tl.size), dtype=ds.dtype)
    ipu_of = tl // tpi
    for ipu in np.unique(ipu_of):
        m = ipu_of == ipu
        sub = tl[m]
        lo, hi = int(sub.min()), int(sub.max()) + 1
        span = _read_span(p._chunk_source(path, [(start, stop), (lo, hi)]), start, stop, lo, hi)
        pos = np.flatnonzero(m)
        if pos[-1] - pos[0] + 1 == len(pos):  # the IPU's tiles are one run of the output's columns
            np.take(span, sub - lo, axis=1, out=out[:, pos[0]:pos[-1] + 1], mode="clip")
        else:
            out[:, m] = span[:, sub - lo]
    return out


def check_ipu_keys(p: Profile, name: str) -> tuple[np.ndarray, np.ndarray]:
    """Format 4: (steps, IPUs) of the stored rows of step x tile array ``name``, read from ``<name>.rows`` and
    checked: steps of the run, IPUs of the target, strictly increasing in (step, IPU) (one row per pair)."""
    rname = schema.rows_of(name)
    path = f"arrays/{rname}"
    keys = np.asarray(p._read_whole(p._safe.get(path), path))
    if keys.ndim != 2 or keys.shape[1:] != (2,) or keys.dtype.kind not in "iu":
        raise p._err(f"array '{rname}' has shape {keys.shape} and dtype {keys.dtype}, expected (rows, 2) int64")
    keys = keys.astype(np.int64, copy=False)
    steps, ipus = keys[:, 0].copy(), keys[:, 1].copy()
    n_steps, n_ipus = p._shapes[name][0], p.target.num_ipus
    for what, col, hi in (("step", steps, n_steps), ("IPU", ipus, n_ipus)):
        bad = np.flatnonzero((col < 0) | (col >= hi))
        if len(bad):
            raise p._err(f"array '{rname}' row {int(bad[0])} names {what} {int(col[bad[0]])}, outside 0..{hi - 1} "
                         f"(the target's {'IPUs' if what == 'IPU' else 'steps'}); the file is corrupt")
    flat = steps * n_ipus + ipus
    bad = np.flatnonzero(np.diff(flat) <= 0)
    if len(bad):
        r = int(bad[0]) + 1
        raise p._err(f"array '{rname}' row {r} (step {int(steps[r])}, IPU {int(ipus[r])}) does not follow row "
                     f"{r - 1} (step {int(steps[r - 1])}, IPU {int(ipus[r - 1])}): rows must be in increasing "
                     f"(step, IPU) order, one per pair; the file is corrupt")
    return steps, ipus


def _read_ipu_rows(p: Profile, path: str, keys, start: int, stop: int, tl, dtype) -> np.ndarray:
    """Format 4: rows ``start:stop`` for tiles ``tl`` (None = all; checked in range) from the stored rows of one
    IPU's tiles each, named by ``keys`` (steps, IPUs).  Only the stored rows of the range are read, and of a tile
    subset only its IPUs' rows and the span of columns its tiles take in an IPU."""
    steps, ipus = keys
    tpi, n_ipus = p.target.tiles_per_ipu, p.target.num_ipus
    n = stop - start
    r0, r1 = (int(x) for x in np.searchsorted(steps, (start, stop)))
    if tl is None:
        out = np.zeros((n, n_ipus * tpi), dtype=dtype)
        if r1 > r0:
            out.reshape(n, n_ipus, tpi)[steps[r0:r1] - start, ipus[r0:r1]] = \
                p._chunk_source(path, [(r0, r1), (0, tpi)])[r0:r1]
        return out
    out = np.zeros((n, tl.size), dtype=dtype)
    if r1 <= r0:
        return out
    ipu_of, col = tl // tpi, tl % tpi
    want = np.zeros(n_ipus, np.bool_)
    want[ipu_of] = True
    hit = np.flatnonzero(want[ipus[r0:r1]])
    if not len(hit):
        return out
    a, b = r0 + int(hit[0]), r0 + int(hit[-1]) + 1  # the stored rows from the first of the subset's IPUs to the last
    lo, hi = int(col.min()), int(col.max()) + 1
    span = _read_span(p._chunk_source(path, [(a, b), (lo, hi)]), a, b, lo, hi)
    s, u = steps[a:b] - start, ipus[a:b]
    for ipu in np.unique(ipu_of):
        m = np.flatnonzero(u == ipu)
        if not len(m):
            continue
        pos = np.flatnonzero(ipu_of == ipu)
        rows = s[m]
        # the IPU's stored rows: a (strided) slice of the span when they are evenly spaced in it (one IPU, or the
        # same IPUs holding data in every step), else a copy
        d = int(m[1] - m[0]) if len(m) > 1 else 1
        even = d > 0 and int(m[-1] - m[0]) == d * (len(m) - 1) and (len(m) < 3 or (np.diff(m) == d).all())
        src = span[m[0]:m[-1] + 1:d] if even else span[m]
        c = col[pos] - lo
        if pos[-1] - pos[0] + 1 != len(pos):  # the IPU's tiles scattered over the output's columns
            out[np.ix_(rows, pos)] = np.take(src, c, axis=1)
        elif rows[-1] - rows[0] + 1 == len(rows):  # a row for each step: taken straight into place
            np.take(src, c, axis=1, out=out[rows[0]:rows[-1] + 1, pos[0]:pos[-1] + 1], mode="clip")
        else:  # the IPU's tiles are one run of the output's columns
            out[rows, pos[0]:pos[-1] + 1] = np.take(src, c, axis=1)
    return out
