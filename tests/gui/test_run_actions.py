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
    # over the open document's summary and the one the loader made for the new run: none computed again
    assert c.summary_a is doc.cached("summary", None) and c.summary_b is cw.doc_b.cached("summary", None)
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
    assert set(d.rows) - {"onnx", "ipu_config", "dims", "loss_output", "ipu_split", "inputs"} == set(FIELDS)
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


def test_rerun_with_offers_every_run_config_field(qtbot):
    from popvision_lite.emulator.run_config import FIELDS
    from popvision_lite.gui.actions import run as whatif

    d = whatif.RerunDialog(dict(TINY, model="bert", layer_split=[1, 1]))
    qtbot.addWidget(d)
    assert [d.name.itemData(i) for i in range(d.name.count())] == [k for k in FIELDS if k != "output"]
    assert [d.name.itemText(i) for i in range(d.name.count())] == [f.label for k, f in FIELDS.items() if k != "output"]
    d.select("layer_split")
    assert d.value.text() == "1,1"
    d.select("partials_type")
    d.value.setText("half")
    assert d.settings()["partials_type"] == "half"
    assert whatif.rerun_path("runs/a.pvl", "layer_split", [3, 7.5]).name.startswith("a_layer_split-3-7.5")


# ----------------------------------------------------------------------------- the dialog covers the command line
def _emulate_parser():
    import argparse

    from popvision_lite.cli import emulate

    p = argparse.ArgumentParser()
    emulate.add_arguments(p)
    return p


def _run_button(d):
    from PySide6.QtWidgets import QDialogButtonBox

    return d.findChild(QDialogButtonBox).button(QDialogButtonBox.Ok)


def test_every_emulate_option_has_a_control_in_the_dialog(qtbot):
    """Every option of ``popvision-lite emulate`` (read from its argparse parser, so a new option fails here until
    the dialog has a control for it) has a control in New emulation…, whose tooltip names the option; the ONNX
    options show once an ONNX file is given, the IPU config row for a bundled model (issue 46: no ``--dim``,
    ``--loss-output``, ``--ipu-split``, ``--inputs``, no run-config file)."""
    from PySide6.QtWidgets import QWidget

    from popvision_lite.gui.actions import run as whatif

    d = whatif.EmulationDialog({"model": "bert"}, out="runs/x.pvl")
    qtbot.addWidget(d)
    screen = d.screen().availableGeometry()  # every field, yet within the screen (the columns scroll)
    assert d.width() <= screen.width() and d.height() <= screen.height()
    actions = [a for a in _emulate_parser()._actions if a.dest != "help"]
    missing = sorted({a.dest for a in actions} - set(d.controls))
    assert not missing, f"emulate options without a control in the run dialog: {missing}"
    for a in actions:
        w = d.controls[a.dest]
        assert isinstance(w, QWidget), a.dest
        if a.option_strings:  # (MODEL, the positional, is the model list)
            assert any(o in w.toolTip() for o in a.option_strings), (a.dest, w.toolTip())
    # and no tooltip cites an option the command line rejects (issue 46: --ffn, --lr, --outline were cited)
    import re

    known = {o for a in actions for o in a.option_strings} | {o for part in ("-o/--output",) for o in part.split("/")}
    for dest, w in d.controls.items():
        for cited in re.findall(r"emulate ((?:-[-\w]+/?)+)", w.toolTip()):
            assert all(o in known for o in cited.split("/")), (dest, cited)
    onnx_rows = ("dims", "loss_output", "ipu_split", "inputs")
    assert d.shown("ipu_config") and not any(d.shown(k) for k in onnx_rows)
    d.onnx.setText("models/m.onnx")
    assert all(d.shown(k) for k in onnx_rows) and not d.shown("ipu_config")


