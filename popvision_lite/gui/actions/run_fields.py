"""The run dialog's input of one run-config field, built from the field's definition (``emulator/run_config.py``
``FIELDS``): its kind picks the widget, its bounds and allowed values bound it, its label and help name and
explain it, and a value typed as text is read by the field's own parser (what ``emulate --NAME TEXT`` does).

A field of the workload (every group but "run") may be left at its *default*: not given, so the workload's
preset decides, as when the flag is left off the command line.  Its widget then says what that default is
(:meth:`FieldInput.show_default`).  The "run" fields (model, device, output, timing only) are always given.
"""

from __future__ import annotations

from dataclasses import asdict

from PySide6.QtWidgets import QCheckBox, QComboBox, QLineEdit, QSpinBox

from popvision_lite.emulator.models.config import MODEL_NAMES
from popvision_lite.emulator.run_config import DEVICE_ALIASES, RunConfigField, check_field
from popvision_lite.gui.text import plain_tip

SPIN_MAX = 2 ** 31 - 1  # QSpinBox holds a C int; a field allowing more is typed as text
DEFAULT = "default"
# fields whose 0 stands for a value derived from the others, and the ModelConfig property that derives it
DERIVED = {"head_dim": "d_head", "ffn": "ffn_size", "pipeline_stages": "stages", "mask_tokens": "mlm_tokens"}


def workload_defaults(cfg) -> dict:
    """Every field's value in the ModelConfig ``cfg`` (what a field left at its default becomes), a 0 that
    stands for a derived value (:data:`DERIVED`) replaced by that value."""
    d = asdict(cfg)
    for name, prop in DERIVED.items():
        if not d.get(name):
            d[name] = getattr(cfg, prop)
    return d


def default_text(value) -> str:
    """How a default value reads in the dialog: 'default (24)', 'default (off)', 'default (3,7,7,7)'."""
    if value is None:
        return DEFAULT
    if isinstance(value, bool):
        return f"{DEFAULT} ({'on' if value else 'off'})"
    if isinstance(value, list | tuple):
        return f"{DEFAULT} ({','.join(f'{x:g}' for x in value)})"
    if isinstance(value, float):
        return f"{DEFAULT} ({value:g})"
    return f"{DEFAULT} ({value})"


