"""Roofline: would this model run better on the IPU or on a GPU, and why?

Log-log plot (FLOP/s against FLOP/byte) drawn in log10 data coordinates with log-labelled axes:
IPU ceilings (FP16/FP32 peaks; SRAM, exchange, IPU-Link, DDR roofs) and the roofs of the chosen GPUs,
ridge points marked, every ceiling labelled on the plot.  Points: emulated IPU ops (circles sized by share
of run time, coloured by the level that bounds them), the GPU roofline *bounds* of the same ops (triangles,
hollow: not measurements), what-if DDR spills (crosses) and measured kernels imported from a PyTorch
profiler trace (stars; FLOP/s bars at the right edge when the trace has no byte counts).
All numbers come from :mod:`popvision_lite.analysis.roofline`.

What is drawn is composed, not inherited: one ``RooflineCeilingsItem`` per device (``gui/items/``), one
``CeilingLabelsItem`` holding every ceiling label and placing them clear of the points, the point scatters
of ``drawing.py: OpPoints``, the read-outs of ``tooltips.py``.  The view owns them, the controls, the table
and the selection.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, QThreadPool
from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QDoubleSpinBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSplitter,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from popvision_lite import devices
from popvision_lite.analysis import roofline as rl
from popvision_lite.analysis.run_totals import run_totals
from popvision_lite.analysis.torch_trace import kernel_table, load_torch_trace, report_text
from popvision_lite.errors import PopvisionError
from popvision_lite.gui import theme
from popvision_lite.gui.items.ceiling_labels import CeilingLabelsItem
from popvision_lite.gui.items.fitted_legend import FittedLegend
from popvision_lite.gui.items.menu_on_demand import plot_kwargs
from popvision_lite.gui.items.power_of_ten_axis import PowerOfTenAxis
from popvision_lite.gui.items.roofline_ceilings import RooflineCeilingsItem
from popvision_lite.gui.plot_cache import keep_drawing
from popvision_lite.gui.state.resolve import select_op
from popvision_lite.gui.text import plain_label, show_warning
from popvision_lite.gui.theme import GPU_COLORS, IPU_COLOR
from popvision_lite.gui.views.roofline import drawing
from popvision_lite.gui.views.roofline.drawing import OpPoints
from popvision_lite.gui.views.roofline.table import RooflineTableModel
from popvision_lite.gui.views.roofline.tooltips import point_tooltip
from popvision_lite.gui.views.verdict_panel import document_verdict, small_pass
from popvision_lite.gui.workers import Worker

DEFAULT_CHECKED = ("a100-80gb", "h100-sxm")
RING_KEYS = ("selected", "selected:line", "linked", "linked:line")  # highlight items, not data points
_RINGS = ("selected", "linked")


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
        self._hovered: int | None = None
        self._hover_key: str | None = None
        self.ceiling_labels: CeilingLabelsItem | None = None
        self.unplaced_labels: list[str] = []
        self._gpu_ids = devices.list_devices("gpu")
        bar = self._build_controls()
        self._build_plot()
        self._build_table()
        self._arrange(bar)
        document.selection.changed.connect(self._on_selection)
        if hasattr(document, "verdict_choice_changed"):  # the Summary panel's GPU choice: same verdict here
            document.verdict_choice_changed.connect(self._fill_summary)
        theme.notifier.changed.connect(self._restyle)
        self.refresh()

    def _restyle(self, *_):
        """Labels sit on patches of the plot background and measured points take its foreground: redraw."""
        if self.analysis is not None:
            self._draw()

    # ------------------------------------------------------------------ building
    def _build_controls(self) -> QHBoxLayout:
        """GPUs to compare with, the what-if SRAM capacity, the PyTorch trace import."""
        bar = QHBoxLayout()
        bar.addWidget(QLabel("Compare with:"))
        self.gpu_boxes: dict[str, QCheckBox] = {}
        for gid in self._gpu_ids:
            # short name on the box (A100 ...), the full one in its tooltip: with full names the toolbar
            # alone needs over 1024 px
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

        return bar

    def _build_plot(self) -> None:
        """The log-log plot (powers-of-ten axes), its legend and the hover read-out."""
        self.plot = pg.PlotWidget(**plot_kwargs(axisItems={"bottom": PowerOfTenAxis("bottom"), "left": PowerOfTenAxis("left")}))
        pi = self.plot.getPlotItem()
        pi.setTitle("Roofline per chip: emulated IPU ops vs GPU roofline bounds and GPU estimates")
        pi.setLabel("bottom", "Operational intensity (FLOP/byte)")
        pi.setLabel("left", "Performance (FLOP/s)")
        for ax in ("bottom", "left"):
            pi.getAxis(ax).setLogMode(True)
            pi.getAxis(ax).enableAutoSIPrefix(False)
        pi.showGrid(x=True, y=True, alpha=0.15)
        pi.getViewBox().sigResized.connect(self._on_resized)  # labels and legend keep their pixel size
        # under the plot, in as many columns as fit, never over the points
        self.legend = FittedLegend(colCount=2)
        pi.layout.addItem(self.legend, 4, 1)
        pi.legend = self.legend  # items added with a name go into it, as with addLegend
        self.hover = pg.TextItem("", anchor=(0, 1), fill=pg.mkBrush(255, 255, 255, 230), color="#000")
        self.hover.setZValue(100)
        self.hover.hide()
        self.points = OpPoints(pi, self._on_points_clicked, self._on_hover)

    def _build_table(self) -> None:
        """The per-op table and the notes line."""
        self.table = QTableView()
        self.table.setSelectionBehavior(QAbstractItemView.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SingleSelection)
        self.table.verticalHeader().hide()
        # widths set once per model from the formatted text (_fit_columns); ResizeToContents re-measured every
        # cell of every row on each layout pass: 300,000 data() calls, 5 s of a headless export of BERT-tiny
        self.table.clicked.connect(self._on_table_click)

        self.notes = plain_label()
        self.notes.setWordWrap(True)
        self.notes.setTextInteractionFlags(Qt.TextSelectableByMouse)


    def _arrange(self, bar: QHBoxLayout) -> None:
        """Plot beside the summary and table; the notes underneath."""
        split = QSplitter(Qt.Horizontal)
        left = QWidget()
        lv = QVBoxLayout(left)
        lv.setContentsMargins(0, 0, 0, 0)
        lv.addWidget(self.plot, 1)
        self.offplot = QLabel()  # ceilings whose labels found no free place on the plot
        self.offplot.setWordWrap(True)
        # its line is kept when hidden: the plot's height must not follow the placement, which follows the plot's
        # height (a label without room at one height shows the line, the plot shrinks, the label fits, the line
        # hides, the plot grows ...: a relayout and two placements on every visit of the tab)
        keep = self.offplot.sizePolicy()
        keep.setRetainSizeWhenHidden(True)
        self.offplot.setSizePolicy(keep)
        self.offplot.hide()
        lv.addWidget(self.offplot)
        split.addWidget(left)
        right = QWidget()
        rv = QVBoxLayout(right)
        rv.setContentsMargins(0, 0, 0, 0)
        self.summary = QLabel()
        self.summary.setTextFormat(Qt.RichText)
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

    # ------------------------------------------------------------------ drawing
    def _draw(self):
        """Everything from ``self.analysis`` (and the imported trace): ceilings, points, legend, ranges,
        labels, the highlight, the summary and notes."""
        a = self.analysis
        pi = self.plot.getPlotItem()
        pi.clear()
        self.legend.clear()
        self.points.scatter.clear()
        pi.addItem(self.hover, ignoreBounds=True)
        lx0, lx1 = self._xr = drawing.x_range(a, self.measured)
        ly0, ly1 = drawing.y_range(a, self.measured)
        self._draw_ceilings(lx0, lx1, ly0)
        self.points.draw_ops(a, self.whatif_box.isChecked())
        self.points.legend_levels(self.legend, a)
        if self.measured is not None:
            self.points.draw_measured(self.measured, self.measured_name, lx1)
        self._fit_legend()
        pi.setXRange(lx0, lx1, padding=0)
        pi.setYRange(ly0, ly1, padding=0)
        self._place_labels()
        self._highlight()
        # the log axes with their grid lines (~15 ms a paint each): drawn once, not again on each visit of the tab
        keep_drawing(pi.getAxis("bottom"), pi.getAxis("left"))
        self._fill_summary()
        trace = (f"Trace {self.measured_name}: {getattr(self, 'trace_report', '')}. "
                 if self.measured is not None else "")
        # how the points' bounds (each op's own dominant time) relate to the run's bottleneck: in the full-width
        # notes line, not the summary column, whose every wrapped line took height from the plot
        self.notes.setText(self._bottleneck_relation() + trace + "Notes: " + " · ".join(a.notes))

    def _bottleneck_relation(self) -> str:
        """'Ops' time by own bound: ...; run bottleneck compute (Summary): the same. ' (empty for a stand-in
        profile without steps)."""
        try:
            rt = run_totals(self.document.profile)
        except (AttributeError, KeyError, TypeError, ValueError):
            return ""
        rel = rl.bottleneck_relation(self.analysis, rt.bottleneck)
        return rel + " " if rel else ""

    def _draw_ceilings(self, lx0: float, lx1: float, ly0: float) -> None:
        """The IPU's roofline (solid), then each chosen GPU's (dashed), and one item for all their labels."""
        pi = self.plot.getPlotItem()
        a = self.analysis
        self.ceiling_labels = CeilingLabelsItem()
        for r, color, solid in [(a.ipu, IPU_COLOR, True)] + [(g, GPU_COLORS.get(g.device_id, "#444"), False)
                                                               for g in a.gpus]:
            item = RooflineCeilingsItem(r, color, lx0, lx1, solid)
            pi.addItem(item)
            if item.legend_entry is not None:
                self.legend.addItem(*item.legend_entry)
            self.ceiling_labels.add_roofline(item.roof_labels, item.peak_labels, color, lx1)
            # the IPU's ridges are points the labels keep clear of
            self.points.scatter.setdefault("ridges", item.ridges)
        pi.addItem(self.ceiling_labels)

    def _place_labels(self, *_) -> None:
        """Place the ceiling labels clear of every point and other text (after layout, and on resize); name
        the ceilings left without a place under the plot."""
        if self.ceiling_labels is None:
            return
        pi = self.plot.getPlotItem()
        scatters = [sp for k, sp in self.points.scatter.items()
                    if isinstance(sp, pg.ScatterPlotItem) and k.split(":")[0] not in _RINGS]
        fixed = [it for it in pi.items if isinstance(it, pg.TextItem) and it is not self.hover and it.isVisible()]
        x_max = self._xr[1] if hasattr(self, "_xr") else float("inf")
        self.unplaced_labels = list(self.ceiling_labels.place(pi, scatters, x_max, fixed))
        self.offplot.setText("Ceilings without room for a label on the plot: " + "; ".join(self.unplaced_labels)
                             if self.unplaced_labels else "")
        self.offplot.setVisible(bool(self.unplaced_labels))

    def _fill_summary(self, *_):
        """The verdict's answer and what the plotted points add up to (the Summary panel's GPU choice too)."""
        if self.analysis is None:
            return
        self.summary.setText(drawing.summary_html(self.analysis, self._verdict(),
                                                  self.capacity.value() if self.whatif_box.isChecked() else None))

    def _verdict(self):
        """The document's verdict (the Summary panel's object: same GPU, count and cache entry), or None for a
        profile without a run."""
        try:  # a large model pass is estimated by the Summary's panel off the GUI thread: shown once done
            return document_verdict(self.document, compute=small_pass(self.document.profile))
        except (PopvisionError, AttributeError, KeyError, TypeError):
            return None

    def tooltip_for(self, key: str, op_id: int) -> str:
        """The hover read-out of point ``op_id`` of scatter ``key``."""
        return point_tooltip(self.analysis, self.measured, key, op_id)

    def _on_hover(self, key, points):
        # every scatter whose extent holds the mouse gets the hover event: only the one that showed the
        # read-out clears it (else the GPU scatter around an IPU point hid the IPU point's read-out)
        if len(points) == 0:
            if self._hover_key in (key, None):
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

    # ------------------------------------------------------------------ public
    def plot_items(self) -> dict:
        return {"roofline": self.plot.getPlotItem()}

    def tables(self) -> dict:
        """The per-op roofline table (with the TOTAL row) for CSV export, and with an imported trace every
        measured kernel, plotted or not (``plotted``, ``drop_reason``); empty until analysed."""
        if self.analysis is None:
            return {}
        out = {"roofline": self.analysis.table()}
        if self.measured is not None:
            out["measured"] = kernel_table(self.measured)
        return out

    def chosen_gpus(self) -> tuple[str, ...]:
        return tuple(g for g in self._gpu_ids if self.gpu_boxes[g].isChecked())

    # above this many tiles the analysis (which may read and validate the vertices table: 0.3-0.8 s for a
    # one-IPU BERT) runs on a worker thread; every real target (1,472 tiles per IPU) is above it
    SYNC_MAX_TILES = 256

    def _drawn_state(self, key) -> tuple:
        return key, self.whatif_box.isChecked(), id(self.measured)

    def refresh(self, *_):
        gpus = self.chosen_gpus()
        scale = self.capacity.value() / 100.0
        prof = self.document.profile
        key = ("roofline", gpus, round(scale, 6))
        if self.analysis is not None and getattr(self, "_drawn", None) == self._drawn_state(key):
            return  # nothing changed (a resize re-places the labels by itself: sigResized)
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
        self.notes.setText("Computing the roofline…")
        # the result carries its key, and the signals go to bound methods: Qt drops those connections when
        # this view is destroyed (a lambda holding self kept a closed view alive, and called into it)
        w = Worker(lambda task: (key, rl.analyze(prof, gpus, scale)), title="Roofline analysis")
        w.signals.result.connect(self._keyed_analysis_done)
        w.signals.error.connect(self._failed)
        self._analysis_worker = w
        w.start_on(self._pool)

    def _keyed_analysis_done(self, keyed):
        self._analysis_done(*keyed)

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
        self.ceiling_labels = None

    def _show(self, result):
        self.analysis = result
        self._draw()
        self._fill_table()
        self._drawn = self._drawn_state(self._pending_key)

    def import_trace(self, path):
        """Parse a PyTorch trace off the GUI thread; the points appear when done. Returns the worker."""
        self.import_btn.setEnabled(False)
        # connect before starting: a small bad file fails before a later connect() would be seen
        w = Worker(lambda task, p: (load_torch_trace(p), p), str(path), title=f"Importing {path}")
        w.signals.result.connect(self._keyed_trace_loaded)  # bound methods: see refresh()
        w.signals.error.connect(self._trace_failed)
        w.signals.finished.connect(self._trace_import_done)
        self._worker = w
        w.start_on(self._pool)
        return w

    def _keyed_trace_loaded(self, loaded):
        self._trace_loaded(*loaded)

    def _trace_import_done(self):
        self.import_btn.setEnabled(True)

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

    def op_positions(self, op: int) -> list[tuple[str, float, float]]:
        """(scatter key, x, y) of every point drawn for ``op``: its IPU point, each GPU's bound and estimate,
        its what-if spill; in plot (log10) coordinates."""
        out = []
        for key, sp in self.points.scatter.items():
            if key in RING_KEYS or key.startswith("measured") or key == "ridges":
                continue
            if not isinstance(sp, pg.ScatterPlotItem):
                continue
            hit = np.nonzero(sp.data["data"] == op)[0]  # an object array of op ids
            out += [(key, float(sp.data["x"][i]), float(sp.data["y"][i])) for i in hit]
        return out

    def _rings(self, key: str, op, color: str, size: int, width: float) -> None:
        """Rings on every point of ``op`` joined by a thin line (IPU point to each GPU point), under ``key``."""
        pi = self.plot.getPlotItem()
        for k in (key, key + ":line"):
            old = self.points.scatter.pop(k, None)
            if old is not None:
                pi.removeItem(old)
        if self.analysis is None or op is None:
            return
        pos = self.op_positions(int(op))
        if not pos:
            return
        xs = [x for _, x, _ in pos]
        ys = [y for _, _, y in pos]
        ring = pg.ScatterPlotItem(xs, ys, size=size, symbol="o", brush=pg.mkBrush(None), pen=pg.mkPen(color, width=width))
        ring.setZValue(20)
        pi.addItem(ring, ignoreBounds=True)
        self.points.scatter[key] = ring
        ipu = [(x, y) for k, x, y in pos if k == "ipu"]
        if ipu and len(pos) > 1:
            x0, y0 = ipu[0]
            lx, ly = [], []
            for k, x, y in pos:
                if k != "ipu":
                    lx += [x0, x]
                    ly += [y0, y]
            line = pg.PlotDataItem(lx, ly, connect="pairs", pen=pg.mkPen(color, width=1, style=Qt.DashLine))
            line.setZValue(19)
            pi.addItem(line, ignoreBounds=True)
            self.points.scatter[key + ":line"] = line

    def _highlight(self):
        self._rings("selected", self._selected, "#00a0ff", 24, 3)

    def link_hover(self, op) -> None:
        """Hovering one of an op's points rings all of them (IPU and every GPU), or clears the rings (None)."""
        self._hovered = op
        self._rings("linked", op, "#ff00cc", 18, 2)

    def _fill_table(self):
        a = self.analysis
        model = RooflineTableModel(a.table(), a.gpus, self.table)
        self.table.setModel(model)
        self._fit_columns(model)
        if self._selected is not None:
            r = model.row_of(self._selected)
            if r is not None:
                self.table.selectRow(r)

    def _on_resized(self, *_) -> None:
        self._fit_legend()
        self._place_labels()

    def _fit_legend(self) -> None:
        # the widget's width, not the view box's: a legend too wide widens the view box it is measured by
        left = self.plot.getPlotItem().getAxis("left").width()
        self.legend.fit_columns(self.plot.width() - left - 24)

    def _fit_columns(self, model) -> None:
        """Every column as wide as its widest text, over ALL rows (each distinct text measured once) and the
        header: Qt's own sizing measures only the first rows, so later, longer op names would be cut."""
        fm = self.table.fontMetrics()
        bold = self.table.font()
        bold.setBold(True)
        fmb = QFontMetrics(bold)
        hfm = self.table.horizontalHeader().fontMetrics()
        pad = 16  # the cell's margins either side of the text
        for c, texts in enumerate(model.text):
            w = max([fm.horizontalAdvance(t) for t in set(texts[:-1])] + [fmb.horizontalAdvance(texts[-1]) if texts else 0]
                    + [hfm.horizontalAdvance(str(model.headerData(c, Qt.Horizontal))) + 8])
            self.table.setColumnWidth(c, w + pad)

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
        show_warning(self, "Import PyTorch trace", msg)
