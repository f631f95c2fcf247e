"""A whole-profile report: every view as PNG, its tables as CSV, ``summary.md`` and ``index.html`` in one
folder (:class:`ReportExporter`, on the GUI thread in one small slice per item, with progress and cancel)."""

from __future__ import annotations

import html
from pathlib import Path

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtWidgets import QApplication

from popvision_lite.analysis.summary import summary_markdown
from popvision_lite.atomic_io import write_bytes_atomic
from popvision_lite.errors import ProfileError
from popvision_lite.gui.export.plots import export_png, items_exportable, view_plot_items
from popvision_lite.gui.export.tables import export_table, slug, view_tables


def _index_html(title: str, markdown: str, images: list[tuple[str, str]], csvs: list[str]) -> str:
    body = [f"<h1>{html.escape(title)}</h1>", f"<pre>{html.escape(markdown)}</pre>"]
    for caption, name in images:
        body.append(f"<figure><img src='{html.escape(name)}' style='max-width:100%'>"
                    f"<figcaption>{html.escape(caption)}</figcaption></figure>")
    if csvs:
        body.append("<h2>Tables (CSV)</h2><ul>" + "".join(
            f"<li><a href='{html.escape(c)}'>{html.escape(c)}</a></li>" for c in csvs) + "</ul>")
    return ("<!DOCTYPE html><html><head><meta charset='utf-8'><title>" + html.escape(title)
            + "</title></head><body>" + "\n".join(body) + "</body></html>\n")


class ReportExporter(QObject):
    """Export every view of ``doc_widget`` into ``folder``: a main-window DocumentWidget, or anything with
    ``keys()``, ``show_view(key)`` and ``report_markdown()`` (the compare window).

    ``start()`` runs it in slices on the event loop; ``run()`` runs it to the end (tests, CLI).
    Signals: progress(fraction, message), finished(dict manifest), failed(exception), cancelled().
    """

    progress = Signal(float, str)
    finished = Signal(object)
    failed = Signal(object)
    cancelled = Signal()

    def __init__(self, doc_widget, folder, width: int = 1200, dpi: float = 96.0, parent=None):
        super().__init__(parent)
        self.doc_widget = doc_widget
        self.folder = Path(folder)
        self.width, self.dpi = width, dpi
        self._cancel = False
        self._jobs: list = []
        self.manifest = {"folder": str(self.folder), "images": [], "csv": [], "errors": []}
        self._images: list[tuple[str, str]] = []

    def cancel(self) -> None:
        self._cancel = True

    def _plan(self) -> None:
        if self.folder.exists() and not self.folder.is_dir():
            raise ProfileError(self.folder, "exists and is not a folder")
        self.folder.mkdir(parents=True, exist_ok=True)
        keys = self.doc_widget.keys()
        self._jobs = [("view", k) for k in keys] + [("summary", None)]

    def _do(self, job) -> None:
        kind, key = job
        if kind == "summary":
            dw = self.doc_widget
            if hasattr(dw, "report_markdown"):  # e.g. the compare window
                md, title = dw.report_markdown(), dw.windowTitle()
            else:
                md, title = summary_markdown(dw.document.profile), f"popvision-lite report: {dw.document.title}"
            write_bytes_atomic(self.folder / "summary.md", md.encode("utf-8"))
            page = _index_html(title, md, self._images, self.manifest["csv"])
            write_bytes_atomic(self.folder / "index.html", page.encode("utf-8"))
            self.manifest["summary"] = str(self.folder / "summary.md")
            self.manifest["index"] = str(self.folder / "index.html")
            return
        view = self.doc_widget.show_view(key)
        QApplication.processEvents()
        for name, item in items_exportable(view_plot_items(view)).items():
            fname = f"{key}_{slug(name)}.png"
            try:
                export_png(item, self.folder / fname, width=self.width, dpi=self.dpi)
            except Exception as e:  # one bad plot must not lose the rest of the report
                self.manifest["errors"].append(f"{key}/{name}: {e}")
                continue
            self._images.append((f"{key}: {name}", fname))
            self.manifest["images"].append(str(self.folder / fname))
        for name, df in view_tables(view).items():
            fname = f"{key}_{name}.csv"
            export_table(df, self.folder / fname)
            self.manifest["csv"].append(fname)

    def run(self) -> dict:
        self._plan()
        n = len(self._jobs)
        for i, job in enumerate(self._jobs):
            if self._cancel:
                raise RuntimeError("cancelled")
            self.progress.emit(i / n, f"{job[1] or 'summary'}")
            self._do(job)
        self.progress.emit(1.0, "done")
        return self.manifest

    def start(self) -> None:
        try:
            self._plan()
        except Exception as e:
            self.failed.emit(e)
            return
        self._n = len(self._jobs)
        QTimer.singleShot(0, self._step)

    def _step(self) -> None:
        if self._cancel:
            self.cancelled.emit()
            return
        if not self._jobs:
            self.progress.emit(1.0, "done")
            self.finished.emit(self.manifest)
            return
        job = self._jobs.pop(0)
        self.progress.emit((self._n - len(self._jobs) - 1) / self._n, f"exporting {job[1] or 'summary'}")
        try:
            self._do(job)
        except Exception as e:
            self.failed.emit(e)
            return
        QTimer.singleShot(0, self._step)


