"""ops.common.worker_split: the pieces mapping.worker_split gives, where the intervals have two lengths too."""

import numpy as np

from popvision_lite.emulator import mapping as M
from popvision_lite.emulator.ops import common as C


class _Mapped:
    def __init__(self, mapping):
        self.mapping, self.name = mapping, "t"


def _mapping(rng, lengths):
    n = len(lengths)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]) + rng.integers(0, 3, n).cumsum()
    return M.Mapping(rng.integers(0, 1472, n), starts, starts + lengths)


def test_two_lengths_give_mapping_worker_split_pieces():
    rng = np.random.default_rng(5)
    taken = 0
    for case in range(80):
        n = int(rng.integers(1, 300))
        a, b = (int(x) for x in rng.integers(1, int(rng.choice([4, 12, 80, 1000])), 2))
        lengths = np.where(rng.random(n) < rng.random(), a, b)
        if case % 8 == 0:
            lengths[int(rng.integers(n))] = a + b + 1  # a third length: mapping.worker_split's own path
        t = _Mapped(_mapping(rng, lengths))
        taken += len(np.unique(lengths)) == 2 and n > 2
        for workers in (1, 2, 6):
            for grain in (1, 2, 4, 7, 64):
                got = C.worker_split(t, workers=workers, grain=grain)
                want = M.worker_split(t, workers=workers, grain=grain)
                for g, w in zip(got, want, strict=True):
                    assert g.dtype == w.dtype and np.array_equal(g, w)
    assert taken > 30  # most cases went through the two-length path


def test_lengths_with_different_piece_counts():
    # 3 elements make 3 pieces of 6 workers, 600 make 6: the short intervals' rows end early
    rng = np.random.default_rng(6)
    t = _Mapped(_mapping(rng, np.array([600, 3, 3, 600, 3, 600, 600])))
    tiles, starts, sizes = C.worker_split(t, workers=6)
    assert len(sizes) == 4 * 6 + 3 * 3 and sizes.sum() == 4 * 600 + 3 * 3
    for g, w in zip((tiles, starts, sizes), M.worker_split(t, workers=6), strict=True):
        assert np.array_equal(g, w)
