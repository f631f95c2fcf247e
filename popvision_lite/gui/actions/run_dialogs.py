"""The dialogs of Run > New emulation… and Run > Re-run with… (``gui/actions/run.py`` opens them and runs what
they give).

New emulation… has one control per option of ``popvision-lite emulate`` (:attr:`EmulationDialog.controls`, keyed
by the option's argparse dest): every run-config field (``emulator/run_config.FIELDS``, ``gui/actions/run_fields``),
the ONNX branch's own options (``onnx_import.config.ONNX_OPTIONS``), ``--ipu-config`` / ``--pod-type`` (read into
the fields, as the command line reads them under its flags) and ``--config`` (Load… / Save…: the run-config TOML
of ``emulator/run_config_file.py``, the one reader and writer the command line uses too).  Run checks everything
the command line would check before it starts (the fields' own checks, the output file, the ONNX files) and keeps
the dialog open, with what was typed, when something is wrong: the message is shown in the dialog, and the field
it names gets the focus.
"""

from __future__ import annotations

import re
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
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from popvision_lite.emulator.ipu_config import POD_TYPES, read_ipu_config
from popvision_lite.emulator.models.config import ModelConfig, make_config
from popvision_lite.emulator.onnx_import.config import CONFIG_KEYS as ONNX_KEYS
from popvision_lite.emulator.onnx_import.config import ONNX_OPTIONS, parse_ipu_split
from popvision_lite.emulator.onnx_import.loader import parse_dims
from popvision_lite.emulator.run_config import FIELDS, GROUPS, model_family
from popvision_lite.emulator.run_config_file import read_settings, save_settings
from popvision_lite.errors import ConfigError, PopvisionError
from popvision_lite.gui import theme
from popvision_lite.gui.actions.emulation import (
    BOOL_SETTINGS,
    INT_SETTINGS,
    NEW_EMULATION,
    RERUN,
    SETTINGS,
    change_setting,
    check_output,
    check_settings,
    config_toml,
    default_settings,
    no_numerics,
)
from popvision_lite.gui.actions.run_fields import FieldInput, workload_defaults
from popvision_lite.gui.text import plain_label, plain_tip

ONNX_EXTRA = {o.key: o for o in ONNX_OPTIONS if o.key != "onnx"}  # the ONNX options that are not run-config fields
def offered_fields(model: str, onnx: bool) -> set[str]:
    """The run-config fields the dialog offers: those the chosen bundled model reads (``FIELDS[k].only_for``),
    or for an ONNX file the settings an ONNX run reads (``onnx_import.config.CONFIG_KEYS``)."""
    if onnx:
        return {k for k in FIELDS if k in ONNX_KEYS}
    fam = model_family(model)
    return {k for k, f in FIELDS.items() if not f.only_for or fam in f.only_for}


def message_label() -> QLabel:
    """The dialog's message line: what is wrong (or what Load… / Save… did), wrapped, selectable."""
    lab = plain_label()
    lab.setWordWrap(True)
    lab.setTextInteractionFlags(Qt.TextSelectableByMouse)
    lab.hide()
    return lab


def say(label: QLabel, text: str, error: bool = True) -> None:
    """Show ``text`` on the message line ``label`` (red for a problem); empty text hides it."""
    label.setText(text)
    label.setProperty("error", bool(error and text))
    label.setStyleSheet(f"color: {theme.SEVERITY_COLORS['error']}; font-weight: bold;" if error else "")
    label.setVisible(bool(text))


def blamed_field(message: str) -> str | None:
    """The field a message names (``New emulation: field 'batch': ...``, ``run.toml: field 'dims'``)."""
    m = re.search(r"field '([a-z_0-9]+)", message)
    return m.group(1) if m else None


