"""The Memory view's widgets: controls, the tile map, memory by tile, one tile's breakdown and variables,
their arrangement, signals and keys.  A mixin of :class:`~.view.MemoryView` (small builders, called in
order by its constructor)."""

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

from popvision_lite.analysis.floor_plan import floor_plan_layout, grid_layout
from popvision_lite.analysis.tile_memory import (
    MEASURES,
)
from popvision_lite.gui import theme
from popvision_lite.gui.table_model import DataFrameModel, make_table_view
from popvision_lite.gui.text import plain_label
from popvision_lite.gui.workers import start_task
from popvision_lite.units import KIB  # plots show KiB (binary, like PopVision), not pyqtgraph's SI kB

LSTEP = "lstep"  # extra measure: not-always-live bytes at the selected liveness step
LAYOUTS = {"floor plan": floor_plan_layout, "grid by tile id": grid_layout}
# columns of TileMemory.variables_on, shown as headers before any tile is picked
# what the tile holds first (its bytes on this tile), so a narrow panel still shows it
VARIABLE_COLUMNS = ("name", "bytes_on_tile", "bytes", "kind", "dtype", "shape", "always_live", "first_lstep",
                    "last_lstep", "var_id")
VAR_HINT = "Click a tile in the map or the bar chart to list the variables stored on it."
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


