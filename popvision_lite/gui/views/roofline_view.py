"""Roofline: would this model run better on the IPU or on a GPU, and why?

Log-log plot (FLOP/s against FLOP/byte) drawn in log10 data coordinates with log-labelled axes:
IPU ceilings (FP16/FP32 peaks; SRAM, exchange, IPU-Link, DDR roofs) and the roofs of the chosen GPUs,
ridge points marked, every ceiling labelled on the plot.  Points: emulated IPU ops (circles sized by share
of run time, coloured by the level that bounds them), the GPU roofline *bounds* of the same ops (triangles,
hollow: not measurements), what-if DDR spills (crosses) and measured kernels imported from a PyTorch
profiler trace (stars; FLOP/s bars at the right edge when the trace has no byte counts).
All numbers come from :mod:`popvision_lite.analysis.roofline`.
"""

from __future__ import annotations

import math

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPointF, Qt, QThreadPool
from PySide6.QtGui import QColor, QFont
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QDoubleSpinBox,
    QFileDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QMessageBox,
    QPushButton,
    QSplitter,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from popvision_lite import devices
from popvision_lite.analysis import roofline as rl
from popvision_lite.analysis.torch_trace import load_torch_trace, plottable, report_text
from popvision_lite.errors import PopvisionError

_ROOT = QModelIndex()
IPU_COLOR = "#1f77b4"
GPU_COLORS = {"a100-80gb": "#ff7f0e", "h100-sxm": "#2ca02c", "h200": "#9467bd", "v100": "#8c564b"}
LEVEL_COLORS = {"compute": "#d62728", "sram": "#1f77b4", "exchange": "#17becf", "ipu_link": "#e377c2",
                "ddr": "#7f7f7f"}
DEFAULT_CHECKED = ("a100-80gb", "h100-sxm")


_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def power_of_ten_label(log_value: float) -> str:
    """Tick label of log10 value ``log_value``: '10⁻¹', '10⁰', '10¹⁵', or '2·10³' between decades.

    pyqtgraph's log axis mixes plain numbers and powers ('0.1, 1, 10¹, 10²'); every label here has
    the same form."""
    e = math.floor(log_value + 1e-9)
    m = 10 ** (log_value - e)
    power = "10" + str(int(e)).translate(_SUPERSCRIPT)
    return power if abs(m - 1) < 1e-6 else f"{m:.2g}·{power}"


class PowerOfTenAxis(pg.AxisItem):
    """Log-mode axis labelled with powers of ten only."""

    def logTickStrings(self, values, scale, spacing):
        return [power_of_ten_label(float(v) + math.log10(scale)) for v in values]


def _scene_outline(item: pg.TextItem):
    """The text's own (possibly rotated) outline in scene coordinates, without the text document's
    4-px margin (two labels whose margins touch do not cover each other)."""
    return item.textItem.mapToScene(item.textItem.boundingRect().adjusted(3, 3, -3, -3))


def _overlap_area(a, b) -> float:
    if not a.boundingRect().intersects(b.boundingRect()) or not a.intersects(b):
        return 0.0
    pts = [(p.x(), p.y()) for p in a.intersected(b)]
    if len(pts) < 3:
        return 0.0
    return 0.5 * abs(sum(x0 * y1 - x1 * y0 for (x0, y0), (x1, y1) in zip(pts, pts[1:] + pts[:1], strict=True)))


def _fmt_time(s: float) -> str:
    if s is None or not np.isfinite(s):
        return "n/a"
    if s >= 1:
        return f"{s:.3f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3f} ms"
    return f"{s * 1e6:.2f} µs"


def _fmt_cost(c: float) -> str:
    if c is None or not np.isfinite(c):
        return "n/a"
    return f"${c:.2f}" if c >= 0.01 else f"${c:.2e}"


def _faster(ipu_over_gpu: float) -> str:
    """'GPU 2.50x faster' / 'IPU 1.30x faster' from IPU time / GPU time."""
    r = ipu_over_gpu
    if r is None or not np.isfinite(r) or r <= 0:
        return "n/a"
    return f"GPU {r:.2f}x faster" if r >= 1 else f"IPU {1 / r:.2f}x faster"


