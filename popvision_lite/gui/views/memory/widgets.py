"""The Memory view's widgets: controls, the tile map, memory by tile, one tile's breakdown and variables,
their arrangement, signals and keys.

``build(view)`` creates them as attributes of :class:`~.view.MemoryView`; each ``_name(view)`` builder makes
one part.  The tile map itself is a :class:`~popvision_lite.gui.items.tile_map.TileMapItem`; the tile
layouts it can be drawn in are ``TILE_LAYOUTS`` there."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QHBoxLayout,
    QLabel,
    QSizePolicy,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from popvision_lite.analysis.tile_memory import MEASURES
from popvision_lite.gui import theme
from popvision_lite.gui.items.menu_on_demand import plot_kwargs
from popvision_lite.gui.items.tile_map import TILE_LAYOUTS, TileMapItem
from popvision_lite.gui.table_model import DataFrameModel, make_table_view
from popvision_lite.gui.text import plain_label
from popvision_lite.gui.workers import start_task
from popvision_lite.units import KIB  # plots show KiB (binary, like PopVision), not pyqtgraph's SI kB

LSTEP = "lstep"  # extra measure: not-always-live bytes at the selected liveness step
# columns of TileMemory.variables_on, shown as headers before any tile is picked
# what the tile holds first (its bytes on this tile), so a narrow panel still shows it
VARIABLE_COLUMNS = ("name", "bytes_on_tile", "bytes", "kind", "dtype", "shape", "always_live", "first_lstep",
                    "last_lstep", "var_id")
VAR_HINT = "Click a tile in the map or the bar chart to list the variables stored on it."
TILE_ID_LABEL = "global tile id (IPU × tiles per IPU + tile)"
RESIZE_ROWS = 16  # rows Qt measures for resizeColumnsToContents


def _shortcut(widget, key: str, fn) -> QShortcut:
    sc = QShortcut(QKeySequence(key), widget)
    sc.setContext(Qt.WidgetWithChildrenShortcut)
    sc.activated.connect(fn)
    return sc


def _prefetch_variables(task, tm) -> None:
    """Read (and validate) the variables tables and index them by tile, off the GUI thread, so the
    first tile click does not wait for them."""
    tm.variables_on(0)


def build(view) -> None:
    """Create the Memory view's widgets (attributes of ``view``), arrange them, connect signals and keys."""
    _build_controls(view)
    _build_heatmap(view)
    _build_bar_plot(view)
    _build_tile_panel(view)
    _arrange(view)
    _connect(view)
    _install_shortcuts(view)


def _build_controls(view) -> None:
    """Colour measure, tile layout, the over-capacity outline switch, the hover read-out."""
    view.measure_box = QComboBox()
    view.measures = MEASURES + (LSTEP,)
    for m in view.measures:
        view.measure_box.addItem(view._label_of(m), m)
    view.measure_box.setToolTip("What the colour shows: total, always-live, not-always-live, "
                                "% of tile capacity, or one Poplar memory category")
    view.layout_box = QComboBox()
    view.layout_box.addItems(list(TILE_LAYOUTS))
    view.layout_box.setToolTip("Tile map order: floor plan (tiles in columns as on the chip) "
                               "or a plain grid by tile id")
    view.scale_box = QComboBox()
    view.scale_box.addItem("to tile capacity", "capacity")
    view.scale_box.addItem("to the fullest tile", "fullest")
    view.scale_box.setToolTip("Colour scale: from 0 to the tile's SRAM (a chip 10 % full looks 10 % full), or "
                              "from 0 to the fullest tile (small differences between tiles show)")
    n_over = int(view.tm.over_capacity.sum())
    view.over_box = QCheckBox(f"Outline over-capacity tiles ({n_over:,})")
    # outlines help find a few bad tiles; when most tiles are over they only hide the colours
    view.over_box.setChecked(0 < n_over <= 0.1 * view.tm.num_tiles)
    view.over_box.setToolTip("Draw a magenta outline around tiles whose memory exceeds their SRAM. "
                             "With 'Total' or '%' colouring, tiles over capacity are also coloured "
                             "red to magenta (top of the colour bar)")
    view.hover_label = plain_label("Hover a tile for its memory; click it for details")
    # wraps instead of holding 360 px: at 360 px, with the combo boxes, the view needs 1109 px and the
    # window does not fit a 1024-px screen
    view.hover_label.setWordWrap(True)
    view.hover_label.setMinimumWidth(160)
    view.hover_label.setSizePolicy(QSizePolicy.Expanding, QSizePolicy.Preferred)
    view.measure_box.setSizeAdjustPolicy(QComboBox.AdjustToMinimumContentsLengthWithIcon)
    view.measure_box.setMinimumContentsLength(16)
    view.measure_box.view().setMinimumWidth(view.measure_box.view().sizeHintForColumn(0) + 24)
    top = QHBoxLayout()
    top.addWidget(QLabel("Colour:"))
    top.addWidget(view.measure_box)
    top.addWidget(QLabel("Layout:"))
    top.addWidget(view.layout_box)
    top.addWidget(QLabel("Scale:"))
    top.addWidget(view.scale_box)
    top.addWidget(view.over_box)
    top.addStretch(1)
    top.addWidget(view.hover_label)

    view._top = top

