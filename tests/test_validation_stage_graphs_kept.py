"""``validate --jobs 1`` keeps the compiled stage graphs between two groups of rows that both compose stage graphs
(``mlperf_validation.run_cases``): a stage graph the next group's config builds from the same reads is taken from
the kept ones, not built again.  What a row predicts must not depend on it: each row gives exactly what it gives
run on its own (fresh caches).  The rows run on the tests' device with fewer tiles (decision 0395)."""

from popvision_lite import mlperf_validation as V
from popvision_lite.emulator.models import emulated as E
from popvision_lite.emulator.models import pipeline as PL
from tests.support import devices as test_devices

DEVICE = test_devices.register().id


def _case(id_: str, vocab: int, model: str = "bert-tiny", **kw) -> V.Case:
    # three pipeline stages: the middle one holds neither the embedding nor the head, so it reads no vocab and the
    # two groups (another vocabulary: another replica graph) build it from the same reads
    cfg = dict(layers=3, batch=2, seq=32, vocab=vocab, pipeline_stages=3, ipus=3, replicas=1, grad_accum=6) | kw
    return V.Case(id=id_, label=id_, model=model, config=cfg, device=DEVICE, sample_unit="sequences",
                  measured_sps=None, tuned=False)


def _same(a: V.Result, b: V.Result) -> None:
    assert (a.error, a.predicted_sps, a.fits, a.cycles, a.basis) == (b.error, b.predicted_sps, b.fits, b.cycles,
                                                                      b.basis)
    assert a.extra["schedule"] == b.extra["schedule"] and a.extra["peak_tile"] == b.extra["peak_tile"]


def test_stage_graphs_kept_between_composed_groups_give_each_rows_fresh_result(monkeypatch):
    a, b = _case("a", 512), _case("b", 640)
    mlp = V.Case(id="m", label="m", model="mlp", config=dict(batch=8, hidden=64, layers=2, replicas=1), device=DEVICE,
                 sample_unit="samples", measured_sps=None, tuned=False)
    cases = [a, b, mlp]
    assert [cases[g[0]].id for g in V.graph_groups(cases)] == ["a", "b", "m"]  # three replica graphs
    assert V._composed(a) and V._composed(b) and not V._composed(mlp)
    # b run alone (fresh caches: every one released before it, and after it by ``run_cases``); a needs no run of
    # its own: it runs first below, from caches as empty as these, so it is a fresh run by construction
    E.release_graphs()
    hits = PL._STAGE_GRAPHS.hits
    fresh = V.run_cases([b])[0]
    assert PL._STAGE_GRAPHS.hits == hits  # (one row, its distinct stage graphs: nothing to take)
    assert fresh.error == "", fresh.error
    assert not PL._STAGE_GRAPHS and not E._GRAPH_CACHE  # the run below starts from nothing kept, as b's did
    released = []  # per release: (a whole graph kept, stage graphs kept)
    real = E.release_graphs

    def spy():
        released.append((bool(E._GRAPH_CACHE), len(PL._STAGE_GRAPHS)))
        real()

    monkeypatch.setattr(E, "release_graphs", spy)
    hits = PL._STAGE_GRAPHS.hits
    out = V.run_cases(cases)
    assert all(r.error == "" for r in out), [r.error for r in out]
    assert PL._STAGE_GRAPHS.hits > hits  # b took the middle stage graph a compiled
    _same(out[1], fresh)  # b on a's kept middle stage graph: what b gives on its own
    assert out[0].cycles != out[1].cycles  # (the vocabulary matters to the rows: not one graph twice)
    # only between two composed groups are the kept graphs carried: the composed group before the whole-graph
    # group releases the stage graphs, the mlp group its whole graph, so the peak stays one group's
    assert len(released) == 2, released  # none between a and b
    assert released[0][0] is False and released[0][1] > 0  # after b: a's and b's stage graphs
    assert released[1] == (True, 0)  # after the mlp group: its whole graph
    assert not PL._STAGE_GRAPHS and not E._GRAPH_CACHE
