"""Run a notebook's code cells in order in this interpreter, as a Jupyter kernel runs them, and print its outputs.

    python -m tests.project.notebook_cells NOTEBOOK.ipynb     # run in the notebook's folder; prints one JSON line

What a kernel adds to plain Python, and what this runner does for it (the notebook uses nothing else: the test
tests/project/test_notebook.py checks that every cell parses as Python and that ``display`` is its only name
from IPython):

* a cell whose last statement is an expression shows that value (``execute_result``), unless it is None;
* ``display(obj)`` shows obj (``display_data``);
* a value is shown in IPython's formats: ``text/plain`` (its repr), ``text/html`` (``_repr_html_``) and, for a
  matplotlib Figure, ``image/png``;
* figures left open in pyplot are shown at the end of the cell and closed (matplotlib-inline's flush);
* printed text is a ``stream`` output; an exception is an ``error`` output and stops the run.

The outputs are nbformat's (``output_type``, ``data``), one list per code cell.  A run in a real Jupyter kernel
(ipykernel, nbclient) is ``python -m bench.notebook_kernel`` (extra ``notebook-kernel``; docs/decisions/0465).
"""

from __future__ import annotations

import ast
import base64
import contextlib
import io
import json
import os
import re
import sys
import traceback
from pathlib import Path

IPYTHON_NAMES = frozenset({"display"})  # the names a kernel gives a notebook that plain Python has not


def code_cells(path: Path) -> list[str]:
    """The source of each code cell of the notebook at ``path`` (nbformat 4 JSON), in order."""
    nb = json.loads(Path(path).read_text(encoding="utf-8"))
    cells = [c for c in nb["cells"] if c["cell_type"] == "code"]
    return ["".join(c["source"]) if isinstance(c["source"], list) else c["source"] for c in cells]


def _bundle(obj) -> dict:
    data = {"text/plain": repr(obj)}
    html = getattr(obj, "_repr_html_", None)
    if callable(html) and not isinstance(obj, type):
        text = html()
        if text is not None:
            data["text/html"] = text
    if "matplotlib.figure" in sys.modules and isinstance(obj, sys.modules["matplotlib.figure"].Figure):
        data["image/png"] = _png(obj)
    return data


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    return base64.b64encode(buf.getvalue()).decode("ascii")


def run(cells: list[str]) -> list[list[dict]]:
    """Run ``cells`` in one namespace; each cell's outputs, up to and including the first error."""
    outputs: list[list[dict]] = []
    current: list[dict] = []

    def display(*objs):
        for obj in objs:
            current.append({"output_type": "display_data", "data": _bundle(obj)})

    ns = {"__name__": "__main__", "__builtins__": __builtins__, "display": display}
    for i, src in enumerate(cells):
        current = []
        outputs.append(current)
        out = io.StringIO()
        try:
            tree = ast.parse(src, filename=f"<cell {i}>")
            last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
            with contextlib.redirect_stdout(out):
                exec(compile(tree, f"<cell {i}>", "exec"), ns)
                value = eval(compile(ast.Expression(last.value), f"<cell {i}>", "eval"), ns) if last else None
        except Exception as e:  # noqa: BLE001 - a cell's error is an output, as in a kernel
            _stream(current, out)
            current.append({"output_type": "error", "ename": type(e).__name__, "evalue": str(e),
                            "traceback": traceback.format_exception(e)})
            return outputs
        _stream(current, out)
        if value is not None:
            current.append({"output_type": "execute_result", "data": _bundle(value)})
        _flush_figures(current)
    return outputs


def _stream(current: list[dict], out: io.StringIO) -> None:
    if out.getvalue():
        current.append({"output_type": "stream", "name": "stdout", "text": out.getvalue()})


def _flush_figures(current: list[dict]) -> None:
    if "matplotlib.pyplot" not in sys.modules:
        return
    plt = sys.modules["matplotlib.pyplot"]
    for num in plt.get_fignums():
        current.append({"output_type": "display_data", "data": {"image/png": _png(plt.figure(num))}})
    plt.close("all")


def tour_problems(per_cell: list[list[dict]], cells: list[str]) -> list[str]:
    """What the tour must show, wherever it ran (this runner or a kernel: bench/notebook_kernel.py): no error, the
    profile's card and the verdict's table as HTML, at least two images (the roofline and the pandas plot), and
    the step's shares printed by the ``shares.map`` cell naming compute, exchange and sync and adding up to 100 %
    (p.totals, asserted in the notebook to equal the Summary's).  ``per_cell``: one output list per code cell."""
    outputs = [o for outs in per_cell for o in outs]
    bad = ["".join(o.get("traceback", [])) or o.get("evalue", "an error") for o in outputs
           if o["output_type"] == "error"]
    html = [o["data"]["text/html"] for o in outputs if "text/html" in o.get("data", {})]
    if not any("popvision-lite profile" in h for h in html):
        bad.append("the profile's card is not shown")
    if not any("Verdict for" in h for h in html):
        bad.append("the verdict's table is not shown")
    images = sum("image/png" in o.get("data", {}) for o in outputs)
    if images < 2:
        bad.append(f"{images} image(s): the roofline and the pandas plot are two")
    i = next((i for i, src in enumerate(cells) if src.startswith("shares.map")), None)
    shown = per_cell[i] if i is not None and i < len(per_cell) else []
    text = shown[0].get("data", {}).get("text/plain", "") if shown else ""
    shares = [float(x) for x in re.findall(r"([\d.]+)%", text)]
    if not {"compute", "exchange", "sync"} <= set(re.findall(r"^(\w+)\s", text, re.M)) or abs(sum(shares) - 100) >= 0.5:
        bad.append(f"the step's shares do not name compute, exchange and sync or do not add up to 100 %: {text!r}")
    return bad


def main(argv: list[str]) -> int:
    path = Path(argv[0]).resolve()
    os.environ.setdefault("MPLBACKEND", "Agg")
    os.chdir(path.parent)
    print(json.dumps(run(code_cells(path))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
