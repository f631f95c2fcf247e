"""ONNX import (issue 16): models built in code with onnx.helper, emulated in full numerics and
checked against ONNX Runtime; bad input gives a clear message and exit 2, nothing written."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.support.qt import capture_message_boxes

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper  # noqa: E402

import popvision_lite as pvl  # noqa: E402
from popvision_lite.cli import main  # noqa: E402
from popvision_lite.emulator.onnx_import import SUPPORTED_OPS, OnnxImportError, builders, emulate_onnx  # noqa: E402
from popvision_lite.emulator.onnx_import.run import reference_numpy  # noqa: E402

MODELS = {
    "mlp": builders.mlp,
    "bert_fused": lambda: builders.bert_layer(decomposed=False),
    "bert_decomposed": lambda: builders.bert_layer(decomposed=True),
    "gpt_block": builders.gpt_block,
    "resnet_block": builders.resnet_block,
}


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("onnx")
    for name, make in MODELS.items():
        onnx.save(make(), str(d / f"{name}.onnx"))
    return d


@pytest.fixture(scope="module")
def model_run(model_dir):
    """``model_run(name, timing_only=False)``: emulate_onnx of a model of MODELS at batch 2, sequence 8, run once
    per module (several tests read the same run)."""
    runs = {}

    def run(name, timing_only=False):
        if (name, timing_only) not in runs:
            runs[name, timing_only] = emulate_onnx(model_dir / f"{name}.onnx", batch=2, seq=8, timing_only=timing_only)
        return runs[name, timing_only]
    return run


@pytest.mark.parametrize("name", list(MODELS))
def test_model_matches_onnxruntime(model_dir, model_run, name):
    path = model_dir / f"{name}.onnx"
    run = model_run(name)
    assert run.fits and run.total_cycles > 0
    out = onnx.load(str(path)).graph.output[0].name
    check = run.numeric_checks[out]
    assert check["passed"], check
    # the tolerance scales with the output's magnitude: 2^-5 of max |reference| in fp16
    assert check["reference"] == "onnxruntime (CPU)" and check["rtol"] == 0.0
    assert check["atol"] == pytest.approx(2.0 ** -5 * check["scale"]) and check["outside_share"] == 0.0
    # errors are fp16 rounding, not a lowering mistake: well inside the tolerance
    assert check["max_abs_err"] < 1e-2
    # the emulator computes exactly what the same lowering computes on the numpy reference backend
    ref = reference_numpy(path, batch=2, seq=8)
    np.testing.assert_allclose(run.outputs[out], ref[out], rtol=0, atol=1e-3)
    assert run.profile_data.run["numeric_checks"][out]["passed"]


def test_ops_keep_onnx_node_names(model_run):
    run = model_run("bert_fused")
    names = set(run.profile_data.ops["name"])
    for n in ("encoder.layer.0/attention/MatMul", "encoder.layer.0/attention/Softmax",
              "encoder.layer.0.attention.self.query/MatMul", "encoder.layer.0.output.LayerNorm/LayerNormalization"):
        assert n in names, sorted(names)[:40]


def test_decomposed_patterns_fuse_to_the_same_ops(model_run):
    fused = model_run("bert_fused", timing_only=True)
    dec = model_run("bert_decomposed", timing_only=True)
    types = lambda r: sorted(r.profile_data.ops["type"])  # noqa: E731
    assert types(fused) == types(dec)
    assert list(types(dec)).count("layer_norm") == 2 and list(types(dec)).count("gelu") == 1
    assert fused.total_cycles == dec.total_cycles


def test_unsupported_op_names_type_node_and_list(tmp_path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    node = helper.make_node("Hardmax", ["x"], ["y"], name="my_hardmax")
    m = helper.make_model(helper.make_graph([node], "g", [x], [y]), opset_imports=[helper.make_opsetid("", 17)])
    p = tmp_path / "m.onnx"
    onnx.save(m, str(p))
    with pytest.raises(OnnxImportError) as e:
        emulate_onnx(p)
    msg = str(e.value)
    assert "'Hardmax'" in msg and "my_hardmax" in msg and "supported:" in msg and "MatMul" in msg
    assert "Hardmax" not in SUPPORTED_OPS
    # and what to do instead (issue 47)
    assert "instead: replace the module with supported ops before export, or cut the graph" in msg


def test_docs_list_the_lowering_table():
    """docs/onnx.md lists exactly the op types the lowering table lowers and those with a backward pass."""
    from popvision_lite.emulator.onnx_import.lowering import LOWERINGS, TRAINABLE_OPS

    lines = (Path(__file__).parents[3] / "docs" / "onnx.md").read_text().splitlines()

    def listed(prefix):
        line = next(x for x in lines if x.startswith(prefix))
        return [w.strip() for w in line[len(prefix):].rstrip(".").split(",")]

    assert listed("- device ops: ") == sorted(LOWERINGS)
    trainable = sorted(op for op, lw in LOWERINGS.items() if lw.trainable)
    assert listed("- with a backward pass (`--training`): ") == trainable == list(TRAINABLE_OPS)
    assert {"Relu", "Tanh", "IsNaN"} <= set(trainable) and "LeakyRelu" not in trainable


def test_dynamic_dim_names_dim_and_flag(model_dir, tmp_path, capsys):
    with pytest.raises(OnnxImportError, match=r"'seq' is dynamic; set it with --seq N or --dim seq=N"):
        emulate_onnx(model_dir / "bert_fused.onnx", batch=2)
    with pytest.raises(OnnxImportError, match=r"'batch' is dynamic; set it with --batch N"):
        emulate_onnx(model_dir / "mlp.onnx")
    # --dim by name works, an unknown name is refused with the model's symbolic dims listed
    run = emulate_onnx(model_dir / "bert_fused.onnx", dims={"batch": 1, "seq": 4}, timing_only=True)
    assert run.dims == {"batch": 1, "seq": 4}
    out = tmp_path / "r.pvl"
    rc = main(["emulate", "--onnx", str(model_dir / "mlp.onnx"), "--dim", "batchh=2", "-o", str(out), "-q"])
    err = capsys.readouterr().err
    assert rc == 2 and "batchh" in err and "symbolic dims: batch" in err and "Traceback" not in err
    assert not out.exists()


@pytest.mark.parametrize("content,expect", [
    (b"this is not a model at all, just some text\n", "not a readable ONNX model"),
    (b"", "empty file"),
])
def test_not_onnx_file_exit_2(tmp_path, capsys, content, expect):
    p = tmp_path / "bad.onnx"
    p.write_bytes(content)
    out = tmp_path / "r.pvl"
    rc = main(["emulate", "--onnx", str(p), "--batch", "2", "-o", str(out), "-q"])
    err = capsys.readouterr().err
    assert rc == 2 and expect in err and str(p) in err and "Traceback" not in err
    assert not out.exists() and list(tmp_path.iterdir()) == [p]


def test_truncated_file_exit_2(model_dir, tmp_path, capsys):
    data = (model_dir / "bert_fused.onnx").read_bytes()
    p = tmp_path / "cut.onnx"
    p.write_bytes(data[: len(data) // 2])
    out = tmp_path / "r.pvl"
    rc = main(["emulate", "--onnx", str(p), "--batch", "2", "--seq", "8", "-o", str(out), "-q"])
    err = capsys.readouterr().err
    assert rc == 2 and "cut.onnx" in err and "Traceback" not in err
    assert not out.exists()


def test_cli_writes_profile_the_reader_opens(model_dir, tmp_path, capsys):
    out = tmp_path / "resnet.pvl"
    rc = main(["emulate", "--onnx", str(model_dir / "resnet_block.onnx"), "--batch", "2", "-o", str(out), "-q"])
    text = capsys.readouterr().out
    assert rc == 0, text
    assert ("numeric checks (outputs and intermediate tensors vs ONNX Runtime, updated weights vs the numpy "
            "reference): 2/2 passed") in text
    assert "  intermediate tensors vs ONNX Runtime: " in text
    p = pvl.open(out)
    assert p.run["model"] == "onnx:resnet_block.onnx"
    assert all(c["passed"] for c in p.run["numeric_checks"].values())
    assert {"matmul", "im2col", "max_pool", "avg_pool"} <= set(p.stored_table("ops")["type"])


def test_cli_refuses_bundled_model_options(model_dir, tmp_path, capsys):
    rc = main(["emulate", "--onnx", str(model_dir / "mlp.onnx"), "--layers", "3", "--batch", "2",
               "-o", str(tmp_path / "r.pvl"), "-q"])
    assert rc == 2 and "--layers: not used with --onnx" in capsys.readouterr().err


def test_toml_config_onnx_key(model_dir, tmp_path, capsys):
    out = tmp_path / "cfg.pvl"
    cfg = tmp_path / "run.toml"
    cfg.write_text(f'onnx = "{model_dir / "gpt_block.onnx"}"\noutput = "{out}"\ntiming_only = true\n'
                   "batch = 1\n[dims]\nseq = 4\n")
    rc = main(["emulate", "--config", str(cfg), "-q"])
    assert rc == 0, capsys.readouterr().err
    assert pvl.open(out).run["config"]["dims"] == {"batch": 1, "seq": 4}


def test_dtype_casts_are_reported(tmp_path):
    x = helper.make_tensor_value_info("x", TensorProto.DOUBLE, ["batch", 4])
    y = helper.make_tensor_value_info("y", TensorProto.DOUBLE, ["batch", 3])
    w = onnx.numpy_helper.from_array(np.random.default_rng(0).standard_normal((4, 3)), "w")  # float64
    m = helper.make_model(helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "g", [x], [y],
                                            initializer=[w]), opset_imports=[helper.make_opsetid("", 17)])
    p = tmp_path / "f64.onnx"
    onnx.save(m, str(p))
    run = emulate_onnx(p, batch=2)
    assert "input 'x': float64 -> float32 (the IPU has no 64-bit floats)" in run.casts
    assert "initializer 'w': float64 -> float32 (the IPU has no 64-bit floats)" in run.casts
    assert run.numeric_checks["y"]["passed"]
    assert run.profile_data.run["config"]["dtype_casts"] == run.casts


def test_api_returns_run_and_profile_and_takes_npz_inputs(model_dir, tmp_path):
    x = np.linspace(-1, 1, 2 * 16, dtype=np.float32).reshape(2, 16)
    npz = tmp_path / "in.npz"
    np.savez(npz, x=x)
    run, prof = pvl.emulate_onnx(model_dir / "mlp.onnx", tmp_path / "m.pvl", batch=2, inputs=str(npz))
    assert prof.run["model"] == "onnx:mlp.onnx"
    out = next(iter(run.outputs))
    ref = run.reference[out]
    # the reference ran on the user's inputs: recompute it directly
    import onnxruntime as ort
    sess = ort.InferenceSession(str(model_dir / "mlp.onnx"), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(ref, sess.run(None, {"x": x})[0], rtol=1e-6)
    with pytest.raises(OnnxImportError, match=r"'x' has shape \(3, 16\), the model expects \(2, 16\)"):
        emulate_onnx(model_dir / "mlp.onnx", batch=2, inputs={"x": np.zeros((3, 16), np.float32)})


def test_two_ipus_balance_layers_by_weight_bytes(model_dir):
    run = emulate_onnx(model_dir / "gpt_block.onnx", batch=1, seq=4, ipus=2)
    assert run.numeric_checks and all(c["passed"] for c in run.numeric_checks.values())
    steps = run.profile_data.steps
    assert {0, 1} <= set(steps["ipu"])  # compute on both IPUs (-1: global steps)
    # nodes are placed in graph order, split where half of the weight bytes have been read
    w = run.weight_bytes_per_ipu
    assert len(w) == 2 and min(w) > 0 and sum(w) == 4 * (12 * 32 * 32 + (3 * 32 + 32 + 4 * 32) + 4 * 32)  # matmuls, biases, LN
    single = emulate_onnx(model_dir / "gpt_block.onnx", batch=1, seq=4, timing_only=True)
    assert single.weight_bytes_per_ipu == [sum(w)]
    # a user split: IPU 1 starts at the MLP
    user = emulate_onnx(model_dir / "gpt_block.onnx", batch=1, seq=4, ipus=2, ipu_split=["h.0.ln_2/LayerNormalization"],
                        timing_only=True)
    attn = 4 * (4 * 32 * 32 + 3 * 32 + 32 + 2 * 32)  # c_attn, c_proj, their biases, ln_1
    assert user.weight_bytes_per_ipu == [attn, sum(w) - attn]
    with pytest.raises(OnnxImportError, match="no node named 'nope'"):
        emulate_onnx(model_dir / "gpt_block.onnx", batch=1, seq=4, ipus=2, ipu_split=["nope"], timing_only=True)


@pytest.mark.gui
def test_gui_new_emulation_accepts_an_onnx_file(qtbot, model_dir, tmp_path):
    """Run > New emulation…: an .onnx file in the dialog runs `emulate --onnx` in the worker process
    (progress and cancel are the dialog's usual ones) and writes a profile the app opens."""
    from popvision_lite.gui.actions import run as whatif
    from popvision_lite.gui.workers import TaskContext, WorkerSignals

    dlg = whatif.EmulationDialog(out=str(tmp_path / "g.pvl"))
    qtbot.addWidget(dlg)
    dlg.onnx.setText(str(model_dir / "bert_fused.onnx"))
    dlg.inputs["batch"].widget.setValue(1)
    dlg.inputs["seq"].widget.setValue(4)
    s = dlg.settings()
    assert s["onnx"].endswith("bert_fused.onnx") and "recompute" not in s
    toml = whatif.config_toml(s)
    assert toml.startswith('onnx = "') and "batch = 1" in toml and "seq = 4" in toml
    sig = WorkerSignals()
    seen = []
    sig.progress.connect(lambda f, m: seen.append((f, m)))
    res = whatif.run_emulation(TaskContext(sig), s, dlg.output())
    assert res["returncode"] == 0 and res["fits"]
    assert any("building graph" in m for _, m in seen)
    prof = pvl.open(res["path"])
    assert prof.run["model"] == "onnx:bert_fused.onnx"
    # Re-run with… keeps the ONNX file
    again = whatif.settings_from_profile(prof)
    assert again["onnx"] == s["onnx"] and whatif.config_toml(again).startswith('onnx = "')


# ----------------------------------------------------------------------------- --training

_ORT_SESSION: dict = {}  # the last (file, initializer names) -> its session: a finite-difference loop's evaluations


def _ort_loss(path, feeds, inits: dict):
    """Loss = sum over outputs of mean(output), by ONNX Runtime, with some initializers replaced: those initializers
    are also graph inputs of the session's model (ONNX's overridable initializers), fed the replacement values, so
    one session serves every evaluation of a finite-difference loop over them."""
    import onnxruntime as ort

    st = Path(path).stat()
    key = (str(path), st.st_mtime_ns, st.st_size, tuple(sorted(inits)))
    if key not in _ORT_SESSION:
        m = onnx.load(str(path))
        m.graph.input.extend(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims))
                             for t in m.graph.initializer if t.name in inits)
        so = ort.SessionOptions()
        so.log_severity_level = 3  # not the warning that an initializer listed as an input is not folded: the point
        _ORT_SESSION.clear()
        _ORT_SESSION[key] = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    feed = {**feeds, **{k: np.asarray(v, np.float32) for k, v in inits.items()}}
    return sum(float(np.mean(o, dtype=np.float64)) for o in _ORT_SESSION[key].run(None, feed))


