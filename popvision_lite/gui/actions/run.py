"""Run > New emulation… and Run > Re-run with…: what-if runs from the window.

The emulator runs in a separate PROCESS (``python -m popvision_lite.cli emulate --config RUN.toml -o OUT``)
so a crash in a run cannot take the window down.  A pool thread (``gui/workers.py``) starts it, turns
its stderr progress lines (``[####....]  30% compiling (2.2 s)``) into progress, and on Cancel
terminates the process and removes any temporary file it left; the emulator writes the profile
atomically, so no partial ``OUT`` ever appears.

"Re-run with…" takes the open profile's run config, changes one setting, runs it and opens the
result in compare mode against the original (A = original, B = re-run).
"""

from __future__ import annotations

import contextlib
import os
import re
import selectors
import subprocess
import sys
import tempfile
from pathlib import Path

from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMessageBox,
    QPushButton,
    QSpinBox,
    QWidget,
)

from popvision_lite.emulator.progress import parse_progress
from popvision_lite.errors import ConfigError, EmulatorError
from popvision_lite.gui.workers import Cancelled

DEVICES = ("ipu-mk2", "ipu-bow", "ipu-mk1")
SETTINGS = ("model", "device", "ipus", "batch", "seq", "recompute", "precision", "timing_only")
INT_SETTINGS = ("ipus", "batch", "seq")
BOOL_SETTINGS = ("recompute", "timing_only")


def default_settings() -> dict:
    return dict(model="bert", device="ipu-mk2", ipus=1, batch=2, seq=64, recompute=False, precision="fp16",
                timing_only=True)


def settings_from_profile(profile) -> dict:
    """The run settings of an open profile (its run config), for Re-run with…."""
    run = dict(profile.run or {})
    cfg = dict(run.get("config") or {})
    s = {k: v for k, v in cfg.items() if k not in ("device", "timing_only")}
    s["model"] = cfg.get("model", run.get("model", "bert"))
    s["device"] = cfg.get("device", profile.target.device)
    s["timing_only"] = bool(cfg.get("timing_only", run.get("timing_only", False)))
    return s


def config_toml(settings: dict) -> str:
    """A run-config TOML (see emulator/run_config.py) that reproduces ``settings`` exactly."""
    from popvision_lite.emulator.models.workloads import MODEL_NAMES, ModelConfig

    if settings.get("onnx"):  # an imported ONNX model (Run > New emulation… with an .onnx file)
        from popvision_lite.emulator.onnx_import.config import config_toml as onnx_toml

        return onnx_toml(settings)
    model = settings.get("model")
    if model not in MODEL_NAMES:
        raise ConfigError(f"model: unknown model {model!r}; choose one of {', '.join(MODEL_NAMES)}")
    known = ModelConfig.field_names() - {"model"}

    def val(v):
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, int | float):
            return repr(v)
        return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'
    lines = [f"model = {val(model)}", f"device = {val(settings.get('device', 'ipu-mk2'))}",
             f"timing_only = {val(bool(settings.get('timing_only', False)))}", "", "[model_args]"]
    for k, v in settings.items():
        if k in known and v is not None:
            lines.append(f"{k} = {val(v)}")
    return "\n".join(lines) + "\n"


def emulate_argv(config_path, out) -> list[str]:
    return [sys.executable, "-m", "popvision_lite.cli", "emulate", "--config", str(config_path), "-o", str(out)]


def _remove_temp_files(out: Path) -> None:
    folder = out.parent
    for p in folder.glob(f".{out.name}.*.tmp"):
        with contextlib.suppress(OSError):
            p.unlink()


