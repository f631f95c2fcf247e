"""Compare-mode pages: two runs A and B side by side (built by gui/compare_window.py).

Every page takes a :class:`popvision_lite.analysis.compare.Comparison` and exposes
``plot_items()`` (for export) and ``tables()`` (name -> DataFrame, for CSV export).

* :class:`CompareSummaryPage` - headline table (A, B, delta, B/A), the notes, a B/A ratio chart;
* :class:`CompareMemoryPage` - both tile maps with one shared ColorBarItem and linked axes, a tile
  cursor drawn in both, and a difference mode (B - A per tile, diverging colour map centred on 0);
  when the tile layouts differ, per-IPU bars and the note saying why tiles are not compared;
* :class:`CompareLivenessPage` - both not-always-live curves overlaid with a step cursor;
* :class:`CompareStepsPage` - time per BSP phase of both runs + the matched step table;
* :class:`CompareOpsPage` - ops matched by name with A, B, delta and ratio.
"""

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
    QLineEdit,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from popvision_lite.analysis import compare as C
from popvision_lite.analysis.floor_plan import floor_plan_layout
from popvision_lite.analysis.summary import PHASES, format_bytes
from popvision_lite.analysis.tile_memory import PERCENT, TileMemory, measure_label
from popvision_lite.gui import theme
from popvision_lite.gui.table_model import DataFrameModel, make_table_view

KIB = 1024.0
COLOR_A = "#1f77b4"
COLOR_B = "#ff7f0e"
PHASE_COLORS = {"compute": "#2ca02c", "exchange": "#1f77b4", "sync": "#d62728", "stream": "#ff7f0e"}
HEAT_MEASURES = ("total", "always_live", "not_always_live", PERCENT)


def _notes_label(text: str) -> QLabel:
    lab = QLabel(text)
    lab.setWordWrap(True)
    lab.setTextInteractionFlags(Qt.TextSelectableByMouse)
    return lab


