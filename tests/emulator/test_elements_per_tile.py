"""Mapping.elements_per_tile of a mapping built with a tile of its own per block (mapping.by_blocks) or window
(mapping.by_windows) is written from the blocks' sizes, not summed over the intervals: it must give the integers the
sum over the intervals gives (np.bincount of the tiles weighted by the lengths), the length included, for even and
uneven splits, 2-D and 3-D, through a window layout, with tiles past ``num_tiles``, and for repeated tiles (the sum)."""

import numpy as np
import pytest

from popvision_lite.emulator import mapping as M
from tests.support.window_splits import uneven as _uneven


def _by_intervals(m: M.Mapping, num_tiles: int) -> np.ndarray:
    return np.bincount(m.tile, weights=m.stop - m.start, minlength=num_tiles).astype(np.int64)


@pytest.mark.parametrize("seed", range(6))
def test_windows_with_tiles_of_their_own(seed):
    rng = np.random.default_rng(seed)
    shape, shapes, origins = _uneven(rng, three_d=seed % 2 == 1)
    n = len(shapes)
    num_tiles = 64
    tiles = rng.permutation(num_tiles + 8)[:n]  # distinct, some past num_tiles
    layouts = {} if seed % 3 == 0 else None
    for _ in range(2 if layouts is not None else 1):  # (the second through the kept layout)
        m = M.by_windows(shape, shapes, origins, tiles, layouts)
        assert M.own_windows(m) is not None
        got, want = m.elements_per_tile(num_tiles), _by_intervals(m, num_tiles)
        assert got.dtype == np.int64 and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
        tiles = rng.permutation(num_tiles)[:n]


@pytest.mark.parametrize("shape, block", [((8, 12), (2, 3)), ((4, 6, 10), (2, 3, 5)), ((6, 10), (6, 5)),
                                          ((16,), (4,))])
def test_blocks_with_tiles_of_their_own(shape, block):
    rng = np.random.default_rng(len(shape))
    n = int(np.prod([s // b for s, b in zip(shape, block, strict=True)]))
    for num_tiles, tiles in ((100, rng.permutation(100)[:n]), (3, np.arange(5, 5 + n))):
        m = M.by_blocks(shape, block, tiles)
        assert M.own_blocks(m) is not None
        np.testing.assert_array_equal(m.elements_per_tile(num_tiles), _by_intervals(m, num_tiles))
        assert len(m.elements_per_tile(num_tiles)) == max(num_tiles, int(tiles.max()) + 1)


def test_repeated_tiles_are_summed():
    """Blocks or windows sharing a tile record no tile of their own: the intervals are summed."""
    m = M.by_blocks((8, 12), (2, 3), [0, 1, 2])
    assert M.own_blocks(m) is None
    want = np.array([6 * 6, 5 * 6, 5 * 6, 0])  # 16 blocks of 6 elements, round robin over three tiles
    np.testing.assert_array_equal(m.elements_per_tile(4), want)
    shape, shapes, origins = _uneven(np.random.default_rng(1), three_d=False)
    tiles = np.arange(len(shapes)) % 2
    w = M.by_windows(shape, shapes, origins, tiles)
    assert M.own_windows(w) is None
    np.testing.assert_array_equal(w.elements_per_tile(2), [np.prod(shapes[tiles == k], axis=1).sum() for k in (0, 1)])
