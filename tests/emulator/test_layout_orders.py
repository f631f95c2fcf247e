"""Two layouts described where they are made instead of found again: mapping.by_blocks puts a block grid's runs
in flat order by a transpose (no argsort of the starts), and an elementwise op's output field over its mapping's
worker pieces is taken from the last elementwise output of the same mapping in the same graph
(ops.common._split_field): the same mappings, fields, vertex tiles and compiled graph either way."""

from __future__ import annotations

import gc
import weakref

import numpy as np

import popvision_lite.emulator.ops.common as CM
from popvision_lite.emulator import Target
from popvision_lite.emulator import mapping as M
from popvision_lite.emulator.compile import compile_graph
from popvision_lite.emulator.models.emulated import EmulatorBackend
from tests.emulator.compile.test_copy_memo import _assert_same


def _by_blocks_sorted(shape, block_shape, tiles) -> M.Mapping:
    """by_blocks as it was: the runs in block order, put in flat order by Mapping's stable argsort."""
    tiles = M._tiles_array(tiles)
    grid = tuple(s // b for s, b in zip(shape, block_shape, strict=True))
    index = np.indices(grid).reshape(len(grid), -1).T
    starts, stops = M.block_intervals(shape, block_shape, index)
    tb = tiles[np.arange(len(index)) % len(tiles)]
    return M._merge(M.Mapping(np.repeat(tb, starts.shape[1]), starts.ravel(), stops.ravel()))


def test_by_blocks_runs_come_in_flat_order():
    rng = np.random.default_rng(7)
    for trial in range(300):
        nd = 1 + trial % 4
        bs = tuple(int(b) for b in rng.integers(1, 4, nd))
        if trial % 3 == 0:  # trailing dims full width (the block's rows one run), a leading one cut
            bs = bs[:1] + tuple(int(b) * 2 for b in bs[1:])
        grid = tuple(int(g) for g in rng.integers(1, 4, nd))
        if trial % 3 == 0:
            grid = grid[:1] + (1,) * (nd - 1)
        shape = tuple(g * b for g, b in zip(grid, bs, strict=True))
        tiles = rng.integers(0, 9, int(rng.integers(1, 12))) if trial % 2 else np.arange(int(rng.integers(1, 30)))
        index = np.indices(grid).reshape(nd, -1).T
        starts, stops = M.block_intervals(shape, bs, index)
        tb = M._tiles_array(tiles)[np.arange(len(index)) % len(tiles)]
        st, sp, tl = M._in_flat_order(shape, bs, grid, starts, stops, tb)
        assert np.all(st[1:] > st[:-1]), (shape, bs)  # in flat order already: Mapping sorts nothing
        got, want = M.by_blocks(shape, bs, tiles), _by_blocks_sorted(shape, bs, tiles)
        for f in ("tile", "start", "stop"):
            x, y = getattr(got, f), getattr(want, f)
            assert x.dtype == y.dtype and np.array_equal(x, y), (shape, bs, f)


def _build(em):
    x = em.input("x", np.zeros((96, 120), np.float16))
    w = em.input("w", np.zeros((120, 200), np.float16))
    y = em.matmul(x, w, "mm")  # rows of blocks, several worker pieces a tile
    h = em.add(em.relu(y, "act"), y, "res")
    em.mul(h, h, "sq")
    return em


def _em():
    return EmulatorBackend(Target.from_device("ipu-mk2"), "fp16", needs_values=False)


def _groups(em):
    return [grp for cs in em.graph.compute_sets for grp in cs.groups if "out" in grp.fields
            and any(k in cs.name for k in ("act", "res", "sq"))]


def test_elementwise_outputs_of_one_mapping_split_once(monkeypatch):
    calls = []
    real = M.worker_split
    monkeypatch.setattr(M, "worker_split", lambda t, **kw: calls.append(t.mapping) or real(t, **kw))
    em = _build(_em())
    groups = _groups(em)
    assert len(groups) == 3
    mp = groups[0].fields["out"].tensor.mapping
    assert all(g.fields["out"].tensor.mapping is mp for g in groups)  # relu, add, mul: outputs mapped alike
    assert sum(m is mp for m in calls) == 1  # split for the first, its field reused by the other two
    tiles, starts, sizes = real(groups[0].fields["out"].tensor, workers=em.graph.target.threads_per_tile)
    for g in groups:
        f = g.fields["out"]
        assert np.array_equal(g.tiles, tiles) and np.array_equal(f.starts, starts) and np.array_equal(f.sizes, sizes)
        assert f._hi == int((starts + sizes).max()) and not f.regular
        assert f.split_of[0] is mp and f.split_of[1] is g.tiles
    assert len({id(g.fields["out"].tensor) for g in groups}) == 3  # each field on its own op's output


def test_reused_fields_compile_as_fields_split_afresh(monkeypatch):
    reused = compile_graph((em := _build(_em())).graph, em.program())
    monkeypatch.setattr(CM, "_keep_split", lambda *a: None)  # every output split and built by the constructor
    plain = compile_graph((em2 := _build(_em())).graph, em2.program())
    _assert_same(reused, plain)


def test_a_record_serves_its_own_graph_and_does_not_keep_it():
    em = _build(_em())
    mp = _groups(em)[0].fields["out"].tensor.mapping
    rec = mp._derived[CM._SPLIT, em.graph.target.threads_per_tile]
    assert rec[0]() is em.graph and rec[2].tensor is None
    # another graph with a tensor of this very mapping: split afresh, its field on its own tensor
    em2 = _em()
    t = em2.ctx.variable("t", (96, 200), "float16", mapping=mp, op="t")
    out_f, tiles = CM._split_field(t, em2.graph.target.threads_per_tile)
    assert out_f.tensor is t and tiles.dtype == np.int64  # (worker_split's, not the first graph's group tiles)
    ref = weakref.ref(em.graph)
    del em
    gc.collect()
    assert ref() is None  # the mapping (alive in em2) does not keep the first graph


def test_another_worker_count_is_split_afresh():
    em = _build(_em())
    grp = _groups(em)[0]
    t = grp.fields["out"].tensor
    f, tiles = CM._split_field(t, 2)
    want = M.worker_split(t, workers=2)
    assert len(want[0]) < len(grp.tiles)  # (two workers' pieces are not the recorded six workers')
    assert np.array_equal(tiles, want[0]) and np.array_equal(f.starts, want[1]) and np.array_equal(f.sizes, want[2])