class CompareSummaryPage(QWidget):
    RATIO_METRICS = ("total cycles", "time", "compute cycles", "exchange cycles", "sync cycles",
                     "stream cycles", "peak tile memory", "peak not-always-live on a tile",
                     "total memory (all tiles)")

    def __init__(self, cmp: C.Comparison, parent=None):
        super().__init__(parent)
        self.cmp = cmp
        self.headline = C.headline_strings(cmp)
        self.title = QLabel(f"<b>A</b> = {cmp.label_a} ({cmp.summary_a.target.name})  vs  "
                            f"<b>B</b> = {cmp.label_b} ({cmp.summary_b.target.name}); delta = B - A, ratio = B / A")
        self.title.setWordWrap(True)
        self.model = DataFrameModel(self.headline)
        self.table = make_table_view(self.model, "Headline numbers of both runs; delta = B - A, ratio = B / A")
        self.table.setObjectName("headline")
        self.table.resizeColumnsToContents()
        self.notes = _notes_label("<ul>" + "".join(f"<li>{n}</li>" for n in cmp.notes) + "</ul>")

        self.plot = pg.PlotWidget()
        pi = self.plot.getPlotItem()
        pi.setTitle("B / A of the headline numbers (1 = same)")
        pi.setLabel("bottom", "ratio B / A")
        pi.setMouseEnabled(False, False)
        pi.hideButtons()
        h = cmp.headline.set_index("metric")
        names = [m for m in self.RATIO_METRICS if m in h.index]
        r = np.array([h.loc[m, "ratio"] for m in names], dtype=np.float64)
        r = np.where(np.isfinite(r), r, 0.0)
        self.ratios = dict(zip(names, r, strict=True))
        brushes = [pg.mkBrush("#2ca02c" if v < 1 else "#d62728" if v > 1 else "#7f7f7f") for v in r]
        self.bars = pg.BarGraphItem(x0=0, y=np.arange(len(names)), height=0.6, width=r, brushes=brushes, pen=None)
        pi.addItem(self.bars)
        pi.addItem(pg.InfiniteLine(pos=1.0, angle=90, pen=pg.mkPen("#888888", style=Qt.DashLine)))
        for i, v in enumerate(r):
            t = pg.TextItem(f"{v:.3f}", anchor=(0, 0.5), color=theme.colors()["plot_fg"])
            t.setPos(v, i)
            pi.addItem(t)
        pi.getAxis("left").setTicks([[(i, n) for i, n in enumerate(names)]])
        pi.getViewBox().invertY(True)
        pi.setXRange(0, max(1.2, float(r.max()) * 1.25 if len(r) else 1.2), padding=0)
        pi.setYRange(-0.6, len(names) - 0.4, padding=0)

        split = QSplitter(Qt.Vertical)
        top = QWidget()
        tl = QVBoxLayout(top)
        tl.setContentsMargins(0, 0, 0, 0)
        tl.addWidget(self.title)
        tl.addWidget(self.notes)
        tl.addStretch(1)
        row = QSplitter(Qt.Horizontal)
        row.addWidget(self.table)
        row.addWidget(self.plot)
        row.setSizes([650, 550])
        split.addWidget(top)
        split.addWidget(row)
        split.setSizes([170, 700])
        lay = QVBoxLayout(self)
        lay.addWidget(split)

    def plot_items(self) -> dict:
        return {"ratios": self.plot.getPlotItem()}

    def tables(self) -> dict:
        return {"headline": self.cmp.headline, "phases": self.cmp.phases}


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
        self.hover = QLabel("Hover a tile: its bytes in A and B")
        self.hover.setMinimumWidth(420)
        top = QHBoxLayout()
        top.addWidget(QLabel("Colour:"))
        top.addWidget(self.measure_box)
        top.addWidget(self.diff_box)
        top.addStretch(1)
        top.addWidget(self.hover)

        self.glw = pg.GraphicsLayoutWidget()
        self.plot_a = self._heat_plot(f"A: {cmp.label_a} — {cmp.a.target.name} (tile floor plan, schematic)")
        self.plot_b = self._heat_plot(f"B: {cmp.label_b} — {cmp.b.target.name} (tile floor plan, schematic)")
        self.plot_d = self._heat_plot(f"B − A per tile ({cmp.label_b} − {cmp.label_a})")
        self.img_a, self.img_b, self.img_d = (pg.ImageItem(axisOrder="row-major") for _ in range(3))
        self.plot_a.addItem(self.img_a)
        self.plot_b.addItem(self.img_b)
        self.plot_d.addItem(self.img_d)
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
        self.marks = []
        for p in (self.plot_a, self.plot_b, self.plot_d):
            m = pg.ScatterPlotItem(pxMode=False, symbol="s", size=1.8, brush=None,
                                   pen=pg.mkPen(theme.colors()["select"], width=3))
            m.setZValue(10)
            p.addItem(m)
            self.marks.append(m)
        self.glw.scene().sigMouseMoved.connect(self._hovered)

        self.note = _notes_label(cmp.tile_note)
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

        for plot, lay in ((self.plot_a, self.lay_a), (self.plot_b, self.lay_b), (self.plot_d, self.lay_a)):
            for ipu in range(lay.num_ipus):
                r, c = lay.ipu_origin(ipu)
                t = pg.TextItem(f"IPU {ipu}", color=theme.colors()["plot_fg"], anchor=(0, 1))
                t.setPos(c, r)
                plot.addItem(t)
        self.measure_box.currentIndexChanged.connect(lambda _: self.set_measure(self.measure_box.currentData()))
        self.diff_box.toggled.connect(self.set_difference)
        self._arrange()
        self.redraw()

    def _heat_plot(self, title: str) -> pg.PlotItem:
        p = pg.PlotItem()
        p.setTitle(title, size="10pt")
        p.setAspectLocked(True)
        p.invertY(True)
        p.hideAxis("left")
        p.hideAxis("bottom")
        p.hideButtons()
        p.setMenuEnabled(False)
        return p

    def _build_per_ipu(self) -> QWidget:
        w = pg.PlotWidget()
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
        pi.addItem(pg.BarGraphItem(x=x - 0.2, height=a, width=0.38, brush=COLOR_A, pen=None))
        pi.addItem(pg.BarGraphItem(x=x + 0.2, height=b, width=0.38, brush=COLOR_B, pen=None))
        pi.legend.addItem(pg.BarGraphItem(x=[0], height=[0], width=0, brush=COLOR_A), f"A: {self.cmp.label_a}")
        pi.legend.addItem(pg.BarGraphItem(x=[0], height=[0], width=0, brush=COLOR_B), f"B: {self.cmp.label_b}")
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
            self.img_d.setImage(self.lay_a.image(d), autoLevels=False, levels=(-m, m))
            self.diff_bar.setLevels((-m, m))  # symmetric: white is exactly 0
            self.diff_bar.axis.setLabel(f"B − A {label} ({self.unit()})")
            self.plot_d.setRange(xRange=(0, self.lay_a.width), yRange=(-3, self.lay_a.height), padding=0.02)
        else:
            lo, hi = self.levels()
            va = self.tm_a.values(self.measure) / self.scale()
            vb = self.tm_b.values(self.measure) / self.scale()
            self.img_a.setImage(self.lay_a.image(va), autoLevels=False, levels=(lo, hi))
            self.img_b.setImage(self.lay_b.image(vb), autoLevels=False, levels=(lo, hi))
            self.colorbar.setLevels((lo, hi))
            self.colorbar.axis.setLabel(f"{label} ({self.unit()}), same scale for A and B")
            self.plot_a.setRange(xRange=(0, self.lay_a.width), yRange=(-3, self.lay_a.height), padding=0.02)
            if not self.cmp.tile_by_tile:
                self.plot_b.setRange(xRange=(0, self.lay_b.width), yRange=(-3, self.lay_b.height), padding=0.02)
        self._draw_cursor()

    # ---- cursor: the same tile marked in every map
    def _tile_under(self, scene_pos) -> tuple[int, str]:
        for p, lay, side in ((self.plot_a, self.lay_a, "A"), (self.plot_b, self.lay_b, "B"),
                             (self.plot_d, self.lay_a, "D")):
            if p.scene() is None or not p.isVisible():
                continue
            vb = p.getViewBox()
            if vb.sceneBoundingRect().contains(scene_pos):
                q = vb.mapSceneToView(scene_pos)
                return lay.tile_at(q.y(), q.x()), side
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
        for m, lay, s in zip(self.marks, (self.lay_a, self.lay_b, self.lay_a), ("A", "B", "D"), strict=True):
            show = tile is not None and (self.cmp.tile_by_tile or s == side) and tile < len(lay.row)
            if show:
                m.setData([lay.col[tile] + 0.5], [lay.row[tile] + 0.5])
            else:
                m.setData([], [])

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


