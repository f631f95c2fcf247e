"""Hostile input files and numbers: special files, decompression and ONNX bombs, hostile torch traces,
numbers of thousands of digits, NaN and infinity.  Each exits 2 (or raises the command's own error type)
with a message naming the file / option / limit; none hangs, streams or prints a traceback."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import numpy as np
import pytest

from popvision_lite.errors import ConfigError, PopvisionError, ProfileError
from tests.cli.test_hostile_arguments import ROOT, SAMPLE, _run

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

HUGE = "9" * 5000


def _model(path: Path, *, dims=("batch", 4), rank=None, nodes=1, functions=0) -> Path:
    """A small float model: x -> Relu^nodes -> y; ``functions`` nested local functions each calling the
    next twice; ``rank`` for an input of that many dims."""
    shape = [1] * rank if rank else list(dims)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)
    funcs, body = [], []
    if functions:
        for i in range(functions):
            callee = f"f{i + 1}" if i + 1 < functions else None
            fn_nodes = ([helper.make_node(callee, ["a"], ["m"], domain="local"),
                         helper.make_node(callee, ["m"], ["b"], domain="local")] if callee else
                        [helper.make_node("Relu", ["a"], ["b"])])
            funcs.append(helper.make_function("local", f"f{i}", ["a"], ["b"], fn_nodes,
                                              [helper.make_opsetid("", 17)]))
        body = [helper.make_node("f0", ["x"], ["y"], domain="local")]
    else:
        names = ["x"] + [f"t{i}" for i in range(nodes - 1)] + ["y"]
        body = [helper.make_node("Relu", [names[i]], [names[i + 1]]) for i in range(nodes)]
    g = helper.make_graph(body, "g", [x], [y])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("local", 1)],
                          functions=funcs)
    m.ir_version = 8
    path.write_bytes(m.SerializeToString())
    return path


@pytest.fixture
def fifo(tmp_path):
    p = tmp_path / "fifo"
    os.mkfifo(p)
    return p


def _exit2(argv, tmp_path, *names):
    rc, msg = _run(argv, tmp_path)
    assert rc == 2, (rc, msg)
    assert "Traceback" not in msg and msg, msg
    for n in names:
        assert n.lower() in msg.lower(), (n, msg)
    return msg


# ---------------------------------------------------------------------------------------- special files
@pytest.mark.parametrize("what", ["onnx", "toml_onnx", "inputs"])
def test_fifo_and_devices_as_onnx_inputs_exit_2(tmp_path, fifo, what):
    good = _model(tmp_path / "m.onnx")
    if what == "onnx":
        _exit2(["emulate", "--onnx", str(fifo), "-o", "a.pvl"], tmp_path, "FIFO")
        _exit2(["emulate", "--onnx", "/dev/zero", "-o", "a.pvl"], tmp_path, "device")
    elif what == "toml_onnx":
        (tmp_path / "r.toml").write_text(f'onnx = "{fifo}"\n')
        _exit2(["emulate", "--config", "r.toml", "-o", "a.pvl"], tmp_path, "FIFO")
    else:
        _exit2(["emulate", "--onnx", str(good), "--inputs", str(fifo), "--batch", "1", "-o", "a.pvl"],
               tmp_path, "FIFO")


def test_fifo_as_validation_data_and_sweep_results(tmp_path, fifo):
    from popvision_lite.sweep.results import open_sweep

    _exit2(["validate", "--data", str(fifo), "--list"], tmp_path, "FIFO")
    with pytest.raises(ProfileError, match="FIFO"):
        open_sweep(fifo)


BOMB_LIMIT = 16 << 20  # the torch-trace limit while a bomb test runs (the real one: 512 MiB, input_files.LIMITS)


@pytest.fixture(scope="module")
def gzip_bomb(tmp_path_factory):
    """1.5 x BOMB_LIMIT of spaces in one gzip member, ~25 KB compressed (written once).  The tests lower the
    torch-trace limit to BOMB_LIMIT, as the npz bomb test below lowers its own, so the bomb stays small: the
    reader's check is the same code whatever the limit (input_files.gunzip_bounded); a 600 MiB bomb against
    the real 512 MiB cost ~7 s of CPU to write and read, and the hostile-input campaign (bench/fuzz_surfaces.py)
    still runs one past the real limit."""
    bomb = tmp_path_factory.mktemp("bomb") / "t.json.gz"
    with gzip.open(bomb, "wb", compresslevel=9) as f:
        chunk = b" " * (1 << 20)
        for _ in range(BOMB_LIMIT * 3 // 2 >> 20):
            f.write(chunk)
    assert bomb.stat().st_size < BOMB_LIMIT // 64  # a bomb: it expands over 64-fold
    return bomb


@pytest.fixture
def bomb_limit(monkeypatch):
    from popvision_lite import input_files

    assert input_files.LIMITS["torch_trace"] == 512 << 20  # the limit the module doc states
    monkeypatch.setitem(input_files.LIMITS, "torch_trace", BOMB_LIMIT)
    return BOMB_LIMIT


def test_torch_trace_special_files_and_bombs(tmp_path, fifo, gzip_bomb, bomb_limit):
    from popvision_lite.analysis.torch_trace import TraceImportError, load_torch_trace

    bomb = gzip_bomb
    cases = {
        fifo: "FIFO",
        Path("/dev/zero"): "device",
        bomb: "decompressed",
    }
    deep = tmp_path / "deep.json"
    deep.write_text('{"traceEvents": ' + "[" * 100_000 + "]" * 100_000 + "}")
    cases[deep] = "nested"
    digits = tmp_path / "digits.json"
    digits.write_text('{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 0, "dur": ' + HUGE + "}]}")
    cases[digits] = "JSON"
    floaty = tmp_path / "floaty.json"
    floaty.write_text('{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 0, "dur": 1e999}]}')
    cases[floaty] = "dur"
    ids = tmp_path / "ids.json"
    ids.write_text(json.dumps({"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 0, "dur": 5, "args": {"External id": [1, 2]}},
        {"ph": "X", "cat": "kernel", "name": "k", "ts": 0, "dur": 5, "args": {"External id": [1, 2]}}]}))
    cases[ids] = "malformed"
    dims = tmp_path / "dims.json"
    dims.write_text(json.dumps({"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 0, "dur": 5,
         "args": {"External id": 1, "Input Dims": [[10 ** 300, 10 ** 300], [10 ** 300, 10 ** 300]],
                  "Input type": ["float", "float"]}},
        {"ph": "X", "cat": "kernel", "name": "k", "ts": 0, "dur": 5, "args": {"External id": 1}}]}))
    for path, word in cases.items():
        with pytest.raises(TraceImportError, match=f"(?i){word}"):
            load_torch_trace(path)
    try:  # huge dims: an error naming the file, or a kernel whose FLOPs are not a finite number
        df = load_torch_trace(dims)
        assert not np.isfinite(df["flops"]).all() or (df["flops"] < 1e300).all()
    except TraceImportError as e:
        assert str(dims) in str(e)


def test_torch_trace_bomb_through_export_exits_2(tmp_path, gzip_bomb, bomb_limit):
    bomb = gzip_bomb
    _exit2(["export", SAMPLE, "--view", "roofline", "--torch-trace", str(bomb), "-o", "r.png"], tmp_path,
           "t.json.gz")
    assert not (tmp_path / "r.png").exists()


# ---------------------------------------------------------------------------------------- ONNX bombs
@pytest.mark.parametrize("kind,limit", [("functions", "MAX_FUNCTION_DEPTH"), ("nodes", "MAX_NODES"),
                                        ("wide_functions", "MAX_NODES"), ("dim", "MAX_INPUT_ELEMENTS"),
                                        ("rank", "MAX_INPUT_RANK")])
def test_onnx_bombs_exit_2_naming_the_limit(tmp_path, kind, limit):
    p = tmp_path / "m.onnx"
    if kind == "functions":
        _model(p, functions=30)
    elif kind == "wide_functions":
        _model(p, functions=15)  # 2^14 Relu once expanded, then the graph doubles it past the limit
        m = onnx.load(str(p))
        m.graph.node.extend([helper.make_node("f0", ["y"], ["z"], domain="local")])
        m.graph.output[0].name = "z"
        p.write_bytes(m.SerializeToString())
    elif kind == "nodes":
        _model(p, nodes=25_000)
    elif kind == "dim":
        _model(p, dims=(1, 10 ** 9))
    else:
        _model(p, rank=64)
    _exit2(["emulate", "--onnx", str(p), "--batch", "1", "-o", "a.pvl"], tmp_path, limit)


@pytest.mark.parametrize("dim", ["batch=99999999999", "batch=" + HUGE, "batch=0", HUGE])
def test_dim_values_are_bounded(tmp_path, dim):
    p = _model(tmp_path / "m.onnx")
    _exit2(["emulate", "--onnx", str(p), "--dim", dim, "-o", "a.pvl"], tmp_path, "--dim")


def test_npz_inputs_bomb_is_refused(tmp_path, monkeypatch):
    """Members' declared sizes are checked before numpy inflates them (the limit is lowered here so the
    bomb stays small; the real one is 4 GiB)."""
    import zipfile

    from popvision_lite import input_files

    monkeypatch.setitem(input_files.LIMITS, "inputs", 1 << 20)
    p = _model(tmp_path / "m.onnx", dims=(1, 4))
    z = tmp_path / "in.npz"
    with zipfile.ZipFile(z, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("x.npy", b"\0" * (4 << 20))
    assert z.stat().st_size < 64 << 10
    _exit2(["emulate", "--onnx", str(p), "--inputs", str(z), "-o", "a.pvl"], tmp_path, "in.npz", "expands")


TOMLS = {
    "batch": f'model = "mlp"\nbatch = {HUGE}\n',
    "seed": 'model = "mlp"\nseed = 0x' + "f" * 200 + "\n",
    "layer_split": 'model = "bert"\nlayer_split = ["a", "b"]\n',
    "inputs": 'onnx = "m.onnx"\nbatch = 1\ninputs = 5\n',
    "dims": 'onnx = "m.onnx"\n[dims]\nbatch = 99999999999\n',
}


@pytest.mark.parametrize("name", sorted(TOMLS))
def test_hostile_toml_numbers_exit_2(tmp_path, name):
    _model(tmp_path / "m.onnx")
    (tmp_path / "r.toml").write_text(TOMLS[name])
    _exit2(["emulate", "--config", "r.toml", "-o", "a.pvl"], tmp_path, name)


@pytest.mark.parametrize("argv,name", [
    (["--grid", f"batch={HUGE}"], "--grid"),
    (["--grid", "batch=[[["], "--grid"),
    (["--grid", "batch=" + "[" * 5000], "--grid"),
    (["--grid", "batch=8", "--point-memory", "inf"], "--point-memory"),
    (["--grid", "batch=8", "--point-memory", "nan"], "--point-memory"),
    (["--grid", "batch=8", "--connect-timeout", "nan"], "--connect-timeout"),
    (["--grid", "batch=8", "--connect-timeout", "inf"], "--connect-timeout"),
    (["--grid", "batch=8", "--point-timeout", HUGE], "--point-timeout"),
    (["--grid", "batch=8", "--scheduler", "ucx://x"], "--scheduler"),
    (["--grid", "batch=8", "--scheduler", "tcp://127.0.0.1:99999"], "--scheduler"),
])
def test_hostile_sweep_arguments_exit_2(tmp_path, argv, name):
    _exit2(["sweep", "--model", "mlp", "-o", "out", *argv], tmp_path, name)
    assert not (tmp_path / "out" / "sweep.csv").exists()


def test_validation_csv_numbers_are_bounded(tmp_path):
    import csv

    from popvision_lite.mlperf_validation import CSV_NAME, REQUIRED_COLUMNS

    row = {c: "1" for c in REQUIRED_COLUMNS}
    row.update(vendor="graphcore", benchmark="bert", n_accel=HUGE)
    d = tmp_path / "data"
    d.mkdir()
    with open(d / CSV_NAME, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(REQUIRED_COLUMNS))
        w.writeheader()
        w.writerow(row)
    _exit2(["validate", "--data", str(d), "--list"], tmp_path, "n_accel")


def test_parse_number_refuses_what_no_option_means():
    from popvision_lite.value_checks import parse_number

    for bad in (HUGE, "nan", "inf", "-inf", "1e999", "", "0x10", "1" * 41):
        with pytest.raises(ConfigError):
            parse_number(bad, "x")
    assert parse_number(" 16 ", "x", 1, 32, integer=True) == 16
    assert parse_number("1e6", "x", integer=True) == 1_000_000


# ---------------------------------------------------------------------------------------- terminal / paths
def test_info_and_verdict_strip_control_characters(tmp_path):
    import contextlib
    import io

    from popvision_lite.cli import main
    from popvision_lite.profile.writer import write_profile
    from popvision_lite.testing.synthetic import make_synthetic

    data = make_synthetic(num_ipus=1, tiles_per_ipu=16, num_steps=60, num_layers=1)
    evil = "\x1b]0;owned\x07\x1b]52;c;ZWNobyBwd25lZA==\x07\x1b[2J\x9b31m\r\u202egnp.exe\u2066\u2028"
    data.run["model"] = "mlp" + evil
    data.ops["name"] = [f"op{evil}{i}" for i in range(len(data.ops))]
    data.target.name = "IPU" + evil
    path = tmp_path / "evil.pvl"
    write_profile(path, data)
    for argv in (["info", str(path)], ["verdict", str(path)]):
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            try:
                main(argv)
            except SystemExit:
                pass
        text = out.getvalue()
        assert text and not any(c in text for c in "\x1b\x07\x9b\r\u202e\u2066\u2028"), repr(text[:300])
        assert "owned" in text or argv[0] == "verdict"  # info shows the names, replaced characters and all


def test_sweep_point_paths_stay_inside_the_sweep_folder(tmp_path):
    from popvision_lite.sweep.results import open_sweep, write_results

    outside = tmp_path / "elsewhere.pvl"
    outside.write_bytes(Path(SAMPLE).read_bytes())
    sweep = tmp_path / "sweep"
    (sweep / "profiles").mkdir(parents=True)
    (sweep / "profiles" / "p0.pvl").write_bytes(Path(SAMPLE).read_bytes())
    rows = [{"point": i, "status": "ok", "error": "", "config_hash": f"h{i}", "samples_per_second": 1.0,
             "fits": True, "profile": prof}
            for i, prof in enumerate(["profiles/p0.pvl", "../elsewhere.pvl", str(outside), "/etc/passwd"])]
    write_results(sweep, rows, [])
    df = open_sweep(sweep)
    assert df["profile"].iloc[0] == str((sweep / "profiles" / "p0.pvl").resolve())
    assert (df["profile"].iloc[1:] == "").all()
    assert all("outside the sweep folder" in e for e in df["error"].iloc[1:])


def test_every_error_here_is_a_popvision_error():
    from popvision_lite.analysis.torch_trace import TraceImportError
    from popvision_lite.emulator.onnx_import.loader import OnnxImportError

    assert issubclass(TraceImportError, PopvisionError) and issubclass(OnnxImportError, ConfigError)


def test_verdict_export_of_a_profile_whose_verdict_fails_exits_2(tmp_path):
    """Op counts that name no runs (the round-4 fuzzer's class of 13 cases): the verdict cannot be computed, and
    `export --view verdict` says so naming the file - it raised KeyError: 'verdict' from the empty panel."""
    from popvision_lite.testing.hostile_run import with_run

    bad = with_run(ROOT / "sample_profiles" / "bert_tiny_mk2.pvl", tmp_path / "oc.pvl",
                   lambda r: r.__setitem__("op_counts", {"calls_per_microbatch": []}))
    for out in ("v.csv", "v.png"):
        rc, msg = _run(["export", str(bad), "--view", "verdict", "-o", str(tmp_path / out)], tmp_path)
        assert rc == 2 and "no verdict to export" in msg and "oc.pvl" in msg and "Traceback" not in msg, msg
        assert not (tmp_path / out).exists()
