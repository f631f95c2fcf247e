"""max_pool_bwd's per-tile work lists (pooling._interval_work_lists) from a mark array where each tile's windows lie
in a short range, and from a sort of (interval, window) keys otherwise: both give np.unique's arrays, interval by
interval."""

import numpy as np
import pytest

from popvision_lite.emulator.ops import pooling as PL


def _per_interval_unique(win, r0, r1):
    want, used = np.full(win.shape, -1, np.int64), []
    for a, b in zip(r0, r1, strict=True):
        part = win[a:b]
        u, pos = np.unique(part[part >= 0], return_inverse=True)
        want[a:b][part >= 0] = pos
        used.append(u)
    return want, np.concatenate(used).astype(np.int64), np.array([len(u) for u in used], np.int64)


def _check(win, r0, r1):
    work, src, counts = PL._interval_work_lists(win, r0, r1)
    want, wsrc, wcounts = _per_interval_unique(win, r0, r1)
    assert np.array_equal(work, want) and np.array_equal(src, wsrc) and np.array_equal(counts, wcounts)
    assert work.dtype == src.dtype == counts.dtype == np.int64


def _tiles(rows, parts):
    sz = np.full(parts, rows // parts)
    sz[:rows % parts] += 1
    r1 = np.cumsum(sz)
    return r1 - sz, r1


@pytest.mark.parametrize("geom", [(2, 12, 12, 3, 2, 1), (3, 9, 7, 3, 1, 1), (1, 8, 8, 2, 2, 0), (2, 10, 6, 5, 3, 2)])
@pytest.mark.parametrize("parts", [1, 5, 17, 64])
def test_the_max_pool_gradient_work_lists_are_np_uniques_per_tile(geom, parts, monkeypatch):
    """A pooling's inverted window index (each input row's windows) over the rows' tiles: the mark array's arrays
    are np.unique's, tile by tile, and the sort is not used (every tile's windows lie in a short range)."""
    idx, _ = PL.conv_windows(*geom)
    rows = geom[0] * geom[1] * geom[2]
    inv = PL.invert_windows(idx, rows)
    win = np.where(inv >= 0, inv // idx.shape[1], -1)
    r0, r1 = _tiles(rows, min(parts, rows))
    calls = []
    real = np.unique
    monkeypatch.setattr(PL.np, "unique", lambda *a, **k: calls.append(1) or real(*a, **k))
    work, src, counts = PL._interval_work_lists(win, r0, r1)
    assert not calls
    monkeypatch.undo()
    want, wsrc, wcounts = _per_interval_unique(win, r0, r1)
    assert np.array_equal(work, want) and np.array_equal(src, wsrc) and np.array_equal(counts, wcounts)


@pytest.mark.parametrize("seed", range(6))
def test_random_windows_give_np_uniques_per_interval_dense_or_spread(seed):
    """Random work: windows in a short range (the mark array) and spread over a long one (the sort), intervals
    that are empty, that read no window, and rows in no interval."""
    rng = np.random.default_rng(seed)
    rows, kc = int(rng.integers(5, 60)), int(rng.integers(1, 6))
    for top in (8, 10**9):  # (dense: the mark array; spread: past its length limit, the sort)
        win = rng.integers(-1, top, size=(rows, kc))
        win[rng.random(rows) < 0.2] = -1
        cuts = np.sort(rng.integers(0, rows, size=int(rng.integers(1, 8))))
        r0, r1 = cuts[:-1], cuts[1:]
        if len(r0) == 0:
            r0, r1 = np.array([0]), np.array([rows - 1])
        dense = PL._dense_ranks(*_entries(win, r0, r1), len(r0))
        assert (dense is not None) == (top == 8) or not (win[r0[0]:r1[-1]] >= 0).any()
        _check(win, r0, r1)


def _entries(win, r0, r1):
    lens = r1 - r0
    rows = np.concatenate([np.arange(a, b) for a, b in zip(r0, r1, strict=True)]).astype(np.int64)
    w = win[rows]
    valid = w >= 0
    return np.repeat(np.repeat(np.arange(len(r0)), lens), valid.sum(axis=1)), w[valid]
