"""optimum-graphcore IPU configs (ipu_config.json) read as run-config fields: ``emulate --ipu-config``."""

from __future__ import annotations

import json

import pytest

from popvision_lite.emulator.ipu_config import parse_ipu_config, read_ipu_config
from popvision_lite.emulator.models.config import make_config
from popvision_lite.errors import ConfigError

# Graphcore/gpt2-medium-ipu as the published GPT-2-medium run used it (resources/validation/ipu_configs)
GPT2_MEDIUM = {
    "embedding_serialization_factor": 5, "recompute_checkpoint_every_layer": True, "optimizer_state_offchip": True,
    "replicated_tensor_sharding": True, "enable_half_first_order_momentum": True, "enable_half_partials": True,
    "device_iterations": 2, "inference_device_iterations": 9,
    "replication_factor": {"pod8": 1, "pod16": 2, "pod32": 4, "pod64": 8, "default": 1},
    "gradient_accumulation_steps": 256, "executable_cache_dir": "./exe_cache", "ipus_per_replica": 8,
    "layers_per_ipu": [0, 3, 3, 3, 3, 4, 4, 4], "matmul_proportion": 0.25,
}


def test_gpt2_medium_config_reads_as_optimum_graphcore_placed_it():
    r = parse_ipu_config(GPT2_MEDIUM, "ipu.json", model_family="gpt", pod_type="pod16")
    s = r.settings
    assert s["layer_split"] == [0, 3, 3, 3, 3, 4, 4, 4, 0] and s["pipeline_placement"] == "wrap"  # LM head on IPU 0
    assert (s["replicas"], s["ipus"], s["grad_accum"], s["device_iterations"]) == (2, 16, 256, 2)
    assert s["available_memory_proportion"] == 0.25 and s["partials_type"] == "half" and s["recompute"] is True
    assert s["embedding_serialization"] == 5 and s["optimizer_state"] == "offchip" and s["rts"] is True
    assert r.origin["layer_split"] == "layers_per_ipu" and r.origin["replicas"] == "replication_factor"
    assert r.not_modelled == ["enable_half_first_order_momentum"] and not r.unknown
    assert set(r.no_effect) == {"inference_device_iterations", "executable_cache_dir"}
    cfg = make_config("gpt2-medium", optimizer="adam", **s)
    assert cfg.stages == 8 and cfg.pipeline_depth == 9 and cfg.ipus == 16
    # without a POD type the per-POD table gives its default
    d = parse_ipu_config(GPT2_MEDIUM, "ipu.json").settings
    assert d["replicas"] == 1 and d["ipus"] == 8 and d["rts"] is False  # optimum turns RTS off with one replica


def test_a_task_head_stays_on_the_last_ipu():
    cfg = {"ipus_per_replica": 4, "layers_per_ipu": [0, 4, 4, 4], "replication_factor": 4, "matmul_proportion": [0.25]}
    s = parse_ipu_config(cfg, "ipu.json", task_head="question_answering").settings
    assert s["layer_split"] == [0, 4, 4, 4] and s["pipeline_placement"] == "sequential"
    assert s["available_memory_proportion"] == 0.25  # a one-entry list is every IPU's value


def test_inference_uses_the_inference_keys():
    s = parse_ipu_config(GPT2_MEDIUM | {"inference_layers_per_ipu": [6, 6, 6, 6], "inference_ipus_per_replica": 4},
                         "ipu.json", model_family="gpt", pod_type="pod16", inference=True).settings
    assert s["device_iterations"] == 9 and s["training"] is False and "grad_accum" not in s
    assert s["layer_split"][:4] == [6, 6, 6, 6]


@pytest.mark.parametrize("raw,needle", [
    ({"ipus_per_replica": 4, "layers_per_ipu": [0, 4, 4]}, "ipu.json: field 'layers_per_ipu': 3 entries but "
                                                          "ipus_per_replica is 4"),
    ({"ipus_per_replica": 2, "layers_per_ipu": [-1, 6]}, "ipu.json: field 'layers_per_ipu[0]': -1"),
    ({"replication_factor": {"pod16": 2}}, "ipu.json: field 'replication_factor': a value per POD type"),
    ({"replication_factor": {"pod99": 2}}, "ipu.json: field 'replication_factor': a per-POD table takes"),
    ({"matmul_proportion": [0.1, 0.2, 0.3], "ipus_per_replica": 2, "layers_per_ipu": [1, 1]},
     "ipu.json: field 'matmul_proportion': 3 values"),
    ({"recompute_checkpoint_every_layer": "yes"}, "ipu.json: field 'recompute_checkpoint_every_layer': expected true"),
    ([1, 2], "ipu.json: expected a JSON object"),
])
def test_bad_configs_name_the_file_and_the_key(raw, needle):
    with pytest.raises(ConfigError) as e:
        parse_ipu_config(raw, "ipu.json")
    assert needle in str(e.value)


def test_unknown_keys_are_listed_not_dropped(tmp_path):
    p = tmp_path / "ipu_config.json"
    p.write_text(json.dumps({"ipus_per_replica": 1, "frobnicate": 3, "seed": 42}))
    r = read_ipu_config(p)
    assert r.unknown == ["frobnicate"] and r.no_effect == ["seed"]
    assert any("frobnicate" in line for line in r.notes())
    p.write_text("{not json")
    with pytest.raises(ConfigError, match="ipu_config.json: not a JSON file"):
        read_ipu_config(p)
