"""Memory: tile heatmap of every IPU, memory by tile index, and one tile's breakdown + variables.

Drawing: the whole machine is ONE ImageItem (all IPUs in blocks, see analysis/floor_plan.py);
recolouring is one fancy-index + ``setImage``.  Over-capacity tiles get an outline
(one ScatterPlotItem); tiles selected elsewhere are highlighted by dimming every other tile
with one RGBA overlay image.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyqtgraph as pg
import shiboken6
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
from popvision_lite.analysis.summary import format_bytes
from popvision_lite.analysis.tile_memory import (
    MEASURES,
    PERCENT,
    TileMemory,
    measure_label,
)
from popvision_lite.errors import PopvisionError
from popvision_lite.gui import theme
from popvision_lite.gui.table_model import DataFrameModel, make_table_view
from popvision_lite.gui.theme import CATEGORY_COLORS
from popvision_lite.profile import schema
from popvision_lite.units import KIB  # plots show KiB (binary, like PopVision), not pyqtgraph's SI kB

SOURCE = "memory"
LSTEP = "lstep"  # extra measure: not-always-live bytes at the selected liveness step
LAYOUTS = {"floor plan": floor_plan_layout, "grid by tile id": grid_layout}


VIRIDIS = pg.colormap.get("viridis")
OVER_RAMP = ("#e8001c", "#ff00ff")  # colours above tile capacity: red -> magenta


# columns of TileMemory.variables_on, shown as headers before any tile is picked
VARIABLE_COLUMNS = ("name", "kind", "dtype", "shape", "bytes_on_tile", "bytes", "always_live", "first_lstep",
                    "last_lstep", "var_id")
VAR_HINT = "Click a tile in the map or the bar chart to list the variables stored on it."


def capacity_colormap(frac: float) -> pg.ColorMap:
    """viridis from 0 to ``frac`` (capacity / top level), then a red->magenta ramp above capacity."""
    if not 0 < frac < 1:
        return VIRIDIS
    pos = np.linspace(0.0, 1.0, 17)
    under = VIRIDIS.map(pos, mode="qcolor")
    stops = list(pos * frac) + [min(frac + 1e-6, 1.0), 1.0]
    colors = list(under) + [pg.mkColor(OVER_RAMP[0]), pg.mkColor(OVER_RAMP[1])]
    return pg.ColorMap(stops, colors)


def _shortcut(widget, key: str, fn) -> QShortcut:
    sc = QShortcut(QKeySequence(key), widget)
    sc.setContext(Qt.WidgetWithChildrenShortcut)
    sc.activated.connect(fn)
    return sc


RESIZE_ROWS = 16  # rows Qt measures for resizeColumnsToContents


def _prefetch_variables(task, tm) -> None:
    """Read (and validate) the variables tables and index them by tile, off the GUI thread, so the
    first tile click does not wait for them."""
    tm.variables_on(0)


def tile_memory(document) -> TileMemory:
    return document.cached("tile_memory", TileMemory, document.profile)


class MemoryView(QWidget):
    def __init__(self, document, parent=None):
        super().__init__(parent)
        self.document = document
        self.profile = document.profile
        self.tm = tile_memory(document)
        self.target = self.profile.target
        self._layouts: dict[str, object] = {}
        self.measure = "total"
        self.tile: int | None = None
        self.highlight_tiles = np.zeros(0, dtype=np.int64)
        self.lstep: int | None = None
        self._build_controls()
        self._build_heatmap()
        self._build_bar_plot()
        self._build_tile_panel()
        self._arrange()
        self._connect()
        self._install_shortcuts()
        self.set_layout("floor plan")
        self.set_measure("total")
        self._selection_changed(document.selection.state)

    # ------------------------------------------------------------------ building
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
        n_over = int(self.tm.over_capacity.sum())
        self.over_box = QCheckBox(f"Outline over-capacity tiles ({n_over:,})")
        # outlines help find a few bad tiles; when most tiles are over they only hide the colours
        self.over_box.setChecked(0 < n_over <= 0.1 * self.tm.num_tiles)
        self.over_box.setToolTip("Draw a magenta outline around tiles whose memory exceeds their SRAM. "
                                 "With 'Total' or '%' colouring, tiles over capacity are also coloured "
                                 "red to magenta (top of the colour bar)")
        self.hover_label = QLabel("Hover a tile for its memory; click it for details")
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
        self.cap_line = pg.InfiniteLine(angle=0, movable=False, pen=pg.mkPen(theme.colors()["capacity"], width=2,
                                                                          style=Qt.DashLine),
                                        label="capacity", labelOpts={"position": 0.85, "color": theme.colors()["capacity"],
                                                                     "anchors": [(0.5, 1), (0.5, 1)],
                                                                     "fill": pg.mkBrush(theme.colors()["plot_bg"])})
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
        self.var_hint = QLabel(VAR_HINT)
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
        self.over_box.toggled.connect(lambda _: self._draw_over())
        document.selection.changed.connect(self._selection_changed)
        theme.notifier.changed.connect(self._restyle)
        from popvision_lite.gui.workers import start_task

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

    # ------------------------------------------------------------------ drawing
    def tile_layout(self):
        return self._layouts[self.layout_name]

    def set_layout(self, name: str) -> None:
        if name not in self._layouts:
            self._layouts[name] = LAYOUTS[name](self.target)
        self.layout_name = name
        lay = self._layouts[name]
        if self.layout_box.currentText() != name:
            self.layout_box.setCurrentText(name)
        self._pix_index = lay.flat_index
        self._img = np.full(lay.height * lay.width, np.nan)
        for t in self.ipu_labels:
            self.heat_plot.removeItem(t)
        self.ipu_labels = []
        for ipu in range(self.target.num_ipus):
            r, c = lay.ipu_origin(ipu)
            t = pg.TextItem(f"IPU {ipu}", color=theme.colors()["plot_fg"], anchor=(0, 1))
            t.setPos(c, r)
            self.heat_plot.addItem(t)
            self.ipu_labels.append(t)
        self.heat_plot.setTitle(f"Tile map — {lay.note}", size="9pt")
        self._recolor()
        self._draw_over()
        self._draw_highlight()
        self._draw_tile_mark()
        self.heat_plot.setRange(xRange=(0, lay.width), yRange=(-2, lay.height), padding=0.02)

    def set_measure(self, measure: str) -> None:
        if measure not in self.measures:
            raise ValueError(f"unknown measure {measure!r}")
        self.measure = measure
        i = self.measure_box.findData(measure)
        if self.measure_box.currentIndex() != i:
            self.measure_box.blockSignals(True)
            self.measure_box.setCurrentIndex(i)
            self.measure_box.blockSignals(False)
        self._recolor()

    def _label_of(self, m: str) -> str:
        if m == LSTEP:
            step = getattr(self, "lstep", None)
            return ("Not-always-live bytes at liveness step " + (str(step) if step is not None else "(peak)"))
        return measure_label(m)

    def values(self) -> np.ndarray:
        """Per-tile values (bytes or %) of the current measure, as the analysis computes them."""
        if self.measure != LSTEP:
            return self.tm.values(self.measure)
        step = self.lstep
        if step is None:
            ls = self.profile.liveness_steps
            step = int(ls["lstep"].iloc[int(np.argmax(ls["max_tile_bytes"].to_numpy()))]) if len(ls) else 0
        key = ("liveness_row", step)
        return self.document.cached(key, lambda: np.asarray(
            self.profile.liveness.tile_bytes(lstart=step, lstop=step + 1)[0], dtype=np.float64))

    def levels(self) -> tuple[float, float]:
        v = self.values() / self.scale()
        hi = float(v.max()) if len(v) else 1.0
        if self.measure == PERCENT:
            hi = max(hi, 100.0)
        return 0.0, hi if hi > 0 else 1.0

    def _recolor(self) -> None:
        """Recolour the map and the bar plot for the current measure (the 16 ms path)."""
        scale = self.scale()
        v = self.values() / scale
        img = self._img
        img[self._pix_index] = v
        lay = self.tile_layout()
        lo, hi = self.levels()
        self.image.setImage(img.reshape(lay.height, lay.width), autoLevels=False, levels=(lo, hi))
        cap = 100.0 if self.measure == PERCENT else self.tm.capacity / KIB
        frac = round(cap / hi, 4) if self.measure in ("total", PERCENT) and hi > cap else 1.0
        if frac != getattr(self, "_cmap_frac", None):  # red/magenta above capacity, viridis below
            self._cmap_frac = frac
            self.colorbar.setColorMap(capacity_colormap(frac))
        self.colorbar.setLevels((lo, hi))
        label = self.axis_label()
        relabel = label != getattr(self, "_label", None)  # re-laying out axis text costs ~1 ms
        self._label = label
        if relabel:
            self.colorbar.axis.setLabel(label)
        self._bar_values = v
        self._update_bar()
        over = np.flatnonzero(self.tm.over_capacity)
        self.bar_over.setData(over, v[over])
        self.cap_line.setValue(cap)
        self.cap_line.label.setFormat(f"tile capacity {format_bytes(self.tm.capacity)}"
                                      if self.measure != PERCENT else "100% = tile capacity")
        if relabel:
            self.bar_plot.getPlotItem().setLabel("left", label)
        self.bar_plot.getPlotItem().setYRange(0, max(hi, cap) * 1.15, padding=0)  # room for the capacity label above its line

    def _update_bar(self) -> None:
        """Memory-by-tile bars at screen resolution: each bar is the max over the tiles of one pixel
        column of the visible range (exact bars once zoomed in to under one tile per pixel).  Drawing
        all 23,552 bars of 16 IPUs cost ~35 ms per recolour; this keeps it to a few."""
        v = self._bar_values
        n = len(v)
        if n == 0:
            return
        vb = self.bar_plot.getPlotItem().getViewBox()
        (x0, x1), _ = vb.viewRange()
        lo, hi = max(0, int(np.floor(x0 + 0.5))), min(n, int(np.ceil(x1 + 0.5)))
        if hi - lo < 1:
            lo, hi = 0, n
        px = max(64, int(vb.width()))
        step = max(1, -(-(hi - lo) // px))
        starts = np.arange(lo, hi, step)
        y = v[lo:hi] if step == 1 else np.maximum.reduceat(v[lo:hi], starts - lo)
        x = np.append(starts, hi) - 0.5
        self.bar_bin = step
        self.bar_curve.setData(x, y)

    def scale(self) -> float:
        """Divisor from the analysis' values to what is drawn (bytes -> KiB; % unchanged)."""
        return 1.0 if self.measure == PERCENT else KIB

    def axis_label(self) -> str:
        name = self._label_of(self.measure)
        return f"{name} (%)" if self.measure == PERCENT else f"{name.replace(' bytes', '')} (KiB)"

    def _draw_over(self) -> None:
        lay = self.tile_layout()
        over = np.flatnonzero(self.tm.over_capacity)
        if self.over_box.isChecked() and len(over):
            self.over_marks.setData(lay.col[over] + 0.5, lay.row[over] + 0.5)
        else:
            self.over_marks.setData([], [])

    def _draw_highlight(self) -> None:
        lay = self.tile_layout()
        tiles = self.highlight_tiles
        if len(tiles) == 0:
            self.dim.clear()
            self.dim.hide()
            return
        bg = pg.mkColor(theme.colors()["plot_bg"])
        rgba = np.zeros((lay.height, lay.width, 4), dtype=np.uint8)
        rgba[..., 0], rgba[..., 1], rgba[..., 2] = bg.red(), bg.green(), bg.blue()
        mask = np.zeros(lay.height * lay.width, dtype=bool)
        mask[lay.flat_index] = True  # real tiles get dimmed ...
        mask[lay.flat_index[tiles]] = False  # ... except the highlighted ones
        rgba[..., 3] = mask.reshape(lay.height, lay.width) * 190
        self.dim.setImage(rgba, autoLevels=False, levels=(0, 255))
        self.dim.show()

    def _draw_tile_mark(self) -> None:
        lay = self.tile_layout()
        if self.tile is None:
            self.tile_mark.setData([], [])
            self.bar_sel.hide()
        else:
            self.tile_mark.setData([lay.col[self.tile] + 0.5], [lay.row[self.tile] + 0.5])
            self.bar_sel.setValue(self.tile)
            self.bar_sel.show()

    # ------------------------------------------------------------------ interaction
    def _step_measure(self, d: int) -> None:
        self.set_measure(self.measures[(self.measures.index(self.measure) + d) % len(self.measures)])

    def _step_tile(self, d: int) -> None:
        t = 0 if self.tile is None else (self.tile + d) % self.tm.num_tiles
        self.select_tile(t)

    def tile_at_scene_pos(self, scene_pos) -> int:
        vb = self.heat_plot.getViewBox()
        if not vb.sceneBoundingRect().contains(scene_pos):
            return -1
        p = vb.mapSceneToView(scene_pos)
        return self.tile_layout().tile_at(p.y(), p.x())

    def describe_tile(self, tile: int) -> str:
        ipu, t = self.tm.tile_location(tile)
        tot = self.tm.total[tile]
        txt = (f"IPU {ipu}, tile {t} (global {tile}): {format_bytes(tot)} total, "
               f"{100 * tot / self.tm.capacity:.1f}% of {format_bytes(self.tm.capacity)}")
        if self.measure not in ("total", PERCENT):
            txt += f"; {self._label_of(self.measure)}: {format_bytes(self.values()[tile])}"
        if self.tm.over_capacity[tile]:
            txt += "  — OVER CAPACITY"
        return txt

    def _hover(self, scene_pos) -> None:
        tile = self.tile_at_scene_pos(scene_pos)
        if tile >= 0:
            self.hover_label.setText(self.describe_tile(tile))
        self.heat_widget.setAntialiasing(False)  # crisp tile pixels, and cheaper to draw

    def _clicked(self, event) -> None:
        if event.button() != Qt.LeftButton:
            return
        tile = self.tile_at_scene_pos(event.scenePos())
        if tile >= 0:
            self.select_tile(tile)

    def _bar_hover(self, scene_pos) -> None:
        vb = self.bar_plot.getPlotItem().getViewBox()
        if vb.sceneBoundingRect().contains(scene_pos):
            x = int(round(vb.mapSceneToView(scene_pos).x()))
            if 0 <= x < self.tm.num_tiles:
                self.hover_label.setText(self.describe_tile(x))

    def _bar_clicked(self, event) -> None:
        if event.button() != Qt.LeftButton:
            return
        vb = self.bar_plot.getPlotItem().getViewBox()
        if not vb.sceneBoundingRect().contains(event.scenePos()):
            return
        x = int(round(vb.mapSceneToView(event.scenePos()).x()))
        if 0 <= x < self.tm.num_tiles:
            self.select_tile(x)

    def select_tile(self, tile: int, publish: bool = True) -> None:
        """Show ``tile``'s breakdown and variables; publish it to the document selection."""
        tile = int(tile)
        self.tile = tile
        self.tile_title.setText(f"<b>{self.describe_tile(tile)}</b>")
        self._draw_breakdown(tile)
        try:
            frame = self.tm.variables_on(tile)
        except PopvisionError as e:  # an inconsistent table: say so here, never raise in a Qt slot
            self.var_model.set_frame(pd.DataFrame(columns=list(VARIABLE_COLUMNS)))
            self.var_hint.setText(f"Variables unavailable: {e}")
            self._draw_tile_mark()
            return
        self.var_model.set_frame(frame)
        n = self.var_model.rowCount()
        self.var_hint.setText(f"Variables on tile {tile}: {n:,} (largest first; click a row to see every tile "
                              f"it lives on)" if n else f"No variables on tile {tile}.")
        self.var_table.resizeColumnsToContents()
        self.var_table.setColumnWidth(0, min(self.var_table.columnWidth(0), 280))
        self._draw_tile_mark()
        if publish:
            self.document.selection.update(source=SOURCE, tiles=(tile,))

    def _var_clicked(self, index) -> None:
        """Highlight every tile the clicked variable has bytes on (and publish them)."""
        var_id = int(self.var_model.row(index.row())["var_id"])
        vt = self.profile.variable_tiles
        tiles = np.unique(vt.loc[vt["var_id"] == var_id, "tile"].to_numpy(np.int64))
        self.highlight_tiles = tiles
        self._draw_highlight()
        name = self.var_model.row(index.row())["name"]
        self.hover_label.setText(f"{name}: on {len(tiles):,} tiles (others dimmed)")
        self.document.selection.update(source=SOURCE, tiles=tuple(tiles))

    def _draw_breakdown(self, tile: int) -> None:
        kp = self.breakdown_kp
        for b in self.breakdown_bars:
            kp.removeItem(b)
        self.breakdown_bars = []
        self.legend.clear()
        bd = self.tm.breakdown(tile)
        left = np.zeros(2)
        for i, cat in enumerate(schema.MEMORY_CATEGORIES):
            w = bd.loc[cat, ["always_live", "not_always_live"]].to_numpy(np.float64) / KIB
            if not w.any():
                continue
            bar = pg.BarGraphItem(x0=left.copy(), y=[0, 1], height=0.6, width=w, brush=CATEGORY_COLORS[i],
                                  pen=pg.mkPen(theme.colors()["plot_bg"], width=0.5))
            kp.addItem(bar)
            self.legend.addItem(bar, f"{cat} ({format_bytes(w.sum() * KIB)})")
            self.breakdown_bars.append(bar)
            left += w
        kp.setXRange(0, max(left.max(), self.tm.capacity / KIB) * 1.05, padding=0)
        kp.setYRange(-0.5, 1.5, padding=0)

    def _selection_changed(self, state) -> None:
        if state.source == SOURCE:
            return
        if state.lstep != self.lstep:
            self.lstep = state.lstep
            i = self.measure_box.findData(LSTEP)
            self.measure_box.setItemText(i, self._label_of(LSTEP))
            if self.measure == LSTEP:
                self._label = None
                self._recolor()
        tiles = np.asarray(state.tiles, dtype=np.int64)
        if len(tiles) == 0 and state.op_id is not None:
            # views normally send the op's tiles (gui/views/selection_resolve.py); if not, resolve
            # here unless that means reading a large step x tile window on the GUI thread
            from popvision_lite.analysis import selection as S
            from popvision_lite.gui.state.resolve import SYNC_CELLS

            op, key = int(state.op_id), ("op_tiles", int(state.op_id))
            steps = S.op_steps(self.profile, op)
            if self.document.has_cached(key) or len(steps) * self.tm.num_tiles <= SYNC_CELLS:
                tiles = self.document.cached(key, S.op_tiles, self.profile, op, steps)
            else:
                tiles = S.op_vertex_tiles(self.profile, op)
            tiles = np.asarray(tiles, dtype=np.int64)
        tiles = tiles[(tiles >= 0) & (tiles < self.tm.num_tiles)]
        self.highlight_tiles = tiles
        self._draw_highlight()
        if len(tiles) == 1:
            self.select_tile(int(tiles[0]), publish=False)

    def _prefetch_failed(self, exc) -> None:
        if shiboken6.isValid(self.var_hint):
            self.var_hint.setText(f"Variables unavailable: {exc}")

    def _restyle(self, *_):
        c = theme.colors()
        for t in self.ipu_labels:
            t.setColor(c["plot_fg"])
        self.over_marks.setPen(pg.mkPen(c["over"], width=2))
        self.tile_mark.setPen(pg.mkPen(c["select"], width=3))
        self._draw_highlight()
        for b in self.breakdown_bars:
            b.setOpts(pen=pg.mkPen(c["plot_bg"], width=0.5))
        self.cap_line.label.fill = pg.mkBrush(c["plot_bg"])
        self.cap_line.label.update()

    def plot_items(self) -> dict:
        return {"heatmap": self.heat_plot, "by_tile": self.bar_plot.getPlotItem(),
                "tile_breakdown": self.breakdown_kp}