class MemoryLayout:
    """Mixin: builds the Memory view's widgets as attributes of the view."""

    def _build_controls(self) -> None:
        """Colour measure, tile layout, the over-capacity outline switch, the hover read-out."""
        self.measure_box = QComboBox()
        self.measures = MEASURES + (LSTEP,)
        for m in self.measures:
            self.measure_box.addItem(self._label_of(m), m)
        self.measure_box.setToolTip("What the colour shows: total, always-live, not-always-live, "
                                    "% of tile capacity, or one Poplar memory category")
        self.layout_box = QComboBox()
        self.layout_box.addItems(list(LAYOUTS))
        self.layout_box.setToolTip("Tile map order: floor plan (tiles in columns as on the chip) "
                                   "or a plain grid by tile id")
        self.scale_box = QComboBox()
        self.scale_box.addItem("to tile capacity", "capacity")
        self.scale_box.addItem("to the fullest tile", "fullest")
        self.scale_box.setToolTip("Colour scale: from 0 to the tile's SRAM (a chip 10 % full looks 10 % full), or "
                                  "from 0 to the fullest tile (small differences between tiles show)")
        n_over = int(self.tm.over_capacity.sum())
        self.over_box = QCheckBox(f"Outline over-capacity tiles ({n_over:,})")
        # outlines help find a few bad tiles; when most tiles are over they only hide the colours
        self.over_box.setChecked(0 < n_over <= 0.1 * self.tm.num_tiles)
        self.over_box.setToolTip("Draw a magenta outline around tiles whose memory exceeds their SRAM. "
                                 "With 'Total' or '%' colouring, tiles over capacity are also coloured "
                                 "red to magenta (top of the colour bar)")
        self.hover_label = plain_label("Hover a tile for its memory; click it for details")
        # wraps instead of holding 360 px: with the combo boxes the view needed 1109 px and the window
        # could not fit a 1024-px screen
        self.hover_label.setWordWrap(True)
        self.hover_label.setMinimumWidth(160)
        self.hover_label.setSizePolicy(QSizePolicy.Expanding, QSizePolicy.Preferred)
        self.measure_box.setSizeAdjustPolicy(QComboBox.AdjustToMinimumContentsLengthWithIcon)
        self.measure_box.setMinimumContentsLength(16)
        self.measure_box.view().setMinimumWidth(self.measure_box.view().sizeHintForColumn(0) + 24)
        top = QHBoxLayout()
        top.addWidget(QLabel("Colour:"))
        top.addWidget(self.measure_box)
        top.addWidget(QLabel("Layout:"))
        top.addWidget(self.layout_box)
        top.addWidget(QLabel("Scale:"))
        top.addWidget(self.scale_box)
        top.addWidget(self.over_box)
        top.addStretch(1)
        top.addWidget(self.hover_label)

        self._top = top

    def _build_heatmap(self) -> None:
        """One ImageItem for every tile of every IPU, the selection overlay, outlines, the colour bar."""
        self.heat_widget = pg.GraphicsLayoutWidget()
        self.heat_widget.setToolTip("")
        self.heat_widget.setAntialiasing(False)  # crisp tile pixels, and cheaper to draw
        self.heat_plot = self.heat_widget.addPlot(row=0, col=0)
        hp = self.heat_plot
        hp.setAspectLocked(True)
        hp.invertY(True)
        hp.hideAxis("left")
        hp.hideAxis("bottom")
        hp.hideButtons()
        hp.setMenuEnabled(False)
        self.image = pg.ImageItem(axisOrder="row-major")
        hp.addItem(self.image)
        self.dim = pg.ImageItem(axisOrder="row-major")  # selection overlay (dims unselected tiles)
        self.dim.setZValue(5)
        hp.addItem(self.dim)
        self.over_marks = pg.ScatterPlotItem(pxMode=False, symbol="s", size=1.0, brush=None,
                                             pen=pg.mkPen(theme.colors()["over"], width=2))
        self.over_marks.setZValue(10)
        hp.addItem(self.over_marks)
        # tiles selected in another view: outlined in the selection colour (the other tiles are only lightly
        # dimmed, so the map keeps its colours instead of turning a washed-out olive)
        self.sel_marks = pg.ScatterPlotItem(pxMode=False, symbol="s", size=1.0, brush=None,
                                            pen=pg.mkPen(theme.colors()["select"], width=1.5))
        self.sel_marks.setZValue(9)
        hp.addItem(self.sel_marks)
        self.tile_mark = pg.ScatterPlotItem(pxMode=False, symbol="s", size=1.6, brush=None,
                                            pen=pg.mkPen(theme.colors()["select"], width=3))
        self.tile_mark.setZValue(11)
        hp.addItem(self.tile_mark)
        self.ipu_labels: list[pg.TextItem] = []
        self.colorbar = pg.ColorBarItem(values=(0, 1), colorMap=pg.colormap.get("viridis"),
                                        interactive=False, width=18)
        self.colorbar.axis.enableAutoSIPrefix(False)
        self.colorbar.setImageItem(self.image)
        self.heat_widget.addItem(self.colorbar, row=0, col=1)
        self.heat_plot.scene().sigMouseMoved.connect(self._hover)
        self.heat_plot.scene().sigMouseClicked.connect(self._clicked)

    def _build_bar_plot(self) -> None:
        """Memory by global tile id, the capacity line, over-capacity markers, IPU boundaries."""
        self.bar_plot = pg.PlotWidget()
        bp = self.bar_plot.getPlotItem()
        bp.setTitle("Memory by tile")
        bp.getAxis("left").enableAutoSIPrefix(False)
        bp.setLabel("bottom", "global tile id (IPU × tiles per IPU + tile)")
        # no grid and no antialiasing: the axis-drawn grid alone cost ~6 ms per recolour on 16 IPUs;
        # the capacity line is the reference that matters
        self.bar_plot.setAntialiasing(False)
        bp.setMouseEnabled(x=True, y=False)
        self.bar_curve = pg.PlotCurveItem(x=[0, 1], y=[0], stepMode="center", fillLevel=0, pen=pg.mkPen(theme.colors()["accent"]),
                                          brush=pg.mkBrush(theme.colors()["accent"]))
        bp.addItem(self.bar_curve)
        self._bar_values = np.zeros(0)
        # explicit x range over every tile: with auto-range the bars drawn for the initial (0, 1) range
        # set the range they are drawn for, and the plot opened showing only tiles 0-2
        n_all = self.target.num_ipus * self.target.tiles_per_ipu
        bp.setXRange(-0.5, n_all - 0.5, padding=0.01)
        bp.getViewBox().setLimits(xMin=-0.5 - 0.05 * n_all, xMax=n_all - 0.5 + 0.05 * n_all)
        bp.getViewBox().sigXRangeChanged.connect(lambda *_: self._update_bar())
        bp.getViewBox().sigResized.connect(lambda *_: self._update_bar())
        self.bar_over = pg.ScatterPlotItem(size=6, symbol="t", brush=theme.colors()["over"], pen=None)
        bp.addItem(self.bar_over)
        # the capacity is named in the title, not in a label box on the line that covered the bars near it
        self.cap_line = pg.InfiniteLine(angle=0, movable=False, pen=pg.mkPen(theme.colors()["capacity"], width=2,
                                                                          style=Qt.DashLine))
        bp.addItem(self.cap_line)
        self.bar_sel = pg.InfiniteLine(angle=90, movable=False, pen=pg.mkPen(theme.colors()["select"], width=2))
        self.bar_sel.hide()
        bp.addItem(self.bar_sel)
        for i in range(1, self.target.num_ipus):
            bp.addItem(pg.InfiniteLine(pos=i * self.target.tiles_per_ipu, angle=90,
                                       pen=pg.mkPen("#888888", style=Qt.DotLine)))
        self.bar_plot.scene().sigMouseClicked.connect(self._bar_clicked)
        self.bar_plot.scene().sigMouseMoved.connect(self._bar_hover)
        self.bar_plot.setToolTip("Bytes of the chosen measure on every tile; dashed line = tile SRAM; "
                                 "triangles = over capacity. Click to pick a tile.")

    def _build_tile_panel(self) -> None:
        """One tile: its bytes by category (always-live / not-always-live bars) and its variables."""
        self.tile_title = QLabel("<b>No tile selected</b> — click a tile on the map or the bar plot")
        self.tile_title.setTextFormat(Qt.RichText)  # the tile description inside is escaped
        self.tile_title.setWordWrap(True)
        self.breakdown_plot = pg.GraphicsLayoutWidget()
        kp = self.breakdown_kp = self.breakdown_plot.addPlot(row=0, col=0)
        kp.setTitle("Tile memory by category")
        kp.setLabel("bottom", "bytes on the tile (KiB)")
        kp.getAxis("bottom").enableAutoSIPrefix(False)
        kp.getAxis("left").setTicks([[(0, "always-live"), (1, "not-always-live")]])
        kp.setMouseEnabled(False, False)
        kp.hideButtons()
        kp.getViewBox().invertY(True)
        self.legend = pg.LegendItem(colCount=2, labelTextSize="8pt")
        self.breakdown_plot.addItem(self.legend, row=1, col=0)
        self.breakdown_bars: list[pg.BarGraphItem] = []
        self.breakdown_cap = pg.InfiniteLine(angle=90, movable=False,
                                             pen=pg.mkPen(theme.colors()["capacity"], width=2, style=Qt.DashLine))
        kp.addItem(self.breakdown_cap)
        self.breakdown_cap.setValue(self.tm.capacity / KIB)
        # before any tile is picked, show the empty 0..capacity scale (auto-range zoomed onto the line)
        kp.setXRange(0, self.tm.capacity / KIB * 1.05, padding=0)
        kp.setYRange(-0.5, 1.5, padding=0)
        self.var_model = DataFrameModel(headers={"bytes_on_tile": "on tile", "bytes": "total",
                                                 "always_live": "always live", "first_lstep": "first lstep",
                                                 "last_lstep": "last lstep", "var_id": "var"},
                                        byte_columns=("bytes_on_tile", "bytes"))
        # headers from the start (the table was a blank box until a tile was picked) + a hint above it
        self.var_model.set_frame(pd.DataFrame(columns=list(VARIABLE_COLUMNS)))
        self.var_table = make_table_view(self.var_model, "Variables with bytes on the selected tile; "
                                         "click a header to sort, click a row to see all tiles it lives on")
        self.var_table.clicked.connect(self._var_clicked)
        # measure column widths on the first rows only: measuring all (~3,000 variables on a tile of a
        # BERT profile) took 3.4 s of the GUI thread on every tile click
        self.var_table.horizontalHeader().setResizeContentsPrecision(RESIZE_ROWS)
        self.var_hint = plain_label(VAR_HINT)
        self.var_hint.setObjectName("var_hint")
        self.var_hint.setWordWrap(True)

    def _arrange(self) -> None:
        """Map and bars on the left, the tile's breakdown and variables on the right."""
        right = QSplitter(Qt.Vertical)
        box = QWidget()
        bl = QVBoxLayout(box)
        bl.setContentsMargins(0, 0, 0, 0)
        bl.addWidget(self.tile_title)
        bl.addWidget(self.breakdown_plot)
        right.addWidget(box)
        var_box = QWidget()
        vl = QVBoxLayout(var_box)
        vl.setContentsMargins(0, 0, 0, 0)
        vl.addWidget(self.var_hint)
        vl.addWidget(self.var_table)
        right.addWidget(var_box)
        right.setSizes([330, 400])
        left = QSplitter(Qt.Vertical)
        left.addWidget(self.heat_widget)
        left.addWidget(self.bar_plot)
        left.setSizes([520, 260])
        main = QSplitter(Qt.Horizontal)
        main.addWidget(left)
        main.addWidget(right)
        main.setSizes([900, 500])
        lay = QVBoxLayout(self)
        lay.addLayout(self._top)
        lay.addWidget(main, 1)

    def _connect(self) -> None:
        """Controls, document selection, theme; variables indexed by tile off the GUI thread."""
        document = self.document
        self.measure_box.currentIndexChanged.connect(lambda _: self.set_measure(self.measure_box.currentData()))
        self.layout_box.currentTextChanged.connect(self.set_layout)
        self.scale_box.currentIndexChanged.connect(lambda _: self._recolor())
        self.over_box.toggled.connect(lambda _: self._draw_over())
        document.selection.changed.connect(self._selection_changed)
        theme.notifier.changed.connect(self._restyle)
        self._prefetch = start_task(_prefetch_variables, self.tm, title="Indexing variables by tile")
        # a bound slot, not a lambda: Qt drops the connection when this view is deleted before the
        # indexing task ends (a lambda outlived the view and wrote to a deleted QLabel)
        self._prefetch.signals.error.connect(self._prefetch_failed)

    def _install_shortcuts(self) -> None:
        """[ ] measure, L layout, O outlines; Left / Right / P tiles on the map and the bars."""
        self._shortcuts = [
            _shortcut(self, "]", lambda: self._step_measure(1)),
            _shortcut(self, "[", lambda: self._step_measure(-1)),
            _shortcut(self, "L", lambda: self.set_layout(
                "grid by tile id" if self.layout_name == "floor plan" else "floor plan")),
            _shortcut(self, "O", self.over_box.toggle),
        ]
        for w in (self.heat_widget, self.bar_plot):  # arrows stay with the tables elsewhere
            self._shortcuts += [
                _shortcut(w, "Right", lambda: self._step_tile(1)),
                _shortcut(w, "Left", lambda: self._step_tile(-1)),
                _shortcut(w, "P", lambda: self.select_tile(int(np.argmax(self.tm.total)))),
            ]
        self.measure_box.setToolTip(self.measure_box.toolTip() + " — keys [ and ] step through them")
        self.layout_box.setToolTip(self.layout_box.toolTip() + " — key L toggles")
        self.over_box.setToolTip(self.over_box.toolTip() + " — key O")
        self.heat_widget.setToolTip("Click a tile for its breakdown; Left/Right: previous/next tile; "
                                    "P: the fullest tile")
