"""Point functions for tests/sweep/test_sweep.py, importable by Dask workers and by the per-point child
processes (they must be module-level names)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from popvision_lite.sweep.point import emulate

CRASH_BATCH = 16  # the point with this batch kills its own process with SIGSEGV
KILL_BATCH = 24  # ... and this one with SIGKILL, as the kernel's out-of-memory killer would
SLOW_S = 0.6


def crash_on_batch(spec, profile_path):
    if spec["args"].get("batch") == CRASH_BATCH:
        os.kill(os.getpid(), signal.SIGSEGV)
    if spec["args"].get("batch") == KILL_BATCH:
        os.kill(os.getpid(), signal.SIGKILL)
    return emulate(spec, profile_path)


def slow(spec, profile_path):
    time.sleep(SLOW_S)
    return emulate(spec, profile_path)


def greedy(spec, profile_path):
    """Needs 8 GiB of fresh memory before it emulates anything."""
    import numpy as np

    np.ones(2**30, dtype=np.float64).sum()
    return emulate(spec, profile_path)


GATE = "gate"  # sub-folder of the sweep folder where gated points meet the test
GATE_BOUND_S = 600.0  # a gate nobody opens lets its point go on after this long (a test that forgot it)


def gate_folder(profile_path) -> Path:
    return Path(profile_path).resolve().parent.parent / GATE  # profiles/<file> -> <sweep folder>/gate


def gated(spec, profile_path):
    """Says it started (``gate/started-<batch>``), then waits until the test creates ``gate/open`` (no sleep
    of a guessed length: the test decides when the point may go on), then emulates."""
    gate = gate_folder(profile_path)
    gate.mkdir(exist_ok=True)
    (gate / f"started-{spec['args'].get('batch')}").touch()
    t0 = time.monotonic()
    while not (gate / "open").exists() and time.monotonic() - t0 < GATE_BOUND_S:
        time.sleep(0.02)
    return emulate(spec, profile_path)
