"""Run > New emulation… and Run > Re-run with…: what-if runs from the window (dialogs and menu entries; the
settings, run config and emulator child process are ``gui/actions/emulation.py``).

"Re-run with…" takes the open profile's run config, changes one setting, runs it and opens the
result in compare mode against the original (A = original, B = re-run).
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from popvision_lite.analysis.compare import compare
from popvision_lite.emulator.models.config import MODEL_NAMES, ModelConfig, make_config
from popvision_lite.emulator.onnx_import.config import CONFIG_KEYS as ONNX_KEYS
from popvision_lite.emulator.run_config import FIELDS, GROUPS, model_family
from popvision_lite.errors import ConfigError
from popvision_lite.gui.actions.emulation import (  # noqa: F401  (the names tests and callers use as run.X)
    BOOL_SETTINGS,
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
from popvision_lite.gui.actions.run_fields import FieldInput, workload_defaults
from popvision_lite.gui.compare_window import compare_documents, compare_key
from popvision_lite.gui.state.document import Document
from popvision_lite.gui.state.loading import load_document_data
from popvision_lite.gui.text import plain_label, show_error, show_info


# ----------------------------------------------------------------------------- dialogs
def offered_fields(model: str, onnx: bool) -> set[str]:
    """The run-config fields the dialog offers: those the chosen bundled model reads (``FIELDS[k].only_for``),
    or for an ONNX file the settings an ONNX run reads (``onnx_import.config.CONFIG_KEYS``)."""
    if onnx:
        return {k for k in FIELDS if k in ONNX_KEYS}
    fam = model_family(model)
    return {k for k, f in FIELDS.items() if not f.only_for or fam in f.only_for}


class EmulationDialog(QDialog):
    """Every field of the run config (``emulator/run_config.py`` FIELDS), in the field's groups: the run (model
    or ONNX file, device, timing only, output), the workload, precision and memory, and training at scale.  A
    workload field may stay at its default (the preset's value, shown); the fields the chosen model does not
    read are hidden.  Values are checked as ``emulate --config`` checks them, before the run starts."""

    def __init__(self, settings: dict | None = None, out: str = "", parent=None):
        super().__init__(parent)
        self.setWindowTitle("New emulation")
        s = default_settings() | dict(settings or {})
        self.base = s
        self.inputs = {name: FieldInput(f, NEW_EMULATION) for name, f in FIELDS.items() if name != "output"}
        self._raw: dict = {}  # values given that no widget can hold (invalid): kept, so the check names them
        for name, inp in self.inputs.items():
            if name in s and not inp.set_value(s[name]):
                self._raw[name] = s[name]
            inp.on_change(lambda name=name: self._edited(name))
        self.model = self.inputs["model"].widget
        self.device = self.inputs["device"].widget
        self.timing = self.inputs["timing_only"].widget
        self.timing.setText("no numerics: same cycles and memory, faster")
        self.onnx = QLineEdit(str(s.get("onnx") or ""))
        self.onnx.setPlaceholderText("optional: an .onnx file instead of the model above")
        self.out = QLineEdit(out)
        self.rows: dict[str, tuple] = {}  # field -> (form, widget): a row hidden for a model that does not read it
        top = QFormLayout()
        self._add_row(top, "model", self.model)
        self._add_row(top, "onnx", self._with_button(self.onnx, self._browse_onnx), "ONNX model:")
        for name in ("device", "timing_only"):
            self._add_row(top, name, self.inputs[name].widget)
        self._add_row(top, "output", self._with_button(self.out, self._browse), FIELDS["output"].label + ":")
        columns = QHBoxLayout()
        for group, title in GROUPS.items():
            if group == "run":
                continue
            box = QGroupBox(title)
            form = QFormLayout(box)
            form.setFieldGrowthPolicy(QFormLayout.AllNonFixedFieldsGrow)
            for name, f in FIELDS.items():
                if f.group == group:
                    self._add_row(form, name, self.inputs[name].widget)
            columns.addWidget(box, 1, Qt.AlignTop)
        bb = QDialogButtonBox(QDialogButtonBox.Ok | QDialogButtonBox.Cancel)
        bb.button(QDialogButtonBox.Ok).setText("Run")
        bb.accepted.connect(self.accept)
        bb.rejected.connect(self.reject)
        hint = plain_label("Fields left at 'default' take the workload's own value (shown in brackets); hover a "
                           "field for what it does.  Only the fields the chosen model reads are shown.")
        hint.setWordWrap(True)
        lay = QVBoxLayout(self)
        lay.addLayout(top)
        lay.addWidget(hint)
        lay.addLayout(columns)
        lay.addWidget(bb)
        self.onnx.textChanged.connect(lambda _t: self._refresh())
        self._refresh()

    # ------------------------------------------------------------------ layout
    def _add_row(self, form: QFormLayout, key: str, widget, label: str | None = None) -> None:
        form.addRow(label if label is not None else FIELDS[key].label + ":", widget)
        self.rows[key] = (form, widget)

    @staticmethod
    def _with_button(edit: QLineEdit, browse) -> QWidget:
        row = QWidget()
        rl = QHBoxLayout(row)
        rl.setContentsMargins(0, 0, 0, 0)
        rl.addWidget(edit)
        button = QPushButton("Browse…")
        button.clicked.connect(browse)
        rl.addWidget(button)
        return row

    def _edited(self, name: str) -> None:
        self._raw.pop(name, None)  # the user chose a value: the one given before no longer counts
        self._refresh()

    def _refresh(self) -> None:
        """Show the fields the chosen model (or ONNX file) reads, each default as the workload would set it."""
        onnx = bool(self.onnx.text().strip())
        self.model.setEnabled(not onnx)  # the file is the model
        offered = offered_fields(self.model.currentText(), onnx)
        for key, (form, widget) in self.rows.items():
            if key in FIELDS and FIELDS[key].group != "run":
                form.setRowVisible(widget, key in offered)
        defaults = {} if onnx else self._workload_defaults()
        for name, inp in self.inputs.items():
            inp.show_default(defaults.get(name))

    def _workload_defaults(self) -> dict:
        """The chosen model's value of every field given the fields set so far (what a field left at its default
        becomes); empty while the fields set do not make a valid run."""
        try:
            s = self.settings()
            given = {k: v for k, v in s.items() if k in ModelConfig.field_names() and k != "model"}
            return workload_defaults(make_config(s["model"], **given))
        except (ConfigError, TypeError, ValueError):
            return {}

    def shown(self, key: str) -> bool:
        """Whether the field ``key`` is offered for the chosen model."""
        form, widget = self.rows[key]
        return form.isRowVisible(widget)

    def _browse(self) -> None:
        p, _ = QFileDialog.getSaveFileName(self, "Profile file", self.out.text() or "run.pvl",
                                           "popvision-lite profiles (*.pvl)")
        if p:
            self.out.setText(p)

    def _browse_onnx(self) -> None:
        p, _ = QFileDialog.getOpenFileName(self, "ONNX model", self.onnx.text(), "ONNX models (*.onnx)")
        if p:
            self.onnx.setText(p)

    # ------------------------------------------------------------------ values
    def settings(self) -> dict:
        """The run settings: every field given (those left at their default are not), the fields the chosen
        model does not read left out; a value typed as text is read by its field (ConfigError naming it)."""
        s = {k: v for k, v in self.base.items() if k not in FIELDS}  # an ONNX run's own keys (dims, inputs ...)
        s["onnx"] = self.onnx.text().strip() or None
        offered = offered_fields(self.model.currentText(), bool(s["onnx"]))
        for name, inp in self.inputs.items():
            if inp.field.group != "run" and name not in offered:
                continue
            v = self._raw[name] if name in self._raw else inp.value()
            if v is not None:
                s[name] = v
        return s

    def checked_settings(self) -> dict:
        """:meth:`settings` checked as ``emulate`` checks a run config (ConfigError naming the field)."""
        s = self.settings()
        check_settings(s, NEW_EMULATION)
        return s

    def output(self) -> str:
        return self.out.text().strip()

    def accept(self) -> None:
        """Run only settings ``emulate`` accepts: a bad value keeps the dialog open, its message shown."""
        try:
            if not self.output():
                raise ConfigError("Give a profile file name.")
            self.checked_settings()
        except ConfigError as e:
            show_error(self, NEW_EMULATION, str(e))
            return
        super().accept()


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
        elif isinstance(cur, list | tuple):  # typed as on the command line: 3,7,7,7
            self.value.setText(",".join(f"{x:g}" for x in cur))
        else:
            self.value.setText("" if cur is None else str(cur))

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
