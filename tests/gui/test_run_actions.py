"""What-if runs from the window: emulator in a worker process, progress, cancel, re-run -> compare mode."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from popvision_lite.errors import ConfigError, EmulatorError
from tests.support.qt import capture_message_boxes

TINY = dict(model="mlp", device="ipu-mk2", ipus=1, batch=4, seq=8, recompute=False, precision="fp16",
            timing_only=True, layers=1, hidden=32)


def _task():
    from popvision_lite.gui.workers import TaskContext, WorkerSignals

    sig = WorkerSignals()
    seen = []
    sig.progress.connect(lambda f, m: seen.append((f, m)))
    return TaskContext(sig), seen, sig


def test_parse_progress_of_the_emulator_format():
    import io

    from popvision_lite.emulator.progress import ProgressBar as _Progress
    from popvision_lite.gui.actions.run import parse_progress
    buf = io.StringIO()
    _Progress(True, buf)("compiling", 0.3)
    assert parse_progress(buf.getvalue()) == (0.3, "compiling")
    assert parse_progress("model mlp ...") is None


def test_config_toml_reproduces_settings(tmp_path):
    from popvision_lite.emulator.run_config import load_run_config
    from popvision_lite.gui.actions.run import change_setting, config_toml

    s = change_setting(TINY, "recompute", "on")
    p = tmp_path / "r.toml"
    p.write_text(config_toml(s))
    rc = load_run_config(p)
    assert rc.model == "mlp" and rc.device == "ipu-mk2" and rc.timing_only is True
    assert rc.model_args["recompute"] is True and rc.model_args["batch"] == 4 and rc.model_args["hidden"] == 32
    assert change_setting(TINY, "device", "bow")["device"] == "ipu-bow"
    for name, bad in (("batch", "0"), ("batch", "x"), ("recompute", "maybe"), ("precision", "fp8"),
                      ("device", "tpu"), ("colour", "red")):
        with pytest.raises(ConfigError, match=name):
            change_setting(TINY, name, bad)


def _fake(tmp_path, body: str):
    script = tmp_path / "fake_emulator.py"
    script.write_text(textwrap.dedent(body))
    return [sys.executable, str(script)]


def test_cancel_terminates_the_process_and_leaves_no_file(qtbot, tmp_path):
    from popvision_lite.gui.actions.run import run_emulation
    from popvision_lite.gui.workers import Cancelled

    out = tmp_path / "run.pvl"
    argv = _fake(tmp_path, f"""
        import sys, time, os
        open({str(tmp_path / f'.{out.name}.abc.tmp')!r}, 'w').write('partial')   # like the atomic writer
        open({str(tmp_path / 'pid')!r}, 'w').write(str(os.getpid()))
        for i in range(100):
            sys.stderr.write(f"[###.....] {{i}}% compiling (0.{{i}} s)\\n"); sys.stderr.flush()
            time.sleep(0.05)
    """)
    task, seen, _sig = _task()

    import threading
    threading.Timer(0.8, task.cancel).start()
    with pytest.raises(Cancelled):
        run_emulation(task, TINY, out, argv)
    assert seen and seen[0][1] == "starting the emulator process" and any(m == "compiling" for _, m in seen)
    assert not out.exists() and not list(tmp_path.glob(".*.tmp"))
    import os
    pid = int((tmp_path / "pid").read_text())
    with pytest.raises(OSError):  # the process is gone
        os.kill(pid, 0)


def test_crash_in_the_run_is_an_error_not_a_crash(tmp_path):
    from popvision_lite.gui.actions.run import run_emulation

    argv = _fake(tmp_path, """
        import sys
        sys.stderr.write("[##......]  10% planning (0.1 s)\\n")
        raise SystemExit("segfault-like death in the emulator")
    """)
    task, seen, _sig = _task()
    with pytest.raises(EmulatorError, match="exit 1") as ei:
        run_emulation(task, TINY, tmp_path / "x.pvl", argv)
    assert "segfault-like death" in str(ei.value)


def test_new_emulation_and_rerun_open_compare_mode(qtbot, window, tmp_path, monkeypatch):
    """A real emulator process: the run opens; Re-run with recompute on opens compare mode."""

    from popvision_lite.gui.actions import run as whatif

    capture_message_boxes(monkeypatch, lambda *a: pytest.fail(f"error dialog: {a[2]}"))
    out = tmp_path / "mlp.pvl"
    whatif.start_emulation(window, TINY, out)
    qtbot.waitUntil(lambda: window.doc_tabs.count() == 1, timeout=60000)
    doc = window.current_document()
    assert doc.profile.run["config"]["hidden"] == 32
    base = whatif.settings_from_profile(doc.profile)
    assert base["model"] == "mlp" and base["device"] == "ipu-mk2" and base["timing_only"] is True
    new = whatif.change_setting(base, "device", "ipu-bow")
    opened = []
    whatif.start_emulation(window, new, whatif.rerun_path(doc.path, "device", "ipu-bow"), compare_with=doc,
                           on_done=opened.append)
    qtbot.waitUntil(lambda: bool(opened), timeout=60000)
    cw = opened[0]
    assert cw.doc_a is doc and cw.doc_b.profile.target.device == "ipu-bow"
    c = cw.comparison
    assert c.metric("compute cycles")["a"] == c.metric("compute cycles")["b"]
    assert c.metric("time")["b"] < c.metric("time")["a"]
    assert (tmp_path / "mlp_device-ipu-bow.pvl").exists()
    cw.close()


@pytest.fixture
def samples(tmp_path, monkeypatch):
    """A bundled-samples folder (via $POPVISION_LITE_SAMPLES) holding one sample."""
    from popvision_lite.gui.start_page import SAMPLES_ENV

    d = tmp_path / "bundled"
    d.mkdir()
    (d / "mlp_mk2.pvl").write_bytes(b"sample bytes")
    monkeypatch.setenv(SAMPLES_ENV, str(d))
    return d


def test_outputs_never_default_to_or_overwrite_the_samples_folder(samples, tmp_path):
    from popvision_lite.gui.actions import run as whatif

    assert whatif.default_output_folder(str(tmp_path)) == tmp_path  # an ordinary last folder is kept
    for last in (str(samples), None, str(tmp_path / "gone")):
        folder = whatif.default_output_folder(last)
        assert folder.is_dir() and folder.resolve() != samples.resolve(), last
    assert whatif.free_path(samples, "mlp_mk2").name == "mlp_mk2_2.pvl"
    # a re-run of a sample is written elsewhere
    rp = whatif.rerun_path(samples / "mlp_mk2.pvl", "device", "ipu-bow")
    assert rp.parent.resolve() != samples.resolve() and rp.name.startswith("mlp_mk2_device-ipu-bow")
    # and nothing writes into the samples folder, even when asked to
    task, _seen, _sig = _task()
    for target in (samples / "mlp_mk2.pvl", samples / "new.pvl"):
        with pytest.raises(ConfigError, match="bundled samples"):
            whatif.run_emulation(task, TINY, target, [sys.executable, "-c", "raise SystemExit(9)"])
    assert (samples / "mlp_mk2.pvl").read_bytes() == b"sample bytes"
    assert sorted(p.name for p in samples.iterdir()) == ["mlp_mk2.pvl"]


def test_new_emulation_dialog_default_is_not_the_samples_folder(qtbot, window, samples, monkeypatch):
    from PySide6.QtWidgets import QDialog

    from popvision_lite.gui.actions import run as whatif

    shown = []

    def fake_exec(dlg):
        shown.append(dlg.output())
        return QDialog.Rejected

    monkeypatch.setattr(whatif.EmulationDialog, "exec", fake_exec)
    window.settings.setValue("last_dir", str(samples))  # last file opened was a bundled sample
    assert whatif.new_emulation_dialog(window) is None
    out = Path(shown[0])
    assert out.suffix == ".pvl" and out.parent.resolve() != samples.resolve() and not out.exists()


def test_new_emulation_starts_from_the_open_profiles_settings(qtbot, window, monkeypatch):
    """Run > New emulation… opened on BERT defaults whatever profile was open."""
    from PySide6.QtWidgets import QDialog

    from popvision_lite.gui.actions import run as whatif

    sample = Path(__file__).resolve().parents[2] / "sample_profiles" / "bert_tiny_mk2_recompute.pvl"
    shown = []

    def fake_exec(dlg):
        shown.append((dlg.settings(), *(dlg.inputs[k].value() for k in ("batch", "seq", "recompute"))))
        return QDialog.Rejected

    monkeypatch.setattr(whatif.EmulationDialog, "exec", fake_exec)
    assert whatif.new_emulation_dialog(window) is None  # nothing open: the defaults
    assert shown[-1][0]["model"] == whatif.default_settings()["model"]
    window.open_paths([sample])
    qtbot.waitUntil(lambda: window.current_document() is not None, timeout=15000)
    cfg = window.current_document().profile.run["config"]
    assert whatif.new_emulation_dialog(window) is None
    settings, batch, seq, recompute = shown[-1]
    assert (batch, seq, recompute) == (cfg["batch"], cfg["seq"], True)
    assert settings["hidden"] == cfg["hidden"] and settings["layers"] == cfg["layers"]
    assert settings["model"] == cfg["model"] and settings["device"] == cfg["device"]


def test_new_emulation_dialog_fields_follow_the_model(qtbot):
    """mlp has no sequence or recomputation (BERT-only fields were offered); a pod-scale what-if has replicas,
    gradient accumulation and the optimizer, and they reach the run config."""
    import tomllib

    from popvision_lite.gui.actions import run as whatif

    d = whatif.EmulationDialog({"model": "mlp"}, out="runs/x.pvl")
    qtbot.addWidget(d)
    assert not d.shown("seq") and not d.shown("recompute")
    assert "seq" not in d.settings() and "recompute" not in d.settings()
    d.model.setCurrentText("bert-base")
    assert d.shown("seq") and d.shown("recompute")
    d.inputs["ipus"].widget.setValue(16)
    d.inputs["replicas"].widget.setValue(4)
    d.inputs["grad_accum"].widget.setValue(8)
    d.inputs["optimizer"].widget.setCurrentText("lamb")
    d.inputs["optimizer_state"].widget.setCurrentText("offchip")
    s = d.settings()
    assert (s["replicas"], s["grad_accum"], s["optimizer"], s["optimizer_state"]) == (4, 8, "lamb", "offchip")
    cfg = tomllib.loads(whatif.config_toml(s))["model_args"]
    assert (cfg["replicas"], cfg["grad_accum"], cfg["optimizer"], cfg["optimizer_state"], cfg["ipus"]) == \
        (4, 8, "lamb", "offchip", 16)
    d.model.setCurrentText("resnet50")
    assert d.shown("recompute") and not d.shown("seq")


def test_numbers_typed_key_by_key_stay_as_typed(qtbot):
    """Each keystroke refreshed every box's default text, which rewrote the box being typed in with its thousands
    separator and left the cursor before the last digit: 30912 became 30,921 and 65536 became 6,553 (issue 46).
    Back at the default, the box says the default the workload would use."""
    from PySide6.QtTest import QTest

    from popvision_lite.gui.actions import run as whatif

    d = whatif.EmulationDialog({"model": "bert-large"}, out="runs/x.pvl")
    qtbot.addWidget(d)
    d.show()
    for name, typed in (("vocab", "30912"), ("batch", "65536"), ("seq", "384")):
        w = d.inputs[name].widget
        w.setFocus()
        w.lineEdit().selectAll()
        for ch in typed:
            QTest.keyClick(w, ch)
        assert d.inputs[name].value() == int(typed), (name, w.lineEdit().text())
        assert d.settings()[name] == int(typed)
    # the other fields' defaults follow (bert-large's hidden size is its preset's), and a box set back to its
    # default shows the default text current then
    w = d.inputs["batch"].widget
    w.setValue(w.minimum())
    assert w.text().startswith("default (") and d.inputs["batch"].value() is None


def test_the_dialogs_refuse_a_bad_value_with_the_command_lines_message(qtbot, window, monkeypatch):
    """A value the dialog's widgets do not hold (it came with the open profile's settings) is checked as
    ``emulate --config`` would check it, with the same problem text (tests/test_run_config.py), before any
    process starts; Re-run with… types its text as a command-line flag would be typed."""
    import tomllib

    from PySide6.QtWidgets import QDialog

    from popvision_lite.gui.actions import run as whatif
    from tests.test_run_config import BAD

    for name, literal, _text, problem in BAD:  # no widget holds the bad value: it is kept as given
        value = tomllib.loads(f"v = {literal}")["v"]
        d = whatif.EmulationDialog({"model": "bert", name: value}, out="runs/x.pvl")
        qtbot.addWidget(d)
        with pytest.raises(ConfigError) as e:
            d.checked_settings()
        assert str(e.value) == f"New emulation: field '{name}': {problem}"
    # through the menu entry: the error is shown and nothing starts
    boxes = capture_message_boxes(monkeypatch)
    started = []
    monkeypatch.setattr(whatif, "start_emulation", lambda *a, **k: started.append(a))
    monkeypatch.setattr(whatif, "starting_settings", lambda doc: {"model": "bert", "hidden": 0})
    monkeypatch.setattr(whatif.EmulationDialog, "exec", lambda dlg: QDialog.Accepted)
    assert whatif.new_emulation_dialog(window) is None and not started
    assert boxes and boxes[-1][2] == "New emulation: field 'hidden': 0 is outside 1 .. 65536"
    batch = next(b for b in BAD if b[0] == "batch")
    with pytest.raises(ConfigError) as e:
        whatif.change_setting(TINY, "batch", batch[2])
    assert str(e.value) == f"Re-run with: field 'batch': {batch[3]}"


def test_new_emulation_dialog_offers_every_run_config_field(qtbot):
    """One widget per field of the typed run config (emulator/run_config.py FIELDS), with the field's allowed
    values and bounds and its help as the tooltip; the fields a model does not read are hidden, as the
    command line warns about them."""
    from PySide6.QtWidgets import QCheckBox, QComboBox, QLineEdit, QSpinBox

    from popvision_lite.emulator.onnx_import.config import CONFIG_KEYS
    from popvision_lite.emulator.run_config import FIELDS, model_family
    from popvision_lite.gui.actions import run as whatif

    d = whatif.EmulationDialog(out="runs/x.pvl")
    qtbot.addWidget(d)
    assert set(d.rows) - {"onnx"} == set(FIELDS)
    for name, f in FIELDS.items():
        if name == "output":
            continue
        w = d.inputs[name].widget
        assert f.help in w.toolTip() or f.help.replace("'", "&#x27;") in w.toolTip(), name
        if f.kind == "bool" and f.group == "run":  # timing only: always given
            assert isinstance(w, QCheckBox), name
        elif f.kind in ("choice", "bool"):  # first the default (not given), then every allowed value
            assert isinstance(w, QComboBox)
            data = [w.itemData(i) for i in range(w.count())]
            assert data == [None, *(f.choices if f.kind == "choice" else (True, False))], name
        elif f.kind == "int" and f.bounds[1] < 2 ** 31:
            assert isinstance(w, QSpinBox) and (w.minimum(), w.maximum()) == (f.bounds[0] - 1, f.bounds[1]), name
        elif f.kind not in ("model", "device"):
            assert isinstance(w, QLineEdit), name
    for model in ("bert-base", "gpt2-small", "resnet50", "mlp", "conv", "gnn"):
        d.model.setCurrentText(model)
        fam = model_family(model)
        assert {k for k in FIELDS if d.shown(k)} == {k for k, f in FIELDS.items() if not f.only_for
                                                      or fam in f.only_for}, model
    d.onnx.setText("models/m.onnx")
    assert {k for k in FIELDS if d.shown(k)} == {k for k, f in FIELDS.items() if k in CONFIG_KEYS or f.group == "run"}
    assert not d.model.isEnabled()  # the file is the model
    # a profile's 0 for a derived width is that field's default, shown as the value it stands for
    e = whatif.EmulationDialog({"model": "bert", "hidden": 128, "ffn": 0, "head_dim": 0}, out="runs/x.pvl")
    qtbot.addWidget(e)
    s = e.settings()
    assert "ffn" not in s and "head_dim" not in s and s["hidden"] == 128
    assert (e.inputs["ffn"].widget.text(), e.inputs["head_dim"].widget.text()) == ("default (512)", "default (64)")


def test_a_chosen_partials_type_reaches_the_run_config(qtbot, tmp_path):
    """A value chosen in the dialog is in the run config the emulator process reads; a field left at its default
    is not given (the preset decides), and the default shown is the preset's value."""
    from popvision_lite.emulator.run_config import load_run_config
    from popvision_lite.gui.actions import run as whatif

    d = whatif.EmulationDialog({"model": "resnet50"}, out=str(tmp_path / "r.pvl"))
    qtbot.addWidget(d)
    partials = d.inputs["partials_type"].widget
    assert partials.itemText(0) == "default (float)" and d.inputs["batch"].widget.text() == "default (20)"
    partials.setCurrentIndex(partials.findData("half"))
    d.inputs["conv_lowering"].widget.setCurrentIndex(d.inputs["conv_lowering"].widget.findData("im2col"))
    d.inputs["lr"].widget.setText("0.5")
    s = d.checked_settings()
    assert (s["partials_type"], s["conv_lowering"], s["lr"]) == ("half", "im2col", 0.5)
    assert "precision" not in s and "batch" not in s  # left at their defaults
    toml = tmp_path / "run.toml"
    toml.write_text(whatif.config_toml(s))
    cfg = load_run_config(toml).model_config()
    assert (cfg.partials_type, cfg.conv_lowering, cfg.lr, cfg.batch) == ("half", "im2col", 0.5, 20)
    # a list field typed as on the command line (bert: layers per pipeline stage)
    d.model.setCurrentText("bert")
    d.inputs["layers"].widget.setValue(4)
    d.inputs["layer_split"].widget.setText("1,3")
    s = d.checked_settings()
    assert s["layer_split"] == [1, 3] and "partials_type" in s and "conv_lowering" not in s
    toml.write_text(whatif.config_toml(s))
    assert load_run_config(toml).model_config().layer_split == [1, 3]
    assert d.inputs["ipus"].widget.text() == "default (2)"  # the preset's IPUs for that split


