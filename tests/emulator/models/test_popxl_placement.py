"""PopXL-style GPT placements as graphcore/examples runs GPT-3 (issue 43): 2-D tensor parallelism, attention
serialisation, IO tiles with overlapped streaming, and the weights sharded over the replicas (RTS) in
batch-serialised phased execution."""

from __future__ import annotations

import numpy as np
import pytest

from popvision_lite.emulator import schedule as sch
from popvision_lite.emulator.models.config import make_config
from popvision_lite.emulator.models.emulated import run_model
from popvision_lite.emulator.target import Target
from popvision_lite.errors import ConfigError
from tests.support.devices import ID as DEVICE  # the shipped Mk2 cut to 92 tiles (decision 0395)
from tests.support.emulations import shared_run

SMALL = dict(layers=2, hidden=64, heads=4, seq=32, vocab=512, recompute=True)


def _ops(run):
    return run.profile_data.ops.set_index("name")


def test_two_d_shard_splits_hidden_by_the_second_axis():
    cfg = make_config("gpt3-175b", tensor_parallel=8, tensor_parallel_2=8, replicas=4, streaming_weights=True)
    assert cfg.ipus == 256 and cfg.tp_group == 64 and cfg.stages == 1
    sh = cfg.shard()
    assert (sh.hidden, sh.heads, sh.d_head, sh.ffn_size) == (12288 // 8, 96 // 8, 128, 4 * 12288 // 8)
    assert sh.vocab * 8 >= 50257 and sh.vocab % 128 == 0
    with pytest.raises(ConfigError, match="tensor_parallel_2: 7 IPUs must divide the hidden size"):
        make_config("gpt2-small", tensor_parallel_2=7, **SMALL)
    with pytest.raises(ConfigError, match="tensor_parallel 2 x tensor_parallel_2 2 do not divide 6 IPUs"):
        make_config("gpt2-small", tensor_parallel_2=2, tensor_parallel=2, ipus=6, **SMALL)
    with pytest.raises(ConfigError, match=r"x tensor_parallel_2 \(2\) = 8 but ipus is 12"):
        make_config("gpt2-small", tensor_parallel_2=2, tensor_parallel=2, ipus=12, pipeline_stages=2, **SMALL)


def test_two_d_matmuls_take_a_quarter_and_add_the_published_all_reduces():
    full = shared_run(make_config("gpt2-small", **SMALL), timing_only=True)  # test_gpt_scale's too
    two = run_model(make_config("gpt2-small", tensor_parallel=2, tensor_parallel_2=2, **SMALL), timing_only=True)
    a, b = _ops(full), _ops(two)
    # q (tokens x hidden/t2 x width/t1) and FFN-in a quarter of the MACs; the attention core runs heads/t1 on every
    # IPU of a t2 group (PopXL: "computation: sharded tp1, identical tp2"), half the scores
    for op, share in (("layer/attention/q_matmul", 4), ("layer/ffn/matmul1", 4), ("layer/attention/qk_matmul", 2)):
        fa, fb = a.loc[f"ipu0/{op}", "flops"], b.loc[f"ipu0/{op}", "flops"]
        assert fb < fa and fa / fb == pytest.approx(share, rel=0.1), op
    s = two.schedule
    assert s["tensor_parallel"] == 4 and s["tensor_parallel_2"] == 2 and two.cfg.ipus == 4
    em, clock = Target.from_device("ipu-mk2", 1).em, Target.from_device("ipu-mk2", 1).clock_hz
    c = two.cfg  # the gpt2-small preset keeps its head width 64: attention width 4 x 64
    T, Hs, Ws, Fs = c.batch * c.seq, c.hidden // 2, c.attn_width // 2, c.ffn_size // 2

    def ar(nbytes):
        return sch.allreduce_for(em, nbytes, 2, 2, clock)

    assert s["tensor_parallel_allreduce_cycles"]["layer_fwd_att"] == ar(T * 3 * Ws * 2) + ar(T * Hs * 2)
    assert s["tensor_parallel_allreduce_cycles"]["layer_fwd_ffn"] == ar(T * Fs * 2) + ar(T * Hs * 2)
    assert s["tensor_parallel_allreduce_cycles"]["layer_bwd_att"] == ar(T * Hs * 2) + ar(T * Ws * 2)


def test_attention_serialisation_keeps_the_work_and_cuts_the_scores_memory():
    kw = dict(layers=2, hidden=64, heads=4, seq=256, vocab=512, recompute=True)
    # on the tests' device (decision 0395): the work and the scores' bytes of one device's two runs compared
    one = run_model(make_config("gpt2-small", **kw), DEVICE, timing_only=True)
    four = run_model(make_config("gpt2-small", attention_serialisation=4, **kw), DEVICE, timing_only=True)
    a, b = _ops(one), _ops(four)
    for op in ("layer/attention/qk_matmul", "layer/attention/softmax", "layer/attention/pv_matmul_dp"):
        assert b.loc[f"ipu0/{op}", "flops"] == pytest.approx(a.loc[f"ipu0/{op}", "flops"], rel=0.02), op
    # the block runs 4 times per attention half: its op counts say so
    counts = four.profile_data.run["op_counts"]
    names = list(four.profile_data.ops["name"])
    assert counts["calls_per_microbatch"][names.index("ipu0/layer/attention/qk_matmul")] == 4 * 2
    assert counts["calls_per_microbatch"][names.index("ipu0/layer/attention/q_matmul")] == 2
    na = one.profile_data.run["training_state"][0]["max_tile_bytes"]["need"]
    nb = four.profile_data.run["training_state"][0]["max_tile_bytes"]["need"]
    assert nb < na  # one block's (heads, S/4, S) scores live at a time
    assert four.schedule["attention_serialisation"] == 4
    with pytest.raises(ConfigError, match="attention_serialisation: 3 blocks must divide the sequence length"):
        make_config("gpt2-small", attention_serialisation=3, **kw)


def test_io_tiles_hold_no_op_and_hide_the_phase_streams():
    kw = SMALL | dict(layers=4, hidden=128, heads=4, seq=64, vocab=512, streaming_weights=True, optimizer="adam",
                      grad_accum=8, replicas=2, ipus=2, rts=True)
    plain = run_model(make_config("gpt2-small", **kw), timing_only=True)
    io = run_model(make_config("gpt2-small", io_tiles=128, **kw), timing_only=True)
    mem = np.asarray(io.profile_data.memory)
    T = io.profile_data.target.tiles_per_ipu
    stage_graph_bytes = mem[T - 128:T].sum()
    assert stage_graph_bytes < mem[:T - 128].sum() / 50  # the IO tiles hold no op's tensors (only spread state)
    ops = io.profile_data.ops
    assert (ops["tiles_used"] <= T - 128).all()
    # the phases' weight / activation streams overlap with the G micro-batches' compute
    assert io.schedule["stream_cycles"] < plain.schedule["stream_cycles"]
    assert io.schedule["io_tiles"] == 128
    with pytest.raises(ConfigError, match="io_tiles: tiles reserved for streaming need phased execution"):
        make_config("gpt2-small", io_tiles=64, **SMALL)


def test_batch_serialised_rts_shards_the_weight_streams_over_the_replicas():
    kw = SMALL | dict(layers=4, hidden=128, heads=4, seq=64, streaming_weights=True, optimizer="adam", grad_accum=8,
                      replicas=4, ipus=4)
    no = run_model(make_config("gpt2-small", **kw), timing_only=True)
    rts = run_model(make_config("gpt2-small", rts=True, **kw), timing_only=True)
    # each replica loads 1/R of each layer's weights (then all-gathers them): less DDR traffic
    assert rts.schedule["ddr_bytes_per_step_per_ipu"][0] < no.schedule["ddr_bytes_per_step_per_ipu"][0]
    # the layers' gradients are reduce-scattered in their phases: the step-end all-reduce keeps the rest only
    assert rts.schedule["allreduce_cycles"] < no.schedule["allreduce_cycles"]
