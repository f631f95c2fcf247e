"""Compiled.memory keeps its (tiles, categories, live) shape with each category's row of tiles contiguous (add_mem
adds one row at a time), and add_mem with a size per entry adds what np.add.at of those sizes adds, few tiles or
many, without changing the caller's sizes."""

import numpy as np
import pytest

from popvision_lite.emulator import Graph, Target
from popvision_lite.emulator import programs as P
from popvision_lite.emulator.compile.compiled import Compiled
from popvision_lite.profile.schema import CATEGORY_CODE, MEMORY_CATEGORIES

TARGET = Target.from_device("ipu-mk2", num_ipus=1)


def test_memory_rows_are_contiguous_and_the_table_keeps_its_shape():
    c = Compiled(Graph(TARGET), P.Sequence([]))
    T = TARGET.num_tiles
    assert c.memory.shape == (T, len(MEMORY_CATEGORIES), 2) and c.memory.dtype == np.int64
    assert c.memory[:, CATEGORY_CODE["controlCode"], 1].flags.c_contiguous
    c.add_mem("controlCode", [5, 5, 7], 3, 1)
    copy = c.memory.copy()
    assert copy.flags.c_contiguous and copy[5, CATEGORY_CODE["controlCode"], 1] == 6 and int(copy.sum()) == 9


@pytest.mark.parametrize("n", [3, 40, 4000])
def test_sizes_per_entry_add_what_add_at_adds(n):
    rng = np.random.default_rng(n)
    T = TARGET.num_tiles
    tiles = rng.integers(0, T, n)
    sizes = rng.integers(0, 1000, n)
    keep = sizes.copy()
    c = Compiled(Graph(TARGET), P.Sequence([]))
    c.recording = []
    c.add_mem("copyDescriptor", tiles.astype(np.int32), sizes, 0)
    want = np.zeros(T, np.int64)
    np.add.at(want, tiles, sizes)
    np.testing.assert_array_equal(c.memory[:, CATEGORY_CODE["copyDescriptor"], 0], want)
    assert int(c.memory.sum()) == int(sizes.sum())
    np.testing.assert_array_equal(sizes, keep)
    (_kind, (_cat, rt, rb), _kw), = c.recording
    got = np.zeros(T, np.int64)
    np.add.at(got, rt, rb)
    np.testing.assert_array_equal(got, want)  # the log replays to the same bytes
