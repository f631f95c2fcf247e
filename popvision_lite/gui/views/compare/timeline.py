"""Compare Execution: A and B as the Execution view draws a run, one above the other, on one time base.

Each run gets the single-profile Execution view's parts, not a copy of them: its run totals
(:func:`~popvision_lite.analysis.run_totals.run_totals`: wall time of the step, the IPU count, the parts' shares),
the phase band (:class:`~popvision_lite.gui.items.phase_band.PhaseBandItem`: fill / steady state / drain / host,
parts the profile does not store hatched), the per-IPU step lane (:class:`~popvision_lite.gui.items.step_lane.
StepLaneItem`, named by :class:`~popvision_lite.gui.items.lane_axis.LaneAxis`), the folded and not-stored spans
hatched with their notes (:class:`~popvision_lite.gui.items.fold_overlay.FoldOverlayItem`) and the sentence that
says what the lanes show (:func:`~popvision_lite.analysis.step_phases.lanes_text`).

Time base: each run's items stay in its own cycles (as in the Execution view); the two x ranges are kept on the
same WALL TIME (seconds = cycles / the run's clock), so runs at different clocks line up, and the time axes are
in seconds with SI prefixes (ms, s).  The cursor and :meth:`CompareTimelinePage.step_at` take seconds.
"""

from __future__ import annotations

import textwrap

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QVBoxLayout, QWidget

from popvision_lite.analysis import compare as C
from popvision_lite.analysis import execution as ex
from popvision_lite.analysis import step_phases as sp
from popvision_lite.analysis.run_totals import PARTS, run_totals
from popvision_lite.gui import theme
from popvision_lite.gui.items.fold_overlay import FoldOverlayItem
from popvision_lite.gui.items.lane_axis import LaneAxis
from popvision_lite.gui.items.phase_band import PhaseBandItem
from popvision_lite.gui.items.step_lane import StepLaneItem
from popvision_lite.gui.text import plain_label
from popvision_lite.gui.theme import STEP_KIND_COLORS, STEP_KIND_LABELS
from popvision_lite.profile import schema
from popvision_lite.units import format_seconds

AXIS_WIDTH = 70     # px of every left axis, so the lanes of A and B start at the same x
DEBOUNCE_MS = 25
HEADER_CHARS = 150  # a run's header is wrapped at this many characters (wider would widen the plots past the window)


def run_header(who: str, label: str, profile, rt, spans, summary) -> str:
    """The lines above a run's lanes: what ran, whether it fits, its wall time and IPUs, the parts' shares, what
    the lanes show."""
    t = profile.target
    shares = " · ".join(f"{p} {100 * rt.part_share.get(p, 0.0):.1f} %" for p in PARTS)
    first = (f"{who}: {label} — {t.name} at {t.clock_hz / 1e9:.3f} GHz; {summary.fit_text}; {rt.ipu_count_text}; step "
             f"{format_seconds(rt.step_seconds)} wall; {shares} of {rt.ipu_time_name}")
    return "\n".join(textwrap.wrap(first, HEADER_CHARS) + textwrap.wrap(sp.lanes_text(rt, spans), HEADER_CHARS))