def test_a_config_saved_from_the_dialog_is_the_one_the_command_line_runs(qtbot, tmp_path):
    """Save… writes the run-config TOML ``emulate --config`` reads (one writer, emulator/run_config_file.py): the
    command line reads back the same model, device, output and fields; Load… shows them again."""
    from PySide6.QtTest import QTest

    from popvision_lite.cli import emulate
    from popvision_lite.gui.actions import run as whatif

    out = tmp_path / "b.pvl"
    d = whatif.EmulationDialog({"model": "bert-base"}, out=str(out))
    qtbot.addWidget(d)
    d.show()
    d.device.setCurrentText("ipu-bow")
    for name, typed in (("batch", "12"), ("layers", "2"), ("ipus", "2")):
        w = d.inputs[name].widget
        w.lineEdit().selectAll()
        QTest.keyClicks(w, typed)
    for name, typed in (("layer_split", "1,1"), ("lr", "0.25"), ("available_memory_proportion", "0.3,0.4")):
        QTest.keyClicks(d.inputs[name].widget, typed)
    for name, value in (("optimizer", "lamb"), ("recompute", True), ("outline", False)):
        w = d.inputs[name].widget
        w.setCurrentIndex(w.findData(value))
    s = d.checked_settings()
    assert (s["batch"], s["layer_split"], s["available_memory_proportion"], s["outline"]) == (12, [1, 1], [0.3, 0.4],
                                                                                            False)
    toml = tmp_path / "run.toml"
    assert d.save_file(toml) and "Saved" in d.message.text()
    rc = emulate.from_args(_emulate_parser().parse_args(["--config", str(toml)]))
    assert (rc.model, rc.device, rc.output, rc.timing_only) == ("bert-base", "ipu-bow", str(out), s["timing_only"])
    assert rc.model_args == {k: v for k, v in s.items() if k not in ("model", "device", "timing_only", "onnx")}
    e = whatif.EmulationDialog(out=str(tmp_path / "other.pvl"))
    qtbot.addWidget(e)
    assert e.load_file(toml)
    assert e.settings() == s and e.output() == str(out)
    # a file the command line refuses is refused with its message, and the dialog keeps what it had
    bad = tmp_path / "bad.toml"
    bad.write_text('model = "bert"\n[model_args]\nhidden = 0\n')
    assert not e.load_file(bad)
    assert e.message.text() == f"{bad}: field 'hidden': 0 is outside 1 .. 65536" and e.settings() == s


def test_an_onnx_config_saved_from_the_dialog_is_the_one_the_command_line_runs(qtbot, tmp_path):
    """The ONNX options typed in the dialog (dims, loss output, IPU split, inputs) reach ``emulate --config`` as
    ``--dim``, ``--loss-output``, ``--ipu-split`` and ``--inputs`` would; Load… shows them again."""
    from PySide6.QtTest import QTest

    from popvision_lite.cli import emulate_onnx
    from popvision_lite.gui.actions import run as whatif

    model, npz, out = tmp_path / "m.onnx", tmp_path / "in.npz", tmp_path / "o.pvl"
    model.write_bytes(b"onnx")  # the dialog and the command line check the paths here; the run reads them
    npz.write_bytes(b"npz")
    d = whatif.EmulationDialog(out=str(out))
    qtbot.addWidget(d)
    d.show()
    QTest.keyClicks(d.onnx, str(model))
    for key, typed in (("dims", "sequence_length=16, batch_size=2"), ("loss_output", "loss"),
                       ("ipu_split", "block1/Add, block2/Add"), ("inputs", str(npz))):
        QTest.keyClicks(d.onnx_options[key], typed)
    d.inputs["training"].widget.setCurrentIndex(d.inputs["training"].widget.findData(True))
    d.inputs["ipus"].widget.setValue(2)
    s = d.checked_settings()
    assert s["dims"] == {"sequence_length": 16, "batch_size": 2} and s["ipu_split"] == ["block1/Add", "block2/Add"]
    toml = tmp_path / "onnx.toml"
    assert d.save_file(toml)
    args = _emulate_parser().parse_args(["--config", str(toml)])
    assert emulate_onnx.wants_onnx(args)
    kw = emulate_onnx.resolve(args)
    assert (Path(kw["path"]), kw["dims"], kw["loss_output"], kw["ipu_split"], Path(kw["inputs"])) == \
        (model.resolve(), s["dims"], "loss", s["ipu_split"], npz.resolve())
    assert (kw["training"], kw["ipus"], kw["output"]) == (True, 2, str(out))
    e = whatif.EmulationDialog(out=str(tmp_path / "other.pvl"))
    qtbot.addWidget(e)
    assert e.load_file(toml)
    again = e.settings()
    assert {k: again[k] for k in ("dims", "loss_output", "ipu_split", "training", "ipus")} == \
        {k: s[k] for k in ("dims", "loss_output", "ipu_split", "training", "ipus")}
    assert Path(again["onnx"]) == model.resolve() and e.output() == str(out)


