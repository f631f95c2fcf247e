"""The execution view's widgets and plot items (toolbar, four linked lanes, legend, help overlay).

``build(view)`` creates them as attributes of ``view``; each ``_name(view)`` builder makes one part.  What
is drawn in the lanes are the items of ``gui/items/`` (each with its own inputs, one job each): the phase
band, the step lane and its op names, the tile lanes, the highlights, the per-step charts and the folded-span
overlays.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
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
from popvision_lite.gui.items.fold_overlay import FoldOverlayItem
from popvision_lite.gui.items.imbalance import ImbalanceItem
from popvision_lite.gui.items.lane_axis import LaneAxis
from popvision_lite.gui.items.lane_view_box import LaneViewBox
from popvision_lite.gui.items.phase_band import PhaseBandItem
from popvision_lite.gui.items.step_cycles import StepCyclesItem
from popvision_lite.gui.items.step_highlight import StepHighlightItem
from popvision_lite.gui.items.step_labels import StepLabelsItem
from popvision_lite.gui.items.step_lane import StepLaneItem
from popvision_lite.gui.items.tile_axis import TileAxis
from popvision_lite.gui.items.tile_band import TileBandItem
from popvision_lite.gui.items.tile_lanes import TileLanesItem
from popvision_lite.gui.text import SafeTextBrowser, plain_label
from popvision_lite.gui.theme import STEP_KIND_COLORS, STEP_KIND_LABELS
from popvision_lite.gui.views.execution.navigation import HELP_TEXT
from popvision_lite.profile.schema import STEP_KINDS


def step_lane_height(num_ipus: int) -> int:
    """Pixels of the step lane: 60, and up to 160 for many IPUs (one sub-lane each)."""
    return int(min(160, max(60, 12 * num_ipus)))


def build(view) -> None:
    """Create the view's widgets and plot items (attributes of ``view``) and connect their signals."""
    _frame(view)
    _lanes(view)
    view.phase_band = PhaseBandItem(view.phase_spans)
    view.phase_plot.addItem(view.phase_band)
    if not view.phase_spans:
        view.phase_plot.hide()
    _step_items(view)
    _tile_items(view)
    _chart_items(view)
    _fold_items(view)
    _legend(view)
    _help(view)
    for vb in (view.phase_vb, view.step_vb, view.tile_vb, view.chart_vb, view.imb_vb):
        vb.sigClicked.connect(lambda x, y, dbl, vb=vb: view._on_click(x, y, dbl, vb))
        vb.sigRangeDrag.connect(view._on_range_drag)
    view.canvas.scene().sigMouseMoved.connect(view._on_mouse_moved)


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
    """Four plots in one layout, x axes linked: step lane, tile lanes, cycles per step, tile imbalance.  The lanes
    have no context menu, so their view boxes are made without one (a ViewBoxMenu is built otherwise, then
    dropped)."""
    c = view.canvas.ci
    c.setSpacing(2)
    # the training step's phases, named at every zoom (phases.py)
    view.phase_vb = LaneViewBox(zoom_y=False, enableMenu=False)
    view.phase_plot = c.addPlot(row=0, col=0, viewBox=view.phase_vb)
    view.phase_plot.setFixedHeight(54)
    view.phase_plot.hideAxis("bottom")
    view.phase_plot.getAxis("left").setTicks([[(0.5, "phases")]])
    view.phase_plot.setYRange(0, 1, padding=0)
    view.phase_plot.setMouseEnabled(x=True, y=False)
    view.step_vb = LaneViewBox(zoom_y=False, enableMenu=False)
    # one sub-lane per IPU (y = ipu / n), named as far as the lane's pixels allow; y grows down, so IPU 0 is at
    # the top as in the tile lanes below
    view.step_plot = c.addPlot(row=1, col=0, viewBox=view.step_vb, axisItems={"left": LaneAxis(view.nipu)})
    view.step_plot.invertY(True)
    view.step_plot.setMaximumHeight(step_lane_height(view.nipu))
    view.step_plot.hideAxis("bottom")
    view.step_plot.setYRange(0, 1, padding=0)
    view.step_plot.setMouseEnabled(x=True, y=False)
    view.tile_vb = LaneViewBox(zoom_y=True, enableMenu=False)
    view.tile_axis = TileAxis(view.tpi, view.nipu)
    view.tile_plot = c.addPlot(row=2, col=0, viewBox=view.tile_vb, axisItems={"left": view.tile_axis})
    view.tile_plot.invertY(True)
    view.tile_plot.setLabel("left", "IPU : tile")
    view.tile_plot.hideAxis("bottom")
    view.tile_plot.setMinimumHeight(120)
    view.chart_vb = LaneViewBox(zoom_y=False, enableMenu=False)
    view.chart_plot = c.addPlot(row=3, col=0, viewBox=view.chart_vb, axisItems={"left": CountAxis("left")})
    view.chart_plot.setMaximumHeight(160)
    view.chart_plot.setMinimumHeight(80)
    view.chart_plot.setLabel("left", "cycles / step")
    view.chart_plot.hideAxis("bottom")
    view.imb_vb = LaneViewBox(zoom_y=False, enableMenu=False)
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


def _step_items(view) -> None:
    """Step lane: the steps (bars or raster), the selected op's outline, op names."""
    view.step_lane = StepLaneItem(view.index, view.nipu, view.profile.stored_table("steps") if view.nipu > 1 else None)
    view.step_plot.addItem(view.step_lane)
    view.step_hl = StepHighlightItem(view.index, 1.0, pg.mkBrush(None), pg.mkPen("#ffb000", width=2))
    view.step_plot.addItem(view.step_hl)
    view.step_labels = StepLabelsItem(view.index, view.names, view.nipu)
    view.step_plot.addItem(view.step_labels)


def _tile_items(view) -> None:
    """Tile lanes: busy raster or exact bars + colour bar, highlights, IPU boundaries, the range."""
    view.tile_lanes = TileLanesItem(view.profile, view.index, view.ntiles)
    view.tile_plot.addItem(view.tile_lanes)
    view.tile_hl = StepHighlightItem(view.index, float(view.ntiles), pg.mkBrush(*theme.HIGHLIGHT_RGBA), pg.mkPen(None))
    view.tile_plot.addItem(view.tile_hl)
    view.tile_band = TileBandItem()
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
    """Cycles per step stacked by kind; the imbalance over a reference line at 1 (balanced)."""
    view.cycles = StepCyclesItem()
    view.chart_plot.addItem(view.cycles)
    view.imb_base = pg.InfiniteLine(pos=0.0, angle=0, pen=pg.mkPen("#888888", width=1, style=Qt.DashLine))
    view.imb_plot.addItem(view.imb_base)
    view.imbalance = ImbalanceItem()
    view.imb_plot.addItem(view.imbalance)


def _fold_items(view) -> None:
    """Stretches the profile does not store, over the step lane, the tile lanes (with notes) and the chart."""
    view.folds = []
    for plot, lo, hi in ((view.step_plot, 0.0, 1.0), (view.tile_plot, -0.5, view.ntiles + 0.5),
                         (view.chart_plot, 0.0, 1e15)):
        fold = FoldOverlayItem(view.phase_spans, lo, hi, view.clock_hz, notes=plot is view.tile_plot)
        plot.addItem(fold, ignoreBounds=True)
        view.folds.append(fold)


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
