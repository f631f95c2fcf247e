"""profile_builder._tile_sums, the vertices table's count and cycles per tile of a group: from the rows where each
row of ``threads`` is one tile's and the cycles are int32, from every vertex otherwise; both equal to counting and
summing every vertex (float64 sums of integers), whatever the cycles' size."""

import numpy as np
import pytest

from popvision_lite.emulator.profile_builder import _tile_sums


@pytest.mark.parametrize("rows", [True, False])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_tile_sums_equal_counting_every_vertex(rows, dtype):
    rng = np.random.default_rng(3)
    T, threads = 50, 6
    tiles = np.repeat(rng.permutation(np.tile(np.arange(T - 4), 9)), threads).astype(np.int32)
    if not rows:
        tiles[threads * 100 + 3] = T - 1
    cycles = rng.integers(2**30, 2**31 - 1, len(tiles)).astype(dtype)  # six a row pass 2**31
    cnt, cyc = _tile_sums(tiles, cycles, T, threads)
    assert np.array_equal(cnt, np.bincount(tiles, minlength=T)) and cnt.dtype == np.int64
    want = np.bincount(tiles.astype(np.int64), weights=cycles, minlength=T)
    assert cyc.dtype == np.float64 and np.array_equal(cyc, want)
    assert np.array_equal(cyc.astype(np.int64), [int(cycles[tiles == t].astype(np.int64).sum()) for t in range(T)])
    one = np.broadcast_to(np.int32(17), tiles.shape)  # one cycle count for every vertex (held broadcast)
    assert np.array_equal(_tile_sums(tiles, one, T, threads)[1], np.bincount(tiles, minlength=T) * 17.0)
