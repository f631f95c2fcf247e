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

One job per module: this one holds the view's state, its wiring to the document and the step details;
``layout.py`` builds the widgets and plot items, ``drawing.py`` redraws the lanes at the level of detail
the pixels allow, ``navigation.py`` handles keys, zoom, pan and search, ``range_summary.py`` the Shift+drag
range and its summary.  The pyqtgraph subclasses are ``gui/items/tile_axis.py`` and ``lane_view_box.py``.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QTimer, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QWidget

from popvision_lite.analysis import execution as ex
from popvision_lite.analysis import selection as sel
from popvision_lite.analysis import step_phases as sp
from popvision_lite.analysis.run_totals import run_totals
from popvision_lite.gui import theme
from popvision_lite.gui.text import plain_html
from popvision_lite.gui.theme import STEP_KIND_COLORS, STEP_KIND_LABELS
from popvision_lite.gui.views.execution import layout
from popvision_lite.gui.views.execution.drawing import LaneDrawing
from popvision_lite.gui.views.execution.navigation import Navigation
from popvision_lite.gui.views.execution.phases import PhaseBand
from popvision_lite.gui.views.execution.range_summary import RangeSummary
from popvision_lite.units import format_seconds

DEBOUNCE_MS = 25


class ExecutionView(Navigation, RangeSummary, PhaseBand, LaneDrawing, QWidget):
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
        self.phase_spans = self._cached("execution.phase_spans", sp.phase_spans, p)
        # the run ends where its last phase ends (the stored steps may stop before: folded runs)
        self.run_end = sp.run_end(self.phase_spans, self.index.t1)
        layout.build(self)
        self.drawn_label.setText(self._drawn_text())
        self._apply_theme()
        theme.notifier.changed.connect(self._apply_theme)
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

    def _drawn_text(self) -> str:
        """Which replica the lanes show, of how many IPUs, and what the phase band and hatching mean."""
        try:
            rt = self._cached("execution.run_totals", run_totals, self.profile)
        except (AttributeError, KeyError, TypeError, ValueError):
            return ""
        fold = [s for s in self.phase_spans if s.folded]
        text = f"Lanes: {rt.drawn_text}; {rt.ipu_count_text}, one lane per IPU of the replica."
        if any(s.hidden for s in self.phase_spans):
            text += " Hatched: parts of the step the profile does not store" + ("" if not fold else " (" + "; ".join(
                f"{s.name} x{s.runs:,}: {s.stored_runs:,} drawn, {s.folded_runs:,} folded" for s in fold) + ")") + \
                "; click one for what it stands for."
        return text

    def _apply_theme(self, *_):
        for cover in getattr(self, "fold_covers", []):
            cover.setOpts(brush=pg.mkBrush(theme.colors()["plot_bg"]))
        theme.restyle_plot(self.canvas)
        lut = theme.busy_lut()
        self.tile_img.setLookupTable(lut)
        self.colorbar.setColorMap(pg.ColorMap(np.linspace(0, 1, 255), lut[:255]))
        wait = pg.mkBrush(theme.wait_color())
        self.wait_bars.setOpts(brush=wait)
        self._legend_samples[-1].setOpts(brush=wait)
        if hasattr(self, "_timer"):  # the notes over folded spans take the new theme's colours at the redraw
            self._schedule()

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
        # the whole step, and no further: panning stops at the run's first and last cycle
        t0, t1 = min(self.index.t0, 0), max(self.run_end, self.index.t0 + 1)
        self.tile_vb.setLimits(xMin=t0, xMax=t1, minXRange=4, yMin=-0.5, yMax=self.ntiles + 0.5, minYRange=1)
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
        if sender is self.phase_vb or sp.hidden_at(self.phase_spans, x) is not None:
            self._on_phase_click(x)
            return
        if double and sender is self.tile_vb:
            self.toggle_expand(int(np.clip(y, 0, self.ntiles - 1)) // self.tpi)
            return
        ipu = int(np.clip(y, 0, self.ntiles - 1)) // self.tpi if sender is self.tile_vb else None
        s = self.index.step_at(x, ipu)
        if s < 0:
            return
        self.current_step = s
        self.show_step(s)
        self.mark_step(s)
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

    def mark_step(self, s: int | None):
        """The selected step as a band across the lanes (None clears it)."""
        marks = getattr(self, "_step_marks", None)
        if marks is None:
            c = QColor(theme.colors()["select"])
            c.setAlpha(60)
            marks = self._step_marks = []
            for pl in (self.step_plot, self.tile_plot):
                band = pg.LinearRegionItem(movable=False, brush=pg.mkBrush(c),
                                           pen=pg.mkPen(theme.colors()["select"], width=1.5))
                band.setZValue(20)
                pl.addItem(band, ignoreBounds=True)
                marks.append(band)
        for band in marks:
            if s is None or not 0 <= s < self.index.n:
                band.hide()
                continue
            band.setRegion((float(self.index.start[s]), float(max(self.index.end[s], self.index.start[s] + 1))))
            band.show()

    def showEvent(self, event):
        super().showEvent(event)
        self.canvas.setFocus()  # keys (W/A/S/D, /, ?) reach the view without a click first

    def show_step(self, s: int):
        d = ex.step_details(self.profile, self.index, s, self.names)
        phase = sp.phase_of_step(self.phase_spans, s)
        op = (plain_html(str(d['op'])) + f" (id {d['op_id']})" if int(d["op_id"]) >= 0 else
              f"none: a step of the {plain_html(phase.name)} phase" if phase is not None else "none")
        extra = ""
        if phase is not None:
            extra += f"<tr><td>phase</td><td>{plain_html(phase.label)}</td></tr>"
            if phase.traffic:
                extra += f"<tr><td>moves</td><td>{plain_html(phase.traffic)}</td></tr>"
        self.info.setHtml(
            f"<h3>Step {d['step']}</h3><table>"
            f"<tr><td>op</td><td><b>{op}</b></td></tr>{extra}"
            f"<tr><td>kind</td><td><span style='color:{STEP_KIND_COLORS[d['kind']]}'>&#9632;</span> "
            f"{STEP_KIND_LABELS[d['kind']]}</td></tr>"
            f"<tr><td>IPU</td><td>{d['ipu']}</td></tr>"
            f"<tr><td>start</td><td>{d['start_cycle']:,} cycles ({format_seconds(d['start_cycle'] / self.clock_hz)})</td></tr>"
            f"<tr><td>end</td><td>{d['end_cycle']:,} cycles</td></tr>"
            f"<tr><td>duration</td><td>{d['cycles']:,} cycles ({format_seconds(d['cycles'] / self.clock_hz)})</td></tr>"
            f"<tr><td>tiles active</td><td>{d['tiles_active']:,} of {self.ntiles:,}</td></tr>"
            f"<tr><td>busy max / mean</td><td>{d['busy_max']:,} / {d['busy_mean']:,.1f} cycles</td></tr>"
            f"<tr><td>bytes in / out</td><td>{d['bytes_in']:,} / {d['bytes_out']:,}</td></tr></table>")

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
        # the tile lanes are not listed alone: with their colour bar they export as the whole figure
        return {"execution": self.canvas.ci, "steps": self.step_plot, "per_step": self.chart_plot,
                "imbalance": self.imb_plot}

    def resizeEvent(self, ev):
        super().resizeEvent(ev)
        self._schedule()
