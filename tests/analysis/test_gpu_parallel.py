"""The GPU side at LLM scale: the whole model from a tensor-parallel IPU shard (analysis/tensor_parallel.py) and the
GPUs' own tensor x pipeline x data-parallel placement (analysis/gpu_parallel.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from popvision_lite.analysis import gpu_estimate as ge
from popvision_lite.analysis import gpu_parallel as gp
from popvision_lite.analysis import model_pass as wl
from popvision_lite.analysis import tensor_parallel as tp
from popvision_lite.analysis.verdict import verdict
from popvision_lite.errors import ConfigError
from tests.support.devices import ID as SMALL  # the shipped Mk2 cut to 92 tiles (decision 0395)
from tests.support.transformer_kernels import two_layer_kernels

GPT = dict(layers=2, hidden=256, heads=4, seq=128, batch=2, vocab=1024)


class _Profile:
    """A written-profile stand-in over ProfileData (what model_pass and the verdict read)."""

    def __init__(self, data):
        self.ops, self.target, self.run = data.ops, data.target, dict(data.run)
        self.programs = data.programs


@pytest.fixture(scope="module")
def shards():
    """The same small GPT emulated whole (t = 1) and as ONE IPU of a 2-way tensor-parallel group, on the tests'
    device with 92 tiles (decision 0395: the GPU side reads the model's ops, not the IPU's tile count)."""
    from popvision_lite.emulator.models.config import make_config
    from popvision_lite.emulator.models.emulated import run_model

    out = {}
    for t in (1, 2):
        cfg = make_config("gpt3-small", tensor_parallel=t, ipus=t, **GPT)
        out[t] = _Profile(run_model(cfg, SMALL, timing_only=True).profile_data)
    return out


def test_a_tensor_parallel_shard_is_costed_as_the_whole_model(shards):
    whole, shard = shards[1], shards[2]
    a, b = wl.model_pass(whole), wl.model_pass(shard)
    assert b.tensor_parallel == 2 and a.tensor_parallel == 1
    assert len(a.ops) == len(b.ops)
    # the shard holds half of every split op; scaled back, it is the model emulated whole: the same compulsory
    # bytes exactly, the same FLOPs to the emulator's own rounding of the split reductions
    assert b.ops["min_bytes"].sum() == pytest.approx(a.ops["min_bytes"].sum(), rel=1e-12)
    assert b.ops["flops"].sum() == pytest.approx(a.ops["flops"].sum(), rel=1e-3)
    shard_flops = (wl.per_run(shard.ops, b.counts)["flops"] * b.counts.model_calls).sum()
    assert shard_flops < 0.7 * a.ops["flops"].sum()        # what the old verdict costed: one shard only
    # parameters: the whole model's, not one IPU's
    assert wl.params(shard)[0] == wl.params(whole)[0]
    assert wl.params(shard)[0] > 1.5 * _shard_params(shard)
    # split GEMMs get the whole model's M, N, K
    q = b.ops[b.ops["name"].str.endswith("attention/q_matmul")].iloc[0]
    assert (q["m"], q["n"], q["k"]) == (GPT["batch"] * GPT["seq"], GPT["hidden"], GPT["hidden"])
    assert any("tensor parallel 2" in n for n in b.notes)
    assert wl.chips(shard)[0] == 2


def _shard_params(p):
    return sum(x["params"] for x in p.run["training_state"])


def test_a_device_share_is_the_shard_again(shards):
    a, b = wl.model_pass(shards[1]).ops, wl.model_pass(shards[2])
    share = tp.device_share(a, 2, sequence_parallel=False)
    shard = wl.per_run(shards[2].ops.reset_index(drop=True), b.counts)
    one = {n: r for n, r in zip(shard["name"], shard["min_bytes"], strict=True)}
    for name, nbytes in zip(share["name"], share["min_bytes"], strict=True):
        assert nbytes == pytest.approx(one[name], rel=1e-9), name
    # with sequence parallelism the replicated norms and residual adds are split along the sequence too
    sp = tp.device_share(a, 2, sequence_parallel=True)
    ln = sp["name"].str.endswith("layer_norm").to_numpy()
    assert np.allclose(sp.loc[ln, "min_bytes"], a.loc[ln, "min_bytes"] / 2)


def test_split_rule():
    assert tp.split_of("ipu0/layer/attention/q_matmul_dw") == ("n", "heads")
    assert tp.split_of("ipu0/layer/ffn/matmul2") == ("n", "ffn")
    assert tp.split_of("ipu0/heads/lm/decoder_matmul_dx") == ("n", "vocab")
    assert tp.split_of("ipu0/layer/attention/softmax") == ("all", "")
    assert tp.split_of("ipu0/layer/ffn/gelu") == ("all", "")
    assert tp.split_of("ipu0/heads/mlm/gelu") == ("", "")        # the MLM transform is hidden-wide: replicated
    assert tp.split_of("ipu0/layer/attention/layer_norm") == ("", "")
    assert tp.split_of("conv1/matmul") == ("", "")
    # the degree is the checked schedule's (profile/run_record.py): a file's bad value is refused, not read as 1
    from popvision_lite.errors import EmulatorError
    from popvision_lite.profile.run_record import Schedule

    assert Schedule.build({"tensor_parallel": 8}).tensor_parallel == 8 and Schedule().tensor_parallel == 1
    for bad in ("x", 1e30, True, -2, 2.5):
        with pytest.raises(EmulatorError, match="tensor_parallel"):
            Schedule.build({"tensor_parallel": bad})


def _kernels():
    """A two-layer transformer pass, shaped as the emulator names it: per layer two split GEMMs and a norm."""
    return two_layer_kernels()[0]


def _setting(gbs=64, layers=2, params=2e6):
    return gp.Setting(samples_per_step=gbs, samples_per_pass=1, params=params, optimizer="adam", precision="fp16",
                      layers=layers, activation_bytes=lambda t, sp: 1e6 / t)


CFG = dict(model="gpt", hidden=256, heads=4, ffn=1024, layers=2, seq=512)


def test_candidates_respect_the_model_and_the_batch():
    st = _setting()
    for pl in gp.candidates(16, CFG, st, True, 8, "megatron"):
        assert pl.gpus == 16 and CFG["heads"] % pl.tp == 0 and pl.tp <= 8 and CFG["layers"] % pl.pp == 0
        assert float(pl.micro_batch).is_integer() and (64 / pl.dp) % pl.micro_batch == 0
        assert pl.vp == 1 or (64 / pl.dp / pl.micro_batch) % pl.pp == 0   # interleaving needs m % p == 0
    assert len(gp.candidates(16, CFG, st, True, 8, "megatron")) <= 4 * 2 * gp.MAX_MICRO_BATCHES * 2
    # not a transformer: data parallel only
    assert {(p.tp, p.pp) for p in gp.candidates(16, {}, st, False, 8, "ddp")} == {(1, 1)}


def test_the_step_of_a_stated_placement():
    k = _kernels()
    a100 = ge.gpu_model("a100-80gb")
    st = _setting()
    e, info = gp.search(k, a100, 16, CFG, st, tp=2, pp=2, vp=1, micro_batch=2)
    pl = e.placement
    assert (pl.tp, pl.pp, pl.dp, pl.micro_batch) == (2, 2, 4, 2) and info["tried"] == 1
    m = 64 / 4 / 2                                   # micro-batches per pipeline per step
    lay = gp.layout(k, a100, 2, 2, 1, "fp16", "megatron")
    stage = 1 * lay.layer_s / 2 + max(lay.first_s, lay.last_s)
    # 1F1B: (m + (p - 1) / v) stage times (Narayanan et al. 2021); the exposed communication added
    tp_exposed = e.comm_s.get("tensor parallel", 0.0)
    assert e.bubble_s == pytest.approx((2 - 1) / 1 * (stage + tp_exposed / m))
    assert e.step_time_s == pytest.approx(m * stage + e.bubble_s + sum(e.comm_s.values()) + e.optimizer_time_s)
    # memory: the GPU's quarter of the parameters; ZeRO-1 (distributed optimizer): 2 + 2 + 12 / d bytes each
    assert e.memory["params_per_gpu"] == pytest.approx(2e6 / 4)
    acts = 1e6 / 2 * 2 * min(m, 2) * 1 / 2          # per sample / t x micro-batch x in flight x layers on the stage / L
    assert e.memory["total_bytes"] == pytest.approx(2e6 / 4 * (4 + 12 / 4) + acts)
    assert "TP 2 x PP 2 x DP 4 = 16 GPUs, micro-batch 2" in pl.text()


def test_search_keeps_the_fastest_placement_that_fits():
    k = _kernels()
    st = _setting()
    best, info = gp.search(k, "h100-sxm", 16, CFG, st)
    assert info["tried"] > 1 and best.fits
    for pl in gp.candidates(16, CFG, st, True, 8, "megatron"):
        e, _ = gp.search(k, "h100-sxm", 16, CFG, st, tp=pl.tp, pp=pl.pp, vp=pl.vp, micro_batch=pl.micro_batch)
        assert not e.fits or e.samples_per_second <= best.samples_per_second * (1 + 1e-12)
    assert best.notes[0].startswith("GPU placement TP")


def test_stated_placements_that_cannot_run_are_refused():
    k = _kernels()
    st = _setting()
    with pytest.raises(ConfigError, match="--gpu-tp 3: must divide"):
        gp.search(k, "h100-sxm", 16, CFG, st, tp=3)
    with pytest.raises(ConfigError, match="attention heads"):
        gp.search(k, "h100-sxm", 16, CFG, st, tp=8)
    with pytest.raises(ConfigError, match="--gpu-pp 4"):
        gp.search(k, "h100-sxm", 16, CFG, st, pp=4)
    with pytest.raises(ConfigError, match="whole number"):
        gp.search(k, "h100-sxm", 16, CFG, st, micro_batch=1.5)
    with pytest.raises(ConfigError, match="only a transformer"):
        gp.search(k.drop(columns=["tp_split"]), "h100-sxm", 16, {}, st, tp=2)


def test_activation_bytes_follow_korthikanti():
    cfg = dict(model="gpt3", hidden=12288, heads=96, seq=2048, layers=96)
    s, h, a = 2048, 12288, 96
    assert gp.activation_bytes_per_sample(cfg) == 96 * (34 * s * h + 5 * a * s * s)
    assert gp.activation_bytes_per_sample(cfg, 8, True, scores_kept=False) == pytest.approx(96 * 34 * s * h / 8)
    # tensor parallel without sequence parallelism: the norms' and dropouts' 10 s h stay whole (sec. 4.2.1)
    assert gp.activation_bytes_per_sample(cfg, 8, False, scores_kept=False) == \
        pytest.approx(96 * (24 * s * h / 8 + 10 * s * h))
    assert gp.activation_bytes_per_sample(dict(model="resnet50")) is None


def test_verdict_of_a_tensor_parallel_run_counts_all_its_ipus(shards):
    v = verdict(shards[2], gpu="h100-sxm", gpus=8)
    assert v.ipu.chips == 2 and "x2 (emulated)" in v.ipu.label
    assert v.gpu_estimate.memory["params"] == pytest.approx(wl.params(shards[1])[0])
    assert v.gpu_estimate.placement.gpus == 8
    assert dict((r[0], r[2]) for r in v.rows())["placement"] == v.gpu_estimate.placement.text()
    d = v.to_dict()
    assert d["gpu_placement"]["tp"] * d["gpu_placement"]["pp"] * d["gpu_placement"]["dp"] == 8
    assert math.isfinite(d["gpu"]["samples_per_second"])


def test_the_verdict_of_a_shard_is_the_verdict_of_the_whole_model(shards):
    # issue 44: one IPU's tensor-parallel shard was costed as if it were the whole model.  The GPU side of the
    # shard's verdict, at the same stated GPU placement, is the GPU side of the model emulated whole: the same
    # parameters, memory and step (FLOPs to the emulator's rounding of the split reductions)
    kw = dict(gpu="h100-sxm", gpus=8, gpu_tp=2, gpu_pp=1, gpu_micro_batch=2)
    v_whole = verdict(shards[1], **kw)
    whole, shard = v_whole.gpu_estimate, verdict(shards[2], **kw).gpu_estimate
    # the placement stated for 8 GPUs cannot run on the whole model's one IPU: that line searches its own, said
    assert v_whole.gpu_same_chips.chips == 1
    assert any(n.startswith("same chip count (1 GPUs): the stated GPU placement cannot run") for n in v_whole.notes)
    assert shard.memory["params"] == whole.memory["params"]
    assert shard.memory["total_bytes"] == pytest.approx(whole.memory["total_bytes"], rel=1e-9)
    assert shard.samples_per_second == pytest.approx(whole.samples_per_second, rel=1e-2)
    assert shard.pass_time_s == pytest.approx(whole.pass_time_s, rel=1e-2)


def test_a_data_parallel_group_across_nodes_crosses_through_each_of_its_gpus_nics():
    h100 = ge.gpu_model("h100-sxm")
    nic, nvlink = h100.network_bus_bytes_per_s, h100.allreduce_bytes_per_s
    assert gp.bus_bandwidth(h100, 8) == (nvlink, "NVLink")                  # one node: NVLink
    assert gp.bus_bandwidth(h100, 64) == (nic, "network")                   # one rank per node: one NIC
    bw, where = gp.bus_bandwidth(h100, 64, ranks_per_node=2)                # TP 4: two ranks of the group per node
    assert bw == pytest.approx(2 * nic) and "2 NICs" in where
    assert gp.bus_bandwidth(h100, 64, ranks_per_node=8)[0] == min(8 * nic, nvlink)   # never beyond NVLink's
    # in a step: TP 4 x PP 2 x DP 4 on 32 GPUs puts two of each data-parallel group's ranks in a node; TP 2 four
    k, st = _kernels(), _setting(gbs=64, params=2e9)
    e4, _ = gp.search(k, h100, 32, CFG, st, tp=4, pp=2, vp=1, micro_batch=1)
    e2, _ = gp.search(k, h100, 32, CFG, st, tp=2, pp=2, vp=1, micro_batch=1)
    note4 = next(n for n in e4.notes if n.startswith("data parallel"))
    assert "2 NICs per node" in note4
    full4 = 2 * 3 / 4 * 2e9 / 8 * 2 / (2 * nic)                              # 2 (d-1)/d x the GPU's 16-bit grads
    assert f"({full4 * 1e3:,.1f} ms;" in note4
    assert "4 NICs per node" in next(n for n in e2.notes if n.startswith("data parallel"))
