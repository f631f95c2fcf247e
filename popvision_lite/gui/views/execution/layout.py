"""The execution view's widgets and plot items (toolbar, four linked lanes, legend, help overlay).

``build(view)`` creates them as attributes of ``view``; each ``_name(view)`` builder makes one part.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QFont
from PySide6.QtWidgets import (
    QCheckBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QSplitter,
    QVBoxLayout,
)

from popvision_lite.gui import theme
from popvision_lite.gui.items.count_axis import CountAxis
from popvision_lite.gui.items.lane_view_box import LaneViewBox
from popvision_lite.gui.items.tile_axis import TileAxis
from popvision_lite.gui.text import SafeTextBrowser, plain_label
from popvision_lite.gui.theme import STEP_KIND_COLORS, STEP_KIND_LABELS
from popvision_lite.gui.views.execution.navigation import HELP_TEXT, KeyFilter
from popvision_lite.gui.views.execution.phases import make_phase_items
from popvision_lite.profile.schema import STEP_KINDS


def build(view) -> None:
    """Create the view's widgets and plot items (attributes of ``view``) and connect their signals."""
    _frame(view)
    _lanes(view)
    _step_items(view)
    _tile_items(view)
    _chart_items(view)
    make_phase_items(view)
    _legend(view)
    _help(view)
    for vb in (view.phase_vb, view.step_vb, view.tile_vb, view.chart_vb, view.imb_vb):
        vb.sigClicked.connect(lambda x, y, dbl, vb=vb: view._on_click(x, y, dbl, vb))
        vb.sigRangeDrag.connect(view._on_range_drag)
    view.canvas.scene().sigMouseMoved.connect(view._on_mouse_moved)


def _bars(brush, **kw) -> pg.BarGraphItem:
    """An empty BarGraphItem of one colour class (one drawRects call per class)."""
    return pg.BarGraphItem(x0=[], width=[], y0=[], height=[], brush=brush, **kw)


def _frame(view) -> None:
    """Toolbar (time axis, op search), the plot canvas beside the details panel, the status line."""
    lay = QVBoxLayout(view)
    lay.setContentsMargins(2, 2, 2, 2)
    bar = QHBoxLayout()
    view.time_box = QCheckBox("time at device clock")
    view.time_box.setToolTip(f"x axis in seconds at {view.clock_hz / 1e9:.3g} GHz instead of cycles")
    view.time_box.toggled.connect(view.set_time_axis)
    bar.addWidget(view.time_box)
    view.search_edit = QLineEdit()
    view.search_edit.setPlaceholderText("/ search op name (Enter next, Shift+Enter previous)")
    view.search_edit.setClearButtonEnabled(True)
    view.search_edit.textChanged.connect(view.set_search)
    view.search_edit.installEventFilter(view)
    bar.addWidget(view.search_edit, 1)
    lay.addLayout(bar)
    view.drawn_label = QLabel("")  # which replica the lanes show, and how many IPUs the run has
    view.drawn_label.setWordWrap(True)
    lay.addWidget(view.drawn_label)

    split = QSplitter(Qt.Horizontal)
    view.canvas = pg.GraphicsLayoutWidget()
    # axis-aligned rectangles and rasters need no antialiasing (and paint faster without it)
    view.canvas.setAntialiasing(False)
    view.canvas.setFocusPolicy(Qt.StrongFocus)
    view.canvas.setMouseTracking(True)
    view._filter = KeyFilter(view)
    view.canvas.installEventFilter(view._filter)
    view.setFocusProxy(view.canvas)  # W/A/S/D work as soon as the view is shown, not only after a click
    split.addWidget(view.canvas)
    view.info = SafeTextBrowser()
    view.info.setMinimumWidth(240)
    view.info.setHtml("<i>Click a step for details; Shift+drag for a range summary; ? for keys.</i>")
    split.addWidget(view.info)
    split.setStretchFactor(0, 4)
    split.setStretchFactor(1, 1)
    lay.addWidget(split, 1)
    view.status = plain_label("")
    lay.addWidget(view.status)


