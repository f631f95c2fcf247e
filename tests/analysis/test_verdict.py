"""IPU-or-GPU verdict (analysis/verdict.py), its CLI and the Python API."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

import popvision_lite as pvl
from popvision_lite.analysis import gpu_estimate as ge
from popvision_lite.analysis.verdict import verdict
from popvision_lite.cli import main
from popvision_lite.errors import ConfigError

SAMPLES = Path(__file__).resolve().parents[2] / "sample_profiles"


V1 = Path(__file__).resolve().parents[1] / "fixtures" / "v1"


@pytest.fixture(scope="module")
def tiny():
    with pvl.open(SAMPLES / "bert_tiny_mk2.pvl") as p:
        yield p


def test_old_profile_throughput_is_derived_and_labelled_so():
    with pvl.open(V1 / "bert_tiny_mk2.pvl") as old:  # written before runs recorded samples_per_second
        v = verdict(old)
        assert v.ipu.samples_per_second == pytest.approx(4 / old.run["seconds"])
        assert "derived" in v.ipu.basis


def test_bert_tiny_no_longer_claims_the_bound(tiny):
    v = verdict(tiny)
    assert v.ipu.samples_per_second == pytest.approx(tiny.run["samples_per_second"])
    assert "emulated" in v.ipu.basis
    # the IPU step includes PopART's host step loop (inferred from the model: Graphcore ran BERT with PopART),
    # which a 4-sample step cannot hide; said in the IPU's basis of the run
    host = tiny.run["schedule"]["per_step_terms"]["host_step"]
    assert tiny.run["schedule"]["host_framework"] == "popart" and host > 0.1
    assert v.ipu.samples_per_second == pytest.approx(4 / (tiny.run["schedule"]["ipu_step_seconds"] + host))
    # the bound is not the verdict: the estimate is far below it, and the bound is reported as such
    assert v.gpu.samples_per_second < v.gpu_bound_samples_per_second / 10
    assert "kernel launches" in v.gpu.bound_by
    text = v.text()
    assert "BOUND (not an estimate)" in text and "faster" in v.headline()


def test_cost_is_price_times_chips_times_wall_time(tiny):
    v = verdict(tiny, gpus=8, samples=2_000_000)
    i, g = v.ipu, v.gpu
    assert i.chips == 1 and g.chips == 8
    assert i.usd_per_million() == pytest.approx(1.67 * 1 * (1e6 / i.samples_per_second) / 3600)
    assert g.usd_per_million() == pytest.approx(3.18 * 8 * (1e6 / g.samples_per_second) / 3600)
    assert i.seconds_for(2e6) == pytest.approx(2e6 / i.samples_per_second)
    # Mk2 has no price of its own: priced at the Bow's, and said so in plain words; it is not a missing price
    assert v.missing_prices == [] and "no published price" in i.price_source
    assert v.borrowed_prices == [("IPU Mk2 (GC200)", "Bow IPU", 1.67)]
    assert v.price_notes() == ["IPU Mk2 (GC200) has no published price of its own: costed at the Bow IPU's "
                               "$1.67 per chip-hour."]
    assert "cheaper per sample" in v.headline() and "Prices:\n- IPU Mk2 (GC200) has no published" in v.text()
    # same chip count: the GPU estimate with one GPU, as the IPU run has one IPU
    assert v.gpu_same_chips.chips == 1 and v.gpu_same_chips.samples_per_second != g.samples_per_second


def test_pipeline_profile_and_missing_gpu_price():
    with pvl.open(SAMPLES / "bert_mini_4ipu_pipeline.pvl") as p:
        v = verdict(p, gpu="h100-sxm")
        assert v.ipu.chips == 4 and v.gpu.chips == 4
        assert v.gpu.usd_per_chip_hour != v.gpu.usd_per_chip_hour  # nan: no H100 price recorded
        assert v.missing_prices == ["NVIDIA H100 SXM 80GB"]
        assert v.headline().endswith("cost n/a (no price for NVIDIA H100 SXM 80GB)")
        assert v.price_notes() == [
            "IPU Mk2 (GC200) has no published price of its own: costed at the Bow IPU's $1.67 per chip-hour.",
            "NVIDIA H100 SXM 80GB has no published price: no cost is given for it."]
        assert any(n.startswith("data parallel") for n in v.notes)
        with pytest.raises(ConfigError):
            verdict(p, gpus=0)
        with pytest.raises(ConfigError):
            verdict(p, samples=0)


def test_new_profile_keys_are_used(tiny):
    class Shim:  # a profile of the multi-IPU format: samples_per_second and schedule in the run dict
        ops, target, steps, memory = tiny.stored_table("ops"), tiny.target, tiny.stored_table("steps"), tiny.memory
        run = dict(tiny.run) | {"samples_per_second": 1234.5,
                                "schedule": {"replicas": 2, "grad_accum": 4, "samples_per_step": 32,
                                             "micro_batch": 4, "stages": 1}}
    v = verdict(Shim(), gpus=2)
    assert v.ipu.samples_per_second == 1234.5 and "schedule" in v.ipu.basis
    assert v.ipu.chips == 2                     # 2 replicas x the target's 1 IPU
    e = v.gpu_estimate
    # the GPUs' own placement (searched): the step keeps its 32 samples, in whole micro-batches; data parallel over
    # both GPUs, 16 samples each run as one pass (the largest fitting multiple of the IPU's 4), unless splitting
    # the layers is faster
    pl = e.placement
    assert e.samples_per_step == 32 and pl.gpus == 2 and float(e.micro_batch).is_integer()
    assert pl.dp * e.micro_batch * e.passes_per_step == pytest.approx(32)
    d = verdict(Shim(), gpus=2, gpu_tp=1, gpu_pp=1).gpu_estimate
    assert d.micro_batch == 16 and d.passes_per_step == pytest.approx(1)
    e4 = verdict(Shim(), gpus=2, gpu_tp=1, gpu_micro_batch=4).gpu_estimate
    assert e4.passes_per_step == pytest.approx(4) and e4.step_time_s > d.step_time_s  # more launches, smaller GEMMs
    assert e.step_time_s <= d.step_time_s         # the search keeps the fastest placement that fits


def test_cli_and_api(tiny, capsys):
    path = str(SAMPLES / "bert_tiny_mk2.pvl")
    assert main(["verdict", path, "--gpu", "a100-80gb", "--gpus", "8", "--samples", "1e6"]) == 0
    out = capsys.readouterr().out
    assert "NVIDIA A100 80GB SXM x8 (estimated)" in out and "USD per 1 M samples" in out
    assert main(["verdict", path, "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["ipu"]["chips"] == 1 and d["gpu"]["samples_per_second"] > 0 and d["gpu_memory"]["fits"] is True
    assert main(["verdict", "missing.pvl"]) == 2
    assert "no such profile" in capsys.readouterr().err
    with pytest.raises(SystemExit) as ei:
        main(["verdict", path, "--gpus", "0"])
    assert ei.value.code == 2
    v = pvl.verdict(path, gpus=2)
    assert v.gpu.chips == 2 and math.isfinite(v.speedup)
    assert pvl.verdict(tiny).ipu.samples_per_second == v.ipu.samples_per_second


def test_a_run_that_does_not_fit_gets_no_speed_or_cost_claim(capsys):
    """A run that cannot execute has no throughput, time or cost: the verdict says what it would take to fit."""
    with pvl.open(SAMPLES / "bert_large_1ipu_oom.pvl") as p:
        v = verdict(p)
        peak = p.stored_table("memory_by_tile")["total"].max()
    assert not v.ipu.fits and "does NOT fit" in v.headline() and v.gpu.fits
    head = v.headline()
    assert "no speed or cost claim" in head and "faster" not in head and "cheaper" not in head
    # what binds (fit_constraint): 1.09 GiB on 1472 x 624 KiB, no layout fits; and the search that finds what does
    assert f"{peak / 1024:.2f} KiB" in head and "total bytes" in head and "popvision-lite fit" in head
    assert math.isnan(v.speedup) and math.isnan(v.to_dict()["gpu_over_ipu"])
    rows = {r[0]: r for r in v.rows()}
    assert rows["samples/s"][1] == "n/a (does not fit)" and rows["USD per 1 M samples"][1] == "n/a (does not fit)"
    assert not any("same dollars" in k for k in rows)
    # the GPU side still says how it placed the model and in what precision
    assert rows["placement"][2] == v.gpu_estimate.placement.text() and rows["precision"][2] == "fp16"
    assert rows["error band"][2] == v.gpu_band.text()
    assert main(["verdict", str(SAMPLES / "bert_large_1ipu_oom.pvl")]) == 0
    out = capsys.readouterr().out
    assert "no speed or cost claim" in out and "cheaper" not in out and "faster" not in out


def test_gpu_memory_fit_uses_ipu_activations():
    with pvl.open(SAMPLES / "conv_block_mk2.pvl") as p:      # not a transformer: the IPU run's live bytes
        v = verdict(p)
    m = v.gpu_estimate.memory
    assert m["activation_bytes"] > 0 and m["params"] == pytest.approx(ge.params_from_ops(p.stored_table("ops")))
    assert any("not-always-live" in n for n in v.notes)


def _bert_large_shim(tiny, samples_per_step):
    """tiny's ops under a BERT-Large MLPerf config (packs of 512 tokens, 2 sequences per pack)."""
    class Shim:
        ops, target, steps, memory = tiny.stored_table("ops"), tiny.target, tiny.stored_table("steps"), tiny.memory
        run = dict(tiny.run) | {
            "config": dict(model="bert-large", hidden=1024, heads=16, seq=512, layers=24, packing=2.0, batch=2,
                           optimizer="lamb", precision="fp16", training=True),
            "samples_per_second": 1000.0,
            "schedule": {"replicas": 1, "grad_accum": samples_per_step // 4, "samples_per_step": samples_per_step,
                         "micro_batch": 4, "stages": 1}}
    return Shim()


