"""Artificial CPU load for tests of code that must not depend on timing: one busy-loop process per core
while the block runs (what a shared or loaded machine does to a test), stopped and reaped afterwards."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys


def one_core() -> set[int] | None:
    """One core this process may use (``{n}``, for :func:`on_cores`), or None where affinity is not available."""
    try:
        return {max(os.sched_getaffinity(0))}
    except AttributeError:
        return None


@contextlib.contextmanager
def on_cores(cores: set[int] | None):
    """Processes started from this thread during the block run on ``cores`` only, and so do the processes they
    start: the calling thread's affinity is set for the block and restored after it (a child takes the mask of
    the thread that forks it).  None: no change."""
    if cores is None:
        yield
        return
    saved = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cores)
    try:
        yield
    finally:
        os.sched_setaffinity(0, saved)


@contextlib.contextmanager
def busy_cpus(n: int | None = None, cores: set[int] | None = None):
    """Run ``n`` ``while 1: pass`` processes during the block: by default one per core this process may use, or,
    given ``cores``, one per core of ``cores``, each free to run on any of them (the load on processes started
    with :func:`on_cores` on those cores: every core they may use is busy, and the machine's other cores are not
    burnt for it)."""
    if n is None:
        try:
            n = len(cores if cores is not None else os.sched_getaffinity(0))
        except AttributeError:
            n = os.cpu_count() or 1
    with on_cores(cores):
        procs = [subprocess.Popen([sys.executable, "-c", "while 1: pass"], stdin=subprocess.DEVNULL,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(n)]
    try:
        yield procs
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()
