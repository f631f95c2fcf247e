"""Profiles of format 2.0 (the bundled samples as they were before 2.1 added ``run["op_counts"]``) still
open, and what 2.1 records can be reconstructed from them."""

from pathlib import Path

import numpy as np
import pytest

import popvision_lite as pvl
from popvision_lite.analysis import model_pass as wl

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "v2.0"
SAMPLES = Path(__file__).resolve().parents[2] / "sample_profiles"


@pytest.mark.parametrize("name", ["bert_tiny_mk2.pvl", "bert_mini_4ipu_pipeline.pvl"])
def test_v2_0_profiles_open_and_give_a_verdict(name):
    with pvl.open(FIXTURES / name) as p:
        assert (p.format_version, p.format_minor) == (2, 0)
        assert "op_counts" not in p.run
        assert len(p.steps) > 10 and p.memory.by_tile()["total_bytes"].max() > 0
        v = pvl.verdict(p)
        assert v.ipu.samples_per_second > 0 and v.gpu.samples_per_second > 0


def test_v2_0_pipeline_op_counts_reconstructed_as_2_1_records_them():
    with pvl.open(FIXTURES / "bert_mini_4ipu_pipeline.pvl") as old, \
            pvl.open(SAMPLES / "bert_mini_4ipu_pipeline.pvl") as new:
        assert (new.format_version, new.format_minor) >= (2, 1) and "op_counts" in new.run
        co, cn = old.run["config"], new.run["config"]  # the same run (fields added since keep their defaults)
        assert {k: co[k] for k in co} == {k: cn[k] for k in co}
        a, b = wl.op_counts(old), wl.op_counts(new)
        assert "reconstructed" in a.basis and "op_counts" in b.basis
        assert list(old.ops["name"]) == list(new.ops["name"])
        for f in ("calls_per_microbatch", "table_runs", "model_calls", "recompute_runs"):
            np.testing.assert_array_equal(np.asarray(getattr(a, f)), np.asarray(getattr(b, f)), err_msg=f)
