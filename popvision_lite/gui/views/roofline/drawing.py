"""Drawing the Roofline plot: ceilings and ridges of the IPU and the chosen GPUs, the op points, the
what-if spills and measured kernels, and the summary text.  A mixin of :class:`~.view.RooflineView`."""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QBrush, QColor, QPen

from popvision_lite.analysis import roofline as rl
from popvision_lite.analysis.torch_trace import plottable
from popvision_lite.errors import PopvisionError
from popvision_lite.gui import theme
from popvision_lite.gui.text import plain_html
from popvision_lite.gui.theme import GPU_COLORS, IPU_COLOR, LEVEL_COLORS
from popvision_lite.gui.views.verdict_panel import document_verdict
from popvision_lite.units import format_flops, format_seconds, format_usd


def level_brush(level: str) -> QBrush:
    """Fill of an IPU op point bound by ``level`` (and of its legend sample): the level's colour, a little
    lighter and slightly transparent so overlapping points stay visible."""
    return pg.mkBrush(QColor(LEVEL_COLORS.get(level, "#444")).lighter(110).name() + "c0")


def point_pen() -> QPen:
    """Outline of the IPU op points and their legend samples."""
    return pg.mkPen("#222", width=0.8)


class RooflineDrawing:
    """Mixin: draws ``self.analysis`` into ``self.plot``."""

    # ------------------------------------------------------------------ drawing
    def _draw(self):
        a = self.analysis
        pi = self.plot.getPlotItem()
        pi.clear()
        self.legend.clear()
        self._scatter.clear()
        pi.addItem(self.hover, ignoreBounds=True)
        pts = a.points

        # x range: cover points, ridges and some margin
        xs = [r[2] for r in a.ipu.ridges()] + [r[2] for g in a.gpus for r in g.ridges()]
        for col in ["intensity"] + [f"{g.device_id}_intensity" for g in a.gpus]:
            if col in pts:
                v = pts[col].to_numpy(dtype=float)
                xs += list(v[np.isfinite(v) & (v > 0)])
        if self.measured is not None:
            known, _ = plottable(self.measured)
            xs += list(known["intensity"])
        lx0 = math.floor(math.log10(max(min(xs), 1e-3))) - 1
        lx1 = math.ceil(math.log10(max(xs))) + 1
        self._xr = (lx0, lx1)

        ys = [c.value for c in a.ipu.compute] + [c.value for g in a.gpus for c in g.compute]
        ly1 = math.log10(max(ys)) + 0.8  # room above the top ceiling for its label
        ymin = [math.log10(max(ys)) - 6]
        if self.measured is not None:  # every plotted kernel lies inside the axis, not below it
            known, unknown = plottable(self.measured)
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
        ly0 = min(ymin)
        # (log10 peak, x of its ridge, label, prefers the right edge): placed once all are drawn
        self._peak_labels: list[tuple[float, float, pg.TextItem, bool]] = []
        # (log10 bandwidth, first x, last x, label) of the IPU's memory roofs, labelled on the diagonal
        self._roof_labels: list[tuple[float, float, float, pg.TextItem]] = []
        self._draw_roofline(a.ipu, IPU_COLOR, lx0, lx1, ly0, solid=True)
        for k, g in enumerate(a.gpus):
            self._draw_roofline(g, GPU_COLORS.get(g.device_id, "#444"), lx0, lx1, ly0 + 0.3 + 0.5 * k, solid=False)

        # IPU op points
        if len(pts):
            share = pts["share"].to_numpy(dtype=float)
            smax = max(share.max(), 1e-12)
            sizes = 7 + 28 * np.sqrt(share / smax)
            brushes = [level_brush(b) for b in pts["bound"]]
            # no legend entry of its own: one sample cannot show per-point colours (pyqtgraph drew the
            # item's default brush); the "IPU ops bound by ..." entries below are drawn as the points are
            sp = self._add_scatter("ipu", np.log10(pts["intensity"]), np.log10(pts["chip_flops"]),
                                   pts.index.to_numpy(), size=sizes, symbol="o", brush=brushes,
                                   pen=point_pen(), name=None)
            sp.setZValue(10)
            for g in a.gpus:
                gid = g.device_id
                ok = np.isfinite(pts[f"{gid}_intensity"]) & (pts[f"{gid}_flops"] > 0)
                sub = pts[ok]
                self._add_scatter(gid, np.log10(sub[f"{gid}_intensity"]), np.log10(sub[f"{gid}_flops"]),
                                  sub.index.to_numpy(), size=9, symbol="t", brush=None,
                                  pen=pg.mkPen(GPU_COLORS.get(gid, "#444"), width=1.5),
                                  name=f"{g.name.replace('NVIDIA ', '')} bound (not measured)")
                ok = np.isfinite(pts[f"{gid}_intensity"]) & (pts[f"{gid}_est_flops"] > 0)
                sub = pts[ok]
                self._add_scatter(f"{gid}:est", np.log10(sub[f"{gid}_intensity"]),
                                  np.log10(sub[f"{gid}_est_flops"]), sub.index.to_numpy(), size=8, symbol="t",
                                  brush=pg.mkBrush(GPU_COLORS.get(gid, "#444")), pen=pg.mkPen("#222", width=0.5),
                                  name=f"{g.name.replace('NVIDIA ', '')} estimate")
            if self.whatif_box.isChecked():
                sp_ = pts[pts["spills"]]
                if len(sp_):
                    self._add_scatter("whatif", np.log10(sp_["whatif_intensity"]),
                                      np.log10(sp_["whatif_flops"] / sp_["op_chips"]),
                                      sp_.index.to_numpy(), size=11, symbol="x", brush=pg.mkBrush("#d62728"),
                                      pen=pg.mkPen("#d62728"), name="what-if: spills to DDR")
        # the IPU ops' legend: one entry per bound level, with the points' own brush and pen
        for lvl in sorted(set(pts["bound"])) if len(pts) else []:
            key = pg.ScatterPlotItem(size=10, symbol="o", brush=level_brush(lvl), pen=point_pen())
            self.legend.addItem(key, f"IPU ops (emulated) bound by {lvl}")

        # measured kernels (foreground colour of the theme, so they show on light and dark plots)
        fg = theme.colors()["plot_fg"]
        if self.measured is not None:
            known, unknown = plottable(self.measured)
            if len(known):
                self._add_scatter("measured", np.log10(known["intensity"]), np.log10(known["achieved_flops"]),
                                  -1 - known.index.to_numpy(), size=12, symbol="star", brush=pg.mkBrush(fg),
                                  pen=pg.mkPen(fg), name=f"measured: {self.measured_name}")
            if len(unknown):
                self._add_scatter("measured_noint", np.full(len(unknown), lx1 - 0.15),
                                  np.log10(unknown["achieved_flops"]), -1 - unknown.index.to_numpy(), size=18,
                                  symbol="_", brush=pg.mkBrush(fg), pen=pg.mkPen(fg, width=2),
                                  name="measured, intensity unknown (FLOP/s only)")

        self._fit_legend()
        pi.setXRange(lx0, lx1, padding=0)
        pi.setYRange(ly0, ly1, padding=0)
        self._place_peak_labels()
        self._highlight()

        # notes + summary
        self._fill_summary()
        trace = (f"Trace {self.measured_name}: {getattr(self, 'trace_report', '')}. "
                 if self.measured is not None else "")
        self.notes.setText(trace + "Notes: " + " · ".join(a.notes))

    def _fill_summary(self, *_):
        """The verdict's IPU-vs-GPU answer (the one comparison of the whole run, as the Summary states it),
        then what the plotted points add up to, without a second ratio."""
        a = self.analysis
        if a is None:
            return
        t = a.totals
        n = int(t["num_ipus"])
        v = self._verdict()
        lines = []
        if v is not None:
            lines.append(f"<b>IPU vs GPU (the verdict, whole run): {plain_html(v.headline())}.</b>")
        where = f"on {n} IPUs, summed" if n > 1 else "on 1 IPU"
        ipu_time = (f"the ops' time {format_seconds(t['ops_ipu_time_s'])} ({where}; waiting at syncs not "
                    f"included); wall time of the step {format_seconds(t['run_time_s'])}")
        lines.append(f"Points: the ops of one replica's step: {ipu_time}; {format_flops(t['ipu_achieved_flops'])} "
                     f"achieved; IPU cost of the step {format_usd(t['ipu_cost_usd'])}.")
        if a.gpus:
            lines.append("GPU points and table columns: each op alone on one GPU (estimate, and roofline bound as "
                         "an upper limit); the whole-run comparison above adds the GPU count, micro-batch, "
                         "all-reduce and optimizer.")
        if self.whatif_box.isChecked():
            lines.append(f"What-if at {self.capacity.value():.0f}% SRAM: {t['spilling_ops']} op(s) spill to DDR.")
        self.summary.setText("<br>".join(lines))

    def _verdict(self):
        """The document's verdict (the Summary panel's object: same GPU, count and cache entry), or None for a
        profile without a run."""
        try:
            return document_verdict(self.document)
        except (PopvisionError, AttributeError, KeyError, TypeError):
            return None

    def _draw_roofline(self, r: rl.Roofline, color: str, lx0: float, lx1: float, ly_label: float, solid: bool):
        pi = self.plot.getPlotItem()
        top = max(c.value for c in r.compute)
        style = Qt.SolidLine if solid else Qt.DashLine
        first = True
        # bandwidth diagonals up to the top compute peak.  The IPU's roofs are labelled on their lines
        # (they lie decades apart); the GPUs' memory roofs lie a fraction of a decade from each other,
        # so labels on the lines overlapped: the GPU's legend entry names them instead (highest first,
        # the order of its dashed lines from the top)
        short = r.name.replace("NVIDIA ", "")
        gpu_name = f"{short} ({', '.join(b.text() for b in sorted(r.bandwidth, key=lambda b: -b.value))})"
        for b in sorted(r.bandwidth, key=lambda b: -b.value):
            xr = math.log10(top / b.value)
            x = np.array([lx0, xr])
            y = np.log10(b.value) + x
            item = pg.PlotDataItem(x, y, pen=pg.mkPen(color, width=2 if solid else 1.5, style=style),
                                   name=(r.name if solid else gpu_name) if first else None)
            first = False
            pi.addItem(item)
            if not solid:
                continue
            # labelled on its diagonal, somewhere between the left edge and its ridge, above or below the line:
            # where it covers no point and no other label is decided once all is drawn (_place_peak_labels)
            txt = self._label(b.text(), color, anchor=(0, 1), rotateAxis=(1, 1))
            txt.setPos(lx0 + 0.05, np.log10(b.value) + lx0 + 0.05)
            self._roof_labels.append((math.log10(b.value), lx0 + 0.05, xr - 0.3, txt))
            pi.addItem(txt)
        # compute ceilings, horizontal from the first ridge to the right edge
        bw_max = max(b.value for b in r.bandwidth)
        for c in r.compute:
            x0 = math.log10(c.value / bw_max)
            pen = pg.mkPen(color, width=2 if solid else 1.5, style=style if c.value == top else Qt.DotLine)
            pi.addItem(pg.PlotDataItem([x0, lx1], [math.log10(c.value)] * 2, pen=pen))
            # the GPU's name as its legend entry shows it (not the spec id); the IPU's lines are the solid ones
            label = c.text() if solid else f"{r.name.replace('NVIDIA ', '')} {c.text()}"
            t = self._label(label, color, anchor=(1, 1) if solid else (0, 1))
            t.setPos(lx1 - 0.05 if solid else x0 + 0.05, math.log10(c.value))
            # IPU labels prefer the right edge, GPU labels the start of their line; where exactly (above or
            # below the line, how far along) is decided once every roofline is drawn (_place_peak_labels)
            self._peak_labels.append((math.log10(c.value), x0 + 0.05, t, solid))
            pi.addItem(t)
        # ridge points
        rx = [math.log10(x) for _, _, x, _ in r.ridges()]
        ry = [math.log10(y) for _, _, _, y in r.ridges()]
        tips = [f"ridge {cc.label} / {bb.label}: {x:.3g} FLOP/B" for cc, bb, x, _ in r.ridges()]
        ridge = pg.ScatterPlotItem(rx, ry, size=8, symbol="d", brush=pg.mkBrush(color), pen=pg.mkPen("#000"),
                                   data=tips, hoverable=True, tip=lambda x, y, data: data)
        pi.addItem(ridge)
        self._scatter.setdefault("ridges", ridge)

    @staticmethod
    def _label(text: str, color: str, anchor=(0, 1), rotateAxis=None) -> pg.TextItem:
        """A ceiling label on a translucent patch of the plot background, so the lines and points it lies
        over do not strike through it."""
        bg = QColor(theme.colors()["plot_bg"])
        bg.setAlpha(215)
        kw = {} if rotateAxis is None else {"rotateAxis": rotateAxis, "angle": 0}
        t = pg.TextItem(text, color=color, anchor=anchor, fill=pg.mkBrush(bg), **kw)
        t.setZValue(15)  # above every line and point (points 10), below the selection ring and the hover text
        return t

    def _add_scatter(self, key, x, y, ids, size, symbol, brush, pen, name):
        sp = pg.ScatterPlotItem(x=np.asarray(x, dtype=float), y=np.asarray(y, dtype=float), data=np.asarray(ids),
                                size=size, symbol=symbol, pen=pen, brush=brush if brush is not None else pg.mkBrush(None),
                                hoverable=True, tip=None, name=name)
        sp.sigClicked.connect(self._on_points_clicked)
        sp.sigHovered.connect(lambda item, points, ev, k=key: self._on_hover(k, points))
        self.plot.getPlotItem().addItem(sp)
        self._scatter[key] = sp
        return sp