class EmulationDialog(QDialog):
    """Every field of the run config (``emulator/run_config.py`` FIELDS), in the field's groups: the run (model
    or ONNX file and its options, device, timing only, output), the workload, precision and memory, and training
    at scale.  A workload field may stay at its default (the preset's value, shown); the fields the chosen model
    does not read are hidden.  Values are checked as ``emulate --config`` checks them, before the dialog closes."""

    def __init__(self, settings: dict | None = None, out: str = "", parent=None):
        super().__init__(parent)
        self.setWindowTitle("New emulation")
        s = default_settings() | dict(settings or {})
        self.base = {k: v for k, v in s.items() if k not in ONNX_EXTRA}
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
        self._timing_tip = self.timing.toolTip()
        self._timing_choice = self.timing.isChecked()  # what the user chose, while a run cannot honour it
        self.onnx = self._line(ONNX_OPTIONS[0], str(s.get("onnx") or ""),
                               "optional: an .onnx file instead of the model above")
        self.onnx_options = {k: self._line(o, _option_text(k, s.get(k)), o.help.split(") ", 1)[-1])
                             for k, o in ONNX_EXTRA.items()}
        self.out = QLineEdit(out)
        self.out.setToolTip(plain_tip(FIELDS["output"].help + "\n(emulate -o/--output; in a run config: output)"))
        self.ipu_config, self.pod_type = self._ipu_config_controls()
        self._marked = None  # the label of the field a problem shown names
        self.rows: dict[str, tuple] = {}  # field -> (form, widget): a row hidden for a model that does not read it
        top = QFormLayout()
        top.setFieldGrowthPolicy(QFormLayout.AllNonFixedFieldsGrow)
        self._add_row(top, "model", self.model)
        self._add_row(top, "onnx", self._with_button(self.onnx, self._browse_onnx), "ONNX model:")
        for k, o in ONNX_EXTRA.items():
            w = self.onnx_options[k]
            self._add_row(top, k, self._with_button(w, self._browse_inputs) if k == "inputs" else w, o.label + ":")
        read = QPushButton("Read")
        read.setToolTip(plain_tip("Set the fields this IPU config gives"))
        read.clicked.connect(lambda: self.read_ipu_config())
        ipu_row = self._with_button(self.ipu_config, self._browse_ipu_config)
        ipu_row.layout().addWidget(self.pod_type)
        ipu_row.layout().addWidget(read)
        self._add_row(top, "ipu_config", ipu_row, "IPU config:")
        for name in ("device", "timing_only"):
            self._add_row(top, name, self.inputs[name].widget)
        self._add_row(top, "output", self._with_button(self.out, self._browse), FIELDS["output"].label + ":")
        body, scroll = self._field_columns()
        self.message = message_label()
        buttons = self._button_row()
        hint = plain_label("Fields left at 'default' take the workload's own value (shown in brackets); hover a "
                           "field for what it does.  Only the fields the chosen model reads are shown.")
        hint.setWordWrap(True)
        lay = QVBoxLayout(self)
        lay.addLayout(top)
        lay.addWidget(hint)
        lay.addWidget(scroll, 1)
        lay.addWidget(self.message)
        lay.addLayout(buttons)
        # the control of each emulate option (argparse dest): tests/gui/test_run_actions.py checks none is missing
        self.controls = {name: inp.widget for name, inp in self.inputs.items()} | {
            "output": self.out, "onnx": self.onnx, "config": self.load_button, "ipu_config": self.ipu_config,
            "pod_type": self.pod_type} | {o.dest: self.onnx_options[k] for k, o in ONNX_EXTRA.items()}
        for w in (self.onnx, self.out, *self.onnx_options.values()):
            w.textChanged.connect(lambda _t: self._edited(None))
        self._refresh()
        self._fit_to_screen(body, scroll)

    # ------------------------------------------------------------------ layout
    @staticmethod
    def _ipu_config_controls() -> tuple[QLineEdit, QComboBox]:
        """The optimum-graphcore IPU config file and the POD type whose per-POD values it gives."""
        path = QLineEdit()
        path.setPlaceholderText("optional: an optimum-graphcore ipu_config.json, read into the fields")
        path.setToolTip(plain_tip(
            "An optimum-graphcore IPU config (layers_per_ipu, ipus_per_replica, replication_factor, "
            "gradient_accumulation_steps, matmul_proportion ...): Read sets the fields it gives; change them "
            "after.\n(emulate --ipu-config FILE)"))
        pod_type = QComboBox()
        pod_type.addItem("POD: default", None)
        for p in POD_TYPES:
            pod_type.addItem(p, p)
        pod_type.setToolTip(plain_tip("The POD type whose values an IPU config's per-POD tables give "
                                      "(default: their 'default').\n(emulate --pod-type)"))
        return path, pod_type

    def _field_columns(self) -> tuple[QWidget, QScrollArea]:
        """One column per field group but the run's own: they scroll on a small screen, the rest stays."""
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
        body = QWidget()
        body.setLayout(columns)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)  # the dialog is as wide as the columns
        scroll.setFrameShape(QScrollArea.NoFrame)
        scroll.setWidget(body)
        return body, scroll

    def _button_row(self) -> QHBoxLayout:
        """Load / Save of a run-config file on the left, Run / Cancel on the right."""
        bb = QDialogButtonBox(QDialogButtonBox.Ok | QDialogButtonBox.Cancel)
        bb.button(QDialogButtonBox.Ok).setText("Run")
        self.load_button = QPushButton("Load…")
        self.save_button = QPushButton("Save…")
        buttons = QHBoxLayout()
        buttons.addWidget(self.load_button)
        buttons.addWidget(self.save_button)
        buttons.addStretch(1)
        buttons.addWidget(bb)
        self.load_button.setToolTip(plain_tip("Load a run-config TOML (the file emulate --config reads)"))
        self.save_button.setToolTip(plain_tip("Save these settings as a run-config TOML: "
                                              "popvision-lite emulate --config FILE runs the same"))
        self.load_button.clicked.connect(self._load)
        self.save_button.clicked.connect(self._save)
        bb.accepted.connect(self.accept)
        bb.rejected.connect(self.reject)
        return buttons

    def _add_row(self, form: QFormLayout, key: str, widget, label: str | None = None) -> None:
        form.addRow(label if label is not None else FIELDS[key].label + ":", widget)
        self.rows[key] = (form, widget)

    @staticmethod
    def _line(option, text: str, placeholder: str) -> QLineEdit:
        w = QLineEdit(text)
        w.setPlaceholderText(placeholder)
        w.setToolTip(plain_tip(f"{option.help}\n(emulate {option.flag} {option.metavar}; in a run config: "
                               f"{option.key})"))
        return w

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

    def _fit_to_screen(self, body: QWidget, scroll: QScrollArea) -> None:
        """As large as the three columns need, within the screen (the columns scroll beyond that)."""
        screen = self.screen().availableGeometry() if self.screen() else None
        body.adjustSize()
        room = body.sizeHint().width() + scroll.verticalScrollBar().sizeHint().width()
        scroll.setMinimumWidth(min(room, screen.width() - 80) if screen is not None else room)
        self.adjustSize()
        want_h = self.sizeHint().height() - scroll.sizeHint().height() + body.sizeHint().height() + 8
        want_w = max(self.sizeHint().width(), body.sizeHint().width() + 2 * self.layout().contentsMargins().left())
        if screen is not None:
            want_w, want_h = min(want_w, screen.width() - 40), min(want_h, screen.height() - 60)
        self.resize(want_w, want_h)

    def _edited(self, name: str | None) -> None:
        if name is not None:
            self._raw.pop(name, None)  # the user chose a value: the one given before no longer counts
        if name == "timing_only" and self.timing.isEnabled():
            self._timing_choice = self.timing.isChecked()
        if self.message.isVisible() and self.message.property("error"):
            say(self.message, "")  # the problem shown was about the values before this edit
            self._unmark()
        self._refresh()

    def _refresh(self) -> None:
        """Show the fields the chosen model (or ONNX file) reads, each default as the workload would set it."""
        onnx = bool(self.onnx.text().strip())
        self.model.setEnabled(not onnx)  # the file is the model
        offered = offered_fields(self.model.currentText(), onnx)
        for key, (form, widget) in self.rows.items():
            if key in FIELDS and FIELDS[key].group != "run":
                form.setRowVisible(widget, key in offered)
            elif key in ONNX_EXTRA:
                form.setRowVisible(widget, onnx)
            elif key == "ipu_config":  # an IPU config places a bundled model's layers
                form.setRowVisible(widget, not onnx)
        cfg = None if onnx else self._model_config()
        defaults = workload_defaults(cfg) if cfg is not None else {}
        for name, inp in self.inputs.items():
            inp.show_default(defaults.get(name))
        self._timing_follows(cfg)

    def _timing_follows(self, cfg) -> None:
        """Timing only: ticked and disabled, saying why, when the run is composed from stage programs (no numerics
        whatever the box says, ``host_memory.runs_composed``); the user's own choice back when it is not."""
        why = None if cfg is None else no_numerics(cfg)
        if (why is not None) == (not self.timing.isEnabled()):
            return
        self.timing.blockSignals(True)
        if why is not None:
            self.timing.setChecked(True)
            self.timing.setEnabled(False)
            self.timing.setToolTip(plain_tip(f"Numerics are not run for this configuration: {why}."))
        else:
            self.timing.setChecked(self._timing_choice)
            self.timing.setEnabled(True)
            self.timing.setToolTip(self._timing_tip)
        self.timing.blockSignals(False)

    def _model_config(self):
        """The chosen bundled model's ModelConfig given the valid fields set so far (a field whose value is not
        valid is left out, so the others still show their defaults); the preset's alone while the valid ones do not
        make a run together; None for no model."""
        model = self.model.currentText()
        offered = offered_fields(model, False)
        given = {}
        for name, inp in self.inputs.items():
            if name in ModelConfig.field_names() and name != "model" and name in offered and name not in self._raw:
                try:
                    v = inp.value()
                except ConfigError:
                    continue
                if v is not None:
                    given[name] = v
        for kw in (given, {}):
            try:
                return make_config(model, **kw)
            except (ConfigError, TypeError, ValueError):
                continue
        return None

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

    def _browse_inputs(self) -> None:
        w = self.onnx_options["inputs"]
        p, _ = QFileDialog.getOpenFileName(self, "Input arrays", w.text(), "numpy arrays (*.npz)")
        if p:
            w.setText(p)

    def _browse_ipu_config(self) -> None:
        p, _ = QFileDialog.getOpenFileName(self, "IPU config", self.ipu_config.text(), "IPU configs (*.json)")
        if p:
            self.ipu_config.setText(p)
            self.read_ipu_config()

    def _load(self) -> None:
        p, _ = QFileDialog.getOpenFileName(self, "Load run config", "", "run configs (*.toml)")
        if p:
            self.load_file(p)

    def _save(self) -> None:
        start = str(Path(self.output()).with_suffix(".toml")) if self.output() else "run.toml"
        p, _ = QFileDialog.getSaveFileName(self, "Save run config", start, "run configs (*.toml)")
        if p:
            self.save_file(p)

    # ------------------------------------------------------------------ files
    def load_file(self, path) -> bool:
        """The settings of the run-config TOML at ``path`` into the dialog (a field the file leaves out goes back
        to its default); a file that ``emulate --config`` would refuse is refused with the same message."""
        try:
            s = read_settings(path)
        except PopvisionError as e:
            self._problem(str(e))
            return False
        self.apply_settings(s)
        say(self.message, f"Loaded {path}", error=False)
        return True

    def apply_settings(self, s: dict) -> None:
        """Show the settings ``s`` (as :func:`run_config_file.read_settings` gives them)."""
        self._raw.clear()
        for name, inp in self.inputs.items():
            if name in s:
                if not inp.set_value(s[name]):
                    self._raw[name] = s[name]
            elif inp.optional:
                inp.set_value(None)
        self._timing_choice = bool(s.get("timing_only", self._timing_choice))
        self.onnx.setText(str(s.get("onnx") or ""))
        for k, w in self.onnx_options.items():
            w.setText(_option_text(k, s.get(k)))
        if s.get("output"):
            self.out.setText(str(s["output"]))
        self._refresh()

    def save_file(self, path) -> bool:
        """The dialog's settings (checked first, as Run checks them) saved as a run-config TOML at ``path``."""
        try:
            s = self.checked_settings()
            if self.output():
                s["output"] = self.output()
            save_settings(path, s)
        except PopvisionError as e:
            self._problem(str(e))
            return False
        say(self.message, f"Saved {path}: popvision-lite emulate --config {Path(path).name} runs these settings",
            error=False)
        return True

    def read_ipu_config(self, path: str | None = None) -> bool:
        """Set the fields an optimum-graphcore IPU config gives (``emulate --ipu-config``, read by the same
        ``emulator/ipu_config.py``); what it cannot express is said on the message line."""
        path = path or self.ipu_config.text().strip()
        if not path:
            return False
        try:
            s = self.settings()
            read = read_ipu_config(path, task_head=s.get("task_head") or "pretraining",
                                   model_family=model_family(s["model"]), pod_type=self.pod_type.currentData(),
                                   inference=s.get("training") is False)
        except PopvisionError as e:
            self._problem(str(e))
            return False
        for name, value in read.settings.items():
            if not self.inputs[name].set_value(value):
                self._raw[name] = value
        self._refresh()
        set_ = ", ".join(f"{FIELDS[k].label.lower()} {_option_text(k, v)}" for k, v in read.settings.items())
        say(self.message, "\n".join([f"Read {Path(path).name}: {set_ or 'no settings'}", *read.notes()]), error=False)
        return True

    # ------------------------------------------------------------------ values
    def settings(self) -> dict:
        """The run settings: every field given (those left at their default are not), the fields the chosen
        model does not read left out; a value typed as text is read by its field (ConfigError naming it)."""
        s = {k: v for k, v in self.base.items() if k not in FIELDS}
        s["onnx"] = self.onnx.text().strip() or None
        offered = offered_fields(self.model.currentText(), bool(s["onnx"]))
        for name, inp in self.inputs.items():
            if inp.field.group != "run" and name not in offered:
                continue
            v = self._raw[name] if name in self._raw else inp.value()
            if v is not None:
                s[name] = v
        if s["onnx"]:
            s.update(self.onnx_settings())
        return s

    def onnx_settings(self) -> dict:
        """The ONNX options typed (dims, loss output, IPU split, inputs), read as the command line reads them."""
        out = {}
        for k, w in self.onnx_options.items():
            text = w.text().strip()
            if not text:
                continue
            if k == "dims":
                out[k] = parse_dims(re.split(r"[,\s]+", text), f"{NEW_EMULATION}: field 'dims'")
            elif k == "ipu_split":
                out[k] = parse_ipu_split(text)
            else:
                out[k] = text
        return out

    def checked_settings(self) -> dict:
        """:meth:`settings` checked as ``emulate`` checks a run config (ConfigError naming the field)."""
        s = self.settings()
        check_settings(s, NEW_EMULATION)
        return s

    def output(self) -> str:
        return self.out.text().strip()

    def _problem(self, text: str) -> None:
        """Show a problem on the message line, its field's label in the same colour, and put the focus on it."""
        self._unmark()
        say(self.message, text)
        name = blamed_field(text) or ""
        w = self.controls.get("dim" if name == "dims" else name)
        if name in self.rows:
            form, row = self.rows[name]
            label = form.labelForField(row)
            if label is not None:
                label.setStyleSheet(self.message.styleSheet())
                self._marked = label
        if w is not None and w.isVisible():
            w.setFocus()

    def _unmark(self) -> None:
        if self._marked is not None:
            self._marked.setStyleSheet("")
            self._marked = None

    def accept(self) -> None:
        """Run only what ``emulate`` would run: a problem keeps the dialog open, with the values as typed, its
        message on the message line and the focus on the field it names."""
        try:
            check_output(self.output(), NEW_EMULATION)
            self.checked_settings()
        except ConfigError as e:
            self._problem(str(e))
            return
        super().accept()


