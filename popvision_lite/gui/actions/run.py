"""Run > New emulation… and Run > Re-run with…: what-if runs from the window (dialogs and menu entries; the
settings, run config and emulator child process are ``gui/actions/emulation.py``).

"Re-run with…" takes the open profile's run config, changes one setting, runs it and opens the
result in compare mode against the original (A = original, B = re-run).
"""

from __future__ import annotations

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
    QPushButton,
    QSpinBox,
    QWidget,
)

from popvision_lite.analysis.compare import compare
from popvision_lite.emulator.models.config import BERT_PRESETS, GPT_PRESETS, MODEL_NAMES
from popvision_lite.emulator.models.resnet import RESNET_PRESETS
from popvision_lite.emulator.run_config import FIELDS
from popvision_lite.errors import ConfigError
from popvision_lite.gui.actions.emulation import (  # noqa: F401  (the names tests and callers use as run.X)
    BOOL_SETTINGS,
    DEVICES,
    INT_SETTINGS,
    NEW_EMULATION,
    RERUN,
    SETTINGS,
    change_setting,
    check_not_a_sample,
    check_settings,
    config_toml,
    default_output_folder,
    default_settings,
    emulate_argv,
    free_path,
    parse_progress,
    rerun_path,
    run_emulation,
    settings_from_profile,
)
from popvision_lite.gui.compare_window import compare_documents, compare_key
from popvision_lite.gui.state.document import Document
from popvision_lite.gui.state.loading import load_document_data
from popvision_lite.gui.text import plain_label, show_error, show_info
from popvision_lite.value_checks import MODEL_LIMITS


# ----------------------------------------------------------------------------- dialogs
def _spin(name: str) -> QSpinBox:
    """A spin box over run-config field ``name``'s bounds (``value_checks.MODEL_LIMITS``)."""
    lo, hi = MODEL_LIMITS[name]
    w = QSpinBox()
    w.setRange(int(lo), int(min(hi, 2 ** 31 - 1)))
    return w


def model_fields(model: str) -> set[str]:
    """The dialog fields a bundled model uses: a sequence length for the transformers (BERT, GPT), recomputation
    for the transformers and ResNets; the rest for every model."""
    transformer = model in BERT_PRESETS or model in GPT_PRESETS or model in ("bert", "gpt")
    resnet = model in RESNET_PRESETS or model.startswith("resnet")
    return ({"seq"} if transformer else set()) | ({"recompute"} if transformer or resnet else set())


