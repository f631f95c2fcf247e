"""ops.common.ranges_view gives the endpoint flat_view gives for the index of the same ranges, without forming it
(the reductions' gathers and the replicated norm vectors of a GPT-3 layer: ~100 M elements)."""

from __future__ import annotations

import numpy as np
import pytest

from popvision_lite.emulator.graph import Graph, Regions, TensorView, _ranges_index
from popvision_lite.emulator.ops.common import flat_view, ranges_view
from popvision_lite.emulator.target import Target


def _same(a, b):
    assert type(a) is type(b)
    if isinstance(a, Regions):
        np.testing.assert_array_equal(a.starts, b.starts)
        np.testing.assert_array_equal(a.sizes, b.sizes)
    else:
        np.testing.assert_array_equal(a.index(), b.index())
        assert a.shape == b.shape and a.contiguous == b.contiguous


@pytest.mark.parametrize("case", [
    ([0, 8, 16], [8, 8, 8]),          # adjacent ranges: one run
    ([0, 0, 0, 0], [5, 5, 5, 5]),     # a vector replicated: a run per copy
    ([0, 0, 0], [1, 1, 1]),           # too many runs for regions: an index
    ([3], [1]),                       # one element
    ([4, 0, 9], [0, 3, 2]),           # an empty range left out
    ([10, 2, 5], [4, 3, 0]),          # out of order
    ([], []),
])
def test_ranges_view_is_flat_view_of_the_ranges(case):
    t = Graph(Target.from_device("ipu-mk2")).add_variable("t", (64,), "float16", mapping=None)
    starts, sizes = (np.array(v, np.int64) for v in case)
    _same(ranges_view(t, starts, sizes), flat_view(t, _ranges_index(starts, sizes)))


def test_ranges_view_random():
    rng = np.random.default_rng(7)
    t = Graph(Target.from_device("ipu-mk2")).add_variable("t", (4096,), "float16", mapping=None)
    for _ in range(200):
        n = int(rng.integers(1, 40))
        sizes = rng.integers(0, 6, n)
        starts = np.cumsum(rng.integers(0, 3, n)) * rng.integers(1, 4) + rng.integers(0, 5)
        starts = np.minimum(starts, 4096 - 6)
        v = ranges_view(t, starts, sizes)
        _same(v, flat_view(t, _ranges_index(starts, sizes)))
        assert isinstance(v, Regions | TensorView)
