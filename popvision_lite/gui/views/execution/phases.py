"""The execution view's phase band and folded spans: which part of the training step each stretch of the
timeline is (fill | steady state x184 | drain | all-reduce | optimizer | stream), named at every zoom, and the
span of a folded phase (runs the profile does not store) marked with its run count and real duration instead
of reading as idle IPUs.  A mixin of :class:`~.view.ExecutionView`; the numbers come from
:mod:`popvision_lite.analysis.step_phases`.
"""

from __future__ import annotations

import html

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QBrush, QColor, QFont, QFontMetrics

from popvision_lite.analysis import step_phases as sp
from popvision_lite.gui import theme
from popvision_lite.units import format_count, format_seconds

LABEL_ROWS = 3
LABEL_GAP_PX = 8
# band colours by phase kind (pale, so the names on them read in both themes)
PHASE_COLORS = {"fill": "#c6dbef", "steady": "#c7e9c0", "drain": "#c6dbef", "stream": "#fdd0a2",
                "allreduce": "#dadaeb", "optimizer": "#fcbba1", "accumulate": "#d9f0a3", "whole": "#e5e5e5",
                "term": "#e5e5e5"}


def layout_labels(centres, widths, width: float, rows: int = LABEL_ROWS, gap: float = LABEL_GAP_PX):
    """Left x (pixels) and row of each label so that none overlaps another in its row and all lie in
    [0, width]: each goes as near its phase's centre as the row with the least shift allows, then every row
    is pushed back inside from the right.  Labels that still cannot fit keep their place (overlap) only when
    the band is narrower than their total width."""
    order = np.argsort(np.asarray(centres, dtype=float), kind="stable")
    ends = [-np.inf] * rows
    x = np.zeros(len(order))
    row = np.zeros(len(order), dtype=int)
    for i in order:
        w = float(widths[i])
        want = min(max(float(centres[i]) - w / 2, 0.0), max(width - w, 0.0))
        best = min(range(rows), key=lambda r: (max(want, ends[r] + gap) - want, r))
        x[i] = max(want, ends[best] + gap)
        row[i] = best
        ends[best] = x[i] + w
    for r in range(rows):  # push back inside, right to left
        limit = width
        for i in sorted(np.flatnonzero(row == r), key=lambda k: -x[k]):
            x[i] = max(min(x[i], limit - float(widths[i])), 0.0)
            limit = x[i] - gap
    return x, row


