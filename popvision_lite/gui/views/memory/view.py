"""Memory: tile heatmap of every IPU, memory by tile index, and one tile's breakdown + variables.

Drawing: the whole machine is ONE :class:`~popvision_lite.gui.items.tile_map.TileMapItem` (all IPUs in
blocks, see analysis/floor_plan.py): recolouring is one fancy-index + ``setImage``; over-capacity tiles,
tiles selected elsewhere and the picked tile are its marks.  ``widgets.py`` builds the widgets; this
module holds the view's state, drawing and interaction.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyqtgraph as pg
import shiboken6
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QWidget,
)

from popvision_lite.analysis import selection as S
from popvision_lite.analysis.summary import format_bytes
from popvision_lite.analysis.tile_memory import (
    PERCENT,
    TileMemory,
    measure_label,
)
from popvision_lite.errors import PopvisionError
from popvision_lite.gui import theme
from popvision_lite.gui.items.tile_map import TILE_LAYOUTS
from popvision_lite.gui.state.resolve import SYNC_CELLS
from popvision_lite.gui.text import plain_html
from popvision_lite.gui.theme import CATEGORY_COLORS
from popvision_lite.gui.views.memory import widgets
from popvision_lite.gui.views.memory.widgets import LSTEP, TILE_ID_LABEL, VARIABLE_COLUMNS
from popvision_lite.profile import schema
from popvision_lite.units import KIB  # plots show KiB (binary, like PopVision), not pyqtgraph's SI kB

SOURCE = "memory"


VIRIDIS = pg.colormap.get("viridis")
OVER_RAMP = ("#e8001c", "#ff00ff")  # colours above tile capacity: red -> magenta


def capacity_colormap(frac: float) -> pg.ColorMap:
    """viridis from 0 to ``frac`` (capacity / top level), then a red->magenta ramp above capacity."""
    if not 0 < frac < 1:
        return VIRIDIS
    pos = np.linspace(0.0, 1.0, 17)
    under = VIRIDIS.map(pos, mode="qcolor")
    stops = list(pos * frac) + [min(frac + 1e-6, 1.0), 1.0]
    colors = list(under) + [pg.mkColor(OVER_RAMP[0]), pg.mkColor(OVER_RAMP[1])]
    return pg.ColorMap(stops, colors)


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
        widgets.build(self)
        self.set_layout("floor plan")
        self.set_measure("total")
        self._selection_changed(document.selection.state)

    # ------------------------------------------------------------------ drawing
    def tile_layout(self):
        return self._layouts[self.layout_name]

    def set_layout(self, name: str) -> None:
        if name not in self._layouts:
            self._layouts[name] = TILE_LAYOUTS[name](self.target)
        self.layout_name = name
        lay = self._layouts[name]
        if self.layout_box.currentText() != name:
            self.layout_box.setCurrentText(name)
        self.tile_map.set_layout(lay)
        self.heat_plot.setTitle(f"Tile map — {lay.note}", size="9pt")
        self._recolor()
        self._draw_over()
        self._draw_highlight()
        self._draw_tile_mark()
        xr, yr = self.tile_map.view_rect()
        self.heat_plot.setRange(xRange=xr, yRange=yr, padding=0.02)

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
            ls = self.profile.stored_table("liveness_steps")
            step = int(ls["lstep"].iloc[int(np.argmax(ls["max_tile_bytes"].to_numpy()))]) if len(ls) else 0
        key = ("liveness_row", step)
        return self.document.cached(key, lambda: np.asarray(
            self.profile.liveness.tile_bytes(lstart=step, lstop=step + 1)[0], dtype=np.float64))

    def levels(self) -> tuple[float, float]:
        """Colour levels: 0 to the tile capacity (or the fullest tile when it is over), by default; 0 to the
        fullest tile when the scale box says so."""
        v = self.values() / self.scale()
        hi = float(v.max()) if len(v) else 1.0
        cap = 100.0 if self.measure == PERCENT else self.tm.capacity / KIB
        if self.measure == PERCENT or self.scale_box.currentData() != "fullest":
            hi = max(hi, cap)
        return 0.0, hi if hi > 0 else 1.0

    def _recolor(self) -> None:
        """Recolour the map and the bar plot for the current measure (the 16 ms path)."""
        v = self.values() / self.scale()
        lo, hi = self.levels()
        self.tile_map.set_values(v, (lo, hi))
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
        if relabel:  # the capacity is named under the x axis (on the y axis it would be clipped at the plot's height)
            cap_text = (f"dashed: tile capacity {format_bytes(self.tm.capacity)}" if self.measure != PERCENT
                        else "dashed: 100% = tile capacity")
            bp = self.bar_plot.getPlotItem()
            bp.setLabel("bottom", f"{TILE_ID_LABEL}; {cap_text}")
            bp.setLabel("left", label)
        self.bar_plot.getPlotItem().setYRange(0, max(hi, cap) * 1.15, padding=0)  # headroom above the tallest bar

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
        over = np.flatnonzero(self.tm.over_capacity)
        self.tile_map.set_outlined(over if self.over_box.isChecked() else [])

    def _draw_highlight(self) -> None:
        self.tile_map.set_highlighted(self.highlight_tiles)

    def _draw_tile_mark(self) -> None:
        self.tile_map.set_cursor(self.tile)
        if self.tile is None:
            self.bar_sel.hide()
        else:
            self.bar_sel.setValue(self.tile)
            self.bar_sel.show()

    # ------------------------------------------------------------------ interaction
    def _step_measure(self, d: int) -> None:
        self.set_measure(self.measures[(self.measures.index(self.measure) + d) % len(self.measures)])

    def _step_tile(self, d: int) -> None:
        t = 0 if self.tile is None else (self.tile + d) % self.tm.num_tiles
        self.select_tile(t)

    def tile_at_scene_pos(self, scene_pos) -> int:
        if not self.heat_plot.getViewBox().sceneBoundingRect().contains(scene_pos):
            return -1
        return self.tile_map.tile_at_scene(scene_pos)

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
        self.tile_title.setText(f"<b>{plain_html(self.describe_tile(tile))}</b>")
        self._draw_breakdown(tile)
        try:
            frame = self.tm.variables_on(tile)
        except PopvisionError as e:  # an inconsistent table: say so here, never raise in a Qt slot
            self.var_model.set_frame(pd.DataFrame(columns=list(VARIABLE_COLUMNS)))
            self.var_hint.setText(f"Variables unavailable: {e}")
            self._draw_tile_mark()
            return
        self.var_model.set_frame(frame[[c for c in VARIABLE_COLUMNS if c in frame.columns]
                                       + [c for c in frame.columns if c not in VARIABLE_COLUMNS]])
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
        vt = self.profile.stored_table("variable_tiles")
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
        self.tile_map.restyle()
        for b in self.breakdown_bars:
            b.setOpts(pen=pg.mkPen(c["plot_bg"], width=0.5))

    def plot_items(self) -> dict:
        return {"heatmap": self.heat_plot, "by_tile": self.bar_plot.getPlotItem(),
                "tile_breakdown": self.breakdown_kp}
