"""``emulate --ipu-config ipu_config.json``: an optimum-graphcore IPU config run as it is, flags over it."""

from __future__ import annotations

import json

TINY = ["--layers", "2", "--hidden", "64", "--heads", "4", "--seq", "32", "--vocab", "512"]


def test_emulate_runs_an_ipu_config_and_flags_override_it(cli, tmp_path):
    cfg = tmp_path / "ipu_config.json"
    cfg.write_text(json.dumps({"ipus_per_replica": 2, "layers_per_ipu": [0, 2], "replication_factor": 2,
                               "gradient_accumulation_steps": 6, "device_iterations": 3, "zzz": 1}))
    rc, out, err = cli(["emulate", "gpt2-small", *TINY, "--ipu-config", cfg, "--grad-accum", "8", "--timing-only",
                        "-q", "-o", tmp_path / "run.pvl"])
    assert rc == 0, err
    assert "2 replica(s) x 2 pipeline stage(s) (layers [0, 2, 0])" in out  # GPT's LM head back on IPU 0
    assert "8 micro-batches" in out  # --grad-accum over the file's 6
    assert "unknown key(s), ignored: 'zzz'" in err


def test_a_bad_ipu_config_names_the_file_and_the_key(cli, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"ipus_per_replica": 2, "layers_per_ipu": [0, 3]}))
    rc, out, err = cli(["emulate", "gpt2-small", *TINY, "--ipu-config", bad, "--timing-only", "-o", tmp_path / "x.pvl"])
    assert rc == 2 and "bad.json ('layers_per_ipu'): field 'layer_split'" in err
    assert "covers 3 layers but the model has 2" in err and "Traceback" not in err
    assert not (tmp_path / "x.pvl").exists()
    rc, out, err = cli(["emulate", "--ipu-config", bad, "-o", tmp_path / "x.pvl"])
    assert rc == 2 and "argument MODEL: required with --ipu-config" in err
    rc, out, err = cli(["emulate", "gpt2-small", "--ipu-config", tmp_path / "missing.json", "-o", tmp_path / "x.pvl"])
    assert rc == 2 and "missing.json" in err


def test_layer_split_with_an_empty_stage_and_wrap_for_gpt_on_the_command_line(cli, tmp_path):
    rc, out, err = cli(["emulate", "gpt2-small", *TINY, "--ipus", "3", "--layer-split", "0,1,1,0",
                        "--pipeline-placement", "wrap", "--embedding-serialization", "4", "--timing-only", "-q",
                        "-o", tmp_path / "w.pvl"])
    assert rc == 0, err
    assert "(layers [0, 1, 1, 0])" in out and "IPU 0: 0 layers" in out
