"""Python's cyclic garbage collector runs on the GUI thread only.

A collection runs in whichever thread happens to allocate past the collector's threshold.  When that is a
pool thread (a view's analysis) and the garbage holds Qt objects (a closed view's pyqtgraph items in a
reference cycle), their destructors run there: ``~QObject`` takes Qt's lock and then waits for the GIL while
the GUI thread, holding the GIL, waits for that lock in another destructor - the app freezes (seen in a full
test-suite run: a roofline analysis on a pool thread collecting a closed view's ``WidgetGroup``).  So automatic
collection is off and pyqtgraph's ``GarbageCollector`` collects the generations that are due from a timer on
the GUI thread, as pyqtgraph recommends for threaded applications.
"""

from __future__ import annotations

_collector = None


def install():
    """Turn automatic collection off and collect on a GUI-thread timer (once per process; call it on the GUI
    thread after the QApplication exists)."""
    global _collector
    if _collector is None:
        from pyqtgraph.util.garbage_collector import GarbageCollector

        _collector = GarbageCollector(interval=0.5)
    return _collector


def collect_due() -> None:
    """Collect what automatic collection would have collected by now (GUI thread; no-op before install)."""
    if _collector is not None:
        _collector.check()
