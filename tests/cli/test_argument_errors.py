"""Bad command-line arguments and TOML run configs: exit code 2, a message naming the argument or the
field, no traceback, and nothing written.  (tests/cli/test_emulate.py covers the first cases of each
kind; these are the rest found by trying.)"""

from __future__ import annotations

import pytest

from popvision_lite.cli import main

SMALL = ["--batch", "8", "--hidden", "16", "-q"]


@pytest.mark.parametrize("args,needle", [
    (["mlp", "--ipus", "abc"], "--ipus"),
    (["mlp", "--layers", "-2"], "--layers"),
    (["mlp", "--hidden", "1.5"], "--hidden"),
    (["mlp", "--seed", "-1"], "seed"),
    (["mlp", "--seed", "x"], "--seed"),
    (["mlp", "--device", ""], "--device"),
    (["mlp", "--precision", "fp64"], "--precision"),
    (["mlp", "--frobnicate"], "--frobnicate"),
    (["bert", "--hidden", "10", "--heads", "3"], "--heads"),
    (["gnn", "--ipus", "5"], "--ipus"),
])
def test_emulate_bad_argument(tmp_path, cli, args, needle):
    out = tmp_path / "x.pvl"
    rc, _, err = cli(["emulate", *args, "-o", str(out), *SMALL])
    assert rc == 2, err
    assert needle in err, err
    assert "Traceback" not in err
    assert not out.exists()


@pytest.mark.parametrize("where", ["missing_folder", "under_a_file", "a_directory"])
def test_emulate_unwritable_output_is_exit_2_before_emulating(tmp_path, cli, where):
    (tmp_path / "afile").write_text("x")
    out = {"missing_folder": tmp_path / "no" / "x.pvl", "under_a_file": tmp_path / "afile" / "x.pvl",
           "a_directory": tmp_path}[where]
    rc, _, err = cli(["emulate", "mlp", *SMALL, "-o", str(out)])
    assert rc == 2, err
    assert "-o/--output" in err and str(out) in err
    assert "compiling" not in err  # refused before any work


def _config(tmp_path, body: str):
    cfg = tmp_path / "run.toml"
    cfg.write_text(body)
    return cfg


@pytest.mark.parametrize("body,field", [
    ('model = "mlp"\ncolour = 3\n', "colour"),
    ('model = "mlp"\nmodel_args = 5\n', "model_args"),
    ('model = "mlp"\noutput = 7\n', "output"),
    ('model = "mlp"\ndevice = 5\n', "device"),
    ('model = 3\n', "model"),
    ('model = "mlp"\n[model_args]\nlayers = 0\n', "layers"),
    ('model = "mlp"\n[model_args]\nhidden = 1.5\n', "hidden"),
    ('model = "mlp"\n[model_args]\nrecompute = "yes"\n', "recompute"),
    ('model = "mlp"\n[model_args]\nipus = 5\n', "ipus"),  # 3 layers < 5 stages
    ('model = "mlp"\n[model_args]\nseed = -4\n', "seed"),
    ('model = "bert"\n[model_args]\nhidden = 30\nheads = 4\n', "heads"),
    ('model = "mlp"\nmodel = "bert"\n', "TOML"),  # duplicate key
])
def test_emulate_bad_config_names_the_field(tmp_path, cli, body, field):
    cfg = _config(tmp_path, body)
    out = tmp_path / "x.pvl"
    rc, _, err = cli(["emulate", "--config", str(cfg), "-o", str(out), "-q"])
    assert rc == 2, err
    assert field in err, err
    assert "Traceback" not in err
    assert not out.exists()


def test_emulate_config_unreadable(tmp_path, cli):
    binary = tmp_path / "bin.toml"
    binary.write_bytes(b"\xff\xfe\x00garbage\x80")
    for cfg, words in ((binary, "cannot read"), (tmp_path, "cannot read"), (tmp_path / "nope.toml", "not found")):
        rc, _, err = cli(["emulate", "--config", str(cfg), "-o", str(tmp_path / "x.pvl")])
        assert rc == 2, err
        assert str(cfg) in err and words in err, err


def test_emulate_config_without_model(tmp_path, cli):
    cfg = _config(tmp_path, 'device = "bow"\n')
    rc, _, err = cli(["emulate", "--config", str(cfg), "-o", str(tmp_path / "x.pvl")])
    assert rc == 2 and "model" in err.lower(), err