@pytest.mark.parametrize("name,make,weights", [
    ("mlp_relu", builders.mlp_relu, ["fc1.weight", "fc1.bias", "fc2.bias", "head.weight"]),
    ("bert_layer", lambda: builders.bert_layer(hidden=16, heads=2), [
        "encoder.layer.0.attention.self.query.weight", "encoder.layer.0.attention.output.LayerNorm.weight",
        "encoder.layer.0.intermediate.dense.bias", "encoder.layer.0.output.dense.weight"]),
    ("resnet_block", lambda: builders.resnet_block(channels=4), ["conv1.weight", "conv2.weight", "proj.weight",
                                                                  "proj.bias", "fc.weight"]),
])
def test_training_gradients_match_finite_differences_of_onnxruntime(tmp_path, name, make, weights):
    """The backward pass is the gradient of the ONNX model: (w - w_updated) / lr of the lowering equals
    central differences of ONNX Runtime's loss (fp32), element by element."""
    from popvision_lite.emulator.onnx_import import load
    from popvision_lite.emulator.onnx_import.run import make_inputs

    path = tmp_path / f"{name}.onnx"
    onnx.save(make(), str(path))
    lm = load(path, batch=2, seq=4)
    feeds = make_inputs(lm, 0, "fp32", None)
    upd = reference_numpy(path, batch=2, seq=4, precision="fp32", training=True, lr=1.0)
    rng = np.random.default_rng(1)
    eps = 1e-2
    for w in weights:
        w0 = lm.initializers[w].astype(np.float64)
        grad = w0.astype(np.float32) - upd[f"weight:{w}"].reshape(w0.shape)
        for flat in rng.choice(w0.size, size=3, replace=False):
            wp, wm = w0.copy(), w0.copy()
            wp.flat[flat] += eps
            wm.flat[flat] -= eps
            fd = (_ort_loss(path, feeds, {w: wp}) - _ort_loss(path, feeds, {w: wm})) / (2 * eps)
            assert abs(grad.flat[flat] - fd) <= 2e-3 * max(1.0, abs(fd)) + 2e-5, (w, flat, grad.flat[flat], fd)