def test_transformer_activations_as_a_gpu_framework_keeps_them_fit_nvidias_micro_batches(tiny):
    from popvision_lite.analysis.verdict import transformer_activation_bytes_per_sample
    from popvision_lite.profile.run_record import ConfigRecord

    # Korthikanti et al. 2022: 24 layers x (34 s h + 5 a s^2) at s = 512 / 2 tokens per sequence
    per_seq = 24 * (34 * 256 * 1024 + 5 * 16 * 256 ** 2)
    assert transformer_activation_bytes_per_sample(ConfigRecord.build(dict(
        model="bert-large", hidden=1024, heads=16, seq=512, layers=24, packing=2.0))) == per_seq
    assert transformer_activation_bytes_per_sample(ConfigRecord.build(dict(model="resnet50", layers=50))) is None
    # NVIDIA's DGX A100 and DGX H100 v3.0 runs: data parallel over 8 GPUs; the verdict's fused attention
    # (FlashAttention) keeps no score matrices: 34 s h per layer
    kw = dict(gpus=8, gpu_tp=1, gpu_pp=1)
    a100 = verdict(_bert_large_shim(tiny, 448), gpu_micro_batch=56, **kw)
    h100 = verdict(_bert_large_shim(tiny, 768), gpu="h100-sxm", gpu_micro_batch=96, **kw)
    flash = 24 * 34 * 256 * 1024
    for v, mb in ((a100, 56), (h100, 96)):
        m = v.gpu_estimate.memory
        assert v.gpu_estimate.micro_batch == mb and m["activation_bytes"] == pytest.approx(mb * flash)
        assert m["fits"] and m["total_bytes"] < 0.6 * m["capacity_bytes"]
    assert any("Korthikanti" in n for n in a100.notes)
    assert any(n.startswith("GPU achievable fraction per op kind") for n in a100.notes)


