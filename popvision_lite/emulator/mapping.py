"""Tile mappings: which flat elements of a tensor live on which tile.

A :class:`Mapping` is three parallel int arrays (``tile``, ``start``, ``stop``) of half-open
intervals over a tensor's flat (row-major) elements, sorted by ``start`` and not overlapping.
Everything here is vectorised numpy; nothing loops over elements.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable

import numpy as np

from popvision_lite.emulator.shared_arrays import share
from popvision_lite.errors import EmulatorError

# interval_index: a lookup table over the queries' span when the span is at most this many times their count
# (and at most _TABLE_MAX_SPAN elements, 256 MiB of int64); otherwise binary searches
_TABLE_SPAN_PER_QUERY = 4
_TABLE_MAX_SPAN = 1 << 25


def interval_index(start: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``np.searchsorted(start, x, side="right") - 1`` for an ascending int array ``start``: the index of
    the last start at or below each of ``x`` (-1 below the first), int64, shaped like ``x``; the same
    integers, found without a binary search per query where that is cheaper.  A binary search into a
    mapping of 10^4-10^6 intervals costs 10-30 ns a query, mostly cache misses, and a copy or a graph
    check asks it for every piece or run:

    * queries in ascending order (a copy's destination runs, most vertices' runs) and at least twice
      as many as the starts: each start is searched among the queries instead (the count of queries
      below it), and a cumulative count over the queries gives every answer (~3 ns a query);
    * queries dense in their span (short runs): a table of the answer at every position of the span,
      built with one ``np.repeat``, is read at the queries;
    * starts evenly spaced (a tensor mapped in equal grains, the commonest large mapping): a division."""
    x = np.asarray(x)
    n = x.size
    m = len(start)
    if n < 1024 or m < 64:
        return np.searchsorted(start, x, side="right") - 1
    if 2 * m <= n:
        flat = x.ravel()
        if np.all(flat[1:] >= flat[:-1]):
            below = np.searchsorted(flat, start, side="left")  # queries below each start
            k = np.bincount(below, minlength=n + 1)[:n]
            np.cumsum(k, out=k)  # in place: one array of the queries' size, as a search returns
            k -= 1
            return k.reshape(x.shape)
    step = _even_step(start) if 8 * n >= m else 0  # (its check reads the starts once)
    if step:
        k = np.subtract(x, int(start[0]), dtype=np.int64)
        if step & (step - 1):
            k //= step
        else:
            k >>= step.bit_length() - 1
        np.clip(k, -1, m - 1, out=k)  # below the first start: -1; past the last: the last interval
        return k
    lo, hi = int(x.min()), int(x.max())
    span = hi - lo + 1
    if span > _TABLE_SPAN_PER_QUERY * n or span > _TABLE_MAX_SPAN:
        if x.ndim == 2 and x.shape[1] >= 4:
            k = _by_row_steps(start, x)
            if k is not None:
                return k
        return np.searchsorted(start, x, side="right") - 1
    k_lo = int(np.searchsorted(start, lo, side="right")) - 1
    k_hi = int(np.searchsorted(start, hi, side="right")) - 1
    # position p of the span holds k_lo + (starts in (lo, lo + p]): each start inside opens a segment
    inside = start[k_lo + 1:k_hi + 1] - lo
    seg = np.diff(np.concatenate(([0], inside, [span])))
    table = np.repeat(np.arange(k_lo, k_hi + 1, dtype=np.int64), seg)
    return table[x - lo] if lo else table[x]


def _by_row_steps(start: np.ndarray, x: np.ndarray) -> np.ndarray | None:
    """interval_index of a 2-D ``x`` (a vertex's runs per row: the rows of a window or block) whose answers step
    evenly along each row (a window's rows in a mapping cut into the same bands of windows: row j's interval is
    the first's plus j times the windows per band).  Columns 0 and 1 are searched, the rest guessed from their
    step and each guess checked against the starts (``start[g] <= x < start[g + 1]``: the definition), those that
    fail searched.  None where the last column's guesses mostly fail (not such a field)."""
    m, (n, r) = len(start), x.shape
    k0 = np.searchsorted(start, x[:, 0], side="right") - 1
    step = np.searchsorted(start, x[:, 1], side="right") - 1 - k0
    last = np.searchsorted(start, x[:, -1], side="right") - 1
    if 2 * int(np.count_nonzero(last == k0 + (r - 1) * step)) < n:
        return None
    g = step[:, None] * np.arange(r, dtype=np.int64)
    g += k0[:, None]
    np.clip(g, 0, m - 1, out=g)
    ok = np.take(start, g) <= x
    nxt = np.minimum(g + 1, m - 1)
    ok &= (np.take(start, nxt) > x) | (g == m - 1)
    if not ok.all():
        bad = ~ok
        g[bad] = np.searchsorted(start, x[bad], side="right") - 1
    return g


