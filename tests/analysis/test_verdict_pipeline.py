"""The verdict on pipelined / replicated profiles (emulator/models/pipeline.py): the ops table holds per-step totals of
one replica, so the GPU side must undo the multipliers, launch one kernel per layer call, leave out the IPU's
recomputation, add the optimizer and all-reduce, and count all the run's IPUs (issue 15, bug A)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import popvision_lite as pvl
from popvision_lite.analysis import gpu_estimate as ge
from popvision_lite.analysis import model_pass as wl
from popvision_lite.analysis.roofline import analyze
from popvision_lite.analysis.verdict import verdict
from popvision_lite.cli import main
from popvision_lite.errors import ConfigError, ProfileError
from tests.support.devices import ID as SMALL  # the shipped Mk2 cut to 92 tiles (decision 0395)

# the session's pod_profile (tests/conftest.py): the run's shape, checked below against its stored config
R, S, G, LAYERS, BATCH, SEQ, VOCAB = 2, 2, 16, 4, 4, 64, 2048


@pytest.fixture(scope="module")
def runs(tmp_path_factory, pod_profile):
    """A pipelined, replicated, recomputing BERT-tiny (4 layers on 2 stages x 2 replicas, GA 16: the session's
    ``pod_profile``) and the same layers / batch / sequence on the whole-graph path (one IPU, no recomputation),
    timing only: what the tests read of it (op names, FLOPs, counts) does not depend on numerics, and ``run_model``
    composes a timing-only BERT, so the whole-graph path is called as ``run_model`` calls it with numerics
    (a third of the CPU of the numerics run, the same ops table)."""
    from popvision_lite.emulator.models import emulated
    from popvision_lite.emulator.models.config import make_config

    with pvl.open(pod_profile) as p:
        c = p.run["config"]
        assert (c["replicas"], c["pipeline_stages"], c["grad_accum"], c["layers"], c["batch"], c["seq"], c["vocab"],
                c["recompute"], c["device"]) == (R, S, G, LAYERS, BATCH, SEQ, VOCAB, True, SMALL), c
    d = tmp_path_factory.mktemp("verdict_pipe")
    whole = make_config("bert-tiny", layers=LAYERS, batch=BATCH, seq=SEQ, vocab=VOCAB)
    emulated.write_run(emulated._run_whole_graph(whole, SMALL, True, None), d / "whole.pvl")
    return pod_profile, d / "whole.pvl"


@pytest.fixture(scope="module")
def pipe(runs):
    with pvl.open(runs[0]) as p:
        yield p


def test_profile_records_op_counts(pipe):
    assert (pipe.format_version, pipe.format_minor) >= (2, 2)
    oc = pipe.run["op_counts"]
    n = len(pipe.stored_table("ops"))
    per_step, calls, rpc = (np.array(oc[k]) for k in ("runs_per_step", "calls_per_microbatch", "runs_per_call"))
    assert len(per_step) == len(calls) == len(rpc) == n
    assert (per_step == calls * rpc * G).all()
    body = pipe.stored_table("ops")["name"].str.contains("/layer/").to_numpy()
    assert set(calls[body]) == {LAYERS // S} and set(calls[~body]) == {1}
    # recomputation replays exactly the layer body's forward ops: one more run per call
    fwd = body & ~pipe.stored_table("ops")["name"].str.contains(r"_dw|_dx|_bwd|_dp|_dv|_dq|_dk|dx_add", regex=True).to_numpy()
    assert (rpc[fwd] == 2).all() and (rpc[~fwd] == 1).all()


def test_old_format_reconstruction_matches_the_written_counts(pipe):
    class Old:  # the same profile as a 2.0 writer left it: no op_counts
        ops, target, programs = pipe.stored_table("ops"), pipe.target, pipe.stored_table("programs")
        run = {k: v for k, v in pipe.run.items() if k != "op_counts"}

    new, old = wl.op_counts(pipe), wl.op_counts(Old())
    assert "op_counts" in new.basis and "reconstructed" in old.basis
    for a in ("table_runs", "model_calls", "recompute_runs"):
        assert (getattr(new, a) == getattr(old, a)).all(), a


def test_gpu_pass_is_one_microbatch_of_the_model(pipe, runs):
    mp = wl.model_pass(pipe)
    c = mp.counts
    ops = pipe.stored_table("ops")
    # kernels: one per layer call of every op (no optimizer updates on this path), no recompute runs
    assert len(mp.ops) == int(c.model_calls.sum())
    assert mp.dropped_recompute == int(c.recompute_runs.sum()) > 0
    # FLOPs: the IPU's step of one replica = G micro-batches x (pass + recomputed forward)
    step = float(ops["flops"].sum())
    rec = float((ops["flops"] * c.recompute_runs / (c.model_calls + c.recompute_runs)).sum())
    assert mp.ops["flops"].sum() * G == pytest.approx(step - rec, rel=1e-9)
    # the layer body per micro-batch equals the same layers emulated on the whole-graph path
    with pvl.open(runs[1]) as w:
        wp = wl.model_pass(w)
        wlayer = wp.ops[wp.ops["name"].str.match(r"layer\d+/")]
        assert not wp.counts.pipelined and wp.counts.table_runs.max() == 1
    player = mp.ops[mp.ops["name"].str.contains("/layer/")]
    assert len(player) == len(wlayer)
    assert player["flops"].sum() == pytest.approx(wlayer["flops"].sum(), rel=0.02)


def test_verdict_counts_all_chips_the_optimizer_and_the_all_reduce(pipe):
    v = verdict(pipe)                                    # default: as many GPUs as the run uses IPUs
    assert v.ipu.chips == R * S and v.gpu.chips == R * S == v.gpu_same_chips.chips
    assert v.gpu_estimate.placement.gpus == R * S      # its own placement, searched
    v = verdict(pipe, gpu_tp=1, gpu_pp=1)                # data parallel, as the rest of this test reads it
    assert any("2 replicas x 2 stages = 4 IPUs" in n for n in v.notes)
    assert v.ipu.usd_per_million() == pytest.approx(1.67 * R * S * (1e6 / v.ipu.samples_per_second) / 3600)
    e = v.gpu_estimate
    params = sum(x["params"] for x in pipe.run["training_state"])
    assert e.memory["params"] == params > 0 and e.optimizer_time_s > 0
    # the gradients reduced over the 4 GPUs (Megatron-style: overlapped with a micro-batch, only the rest exposed)
    assert "data parallel" in e.comm_s and any(n.startswith("data parallel 4:") for n in v.notes)
    assert any("recomputation" in n and "not carried" in n for n in v.notes)
    # the GPUs do the global batch of the step, not G x R times it
    sps = R * G * BATCH
    assert e.samples_per_step == sps and e.samples_per_gpu == sps / (R * S)
    # at the IPU's micro-batch: passes x pass FLOPs x GPUs = the step's model FLOPs of all replicas
    e4 = verdict(pipe, gpu_micro_batch=BATCH, gpu_tp=1, gpu_pp=1).gpu_estimate
    assert e4.micro_batch == BATCH and e4.passes_per_step == sps / (R * S) / BATCH
    mp = wl.model_pass(pipe)
    k = e4.ops[e4.ops["op_class"] != "optimizer"]         # each distinct kernel once, with how often it runs
    gpu_flops = e4.passes_per_step * e4.n_gpus * float((k["flops"] * k["runs"]).sum())
    # ... plus the Q.K^T the fused (FlashAttention) backward recomputes, once per attention forward
    recomputed = mp.ops.loc[mp.ops["name"].str.endswith("attention/qk_matmul"), "flops"].sum()
    assert recomputed > 0 and any("FlashAttention" in n for n in v.notes)
    # ... less the GELU and Q/K/V-gradient-sum kernels the GPU runs inside its GEMMs (Transformer Engine / Megatron)
    leaf = mp.ops["name"].str.rsplit("/", n=1).str[-1]
    epilogue = mp.ops.loc[leaf.isin(["gelu", "gelu_bwd", "dx_add_q", "dx_add_k", "dx_add_v"])
                          & ~mp.ops["name"].str.contains("/mlm/"), "flops"].sum()
    assert epilogue > 0 and any("GEMM epilogues fused" in n for n in v.notes)
    assert gpu_flops == pytest.approx(R * G * (mp.ops["flops"].sum() + recomputed - epilogue), rel=1e-9)
    # the GPU's own micro-batch: the fastest whole multiple that keeps the global batch and fits (here the whole
    # share: the tiny model fits easily, and one pass launches the fewest kernels)
    assert e.micro_batch == sps // (R * S) and e.passes_per_step == 1 and e.fits
    assert dict((r[0], r[2]) for r in v.rows())["micro-batch (samples per pass)"] == f"{sps // (R * S)} (1 per step)"


def test_roofline_rows_compare_like_with_like(pipe):
    a = analyze(pipe, gpus=("a100-80gb",))
    c = wl.op_counts(pipe)
    ops = a.ops.reset_index(drop=True)
    one = ge.estimate_ops(wl.per_run(pipe.stored_table("ops").reset_index(drop=True), c), "a100-80gb")
    assert np.allclose(ops["a100-80gb_est_time_s"], one["est_time_s"] * c.table_runs)
    # GPU intensity is per run (totals over totals), not step FLOPs over one run's bytes
    mm = ops.index[ops["name"].str.endswith("layer/ffn/matmul1")][0]
    assert ops.loc[mm, "a100-80gb_intensity"] == pytest.approx(
        ops.loc[mm, "flops"] / c.table_runs[mm] / ops.loc[mm, "min_bytes"])
    # the run's step, as run_totals defines it: the IPUs' cycles and the host's per-step terms
    terms = sum(pipe.run["schedule"]["per_step_terms"].values())
    assert a.totals["run_time_s"] == pytest.approx(pipe.run["total_cycles"] / pipe.target.clock_hz + terms, rel=1e-6)


def test_bad_op_counts_are_refused_clearly(pipe, tmp_path, capsys):
    class Bad:
        ops, target, programs = pipe.stored_table("ops"), pipe.target, pipe.stored_table("programs")
        run = dict(pipe.run) | {"op_counts": dict(pipe.run["op_counts"], runs_per_call=[1, 2])}

    with pytest.raises(ProfileError, match="one count per op"):  # the run record's check (profile/run_record.py)
        verdict(Bad())
    Bad.run = dict(pipe.run) | {"op_counts": dict(pipe.run["op_counts"], runs_per_step=[-1] * len(pipe.stored_table("ops")))}
    with pytest.raises(ProfileError, match=r"runs_per_step'\]: \[0\]: -1 is outside 0\.\."):
        wl.op_counts(Bad())
    with pytest.raises(ConfigError, match="gpu-micro-batch"):
        verdict(pipe, gpu_micro_batch=0)


def test_cli_json_of_a_pipelined_run(runs, capsys):
    assert main(["verdict", str(runs[0]), "--gpus", "2", "--gpu-micro-batch", "4", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["ipu"]["chips"] == R * S and d["gpu"]["chips"] == 2 and d["gpu_micro_batch"] == 4
    assert d["gpu_passes_per_step"] == R * G * BATCH / 2 / 4
    with pytest.raises(SystemExit) as ei:
        main(["verdict", str(runs[0]), "--gpu-micro-batch", "0"])
    assert ei.value.code == 2


def test_whole_graph_outlined_and_recomputed_resnet_give_the_same_gpu_pass(resnet50_deep):
    """A ResNet timing run outlines identical blocks (one program per block kind, replayed per block) and
    recomputes by replaying a block's forward after the loss: its ops rows then total several runs.  The GPU
    pass must be the same whether the IPU outlined or recomputed: one kernel per block's op, recompute left out.
    ResNet-50's depth (16 blocks of 8 kinds; ResNet-26's 8 blocks are 8 kinds, so it has nothing to outline) at
    tiny widths: the session's ``resnet50_deep``, whose recomputed builds the outlining tests read too."""
    passes = {}
    for outline in (True, False):
        for rc in (True, False):
            run = resnet50_deep(outline, rc)
            pd_ = run.profile_data
            mp = wl.model_pass(pd_)
            c = mp.counts
            assert not c.pipelined and (c.table_runs >= 1).all()
            if rc:
                assert mp.dropped_recompute > 0 and (c.recompute_runs > 0).sum() > 0
            passes[(outline, rc)] = (len(mp.ops), mp.ops["flops"].sum(), mp.ops["min_bytes"].sum())
            # per-run values times runs give back the table's totals
            per = wl.per_run(pd_.ops, c)
            assert np.allclose(per["flops"] * c.table_runs, pd_.ops["flops"])
            if not outline and not rc:
                # every op its own row, run once, except the norms and convolutions: one graph function per
                # signature, called wherever the network has that op (ops/graph_function.py); the pass is the
                # table less the updates and the calls' argument copies, each row as often as it runs
                keep = np.array([ge.op_class(t) != "optimizer" and t != "call" for t in pd_.ops["type"]])
                assert (c.table_runs[keep] > 1).any() and (c.recompute_runs == 0).all()
                assert len(mp.ops) == int(c.table_runs[keep].sum())
    assert len(set(passes.values())) == 1, passes
    # the outlined builds did outline: fewer ops rows (one per block kind) standing for the same pass
    assert resnet50_deep(True, True).num_ops < resnet50_deep(False, True).num_ops


def test_roofline_step_is_the_step_every_view_gives_host_work_included(pipe):
    """With the framework's per-step host work (PopART here: inferred for BERT, the session's ``pod_profile``) the
    step is longer than its IPU cycles; the roofline's wall time of the step, its achieved FLOP/s and the IPU's
    cost of the step take the step the Summary, the verdict and `info` give (run_totals), not the IPU part alone
    (it said 1.85 s where they said 2.02 s on the MLPerf POD16 BERT-Large config)."""
    from popvision_lite.analysis.run_totals import run_totals

    assert pipe.run["schedule"]["host_framework"] == "popart"
    rt = run_totals(pipe)
    ipu_only = pipe.run["total_cycles"] / pipe.target.clock_hz
    a = analyze(pipe)
    assert rt.step_seconds > ipu_only * 1.01  # the host term is there to be counted
    assert a.totals["run_time_s"] == pytest.approx(rt.step_seconds)
    assert a.totals["ipu_achieved_flops"] == pytest.approx(a.totals["flops"] / rt.step_seconds)
