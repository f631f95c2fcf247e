"""Cyclic garbage is collected on the GUI thread only, never on a pool thread running a view's analysis."""

from __future__ import annotations

import gc
import threading
import weakref

from PySide6.QtCore import QObject

from popvision_lite.gui import gui_thread_gc
from popvision_lite.gui.workers import Worker


class _Cycle:
    def __init__(self):
        self.me = self


def test_a_pool_thread_allocating_cyclic_garbage_never_collects(qtbot):
    gui_thread_gc.install()
    threads = []

    def record(phase, info):
        if phase == "start":
            threads.append(threading.current_thread() is threading.main_thread())

    def allocate(task):
        for _ in range(20 * gc.get_threshold()[0]):  # far past the threshold that starts a collection
            _Cycle()
        return True

    gc.callbacks.append(record)
    try:
        w = Worker(allocate)
        with qtbot.waitSignal(w.signals.finished, timeout=60_000):
            w.start_on()
    finally:
        gc.callbacks.remove(record)
    assert not gc.isenabled()
    assert all(threads), f"{threads.count(False)} collection(s) ran on a pool thread"


def test_a_qt_object_in_a_cycle_is_collected_by_the_gui_thread_timer(qtbot):
    gui_thread_gc.install()
    holder = QObject()
    holder.cycle = holder  # a QObject kept alive only by a reference cycle
    ref = weakref.ref(holder)
    del holder
    for _ in range(2 * gc.get_threshold()[0]):  # make a young-generation collection due
        _Cycle()
    qtbot.waitUntil(lambda: ref() is None, timeout=60_000)