def _lanes(view) -> None:
    """Four plots in one layout, x axes linked: step lane, tile lanes, cycles per step, tile imbalance."""
    c = view.canvas.ci
    c.setSpacing(2)
    # the training step's phases, named at every zoom (phases.py)
    view.phase_vb = LaneViewBox(zoom_y=False)
    view.phase_plot = c.addPlot(row=0, col=0, viewBox=view.phase_vb)
    view.phase_plot.setFixedHeight(54)
    view.phase_plot.hideAxis("bottom")
    view.phase_plot.getAxis("left").setTicks([[(0.5, "phases")]])
    view.phase_plot.setYRange(0, 1, padding=0)
    view.phase_plot.setMouseEnabled(x=True, y=False)
    view.step_vb = LaneViewBox(zoom_y=False)
    view.step_plot = c.addPlot(row=1, col=0, viewBox=view.step_vb)
    view.step_plot.setMaximumHeight(60)
    view.step_plot.hideAxis("bottom")
    # one sub-lane per IPU (y = ipu / n, IPU 0 at the bottom): name them when there are several
    if view.nipu > 1:
        view.step_plot.getAxis("left").setTicks([[((i + 0.5) / view.nipu, f"IPU {i}") for i in range(view.nipu)]])
        view.step_plot.getAxis("left").setStyle(tickFont=QFont("Sans", 7))
    else:
        view.step_plot.getAxis("left").setTicks([[(0.5, "steps")]])
    view.step_plot.setYRange(0, 1, padding=0)
    view.step_plot.setMouseEnabled(x=True, y=False)
    view.tile_vb = LaneViewBox(zoom_y=True)
    view.tile_axis = TileAxis(view.tpi, view.nipu)
    view.tile_plot = c.addPlot(row=2, col=0, viewBox=view.tile_vb, axisItems={"left": view.tile_axis})
    view.tile_plot.invertY(True)
    view.tile_plot.setLabel("left", "IPU : tile")
    view.tile_plot.hideAxis("bottom")
    view.tile_plot.setMinimumHeight(120)
    view.chart_vb = LaneViewBox(zoom_y=False)
    view.chart_plot = c.addPlot(row=3, col=0, viewBox=view.chart_vb, axisItems={"left": CountAxis("left")})
    view.chart_plot.setMaximumHeight(160)
    view.chart_plot.setMinimumHeight(80)
    view.chart_plot.setLabel("left", "cycles / step")
    view.chart_plot.hideAxis("bottom")
    view.imb_vb = LaneViewBox(zoom_y=False)
    view.imb_plot = c.addPlot(row=4, col=0, viewBox=view.imb_vb)
    view.imb_plot.setMaximumHeight(160)
    view.imb_plot.setMinimumHeight(110)
    view.imb_plot.setLabel("left", "max / mean")
    view.imb_plot.getAxis("left").enableAutoSIPrefix(False)  # its ticks are ratios: never '(x0.001)'

    view.imb_plot.setTitle("tile imbalance of compute steps: busiest tile / mean busy cycles (log scale; "
                           "1 = every tile equally busy)", size="9pt")
    for pl in (view.phase_plot, view.step_plot, view.chart_plot, view.imb_plot):
        pl.setXLink(view.tile_plot)
    for pl in (view.phase_plot, view.step_plot, view.tile_plot, view.chart_plot, view.imb_plot):
        pl.getAxis("left").setWidth(70)
        pl.setMenuEnabled(False)
        pl.hideButtons()
    view.set_time_axis(False)


def _kind_brushes() -> list:
    return [pg.mkBrush(STEP_KIND_COLORS[k]) for k in STEP_KINDS]


def _step_items(view) -> None:
    """Step lane: exact bars per kind, a raster for zoomed out, the selected op's outline, op names."""
    view.step_bars = [_bars(b, pen=pg.mkPen(None)) for b in _kind_brushes()]
    for it in view.step_bars:
        view.step_plot.addItem(it)
    view.step_img = pg.ImageItem()
    view.step_plot.addItem(view.step_img)
    view.step_hl = _bars(pg.mkBrush(None), pen=pg.mkPen("#ffb000", width=2))
    view.step_plot.addItem(view.step_hl)
    view.labels: list[pg.TextItem] = []


