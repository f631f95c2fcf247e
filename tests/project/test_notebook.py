"""examples/notebook_tour.ipynb runs end to end in a kernel, as a data scientist runs it (nbclient)."""

from __future__ import annotations

from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.slow
def test_notebook_tour_runs_end_to_end():
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(EXAMPLES / "notebook_tour.ipynb", as_version=4)
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(EXAMPLES)}}).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    html = [o["data"]["text/html"] for o in outputs if "text/html" in o.get("data", {})]
    assert any("popvision-lite profile" in h for h in html)        # the profile's card
    assert any("Verdict for" in h for h in html)                   # the verdict's table
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) >= 2                                        # the roofline and the pandas plot
    # the weighted idiom: the step's shares (p.totals, asserted in the notebook to equal the Summary's) add up
    cell = next(c for c in nb.cells if c.cell_type == "code" and c.source.startswith("shares.map"))
    text = cell.outputs[0]["data"]["text/plain"]
    import re

    shares = [float(x) for x in re.findall(r"([\d.]+)%", text)]
    assert {"compute", "exchange", "sync"} <= set(re.findall(r"^(\w+)\s", text, re.M)) and abs(sum(shares) - 100) < 0.5
