"""The host-memory estimate of a run (emulator/models/host_memory.py): what it counts, what it names, and the
pre-check around half of this machine's memory.  (How close it comes to measured peaks is bench/host_memory.py's
table, judged in docs/performance.md: a measurement, not a test.)"""

from __future__ import annotations

import pytest

from popvision_lite import value_checks
from popvision_lite.emulator.models import host_memory as hm
from popvision_lite.emulator.models.config import make_config
from popvision_lite.errors import ConfigError


def test_composed_terms_count_distinct_stage_graphs_not_layers_or_replicas():
    base = make_config("bert-large", ipus=4, seq=128, batch=8)
    deeper = make_config("bert-large", ipus=4, seq=128, batch=8, layers=48)
    replicated = make_config("bert-large", ipus=16, replicas=4, seq=128, batch=8, grad_accum=16)
    t = hm.composed_terms(base)
    assert t == hm.composed_terms(deeper)  # one layer body per stage graph, whatever the layer count
    assert hm.composed_terms(replicated) == t  # replicas and accumulation compose the same stage graphs
    assert t["graphs"] == 3  # first (embedding), middle, last (heads) of four IPUs
    # the layer body (the same in each graph, one built at a time) counts its attention scores: batch x heads x seq^2
    assert t["attention"] == 8 * 16 * 128 ** 2
    # the embedding table (first IPU) and the MLM head (last IPU: decoder and logits of the masked tokens)
    assert t["vocab"] == 30522 * 1024 + (8 * 19 * 30522 + 1024 * 30522)
    wrap = hm.composed_terms(make_config("bert-large", ipus=4, seq=128, batch=8, pipeline_placement="wrap"))
    assert wrap["graphs"] == 2  # IPU 0 holds the embedding and the heads, IPUs 1-3 one middle graph


def test_tensor_parallel_shards_the_counted_layer():
    whole = hm.composed_terms(make_config("gpt3-13b", ipus=8, replicas=8, streaming_weights=True))
    shard = hm.composed_terms(make_config("gpt3-13b", ipus=64, tensor_parallel=8, replicas=8, streaming_weights=True))
    assert shard["attention"] * 8 == whole["attention"]  # heads / t per IPU
    assert shard["tokens"] < whole["tokens"] and shard["vocab"] < whole["vocab"]
    assert hm.estimate(make_config("gpt3-13b", ipus=64, tensor_parallel=8, replicas=8), True).bytes < \
        hm.estimate(make_config("gpt3-13b", ipus=8, replicas=8), True).bytes


def test_whole_graph_floor_counts_each_value_once_in_float32_and_nothing_timing_only():
    cfg = make_config("mlp", hidden=1024, batch=128)
    timing, numerics = hm.whole_terms(cfg, True), hm.whole_terms(cfg, False)
    assert timing["values"] == 0 and numerics["values"] == numerics["activations"] + numerics["weights"] > 0
    # before the build the whole-graph path has a lower bound only (decision 0390): the interpreter, and 4 B a value,
    # at least an int64 index of its largest tensor (timing-only too)
    index = hm.INDEX_BYTES * hm.largest_whole_tensor(cfg)
    assert hm.largest_whole_tensor(cfg) == 128 * 1024 and 4 * numerics["values"] > index
    assert hm.estimate(cfg, True).bytes == int(hm.WHOLE_FLOOR["base"] + index)
    assert hm.estimate(cfg, False).bytes == int(hm.WHOLE_FLOOR["base"] + 4 * numerics["values"])
    big, usual = make_config("resnet50", batch=32), make_config("resnet50")
    grown = hm.estimate(big, True).bytes - hm.estimate(usual, True).bytes
    assert grown == hm.INDEX_BYTES * (32 - usual.batch) * 147 * 224 ** 2 // 4 > 0