def test_training_step_emulated_matches_reference(tmp_path, capsys):
    path = tmp_path / "gpt.onnx"
    onnx.save(builders.gpt_block(), str(path))
    out = tmp_path / "train.pvl"
    rc = main(["emulate", "--onnx", str(path), "--batch", "2", "--seq", "8", "--training", "-o", str(out), "-q"])
    text = capsys.readouterr().out
    assert rc == 0, text
    assert "training step (loss: mean of the outputs)" in text
    p = pvl.open(out)
    checks = p.run["numeric_checks"]
    weights = [k for k in checks if k.startswith("weight:")]
    # every trainable initializer is updated and checked (the causal-mask buffer is not a weight)
    assert len(weights) == 11 and "weight:h.0.attn.bias" not in checks
    assert all(c["passed"] for c in checks.values())
    types = set(p.stored_table("ops")["type"])
    assert {"matmul", "softmax_bwd", "layer_norm_bwd", "sgd_update", "select"} <= types
    assert p.run["config"]["training"] is True


def test_training_refuses_ops_without_backward(tmp_path):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    w = onnx.numpy_helper.from_array(np.ones((4, 4), np.float32), "w")
    m = helper.make_model(helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
         helper.make_node("Erf", ["h"], ["e"], name="rs"),
         helper.make_node("ReduceSum", ["e", "axes"], ["y"], keepdims=0)], "g", [x], [y],
        initializer=[w, onnx.numpy_helper.from_array(np.array([1], np.int64), "axes")]),
        opset_imports=[helper.make_opsetid("", 17)])
    p = tmp_path / "r.onnx"
    onnx.save(m, str(p))
    with pytest.raises(OnnxImportError, match=r"node 'rs': --training: op type 'Erf' has no "
                                              r"backward pass yet; training supports: .*MatMul"):
        emulate_onnx(p, training=True)
    model_dir = tmp_path
    onnx.save(builders.gpt_block(), str(model_dir / "gpt_block.onnx"))
    with pytest.raises(OnnxImportError, match="--loss-output: 'nope' is not a graph output"):
        emulate_onnx(model_dir / "gpt_block.onnx", batch=1, seq=4, training=True, loss_output="nope",
                     timing_only=True)


