"""The main window: a start page, then one tab per open profile with its views inside.

Extension points for other parts of the app:

* ``MainWindow.menus`` -> {"file", "view", "run", "help"} QMenus to add actions to;
* ``MainWindow.current_document()`` / ``documents()``;
* ``MainWindow.document_opened(Document)`` signal;
* ``MainWindow.open_paths(paths)`` opens files off the GUI thread;
* ``MainWindow.run_task(fn, *args, title=..., on_result=...)`` runs any long job with the
  status-bar progress bar and Cancel button (see ``gui/workers.py``);
* ``DocumentWidget.view(key)`` returns (building it if needed) one view of a document.
"""

from __future__ import annotations

import html
import importlib.util
import logging
import sys
import time
import weakref
from pathlib import Path

from PySide6.QtCore import QSettings, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (
    QFileDialog,
    QMainWindow,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QStackedWidget,
    QTabWidget,
)

from popvision_lite import __version__
from popvision_lite.emulator.progress import eta_text
from popvision_lite.errors import PopvisionError
from popvision_lite.gui import theme
from popvision_lite.gui.document_widget import DocumentWidget
from popvision_lite.gui.start_page import StartPage, bundled_samples
from popvision_lite.gui.state.document import Document
from popvision_lite.gui.state.loading import load_document_data, warm_up
from popvision_lite.gui.text import plain_label, plain_tip, show_error, show_info
from popvision_lite.gui.views import VIEW_REGISTRY
from popvision_lite.gui.workers import Worker, start_task

log = logging.getLogger(__name__)

PROFILE_FILTER = "popvision-lite profiles (*.pvl);;Sweep results (sweep.csv *.csv);;All files (*)"
# Modules that add menus/actions to the window: each has ``install(main_window)``; a missing module
# is skipped and one that fails is reported on stderr without taking the window down.
EXTENSIONS: tuple[str, ...] = ("popvision_lite.gui.actions.compare", "popvision_lite.gui.actions.export",
                               "popvision_lite.gui.actions.run", "popvision_lite.gui.actions.fit")
MAX_RECENT = 10


_GUARD: dict = {"window": None}


def install_slot_guard(window) -> None:
    """A PopvisionError (a ProfileError from a table a view reads late, a click on a damaged row) raised
    in any Qt slot is shown in the same plain-text error dialog as a file that fails to open, instead of
    a traceback on stderr and nothing on screen.  Any other exception is a bug: it goes on to the hook
    that was there before (the traceback is printed; pytest-qt fails the test)."""
    import weakref

    _GUARD["window"] = weakref.ref(window)
    if getattr(sys.excepthook, "pvl_slot_guard", False):
        return
    previous = sys.excepthook

    def hook(etype, value, tb):
        ref = _GUARD["window"]
        win = ref() if ref is not None else None
        if isinstance(value, PopvisionError) and win is not None:
            try:
                win.statusBar().showMessage(f"Error: {str(value)[:200]}", 8000)
                # after the slot has unwound: a modal dialog inside the failing handler re-enters it
                QTimer.singleShot(0, lambda w=win, m=str(value): show_error(w, "Problem in the profile", m))
                return
            except RuntimeError:  # the window is being deleted
                pass
        previous(etype, value, tb)

    hook.pvl_slot_guard = True
    sys.excepthook = hook


