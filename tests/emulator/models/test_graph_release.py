"""Releasing a kept graph frees it by reference counting (decision 0470): ``release_graphs`` and a run that
replaces the kept whole graph leave no reference cycle of it to the garbage collector and start no full
collection, which in a large process walks every object it holds (~0.3 s each in the test suite's)."""

import gc
import weakref

import pytest

from popvision_lite.emulator.models import emulated as E
from popvision_lite.emulator.models import pipeline as PL
from popvision_lite.emulator.models.config import make_config
from tests.support.devices import ID as SMALL  # the shipped Mk2 cut to 92 tiles (decision 0395)


@pytest.fixture
def collector_off():
    """The collector off around the release, every collection that starts counted (generation -> count)."""
    started: dict[int, int] = {}

    def count(phase, info):
        if phase == "start":
            started[info["generation"]] = started.get(info["generation"], 0) + 1

    gc.collect()
    gc.callbacks.append(count)
    gc.disable()
    try:
        yield started
    finally:
        gc.enable()
        gc.callbacks.remove(count)


def _left_to_the_collector() -> list[str]:
    """The types of the package's objects that only the collector can free (unreachable, in reference cycles).
    (``return_freed_memory`` leaves a ctypes library handle's own cycles: not the graph's.)"""
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        return sorted({type(o).__qualname__ for o in gc.garbage if type(o).__module__.startswith("popvision_lite")})
    finally:
        gc.set_debug(0)
        gc.garbage.clear()


def _run(model, **kw):
    return E.run_model(make_config(model, **kw), SMALL, timing_only=True)


def _whole_graph():
    return weakref.ref(next(iter(E._GRAPH_CACHE.values()))[0].graph)


@pytest.mark.parametrize("model, kw", [
    ("mlp", dict(batch=2, replicas=2, ipus=2)),
    # an outlined ResNet: graph functions, called programs, convolutions' windows and blocks
    ("resnet-tiny", dict(layers=14, hidden=8, image=32, batch=2, outline=True)),
])
def test_release_graphs_frees_a_whole_graph_without_the_collector(collector_off, model, kw):
    E.release_graphs()
    _run(model, **kw)
    graph = _whole_graph()
    gc.collect()
    collector_off.clear()
    E.release_graphs()
    assert not E._GRAPH_CACHE
    assert graph() is None  # freed by reference counting
    assert collector_off == {}  # and no collection started for it
    assert _left_to_the_collector() == []  # nothing of it left for the collector either


def test_release_graphs_frees_stage_graphs_without_the_collector(collector_off):
    E.release_graphs()
    _run("bert-tiny", training=True, pipeline_stages=2, recompute=True, seq=32, vocab=512, replicas=2, ipus=4)
    assert PL._STAGE_GRAPHS and not E._GRAPH_CACHE
    stage = weakref.ref(next(iter(PL._STAGE_GRAPHS._entries.values()))[2])
    gc.collect()
    collector_off.clear()
    E.release_graphs()
    assert stage() is None and not PL._STAGE_GRAPHS
    assert collector_off == {}
    assert _left_to_the_collector() == []


def test_a_run_of_another_graph_frees_the_kept_one_first(collector_off):
    """``run_model`` drops the kept whole graph before it builds another (peak memory: one graph): the old one
    is gone by the time the new one is kept, with no full collection on the way."""
    E.release_graphs()
    _run("mlp", batch=2)
    first = _whole_graph()
    gc.collect()
    collector_off.clear()
    _run("mlp", batch=4)  # another micro-batch: another graph
    assert first() is None and _whole_graph()() is not None
    assert collector_off == {}  # no collection during the run (the collector is off: none would be automatic)
    E.release_graphs()
    assert _left_to_the_collector() == []
