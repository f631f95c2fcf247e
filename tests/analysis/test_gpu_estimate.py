"""GPU time estimate (analysis/gpu_estimate.py): fractions and overheads from the device specs."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from popvision_lite.analysis import gpu_estimate as ge
from popvision_lite.devices import DeviceSpecError, devices_dir, list_devices, load_device
from popvision_lite.errors import ConfigError

SAMPLES = Path(__file__).resolve().parents[2] / "sample_profiles"


def _ops(rows):
    return pd.DataFrame(rows, columns=["name", "type", "precision", "flops", "min_bytes"])


def test_every_gpu_spec_has_cited_estimator_constants():
    for gid in list_devices("gpu"):
        spec = load_device(gid)
        for key in ("gemm_fraction", "hbm_fraction", "launch_overhead_s", "allreduce_bus_bytes_per_s"):
            q = spec.quantity(f"estimator.{key}")
            assert q.source and q.basis in ("vendor", "measured", "derived", "assumed", "calibrated"), (gid, key)
        assert ge.gpu_model(gid).assumed == (), gid  # nothing silently defaulted


def test_large_gemm_runs_at_the_measured_fraction_of_peak():
    a100 = ge.gpu_model("a100-80gb")
    m = n = k = 8192
    ops = _ops([("big", "matmul", "fp16", 2 * m * n * k, 2 * (m * k + k * n + m * n))]).assign(m=m, n=n, k=k)
    e = ge.estimate_ops(ops, a100).iloc[0]
    # 64 x 64 = 4096 output tiles of 128 x 128 in 38 waves over 108 SMs (the last one 92 % full)
    assert e.occupancy == pytest.approx(4096 / (38 * 108)) and e.est_bound == "compute"
    # the 134 MB output is larger than the 40 MB L2: each wave also writes its C tiles at an SM's share of HBM
    epilogue = 38 * 128 * 128 * 2 / (2.039e12 * 0.88 / 108)
    main = 2 * m * n * k / (312e12 * 0.859 * 4096 / (38 * 108))
    assert e.est_time_s == pytest.approx(main + epilogue + 3e-6, rel=1e-9)
    assert e.bound_time_s == pytest.approx(2 * m * n * k / 312e12)   # the roofline bound stays separate
    assert e.achievable == pytest.approx(2 * m * n * k / 312e12 / (main + epilogue))
    # no wave quantisation (sensitivity): the partly filled last wave counted as full
    assert ge.estimate_ops(ops, a100, wave_quantization=False).iloc[0].occupancy == 1.0


def test_small_ops_are_launch_bound_and_never_faster_than_the_bound():
    ops = _ops([("tiny_mm", "matmul", "fp16", 2 * 64 ** 3, 6 * 64 * 64), ("add", "add", "fp16", 4096, 3 * 8192),
                ("gelu", "gelu", "fp32", 10 ** 6, 8 * 10 ** 6)])
    e = ge.estimate_ops(ops, "a100-80gb")
    assert list(e.est_bound[:2]) == ["launch", "launch"]
    assert (e.est_time_s >= e.bound_time_s + 3e-6 - 1e-15).all()
    # a big elementwise op: its bytes at the measured fraction of HBM bandwidth
    big = ge.estimate_ops(_ops([("ew", "add", "fp16", 1e8, 6e8)]), "a100-80gb").iloc[0]
    assert big.est_bound == "hbm" and big.est_time_s == pytest.approx(6e8 / (2.039e12 * 0.88) + 3e-6)


def test_gemm_occupancy_from_shape_columns_and_from_bytes():
    a100 = ge.gpu_model("a100-80gb")
    # 512 x 1024 output = 32 tiles of 128x128 on 108 SMs
    shaped = _ops([("q", "matmul", "fp16", 2 * 512 * 1024 * 1024, 2 * (512 * 1024 + 1024 * 1024 + 512 * 1024))])
    e_bytes = ge.estimate_ops(shaped, a100).iloc[0]
    e_shape = ge.estimate_ops(shaped.assign(m=512, n=1024, k=128), a100).iloc[0]   # too short to split K
    assert e_shape.occupancy == pytest.approx(32 / 108)
    # K = 1024: split-K in slices of >= 128 onto the idle SMs, as many as fill one wave (32 tiles x 3 slices)
    assert ge.estimate_ops(shaped.assign(m=512, n=1024, k=1024), a100).iloc[0].occupancy == pytest.approx(96 / 108)
    # without a shape: the equivalent square output solved from FLOPs and bytes, the optimistic root
    assert 32 / 108 <= e_bytes.occupancy <= 1.0
    assert e_shape.compute_s == pytest.approx(shaped.flops[0] / (312e12 * 0.859 * 32 / 108))


def test_allreduce_and_training_step():
    a100 = ge.gpu_model("a100-80gb")
    t, src = ge.allreduce_seconds(1e9, 8, a100)
    assert t == pytest.approx(2 * 7 / 8 * 1e9 / 200e9) and "nccl-tests" in src
    assert ge.allreduce_seconds(1e9, 1, a100)[0] == 0.0
    m = 4096
    ops = _ops([("mm", "matmul", "fp16", 2 * m ** 3, 6 * m * m), ("w_sgd", "sgd_update", "fp16", 2 * m * m, 6 * m * m)])
    one = ge.estimate_training(ops, a100, 1, samples_per_pass=8)
    eight = ge.estimate_training(ops, a100, 8, samples_per_pass=8)
    assert one.memory["params"] == pytest.approx(m * m)
    assert one.allreduce_time_s == 0 and eight.allreduce_time_s == pytest.approx(2 * 7 / 8 * 2 * m * m / 200e9)
    assert eight.samples_per_second == pytest.approx(8 * 8 / (one.step_time_s + eight.allreduce_time_s))
    assert eight.bound_samples_per_second > eight.samples_per_second
    # gradient accumulation: a global batch of 64 on 8 GPUs = one pass each; 128 = two
    two = ge.estimate_training(ops, a100, 8, samples_per_pass=8, samples_per_step=128)
    assert two.passes_per_step == 2 and two.step_time_s > eight.step_time_s


def test_memory_fit_by_optimizer():
    ops = _ops([("mm", "matmul", "fp16", 1e12, 1e9)])
    small = ge.estimate_training(ops, "a100-80gb", samples_per_pass=1, params=1e9, optimizer="lamb")
    assert small.memory["total_bytes"] == pytest.approx(16e9) and small.fits
    big = ge.estimate_training(ops, "a100-80gb", samples_per_pass=1, params=6e9, optimizer="adam")
    assert not big.fits and big.memory["total_bytes"] == pytest.approx(96e9)
    acts = ge.estimate_training(ops, "a100-80gb", samples_per_pass=4, params=1e9, optimizer="sgd",
                                activation_bytes_per_sample=20e9)
    assert not acts.fits and acts.memory["activation_bytes"] == pytest.approx(80e9)


def test_bad_inputs_are_clear_errors(tmp_path):
    with pytest.raises(ConfigError, match="not a GPU"):
        ge.gpu_model("ipu-mk2")
    with pytest.raises(ConfigError, match="optimizer"):
        ge.estimate_training(_ops([]), "a100-80gb", samples_per_pass=1, optimizer="rmsprop")
    text = (devices_dir() / "v100.toml").read_text().replace("value = 0.88,", "value = 1.5,")
    p = tmp_path / "v100.toml"
    p.write_text(text)
    with pytest.raises(ConfigError, match="hbm_fraction"):
        ge.gpu_model(load_device(p))
    ipu = (devices_dir() / "ipu-mk2.toml").read_text() + \
        '\n[estimator]\nhbm_fraction = { value = 0.5, basis = "assumed", source = "x" }\n'
    q = tmp_path / "ipu-mk2.toml"
    q.write_text(ipu)
    with pytest.raises(DeviceSpecError, match="only GPU"):
        load_device(q)


def test_bert_tiny_sample_gpu_estimate_is_not_the_bound():
    import popvision_lite as pvl

    with pvl.open(SAMPLES / "bert_tiny_mk2.pvl") as p:
        est = ge.estimate_training(p.ops, "a100-80gb", samples_per_pass=4)
        ipu_s = p.run["seconds"]
    # the bound (what the roofline called '15x faster') vs the estimate: launch overhead dominates tiny ops
    assert est.bound_by == "launch"
    assert est.step_time_s > 10 * (4 / est.bound_samples_per_second)
    assert est.step_time_s > ipu_s and math.isfinite(est.samples_per_second)


def test_gpu_micro_batch_is_the_largest_fitting_multiple_that_keeps_the_global_batch():
    fit = ge.fitting_micro_batch
    gb = 1e9
    # 384 samples per GPU per step in passes of 4: 96 passes; 1 GB of activations per sample, 80 GB of HBM
    assert fit(4, 384, params=0, optimizer="sgd", activation_bytes_per_sample=gb, gpu="a100-80gb") == 64  # 16 | 96
    # 2 G parameters of LAMB state (16 B each = 32 GB) leave 48 GB: 12 passes' worth
    assert fit(4, 384, params=2e9, optimizer="lamb", activation_bytes_per_sample=gb, gpu="a100-80gb") == 48
    assert fit(4, 10, params=0, optimizer="sgd", activation_bytes_per_sample=gb, gpu="a100-80gb") == 4  # 2.5 passes
    assert fit(4, 2, params=0, optimizer="sgd", activation_bytes_per_sample=gb, gpu="a100-80gb") == 2   # share < pass
    assert fit(4, 384, params=10e9, optimizer="adam", activation_bytes_per_sample=gb, gpu="a100-80gb") == 4
    ops = _ops([dict(name="mm", type="matmul", precision="fp16", flops=2 * 512 ** 3, min_bytes=3 * 2 * 512 ** 2)])
    one = ge.estimate_training(ops, "a100-80gb", samples_per_pass=4, samples_per_step=64)
    big = ge.estimate_training(ops, "a100-80gb", samples_per_pass=4, samples_per_step=64, micro_batch=16)
    assert (one.micro_batch, one.passes_per_step, big.micro_batch, big.passes_per_step) == (4, 16, 16, 4)
    assert big.ops["flops"].iloc[0] == 4 * ops["flops"].iloc[0]          # the op list scaled to the micro-batch
    assert big.step_time_s < one.step_time_s                             # fewer launches, fuller GPU
    with pytest.raises(ConfigError, match="micro-batch"):
        ge.estimate_training(ops, "a100-80gb", samples_per_pass=4, micro_batch=-1)
