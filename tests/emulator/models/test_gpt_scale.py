"""GPT-3-class runs: tensor parallelism (Megatron-style shards, all-reduces over the group), batch-serialised
phased execution, host-memory pre-check of composed runs, and cost that does not grow with the layer count."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from popvision_lite.emulator import schedule as sch
from popvision_lite.emulator.models.config import make_config
from popvision_lite.emulator.models.emulated import release_graphs, run_model
from popvision_lite.emulator.target import Target
from popvision_lite.errors import ConfigError
from popvision_lite.profile import schema
from tests.support.devices import ID as SMALL_DEVICE  # the shipped Mk2 cut to 92 tiles (decision 0395)
from tests.support.emulations import shared_run

SMALL = dict(layers=2, hidden=64, heads=4, seq=32, vocab=512)


@pytest.mark.parametrize("name,kw", [
    ("gpt3-175b", dict(ipus=64, tensor_parallel=32, replicas=2, streaming_weights=True, rts=True)),
    ("gpt3-175b", dict(ipus=256, tensor_parallel=32, replicas=8, streaming_weights=True, rts=True)),
    ("gpt3-13b", dict(ipus=64, tensor_parallel=8, replicas=8, streaming_weights=True, rts=True)),
    ("gpt3-2.7b", dict(ipus=64, tensor_parallel=16, replicas=4, streaming_weights=True)),
])
def test_pod_presets_build_valid_configs(name, kw):
    cfg = make_config(name, optimizer="adam", recompute=True, **kw)
    assert cfg.replicas * cfg.stages * cfg.tensor_parallel == cfg.ipus
    sh = cfg.shard()
    assert sh.heads * cfg.tensor_parallel == cfg.heads and sh.d_head == cfg.d_head
    assert sh.ffn_size * cfg.tensor_parallel == cfg.ffn_size and sh.hidden == cfg.hidden
    # the vocabulary padded to a multiple of 128 x t (Megatron-LM), so each slice is a multiple of 128
    assert sh.vocab % 128 == 0 and 0 <= sh.vocab * cfg.tensor_parallel - cfg.vocab < 128 * cfg.tensor_parallel
    assert sh.stages == cfg.stages


@pytest.mark.parametrize("kw,needle", [
    (dict(tensor_parallel=3), "tensor_parallel: 3 IPUs must divide the attention heads"),
    (dict(tensor_parallel=2, ipus=6, pipeline_stages=2), "ipus: replicas (1) x pipeline_stages (2) x tensor_parallel (2)"),
    (dict(tensor_parallel=2, ipus=5), "replicas: 1 replicas x tensor_parallel 2 do not divide 5 IPUs"),
    (dict(tensor_parallel=0), "tensor_parallel: must be a positive integer"),
])
def test_bad_tensor_parallel_settings_name_the_field(kw, needle):
    with pytest.raises(ConfigError) as e:
        make_config("gpt2-small", **SMALL | kw)
    assert needle in str(e.value)
    with pytest.raises(ConfigError, match="tensor_parallel: only the bert / gpt models"):
        make_config("mlp", tensor_parallel=2)


def _matmul_flops(run):
    """Per matmul op its multiply-add FLOPs 2 G M N K: the op's FLOPs less the additions of its K-partial
    reduction ((pk - 1) per output, ReduceAdd), which depend on the plan the op's tile count gets."""
    ops = run.profile_data.ops.set_index("name")
    mm = ops[ops["type"] == "matmul"]
    pk = mm["plan"].str.extract(r"K=(\d+) split", expand=False).astype(int)
    k = pk * mm["plan"].str.extract(r"blocks \d+x\d+x(\d+)", expand=False).astype(int)
    return mm["flops"] * 2 * k // (2 * k + pk - 1)


