"""Compare mode: a window showing two runs A and B side by side (pages in gui/views/compare/).

* ``CompareWindow(doc_a, doc_b)`` builds the :class:`~popvision_lite.analysis.compare.Comparison`
  and one tab per page (Summary, Memory, Liveness, Execution, Roofline, Steps, Operations);
* ``open_compare(main_window, path_a, path_b)`` opens both files off the GUI thread, adds them to
  the main window as documents and shows the compare window (``popvision-lite --compare A B``);
* ``compare_documents(main_window, doc_a, doc_b)`` for two already open documents.

File > Compare with… of the main window is ``gui/actions/compare.py``.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QKeySequence
from PySide6.QtWidgets import QMainWindow, QTabWidget, QVBoxLayout, QWidget

from popvision_lite.analysis.compare import compare
from popvision_lite.analysis.summary import summarize
from popvision_lite.gui.export import ReportExporter
from popvision_lite.gui.export import dialogs as export_actions
from popvision_lite.gui.state.document import Document
from popvision_lite.gui.state.loading import load_document_data
from popvision_lite.gui.text import plain_label, show_error
from popvision_lite.gui.views import compare as V

PAGES = (
    ("summary", "Summary", V.CompareSummaryPage),
    ("memory", "Memory", V.CompareMemoryPage),
    ("liveness", "Liveness", V.CompareLivenessPage),
    ("execution", "Execution", V.CompareTimelinePage),
    ("roofline", "Roofline", V.CompareRooflinePage),
    ("steps", "Steps", V.CompareStepsPage),
    ("ops", "Operations", V.CompareOpsPage),
)

_OPEN: list[CompareWindow] = []  # keep compare windows alive while shown


class CompareWindow(QMainWindow):
    def __init__(self, doc_a, doc_b, parent=None):
        super().__init__(parent)
        self.doc_a, self.doc_b = doc_a, doc_b
        self.comparison = doc_a.cached(compare_key(doc_b.path), compare_of, doc_a, doc_b)
        self.setWindowTitle(f"Compare: A = {doc_a.title}  vs  B = {doc_b.title} — popvision-lite")
        self.resize(1500, 950)
        self.tabs = QTabWidget()
        self.tabs.setDocumentMode(True)
        self.pages: dict[str, object] = {}  # built on first show (each page computes its own tables)
        self._holders = []
        for _key, title, _cls in PAGES:
            holder = QWidget()
            QVBoxLayout(holder).setContentsMargins(0, 0, 0, 0)
            self._holders.append(holder)
            self.tabs.addTab(holder, title)
        self.tabs.currentChanged.connect(self._ensure)
        self._ensure(0)
        self.setCentralWidget(self.tabs)
        self.statusBar().showMessage("delta = B − A, ratio = B / A; hover a map or plot for both runs' values")
        for d in (doc_a, doc_b):
            d.closing.connect(self.close)
        self._build_menu()

    def _build_menu(self) -> None:
        """File (exports, close) and View (Ctrl+1..N for the pages, Ctrl+PgUp / PgDown), as in the main window."""
        def add(menu, text, slot, keys=None):
            a = menu.addAction(text, slot)
            if keys:
                a.setShortcut(QKeySequence(keys))
                a.setShortcutContext(Qt.WindowShortcut)
                self.addAction(a)  # works with the menu bar hidden too
            return a

        m = self.menuBar().addMenu("&File")
        # bound methods, not lambdas holding self: the actions (owned by this window) would keep it alive
        add(m, "Export plot…", self._export_plot, "Ctrl+E")
        add(m, "Export table…", self._export_table, "Ctrl+Shift+E")
        add(m, "Export report…", self.export_report, "Ctrl+Alt+E")
        m.addSeparator()
        add(m, "Close", self.close, "Ctrl+W")
        v = self.menuBar().addMenu("&View")
        self.page_actions = []
        for i, (_key, title, _cls) in enumerate(PAGES[:9]):
            a = add(v, f"Show {title}", self._show_page_of_action, f"Ctrl+{i + 1}")
            a.setData(i)
            self.page_actions.append(a)
        v.addSeparator()
        add(v, "&Next page", self._next_page, "Ctrl+PgDown")
        add(v, "&Previous page", self._previous_page, "Ctrl+PgUp")

    def _show_page_of_action(self) -> None:
        action = self.sender()
        if action is not None:
            self.tabs.setCurrentIndex(int(action.data()))

    def _next_page(self) -> None:
        self.tabs.setCurrentIndex((self.tabs.currentIndex() + 1) % self.tabs.count())

    def _previous_page(self) -> None:
        self.tabs.setCurrentIndex((self.tabs.currentIndex() - 1) % self.tabs.count())

    def _export_plot(self) -> None:
        export_actions.export_plot_dialog(self, self.current_page())

    def _export_table(self) -> None:
        export_actions.export_table_dialog(self, self.current_page())

    def _ensure(self, index: int):
        if not 0 <= index < len(PAGES):
            return None
        key, title, cls = PAGES[index]
        if key not in self.pages:
            try:
                page = cls(self.comparison)
            except Exception as exc:  # one broken page must not take the window down
                page = plain_label(f"The {title} comparison failed to build: {type(exc).__name__}: {exc}")
            self._holders[index].layout().addWidget(page)
            page.show()
            self.pages[key] = page
        return self.pages[key]

    def page(self, key: str):
        """The page ``key`` (built now if needed)."""
        keys = [k for k, _, _ in PAGES]
        return self._ensure(keys.index(key)) if key in keys else None

    def current_page(self):
        return self._ensure(self.tabs.currentIndex())

    def show_page(self, key: str):
        keys = [k for k, _, _ in PAGES]
        if key not in keys:
            return None
        self.tabs.setCurrentIndex(keys.index(key))
        return self._ensure(keys.index(key))

    def keys(self) -> list[str]:
        return [k for k, _, _ in PAGES]

    show_view = show_page  # what ReportExporter calls

    def report_markdown(self) -> str:
        return self.comparison.markdown()

    def export_report(self, folder=None, width: int | None = None):
        """Every page's plots (PNG, ``width`` pixels wide: the report's default unless given) and tables (CSV) +
        the comparison as summary.md / index.html."""
        from PySide6.QtWidgets import QFileDialog

        if folder is None:
            folder = QFileDialog.getExistingDirectory(self, "Export comparison report into folder")
            if not folder:
                return None
        rep = ReportExporter(self, folder, parent=self, **({} if width is None else {"width": width}))
        rep.progress.connect(lambda f, m: self.statusBar().showMessage(f"Exporting {m}… {int(f * 100)}%"))
        rep.finished.connect(lambda man: self.statusBar().showMessage(
            f"Report written to {man['folder']} ({len(man['images'])} images)", 8000))
        rep.failed.connect(lambda e: show_error(self, "Export report", str(e)))
        self._report = rep
        rep.start()
        return rep

    def closeEvent(self, event) -> None:
        if self in _OPEN:
            _OPEN.remove(self)
        owner = getattr(self, "_owner", None)  # the main window's list must not keep a closed window alive
        if owner is not None and self in getattr(owner, "compare_windows", []):
            owner.compare_windows = [w for w in owner.compare_windows if w is not self]
        super().closeEvent(event)


def compare_documents(main_window, doc_a, doc_b) -> CompareWindow:
    win = CompareWindow(doc_a, doc_b)
    _OPEN.append(win)
    win.show()
    if main_window is not None:
        main_window.compare_windows = getattr(main_window, "compare_windows", []) + [win]
        win._owner = main_window
    return win


def compare_of(doc_a, doc_b):
    """The comparison of two open documents over their own summaries (their Summary views', or the analysis
    store's for their files), which ``compare`` would otherwise compute again from the tables."""
    return compare(doc_a.profile, doc_b.profile, doc_a.title, doc_b.title,
                   summary_a=doc_a.cached("summary", summarize, doc_a.profile),
                   summary_b=doc_b.cached("summary", summarize, doc_b.profile))


def compare_key(doc_b_path) -> tuple:
    return ("compare", str(doc_b_path))


def _load_two(task, path_a: str, path_b: str):
    """Worker: open both profiles and compute the comparison (the window then only draws)."""
    ra = load_document_data(task, path_a)
    try:
        task.check_cancelled()
        rb = load_document_data(task, path_b)
        try:
            task.progress(0.9, "comparing")
            # the summaries the loader made (or found) for the documents' first view
            cmp = compare(ra[0], rb[0], Path(path_a).name, Path(path_b).name,
                          summary_a=ra[1]["summary"], summary_b=rb[1]["summary"])
        except BaseException:
            rb[0].close()
            raise
    except BaseException:
        ra[0].close()
        raise
    return ra, rb, cmp


def open_compare(main_window, path_a, path_b, on_open=None):
    """Open ``path_a`` and ``path_b`` off the GUI thread, then show them in compare mode."""
    path_a, path_b = str(path_a), str(path_b)

    def loaded(res):
        (pa, ca), (pb, cb), cmp = res
        docs = []
        for (prof, cache), p in (((pa, ca), path_a), ((pb, cb), path_b)):
            d = Document(prof, p)
            for k, v in cache.items():
                d.put_cached(k, v)
            main_window.add_document(d)
            docs.append(d)
        docs[0].put_cached(compare_key(docs[1].path), cmp)
        win = compare_documents(main_window, docs[0], docs[1])
        if on_open:
            on_open(win)

    def failed(exc):
        main_window._load_failed(f"{Path(path_a).name} / {Path(path_b).name}", exc)

    return main_window.run_task(_load_two, path_a, path_b, title=f"Comparing {Path(path_a).name} and "
                                f"{Path(path_b).name}", on_result=loaded, on_error=failed)