def _tile_items(view) -> None:
    """Tile lanes: busy raster + colour bar, exact busy / waiting bars, highlights, IPU boundaries."""
    none_pen = pg.mkPen(None)
    view.tile_img = pg.ImageItem()
    view.tile_img.setLookupTable(theme.busy_lut())
    view.tile_img.setLevels((0, 255))
    view.tile_plot.addItem(view.tile_img)
    view.wait_bars = _bars(pg.mkBrush(theme.wait_color()), pen=none_pen)
    view.tile_plot.addItem(view.wait_bars)
    view.busy_bars = [_bars(b, pen=none_pen) for b in _kind_brushes()]
    for it in view.busy_bars:
        view.tile_plot.addItem(it)
    view.tile_hl = _bars(pg.mkBrush(*theme.HIGHLIGHT_RGBA), pen=none_pen)
    view.tile_plot.addItem(view.tile_hl)
    view.tile_band = _bars(pg.mkBrush(0, 160, 255, 60), pen=pg.mkPen(0, 160, 255, 160))
    view.tile_plot.addItem(view.tile_band)
    view.ipu_lines = []
    for i in range(1, view.nipu):
        ln = pg.InfiniteLine(pos=i * view.tpi, angle=0, pen=pg.mkPen("#555555", width=1))
        view.tile_plot.addItem(ln)
        view.ipu_lines.append(ln)
    view.colorbar = pg.ColorBarItem(values=(0, 100), colorMap=pg.ColorMap(
        np.linspace(0, 1, 255), theme.busy_lut()[:255]), label="tile busy (% of time)", interactive=False,
        width=12)
    view.canvas.ci.addItem(view.colorbar, row=2, col=1)
    view.region = pg.LinearRegionItem(values=(0, 1), brush=pg.mkBrush(0, 120, 255, 40),
                                      pen=pg.mkPen("#0078ff"))  # Shift+drag range
    view.region.setZValue(20)
    view.region.hide()
    view.tile_plot.addItem(view.region)
    view.region.sigRegionChangeFinished.connect(view._on_region_done)


def _chart_items(view) -> None:
    """Cycles per step stacked by kind; the imbalance as one horizontal segment per step (or bucket): a
    single PlotCurveItem with a connect array, in log10 of max / mean over a reference line at 1 (balanced)."""
    view.chart_bars = [_bars(b, pen=pg.mkPen(None), name=STEP_KIND_LABELS[k])
                       for b, k in zip(_kind_brushes(), STEP_KINDS, strict=True)]
    for it in view.chart_bars:
        view.chart_plot.addItem(it)
    view.imb_base = pg.InfiniteLine(pos=0.0, angle=0, pen=pg.mkPen("#888888", width=1, style=Qt.DashLine))
    view.imb_plot.addItem(view.imb_base)
    view.imb_curve = pg.PlotCurveItem([], [], pen=pg.mkPen(STEP_KIND_COLORS["compute"], width=2))
    view.imb_plot.addItem(view.imb_curve)


def _legend(view) -> None:
    """The kind legend in its own row under the plots (so exported images carry it too), with dedicated
    sample items: the drawn ones are hidden at some zoom levels, and a hidden item shows as disabled."""
    view.legend = pg.LegendItem(colCount=len(STEP_KINDS) + 1, sampleType=None)
    colors = [STEP_KIND_COLORS[k] for k in STEP_KINDS] + [theme.wait_color()]
    view._legend_samples = [pg.BarGraphItem(x0=[0], width=[1], height=[1], brush=pg.mkBrush(c), pen=pg.mkPen(None))
                            for c in colors]
    for it, name in zip(view._legend_samples, [STEP_KIND_LABELS[k] for k in STEP_KINDS] + ["waiting at sync"],
                        strict=True):
        view.legend.addItem(it, name)
    view.canvas.ci.addItem(view.legend, row=5, col=0)


def _help(view) -> None:
    """The key help overlay (``?``)."""
    view.help = QLabel(HELP_TEXT, view.canvas)
    view.help.setStyleSheet("QLabel { background: rgba(255,255,255,235); color: #111; "
                            "border: 1px solid #888; padding: 8px; }")
    view.help.adjustSize()
    view.help.move(90, 20)
    view.help.hide()
