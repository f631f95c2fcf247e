"""The GPU estimate's op list from a whole graph's build alone (``emulated.op_profile``, ``engine.op_tables``):
every column the op list reads is the one the compiled, timing-only run writes, so the GPU rows' predictions
are the same (``validate``'s GPU section, gpu_validation.op_list)."""

from __future__ import annotations

import pandas as pd
import pytest

from popvision_lite import gpu_validation as gv
from popvision_lite.emulator.models import emulated
from popvision_lite.emulator.models.config import make_config
from tests.conftest import RESNET50_DEEP, SMALL_DEVICE
from tests.support.op_info import drop_first_ops_field

# the conftest fixture's build (ResNet-50's depth at tiny widths, outlined blocks and graph functions replayed,
# the forward recomputed): the graph whose programs a block's second call and recomputation run again
CFG = RESNET50_DEEP | dict(recompute=True, outline=True)


@pytest.fixture(scope="module")
def built():
    emulated._GRAPH_CACHE.clear()
    try:
        return emulated.op_profile(make_config("resnet-tiny", **CFG), SMALL_DEVICE)
    finally:
        emulated.release_graphs()


def test_the_build_gives_the_compiled_runs_op_and_program_columns(built, resnet50_deep):
    run = resnet50_deep(True, True)
    full = run.profile_data
    assert built is not None
    ops, progs = built.ops, built.programs
    assert list(ops.columns) == ["op_id", "name", "type", "precision", "flops", "min_bytes", "plan"]
    pd.testing.assert_frame_equal(ops, full.ops[list(ops.columns)])
    pd.testing.assert_frame_equal(progs, full.programs[list(progs.columns)])
    # what makes the flops sums more than one pass over the compute sets: programs called again (the outlined
    # blocks, the graph functions) and recomputed, so an op's flops are its compute sets' runs, not their count
    assert progs["name"].str.endswith("/replay").sum() > 10
    assert built.run["config"] == full.run["config"]


def test_the_op_list_and_the_gpu_rows_are_the_same_from_the_build(built, resnet50_deep):
    full = resnet50_deep(True, True).profile_data
    a = gv.op_list("ResNet-50", emulate=lambda *_a, **_k: built)
    b = gv.op_list("ResNet-50", emulate=lambda *_a, **_k: full)
    pd.testing.assert_frame_equal(a.kernels, b.kernels[list(a.kernels.columns)])
    assert (a.samples_per_pass, a.cfg, a.params, a.scores_kept, a.notes) == \
        (b.samples_per_pass, b.cfg, b.params, b.scores_kept, b.notes)
    assert a.params > 0 and len(a.kernels) > 100
    for row in [r for r in gv.load_gpu_rows() if r.benchmark == "ResNet-50"][:2]:
        x, y = gv.predict_row(row, a), gv.predict_row(row, b)
        assert not x.error and (x.predicted, x.placement, x.fits, x.notes) == (y.predicted, y.placement, y.fits,
                                                                               y.notes)


def test_what_the_build_alone_does_not_fix_is_emulated(monkeypatch):
    def no_build(*_a, **_k):
        raise AssertionError("built")

    monkeypatch.setattr(emulated, "build_model", no_build)
    # the training composition of a whole graph (the stage-graph composition's build-only op list:
    # tests/test_gpu_op_profile_composed.py)
    for extra in (dict(grad_accum=2), dict(replicas=2, ipus=2), dict(optimizer="adam")):
        assert emulated.op_profile(make_config("resnet-tiny", **extra), SMALL_DEVICE) is None, extra


def test_an_op_without_its_recorded_bytes_is_compiled_instead(monkeypatch):
    drop_first_ops_field(monkeypatch, "min_bytes")
    assert emulated.op_profile(make_config("resnet-tiny", layers=14, image=32, batch=2), SMALL_DEVICE) is None


def test_the_gpu_estimate_builds_resnet_and_emulates_the_transformers(monkeypatch):
    calls = []

    def fake_run(cfg, device, timing_only=False, **_k):
        calls.append(cfg.model)
        raise RuntimeError("emulated")

    monkeypatch.setattr(emulated, "run_model", fake_run)
    monkeypatch.setattr(emulated, "op_profile", lambda cfg, device: "built" if cfg.model == "resnet" else None)
    assert gv._emulate("resnet50", batch=20) == "built"
    with pytest.raises(RuntimeError, match="emulated"):
        gv._emulate("bert-large", batch=8, seq=256)
    assert calls == ["bert"]

