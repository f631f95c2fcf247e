"""Artificial CPU load for tests of code that must not depend on timing: one busy-loop process per core
while the block runs (what a shared or loaded machine does to a test), stopped and reaped afterwards."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys


@contextlib.contextmanager
def busy_cpus(n: int | None = None):
    """Run ``n`` (default: one per core this process may use) ``while 1: pass`` processes during the block."""
    if n is None:
        try:
            n = len(os.sched_getaffinity(0))
        except AttributeError:
            n = os.cpu_count() or 1
    procs = [subprocess.Popen([sys.executable, "-c", "while 1: pass"], stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(n)]
    try:
        yield procs
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()
