"""The main window: opening (dialog patched), bad files, recent files, tabs, workers."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from PySide6.QtWidgets import QFileDialog

from tests.support.qt import capture_message_boxes

pytestmark = pytest.mark.gui

def test_open_via_dialog_loads_document_and_summary(qtbot, window, small_profile, monkeypatch):
    calls = []

    def fake_dialog(*a, **k):
        calls.append(a)
        return [str(small_profile)], ""

    monkeypatch.setattr(QFileDialog, "getOpenFileNames", staticmethod(fake_dialog))
    window.act_open.trigger()
    assert calls, "File > Open must ask the (patched) dialog"
    qtbot.waitUntil(lambda: window.doc_tabs.count() == 1, timeout=15000)
    doc = window.current_document()
    assert doc.path == Path(small_profile)
    assert doc.profile.target.num_ipus == 2
    assert window.stack.currentWidget() is window.doc_tabs
    dw = window.current_document_widget()
    assert dw.keys()[0] == "summary"
    summary = dw.built_views()["summary"]
    # the summary computed in the loader thread is what the view shows
    assert summary.summary is doc.cached("summary", lambda: None)
    assert f"{summary.summary.total_cycles:,}" in summary.info.text()
    assert str(small_profile.resolve()) in window.recent_files()
    assert window.settings.value("last_dir") == str(small_profile.resolve().parent)
    assert doc.title in window.windowTitle()


def test_bad_file_shows_error_dialog_and_window_stays_usable(qtbot, window, tmp_path, small_profile,
                                                             monkeypatch):
    bad = tmp_path / "garbage.pvl"
    bad.write_bytes(b"this is not a profile at all")
    errors = capture_message_boxes(monkeypatch)
    window.open_paths([bad])
    qtbot.waitUntil(lambda: len(errors) == 1, timeout=10000)
    parent, title, message = errors[0][:3]
    assert "garbage.pvl" in message and "not a popvision-lite profile" in message
    assert "Traceback" not in message
    assert window.doc_tabs.count() == 0 and window.isVisible()
    qtbot.waitUntil(lambda: not window.busy(), timeout=5000)
    assert window.progress.isHidden()
    # still usable: a good file opens afterwards
    window.open_paths([small_profile])
    qtbot.waitUntil(lambda: window.doc_tabs.count() == 1, timeout=15000)


def test_missing_file_message_names_it(qtbot, window, tmp_path, monkeypatch):
    errors = capture_message_boxes(monkeypatch)
    window.open_paths([tmp_path / "nope.pvl"])
    qtbot.waitUntil(lambda: len(errors) == 1, timeout=10000)
    assert "nope.pvl" in errors[0][2] and "no such file" in errors[0][2]


def test_close_tab_returns_to_start_page_and_lists_recent(qtbot, opened):
    win, dw = opened
    win.act_close.trigger()
    assert win.doc_tabs.count() == 0
    assert win.stack.currentWidget() is win.start_page
    items = [win.start_page.recent_list.item(i).data(256) for i in range(win.start_page.recent_list.count())]
    assert str(Path(dw.document.path).resolve()) in items


def test_view_tabs_are_built_lazily_and_switchable(qtbot, opened):
    win, dw = opened
    assert set(dw.built_views()) == {"summary"}
    from popvision_lite.gui.views import VIEW_REGISTRY

    order = [k for k, _, _ in VIEW_REGISTRY]
    assert dw.keys() == [k for k in order if k in dw.keys()]  # registry order kept
    other = dw.keys()[-1]
    title = dict((k, t) for k, t, _ in VIEW_REGISTRY)[other]
    win.show_view(other)
    assert other in dw.built_views()
    assert dw.tabs.tabText(dw.tabs.currentIndex()) == title


def test_missing_view_module_is_left_out(qtbot, opened, monkeypatch):
    from popvision_lite.gui import document_widget, views

    reg = list(views.VIEW_REGISTRY) + [("ghost", "Ghost", views.lazy("popvision_lite.gui.views.no_such", "X"))]
    monkeypatch.setattr(document_widget, "VIEW_REGISTRY", reg)
    dw = document_widget.DocumentWidget(opened[1].document)
    qtbot.addWidget(dw)
    assert "ghost" not in dw.keys()


def test_broken_view_shows_error_instead_of_crashing(qtbot, opened, monkeypatch):
    from popvision_lite.gui import document_widget

    def boom(doc):
        raise RuntimeError("kaput")

    monkeypatch.setattr(document_widget, "VIEW_REGISTRY", [("broken", "Broken", boom)])
    dw = document_widget.DocumentWidget(opened[1].document)
    qtbot.addWidget(dw)
    assert "kaput" in dw.view("broken").text()


def test_worker_reports_progress_and_can_be_cancelled(qtbot, window):
    gate = threading.Event()
    seen = []

    def job(task):
        task.progress(0.25, "quarter")
        gate.wait(5)
        for _ in range(100):
            task.check_cancelled()
            gate.wait(0.01)
        return "finished"

    results, cancelled = [], []
    threads = []
    w = window.run_task(job, title="Test job", on_result=results.append,
                        on_cancel=lambda: (cancelled.append(1), threads.append(threading.current_thread())))
    w.signals.progress.connect(lambda f, m: seen.append((f, m)))
    qtbot.waitUntil(lambda: window.progress.isVisible(), timeout=2000)
    assert window.cancel_button.isVisible() and window.act_cancel.isEnabled()
    window.act_cancel.trigger()  # Esc
    gate.set()
    qtbot.waitUntil(lambda: cancelled == [1], timeout=5000)
    assert results == []
    assert threads == [threading.main_thread()], "handlers must run on the GUI thread"
    qtbot.waitUntil(lambda: not window.busy(), timeout=5000)
    assert window.progress.isHidden() and not window.act_cancel.isEnabled()


def test_worker_error_is_delivered_not_raised(qtbot):
    from PySide6.QtCore import QThreadPool

    from popvision_lite.gui.workers import Worker

    def job(task, x):
        raise ValueError(f"bad {x}")

    w = Worker(job, 7)
    with qtbot.waitSignal(w.signals.error, timeout=5000) as blocker:
        QThreadPool.globalInstance().start(w)
    assert isinstance(blocker.args[0], ValueError) and "bad 7" in str(blocker.args[0])
    assert "Traceback" in blocker.args[0].__traceback_text__


def test_theme_toggle_restyles_plots(qtbot, opened):
    from popvision_lite.gui import theme

    win, dw = opened
    plot = dw.built_views()["summary"].plot
    win.toggle_theme()
    try:
        assert theme.current() == "dark"
        assert plot.backgroundBrush().color().name() == theme.THEMES["dark"]["plot_bg"]
        assert win.settings.value("theme") == "dark"
    finally:
        win.toggle_theme()
    assert plot.backgroundBrush().color().name() == theme.THEMES["light"]["plot_bg"]


def test_every_menu_action_has_shortcut_or_is_help(window):
    missing = [a.text() for a in window.actions() if not a.shortcuts() and a.text() != "&About"]
    assert not missing


def test_drop_opens_pvl_files(qtbot, window, small_profile):
    from PySide6.QtCore import QMimeData, QUrl

    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(small_profile)), QUrl.fromLocalFile(str(small_profile.with_name("notes.txt")))])
    assert window._dropped_profiles(mime) == [str(small_profile)]


def test_build_window_opens_cli_paths(qtbot, settings, small_profile):
    import argparse

    from popvision_lite.gui.app import build_window, create_app

    create_app()
    win = build_window(argparse.Namespace(profiles=[str(small_profile)], compare=None, sample=False), settings)
    qtbot.addWidget(win)
    qtbot.waitUntil(lambda: win.doc_tabs.count() == 1, timeout=15000)


def test_samples_found_listed_and_opened(qtbot, window, small_profile, tmp_path, monkeypatch):
    import shutil

    from popvision_lite.gui import start_page

    d = tmp_path / "samples"
    d.mkdir()
    shutil.copy(small_profile, d / "b_sample.pvl")
    shutil.copy(small_profile, d / "a_sample.pvl")
    (d / "notes.txt").write_text("not a profile")
    (d / "README.md").write_text("| file | workload | shows |\n|---|---|---|\n"
                                 "| `a_sample.pvl` | tiny MLP | **small**, fast |\n")
    monkeypatch.setenv(start_page.SAMPLES_ENV, str(d))
    found = start_page.bundled_samples()
    assert [p.name for p in found[:2]] == ["a_sample.pvl", "b_sample.pvl"]
    page = start_page.StartPage()
    qtbot.addWidget(page)
    names = [page.sample_list.item(i).text() for i in range(page.sample_list.count())]
    assert names[:2] == ["a_sample  —  tiny MLP", "b_sample"]
    assert page.sample_list.item(0).toolTip().startswith("small, fast")
    assert window.open_sample() is True
    qtbot.waitUntil(lambda: window.doc_tabs.count() == 1, timeout=15000)
    assert window.current_document().path.name == found[0].name


def test_no_samples_says_so(qtbot, window, monkeypatch):
    from popvision_lite.gui import main_window

    monkeypatch.setattr(main_window, "bundled_samples", lambda: [])
    infos = capture_message_boxes(monkeypatch)
    assert window.open_sample() is False and infos and window.doc_tabs.count() == 0


def test_run_app_starts_and_quits(qtbot, tmp_path, small_profile, monkeypatch):
    """run_app wires app + window + exec; exec is replaced (a nested real exec() breaks pytest-qt)."""
    import argparse

    from PySide6.QtCore import QSettings

    from popvision_lite.gui import app as app_mod

    made = []
    real_build, real_create = app_mod.build_window, app_mod.create_app

    def build(args, settings=None):
        win = real_build(args, QSettings(str(tmp_path / "s.ini"), QSettings.IniFormat))
        qtbot.addWidget(win)
        made.append(win)
        return win

    class FakeApp:
        def __init__(self):
            self.app = real_create()

        def exec(self):
            qtbot.waitUntil(lambda: made[0].isVisible() and made[0].doc_tabs.count() == 1, timeout=15000)
            made[0].close()
            return 0

    monkeypatch.setattr(app_mod, "build_window", build)
    monkeypatch.setattr(app_mod, "create_app", FakeApp)
    rc = app_mod.run_app(argparse.Namespace(profiles=[str(small_profile)], compare=None, sample=False))
    assert rc == 0 and made[0].settings.value("window/geometry") is not None


def test_installed_samples_found_under_prefix_share(tmp_path, monkeypatch):
    import sys

    from popvision_lite.gui import start_page

    d = tmp_path / "share" / "popvision-lite" / "sample_profiles"
    d.mkdir(parents=True)
    (d / "zz_installed_only.pvl").write_bytes(b"")
    monkeypatch.delenv(start_page.SAMPLES_ENV, raising=False)
    monkeypatch.setattr(sys, "prefix", str(tmp_path))
    assert d.resolve() in start_page.sample_dirs()
    assert "zz_installed_only.pvl" in [p.name for p in start_page.bundled_samples()]


def test_open_tabs_are_restored_at_the_next_start(qtbot, settings, small_profile, tmp_path):
    """Started with no file, the app shows the start page (as the README says), which offers the last session:
    the profiles open when the app closed come back, the current one in front; a file that has gone since is
    skipped; files on the command line win over the saved session."""
    import argparse
    import shutil

    from popvision_lite.gui.app import build_window, create_app

    create_app()
    second = tmp_path / "second.pvl"
    gone = tmp_path / "gone.pvl"
    shutil.copy(small_profile, second)
    shutil.copy(small_profile, gone)
    no_args = argparse.Namespace(profiles=[], compare=None, sample=False)
    win = build_window(no_args, settings)
    qtbot.addWidget(win)
    assert win.doc_tabs.count() == 0  # nothing saved yet: the start page
    win.open_paths([small_profile, second, gone])
    qtbot.waitUntil(lambda: win.doc_tabs.count() == 3, timeout=15000)
    names = [d.path.name for d in win.documents()]  # in the order the loader threads finished
    win.doc_tabs.setCurrentIndex(names.index("second.pvl"))
    win.close()
    gone.unlink()

    again = build_window(no_args, settings)
    qtbot.addWidget(again)
    assert again.doc_tabs.count() == 0 and again.stack.currentWidget() is again.start_page
    button = again.start_page.restore_button
    assert not button.isHidden() and button.text() == "Reopen last session (2 profiles)"
    button.click()
    qtbot.waitUntil(lambda: again.doc_tabs.count() == 2 and not again.busy(), timeout=15000)
    saved = [n for n in names if n != "gone.pvl"]
    assert [d.path.name for d in again.documents()] == saved  # the order they had
    assert again.current_document().path.name == "second.pvl"
    again.close()

    third = build_window(argparse.Namespace(profiles=[str(second)], compare=None, sample=False), settings)
    qtbot.addWidget(third)
    qtbot.waitUntil(lambda: third.doc_tabs.count() == 1 and not third.busy(), timeout=15000)
    assert third.current_document().path.name == "second.pvl"
    third.close()


def test_opening_an_open_file_again_shows_its_tab(qtbot, settings, small_profile, tmp_path):
    """The same file opened again (by another name too) brings its tab to the front instead of a second tab,
    and the session saves each file once: a duplicate tab came back at every restore (issue 46)."""
    import argparse
    import os
    import shutil

    from popvision_lite.gui.app import build_window, create_app

    create_app()
    other = tmp_path / "other.pvl"
    shutil.copy(small_profile, other)
    link = tmp_path / "alias.pvl"
    os.symlink(small_profile, link)
    win = build_window(argparse.Namespace(profiles=[], compare=None, sample=False), settings)
    qtbot.addWidget(win)
    win.open_paths([small_profile, other])
    qtbot.waitUntil(lambda: win.doc_tabs.count() == 2 and not win.busy(), timeout=15000)
    win.doc_tabs.setCurrentIndex([d.path.name for d in win.documents()].index("other.pvl"))
    assert win.open_paths([link]) == []  # nothing to load: the file is open
    assert win.doc_tabs.count() == 2 and win.current_document().path.resolve() == Path(small_profile).resolve()
    # two requests in flight for one file: the second load finds the first tab and closes its copy
    win.doc_tabs.setCurrentIndex(0)
    win.close_tab(win.doc_tabs.indexOf(win._open_widget(str(other))))
    workers = win.open_paths([other]) + win.open_paths([other])
    assert len(workers) == 2
    qtbot.waitUntil(lambda: not win.busy(), timeout=15000)
    assert [d.path.name for d in win.documents()].count("other.pvl") == 1
    win.save_session()
    saved = win.settings.value("session/open_files")
    assert len(saved) == len(set(saved)) == 2
    win.close()
