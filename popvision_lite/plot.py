"""Plots for notebooks and scripts with matplotlib (no Qt): the same analysis the app draws.

``pvl.plot.roofline(profile, trace="trace.json")`` returns a matplotlib Figure of the roofline: the IPU's
ceilings (solid) and each GPU's (dashed) as :func:`popvision_lite.analysis.roofline.analyze` computes them, the
emulated IPU ops sized by their share of the run, each GPU's estimated points, and the measured kernels of a
PyTorch profiler trace.  Every kernel is accounted for: the figure's subtitle carries the trace report
("N kernels read, M plotted, K dropped (why)") and :func:`popvision_lite.analysis.torch_trace.kernel_table`
lists them one by one.  matplotlib is an optional dependency (``pip install popvision-lite[notebook]``).
"""

from __future__ import annotations

import math
import textwrap

import numpy as np

from popvision_lite import api_args
from popvision_lite.analysis import roofline as rl
from popvision_lite.analysis.torch_trace import load_torch_trace, plottable, report_text
from popvision_lite.errors import ArgumentTypeError, ConfigError
from popvision_lite.profile.reader import open_profile
from popvision_lite.profile.run_record import record_of
from popvision_lite.units import format_flops

IPU_COLOR = "#1f77b4"
GPU_COLORS = ("#d62728", "#2ca02c", "#9467bd", "#8c564b")


def _pyplot():
    try:
        import matplotlib

        if matplotlib.get_backend().lower() in ("", "agg") or not _has_display():
            matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise ConfigError("pvl.plot needs matplotlib: pip install 'popvision-lite[notebook]'") from e
    return plt


def _has_display() -> bool:
    import os

    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY") or os.environ.get("MPLBACKEND"))


def _draw_roof(ax, r: rl.Roofline, x: np.ndarray, color: str, dashed: bool) -> None:
    """FP16 roofs of ``r``, one line per memory level under the FP16 peak; one legend entry names them all."""
    style = "--" if dashed else "-"
    levels = sorted(r.bandwidth, key=lambda c: -c.value)
    label = f"{r.name}: {format_flops(r.peak('fp16'))}; " + ", ".join(b.text() for b in levels)
    for k, b in enumerate(levels):
        y = r.attainable(x, "fp16", level=b.key)
        ax.plot(x, y, style, color=color, lw=1.2 if dashed else 1.8, alpha=1.0 - 0.15 * k,
                label=label if k == 0 else None)


