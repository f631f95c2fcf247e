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

One job per module: this one holds the view's state, its wiring to the document, the step details and the
order of a redraw (each item is given the visible range and draws itself); ``layout.py`` builds the widgets
and plot items.  What is drawn are the items of ``gui/items/`` the view owns, each with explicit inputs:
``PhaseBandItem`` (phases), ``StepLaneItem`` and ``StepLabelsItem`` (steps, op names), ``TileLanesItem``
(tiles), ``StepHighlightItem`` and ``TileBandItem`` (selection from other views), ``StepCyclesItem`` and
``ImbalanceItem`` (per-step charts), ``FoldOverlayItem`` (stretches not stored).  Helper objects:
``navigation.py: Navigation`` (keys, zoom, pan, markers), ``search.py: OpSearch`` (op search),
``range_summary.py: RangeSummary`` (the Shift+drag range's summary).
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QEvent, Qt, QTimer, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QWidget

from popvision_lite.analysis import execution as ex
from popvision_lite.analysis import selection as sel
from popvision_lite.analysis import step_phases as sp
from popvision_lite.analysis.run_totals import run_totals
from popvision_lite.gui import theme
from popvision_lite.gui.items.imbalance import imbalance_ticks
from popvision_lite.gui.items.phase_band import phase_html
from popvision_lite.gui.text import plain_html
from popvision_lite.gui.theme import STEP_KIND_COLORS, STEP_KIND_LABELS
from popvision_lite.gui.views.execution import layout
from popvision_lite.gui.views.execution.navigation import Navigation
from popvision_lite.gui.views.execution.range_summary import RangeSummary
from popvision_lite.gui.views.execution.search import OpSearch
from popvision_lite.units import format_seconds

DEBOUNCE_MS = 25


class ExecutionView(QWidget):
    """The execution timeline of ``document.profile``; see the module docstring."""

    redrawn = Signal()

    def __init__(self, document, parent=None):
        super().__init__(parent)
        pg.setConfigOptions(imageAxisOrder="row-major")
        self.document = document
        p = document.profile
        self.profile = p
        self.index = self._cached("execution.step_index", ex.StepIndex.from_profile, p)
        self.names = self._cached("execution.op_names", ex.op_names, p)
        t = p.target
        self.tpi = int(t.tiles_per_ipu)
        self.nipu = int(t.num_ipus)
        self.ntiles = int(t.num_tiles)
        self.clock_hz = float(t.clock_hz)
        self.use_time = False
        self.current_step = -1
        self.highlight_steps = np.zeros(0, np.int64)
        self.selected_tiles = np.zeros(0, np.int64)
        self.last_bins: ex.StepBins | None = None
        self.phase_spans = self._cached("execution.phase_spans", sp.phase_spans, p)
        # the run ends where its last phase ends (the stored steps may stop before: folded runs)
        self.run_end = sp.run_end(self.phase_spans, self.index.t1)
        self.search = OpSearch(p, self.index)
        self.ranges = RangeSummary(p, self.index, self.names, self.ntiles, self.clock_hz, parent=self)
        self._timer = QTimer(self)  # the redraw debounce (the theme hook below schedules one)
        self._timer.setSingleShot(True)
        self._timer.setInterval(DEBOUNCE_MS)
        self._closed = False
        layout.build(self)
        self.nav = Navigation(self.tile_vb, self.tile_plot, self.clock_hz, {
            "fit": self.fit_selection, "reset": self.reset_view, "search": self._focus_search,
            "help": self.toggle_help, "escape": self.help.hide, "jump": self.jump_match}, parent=self)
        self.drawn_label.setText(self._drawn_text())
        self._apply_theme()
        self._connect()
        self.reset_view()
        self.refresh()

    def _connect(self) -> None:
        """The helpers' output to the panels, range changes to the debounced redraw, the document to the view."""
        self.canvas.installEventFilter(self.nav)
        self.nav.message.connect(self.status.setText)
        self.ranges.shown.connect(self.info.setHtml)
        self.ranges.progress.connect(self.status.setText)
        theme.notifier.changed.connect(self._apply_theme)
        self._timer.timeout.connect(self.refresh)
        self.tile_vb.sigRangeChanged.connect(self._schedule)
        self.document.selection.changed.connect(self._on_selection)
        closing = getattr(self.document, "closing", None)
        if closing is not None:
            closing.connect(self._on_closing)

    def _drawn_text(self) -> str:
        """Which replica the lanes show, of how many IPUs, and what the phase band and hatching mean."""
        try:
            rt = self._cached("execution.run_totals", run_totals, self.profile)
        except (AttributeError, KeyError, TypeError, ValueError):
            return ""
        return sp.lanes_text(rt, self.phase_spans)

    def _apply_theme(self, *_):
        for fold in self.folds:
            fold.restyle()
        theme.restyle_plot(self.canvas)
        self.tile_lanes.restyle()
        self.colorbar.setColorMap(pg.ColorMap(np.linspace(0, 1, 255), theme.busy_lut()[:255]))
        self._legend_samples[-1].setOpts(brush=pg.mkBrush(theme.wait_color()))
        self._schedule()  # the notes over folded spans take the new theme's colours at the redraw

    # ------------------------------------------------------------------ redraw (level of detail)
    def refresh(self):
        """Give every item the visible range (called debounced on range changes)."""
        self._timer.stop()
        if self._closed:
            return
        x0, x1 = self.x_range()
        y0, y1 = self.y_range()
        w, h = self._pixels()
        origin = float(np.floor(x0))  # items are rebased here: small local x, no float artefacts on long runs
        if self.phase_spans:
            self.phase_band.draw(x0, x1, w)
            self.folds[1].draw(x0, x1, w, y0, y1)
        self.step_labels.draw(self.step_lane.draw(x0, x1, w, origin), x0, x1, w)
        exact = self.tile_lanes.draw(x0, x1, y0, y1, w, h, origin)
        self.colorbar.setVisible(not exact)  # exact rectangles are coloured by step kind, not a busy scale
        self.status.setText(self.tile_lanes.status)
        self._draw_charts(x0, x1, w, origin)
        self.tile_band.set_tiles(self.selected_tiles, x0, x1)
        for hl in (self.step_hl, self.tile_hl):
            hl.set_steps(self.highlight_steps, x0, x1, w, origin)
        self.redrawn.emit()

    def _draw_charts(self, x0, x1, w, origin):
        """Cycles per step and imbalance from one binning of the visible steps (per step, or per bucket)."""
        b = self.last_bins = ex.step_bins(self.index, x0, x1, w)
        self.chart_vb.setYRange(0, self.cycles.set_bins(b, origin), padding=0)
        self.chart_plot.setLabel("left", "cycles / step" if b.per_step else "mean cycles/step")
        top = self.imbalance.set_bins(b, origin)
        self.imb_vb.setYRange(0.0, top, padding=0)
        self.imb_plot.getAxis("left").setTicks(imbalance_ticks(top))

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
        return self.nav.x_range()

    def y_range(self) -> tuple[float, float]:
        _, (y0, y1) = self.tile_vb.viewRange()
        return float(y0), float(y1)

    def set_x_range(self, x0: float, x1: float):
        self.nav.set_x_range(x0, x1)

    def pan(self, fraction: float):
        self.nav.pan(fraction)

    def add_marker(self, x: float):
        self.nav.add_marker(x)

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
        self.ranges.close()

    def _pixels(self) -> tuple[int, int]:
        """Pixel size of the tile lanes (a default before the widget is laid out)."""
        w = int(self.tile_vb.width()) if self.tile_vb.width() > 0 else 800
        h = int(self.tile_vb.height()) if self.tile_vb.height() > 0 else 400
        return max(w, 16), max(h, 8)

    # ------------------------------------------------------------------ clicks / range
    def _on_mouse_moved(self, pos):
        if self.tile_vb.sceneBoundingRect().contains(pos) or self.step_vb.sceneBoundingRect().contains(pos) \
                or self.chart_vb.sceneBoundingRect().contains(pos):
            self.nav.cursor_x = float(self.tile_vb.mapSceneToView(pos).x())
            if self.tile_vb.sceneBoundingRect().contains(pos):
                p = self.tile_vb.mapSceneToView(pos)
                tip = self.tile_lanes.tooltip_at(p.x(), p.y())
                if tip is not None:
                    self.tile_vb.setToolTip(tip)

    def _on_click(self, x, y, double, sender=None):
        if sender is self.phase_vb or sp.hidden_at(self.phase_spans, x) is not None:
            phase = self.phase_band.phase_at(x)  # a click on the band or a folded span shows its phase
            if phase is not None:
                self.info.setHtml(phase_html(phase, self.clock_hz))
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

    # ------------------------------------------------------------------ keys, search, range
    def eventFilter(self, obj, event):  # noqa: N802 - Qt's name; the search box: Enter / Shift+Enter / Escape
        if obj is self.search_edit and event.type() == QEvent.KeyPress:
            if event.key() in (Qt.Key_Return, Qt.Key_Enter):
                self.jump_match(forward=not (event.modifiers() & Qt.ShiftModifier))
                return True
            if event.key() == Qt.Key_Escape:
                self.canvas.setFocus()
                return True
        return super().eventFilter(obj, event)

    def _focus_search(self):
        self.search_edit.setFocus()
        self.search_edit.selectAll()

    def toggle_help(self):
        self.help.setVisible(not self.help.isVisible())
        self.help.raise_()

    def fit_selection(self):
        """Fit the x range to the selected range, else the highlighted steps, else the current step."""
        if self.region.isVisible():
            a, b = self.region.getRegion()
        elif len(self.highlight_steps):
            a = float(self.index.start[self.highlight_steps[0]])
            b = float(self.index.end[self.highlight_steps[-1]])
        elif self.current_step >= 0:
            a = float(self.index.start[self.current_step])
            b = float(self.index.end[self.current_step])
        else:
            return
        pad = 0.02 * max(b - a, 1)
        self.set_x_range(a - pad, b + pad)

    def set_search(self, text: str):
        self.status.setText(self.search.set_text(text))
        self.highlight_steps = self.search.matches
        self._schedule()

    def jump_match(self, forward: bool = True) -> int:
        """Centre the next (previous) matching step and show it; -1 when nothing matches."""
        cur = self.current_step if self.current_step >= 0 else (
            int(self.index.visible(*self.x_range())[0]) - (1 if forward else 0))
        s = self.search.jump(cur, forward)
        if s < 0:
            return -1
        self.current_step = s
        x0, x1 = self.x_range()
        width = x1 - x0
        a, b = float(self.index.start[s]), float(self.index.end[s])
        if b - a > 0.8 * width:
            width = (b - a) / 0.8
        c = (a + b) / 2
        self.set_x_range(c - width / 2, c + width / 2)
        self.show_step(s)
        self.status.setText(f"match {self.search.pos + 1}/{len(self.search.matches)}: step {s} "
                            f"{self.names.get(int(self.index.op_id[s]), '')}")
        return s

    def _on_range_drag(self, a, b, finished):
        self.region.setRegion((a, b))
        self.region.show()
        if finished:
            self._on_region_done()

    def select_range(self, a: float, b: float):
        """Select cycles [a, b) (as Shift+drag does): shows the summary and writes step_range."""
        self.region.setRegion((a, b))
        self.region.show()
        self._on_region_done()

    def _on_region_done(self, *_):
        if not self.region.isVisible():
            return
        steps = self.ranges.summarise(*self.region.getRegion())
        if steps is not None:
            self.document.selection.update(source="execution", step_range=steps)

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
            f"<tr><td>tiles active</td><td>{d['tiles_active']:,} of the {d['tiles_of_step']:,} it runs on</td></tr>"
            f"<tr><td>busy max / mean</td><td>{d['busy_max']:,} / {d['busy_mean']:,.1f} cycles (over those "
            f"tiles)</td></tr>"
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