class PhaseBand:
    """Mixin: draws ``self.phase_spans`` into the phase band and the folded spans over the lanes."""

    def _phase_font(self) -> QFont:
        f = QFont()
        f.setPointSize(8)
        return f

    def _draw_phases(self, x0: float, x1: float, w: int) -> None:
        spans = self.phase_spans
        if not spans:
            self.phase_plot.hide()
            return
        px = w / max(x1 - x0, 1e-9)
        vis = [s for s in spans if s.end > x0 and s.start < x1]
        for k, bars in self.phase_bars.items():
            mine = [s for s in vis if s.kind == k]
            bars.setOpts(x0=np.array([s.start for s in mine], float), width=np.array([s.end - s.start for s in mine],
                                                                                      float),
                         y0=np.zeros(len(mine)), height=np.ones(len(mine)))
        gaps = [(a, b, s) for s in spans for a, b in s.hidden]
        for item in self.fold_items:
            item.setOpts(x0=np.array([a for a, _, _ in gaps], float), width=np.array([b - a for a, b, _ in gaps], float),
                         y0=np.full(len(gaps), item.y_lo), height=np.full(len(gaps), item.y_hi - item.y_lo))
            item.setVisible(bool(gaps))
        # names: at the visible part of each phase, laid out so that none covers another, at every zoom
        fm = QFontMetrics(self._phase_font())
        texts = [s.label for s in vis]
        widths = [fm.horizontalAdvance(t) + 6 for t in texts]
        centres = [((max(s.start, x0) + min(s.end, x1)) / 2 - x0) * px for s in vis]
        xs, rows = layout_labels(centres, widths, float(w))
        while len(self.phase_labels) < len(vis):
            t = pg.TextItem(color="#111111", anchor=(0, 0.5))
            t.setFont(self._phase_font())
            t.setZValue(40)
            self.phase_plot.addItem(t)
            self.phase_labels.append(t)
        for t in self.phase_labels[len(vis):]:
            t.hide()
        for t, s, xp, r in zip(self.phase_labels, vis, xs, rows, strict=False):
            t.setText(s.label)
            t.phase = s
            t.setPos(x0 + xp / px, (r + 0.5) / LABEL_ROWS)
            t.show()
        self._draw_fold_note(gaps, x0, x1, px)

    def _draw_fold_note(self, gaps, x0: float, x1: float, px: float) -> None:
        """Over the visible part of a hidden stretch wide enough: what it stands for (runs, durations)."""
        for t in self.fold_notes:
            t.hide()
        shown = [(a, b, s) for a, b, s in gaps if b > x0 and a < x1 and (min(b, x1) - max(a, x0)) * px > 260]
        while len(self.fold_notes) < len(shown):
            t = pg.TextItem(color=theme.colors()["plot_fg"], anchor=(0.5, 0.5), fill=pg.mkBrush(theme.colors()["plot_bg"]))
            t.setZValue(30)
            self.tile_plot.addItem(t, ignoreBounds=True)
            self.fold_notes.append(t)
        clock = self.clock_hz
        y0, y1 = self.y_range()
        c = theme.colors()
        for t, (a, b, s) in zip(self.fold_notes, shown, strict=False):
            t.fill = pg.mkBrush(c["plot_bg"])  # the theme of now, not of when the note was made
            t.setColor(c["plot_fg"])
            t.setText(self.fold_text(s, a, b, clock))
            t.setPos((max(a, x0) + min(b, x1)) / 2, (y0 + y1) / 2)
            t.show()

    @staticmethod
    def fold_text(s: sp.PhaseSpan, a: int, b: int, clock_hz: float) -> str:
        runs = (f"\nx{s.runs:,} in the step, {format_count(s.one_run)} cycles = {format_seconds(s.one_run / clock_hz)}"
                " each" if s.runs > 1 else "")
        return (f"{s.hidden_text()}{runs}\nthis span: {format_count(b - a)} cycles = "
                f"{format_seconds((b - a) / clock_hz)}")

    def phase_html(self, s: sp.PhaseSpan) -> str:
        """The details panel of a phase (click on the band or on a folded span)."""
        c = self.clock_hz
        rows = [("runs per step", f"{s.runs:,}"),
                ("one run", f"{s.one_run:,} cycles ({format_seconds(s.one_run / c)})"),
                ("all runs", f"{s.end - s.start:,} cycles ({format_seconds((s.end - s.start) / c)}), from cycle "
                             f"{s.start:,}"),
                ("stored steps", f"{s.first_step:,} to {s.last_step:,} ({s.stored_runs:,} run(s) drawn)"
                 if s.first_step >= 0 else "none: not drawn")]
        if s.hidden:
            rows.append(("not stored", f"{s.hidden_text()}: {s.hidden_cycles:,} cycles "
                                       f"({format_seconds(s.hidden_cycles / c)}), hatched"))
        if s.traffic:
            rows.append(("moves", s.traffic))
        body = "".join(f"<tr><td>{html.escape(a)}</td><td>{html.escape(b)}</td></tr>" for a, b in rows)
        return f"<h3>Phase: {html.escape(s.label)}</h3><table>{body}</table>"

    def _on_phase_click(self, x: float) -> bool:
        """A click on the band or a folded span shows its phase; True when one was hit."""
        for s in self.phase_spans:
            if s.start <= x < s.end:
                self.info.setHtml(self.phase_html(s))
                return True
        return False


def make_phase_items(view) -> None:
    """The band's bars (one item per phase kind), its labels, and the folded-span overlays of every lane."""
    view.phase_bars = {}
    for k, col in PHASE_COLORS.items():
        b = pg.BarGraphItem(x0=[], width=[], y0=[], height=[], brush=pg.mkBrush(col), pen=pg.mkPen("#666666"))
        view.phase_plot.addItem(b)
        view.phase_bars[k] = b
    view.phase_labels: list[pg.TextItem] = []
    view.fold_notes: list[pg.TextItem] = []
    hatch = QBrush(QColor(120, 120, 120, 150), Qt.BDiagPattern)
    view.fold_items = []
    view.fold_covers = []
    for plot, lo, hi in ((view.phase_plot, 0.0, 1.0), (view.step_plot, 0.0, 1.0),
                         (view.tile_plot, -0.5, view.ntiles + 0.5), (view.chart_plot, 0.0, 1e15)):
        items = []
        if plot is not view.phase_plot:  # in the lanes the span is blanked first: it holds no stored step
            cover = pg.BarGraphItem(x0=[], width=[], y0=[], height=[], brush=pg.mkBrush(theme.colors()["plot_bg"]),
                                    pen=pg.mkPen(None))
            cover.setZValue(25)  # over the rasters and bars
            view.fold_covers.append(cover)
            items.append(cover)
        item = pg.BarGraphItem(x0=[], width=[], y0=[], height=[], brush=hatch, pen=pg.mkPen(None))
        item.setZValue(26)
        items.append(item)
        for it in items:
            it.y_lo, it.y_hi = lo, hi
            plot.addItem(it, ignoreBounds=True)
            view.fold_items.append(it)
