"""``popvision-lite [profiles...] [--sample] [--compare A B]``: start the desktop app."""

from __future__ import annotations

import logging
import sys

from popvision_lite.gui import gui_thread_gc, theme
from popvision_lite.gui.text import install_plain_text_guards
from popvision_lite.resources_path import resource_dir


def create_app(argv: list[str] | None = None):
    """The QApplication (created once), with the app's identity and pyqtgraph options set."""
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication(argv if argv is not None else sys.argv[:1])
    app.setOrganizationName("popvision-lite")
    app.setApplicationName("popvision-lite")
    icon = resource_dir("icons", "popvision-lite.svg")
    if icon.is_file():
        from PySide6.QtGui import QIcon

        app.setWindowIcon(QIcon(str(icon)))
    theme.init_pyqtgraph()
    install_plain_text_guards()
    gui_thread_gc.install()
    return app


def delete_now() -> None:
    """Carry out the deferred deletes (``deleteLater``) now, and collect the Python cycles pyqtgraph's parentless
    view-box menus sit in.  Only an event loop runs deferred deletes, which a script or a loop of headless exports
    never does: without this, their widgets (and the profile each holds) live until exit."""
    import gc

    from PySide6.QtCore import QCoreApplication, QEvent

    QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
    gc.collect()


def build_window(args, settings=None):
    """Create the main window and start opening what ``args`` asks for (used by run_app and tests)."""
    from popvision_lite.gui.main_window import MainWindow

    win = MainWindow(settings=settings)
    theme_name = str(win.settings.value("theme", "light"))
    theme.apply_theme(theme_name if theme_name in theme.THEMES else "light")
    win.act_dark.setChecked(theme.current() == "dark")
    paths = list(getattr(args, "profiles", None) or [])
    compare = getattr(args, "compare", None)
    if compare:  # both open as documents and side by side in a compare window
        from popvision_lite.gui.compare_window import open_compare

        open_compare(win, compare[0], compare[1])
        paths = [p for p in paths if p not in compare]
    if paths:
        win.open_paths(paths)
    elif getattr(args, "sample", False) and not compare:
        if not win.open_sample():
            logging.getLogger(__name__).warning("no bundled sample profiles found")
    elif not compare:  # no file asked for: the start page, which offers to reopen the last session
        win.offer_session()
    return win


def run_app(args) -> int:
    app = create_app()
    win = build_window(args)
    win.show()
    return int(app.exec())
