"""The committed sample profiles: they regenerate identically, and they show what they claim."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import popvision_lite as pvl
from popvision_lite.cli.make_samples import SAMPLES, make_sample
from popvision_lite.profile.schema import STEP_KIND_CODE, TABLE_COLUMNS

DIR = Path(__file__).resolve().parents[2] / "sample_profiles"
BY_FILE = {s.file: s for s in SAMPLES}


def _open(name):
    path = DIR / name
    assert path.exists(), f"{path} missing: run `popvision-lite make-samples`"
    return pvl.open(path)


def _compute_cycles(p):
    s = p.stored_table("steps")
    return int((s.end_cycle - s.start_cycle)[s.kind == STEP_KIND_CODE["compute"]].sum())


@pytest.mark.parametrize("name", ["mlp_mk2.pvl", "gnn_mk2.pvl"])
def test_regenerates_identically(tmp_path, name):
    make_sample(BY_FILE[name], tmp_path)
    with _open(name) as old, pvl.open(tmp_path / name) as new:
        for table in TABLE_COLUMNS:
            pd.testing.assert_frame_equal(getattr(old, table), getattr(new, table), obj=table)
        np.testing.assert_array_equal(old.memory.array(), new.memory.array())
        np.testing.assert_array_equal(old.liveness.tile_bytes(), new.liveness.tile_bytes())
        n = len(old.stored_table("steps"))
        wo, wn = old.step_tiles.window(0, n), new.step_tiles.window(0, n)
        for attr in ("cycles", "bytes_in", "bytes_out"):
            np.testing.assert_array_equal(getattr(wo, attr), getattr(wn, attr))
        ro = {k: v for k, v in old.run.items() if k != "created"}
        rn = {k: v for k, v in new.run.items() if k != "created"}
        checks_o, checks_n = ro.pop("numeric_checks", {}), rn.pop("numeric_checks", {})
        assert ro == rn  # cycles, bytes, schedule, config: exact
        assert old.target == new.target
        _same_checks_up_to_the_cpu(checks_o, checks_n)


# the error figures of a numeric check compare the emulated result with numpy's reference, whose float32
# matmuls and transcendental functions take the CPU's BLAS kernels and SIMD paths: they differ by an ulp or so
# between machines (6.10e-05 vs 3.05e-05 on one of mlp_mk2's outputs), while the emulated tables stay exact
CPU_FLOATS = ("max_abs_err", "max_rel_err", "outside_share")


def _same_checks_up_to_the_cpu(old: dict, new: dict) -> None:
    """Same checks with the same verdicts and tolerances; the CPU-dependent error figures each within the
    check's own tolerance of the stored one (and still passing where they passed)."""
    assert old.keys() == new.keys()
    for name, o in old.items():
        n = new[name]
        assert {k: v for k, v in o.items() if k not in CPU_FLOATS} == \
            {k: v for k, v in n.items() if k not in CPU_FLOATS}, name
        assert n["max_abs_err"] == pytest.approx(o["max_abs_err"], abs=o["atol"]), name
        assert n["max_rel_err"] == pytest.approx(o["max_rel_err"], abs=o["rtol"]), name


def test_cpu_tolerance_of_numeric_checks_still_catches_a_real_change():
    rec = dict(name="y", passed=True, max_abs_err=6.103515625e-05, max_rel_err=3.1e-3, rtol=0.02, atol=0.02,
               elements=64)
    _same_checks_up_to_the_cpu({"y": rec}, {"y": rec | dict(max_abs_err=3.0517578125e-05, max_rel_err=1.5e-3)})
    for changed in (dict(passed=False), dict(elements=65), dict(max_abs_err=0.5), dict(max_rel_err=0.3)):
        with pytest.raises(AssertionError):
            _same_checks_up_to_the_cpu({"y": rec}, {"y": rec | changed})
    with pytest.raises(AssertionError):
        _same_checks_up_to_the_cpu({"y": rec}, {"z": rec})


def test_all_samples_present_and_small():
    total = 0
    for s in SAMPLES:
        path = DIR / s.file
        assert path.exists(), f"{path} missing"
        total += path.stat().st_size
    assert total < 12e6


def test_recompute_pair_differs_only_by_recompute():
    with _open("bert_tiny_mk2.pvl") as a, _open("bert_tiny_mk2_recompute.pvl") as b:
        ca, cb = dict(a.run["config"]), dict(b.run["config"])
        assert ca.pop("recompute") is False and cb.pop("recompute") is True
        assert ca == cb
        assert b.liveness_steps.total_bytes.max() < a.liveness_steps.total_bytes.max()
        assert b.liveness_steps.max_tile_bytes.max() <= a.liveness_steps.max_tile_bytes.max()
        assert _compute_cycles(b) > _compute_cycles(a)
        assert all(c["passed"] for c in b.run["numeric_checks"].values())


def test_mk2_bow_pair():
    with _open("mlp_mk2.pvl") as a, _open("mlp_bow.pvl") as b:
        assert a.target.device == "ipu-mk2" and b.target.device == "ipu-bow"
        ca, cb = dict(a.run["config"]), dict(b.run["config"])
        assert ca.pop("device") != cb.pop("device") and ca == cb
        # Bow runs the same cycles at a higher clock
        assert a.run["total_cycles"] == b.run["total_cycles"]
        assert b.run["seconds"] < a.run["seconds"]


def test_oom_sample_is_bert_large_sized_and_out_of_memory():
    with _open("bert_large_1ipu_oom.pvl") as p:
        cfg = p.run["config"]
        assert (cfg["hidden"], cfg["heads"], cfg["ipus"]) == (1024, 16, 1)
        assert p.run["fits"] is False and p.run["timing_only"] is True
        mt = p.stored_table("memory_by_tile")
        assert mt["over_capacity"].sum() > 100
        worst = p.run["oom_tiles"][0]
        assert worst[2] == mt["total"].max() > p.target.sram_bytes_per_tile


def test_pipeline_sample_uses_every_ipu():
    with _open("bert_mini_4ipu_pipeline.pvl") as p:
        assert p.target.num_ipus == 4 and p.run["fits"]
        steps = p.stored_table("steps")
        assert (steps.kind == STEP_KIND_CODE["exchange_global"]).any()
        assert set(steps.ipu[steps.kind == STEP_KIND_CODE["compute"]]) >= {0, 1, 2, 3}
        assert all(c["passed"] for c in p.run["numeric_checks"].values())


@pytest.mark.slow
def test_bert_large_stack_pipelined_over_4_ipus_needs_less_per_tile():
    """The OOM sample's 4 BERT-large layers spread over 4 IPUs (one per IPU): the middle IPUs, which
    hold only an encoder layer, fit; the first (embedding, 30,522 x 1,024 table) and the last (MLM
    head, whose vocab-sized decoder matmul the planner stages on few tiles) need more."""
    from popvision_lite.emulator.models.config import make_config
    from popvision_lite.emulator.models.emulated import run_model

    s = BY_FILE["bert_large_1ipu_oom.pvl"]
    r = run_model(make_config(s.model, **(s.args | {"ipus": 4})), timing_only=True)
    ts = r.profile_data.run["training_state"]
    cap = r.profile_data.target.sram_bytes_per_tile
    assert ts[1]["fits"] and ts[2]["fits"] and ts[1]["max_tile_bytes"]["need"] <= cap
    with _open("bert_large_1ipu_oom.pvl") as one:
        assert one.stored_table("memory_by_tile")["total"].max() > max(t["max_tile_bytes"]["need"] for t in ts[1:3])