@pytest.mark.parametrize("name", ["bert_fused", "resnet_block", "mlp"])
def test_plan_only_backend_lowers_the_same_ops(model_dir, model_run, name):
    """The importer's ops exist on all three backends: planning alone walks the same op sequence."""
    from popvision_lite.emulator.onnx_import import load
    from popvision_lite.emulator.onnx_import.ops import OnnxPlanBackend
    from popvision_lite.emulator.onnx_import.run import build, make_inputs
    from popvision_lite.emulator.ops.context import plan_target_of
    from popvision_lite.emulator.target import Target

    lm = load(model_dir / f"{name}.onnx", batch=2, seq=8)
    be = OnnxPlanBackend(plan_target_of(Target.from_device("ipu-mk2")))
    build(lm, be, make_inputs(lm, 0, "fp16", None, needs_values=False))
    run = model_run(name, timing_only=True)
    assert [p[1] for p in be.plans] == list(run.profile_data.ops["type"])


@pytest.mark.gui
def test_app_opens_an_onnx_profile_like_any_other(qtbot, model_dir, tmp_path, monkeypatch):
    from PySide6.QtCore import QSettings

    from popvision_lite.gui.app import create_app
    from popvision_lite.gui.main_window import MainWindow

    create_app()
    window = MainWindow(settings=QSettings(str(tmp_path / "settings.ini"), QSettings.IniFormat))
    qtbot.addWidget(window)
    window.show()

    capture_message_boxes(monkeypatch, lambda *a: pytest.fail(f"error dialog: {a[2]}"))
    out = tmp_path / "gpt.pvl"
    emulate_onnx(model_dir / "gpt_block.onnx", out, batch=1, seq=4, training=True)
    window.open_paths([out])
    qtbot.waitUntil(lambda: window.doc_tabs.count() == 1, timeout=15000)
    doc = window.current_document()
    assert doc.profile.run["model"] == "onnx:gpt_block.onnx"
    assert "h.0/attn/Softmax" in set(doc.profile.stored_table("ops")["name"])
    window.cancel_tasks()
    qtbot.waitUntil(lambda: not window.busy(), timeout=10000)