def _even_step(start: np.ndarray) -> int:
    """The spacing of ``start`` when its values are ``start[0] + k * step`` (step > 0), else 0."""
    m = len(start)
    step = int(start[1]) - int(start[0])
    if step <= 0 or int(start[-1]) != int(start[0]) + (m - 1) * step:
        return 0
    return step if bool(np.all(np.diff(start) == step)) else 0


class Mapping:
    """Intervals ``[start, stop)`` of flat elements and the tile holding each (read-only int64 arrays, held
    once with any equal arrays of the graph: :mod:`popvision_lite.emulator.shared_arrays`).  A mapping never
    changes once made, so what is derived from it alone (its merged form, a passed check) is kept on it: a
    tensor mapped like another (an elementwise op's output, a gradient like its activation) is not checked and
    merged again."""

    __slots__ = ("tile", "start", "stop", "_derived")

    def __init__(self, tile, start, stop, _fresh: bool = False):
        """``_fresh``: the three arrays were made for this mapping alone (this module's builders), so they are
        held without a copy."""
        tile = np.asarray(tile, dtype=np.int64).ravel()
        start = np.asarray(start, dtype=np.int64).ravel()
        stop = np.asarray(stop, dtype=np.int64).ravel()
        if not (len(tile) == len(start) == len(stop)):
            raise EmulatorError("mapping: tile, start and stop arrays must have equal lengths")
        keep = stop > start
        # (own copies either way: a caller's arrays may change after)
        if not keep.all():
            tile, start, stop = tile[keep], start[keep], stop[keep]
        elif not _fresh:
            tile, start, stop = tile.copy(), start.copy(), stop.copy()
        # by start, stable (already in order, as most mappings are built: nothing to move)
        if len(start) > 1 and np.any(start[1:] < start[:-1]):
            order = np.argsort(start, kind="stable")
            tile, start, stop = tile[order], start[order], stop[order]
        self.tile, self.start, self.stop = share(tile), share(start), share(stop)
        self._derived: dict = {}

    def __len__(self) -> int:
        return len(self.tile)

    def __repr__(self) -> str:
        return f"Mapping({len(self)} intervals, {int(self.num_mapped())} elements)"

    def num_mapped(self) -> int:
        return int((self.stop - self.start).sum())

    def check(self, name: str, size: int, num_tiles: int) -> None:
        """Raise EmulatorError unless the mapping covers ``[0, size)`` exactly once on valid tiles."""
        if ("checked", size, num_tiles) in self._derived:
            return
        if len(self) and (self.tile.min() < 0 or self.tile.max() >= num_tiles):
            bad = int(self.tile[(self.tile < 0) | (self.tile >= num_tiles)][0])
            raise EmulatorError(
                f"tensor '{name}': mapped to tile {bad}, out of range 0..{num_tiles - 1}; "
                f"fix: map it to tiles of the target"
            )
        if len(self) and (self.start[0] < 0 or self.stop[-1] > size):
            raise EmulatorError(
                f"tensor '{name}': mapping covers elements outside 0..{size}; fix: intervals must lie in the tensor"
            )
        if len(self) > 1 and np.any(self.start[1:] < self.stop[:-1]):
            i = int(np.nonzero(self.start[1:] < self.stop[:-1])[0][0])
            raise EmulatorError(
                f"tensor '{name}': mapping intervals overlap at element {int(self.start[i + 1])}; "
                f"fix: each element on exactly one tile"
            )
        mapped = self.num_mapped()
        if mapped != size:
            raise EmulatorError(
                f"tensor '{name}': {size - mapped} of {size} elements are not mapped to any tile; "
                f"fix: g.set_mapping(tensor, mapping.linear(...)) covering every element"
            )
        self._derived["checked", size, num_tiles] = True

    def elements_per_tile(self, num_tiles: int) -> np.ndarray:
        """Elements on each tile (int64, ``max(num_tiles, largest tile + 1)`` long).  A mapping built with a tile
        of its own per block or window (:func:`own_blocks`, :func:`own_windows`: a matmul's or a convolution's
        outputs and partials, 0.1-0.5 M intervals each) holds on each of those tiles exactly its block's
        elements, so it is one write per block instead of a pass over the intervals."""
        own = self._derived.get("own_windows")
        if own is not None:
            per, tiles = np.prod(own[1], axis=1), own[3]
        elif (own := self._derived.get("own_blocks")) is not None:
            per, tiles = int(np.prod(own[1])), own[2]
        if own is None or int(np.min(own[1])) < 0:
            return np.bincount(self.tile, weights=self.stop - self.start, minlength=num_tiles).astype(np.int64)
        out = np.zeros(max(int(num_tiles), int(tiles.max(initial=-1)) + 1), np.int64)
        out[tiles] = per
        return out

    def tile_of(self, flat_index) -> np.ndarray:
        """Tile of each flat element index (vectorised; -1 where unmapped)."""
        idx = np.asarray(flat_index, dtype=np.int64)
        k = interval_index(self.start, idx)
        kc = np.clip(k, 0, max(len(self) - 1, 0))
        if len(self) == 0:
            return np.full(idx.shape, -1, np.int64)
        ok = (k >= 0) & (idx < self.stop[kc])
        return np.where(ok, self.tile[kc], -1)

    def restrict(self, a: int, b: int) -> Mapping:
        """The intervals intersected with ``[a, b)``, shifted so that ``a`` becomes 0."""
        lo = np.searchsorted(self.stop, a, side="right")
        hi = np.searchsorted(self.start, b, side="left")
        s = np.clip(self.start[lo:hi], a, b) - a
        e = np.clip(self.stop[lo:hi], a, b) - a
        return Mapping(self.tile[lo:hi], s, e)