class RunTimeline:
    """One run's rows of the page: header, phase band, per-IPU step lane with the not-stored spans hatched."""

    def __init__(self, layout: pg.GraphicsLayout, row: int, who: str, label: str, profile, summary):
        self.profile = profile
        self.who = who
        t = profile.target
        self.clock_hz = float(t.clock_hz)
        self.nipu = max(1, int(t.num_ipus))
        self.index = ex.StepIndex.from_profile(profile)
        self.spans = sp.phase_spans(profile)
        self.rt = run_totals(profile)
        self.run_end = sp.run_end(self.spans, self.index.t1)
        self.header = pg.LabelItem(justify="left")
        self.header_text = run_header(who, label, profile, self.rt, self.spans, summary)
        layout.addItem(self.header, row=row, col=0)
        self.phase_plot = layout.addPlot(row=row + 1, col=0, enableMenu=False)  # no context menu: none built
        self.phase_plot.setFixedHeight(54)
        self.phase_plot.hideAxis("bottom")
        self.phase_plot.getAxis("left").setTicks([[(0.5, "phases")]])
        self.phase_band = PhaseBandItem(self.spans)
        self.phase_plot.addItem(self.phase_band)
        self.step_plot = layout.addPlot(row=row + 2, col=0, axisItems={"left": LaneAxis(self.nipu)}, enableMenu=False)
        self.step_plot.invertY(True)  # IPU 0 at the top, as in the single-profile Execution view's tile lanes
        self.step_plot.setMinimumHeight(90)
        self.step_lane = StepLaneItem(self.index, self.nipu, profile.stored_table("steps") if self.nipu > 1 else None)
        self.step_plot.addItem(self.step_lane)
        self.fold = FoldOverlayItem(self.spans, 0.0, 1.0, self.clock_hz, notes=True)
        self.step_plot.addItem(self.fold, ignoreBounds=True)
        self.cursor = pg.InfiniteLine(angle=90, movable=False, pen=pg.mkPen(theme.colors()["select"], width=1))
        self.step_plot.addItem(self.cursor, ignoreBounds=True)
        ax = self.step_plot.getAxis("bottom")
        ax.setScale(1.0 / self.clock_hz)  # cycles drawn, seconds read: "ms" / "s", never "1.8e+06 µs"
        ax.enableAutoSIPrefix(True)
        self.step_plot.setLabel("bottom", f"{who}: wall time since the step's start", units="s")
        self.phase_plot.setXLink(self.step_plot)
        for pl in (self.phase_plot, self.step_plot):
            pl.getAxis("left").setWidth(AXIS_WIDTH)
            pl.setYRange(0, 1, padding=0)
            pl.setMouseEnabled(x=True, y=False)
            pl.hideButtons()
            pl.setMenuEnabled(False)
        self.restyle()

    @property
    def t_end(self) -> float:
        """Wall seconds of the run (its last phase's end)."""
        return self.run_end / self.clock_hz

    def restyle(self) -> None:
        c = theme.colors()
        self.header.setText(self.header_text, color=c["plot_fg"], size="9pt")  # plain text: the guard escapes it
        self.fold.restyle()

    def set_time_range(self, t0: float, t1: float) -> None:
        self.step_plot.setXRange(t0 * self.clock_hz, t1 * self.clock_hz, padding=0)

    def time_range(self) -> tuple[float, float]:
        (x0, x1), _ = self.step_plot.getViewBox().viewRange()
        return x0 / self.clock_hz, x1 / self.clock_hz

    def draw(self, width_px: int) -> None:
        (x0, x1), _ = self.step_plot.getViewBox().viewRange()
        origin = float(np.floor(x0))
        if self.spans:
            self.phase_band.draw(x0, x1, width_px)
        self.fold.draw(x0, x1, width_px, 0.0, 1.0)
        self.step_lane.draw(x0, x1, width_px, origin)
        self.mode = "raster" if self.step_lane.image.isVisible() else "steps"

    def step_at(self, t: float, ipu: int | None = None) -> int:
        """Index (in step order) of the step running at wall second ``t`` on ``ipu`` (any IPU if None), or -1."""
        return self.index.step_at(t * self.clock_hz, ipu)

    def ipu_at(self, y: float) -> int:
        """The IPU lane at lane height ``y`` (IPU 0 at the bottom)."""
        return int(np.clip(np.floor(y * self.nipu), 0, self.nipu - 1))


