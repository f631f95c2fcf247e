"""Run > Find a configuration that fits… (also the Summary's button on a profile that does not fit): the fit
advisor (``sweep/fit.py``, docs/fit-advisor.md) on the open profile's run, off the GUI thread with its progress
fraction, time left and Cancel in the status bar; the answer in a dialog whose options open their emulations.

The search runs in this process on a pool thread (``gui/workers.py``); its emulations run on a local Dask
cluster's worker processes, so the window stays responsive and a crashing candidate cannot take it down.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import pandas as pd
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QHBoxLayout,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
)

from popvision_lite.errors import ConfigError, PopvisionError
from popvision_lite.gui.actions.emulation import _in_samples_folder, default_output_folder, free_path
from popvision_lite.gui.table_model import DataFrameModel, make_table_view
from popvision_lite.gui.text import plain_label, show_error, show_info
from popvision_lite.gui.workers import Cancelled
from popvision_lite.profile.run_record import record_of
from popvision_lite.units import format_seconds, format_usd

TITLE = "Find a configuration that fits"


def default_folder(profile_path, last_dir=None) -> Path:
    """``<profile>_fit`` next to the profile when that folder is writable (not the bundled samples), else in the
    default output folder; a name not taken yet."""
    p = Path(str(profile_path))
    parent = p.parent
    if not os.access(parent, os.W_OK) or _in_samples_folder(parent):
        parent = default_output_folder(last_dir)
    return free_path(parent, f"{p.stem}_fit", suffix="")


class FitDialog(QDialog):
    """The search's limits: the largest system, the global batch kept, the emulations at most, the folder."""

    def __init__(self, global_batch: int, folder: str, parent=None):
        from popvision_lite.sweep.fit import DEFAULT_BUDGET, DEFAULT_MAX_IPUS

        super().__init__(parent)
        self.setWindowTitle(TITLE)
        form = QFormLayout(self)
        intro = plain_label("Search tensor parallelism, pipeline splits, replicas, micro-batch and the memory-saving "
                            "settings for the cheapest configuration that fits; every candidate is emulated "
                            "(timing only) on a local Dask cluster.")
        intro.setWordWrap(True)
        form.addRow(intro)
        self.max_ipus = QSpinBox()
        self.max_ipus.setRange(1, 1024)
        self.max_ipus.setValue(DEFAULT_MAX_IPUS)
        self.max_ipus.setToolTip("The largest system searched (256: an IPU-POD256)")
        self.global_batch = QSpinBox()
        self.global_batch.setRange(1, 1 << 20)
        self.global_batch.setValue(max(1, int(global_batch)))
        self.global_batch.setToolTip("Samples per optimizer step, kept by every placement (the run's own by default)")
        self.budget = QSpinBox()
        self.budget.setRange(1, 1000)
        self.budget.setValue(DEFAULT_BUDGET)
        self.budget.setToolTip("Emulations at most")
        self.folder = QLineEdit(str(folder))
        self.folder.setToolTip("Where the candidates' profiles and the report go; a search repeated into it resumes")
        form.addRow("Largest system (IPUs):", self.max_ipus)
        form.addRow("Global batch:", self.global_batch)
        form.addRow("Emulations at most:", self.budget)
        form.addRow("Folder:", self.folder)
        bb = QDialogButtonBox(QDialogButtonBox.Ok | QDialogButtonBox.Cancel)
        bb.button(QDialogButtonBox.Ok).setText("Search")
        bb.accepted.connect(self.accept)
        bb.rejected.connect(self.reject)
        form.addRow(bb)

    def options(self) -> dict:
        return {"max_ipus": self.max_ipus.value(), "global_batch": self.global_batch.value(),
                "budget": self.budget.value(), "out": self.folder.text().strip()}


def options_frame(advice) -> pd.DataFrame:
    """The fitting configurations found, cheapest first, as the result dialog's table shows them."""
    return pd.DataFrame([{
        "IPUs": o.chips, "placement": o.placement, "samples/s": round(o.samples_per_second, 4),
        "time per sample": format_seconds(o.seconds_per_sample),
        "USD per 1 M samples": format_usd(o.cost_per_million_usd) if math.isfinite(o.cost_per_million_usd) else "n/a",
        "fullest tile %": round(o.peak_tile_memory_pct, 1),
        "changes from the run": ", ".join(f"{k} = {v}" for k, v in o.changes.items()) or "none",
        "settings": o.settings} for o in advice.options])