def run_emulation(task, settings: dict, out, argv: list[str] | None = None) -> dict:
    """Worker-thread body: run the emulator process, report its progress, honour Cancel.

    Returns {"path", "returncode", "stdout", "fits"}; exit 3 (out of memory, profile written) is a
    result, other failures raise EmulatorError with the process' last stderr lines.
    """
    out = Path(out)
    if out.exists() and out.is_dir():
        raise ConfigError(f"{out}: is a folder; give a .pvl file name")
    check_not_a_sample(out)
    if not out.parent.is_dir():
        raise ConfigError(f"{out}: folder '{out.parent}' does not exist")
    with tempfile.TemporaryDirectory(prefix="pvl-whatif-") as tmp:
        cfg = Path(tmp) / "run.toml"
        cfg.write_text(config_toml(settings), encoding="utf-8")
        cmd = argv or emulate_argv(cfg, out)
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        task.progress(0.0, "starting the emulator process")
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        sel = selectors.DefaultSelector()
        sel.register(proc.stderr, selectors.EVENT_READ)
        err_lines: list[str] = []
        buf = b""
        try:
            eof = False
            while not eof:
                if task.cancelled:
                    raise Cancelled()
                for _key, _ in sel.select(timeout=0.1):
                    chunk = os.read(proc.stderr.fileno(), 65536)
                    if not chunk:
                        eof = True
                        break
                    buf += chunk
                    *lines, buf = re.split(rb"[\r\n]", buf)
                    for raw in lines:
                        line = raw.decode("utf-8", "replace")
                        p = parse_progress(line)
                        if p is not None:
                            task.progress(min(p[0], 0.99), p[1])
                        elif line.strip():
                            err_lines.append(line)
            if buf.strip():
                err_lines.append(buf.decode("utf-8", "replace"))
            stdout = proc.stdout.read().decode("utf-8", "replace")
            rc = proc.wait()
        except BaseException:
            _stop(proc)
            _remove_temp_files(out)
            raise
        finally:
            sel.close()
    if rc not in (0, 3):
        tail = "\n".join(err_lines[-8:]) or "(no message)"
        raise EmulatorError(f"emulate {settings.get('model')} on {settings.get('device')} failed "
                            f"(exit {rc}):\n{tail}")
    if not out.exists():
        raise EmulatorError(f"emulate finished (exit {rc}) but wrote no profile at {out}")
    task.progress(1.0, "done")
    return {"path": str(out), "returncode": rc, "stdout": stdout, "fits": rc == 0}


