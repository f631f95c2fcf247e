"""Pipeline / replication schedule arithmetic (emulator/schedule.py) on hand-worked cases, and the
composed BERT runs built on it (emulator/models/pipeline.py)."""

import numpy as np
import pytest

from popvision_lite.analysis.run_totals import host_step_text
from popvision_lite.emulator import schedule as sch
from popvision_lite.emulator.models.config import make_config
from popvision_lite.emulator.models.emulated import run_model
from popvision_lite.emulator.target import Target
from tests.support.devices import ID as SMALL  # the shipped Mk2 cut to 92 tiles (decision 0395)

TINY = dict(batch=2, seq=16, hidden=32, heads=2, vocab=64)


def test_two_stage_pipeline_by_hand():
    # IPU0: F=10 B=30; IPU1 (last): F=20 B=40 in one cycle; copy 5; G=4 -> 6 cycles:
    # t0 10 | t1 60 | t2 10+30 vs 60 | t3 60 | t4 30 vs 60 | t5 30  (+5 each)
    p = sch.pipeline_cycles([10, 20], [30, 40], 5, 4)
    assert p["cycles"] == 6
    assert list(p["durations"]) == [15, 65, 65, 65, 65, 35]
    assert p["steady_cycles_per_microbatch"] == 65 == max(10 + 30, 20 + 40) + 5
    assert p["pipeline_total_cycles"] == 310
    assert p["fill_drain_cycles"] == 310 - 4 * 65
    # every micro-batch runs forward and backward exactly once on every IPU
    assert p["fwd_on"].sum(axis=0).tolist() == [4, 4] and p["bwd_on"].sum(axis=0).tolist() == [4, 4]


def test_wrapped_pipeline_by_hand():
    # 3 pipeline stages on 2 IPUs (MLPerf BERT's placement): stage 0 (embedding) and stage 2 (last
    # layers + heads) on IPU 0, stage 1 on IPU 1.  F = [1, 10, 20], B = [0, 30, 40], copy 5, G = 3:
    # G + 2 x 3 - 2 = 7 cycles; a cycle lasts as long as its busiest IPU (its stages' work summed)
    p = sch.pipeline_cycles([1, 10, 20], [0, 30, 40], 5, 3, ipu_of=[0, 1, 0])
    assert p["cycles"] == 7
    w = p["ipu_work"]
    assert w.shape == (7, 2)
    # cycle 2: IPU 0 runs mb 2's embedding and mb 0's last stage (forward + backward); IPU 1 mb 1's forward
    assert w[2].tolist() == [1 + 20 + 40, 10]
    assert p["steady_cycles_per_microbatch"] == max(1 + 20 + 40, 10 + 30) + 5
    assert list(p["durations"]) == list(w.max(axis=1) + 5)
    assert p["fwd_on"].sum(axis=0).tolist() == [3, 3, 3] and p["bwd_on"].sum(axis=0).tolist() == [3, 3, 3]


def test_half_layer_blocks_follow_popart_attention_ffn_placement():
    # Graphcore's MLPerf v1.1 att_ffn_placement [[1,[7,6]],[2,[6,7]],[3,[7,6]],[0,[4,5]]]
    cfg = make_config("bert-large", layer_split=[0, 6.5, 6.5, 6.5, 4.5], pipeline_placement="wrap", grad_accum=16)
    assert cfg.blocks() == [(0, 0), (7, 6), (6, 7), (7, 6), (4, 5)] and cfg.pipeline_depth == 5 and cfg.stages == 4
    assert cfg.ipus == 4
    # v1.0: whole layers, IPU 0 runs the embedding and 3 layers first and the heads last
    assert make_config("bert-large", layer_split=[3, 7, 7, 7, 0], pipeline_placement="wrap",
                       grad_accum=16).blocks() == [(3, 3), (7, 7), (7, 7), (7, 7), (0, 0)]
    assert make_config("bert-large", layer_split=[6, 6, 6, 6]).blocks() == [(6, 6)] * 4
    with pytest.raises(Exception, match="layer_split"):
        make_config("bert-large", layer_split=[6.25, 6.5, 6.5, 4.75], grad_accum=16)
    # any stage may be empty (an IPU that only passes the activations on: issue 43), but not every stage
    assert make_config("bert-large", layer_split=[0, 12, 0, 12, 0], pipeline_placement="wrap",
                       grad_accum=16).blocks() == [(0, 0), (12, 12), (0, 0), (12, 12), (0, 0)]
    with pytest.raises(Exception, match="layer_split"):
        make_config("bert-large", layer_split=[0, 0, 0, 0, 0], pipeline_placement="wrap", grad_accum=16)
    with pytest.raises(Exception, match="grad_accum"):  # 5 pipeline stages need 2 x 5 - 1 micro-batches
        make_config("bert-large", layer_split=[0, 6, 6, 6, 6], pipeline_placement="wrap", grad_accum=8)