def test_problems_show_in_the_dialog_which_stays_open_with_what_was_typed(qtbot, tmp_path):
    """A missing output folder, a bad value typed key by key, an ONNX file that does not exist, bad dims: Run
    shows the problem in the dialog (the command line's message), puts the focus on the field and keeps the
    dialog open with what was typed (issue 46: some errors came after the dialog had closed)."""
    from PySide6.QtCore import Qt
    from PySide6.QtTest import QTest
    from PySide6.QtWidgets import QDialog

    from popvision_lite.emulator.models.config import make_config
    from popvision_lite.emulator.run_config import CLI, check_field
    from popvision_lite.gui.actions import run as whatif
    from popvision_lite.gui.actions.run_fields import workload_defaults

    d = whatif.EmulationDialog({"model": "bert"}, out=str(tmp_path / "gone" / "x.pvl"))
    qtbot.addWidget(d)
    d.show()
    packing = d.inputs["packing"].widget
    QTest.keyClicks(packing, "100")
    qtbot.mouseClick(_run_button(d), Qt.LeftButton)
    assert d.isVisible() and d.result() != QDialog.Accepted
    assert d.message.isVisible() and d.message.text().startswith("New emulation: field 'output': ")
    assert "gone" in d.message.text() and d.focusWidget() is d.out
    d.out.setText(str(tmp_path / "x.pvl"))
    assert not d.message.isVisible()  # an edit clears the problem shown
    form, row = d.rows["output"]
    assert form.labelForField(row).styleSheet() == ""
    qtbot.mouseClick(_run_button(d), Qt.LeftButton)
    with pytest.raises(ConfigError) as flag:
        check_field("packing", "100", CLI, text=True)
    assert d.message.text() == "New emulation: field 'packing': " + str(flag.value).split(": ", 1)[1]
    assert d.isVisible() and packing.text() == "100" and d.focusWidget() is packing
    form, row = d.rows["packing"]
    assert form.labelForField(row).styleSheet() == d.message.styleSheet() != ""  # the field's label marked
    # the other fields still say their defaults while one value is not valid
    preset = workload_defaults(make_config("bert"))
    assert d.inputs["batch"].widget.text() == f"default ({preset['batch']})"
    # a folder as the profile file
    d.out.setText(str(tmp_path))
    qtbot.mouseClick(_run_button(d), Qt.LeftButton)
    assert d.message.text().startswith("New emulation: field 'output': ") and d.isVisible()
    d.out.setText(str(tmp_path / "x.pvl"))
    packing.clear()
    QTest.keyClicks(packing, "2")
    qtbot.mouseClick(_run_button(d), Qt.LeftButton)
    assert d.result() == QDialog.Accepted and not d.isVisible()
    # an ONNX file that does not exist; then dims that are not NAME=VALUE
    e = whatif.EmulationDialog(out=str(tmp_path / "y.pvl"))
    qtbot.addWidget(e)
    e.show()
    QTest.keyClicks(e.onnx, str(tmp_path / "nope.onnx"))
    qtbot.mouseClick(_run_button(e), Qt.LeftButton)
    assert e.message.text() == f"New emulation: field 'onnx': {tmp_path / 'nope.onnx'}: no such file"
    assert e.isVisible() and e.focusWidget() is e.onnx and e.onnx.text() == str(tmp_path / "nope.onnx")
    (tmp_path / "nope.onnx").write_bytes(b"x")
    QTest.keyClicks(e.onnx_options["dims"], "seq=abc")
    qtbot.mouseClick(_run_button(e), Qt.LeftButton)
    assert e.message.text().startswith("New emulation: field 'dims': 'seq=abc': expected NAME=VALUE")
    assert e.isVisible() and e.focusWidget() is e.onnx_options["dims"]


def test_rerun_with_a_bad_value_stays_open_with_its_message(qtbot):
    from PySide6.QtCore import Qt
    from PySide6.QtTest import QTest
    from PySide6.QtWidgets import QDialog

    from popvision_lite.emulator.run_config import CLI, check_field
    from popvision_lite.gui.actions import run as whatif

    d = whatif.RerunDialog(dict(TINY))
    qtbot.addWidget(d)
    d.show()
    d.select("batch")
    d.value.clear()
    QTest.keyClicks(d.value, "0")
    qtbot.mouseClick(_run_button(d), Qt.LeftButton)
    with pytest.raises(ConfigError) as flag:
        check_field("batch", "0", CLI, text=True)
    assert d.message.text() == "Re-run with: field 'batch': " + str(flag.value).split(": ", 1)[1]
    assert d.isVisible() and d.result() != QDialog.Accepted and d.value.text() == "0"
    QTest.keyClick(d.value, Qt.Key_Backspace)
    assert not d.message.isVisible()
    QTest.keyClicks(d.value, "8")
    qtbot.mouseClick(_run_button(d), Qt.LeftButton)
    assert d.result() == QDialog.Accepted and d.settings()["batch"] == 8