def _stop(proc) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=3)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# ----------------------------------------------------------------------------- dialogs
class EmulationDialog(QDialog):
    """Model, device, IPUs, batch, sequence, recompute, precision, timing-only and the output file."""

    def __init__(self, settings: dict | None = None, out: str = "", parent=None):
        super().__init__(parent)
        from popvision_lite.emulator.models.workloads import MODEL_NAMES

        self.setWindowTitle("New emulation")
        s = default_settings() | dict(settings or {})
        self.base = s
        form = QFormLayout(self)
        self.model = QComboBox()
        self.model.addItems(list(MODEL_NAMES))
        self.model.setCurrentText(str(s["model"]))
        self.device = QComboBox()
        self.device.addItems(list(DEVICES))
        self.device.setCurrentText(str(s["device"]))
        self.ipus = QComboBox()
        self.ipus.addItems(["1", "2", "4", "8", "16"])
        self.ipus.setCurrentText(str(s["ipus"]))
        self.batch = QSpinBox()
        self.batch.setRange(1, 4096)
        self.batch.setValue(int(s["batch"]))
        self.seq = QSpinBox()
        self.seq.setRange(1, 65536)
        self.seq.setValue(int(s["seq"]))
        self.seq.setToolTip("Sequence length (BERT models)")
        self.recompute = QCheckBox("recompute activations in the backward pass")
        self.recompute.setChecked(bool(s["recompute"]))
        self.precision = QComboBox()
        self.precision.addItems(["fp16", "fp32"])
        self.precision.setCurrentText(str(s["precision"]))
        self.timing = QCheckBox("timing only (no numerics: same cycles and memory, faster)")
        self.timing.setChecked(bool(s["timing_only"]))
        self.onnx = QLineEdit(str(s.get("onnx") or ""))
        self.onnx.setPlaceholderText("optional: an .onnx file instead of the model above")
        onnx_browse = QPushButton("Browse…")
        onnx_browse.clicked.connect(self._browse_onnx)
        onnx_row = QWidget()
        orl = QHBoxLayout(onnx_row)
        orl.setContentsMargins(0, 0, 0, 0)
        orl.addWidget(self.onnx)
        orl.addWidget(onnx_browse)
        self.out = QLineEdit(out)
        browse = QPushButton("Browse…")
        browse.clicked.connect(self._browse)
        row = QWidget()
        rl = QHBoxLayout(row)
        rl.setContentsMargins(0, 0, 0, 0)
        rl.addWidget(self.out)
        rl.addWidget(browse)
        for label, w in (("Model:", self.model), ("ONNX model:", onnx_row), ("Device:", self.device), ("IPUs:", self.ipus),
                         ("Batch:", self.batch), ("Sequence:", self.seq), ("", self.recompute),
                         ("Precision:", self.precision), ("", self.timing), ("Profile file:", row)):
            form.addRow(label, w)
        bb = QDialogButtonBox(QDialogButtonBox.Ok | QDialogButtonBox.Cancel)
        bb.button(QDialogButtonBox.Ok).setText("Run")
        bb.accepted.connect(self.accept)
        bb.rejected.connect(self.reject)
        form.addRow(bb)

    def _browse(self) -> None:
        p, _ = QFileDialog.getSaveFileName(self, "Profile file", self.out.text() or "run.pvl",
                                           "popvision-lite profiles (*.pvl)")
        if p:
            self.out.setText(p)

    def _browse_onnx(self) -> None:
        p, _ = QFileDialog.getOpenFileName(self, "ONNX model", self.onnx.text(), "ONNX models (*.onnx)")
        if p:
            self.onnx.setText(p)

    def settings(self) -> dict:
        s = self.base | dict(model=self.model.currentText(), device=self.device.currentText(),
                             ipus=int(self.ipus.currentText()), batch=self.batch.value(), seq=self.seq.value(),
                             recompute=self.recompute.isChecked(), precision=self.precision.currentText(),
                             timing_only=self.timing.isChecked(), onnx=self.onnx.text().strip() or None)
        if s["onnx"]:  # the file fixes the model: batch / seq set its symbolic dims, recompute does not apply
            s.pop("recompute", None)
        return s

    def output(self) -> str:
        return self.out.text().strip()


def change_setting(settings: dict, name: str, text: str) -> dict:
    """A copy of ``settings`` with ``name`` set from ``text`` (typed); ConfigError when invalid."""
    if name not in SETTINGS:
        raise ConfigError(f"setting '{name}': choose one of {', '.join(SETTINGS)}")
    text = str(text).strip()
    if name in INT_SETTINGS:
        try:
            v = int(text)
        except ValueError:
            raise ConfigError(f"setting '{name}': expected a positive integer, got {text!r}") from None
        if v < 1:
            raise ConfigError(f"setting '{name}': expected a positive integer, got {v}")
    elif name in BOOL_SETTINGS:
        low = text.lower()
        if low not in ("true", "false", "on", "off", "yes", "no", "1", "0"):
            raise ConfigError(f"setting '{name}': expected on or off, got {text!r}")
        v = low in ("true", "on", "yes", "1")
    elif name == "device":
        from popvision_lite.emulator.run_config import normalise_device

        v = normalise_device(text, "setting 'device'")
    elif name == "precision":
        if text not in ("fp16", "fp32"):
            raise ConfigError(f"setting 'precision': expected fp16 or fp32, got {text!r}")
        v = text
    else:
        v = text
    return dict(settings) | {name: v}


