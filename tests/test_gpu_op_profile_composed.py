"""The GPU estimate's op list of a stage-graph composition (BERT timing-only, GPT) from the stage programs' builds
alone (``pipeline.op_profile``): the op list, and so the GPU rows' predictions, are the ones the compiled and
composed run gives (``validate``'s BERT and GPT GPU rows, gpu_validation.op_list)."""

from __future__ import annotations

import pandas as pd
import pytest

from popvision_lite import gpu_validation as gv
from popvision_lite.emulator.models import emulated
from popvision_lite.emulator.models.config import make_config
from tests.conftest import SMALL_DEVICE
from tests.support.op_info import drop_first_ops_field

# small transformers that still exercise every count the composition gives an op: three distinct stage graphs
# (embedding, body, heads) over four IPUs with layers placed unevenly, recomputation (a forward op run twice
# per call), a serialised attention core (its ops once per block) and tensor parallelism (the shard's
# parameters, the op list's whole-model rescaling)
SMALL = dict(layers=5, hidden=64, heads=4, seq=32, vocab=512)
CASES = {
    "bert": ("bert", dict(SMALL, batch=2, ipus=4, recompute=True, mask_tokens=4)),
    "gpt": ("gpt2-small", dict(SMALL, batch=1, ipus=4, tensor_parallel=2, attention_serialisation=2,
                               recompute=True)),
}


def _both(name):
    model, kw = CASES[name]
    cfg = make_config(model, **kw)
    try:
        built = emulated.op_profile(cfg, SMALL_DEVICE)
        full = emulated.run_model(cfg, SMALL_DEVICE, timing_only=True).profile_data
    finally:
        emulated.release_graphs()
    return built, full


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_stage_builds_give_the_composed_runs_op_list(name):
    built, full = _both(name)
    assert built is not None
    ops = built.ops
    pd.testing.assert_frame_equal(ops, full.ops[list(ops.columns)])
    pd.testing.assert_frame_equal(built.programs[["prog_id", "parent_id", "op_id", "repeat", "name"]],
                                  full.programs[["prog_id", "parent_id", "op_id", "repeat", "name"]])
    assert built.run["op_counts"] == full.run["op_counts"]
    assert built.run["config"] == full.run["config"]
    assert [t["params"] for t in built.run["training_state"]] == [t["params"] for t in full.run["training_state"]]
    for k in built.run["schedule"]:
        assert built.run["schedule"][k] == full.run["schedule"][k], k
    assert built.target == full.target
    counts = full.run["op_counts"]
    # the cases are what they claim: ops run more than once per call (recomputation, GPT: a serialised core),
    # and layer-body ops more than once per micro-batch
    assert max(counts["runs_per_call"]) > 1 and max(counts["calls_per_microbatch"]) > 1
    assert full.run["schedule"]["distinct_stage_programs"] >= 2

    benchmark, attention, epilogues = ("BERT", "fmha", True) if name == "bert" else ("GPT-3-175B", "flash", True)
    a = gv.op_list(benchmark, emulate=lambda *_a, **_k: built)
    b = gv.op_list(benchmark, emulate=lambda *_a, **_k: full)
    pd.testing.assert_frame_equal(a.kernels, b.kernels[list(a.kernels.columns)])
    assert (a.samples_per_pass, a.cfg, a.params, a.scores_kept, a.notes) == \
        (b.samples_per_pass, b.cfg, b.params, b.scores_kept, b.notes)
    assert len(a.kernels) > 50 and a.params > 0
    row = next(r for r in gv.load_gpu_rows() if r.benchmark == benchmark)
    x, y = gv.predict_row(row, a), gv.predict_row(row, b)
    assert (x.predicted, x.placement, x.fits, x.error, x.notes) == (y.predicted, y.placement, y.fits, y.error,
                                                                    y.notes)


def test_an_op_without_its_recorded_type_is_composed_from_the_compile(monkeypatch):
    drop_first_ops_field(monkeypatch, "type")
    model, kw = CASES["bert"]
    assert emulated.op_profile(make_config(model, **kw), SMALL_DEVICE) is None
