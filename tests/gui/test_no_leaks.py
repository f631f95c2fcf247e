"""Closed things are freed: a finished background task and what it was given, a closed document's views
(the roofline's analysis finishing after its tab closed), a closed compare window.  bench/soak.py measures
the same over many iterations; these are the regressions it found, each checked by weak references."""

from __future__ import annotations

import gc
import weakref

import pytest
from PySide6.QtCore import QCoreApplication, QEvent


def _flush(qtbot):
    for _ in range(3):
        qtbot.wait(0)
        QCoreApplication.sendPostedEvents(None, QEvent.DeferredDelete)
    gc.collect()


class Payload:
    """Stands for a task's input (a profile, a tile-memory index)."""


def _gone(qtbot, *refs) -> bool:
    _flush(qtbot)
    return all(r() is None for r in refs)


def test_a_finished_task_and_its_inputs_are_freed(qtbot):
    from popvision_lite.gui.workers import start_task

    payload = Payload()
    want, inputs = id(payload), weakref.ref(payload)
    got = []
    w = start_task(lambda task, p: id(p), payload, title="t")
    w.signals.result.connect(got.append)
    worker = weakref.ref(w)
    del w, payload
    qtbot.waitUntil(lambda: got == [want])
    qtbot.waitUntil(lambda: _gone(qtbot, worker, inputs))


def test_a_roofline_tab_closed_while_its_analysis_runs_is_freed(qtbot, window, small_profile, capfd,
                                                                monkeypatch, fresh_analyses):
    from popvision_lite.gui.views.roofline.view import RooflineView

    monkeypatch.setattr(RooflineView, "SYNC_MAX_TILES", -1)  # the analysis runs on a worker thread
    window.open_paths([small_profile])
    qtbot.waitUntil(lambda: window.doc_tabs.count() == 1 and not window.busy())
    view = window.current_document_widget().show_view("roofline")
    assert view.analysis is None  # still computing
    ref = weakref.ref(view)
    del view
    window.close_current()  # before the result comes back
    qtbot.waitUntil(lambda: _gone(qtbot, ref))
    assert "RuntimeError" not in capfd.readouterr().err


@pytest.mark.parametrize("pages", [(), ("memory", "execution", "roofline")])
def test_a_closed_compare_window_is_freed(qtbot, window, small_profile, tmp_path, pages):
    from popvision_lite.gui.compare_window import open_compare

    opened = []
    open_compare(window, small_profile, small_profile, on_open=opened.append)
    qtbot.waitUntil(lambda: bool(opened) and not window.busy())
    for key in pages:  # pages with their own timers, theme slots and tile map items
        opened[0].show_page(key)
    ref = weakref.ref(opened.pop())
    ref().close()
    while window.doc_tabs.count():
        window.close_current()
    _flush(qtbot)
    assert ref() is None and window.compare_windows == []