def test_wrap_placement_ties_the_decoder_and_runs_two_stages_on_ipu0():
    kw = dict(TINY, layers=3, grad_accum=8, mask_tokens=4)
    seq = run_model(make_config("bert", layer_split=[1, 1, 1], **kw), timing_only=True)
    wrap = run_model(make_config("bert", layer_split=[0, 1, 1, 1], pipeline_placement="wrap", **kw),
                     timing_only=True)
    vocab, hidden = TINY["vocab"], TINY["hidden"]
    # no separate decoder weight: the sequential run's last IPU has one, the wrapped run's IPUs none
    p_seq = sum(t["params"] for t in seq.profile_data.run["training_state"])
    p_wrap = sum(t["params"] for t in wrap.profile_data.run["training_state"])
    assert p_seq - p_wrap == vocab * hidden
    sch_ = wrap.schedule
    assert sch_["pipeline_placement"] == "wrap" and sch_["stage_ipus"] == [0, 1, 2, 0]
    assert sch_["pipeline_depth"] == 4
    # IPU 0 carries the embedding and the heads with the last layer: its work is the largest share
    assert sch_["stage_fwd_cycles"][0] > sch_["stage_fwd_cycles"][1]
    names = set(wrap.profile_data.variables.name)
    assert not any("mlm_decoder_w" in n for n in names) and any("mlm_decoder_w" in n for n in
                                                                 set(seq.profile_data.variables.name))


def test_single_stage_has_no_copies_and_no_fill():
    p = sch.pipeline_cycles([10], [20], 99, 3)
    assert p["cycles"] == 3 and p["pipeline_total_cycles"] == 90 and p["fill_drain_cycles"] == 0


def test_stash_depth_popart():
    assert [sch.stash_depth(s, 4) for s in range(4)] == [7, 5, 3, 1]


def test_ring_allreduce_from_link_rate():
    # 2 (R-1)/R x bytes / rate + 2 latencies
    assert sch.ring_allreduce_cycles(1e6, 4, 16, 1e9, 100.0, 10) == 15000 + 60
    assert sch.ring_allreduce_cycles(1e6, 1, 4, 1e9, 100.0, 10) == 0
    # 8 replicas on 128 IPUs: 2 IPU-Link domains (POD64s) -> 4 replicas per domain on IPU-Links, then GW-Links
    gw = sch.GW_LINK_BYTES_PER_S_PER_IPU / 1e9
    want = 2 * 3 / 4 * 1e6 / 100 + 6 * 10 + 2 * 1 / 2 * (1e6 / 4) / gw + 2 * 10
    assert sch.ring_allreduce_cycles(1e6, 8, 128, 1e9, 100.0, 10) == int(np.ceil(want))
    # a smaller domain (given) splits the same run earlier; inside one POD64 all of it is on IPU-Links
    assert sch.ring_allreduce_cycles(1e6, 8, 32, 1e9, 100.0, 10, domain_ipus=16) == int(np.ceil(want))
    assert sch.ring_allreduce_cycles(1e6, 8, 64, 1e9, 100.0, 10) == int(np.ceil(2 * 7 / 8 * 1e6 / 100 + 14 * 10))


