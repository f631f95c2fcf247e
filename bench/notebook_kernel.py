"""examples/notebook_tour.ipynb in a real Jupyter kernel (``python -m bench.notebook_kernel``).

Needs the extra ``notebook-kernel`` (``pip install -e ".[notebook-kernel]"``: nbclient, nbformat, ipykernel).
The suite runs the notebook's cells in order in one plain interpreter with a kernel's display rules
(tests/project/test_notebook.py, tests/project/notebook_cells.py); this script runs it the way a data scientist
does, in an ipykernel started by nbclient, and checks the same outputs plus what only a kernel shows:

1. every cell runs, no error output;
2. the profile's card and the verdict's table are shown as HTML;
3. the roofline Figure returned by ``pvl.plot.roofline`` is shown once (the kernel's inline backend would show a
   figure left open in pyplot a second time: ``plot._in_notebook``), and the pandas plot is shown;
4. the step's shares printed by ``shares.map`` add up to 100 %;
5. the runner's outputs (tests/project/notebook_cells.py) carry the same HTML cards, and the same text for every
   cell whose value is a plain text (not a path, an object address or a temporary folder).

Prints ``ok`` or the failures and one ``BENCH-RESULT`` JSON line; exit 0 when every check passes.  Decision
record 0465 says why the kernel run moved here from the suite.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "examples" / "notebook_tour.ipynb"


def kernel_outputs(path: Path) -> list[list[dict]]:
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    return [[dict(o) for o in c.get("outputs", [])] for c in nb.cells if c.cell_type == "code"]


def runner_outputs(path: Path) -> list[list[dict]]:
    r = subprocess.run([sys.executable, "-m", "tests.project.notebook_cells", str(path)], cwd=ROOT,
                       capture_output=True, text=True, timeout=600, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def check(kernel: list[list[dict]], runner: list[list[dict]], cells: list[str]) -> list[str]:
    from tests.project.notebook_cells import tour_problems  # what the suite's test checks, here in the kernel

    bad = tour_problems(kernel, cells)
    roof = next((i for i, outs in enumerate(kernel) if any("Figure" in o.get("data", {}).get("text/plain", "")
                                                           for o in outs)), None)
    pngs = [sum("image/png" in o.get("data", {}) for o in outs) for outs in kernel]
    if roof is None or pngs[roof] != 1:
        bad.append(f"the roofline figure is not shown exactly once (images per cell: {pngs})")
    if len(kernel) != len(runner):
        bad.append(f"{len(kernel)} cells in the kernel, {len(runner)} in the runner")
    for i, (k, r) in enumerate(zip(kernel, runner, strict=False)):
        kt = [_plain(o) for o in k if o["output_type"] in ("execute_result", "display_data")]
        rt = [_plain(o) for o in r if o["output_type"] in ("execute_result", "display_data")]
        if [t for t in kt if t] != [t for t in rt if t]:
            bad.append(f"cell {i}: the kernel shows {kt}, the runner {rt}")
    return bad


def _plain(o: dict) -> str:
    """A value's text where it does not name a temporary folder or an object's address; '' otherwise."""
    data = o.get("data", {})
    if "text/html" in data:
        return "html:" + re.sub(r"\s+", " ", data["text/html"])[:200]
    t = data.get("text/plain", "")
    return "" if re.search(r"0x[0-9a-f]+|/tmp|<Figure|Axes", t) else t


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--notebook", type=Path, default=NOTEBOOK, help="the notebook to run (default: the tour)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    try:
        kernel = kernel_outputs(args.notebook)
    except ImportError as e:
        print(f"needs the extra notebook-kernel (pip install -e \".[notebook-kernel]\"): {e}")
        return 2
    t_kernel = time.perf_counter() - t0
    from tests.project.notebook_cells import code_cells

    bad = check(kernel, runner_outputs(args.notebook), code_cells(args.notebook))
    print("\n".join(bad) if bad else "ok: the notebook runs in a kernel as the suite's runner runs it")
    print("BENCH-RESULT " + json.dumps({"bench": "notebook_kernel", "cells": len(kernel), "failures": bad,
                                       "kernel_wall_s": round(t_kernel, 1)}))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