def _tiles_array(tiles) -> np.ndarray:
    if isinstance(tiles, range | Iterable) and not isinstance(tiles, np.ndarray):
        tiles = list(tiles)
    arr = np.asarray(tiles, dtype=np.int64).ravel()
    if arr.size == 0:
        raise EmulatorError("mapping: empty tile list; fix: pass at least one tile")
    return arr


def linear(num_elements: int, tiles, grain: int = 1) -> Mapping:
    """Spread ``num_elements`` evenly over ``tiles`` in chunks that are multiples of ``grain``."""
    tiles = _tiles_array(tiles)
    n = int(num_elements)
    grains = -(-n // grain)
    per = -(-grains // len(tiles))  # grains per tile, ceil
    starts = np.arange(len(tiles), dtype=np.int64) * per * grain
    stops = np.minimum(starts + per * grain, n)
    starts = np.minimum(starts, n)
    return Mapping(tiles, starts, stops)


def single_tile(num_elements: int, tile: int) -> Mapping:
    return Mapping([tile], [0], [int(num_elements)])


def intervals(tiles, starts, stops) -> Mapping:
    return Mapping(tiles, starts, stops)


def by_rows(shape, tiles) -> Mapping:
    """Whole rows (first axis) spread evenly over ``tiles``."""
    shape = tuple(int(s) for s in shape)
    row = int(np.prod(shape[1:])) if len(shape) > 1 else 1
    return linear(int(np.prod(shape)), tiles, grain=row)


def _run_split(shape, block_shape) -> int:
    """First dim j such that a block is contiguous from dim j on: dims after j are full width."""
    j = len(shape) - 1
    while j > 0 and block_shape[j] == shape[j]:
        j -= 1
    return j


def runs_per_block(shape, block_shape) -> int:
    j = _run_split(shape, block_shape)
    return int(np.prod(block_shape[:j])) if j > 0 else 1


def block_intervals(shape, block_shape, index) -> tuple[np.ndarray, np.ndarray]:
    """Flat (start, stop) of every contiguous run of each block.

    Returns arrays of shape ``(n_blocks, runs_per_block)``.  Rows of a block that are adjacent in
    memory (trailing dims full width) form one run, so a block of whole rows is a single run.
    """
    shape = np.asarray(shape, dtype=np.int64)
    bs = np.asarray(block_shape, dtype=np.int64)
    index = np.asarray(index, dtype=np.int64).reshape(-1, len(shape))
    strides = np.ones(len(shape), np.int64)
    for d in range(len(shape) - 2, -1, -1):
        strides[d] = strides[d + 1] * shape[d + 1]
    origin = (index * bs) @ strides  # flat index of each block's first element
    j = _run_split(tuple(shape), tuple(bs))
    run_len = int(bs[j] * strides[j])
    if j > 0:
        sub = np.indices(tuple(bs[:j])).reshape(j, -1).T  # (runs, j)
        run_off = sub @ strides[:j]
    else:
        run_off = np.zeros(1, np.int64)
    starts = origin[:, None] + run_off[None, :]
    return starts, starts + run_len


def by_blocks(shape, block_shape, tiles) -> Mapping:
    """Block ``k`` in row-major block order goes to ``tiles[k % len(tiles)]``."""
    shape = tuple(int(s) for s in shape)
    block_shape = tuple(int(b) for b in block_shape)
    if len(shape) != len(block_shape) or any(s % b for s, b in zip(shape, block_shape, strict=True)):
        raise EmulatorError(
            f"mapping.by_blocks: shape {shape} is not divisible by block shape {block_shape}; "
            f"fix: pick a block shape that divides the tensor"
        )
    tiles = _tiles_array(tiles)
    grid = tuple(s // b for s, b in zip(shape, block_shape, strict=True))
    index = np.indices(grid).reshape(len(grid), -1).T
    starts, stops = block_intervals(shape, block_shape, index)
    tb = tiles[np.arange(len(index)) % len(tiles)]  # block k's tile
    st, sp, tl = _in_flat_order(shape, block_shape, grid, starts, stops, tb)
    m = _merge(Mapping(tl, st, sp, _fresh=True))
    if len(tb) and int(tb.min()) >= 0 and int(np.bincount(tb).max()) == 1:
        m._derived["own_blocks"] = (shape, block_shape, _frozen(tb))
    m._derived["dealt_blocks"] = (block_shape, _frozen(tiles))
    return m


def _in_flat_order(shape: tuple, block_shape: tuple, grid: tuple, starts: np.ndarray, stops: np.ndarray,
                   tb: np.ndarray):
    """by_blocks' runs (``starts``, ``stops``: (blocks, runs) from block_intervals, blocks in row-major order) and
    their tiles (``tb``, one per block) in flat order, by a transpose instead of Mapping's argsort of the starts.
    A run of block (g_0, .., g_n-1) at sub-index (s_0, .., s_j-1) over the dims before the run split j starts at
    coordinates g_d * b_d + s_d in those dims (lexicographic order (g_0, s_0, .., g_j-1, s_j-1)) and g_d * b_d in
    the others, where g_d is 0 past dim j (the block spans it): so flat order is the axes (g_0, s_0, .., g_j-1,
    s_j-1, g_j, .., g_n-1).  The runs' starts are distinct, so this is the one ascending order (Mapping's stable
    argsort gives the same arrays)."""
    n = len(grid)
    j = _run_split(shape, block_shape)
    sub = tuple(block_shape[:j])  # (j 0: one run a block)
    perm = [a for d in range(j) for a in (d, n + d)] + list(range(j, n))
    tiles = np.broadcast_to(tb[:, None], starts.shape)
    return tuple(np.ascontiguousarray(a.reshape(*grid, *sub).transpose(perm)).reshape(-1)
                 for a in (starts, stops, tiles))


def _frozen(a: np.ndarray) -> np.ndarray:
    """A read-only int64 copy of ``a``, held once with equal arrays (a split recorded for many mappings)."""
    a = np.asarray(a, np.int64)
    # (share holds 1-D arrays: a 1-D copy, and a view of the held one in the shape)
    return share(a.reshape(-1).copy()).reshape(a.shape)


def own_blocks(m: Mapping):
    """(tensor shape, block shape, each block's tile in row-major block order) where ``m`` was built by
    :func:`by_blocks` with every block on a tile of its own (so each of those tiles holds exactly that block's
    elements), else None.  The graph check reads it (``compile.check.local_by_construction``)."""
    return m._derived.get("own_blocks")


def dealt_blocks(m: Mapping):
    """(block shape, tiles) where ``m`` was built by :func:`by_blocks` (block k in row-major block order on
    ``tiles[k % len(tiles)]``), else None: what an op that moves a tensor's blocks within their tiles may read of its
    layout (``ops.conv.flip_transpose_kernel``, decision 0490)."""
    return m._derived.get("dealt_blocks")


def own_windows(m: Mapping):
    """(tensor shape, window shapes, window origins, window tiles) where ``m`` was built by :func:`by_windows`
    with every window on a tile of its own, else None (see :func:`own_blocks`)."""
    return m._derived.get("own_windows")


def window_intervals(shape, block_shape, origins) -> tuple[np.ndarray, np.ndarray]:
    """Flat (start, stop) of every contiguous run of each window of ``block_shape`` whose first
    element is at element coordinates ``origins`` (n, ndim); arrays (n, runs_per_block)."""
    shape = tuple(int(s) for s in shape)
    block_shape = tuple(int(b) for b in block_shape)
    origins = np.asarray(origins, np.int64).reshape(-1, len(shape))
    strides = np.array([int(np.prod(shape[i + 1:])) for i in range(len(shape))], np.int64)
    j = _run_split(shape, block_shape)
    lead = block_shape[:j] if j > 0 else ()
    run = int(np.prod(block_shape[j:])) if j > 0 else int(np.prod(block_shape))
    local = ((strides[:j, None] * np.indices(lead).reshape(len(lead), -1)).sum(axis=0) if lead
             else np.zeros(1, np.int64))
    s = (origins @ strides)[:, None] + local[None, :]
    return s, s + run


def unique_rows(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(a, axis=0, return_inverse=True)`` (the distinct rows in lexicographic order, each row's index
    among them) for a 2-D int array: rows of non-negative values are numbered in lexicographic order (mixed radix)
    and the numbers made unique, without the sort of whole rows that ``axis=0`` does."""
    a = np.asarray(a)
    if a.ndim != 2 or not len(a) or a.shape[1] == 0 or int(a.min()) < 0:
        keys, inv = np.unique(a, axis=0, return_inverse=True)
        return keys, inv.ravel()
    dims = a.max(axis=0).astype(np.int64) + 1
    if float(np.prod(dims.astype(np.float64))) >= 2.0**62:
        keys, inv = np.unique(a, axis=0, return_inverse=True)
        return keys, inv.ravel()
    code = np.ravel_multi_index(tuple(a.T.astype(np.int64)), tuple(int(d) for d in dims))
    ucode, inv = np.unique(code, return_inverse=True)
    keys = np.stack(np.unravel_index(ucode, tuple(int(d) for d in dims)), 1).astype(a.dtype)
    return keys, inv.ravel()


def _row_runs_in_order(shape, bs, origins, tiles):
    """by_windows' intervals (tiles, starts, stops) already in the order of their starts, or None where this
    does not apply: windows one row run each per row of the last two dimensions (a block split of a matrix or a
    stack of them, as a matmul's outputs and partials are cut), in bands of windows with the same first row and
    height.  A band's runs go row by row, its windows by column in each; the bands in row order.  Consecutive
    bands of the same height and window count are formed together as one (bands, rows, windows) broadcast (a
    matmul's split has a few such segments per plane), not scattered run by run, each written in place.  Strictly
    ascending by construction where no band's rows reach into the next band's and a band's windows have distinct
    columns, checked per window (else None), so the Mapping is the one sorting the runs gives, without the sort."""
    nd, n_w = len(shape), len(bs)
    if nd < 2 or n_w == 0 or np.any(bs[:, -1] >= shape[-1]) or (nd > 2 and np.any(bs[:, :nd - 2] != 1)):
        return None
    W = shape[-1]
    strides = np.array([int(np.prod(shape[i + 1:])) for i in range(nd)], np.int64)
    flat = origins @ strides
    rows = flat // W
    o = np.lexsort((origins[:, -1], rows))  # windows by first row, then column
    row, h = rows[o], bs[o, -2]
    first = np.flatnonzero(np.r_[True, row[1:] != row[:-1]])
    k = np.diff(np.r_[first, n_w])  # windows per band
    hb = h[first]
    if np.any(h != np.repeat(hb, k)):
        return None
    col = origins[o, -1]
    rb = row[first]
    # strictly ascending runs: a band's windows in distinct columns (a row's runs by column, each row's past the last
    # row's: columns < W) and each band below the last one's rows (read per window, not per run; else None)
    if np.any(rb[1:] < rb[:-1] + hb[:-1]) or np.any((col[1:] <= col[:-1]) & (row[1:] == row[:-1])):
        return None
    cut = np.flatnonzero(np.r_[True, (hb[1:] != hb[:-1]) | (k[1:] != k[:-1]), True])  # segments of bands
    ends = np.r_[first, n_w]
    fo, wo, to = flat[o], bs[o, -1], tiles[o]
    total = int(np.sum(k * hb))
    starts, stops, tl = np.empty(total, np.int64), np.empty(total, np.int64), np.empty(total, tiles.dtype)
    at = 0
    for a, b in zip(cut[:-1].tolist(), cut[1:].tolist(), strict=True):
        nb, hh, kk = b - a, int(hb[a]), int(k[a])
        wa, wb = int(first[a]), int(ends[b])
        shp, n = (nb, hh, kk), nb * hh * kk  # each segment written in place: no concatenation
        s = starts[at:at + n].reshape(shp)
        np.add(fo[wa:wb].reshape(nb, 1, kk), (np.arange(hh, dtype=np.int64) * W)[None, :, None], out=s)
        np.add(s, wo[wa:wb].reshape(nb, 1, kk), out=stops[at:at + n].reshape(shp))
        tl[at:at + n].reshape(shp)[...] = to[wa:wb].reshape(nb, 1, kk)
        at += n
    return tl, starts, stops


def by_windows(shape, block_shapes, origins, tiles, layouts: dict | None = None) -> Mapping:
    """Window i (``block_shapes[i]`` at element coordinates ``origins[i]``) on ``tiles[i]``; the
    windows must not overlap (an uneven block split: blocks of a few shapes).  ``layouts``: a dict the caller
    keeps (an op context's), of the same windows' mappings on tile positions 0..n-1: where the tiles are distinct,
    the mapping is that layout with position i's intervals on ``tiles[i]`` (:func:`_on_tiles`)."""
    bs = np.asarray(block_shapes, np.int64).reshape(len(tiles), -1)
    origins = np.asarray(origins, np.int64).reshape(len(tiles), -1)
    tiles = np.asarray(tiles, np.int64)
    shape = tuple(int(d) for d in shape)
    n = len(tiles)
    distinct = n > 0 and int(tiles.min()) >= 0 and int(np.bincount(tiles).max()) == 1
    if layouts is not None and n > 1 and distinct:
        key = (shape, bs.shape, bs.tobytes(), origins.tobytes())
        lay = layout(layouts, key)
        if lay is None:
            lay = _by_windows(shape, bs, origins, np.arange(n, dtype=np.int64))
            keep_layout(layouts, key, lay, lay.tile.nbytes + lay.start.nbytes + lay.stop.nbytes)
        m = _on_tiles(lay, tiles)
    else:
        m = _by_windows(shape, bs, origins, tiles)
    if distinct and m._derived.get("own_windows") is None:  # (a fresh mapping: none of it there yet)
        m._derived["own_windows"] = (shape, _frozen(bs), _frozen(origins), _frozen(tiles))
    return m


# the bytes of layouts a layouts dict keeps (by_windows, matmul.k_partial_vertices_uneven): the oldest go first
LAYOUTS_BYTES = 48 << 20


def layout(layouts: dict, key):
    """The layout kept under ``key`` (:func:`keep_layout`), or None."""
    hit = layouts.get(key)
    return None if hit is None else hit[0]


def keep_layout(layouts: dict, key, value, nbytes: int) -> None:
    """Keep ``value`` (of ``nbytes``) under ``key``, dropping the oldest layouts while those kept pass
    ``LAYOUTS_BYTES`` (a large graph's partials layouts are tens of MB each; the ones that repeat are its
    neighbouring matmuls')."""
    layouts[key] = (value, int(nbytes))
    total = sum(v[1] for v in layouts.values())
    while total > LAYOUTS_BYTES and len(layouts) > 1:
        total -= layouts.pop(next(iter(layouts)))[1]


def _on_tiles(lay: Mapping, tiles: np.ndarray) -> Mapping:
    """Layout ``lay`` (by_windows' mapping of windows on tile positions) with position i's intervals on
    ``tiles[i]``, distinct tiles: by_windows' mapping of the same windows on ``tiles``.  The intervals and their
    order do not depend on the tiles; only the merge of adjacent intervals on one tile does, and with distinct
    tiles two intervals share a tile exactly when they share a position, so the layout's merge is the mapping's and
    the mapping is merged already."""
    m = Mapping(tiles[lay.tile], lay.start, lay.stop, _fresh=True)
    m._derived["merged"] = "itself"
    return m


def _by_windows(shape: tuple, bs: np.ndarray, origins: np.ndarray, tiles: np.ndarray) -> Mapping:
    ordered = _row_runs_in_order(shape, bs, origins, tiles)
    if ordered is not None:
        return _merge(Mapping(*ordered, _fresh=True))
    starts, stops, tl = [], [], []
    keys, inv = unique_rows(bs)
    for c, key in enumerate(keys):
        sel = np.nonzero(inv == c)[0]
        s, e = window_intervals(shape, key, origins[sel])
        starts.append(s.ravel())
        stops.append(e.ravel())
        tl.append(np.repeat(tiles[sel], s.shape[1]))
    return _merge(Mapping(np.concatenate(tl), np.concatenate(starts), np.concatenate(stops), _fresh=True))


def _merge(m: Mapping) -> Mapping:
    """Join adjacent intervals on the same tile (the merged mapping is kept on ``m``)."""
    hit = m._derived.get("merged")
    if hit is None:
        out = _merged(m)
        m._derived["merged"] = "itself" if out is m else out  # (no reference from a mapping to itself)
        return out
    return m if isinstance(hit, str) else hit


def _merged(m: Mapping) -> Mapping:
    if len(m) < 2:
        return m
    join = (m.start[1:] == m.stop[:-1]) & (m.tile[1:] == m.tile[:-1])
    if not join.any():
        return m
    first = np.concatenate([[True], ~join])
    last = np.concatenate([~join, [True]])
    return Mapping(m.tile[first], m.start[first], m.stop[last], _fresh=True)


def worker_split(tensor, workers: int = 6, grain: int = 1):
    """Split each mapped interval of ``tensor`` into up to ``workers`` contiguous pieces.

    Returns ``(tiles, starts, sizes)`` arrays, one entry per piece (= one vertex), pieces are
    multiples of ``grain`` except the last of an interval.
    """
    m = tensor.mapping
    if m is None:
        raise EmulatorError(f"tensor '{tensor.name}': not mapped; fix: g.set_mapping(tensor, ...) first")
    return _worker_split(m, int(workers), int(grain))


def _worker_split(m: Mapping, workers: int, grain: int):
    """worker_split's pieces.  An interval's pieces (their offsets and sizes) depend on its length alone, and a large
    mapping has intervals of a few lengths (a tensor in equal grains, a matmul's output rows: one or two): each length
    is cut once (:func:`_split_table` on the lengths) and its pieces placed at the starts of the intervals of that
    length, where every length gives the same number of pieces; else every interval's table (_split_table)."""
    n = len(m)
    if n > 1:
        cut = _split_by_length(m.tile, m.start, m.stop, workers, grain)
        if cut is not None:
            return cut
    return _split_table(m.tile, m.start, m.stop, workers, grain)


# _split_by_length: lengths found with a presence table over their range when it is at most this wide, and cut
# by length when there are at most this many of them (else the intervals' own table is as cheap)
_LENGTH_SPAN_MAX = 1 << 16
_LENGTHS_MAX = 64


def _split_by_length(tile, start, stop, workers: int, grain: int):
    """_split_table's pieces from one cut per distinct interval length, or None where the lengths are many or
    spread, or where two lengths give different numbers of pieces (then the pieces are not one table)."""
    cut = _length_cut(start, stop, workers, grain)
    if cut is None:
        return None
    offs, sizes, cls = cut
    q = offs.shape[1]
    if cls is None:
        starts = start[:, None] + offs
        return np.repeat(tile, q), starts.reshape(-1), np.tile(sizes[0], len(start))
    starts = np.take(offs, cls, axis=0)  # (np.take: a row gather several times cheaper than offs[cls])
    starts += start[:, None]
    return np.repeat(tile, q), starts.reshape(-1), np.take(sizes, cls, axis=0).reshape(-1)


def _length_cut(start, stop, workers: int, grain: int):
    """The pieces of each distinct interval length: ``(offs, sizes, cls)``, the (lengths, q) tables of piece offsets
    and sizes and each interval's row of them (None where there is one length), or None as _split_by_length."""
    length = stop - start
    lo = int(length.min())
    span = int(length.max()) - lo + 1
    if span > _LENGTH_SPAN_MAX:
        return None
    if span == 1:
        lengths = length[:1]
    else:
        present = np.zeros(span, bool)
        present[length - lo] = True
        at = np.flatnonzero(present)
        if len(at) > _LENGTHS_MAX:
            return None
        lengths = at + lo
    zero = np.zeros(len(lengths), np.int64)
    # (the lengths' own pieces: an interval's first piece at 0; the table keeps them in length then piece order)
    owner, offs, sizes = _split_table(np.arange(len(lengths), dtype=np.int64), zero, lengths, workers, grain)
    per_length = np.bincount(owner, minlength=len(lengths))  # (the pieces come in length order)
    q = int(per_length[0])
    if np.any(per_length != q):
        return None
    offs, sizes = offs.reshape(-1, q), sizes.reshape(-1, q)
    if span == 1:
        return offs, sizes, None
    lut = np.zeros(span, np.intp)
    lut[at] = np.arange(len(at))
    return offs, sizes, lut[length - lo]


# worker_pieces' answers while they live: (ids of a mapping's tile, start and stop arrays, workers) -> (weak references
# to those three arrays and to the pieces' three, the largest end)
_PIECES: dict[tuple, tuple] = {}


def worker_pieces(tensor, workers: int = 6):
    """worker_split's pieces (grain 1) as a vertex group and its Regions fields hold them, for an elementwise compute
    set (``ops.common._elementwise_cs``): ``(tiles, starts, sizes, hi)``, read-only int32 arrays (``sizes`` a
    broadcast where every piece has one size, as the Regions constructor makes it) and the largest end.  Written
    as int32 directly, not as int64 arrays that the field and the group then convert: an activation's split is
    millions of pieces, and each int64 pass and its fresh memory cost more than the cut.  Every piece lies in an
    interval of the tensor's mapping (checked when it was set), so no bounds pass is needed.  None where the
    tensor is not mapped or has 2**31 elements or more (worker_split's int64 arrays then).

    The pieces depend on the mapping's arrays alone, and equal arrays are one object (:mod:`shared_arrays`): a
    tensor mapped like an earlier one (the ops of every layer of a stage, a gradient and its activation) gets that
    one's pieces, the same read-only arrays, while they and the mapping's arrays live (nothing is kept alive)."""
    m = tensor.mapping
    if m is None or not len(m) or tensor.size >= 2**31:
        return None
    arrays, workers = (m.tile, m.start, m.stop), int(workers)
    key = (*map(id, arrays), workers)
    hit = _PIECES.get(key)
    if hit is not None:
        got = [r() for r in hit[0] + hit[1]]
        if all(x is y for x, y in zip(got[:3], arrays, strict=True)) and all(x is not None for x in got[3:]):
            return (*got[3:], hit[2])
    pieces = _pieces_int32(m, workers)
    forget = _forget(key)  # (any of the six gone: the entry goes)
    _PIECES[key] = (tuple(weakref.ref(a, forget) for a in arrays), tuple(weakref.ref(a, forget) for a in pieces),
                    int(m.stop[-1]))
    return (*pieces, int(m.stop[-1]))


def _forget(key: tuple):
    return lambda _ref: _PIECES.pop(key, None)


def _pieces_int32(m: Mapping, workers: int) -> tuple:
    """worker_pieces' three arrays, made."""
    cut = _length_cut(m.start, m.stop, workers, 1)
    if cut is None:
        tiles, starts, sizes = (a.astype(np.int32) for a in _split_table(m.tile, m.start, m.stop, workers, 1))
        one = int(sizes.min()) == int(sizes.max())
    else:
        offs, table, cls = (a.astype(np.int32) if a is not None else None for a in cut)
        n, q = len(m), offs.shape[1]
        if cls is None or (offs == offs[0]).all():  # (every length's pieces start alike: one broadcast add)
            starts = m.start.astype(np.int32)[:, None] + offs[0]
        else:
            starts = np.take(offs, cls, axis=0)  # (np.take: a row gather; with ``out`` it is buffered, slower)
            starts += m.start.astype(np.int32)[:, None]
        starts = starts.reshape(-1)
        tiles = np.repeat(m.tile.astype(np.int32), q)
        one = int(table.min()) == int(table.max())
        sizes = table if one else np.tile(table[0], n) if cls is None else np.take(table, cls, axis=0).reshape(-1)
    for a in (tiles, starts, sizes):
        a.setflags(write=False)
    if one:
        sizes = np.broadcast_to(sizes.reshape(-1)[0], (len(starts),))
    return tiles, starts, sizes


def _split_table(tile, start, stop, workers: int, grain: int):
    """worker_split's pieces: every interval's up to ``workers`` pieces as one row of an (intervals, workers)
    table (piece k of an interval at start + k * its piece length), the table's real pieces kept in row order:
    the pieces in interval then piece order, as one np.repeat per array gave them, in a few passes."""
    length = stop - start
    grains = -(-length // grain)
    pieces = np.minimum(grains, workers)
    per = -(-grains // np.maximum(pieces, 1)) * grain
    k = np.arange(workers, dtype=np.int64)
    starts = start[:, None] + k * per[:, None]
    sizes = np.minimum(starts + per[:, None], stop[:, None])
    sizes -= starts
    keep = sizes > 0
    if workers > 1 and int(pieces.min(initial=workers)) < workers:
        keep &= k < pieces[:, None]
    if keep.all():
        return np.repeat(tile, workers), starts.reshape(-1), sizes.reshape(-1)
    return np.broadcast_to(tile[:, None], keep.shape)[keep], starts[keep], sizes[keep]
