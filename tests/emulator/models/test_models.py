"""Emulated models: numerics equal the numpy reference within fp tolerance, recomputation trades
memory for compute, ops are attributed in the profile."""

import numpy as np
import pytest

from popvision_lite.emulator.models.config import make_config
from popvision_lite.emulator.models.emulated import run_model
from popvision_lite.profile.schema import CATEGORY_CODE, STEP_KIND_CODE
from tests.support.devices import ID as TEST_DEVICE  # the shipped Mk2 cut to 92 tiles (decision 0395)
from tests.support.emulations import shared_run

SMALL = {
    "mlp": dict(batch=8, hidden=16),
    "bert": dict(batch=2, seq=8, hidden=16, heads=2, layers=2, vocab=32),
    "conv": dict(batch=1, image=5, hidden=4),
    "gnn": dict(nodes=24, edges=64, hidden=8),
}


@pytest.mark.parametrize("model", sorted(SMALL))
@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_emulated_training_step_matches_numpy(model, precision):
    r = shared_run(make_config(model, precision=precision, **SMALL[model]))  # also the full run of the test below
    assert r.fits
    checks = r.numeric_checks
    # forward output, gradients and updated weights are all compared
    assert "output" in checks and len(checks) >= 4
    failed = {k: (v["max_abs_err"], v["max_rel_err"]) for k, v in checks.items() if not v["passed"]}
    assert not failed
    if precision == "fp32":
        assert max(v["max_abs_err"] for v in checks.values()) < 1e-3
    # the checks are stored in the profile's run dict
    assert r.profile_data.run["numeric_checks"] is checks


def test_numeric_check_detects_a_wrong_result(monkeypatch):
    """A broken codelet must make the numeric check fail (the check can fail)."""
    from popvision_lite.emulator.codelets import popnn as CN

    orig = CN.GELU.fn
    monkeypatch.setattr(CN.GELU, "fn", lambda x: orig(x) * 1.1)
    r = run_model(make_config("bert", precision="fp32", **SMALL["bert"]))
    assert not r.numeric_checks["output"]["passed"]


def _compute_cycles(pd_):
    s = pd_.steps
    return int((s.end_cycle - s.start_cycle)[s.kind == STEP_KIND_CODE["compute"]].sum())


def test_recompute_lowers_peak_memory_and_costs_compute():
    # timing-only BERT goes through the stage composition: recomputation stashes only each layer's
    # input for the layers not running, and re-runs the SAME forward programs (no new code)
    kw = dict(batch=4, seq=32, layers=3, hidden=64, heads=2, vocab=64)
    a = run_model(make_config("bert", recompute=False, **kw), TEST_DEVICE, timing_only=True)
    b = run_model(make_config("bert", recompute=True, **kw), TEST_DEVICE, timing_only=True)
    assert a.fits and b.fits
    var = CATEGORY_CODE["variable"]
    assert b.profile_data.memory[:, var, 1].max() < a.profile_data.memory[:, var, 1].max()
    assert b.profile_data.run["training_state"][0]["mib"]["stash"] < a.profile_data.run["training_state"][0]["mib"]["stash"]
    assert b.schedule["stage_bwd_cycles"][0] > 1.1 * a.schedule["stage_bwd_cycles"][0]
    assert b.schedule["stage_fwd_cycles"] == a.schedule["stage_fwd_cycles"]
    assert {"layer_fwd_att/replay", "layer_fwd_ffn/replay"} <= set(b.profile_data.programs.name)
    code = [CATEGORY_CODE[c] for c in ("vertexCode", "vertexInstanceState", "internalExchangeCode")]
    assert b.profile_data.memory[:, code, 0].sum() == a.profile_data.memory[:, code, 0].sum()


def test_ops_table_has_plans_and_types():
    r = run_model(make_config("mlp", **SMALL["mlp"]), timing_only=True)
    ops = r.profile_data.ops.set_index("name")
    mm = ops.loc["layer0/matmul"]
    assert mm["type"] == "matmul" and "split" in mm["plan"] and mm["flops"] >= 2 * 8 * 16 * 16
    assert mm["cycles"] > 0 and mm["min_bytes"] > 0
    assert ops.loc["layer0/bwd/w_sgd", "type"] == "sgd_update"


def test_pipeline_places_layers_on_ipus_with_inter_ipu_exchange():
    cfg = make_config("mlp", batch=8, hidden=16, layers=4, ipus=4)
    r = run_model(cfg)
    assert r.fits and all(v["passed"] for v in r.numeric_checks.values())
    ops = r.profile_data.ops.set_index("name")
    steps = r.profile_data.steps
    for i in range(4):
        own = steps[(steps.op_id == ops.loc[f"layer{i}/matmul", "op_id"]) & (steps.kind == STEP_KIND_CODE["compute"])]
        assert len(own) and set(own.ipu) == {i}
    assert (steps.kind == STEP_KIND_CODE["exchange_global"]).any()


def test_streaming_weights_use_stream_copies():
    cfg = make_config("mlp", batch=8, hidden=16, streaming_weights=True)
    r = run_model(cfg)
    assert all(v["passed"] for v in r.numeric_checks.values())
    steps = r.profile_data.steps
    assert (steps.kind == STEP_KIND_CODE["stream_copy"]).sum() >= 12  # load + store of w and b of 3 layers
    assert int(r.profile_data.ops.bytes_ddr.sum()) > 0


def test_timing_only_has_same_cycles_as_full():
    cfg = make_config("gnn", **SMALL["gnn"])
    a = shared_run(cfg)  # the full run test_emulated_training_step_matches_numpy[fp16-gnn] checks against numpy
    b = run_model(cfg, timing_only=True)
    assert a.total_cycles == b.total_cycles and not b.numeric_checks
    np.testing.assert_array_equal(a.profile_data.memory, b.profile_data.memory)