class FitResultDialog(QDialog):
    """The advice: the answer and the next options (each opens its emulation), or why nothing fits."""

    def __init__(self, advice, open_profile=None, open_folder=None, parent=None):
        super().__init__(parent)
        self.setWindowTitle(TITLE)
        self.advice = advice
        self._open_profile = open_profile
        self._open_folder = open_folder
        lay = QVBoxLayout(self)
        head = plain_label(advice.headline())
        head.setWordWrap(True)
        head.setStyleSheet("font-weight: bold;")
        lay.addWidget(head)
        self.model = DataFrameModel(options_frame(advice))
        self.table = make_table_view(self.model, "The configurations that fit, cheapest first; double-click to open "
                                                 "its emulation")
        self.table.doubleClicked.connect(lambda idx: self.open_option(idx.row()))
        self.table.setVisible(bool(advice.options))
        lay.addWidget(self.table, 1)
        self.table.resizeColumnsToContents()
        self.details = QPlainTextEdit()
        self.details.setReadOnly(True)
        self.details.setPlainText(advice.text())
        self.details.setToolTip("The whole report (also fit.txt in the search folder)")
        lay.addWidget(self.details, 1)
        row = QHBoxLayout()
        self.open_button = QPushButton("Open its emulation")
        self.open_button.setToolTip("Open the profile of the selected configuration (the cheapest when none is "
                                    "selected)")
        self.open_button.setEnabled(bool(advice.options))
        self.open_button.clicked.connect(self._open_selected)
        self.sweep_button = QPushButton("Open every candidate")
        self.sweep_button.setToolTip("The search as a sweep table: every emulated candidate, its numbers and profile")
        self.sweep_button.setEnabled(bool(advice.folder) and any(t.emulated for t in advice.trials))
        self.sweep_button.clicked.connect(lambda: self._open_folder and self._open_folder(advice.folder))
        close = QPushButton("Close")
        close.clicked.connect(self.accept)
        row.addWidget(self.open_button)
        row.addWidget(self.sweep_button)
        row.addStretch(1)
        row.addWidget(close)
        lay.addLayout(row)
        self.resize(960, 560)

    def _open_selected(self) -> None:
        rows = self.table.selectionModel().selectedRows() if self.table.selectionModel() else []
        self.open_option(rows[0].row() if rows else 0)

    def open_option(self, row: int) -> str | None:
        """Open the emulation of the option shown in table row ``row``; returns its profile path."""
        if not self.advice.options:
            return None
        r = self.model.row(row)
        opt = next((o for o in self.advice.options if o.placement == r["placement"] and o.settings == r["settings"]),
                   self.advice.options[0])
        if self._open_profile is not None and opt.profile:
            self._open_profile(opt.profile, f"fit: {opt.chips} IPUs")
        return opt.profile


def run_fit(task, base, options: dict):
    """Worker-thread body: the search, its progress (fraction and time left) reported, Cancel honoured (the sweep
    engine stops the candidates running)."""
    from popvision_lite.sweep.fit import fit_advice

    def progress(fraction, text):
        if not task.cancelled:
            task.progress(fraction, text)

    task.progress(0.0, "starting the Dask cluster")
    adv = fit_advice(base, progress=progress, should_cancel=lambda: task.cancelled, **options)
    if task.cancelled or adv.cancelled:
        raise Cancelled()
    return adv


def start_fit(mw, document, options: dict, on_done=None):
    """Search for ``document``'s run (its profile file) on a pool thread; show the result when it ends."""
    def done(adv):
        dlg = FitResultDialog(adv, open_profile=lambda p, title: mw.open_paths([p], titles={p: title}),
                              open_folder=lambda folder: _open_sweep(mw, folder), parent=mw)
        mw._fit_result = dlg
        if on_done is not None:
            on_done(dlg)
        else:
            dlg.show()

    return mw.run_task(run_fit, str(document.path), options, title=f"{TITLE}: {Path(str(document.path)).name}",
                       on_result=done)


def _open_sweep(mw, folder):
    from popvision_lite.gui.actions.sweep import open_sweep_tab

    return open_sweep_tab(mw, folder)


def fit_dialog(mw):
    doc = mw.current_document()
    if doc is None:
        show_info(mw, TITLE, "Open a profile of a run that does not fit first.")
        return None
    if record_of(doc.profile).fits:
        show_info(mw, TITLE, f"{Path(str(doc.path)).name} fits in tile memory already.")
        return None
    try:
        from popvision_lite.sweep.fit_space import global_batch_of, run_config_from_profile

        rc = run_config_from_profile(doc.profile)
        gb = global_batch_of(rc.model_config(host_check=False))
    except (ConfigError, PopvisionError) as e:
        show_error(mw, TITLE, str(e))
        return None
    dlg = FitDialog(gb, str(default_folder(doc.path, mw.settings.value("last_dir", None))), mw)
    if dlg.exec() != QDialog.Accepted:
        return None
    opts = dlg.options()
    if not opts["out"]:
        show_error(mw, TITLE, "Give a folder for the search.")
        return None
    return start_fit(mw, doc, opts)


def install(mw) -> None:
    r = mw.menus["run"]
    mw.act_fit = mw._action(r, f"&{TITLE}…", lambda: fit_dialog(mw), "Ctrl+Shift+F",
                            "Search placements and memory settings for the cheapest configuration of this run that "
                            "fits in tile memory (emulated on a local Dask cluster)")
    cancel = getattr(mw, "act_cancel", None)
    if cancel is not None:  # above "Cancel running job", with the other runs
        r.removeAction(mw.act_fit)
        r.insertAction(cancel, mw.act_fit)