def test_gpu_micro_batch_must_be_whole(tiny):
    for bad in (1.5, 0.5, 0):
        with pytest.raises(ConfigError, match="whole number"):
            verdict(tiny, gpu_micro_batch=bad)
        with pytest.raises(ConfigError, match="whole number"):
            pvl.verdict(tiny, gpu_micro_batch=bad)
    assert float(verdict(tiny).gpu_estimate.micro_batch).is_integer()


def test_gpu_precision_fp8_where_the_gpu_has_the_rate(tiny):
    h16 = verdict(_bert_large_shim(tiny, 768), gpu="h100-sxm", gpus=8, gpu_micro_batch=96)
    h8 = pvl.verdict(_bert_large_shim(tiny, 768), gpu="h100-sxm", gpus=8, gpu_micro_batch=96, gpu_precision="fp8")
    g8, g16 = (v.gpu_estimate.ops for v in (h8, h16))
    gemm = ((g16["op_class"] == "gemm") & (g16["op_kind"] != "attention")).to_numpy()
    assert gemm.any() and (g8["compute_s"].to_numpy()[gemm] < g16["compute_s"].to_numpy()[gemm]).all()
    att = (g16["op_kind"] == "attention").to_numpy()     # the fused attention kernel stays 16-bit
    assert att.any() and (g8["compute_s"].to_numpy()[att] == g16["compute_s"].to_numpy()[att]).all()
    assert h8.gpu.samples_per_second >= h16.gpu.samples_per_second     # tiny kernels: launch-bound either way
    assert any("FP8 GEMMs" in n for n in h8.notes)
    assert h8.gpu_estimate.memory["weights_bytes"] == h16.gpu_estimate.memory["weights_bytes"]
    with pytest.raises(ConfigError, match="no FP8 rate"):
        verdict(tiny, gpu="a100-80gb", gpu_precision="fp8")
    with pytest.raises(ConfigError, match="choose fp32, fp16, bf16, fp8"):
        verdict(tiny, gpu_precision="int4")
    with pytest.raises(ConfigError, match="disagree"):
        verdict(tiny, gpu_precision="fp16", precision="bf16")