class CompareTimelinePage(QWidget):
    """A and B as the Execution view draws them, one above the other, on one wall-time axis, one cursor."""

    def __init__(self, cmp: C.Comparison, parent=None):
        super().__init__(parent)
        self.cmp = cmp
        self.glw = pg.GraphicsLayoutWidget()
        self.glw.setAntialiasing(False)
        ci = self.glw.ci
        ci.setSpacing(2)
        self.runs = [RunTimeline(ci, 0, "A", cmp.label_a, cmp.a, cmp.summary_a),
                     RunTimeline(ci, 3, "B", cmp.label_b, cmp.b, cmp.summary_b)]
        # the run with more IPUs gets the taller lane, so one IPU lane is about as tall in A as in B
        for k, run in enumerate(self.runs):
            ci.layout.setRowStretchFactor(3 * k + 2, max(2, min(run.nipu, 16)))
        self.legend = pg.LegendItem(colCount=len(schema.STEP_KINDS), sampleType=None)
        for k in schema.STEP_KINDS:
            self.legend.addItem(pg.BarGraphItem(x0=[0], width=[1], height=[1], brush=STEP_KIND_COLORS[k], pen=None),
                                STEP_KIND_LABELS[k])
        ci.addItem(self.legend, row=6, col=0)
        self.t_max = max(r.t_end for r in self.runs) or 1.0
        for r in self.runs:
            r.step_plot.setLimits(xMin=0.0, xMax=self.t_max * r.clock_hz)
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(DEBOUNCE_MS)
        self._timer.timeout.connect(self.redraw)
        self._syncing = False
        for r in self.runs:
            vb = r.step_plot.getViewBox()
            vb.sigXRangeChanged.connect(lambda *_, r=r: self._range_changed(r))
            vb.sigResized.connect(lambda *_: self._timer.start())
        self.set_time_range(0.0, self.t_max)
        self.info = plain_label("Move the mouse over a lane: the step running at that wall time on that IPU in A "
                                "and in B (drag / wheel to zoom; both runs keep the same wall-time range)")
        self.info.setWordWrap(True)
        self.glw.scene().sigMouseMoved.connect(self._moved)
        theme.notifier.changed.connect(self._restyle)
        lay = QVBoxLayout(self)
        lay.addWidget(self.info)
        lay.addWidget(self.glw, 1)
        self.redraw()

    # ---- one time base
    @property
    def plots(self) -> list[pg.PlotItem]:
        """The step lanes of A and B."""
        return [r.step_plot for r in self.runs]

    def set_time_range(self, t0: float, t1: float) -> None:
        """Show wall seconds [t0, t1) in both runs."""
        self._syncing = True
        try:
            for r in self.runs:
                r.set_time_range(t0, t1)
        finally:
            self._syncing = False
        self._timer.start()

    def time_range(self) -> tuple[float, float]:
        return self.runs[0].time_range()

    def _range_changed(self, source: RunTimeline) -> None:
        if not self._syncing:
            self.set_time_range(*source.time_range())

    def redraw(self) -> None:
        self._timer.stop()
        cols = max(16, int(self.runs[0].step_plot.getViewBox().width()) or 800)
        for r in self.runs:
            r.draw(cols)

    def _restyle(self, *_) -> None:
        for r in self.runs:
            r.restyle()
        self._timer.start()

    # ---- cursor
    def _moved(self, pos) -> None:
        for r in self.runs:
            vb = r.step_plot.getViewBox()
            if vb.sceneBoundingRect().contains(pos):
                q = vb.mapSceneToView(pos)
                self.set_cursor(q.x() / r.clock_hz, r.ipu_at(q.y()))
                return

    def step_at(self, which: int, t: float, ipu: int | None = None) -> int:
        """Index of the step of run ``which`` (0 = A, 1 = B) running at wall second ``t`` (on ``ipu``), or -1."""
        return self.runs[which].step_at(t, ipu)

    def set_cursor(self, t: float, ipu: int | None = None) -> None:
        """The cursor at wall second ``t`` in both runs; the read-out names the step on IPU ``ipu`` (where the run
        has it) or on any IPU, or the phase not stored there."""
        parts = []
        for which, r in enumerate(self.runs):
            r.cursor.setValue(t * r.clock_hz)
            on = ipu if ipu is not None and ipu < r.nipu else None
            where = f" IPU {on}" if on is not None and r.nipu > 1 else ""
            i = self.step_at(which, t, on)
            if i < 0:
                hidden = sp.hidden_at(r.spans, t * r.clock_hz)
                parts.append(f"{r.who}{where}: " + (hidden.hidden_text() if hidden is not None else "—"))
                continue
            idx = r.index
            ops = r.profile.stored_table("ops")
            names = ops.set_index("op_id")["name"] if len(ops) else {}
            op_id = int(idx.op_id[i])
            op = names.get(op_id, "") if op_id >= 0 else ""
            ran_on = f" on IPU {int(idx.ipu[i])}" if idx.ipu[i] >= 0 and r.nipu > 1 else ""
            parts.append(f"{r.who}{where}: step {int(idx.step[i])} {schema.STEP_KINDS[int(idx.kind[i])]}{ran_on} {op} "
                         f"({int(idx.dur[i]):,} cycles = {format_seconds(int(idx.dur[i]) / r.clock_hz)})")
        self.info.setText(f"t = {format_seconds(t)} — " + ";  ".join(parts))

    def cursor_values(self) -> list[float]:
        """The cursor of each run in wall seconds."""
        return [r.cursor.value() / r.clock_hz for r in self.runs]

    def plot_items(self) -> dict:
        return {"timeline": self.glw.ci}

    def tables(self) -> dict:
        return {"steps": C.step_table(self.cmp.a, self.cmp.b)}
