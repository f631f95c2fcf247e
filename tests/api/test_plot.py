"""pvl.plot.roofline: a matplotlib figure of the same analysis the app draws, every measured kernel inside it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

import popvision_lite as pvl

SAMPLE = Path(__file__).resolve().parents[2] / "sample_profiles" / "bert_tiny_mk2.pvl"


def test_roofline_figure_holds_every_plotted_kernel(tmp_path):
    ev = [{"ph": "X", "cat": "kernel", "name": "fast", "ts": 0, "dur": 10, "args": {"flops": 1e9, "bytes": 1e7}},
          {"ph": "X", "cat": "kernel", "name": "slow", "ts": 20, "dur": 4e7, "args": {"flops": 1e6, "bytes": 1e6}},
          {"ph": "X", "cat": "kernel", "name": "orphan", "ts": 30, "dur": 3}]
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps({"traceEvents": ev}))
    df = pvl.torch_trace(trace)
    assert df.attrs["report"]["read"] == 3 and df.attrs["report"]["plotted"] == 2
    fig = pvl.plot.roofline(SAMPLE, trace=trace, gpus=("a100-80gb",))
    ax = fig.axes[0]
    y0, y1 = ax.get_ylim()
    assert y0 <= df["achieved_flops"].min() and y1 >= df["achieved_flops"].max()
    assert "3 kernels read, 2 plotted, 1 dropped" in ax.get_title()
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any("GPU kernels (measured)" in t for t in labels) and any("A100" in t for t in labels)
    out = tmp_path / "roof.png"
    fig.savefig(out)
    assert out.stat().st_size > 20_000
    xs = np.concatenate([c.get_offsets()[:, 0] for c in ax.collections if len(c.get_offsets())])
    x0, x1 = ax.get_xlim()
    assert (xs >= x0).all() and (xs <= x1).all()


def _trace_with_drops(tmp_path) -> Path:
    """A trace whose report is long: kernels dropped for several reasons."""
    ev = [{"ph": "X", "cat": "kernel", "name": "fast", "ts": 0, "dur": 10, "args": {"flops": 1e9, "bytes": 1e7}}]
    ev += [{"ph": "X", "cat": "kernel", "name": f"orphan_{i}", "ts": 30 + i, "dur": 3} for i in range(5)]
    ev += [{"ph": "X", "cat": "kernel", "name": "zero", "ts": 90, "dur": 0, "args": {"flops": 1e6}}]
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps({"traceEvents": ev}))
    return trace


def test_roofline_subtitle_stays_inside_the_figure(tmp_path):
    """The trace report under the title (every dropped kernel accounted for) is wrapped to the figure's width,
    not clipped at its edges (issue 46)."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 5), dpi=100)  # a narrow figure: the report is wider than it
    assert pvl.plot.roofline(SAMPLE, trace=_trace_with_drops(tmp_path), gpus=("a100-80gb",), ax=ax) is fig
    fig.canvas.draw()
    title = fig.axes[0].title
    box = title.get_window_extent(renderer=fig.canvas.get_renderer())
    w, h = fig.get_size_inches() * fig.dpi
    assert box.x0 >= 0 and box.x1 <= w and box.y1 <= h, (box, w, h)
    assert "dropped" in title.get_text() and title.get_text().count("\n") >= 2
    plt.close(fig)


def test_roofline_in_a_notebook_is_shown_once(tmp_path, monkeypatch):
    """In a Jupyter kernel the returned figure is displayed as the cell's value; left open in pyplot it was shown a
    second time at the end of the cell.  Outside a notebook it stays open for plt.show()."""
    import matplotlib.pyplot as plt

    from popvision_lite import plot

    monkeypatch.setattr(plot, "_in_notebook", lambda: True)
    fig = pvl.plot.roofline(SAMPLE, gpus=("a100-80gb",))
    assert fig.number not in plt.get_fignums()
    fig.savefig(tmp_path / "r.png")  # closed in pyplot, still a whole figure
    assert (tmp_path / "r.png").stat().st_size > 20_000
    monkeypatch.setattr(plot, "_in_notebook", lambda: False)
    fig = pvl.plot.roofline(SAMPLE, gpus=("a100-80gb",))
    assert fig.number in plt.get_fignums()
    plt.close(fig)
