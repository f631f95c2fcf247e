"""Liveness: not-always-live memory over liveness steps; click a step to list what is live."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import QHBoxLayout, QLabel, QSpinBox, QSplitter, QTabWidget, QVBoxLayout, QWidget

from popvision_lite.analysis.liveness import (
    always_live_variables,
    ipu_spans,
    live_variables,
    liveness_curve,
    peak_step,
    tile_curve,
)
from popvision_lite.analysis.summary import format_bytes
from popvision_lite.gui import theme
from popvision_lite.gui.items.menu_on_demand import plot_kwargs
from popvision_lite.gui.plot_cache import keep_plot_drawing
from popvision_lite.gui.state.resolve import select_op
from popvision_lite.gui.table_model import DataFrameModel, make_table_view
from popvision_lite.gui.text import plain_html
from popvision_lite.units import KIB

SOURCE = "liveness"


LEGEND_TOP_PX = 40  # the legend's distance from the plot's top: under the IPU names (a 22-px line from the top)


class LivenessView(QWidget):
    """The liveness curve of ``document.profile``, the chosen tile's curve and what is live at a step."""

    def __init__(self, document, parent=None):
        super().__init__(parent)
        self.document = document
        self.profile = document.profile
        self.curve_df = document.cached("liveness_curve", liveness_curve, self.profile)
        self.num_tiles = int(self.profile.target.num_tiles)
        self.tpi = int(self.profile.target.tiles_per_ipu)
        self.lstep: int | None = None
        self.tile: int | None = None
        self.x = self.curve_df["lstep"].to_numpy(np.float64)
        self._build_plot()
        self._build_ipu_lines()
        self._build_controls()
        self._build_tables()
        self._arrange()
        document.selection.changed.connect(self._selection_changed)
        self._bind_keys()
        self._restore_selection(document.selection.state)

    def _build_plot(self) -> None:
        """The max-over-tiles curve, the selected tile's curve and the chosen step's line."""
        c = theme.colors()
        self.plot = pg.PlotWidget(**plot_kwargs())
        pi = self.plot.getPlotItem()
        pi.setTitle("Not-always-live memory over program (liveness) steps")
        pi.setLabel("bottom", "liveness step (leaf program, compile order)")
        pi.setLabel("left", "not-always-live memory on a tile (KiB)")
        pi.getAxis("left").enableAutoSIPrefix(False)
        pi.showGrid(x=True, y=True, alpha=0.25)
        pi.setMouseEnabled(x=True, y=False)
        # below the row of IPU names the multi-IPU runs print at the top of the plot (at 10 px it covered "IPU 0")
        self.legend = pi.addLegend(offset=(10, LEGEND_TOP_PX))
        x = self.x
        self.max_curve = pi.plot(x, self.curve_df["max_tile_bytes"].to_numpy(np.float64) / KIB,
                                 pen=pg.mkPen(c["accent"], width=2), name="max over tiles")
        self.tile_curve = pi.plot([], [], pen=pg.mkPen("#ff7f0e", width=2), name="selected tile")
        if len(x):
            pi.setXRange(-0.5, len(x) - 0.5, padding=0.01)
        self._fit_y()
        keep_plot_drawing(pi)  # the curves of every step: drawn once, not on every visit of the tab

    def _build_ipu_lines(self) -> None:
        """A multi-IPU run's programs follow each other, IPU by IPU: mark where each IPU's steps begin."""
        c = theme.colors()
        pi = self.plot.getPlotItem()
        self.ipu_spans = self.document.cached("liveness_ipu_spans", ipu_spans, self.profile)
        self.ipu_lines = []
        if len(self.ipu_spans) > 1:
            for r in self.ipu_spans.itertuples(index=False):
                line = pg.InfiniteLine(pos=r.first_lstep - 0.5, angle=90, movable=False,
                                       pen=pg.mkPen(c["muted"], width=1, style=Qt.DashLine),
                                       label=f"IPU {r.ipu}", labelOpts={"position": 0.97, "color": c["muted"],
                                                                         "anchors": [(0, 0), (0, 0)]})
                pi.addItem(line, ignoreBounds=True)
                self.ipu_lines.append(line)
        self.step_line = pg.InfiniteLine(angle=90, movable=False, pen=pg.mkPen(c["select"], width=2))
        self.step_line.hide()
        pi.addItem(self.step_line)
        self.plot.scene().sigMouseClicked.connect(self._clicked)

    def _build_controls(self) -> None:
        """The step and tile boxes and the line that says what the chosen step holds."""
        self.tile_box = QSpinBox()
        self.tile_box.setRange(-1, self.num_tiles - 1)
        self.tile_box.setSpecialValueText("none")
        self.tile_box.setValue(-1)
        self.tile_box.setToolTip("Global tile whose curve is drawn (also set by clicking a tile in the Memory view)")
        self.tile_box.valueChanged.connect(lambda v: self.set_tile(v if v >= 0 else None, publish=True))
        self.step_box = QSpinBox()
        self.step_box.setRange(-1, max(0, len(self.x) - 1))
        self.step_box.setSpecialValueText("none")
        self.step_box.setValue(-1)
        self.step_box.setToolTip("Liveness step to inspect (or click the plot)")
        self.step_box.valueChanged.connect(lambda v: self.select_lstep(v) if v >= 0 else None)
        self.info = QLabel("Click a step on the plot to see what is live there")
        self.info.setTextFormat(Qt.RichText)  # the variable-step name inside is escaped
        self.info.setWordWrap(True)

    def _build_tables(self) -> None:
        """What is live at the chosen step, and what is live for the whole program, in two tabs."""
        self.var_model = DataFrameModel(
            headers={"bytes_on_tile": "on tile", "first_lstep": "live from", "last_lstep": "live to",
                     "op_id": "op", "var_id": "var"},
            header_tips={"first_lstep": "First liveness step of the live interval that holds the chosen step",
                         "last_lstep": "Last liveness step of the live interval that holds the chosen step",
                         "intervals": "How many live intervals the variable has: more than 1 when a re-run "
                                      "program (recomputation) writes it anew"},
            byte_columns=("bytes", "bytes_on_tile"))
        self.var_table = make_table_view(self.var_model, "Not-always-live variables live at the chosen step; "
                                         "click a header to sort")
        self.var_table.clicked.connect(self._var_clicked)
        self.always_model = DataFrameModel(
            self.document.cached("always_live_variables", always_live_variables, self.profile),
            headers={"var_id": "var"}, byte_columns=("bytes",))
        self.always_table = make_table_view(self.always_model, "Variables live for the whole program "
                                            "(weights, constants ...); click a header to sort")
        self.always_table.resizeColumnsToContents()
        self.table_tabs = QTabWidget()
        self.table_tabs.addTab(self.var_table, "Live at step")
        self.table_tabs.addTab(self.always_table, f"Always live ({self.always_model.rowCount():,})")

    def _arrange(self) -> None:
        """The plot over the controls and tables."""
        controls = QHBoxLayout()
        controls.addWidget(QLabel("Step:"))
        controls.addWidget(self.step_box)
        controls.addWidget(QLabel("Tile:"))
        controls.addWidget(self.tile_box)
        controls.addWidget(self.info, 1)
        bottom = QWidget()
        bl = QVBoxLayout(bottom)
        bl.setContentsMargins(0, 0, 0, 0)
        bl.addLayout(controls)
        bl.addWidget(self.table_tabs)
        split = QSplitter(Qt.Vertical)
        split.addWidget(self.plot)
        split.addWidget(bottom)
        split.setSizes([480, 380])
        lay = QVBoxLayout(self)
        lay.addWidget(split)

    def _bind_keys(self) -> None:
        """Left / Right: previous / next step; P: the peak step (on the plot: arrows stay with the table when
        it has focus)."""
        self._shortcuts = []
        for key, fn in (("Right", lambda: self._step(1)), ("Left", lambda: self._step(-1)),
                        ("P", lambda: self.select_lstep(self.peak()))):
            sc = QShortcut(QKeySequence(key), self.plot)
            sc.setContext(Qt.WidgetWithChildrenShortcut)
            sc.activated.connect(fn)
            self._shortcuts.append(sc)
        self.plot.setToolTip("Click a step to list the variables live there; Left/Right: previous/next step; "
                             "P: the peak step")

    def _restore_selection(self, st) -> None:
        """The tile and step selected elsewhere, else the tile of the highest peak."""
        if st.tiles:
            self.set_tile(st.tiles[0], publish=False)
        elif len(self.curve_df):
            i = int(np.argmax(self.curve_df["max_tile_bytes"].to_numpy()))
            self.set_tile(int(self.curve_df["max_tile"].iloc[i]), publish=False)
        if st.lstep is not None:
            self.select_lstep(st.lstep, publish=False)

    # ------------------------------------------------------------------
    def _fit_y(self) -> None:
        """y from 0 with 30% headroom, so the legend (top left) never hides a peak."""
        tops = [self.curve_df["max_tile_bytes"].max() if len(self.curve_df) else 0]
        y = self.tile_curve.getData()[1]
        if y is not None and len(y):
            tops.append(float(np.max(y)) * KIB)
        top = max(max(tops) / KIB, 1.0)
        self.plot.getPlotItem().setYRange(0, top * 1.3, padding=0)

    def set_tile(self, tile: int | None, publish: bool = False) -> None:
        if tile is not None and not (0 <= int(tile) < self.num_tiles):
            return
        self.tile = None if tile is None else int(tile)
        if self.tile is None:
            self.tile_curve.setData([], [])
        else:
            y = self.document.cached(("liveness_tile", self.tile), tile_curve, self.profile, self.tile)
            self.tile_curve.setData(self.x, y.astype(np.float64) / KIB)
            ipu, t = divmod(self.tile, self.tpi)
            self.legend.items[-1][1].setText(f"tile {t} of IPU {ipu} (global {self.tile})")
        self._fit_y()
        self.tile_box.blockSignals(True)
        self.tile_box.setValue(-1 if self.tile is None else self.tile)
        self.tile_box.blockSignals(False)
        if self.lstep is not None:
            self._fill_table()
        if publish and self.tile is not None:
            self.document.selection.update(source=SOURCE, tiles=(self.tile,))

    def select_lstep(self, lstep: int, publish: bool = True) -> None:
        """Show the variables live at ``lstep``; publish lstep (and its program) to the selection."""
        n = len(self.curve_df)
        if n == 0:
            return
        lstep = int(min(max(int(lstep), 0), n - 1))
        self.lstep = lstep
        self.step_line.setValue(lstep)
        self.step_line.show()
        self.step_box.blockSignals(True)
        self.step_box.setValue(lstep)
        self.step_box.blockSignals(False)
        self._fill_table()
        if publish:
            row = self.profile.stored_table("liveness_steps")
            prog = row.loc[row["lstep"] == lstep, "prog_id"]
            fields = {"lstep": lstep}
            if len(prog):
                fields["prog_id"] = int(prog.iloc[0])
            self.document.selection.update(source=SOURCE, **fields)

    def _step(self, d: int) -> None:
        self.select_lstep(0 if self.lstep is None else self.lstep + d)

    def _fill_table(self) -> None:
        lstep = self.lstep
        df = live_variables(self.profile, lstep, tile=self.tile)
        self.var_model.set_frame(df)
        self.var_table.resizeColumnsToContents()
        r = self.curve_df.iloc[lstep]
        where = f" on tile {self.tile}" if self.tile is not None else ""
        tot = df["bytes_on_tile"].sum() if self.tile is not None else df["bytes"].sum()
        self.info.setText(
            f"<b>Step {lstep}</b> ({plain_html(r['name'])}): {len(df)} live variables{where}, {format_bytes(tot)}; "
            f"fullest tile {int(r['max_tile'])} holds {format_bytes(r['max_tile_bytes'])} not-always-live")

    def _clicked(self, event) -> None:
        if event.button() != Qt.LeftButton:
            return
        vb = self.plot.getPlotItem().getViewBox()
        if not vb.sceneBoundingRect().contains(event.scenePos()):
            return
        self.select_lstep(int(round(vb.mapSceneToView(event.scenePos()).x())))

    def _var_clicked(self, index) -> None:
        row = self.var_model.row(index.row())
        op = int(row["op_id"])
        if op >= 0:
            select_op(self.document, op, SOURCE)  # the op that produced the variable, its steps and tiles

    def _selection_changed(self, state) -> None:
        if state.source == SOURCE:
            return
        if state.tiles and state.tiles[0] != self.tile and len(state.tiles) == 1:
            self.set_tile(state.tiles[0], publish=False)
        if state.lstep is not None and state.lstep != self.lstep:
            self.select_lstep(state.lstep, publish=False)

    def peak(self) -> int:
        return peak_step(self.profile)

    def plot_items(self) -> dict:
        return {"liveness": self.plot.getPlotItem()}
