"""Transformers placed as optimum-graphcore ran them (issue 43): stages without layers, the tied LM head on IPU 0
(the wrap placement for GPT), the vocabulary serialised over slices, task heads and device iterations.  On the tests'
device with 92 tiles (decision 0395): every assertion compares two runs of one device or counts ops, parameters
and stages by their definitions, none is a figure of the shipped chip's 1,472 tiles."""

from __future__ import annotations

import pytest

from popvision_lite.emulator import schedule as sch
from popvision_lite.emulator.models.config import make_config
from popvision_lite.emulator.models.emulated import run_model
from popvision_lite.emulator.models.transformer import vocab_slices
from popvision_lite.emulator.run_config import FIELDS
from popvision_lite.emulator.target import Target
from popvision_lite.errors import ConfigError
from tests.support.devices import ID as DEVICE  # the shipped Mk2 cut to 92 tiles (decision 0395)

SMALL = dict(layers=4, hidden=64, heads=4, seq=32, vocab=1001, recompute=True)


def _run(**kw):
    return run_model(make_config("gpt2-small", **(SMALL | kw)), DEVICE, timing_only=True)


def _ops(run, ipu):
    o = run.profile_data.ops
    return o[o["ipu"] == ipu]


def test_gpt_accepts_stages_without_layers_and_the_wrap_placement():
    cfg = make_config("gpt2-medium", layer_split=[0, 3, 3, 3, 3, 4, 4, 4, 0], pipeline_placement="wrap",
                      replicas=2, grad_accum=256)
    assert cfg.stages == 8 and cfg.pipeline_depth == 9 and cfg.ipus == 16
    assert cfg.blocks()[0] == (0, 0) and cfg.blocks()[-1] == (0, 0) and cfg.blocks()[5] == (4, 4)
    # a sequential split may also leave IPU 0 without layers (optimum-graphcore's RoBERTa [0, 4, 4, 4])
    assert make_config("bert-base", layer_split=[0, 4, 4, 4]).blocks()[0] == (0, 0)
    with pytest.raises(ConfigError, match="layer_split"):
        make_config("gpt2-small", layer_split=[0, 0], **{k: v for k, v in SMALL.items() if k != "layers"},
                    layers=1)


def test_wrap_puts_the_embedding_and_the_tied_lm_head_on_ipu0_without_a_layer():
    r = _run(layer_split=[0, 2, 2, 0], pipeline_placement="wrap", grad_accum=8)
    s = r.schedule
    assert s["stage_ipus"] == [0, 1, 2, 0] and s["layer_split"] == [0, 2, 2, 0]
    ipu0 = _ops(r, 0)["name"].tolist()
    assert not any("/layer/" in n for n in ipu0)  # IPU 0 holds no layer body
    assert any(n.endswith("embedding/gather") for n in ipu0)
    assert any(n.endswith("heads/lm/decoder_matmul") for n in ipu0)
    assert not any("/heads/" in n for n in _ops(r, 2)["name"])  # the last IPU of the chain has no head
    # tied: IPU 0 holds one table (vocab x hidden) and the position embedding, no separate decoder
    ts = r.profile_data.run["training_state"]
    assert ts[0]["params"] == 1001 * 64 + 32 * 64 + 2 * 64
    # IPU 0's forward stage is the embedding alone; its last stage (the head) runs in the backward wave
    assert s["stage_fwd_cycles"][0] > 0 and s["stage_cycles"][0] < s["stage_cycles"][1]


def test_sequential_gpt_keeps_its_own_decoder_on_the_last_ipu():
    r = _run(layer_split=[2, 2], grad_accum=4)
    assert any("heads/lm/decoder_matmul" in n for n in _ops(r, 1)["name"])
    # both IPUs hold two identical layers; IPU 0 adds the embedding table, the positions and the embedding's layer
    # norm (as the wrap test above counts them), IPU 1 its own untied decoder (vocab x hidden, no bias): exact
    ts = r.profile_data.run["training_state"]
    assert ts[1]["params"] - ts[0]["params"] == 1001 * 64 - (1001 * 64 + 32 * 64 + 2 * 64)


