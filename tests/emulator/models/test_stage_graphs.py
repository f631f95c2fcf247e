"""The distinct stage graphs of a pipelined transformer place the encoder layer body alike (a canonical start
of the op library's rotating tiles), so they share its compiled copies and graph checks across graphs."""

import numpy as np
import pytest

import popvision_lite.emulator.compile as C
import popvision_lite.emulator.compile.check as K
import popvision_lite.emulator.compile.copies as CO
import popvision_lite.emulator.compile.copy_memo as S
from popvision_lite.emulator import Graph, Target
from popvision_lite.emulator import mapping as M
from popvision_lite.emulator import programs as P
from popvision_lite.emulator.backends.emulator_backend import EmulatorBackend
from popvision_lite.emulator.codelets import popops as CPO
from popvision_lite.emulator.models.config import make_config
from popvision_lite.emulator.models.stages import StageGraph
from popvision_lite.emulator.models.transformer import build_bert_stage
from popvision_lite.errors import EmulatorError
from tests.emulator.compile.test_copy_memo import _assert_same
from tests.support.devices import ID as SMALL  # the shipped Mk2 cut to 92 tiles (decision 0395)

CFG = dict(layers=2, seq=128, vocab=1000)


def _stage(target, cfg, stage):
    be = EmulatorBackend(target, cfg.precision, needs_values=False)
    build_bert_stage(be, cfg, stage, 3)
    return be


def test_layer_body_is_placed_alike_in_every_stage_graph():
    """First stage (embedding before the layer), middle and last (LM head between the layer's forward and
    backward): every tensor of the layer body has the same tile mapping, but for the residual add's copy of
    the stage input (the embedding's output in the first stage, the received activation elsewhere).  On the
    shipped 1,472 tiles: on the tests' 92 (decision 0395) the first stage builds no 'layer_norm/in' copy of the
    layer's input where the others do, so this placement is the shipped chip's."""
    target = Target.from_device("ipu-mk2", num_ipus=1)
    cfg = make_config("gpt2-small", **CFG)
    maps = []
    for stage in (0, 1, 2):
        be = _stage(target, cfg, stage)
        maps.append({t.name: t.mapping for t in be.graph.tensors if t.name.startswith("layer/")})
    assert maps[0].keys() == maps[1].keys() == maps[2].keys()
    for other in maps[1:]:
        differ = [n for n, m in maps[0].items()
                  if not (np.array_equal(m.tile, other[n].tile) and np.array_equal(m.start, other[n].start))]
        assert all(n.startswith("layer/attention/residual") for n in differ), differ
        assert len(differ) < len(maps[0]) / 50


def test_stage_graphs_share_the_layer_copies(monkeypatch):
    """With one CopyMemo the middle stage graph compiles almost none of its copies afresh: the layer's
    exchanges were compiled with the first stage graph's, on the same tiles."""
    target = Target.from_device(SMALL, num_ipus=1)
    cfg = make_config("gpt2-small", **CFG)
    fresh = []
    orig = CO._compile_copy_fresh
    monkeypatch.setattr(CO, "_compile_copy_fresh", lambda c, info: (fresh.append(info.prog.name), orig(c, info))[1])
    memo = S.CopyMemo()
    StageGraph(cfg, target, 0, 3, copy_memo=memo)
    first = list(fresh)
    del fresh[:]
    StageGraph(cfg, target, 1, 3, copy_memo=memo)
    assert sum(n.startswith("layer/") for n in first) > 50
    assert len(fresh) <= 5, fresh  # the copies that read the stage input


def test_graph_check_and_compute_sets_shared_across_graphs(monkeypatch):
    """The graph check's answers kept by field content (CopyMemo.checked): a later stage graph checks only
    the fields the earlier one did not have; its compute sets of the same vertices take the earlier graph's
    costs and vertex cycles (CopyMemo.executes); it compiles exactly as alone."""
    target = Target.from_device(SMALL, num_ipus=1)
    cfg = make_config("gpt2-small", **CFG)
    calls, busy = [], []
    orig = K._check_local
    monkeypatch.setattr(K, "_check_local", lambda *a: (calls.append(1), orig(*a))[1])
    orig_busy = CO.cm.compute_tile_cycles
    monkeypatch.setattr(CO.cm, "compute_tile_cycles", lambda *a, **k: (busy.append(1), orig_busy(*a, **k))[1])
    b0, b1 = _stage(target, cfg, 0), _stage(target, cfg, 1)
    p0 = P.Sequence([P.Sequence(list(b0.ctx.programs))])
    p1 = P.Sequence([P.Sequence(list(b1.ctx.programs))])
    alone = C.compile_graph(b1.graph, p1, outline=True)
    n_alone, n_busy = len(calls), len(busy)
    cycles = [g.cycles(target).copy() for g in b1.graph.groups]
    memo = S.CopyMemo()
    C.compile_graph(b0.graph, p0, outline=True, copy_memo=memo)
    assert memo.checked and memo.executes
    del calls[:], busy[:]
    shared = C.compile_graph(b1.graph, p1, outline=True, copy_memo=memo)
    assert len(calls) < n_alone / 5
    assert len(busy) < n_busy / 5
    _assert_same(shared, alone)
    assert shared.outlined_cs == alone.outlined_cs
    assert all(np.array_equal(g.cycles(target), cy) for g, cy in zip(b1.graph.groups, cycles, strict=True))
    memo.keep_used()
    assert not memo.executes  # one run's stage graphs share them, not the next run's


def test_graph_check_memo_still_finds_a_field_off_its_tile():
    """A field with the same arrays as one checked before, on a tensor mapped elsewhere, is checked again."""
    target = Target.from_device(SMALL, num_ipus=1)
    memo = S.CopyMemo()
    for tile, ok in ((0, True), (5, False)):
        g = Graph(target)
        x = g.add_variable("x", (12,), "float32", mapping=M.single_tile(12, tile))
        y = g.add_variable("y", (12,), "float32", mapping=M.single_tile(12, 0))
        cs = g.add_compute_set("relu")
        g.add_vertices(cs, CPO.RELU, [0], fields={"in": x.regions([0], 12), "out": y.regions([0], 12)})
        if ok:
            C.compile_graph(g, P.Execute(cs), copy_memo=memo)
        else:
            with pytest.raises(EmulatorError, match="lives on tile 5"):
                C.compile_graph(g, P.Execute(cs), copy_memo=memo)
