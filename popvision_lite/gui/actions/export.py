"""File > Export > plot…, table…, report…, Chrome trace… entries.

``install(main_window)`` adds them to ``main_window.menus["file"]`` (called once by MainWindow).
Each dialog function is usable on its own (the compare window uses the plot / table ones).
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QLineEdit,
    QProgressDialog,
)

from popvision_lite.errors import PopvisionError
from popvision_lite.gui import export as ex
from popvision_lite.gui.export.dialogs import export_plot_dialog, export_table_dialog, status_message
from popvision_lite.gui.text import plain_label, show_error, show_info
from popvision_lite.profile.chrome_trace import export_chrome_trace
from popvision_lite.ranges import parse_steps, parse_tiles


def _current_view(mw):
    dw = mw.current_document_widget()
    if dw is None:  # a tab that is a view itself (a sweep's results) exports its own plots and tables
        w = mw.doc_tabs.currentWidget() if mw.stack.currentWidget() is mw.doc_tabs else None
        return w if hasattr(w, "plot_items") else None
    return dw.view(dw.keys()[dw.tabs.currentIndex()]) if dw.keys() else None


def export_report_dialog(mw, folder: str | None = None, width: int | None = None):
    """Every view as PNG (``width`` pixels wide: the report's default unless given) + tables as CSV + summary.md +
    index.html into one folder (progress + cancel)."""
    dw = mw.current_document_widget()
    if dw is None:
        show_info(mw, "Export report", "Open a profile first.")
        return None
    if folder is None:
        folder = QFileDialog.getExistingDirectory(mw, "Export report into folder")
        if not folder:
            return None
    rep = ex.ReportExporter(dw, folder, parent=mw, **({} if width is None else {"width": width}))
    dlg = QProgressDialog("Exporting report…", "Cancel", 0, 1000, mw)
    dlg.setWindowTitle("Export report")
    dlg.setMinimumDuration(300)
    dlg.setLabel(plain_label("Exporting report…"))  # progress names tables, which can come from the file
    rep.progress.connect(lambda f, m: (dlg.setValue(int(f * 1000)), dlg.setLabelText(f"Exporting {m}…")))
    dlg.canceled.connect(rep.cancel)
    rep.finished.connect(lambda man: (dlg.reset(), status_message(mw, f"Report written to {man['folder']} "
                                                             f"({len(man['images'])} images)")))
    rep.failed.connect(lambda e: (dlg.reset(), show_error(mw, "Export report", str(e))))
    rep.cancelled.connect(lambda: (dlg.reset(), status_message(mw, "Report export cancelled")))
    mw._report_exporter = rep
    rep.start()
    return rep


class ChromeTraceDialog(QDialog):
    def __init__(self, profile, parent=None):
        super().__init__(parent)
        self.setWindowTitle("Export Chrome trace")
        form = QFormLayout(self)
        n = len(profile.stored_table("steps"))
        self.steps = QLineEdit(f"0:{min(n, 20000)}")
        self.steps.setToolTip(f"Step window START:STOP (STOP exclusive); the profile has {n:,} steps")
        self.tiles = QLineEdit("")
        self.tiles.setPlaceholderText("empty = one lane per IPU; or e.g. 0-15,100")
        form.addRow("Steps:", self.steps)
        form.addRow("Tiles:", self.tiles)
        bb = QDialogButtonBox(QDialogButtonBox.Ok | QDialogButtonBox.Cancel)
        bb.accepted.connect(self.accept)
        bb.rejected.connect(self.reject)
        form.addRow(bb)


def export_chrome_trace_dialog(mw, path: str | None = None, steps: str | None = None, tiles: str | None = None):
    """Ask for a step window, tile subset and file; write the trace on a worker thread with progress."""
    doc = mw.current_document()
    if doc is None:
        show_info(mw, "Export Chrome trace", "Open a profile first.")
        return None
    if steps is None:
        dlg = ChromeTraceDialog(doc.profile, mw)
        if dlg.exec() != QDialog.Accepted:
            return None
        steps, tiles = dlg.steps.text(), dlg.tiles.text()
    try:
        step_range, tile_list = parse_steps(steps), parse_tiles(tiles)
    except PopvisionError as e:
        show_error(mw, "Export Chrome trace", str(e))
        return None
    if path is None:
        path, _ = QFileDialog.getSaveFileName(mw, "Export Chrome trace", f"{Path(doc.title).stem}.json",
                                              "Chrome trace JSON (*.json)")
        if not path:
            return None

    def work(task, profile, out):
        return export_chrome_trace(profile, out, step_range=step_range, tiles=tile_list,
                                   progress=lambda done, total: task.progress(done / max(total, 1), "writing"))

    return mw.run_task(work, doc.profile, path, title=f"Exporting Chrome trace {Path(path).name}",
                       on_result=lambda c: status_message(mw, f"Wrote {path}: {c['events']:,} events"))


def install(mw) -> None:
    from PySide6.QtWidgets import QMenu

    f = mw.menus["file"]
    before = getattr(mw, "act_quit", None)
    exp = QMenu("&Export", f)
    mw.act_export_plot = mw._action(exp, "Export &plot…", lambda: export_plot_dialog(mw, _current_view(mw)),
                                    "Ctrl+E", "Export the current view's plot as PNG or SVG")
    mw.act_export_table = mw._action(exp, "Export &table…", lambda: export_table_dialog(mw, _current_view(mw)),
                                     "Ctrl+Shift+E", "Export a table of the current view as CSV")
    mw.act_export_report = mw._action(exp, "Export &report…", lambda: export_report_dialog(mw), "Ctrl+Alt+E",
                                      "Every view as PNG, tables as CSV and a summary, in one folder")
    mw.act_export_trace = mw._action(exp, "Export &Chrome trace…", lambda: export_chrome_trace_dialog(mw), "Ctrl+Alt+T",
                                     "BSP steps as Chrome Trace JSON for Perfetto / chrome://tracing")
    mw.export_menu = exp
    if before is not None:  # keep Quit last
        f.insertMenu(before, exp)
        f.insertSeparator(before)
    else:
        f.addMenu(exp)
