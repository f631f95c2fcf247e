"""What the Roofline plot draws besides its ceilings (``gui/items/roofline_ceilings.py``) and their labels
(``gui/items/ceiling_labels.py``): the axis ranges, the points (:class:`OpPoints`: emulated IPU ops, the GPU
bounds and estimates of the same ops, what-if spills, measured kernels) and the summary text."""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtGui import QBrush, QColor, QPen

from popvision_lite.analysis import roofline as rl
from popvision_lite.analysis.torch_trace import plottable
from popvision_lite.gui import theme
from popvision_lite.gui.text import plain_html
from popvision_lite.gui.theme import GPU_COLORS, LEVEL_COLORS, PHASE_COLORS
from popvision_lite.units import format_flops, format_seconds, format_usd


def level_brush(level: str) -> QBrush:
    """Fill of an IPU op point bound by ``level`` (and of its legend sample): the part of its own time that bounds
    it in the colour the Summary gives that part (compute / exchange / sync / stream), else the roofline level's;
    a little lighter and slightly transparent so overlapping points stay visible."""
    col = PHASE_COLORS.get(level) or LEVEL_COLORS.get(level, "#444")
    return pg.mkBrush(QColor(col).lighter(110).name() + "c0")


def point_pen() -> QPen:
    """Outline of the IPU op points and their legend samples."""
    return pg.mkPen("#222", width=0.8)


def x_range(a: rl.RooflineAnalysis, measured) -> tuple[int, int]:
    """log10 FLOP/byte range covering every ridge and point, a decade of margin either side."""
    pts = a.points
    xs = [r[2] for r in a.ipu.ridges()] + [r[2] for g in a.gpus for r in g.ridges()]
    for col in ["intensity"] + [f"{g.device_id}_intensity" for g in a.gpus]:
        if col in pts:
            v = pts[col].to_numpy(dtype=float)
            xs += list(v[np.isfinite(v) & (v > 0)])
    if measured is not None:
        known, _ = plottable(measured)
        xs += list(known["intensity"])
    return math.floor(math.log10(max(min(xs), 1e-3))) - 1, math.ceil(math.log10(max(xs))) + 1


def y_range(a: rl.RooflineAnalysis, measured) -> tuple[float, float]:
    """log10 FLOP/s range: room above the top ceiling for its label, down to every point (six decades under
    the top at least)."""
    pts = a.points
    ys = [c.value for c in a.ipu.compute] + [c.value for g in a.gpus for c in g.compute]
    ymin = [math.log10(max(ys)) - 6]
    if measured is not None:  # every plotted kernel lies inside the axis, not below it
        known, unknown = plottable(measured)
        for col in (known["achieved_flops"], unknown["achieved_flops"]):
            if len(col):
                ymin.append(float(np.log10(col.to_numpy(dtype=float)).min()) - 0.5)
    if len(pts):
        ymin.append(float(np.log10(pts["chip_flops"]).min()) - 0.5)
        for g in a.gpus:  # estimate points sit below their bounds
            v = pts[f"{g.device_id}_est_flops"].to_numpy(dtype=float)
            v = v[v > 0]
            if len(v):
                ymin.append(float(np.log10(v).min()) - 0.5)
    return min(ymin), math.log10(max(ys)) + 0.8


def summary_html(a: rl.RooflineAnalysis, verdict, whatif_pct: float | None) -> str:
    """The verdict's IPU-vs-GPU answer (the one comparison of the whole run, as the Summary states it), then
    what the plotted points add up to, without a second ratio."""
    t = a.totals
    n = int(t["num_ipus"])
    lines = []
    if verdict is not None:
        lines.append(f"<b>IPU vs GPU (the verdict, whole run): {plain_html(verdict.headline())}.</b>")
    where = f"on {n} IPUs, summed" if n > 1 else "on 1 IPU"
    ipu_time = (f"the ops' time {format_seconds(t['ops_ipu_time_s'])} ({where}; waiting at syncs not "
                f"included); wall time of the step {format_seconds(t['run_time_s'])}")
    lines.append(f"Points: the ops of one replica's step: {ipu_time}; {format_flops(t['ipu_achieved_flops'])} "
                 f"achieved; IPU cost of the step {format_usd(t['ipu_cost_usd'])}.")
    if a.gpus:
        lines.append("GPU points and table columns: each op alone on one GPU (estimate, and roofline bound as "
                     "an upper limit); the whole-run comparison above adds the GPU count, micro-batch, "
                     "all-reduce and optimizer.")
    if whatif_pct is not None:
        lines.append(f"What-if at {whatif_pct:.0f}% SRAM: {t['spilling_ops']} op(s) spill to DDR.")
    return "<br>".join(lines)


