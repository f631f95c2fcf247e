"""Run every benchmark script listed in SCRIPTS (``python -m bench [name ...]``).

Each entry is a module under bench/ with a ``main(argv) -> int``; add yours to SCRIPTS.
Extra arguments after ``--`` are passed to every script.
"""

from __future__ import annotations

import importlib
import sys
import time

SCRIPTS: list[str] = [
    "profile_scale",
    "insights_views",
    "roofline",
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
        rc = importlib.import_module(f"bench.{name}").main(extra)
        print(f"=== {name}: rc={rc} in {time.perf_counter() - t0:.1f} s ===", flush=True)
        if rc:
            failed.append(name)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