def _fmt_flops(f: float) -> str:
    if not np.isfinite(f):
        return "n/a"
    for unit, scale in (("PFLOP/s", 1e15), ("TFLOP/s", 1e12), ("GFLOP/s", 1e9), ("MFLOP/s", 1e6)):
        if f >= scale:
            return f"{f / scale:.3g} {unit}"
    return f"{f:.3g} FLOP/s"


class RooflineTableModel(QAbstractTableModel):
    """The per-op table (``RooflineAnalysis.table()``) with a bold TOTAL row at the bottom."""

    def __init__(self, df, gpus, parent=None):
        super().__init__(parent)
        self.df = df
        self.op_ids = df.index.to_numpy()
        cols = [("name", "op", None), ("bound", "bound by", None),
                ("intensity", "FLOP/B", lambda v: f"{v:.3g}" if np.isfinite(v) else ""),
                ("achieved_flops", "IPU achieved", lambda v: _fmt_flops(v) if v > 0 else ""),
                ("ipu_time_s", "IPU time", _fmt_time),
                ("share", "% run", lambda v: f"{100 * v:.1f}%" if np.isfinite(v) else "")]
        for g in gpus:
            short = g.device_id.upper()
            ratio = lambda v: f"{v:.2f}x" if np.isfinite(v) else "n/a"  # noqa: E731
            cols += [(f"{g.device_id}_est_time_s", f"{short} est.", _fmt_time),
                     (f"{g.device_id}_est_speedup", f"IPU/{short} est.", ratio),
                     (f"{g.device_id}_time_s", f"{short} bound", _fmt_time),
                     (f"{g.device_id}_speedup", f"IPU/{short} bound", ratio)]
        cols += [("ipu_cost_usd", "IPU cost/run", _fmt_cost)]
        cols += [(f"{g.device_id}_cost_usd", f"{g.device_id.upper()} cost/run", _fmt_cost) for g in gpus]
        cols += [("spills", "what-if: spills", lambda v: "DDR" if v else "")]
        self.cols = cols
        self.values = [df[c].to_numpy() for c, _, _ in cols]

    def rowCount(self, parent=_ROOT):
        return 0 if parent.isValid() else len(self.op_ids)

    def columnCount(self, parent=_ROOT):
        return 0 if parent.isValid() else len(self.cols)

    def headerData(self, section, orientation, role=Qt.DisplayRole):
        if orientation == Qt.Horizontal and role == Qt.DisplayRole:
            return self.cols[section][1]
        if orientation == Qt.Horizontal and role == Qt.ToolTipRole:
            key = self.cols[section][0]
            if key.endswith("_est_speedup"):
                return "IPU time / estimated GPU time (>1: the GPU estimate is faster)"
            if key.endswith("_est_time_s"):
                return ("GPU estimate: max(FLOPs / (peak x measured GEMM fraction x occupancy), bytes / (HBM x "
                        "measured fraction)) + kernel launch overhead; constants cited in resources/devices")
            if key.endswith("_speedup"):
                return "IPU time / GPU roofline-bound time (>1: the GPU bound is faster). A bound, not a measurement."
            if key.endswith("_time_s") and key != "ipu_time_s":
                return "GPU roofline bound: max(FLOPs / peak, min_bytes / HBM bandwidth); not a measurement"
            if key.endswith("_cost_usd"):
                return ("IPU: wall time x all IPUs x price, shared over ops by time; GPU: estimated time x one GPU x "
                        "price per chip-hour (from resources/devices)")
            if key == "intensity":
                return "operational intensity against the memory level that bounds the op (see 'bound by' / tooltip)"
            if key == "achieved_flops":
                return "FLOPs / emulated time of the op"
            if key == "spills":
                return "ops whose compulsory bytes exceed the SRAM left after always-live data (at the what-if capacity)"
        return None

    def data(self, index, role=Qt.DisplayRole):
        if not index.isValid():
            return None
        r, c = index.row(), index.column()
        key, _, fmt = self.cols[c]
        v = self.values[c][r]
        if role == Qt.DisplayRole:
            if fmt is None:
                return str(v)
            try:
                return fmt(float(v)) if key != "spills" else fmt(bool(v))
            except (TypeError, ValueError):
                return ""
        if role == Qt.FontRole and self.op_ids[r] < 0:
            f = QFont()
            f.setBold(True)
            return f
        if role == Qt.TextAlignmentRole and fmt is not None:
            return int(Qt.AlignRight | Qt.AlignVCenter)
        if role == Qt.UserRole:
            return int(self.op_ids[r])
        return None

    def row_of(self, op_id) -> int | None:
        hits = np.nonzero(self.op_ids == op_id)[0]
        return int(hits[0]) if len(hits) else None