def _build_heatmap(view) -> None:
    """The tile map of every IPU (one TileMapItem) and its colour bar."""
    view.heat_widget = pg.GraphicsLayoutWidget()
    view.heat_widget.setToolTip("")
    view.heat_widget.setAntialiasing(False)  # crisp tile pixels, and cheaper to draw
    view.heat_plot = view.heat_widget.addPlot(row=0, col=0, enableMenu=False)  # no menu: none built
    hp = view.heat_plot
    hp.setAspectLocked(True)
    hp.invertY(True)
    hp.hideAxis("left")
    hp.hideAxis("bottom")
    hp.hideButtons()
    hp.setMenuEnabled(False)
    view.tile_map = TileMapItem()
    view.image = view.tile_map.image  # the ImageItem the colour bar drives
    hp.addItem(view.tile_map)
    view.colorbar = pg.ColorBarItem(values=(0, 1), colorMap=pg.colormap.get("viridis"),
                                    interactive=False, width=18)
    view.colorbar.axis.enableAutoSIPrefix(False)
    view.colorbar.setImageItem(view.image)
    view.heat_widget.addItem(view.colorbar, row=0, col=1)
    view.heat_plot.scene().sigMouseMoved.connect(view._hover)
    view.heat_plot.scene().sigMouseClicked.connect(view._clicked)