@pytest.mark.parametrize("args,needle", [
    (["--chrome-trace", "--steps", "5:2"], "step range 5:2"),
    (["--chrome-trace", "--steps", "a:b"], "--steps"),
    (["--chrome-trace", "--tiles", "x-3"], "--tiles"),
    (["--view", "memory", "--width", "0"], "--width"),
    (["--view", "nope"], "--view"),
])
def test_export_bad_arguments(tmp_path, cli, args, needle):
    from popvision_lite.testing.synthetic import write_synthetic

    prof = write_synthetic(tmp_path / "p.pvl", num_ipus=1, tiles_per_ipu=8, num_steps=20, num_layers=1)
    out = tmp_path / ("o.json" if "--chrome-trace" in args else "o.png")
    rc, _, err = cli(["export", str(prof), *args, "-o", str(out)])
    assert rc == 2, err
    assert needle in err, err
    assert "Traceback" not in err
    assert not out.exists()


def test_cli_on_a_corrupt_profile_names_the_file(tmp_path, cli):
    bad = tmp_path / "bad.pvl"
    bad.write_bytes(b"\x89HDF\r\n\x1a\n" + b"\x00" * 100)
    for argv in (["info", str(bad)], ["export", str(bad), "--chrome-trace", "-o", str(tmp_path / "t.json")]):
        rc, _, err = cli(argv)
        assert rc == 2, (argv, err)
        assert str(bad) in err and "Traceback" not in err


@pytest.mark.parametrize("top", ["-1", "-50", "two"])
def test_info_top_must_be_a_count(tmp_path, cli, top):
    from popvision_lite.testing.synthetic import write_synthetic

    path = tmp_path / "s.pvl"
    write_synthetic(path, tiles_per_ipu=8, num_steps=20)
    rc, _, err = cli(["info", str(path), "--top", top])
    assert rc == 2, err
    assert "--top" in err and top in err, err
    assert "Traceback" not in err


def test_info_top_zero_lists_no_ops(tmp_path, capsys):
    from popvision_lite.testing.synthetic import write_synthetic

    path = tmp_path / "s.pvl"
    write_synthetic(path, tiles_per_ipu=8, num_steps=20)
    import json

    assert main(["info", str(path), "--top", "0", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["top_ops"] == []


@pytest.mark.parametrize("model,args,option", [
    ("mlp", ["--seq", "64"], "--seq"),
    ("mlp", ["--heads", "4"], "--heads"),
    ("conv", ["--nodes", "100"], "--nodes"),
    ("gnn", ["--image", "8"], "--image"),
    ("bert-tiny", ["--edges", "9"], "--edges"),
    ("conv", ["--recompute"], "--recompute"),
    ("gnn", ["--streaming-weights"], "--streaming-weights"),
])
def test_emulate_option_the_model_does_not_use(tmp_path, cli, model, args, option):
    out = tmp_path / "x.pvl"
    rc, _, err = cli(["emulate", model, *args, "-o", str(out), *SMALL])
    assert rc == 2, err
    assert option in err and f"'{model}'" in err, err
    assert "compiling" not in err and not out.exists()


def test_emulate_config_field_the_model_does_not_use_warns(tmp_path, caplog):
    import logging

    from popvision_lite.cli.emulate import add_arguments, resolve

    cfg = _config(tmp_path, 'model = "mlp"\n[model_args]\nseq = 32\nbatch = 4\n')
    import argparse

    ap = argparse.ArgumentParser()
    add_arguments(ap)
    with caplog.at_level(logging.WARNING, logger="popvision_lite"):
        mc, *_ = resolve(ap.parse_args(["--config", str(cfg), "-o", str(tmp_path / "x.pvl")]))
    warned = [r for r in caplog.records if r.levelno == logging.WARNING and r.name.startswith("popvision_lite.")]
    assert mc.model == "mlp" and mc.batch == 4
    assert len(warned) == 1, caplog.records
    msg = warned[0].getMessage()
    assert "'seq'" in msg and str(cfg) in msg and "'mlp'" in msg, msg
    # a field the model reads gives no warning
    caplog.clear()
    cfg2 = _config(tmp_path, 'model = "bert"\n[model_args]\nseq = 32\n')
    with caplog.at_level(logging.WARNING, logger="popvision_lite"):
        resolve(ap.parse_args(["--config", str(cfg2), "-o", str(tmp_path / "x.pvl")]))
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
