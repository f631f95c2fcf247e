"""bench/verdict_check.py's analytic workloads match their published sizes (no emulation here)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
import bench.verdict_check as vc  # noqa: E402
from popvision_lite.analysis import gpu_estimate as ge  # noqa: E402


def test_resnet50_table_matches_published_size():
    ops, params, acts = vc.resnet50_ops(1)
    fwd = ops[ops["name"].str.endswith("/fwd")]
    # ResNet-50 v1.5: ~4.1 G multiply-adds per 224x224 image forward, 25.6 M parameters (He et al. 2016 table 1;
    # NVIDIA DeepLearningExamples ResNet-50 v1.5 README)
    assert fwd["flops"].sum() / 2 == pytest.approx(4.1e9, rel=0.02)
    assert params == pytest.approx(25.6e6, rel=0.01)
    # backward = data-gradient + weight-gradient GEMMs: 2x forward, except the first conv (no input gradient)
    bwd = ops[ops["name"].str.endswith(("/dgrad", "/wgrad"))]
    assert 1.9 < bwd["flops"].sum() / fwd["flops"].sum() < 2.0
    assert acts > 0


def test_bert_large_parameters_and_shapes():
    assert vc.bert_params() == pytest.approx(336e6, rel=0.01)   # BERT-Large ~335-340 M (Devlin et al. 2018)
    f, dg, wg = vc.gemm_fwd_bwd("x", 512, 4096, 1024)
    assert f["flops"] == dg["flops"] == wg["flops"] == 2 * 512 * 4096 * 1024
    assert (wg["m"], wg["n"], wg["k"]) == (1024, 4096, 512)
    # Korthikanti et al. 2022: 34 s b h + 5 a s^2 b bytes per layer
    assert vc.bert_activation_bytes_per_sample(512) == pytest.approx(24 * (34 * 512 * 1024 + 5 * 16 * 512 ** 2))


def test_split_k_fills_the_gpu_for_weight_gradients():
    # a 64 x 64 output with a 1.28 M-long reduction (a ResNet weight gradient): one tile, split along K
    import pandas as pd

    row = vc.gemm("wgrad", 64, 64, 1_280_000)
    e = ge.estimate_ops(pd.DataFrame([row]), "a100-80gb").iloc[0]
    assert e.occupancy == 1.0
    short = ge.estimate_ops(pd.DataFrame([vc.gemm("short", 64, 64, 128)]), "a100-80gb").iloc[0]
    assert short.occupancy == pytest.approx(1 / 108)


def test_ipu_side_uses_the_measured_pod16_rows():
    cases = vc.pod16_cases()   # the rows `popvision-lite validate` emulates, nothing emulated here
    assert set(cases) == {"bert", "resnet"}
    b, r = cases["bert"], cases["resnet"]
    assert (b.config["replicas"], b.config["pipeline_stages"], b.config["grad_accum"]) == (4, 4, 192)
    assert (r.config["replicas"], r.config["batch"], r.config["grad_accum"]) == (16, 20, 10)
    assert b.measured_sps == pytest.approx(1523.8) and r.measured_sps == pytest.approx(29516.1)
