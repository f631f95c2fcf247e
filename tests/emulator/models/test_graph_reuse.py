"""Graphs kept from one run for the next (issue 26): a pipelined run that differs from the previous one
only in the fields the step composition applies reuses its compiled stage graphs with the result of
building them afresh.  That ``release_graphs`` frees every kept graph (the validation report calls it between its
groups of rows so that two groups' graphs are never alive together) is tests/emulator/models/test_graph_release.py's."""


import numpy as np
import pandas as pd

from popvision_lite.emulator.models import emulated as E
from popvision_lite.emulator.models import pipeline as PL
from popvision_lite.emulator.models.config import make_config
from tests.support.devices import ID as SMALL  # the shipped Mk2 cut to 92 tiles (decision 0395)

_BERT = dict(training=True, pipeline_stages=2, recompute=True, seq=32, vocab=512)  # a small vocabulary: cheaper heads, same reuse


def _bert(**kw):
    return E.run_model(make_config("bert-tiny", **(_BERT | kw)), SMALL, timing_only=True)


def _assert_same_run(a, b):
    assert a.schedule == b.schedule
    assert (a.total_cycles, a.seconds, a.fits, a.samples_per_second) == (b.total_cycles, b.seconds, b.fits,
                                                                          b.samples_per_second)
    pa, pb = a.profile_data, b.profile_data
    np.testing.assert_array_equal(np.asarray(pa.memory), np.asarray(pb.memory))
    np.testing.assert_array_equal(np.asarray(pa.liveness_tile_bytes), np.asarray(pb.liveness_tile_bytes))
    pd.testing.assert_frame_equal(pa.stored_table("steps"), pb.stored_table("steps"))
    for k in ("training_state", "oom_tiles", "fits"):
        assert pa.run.get(k) == pb.run.get(k), k


def test_pipelined_run_reuses_stage_graphs_when_only_the_composition_changes():
    E.release_graphs()
    first = _bert(replicas=2, ipus=4, grad_accum=4, optimizer="lamb")
    assert "reused" not in first.wall
    again = _bert(replicas=4, ipus=8, grad_accum=8)  # replicas, accumulation, optimizer: composition only
    assert again.wall.get("reused") is True
    E.release_graphs()
    fresh = _bert(replicas=4, ipus=8, grad_accum=8)
    assert "reused" not in fresh.wall
    _assert_same_run(again, fresh)
    assert again.total_cycles != first.total_cycles  # the composition did change the step
    # another micro-batch is another set of stage graphs: test_stage_graphs_are_kept_by_content_across_placements
    # runs one after a run it could take graphs from, and asserts it took none


def test_pipelined_run_replays_the_previous_runs_copies_with_a_cold_runs_result(monkeypatch):
    """The next run of a model (here another availableMemoryProportion: other stage graphs) replays the
    exchanges its stage graphs share with the previous run's (pipeline._COPY_MEMO) and gives the result of
    a run in a cold process."""
    from popvision_lite.emulator.compile import copies as CO
    from popvision_lite.emulator.compile import copy_memo as S

    fresh = []
    orig = CO._compile_copy_fresh
    monkeypatch.setattr(CO, "_compile_copy_fresh", lambda c, info: (fresh.append(1), orig(c, info))[1])
    E.release_graphs()
    monkeypatch.setattr(PL, "_COPY_MEMO", S.CopyMemo())
    _bert(replicas=2, ipus=4, available_memory_proportion=0.6)
    n = len(fresh)
    carried = _bert(replicas=2, ipus=4, available_memory_proportion=0.5)
    n_carried = len(fresh) - n
    E.release_graphs()
    monkeypatch.setattr(PL, "_COPY_MEMO", S.CopyMemo())
    n = len(fresh)
    cold = _bert(replicas=2, ipus=4, available_memory_proportion=0.5)
    assert n_carried < len(fresh) - n  # some copies replayed from the previous run
    _assert_same_run(carried, cold)


def test_stage_graphs_are_kept_by_content_across_placements():
    """Another pipeline depth of the same model builds no stage graph the previous run built: the middle IPUs'
    graph is the same build (the same reads of the config), and so are the first and last; each run equals a run
    in a cold process.  A field the stage program reads (the micro-batch) makes another graph."""
    E.release_graphs()
    four = _bert(pipeline_stages=0, ipus=4, layers=8)
    assert "reused" not in four.wall and len(PL._STAGE_GRAPHS) == 3
    eight = _bert(pipeline_stages=0, ipus=8, layers=8, grad_accum=16)
    assert eight.wall.get("reused") is True and len(PL._STAGE_GRAPHS) == 3
    E.release_graphs()
    cold = _bert(pipeline_stages=0, ipus=8, layers=8, grad_accum=16)
    _assert_same_run(eight, cold)
    hits = PL._STAGE_GRAPHS.hits
    _bert(pipeline_stages=0, ipus=8, layers=8, grad_accum=16, batch=2)
    assert PL._STAGE_GRAPHS.hits == hits and len(PL._STAGE_GRAPHS) == 6  # three more graphs, none taken