def _option_text(key: str, value) -> str:
    """A setting's value as typed in the dialog (``a=1, b=2``; ``node1,node2``; ``3,7,7,7``)."""
    if value is None:
        return ""
    if isinstance(value, bool):  # as the dialog's lists and Re-run with… take it
        return "on" if value else "off"
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items())
    if isinstance(value, list | tuple):
        return ",".join(f"{x:g}" if isinstance(x, float) else str(x) for x in value)
    return str(value)


class RerunDialog(QDialog):
    """Change one setting of the open profile's run; a bad value keeps the dialog open, its message shown."""

    def __init__(self, settings: dict, parent=None):
        super().__init__(parent)
        self.setWindowTitle("Re-run with…")
        self.base = dict(settings)
        self.setMinimumWidth(560)
        lay = QVBoxLayout(self)
        intro = plain_label("Change one setting; the result opens in compare mode against this run.")
        intro.setWordWrap(True)
        lay.addWidget(intro)
        form = QFormLayout()
        form.setFieldGrowthPolicy(QFormLayout.AllNonFixedFieldsGrow)
        lay.addLayout(form)
        self.name = QComboBox()
        for k in SETTINGS:
            self.name.addItem(FIELDS[k].label, k)
        self.value = QLineEdit()
        self.current = plain_label()
        self.message = message_label()
        form.addRow("Setting:", self.name)
        form.addRow("Now:", self.current)
        form.addRow("New value:", self.value)
        lay.addWidget(self.message)
        lay.addStretch(1)
        bb = QDialogButtonBox(QDialogButtonBox.Ok | QDialogButtonBox.Cancel)
        bb.button(QDialogButtonBox.Ok).setText("Run")
        bb.accepted.connect(self.accept)
        bb.rejected.connect(self.reject)
        lay.addWidget(bb)
        self.name.currentIndexChanged.connect(lambda _i: self._changed(self.setting()))
        self.value.textChanged.connect(lambda _t: say(self.message, ""))
        self.select("recompute")
        self._changed("recompute")

    def setting(self) -> str:
        """The run-config field chosen."""
        return self.name.currentData()

    def select(self, name: str) -> None:
        self.name.setCurrentIndex(self.name.findData(name))

    def _changed(self, name: str) -> None:
        cur = self.base.get(name)
        self.current.setText(_option_text(name, cur) if cur is not None else "default")
        self.value.setToolTip(plain_tip(f"{FIELDS[name].help}\n(typed as emulate {FIELDS[name].flag} takes it)"))
        if name in BOOL_SETTINGS:
            self.value.setText("off" if cur else "on")
        elif name == "device":
            self.value.setText("ipu-bow" if cur != "ipu-bow" else "ipu-mk2")
        elif name in INT_SETTINGS:
            self.value.setText(str(int(cur or 1) * 2))
        else:
            self.value.setText(_option_text(name, cur))

    def settings(self) -> dict:
        return change_setting(self.base, self.setting(), self.value.text())

    def checked_settings(self) -> dict:
        """:meth:`settings` checked as the re-run's ``emulate --config`` will check them."""
        new = self.settings()
        check_settings(new, RERUN)
        config_toml(new)
        return new

    def accept(self) -> None:
        try:
            self.checked_settings()
        except ConfigError as e:
            say(self.message, str(e))
            self.value.setFocus()
            self.adjustSize()  # room for the message
            return
        super().accept()