class MainWindow(QMainWindow):
    document_opened = Signal(object)

    def __init__(self, settings: QSettings | None = None, parent=None):
        super().__init__(parent)
        self.settings = settings or QSettings("popvision-lite", "popvision-lite")
        self.setWindowTitle("popvision-lite")
        self.setAcceptDrops(True)
        self.resize(1400, 900)

        self.start_page = StartPage()
        self.start_page.open_requested.connect(lambda p: self.open_paths([p]))
        self.start_page.browse_requested.connect(self.open_dialog)
        self.start_page.restore_requested.connect(self.restore_session)
        self.doc_tabs = QTabWidget()
        self.doc_tabs.setTabsClosable(True)
        self.doc_tabs.setMovable(True)
        self.doc_tabs.tabCloseRequested.connect(self.close_tab)
        self.doc_tabs.currentChanged.connect(self._update_title)
        self.stack = QStackedWidget()
        self.stack.addWidget(self.start_page)
        self.stack.addWidget(self.doc_tabs)
        self.setCentralWidget(self.stack)

        self._tasks: list[Worker] = []
        self._build_status_bar()
        self._build_menus()
        self._install_extensions()
        self._refresh_recent()
        self._warm = start_task(warm_up, title="warm-up")  # silent: no progress bar, errors ignored
        install_slot_guard(self)
        geom = self.settings.value("window/geometry")
        if geom is not None:
            self.restoreGeometry(geom)

    # ----------------------------------------------------------------- building
    def _build_status_bar(self) -> None:
        sb = self.statusBar()
        self.status_label = plain_label("")
        self.progress = QProgressBar()
        self.progress.setMaximumWidth(220)
        self.progress.setRange(0, 1000)
        self.progress.setToolTip("Progress of the running job")
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setToolTip("Cancel the running job (Esc)")
        self.cancel_button.clicked.connect(self.cancel_tasks)
        sb.addPermanentWidget(self.status_label)
        sb.addPermanentWidget(self.progress)
        sb.addPermanentWidget(self.cancel_button)
        self.progress.hide()
        self.cancel_button.hide()
        sb.showMessage("Open a profile with Ctrl+O, or drop .pvl files here", 5000)

    def _action(self, menu, text, slot, shortcut=None, tip="", checkable=False) -> QAction:
        act = QAction(text, self)
        if shortcut:
            act.setShortcut(QKeySequence(shortcut))
            act.setShortcutContext(Qt.ApplicationShortcut)
        shown = f"{tip or text.replace('&', '').rstrip('…')}"
        if shortcut:
            shown += f" ({QKeySequence(shortcut).toString(QKeySequence.NativeText)})"
        act.setToolTip(shown)
        act.setStatusTip(shown)
        act.setCheckable(checkable)
        act.triggered.connect(slot)
        menu.addAction(act)
        self.addAction(act)  # shortcuts work even when the menu bar is hidden
        return act

    def _build_menus(self) -> None:
        mb = self.menuBar()
        self.menus = {name: mb.addMenu(title) for name, title in
                      (("file", "&File"), ("view", "&View"), ("run", "&Run"), ("help", "&Help"))}
        f = self.menus["file"]
        self.act_open = self._action(f, "&Open…", self.open_dialog, QKeySequence.Open, "Open a .pvl profile")
        self.act_sample = self._action(f, "Open &sample", self.open_sample, "Ctrl+Shift+O",
                                       "Open the first bundled sample profile")
        self.recent_menu = f.addMenu("Open &recent")
        self.recent_menu.setToolTipsVisible(True)
        f.addSeparator()
        self.act_close = self._action(f, "&Close tab", self.close_current, QKeySequence.Close,
                                      "Close the current profile")
        self.act_start = self._action(f, "Start &page", self.show_start_page, "Ctrl+Shift+H",
                                      "Show the start page (recent files, samples)")
        f.addSeparator()
        self.act_quit = self._action(f, "&Quit", self.close, QKeySequence.Quit, "Quit popvision-lite")
        # Ctrl+W / Ctrl+Q on every platform (the standard keys differ on some desktops)
        if QKeySequence(QKeySequence.Close) != QKeySequence("Ctrl+W"):
            self.act_close.setShortcuts([QKeySequence(QKeySequence.Close), QKeySequence("Ctrl+W")])
        self.act_quit.setShortcuts([QKeySequence("Ctrl+Q")])

        v = self.menus["view"]
        self.act_dark = self._action(v, "&Dark theme", self.toggle_theme, "Ctrl+Shift+D",
                                     "Switch between light and dark themes", checkable=True)
        v.addSeparator()
        self._action(v, "&Next view", lambda: self._step_view(1), "Ctrl+PgDown", "Next view of this profile")
        self._action(v, "&Previous view", lambda: self._step_view(-1), "Ctrl+PgUp",
                     "Previous view of this profile")
        self._action(v, "Next &profile", lambda: self._step_doc(1), "Ctrl+Tab", "Next open profile")
        self._action(v, "Previous p&rofile", lambda: self._step_doc(-1), "Ctrl+Shift+Tab",
                     "Previous open profile")
        self.view_actions = []
        for i, (key, title, _) in enumerate(VIEW_REGISTRY[:9]):
            a = self._action(v, f"Show {title}", lambda _=False, k=key: self.show_view(k), f"Ctrl+{i + 1}",
                             f"Show the {title} view")
            self.view_actions.append(a)
        self.act_cancel = self._action(self.menus["run"], "&Cancel running job", self.cancel_tasks, "Esc",
                                       "Cancel loading or any running job")
        self.act_cancel.setEnabled(False)  # enabled only while a job runs, so Esc is free otherwise
        h = self.menus["help"]
        self._action(h, "&Keyboard shortcuts", self.show_shortcuts, "F1", "List every keyboard shortcut")
        self._action(h, "&About", self.show_about, None, "About popvision-lite")

    def _install_extensions(self) -> None:
        self.extensions: dict[str, object] = {}
        for name in EXTENSIONS:
            try:
                if importlib.util.find_spec(name) is None:
                    continue
                mod = importlib.import_module(name)
                mod.install(self)
                self.extensions[name] = mod
            except Exception:  # a broken extension must not stop the app from starting
                log.exception("could not install the extension %s", name)

    # ----------------------------------------------------------------- documents
    def documents(self) -> list[Document]:
        return [w.document for w in self.document_widgets()]

    def document_widgets(self) -> list[DocumentWidget]:
        return [w for i in range(self.doc_tabs.count()) if isinstance(w := self.doc_tabs.widget(i), DocumentWidget)]

    def current_document_widget(self) -> DocumentWidget | None:
        w = self.doc_tabs.currentWidget()
        return w if isinstance(w, DocumentWidget) else None

    def current_document(self) -> Document | None:
        w = self.current_document_widget()
        return w.document if w else None

    def add_document(self, document: Document) -> DocumentWidget:
        w = DocumentWidget(document)
        idx = self.doc_tabs.addTab(w, document.title)
        self.doc_tabs.setTabToolTip(idx, str(document.path))
        self.doc_tabs.setCurrentIndex(idx)
        self.stack.setCurrentWidget(self.doc_tabs)
        self._add_recent(str(document.path))
        self._update_title()
        self.document_opened.emit(document)
        return w

    def close_tab(self, index: int) -> None:
        w = self.doc_tabs.widget(index)
        if w is None:
            return
        self.doc_tabs.removeTab(index)
        w.document.close()
        w.deleteLater()
        if self.doc_tabs.count() == 0:
            self.show_start_page()
        self._update_title()

    def close_current(self) -> None:
        if self.stack.currentWidget() is self.doc_tabs and self.doc_tabs.count():
            self.close_tab(self.doc_tabs.currentIndex())

    def show_start_page(self) -> None:
        self._refresh_recent()
        self.stack.setCurrentWidget(self.start_page)
        self._update_title()

    def show_view(self, key: str) -> None:
        w = self.current_document_widget()
        if w is not None and self.stack.currentWidget() is self.doc_tabs:
            w.show_view(key)

    def _step_view(self, delta: int) -> None:
        w = self.current_document_widget()
        if w is not None and w.tabs.count():
            w.tabs.setCurrentIndex((w.tabs.currentIndex() + delta) % w.tabs.count())

    def _step_doc(self, delta: int) -> None:
        n = self.doc_tabs.count()
        if n:
            self.stack.setCurrentWidget(self.doc_tabs)
            self.doc_tabs.setCurrentIndex((self.doc_tabs.currentIndex() + delta) % n)

    def _update_title(self, *_):
        doc = self.current_document() if self.stack.currentWidget() is self.doc_tabs else None
        self.setWindowTitle(f"{doc.title} — popvision-lite" if doc else "popvision-lite")

    # ----------------------------------------------------------------- opening
    def open_dialog(self) -> None:
        start = self.settings.value("last_dir", str(Path.home()))
        paths, _ = QFileDialog.getOpenFileNames(self, "Open profile", str(start), PROFILE_FILTER)
        if paths:
            self.open_paths(paths)

    def open_sample(self) -> bool:
        samples = bundled_samples()
        if not samples:
            show_info(self, "No samples",
                                    "No bundled sample profiles were found in this installation.")
            return False
        self.open_paths([str(samples[0])])
        return True

    def open_paths(self, paths, titles: dict | None = None) -> list[Worker]:
        """Open each path off the GUI thread; errors show a dialog, the window stays usable.  ``titles``:
        {path: tab title} for tabs named by what they are rather than their file (a sweep point)."""
        workers = []
        for p in paths:
            p = str(p)
            self.settings.setValue("last_dir", str(Path(p).resolve().parent))
            if Path(p).suffix.lower() == ".csv" or Path(p).is_dir():  # a sweep's results table: its own tab
                from popvision_lite.gui.actions.sweep import open_sweep_tab

                workers.append(open_sweep_tab(self, p))
                continue
            if self._show_open(p):  # already open: its tab, not a second one (the session would bring both back)
                continue
            workers.append(self.run_task(
                load_document_data, p, title=f"Opening {Path(p).name}",
                on_result=lambda res, p=p: self._loaded(p, res, (titles or {}).get(p)),
                on_error=lambda exc, p=p: self._load_failed(p, exc),
            ))
        return workers

    def _open_widget(self, path: str) -> DocumentWidget | None:
        """The tab of the profile at ``path`` (resolved: the same file by any name), if it is open."""
        want = _resolved(path)
        return next((w for w in self.document_widgets() if _resolved(w.document.path) == want), None)

    def _show_open(self, path: str) -> bool:
        """Bring the tab of ``path`` to the front if it is open; whether it was."""
        w = self._open_widget(path)
        if w is None:
            return False
        self.doc_tabs.setCurrentWidget(w)
        self.stack.setCurrentWidget(self.doc_tabs)
        self.statusBar().showMessage(f"{Path(path).name} is already open", 5000)
        return True

    def _loaded(self, path: str, result, title: str | None = None) -> None:
        profile, cache = result
        if self._open_widget(path) is not None:  # opened twice before the first load finished
            profile.close()
            self._show_open(path)
            return
        doc = Document(profile, path, title=title)
        for k, v in cache.items():
            doc.put_cached(k, v)
        self.add_document(doc)
        self.statusBar().showMessage(f"Opened {path}", 5000)

    def _load_failed(self, path: str, exc: BaseException) -> None:
        if isinstance(exc, PopvisionError):
            msg = str(exc)
        elif isinstance(exc, OSError):
            msg = f"{path}: {exc.strerror or exc}"
        else:
            log.error("unexpected error opening %s:\n%s", path, getattr(exc, "__traceback_text__", ""))
            msg = f"{path}: unexpected {type(exc).__name__}: {exc}\n(This is a bug in popvision-lite.)"
        self._forget_recent(path)
        self.statusBar().showMessage(f"Could not open {Path(path).name}", 8000)
        show_error(self, "Cannot open profile", msg)

    # ----------------------------------------------------------------- background jobs
    def run_task(self, fn, *args, title: str = "", on_result=None, on_error=None, on_cancel=None,
                 **kwargs) -> Worker:
        """Run ``fn(task, *args, **kwargs)`` on the pool with the status-bar progress and Cancel."""
        w = start_task(fn, *args, title=title, **kwargs)
        w.started_at = time.perf_counter()  # for the ETA of its progress (emulator/progress.eta_text)
        self._tasks.append(w)
        ref = weakref.ref(w)  # not the worker itself: its own signals would keep it alive (workers.start_task)
        w.signals.progress.connect(lambda f, m: self._on_progress(ref(), f, m))
        if on_result:
            w.signals.result.connect(on_result)
        w.signals.error.connect(on_error or (lambda exc, t=title: self._task_failed(t, exc)))
        w.signals.cancelled.connect(lambda t=title: self.statusBar().showMessage(f"Cancelled: {t}", 5000))
        if on_cancel:
            w.signals.cancelled.connect(on_cancel)
        w.signals.finished.connect(lambda: self._task_done(ref()))
        self._show_progress(title, -1)
        return w

    def _task_failed(self, title: str, exc: BaseException) -> None:
        if not isinstance(exc, PopvisionError):
            log.error("%s failed:\n%s", title or "a task", getattr(exc, "__traceback_text__", ""))
        show_error(self, title or "Error", str(exc))

    def _show_progress(self, title: str, fraction: float) -> None:
        self.status_label.setText(title)
        if fraction < 0:
            self.progress.setRange(0, 0)  # busy indicator
        else:
            self.progress.setRange(0, 1000)
            self.progress.setValue(int(fraction * 1000))
        self.progress.show()
        self.cancel_button.show()
        self.act_cancel.setEnabled(True)

    def _on_progress(self, w: Worker, fraction: float, message: str) -> None:
        if self._tasks and self._tasks[-1] is w:
            text = f"{w.title}: {message}" if message else w.title
            eta = eta_text(time.perf_counter() - getattr(w, "started_at", time.perf_counter()), fraction)
            self._show_progress(f"{text} ({eta})" if eta else text, fraction)

    def _task_done(self, w: Worker) -> None:
        if w in self._tasks:
            self._tasks.remove(w)
        if self._tasks:
            self._show_progress(self._tasks[-1].title, -1)
        else:
            self.progress.hide()
            self.cancel_button.hide()
            self.act_cancel.setEnabled(False)
            self.status_label.setText("")

    def cancel_tasks(self) -> None:
        for w in list(self._tasks):
            w.cancel()

    def busy(self) -> bool:
        return bool(self._tasks)

    # ----------------------------------------------------------------- recent files / settings
    def recent_files(self) -> list[str]:
        v = self.settings.value("recent_files", [])
        if isinstance(v, str):
            v = [v]
        return [str(x) for x in (v or [])]

    def _add_recent(self, path: str) -> None:
        path = str(Path(path).resolve())
        rec = [path] + [p for p in self.recent_files() if p != path]
        self.settings.setValue("recent_files", rec[:MAX_RECENT])
        self._refresh_recent()

    def _forget_recent(self, path: str) -> None:
        path = str(Path(path).resolve())
        rec = self.recent_files()
        if path in rec:
            self.settings.setValue("recent_files", [p for p in rec if p != path])
            self._refresh_recent()

    def _refresh_recent(self) -> None:
        rec = self.recent_files()
        self.start_page.set_recent(rec)
        self.recent_menu.clear()
        for i, p in enumerate(rec):
            a = self.recent_menu.addAction(f"&{i + 1 if i < 9 else 0} {Path(p).name}")
            a.setToolTip(plain_tip(p))
            a.triggered.connect(lambda _=False, p=p: self.open_paths([p]))
        self.recent_menu.setEnabled(bool(rec))

    def toggle_theme(self) -> None:
        name = "dark" if theme.current() == "light" else "light"
        theme.apply_theme(name)
        self.act_dark.setChecked(name == "dark")
        self.settings.setValue("theme", name)

    # ----------------------------------------------------------------- session (open tabs across restarts)
    def save_session(self) -> None:
        """Remember the open profiles and the current one (``restore_session`` reopens them)."""
        paths = list(dict.fromkeys(_resolved(d.path) for d in self.documents()))  # each file once, in tab order
        cur = self.current_document()
        self.settings.setValue("session/open_files", paths)
        self.settings.setValue("session/current", str(Path(cur.path).resolve()) if cur else "")

    def session_files(self) -> list[str]:
        """The profiles open when the app last closed that still exist."""
        paths = self.settings.value("session/open_files", []) or []
        if isinstance(paths, str):
            paths = [paths]
        return list(dict.fromkeys(str(p) for p in paths if Path(str(p)).is_file()))  # a file once (older sessions
        #                                                                                 saved duplicate tabs)

    def offer_session(self) -> None:
        """The start page offers to reopen the last session (started with no file: the start page first)."""
        self.start_page.set_session(self.session_files())

    def restore_session(self) -> list[Worker]:
        """Reopen the profiles open when the app last closed (those that still exist), the last current one
        in front.  Returns the loaders (none when there was nothing to reopen)."""
        paths = self.session_files()
        if not paths:
            return []
        current = str(self.settings.value("session/current", "") or "")
        want = {p: i for i, p in enumerate(paths)}

        def arrange(_doc):
            # loaders finish in any order: put the tabs back in their saved order, the current one in front
            tabs = [(want.get(str(Path(w.document.path).resolve()), len(want)), w) for w in self.document_widgets()]
            for target, (_, w) in enumerate(sorted(tabs, key=lambda t: t[0])):
                self.doc_tabs.tabBar().moveTab(self.doc_tabs.indexOf(w), target)
            for w in self.document_widgets():
                if str(Path(w.document.path).resolve()) == current:
                    self.doc_tabs.setCurrentWidget(w)
            if len(tabs) >= len(paths):
                self.document_opened.disconnect(arrange)

        self.document_opened.connect(arrange)
        return self.open_paths(paths)

    def closeEvent(self, event) -> None:
        self.settings.setValue("window/geometry", self.saveGeometry())
        self.save_session()
        self.cancel_tasks()
        for i in reversed(range(self.doc_tabs.count())):
            self.close_tab(i)
        super().closeEvent(event)

    # ----------------------------------------------------------------- drag and drop
    @staticmethod
    def _dropped_profiles(mime) -> list[str]:
        if not mime.hasUrls():
            return []
        return [u.toLocalFile() for u in mime.urls() if u.isLocalFile() and u.toLocalFile().endswith(".pvl")]

    def dragEnterEvent(self, event) -> None:
        if self._dropped_profiles(event.mimeData()):
            event.acceptProposedAction()
        else:
            event.ignore()

    def dropEvent(self, event) -> None:
        paths = self._dropped_profiles(event.mimeData())
        if paths:
            event.acceptProposedAction()
            QTimer.singleShot(0, lambda: self.open_paths(paths))

    # ----------------------------------------------------------------- help
    def shortcut_table(self) -> list[tuple[str, str]]:
        rows = []
        for a in self.actions():
            keys = ", ".join(s.toString(QKeySequence.NativeText) for s in a.shortcuts())
            if keys:
                rows.append((a.text().replace("&", ""), keys))
        return rows

    def shortcuts_html(self) -> str:
        """Every shortcut of the window, then the Execution view's trace-viewer keys (Perfetto's conventions)."""
        from popvision_lite.gui.views.execution.navigation import HELP_TEXT

        rows = "".join(f"<tr><td>{html.escape(t)}</td><td><b>{html.escape(k)}</b></td></tr>"
                       for t, k in self.shortcut_table())
        return (f"<table cellpadding=3>{rows}</table><hr>{HELP_TEXT}"
                "<p>Other views list their keys in their tooltips.</p>")

    def show_shortcuts(self) -> None:
        QMessageBox.information(self, "Keyboard shortcuts", self.shortcuts_html())

    def show_about(self) -> None:
        QMessageBox.about(self, "About popvision-lite",
                          f"<b>popvision-lite {__version__}</b><p>A profiler for tile-based AI processors "
                          "(Graphcore IPU), with its own tile-level emulator.</p>")


def _resolved(path) -> str:
    """A profile path as one name for one file (the tab and session key)."""
    try:
        return str(Path(path).resolve())
    except (OSError, RuntimeError):
        return str(path)