class EmulationDialog(QDialog):
    """Model, device, IPUs, batch, sequence and recompute (the models that have them), precision, the pod-scale
    fields (replicas, gradient accumulation, optimizer and where its state lives), timing-only and the output."""

    def __init__(self, settings: dict | None = None, out: str = "", parent=None):
        super().__init__(parent)
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
        self.batch = _spin("batch")
        self.batch.setValue(int(s["batch"]))
        self.seq = _spin("seq")
        self.seq.setValue(int(s["seq"]))
        self.seq.setToolTip("Sequence length (BERT models)")
        self.recompute = QCheckBox("recompute activations in the backward pass")
        self.recompute.setChecked(bool(s["recompute"]))
        self.precision = QComboBox()
        self.precision.addItems(list(FIELDS["precision"].choices))
        self.precision.setCurrentText(str(s["precision"]))
        # pod scale: IPUs = replicas x pipeline stages; gradient accumulation; the optimizer and its state
        self.replicas = _spin("replicas")
        self.replicas.setValue(int(s.get("replicas", 1) or 1))
        self.replicas.setToolTip("Data-parallel replicas; each replica is pipelined over IPUs / replicas stages")
        self.grad_accum = _spin("grad_accum")
        self.grad_accum.setValue(int(s.get("grad_accum", 1) or 1))
        self.grad_accum.setToolTip("Micro-batches per optimizer step (per replica)")
        self.optimizer = QComboBox()
        self.optimizer.addItems(list(FIELDS["optimizer"].choices))
        self.optimizer.setCurrentText(str(s.get("optimizer", "sgd") or "sgd"))
        self.optimizer_state = QComboBox()
        self.optimizer_state.addItems(list(FIELDS["optimizer_state"].choices))
        self.optimizer_state.setCurrentText(str(s.get("optimizer_state", "onchip") or "onchip"))
        self.optimizer_state.setToolTip("Optimizer state in tile memory, or in streaming memory (DDR) streamed once "
                                        "per optimizer step")
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
        self.rows = {}
        for key, label, w in (("model", "Model:", self.model), ("onnx", "ONNX model:", onnx_row),
                              ("device", "Device:", self.device), ("ipus", "IPUs:", self.ipus),
                              ("replicas", "Replicas:", self.replicas), ("batch", "Batch:", self.batch),
                              ("grad_accum", "Gradient accumulation:", self.grad_accum),
                              ("seq", "Sequence:", self.seq), ("recompute", "", self.recompute),
                              ("precision", "Precision:", self.precision), ("optimizer", "Optimizer:", self.optimizer),
                              ("optimizer_state", "Optimizer state:", self.optimizer_state),
                              ("timing_only", "", self.timing), ("output", "Profile file:", row)):
            form.addRow(label, w)
            self.rows[key] = w
        self._form = form
        self.model.currentTextChanged.connect(self._model_changed)
        self.onnx.textChanged.connect(lambda _: self._model_changed(self.model.currentText()))
        self._model_changed(self.model.currentText())
        bb = QDialogButtonBox(QDialogButtonBox.Ok | QDialogButtonBox.Cancel)
        bb.button(QDialogButtonBox.Ok).setText("Run")
        bb.accepted.connect(self.accept)
        bb.rejected.connect(self.reject)
        form.addRow(bb)

    def _model_changed(self, model: str) -> None:
        """Show only the fields the chosen model has (an ONNX file fixes the model: no sequence or recompute)."""
        fields = set() if self.onnx.text().strip() else model_fields(model)
        for key in ("seq", "recompute"):
            self._form.setRowVisible(self.rows[key], key in fields)

    def shown(self, key: str) -> bool:
        """Whether the field ``key`` is offered for the chosen model."""
        return self._form.isRowVisible(self.rows[key])

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
                             timing_only=self.timing.isChecked(), onnx=self.onnx.text().strip() or None,
                             replicas=self.replicas.value(), grad_accum=self.grad_accum.value(),
                             optimizer=self.optimizer.currentText(),
                             optimizer_state=self.optimizer_state.currentText())
        if s["onnx"]:  # the file fixes the model: batch / seq set its symbolic dims, recompute does not apply
            s.pop("recompute", None)
        else:  # a field the model does not have is not sent (mlp has no sequence, no recomputation)
            for key in {"seq", "recompute"} - model_fields(s["model"]):
                s.pop(key, None)
        return s

    def checked_settings(self) -> dict:
        """:meth:`settings` checked as ``emulate`` checks a run config (ConfigError naming the field)."""
        s = self.settings()
        check_settings(s, NEW_EMULATION)
        return s

    def output(self) -> str:
        return self.out.text().strip()


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
        self.current = plain_label()
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
        show_error(mw, "New emulation", "Give a profile file name.")
        return None
    try:
        check_not_a_sample(dlg.output())
        settings = dlg.checked_settings()
    except ConfigError as e:
        show_error(mw, "New emulation", str(e))
        return None
    return start_emulation(mw, settings, dlg.output())


def rerun_dialog(mw):
    doc = mw.current_document()
    if doc is None:
        show_info(mw, "Re-run with…", "Open a profile first.")
        return None
    base = settings_from_profile(doc.profile)
    dlg = RerunDialog(base, mw)
    if dlg.exec() != QDialog.Accepted:
        return None
    try:
        new = dlg.settings()
        check_settings(new, RERUN)
        config_toml(new)
    except ConfigError as e:
        show_error(mw, "Re-run with…", str(e))
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
