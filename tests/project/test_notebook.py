"""examples/notebook_tour.ipynb runs end to end, cell after cell in one fresh interpreter, as a kernel runs it.

The notebook is plain Python (test_notebook_is_plain_python): no magics, no shell escapes, and ``display`` is the
only name it takes from IPython, so running its cells in order with a kernel's display rules
(tests/project/notebook_cells.py) is what a Jupyter kernel does with them.  The run in a real kernel (ipykernel
through nbclient) is ``python -m bench.notebook_kernel`` (extra ``notebook-kernel``): docs/decisions/0465."""

from __future__ import annotations

import ast
import builtins
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.project import notebook_cells

REPO = Path(__file__).resolve().parents[2]
NOTEBOOK = REPO / "examples" / "notebook_tour.ipynb"


def _free_names(cells: list[str]) -> set[str]:
    """Names the cells read that no cell binds and Python's builtins do not hold."""
    bound, read = set(), set()
    for src in cells:
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, ast.Name):
                (read if isinstance(node.ctx, ast.Load) else bound).add(node.id)
            elif isinstance(node, ast.alias):
                bound.add((node.asname or node.name).split(".")[0])
            elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                bound.add(node.name)
            elif isinstance(node, ast.arg):
                bound.add(node.arg)
    return read - bound - set(dir(builtins))


def test_notebook_is_plain_python():
    """Every code cell parses as Python (a magic `%...`, a shell escape `!...` or help `obj?` would not) and the
    only name from the kernel is ``display``, which the runner gives the cells as a kernel does."""
    cells = notebook_cells.code_cells(NOTEBOOK)
    assert len(cells) >= 10
    for src in cells:
        ast.parse(src)
    assert _free_names(cells) == set(notebook_cells.IPYTHON_NAMES)
    nb = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    assert nb["metadata"]["kernelspec"]["language"] == "python"


@pytest.mark.parametrize("src", ["%timeit 1", "!ls", "len?"])
def test_ipython_syntax_is_caught(src):
    with pytest.raises(SyntaxError):
        ast.parse(src)


def test_ipython_names_are_caught():
    assert _free_names(["import os\nget_ipython().run_line_magic('ls', '')\nos.sep"]) == {"get_ipython"}


@pytest.mark.slow
def test_notebook_tour_runs_end_to_end():
    r = subprocess.run([sys.executable, "-m", "tests.project.notebook_cells", str(NOTEBOOK)], cwd=REPO,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    cells = notebook_cells.code_cells(NOTEBOOK)
    per_cell = json.loads(r.stdout.strip().splitlines()[-1])
    assert len(per_cell) == len(cells)  # every cell ran
    # no error, the card, the verdict's table, the roofline and the pandas plot, the step's shares adding up to 100 %
    problems = notebook_cells.tour_problems(per_cell, cells)
    assert not problems, "\n".join(problems)
