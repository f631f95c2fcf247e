"""ops.common.regions_on: an elementwise op's input fields are its output field's regions on the inputs, the same as a
Regions built from that field's arrays, and a region outside the input is refused."""

import numpy as np
import pytest

from popvision_lite.emulator import Graph, Target
from popvision_lite.emulator import mapping as M
from popvision_lite.emulator.graph import Regions
from popvision_lite.emulator.ops.common import regions_on
from popvision_lite.errors import EmulatorError


@pytest.fixture(scope="module")
def graph():
    return Graph(Target.from_device("ipu-mk2", num_ipus=1))


def _var(g, name, n):
    return g.add_variable(name, (n,), "float16", mapping=M.linear(n, range(4)))


def _same(a: Regions, b: Regions):
    assert a.tensor is b.tensor and a.n == b.n and a.regular == b.regular
    assert a.starts.dtype == b.starts.dtype and np.array_equal(a.starts, b.starts)
    assert a.sizes.dtype == b.sizes.dtype and np.array_equal(a.sizes, b.sizes)
    assert a.sizes.strides == b.sizes.strides
    assert np.array_equal(a.elems(), b.elems()) and a.size == b.size
    assert all(np.array_equal(x, y) for x, y in zip(a.run_bounds(), b.run_bounds(), strict=True))


def test_on_is_regions_of_the_fields_arrays(graph):
    x, y = _var(graph, "on_x", 6000), _var(graph, "on_y", 6000)
    starts = np.arange(0, 5000, 3, dtype=np.int64)
    for sizes in (np.where(np.arange(len(starts)) % 5, 3, 2), 3):  # sizes per region; one size (a regular field)
        fx = x.regions(starts, sizes)
        fy = regions_on(fx, y)
        _same(fy, Regions(y, fx.starts, fx.sizes))
        assert fy.starts is fx.starts and fy.sizes is fx.sizes and not fy.regular
    empty = x.regions(np.zeros(0, np.int64), np.zeros(0, np.int64))
    _same(regions_on(empty, y), Regions(y, empty.starts, empty.sizes))


def test_on_refuses_a_region_past_the_tensor(graph):
    x, small = _var(graph, "on_big", 6000), _var(graph, "on_small", 4000)
    fx = x.regions(np.array([0, 3990], np.int64), np.array([10, 20], np.int64))  # ends at 4010
    with pytest.raises(EmulatorError, match="outside its 4000 elements"):
        regions_on(fx, small)
    assert regions_on(fx, _var(graph, "on_exact", 4010)).n == 2
