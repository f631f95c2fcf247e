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
