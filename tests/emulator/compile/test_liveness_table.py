"""compile.liveness: the not-always-live bytes per (liveness step, tile) are each tensor's bytes per tile added over
its live spans: a graph whose tensors lie on all tiles (added as whole tile rows) and on a few (added at their tiles),
some live in two spans (a program run again rewrites them), gives that table by its definition.  _running_sum, the
running sum of the per-step changes computed row by row in place, gives the integers np.cumsum(axis=0, dtype=int32)
gives, wrapping alike, for tables wide enough for the row loop and narrower ones."""

import numpy as np
import pytest

from popvision_lite.emulator import Graph, Target
from popvision_lite.emulator import mapping as M
from popvision_lite.emulator import programs as P
from popvision_lite.emulator.codelets import popops as CO
from popvision_lite.emulator.compile import compile_graph, liveness
from popvision_lite.profile.schema import CATEGORY_CODE


def _add(g, cs, out, a, b):
    tiles, starts, sizes = M.worker_split(out)
    g.add_vertices(cs, CO.ADD, tiles, fields={"a": a.regions(starts, sizes), "b": b.regions(starts, sizes),
                                             "out": out.regions(starts, sizes)})


def test_table_is_each_tensors_bytes_over_its_spans():
    target = Target.from_device("ipu-mk2", num_ipus=1)
    T = target.num_tiles
    g = Graph(target)
    progs = []
    for name, n, tiles in (("wide", 4 * T, range(T)), ("half", 2 * T, range(0, T, 2)), ("few", 600, (5, 9, 700))):
        mp = M.linear(n, tiles)
        x, t1, t2, y = (g.add_variable(f"{name}_{v}", (n,), "float32", mapping=mp) for v in ("x", "t1", "t2", "y"))
        s0, s1, s2 = (g.add_compute_set(f"{name}_s{i}") for i in range(3))
        _add(g, s0, t1, x, x)
        _add(g, s1, t2, t1, x)
        _add(g, s2, y, t2, t1)
        e0, e1, e2 = P.Execute(s0), P.Execute(s1), P.Execute(s2)
        progs += [e0, e1, P.Execute(g.add_compute_set(f"{name}_gap")), e0, e2]  # e0 again: t1 written anew
    c = compile_graph(g, P.Sequence(progs))
    L = len(c.leaves)
    want = np.zeros((L, T), np.int64)
    sizes = []
    for t in g.tensors:
        if c.always_live[t.id]:
            continue
        tiles, b = c.tensor_tiles[t.id]
        sizes.append(len(tiles))
        for a, z in c.live_intervals.get(t.id, [(int(c.first_lstep[t.id]), int(c.last_lstep[t.id]))]):
            want[a:z + 1, tiles] += b
    assert len(c.live_intervals) >= 3  # the rewritten t1s: live twice
    assert max(sizes) == T and min(sizes) == 3  # both ways of adding a tensor's bytes
    assert c.liveness_tile_bytes.dtype == np.int32
    np.testing.assert_array_equal(c.liveness_tile_bytes, want)
    np.testing.assert_array_equal(c.memory[:, CATEGORY_CODE["variable"], 1], want.max(axis=0))  # the peak per tile


@pytest.mark.parametrize("steps, tiles", [(1, 1472), (2, 64), (257, 1472), (300, 5), (40, 63)])
def test_running_sum_is_cumsum(steps, tiles):
    rng = np.random.default_rng(steps * tiles)
    delta = rng.integers(-(1 << 20), 1 << 20, size=(steps, tiles)).astype(np.int32)
    want = np.cumsum(delta, axis=0, dtype=np.int32)
    got = liveness._running_sum(delta.copy())
    assert got.dtype == np.int32 and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_running_sum_wraps_as_int32():
    delta = np.full((4, 128), np.iinfo(np.int32).max // 2 + 1, np.int32)
    np.testing.assert_array_equal(liveness._running_sum(delta.copy()), np.cumsum(delta, axis=0, dtype=np.int32))
