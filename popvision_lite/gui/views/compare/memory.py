"""Compare Memory: both tile maps with one shared colour bar and linked axes, a tile cursor in both, a
difference mode (B - A per tile on a diverging map centred on 0); per-IPU bars when the layouts differ.

Tiles over capacity are marked in both runs as the Memory view marks them: outlined, and coloured red to magenta
above the capacity on the shared scale; the header counts them in A and in B (issue 46: a recompute-off BERT run
with 5,254 tiles over read the same as the run that fits)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QHBoxLayout,
    QLabel,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from popvision_lite.analysis import compare as C
from popvision_lite.analysis.floor_plan import floor_plan_layout
from popvision_lite.analysis.tile_memory import PERCENT, TileMemory, measure_label
from popvision_lite.gui import theme
from popvision_lite.gui.items.menu_on_demand import plot_kwargs
from popvision_lite.gui.items.tile_map import TileMapItem
from popvision_lite.gui.table_model import DataFrameModel, make_table_view
from popvision_lite.gui.text import plain_label
from popvision_lite.gui.theme import RUN_A_COLOR, RUN_B_COLOR
from popvision_lite.gui.views.compare.common import notes_label
from popvision_lite.gui.views.memory.view import VIRIDIS, capacity_colormap
from popvision_lite.units import KIB, format_bytes

HEAT_MEASURES = ("total", "always_live", "not_always_live", PERCENT)


class CompareMemoryPage(QWidget):
    """Both tile maps with one colour scale, linked axes and a shared cursor; difference mode B - A."""

    def __init__(self, cmp: C.Comparison, parent=None):
        super().__init__(parent)
        self.cmp = cmp
        self.tm_a, self.tm_b = TileMemory(cmp.a), TileMemory(cmp.b)
        self.lay_a = floor_plan_layout(cmp.a.target)
        self.lay_b = self.lay_a if cmp.tile_by_tile else floor_plan_layout(cmp.b.target)
        self.measure = "total"
        self.difference = False
        self.cursor_tile: int | None = None

        self.measure_box = QComboBox()
        for m in HEAT_MEASURES:
            self.measure_box.addItem(measure_label(m), m)
        self.measure_box.setToolTip("What the colour shows in both maps")
        self.diff_box = QCheckBox("Difference B − A")
        self.diff_box.setToolTip("One map of B − A per tile, blue = less in B, red = more in B, white = same"
                                 if cmp.tile_by_tile else cmp.tile_note)
        self.diff_box.setEnabled(cmp.tile_by_tile)
        self.over_a = np.flatnonzero(self.tm_a.over_capacity)
        self.over_b = np.flatnonzero(self.tm_b.over_capacity)
        self.over_box = QCheckBox("Outline tiles over capacity")
        self.over_box.setChecked(True)
        self.over_box.setToolTip("Outline the tiles whose memory exceeds the tile's SRAM, in both runs")
        self.over_label = plain_label(self.over_text())
        self.hover = plain_label("Hover a tile: its bytes in A and B")
        self.hover.setMinimumWidth(420)
        top = QHBoxLayout()
        top.addWidget(QLabel("Colour:"))
        top.addWidget(self.measure_box)
        top.addWidget(self.diff_box)
        top.addWidget(self.over_box)
        top.addWidget(self.over_label)
        top.addStretch(1)
        top.addWidget(self.hover)

        self.glw = pg.GraphicsLayoutWidget()
        self.plot_a = self._heat_plot(f"A: {cmp.label_a} — {cmp.a.target.name}: {cmp.summary_a.fit_text} "
                                      "(tile floor plan, schematic)")
        self.plot_b = self._heat_plot(f"B: {cmp.label_b} — {cmp.b.target.name}: {cmp.summary_b.fit_text} "
                                      "(tile floor plan, schematic)")
        self.plot_d = self._heat_plot(f"B − A per tile ({cmp.label_b} − {cmp.label_a})")
        # the Memory view's tile map item, one per map: same layout code, IPU names and cursor ring
        self.map_a = TileMapItem(self.lay_a, cursor_size=1.8)
        self.map_b = TileMapItem(self.lay_b, cursor_size=1.8)
        self.map_d = TileMapItem(self.lay_a, cursor_size=1.8)
        self.plot_a.addItem(self.map_a)
        self.plot_b.addItem(self.map_b)
        self.plot_d.addItem(self.map_d)
        self.img_a, self.img_b, self.img_d = self.map_a.image, self.map_b.image, self.map_d.image
        self.colorbar = pg.ColorBarItem(values=(0, 1), colorMap=pg.colormap.get("viridis"), interactive=False,
                                        width=18)
        self.colorbar.axis.enableAutoSIPrefix(False)
        self.colorbar.setImageItem([self.img_a, self.img_b])  # one colour scale drives both maps
        self.diff_bar = pg.ColorBarItem(values=(-1, 1), colorMap=pg.colormap.get("CET-D1"), interactive=False,
                                        width=18)
        self.diff_bar.axis.enableAutoSIPrefix(False)
        self.diff_bar.setImageItem(self.img_d)
        if cmp.tile_by_tile:
            self.plot_b.setXLink(self.plot_a)
            self.plot_b.setYLink(self.plot_a)
        self.glw.scene().sigMouseMoved.connect(self._hovered)

        self.note = notes_label(cmp.tile_note)
        if not cmp.tile_note:
            self.note.hide()
        self.ipu_plot = None
        self.ipu_table = None
        self.per_ipu = C.per_ipu(cmp.a, cmp.b, self.tm_a, self.tm_b)
        lay = QVBoxLayout(self)
        lay.addLayout(top)
        lay.addWidget(self.note)
        if cmp.tile_by_tile:
            lay.addWidget(self.glw, 1)
        else:
            split = QSplitter(Qt.Vertical)
            split.addWidget(self.glw)
            split.addWidget(self._build_per_ipu())
            split.setSizes([520, 320])
            lay.addWidget(split, 1)

        self.measure_box.currentIndexChanged.connect(lambda _: self.set_measure(self.measure_box.currentData()))
        self.diff_box.toggled.connect(self.set_difference)
        self.over_box.toggled.connect(lambda _: self._draw_over())
        theme.notifier.changed.connect(self._restyle)
        self._arrange()
        self.redraw()

    def over_text(self) -> str:
        """The header's count of the tiles over capacity in each run (Summary.fit_text's count)."""
        a, b = self.cmp.summary_a.peak.over_capacity_tiles, self.cmp.summary_b.peak.over_capacity_tiles
        if not a and not b:
            return "no tile over capacity in A or B"
        return f"tiles over capacity: A {a:,}, B {b:,} (outlined; red to magenta above capacity)"

    def _draw_over(self) -> None:
        """Outline the tiles over capacity in A's and B's maps (in the difference map: over in either)."""
        on = self.over_box.isChecked()
        self.map_a.set_outlined(self.over_a if on else [])
        self.map_b.set_outlined(self.over_b if on else [])
        both = np.union1d(self.over_a, self.over_b) if self.cmp.tile_by_tile else self.over_a
        self.map_d.set_outlined(both if on else [])

    def _heat_plot(self, title: str) -> pg.PlotItem:
        p = pg.PlotItem(enableMenu=False)  # no context menu: none built
        p.setTitle(title, size="10pt")
        p.setAspectLocked(True)
        p.invertY(True)
        p.hideAxis("left")
        p.hideAxis("bottom")
        p.hideButtons()
        p.setMenuEnabled(False)
        return p

    def _build_per_ipu(self) -> QWidget:
        w = pg.PlotWidget(**plot_kwargs())
        pi = w.getPlotItem()
        pi.setTitle("Memory per IPU (tiles cannot be matched one to one)")
        pi.setLabel("left", "total bytes on the IPU (MiB)")
        pi.setLabel("bottom", "IPU")
        pi.getAxis("left").enableAutoSIPrefix(False)
        pi.addLegend(offset=(10, 10))
        t = self.per_ipu[self.per_ipu["ipu"] != "all"]
        x = np.arange(len(t), dtype=np.float64)
        a = np.nan_to_num(t["total_a"].to_numpy(np.float64)) / KIB ** 2
        b = np.nan_to_num(t["total_b"].to_numpy(np.float64)) / KIB ** 2
        pi.addItem(pg.BarGraphItem(x=x - 0.2, height=a, width=0.38, brush=RUN_A_COLOR, pen=None))
        pi.addItem(pg.BarGraphItem(x=x + 0.2, height=b, width=0.38, brush=RUN_B_COLOR, pen=None))
        pi.legend.addItem(pg.BarGraphItem(x=[0], height=[0], width=0, brush=RUN_A_COLOR), f"A: {self.cmp.label_a}")
        pi.legend.addItem(pg.BarGraphItem(x=[0], height=[0], width=0, brush=RUN_B_COLOR), f"B: {self.cmp.label_b}")
        pi.getAxis("bottom").setTicks([[(i, f"IPU {v}") for i, v in enumerate(t["ipu"])]])
        pi.setMouseEnabled(False, False)
        self.ipu_plot = w
        model = DataFrameModel(per_ipu_display(self.per_ipu))
        self.ipu_table = make_table_view(model, "Memory per IPU and in total (all)")
        self.ipu_table.setObjectName("per_ipu")
        box = QSplitter(Qt.Horizontal)
        box.addWidget(w)
        box.addWidget(self.ipu_table)
        return box

    def _arrange(self) -> None:
        self.glw.clear()
        if self.difference:
            self.glw.addItem(self.plot_d, row=0, col=0)
            self.glw.addItem(self.diff_bar, row=0, col=1)
        else:
            self.glw.addItem(self.plot_a, row=0, col=0)
            self.glw.addItem(self.plot_b, row=0, col=1)
            self.glw.addItem(self.colorbar, row=0, col=2)

    def set_measure(self, measure: str) -> None:
        self.measure = measure
        i = self.measure_box.findData(measure)
        if i != self.measure_box.currentIndex():
            self.measure_box.setCurrentIndex(i)
        self.redraw()

    def set_difference(self, on: bool) -> None:
        on = bool(on) and self.cmp.tile_by_tile
        if on == self.difference:
            return
        self.difference = on
        if self.diff_box.isChecked() != on:
            self.diff_box.setChecked(on)
        self._arrange()
        self.redraw()

    def scale(self) -> float:
        return 1.0 if self.measure == PERCENT else KIB

    def unit(self) -> str:
        return "%" if self.measure == PERCENT else "KiB"

    def levels(self) -> tuple[float, float]:
        va = self.tm_a.values(self.measure) / self.scale()
        vb = self.tm_b.values(self.measure) / self.scale()
        hi = max(float(va.max()) if len(va) else 0.0, float(vb.max()) if len(vb) else 0.0)
        return 0.0, hi if hi > 0 else 1.0

    def diff_values(self) -> np.ndarray | None:
        d = C.memory_difference(self.cmp.a, self.cmp.b, self.measure, self.tm_a, self.tm_b)
        return None if d is None else d / self.scale()

    def redraw(self) -> None:
        label = measure_label(self.measure).replace(" bytes", "")
        if self.difference:
            d = self.diff_values()
            m = float(np.abs(d).max()) if d is not None and len(d) else 0.0
            m = m if m > 0 else 1.0
            self.map_d.set_values(d, (-m, m))
            self.diff_bar.setLevels((-m, m))  # symmetric: white is exactly 0
            self.diff_bar.axis.setLabel(f"B − A {label} ({self.unit()})")
            self._show_whole(self.plot_d, self.map_d)
        else:
            lo, hi = self.levels()
            va = self.tm_a.values(self.measure) / self.scale()
            vb = self.tm_b.values(self.measure) / self.scale()
            self.map_a.set_values(va, (lo, hi))
            self.map_b.set_values(vb, (lo, hi))
            # one scale for both: red to magenta above the tile capacity (A's; B's when only B is over)
            cap = 100.0 if self.measure == PERCENT else min(self.tm_a.capacity, self.tm_b.capacity) / KIB
            frac = round(cap / hi, 4) if self.measure in ("total", PERCENT) and hi > cap else 1.0
            self.colorbar.setColorMap(capacity_colormap(frac) if frac < 1.0 else VIRIDIS)
            self.colorbar.setLevels((lo, hi))
            self.colorbar.axis.setLabel(f"{label} ({self.unit()}), same scale for A and B")
            self._show_whole(self.plot_a, self.map_a)
            if not self.cmp.tile_by_tile:
                self._show_whole(self.plot_b, self.map_b)
        self._draw_over()
        self._draw_cursor()

    @staticmethod
    def _show_whole(plot: pg.PlotItem, item: TileMapItem) -> None:
        xr, yr = item.view_rect()
        plot.setRange(xRange=xr, yRange=yr, padding=0.02)

    # ---- cursor: the same tile marked in every map
    def _tile_under(self, scene_pos) -> tuple[int, str]:
        for p, item, side in ((self.plot_a, self.map_a, "A"), (self.plot_b, self.map_b, "B"),
                              (self.plot_d, self.map_d, "D")):
            if p.scene() is None or not p.isVisible():
                continue
            if p.getViewBox().sceneBoundingRect().contains(scene_pos):
                return item.tile_at_scene(scene_pos), side
        return -1, ""

    def _hovered(self, scene_pos) -> None:
        tile, side = self._tile_under(scene_pos)
        if tile >= 0:
            self.set_cursor(tile, side)

    def describe(self, tile: int, side: str = "A") -> str:
        va = self.tm_a.values(self.measure)
        vb = self.tm_b.values(self.measure)
        fmt = (lambda v: f"{v:.1f}%") if self.measure == PERCENT else format_bytes
        if self.cmp.tile_by_tile:
            ipu, t = divmod(tile, self.tm_a.tiles_per_ipu)
            return (f"IPU {ipu} tile {t} (global {tile}): A {fmt(va[tile])}, B {fmt(vb[tile])}, "
                    f"B − A {'+' if vb[tile] >= va[tile] else '−'}{fmt(abs(vb[tile] - va[tile]))}")
        tm, v = (self.tm_a, va) if side == "A" else (self.tm_b, vb)
        ipu, t = divmod(tile, tm.tiles_per_ipu)
        return f"{side}: IPU {ipu} tile {t} (global {tile}): {fmt(v[tile])} (no matching tile in the other run)"

    def set_cursor(self, tile: int | None, side: str = "A") -> None:
        self.cursor_tile = tile
        self._cursor_side = side
        if tile is not None:
            self.hover.setText(self.describe(tile, side))
        self._draw_cursor()

    def _draw_cursor(self) -> None:
        tile = self.cursor_tile
        side = getattr(self, "_cursor_side", "A")
        for item, s in ((self.map_a, "A"), (self.map_b, "B"), (self.map_d, "D")):
            item.set_cursor(tile if self.cmp.tile_by_tile or s == side else None)

    def _restyle(self, *_) -> None:
        for item in (self.map_a, self.map_b, self.map_d):
            item.restyle()

    def plot_items(self) -> dict:
        # a map shares its GraphicsLayout with the colour bar(s): export takes the whole layout
        items = {"difference": self.plot_d} if self.difference else {"maps": self.plot_a}
        if self.ipu_plot is not None:
            items["per_ipu"] = self.ipu_plot.getPlotItem()
        return items

    def heat_layout(self):
        """The GraphicsLayout holding the maps and colour bar(s): exported as one image."""
        return self.glw.ci

    def tables(self) -> dict:
        va, vb = self.tm_a.values(self.measure), self.tm_b.values(self.measure)
        out = {"per_ipu": self.per_ipu}
        if self.cmp.tile_by_tile:
            out["by_tile"] = pd.DataFrame({"tile": np.arange(len(va)), "a": va, "b": vb, "delta": vb - va,
                                           "ratio": C.ratio(vb, va)})
        return out


def per_ipu_display(df: pd.DataFrame) -> pd.DataFrame:
    """The per-IPU table with bytes as KiB/MiB text and '—' where an IPU is missing from a run."""
    out = df.copy()
    for c in out.columns:
        if c == "ipu":
            continue
        v = out[c].to_numpy(np.float64)
        if c.startswith(("total_", "max_tile_")) and c != "total_ratio":
            txt = [("−" if x < 0 else "") + format_bytes(abs(x)) if np.isfinite(x) else "—" for x in v]
        elif c == "total_ratio":
            txt = [f"{x:.3f}" if np.isfinite(x) else "—" for x in v]
        else:
            txt = [f"{int(x):,}" if np.isfinite(x) else "—" for x in v]
        out[c] = txt
    return out.rename(columns={"ipu": "IPU"})
