"""The measured MLPerf GPU rows and their prediction (popvision_lite/gpu_validation.py; part of `validate`)."""

from __future__ import annotations

import math

import pytest

from popvision_lite import gpu_validation as gv
from popvision_lite.analysis import gpu_parallel as gp
from tests.support.devices import ID as SMALL  # the shipped Mk2 cut to 92 tiles (decision 0395)
from tests.support.transformer_kernels import two_layer_kernels


def test_the_shipped_rows_are_consistent_placements():
    rows = gv.load_gpu_rows()
    assert len(rows) == 20 and len({r.id for r in rows}) == 20
    assert {r.benchmark for r in rows} == set(gv.BENCHMARKS)
    for r in rows:
        assert r.tp * r.pp * r.dp == r.n_gpus, r.id
        # the global batch: data-parallel replicas x micro-batch x gradient accumulation (whole micro-batches)
        assert r.gbs % (r.dp * r.micro_batch) == 0, r.id
        assert r.measured > 0 and r.precision in ("fp16", "fp8")
    gpt = [r for r in rows if r.benchmark == "GPT-3-175B"]
    assert len(gpt) == 12 and all(r.gpu == "h100-sxm" and r.precision == "fp8" for r in gpt)
    mlperf_512 = next(r for r in gpt if r.id == "nv-v3.1-h100-n64-gpt3")
    assert (mlperf_512.n_gpus, mlperf_512.tp, mlperf_512.pp, mlperf_512.vp, mlperf_512.micro_batch) == (512, 4, 8, 12, 1)
    assert mlperf_512.measured == pytest.approx(2048 * 2048 / 11.07 / 2048, rel=0.01)   # GBS / step, measured 11.07 s
    h200 = [r for r in rows if r.gpu == "h200"]
    assert {r.benchmark for r in h200} == {"BERT", "ResNet-50"}


def _ops():
    """A two-layer transformer's pass shaped as the emulator names it (one sample of 256 tokens)."""
    kernels, cfg = two_layer_kernels(rows=256, embedding=False)
    cfg = dict(cfg, model="bert")
    return gv.OpList(kernels=kernels, samples_per_pass=1.0, cfg=cfg, params=2e6, scores_kept=True, notes=[])


def test_a_row_is_predicted_with_its_own_placement_and_bert_includes_its_evaluation():
    ops = _ops()
    row = gv.GpuRow(id="x", round="v0", benchmark="BERT", gpu="h100-sxm", n_gpus=8, gbs=768, micro_batch=96, tp=1,
                    pp=1, vp=1, dp=8, precision="fp8", optimizer="lamb", measured=5000.0, kind="incl. eval")
    r = gv.predict_row(row, ops)
    assert not r.error and r.placement.startswith("TP 1 x PP 1 x DP 8 = 8 GPUs, micro-batch 96")
    setting = gp.Setting(samples_per_step=768, samples_per_pass=1.0, params=2e6, optimizer="lamb", precision="fp8",
                         layers=2, activation_bytes=lambda t, s: gp.activation_bytes_per_sample(ops.cfg, t, s))
    e, _ = gp.search(ops.kernels, "h100-sxm", 8, ops.cfg, setting, tp=1, pp=1, micro_batch=96)
    interval = math.ceil(150_000 / 768) * 768
    assert r.predicted == pytest.approx(e.samples_per_second * interval / (interval + 10_000 / 3))
    assert r.ratio == pytest.approx(r.predicted / 5000.0)
    # a placement the model cannot take is an error of the row, not of the run
    bad = gv.predict_row(gv.GpuRow(**{**row.__dict__, "tp": 3}), ops)
    assert bad.predicted is None and "--gpu-tp 3" in bad.error and bad.ratio is None
    res = gv.residual_rows([r, bad])
    assert len(res) == 1 and res[0]["side"] == "gpu" and res[0]["model"] == "bert" and res[0]["scale"] == "node"
    assert res[0]["ratio"] == res[0]["ratio_loo"]        # no constant is fitted on a GPU row
    doc = gv.render_section([r, bad])
    assert doc.startswith(gv.BEGIN) and doc.endswith(gv.END) and "BERT on GPU" in doc