class RooflineView(QWidget):
    SOURCE = "roofline"

    def __init__(self, document, parent=None):
        super().__init__(parent)
        self.document = document
        self.analysis: rl.RooflineAnalysis | None = None
        self._failed_exc: Exception | None = None
        self.measured = None          # DataFrame of imported GPU kernels
        self.measured_name = ""
        self._worker = None
        self._analysis_worker = None
        # own small pool: roofline work (seconds at most) never queues behind other views' long tasks
        self._pool = QThreadPool(self)
        self._pool.setMaxThreadCount(2)
        self._pending_key = None
        self._selected: int | None = None
        self._scatter: dict[str, pg.ScatterPlotItem] = {}
        self._gpu_ids = devices.list_devices("gpu")

        # controls
        bar = QHBoxLayout()
        bar.addWidget(QLabel("Compare with:"))
        self.gpu_boxes: dict[str, QCheckBox] = {}
        for gid in self._gpu_ids:
            # short name on the box (A100 ...), the full one in its tooltip: with full names the toolbar
            # alone needed over 1024 px
            full = devices.load_device(gid).name
            cb = QCheckBox(full.replace("NVIDIA ", "").split()[0])
            cb.setToolTip(f"Draw the {full} roofline and the roofline bounds of the same ops on it")
            cb.setChecked(gid in DEFAULT_CHECKED)
            cb.toggled.connect(self.refresh)
            self.gpu_boxes[gid] = cb
            bar.addWidget(cb)
        bar.addSpacing(12)
        self.whatif_box = QCheckBox("What-if: SRAM at")
        self.whatif_box.setToolTip("Show ops whose data would not fit on chip and fall to the streaming-memory (DDR) roof")
        self.whatif_box.setChecked(True)
        self.whatif_box.toggled.connect(self.refresh)
        self.capacity = QDoubleSpinBox()
        self.capacity.setRange(0.1, 1000.0)
        self.capacity.setValue(100.0)
        self.capacity.setSuffix(" %")
        self.capacity.setToolTip("Tile SRAM as % of the real chip's: ops on tiles that no longer fit, or whose data exceeds the SRAM left after always-live bytes, spill to DDR")
        self.capacity.valueChanged.connect(self.refresh)
        bar.addWidget(self.whatif_box)
        bar.addWidget(self.capacity)
        bar.addStretch(1)
        self.import_btn = QPushButton("Import PyTorch trace…")
        self.import_btn.setToolTip("Plot measured GPU kernels from a torch.profiler Chrome-trace JSON")
        self.import_btn.clicked.connect(self._ask_trace)
        bar.addWidget(self.import_btn)

        # plot
        self.plot = pg.PlotWidget(axisItems={"bottom": PowerOfTenAxis("bottom"), "left": PowerOfTenAxis("left")})
        pi = self.plot.getPlotItem()
        pi.setTitle("Roofline: emulated IPU ops vs GPU roofline bounds and GPU estimates")
        pi.setLabel("bottom", "Operational intensity (FLOP/byte)")
        pi.setLabel("left", "Performance (FLOP/s)")
        for ax in ("bottom", "left"):
            pi.getAxis(ax).setLogMode(True)
            pi.getAxis(ax).enableAutoSIPrefix(False)
        pi.showGrid(x=True, y=True, alpha=0.15)
        pi.getViewBox().sigResized.connect(self._place_gpu_peak_labels)  # labels keep their pixel size
        self.legend = pi.addLegend(offset=(-10, -10))
        self.hover = pg.TextItem("", anchor=(0, 1), fill=pg.mkBrush(255, 255, 255, 230), color="#000")
        self.hover.setZValue(100)
        self.hover.hide()

        # table
        self.table = QTableView()
        self.table.setSelectionBehavior(QAbstractItemView.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SingleSelection)
        self.table.verticalHeader().hide()
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeToContents)
        self.table.clicked.connect(self._on_table_click)

        self.notes = QLabel()
        self.notes.setWordWrap(True)
        self.notes.setTextInteractionFlags(Qt.TextSelectableByMouse)

        split = QSplitter(Qt.Horizontal)
        split.addWidget(self.plot)
        right = QWidget()
        rv = QVBoxLayout(right)
        rv.setContentsMargins(0, 0, 0, 0)
        self.summary = QLabel()
        self.summary.setWordWrap(True)
        rv.addWidget(self.summary)
        rv.addWidget(self.table, 1)
        split.addWidget(right)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)

        lay = QVBoxLayout(self)
        lay.addLayout(bar)
        lay.addWidget(split, 1)
        lay.addWidget(self.notes)

        document.selection.changed.connect(self._on_selection)
        self.refresh()

    # ------------------------------------------------------------------ public
    def plot_items(self) -> dict:
        return {"roofline": self.plot.getPlotItem()}

    def tables(self) -> dict:
        """The per-op roofline table (with the TOTAL row) for CSV export; empty until analysed."""
        return {} if self.analysis is None else {"roofline": self.analysis.table()}

    def chosen_gpus(self) -> tuple[str, ...]:
        return tuple(g for g in self._gpu_ids if self.gpu_boxes[g].isChecked())

    # above this many tiles the analysis (which may read and validate the vertices table: 0.3-0.8 s for a
    # one-IPU BERT) runs on a worker thread; every real target (1,472 tiles per IPU) is above it
    SYNC_MAX_TILES = 256

    def refresh(self, *_):
        gpus = self.chosen_gpus()
        scale = self.capacity.value() / 100.0
        prof = self.document.profile
        key = ("roofline", gpus, round(scale, 6))
        self._pending_key = key
        self._failed_exc = None
        doc = self.document
        has_cache = hasattr(doc, "cached")
        small = int(prof.target.num_tiles) <= self.SYNC_MAX_TILES
        if (has_cache and doc.has_cached(key)) or small:
            try:
                result = doc.cached(key, rl.analyze, prof, gpus, scale) if has_cache else rl.analyze(prof, gpus, scale)
            except PopvisionError as e:
                self._failed(e)
                return
            self._show(result)
            return
        from popvision_lite.gui.workers import Worker

        self.notes.setText("Computing the roofline…")
        w = Worker(lambda task: rl.analyze(prof, gpus, scale), title="Roofline analysis")
        w.signals.result.connect(lambda res, k=key: self._analysis_done(k, res))
        w.signals.error.connect(self._failed)
        self._analysis_worker = w
        self._pool.start(w)

    def _analysis_done(self, key, result):
        if hasattr(self.document, "put_cached"):
            self.document.put_cached(key, result)
        if key == self._pending_key:
            self._show(result)

    def is_ready(self) -> bool:
        """True once the analysis of the current settings has come back (or failed): headless export
        waits for it (the analysis runs on a worker thread for real-size targets)."""
        return self.analysis is not None or self._failed_exc is not None

    def _failed(self, exc):
        self._failed_exc = exc
        self.analysis = None
        self.notes.setText(f"Roofline unavailable: {exc}")
        self.plot.getPlotItem().clear()

    def _show(self, result):
        self.analysis = result
        self._draw()
        self._fill_table()

    def import_trace(self, path):
        """Parse a PyTorch trace off the GUI thread; the points appear when done. Returns the worker."""
        from popvision_lite.gui.workers import Worker

        def work(task, p):
            return load_torch_trace(p)

        self.import_btn.setEnabled(False)
        # connect before starting: a small bad file fails before a later connect() would be seen
        w = Worker(work, str(path), title=f"Importing {path}")
        w.signals.result.connect(lambda df, p=str(path): self._trace_loaded(df, p))
        w.signals.error.connect(self._trace_failed)
        w.signals.finished.connect(lambda: self.import_btn.setEnabled(True))
        self._worker = w
        self._pool.start(w)
        return w

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
        ly1 = math.log10(max(ys)) + 0.5
        ymin = [math.log10(max(ys)) - 6]
        if len(pts):
            ymin.append(float(np.log10(pts["achieved_flops"]).min()) - 0.5)
            for g in a.gpus:  # estimate points sit below their bounds
                v = pts[f"{g.device_id}_est_flops"].to_numpy(dtype=float)
                v = v[v > 0]
                if len(v):
                    ymin.append(float(np.log10(v).min()) - 0.5)
        ly0 = min(ymin)
        self._draw_roofline(a.ipu, IPU_COLOR, lx0, lx1, ly0, solid=True)
        self._gpu_peak_labels: list[tuple[float, float, pg.TextItem]] = []  # (log10 peak, x, label)
        for k, g in enumerate(a.gpus):
            self._draw_roofline(g, GPU_COLORS.get(g.device_id, "#444"), lx0, lx1, ly0 + 0.3 + 0.5 * k, solid=False)

        # IPU op points
        if len(pts):
            share = pts["share"].to_numpy(dtype=float)
            smax = max(share.max(), 1e-12)
            sizes = 7 + 28 * np.sqrt(share / smax)
            brushes = [pg.mkBrush(QColor(LEVEL_COLORS.get(b, "#444")).lighter(110).name() + "c0")
                       for b in pts["bound"]]
            sp = self._add_scatter("ipu", np.log10(pts["intensity"]), np.log10(pts["achieved_flops"]),
                                   pts.index.to_numpy(), size=sizes, symbol="o", brush=brushes,
                                   pen=pg.mkPen("#222", width=0.8), name=f"{a.ipu.name} ops (emulated)")
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
                                  name=f"{g.name.replace('NVIDIA ', '')} estimate (launch + measured fractions)")
            if self.whatif_box.isChecked():
                sp_ = pts[pts["spills"]]
                if len(sp_):
                    self._add_scatter("whatif", np.log10(sp_["whatif_intensity"]), np.log10(sp_["whatif_flops"]),
                                      sp_.index.to_numpy(), size=11, symbol="x", brush=pg.mkBrush("#d62728"),
                                      pen=pg.mkPen("#d62728"), name="what-if: spills to DDR")
        # bound-level colour key as legend entries
        for lvl in sorted(set(pts["bound"])) if len(pts) else []:
            key = pg.ScatterPlotItem(size=9, symbol="o", brush=pg.mkBrush(LEVEL_COLORS.get(lvl, "#444")),
                                     pen=pg.mkPen("#222"))
            self.legend.addItem(key, f"bound by {lvl}")

        # measured kernels (foreground colour of the theme, so they show on light and dark plots)
        try:
            from popvision_lite.gui import theme

            fg = theme.colors()["plot_fg"]
        except (ImportError, KeyError):
            fg = "#000"
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

        pi.setXRange(lx0, lx1, padding=0)
        pi.setYRange(ly0, ly1, padding=0)
        self._place_gpu_peak_labels()
        self._highlight()

        # notes + summary
        t = a.totals
        lines = [f"Whole model (ops): IPU {_fmt_time(t['ops_ipu_time_s'])} on {t['num_ipus']} IPU(s), "
                 f"{_fmt_flops(t['ipu_achieved_flops'])} achieved, cost/run {_fmt_cost(t['ipu_cost_usd'])}."]
        for g in a.gpus:
            gid = g.device_id
            short = g.name.replace("NVIDIA ", "")
            lines.append(f"{short} estimate: {_fmt_time(t[f'{gid}_est_time_s'])} "
                         f"({_faster(t[f'{gid}_est_speedup'])}), cost/run {_fmt_cost(t[f'{gid}_cost_usd'])}; "
                         f"roofline bound {_fmt_time(t[f'{gid}_time_s'])} ({_faster(t[f'{gid}_speedup'])}: "
                         "an upper limit, not an estimate).")
        v = self._verdict(a)
        if v is not None:
            lines.append(f"Verdict (whole run, {v.gpu.chips} GPU(s)): {v.headline()}.")
        if self.whatif_box.isChecked():
            lines.append(f"What-if at {self.capacity.value():.0f}% SRAM: {t['spilling_ops']} op(s) spill to DDR.")
        self.summary.setText("\n".join(lines))
        trace = (f"Trace {self.measured_name}: {getattr(self, 'trace_report', '')}. "
                 if self.measured is not None else "")
        self.notes.setText(trace + "Notes: " + " · ".join(a.notes))

    def _verdict(self, a):
        """The Summary's verdict for the first GPU shown (same cache entry), or None for a profile without a run."""
        if not a.gpus:
            return None
        from popvision_lite.analysis import workload as wl
        from popvision_lite.analysis.verdict import verdict

        prof = self.document.profile
        try:
            gid, n = a.gpus[0].device_id, wl.chips(prof)[0]   # the Summary panel's default: all the run's IPUs
            if hasattr(self.document, "cached"):
                return self.document.cached(("verdict", gid, n), verdict, prof, gid, n)
            return verdict(prof, gid, n)
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
        gpu_name = f"{r.name} ({', '.join(b.text() for b in sorted(r.bandwidth, key=lambda b: -b.value))})"
        above: list[float] = []  # roofs labelled above their line
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
            # label low on its diagonal, from the left edge, inside the visible y range; above the line,
            # or below it when the next higher roof is within 0.3 decades and labelled above (on a small
            # target IPU-Exchange and IPU-Links are 696 vs 640 GB/s: the two labels overlapped)
            higher = [v for v in above if 0 < math.log10(v / b.value) < 0.3]
            below = bool(higher)
            if not below:
                above.append(b.value)
            lx = max(lx0 + 0.3, ly_label + 0.3 - np.log10(b.value))
            lx = max(min(lx, xr - 0.8), lx0 + 0.05)
            txt = pg.TextItem(b.text(), color=color, anchor=(0, 0) if below else (0, 1), angle=0, rotateAxis=(1, 1))
            txt.setPos(lx, np.log10(b.value) + lx)
            pi.addItem(txt)
        # compute ceilings, horizontal from the first ridge to the right edge
        bw_max = max(b.value for b in r.bandwidth)
        for c in r.compute:
            x0 = math.log10(c.value / bw_max)
            pen = pg.mkPen(color, width=2 if solid else 1.5, style=style if c.value == top else Qt.DotLine)
            pi.addItem(pg.PlotDataItem([x0, lx1], [math.log10(c.value)] * 2, pen=pen))
            label = c.text() if solid else f"{r.device_id} {c.text()}"
            if solid:   # IPU labels at the right edge, GPU labels at the start of their line
                t = pg.TextItem(label, color=color, anchor=(1, 1))
                t.setPos(lx1 - 0.05, math.log10(c.value))
            else:  # above or below the line: decided once every GPU is drawn (_place_gpu_peak_labels)
                t = pg.TextItem(label, color=color, anchor=(0, 1))
                t.setPos(x0 + 0.05, math.log10(c.value))
                self._gpu_peak_labels.append((math.log10(c.value), x0 + 0.05, t))
            pi.addItem(t)
        # ridge points
        rx = [math.log10(x) for _, _, x, _ in r.ridges()]
        ry = [math.log10(y) for _, _, _, y in r.ridges()]
        tips = [f"ridge {cc.label} / {bb.label}: {x:.3g} FLOP/B" for cc, bb, x, _ in r.ridges()]
        ridge = pg.ScatterPlotItem(rx, ry, size=8, symbol="d", brush=pg.mkBrush(color), pen=pg.mkPen("#000"),
                                   data=tips, hoverable=True, tip=lambda x, y, data: data)
        pi.addItem(ridge)
        self._scatter.setdefault("ridges", ridge)

    def _place_gpu_peak_labels(self, *_) -> None:
        """Put each GPU peak label (highest first) where it covers no label placed before it: above its
        line at its ridge, else further right along the line past the labels in the way, else the same
        below the line.  Done in pixels, after layout and again on resize (text keeps its pixel size
        while the axes scale).  (H100 / H200 both 989 TFLOP/s, A100 / V100 FP32 19.5 vs 15.7 and
        4 IPUs' 1000 vs the H100's 989 wrote one label over another.)"""
        labels = getattr(self, "_gpu_peak_labels", [])
        pi = self.plot.getPlotItem()
        vb = pi.getViewBox()
        if not labels or vb.width() < 50 or vb.height() < 50:
            return
        vb.updateMatrix()  # a range set just now reaches the view's transform only at the next paint
        mine = {id(t) for _, _, t in labels}
        fixed = [it for it in pi.items
                 if isinstance(it, pg.TextItem) and it is not self.hover and id(it) not in mine and it.isVisible()]
        for it in fixed:  # their transforms follow the view only when painted: bring them up to date
            it.updateTransform(force=True)
        placed = [_scene_outline(it) for it in fixed]
        x_max = self._xr[1] if hasattr(self, "_xr") else float("inf")
        view_box = vb.sceneBoundingRect()

        def put(t, anchor, x, y):
            t.setAnchor(anchor)
            t.setPos(x, y)
            t.updateTransform(force=True)
            return _scene_outline(t)

        for y, x0, t in sorted(labels, key=lambda r: -r[0]):
            tried = []  # (overlap px², anchor, x)
            # from the ridge (above, then below the line), moving right past labels in the way; then
            # right-aligned at the right edge (a long label may not fit after a far-right ridge)
            for anchor, start in (((0, 1), x0), ((0, 0), x0), ((1, 1), x_max - 0.05), ((1, 0), x_max - 0.05)):
                x = start
                for _ in range(6 if anchor[0] == 0 else 1):
                    poly = put(t, anchor, x, y)
                    box = poly.boundingRect()
                    if box.right() > view_box.right() + 1 or box.left() < view_box.left() - 1:  # off the plot
                        tried.append((float("inf"), anchor, x))
                        break
                    areas = [_overlap_area(p, poly) for p in placed]
                    tried.append((sum(areas), anchor, x))
                    block = [p for p, a in zip(placed, areas, strict=True) if a > 4.0]
                    if not block:
                        break
                    right = max(p.boundingRect().right() for p in block)
                    x = max(x, vb.mapSceneToView(QPointF(right + 6, 0)).x())
                if tried[-1][0] <= 4.0 * len(placed) and tried[-1][0] < float("inf") \
                        and not any(_overlap_area(p, poly) > 4.0 for p in placed):
                    break
            _, anchor, x = min(tried, key=lambda r: r[0])  # a free place, else the least covered one
            placed.append(put(t, anchor, x, y))

    def _add_scatter(self, key, x, y, ids, size, symbol, brush, pen, name):
        sp = pg.ScatterPlotItem(x=np.asarray(x, dtype=float), y=np.asarray(y, dtype=float), data=np.asarray(ids),
                                size=size, symbol=symbol, pen=pen, brush=brush if brush is not None else pg.mkBrush(None),
                                hoverable=True, tip=None, name=name)
        sp.sigClicked.connect(self._on_points_clicked)
        sp.sigHovered.connect(lambda item, points, ev, k=key: self._on_hover(k, points))
        self.plot.getPlotItem().addItem(sp)
        self._scatter[key] = sp
        return sp

    # ------------------------------------------------------------------ tooltips
    def tooltip_for(self, key: str, op_id: int) -> str:
        a = self.analysis
        if key.startswith("measured"):
            # by key, never attribute access: ``o.cat`` is pandas' categorical accessor, not the column
            o = self.measured.loc[-1 - int(op_id)]
            inten = "unknown" if not np.isfinite(o["intensity"]) else f"{o['intensity']:.3g} FLOP/B"
            op = o.get("op", "") if hasattr(o, "get") else ""
            op_line = f"\nlaunched by {op}" if isinstance(op, str) and op else ""
            return (f"{o['name']}\nmeasured GPU kernel ({o['cat']}), {_fmt_time(o['dur_s'])}{op_line}\n"
                    f"{_fmt_flops(o['achieved_flops'])}, intensity {inten}\nFLOPs from {o['flops_from']}")
        o = a.ops.loc[int(op_id)]
        lines = [f"{o['name']}  ({o.type}, {o.precision})", f"FLOPs {o.flops:,.0f}"]
        if key == "ipu":
            lines += [f"IPU (emulated): {_fmt_time(o.ipu_time_s)}, {100 * o.share:.1f}% of run",
                      f"achieved {_fmt_flops(o.achieved_flops)} = {100 * o.efficiency:.0f}% of roof",
                      f"intensity {o.intensity:.3g} FLOP/B vs {o.level}; bound by {o.bound}"]
        elif key == "whatif":
            lines += [f"what-if: {o.working_set_bytes:,.0f} B do not fit; streamed from DDR",
                      f"time {_fmt_time(o.whatif_time_s)} (emulated {_fmt_time(o.ipu_time_s)})"]
        else:
            key = key.split(":")[0]  # "a100-80gb:est" -> the estimate points of that GPU
            g = next(g for g in a.gpus if g.device_id == key)
            lines += [f"{g.name} roofline BOUND (not a measurement)",
                      f"time >= {_fmt_time(o[f'{key}_time_s'])}, {o[f'{key}_bound']}-bound",
                      f"estimate {_fmt_time(o[f'{key}_est_time_s'])} ({o[f'{key}_est_bound']}-bound, "
                      f"IPU/GPU {o[f'{key}_est_speedup']:.2f}x)",
                      f"intensity {o[f'{key}_intensity']:.3g} FLOP/B (min bytes {o.min_bytes:,.0f})",
                      f"IPU / GPU time = {o[f'{key}_speedup']:.2f}x"]
        return "\n".join(lines)

    def _on_hover(self, key, points):
        if len(points) == 0:
            self.hover.hide()
            return
        p = points[0]
        self.hover.setText(self.tooltip_for(key, p.data()))
        self.hover.setPos(p.pos())
        self.hover.show()

    # ------------------------------------------------------------------ selection
    def _on_points_clicked(self, item, points, ev=None):
        if len(points) == 0:
            return
        op = int(points[0].data())
        if op >= 0:
            self.select(op)

    def _on_table_click(self, index):
        op = self.table.model().data(index, Qt.UserRole)
        if op is not None and op >= 0:
            self.select(op)

    def select(self, op_id: int):
        """Select ``op_id`` everywhere (as a click on its point does)."""
        doc = self.document
        if hasattr(doc, "cached") and hasattr(doc.profile, "programs"):
            try:
                from popvision_lite.gui.views.selection_resolve import select_op

                select_op(doc, int(op_id), self.SOURCE)
                return
            except (KeyError, AttributeError, ValueError):
                pass
        doc.selection.update(source=self.SOURCE, op_id=int(op_id))

    def _on_selection(self, state):
        self._selected = state.op_id
        self._highlight()
        m = self.table.model()
        if m is not None and state.op_id is not None and state.source != self.SOURCE:
            r = m.row_of(state.op_id)
            if r is not None:
                self.table.selectRow(r)
                self.table.scrollTo(m.index(r, 0))

    def _highlight(self):
        pi = self.plot.getPlotItem()
        old = self._scatter.pop("selected", None)
        if old is not None:
            pi.removeItem(old)
        a, op = self.analysis, self._selected
        if a is None or op is None or op not in a.points.index:
            return
        o = a.points.loc[op]
        xs, ys = [np.log10(o.intensity)], [np.log10(o.achieved_flops)]
        for g in a.gpus:
            xs.append(np.log10(o[f"{g.device_id}_intensity"]))
            ys.append(np.log10(o[f"{g.device_id}_flops"]))
        sel = pg.ScatterPlotItem(xs, ys, size=24, symbol="o", brush=pg.mkBrush(None),
                                 pen=pg.mkPen("#00a0ff", width=3))
        sel.setZValue(20)
        pi.addItem(sel)
        self._scatter["selected"] = sel

    def _fill_table(self):
        a = self.analysis
        model = RooflineTableModel(a.table(), a.gpus, self.table)
        self.table.setModel(model)
        if self._selected is not None:
            r = model.row_of(self._selected)
            if r is not None:
                self.table.selectRow(r)

    # ------------------------------------------------------------------ trace import
    def _ask_trace(self):
        path, _ = QFileDialog.getOpenFileName(self, "Import PyTorch profiler trace", "",
                                              "Chrome trace JSON (*.json *.json.gz *.pt.trace.json);;All files (*)")
        if path:
            self.import_trace(path)

    def _trace_loaded(self, df, path):
        self.show_trace(df, path)

    def show_trace(self, df, path) -> str:
        """Plot the kernels ``df`` (from ``load_torch_trace``) as measured points; returns the import report."""
        from pathlib import Path

        self.measured = df
        self.measured_name = Path(path).name
        self.trace_report = report_text(df)
        if self.analysis is not None:  # else the points are drawn with the analysis when it comes back
            self._draw()
        return f"; trace {self.measured_name}: {self.trace_report}"

    def _trace_failed(self, exc):
        msg = str(exc) if isinstance(exc, PopvisionError) else f"{type(exc).__name__}: {exc}"
        self.notes.setText(f"Trace import failed: {msg}")
        QMessageBox.warning(self, "Import PyTorch trace", msg)