def test_allreduce_for_reads_the_fabric_from_the_device_spec():
    from popvision_lite.devices import load_device

    em = dict(load_device("ipu-bow").emulator)
    assert em["ipu_link_domain_ipus"] == 64
    a = sch.allreduce_for(em, 1e8, 16, 128, 1.85e9)
    slow = sch.allreduce_for(dict(em, gw_link_bytes_per_s_per_ipu=em["gw_link_bytes_per_s_per_ipu"] / 2), 1e8, 16,
                             128, 1.85e9)
    assert slow > a > sch.allreduce_for(em, 1e8, 16, 64, 1.85e9)  # crossing POD64s costs GW-Link time


def test_per_step_terms_are_seconds_outside_the_ipu_clock():
    em = {"host_step_seconds_popart": 0.2, "host_step_seconds_tensorflow": 0.01, "host_link_bytes_per_s_per_ipu": 1e9}
    assert sch.per_step_terms(em, "none", 16, 1e12, 0.1) == {"host_step": 0.0, "host_input": 0.0, "multi_host": 0.0}
    t = sch.per_step_terms(em, "popart", 16, 8e8, 0.1)  # 8e8 B over 16 GB/s = 50 ms < the 100 ms IPU step
    assert t == {"host_step": 0.2, "host_input": 0.0, "multi_host": 0.0}
    t = sch.per_step_terms(em, "tensorflow", 4, 8e8, 0.1)  # 200 ms over 4 GB/s: 100 ms exposed
    assert t["host_step"] == 0.01 and t["host_input"] == pytest.approx(0.1)
    with pytest.raises(ValueError, match="host_framework"):
        sch.per_step_terms(em, "jax", 1, 0, 0)
    assert sch.input_bytes_per_sample("bert", seq=512) == 8192
    assert sch.input_bytes_per_sample("resnet50", image=224) == 150528


def test_host_step_adds_seconds_not_cycles():
    """The host term changes the step's seconds and throughput, not its IPU cycles, and is the same number
    of seconds on a faster IPU clock."""
    base = dict(layers=2, optimizer="lamb", replicas=2, ipus=2, grad_accum=4, **TINY)
    a = run_model(make_config("bert", host_framework="none", **base), timing_only=True)
    b = run_model(make_config("bert", host_framework="popart", **base), timing_only=True)
    host = b.schedule["per_step_terms"]["host_step"]
    assert host > 0 and b.total_cycles == a.total_cycles
    assert b.schedule["step_seconds"] == pytest.approx(a.schedule["step_seconds"] + host)
    assert b.samples_per_second < a.samples_per_second
    assert a.schedule["host_framework"] == "none" and b.schedule["host_framework_basis"] == "stated"
    # the default: BERT's framework inferred (Graphcore ran it with PopART), the same step as stating it
    c = run_model(make_config("bert", **base), timing_only=True)
    assert c.schedule["host_framework"] == "popart" and c.schedule["host_framework_basis"].startswith("inferred")
    assert c.schedule["step_seconds"] == b.schedule["step_seconds"]
    assert "host step" in host_step_text(c.schedule) and "inferred" in host_step_text(c.schedule)