def test_report_and_export_carry_the_verdict(tmp_path):
    from popvision_lite.gui.export import summary_markdown

    with pvl.open(SAMPLES / "bert_tiny_mk2.pvl") as p:
        md = summary_markdown(p)
    assert "## Verdict: IPU or GPU?" in md and "USD per 1 M samples" in md and "BOUND (not an estimate)" in md
    out = tmp_path / "verdict.csv"
    assert main(["export", str(SAMPLES / "bert_tiny_mk2.pvl"), "--view", "verdict", "-o", str(out)]) == 0
    text = out.read_text()
    assert "samples/s" in text and "NVIDIA A100 80GB SXM x1 (estimated)" in text
    png = tmp_path / "verdict.png"
    assert main(["export", str(SAMPLES / "bert_tiny_mk2.pvl"), "--view", "verdict", "-o", str(png)]) == 0
    assert png.stat().st_size > 5_000


def test_summary_view_verdict_panel(qtbot):
    from popvision_lite.gui.state.document import Document
    from popvision_lite.gui.views.summary_view import SummaryView
    from popvision_lite.profile.reader import open_profile

    doc = Document(open_profile(SAMPLES / "bert_tiny_mk2.pvl"))
    view = SummaryView(doc)
    qtbot.addWidget(view)
    panel = view.verdict
    text = panel.body.text()
    assert "faster than" in text and "USD per 1 M samples" in text and "BOUND (not an estimate)" in text
    assert panel.result.gpu.chips == 1
    panel.gpus.setValue(8)
    assert panel.result.gpu.chips == 8 and "x8 (estimated)" in panel.body.text()
    panel.gpu.setCurrentIndex(panel.gpu.findData("h100-sxm"))
    body = panel.body.text()
    assert panel.result.gpu.label.startswith("NVIDIA H100") and "Prices missing" not in body
    from popvision_lite.gui.text import plain_html

    for note in panel.result.price_notes():  # how each side was priced, as the analysis words it
        assert plain_html(note) in body, note
    assert "NVIDIA H100 SXM 80GB has no published price: no cost is given for it." in body
    tables = view.tables()
    assert "verdict" in tables and len(tables) == 2   # the top-ops table keeps its export
    doc.close()


