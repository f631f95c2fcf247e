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
        est = ge.estimate_training(p.stored_table("ops"), "a100-80gb", samples_per_pass=4)
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


def _rows(kind, m, n, precision="fp16"):
    e = ge.BYTES_PER_ELEMENT[precision]
    return pd.DataFrame([dict(name=kind, type=kind, precision=precision, flops=m * n, min_bytes=2 * e * m * n,
                              m=m, n=n)])


def test_softmax_passes_and_exponentials_from_the_row_width():
    a100 = ge.gpu_model("a100-80gb")
    hbm = 2.039e12 * 0.88
    # rows of <= 1024 columns: one warp per row, the row in registers: compulsory bytes only
    narrow = ge.estimate_ops(_rows("softmax", 4096, 1024), a100).iloc[0]
    assert narrow.op_kind == "softmax"
    assert narrow.memory_s == pytest.approx(2 * 2 * 4096 * 1024 / hbm + 4096 * 1024 / a100.sfu_ops_per_s)
    # wider rows: one block per row, two of the three reads from HBM + the write, and the exp-sum pass's exps
    wide = ge.estimate_ops(_rows("softmax", 4096, 4096), a100).iloc[0]
    assert wide.memory_s == pytest.approx(3 * 2 * 4096 * 4096 / hbm + 4096 * 4096 / 2.437e12)
    assert wide.achievable < 0.88 * 2 / 3 + 1e-9          # below the streaming fraction on compulsory bytes
    # the backward is costed as an elementwise pass (no row passes counted)
    assert ge.op_kind("softmax_bwd") == "elementwise" and ge.op_kind("layer_norm") == "layernorm"


def test_layernorm_rows_wider_than_the_on_chip_budget_re_read_from_hbm():
    a100 = ge.gpu_model("a100-80gb")
    fits = ge.estimate_ops(_rows("layer_norm", 4096, 8192), a100).iloc[0]        # 16 KB rows
    assert fits.memory_s == pytest.approx(2 * 2 * 4096 * 8192 / (2.039e12 * 0.88))
    wide = ge.estimate_ops(_rows("layer_norm", 4096, 32768), a100).iloc[0]       # 64 KB rows: 3/4 re-read
    miss = 1 - 16384 / (2 * 32768)
    assert wide.memory_s == pytest.approx((1 + miss / 2) * 2 * 2 * 4096 * 32768 / (2.039e12 * 0.594))
    # without a row width (a profile's op) the row is taken to fit
    unshaped = ge.estimate_ops(_rows("layer_norm", 4096, 32768).drop(columns=["m", "n"]), a100).iloc[0]
    assert unshaped.memory_s == pytest.approx(2 * 2 * 4096 * 32768 / (2.039e12 * 0.88))


def test_gemm_epilogue_only_when_the_output_spills_past_the_l2():
    a100 = ge.gpu_model("a100-80gb")

    def one(m, n, k, b=1):
        return ge.estimate_ops(pd.DataFrame([dict(name="g", type="bmm", precision="fp16", flops=2 * b * m * n * k,
                                                  min_bytes=2 * b * (m * k + k * n + m * n), m=m, n=n, k=k,
                                                  batch=b)]), a100).iloc[0]

    small = one(8192, 1024, 1024)                          # 16 MB output stays in the 40 MB L2
    assert small.compute_s == pytest.approx(2 * 8192 * 1024 * 1024 / (312e12 * 0.859 * 512 / (5 * 108)))
    qk = one(2048, 2048, 128, b=192)                       # GPT-3's Q.K^T: 1.6 GB of scores
    tiles = 192 * 16 * 16
    waves = math.ceil(tiles / 108)
    main = 2 * 192 * 2048 * 2048 * 128 / (312e12 * 0.859 * tiles / (waves * 108))
    assert qk.compute_s == pytest.approx(main + waves * 128 * 128 * 2 / (2.039e12 * 0.88 / 108))
    assert qk.compute_s > qk.memory_s                      # the epilogue, not the compulsory bytes, decides


def test_fp8_gemms_use_the_fp8_rate_where_the_gpu_has_one():
    ops = _ops([("mm", "matmul", "fp16", 2 * 8192 ** 3, 6 * 8192 ** 2), ("ln", "layer_norm", "fp16", 1e6, 4e8)])
    h16 = ge.estimate_ops(ops, "h100-sxm")
    h8 = ge.estimate_ops(ops, "h100-sxm", gemm_precision="fp8")
    # the main loop runs at the FP8 rate and the measured FP8 matmul fraction (MAMF FP8, 0.709 on the H100); the
    # 16-bit output's epilogue (past the 50 MB L2) is unchanged
    main16 = 2 * 8192 ** 3 / (989e12 * 0.801 * h16.occupancy[0])
    main8 = 2 * 8192 ** 3 / (1979e12 * 0.709 * h8.occupancy[0])
    assert h16.compute_s[0] - h8.compute_s[0] == pytest.approx(main16 - main8)
    assert h8.memory_s[1] == h16.memory_s[1]               # not a GEMM: stays 16-bit
    a16, a8 = ge.estimate_ops(ops, "a100-80gb"), ge.estimate_ops(ops, "a100-80gb", gemm_precision="fp8")
    assert a8.compute_s[0] == a16.compute_s[0]             # no FP8 on the A100
    t = ge.estimate_training(ops, "h100-sxm", 8, samples_per_pass=8, params=1e8, optimizer="lamb", precision="fp8")
    assert t.memory["weights_bytes"] == 2e8                # FP8 training keeps 16-bit weights
    assert any("FP8" in n for n in t.notes)


def test_gpu_micro_batch_is_a_whole_number():
    ops = _ops([dict(name="mm", type="matmul", precision="fp16", flops=2 * 512 ** 3, min_bytes=3 * 2 * 512 ** 2)])
    for bad in (1.5, 0, -2, math.nan, True):
        with pytest.raises(ConfigError, match="whole number"):
            ge.estimate_training(ops, "a100-80gb", samples_per_pass=4, samples_per_step=64, micro_batch=bad)
    # 12 samples per step over 8 GPUs: 1.5 each, run as passes of 1
    e = ge.estimate_training(ops, "a100-80gb", 8, samples_per_pass=4, samples_per_step=12)
    assert e.micro_batch == 1 and e.passes_per_step == pytest.approx(1.5)
    assert ge.fitting_micro_batch(4, 1.5, params=0, optimizer="sgd", activation_bytes_per_sample=1e9,
                                  gpu="a100-80gb") == 1


def test_achievable_fraction_per_kind_for_the_notes():
    ops = pd.concat([_rows("softmax", 4096, 4096), _rows("layer_norm", 4096, 4096),
                     _ops([("mm", "matmul", "fp16", 2 * 4096 ** 3, 6 * 4096 ** 2)])], ignore_index=True)
    est = ge.estimate_ops(ops, "a100-80gb")
    kinds = {d["kind"]: d for d in ge.achievable_by_kind(est)}
    assert set(kinds) == {"softmax", "layernorm", "gemm"}
    assert sum(d["share"] for d in kinds.values()) == pytest.approx(1.0)
    assert 0.5 < kinds["gemm"]["achievable"] <= 0.859 and kinds["layernorm"]["achievable"] == pytest.approx(0.88)
    assert "softmax" in ge.describe_achievable(est) and "of the tensor peak" in ge.describe_achievable(est)