def _fit_columns(table) -> None:
    """Size columns to their contents, sampling the first rows only (fast on big tables)."""
    table.horizontalHeader().setResizeContentsPrecision(30)
    table.resizeColumnsToContents()


class CompareLivenessPage(QWidget):
    def __init__(self, cmp: C.Comparison, parent=None):
        super().__init__(parent)
        self.cmp = cmp
        self.la, self.lb = C.liveness_curves(cmp.a, cmp.b)
        self.plot = pg.PlotWidget()
        pi = self.plot.getPlotItem()
        pi.setTitle("Not-always-live memory on the fullest tile, A and B overlaid")
        pi.setLabel("bottom", "liveness step (leaf program, compile order)")
        pi.setLabel("left", "not-always-live bytes on the fullest tile (KiB)")
        pi.getAxis("left").enableAutoSIPrefix(False)
        pi.showGrid(x=True, y=True, alpha=0.25)
        pi.addLegend(offset=(10, 10))
        ya = self.la["max_tile_bytes"].to_numpy(np.float64) / KIB
        yb = self.lb["max_tile_bytes"].to_numpy(np.float64) / KIB
        self.curve_a = pi.plot(self.la["lstep"].to_numpy(np.float64), ya, pen=pg.mkPen(COLOR_A, width=2),
                               name=f"A: {cmp.label_a} (peak {format_bytes(ya.max() * KIB if len(ya) else 0)})")
        self.curve_b = pi.plot(self.lb["lstep"].to_numpy(np.float64), yb, pen=pg.mkPen(COLOR_B, width=2),
                               name=f"B: {cmp.label_b} (peak {format_bytes(yb.max() * KIB if len(yb) else 0)})")
        self.cursor = pg.InfiniteLine(angle=90, movable=False, pen=pg.mkPen(theme.colors()["select"], width=1))
        pi.addItem(self.cursor)
        self.info = QLabel("Move the mouse over the plot: both runs' bytes at that step")
        self.plot.scene().sigMouseMoved.connect(self._moved)
        lay = QVBoxLayout(self)
        lay.addWidget(self.info)
        lay.addWidget(self.plot, 1)

    def _moved(self, pos) -> None:
        vb = self.plot.getPlotItem().getViewBox()
        if vb.sceneBoundingRect().contains(pos):
            self.set_cursor(int(round(vb.mapSceneToView(pos).x())))

    def set_cursor(self, lstep: int) -> None:
        self.cursor.setValue(lstep)

        def at(df):
            r = df[df["lstep"] == lstep]
            return "—" if len(r) == 0 else f"{format_bytes(r['max_tile_bytes'].iloc[0])} ({r['name'].iloc[0]})"
        self.info.setText(f"step {lstep}: A {at(self.la)};  B {at(self.lb)}")

    def plot_items(self) -> dict:
        return {"liveness": self.plot.getPlotItem()}

    def tables(self) -> dict:
        m = self.la.merge(self.lb, on="lstep", how="outer", suffixes=("_a", "_b"))
        for c in ("max_tile_bytes_a", "total_bytes_a", "max_tile_bytes_b", "total_bytes_b"):
            m[c] = m[c].astype("Int64")  # bytes stay whole numbers; the shorter run's missing steps are <NA>
        return {"liveness": m}


