"""Run the benchmark scripts listed in SCRIPTS (``python -m bench [name ...] [-- args]``).

Each entry is a module ``bench/<name>.py`` runnable as ``python -m bench.<name>``; each runs in its
own process (Qt scripts need their own application; memory numbers stay per script).  Add yours to
SCRIPTS.  Arguments after ``--`` are passed to every script run.  Screenshot scripts are not listed:
they make pictures, not numbers.
"""

from __future__ import annotations

import subprocess
import sys
import time

SCRIPTS: list[str] = [
    "profile_scale",
    "emulator_speed",
    "execution_redraw",
    "gui_heatmap",
    "insights_views",
    "roofline",
    "compare_export",
]


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    names = argv or SCRIPTS
    unknown = [n for n in names if n not in SCRIPTS]
    if unknown:
        print(f"unknown bench script(s) {unknown}; known: {SCRIPTS}", file=sys.stderr)
        return 2
    failed = []
    for name in names:
        print(f"=== bench/{name}.py ===", flush=True)
        t0 = time.perf_counter()
        rc = subprocess.call([sys.executable, "-m", f"bench.{name}", *extra])
        print(f"=== {name}: rc={rc} in {time.perf_counter() - t0:.1f} s ===", flush=True)
        if rc:
            failed.append(name)
    if failed:
        print(f"failed or missed targets: {failed}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