def test_timing_only_cannot_be_unticked_where_the_run_has_no_numerics(qtbot):
    """A pipelined, replicated or at-scale BERT run and every GPT run are composed from stage programs emulated
    for timing only (emulator/models/host_memory.runs_composed): unticking Timing only gave a timing-only profile
    without a word (issue 46).  The box is ticked and disabled there, its tooltip saying why, and the user's own
    choice comes back when the run can compute numerics again; Re-run with… refuses it with the reason."""
    from popvision_lite.emulator.models.config import make_config
    from popvision_lite.emulator.models.host_memory import runs_composed
    from popvision_lite.gui.actions import run as whatif

    d = whatif.EmulationDialog({"model": "bert-base", "timing_only": False}, out="runs/x.pvl")
    qtbot.addWidget(d)
    assert d.timing.isEnabled() and not d.timing.isChecked() and d.settings()["timing_only"] is False
    ipus = d.inputs["ipus"].widget
    ipus.setValue(4)
    assert not d.timing.isEnabled() and d.timing.isChecked() and d.settings()["timing_only"] is True
    assert "Numerics are not run" in d.timing.toolTip() and "pipelined" in d.timing.toolTip()
    ipus.setValue(ipus.minimum())  # back to the preset's one IPU
    assert d.timing.isEnabled() and not d.timing.isChecked()
    for model in ("bert-base", "gpt2-small", "mlp", "resnet50"):
        d.model.setCurrentText(model)
        assert d.timing.isEnabled() == (not runs_composed(make_config(model), False)), model
    # Re-run with… Timing only off on a pipelined run: refused in the dialog, saying why
    from PySide6.QtCore import Qt

    r = whatif.RerunDialog(dict(model="bert-base", device="ipu-mk2", timing_only=True, ipus=4))
    qtbot.addWidget(r)
    r.show()
    r.select("timing_only")
    assert r.value.text() == "off"
    qtbot.mouseClick(_run_button(r), Qt.LeftButton)
    assert r.isVisible() and r.message.text().startswith(
        "Re-run with: field 'timing_only': off is not possible: this pipelined, replicated or at-scale BERT run")


def test_an_ipu_config_read_in_the_dialog_sets_what_the_command_line_sets(qtbot, tmp_path):
    import json

    from popvision_lite.cli import emulate
    from popvision_lite.gui.actions import run as whatif

    cfg = tmp_path / "ipu_config.json"
    cfg.write_text(json.dumps({"ipus_per_replica": 2, "layers_per_ipu": [0, 2], "replication_factor": 2,
                               "gradient_accumulation_steps": 6, "zzz": 1}))
    tiny = {"layers": 2, "hidden": 64, "heads": 4, "seq": 32, "vocab": 512}
    d = whatif.EmulationDialog({"model": "gpt2-small", **tiny}, out="runs/x.pvl")
    qtbot.addWidget(d)
    d.ipu_config.setText(str(cfg))
    assert d.read_ipu_config()
    assert "unknown key(s), ignored: 'zzz'" in d.message.text()
    rc = emulate.from_args(_emulate_parser().parse_args(
        ["gpt2-small", *(x for k, v in tiny.items() for x in (f"--{k}", str(v))), "--ipu-config", str(cfg)]))
    s = d.settings()
    assert {k: s.get(k) for k in rc.model_args} == rc.model_args


def test_cancel_in_the_windows_progress_stops_the_emulation(qtbot, window, tmp_path):
    """The emulation runs off the GUI thread with its progress in the window's status bar; its Cancel button ends
    the emulator process and leaves no file."""
    import os

    from PySide6.QtCore import Qt

    from popvision_lite.gui.actions import run as whatif

    out = tmp_path / "run.pvl"
    argv = _fake(tmp_path, f"""
        import sys, time, os
        open({str(tmp_path / 'pid')!r}, 'w').write(str(os.getpid()))
        for i in range(600):
            sys.stderr.write(f"[###.....] 30% compiling (0.{{i}} s)\\n"); sys.stderr.flush()
            time.sleep(0.05)
    """)
    whatif.start_emulation(window, TINY, out, argv=argv)
    qtbot.waitUntil(lambda: (tmp_path / "pid").exists() and "compiling" in window.status_label.text(), timeout=20000)
    assert not window.cancel_button.isHidden() and window.progress.value() == 300
    qtbot.mouseClick(window.cancel_button, Qt.LeftButton)
    qtbot.waitUntil(lambda: not window.busy(), timeout=10000)
    assert window.cancel_button.isHidden() and "Cancelled" in window.statusBar().currentMessage()
    assert not out.exists() and not list(tmp_path.glob(".*.tmp"))
    with pytest.raises(OSError):  # the process is gone
        os.kill(int((tmp_path / "pid").read_text()), 0)