def test_malformed_node_is_named_not_a_traceback(tmp_path, capsys):
    """A node whose attributes cannot hold (a Reshape to an impossible shape, given as a constant the
    checker cannot see through) is an error naming the node, exit 2."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [5, 5])
    shape = onnx.numpy_helper.from_array(np.array([5, 5], np.int64), "shape")
    m = helper.make_model(helper.make_graph(
        [helper.make_node("Relu", ["x"], ["r"], name="relu"), helper.make_node("Reshape", ["r", "shape"], ["y"],
                                                                              name="bad_reshape")],
        "g", [x], [y], initializer=[shape]), opset_imports=[helper.make_opsetid("", 17)])
    p = tmp_path / "bad.onnx"
    onnx.save(m, str(p))
    rc = main(["emulate", "--onnx", str(p), "-o", str(tmp_path / "r.pvl"), "-q"])
    err = capsys.readouterr().err
    assert rc == 2 and "bad_reshape" in err and "Traceback" not in err, err
    assert not (tmp_path / "r.pvl").exists()


def test_example_script_runs_without_torch(tmp_path, monkeypatch, capsys):
    """examples/onnx_from_pytorch.py --no-torch: builds a BERT layer, emulates it, checks ONNX Runtime.  Run as
    ``python examples/onnx_from_pytorch.py`` runs it (as ``__main__``, its own argv, in the output folder), in
    this process: what is tested is the script, not a fresh interpreter's start-up."""
    import runpy

    script = Path(__file__).resolve().parents[3] / "examples" / "onnx_from_pytorch.py"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.argv", [str(script), "--no-torch", "-o", "ex.pvl"])
    with pytest.raises(SystemExit) as done:
        runpy.run_path(str(script), run_name="__main__")
    out = capsys.readouterr()
    assert done.value.code == 0, out.err[-2000:]
    assert "vs ONNX Runtime max abs err" in out.out and "-> ok" in out.out
    assert (tmp_path / "ex.pvl").exists() and (tmp_path / "model.onnx").exists()