class RooflineTooltips:
    """Mixin: the hover text of every point."""

    # ------------------------------------------------------------------ tooltips
    def tooltip_for(self, key: str, op_id: int) -> str:
        a = self.analysis
        if key.startswith("measured"):
            # by key, never attribute access: ``o.cat`` is pandas' categorical accessor, not the column
            o = self.measured.loc[-1 - int(op_id)]
            inten = "unknown" if not np.isfinite(o["intensity"]) else f"{o['intensity']:.3g} FLOP/B"
            op = o.get("op", "") if hasattr(o, "get") else ""
            op_line = f"\nlaunched by {op}" if isinstance(op, str) and op else ""
            return (f"{o['name']}\nmeasured GPU kernel ({o['cat']}), {format_seconds(o['dur_s'])}{op_line}\n"
                    f"{format_flops(o['achieved_flops'])}, intensity {inten}\nFLOPs from {o['flops_from']}")
        o = a.ops.loc[int(op_id)]
        lines = [f"{o['name']}  ({o.type}, {o.precision})", f"FLOPs {o.flops:,.0f}"]
        if key == "ipu":
            lines += [f"IPU (emulated): {format_seconds(o.ipu_time_s)}, {100 * o.share:.1f}% of run",
                      f"achieved {format_flops(o.achieved_flops)} = {100 * o.efficiency:.0f}% of roof",
                      f"intensity {o.intensity:.3g} FLOP/B vs {o.level}; bound by {o.bound}"]
        elif key == "whatif":
            lines += [f"what-if: {o.working_set_bytes:,.0f} B do not fit; streamed from DDR",
                      f"time {format_seconds(o.whatif_time_s)} (emulated {format_seconds(o.ipu_time_s)})"]
        else:
            key = key.split(":")[0]  # "a100-80gb:est" -> the estimate points of that GPU
            g = next(g for g in a.gpus if g.device_id == key)
            lines += [f"{g.name} roofline BOUND (not a measurement)",
                      f"time >= {format_seconds(o[f'{key}_time_s'])}, {o[f'{key}_bound']}-bound",
                      f"estimate {format_seconds(o[f'{key}_est_time_s'])} ({o[f'{key}_est_bound']}-bound, "
                      f"IPU/GPU {o[f'{key}_est_speedup']:.2f}x)",
                      f"intensity {o[f'{key}_intensity']:.3g} FLOP/B (min bytes {o.min_bytes:,.0f})",
                      f"IPU / GPU time = {o[f'{key}_speedup']:.2f}x"]
        return "\n".join(lines)

    def _on_hover(self, key, points):
        # every scatter whose extent holds the mouse gets the hover event: only the one that showed the
        # read-out clears it (else the GPU scatter around an IPU point hid the IPU point's read-out)
        if len(points) == 0:
            if getattr(self, "_hover_key", None) in (key, None):
                self._hover_key = None
                self.hover.hide()
                self.link_hover(None)
            return
        self._hover_key = key
        p = points[0]
        self.hover.setText(self.tooltip_for(key, p.data()))
        self.hover.setPos(p.pos())
        self.hover.show()
        self.link_hover(None if key.startswith("measured") else int(p.data()))