def test_one_benchmarks_failure_does_not_stop_the_others():
    rows = [r for r in gv.load_gpu_rows() if r.benchmark != "GPT-3-175B"][:3]

    def emulate(model, **cfg):
        raise RuntimeError(f"no {model} here")

    out = gv.run_gpu_rows(rows, emulate=emulate)
    assert len(out) == 3 and all("RuntimeError: no" in r.error for r in out)


def test_the_op_list_reads_the_emulated_runs_config(monkeypatch):
    # the op list is built from a real emulation (here BERT-Large's graph at a toy size): its config comes from
    # the run record (the path `validate` broke on when the record became typed).  Emulated on the tests' device
    # (decision 0395): the op list is the GPU's lowering of the model's pass, whatever the IPU's tile count
    # (2.4 -> 1.0 s); gv._emulate's own call is kept, its device swapped under it.  The stage program's build
    # alone gives the op list (emulated.op_profile; the same as the compiled run's:
    # tests/test_gpu_op_profile_composed.py)
    from popvision_lite.emulator.models import emulated as E

    real, asked = E.op_profile, []
    monkeypatch.setattr(E, "op_profile", lambda cfg, device: (asked.append(device), real(cfg, SMALL))[1])

    def small(model, **cfg):
        return gv._emulate(model, **{**cfg, "layers": 2, "hidden": 64, "heads": 2, "ffn": 256, "vocab": 512})

    ops = gv.op_list("BERT", emulate=small)
    assert asked == ["ipu-mk2"]
    assert (ops.cfg["hidden"], ops.cfg["layers"], ops.cfg["seq"]) == (64, 2, gv.BERT_SEQ)
    assert ops.samples_per_pass == 8 and ops.params > 0 and ops.scores_kept
    assert (ops.kernels["name"].str.contains("fused_attention")).any()
    row = next(r for r in gv.load_gpu_rows() if r.id == "nv-v2.0-dgxa100-bert")
    res = gv.predict_row(row, ops)
    assert not res.error and res.predicted > 0 and res.placement.startswith("TP 1 x PP 1 x DP 8")


def test_the_step_split_recovers_the_per_stage_and_per_step_parts():
    def row(i, dp, gbs, rnd="v9"):
        return gv.GpuRow(id=f"r{i}", round=rnd, benchmark="GPT-3-175B", gpu="h100-sxm", n_gpus=32 * dp, gbs=gbs,
                         micro_batch=1, tp=4, pp=8, vp=12, dp=dp, precision="fp8", optimizer="adam", measured=0.0,
                         kind="train-only")

    rows = [row(0, 16, 2048), row(1, 128, 2048), row(2, 336, 2688), row(3, 24, 3072)]
    assert [gv.pipeline_slots(r) for r in rows] == [128 + 7 / 12, 16 + 7 / 12, 8 + 7 / 12, 128 + 7 / 12]
    results = []
    for r in rows:
        s = gv.pipeline_slots(r)
        r.measured = r.gbs / (s * 0.084 + 0.231)
        results.append(gv.GpuResult(r, predicted=r.gbs / (s * 0.059 + 0.179)))
    split = gv.step_split(results, "v9")
    assert split["rows"] == 4 and split["slots"] == [8.583, 16.583, 128.583]
    assert split["measured"]["x_s"] == pytest.approx(0.084) and split["measured"]["c_s"] == pytest.approx(0.231)
    assert split["predicted"]["x_s"] == pytest.approx(0.059) and split["predicted"]["c_s"] == pytest.approx(0.179)
    text = gv.format_step_split(split)
    assert "*x* = 84.0 ms, *c* = 231 ms" in text and "1.42x too fast" in text
    # not separable: two rows, one slot count, or two kinds of work per stage time
    assert gv.step_split(results[:2], "v9") is None
    assert gv.step_split([results[0], results[3], results[0]], "v9") is None
    other = gv.GpuResult(gv.GpuRow(**{**rows[1].__dict__, "micro_batch": 2}), predicted=1.0)
    assert gv.step_split(results + [other], "v9") is None
    assert gv.step_split(results, "v8") is None
