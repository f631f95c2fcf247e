"""mapping's per-row interval lookup (interval_index on a field's rows: answers stepping evenly along each row) and
worker_split cut once per interval length: the same integers as the plain definitions, on the path they take."""

import numpy as np

from popvision_lite.emulator import mapping as M
from tests.emulator.ops.test_index_scans import _Mapped, _worker_split_by_repeat


def _window_rows(rng, bands: int, per_band: int, height: int, width: int):
    """A matrix cut into bands of ``per_band`` windows (``height`` rows, ``width`` or ``width + 1`` columns: an
    uneven split, so the starts are not evenly spaced) mapped one window per tile (mapping.by_windows), and every
    window's row starts: each window's rows step by ``per_band`` intervals."""
    widths = width + rng.integers(0, 2, per_band)
    left = np.concatenate([[0], np.cumsum(widths)[:-1]])
    cols = int(widths.sum())
    shape = (bands * height, cols)
    origins = np.array([(b * height, left[w]) for b in range(bands) for w in range(per_band)])
    bs = np.array([(height, widths[w]) for b in range(bands) for w in range(per_band)])
    tiles = rng.permutation(len(origins))
    mp = M.by_windows(shape, bs, origins, tiles)
    rows = origins[:, :1] + np.arange(height)[None, :]
    return mp, rows * cols + origins[:, 1:]


def test_interval_index_of_rows_that_step_evenly(monkeypatch):
    """A field's rows in a mapping of bands of windows: the guessed answers (columns 0 and 1 searched, the rest
    stepped) are np.searchsorted's, also where some rows do not step evenly (moved queries, queries before the
    first start and past the last), and the guess is taken (not the binary search)."""
    rng = np.random.default_rng(49)
    used = []
    orig = M._by_row_steps

    def spy(start, x):
        out = orig(start, x)
        used.append(out is not None)
        return out

    monkeypatch.setattr(M, "_by_row_steps", spy)
    for trial in range(40):
        mp, x = _window_rows(rng, int(rng.integers(2, 12)), int(rng.integers(3, 40)), int(rng.integers(4, 40)),
                             int(rng.integers(8, 300)))
        x = x + rng.integers(0, 2, x.shape)  # within the run's interval or its neighbour's on the same row
        if trial % 3 == 1:  # some rows that do not step: their own search
            bad = rng.integers(0, x.size, max(x.size // 50, 1))
            x.flat[bad] = rng.integers(-5, int(mp.stop[-1]) + 5, len(bad))
        if trial % 5 == 2:
            x[0, :] = -1  # below the first start (-1)
            x[-1, -1] = int(mp.stop[-1]) + 7  # past the last start (the last interval)
        if x.size < 1024 or len(mp) < 64:
            continue
        want = np.searchsorted(mp.start, x, side="right") - 1
        got = M.interval_index(mp.start, x)
        assert got.shape == want.shape and got.dtype == want.dtype and np.array_equal(got, want), trial
    assert sum(used) >= 20
    # rows whose answers do not step (random queries): the binary search, not the guess
    used.clear()
    start = np.sort(rng.choice(10**7, 5000, replace=False))
    x = rng.integers(0, 10**7, (2000, 8))
    assert np.array_equal(M.interval_index(start, x), np.searchsorted(start, x, side="right") - 1)
    assert used == [False]


def test_worker_split_cut_once_per_length(monkeypatch):
    """Intervals of a few lengths (one cut per length, placed at each interval's start) give the pieces the
    per-interval table gives: lengths with the same number of pieces (the cut per length taken), with different
    numbers, many lengths, and lengths spread wider than the presence table (the table per interval)."""
    rng = np.random.default_rng(50)
    taken = []
    orig = M._split_by_length

    def spy(*a):
        out = orig(*a)
        taken.append(out is not None)
        return out

    monkeypatch.setattr(M, "_split_by_length", spy)
    cases = [
        (np.array([29, 30]), 6, 1, True),      # GPT-3's elementwise pieces: six pieces each
        (np.array([58, 59, 64]), 6, 1, True),
        (np.array([58, 59, 64]), 6, 4, False),  # five pieces of 58 and 59 in grains of 4, six of 64
        (np.array([3]), 6, 1, True),           # one length, fewer pieces than workers
        (np.array([2, 3]), 6, 1, False),       # two and three pieces: not one table
        (np.array([7, 100, 1000]), 2, 64, False),
        (np.arange(1, 200), 6, 1, False),      # more lengths than cut once each
        (np.array([10, 10 + (1 << 17)]), 6, 1, False),  # spread wider than the presence table
    ]
    for lengths, workers, grain, by_length in cases:
        n = 3000
        length = rng.choice(lengths, n)
        starts = np.concatenate([[0], np.cumsum(length)[:-1]]) + rng.integers(0, 3, n).cumsum()
        m = M.Mapping(rng.integers(0, 1472, n), starts, starts + length)
        taken.clear()
        got = M.worker_split(_Mapped(m), workers=workers, grain=grain)
        want = _worker_split_by_repeat(m, workers, grain)
        for g, w in zip(got, want, strict=True):
            assert g.dtype == w.dtype and np.array_equal(g, w), (lengths, workers, grain)
        assert taken == [by_length], (lengths, taken)