class FieldInput:
    """One field's widget and value: :meth:`value` is None while the field is left at its default (workload
    fields only), else the value, checked by the field's definition (ConfigError naming ``source`` and the
    field, the same problem text as every other source)."""

    def __init__(self, field: RunConfigField, source: str):
        self.field = field
        self.source = source
        self.optional = field.group != "run"
        k = field.kind
        lo, hi = field.bounds
        if k == "model":
            self.widget = QComboBox()
            self.widget.addItems(list(MODEL_NAMES))
        elif k == "device":
            self.widget = QComboBox()
            self.widget.addItems(sorted(set(DEVICE_ALIASES.values()), key=_device_order))
        elif k == "bool" and not self.optional:
            self.widget = QCheckBox()
        elif k in ("choice", "bool"):
            self.widget = QComboBox()
            self.widget.addItem(DEFAULT, None)
            for v in (field.choices if k == "choice" else (True, False)):
                self.widget.addItem(v if k == "choice" else ("on" if v else "off"), v)
        elif k == "int" and hi is not None and hi <= SPIN_MAX:
            self.widget = QSpinBox()
            self.widget.setRange(int(lo) - 1, int(hi))  # one below the lowest value: the default
            self.widget.setSpecialValueText(DEFAULT)
            self.widget.setValue(self.widget.minimum())
            self.widget.setGroupSeparatorShown(True)
            self._pending_default = ""
            self.widget.valueChanged.connect(self._at_default)
        else:  # numbers, lists, wide integers, file names: typed as on the command line
            self.widget = QLineEdit()
            self.widget.setPlaceholderText(DEFAULT if self.optional else "")
        if isinstance(self.widget, QComboBox):  # wide enough for 'default (sequential)' and every choice
            self.widget.setSizeAdjustPolicy(QComboBox.AdjustToContents)
        tip = field.help + (f"  [{lo:g} .. {hi:g}]" if lo is not None and k != "int" else
                            f"  [{lo:,} .. {hi:,}]" if lo is not None else "")
        tip += f"\n(emulate {field.flag}; in a run config: {field.name})" if field.name != "model" else ""
        self.widget.setToolTip(plain_tip(tip))

    # ------------------------------------------------------------------ value
    def value(self):
        """The value given (checked), or None for a workload field left at its default."""
        w, k = self.widget, self.field.kind
        if isinstance(w, QCheckBox):
            return w.isChecked()
        if isinstance(w, QComboBox):
            return w.currentText() if k in ("model", "device") else w.currentData()
        if isinstance(w, QSpinBox):
            return None if w.value() == w.minimum() else w.value()
        text = w.text().strip()
        if not text and self.optional:
            return None
        return check_field(self.field.name, text, self.source, text=True)

    def set_value(self, value) -> bool:
        """Show ``value`` (None: the default); False when the widget cannot hold it (not a valid value of the
        field): the caller keeps the value as given, so checking the settings reports it."""
        w = self.widget
        if value is None or (value == 0 and self.field.name in DERIVED):  # a derived field's 0: its default
            if not self.optional:
                return False
            self._set_default()
            return True
        try:
            value = check_field(self.field.name, value, None)
        except Exception:  # noqa: BLE001 - any invalid value: reported by the settings check, with its source
            return False
        if isinstance(w, QCheckBox):
            w.setChecked(bool(value))
        elif isinstance(w, QComboBox):
            i = w.findText(value) if self.field.kind in ("model", "device") else w.findData(value)
            if i < 0:
                return False
            w.setCurrentIndex(i)
        elif isinstance(w, QSpinBox):
            w.setValue(int(value))
        elif isinstance(value, list | tuple):
            w.setText(",".join(f"{x:g}" for x in value))
        else:
            w.setText(f"{value:g}" if isinstance(value, float) else str(value))
        return True

    def _set_default(self) -> None:
        w = self.widget
        if isinstance(w, QComboBox):
            w.setCurrentIndex(0)
        elif isinstance(w, QSpinBox):
            w.setValue(w.minimum())
        elif isinstance(w, QLineEdit):
            w.clear()

    def show_default(self, value) -> None:
        """Say what the default is (the workload's value when this field is not given)."""
        if not self.optional:
            return
        text = default_text(value)
        w = self.widget
        if isinstance(w, QComboBox):
            w.setItemText(0, text)
            w.setMinimumWidth(w.sizeHint().width())  # the layout does not squeeze 'default (sequential)'
        elif isinstance(w, QSpinBox):
            # setSpecialValueText rewrites the box's text (with its thousands separator) and leaves the cursor
            # before the last digit: called on every keystroke (the dialog refreshes the defaults as values
            # change), typing 30912 gave 30,921 and 65536 gave 6,553 (issue 46).  A box showing a value the user
            # typed does not show its default text anyway: set it only when it changes and the box is not at a
            # typed value.
            if w.specialValueText() != text and w.value() == w.minimum():
                w.setSpecialValueText(text)
            elif w.specialValueText() != text:
                self._pending_default = text  # shown when the box goes back to its default
        elif isinstance(w, QLineEdit):
            w.setPlaceholderText(text)

    def _at_default(self, v: int) -> None:
        """Back at the default (the box's minimum): show the default text held back while a value was typed."""
        w = self.widget
        if v == w.minimum() and self._pending_default and w.specialValueText() != self._pending_default:
            w.setSpecialValueText(self._pending_default)
        self._pending_default = ""

    def on_change(self, fn) -> None:
        """Call ``fn()`` whenever the user changes the value."""
        w = self.widget
        if isinstance(w, QCheckBox):
            w.toggled.connect(lambda _v: fn())
        elif isinstance(w, QComboBox):
            w.currentIndexChanged.connect(lambda _i: fn())
        elif isinstance(w, QSpinBox):
            w.valueChanged.connect(lambda _v: fn())
        else:
            w.textChanged.connect(lambda _t: fn())


def _device_order(dev: str) -> tuple:
    """ipu-mk2 (the default) first, then the others by name."""
    return (dev != "ipu-mk2", dev)
