"""The fit advisor's search space (sweep/fit_space.py): every run-config field declared, candidates as runs, the
saver levels, the dominance relations and the chains' bisection - no emulation here (tests/sweep/test_fit.py
emulates)."""

import pytest

from popvision_lite.emulator import run_config
from popvision_lite.emulator.run_config import FIELDS, RunConfig, RunConfigField
from popvision_lite.errors import ConfigError
from popvision_lite.sweep import fit_space
from popvision_lite.sweep.fit_result import FAILED, FITS, IMPLIED, OVER, Trial
from popvision_lite.sweep.fit_search import _Chain
from popvision_lite.sweep.fit_space import FIT_ROLES, Place, Space, global_batch_of, undeclared_fields


def space(max_ipus=64, gb=None, **args):
    rc = RunConfig.from_mapping({"model": "gpt3-13b", "optimizer": "adam", **args}, "test")
    cfg = rc.model_config(host_check=False)
    return Space(rc, max_ipus, gb or global_batch_of(cfg))


def test_every_run_config_field_has_a_role_in_the_search(monkeypatch):
    assert undeclared_fields() == []
    assert set(FIT_ROLES) <= set(FIELDS)  # no role for a field that does not exist
    # a new run-config field is reported until it is declared
    monkeypatch.setitem(run_config.FIELDS, "new_knob", RunConfigField("new_knob", "bool"))
    monkeypatch.setattr(fit_space, "FIELDS", run_config.FIELDS)
    assert undeclared_fields() == ["new_knob"]


def test_a_new_saver_joins_the_search_by_its_declaration(monkeypatch):
    sp = space()
    before = list(sp.savers())
    monkeypatch.setitem(FIT_ROLES, "master_weights", fit_space._saver("test", False, (False, True), 9))
    assert list(sp.savers()) == before + ["master_weights"]
    lean = sp.lean(Place(8, 1, 1, 1))
    assert lean.saver("master_weights") is False and sp.args(lean)["master_weights"] is False


def test_candidates_keep_the_model_and_the_global_batch():
    sp = space(gb=128, grad_accum=128)
    assert sp.tensor_parallel_degrees() == [1, 2, 4, 5, 8, 10, 20, 40]   # divisors of 40 heads and 20,560
    c = sp.lean(Place(tp=8, stages=2, replicas=2, batch=1))
    a = sp.args(c)
    assert a["ipus"] == 32 and a["replicas"] * a["grad_accum"] * a["batch"] == 128
    assert a["optimizer"] == "adam" and a["tensor_parallel"] == 8 and a["pipeline_stages"] == 2
    assert a["recompute"] is True and a["streaming_weights"] is True
    # streamed weights take the optimizer state with them: one spelling (the run's), not a second identical run
    assert a["optimizer_state"] == "onchip"
    assert sp.args(sp.lean(Place(8, 2, 2, 1), streaming=False))["optimizer_state"] == "offchip"
    cfg = sp.check(c)
    assert cfg.ipus == 32 and cfg.stages == 2 and cfg.tensor_parallel == 8
    with pytest.raises(ConfigError, match="tensor_parallel"):
        sp.check(sp.lean(Place(tp=3, stages=1, replicas=1, batch=1)))
    # RTS shards nothing on one replica: one spelling per distinct run
    assert sp.lean(Place(8, 1, 1, 1)).saver("rts") is False and sp.lean(Place(8, 1, 2, 1)).saver("rts") is True
    # a pipeline needs 2 S - 1 micro-batches per replica: at most 64 stages for 128, and the 40 layers bound it
    assert sp.max_stages(1) == 40 and space(gb=8, grad_accum=8).max_stages(1) == 4


def test_the_second_tensor_parallel_axis_is_a_placement_and_io_tiles_follow_the_streamed_weights():
    # Graphcore's GPT-3 placement as sample_configs/gpt3_13b_pod64.toml writes it: 8 x 4, 2 replicas, 128 IO tiles
    sp = space(gb=128, batch=1, replicas=2, ipus=64, tensor_parallel=8, tensor_parallel_2=4, grad_accum=64,
               streaming_weights=True, recompute=True, rts=True, attention_serialisation=8, io_tiles=128,
               available_memory_proportion=0.1)
    # 1, the run's 4 and the largest divisor of 5,140 up to 8 (5), within 64 IPUs
    assert sp.second_axis_degrees() == [1, 4, 5]
    assert space(max_ipus=4).second_axis_degrees() == [1, 4]          # 5 is over the limit, 4 = the largest
    p = Place(8, 1, 2, 1, tp2=4)
    assert p.chips == 64 and "tensor parallel 8 x 4" in p.text()
    a = sp.args(sp.as_given(p))
    assert (a["tensor_parallel"], a["tensor_parallel_2"], a["ipus"], a["io_tiles"]) == (8, 4, 64, 128)
    assert sp.check(sp.as_given(p)).tp_group == 32
    # weights on chip: nothing streams, so no IO tiles (emulate refuses them without phased execution)
    on_chip = sp.as_given(Place(8, 2, 1, 1, tp2=4), streaming=False)
    assert "io_tiles" not in sp.args(on_chip) and sp.check(on_chip).io_tiles == 0
    # another second axis is another placement: no dominance across it
    assert not sp.no_leaner(sp.as_given(Place(8, 1, 1, 1, tp2=4)), sp.lean(Place(8, 1, 1, 1, tp2=5)))
    # the lower bound: each weight split over both axes, a layer's input over the second
    per_layer = (4 * 5140 * 5120 + 2 * 5140 * 20560) // 32
    lb = sp.lower_bound(on_chip)
    assert lb["weights"] == 20 * per_layer * 2
    # stage 0 of 2 stashes (2 x 2 - 1) x 20 - 1 layer inputs of 1 x seq x 5,140 / 4 fp16 values
    assert lb["stage"] == 0 and lb["stash"] == 59 * sp.cfg0.seq * 1285 * 2