def test_built_terms_count_the_built_graphs_vertices_and_values_only_with_numerics():
    from popvision_lite.emulator.models.emulated import build_model

    small, wide = make_config("mlp", hidden=64, batch=8, layers=2), make_config("mlp", hidden=64, batch=32, layers=2)
    be, _ = build_model(small, needs_values=True)
    per_cs = sum(len(g.tiles) for cs in be.graph.compute_sets for g in cs.groups)  # counted by compute set
    assert per_cs > 0 and hm.built_terms(be.graph, True) == {"vertices": per_cs, "value_vertices": per_cs}
    assert hm.built_terms(be.graph, False) == {"vertices": per_cs, "value_vertices": 0}
    e = hm.built_estimate(be.graph, small, timing_only=False)
    assert e.path == "built" and e.bytes == int(hm.BUILT["base"] + (hm.BUILT["vertices"] + hm.BUILT["value_vertices"])
                                                * per_cs)
    assert hm.built_estimate(be.graph, small, timing_only=True).bytes < e.bytes  # timing-only: no values
    be_wide, _ = build_model(wide, needs_values=False)
    assert hm.built_terms(be_wide.graph, False)["vertices"] > per_cs  # a larger batch maps more intervals


def test_paths_and_named_fields():
    assert hm.estimate(make_config("bert-base"), True).path == "composed"
    assert hm.estimate(make_config("bert-tiny"), False).path == "whole"  # numerics: the whole graph
    assert hm.estimate(make_config("bert-tiny", ipus=2), False).path == "composed"  # at scale: composed
    assert hm.estimate(make_config("bert", hidden=60000, heads=4), False).field == "hidden"
    assert hm.estimate(make_config("gpt2-small", seq=8192), True).field == "tensor_parallel"
    assert hm.estimate(make_config("bert-large", ipus=4, seq=2048, batch=8), True).field == "seq"
    assert hm.estimate(make_config("resnet50", batch=512), True).field == "batch"


def test_check_refuses_past_half_of_this_machine(monkeypatch):
    cfg = make_config("bert-large", ipus=4, seq=512, batch=24)
    need = hm.estimate(cfg, True).bytes
    monkeypatch.setattr(value_checks, "host_memory_bytes", lambda: 2 * need + 2)
    hm.check_host_memory(cfg, True)  # within half: accepted
    monkeypatch.setattr(value_checks, "host_memory_bytes", lambda: 2 * need - 2)
    with pytest.raises(ConfigError, match=r"^seq: emulating this run needs about .* GiB of host memory"):
        hm.check_host_memory(cfg, True)
    monkeypatch.setattr(value_checks, "host_memory_bytes", lambda: None)  # unknown: nothing to check against
    hm.check_host_memory(cfg, True)


def test_composed_estimate_never_below_an_index_per_element_of_the_largest_tensor():
    """The fitted composed terms leave attention out (fit rows at sequence <= 2,048); the floor - one int64 index
    per element of the largest tensor, the attention scores of a block of query rows - keeps a sequence of 65,536
    from passing the check and being killed for memory (bert: batch 8 x 12 heads x 65,536^2 x 8 B)."""
    cfg = make_config("bert", seq=65536)
    e = hm.estimate(cfg, timing_only=True)
    n = cfg.batch * cfg.heads * 65536 ** 2
    assert hm.largest_tensor(cfg) == n and e.bytes == int(hm.COMPOSED["base"] + hm.INDEX_BYTES * n)
    assert e.field == "seq" and list(e.terms) == ["largest_tensor"]
    # serialised attention holds one block of query rows at a time; a usual run is left to the fitted terms
    assert hm.largest_tensor(make_config("bert", seq=65536, attention_serialisation=8)) == n // 8
    usual = make_config("bert-large", ipus=4, seq=512, batch=24)
    assert "largest_tensor" not in hm.estimate(usual, timing_only=True).terms


def _bert_onnx(tmp_path, layers):
    import onnx

    from popvision_lite.emulator.onnx_import import builders
    from popvision_lite.emulator.onnx_import.loader import load

    path = tmp_path / f"bert_{layers}l.onnx"
    onnx.save(builders.bert_encoder(layers=layers, hidden=32, heads=2, ffn=64, vocab=64), str(path))
    return load(path, batch=2, seq=16)