def test_host_framework_is_stated_inferred_or_unknown():
    assert sch.resolve_host_framework("tensorflow", "bert") == ("tensorflow", "stated")
    assert sch.resolve_host_framework("none", "bert") == ("none", "stated")
    fw, how = sch.resolve_host_framework("auto", "bert")
    assert fw == "popart" and "PopART" in how
    assert sch.resolve_host_framework("auto", "resnet")[0] == "tensorflow"
    fw, how = sch.resolve_host_framework("auto", "mlp")
    assert fw == "unknown" and "left out" in how
    # an unknown framework has no host step; the link input and the hosts' synchronisation are no framework's
    em = {"host_step_seconds_popart": 0.2, "host_link_bytes_per_s_per_ipu": 1e9, "multi_host_step_seconds": 0.003,
          "ipus_per_host": 64}
    t = sch.per_step_terms(em, "unknown", 256, 8e11, 0.1)
    assert t["host_step"] == 0.0 and t["host_input"] > 0 and t["multi_host"] == pytest.approx(0.006)
    text = host_step_text({"host_framework": "unknown", "host_framework_basis": how, "per_step_terms": t})
    assert "UNKNOWN" in text and "multi host 6.0 ms" in text
    assert "IPUs alone" in host_step_text({"host_framework": "none"}) == host_step_text({})
    # a plain (one-graph) run carries its host terms too
    r = run_model(make_config("mlp"), timing_only=True)
    assert r.schedule["host_framework"] == "unknown"
    assert r.schedule["step_seconds"] == pytest.approx(r.schedule["ipu_step_seconds"]
                                                      + sum(r.schedule["per_step_terms"].values()))


@pytest.mark.parametrize("opt,master,dt,per", [("sgd", False, "fp32", 0), ("momentum", False, "fp32", 4),
                                               ("adam", False, "fp16", 4), ("lamb", False, "fp32", 8),
                                               ("lamb", True, "fp32", 12), ("adam", True, "fp16", 8),
                                               ("lars", False, "fp32", 4)])
def test_optimizer_state_bytes_are_params_times_bytes_per_state(opt, master, dt, per):
    assert sch.optimizer_state_bytes(1000, opt, master, dt, "fp16") == 1000 * per


def test_composed_run_state_bytes_match_parameter_count():
    cfg = make_config("bert", layers=2, optimizer="lamb", optimizer_state_dtype="fp32", master_weights=True, **TINY)
    r = run_model(cfg, timing_only=True)
    ts = r.profile_data.run["training_state"][0]
    H, F, V, S = 32, 128, 64, 16
    layer = 4 * H * H + 2 * H * F + 4 * H
    extra = V * H + S * H + 2 * H + (H * H + H + 2 * H + H * V + H * H + 2 * H)
    params = 2 * layer + extra
    assert ts["params"] == params
    assert ts["mib"]["optimizer_moments"] * 2**20 == pytest.approx(params * 2 * 4)
    assert ts["mib"]["master_weights"] * 2**20 == pytest.approx(params * 4)
    assert ts["mib"]["optimizer_state_onchip"] * 2**20 == pytest.approx(params * 12)


def test_steady_state_is_slowest_stage_plus_its_copies():
    cfg = make_config("bert", layers=4, ipus=2, grad_accum=6, **TINY)
    r = run_model(cfg, timing_only=True)
    s = r.schedule
    t = Target.from_device("ipu-mk2", 1)
    act = 2 * 16 * 32 * 2  # batch x seq x hidden fp16, each way
    link = int(np.ceil(act / t.em["ipu_link_bytes_per_cycle"])) + int(t.em["ipu_link_latency_cycles"])
    assert s["inter_ipu_copy_cycles"] == int(t.em["global_sync_cycles"]) + link
    assert s["steady_cycles_per_microbatch"] == max(s["stage_cycles"]) + s["inter_ipu_copy_cycles"]
    assert s["step_cycles"] == (s["pipeline_total_cycles"] + s["optimizer_cycles"] + s["allreduce_cycles"]
                                + s["stream_cycles"])
    assert r.samples_per_second == pytest.approx(6 * 2 / s["step_seconds"])
    # the profile draws per-IPU lanes that overlap in time
    st = r.profile_data.steps
    a, b = st[st.ipu == 0], st[st.ipu == 1]
    assert len(a) and len(b)
    over = (a.start_cycle.to_numpy()[:, None] < b.end_cycle.to_numpy()[None, :]) & \
           (b.start_cycle.to_numpy()[None, :] < a.end_cycle.to_numpy()[:, None])
    assert over.any()
    assert st.end_cycle.max() <= r.total_cycles


