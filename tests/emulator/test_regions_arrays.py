"""A Regions field's arrays (issue 49: fields of one elementwise op built once): a caller's array is never made
read-only, another field's read-only int32 arrays are held as they are, and a region outside the tensor is
refused whatever the arrays' type."""

import numpy as np
import pytest

from popvision_lite.emulator import Graph, Target
from popvision_lite.emulator import mapping as M
from popvision_lite.errors import EmulatorError


@pytest.fixture(scope="module")
def mk2():
    return Target.from_device("ipu-mk2", num_ipus=1)


def _two(mk2, n=5000):
    g = Graph(mk2)
    x = g.add_variable("x", (n,), "float16", mapping=M.linear(n, range(4)))
    y = g.add_variable("y", (n,), "float16", mapping=M.linear(n, range(4)))
    return x, y


def test_fields_share_arrays_and_leave_the_callers_writable(mk2):
    x, y = _two(mk2)
    starts = np.arange(0, 5000, 2, dtype=np.int64)
    sizes = np.full(len(starts), 2, np.int32)
    sizes[::7] = 1
    fx = x.regions(starts, sizes)
    assert starts.flags.writeable and sizes.flags.writeable
    assert fx.starts.dtype == np.int32 and not fx.starts.flags.writeable
    fy = y.regions(fx.starts, fx.sizes)
    assert fy.starts is fx.starts and fy.sizes is fx.sizes  # held once, no copy
    s32 = starts.astype(np.int32)
    fz = y.regions(s32, sizes)
    assert s32.flags.writeable and np.array_equal(fz.starts, fx.starts) and np.array_equal(fz.sizes, fx.sizes)
    one = x.regions(starts, 2)
    assert one.regular and one.sizes.strides == (0,) and int(one.sizes[0]) == 2
    again = y.regions(one.starts, one.sizes)
    assert not again.regular and np.array_equal(again.elems(), np.full(len(starts), 2))
    empty = x.regions(np.zeros(0, np.int64), 3)
    assert empty.n == 0 and empty.sizes.shape == (0,) and empty.elems().dtype == np.int64


@pytest.mark.parametrize("dtype", [np.int64, np.int32])
def test_a_region_outside_the_tensor_is_refused(mk2, dtype):
    x, _ = _two(mk2)
    for starts, sizes in (([4990], [11]), ([-1], [2]), ([0], [-1]), ([2**31 - 2], [5]), ([0, 4999], 2)):
        with pytest.raises(EmulatorError, match="outside its 5000 elements"):
            x.regions(np.asarray(starts, dtype), sizes if np.ndim(sizes) == 0 else np.asarray(sizes, dtype))
    # max(starts) + max(sizes) passes the end while every region's own end does not: accepted; refused where the
    # region ending past the tensor is not the one with the largest start
    ok = x.regions(np.asarray([0, 4990], dtype), np.asarray([4999, 5], dtype))
    assert np.array_equal(ok.elems(), [4999, 5])
    with pytest.raises(EmulatorError, match="outside its 5000 elements"):
        x.regions(np.asarray([4000, 4990], dtype), np.asarray([1001, 5], dtype))
    with pytest.raises(EmulatorError, match="2 starts but 1 sizes"):
        x.regions(np.asarray([0, 1], dtype), np.asarray([1], dtype))