def test_gpu_lowering_drops_window_gathers_and_fuses_norm_activation_chains():
    import pandas as pd

    from popvision_lite.analysis import model_pass as wl

    rows = [("b/conv2/im2col", "im2col", 9e6), ("b/conv2/matmul", "matmul", 10e6), ("b/bn2", "batch_norm", 2e6),
            ("b/bn2_relu", "relu", 2e6), ("b/residual", "add", 3e6), ("b/relu", "relu", 2e6),
            ("x/relu", "relu", 2e6), ("b/bwd/bn2_relu_bwd", "relu_bwd", 3e6), ("b/bwd/bn2_bwd", "batch_norm_bwd", 3e6),
            ("b/bwd/relu_bwd", "relu_bwd", 3e6), ("y/act_bwd", "relu_bwd", 3e6)]
    ops = pd.DataFrame([dict(name=n, type=t, precision="fp16", flops=1.0, min_bytes=b) for n, t, b in rows])
    low, notes = wl.gpu_lowering(ops)
    kept = dict(zip(low["name"], zip(low["min_bytes"], low["kernels"], strict=True), strict=True))
    assert "b/conv2/im2col" not in kept and "b/bn2_relu" not in kept and "b/relu" not in kept
    assert kept["x/relu"] == (2e6, 1) and kept["y/act_bwd"] == (3e6, 1)     # no batch norm / residual to join
    assert kept["b/bwd/bn2_relu_bwd"] == (1e6, 0) and kept["b/bwd/relu_bwd"] == (1e6, 0)   # fused: a third, no launch
    assert kept["b/conv2/matmul"] == (10e6, 1) and len(notes) == 2
    assert wl.gpu_lowering(ops.iloc[:0])[0].empty


def test_gpu_lowering_costs_convolutions_as_implicit_gemms():
    import pandas as pd

    from popvision_lite.analysis import model_pass as wl

    # im2col: X = 80 B read, 10 x 9 x 4 fp16 window rows (720 B) written; its GEMMs read the 720 B of windows
    rows = [("b/conv2/im2col", "im2col", 800, "10 windows of 9 rows of 4 gathered by exchange"),
            ("b/conv2/matmul", "matmul", 900, ""), ("b/bwd/conv2/dw_matmul", "matmul", 900, ""),
            ("b/bwd/conv2/dx_im2col", "im2col", 800, "10 windows of 9 rows of 4 gathered by exchange"),
            ("b/bwd/conv2/dx_matmul", "matmul", 900, ""),
            # strided dgrad: dx_matmul writes 500 B of window rows, col2im sums them into 20 x 8 fp16 = 320 B of dX
            ("c/bwd/conv/dx_matmul", "matmul", 580, ""),
            ("c/bwd/conv/col2im", "sum_pool", 820, "20 windows of 4 rows of 8; windows gathered by exchange"),
            ("d/pool", "sum_pool", 820, "20 windows of 4 rows of 8; windows gathered by exchange")]
    ops = pd.DataFrame([dict(name=n, type=t, precision="fp16", flops=1.0, min_bytes=b, plan=p) for n, t, b, p in rows])
    low, notes = wl.gpu_lowering(ops)
    kept = dict(zip(low["name"], low["min_bytes"], strict=True))
    assert kept["b/conv2/matmul"] == 260 and kept["b/bwd/conv2/dw_matmul"] == 260   # X instead of the windows
    assert kept["b/bwd/conv2/dx_matmul"] == 260
    assert kept["c/bwd/conv/dx_matmul"] == 400 and "c/bwd/conv/col2im" not in kept  # dX instead of the window rows
    assert kept["d/pool"] == 820                                                      # a pooling is not a col2im
    assert "b/conv2/im2col" not in kept and any("implicit GEMM" in n for n in notes)
    # a gather whose plan is not the emulator's window text keeps the conservative bytes
    odd = ops.assign(plan="gathered")
    assert dict(zip(*wl.gpu_lowering(odd)[0][["name", "min_bytes"]].T.values, strict=True))["b/conv2/matmul"] == 900