def test_pipelining_is_faster_per_sample_and_cost_does_not_grow_with_grad_accum():
    one = run_model(make_config("bert", layers=4, **TINY), timing_only=True)
    four = run_model(make_config("bert", layers=4, ipus=4, grad_accum=16, **TINY), timing_only=True)
    assert four.samples_per_second > one.samples_per_second
    big = run_model(make_config("bert", layers=4, ipus=8, replicas=2, grad_accum=400, **TINY), timing_only=True)
    assert big.num_vertices == four.num_vertices  # the same distinct stage programs, whatever G and R
    assert big.schedule["allreduce_cycles"] > 0 and four.schedule["allreduce_cycles"] == 0
    assert big.samples_per_second > four.samples_per_second


@pytest.mark.parametrize("args,needle", [
    (["--layer-split", "1,1,1"], "--layer-split"),
    (["--ipus", "4", "--replicas", "3"], "--replicas"),
    (["--ipus", "8"], "--ipus"),                     # 2 layers < 8 stages
    (["--ipus", "4", "--grad-accum", "3"], "--grad-accum"),
    (["--available-memory-proportion", "0"], "--available-memory-proportion"),
    (["--optimizer-state", "disk"], "--optimizer-state"),
])
def test_cli_bad_scale_combinations_exit_2_naming_the_field(tmp_path, capsys, args, needle):
    from popvision_lite.cli import main

    out = tmp_path / "x.pvl"
    try:
        rc = main(["emulate", "bert", "--layers", "2", *args, "-q", "-o", str(out)])
    except SystemExit as e:
        rc = e.code
    err = capsys.readouterr().err
    assert rc == 2 and needle in err and "Traceback" not in err
    assert not out.exists()


def test_cli_prints_samples_per_second_and_schedule(tmp_path, capsys):
    from popvision_lite.cli import main
    from popvision_lite.profile import open_profile

    out = tmp_path / "p.pvl"
    rc = main(["emulate", "bert", "--layers", "2", "--ipus", "4", "--replicas", "2", "--batch", "2", "--seq", "16",
               "--hidden", "32", "--vocab", "64", "--optimizer", "adam", "--rts", "--optimizer-state", "offchip",
               "--timing-only", "-q", "-o", str(out)])
    text = capsys.readouterr().out
    assert rc == 0
    assert " samples/s" in text and "schedule: 2 replica(s) x 2 pipeline stage(s)" in text
    with open_profile(out) as p:
        assert p.format_version >= 2  # v2 added the schedule record
        assert p.run["samples_per_second"] > 0 and p.run["schedule"]["replicas"] == 2
        assert p.run["schedule"]["stream_cycles"] > 0 and p.run["schedule"]["allreduce_cycles"] > 0
        assert p.target.num_ipus == 2  # one replica's pipeline
        assert (p.stored_table("steps").kind == 4).any()  # stream-copy steps for the off-chip state


def test_whole_graph_models_replicate_with_numerics_checked():
    """mlp (and any builder without stage programs): one micro-batch of one replica is emulated with
    numerics; replicas, grad_accum and training state are composed on top."""
    one = run_model(make_config("mlp", batch=8, hidden=16, layers=2))
    rep = run_model(make_config("mlp", batch=8, hidden=16, layers=2, replicas=4, ipus=4, grad_accum=5,
                                optimizer="adam", rts=True))
    assert all(v["passed"] for v in rep.numeric_checks.values()) and rep.numeric_checks
    assert rep.profile_data.target.num_ipus == 1  # one replica
    s = rep.schedule
    params = 2 * (16 * 16 + 16)
    t = Target.from_device("ipu-mk2", 1)
    assert s["allreduce_cycles"] == sch.ring_allreduce_cycles(params * 2, 4, 4, t.clock_hz,
                                                              t.em["ipu_link_bytes_per_cycle"],
                                                              int(t.em["ipu_link_latency_cycles"]))
    assert s["step_cycles"] == 5 * s["steady_cycles_per_microbatch"] + s["allreduce_cycles"] + s["optimizer_cycles"]
    assert rep.samples_per_second == pytest.approx(4 * 5 * 8 / s["step_seconds"])
    assert rep.samples_per_second > 3 * one.samples_per_second
    ts = rep.profile_data.run["training_state"][0]
    assert ts["mib"]["optimizer_moments"] * 2**20 == pytest.approx(params * 2 * 4)
    # RTS: a quarter of the moments on each replica's IPU, spread over its tiles
    assert ts["mib"]["optimizer_state_onchip"] * 2**20 == pytest.approx(params * 8 / 4)