def roofline(profile, trace=None, gpus=rl.DEFAULT_GPUS, ax=None, title: str | None = None):
    """The roofline of ``profile`` (a path or an open profile) as a matplotlib Figure; ``trace``: a PyTorch
    profiler trace (path, or the DataFrame of :func:`popvision_lite.torch_trace`) whose kernels are drawn as
    measured points; ``ax``: draw into this Axes instead of a new figure."""
    gpus = rl.gpu_list(gpus)
    if trace is not None and not hasattr(trace, "columns"):
        api_args.path(trace, "trace")
    if ax is not None and not hasattr(ax, "figure"):
        raise ArgumentTypeError(f"ax must be a matplotlib Axes or None, got {type(ax).__name__}")
    api_args.text(title, "title", none_ok=True)
    mine = api_args.profile(profile)
    plt = _pyplot()
    p = open_profile(profile) if mine else profile
    try:
        a = rl.analyze(p, gpus=gpus)
        name = record_of(p).model if hasattr(p, "run") else ""
    finally:
        if mine:
            p.close()
    measured = None
    if trace is not None:
        measured = trace if hasattr(trace, "columns") else load_torch_trace(trace)
    mine_fig = ax is None
    if ax is None:
        fig, ax = plt.subplots(figsize=(9, 7), dpi=100)
    else:
        fig = ax.figure
    pts = a.points
    xs = [x for r in (a.ipu, *a.gpus) for *_, x, _ in r.ridges()]
    xs += list(pts["intensity"]) if len(pts) else []
    ys = [c.value for r in (a.ipu, *a.gpus) for c in r.compute]
    ymins = [max(ys) * 1e-6]
    if len(pts):
        ymins.append(float(pts["achieved_flops"].min()))
    known = unknown = None
    if measured is not None:
        known, unknown = plottable(measured)
        xs += list(known["intensity"])
        for col in (known["achieved_flops"], unknown["achieved_flops"]):
            if len(col):
                ymins.append(float(col.min()))
    x0 = 10 ** (math.floor(math.log10(max(min(xs), 1e-3))) - 1)
    x1 = 10 ** (math.ceil(math.log10(max(xs))) + 1)
    x = np.logspace(math.log10(x0), math.log10(x1), 256)
    _draw_roof(ax, a.ipu, x, IPU_COLOR, dashed=False)
    for k, g in enumerate(a.gpus):
        _draw_roof(ax, g, x, GPU_COLORS[k % len(GPU_COLORS)], dashed=True)
    if len(pts):
        share = pts["share"].to_numpy(dtype=float)
        size = 12 + 150 * np.sqrt(share / max(share.max(), 1e-12))
        ax.scatter(pts["intensity"], pts["achieved_flops"], s=size, color=IPU_COLOR, alpha=0.7,
                   edgecolors="#222", linewidths=0.5, label=f"{a.ipu.name} ops (emulated)", zorder=3)
        for k, g in enumerate(a.gpus):
            gi, gf = pts.get(f"{g.device_id}_intensity"), pts.get(f"{g.device_id}_est_flops")
            if gi is not None and gf is not None:
                ok = (gf > 0) & np.isfinite(gi) & (gi > 0)
                ax.scatter(gi[ok], gf[ok], s=18, facecolors="none", edgecolors=GPU_COLORS[k % len(GPU_COLORS)],
                           label=f"{g.name} (estimated)", zorder=3)
    if known is not None:
        ax.scatter(known["intensity"], known["achieved_flops"], s=14, marker="x", color="#333",
                   label="GPU kernels (measured)", zorder=4)
        if len(unknown):
            ax.scatter(np.full(len(unknown), x0 * 1.5), unknown["achieved_flops"], s=14, marker="<",
                       color="#777", label="measured, intensity unknown", zorder=4)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x0, x1)
    ax.set_ylim(min(ymins) / 3, max(ys) * 3)
    ax.set_xlabel("operational intensity (FLOP / byte)")
    ax.set_ylabel("FLOP/s")
    ax.grid(True, which="major", alpha=0.3)
    head = title or f"Roofline: {name} on {a.ipu.name}".strip()
    # the trace report (kernels read, plotted, dropped and why) wrapped to the axes' width: one line of it ran
    # off both edges of the figure (issue 46)
    width = max(40, int(ax.get_position().width * fig.get_figwidth() * 100 / 6.5))  # ~6.5 px per 9 pt character
    sub = ("\n" + textwrap.fill(f"trace: {report_text(measured)}", width)) if measured is not None else ""
    ax.set_title(head + sub, fontsize=9 if sub else 10)
    # below the axes, so it never covers a point
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=1, frameon=False)
    fig.tight_layout()
    if mine_fig and _in_notebook():
        # a notebook shows every open pyplot figure at the end of the cell AND the returned Figure: closed in
        # pyplot, it is shown once (as the returned value); fig.savefig and display(fig) still work
        plt.close(fig)
    return fig


def _in_notebook() -> bool:
    """Whether this runs in a Jupyter kernel (IPython with a kernel app)."""
    import sys

    ip_mod = sys.modules.get("IPython")
    if ip_mod is None:
        return False
    try:
        ip = ip_mod.get_ipython()
    except AttributeError:
        return False
    return ip is not None and "IPKernelApp" in getattr(ip, "config", {})


__all__ = ["roofline"]
