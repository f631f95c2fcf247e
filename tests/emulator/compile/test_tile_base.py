"""memory._tile_base (a tensor's intervals' positions in tile memory, less their first elements) against its
definition, interval by interval: Poplar keeps a tensor's elements on one tile together, in flat order, so an
interval's offset on its tile is the elements of the same tile's intervals that start before it."""

from types import SimpleNamespace

import numpy as np
import pytest

from popvision_lite.emulator.compile import CompileCaches, memory
from popvision_lite.emulator.mapping import Mapping


def _by_definition(tile, start, stop) -> np.ndarray:
    rel = np.empty(len(tile), np.int64)
    for k in range(len(tile)):
        on_tile = (tile == tile[k]) & (start < start[k])
        rel[k] = int((stop[on_tile] - start[on_tile]).sum()) - int(start[k])
    return rel


def _layout(rng, n: int, k: int, tiles: int, in_order: bool):
    cuts = np.sort(rng.choice(np.arange(1, n), k - 1, replace=False))
    start, stop = np.concatenate([[0], cuts]), np.concatenate([cuts, [n]])
    tile = np.sort(rng.integers(0, tiles, k)) if in_order else rng.integers(0, tiles, k)
    return tile.astype(np.int64), start.astype(np.int64), stop.astype(np.int64)


@pytest.mark.parametrize("in_order", [True, False])
@pytest.mark.parametrize("tiles", [1, 3, 40, 70_000])
def test_tile_base_is_each_interval_s_offset_among_its_tile_s_intervals(in_order, tiles):
    rng = np.random.default_rng(tiles + in_order)
    for n, k in ((9, 1), (50, 2), (4000, 300)):
        tile, start, stop = _layout(rng, n, k, tiles, in_order)
        got = memory._base_of(tile, start, stop)
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, _by_definition(tile, start, stop))


def test_tile_base_of_a_round_robin_layout_and_of_no_interval():
    """A layout dealt round robin (the tiles repeat, out of order, every tile several intervals) and its
    positions through the compile's cache (int32 there) and tile_addr; an empty mapping has no base."""
    c = SimpleNamespace(caches=CompileCaches())
    tile = np.tile(np.arange(5, dtype=np.int64), 4)
    start = np.arange(20, dtype=np.int64) * 3
    m = Mapping(tile, start, start + 3)
    base = memory._tile_base(c, m)
    assert base.dtype == np.int32
    # tile 2's intervals start at 6, 21, 36, 51: at tile positions 0, 3, 6, 9; element 59 is in interval 19 (tile
    # 4's fourth) at 2
    np.testing.assert_array_equal(base[[2, 7, 12, 17]], [0 - 6, 3 - 21, 6 - 36, 9 - 51])
    np.testing.assert_array_equal(memory.tile_addr(c, m, np.array([7, 52, 59])), [1, 10, 11])
    empty = memory._base_of(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64))
    assert empty.dtype == np.int64 and len(empty) == 0


def test_mappings_of_the_same_arrays_share_one_base(monkeypatch):
    """Two mapping objects of the same three arrays (held once: shared_arrays, for 1,024 intervals or more) read
    one base, computed once; mappings of equal arrays each of its own (fewer intervals, not shared) are computed
    apart (the cache goes by the arrays held, not their values), to the same values."""
    calls = []
    real = memory._base_of
    monkeypatch.setattr(memory, "_base_of", lambda *a: calls.append(1) or real(*a))
    c = SimpleNamespace(caches=CompileCaches())
    tile, start, stop = _layout(np.random.default_rng(5), 9000, 2000, 30, False)
    a, b = Mapping(tile, start, stop), Mapping(tile, start, stop)
    assert a is not b and a.tile is b.tile and a.start is b.start and a.stop is b.stop
    first = memory._tile_base(c, a)
    assert memory._tile_base(c, b) is first and len(calls) == 1
    np.testing.assert_array_equal(first, _by_definition(tile, start, stop))
    # the same tiles and starts held, other stops: another base (computed, not the first's)
    k = int(np.argmax(stop - start > 1))
    stop2 = stop.copy()
    stop2[k] -= 1
    d = Mapping(tile, start, stop2)
    assert d.tile is a.tile and d.start is a.start and d.stop is not a.stop
    np.testing.assert_array_equal(memory._tile_base(c, d), _by_definition(tile, start, stop2))
    # ... other tiles (pairs of tiles merged): another base
    tile2 = tile - tile % 2
    e = Mapping(tile2, start, stop)
    assert e.tile is not a.tile and e.start is a.start and e.stop is a.stop
    np.testing.assert_array_equal(memory._tile_base(c, e), _by_definition(tile2, start, stop))
    assert len(calls) == 3
    # ... other starts: another base
    start2 = start.copy()
    start2[k] += 1
    f = Mapping(tile, start2, stop)
    assert f.tile is a.tile and f.start is not a.start and f.stop is a.stop
    np.testing.assert_array_equal(memory._tile_base(c, f), _by_definition(tile, start2, stop))
    assert len(calls) == 4
    small = [Mapping(tile[:5], start[:5], stop[:5]) for _ in range(2)]
    assert small[0].tile is not small[1].tile
    bases = [memory._tile_base(c, m) for m in small]
    assert len(calls) == 6 and np.array_equal(bases[0], bases[1])
