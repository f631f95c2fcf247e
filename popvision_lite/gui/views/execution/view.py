"""Execution view: the BSP compute / sync / exchange timeline of a run, at any scale.

Layout (one GraphicsLayoutWidget, x axes linked, in cycles or in time at the device clock):

* step lane   - the BSP steps coloured by kind; exact rectangles when few are visible, else a
                raster of the share of each kind per pixel column; op names when zoomed in.
* tile lanes  - y = global tile (IPU 0 at the top, IPU boundaries labelled).  Zoomed out: a
                raster of how busy each row of tiles was (from the stored summaries or an exact
                window, aggregated to pixels).  Zoomed in: exact rectangles, busy (kind colour)
                then waiting at the sync (grey), one BarGraphItem per colour class.
                Double-click an IPU to expand it to its tiles, again to collapse.
* per-step    - compute / exchange / sync cycles per step (per bucket when zoomed out) and
                the tile imbalance (max / mean busy) of compute steps.

Level of detail: every redraw reads only what is visible, bounded by the pixel size
(see popvision_lite.analysis.execution).  Items are rebased to the view start
(``setPos(origin)`` + small local coordinates) to avoid float artefacts on long runs.

Keys (Perfetto / Tracy conventions): W/S zoom at the cursor, A/D pan, Ctrl+wheel zoom,
wheel scrolls tiles, Shift+wheel zooms tiles, drag pans, Shift+drag selects a range,
F fits the selection, 0 resets, M marks, / searches (Enter / Shift+Enter next / previous),
? shows help.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QEvent, QObject, QRectF, Qt, QTimer, Signal
from PySide6.QtGui import QFont
from PySide6.QtWidgets import (
    QCheckBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QSplitter,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from popvision_lite.analysis import execution as ex
from popvision_lite.analysis import selection as sel
from popvision_lite.gui import theme
from popvision_lite.profile.schema import STEP_KINDS

KIND_COLORS = {
    "compute": "#3b75af",
    "sync": "#e8862a",
    "exchange_internal": "#3a9a48",
    "exchange_global": "#8c5bb5",
    "stream_copy": "#c0392b",
}
KIND_LABELS = {
    "compute": "compute",
    "sync": "sync",
    "exchange_internal": "exchange (on IPU)",
    "exchange_global": "exchange (inter-IPU)",
    "stream_copy": "stream copy",
}
WAIT_COLOR = "#c8c8c8"
HIGHLIGHT_COLOR = (255, 200, 0, 90)
ZOOM_STEP = 0.8      # W zooms to 80 % of the width, S to 1 / 0.8
PAN_STEP = 0.2       # A / D pan by 20 % of the width
DEBOUNCE_MS = 25
LABEL_MIN_PX = 70    # op names on steps at least this wide
MAX_LABELS = 80
SYNC_RANGE_CELLS = 4_000_000  # range summaries with more step x tile cells read exact data off-thread
EXACT_MIN_ROW_PX = 3.0

HELP_TEXT = """<b>Execution view keys</b><br>
<table cellspacing=4>
<tr><td><b>W</b> / <b>S</b></td><td>zoom in / out at the cursor</td></tr>
<tr><td><b>A</b> / <b>D</b></td><td>pan left / right</td></tr>
<tr><td>Ctrl+wheel</td><td>zoom time at the cursor</td></tr>
<tr><td>wheel / Shift+wheel</td><td>scroll / zoom tiles (vertical)</td></tr>
<tr><td>drag</td><td>pan</td></tr>
<tr><td>Shift+drag</td><td>select a range (summary on the right)</td></tr>
<tr><td>click</td><td>step details; selects its op in other views</td></tr>
<tr><td>double-click</td><td>expand / collapse an IPU to its tiles</td></tr>
<tr><td><b>F</b></td><td>fit the selection (range, op or step)</td></tr>
<tr><td><b>0</b></td><td>reset the view</td></tr>
<tr><td><b>M</b></td><td>mark the cursor position</td></tr>
<tr><td><b>/</b></td><td>search ops; Enter / Shift+Enter next / previous</td></tr>
<tr><td><b>?</b></td><td>this help</td></tr>
</table>"""


def _kind_brushes():
    return [pg.mkBrush(KIND_COLORS[k]) for k in STEP_KINDS]


# waiting bars at fine zoom: light grey on the light theme, dark grey on the dark one (a light grey
# glared on the dark background)
WAIT_COLORS = {"light": WAIT_COLOR, "dark": "#4a4a4a"}
# busy colour map ends (idle, fully busy) per theme: light theme pale grey -> deep blue; dark theme
# near-black (just above the plot background, so tiles with steps stay distinct from 'no step')
# -> bright sky blue, so idle areas recede and busy ones stand out on either background
BUSY_ENDS = {"light": ((236, 236, 236), (24, 62, 130)), "dark": ((30, 32, 38), (120, 200, 255))}


def wait_color(name: str | None = None) -> str:
    return WAIT_COLORS[name or theme.current()]


def _busy_lut(name: str | None = None) -> np.ndarray:
    """Idle -> busy colours of theme ``name`` in entries 0..254; 255 = no step (transparent)."""
    lo, hi = (np.array(c, dtype=np.float64) for c in BUSY_ENDS[name or theme.current()])
    t = np.linspace(0, 1, 255)[:, None] ** 0.8
    rgb = (lo + (hi - lo) * t).astype(np.uint8)
    lut = np.zeros((256, 4), dtype=np.uint8)
    lut[:255, :3] = rgb
    lut[:255, 3] = 255
    return lut


def util_to_index(util: np.ndarray) -> np.ndarray:
    """Busy fraction (nan = no step) -> uint8 LUT index (fast ImageItem path, no float rescale)."""
    t = np.multiply(util, 254.0, dtype=np.float32)
    np.clip(t, 0.0, 254.0, out=t)
    out = np.empty(util.shape, dtype=np.uint8)
    with np.errstate(invalid="ignore"):
        out[...] = t
    out[np.isnan(util)] = 255
    return out


class TileAxis(pg.AxisItem):
    """Left axis of the tile lanes: "IPU n" at IPU starts when zoomed out, tile ids when zoomed in."""

    def __init__(self, tiles_per_ipu: int, num_ipus: int, **kw):
        super().__init__("left", **kw)
        self.tpi = max(1, tiles_per_ipu)
        self.nipu = num_ipus

    def tickValues(self, minVal, maxVal, size):
        minVal, maxVal = min(minVal, maxVal), max(minVal, maxVal)  # the lanes' y is inverted
        span = maxVal - minVal
        if span > 1.5 * self.tpi or (self.nipu > 1 and span > 0.6 * self.tpi):
            first = max(0, int(np.floor(minVal / self.tpi)))
            last = min(self.nipu, int(np.ceil(maxVal / self.tpi)) + 1)
            centres = [i * self.tpi + self.tpi / 2 for i in range(first, last)]
            step = max(1, int(np.ceil(len(centres) / max(size / 18, 1))))
            return [(self.tpi, centres[::step])]
        return super().tickValues(minVal, maxVal, size)

    def tickStrings(self, values, scale, spacing):
        if spacing == self.tpi:
            return [f"IPU {int(v // self.tpi)}" for v in values]
        out = []
        for v in values:
            t = int(np.floor(v))
            out.append(f"{t // self.tpi}:{t % self.tpi}" if self.nipu > 1 else str(t))
        return out


class _LaneViewBox(pg.ViewBox):
    """ViewBox with trace-viewer mouse conventions, reporting clicks and range drags."""

    sigClicked = Signal(float, float, bool)          # x, y, double
    sigRangeDrag = Signal(float, float, bool)        # x0, x1, finished

    def __init__(self, zoom_y: bool = True, **kw):
        super().__init__(**kw)
        self.zoom_y = zoom_y
        self.setMouseEnabled(x=True, y=zoom_y)

    def wheelEvent(self, ev, axis=None):
        mods = ev.modifiers()
        delta = ev.delta() if hasattr(ev, "delta") else ev.angleDelta().y()
        if not delta:
            ev.ignore()
            return
        s = 1.0015 ** (-delta)
        pos = self.mapToView(ev.pos())
        if mods & Qt.ControlModifier:
            self.scaleBy(x=s, y=1.0, center=pos)
        elif mods & Qt.ShiftModifier and self.zoom_y:
            self.scaleBy(x=1.0, y=s, center=pos)
        elif self.zoom_y:
            (y0, y1) = self.viewRange()[1]
            self.translateBy(y=-np.sign(delta) * 0.1 * (y1 - y0))
        else:
            self.scaleBy(x=s, y=1.0, center=pos)
        ev.accept()

    def mouseDragEvent(self, ev, axis=None):
        if ev.button() == Qt.LeftButton and ev.modifiers() & Qt.ShiftModifier:
            ev.accept()
            a = self.mapToView(ev.buttonDownPos()).x()
            b = self.mapToView(ev.pos()).x()
            self.sigRangeDrag.emit(min(a, b), max(a, b), ev.isFinish())
            return
        if ev.button() == Qt.LeftButton and not self.zoom_y:
            # step lane / chart: pan only in x
            ev.accept()
            d = self.mapToView(ev.lastPos()) - self.mapToView(ev.pos())
            self.translateBy(x=d.x())
            self.sigRangeChangedManually.emit([True, False])
            return
        super().mouseDragEvent(ev, axis)

    def mouseClickEvent(self, ev):
        if ev.button() == Qt.LeftButton:
            p = self.mapToView(ev.pos())
            self.sigClicked.emit(p.x(), p.y(), bool(ev.double()))
            ev.accept()
            return
        super().mouseClickEvent(ev)


class _KeyFilter(QObject):
    def __init__(self, view):
        super().__init__(view)
        self.view = view

    def eventFilter(self, obj, event):
        if event.type() == QEvent.KeyPress and self.view.handle_key(event):
            return True
        return False


class ExecutionView(QWidget):
    """The execution timeline of ``document.profile``; see the module docstring."""

    redrawn = Signal()

    def __init__(self, document, parent=None):
        super().__init__(parent)
        pg.setConfigOptions(imageAxisOrder="row-major")
        self.document = document
        p = document.profile
        self.profile = p
        cache = getattr(document, "cached", None)
        if cache:
            self.index = cache("execution.step_index", ex.StepIndex.from_profile, p)
            self.names = cache("execution.op_names", ex.op_names, p)
        else:
            self.index = ex.StepIndex.from_profile(p)
            self.names = ex.op_names(p)
        t = p.target
        self.tpi = int(t.tiles_per_ipu)
        self.nipu = int(t.num_ipus)
        self.ntiles = int(t.num_tiles)
        self.clock_hz = float(t.clock_hz)
        self.use_time = False
        self.matches = np.zeros(0, np.int64)
        self.match_pos = -1
        self.current_step = -1
        self.highlight_steps = np.zeros(0, np.int64)
        self.selected_tiles = np.zeros(0, np.int64)
        self.markers: list[pg.InfiniteLine] = []
        self.last_mode = ""
        self.last_raster: ex.TileRaster | None = None
        self.last_cells: ex.ExactCells | None = None
        self.last_summary: ex.RangeSummary | None = None
        self._cursor_x: float | None = None
        self._range_worker = None
        self._build_ui()
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(DEBOUNCE_MS)
        self._timer.timeout.connect(self.refresh)
        self.tile_vb.sigRangeChanged.connect(self._schedule)
        self.document.selection.changed.connect(self._on_selection)
        self._closed = False
        closing = getattr(document, "closing", None)
        if closing is not None:
            closing.connect(self._on_closing)
        self.reset_view()
        self.refresh()

    # ------------------------------------------------------------------ UI
    def _build_ui(self):
        lay = QVBoxLayout(self)
        lay.setContentsMargins(2, 2, 2, 2)
        bar = QHBoxLayout()
        self.time_box = QCheckBox("time at device clock")
        self.time_box.setToolTip(f"x axis in seconds at {self.clock_hz / 1e9:.3g} GHz instead of cycles")
        self.time_box.toggled.connect(self.set_time_axis)
        bar.addWidget(self.time_box)
        self.search_edit = QLineEdit()
        self.search_edit.setPlaceholderText("/ search op name (Enter next, Shift+Enter previous)")
        self.search_edit.setClearButtonEnabled(True)
        self.search_edit.textChanged.connect(self.set_search)
        self.search_edit.installEventFilter(self)
        bar.addWidget(self.search_edit, 1)
        lay.addLayout(bar)

        split = QSplitter(Qt.Horizontal)
        self.canvas = pg.GraphicsLayoutWidget()
        # axis-aligned rectangles and rasters need no antialiasing (and paint faster without it)
        self.canvas.setAntialiasing(False)
        self.canvas.setFocusPolicy(Qt.StrongFocus)
        self.canvas.setMouseTracking(True)
        self._filter = _KeyFilter(self)
        self.canvas.installEventFilter(self._filter)
        split.addWidget(self.canvas)
        self.info = QTextBrowser()
        self.info.setMinimumWidth(240)
        self.info.setHtml("<i>Click a step for details; Shift+drag for a range summary; ? for keys.</i>")
        split.addWidget(self.info)
        split.setStretchFactor(0, 4)
        split.setStretchFactor(1, 1)
        lay.addWidget(split, 1)
        self.status = QLabel("")
        lay.addWidget(self.status)

        c = self.canvas.ci
        c.setSpacing(2)
        # step lane
        self.step_vb = _LaneViewBox(zoom_y=False)
        self.step_plot = c.addPlot(row=0, col=0, viewBox=self.step_vb)
        self.step_plot.setMaximumHeight(60)
        self.step_plot.hideAxis("bottom")
        self.step_plot.getAxis("left").setTicks([[(0.5, "steps")]])
        self.step_plot.setYRange(0, 1, padding=0)
        self.step_plot.setMouseEnabled(x=True, y=False)
        # tile lanes
        self.tile_vb = _LaneViewBox(zoom_y=True)
        self.tile_axis = TileAxis(self.tpi, self.nipu)
        self.tile_plot = c.addPlot(row=1, col=0, viewBox=self.tile_vb, axisItems={"left": self.tile_axis})
        self.tile_plot.invertY(True)
        self.tile_plot.setLabel("left", "IPU : tile")
        self.tile_plot.hideAxis("bottom")
        self.tile_plot.setMinimumHeight(120)
        # per-step chart + imbalance
        self.chart_vb = _LaneViewBox(zoom_y=False)
        self.chart_plot = c.addPlot(row=2, col=0, viewBox=self.chart_vb)
        self.chart_plot.setMaximumHeight(170)
        self.chart_plot.setMinimumHeight(80)
        self.chart_plot.setLabel("left", "cycles / step")
        self.chart_plot.hideAxis("bottom")
        self.imb_vb = _LaneViewBox(zoom_y=False)
        self.imb_plot = c.addPlot(row=3, col=0, viewBox=self.imb_vb)
        self.imb_plot.setMaximumHeight(130)
        self.imb_plot.setMinimumHeight(70)
        self.imb_plot.setLabel("left", "max/mean busy")
        self.imb_plot.setTitle("tile imbalance of compute steps", size="8pt")
        for pl in (self.step_plot, self.chart_plot, self.imb_plot):
            pl.setXLink(self.tile_plot)
        for pl in (self.step_plot, self.tile_plot, self.chart_plot, self.imb_plot):
            pl.getAxis("left").setWidth(70)
            pl.setMenuEnabled(False)
            pl.hideButtons()
        self.set_time_axis(False)

        brushes = _kind_brushes()
        none_pen = pg.mkPen(None)
        # step lane items: exact bars per kind, raster for zoomed out, labels
        self.step_bars = [pg.BarGraphItem(x0=[], width=[], y0=[], height=[], brush=b, pen=none_pen)
                          for b in brushes]
        for it in self.step_bars:
            self.step_plot.addItem(it)
        self.step_img = pg.ImageItem()
        self.step_plot.addItem(self.step_img)
        self.step_hl = pg.BarGraphItem(x0=[], width=[], y0=[], height=[], brush=pg.mkBrush(None),
                                       pen=pg.mkPen("#ffb000", width=2))
        self.step_plot.addItem(self.step_hl)
        self.labels: list[pg.TextItem] = []
        # tile lanes
        self.tile_img = pg.ImageItem()
        self.tile_img.setLookupTable(_busy_lut())
        self.tile_img.setLevels((0, 255))
        self.tile_plot.addItem(self.tile_img)
        self.wait_bars = pg.BarGraphItem(x0=[], width=[], y0=[], height=[], brush=pg.mkBrush(wait_color()),
                                         pen=none_pen)
        self.tile_plot.addItem(self.wait_bars)
        self.busy_bars = [pg.BarGraphItem(x0=[], width=[], y0=[], height=[], brush=b, pen=none_pen)
                          for b in brushes]
        for it in self.busy_bars:
            self.tile_plot.addItem(it)
        self.tile_hl = pg.BarGraphItem(x0=[], width=[], y0=[], height=[], brush=pg.mkBrush(*HIGHLIGHT_COLOR),
                                       pen=none_pen)
        self.tile_plot.addItem(self.tile_hl)
        self.tile_band = pg.BarGraphItem(x0=[], width=[], y0=[], height=[], brush=pg.mkBrush(0, 160, 255, 60),
                                         pen=pg.mkPen(0, 160, 255, 160))
        self.tile_plot.addItem(self.tile_band)
        self.ipu_lines = []
        for i in range(1, self.nipu):
            ln = pg.InfiniteLine(pos=i * self.tpi, angle=0, pen=pg.mkPen("#555555", width=1))
            self.tile_plot.addItem(ln)
            self.ipu_lines.append(ln)
        self.colorbar = pg.ColorBarItem(values=(0, 100), colorMap=pg.ColorMap(
            np.linspace(0, 1, 255), _busy_lut()[:255]), label="tile busy (% of time)", interactive=False,
            width=12)
        self.canvas.ci.addItem(self.colorbar, row=1, col=1)
        # per-step chart
        self.chart_bars = [pg.BarGraphItem(x0=[], width=[], y0=[], height=[], brush=b, pen=none_pen,
                                           name=KIND_LABELS[k]) for b, k in zip(brushes, STEP_KINDS, strict=True)]
        for it in self.chart_bars:
            self.chart_plot.addItem(it)
        # one horizontal segment per step (or bucket): a single PlotCurveItem with a connect array
        self.imb_curve = pg.PlotCurveItem([], [], pen=pg.mkPen("#444444", width=2))
        self.imb_plot.addItem(self.imb_curve)
        # range selection
        self.region = pg.LinearRegionItem(values=(0, 1), brush=pg.mkBrush(0, 120, 255, 40),
                                          pen=pg.mkPen("#0078ff"))
        self.region.setZValue(20)
        self.region.hide()
        self.tile_plot.addItem(self.region)
        self.region.sigRegionChangeFinished.connect(self._on_region_done)
        # help overlay
        # legend in its own row under the plots (so exported images carry it too)
        self.legend = pg.LegendItem(colCount=len(STEP_KINDS) + 1, sampleType=None)
        # dedicated sample items: the drawn ones are hidden at some zoom levels, and a hidden item
        # shows as "disabled" in a legend
        self._legend_samples = [pg.BarGraphItem(x0=[0], width=[1], height=[1], brush=pg.mkBrush(c), pen=none_pen)
                                for c in [KIND_COLORS[k] for k in STEP_KINDS] + [wait_color()]]
        for it, name in zip(self._legend_samples, [KIND_LABELS[k] for k in STEP_KINDS] + ["waiting at sync"],
                            strict=True):
            self.legend.addItem(it, name)
        self.canvas.ci.addItem(self.legend, row=4, col=0)
        self.help = QLabel(HELP_TEXT, self.canvas)
        self.help.setStyleSheet("QLabel { background: rgba(255,255,255,235); color: #111; "
                                "border: 1px solid #888; padding: 8px; }")
        self.help.adjustSize()
        self.help.move(90, 20)
        self.help.hide()

        for vb in (self.step_vb, self.tile_vb, self.chart_vb, self.imb_vb):
            vb.sigClicked.connect(lambda x, y, dbl, vb=vb: self._on_click(x, y, dbl, vb))
            vb.sigRangeDrag.connect(self._on_range_drag)
        self.canvas.scene().sigMouseMoved.connect(self._on_mouse_moved)
        self._apply_theme()
        theme.notifier.changed.connect(self._apply_theme)

    def _apply_theme(self, *_):
        theme.restyle_plot(self.canvas)
        fg = theme.colors()["plot_fg"]
        self.imb_curve.setPen(pg.mkPen(fg, width=2))
        lut = _busy_lut()
        self.tile_img.setLookupTable(lut)
        self.colorbar.setColorMap(pg.ColorMap(np.linspace(0, 1, 255), lut[:255]))
        wait = pg.mkBrush(wait_color())
        self.wait_bars.setOpts(brush=wait)
        self._legend_samples[-1].setOpts(brush=wait)

    # ------------------------------------------------------------------ axis / ranges
    def set_time_axis(self, on: bool):
        self.use_time = bool(on)
        ax = self.imb_plot.getAxis("bottom")
        self.imb_plot.showAxis("bottom")
        if self.use_time:
            ax.setScale(1.0 / self.clock_hz)
            ax.setLabel("time", units="s")
            ax.enableAutoSIPrefix(True)
        else:
            ax.setScale(1.0)
            ax.setLabel("cycles since run start", units="cycles")
            ax.enableAutoSIPrefix(True)
        if self.time_box.isChecked() != self.use_time:
            self.time_box.setChecked(self.use_time)

    def x_range(self) -> tuple[float, float]:
        (x0, x1), _ = self.tile_vb.viewRange()
        return float(x0), float(x1)

    def y_range(self) -> tuple[float, float]:
        _, (y0, y1) = self.tile_vb.viewRange()
        return float(y0), float(y1)

    def set_x_range(self, x0: float, x1: float):
        self.tile_vb.setXRange(x0, x1, padding=0)

    def reset_view(self):
        t0, t1 = self.index.t0, self.index.t1
        span = max(t1 - t0, 1)
        self.tile_vb.setLimits(xMin=t0 - 0.05 * span, xMax=t1 + 0.05 * span, minXRange=4,
                               yMin=-0.5, yMax=self.ntiles + 0.5, minYRange=1)
        self.tile_vb.setRange(xRange=(t0, t1), yRange=(0, self.ntiles), padding=0)
        for vb in (self.chart_vb, self.imb_vb):
            vb.enableAutoRange(y=False)

    def _schedule(self, *_):
        if not self._closed:
            self._timer.start()

    def _on_closing(self):
        self._closed = True
        self._timer.stop()
        if self._range_worker is not None:
            self._range_worker.cancel()

    def _pixels(self) -> tuple[int, int]:
        """Pixel size of the tile lanes (a default before the widget is laid out)."""
        w = int(self.tile_vb.width()) if self.tile_vb.width() > 0 else 800
        h = int(self.tile_vb.height()) if self.tile_vb.height() > 0 else 400
        return max(w, 16), max(h, 8)

    # ------------------------------------------------------------------ redraw (LOD)
    def refresh(self):
        """Recompute what is visible and redraw every lane (called debounced on range changes)."""
        self._timer.stop()
        if self._closed:
            return
        x0, x1 = self.x_range()
        y0, y1 = self.y_range()
        w, h = self._pixels()
        origin = float(np.floor(x0))
        self._draw_step_lane(x0, x1, w, origin)
        self._draw_tiles(x0, x1, y0, y1, w, h, origin)
        self._draw_chart(x0, x1, w, origin)
        self._draw_highlight(x0, x1, w, origin)
        self.redrawn.emit()

    def _draw_step_lane(self, x0, x1, w, origin):
        idx = self.index
        i0, i1 = idx.visible(x0, x1)
        for t in self.labels:
            t.hide()
        if i1 - i0 <= 2 * w:
            self.step_img.hide()
            ii = np.arange(i0, i1)
            n = max(1, self.nipu)
            for k, bar in enumerate(self.step_bars):
                m = ii[idx.kind[ii] == k]
                # one sub-lane per IPU (pipelined runs overlap in time); all-IPU steps span the lane
                ip = idx.ipu[m]
                bar.setOpts(x0=idx.start[m] - origin, width=idx.dur[m],
                            y0=np.where(ip >= 0, np.clip(ip, 0, n - 1) / n, 0.0),
                            height=np.where(ip >= 0, 1.0 / n, 1.0))
                bar.setPos(origin, 0)
                bar.show()
            self._draw_labels(ii, x0, x1, w)
        else:
            for bar in self.step_bars:
                bar.hide()
            edges = np.linspace(x0, x1, w + 1)
            cyc = idx.kind_cycles(edges)
            tot = cyc.sum(axis=0)
            frac = np.divide(cyc, tot, out=np.zeros_like(cyc), where=tot > 0)
            rows = 24
            cum = np.cumsum(frac, axis=0)                               # (kinds, cols)
            rf = (np.arange(rows) + 0.5) / rows
            kind_at = (cum[None, :, :] < rf[:, None, None]).sum(axis=1)  # (rows, cols)
            lut = np.array([pg.mkColor(KIND_COLORS[k]).getRgb() for k in STEP_KINDS] + [(0, 0, 0, 0)],
                           dtype=np.uint8)
            kind_at = np.where(tot[None, :] > 0, np.minimum(kind_at, len(STEP_KINDS) - 1), len(STEP_KINDS))
            img = lut[kind_at[::-1]]
            self.step_img.setImage(img, autoLevels=False)
            self.step_img.setPos(origin, 0)
            self.step_img.setRect(QRectF(x0 - origin, 0.0, x1 - x0, 1.0))
            self.step_img.show()

    def _draw_labels(self, ii, x0, x1, w):
        idx = self.index
        px = w / max(x1 - x0, 1e-9)
        wide = ii[(idx.dur[ii] * px >= LABEL_MIN_PX) & (idx.op_id[ii] >= 0)][:MAX_LABELS]
        while len(self.labels) < len(wide):
            t = pg.TextItem(color="#ffffff", anchor=(0, 0.5))
            t.setFont(QFont("Sans", 8))
            self.step_plot.addItem(t)
            self.labels.append(t)
        for t, i in zip(self.labels, wide, strict=False):
            name = self.names.get(int(idx.op_id[i]), "")
            chars = int(idx.dur[i] * px / 6.5)
            text = name if len(name) <= chars else ("…" + name[-max(chars - 1, 1):])
            t.setText(text)
            t.setPos(max(float(idx.start[i]), x0), 0.5)
            t.show()

    def _tile_span(self, y0, y1):
        t0 = max(0, int(np.floor(y0)))
        t1 = min(self.ntiles, int(np.ceil(y1)))
        return t0, max(t0 + 1, t1)

    def _draw_tiles(self, x0, x1, y0, y1, w, h, origin):
        idx = self.index
        t0, t1 = self._tile_span(y0, y1)
        i0, i1 = idx.visible(x0, x1)
        rows_px = h / max(y1 - y0, 1e-9)
        n_cells = (i1 - i0) * (t1 - t0)
        exact = (rows_px >= EXACT_MIN_ROW_PX and n_cells <= ex.MAX_EXACT_RECTS // 2
                 and (i1 - i0) <= w)
        if exact:
            self.last_mode = "rects"
            self.tile_img.hide()
            self.colorbar.hide()  # colours are step kinds here, not a busy scale
            cells = ex.exact_cells(self.profile, idx, i0, i1, t0, t1)
            self.last_cells = cells
            self.last_raster = None
            y = cells.tile.astype(float) + 0.1
            self.wait_bars.setOpts(x0=cells.start + cells.busy - origin, width=cells.wait, y0=y,
                                   height=np.full(len(y), 0.8))
            self.wait_bars.setPos(origin, 0)
            self.wait_bars.show()
            for k, bar in enumerate(self.busy_bars):
                m = (cells.kind == k) & (cells.busy > 0)
                bar.setOpts(x0=cells.start[m] - origin, width=cells.busy[m], y0=y[m],
                            height=np.full(int(m.sum()), 0.8))
                bar.setPos(origin, 0)
                bar.show()
            self.status.setText(f"exact rectangles: {len(cells.step)} step x tile cells, steps {i0}-{i1 - 1}, "
                                f"tiles {t0}-{t1 - 1}")
            return
        self.wait_bars.hide()
        for bar in self.busy_bars:
            bar.hide()
        self.colorbar.show()
        rows = max(1, min(int(h), t1 - t0))
        r = ex.tile_raster(self.profile, idx, x0, x1, w, t0, t1, rows)
        self.last_raster = r
        self.last_cells = None
        self.last_mode = r.source
        # resample non-uniform tile rows onto uniform pixel rows covering [t0, t1)
        ny = max(1, min(rows, int(h)))
        centres = t0 + (np.arange(ny) + 0.5) * (t1 - t0) / ny
        ri = np.clip(np.searchsorted(r.row_tiles, centres, side="right") - 1, 0, r.util.shape[0] - 1)
        same = len(ri) == r.util.shape[0] and bool((ri == np.arange(len(ri))).all())
        img = util_to_index(r.util if same else r.util[ri])
        self.tile_img.setImage(img, autoLevels=False, levels=(0, 255))
        self.tile_img.setPos(origin, 0)
        self.tile_img.setRect(QRectF(r.edges[0] - origin, float(t0), r.edges[-1] - r.edges[0], float(t1 - t0)))
        self.tile_img.show()
        self.status.setText(f"raster from {r.source}: steps {i0}-{max(i0, i1 - 1)}, tiles {t0}-{t1 - 1}, "
                            f"{img.shape[0]}x{img.shape[1]} px")

    def _draw_chart(self, x0, x1, w, origin):
        b = ex.step_bins(self.index, x0, x1, w)
        self.last_bins = b
        base = np.zeros(len(b.left))
        order = [STEP_KINDS.index(k) for k in ("compute", "exchange_internal", "exchange_global",
                                                 "stream_copy", "sync")]
        for k in order:
            hgt = b.per_step_cycles[k]
            self.chart_bars[k].setOpts(x0=b.left - origin, width=b.right - b.left, y0=base.copy(), height=hgt)
            self.chart_bars[k].setPos(origin, 0)
            base = base + hgt
        top = float(np.nanmax(base)) if len(base) else 1.0
        self.chart_vb.setYRange(0, max(top, 1.0) * 1.05, padding=0)
        self.chart_plot.setLabel("left", "cycles / step" if b.per_step else "mean cycles/step")
        m = np.isfinite(b.imbalance)
        xs = np.column_stack([b.left[m], b.right[m]]).ravel() - origin
        ys = np.repeat(b.imbalance[m], 2)
        conn = np.zeros(len(xs), dtype=bool)
        conn[0::2] = True
        self.imb_curve.setData(xs, ys, connect=conn)
        self.imb_curve.setPos(origin, 0)
        fin = b.imbalance[np.isfinite(b.imbalance)]
        hi = float(fin.max()) if len(fin) else 2.0
        self.imb_vb.setYRange(1.0, max(hi, 1.1) * 1.05, padding=0)

    def _draw_tile_band(self, x0, x1, origin):
        """Selected tiles (from the memory view, an op's tiles ...) as bands across the lanes."""
        t = np.unique(self.selected_tiles)
        if len(t) == 0:
            self.tile_band.hide()
            return
        brk = np.flatnonzero(np.diff(t) != 1) + 1
        a = t[np.concatenate([[0], brk])]
        b = t[np.concatenate([brk - 1, [len(t) - 1]])] + 1
        self.tile_band.setOpts(x0=np.zeros(len(a)), width=np.full(len(a), x1 - x0), y0=a.astype(float),
                               height=(b - a).astype(float))
        self.tile_band.setPos(x0, 0)
        self.tile_band.show()

    def _draw_highlight(self, x0, x1, w, origin):
        self._draw_tile_band(x0, x1, origin)
        hs = self.highlight_steps
        if len(hs) == 0:
            self.step_hl.hide()
            self.tile_hl.hide()
            return
        i0, i1 = self.index.visible(x0, x1)
        vis = hs[(hs >= i0) & (hs < i1)]
        starts, ends = self.index.start[vis].astype(float), self.index.end[vis].astype(float)
        if len(vis) > 2 * w:  # merge to pixel resolution
            px = (x1 - x0) / w
            cells = np.unique(((starts - x0) // px).astype(np.int64))
            starts = x0 + cells * px
            ends = starts + px
        self.step_hl.setOpts(x0=starts - origin, width=ends - starts, y0=np.zeros(len(starts)),
                             height=np.ones(len(starts)))
        self.step_hl.setPos(origin, 0)
        self.step_hl.show()
        self.tile_hl.setOpts(x0=starts - origin, width=ends - starts, y0=np.zeros(len(starts)),
                             height=np.full(len(starts), float(self.ntiles)))
        self.tile_hl.setPos(origin, 0)
        self.tile_hl.show()

    # ------------------------------------------------------------------ keys
    def eventFilter(self, obj, event):  # the search box: Enter / Shift+Enter / Escape
        if obj is self.search_edit and event.type() == QEvent.KeyPress:
            if event.key() in (Qt.Key_Return, Qt.Key_Enter):
                self.jump_match(forward=not (event.modifiers() & Qt.ShiftModifier))
                return True
            if event.key() == Qt.Key_Escape:
                self.canvas.setFocus()
                return True
        return super().eventFilter(obj, event)

    def _cursor_or_centre(self) -> float:
        x0, x1 = self.x_range()
        if self._cursor_x is not None and x0 <= self._cursor_x <= x1:
            return self._cursor_x
        return (x0 + x1) / 2

    def zoom(self, factor: float, at: float | None = None):
        x0, x1 = self.x_range()
        c = self._cursor_or_centre() if at is None else at
        self.set_x_range(c - (c - x0) * factor, c + (x1 - c) * factor)

    def pan(self, fraction: float):
        x0, x1 = self.x_range()
        d = fraction * (x1 - x0)
        self.set_x_range(x0 + d, x1 + d)

    def handle_key(self, event) -> bool:
        key, text = event.key(), event.text()
        if key == Qt.Key_W:
            self.zoom(ZOOM_STEP)
        elif key == Qt.Key_S:
            self.zoom(1 / ZOOM_STEP)
        elif key == Qt.Key_A:
            self.pan(-PAN_STEP)
        elif key == Qt.Key_D:
            self.pan(PAN_STEP)
        elif key == Qt.Key_F:
            self.fit_selection()
        elif key == Qt.Key_0:
            self.reset_view()
        elif key == Qt.Key_M:
            self.add_marker(self._cursor_or_centre())
        elif text == "/" or key == Qt.Key_Slash:
            self.search_edit.setFocus()
            self.search_edit.selectAll()
        elif text == "?" or key == Qt.Key_Question:
            self.toggle_help()
        elif key == Qt.Key_Escape:
            self.help.hide()
        elif key in (Qt.Key_Return, Qt.Key_Enter) and len(self.matches):
            self.jump_match(forward=not (event.modifiers() & Qt.ShiftModifier))
        else:
            return False
        return True

    def toggle_help(self):
        self.help.setVisible(not self.help.isVisible())
        self.help.raise_()

    def add_marker(self, x: float):
        ln = pg.InfiniteLine(pos=x, angle=90, pen=pg.mkPen("#d62728", width=1, style=Qt.DashLine),
                             movable=True)
        self.tile_plot.addItem(ln)
        self.markers.append(ln)
        self.status.setText(f"marker at cycle {x:,.0f} ({x / self.clock_hz * 1e6:,.3f} us)")

    def fit_selection(self):
        if self.region.isVisible():
            a, b = self.region.getRegion()
        elif len(self.highlight_steps):
            a = float(self.index.start[self.highlight_steps[0]])
            b = float(self.index.end[self.highlight_steps[-1]])
        elif self.current_step >= 0:
            a = float(self.index.start[self.current_step])
            b = float(self.index.end[self.current_step])
        else:
            return
        pad = 0.02 * max(b - a, 1)
        self.set_x_range(a - pad, b + pad)

    # ------------------------------------------------------------------ search
    def set_search(self, text: str):
        ops = ex.search_ops(self.profile, text)
        self.matches = ex.match_steps(self.index, ops)
        self.match_pos = -1
        self.highlight_steps = self.matches
        self.status.setText(f"search '{text}': {len(ops)} ops, {len(self.matches)} steps" if text else "")
        self._schedule()

    def jump_match(self, forward: bool = True) -> int:
        if len(self.matches) == 0:
            return -1
        cur = self.current_step if self.current_step >= 0 else (
            int(self.index.visible(*self.x_range())[0]) - (1 if forward else 0))
        s = ex.next_match(self.matches, cur, forward)
        self.current_step = s
        self.match_pos = int(np.searchsorted(self.matches, s))
        x0, x1 = self.x_range()
        width = x1 - x0
        a, b = float(self.index.start[s]), float(self.index.end[s])
        if b - a > 0.8 * width:
            width = (b - a) / 0.8
        c = (a + b) / 2
        self.set_x_range(c - width / 2, c + width / 2)
        self.show_step(s)
        self.status.setText(f"match {self.match_pos + 1}/{len(self.matches)}: step {s} "
                            f"{self.names.get(int(self.index.op_id[s]), '')}")
        return s

    # ------------------------------------------------------------------ clicks / range
    def _on_mouse_moved(self, pos):
        if self.tile_vb.sceneBoundingRect().contains(pos) or self.step_vb.sceneBoundingRect().contains(pos) \
                or self.chart_vb.sceneBoundingRect().contains(pos):
            self._cursor_x = float(self.tile_vb.mapSceneToView(pos).x())
            if self.last_raster is not None and self.tile_vb.sceneBoundingRect().contains(pos):
                self._hover_raster(self.tile_vb.mapSceneToView(pos))

    def _hover_raster(self, p):
        r = self.last_raster
        c = int(np.searchsorted(r.edges, p.x(), side="right") - 1)
        row = int(np.searchsorted(r.row_tiles, p.y(), side="right") - 1)
        if 0 <= c < r.util.shape[1] and 0 <= row < r.util.shape[0]:
            self.tile_vb.setToolTip(
                f"tiles {r.row_tiles[row]}-{r.row_tiles[row + 1] - 1}\nbusy {100 * r.util[row, c]:.0f}% of time\n"
                f"busy cycles per step: min {r.bmin[row, c]:.0f} mean {r.bmean[row, c]:.0f} max {r.bmax[row, c]:.0f}")

    def _on_click(self, x, y, double, sender=None):
        if double and sender is self.tile_vb:
            self.toggle_expand(int(np.clip(y, 0, self.ntiles - 1)) // self.tpi)
            return
        ipu = int(np.clip(y, 0, self.ntiles - 1)) // self.tpi if sender is self.tile_vb else None
        s = self.index.step_at(x, ipu)
        if s < 0:
            return
        self.current_step = s
        self.show_step(s)
        op = int(self.index.op_id[s])
        if op >= 0:
            self.document.selection.update(source="execution", op_id=op)

    def toggle_expand(self, ipu: int):
        y0, y1 = self.y_range()
        a, b = ipu * self.tpi, (ipu + 1) * self.tpi
        if abs(y0 - a) < 1 and abs(y1 - b) < 1 and self.nipu > 1:
            self.tile_vb.setYRange(0, self.ntiles, padding=0)
        else:
            self.tile_vb.setYRange(a, b, padding=0)

    def show_step(self, s: int):
        d = ex.step_details(self.profile, self.index, s, self.names)
        f = 1e6 / self.clock_hz
        self.info.setHtml(
            f"<h3>Step {d['step']}</h3><table>"
            f"<tr><td>op</td><td><b>{d['op']}</b> (id {d['op_id']})</td></tr>"
            f"<tr><td>kind</td><td><span style='color:{KIND_COLORS[d['kind']]}'>&#9632;</span> "
            f"{KIND_LABELS[d['kind']]}</td></tr>"
            f"<tr><td>IPU</td><td>{d['ipu']}</td></tr>"
            f"<tr><td>start</td><td>{d['start_cycle']:,} cycles ({d['start_cycle'] * f:,.3f} us)</td></tr>"
            f"<tr><td>end</td><td>{d['end_cycle']:,} cycles</td></tr>"
            f"<tr><td>duration</td><td>{d['cycles']:,} cycles ({d['cycles'] * f:,.3f} us)</td></tr>"
            f"<tr><td>tiles active</td><td>{d['tiles_active']:,} of {self.ntiles:,}</td></tr>"
            f"<tr><td>busy max / mean</td><td>{d['busy_max']:,} / {d['busy_mean']:,.1f} cycles</td></tr>"
            f"<tr><td>bytes in / out</td><td>{d['bytes_in']:,} / {d['bytes_out']:,}</td></tr></table>")

    def _on_range_drag(self, a, b, finished):
        self.region.setRegion((a, b))
        self.region.show()
        if finished:
            self._on_region_done()

    def select_range(self, a: float, b: float):
        """Select cycles [a, b) (as Shift+drag does): shows the summary and writes step_range."""
        self.region.setRegion((a, b))
        self.region.show()
        self._on_region_done()

    def _on_region_done(self, *_):
        if not self.region.isVisible():
            return
        a, b = self.region.getRegion()
        s0, s1 = self.index.visible(a, b)
        if s1 <= s0:
            return
        if self._range_worker is not None:
            self._range_worker.cancel()
            self._range_worker = None
        # small ranges: exact at once; large ones: per tile block from the summaries at once, and
        # the exact busiest tiles / imbalance from a worker thread (the window is read in chunks)
        exact_now = (s1 - s0) * self.ntiles <= SYNC_RANGE_CELLS
        rs = ex.range_summary(self.profile, self.index, s0, s1, names=self.names,
                              max_cells=SYNC_RANGE_CELLS if exact_now else 0)
        self.last_summary = rs
        self._show_summary(rs)
        self.document.selection.update(source="execution", step_range=(int(s0), int(s1)))
        if not rs.exact:
            self._start_exact_summary(s0, s1)

    def _start_exact_summary(self, s0: int, s1: int):
        from popvision_lite.gui.workers import start_task

        profile, index, names = self.profile, self.index, self.names

        def work(task):
            return ex.range_summary(profile, index, s0, s1, names=names, max_cells=None,
                                    progress=lambda f: task.progress(f, "reading busy cycles"))

        def done(rs):
            if self._closed or self.last_summary is None or self.last_summary.step_range != (s0, s1):
                return
            self.last_summary = rs
            self._show_summary(rs)

        w = start_task(work, title=f"Range summary of steps {s0}-{s1 - 1}")
        w.signals.result.connect(done)
        w.signals.progress.connect(
            lambda f, m: self.status.setText(f"range summary: {m} {100 * f:.0f}%") if f >= 0 else None)
        self._range_worker = w

    def _show_summary(self, rs: ex.RangeSummary):
        tot = max(sum(rs.cycles_by_kind.values()), 1)
        f = 1e6 / self.clock_hz
        kinds = "".join(
            f"<tr><td><span style='color:{KIND_COLORS[k]}'>&#9632;</span> {KIND_LABELS[k]}</td>"
            f"<td align=right>{v:,}</td><td align=right>{100 * v / tot:.1f}%</td></tr>"
            for k, v in rs.cycles_by_kind.items())
        ops = "".join(f"<tr><td>{r.name}</td><td align=right>{r.cycles:,}</td></tr>"
                      for r in rs.ops.head(10).itertuples())
        what = "tile" if rs.exact else f"tiles (blocks of {rs.tile_block})"
        busy = "".join(
            f"<tr><td>{r.tile}{'' if r.tiles == 1 else f'-{r.tile + r.tiles - 1}'}</td>"
            f"<td align=right>{r.busy:,.0f}</td></tr>" for r in rs.busiest.head(8).itertuples())
        self.info.setHtml(
            f"<h3>Range: steps {rs.step_range[0]}-{rs.step_range[1] - 1}</h3>"
            f"cycles {rs.cycle_range[0]:,}-{rs.cycle_range[1]:,} "
            f"({(rs.cycle_range[1] - rs.cycle_range[0]) * f:,.2f} us)<br>"
            f"<b>imbalance</b> (max/mean tile busy): {rs.imbalance:.2f}"
            f"{'' if rs.exact else ' (by tile block; exact value being computed)'}"
            f"<h4>Cycles by phase</h4><table>{kinds}</table>"
            f"<h4>Ops in range ({len(rs.ops)})</h4><table>{ops}</table>"
            f"<h4>Busiest {what}</h4><table><tr><td>tile</td><td>busy cycles</td></tr>{busy}</table>")

    # ------------------------------------------------------------------ selection from other views
    def _on_selection(self, state):
        """Another view selected something: highlight its steps, show its range, mark its tiles."""
        if state.source == "execution":
            return
        if state.op_id is not None:
            self.highlight_steps = ex.match_steps(self.index, [state.op_id])
        elif state.prog_id is not None:
            steps = self._cached(("prog_steps", int(state.prog_id)), sel.program_steps, self.profile,
                                 int(state.prog_id))
            self.highlight_steps = np.asarray(steps, dtype=np.int64)
        else:
            self.highlight_steps = np.zeros(0, np.int64)
        hs = self.highlight_steps
        own = (int(hs[0]), int(hs[-1]) + 1) if len(hs) else None
        rng = state.step_range
        if rng is not None and tuple(rng) != own:  # a range of its own, not just the op's extent
            s0, s1 = max(0, rng[0]), min(self.index.n, rng[1])
            if s1 > s0:
                self.region.setRegion((float(self.index.start[s0]), float(self.index.cummax_end[s1 - 1])))
                self.region.show()
        else:
            self.region.hide()
        self.selected_tiles = np.asarray(state.tiles, dtype=np.int64)
        self._schedule()

    def _cached(self, key, fn, *args):
        cache = getattr(self.document, "cached", None)
        return cache(key, fn, *args) if cache else fn(*args)

    # ------------------------------------------------------------------ export
    def plot_items(self) -> dict:
        return {"execution": self.canvas.ci, "steps": self.step_plot, "tiles": self.tile_plot,
                "per_step": self.chart_plot, "imbalance": self.imb_plot}

    def resizeEvent(self, ev):
        super().resizeEvent(ev)
        self._schedule()
