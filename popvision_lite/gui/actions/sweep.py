"""Opening a sweep's results (``sweep.csv`` or its folder) as a tab of the main window: the table and its
plots (``gui/views/sweep_view.py``), whose picked profiles open as documents or in compare mode."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from popvision_lite.gui.compare_window import open_compare
from popvision_lite.gui.views.sweep_view import SweepView
from popvision_lite.sweep.results import read_results


def _load(task, path: str):
    task.progress(0.1, f"reading {Path(path).name}")
    return read_results(path)


def add_sweep_tab(mw, df: pd.DataFrame, path: str) -> SweepView:
    view = SweepView(df, path)
    view.open_requested.connect(lambda p, title: mw.open_paths([p], titles={p: title}))
    view.compare_requested.connect(lambda a, b: open_compare(mw, a, b))
    idx = mw.doc_tabs.addTab(view, view.document.title)
    mw.doc_tabs.setTabToolTip(idx, str(path))
    mw.doc_tabs.setCurrentIndex(idx)
    mw.stack.setCurrentWidget(mw.doc_tabs)
    mw._add_recent(str(path))
    mw.statusBar().showMessage(f"Opened sweep {path}", 5000)
    return view


def open_sweep_tab(mw, path):
    """Read the sweep results off the GUI thread, then show them in a new tab."""
    path = str(path)
    return mw.run_task(_load, path, title=f"Opening sweep {Path(path).name}",
                       on_result=lambda df: add_sweep_tab(mw, df, path),
                       on_error=lambda exc: mw._load_failed(path, exc))