class CompareStepsPage(QWidget):
    def __init__(self, cmp: C.Comparison, parent=None):
        super().__init__(parent)
        self.cmp = cmp
        self.steps = C.step_table(cmp.a, cmp.b)
        self.plot = pg.PlotWidget()
        pi = self.plot.getPlotItem()
        pi.setTitle("Time per BSP phase (cycles / clock), A and B")
        pi.setLabel("left", "time (µs)")
        pi.getAxis("left").enableAutoSIPrefix(False)
        pi.setMouseEnabled(False, False)
        pi.hideButtons()
        ph = cmp.phases.set_index("phase")
        x = np.arange(len(PHASES) + 1, dtype=np.float64)
        names = list(PHASES) + ["total"]
        ta = ph.loc[names, "time_a_s"].to_numpy(np.float64) * 1e6
        tb = ph.loc[names, "time_b_s"].to_numpy(np.float64) * 1e6
        pi.addItem(pg.BarGraphItem(x=x - 0.2, height=ta, width=0.38, brush=COLOR_A, pen=None))
        pi.addItem(pg.BarGraphItem(x=x + 0.2, height=tb, width=0.38, brush=COLOR_B, pen=None))
        leg = pi.addLegend(offset=(-10, 10))
        leg.addItem(pg.BarGraphItem(x=[0], height=[0], width=0, brush=COLOR_A), f"A: {cmp.label_a}")
        leg.addItem(pg.BarGraphItem(x=[0], height=[0], width=0, brush=COLOR_B), f"B: {cmp.label_b}")
        ca = ph.loc[names, "cycles_a"].to_numpy()
        cb = ph.loc[names, "cycles_b"].to_numpy()
        pi.getAxis("bottom").setTicks([[(i, f"{n}\n{int(a):,} / {int(b):,} cyc") for i, (n, a, b)
                                        in enumerate(zip(names, ca, cb, strict=True))]])
        pi.setLabel("bottom", "phase (cycles A / B)")
        self.model = DataFrameModel(self.steps)
        self.table = make_table_view(self.model, "BSP steps matched by (op, kind, n-th occurrence); "
                                     "-1 = no such step in that run")
        self.table.setObjectName("steps")
        _fit_columns(self.table)
        split = QSplitter(Qt.Vertical)
        split.addWidget(self.plot)
        split.addWidget(self.table)
        split.setSizes([420, 420])
        lay = QVBoxLayout(self)
        lay.addWidget(split)

    def plot_items(self) -> dict:
        return {"phases": self.plot.getPlotItem()}

    def tables(self) -> dict:
        return {"steps": self.steps, "phases": self.cmp.phases}


class CompareOpsPage(QWidget):
    def __init__(self, cmp: C.Comparison, parent=None):
        super().__init__(parent)
        self.cmp = cmp
        self.ops = C.op_table(cmp.a, cmp.b)
        self.filter = QLineEdit()
        self.filter.setPlaceholderText("filter ops by name (substring)")
        self.filter.setToolTip("Show only ops whose name contains this text")
        self.model = DataFrameModel(self.ops)
        self.table = make_table_view(self.model, "Ops matched by name; largest change in cycles first")
        self.table.setObjectName("ops")
        _fit_columns(self.table)
        self.filter.textChanged.connect(self._filter)
        lay = QVBoxLayout(self)
        lay.addWidget(self.filter)
        lay.addWidget(self.table, 1)

    def _filter(self, text: str) -> None:
        df = self.ops if not text else self.ops[self.ops["name"].str.contains(text, regex=False)]
        self.model.set_frame(df)

    def tables(self) -> dict:
        return {"ops": self.model.df}


