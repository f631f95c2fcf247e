"""Releasing a kept graph frees it by reference counting (decision 0470): ``release_graphs`` and a run that
replaces the kept whole graph leave no reference cycle of it to the garbage collector, so a run that replaces the
kept graph starts no collection, which in a large process walks every object it holds (~0.3 s each in the test
suite's); ``release_graphs`` still collects once, for what the runs left besides their graphs.  Each test collects once
before its run (what earlier tests left: see ``_run``), then turns the collector off, so an object that is gone
after the release was freed by reference counting."""

import gc
import weakref

import pytest

from popvision_lite.emulator.models import emulated as E
from popvision_lite.emulator.models import pipeline as PL
from popvision_lite.emulator.models.config import make_config
from tests.support.devices import ID as SMALL  # the shipped Mk2 cut to 92 tiles (decision 0395)


class Collections:
    """Every collection that starts: (generation, the types of the watched objects still alive then)."""

    def __init__(self):
        self.started: list[tuple[int, list[str]]] = []
        self.watch: list[weakref.ref] = []

    def __call__(self, phase, info):
        if phase == "start":
            self.started.append((info["generation"], _alive(self.watch)))


@pytest.fixture
def collections():
    """Collections counted; the collector off from the end of the test's first ``_run`` (its state restored
    after the test)."""
    seen = Collections()
    was_on = gc.isenabled()  # off already once a test has started the GUI (popvision_lite.gui.gui_thread_gc)
    gc.callbacks.append(seen)
    try:
        yield seen
    finally:
        if was_on:
            gc.enable()
        gc.callbacks.remove(seen)


# a pipelined BERT-tiny of two stages (test_graph_reuse.py's): its stage graphs are kept for the next run
_PIPELINED = dict(training=True, pipeline_stages=2, recompute=True, seq=32, vocab=512, replicas=2, ipus=4)


def _run(model, **kw):
    """Run ``model`` with the collector off from before the run: the run itself must leave no reference cycle
    that holds its graph (``compile.steps.expand``'s recursive closures did, until it dropped them), so the kept
    graph's own cycles are the only ones these tests meet."""
    gc.collect()  # what earlier tests left
    gc.disable()
    E.run_model(make_config(model, **kw), SMALL, timing_only=True)


def _kept_whole_graph() -> list[weakref.ref]:
    """Weak references to the kept whole graph and to every object of its two kinds of reference cycle (each
    tensor with its graph, each compute set with its vertex groups) and the regions of its groups' fields."""
    (graph,) = [entry[0].graph for entry in E._GRAPH_CACHE.values()]
    objs = [graph, *graph.tensors, *graph.compute_sets, *graph.groups]
    objs += [f for g in graph.groups for f in g.fields.values() if hasattr(f, "tensor")]
    assert len(objs) > 50
    return [weakref.ref(o) for o in objs]


def _alive(refs) -> list[str]:
    return sorted({type(o).__name__ for o in (r() for r in refs) if o is not None})


def test_release_graphs_frees_the_kept_graphs_before_it_collects(collections):
    """A whole-graph run's kept graph (an MLP's: the cache does not depend on the model) and, kept beside it, a
    pipelined run's stage graphs: ``release_graphs`` frees both by reference counting, the whole graph's cycles
    too, before its one collection (for the runs' other garbage) starts.  (One test for both kinds: each was a
    test of its own, and test_graph_reuse.py had a third that ran the same two models.)"""
    E.release_graphs()
    _run("mlp", batch=2, replicas=2, ipus=2)
    whole = _kept_whole_graph()
    E.run_model(make_config("bert-tiny", **_PIPELINED), SMALL, timing_only=True)  # the collector still off
    # both kept for a next run: the MLP's graph (the pipelined run keeps stage graphs, not a whole graph)
    assert [entry[0].graph for entry in E._GRAPH_CACHE.values()] == [whole[0]()]
    stages = [weakref.ref(entry[2]) for entry in PL._STAGE_GRAPHS._entries.values()]
    assert len(stages) == 2 and _alive(stages) == ["StageGraph"]
    collections.watch = whole + stages
    collections.started.clear()
    E.release_graphs()
    assert not E._GRAPH_CACHE and not PL._STAGE_GRAPHS
    assert _alive(collections.watch) == []  # freed by reference counting, their cycles too,
    assert collections.started == [(2, [])]  # already when the one collection (for the runs' other garbage) starts


def test_a_run_of_another_graph_frees_the_kept_one_first(collections):
    """``run_model`` drops the kept whole graph before it builds another (peak memory: one graph): the old one
    is gone by the time the new one is kept, with no collection on the way."""
    E.release_graphs()
    _run("mlp", batch=2)
    first = _kept_whole_graph()
    collections.started.clear()
    E.run_model(make_config("mlp", batch=4), SMALL, timing_only=True)  # another micro-batch: another graph
    assert _alive(first) == [] and len(E._GRAPH_CACHE) == 1
    assert collections.started == []  # none started (with the collector off, none would be automatic)
    E.release_graphs()
