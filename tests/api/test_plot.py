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
