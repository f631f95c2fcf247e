"""cost_model.compute_tile_cycles against a per-tile loop written from its definition: each tile's vertices in their
given order go to workers 0, 1, .. threads - 1 in turn, a worker's cycles summed in that order; supervisor vertices
take threads x their cycles one after another; multi-region vertices beyond ``threads`` on a tile launch no more."""

from __future__ import annotations

import numpy as np
import pytest

from popvision_lite.emulator import cost_model as cm


def _reference(tiles, vcycles, T, threads, launch, supervisor, regions):
    busy = np.zeros(T, np.int64)
    count = np.zeros(T, np.int64)
    for t in range(T):
        on = np.nonzero(tiles == t)[0]
        sup = [i for i in on if supervisor[i]]
        work = [i for i in on if not supervisor[i]]
        load = [0.0] * threads
        for j, i in enumerate(work):
            load[j % threads] += vcycles[i]
        extra = max(int(regions[on].sum()) - threads, 0)
        b = max(threads * max(load), (len(work) - extra) * launch) + threads * sum(float(vcycles[i]) for i in sup)
        count[t] = len(on)
        busy[t] = int(b + (launch if len(on) else 0))
    return busy, count


@pytest.mark.parametrize("seed", range(6))
def test_compute_tile_cycles_matches_the_per_tile_definition(seed):
    rng = np.random.default_rng(seed)
    T, threads, n = 9, 6, int(rng.integers(1, 400))
    tiles = rng.integers(0, T, n) if seed % 3 else np.sort(rng.integers(0, T, n))  # unsorted and sorted
    tiles = tiles.astype(np.int32 if seed % 2 else np.int64)
    vcycles = rng.integers(1, 500, n).astype(np.int32) if seed < 3 else rng.random(n) * 300  # whole and fractional
    supervisor = rng.random(n) < (0.2 if seed in (1, 4) else 0)
    regions = np.ones(n, bool) if seed in (2, 3, 4) else rng.random(n) < 0.5
    got = cm.compute_tile_cycles(tiles, vcycles, T, threads, 11, supervisor=supervisor, regions=regions)
    want = _reference(tiles, vcycles, T, threads, 11, supervisor, regions)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


@pytest.mark.parametrize("seed", range(4))
def test_vertices_in_rows_of_one_tile_match_the_per_tile_definition(seed):
    """An elementwise op's worker pieces: runs of one tile whose lengths are multiples of ``threads`` (each tile's
    runs apart, the tiles in no order), costed by columns of rows (cost_model._load_by_rows); fractional cycles
    too, so a per-worker sum in another order would differ."""
    rng = np.random.default_rng(100 + seed)
    T, threads = 7, 6
    runs = int(rng.integers(5, 60))
    tiles = np.repeat(rng.integers(0, T, runs), rng.integers(1, 4, runs) * threads).astype(np.int32)
    n = len(tiles)
    vcycles = rng.integers(1, 900, n).astype(np.int32) if seed % 2 else rng.random(n) * 300
    supervisor = np.zeros(n, bool)
    regions = np.ones(n, bool) if seed != 3 else rng.random(n) < 0.5
    assert cm._rows_on_one_tile(tiles, threads)
    got = cm.compute_tile_cycles(tiles, vcycles, T, threads, 11, supervisor=supervisor, regions=regions)
    want = _reference(tiles, vcycles, T, threads, 11, supervisor, regions)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    # rows that straddle two tiles are costed by each vertex's place instead
    assert not cm._rows_on_one_tile(np.r_[tiles[:-1], (tiles[-1] + 1) % T], threads)


@pytest.mark.parametrize("seed", range(4))
def test_one_row_per_tile_matches_the_per_tile_definition(seed):
    """Rows of one tile with no tile in two rows (an elementwise op with at most ``threads`` pieces a tile, the
    tiles in no order): each worker runs one vertex, so a tile's load is its row's largest cycles
    (cost_model._load_by_rows' one-row case); fractional cycles too."""
    rng = np.random.default_rng(300 + seed)
    T, threads = 40, 6
    rows = int(rng.integers(3, T))
    tiles = np.repeat(rng.permutation(T)[:rows], threads).astype(np.int32)
    n = len(tiles)
    vcycles = rng.integers(1, 900, n).astype(np.int32) if seed % 2 else rng.random(n) * 300
    supervisor = np.zeros(n, bool)
    regions = np.ones(n, bool) if seed < 2 else rng.random(n) < 0.5
    assert cm._rows_on_one_tile(tiles, threads)
    got = cm.compute_tile_cycles(tiles, vcycles, T, threads, 11, supervisor=supervisor, regions=regions)
    want = _reference(tiles, vcycles, T, threads, 11, supervisor, regions)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