KIND_COLORS = {"compute": "#2ca02c", "sync": "#d62728", "exchange_internal": "#1f77b4",
               "exchange_global": "#9467bd", "stream_copy": "#ff7f0e"}


class CompareTimelinePage(QWidget):
    """BSP steps of A and B on one time axis (µs = cycles / clock, so runs at different clocks line up),
    one lane per step kind, x axes linked, and one cursor drawn in both."""

    def __init__(self, cmp: C.Comparison, parent=None):
        from popvision_lite.profile import schema

        super().__init__(parent)
        self.cmp = cmp
        self.glw = pg.GraphicsLayoutWidget()
        self.plots: list[pg.PlotItem] = []
        self.cursors: list[pg.InfiniteLine] = []
        self.starts: list[np.ndarray] = []
        self.steps_of: list = []
        kinds = list(schema.STEP_KINDS)
        t_max = 0.0
        for row, (p, who, label) in enumerate(((cmp.a, "A", cmp.label_a), (cmp.b, "B", cmp.label_b))):
            s = p.steps
            us = 1e6 / float(p.target.clock_hz)
            start = s["start_cycle"].to_numpy(np.float64) * us
            dur = (s["end_cycle"] - s["start_cycle"]).to_numpy(np.float64) * us
            kind = s["kind"].to_numpy()
            pi = self.glw.addPlot(row=row, col=0)
            pi.setTitle(f"{who}: {label} — {p.target.name} at {p.target.clock_hz / 1e9:.3f} GHz, "
                        f"{len(s):,} steps", size="10pt")
            for k, name in enumerate(kinds):
                m = kind == k
                if m.any():
                    pi.addItem(pg.BarGraphItem(x0=start[m], width=dur[m], y=np.full(int(m.sum()), k), height=0.8,
                                               brush=KIND_COLORS.get(name, "#7f7f7f"), pen=None))
            pi.getAxis("left").setTicks([[(k, n.replace("_", " ")) for k, n in enumerate(kinds)]])
            pi.getAxis("bottom").enableAutoSIPrefix(False)
            pi.setLabel("bottom", "time since run start (µs)")
            pi.setMouseEnabled(x=True, y=False)
            pi.invertY(True)
            pi.setYRange(-0.6, len(kinds) - 0.4, padding=0)
            cur = pg.InfiniteLine(angle=90, movable=False, pen=pg.mkPen(theme.colors()["select"], width=1))
            pi.addItem(cur)
            self.plots.append(pi)
            self.cursors.append(cur)
            self.starts.append(start)
            self.steps_of.append((s, dur))
            if len(start):
                t_max = max(t_max, float(start[-1] + dur[-1]))
        self.plots[1].setXLink(self.plots[0])
        self.plots[0].setXRange(0, t_max or 1.0, padding=0.01)
        self.info = QLabel("Move the mouse over a lane: the step running at that time in A and in B "
                           "(drag / wheel to zoom; the two time axes are linked)")
        self.info.setWordWrap(True)
        self.glw.scene().sigMouseMoved.connect(self._moved)
        lay = QVBoxLayout(self)
        lay.addWidget(self.info)
        lay.addWidget(self.glw, 1)

    def _moved(self, pos) -> None:
        for pi in self.plots:
            vb = pi.getViewBox()
            if vb.sceneBoundingRect().contains(pos):
                self.set_cursor(vb.mapSceneToView(pos).x())
                return

    def step_at(self, which: int, t_us: float) -> int:
        """Index of the step of run ``which`` (0 = A, 1 = B) running at ``t_us``, or -1."""
        start = self.starts[which]
        i = int(np.searchsorted(start, t_us, side="right")) - 1
        if i < 0:
            return -1
        _s, dur = self.steps_of[which]
        return i if t_us <= start[i] + dur[i] else -1

    def set_cursor(self, t_us: float) -> None:
        from popvision_lite.profile import schema

        for c in self.cursors:
            c.setValue(t_us)
        parts = []
        for which, (who, p) in enumerate((("A", self.cmp.a), ("B", self.cmp.b))):
            i = self.step_at(which, t_us)
            if i < 0:
                parts.append(f"{who}: —")
                continue
            s, _dur = self.steps_of[which]
            r = s.iloc[i]
            names = p.ops.set_index("op_id")["name"] if len(p.ops) else {}
            op = names.get(int(r["op_id"]), "") if int(r["op_id"]) >= 0 else ""
            parts.append(f"{who}: step {int(r['step'])} {schema.STEP_KINDS[int(r['kind'])]} {op} "
                         f"({int(r['end_cycle'] - r['start_cycle']):,} cycles)")
        self.info.setText(f"t = {t_us:.3f} µs — " + ";  ".join(parts))

    def plot_items(self) -> dict:
        return {"timeline": self.glw.ci}

    def tables(self) -> dict:
        return {"steps": C.step_table(self.cmp.a, self.cmp.b)}