def test_phased_execution_streams_each_layer_and_keeps_one_on_chip():
    kw = dict(layers=4, ipus=2, grad_accum=4, optimizer="adam", **TINY)
    a = run_model(make_config("bert", **kw), timing_only=True)
    b = run_model(make_config("bert", streaming_weights=True, **kw), timing_only=True)
    assert b.schedule["phased_execution"] and not a.schedule["phased_execution"]
    H, F = 32, 128
    layer = 4 * H * H + 2 * H * F + 4 * H
    # per micro-batch and layer: weights in for the forward and for the backward, accumulator read + write
    want = 4 * 2 * (2 * layer * 2 + 2 * layer * 2)
    ddr = b.schedule["ddr_bytes_per_step_per_ipu"]
    state = [t["mib"]["optimizer_moments"] * 2**20 for t in b.profile_data.run["training_state"]]
    assert ddr[1] == pytest.approx(want + 2 * state[1])
    assert all(x > y for x, y in zip(b.schedule["stage_cycles"], a.schedule["stage_cycles"], strict=True))
    var = 0  # always-live variable bytes: one layer's weights on chip, no accumulators / state of the layers
    assert b.profile_data.memory[:, var, 0].sum() < a.profile_data.memory[:, var, 0].sum()


def test_gpt_presets_are_causal_decoders_with_a_language_model_head():
    cfg = make_config("gpt2-small", layers=2, hidden=32, heads=2, seq=16, vocab=64)
    assert (cfg.model, cfg.batch) == ("gpt", 1)
    assert make_config("gpt3-175b").hidden == 12288 and make_config("gpt3-175b").seq == 2048
    r = run_model(cfg, timing_only=True)
    names = set(r.profile_data.ops.name)
    assert "ipu0/layer/attention/causal_mask" in names and "ipu0/heads/lm/decoder_matmul" in names
    assert not any("nsp" in n or "mlm" in n for n in names)
    assert r.samples_per_second > 0


def test_composed_profile_programs_point_at_their_steps():
    r = run_model(make_config("bert", layers=2, ipus=2, grad_accum=3, **TINY), timing_only=True)
    pr, st = r.profile_data.programs, r.profile_data.steps
    leaves = pr[pr.kind.isin(["Execute", "Copy"]) & (pr.first_step >= 0)]
    assert len(leaves) > 10
    for _, row in leaves.head(20).iterrows():
        assert st.prog_id.iloc[int(row.first_step)] == row.prog_id and st.prog_id.iloc[int(row.last_step)] == row.prog_id
    roots = pr[pr.parent_id < 0]
    assert set(roots.name) == {"ipu0/stage0", "ipu1/stage1"} and (roots.first_step >= 0).all()


def test_outlined_layers_charge_code_once():
    from popvision_lite.profile.schema import CATEGORY_CODE

    one = run_model(make_config("bert", layers=1, **TINY), timing_only=True)
    three = run_model(make_config("bert", layers=3, **TINY), timing_only=True)
    code = [CATEGORY_CODE[c] for c in ("vertexCode", "vertexInstanceState", "vertexFieldData", "internalExchangeCode",
                                       "controlCode")]
    np.testing.assert_array_equal(one.profile_data.memory[:, code, :], three.profile_data.memory[:, code, :])
    w1 = one.profile_data.run["training_state"][0]["mib"]["weights"]
    w3 = three.profile_data.run["training_state"][0]["mib"]["weights"]
    H, F = 32, 128
    layer = (4 * H * H + 2 * H * F + 4 * H) * 2 / 2**20
    assert w3 - w1 == pytest.approx(2 * layer)
    # time: the body's cycles once per layer (linear in layers), emulated once
    two = run_model(make_config("bert", layers=2, **TINY), timing_only=True)
    f1, f2, f3 = (r.schedule["stage_fwd_cycles"][0] for r in (one, two, three))
    assert f3 - f1 == 2 * (f2 - f1) > 0
    assert three.num_vertices == one.num_vertices