class RerunDialog(QDialog):
    """Change one setting of the open profile's run."""

    def __init__(self, settings: dict, parent=None):
        super().__init__(parent)
        self.setWindowTitle("Re-run with…")
        self.base = dict(settings)
        form = QFormLayout(self)
        form.addRow(QLabel("Change one setting; the result opens in compare mode against this run."))
        self.name = QComboBox()
        self.name.addItems(list(SETTINGS))
        self.value = QLineEdit()
        self.current = QLabel()
        form.addRow("Setting:", self.name)
        form.addRow("Now:", self.current)
        form.addRow("New value:", self.value)
        bb = QDialogButtonBox(QDialogButtonBox.Ok | QDialogButtonBox.Cancel)
        bb.button(QDialogButtonBox.Ok).setText("Run")
        bb.accepted.connect(self.accept)
        bb.rejected.connect(self.reject)
        form.addRow(bb)
        self.name.currentTextChanged.connect(self._changed)
        self.name.setCurrentText("recompute")
        self._changed("recompute")

    def _changed(self, name: str) -> None:
        cur = self.base.get(name)
        self.current.setText(str(cur))
        if name in BOOL_SETTINGS:
            self.value.setText("off" if cur else "on")
        elif name == "device":
            self.value.setText("ipu-bow" if cur != "ipu-bow" else "ipu-mk2")
        elif name in INT_SETTINGS:
            self.value.setText(str(int(cur or 1) * 2))
        else:
            self.value.setText(str(cur))

    def settings(self) -> dict:
        return change_setting(self.base, self.name.currentText(), self.value.text())


def _in_samples_folder(path) -> bool:
    """True when ``path`` is (in) one of the bundled sample folders."""
    from popvision_lite.gui.start_page import sample_dirs

    try:
        p = Path(path).resolve()
    except OSError:
        return False
    return any(p == d or d in p.parents for d in sample_dirs())


def default_output_folder(last_dir=None) -> Path:
    """Where a new profile goes by default: ``last_dir`` when it is a writable folder that is not the
    bundled samples folder, else the user's documents folder, home, or the temp folder (a new-emulation
    dialog opened after a sample defaulted to sample_profiles/, next to the bundled files)."""
    from PySide6.QtCore import QStandardPaths

    cands = [last_dir] if last_dir else []
    cands += [QStandardPaths.writableLocation(QStandardPaths.DocumentsLocation), str(Path.home()),
              tempfile.gettempdir()]
    for c in cands:
        if not c:
            continue
        d = Path(str(c))
        if d.is_dir() and os.access(d, os.W_OK) and not _in_samples_folder(d):
            return d
    return Path(tempfile.gettempdir())


def free_path(folder, stem: str) -> Path:
    """``folder/stem.pvl``, or ``stem_2.pvl``, ``stem_3.pvl`` ... : a name no file has yet."""
    p = Path(folder) / f"{stem}.pvl"
    i = 2
    while p.exists():
        p = Path(folder) / f"{stem}_{i}.pvl"
        i += 1
    return p


def check_not_a_sample(out) -> None:
    """ConfigError when ``out`` is a file in the bundled samples folder (never overwrite one)."""
    if _in_samples_folder(out):
        raise ConfigError(f"{out}: is in the bundled samples folder; choose another folder for new profiles")


def rerun_path(original, name: str, value) -> Path:
    original = Path(original)
    v = {True: "on", False: "off"}.get(value, value) if isinstance(value, bool) else value
    stem = f"{original.stem}_{name}-{v}"
    folder = original.parent if os.access(original.parent, os.W_OK) else Path(tempfile.gettempdir())
    if _in_samples_folder(folder):  # a re-run of a bundled sample does not go next to the samples
        folder = default_output_folder()
    p = folder / f"{stem}.pvl"
    i = 2
    while p.exists():
        p = folder / f"{stem}_{i}.pvl"
        i += 1
    return p


# ----------------------------------------------------------------------------- running from the window
def start_emulation(mw, settings: dict, out, compare_with=None, argv=None, on_done=None):
    """Run on a worker (process inside); open the result, in compare mode against ``compare_with``."""
    out = str(out)

    def done(res):
        if res["returncode"] == 3:
            mw.statusBar().showMessage(f"{Path(out).name}: does not fit in tile memory (profile written)", 8000)
        if compare_with is None:
            mw.open_paths([out])
            if on_done:
                on_done(None)
            return
        open_against(mw, compare_with, out, on_done)

    return mw.run_task(run_emulation, settings, out, argv, title=f"Emulating {settings.get('model')} "
                       f"on {settings.get('device')} → {Path(out).name}", on_result=done)


