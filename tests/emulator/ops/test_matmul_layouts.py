"""What a matmul split builds on tile positions, kept for the process (ops/matmul_layouts.py, decision 0501): the
partials' mapping placed from the kept starts and stops, the K reduction's vertices, C's mapping and the partials
gather from the arrays the split's first op holds.  Rotated matmuls of one split, in one graph and in later graphs
(whose op contexts keep nothing of the first's), build the graph that building every op with nothing kept builds."""

import dataclasses

import numpy as np
import pytest

from popvision_lite.emulator import Target
from popvision_lite.emulator import mapping as M
from popvision_lite.emulator import programs as P
from popvision_lite.emulator.backends.emulator_backend import EmulatorBackend
from popvision_lite.emulator.ops import matmul_layouts as SL
from popvision_lite.emulator.ops.matmul import _parts
from tests.emulator.test_rank_order import _graph_arrays
from tests.support.devices import ID as SMALL  # the shipped Mk2 cut to 92 tiles (decision 0395)


def _everything(be):
    """_graph_arrays with the copies' gather hints and the mappings' window records."""
    out = _graph_arrays(be)
    for p in be.ctx.programs:
        if isinstance(p, P.Copy) and p.gather is not None:
            out.append((p.name, *(None if v is None else np.asarray(v).tolist()
                                   for v in dataclasses.astuple(p.gather))))
    for t in be.graph.tensors:
        w = None if t.mapping is None else M.own_windows(t.mapping)
        if w is not None:
            out.append((t.name, w[0], *(np.asarray(a).tolist() for a in w[1:])))
    return out


def _build(shapes, forget: bool):
    """Three graphs, each of three matmuls per (M, K, N) (rotated tiles: the second and third wrap round the 92
    tiles); ``forget``: nothing kept between ops (the process's layouts and the op context's cleared before each)."""
    target = Target.from_device(SMALL, num_ipus=1)
    out = []
    for _graph in range(3):
        be = EmulatorBackend(target, "fp16", needs_values=False)
        for j, (m, k, n) in enumerate(shapes):
            a = be.input(f"a{j}", np.zeros((m, k), np.float16))
            for i in range(3):
                if forget:
                    SL.clear()
                    be.ctx.window_layouts.clear()
                be.matmul(a, be.weight(f"w{j}_{i}", np.zeros((k, n), np.float16)), f"mm{j}_{i}")
        out.append(_everything(be))
    return out


@pytest.mark.parametrize("shapes", [[(37, 600, 53)], [(41, 300, 29), (23, 900, 37)]])
def test_kept_split_builds_the_fresh_graph(shapes):
    SL.clear()
    kept = _build(shapes, forget=False)
    # a split asked for twice is kept: the partials' planes from a graph's second op, the vertices on positions
    # (which the op context keeps within a graph) from the second graph's first, the third graph taking them
    assert any(k[0] == "planes" for k in SL._kept) and any(k[0] == "k_partials" for k in SL._kept)
    fresh = _build(shapes, forget=True)
    assert kept == fresh
    assert any("gather_partials" in str(x[0]) for x in kept[0])
    SL.clear()


def test_planes_kept_then_placed_on_other_tiles_are_by_windows():
    G, pk, pm, pn, Mm, N = 1, 4, 5, 7, 101, 45
    g_i, k_i, im_i, in_i = np.unravel_index(np.arange(G * pk * pm * pn), (G, pk, pm, pn))
    msz, moff = _parts(Mm, pm)
    nsz, noff = _parts(N, pn)
    c_shape = np.stack([np.ones(len(g_i), np.int64), msz[im_i], nsz[in_i]], 1)
    c_org = np.stack([g_i * pk + k_i, moff[im_i], noff[in_i]], 1)
    SL.clear()
    first = SL.planes_by_windows((G * pk, Mm, N), c_shape, c_org, np.arange(140) + 3, {})
    for vt in ((np.arange(140) + 1400) % 1472, np.random.default_rng(1).permutation(1472)[:140]):
        got = SL.planes_by_windows((G * pk, Mm, N), c_shape, c_org, vt, {})
        want = M.by_windows((G * pk, Mm, N), c_shape, c_org, vt, {})
        for f in ("tile", "start", "stop"):
            np.testing.assert_array_equal(getattr(got, f), getattr(want, f))
        assert got.start is first.start and got.stop is first.stop  # the kept arrays themselves
        w, v = M.own_windows(got), M.own_windows(want)
        assert w[0] == v[0] and all(np.array_equal(x, y) for x, y in zip(w[1:], v[1:], strict=True))
    SL.clear()


def test_kept_layouts_past_their_budget_drop_the_least_recently_used(monkeypatch):
    monkeypatch.setattr(SL, "SPLIT_LAYOUTS_BYTES", 100)
    SL.clear()
    for key, value in (("a", 1), ("b", 2), ("c", 3)):
        assert SL.kept(key) is None
        SL.keep(key, value, 40)  # asked once: not kept
        assert SL.kept(key) is None
        SL.keep(key, value, 40)  # asked again: kept
        if key == "b":
            assert SL.kept("a") == 1  # "a" used: "b" is now the oldest
    assert SL.kept("b") is None and SL.kept("a") == 1 and SL.kept("c") == 3
    SL.clear()


def test_shape_groups_are_the_distinct_rows_and_their_indices():
    rng = np.random.default_rng(7)
    SL.clear()
    for shapes in (rng.integers(1, 4, (50, 2)), rng.integers(0, 3, (40, 3)), np.full((6, 2), 5)):
        keys, sels, order = SL.shape_groups(shapes)
        want, inv = np.unique(shapes, axis=0, return_inverse=True)
        np.testing.assert_array_equal(keys, want)
        assert len(sels) == len(want)
        for c, sel in enumerate(sels):
            np.testing.assert_array_equal(sel, np.nonzero(inv.ravel() == c)[0])
        np.testing.assert_array_equal(order, np.concatenate(sels))
        again = SL.shape_groups(shapes.copy())  # asked twice: kept from now on
        assert SL.shape_groups(shapes.copy())[2] is again[2] and not order.flags.writeable
    SL.clear()