def test_tensor_parallel_keeps_the_flops_and_adds_group_all_reduces():
    t = 4
    a = shared_run(make_config("gpt2-small", recompute=True, **SMALL), timing_only=True)  # test_popxl_placement's too
    b = run_model(make_config("gpt2-small", recompute=True, tensor_parallel=t, **SMALL), timing_only=True)
    assert b.cfg.ipus == t and b.profile_data.target.num_ipus == 1  # one IPU of the group drawn
    fa, fb = _matmul_flops(a), _matmul_flops(b) * t
    # column-split matmuls (q/k/v, attention, FFN up, LM head) do exactly a t-th of the work on each IPU
    for op in ("layer/attention/q_matmul", "layer/attention/qk_matmul", "layer/attention/pv_matmul",
               "layer/ffn/matmul1", "heads/lm/decoder_matmul"):
        assert fb[f"ipu0/{op}"] == fa[f"ipu0/{op}"], op
    # row-split ones leave the last K additions to the all-reduce: t shards of K/t (t - 1 fewer adds per output)
    assert fb.sum() <= fa.sum() and fb.sum() == pytest.approx(fa.sum(), rel=1e-2)
    # the group's all-reduces: one per layer half per forward, recompute and backward, each a ring over t IPUs
    tgt = Target.from_device("ipu-mk2", 1)
    act = 1 * 32 * 64 * 2
    ring = sch.allreduce_for(tgt.em, act, t, t, tgt.clock_hz)
    s = b.schedule
    assert s["tensor_parallel"] == t and s["tensor_parallel_allreduce_bytes"] == act
    assert s["tensor_parallel_allreduce_cycles"]["layer_fwd_att"] == ring > 0
    assert s["tensor_parallel_allreduce_cycles"]["head"] > ring  # plus the vocab-parallel softmax's two
    assert not a.schedule["tensor_parallel_allreduce_cycles"]
    # drawn as global exchange steps moving 2 (t-1)/t of the activation per IPU
    st = b.profile_data.steps
    xg = st[(st.kind == schema.STEP_KINDS.index("exchange_global")) & (st.ipu == 0)]
    assert (xg.bytes_in // 1472 * 1472 == (2 * (t - 1) * act // t) // 1472 * 1472).any()
    # each IPU holds about a t-th of the layer weights
    wa = a.profile_data.run["training_state"][0]["params"]
    wb = b.profile_data.run["training_state"][0]["params"]
    assert wb < wa / t * 1.2


def test_batch_serialised_phases_load_weights_once_per_step():
    kw = dict(SMALL, tensor_parallel=2, streaming_weights=True, recompute=True, optimizer="adam")
    runs = {g: run_model(make_config("gpt2-small", grad_accum=g, **kw), timing_only=True) for g in (2, 4)}
    s2, s4 = runs[2].schedule, runs[4].schedule
    assert s2["batch_serialised"] and s4["batch_serialised"] and s2["phased_execution"]
    act = 32 * 64 * 2
    # two more micro-batches add only each layer's input out to DDR and back (a 1/t slice per IPU)
    d = s4["ddr_bytes_per_step_per_ipu"][0] - s2["ddr_bytes_per_step_per_ipu"][0]
    assert d == pytest.approx(2 * SMALL["layers"] * 2 * act / 2, rel=1e-6)
    # no activation stash on chip: the layers' inputs wait in streaming memory
    assert runs[4].profile_data.run["training_state"][0]["mib"]["stash"] == 0
    # a pipelined streaming run keeps the per-micro-batch weight loads
    p = run_model(make_config("gpt2-small", grad_accum=3, **dict(kw, tensor_parallel=1, ipus=2)), timing_only=True)
    assert p.schedule["phased_execution"] and not p.schedule["batch_serialised"]


def _traced_peak(cfg) -> int:
    release_graphs()  # build the run's graphs, not the previous run's kept ones (models/pipeline.py)
    tracemalloc.start()
    try:
        run_model(cfg, timing_only=True)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_emulation_memory_is_independent_of_layer_count():
    kw = dict(hidden=64, heads=4, seq=32, vocab=128, ipus=2, tensor_parallel=2, streaming_weights=True)
    run_model(make_config("gpt2-small", layers=2, **kw), timing_only=True)  # warm the per-process caches
    two = _traced_peak(make_config("gpt2-small", layers=2, **kw))
    many = _traced_peak(make_config("gpt2-small", layers=48, **kw))
    assert many < 1.15 * two, (two, many)


def test_peak_tile_categories_are_summarised():
    from popvision_lite.emulator.run_summary import end_of_run_numbers

    r = run_model(make_config("gpt2-small", **SMALL), timing_only=True)
    s = end_of_run_numbers(r.profile_data, r)
    cats = dict(s["peak_categories"])
    mem = np.asarray(r.profile_data.memory)[s["peak_tile"]].sum(axis=1)
    assert sum(cats.values()) <= s["peak_bytes"] and max(cats.values()) == mem.max()


def test_run_totals_and_summary_count_every_ipu_of_the_groups(tmp_path, capsys):
    import popvision_lite as pvl
    from popvision_lite.analysis.run_totals import run_totals
    from popvision_lite.cli import main

    out = tmp_path / "tp.pvl"
    rc = main(["emulate", "gpt2-small", "--tensor-parallel", "2", "--replicas", "2", "--layers", "2", "--hidden", "64",
               "--heads", "4", "--seq", "32", "--vocab", "512", "--timing-only", "-q", "-o", str(out)])
    so = capsys.readouterr().out
    assert rc == 0
    assert "x tensor parallel 2" in so and "tokens/s" in so
    with pvl.open(out) as p:
        rt = run_totals(p)
        assert (rt.replicas, rt.stages, rt.tensor_parallel, rt.num_ipus) == (2, 1, 2, 4)
        assert "2 tensor-parallel IPUs = 4 IPUs" in rt.ipu_count_text
        assert rt.samples_per_second * 32 == pytest.approx(float(so.split(" tokens/s")[0].split(", ")[-1].replace(",", "")),
                                                           rel=1e-3)


def test_tensor_parallel_from_a_toml_run_config(tmp_path):
    from popvision_lite.emulator.run_config import load_run_config

    f = tmp_path / "gpt.toml"
    f.write_text('model = "gpt3-13b"\n[model_args]\ntensor_parallel = 8\nreplicas = 8\nstreaming_weights = true\n')
    rc = load_run_config(f)
    cfg = make_config(rc.model, **rc.model_args)
    assert (cfg.ipus, cfg.stages, cfg.tensor_parallel) == (64, 1, 8)
    f.write_text('model = "gpt3-13b"\n[model_args]\ntensor_parallel = "eight"\n')
    with pytest.raises(ConfigError, match="tensor_parallel"):
        load_run_config(f)


def test_out_of_memory_report_counts_every_tile_over():
    # a GPT-2 layer with a big vocabulary head on one IPU of the tests' device (92 tiles, decision 0395): many
    # tiles over (64; on the shipped chip GPT-2-small with its 50,257-token head: 1,392 of 1,472), all reported
    r = run_model(make_config("gpt2-small", layers=1, seq=64, vocab=16384, hidden=256, heads=4), SMALL_DEVICE,
                  timing_only=True)
    need = np.asarray(r.profile_data.memory).sum(axis=(1, 2))
    over = int((need > r.profile_data.target.sram_bytes_per_tile).sum())
    assert 16 < over < len(need) and len(r.oom_report) == over  # not every tile: the report counts those over
    assert len(r.profile_data.run["oom_tiles"]) == min(over, 16)