def test_inference_pipeline_is_forward_only():
    p = sch.pipeline_cycles([10, 20], [0, 0], 5, 4)
    assert p["cycles"] == 4 + 2 - 1 and p["pipeline_total_cycles"] == 15 + 25 * 3 + 25
    r = run_model(make_config("bert", layers=2, ipus=2, grad_accum=3, training=False, optimizer="adam", **TINY),
                  timing_only=True)
    s = r.schedule
    assert s["stage_bwd_cycles"] == [0, 0] and s["optimizer_cycles"] == 0 and s["allreduce_cycles"] == 0
    assert all(t["mib"]["optimizer_moments"] == 0 and t["mib"]["grad_accum"] == 0
               for t in r.profile_data.run["training_state"])
    assert not any("bwd" in n or "heads" in n for n in r.profile_data.ops.name)


def test_op_outlining_shares_code_of_identical_ops_only_on_the_composed_path():
    from popvision_lite.profile.schema import CATEGORY_CODE

    # big enough that the projections spread over every tile of the test device (small ops start on rotating
    # tiles; on the shipped 1,472 tiles: hidden 512, seq 128, batch 8)
    kw = dict(layers=1, batch=4, seq=64, hidden=256, heads=4, vocab=64)
    on = run_model(make_config("bert", **kw), SMALL, timing_only=True)
    off = run_model(make_config("bert", outline=False, **kw), SMALL, timing_only=True)
    x = CATEGORY_CODE["internalExchangeCode"]
    vs = CATEGORY_CODE["vertexInstanceState"]
    n = on.schedule["outlined_ops"]["0"]
    assert n["copies"] > 0 and n["compute_sets"] > 0  # e.g. the identical Q / K / V projections
    assert on.profile_data.memory[:, x, 0].sum() < off.profile_data.memory[:, x, 0].sum()
    assert on.profile_data.memory[:, vs, 0].sum() < off.profile_data.memory[:, vs, 0].sum()
    assert on.total_cycles == off.total_cycles  # code sharing changes memory, not the steps
    assert off.schedule["outlined_ops"]["0"] == {"copies": 0, "compute_sets": 0}


def test_multi_host_term_is_one_round_per_doubling_of_host_servers():
    from popvision_lite.devices import load_device

    em = {"ipus_per_host": 64, "multi_host_step_seconds": 0.003}
    assert [sch.host_servers(em, n) for n in (1, 16, 64, 65, 128, 256, 512)] == [1, 1, 1, 2, 2, 4, 8]
    assert [sch.multi_host_rounds(em, n) for n in (64, 128, 192, 256, 512)] == [0, 1, 2, 2, 3]
    terms = {n: sch.per_step_terms(em, "tensorflow", n, 0, 0.01)["multi_host"] for n in (64, 128, 256)}
    assert terms == {64: 0.0, 128: pytest.approx(0.003), 256: pytest.approx(0.006)}
    assert sch.per_step_terms(em, "none", 256, 0, 0.01)["multi_host"] == 0.0     # the IPUs alone
    assert sch.per_step_terms({}, "popart", 256, 0, 0.01)["multi_host"] == 0.0   # a spec without the constant
    for dev in ("ipu-mk2", "ipu-bow"):   # both specs carry the same calibrated host-side constant
        spec = load_device(dev)
        assert spec.basis("emulator.multi_host_step_seconds") == "calibrated"
        assert spec.value("emulator.multi_host_step_seconds") > 0 and spec.value("emulator.ipus_per_host") == 64