def test_levels_turn_savers_on_in_their_rank_order_one_rung_at_a_time():
    sp = space()
    lv = sp.levels(Place(8, 1, 1, 1))
    assert lv[0] == sp.as_given(Place(8, 1, 1, 1)) and lv[-1] == sp.lean(Place(8, 1, 1, 1))
    # the matmul memory proportion is not monotone (decision 0290): the levels keep the run's; its other values
    # are variants tried around the answers
    assert {c.saver("available_memory_proportion") for c in lv} == {0.6}
    def rungs(c, k):
        return sorted(v.saver(k) for v in sp.variants(c) if v.saver(k) != c.saver(k))

    assert rungs(lv[-1], "available_memory_proportion") == [0.3]   # one rung either way
    assert rungs(lv[-1].with_savers(available_memory_proportion=0.3), "available_memory_proportion") == [0.1, 0.6]
    assert rungs(lv[-1], "embedding_serialization") == [4]          # the run's 1: one slice
    assert rungs(lv[-1], "attention_serialisation") == [4]          # the run's 1 block
    assert {c.saver("attention_serialisation") for c in lv} == {1}  # not monotone either: kept in the levels
    assert len(sp.variants(lv[-1])) == 3                            # one saver at a time
    assert sp.lean(Place(8, 1, 1, 1)).saver("available_memory_proportion") == 0.6
    # every level is no heavier than the one before (the search's monotonicity assumption holds by construction)
    for heavy, light in zip(lv, lv[1:], strict=False):
        assert sp.no_leaner(heavy, light) and not sp.no_leaner(light, heavy)
    order = [k for k in sp.savers()]
    assert order.index("available_memory_proportion") < order.index("recompute") < order.index("optimizer_state") \
        < order.index("streaming_weights")
    # the weights kept on chip: the levels never stream them
    assert all(c.saver("streaming_weights") is False for c in sp.levels(Place(8, 2, 1, 1), streaming=False))


def test_the_lower_bound_counts_the_weights_the_composition_keeps_on_chip():
    sp = space(gb=128, grad_accum=128)
    per_layer = (4 * 5140 * 5120 + 2 * 5140 * 20560) // 8       # q, k, v, out and the FFN's two, an eighth each
    on_chip = sp.lean(Place(8, 4, 1, 1), streaming=False)        # 10 layers per IPU, state off chip
    lb = sp.lower_bound(on_chip)
    assert lb["weights"] == 10 * per_layer * 2 and lb["accum"] == 10 * per_layer * 2 and lb["state"] == 0
    assert lb["sram"] == 1472 * 638976 and not lb["fits"]
    phased = sp.lean(Place(8, 1, 1, 1))                          # one layer's shard in its phase
    assert sp.lower_bound(phased)["weights"] == per_layer * 2 and sp.lower_bound(phased)["fits"]
    onchip_state = sp.as_given(Place(40, 8, 1, 1))               # Adam fp32 moments: 8 B a parameter
    assert sp.lower_bound(onchip_state)["state"] == 5 * ((4 * 5140 * 5120 + 2 * 5140 * 20560) // 40) * 8


def test_a_chain_is_bisected_for_its_first_fitting_candidate():
    sp = space()
    cands = [sp.lean(Place(t, 1, 1, 1)) for t in (1, 2, 4, 5, 8, 10, 20, 40)]
    fits_from = 5  # tensor parallel 10 and up fit
    trials, probes = {}, []
    ch = _Chain("test", "lean", cands)
    while (p := ch.probe(trials)) is not None:
        probes.append(p)
        i = cands.index(p)
        trials[p] = Trial(p, "lean", FITS if i >= fits_from else OVER)
    assert ch.answer == cands[fits_from] and len(probes) <= 4       # log2(8) + 1
    # a candidate known to fit without emulation (implied) counts as fitting; a failed one is dropped
    trials = {cands[3]: Trial(cands[3], "lean", IMPLIED), cands[1]: Trial(cands[1], "lean", FAILED)}
    ch = _Chain("test", "lean", cands)
    ch.update(trials)
    assert ch.hi == 2 and cands[1] not in ch.cands


def test_dominance_compares_only_the_same_placement():
    sp = space()
    lean = sp.lean(Place(8, 1, 1, 1))
    given = sp.as_given(Place(8, 1, 1, 1))
    assert sp.no_leaner(given, lean) and not sp.no_leaner(lean, given)
    assert not sp.no_leaner(sp.as_given(Place(4, 1, 1, 1)), lean)   # another tensor-parallel degree