def _build_bar_plot(view) -> None:
    """Memory by global tile id, the capacity line, over-capacity markers, IPU boundaries."""
    view.bar_plot = pg.PlotWidget(**plot_kwargs())
    bar_item = view.bar_plot.getPlotItem()
    bar_item.setTitle("Memory by tile")
    bar_item.getAxis("left").enableAutoSIPrefix(False)
    bar_item.setLabel("bottom", TILE_ID_LABEL)
    # no grid and no antialiasing: the axis-drawn grid alone cost ~6 ms per recolour on 16 IPUs;
    # the capacity line is the reference that matters
    view.bar_plot.setAntialiasing(False)
    bar_item.setMouseEnabled(x=True, y=False)
    view.bar_curve = pg.PlotCurveItem(x=[0, 1], y=[0], stepMode="center", fillLevel=0, pen=pg.mkPen(theme.colors()["accent"]),
                                      brush=pg.mkBrush(theme.colors()["accent"]))
    bar_item.addItem(view.bar_curve)
    view._bar_values = np.zeros(0)
    # explicit x range over every tile: with auto-range the bars drawn for the initial (0, 1) range
    # set the range they are drawn for, and the plot opened showing only tiles 0-2
    n_all = view.target.num_ipus * view.target.tiles_per_ipu
    bar_item.setXRange(-0.5, n_all - 0.5, padding=0.01)
    bar_item.getViewBox().setLimits(xMin=-0.5 - 0.05 * n_all, xMax=n_all - 0.5 + 0.05 * n_all)
    bar_item.getViewBox().sigXRangeChanged.connect(lambda *_: view._update_bar())
    bar_item.getViewBox().sigResized.connect(lambda *_: view._update_bar())
    view.bar_over = pg.ScatterPlotItem(size=6, symbol="t", brush=theme.colors()["over"], pen=None)
    bar_item.addItem(view.bar_over)
    # the capacity is named in the title, not in a label box on the line that covered the bars near it
    view.cap_line = pg.InfiniteLine(angle=0, movable=False, pen=pg.mkPen(theme.colors()["capacity"], width=2,
                                                                      style=Qt.DashLine))
    bar_item.addItem(view.cap_line)
    view.bar_sel = pg.InfiniteLine(angle=90, movable=False, pen=pg.mkPen(theme.colors()["select"], width=2))
    view.bar_sel.hide()
    bar_item.addItem(view.bar_sel)
    for i in range(1, view.target.num_ipus):
        bar_item.addItem(pg.InfiniteLine(pos=i * view.target.tiles_per_ipu, angle=90,
                                   pen=pg.mkPen("#888888", style=Qt.DotLine)))
    view.bar_plot.scene().sigMouseClicked.connect(view._bar_clicked)
    view.bar_plot.scene().sigMouseMoved.connect(view._bar_hover)
    view.bar_plot.setToolTip("Bytes of the chosen measure on every tile; dashed line = tile SRAM; "
                             "triangles = over capacity. Click to pick a tile.")

def _build_tile_panel(view) -> None:
    """One tile: its bytes by category (always-live / not-always-live bars) and its variables."""
    view.tile_title = QLabel("<b>No tile selected</b> — click a tile on the map or the bar plot")
    view.tile_title.setTextFormat(Qt.RichText)  # the tile description inside is escaped
    view.tile_title.setWordWrap(True)
    view.breakdown_plot = pg.GraphicsLayoutWidget()
    kp = view.breakdown_kp = view.breakdown_plot.addPlot(**plot_kwargs(row=0, col=0))
    kp.setTitle("Tile memory by category")
    kp.setLabel("bottom", "bytes on the tile (KiB)")
    kp.getAxis("bottom").enableAutoSIPrefix(False)
    kp.getAxis("left").setTicks([[(0, "always-live"), (1, "not-always-live")]])
    kp.setMouseEnabled(False, False)
    kp.hideButtons()
    kp.getViewBox().invertY(True)
    view.legend = pg.LegendItem(colCount=2, labelTextSize="8pt")
    view.breakdown_plot.addItem(view.legend, row=1, col=0)
    view.breakdown_bars: list[pg.BarGraphItem] = []
    view.breakdown_cap = pg.InfiniteLine(angle=90, movable=False,
                                         pen=pg.mkPen(theme.colors()["capacity"], width=2, style=Qt.DashLine))
    kp.addItem(view.breakdown_cap)
    view.breakdown_cap.setValue(view.tm.capacity / KIB)
    # before any tile is picked, show the empty 0..capacity scale (auto-range zoomed onto the line)
    kp.setXRange(0, view.tm.capacity / KIB * 1.05, padding=0)
    kp.setYRange(-0.5, 1.5, padding=0)
    view.var_model = DataFrameModel(headers={"bytes_on_tile": "on tile", "bytes": "total",
                                             "always_live": "always live", "first_lstep": "first lstep",
                                             "last_lstep": "last lstep", "var_id": "var"},
                                    byte_columns=("bytes_on_tile", "bytes"))
    # headers from the start (not a blank box until a tile is picked) + a hint above it
    view.var_model.set_frame(pd.DataFrame(columns=list(VARIABLE_COLUMNS)))
    view.var_table = make_table_view(view.var_model, "Variables with bytes on the selected tile; "
                                     "click a header to sort, click a row to see all tiles it lives on")
    view.var_table.clicked.connect(view._var_clicked)
    # measure column widths on the first rows only: measuring all (~3,000 variables on a tile of a
    # BERT profile) takes 3.4 s of the GUI thread on every tile click
    view.var_table.horizontalHeader().setResizeContentsPrecision(RESIZE_ROWS)
    view.var_hint = plain_label(VAR_HINT)
    view.var_hint.setObjectName("var_hint")
    view.var_hint.setWordWrap(True)

