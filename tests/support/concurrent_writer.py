"""Run one popvision-lite command whose final rename waits at a barrier, so that several writers of the same
output file are all between "temp file written" and "renamed into place" at the same moment - the window a
race between writers would need.  Used by tests/test_concurrent_writers.py:

    python -m tests.support.concurrent_writer BARRIER_DIR N TARGET -- popvision-lite arguments...

The first ``os.replace`` onto TARGET copies the writer's finished temp file to ``BARRIER_DIR/file-<pid>`` (what
this writer is about to rename into place), creates ``BARRIER_DIR/ready-<pid>`` and waits (bounded) until N such
files exist; every other rename goes ahead at once.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

BOUND_S = 600.0


def main(argv: list[str]) -> int:
    barrier, n, target = Path(argv[0]), int(argv[1]), Path(argv[2]).resolve()
    args = argv[argv.index("--") + 1:]
    real_replace = os.replace
    waited = []

    def replace(src, dst, *a, **k):
        if not waited and Path(dst).resolve() == target:
            waited.append(True)
            shutil.copyfile(src, barrier / f"file-{os.getpid()}")
            (barrier / f"ready-{os.getpid()}").touch()
            t0 = time.monotonic()
            while len(list(barrier.glob("ready-*"))) < n and time.monotonic() - t0 < BOUND_S:
                time.sleep(0.01)
        return real_replace(src, dst, *a, **k)

    os.replace = replace
    from popvision_lite.cli import main as cli_main

    code = cli_main(args)
    if not waited:
        print(f"concurrent_writer: the command never renamed a file onto {target}", file=sys.stderr)
        return 3
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
