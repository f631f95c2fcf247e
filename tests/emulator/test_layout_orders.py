"""mapping.by_blocks puts a block grid's runs in flat order by a transpose, as it makes them, instead of leaving
Mapping's stable argsort of the starts to find that order: the same mapping arrays."""

from __future__ import annotations

import numpy as np

from popvision_lite.emulator import mapping as M


def _by_blocks_sorted(shape, block_shape, tiles) -> M.Mapping:
    """by_blocks as it was: the runs in block order, put in flat order by Mapping's stable argsort."""
    tiles = M._tiles_array(tiles)
    grid = tuple(s // b for s, b in zip(shape, block_shape, strict=True))
    index = np.indices(grid).reshape(len(grid), -1).T
    starts, stops = M.block_intervals(shape, block_shape, index)
    tb = tiles[np.arange(len(index)) % len(tiles)]
    return M._merge(M.Mapping(np.repeat(tb, starts.shape[1]), starts.ravel(), stops.ravel()))


def test_by_blocks_runs_come_in_flat_order():
    rng = np.random.default_rng(7)
    for trial in range(300):
        nd = 1 + trial % 4
        bs = tuple(int(b) for b in rng.integers(1, 4, nd))
        if trial % 3 == 0:  # trailing dims full width (the block's rows one run), a leading one cut
            bs = bs[:1] + tuple(int(b) * 2 for b in bs[1:])
        grid = tuple(int(g) for g in rng.integers(1, 4, nd))
        if trial % 3 == 0:
            grid = grid[:1] + (1,) * (nd - 1)
        shape = tuple(g * b for g, b in zip(grid, bs, strict=True))
        tiles = rng.integers(0, 9, int(rng.integers(1, 12))) if trial % 2 else np.arange(int(rng.integers(1, 30)))
        index = np.indices(grid).reshape(nd, -1).T
        starts, stops = M.block_intervals(shape, bs, index)
        tb = M._tiles_array(tiles)[np.arange(len(index)) % len(tiles)]
        st, sp, tl = M._in_flat_order(shape, bs, grid, starts, stops, tb)
        assert np.all(st[1:] > st[:-1]), (shape, bs)  # in flat order already: Mapping sorts nothing
        got, want = M.by_blocks(shape, bs, tiles), _by_blocks_sorted(shape, bs, tiles)
        for f in ("tile", "start", "stop"):
            x, y = getattr(got, f), getattr(want, f)
            assert x.dtype == y.dtype and np.array_equal(x, y), (shape, bs, f)
