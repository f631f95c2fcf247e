"""The page shown when no profile is open: Open…, recent files and bundled samples."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from popvision_lite.gui.text import plain_tip
from popvision_lite.resources_path import resource_dir

SAMPLES_ENV = "POPVISION_LITE_SAMPLES"


def sample_dirs() -> list[Path]:
    """Folders that may hold the bundled sample profiles, most specific first.

    * ``$POPVISION_LITE_SAMPLES`` when set;
    * ``sample_profiles/`` at the root of a source checkout;
    * ``sample_profiles/`` inside the installed resources, or under ``<prefix>/share/popvision-lite/``.
    Only folders that exist are returned (none at all is fine: the start page shows no samples).
    """
    cands = []
    env = os.environ.get(SAMPLES_ENV)
    if env:
        cands.append(Path(env))
    pkg = Path(__file__).resolve().parents[1]  # popvision_lite/
    cands += [
        pkg.parent / "sample_profiles",
        resource_dir("sample_profiles"),
        pkg / "sample_profiles",
        Path(sys.prefix) / "share" / "popvision-lite" / "sample_profiles",
    ]
    out, seen = [], set()
    for c in cands:
        try:
            r = c.resolve()
        except OSError:
            continue
        if r.is_dir() and r not in seen:
            seen.add(r)
            out.append(r)
    return out


def bundled_samples() -> list[Path]:
    """All ``*.pvl`` files in :func:`sample_dirs`, sorted by name (first folder wins on duplicates)."""
    found: dict[str, Path] = {}
    for d in sample_dirs():
        for f in sorted(d.glob("*.pvl")):
            found.setdefault(f.name, f)
    return [found[k] for k in sorted(found)]


def sample_descriptions(paths: list[Path]) -> dict[str, tuple[str, str]]:
    """file name -> (workload, what it shows), read from the samples' README.md table when present."""
    out: dict[str, tuple[str, str]] = {}
    for d in {p.parent for p in paths}:
        readme = d / "README.md"
        try:
            lines = readme.read_text(encoding="utf-8").splitlines()
        except OSError:
            continue
        for line in lines:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) >= 3 and cells[0].startswith("`") and cells[0].endswith(".pvl`"):
                plain = [c.replace("**", "").replace("`", "") for c in cells[1:3]]  # markdown -> text
                out.setdefault(cells[0].strip("`"), (plain[0], plain[1]))
    return out


class StartPage(QWidget):
    """Emits ``open_requested(path)`` for a recent/sample entry and ``browse_requested()`` for Open…"""

    open_requested = Signal(str)
    browse_requested = Signal()
    restore_requested = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        title = QLabel("<h1>popvision-lite</h1><p>Profiles of IPU runs: memory, liveness, execution, roofline.</p>")
        title.setTextFormat(Qt.RichText)
        self.open_button = QPushButton("Open profile…")
        self.open_button.setToolTip("Open a .pvl profile (Ctrl+O). You can also drop .pvl files on the window.")
        self.open_button.clicked.connect(self.browse_requested)
        self.restore_button = QPushButton("Reopen last session")
        self.restore_button.setToolTip("Reopen the profiles that were open when popvision-lite last closed")
        self.restore_button.clicked.connect(self.restore_requested)
        self.restore_button.hide()
        self.recent_list = QListWidget()
        self.recent_list.setToolTip("Recently opened profiles: double-click or Enter to open")
        self.sample_list = QListWidget()
        self.sample_list.setToolTip("Sample profiles shipped with popvision-lite: double-click or Enter to open")
        for lst in (self.recent_list, self.sample_list):
            lst.itemActivated.connect(self._activated)

        cols = QHBoxLayout()
        for label, lst in (("Recent files", self.recent_list), ("Bundled samples", self.sample_list)):
            box = QVBoxLayout()
            box.addWidget(QLabel(f"<b>{label}</b>"))
            box.addWidget(lst)
            cols.addLayout(box)
        self.samples_note = QLabel("")
        self.samples_note.setWordWrap(True)

        lay = QVBoxLayout(self)
        lay.setContentsMargins(40, 30, 40, 30)
        lay.addWidget(title)
        row = QHBoxLayout()
        row.addWidget(self.open_button)
        row.addWidget(self.restore_button)
        row.addStretch(1)
        lay.addLayout(row)
        lay.addLayout(cols, 1)
        lay.addWidget(self.samples_note)
        self.set_samples(bundled_samples())

    def _activated(self, item: QListWidgetItem) -> None:
        path = item.data(Qt.UserRole)
        if path:
            self.open_requested.emit(path)

    def set_session(self, paths: list[str]) -> None:
        """Offer to reopen ``paths`` (the last session's profiles that still exist); hidden when there are none."""
        n = len(paths)
        self.restore_button.setText(f"Reopen last session ({n} profile{'s' if n != 1 else ''})")
        self.restore_button.setToolTip("\n".join(paths))
        self.restore_button.setVisible(n > 0)

    def set_recent(self, paths: list[str]) -> None:
        self.recent_list.clear()
        for p in paths:
            it = QListWidgetItem(f"{Path(p).name}  —  {Path(p).parent}")
            it.setToolTip(plain_tip(p))
            it.setData(Qt.UserRole, p)
            self.recent_list.addItem(it)
        if not paths:
            it = QListWidgetItem("(none yet)")
            it.setFlags(Qt.NoItemFlags)
            self.recent_list.addItem(it)

    def set_samples(self, paths: list[Path]) -> None:
        self.sample_list.clear()
        desc = sample_descriptions(paths)
        for p in paths:
            workload, shows = desc.get(p.name, ("", ""))
            it = QListWidgetItem(f"{p.stem}  —  {workload}" if workload else p.stem)
            it.setToolTip(plain_tip(f"{shows}\n{p}" if shows else str(p)))
            it.setData(Qt.UserRole, str(p))
            self.sample_list.addItem(it)
        self.samples_note.setText(
            "" if paths else "No bundled samples found (run 'popvision-lite make-samples' in a checkout, "
            f"or set {SAMPLES_ENV} to a folder of .pvl files)."
        )
