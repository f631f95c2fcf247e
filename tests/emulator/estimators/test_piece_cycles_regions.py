"""piece_cycles where every piece is a region of a 2D worker vertex (every tile holds more pieces than it has
workers, as a large op's pieces do) or none is: the cycles and their type costing every piece gives."""

import numpy as np

from popvision_lite.emulator.estimators import elementwise as EW

from .test_per_size import _direct, _models


def test_all_or_no_pieces_regions_of_2d_vertices():
    rng = np.random.default_rng(50)
    for model in _models():
        for itemsize, src in ((2, 2), (4, 4), (2, 4)):
            for n in (rng.integers(1, 3000, 4000), np.full(500, 27), rng.integers(27, 29, 3000)):
                n = n.astype(np.int64)
                for on_tile in (rng.integers(7, 2000, len(n)), np.full(len(n), 7), rng.integers(1, 7, len(n))):
                    want = _direct(model, n, itemsize, src, on_tile, 6)
                    got = EW.piece_cycles(model, n, itemsize, src, on_tile, 6)
                    assert got.dtype == want.dtype and np.array_equal(got, want), model