def _arrange(view) -> None:
    """Map and bars on the left, the tile's breakdown and variables on the right."""
    right = QSplitter(Qt.Vertical)
    box = QWidget()
    bl = QVBoxLayout(box)
    bl.setContentsMargins(0, 0, 0, 0)
    bl.addWidget(view.tile_title)
    bl.addWidget(view.breakdown_plot)
    right.addWidget(box)
    var_box = QWidget()
    vl = QVBoxLayout(var_box)
    vl.setContentsMargins(0, 0, 0, 0)
    vl.addWidget(view.var_hint)
    vl.addWidget(view.var_table)
    right.addWidget(var_box)
    right.setSizes([330, 400])
    left = QSplitter(Qt.Vertical)
    left.addWidget(view.heat_widget)
    left.addWidget(view.bar_plot)
    left.setSizes([520, 260])
    main = QSplitter(Qt.Horizontal)
    main.addWidget(left)
    main.addWidget(right)
    main.setSizes([900, 500])
    lay = QVBoxLayout(view)
    lay.addLayout(view._top)
    lay.addWidget(main, 1)

def _connect(view) -> None:
    """Controls, document selection, theme; variables indexed by tile off the GUI thread."""
    document = view.document
    view.measure_box.currentIndexChanged.connect(lambda _: view.set_measure(view.measure_box.currentData()))
    view.layout_box.currentTextChanged.connect(view.set_layout)
    view.scale_box.currentIndexChanged.connect(lambda _: view._recolor())
    view.over_box.toggled.connect(lambda _: view._draw_over())
    document.selection.changed.connect(view._selection_changed)
    theme.notifier.changed.connect(view._restyle)
    view._prefetch = start_task(_prefetch_variables, view.tm, title="Indexing variables by tile")
    # a bound slot, not a lambda: Qt drops the connection when this view is deleted before the
    # indexing task ends (a lambda outlived the view and wrote to a deleted QLabel)
    view._prefetch.signals.error.connect(view._prefetch_failed)

def _install_shortcuts(view) -> None:
    """[ ] measure, L layout, O outlines; Left / Right / P tiles on the map and the bars."""
    view._shortcuts = [
        _shortcut(view, "]", lambda: view._step_measure(1)),
        _shortcut(view, "[", lambda: view._step_measure(-1)),
        _shortcut(view, "L", lambda: view.set_layout(
            "grid by tile id" if view.layout_name == "floor plan" else "floor plan")),
        _shortcut(view, "O", view.over_box.toggle),
    ]
    for w in (view.heat_widget, view.bar_plot):  # arrows stay with the tables elsewhere
        view._shortcuts += [
            _shortcut(w, "Right", lambda: view._step_tile(1)),
            _shortcut(w, "Left", lambda: view._step_tile(-1)),
            _shortcut(w, "P", lambda: view.select_tile(int(np.argmax(view.tm.total)))),
        ]
    view.measure_box.setToolTip(view.measure_box.toolTip() + " — keys [ and ] step through them")
    view.layout_box.setToolTip(view.layout_box.toolTip() + " — key L toggles")
    view.over_box.setToolTip(view.over_box.toolTip() + " — key O")
    view.heat_widget.setToolTip("Click a tile for its breakdown; Left/Right: previous/next tile; "
                                "P: the fullest tile")