def _attention_rows(precision="fp16", runs=2):
    """One attention (batch x heads 2, 8 tokens, head dim 4) as the emulator's transformer writes it, per run:
    S = 2 x 8 x 8 fp16 = 256 B, Q = K = V = O = 2 x 8 x 4 = 128 B."""
    import pandas as pd

    s, q, f = 256, 128, 2 * 2 * 8 * 8 * 4
    leaves = [("qk_matmul", "matmul", f, 2 * q + s), ("scale", "scale", 128, 2 * s), ("softmax", "softmax", 640, 2 * s),
              ("pv_matmul", "matmul", f, s + 2 * q), ("out_matmul", "matmul", 99, 77),
              ("pv_matmul_dp", "matmul", f, 2 * q + s), ("pv_matmul_dv", "matmul", f, s + 2 * q),
              ("softmax_bwd", "softmax_bwd", 384, 3 * s), ("scale_bwd", "scale", 128, 2 * s),
              ("qk_matmul_dq", "matmul", f, s + 2 * q), ("qk_matmul_dk", "matmul", f, s + 2 * q)]
    return pd.DataFrame([dict(name=f"ipu0/layer/attention/{leaf}", type=t, precision=precision, flops=fl, min_bytes=b)
                         for leaf, t, fl, b in leaves for _ in range(runs)])


def test_gpu_lowering_fuses_attention_as_flash_attention():
    from popvision_lite.analysis import gpu_estimate as ge
    from popvision_lite.analysis import model_pass as wl

    ops = _attention_rows()
    assert wl.gpu_lowering(ops)[0]["name"].tolist() == ops["name"].tolist()     # off unless asked for
    low, notes = wl.gpu_lowering(ops, fused_attention="flash")
    by = {n: g for n, g in low.groupby("name")}
    assert sorted(by) == ["ipu0/layer/attention/fused_attention", "ipu0/layer/attention/fused_attention_bwd",
                          "ipu0/layer/attention/out_matmul"]
    fwd, bwd = by["ipu0/layer/attention/fused_attention"], by["ipu0/layer/attention/fused_attention_bwd"]
    assert len(fwd) == 2 and len(bwd) == 2                                   # one kernel per run, as the IPU's rows
    f = 2 * 2 * 8 * 8 * 4
    r = fwd.iloc[0]
    assert (r["flops"], r["min_bytes"], r["type"]) == (2 * f + 128 + 640, 4 * 128, "attention")   # Q, K, V, O only
    assert (r["m"], r["n"], r["k"], r["batch"]) == (8, 4, 8, 2)
    r = bwd.iloc[0]
    assert (r["flops"], r["min_bytes"]) == (5 * f + 384 + 128, 8 * 128)   # recomputes Q.K^T; Q K V O dO dQ dK dV
    assert any("FlashAttention" in n for n in notes)
    # fp32 attention has no flash kernel: left as it is
    fp32 = _attention_rows("fp32")
    assert wl.gpu_lowering(fp32, fused_attention="flash")[0]["name"].tolist() == fp32["name"].tolist()
    # apex's fused MHA (NVIDIA's MLPerf BERT) writes P once forward; backward reads P, writes and re-reads dS
    fm = wl.gpu_lowering(ops, fused_attention="fmha")[0].groupby("name").first()
    assert fm.loc["ipu0/layer/attention/fused_attention", "min_bytes"] == 4 * 128 + 256
    assert (fm.loc["ipu0/layer/attention/fused_attention_bwd", ["flops", "min_bytes"]].tolist()
            == [4 * f + 384 + 128, 8 * 128 + 3 * 256])
    with pytest.raises(ConfigError, match="fused attention kernel 'xla'"):
        wl.gpu_lowering(ops, fused_attention="xla")
    # an FP8 run keeps the fused kernel at the 16-bit tensor peak, its other GEMMs at the FP8 peak
    est = ge.estimate_ops(low, "h100-sxm", gemm_precision="fp8")
    as_mm = ge.estimate_ops(low.assign(type="matmul"), "h100-sxm", gemm_precision="fp8")
    att = (low["type"] == "attention").to_numpy()
    assert (est["compute_s"].to_numpy()[att] > as_mm["compute_s"].to_numpy()[att]).all()
    assert set(est.loc[att, "op_kind"]) == {"attention"}
