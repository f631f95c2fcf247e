"""cost_model.compute_tile_cycles' shortcuts against the per-tile definition (test_compute_tile_cycles._reference):
a compute set of supervisor vertices alone (no masked copies, no worker loads), rows of one tile checked column by
column (a row that differs in any one column is not one tile's), and the rows' tiles counted from one contiguous
array."""

from __future__ import annotations

import numpy as np
import pytest

from popvision_lite.emulator import cost_model as cm
from tests.emulator.compile.test_compute_tile_cycles import _reference


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_supervisor_vertices_alone(dtype):
    rng = np.random.default_rng(3)
    T, threads, n = 11, 6, 200
    tiles = rng.integers(0, T - 2, n).astype(dtype)  # two tiles without vertices
    vcycles = rng.integers(1, 5000, n).astype(np.int32)
    supervisor = np.ones(n, bool)
    for regions in (None, np.ones(n, bool)):
        got = cm.compute_tile_cycles(tiles, vcycles, T, threads, 13, supervisor=supervisor, regions=regions)
        want = _reference(tiles, vcycles, T, threads, 13, supervisor, np.zeros(n, bool) if regions is None else regions)
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
        assert got[0].dtype == np.int64 and got[1][T - 1] == 0 and got[0][T - 1] == 0


@pytest.mark.parametrize("column", range(6))
def test_a_row_with_another_tile_in_any_column_is_not_one_tiles(column):
    threads = 6
    tiles = np.repeat(np.array([4, 2, 9, 2, 5], np.int32), threads)
    assert cm._rows_on_one_tile(tiles, threads)
    bad = tiles.copy()
    bad[2 * threads + column] = 7  # the third row, one column
    assert not cm._rows_on_one_tile(bad, threads)
    assert not cm._rows_on_one_tile(tiles[:-1], threads)  # not whole rows
    rng = np.random.default_rng(column)
    vcycles = rng.integers(1, 900, len(bad)).astype(np.int32)
    none = np.zeros(len(bad), bool)
    for t in (tiles, bad):  # by rows where they are one tile's, by place where not: the definition either way
        got = cm.compute_tile_cycles(t, vcycles, 10, threads, 11, supervisor=none, regions=none)
        want = _reference(t, vcycles, 10, threads, 11, none, none)
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


def test_many_rows_of_a_tile_in_strided_order():
    """Several rows a tile, the rows of the tiles interleaved (the order large elementwise ops give): the worker
    loads by column from the rows' tiles."""
    rng = np.random.default_rng(5)
    T, threads = 13, 6
    row_tiles = np.tile(rng.permutation(T), 9).astype(np.int32)
    tiles = np.repeat(row_tiles, threads)
    vcycles = rng.integers(1, 2**20, len(tiles)).astype(np.int32)
    none = np.zeros(len(tiles), bool)
    got = cm.compute_tile_cycles(tiles, vcycles, T, threads, 11, supervisor=none, regions=np.ones(len(tiles), bool))
    want = _reference(tiles, vcycles, T, threads, 11, none, np.ones(len(tiles), bool))
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


@pytest.mark.parametrize("rows", [True, False])
def test_tile_counts_equal_the_count_of_every_vertex(rows):
    """cost_model.tile_counts: from the rows' first vertices where each row is one tile's, otherwise every vertex
    (a row with another tile in its last column, a length not whole rows)."""
    rng = np.random.default_rng(11)
    T, threads = 40, 6
    tiles = np.repeat(rng.integers(0, T - 3, 700), threads).astype(np.int32)
    if not rows:
        tiles[6 * 300 + 5] = T - 1
    for t in (tiles, tiles[:-2]):
        got = cm.tile_counts(t, T, threads)
        assert got.dtype == np.int64 and np.array_equal(got, np.bincount(t, minlength=T))
        assert got[T - 1] == (0 if rows else 1)