def test_text_typed_in_the_dialog_gets_the_command_lines_message(qtbot):
    from popvision_lite.emulator.run_config import CLI, check_field
    from popvision_lite.gui.actions import run as whatif

    d = whatif.EmulationDialog({"model": "bert"}, out="runs/x.pvl")
    qtbot.addWidget(d)
    for name, text in (("lr", "fast"), ("available_memory_proportion", "0.5,2"), ("layer_split", "1,0.25")):
        d.inputs[name].widget.setText(text)
        with pytest.raises(ConfigError) as e:
            d.checked_settings()
        with pytest.raises(ConfigError) as flag:
            check_field(name, text, CLI, text=True)
        problem = str(flag.value).split(": ", 1)[1]
        assert str(e.value) == f"New emulation: field '{name}': {problem}" or \
            str(e.value).startswith(f"New emulation: field '{name}[") and str(e.value).endswith(problem)
        d.inputs[name].widget.clear()
    assert d.checked_settings()["model"] == "bert"


def test_run_refuses_a_bad_value_and_keeps_the_dialog_open(qtbot, monkeypatch):
    from PySide6.QtWidgets import QDialog

    from popvision_lite.gui.actions import run as whatif

    boxes = capture_message_boxes(monkeypatch)
    d = whatif.EmulationDialog({"model": "bert"}, out="runs/x.pvl")
    qtbot.addWidget(d)
    d.inputs["packing"].widget.setText("100")
    d.accept()
    assert d.result() != QDialog.Accepted and boxes[-1][2] == "New emulation: field 'packing': 100 is outside 1.0 .. 64.0"
    d.inputs["packing"].widget.setText("2")
    d.accept()
    assert d.result() == QDialog.Accepted and len(boxes) == 1


def test_rerun_with_offers_every_run_config_field(qtbot):
    from popvision_lite.emulator.run_config import FIELDS
    from popvision_lite.gui.actions import run as whatif

    d = whatif.RerunDialog(dict(TINY, model="bert", layer_split=[1, 1]))
    qtbot.addWidget(d)
    assert [d.name.itemText(i) for i in range(d.name.count())] == [k for k in FIELDS if k != "output"]
    d.name.setCurrentText("layer_split")
    assert d.value.text() == "1,1"
    d.name.setCurrentText("partials_type")
    d.value.setText("half")
    assert d.settings()["partials_type"] == "half"
    assert whatif.rerun_path("runs/a.pvl", "layer_split", [3, 7.5]).name.startswith("a_layer_split-3-7.5")
