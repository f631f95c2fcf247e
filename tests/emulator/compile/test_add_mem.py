"""Compiled.add_mem with one size for every entry counts the entries per tile and multiplies: the memory it adds is
the one the same size given per entry adds (tiles repeated or not, few tiles or many, each liveness column), and a
recording compile (a copy's effects kept for a replay) still logs the sizes per tile as before."""

import numpy as np
import pytest

from popvision_lite.emulator import Graph, Target
from popvision_lite.emulator import programs as P
from popvision_lite.emulator.compile.compiled import Compiled
from popvision_lite.profile.schema import CATEGORY_CODE

TARGET = Target.from_device("ipu-mk2", num_ipus=1)


def _compiled():
    return Compiled(Graph(TARGET), P.Sequence([]))


@pytest.mark.parametrize("n", [0, 5, 100, 5000, 40000])
@pytest.mark.parametrize("live", [0, 1])
def test_one_size_is_the_size_per_entry(n, live):
    rng = np.random.default_rng(n)
    tiles = rng.integers(0, TARGET.num_tiles, n)
    a, b = _compiled(), _compiled()
    a.add_mem("controlCode", tiles, 12, live)
    b.add_mem("controlCode", tiles, np.full(n, 12), live)
    a.add_mem("vectorListDescriptor", tiles.reshape(-1, 1) if n else tiles, np.int32(7), live)
    b.add_mem("vectorListDescriptor", tiles, [7] * n, live)
    np.testing.assert_array_equal(a.memory, b.memory)
    want = np.bincount(tiles, minlength=TARGET.num_tiles) * 12
    np.testing.assert_array_equal(a.memory[:, CATEGORY_CODE["controlCode"], live], want)
    assert a.memory.dtype == np.int64


def test_recording_logs_sizes_per_tile():
    c = _compiled()
    c.recording = []
    c.add_mem("controlCode", [3, 3, 9], 10)
    (kind, (cat, rt, rb), kw), = c.recording
    assert (kind, cat, kw) == ("mem", "controlCode", {"live": 0})
    np.testing.assert_array_equal(rt, [3, 3, 9])
    np.testing.assert_array_equal(rb, [10, 10, 10])
    assert c.memory[3, CATEGORY_CODE["controlCode"], 0] == 20


@pytest.mark.parametrize("size", [6, "per entry"])
def test_recording_many_entries_logs_the_sums_per_tile(size):
    """More entries than tiles: logged as each tile's sum (tiles with none left out), the sum added once."""
    rng = np.random.default_rng(7)
    n = 3 * TARGET.num_tiles
    tiles = rng.integers(0, TARGET.num_tiles // 2, n)
    sizes = np.full(n, 6) if size == "per entry" else 6
    c, plain = _compiled(), _compiled()
    c.recording = []
    c.add_mem("copyDescriptor", tiles, sizes, 1)
    plain.add_mem("copyDescriptor", tiles, np.full(n, 6), 1)
    (_kind, (_cat, rt, rb), _kw), = c.recording
    want = np.bincount(tiles, minlength=TARGET.num_tiles) * 6
    np.testing.assert_array_equal(rt, np.nonzero(want)[0])
    np.testing.assert_array_equal(rb, want[want > 0])
    np.testing.assert_array_equal(c.memory, plain.memory)
    np.testing.assert_array_equal(c.memory[:, CATEGORY_CODE["copyDescriptor"], 1], want)