class CompareRooflinePage(QWidget):
    """Both runs' ops on one log-log roofline with both targets' roofs (A solid blue, B dashed orange)."""

    def __init__(self, cmp: C.Comparison, parent=None):
        from popvision_lite.analysis import roofline as rl

        super().__init__(parent)
        self.cmp = cmp
        self.ra = rl.analyze(cmp.a, gpus=())
        self.rb = rl.analyze(cmp.b, gpus=())
        self.plot = pg.PlotWidget()
        pi = self.plot.getPlotItem()
        pi.setTitle("Roofline of both runs: ops' achieved FLOP/s vs operational intensity")
        pi.setLogMode(x=True, y=True)
        pi.setLabel("bottom", "operational intensity at the op's bounding memory level (FLOP/byte)")
        pi.setLabel("left", "achieved performance (FLOP/s)")
        pi.getAxis("left").enableAutoSIPrefix(False)
        pi.getAxis("bottom").enableAutoSIPrefix(False)
        pi.showGrid(x=True, y=True, alpha=0.25)
        pi.addLegend(offset=(-10, -10))
        pts = [r.points for r in (self.ra, self.rb)]
        xs = np.concatenate([p["intensity"].to_numpy(np.float64) for p in pts] + [np.array([1e-2, 1e4])])
        lx0, lx1 = np.log10(max(xs.min(), 1e-3)) - 0.5, np.log10(xs.max()) + 0.5
        grid = np.logspace(lx0, lx1, 200)
        self.curves = {}
        for who, r, color, style, label in (("A", self.ra, COLOR_A, Qt.SolidLine, cmp.label_a),
                                            ("B", self.rb, COLOR_B, Qt.DashLine, cmp.label_b)):
            for lvl in ("sram", "exchange"):
                if r.ipu.has(lvl):
                    y = r.ipu.attainable(grid, "fp16", lvl)
                    name = f"{who} roof: {r.ipu.name}, FP16 peak, {'tile SRAM' if lvl == 'sram' else 'exchange'}"
                    self.curves[(who, lvl)] = pi.plot(grid, y, pen=pg.mkPen(color, width=2, style=style), name=name)
            p = r.points
            size = 6 + 30 * np.sqrt(np.clip(p["share"].to_numpy(np.float64), 0, 1))
            sc = pg.ScatterPlotItem(x=np.log10(p["intensity"].to_numpy(np.float64)),
                                    y=np.log10(np.maximum(p["achieved_flops"].to_numpy(np.float64), 1.0)),
                                    size=size, symbol="o" if who == "A" else "t",
                                    brush=pg.mkBrush(color + "b0"), pen=pg.mkPen("#333333", width=0.5),
                                    name=f"{who}: {label} ops ({len(p)})")
            pi.addItem(sc)
            self.curves[(who, "ops")] = sc
        self.note = _notes_label("Points sized by the op's share of its run's cycles. A op and B op with the "
                                 "same name are listed side by side in the Operations tab.")
        lay = QVBoxLayout(self)
        lay.addWidget(self.note)
        lay.addWidget(self.plot, 1)

    def plot_items(self) -> dict:
        return {"roofline": self.plot.getPlotItem()}

    def tables(self) -> dict:
        a = self.ra.ops[["name", "intensity", "achieved_flops", "bound"]]
        b = self.rb.ops[["name", "intensity", "achieved_flops", "bound"]]
        return {"roofline": a.merge(b, on="name", how="outer", suffixes=("_a", "_b"))}
