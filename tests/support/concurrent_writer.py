"""Run popvision-lite commands whose final rename waits at a barrier, so that several writers of the same output
file are all between "temp file written" and "renamed into place" at the same moment - the window a race
between writers would need.  Used by tests/test_concurrent_writers.py:

    python -m tests.support.concurrent_writer N BARRIER_DIR TARGET ARGS_JSON [BARRIER_DIR TARGET ARGS_JSON ...]

Each (BARRIER_DIR, TARGET, ARGS_JSON) is one job: the popvision-lite command whose arguments are the JSON list
ARGS_JSON, run in this process (``cli.main``), one job after the other.  A job's first ``os.replace`` onto its
TARGET copies the writer's finished temp file to ``BARRIER_DIR/file-<pid>`` (what this writer is about to rename
into place), creates ``BARRIER_DIR/ready-<pid>`` and waits (bounded) until N such files exist; every other
rename goes ahead at once.  The command's exit status goes to ``BARRIER_DIR/code-<pid>``; a command that ends
without that rename leaves ``BARRIER_DIR/gone-<pid>``, which the other writers count as arrived.

Several jobs in one writer process: N writers that each run the same list of jobs meet at every job's barrier
in turn, so one pair of processes races over several kinds of output file without paying a Python start and
the package's imports per file (the race is between the processes, whatever they ran before).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

BOUND_S = 600.0


def _arrived(barrier: Path) -> int:
    """Writers at ``barrier``: ready to rename, or gone (their command ended without a rename)."""
    return len(list(barrier.glob("ready-*"))) + len(list(barrier.glob("gone-*")))


def main(argv: list[str]) -> int:
    n, rest = int(argv[0]), argv[1:]
    if not rest or len(rest) % 3:
        print("concurrent_writer: N, then BARRIER_DIR TARGET ARGS_JSON per job", file=sys.stderr)
        return 2
    jobs = [(Path(rest[i]), Path(rest[i + 1]).resolve(), json.loads(rest[i + 2])) for i in range(0, len(rest), 3)]
    real_replace = os.replace
    job = {}

    def replace(src, dst, *a, **k):
        if not job["waited"] and Path(dst).resolve() == job["target"]:
            job["waited"] = True
            barrier = job["barrier"]
            shutil.copyfile(src, barrier / f"file-{os.getpid()}")
            (barrier / f"ready-{os.getpid()}").touch()
            t0 = time.monotonic()
            while _arrived(barrier) < n and time.monotonic() - t0 < BOUND_S:
                time.sleep(0.01)
        return real_replace(src, dst, *a, **k)

    os.replace = replace
    from popvision_lite.cli import main as cli_main

    worst = 0
    for barrier, target, args in jobs:
        job.update(barrier=barrier, target=target, waited=False)
        code = cli_main(args)
        if not job["waited"]:
            print(f"concurrent_writer: the command never renamed a file onto {target}", file=sys.stderr)
            code = 3
            # the other writers stop waiting for this one at this job's barrier (a failed command would
            # otherwise hold them for BOUND_S): the test then reports the failure, with this writer's stderr
            (barrier / f"gone-{os.getpid()}").touch()
        (barrier / f"code-{os.getpid()}").write_text(str(code))
        worst = worst or code
    return worst


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
