"""bench/gpu_ops.py: the per-op A100 validation set, the harness-overhead model and the calibrated constants
(no accuracy target is asserted here: the bench reports it)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench import gpu_ops as go  # noqa: E402
from popvision_lite.devices import load_device  # noqa: E402


@pytest.fixture(scope="module")
def df():
    return go.load()


def test_every_row_says_where_it_came_from_and_how_it_was_timed(df):
    assert set(df["source_file"].str.extract(r"^(ae/figure5/\w+/real_hardware/\w+_A100\.csv)$")[0].dropna()) == \
        set(df["source_file"])
    assert (df["commit"].str.fullmatch(r"[0-9a-f]{40}")).all()
    assert set(df["harness"]) == {"yes", "subtracted", "no"}
    assert df["timing"].str.len().min() > 20 and (df["measured_s"] > 0).all()
    # the sweeps of the table and the 12 ops of the GPT-3 layer
    assert {"gemm K=N=12288", "gemm M=8192 N=K", "softmax M=4096", "softmax N=4096", "layernorm M=4096",
            "layernorm N=4096", "gelu"} <= set(df["sweep"])
    assert (df["sweep"].str.startswith("GPT-3")).sum() == 12
    assert df.loc[df["sweep"].str.startswith("GPT-3"), "measured_s"].sum() == pytest.approx(66.75e-3, rel=1e-3)


def test_harness_overhead_is_fitted_on_named_rows_only_and_not_on_judged_ones(df):
    p = go.predict(df)
    fit = p[p["role"] == "fit-harness"]
    assert set(fit["op_class"].map(go._family)) == {"gemm", "softmax", "layernorm", "gelu"}
    assert np.allclose(fit["ratio"], 1.0)                 # a fit row reproduces itself: it is not judged
    over = go.harness_overheads(df, p["kernel_est_s"])
    for fam, (before, overlapped) in over.items():
        assert 5e-6 < before < 60e-6 and 0 <= overlapped < 20e-6, fam      # tens of us, not the 3 us launch
    row = p[(p["harness"] == "yes") & (p["op_class"] == "layernorm")].iloc[0]
    b, o = over["layernorm"]
    assert row.predicted_s == pytest.approx(b + max(o, row.kernel_est_s))
    assert (p.loc[p["harness"] != "yes", "harness_s"] == 0).all()


def test_calibrated_constants_are_reproduced_from_their_fit_rows(df):
    fitted = go.fit_constants(df)
    spec = load_device("a100-80gb")
    for key in ("softmax_hbm_reads", "wide_row_hbm_fraction"):
        assert spec.basis(f"estimator.{key}") == "calibrated"
        assert fitted[key] == pytest.approx(spec.value(f"estimator.{key}"), abs=1e-3), key
    assert spec.basis("estimator.row_onchip_bytes") == "calibrated"
    for key in ("softmax_hbm_reads", "row_onchip_bytes", "wide_row_hbm_fraction"):
        assert "fitted on" in spec.source(f"estimator.{key}") and "judged on" in spec.source(f"estimator.{key}")
    assert {"fit-softmax_hbm_reads", "fit-row_onchip_bytes+wide_row_hbm_fraction"} <= set(df["role"])