# --------------------------------------------------------------- training at scale (the multi-IPU options)
def test_training_at_scale_composes_step_schedule_and_training_state(model_dir, tmp_path, capsys):
    """--replicas / --grad-accum / --optimizer / --optimizer-state apply to an imported model as to the
    bundled whole-graph models (pipeline.compose_whole_graph): the step, throughput, all-reduce, DDR stream
    and the training state per IPU are in the profile, and the emulated graph is one replica's."""
    out = tmp_path / "scale.pvl"
    argv = ["emulate", "--onnx", str(model_dir / "bert_fused.onnx"), "--batch", "2", "--seq", "8", "--training",
            "--timing-only", "--ipus", "4", "--replicas", "2", "--grad-accum", "4", "--optimizer", "adam",
            "--optimizer-state", "offchip", "-o", str(out), "-q"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "schedule: 2 replica(s) x 2 IPU(s), 4 micro-batch(es) of 2 per step = 16 samples/step" in text
    p = pvl.open(out)
    s = p.run["schedule"]
    assert (s["replicas"], s["grad_accum"], s["micro_batch"], s["optimizer"], s["optimizer_state"]) == (
        2, 4, 2, "adam", "offchip")
    assert p.target.num_ipus == 2  # one replica's graph
    assert s["allreduce_cycles"] > 0 and s["stream_cycles"] > 0 and s["optimizer_cycles"] > 0
    assert s["step_cycles"] == 4 * s["steady_cycles_per_microbatch"] + s["allreduce_cycles"] + s["optimizer_cycles"] \
        + s["stream_cycles"]
    assert p.run["samples_per_second"] == pytest.approx(16 / s["step_seconds"])
    assert f"throughput: {p.run['samples_per_second']:,.1f} samples/s" in text
    assert len(p.run["training_state"]) == 2
    assert p.run["config"]["replicas"] == 2 and p.run["config"]["optimizer"] == "adam"
    # on-chip optimizer state lands in tile memory: Adam's two fp32 moments = 8 bytes per trained parameter
    base = emulate_onnx(model_dir / "bert_fused.onnx", batch=2, seq=8, training=True, timing_only=True)
    adam = emulate_onnx(model_dir / "bert_fused.onnx", batch=2, seq=8, training=True, timing_only=True,
                        optimizer="adam")
    params = sum(t["params"] for t in adam.profile_data.run["training_state"])
    assert params > 0 and adam.total_cycles > base.total_cycles
    grown = np.asarray(adam.profile_data.memory).sum() - np.asarray(base.profile_data.memory).sum()
    assert grown == 8 * params


def test_inference_replicas_multiply_throughput_without_an_all_reduce(model_dir):
    one = emulate_onnx(model_dir / "mlp.onnx", batch=2, timing_only=True)
    two = emulate_onnx(model_dir / "mlp.onnx", batch=2, timing_only=True, replicas=2)
    assert two.schedule["replicas"] == 2 and two.schedule["allreduce_cycles"] == 0
    assert two.total_cycles == one.total_cycles and one.samples_per_second > 0
    assert two.samples_per_second == pytest.approx(2 * one.samples_per_second)
    assert two.profile_data.run["samples_per_second"] == two.samples_per_second


@pytest.mark.parametrize("extra, needle", [
    (["--grad-accum", "4"], "argument --grad-accum: only with --training"),
    (["--optimizer", "adam"], "argument --optimizer: only with --training"),
    (["--rts"], "argument --rts: only with --training"),
    (["--layer-split", "1,1"], "argument --layer-split: not used with --onnx"),
    (["--pipeline-stages", "2"], "argument --pipeline-stages: not used with --onnx"),
    (["--packing", "2"], "argument --packing: not used with --onnx"),
    (["--mask-tokens", "3"], "argument --mask-tokens: not used with --onnx"),
    (["--training", "--replicas", "3", "--ipus", "4"], "replicas: 3 replicas do not divide 4 IPUs"),
    (["--replicas", "2000"], "argument --replicas: 2000 is outside 1 .. 1024"),
    (["--ipus", "2000"], "argument --ipus: 2000 is outside 1 .. 1024"),
    (["--batch", "100000000"], "argument --batch: 100000000 is outside 1 .. 65536"),
])
def test_at_scale_options_refused_or_bounded_with_exit_2(model_dir, tmp_path, capsys, extra, needle):
    out = tmp_path / "r.pvl"
    argv = ["emulate", "--onnx", str(model_dir / "mlp.onnx"), "--timing-only", "-o", str(out), "-q"]
    if "--batch" not in extra:
        argv += ["--batch", "2"]
    assert main(argv + extra) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err
    assert not out.exists()


@pytest.mark.parametrize("line, needle", [
    ("optimizer = 'foo'", "run.toml: field 'optimizer': must be one of sgd"),  # file and field named
    ("replicas = 0", "field 'replicas': 0 is outside 1 .. 1024"),
    ("grad_accum = nan", "grad_accum: must be a finite number, got nan"),
    ("available_memory_proportion = 2.0", "field 'available_memory_proportion': 2.0 is outside 0.01 .. 1.0"),
    ("rts = 'yes'", "field 'rts': expected bool"),
    ("layer_split = [1, 1]", "field 'layer_split': not a setting of ONNX runs"),
    ("ipus = 99999", "field 'ipus': 99999 is outside 1 .. 1024"),
])
def test_at_scale_toml_fields_checked_with_exit_2(model_dir, tmp_path, capsys, line, needle):
    cfg = tmp_path / "run.toml"
    cfg.write_text(f'onnx = "{model_dir / "mlp.onnx"}"\noutput = "{tmp_path / "t.pvl"}"\ntiming_only = true\n'
                   f"training = true\nbatch = 2\n{line}\n")
    assert main(["emulate", "--config", str(cfg), "-q"]) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err


def test_rerun_config_keeps_the_at_scale_settings_and_the_split(model_dir, tmp_path):
    """The GUI's Re-run with… writes the profile's settings back as a run config: the at-scale fields and the
    user split survive the round trip (a list is a TOML list, not a quoted string)."""
    import argparse
    import tomllib

    from popvision_lite.cli.emulate import add_arguments
    from popvision_lite.cli.emulate_onnx import resolve
    from popvision_lite.emulator.onnx_import.config import config_toml
    from popvision_lite.gui.actions.emulation import settings_from_profile

    out = tmp_path / "s.pvl"
    emulate_onnx(model_dir / "gpt_block.onnx", out, batch=1, seq=4, ipus=4, replicas=2, training=True,
                 optimizer="lamb", grad_accum=2, ipu_split=["h.0.ln_2/LayerNormalization"], timing_only=True)
    text = config_toml(settings_from_profile(pvl.open(out)))
    raw = tomllib.loads(text)
    assert raw["ipu_split"] == ["h.0.ln_2/LayerNormalization"] and raw["optimizer"] == "lamb"
    cfg = tmp_path / "again.toml"
    cfg.write_text(text)
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    kw = resolve(parser.parse_args(["--config", str(cfg), "-o", str(tmp_path / "again.pvl")]))
    assert (kw["ipus"], kw["replicas"], kw["grad_accum"], kw["optimizer"], kw["ipu_split"]) == (
        4, 2, 2, "lamb", ["h.0.ln_2/LayerNormalization"])


def test_imported_bert_computes_in_the_cycles_of_the_bundled_layers(tmp_path):
    """Same math, same plans (issue 16 bench): a BERT encoder built like the bundled workload costs, op type by
    op type, the compute cycles of the bundled ``bert`` on the whole-graph path (the exact-erf GELU costed by
    the op library's GELU cost model, whatever that model is now)."""
    from popvision_lite.emulator.engine import Engine
    from popvision_lite.emulator.models.config import make_config
    from popvision_lite.emulator.models.emulated import build_model

    cfg = make_config("bert", training=False, layers=2, hidden=64, heads=2, batch=2, seq=16, vocab=128)
    path = tmp_path / "enc.onnx"
    onnx.save(builders.bert_encoder(layers=2, hidden=64, heads=2, vocab=128), str(path))
    run = emulate_onnx(path, batch=2, seq=16, timing_only=True)
    be, _ = build_model(cfg, "ipu-mk2", needs_values=False)
    ref = Engine(be.graph, be.program(), mode="timing", model="bert", config={}).run(
        inputs=None, profile_path=None, allow_out_of_memory=True)
    got = run.profile_data.ops.groupby("type")["compute_cycles"].sum().to_dict()
    want = ref.profile_data.ops.groupby("type")["compute_cycles"].sum().to_dict()
    assert got == want and got["gelu"] > 0


def test_outlined_layers_cost_what_every_layer_costs(tmp_path):
    """Timing-only inference of a 4-layer BERT encoder: with the repeated layers outlined (the first lowered,
    the other three calls of its programs) the run has the cycles, the weights tile by tile and the peak of
    the not-always-live variables of the run that lowers every layer; code and vertex state exist once."""
    from popvision_lite.profile import schema

    path = tmp_path / "bert4.onnx"
    onnx.save(builders.bert_encoder(layers=4, hidden=64, heads=2, vocab=100), str(path))
    full, out = (emulate_onnx(path, batch=4, seq=32, timing_only=True, outline=o) for o in (False, True))
    assert out.profile_data.run["outlined_blocks"] == {"blocks": 4, "calls": 3, "lowered": 1}
    assert "outlined_blocks" not in full.profile_data.run and full.config["outline"] is False
    assert abs(out.total_cycles - full.total_cycles) <= 1e-3 * full.total_cycles  # measured: 70,930 vs 70,962
    mf, mo = np.asarray(full.profile_data.memory), np.asarray(out.profile_data.memory)
    var = schema.CATEGORY_CODE["variable"]
    assert np.array_equal(mo[:, var, 0], mf[:, var, 0])  # every layer's weights, on the tiles they had
    assert mo[:, var, 1].max() == mf[:, var, 1].max()
    code = [c for n, c in schema.CATEGORY_CODE.items() if n not in ("variable", "constant")]
    assert mo[:, code].sum() < 0.5 * mf[:, code].sum()  # one layer's code, not four
    names = set(out.profile_data.variables["name"].astype(str))
    assert {f"encoder.layer.{i}.output.dense.weight" for i in range(4)} <= names
    assert out.num_ops < full.num_ops


def test_outlining_is_for_timing_only_inference(tmp_path):
    """Full numerics and training lower every layer (each with its own weights and backward pass)."""
    path = tmp_path / "bert2.onnx"  # two layers: a repeated block (a call of the first) when outlined
    onnx.save(builders.bert_encoder(layers=2, hidden=32, heads=2, vocab=50, wdtype=np.float32), str(path))
    for kw in (dict(timing_only=False), dict(timing_only=True, training=True)):
        run = emulate_onnx(path, batch=2, seq=8, **kw)
        assert "outlined_blocks" not in run.profile_data.run, kw
    assert emulate_onnx(path, batch=2, seq=8, timing_only=True).profile_data.run["outlined_blocks"] == dict(
        blocks=2, calls=1, lowered=1)