class OpPoints:
    """The point scatters of one plot, by key ("ipu", a GPU id, "<gpu>:est", "whatif", "measured",
    "measured_noint"; the view adds its rings and the IPU's ridges): each point's data is its op id
    (measured kernels: -1 - row).  Clicks go to ``on_click(item, points)``, hovers to ``on_hover(key,
    points)``."""

    def __init__(self, plot_item: pg.PlotItem, on_click, on_hover):
        self.plot_item = plot_item
        self.on_click = on_click
        self.on_hover = on_hover
        self.scatter: dict[str, pg.GraphicsObject] = {}

    def add(self, key, x, y, ids, size, symbol, brush, pen, name) -> pg.ScatterPlotItem:
        sp = pg.ScatterPlotItem(x=np.asarray(x, dtype=float), y=np.asarray(y, dtype=float), data=np.asarray(ids),
                                size=size, symbol=symbol, pen=pen, brush=brush if brush is not None else pg.mkBrush(None),
                                hoverable=True, tip=None, name=name)
        sp.sigClicked.connect(self.on_click)
        sp.sigHovered.connect(lambda item, points, ev, k=key: self.on_hover(k, points))
        self.plot_item.addItem(sp)
        self.scatter[key] = sp
        return sp

    def draw_ops(self, a: rl.RooflineAnalysis, whatif: bool) -> None:
        """IPU op points (sized by share of run time, coloured by their bound), each GPU's bounds (hollow)
        and estimates of the same ops, and the what-if spills (crosses)."""
        pts = a.points
        if not len(pts):
            return
        share = pts["share"].to_numpy(dtype=float)
        sizes = 7 + 28 * np.sqrt(share / max(share.max(), 1e-12))
        # no legend entry of its own: one sample cannot show per-point colours (pyqtgraph drew the
        # item's default brush); the "IPU ops bound by ..." entries (legend_levels) are drawn as the points are
        sp = self.add("ipu", np.log10(pts["intensity"]), np.log10(pts["chip_flops"]), pts.index.to_numpy(),
                      size=sizes, symbol="o", brush=[level_brush(b) for b in pts["bound"]], pen=point_pen(), name=None)
        sp.setZValue(10)
        for g in a.gpus:
            self._draw_gpu(pts, g)
        if whatif:
            sp_ = pts[pts["spills"]]
            if len(sp_):
                self.add("whatif", np.log10(sp_["whatif_intensity"]), np.log10(sp_["whatif_flops"] / sp_["op_chips"]),
                         sp_.index.to_numpy(), size=11, symbol="x", brush=pg.mkBrush("#d62728"),
                         pen=pg.mkPen("#d62728"), name="what-if: spills to DDR")

    def _draw_gpu(self, pts, g) -> None:
        """One GPU's roofline bounds (hollow triangles: not measurements) and estimates of the ops."""
        gid, short = g.device_id, g.name.replace("NVIDIA ", "")
        color = GPU_COLORS.get(gid, "#444")
        sub = pts[np.isfinite(pts[f"{gid}_intensity"]) & (pts[f"{gid}_flops"] > 0)]
        self.add(gid, np.log10(sub[f"{gid}_intensity"]), np.log10(sub[f"{gid}_flops"]), sub.index.to_numpy(),
                 size=9, symbol="t", brush=None, pen=pg.mkPen(color, width=1.5), name=f"{short} bound (not measured)")
        sub = pts[np.isfinite(pts[f"{gid}_intensity"]) & (pts[f"{gid}_est_flops"] > 0)]
        self.add(f"{gid}:est", np.log10(sub[f"{gid}_intensity"]), np.log10(sub[f"{gid}_est_flops"]),
                 sub.index.to_numpy(), size=8, symbol="t", brush=pg.mkBrush(color), pen=pg.mkPen("#222", width=0.5),
                 name=f"{short} estimate")

    @staticmethod
    def legend_levels(legend, a: rl.RooflineAnalysis) -> None:
        """The IPU ops' legend: one entry per bound level, with the points' own brush and pen."""
        pts = a.points
        for lvl in sorted(set(pts["bound"])) if len(pts) else []:
            key = pg.ScatterPlotItem(size=10, symbol="o", brush=level_brush(lvl), pen=point_pen())
            legend.addItem(key, f"IPU ops (emulated) bound by {lvl}")

    def draw_measured(self, measured, name: str, lx1: float) -> None:
        """Measured kernels as stars (foreground colour of the theme, so they show on light and dark plots);
        those without byte counts as FLOP/s bars at the right edge ``lx1``."""
        fg = theme.colors()["plot_fg"]
        known, unknown = plottable(measured)
        if len(known):
            self.add("measured", np.log10(known["intensity"]), np.log10(known["achieved_flops"]),
                     -1 - known.index.to_numpy(), size=12, symbol="star", brush=pg.mkBrush(fg), pen=pg.mkPen(fg),
                     name=f"measured: {name}")
        if len(unknown):
            self.add("measured_noint", np.full(len(unknown), lx1 - 0.15), np.log10(unknown["achieved_flops"]),
                     -1 - unknown.index.to_numpy(), size=18, symbol="_", brush=pg.mkBrush(fg),
                     pen=pg.mkPen(fg, width=2), name="measured, intensity unknown (FLOP/s only)")