def open_against(mw, doc_a, path_b, on_done=None):
    """Open ``path_b`` and show it in compare mode with the open document ``doc_a``."""
    from popvision_lite.analysis.compare import compare
    from popvision_lite.gui.compare_window import compare_documents, compare_key
    from popvision_lite.gui.state.document import Document
    from popvision_lite.gui.state.loading import load_document_data

    def load_and_compare(task, path):  # worker thread: the window only draws
        profile, cache = load_document_data(task, path)
        try:
            task.progress(0.9, "comparing")
            cache[compare_key(path)] = compare(doc_a.profile, profile, doc_a.title, Path(path).name)
        except BaseException:
            profile.close()
            raise
        return profile, cache

    def loaded(res):
        profile, cache = res
        cmp = cache.pop(compare_key(str(path_b)))
        d = Document(profile, path_b)
        for k, v in cache.items():
            d.put_cached(k, v)
        doc_a.put_cached(compare_key(d.path), cmp)
        mw.add_document(d)
        win = compare_documents(mw, doc_a, d)
        if on_done:
            on_done(win)

    return mw.run_task(load_and_compare, str(path_b), title=f"Opening {Path(path_b).name}", on_result=loaded)


def starting_settings(document) -> dict | None:
    """The run settings New emulation… starts from: those of the open profile when it was emulated from a
    bundled workload or an ONNX file (its model, device, sizes and training options), else None (the
    defaults)."""
    if document is None:
        return None
    from popvision_lite.emulator.models.workloads import MODEL_NAMES

    try:
        s = settings_from_profile(document.profile)
    except (AttributeError, KeyError, TypeError, ValueError):
        return None
    return s if s.get("onnx") or s.get("model") in MODEL_NAMES else None


def new_emulation_dialog(mw):
    folder = default_output_folder(mw.settings.value("last_dir", None))
    dlg = EmulationDialog(settings=starting_settings(mw.current_document()), out=str(free_path(folder, "run")),
                          parent=mw)
    if dlg.exec() != QDialog.Accepted:
        return None
    if not dlg.output():
        QMessageBox.critical(mw, "New emulation", "Give a profile file name.")
        return None
    try:
        check_not_a_sample(dlg.output())
    except ConfigError as e:
        QMessageBox.critical(mw, "New emulation", str(e))
        return None
    return start_emulation(mw, dlg.settings(), dlg.output())


def rerun_dialog(mw):
    doc = mw.current_document()
    if doc is None:
        QMessageBox.information(mw, "Re-run with…", "Open a profile first.")
        return None
    base = settings_from_profile(doc.profile)
    dlg = RerunDialog(base, mw)
    if dlg.exec() != QDialog.Accepted:
        return None
    try:
        new = dlg.settings()
        config_toml(new)
    except ConfigError as e:
        QMessageBox.critical(mw, "Re-run with…", str(e))
        return None
    name = dlg.name.currentText()
    return start_emulation(mw, new, rerun_path(doc.path, name, new[name]), compare_with=doc)


def install(mw) -> None:
    r = mw.menus["run"]
    first = r.actions()[0] if r.actions() else None
    mw.act_new_emulation = mw._action(r, "&New emulation…", lambda: new_emulation_dialog(mw), "Ctrl+R",
                                      "Run a bundled model on the emulator (in a separate process)")
    mw.act_rerun = mw._action(r, "&Re-run with…", lambda: rerun_dialog(mw), "Ctrl+Shift+R",
                              "Re-run this profile's model with one setting changed, then compare")
    if first is not None:
        for a in (mw.act_new_emulation, mw.act_rerun):
            r.removeAction(a)
            r.insertAction(first, a)
        r.insertSeparator(first)
