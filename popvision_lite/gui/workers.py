"""Run long work (loading, emulating, exporting) off the GUI thread, with progress and cancel.

Usage::

    def load(task, path):                    # runs on a pool thread
        task.progress(0.1, "reading header")
        task.check_cancelled()               # raises Cancelled if the user pressed Cancel
        return open_profile(path)

    worker = start_task(load, path, title="Opening run.pvl")
    worker.signals.result.connect(on_loaded)       # delivered on the GUI thread
    worker.signals.error.connect(on_error)         # the exception object
    worker.signals.progress.connect(bar.update)    # (fraction 0..1 or -1 for unknown, message)
    worker.cancel()

The function gets a :class:`TaskContext` first; it must not touch widgets.  Exactly one of
``result``, ``error`` or ``cancelled`` is emitted, then ``finished``.
"""

from __future__ import annotations

import threading
import traceback
import weakref
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, QRunnable, Qt, QThreadPool, QTimer, Signal, Slot


class Cancelled(Exception):
    """Raised inside a task by :meth:`TaskContext.check_cancelled` once cancel was asked for."""


class TaskContext:
    """What a task function sees: report progress, poll for cancellation."""

    def __init__(self, signals: _ThreadSignals):
        self._signals = signals
        self._cancel = threading.Event()

    def progress(self, fraction: float, message: str = "") -> None:
        """Report progress: ``fraction`` in [0, 1], or -1 when unknown."""
        self.check_cancelled()
        self._signals.progress.emit(float(fraction), str(message))

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def check_cancelled(self) -> None:
        if self._cancel.is_set():
            raise Cancelled()

    def cancel(self) -> None:
        self._cancel.set()


class _ThreadSignals(QObject):
    """Emitted from the pool thread; only ever connected to :class:`WorkerSignals` slots."""

    progress = Signal(float, str)
    result = Signal(object)
    error = Signal(object)
    cancelled = Signal()
    finished = Signal()


class WorkerSignals(QObject):
    """The public signals, always emitted on the thread that created the worker (the GUI thread).

    (A plain Python callable connected straight to a signal emitted from a pool thread may run
    *in the pool thread* under PySide6; relaying through slots of this QObject, which lives in
    the GUI thread, with queued connections guarantees handlers run on the GUI thread.)
    """

    progress = Signal(float, str)
    result = Signal(object)
    error = Signal(object)  # the exception; ``exc.__traceback_text__`` holds the formatted traceback
    cancelled = Signal()
    finished = Signal()

    def attach(self, src: _ThreadSignals) -> None:
        q = Qt.QueuedConnection
        src.progress.connect(self._progress, q)
        src.result.connect(self._result, q)
        src.error.connect(self._error, q)
        src.cancelled.connect(self._cancelled, q)
        src.finished.connect(self._finished, q)

    @Slot(float, str)
    def _progress(self, f, m):
        self.progress.emit(f, m)

    @Slot(object)
    def _result(self, v):
        self.result.emit(v)

    @Slot(object)
    def _error(self, e):
        self.error.emit(e)

    @Slot()
    def _cancelled(self):
        self.cancelled.emit()

    @Slot()
    def _finished(self):
        self.finished.emit()


class Worker(QRunnable):
    """A QRunnable calling ``fn(task, *args, **kwargs)`` on a pool thread."""

    def __init__(self, fn: Callable[..., Any], *args, title: str = "", **kwargs):
        super().__init__()
        self.setAutoDelete(False)  # we keep our own reference until ``finished``
        self.fn, self.args, self.kwargs = fn, args, kwargs
        self.title = title
        self._emit = _ThreadSignals()
        self.signals = WorkerSignals()
        self.signals.attach(self._emit)
        self.task = TaskContext(self._emit)
        self.done = False

    def cancel(self) -> None:
        self.task.cancel()

    def start_on(self, pool: QThreadPool | None = None) -> None:
        """Run on ``pool`` (the global pool by default).  The pool is given ``self.run``, not this runnable:
        PySide's ``QThreadPool.start(runnable)`` keeps a reference to a runnable that is not auto-deleted and
        never drops it, so every worker - its signals and whatever their connections hold - lived for ever
        (bench/soak.py); a callable is released by the pool once it has run."""
        (pool or QThreadPool.globalInstance()).start(self.run)

    def run(self) -> None:  # pool thread
        try:
            value = self.fn(self.task, *self.args, **self.kwargs)
            if self.task.cancelled:
                raise Cancelled()
        except Cancelled:
            _emit(self._emit.cancelled)
        except BaseException as exc:  # delivered to the GUI thread, never raised there
            exc.__traceback_text__ = traceback.format_exc()
            _emit(self._emit.error, exc)
        else:
            _emit(self._emit.result, value)
        finally:
            # a finished worker lets go of its work and inputs (a profile, say): its signal objects may
            # outlive it through connections
            self.fn = self.args = self.kwargs = None
            self.done = True
            _emit(self._emit.finished)


def _emit(signal, *args) -> None:
    try:
        signal.emit(*args)
    except RuntimeError:  # the app (and our QObjects) were torn down while the task ran: drop it
        pass


_LIVE: set[Worker] = set()  # keeps workers (and their signal objects) alive while running


def start_task(fn: Callable[..., Any], *args, title: str = "", pool: QThreadPool | None = None,
               **kwargs) -> Worker:
    """Start ``fn(task, *args, **kwargs)`` on ``pool`` (the global pool by default)."""
    worker = Worker(fn, *args, title=title, **kwargs)
    _LIVE.add(worker)
    # a weak reference: a lambda holding the worker, held by the worker's own signals object in C++, made a
    # cycle the garbage collector cannot see - every task stayed alive with its inputs (bench/soak.py)
    # (dropped on the next turn of the event loop, not inside the emission of its own signal)
    ref = weakref.ref(worker)
    worker.signals.finished.connect(lambda: QTimer.singleShot(0, lambda: _LIVE.discard(ref())))
    worker.start_on(pool)
    return worker


def running_tasks() -> list[Worker]:
    return [w for w in _LIVE if not w.done]