def test_onnx_terms_count_an_outlined_block_once_and_training_twice(tmp_path):
    """A timing-only inference outlines repeated layers (lowering/outline.py): the lowered activations of a 2- and
    a 6-layer encoder are the same, the executed steps grow with the layers; a training step runs every node and
    its backward, each activation has a gradient, each trained weight its training state."""
    from popvision_lite.emulator.onnx_import import host_memory as ohm

    two, six = _bert_onnx(tmp_path, 2), _bert_onnx(tmp_path, 6)
    t2, t6 = ohm.terms(two, False, outlined=True), ohm.terms(six, False, outlined=True)
    assert t2["activations"] == t6["activations"]  # the layer body's values: lowered once
    assert t2["steps"] < t6["steps"] == len(six.model.graph.node)  # every layer runs (a call of the body)
    assert t6["weights"] > t2["weights"] and t6["trained"] == 0
    flat = ohm.terms(six, False, outlined=False)
    assert flat["steps"] == t6["steps"] and flat["activations"] > t6["activations"]
    train = ohm.terms(six, True, outlined=True)  # training is never outlined
    assert train["steps"] == 2 * flat["steps"] and train["activations"] == 2 * flat["activations"]
    # every float weight but the embedding table Gather reads rows of gets a dense gradient
    table = next(n.input[0] for n in six.model.graph.node if n.op_type == "Gather")
    floats = sum(a.size for a in six.initializers.values() if a.dtype.kind == "f")
    assert train["trained"] == floats - six.initializers[table].size > 0
    # the run outlines only timing-only inference on one IPU per replica
    assert ohm.estimate(six, False, True).bytes < ohm.estimate(six, False, True, ipus_per_replica=2).bytes
    assert ohm.estimate(six, False, True).bytes < ohm.estimate(six, False, True, outline=False).bytes


def test_onnx_check_refuses_past_half_of_this_machine(tmp_path, monkeypatch):
    from popvision_lite.emulator.onnx_import import host_memory as ohm
    from popvision_lite.emulator.onnx_import.loader import OnnxImportError

    lm = _bert_onnx(tmp_path, 2)
    need = ohm.estimate(lm, False, True).bytes
    monkeypatch.setattr(value_checks, "host_memory_bytes", lambda: 2 * need + 2)
    ohm.check_host_memory(lm, False, True)
    monkeypatch.setattr(value_checks, "host_memory_bytes", lambda: 2 * need - 2)
    with pytest.raises(OnnxImportError, match=r"emulating this run needs about .* GiB of host memory"):
        ohm.check_host_memory(lm, False, True)


def test_a_whole_graph_run_whose_largest_tensor_index_is_past_half_is_refused_before_the_build(monkeypatch):
    """The whole-graph floor holds an int64 index per element of the largest tensor (ResNet: the stem's 7 x 7 x 3
    windows at image / 2 squared positions), so ResNet at image 8,192 is refused at once instead of running out of
    memory in the build; the usual ResNet-50 runs stay far below it."""
    cfg = make_config("resnet", image=8192)
    n = cfg.batch * 147 * 8192 ** 2 // 4
    e = hm.estimate(cfg, True)
    assert e.terms == {"largest_whole_tensor": (float(n), float(hm.INDEX_BYTES * n))}
    assert e.bytes == int(hm.WHOLE_FLOOR["base"] + hm.INDEX_BYTES * n) and e.field == "image"
    monkeypatch.setattr(value_checks, "host_memory_bytes", lambda: 24 * hm.GIB)
    with pytest.raises(ConfigError, match=r"image: emulating this run needs about 147\.\d GiB"):
        hm.check_host_memory(cfg, True)
    usual = make_config("resnet50", batch=20)
    assert hm.estimate(usual, True).bytes < hm.WHOLE_FLOOR["base"] + hm.INDEX_BYTES * 20 * 147 * 224 ** 2 // 4 + 1
    hm.check_host_memory(usual, True)  # far below half of 24 GiB: no error