@pytest.mark.parametrize("f", [1, 4])
def test_serialised_lm_head_runs_one_matmul_per_vocabulary_slice(f):
    r = _run(layer_split=[0, 2, 2, 0], pipeline_placement="wrap", grad_accum=8, embedding_serialization=f)
    names = _ops(r, 0)["name"].tolist()
    fwd = [n for n in names if "/lm/decoder_matmul" in n and not n.endswith(("_dw", "_dx")) and "_dw_" not in n
           and "_dx_" not in n and "dx_sum" not in n]
    assert len(fwd) == f
    assert vocab_slices(make_config("gpt2-small", **SMALL | dict(embedding_serialization=f))) == (
        f, -(-1001 // f))
    # 1001 in 4 slices pads to 1004 rows: the padded logits are masked before the loss (optimum-graphcore)
    assert any("padding_mask" in n for n in names) == (f == 4)
    ts = r.profile_data.run["training_state"]
    assert ts[0]["params"] == f * -(-1001 // f) * 64 + 32 * 64 + 2 * 64


def test_serialisation_cuts_the_head_s_temporaries():
    a = _run(layer_split=[0, 2, 2, 0], pipeline_placement="wrap", grad_accum=8, vocab=30000, embedding_serialization=1)
    b = _run(layer_split=[0, 2, 2, 0], pipeline_placement="wrap", grad_accum=8, vocab=30000, embedding_serialization=6)
    na = a.profile_data.run["training_state"][0]["max_tile_bytes"]["need"]
    nb = b.profile_data.run["training_state"][0]["max_tile_bytes"]["need"]
    assert nb < na  # one slice of the logits live at a time


@pytest.mark.parametrize("head,needle,absent", [
    ("question_answering", "heads/qa/outputs_matmul", "mlm/"),
    ("sequence_classification", "heads/cls/dense_matmul", "mlm/"),
    ("pretraining", "heads/mlm/decoder_matmul", "qa/"),
])
def test_task_heads_replace_the_pretraining_heads(head, needle, absent):
    r = run_model(make_config("bert", layers=2, hidden=64, heads=4, seq=32, vocab=512, layer_split=[1, 1],
                              grad_accum=4, task_head=head), DEVICE, timing_only=True)
    names = _ops(r, 1)["name"].tolist()
    assert any(n.endswith(needle) for n in names)
    assert not any(absent in n for n in names)


def test_question_answering_head_is_small_next_to_the_mlm_head():
    kw = dict(layers=2, hidden=64, heads=4, seq=32, vocab=4096, layer_split=[1, 1], grad_accum=4)
    qa = run_model(make_config("bert", task_head="question_answering", **kw), DEVICE, timing_only=True)
    mlm = run_model(make_config("bert", **kw), DEVICE, timing_only=True)
    assert qa.profile_data.run["training_state"][1]["params"] < mlm.profile_data.run["training_state"][1]["params"]
    assert qa.schedule["stage_bwd_cycles"][1] < mlm.schedule["stage_bwd_cycles"][1]


def test_device_iterations_share_the_host_step_and_keep_the_samples():
    em = Target.from_device("ipu-mk2", 1).em
    one = sch.per_step_terms(em, "popart", 16, 0.0, 1.0)
    four = sch.per_step_terms(em, "popart", 16, 0.0, 1.0, device_iterations=4)
    assert one["host_step"] > 0 and four["host_step"] == pytest.approx(one["host_step"] / 4)
    a = _run(layer_split=[2, 2], grad_accum=4, host_framework="popart")
    b = _run(layer_split=[2, 2], grad_accum=4, host_framework="popart", device_iterations=4)
    assert b.schedule["device_iterations"] == 4 and "device_iterations" not in a.schedule
    assert b.schedule["samples_per_step"] == a.schedule["samples_per_step"]
    assert b.schedule["per_step_terms"]["host_step"] == pytest.approx(a.schedule["per_step_terms"]["host_step"] / 4)
    assert b.schedule["step_cycles"] == a.schedule["step_cycles"]


def test_placement_fields_are_run_config_fields():
    for name, kind in (("embedding_serialization", "int"), ("device_iterations", "int"), ("task_head", "choice"),
                       ("layer_split", "layer_split"), ("pipeline_placement", "choice"),
                       ("available_memory_proportion", "fractions")):
        assert FIELDS[name].kind == kind, name
    assert "gpt" in FIELDS["pipeline_placement"].only_for
    assert "S + 1" in FIELDS["pipeline_placement"].help and "poptorch" in FIELDS["host_framework"].choices
    with pytest.raises(ConfigError, match="embedding_serialization"):
        make_config("gpt2-small", **SMALL | dict(embedding_serialization=2000))
    with pytest.raises(ConfigError, match="task_head"):
        make_config("mlp", task_head="question_answering")
