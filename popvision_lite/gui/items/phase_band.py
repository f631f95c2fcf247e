"""``PhaseBandItem``: which part of the training step each stretch of the Execution view's timeline is (fill |
steady state x184 | drain | all-reduce | optimizer | stream), one bar per phase coloured by its kind, the
parts of a phase the profile does not store hatched, and every visible phase named at every zoom, laid out so
that no name covers another.  The spans come from :func:`popvision_lite.analysis.step_phases.phase_spans`.
"""

from __future__ import annotations

import html

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QBrush, QColor, QFont, QFontMetrics

from popvision_lite.analysis import step_phases as sp
from popvision_lite.units import format_seconds

LABEL_ROWS = 3
LABEL_GAP_PX = 8
# band colours by phase kind (pale, so the names on them read in both themes)
PHASE_COLORS = {"fill": "#c6dbef", "steady": "#c7e9c0", "drain": "#c6dbef", "stream": "#fdd0a2",
                "allreduce": "#dadaeb", "optimizer": "#fcbba1", "accumulate": "#d9f0a3", "whole": "#e5e5e5",
                "term": "#d9c7bb"}  # a host term: a pale tint of the host part's colour (theme.PHASE_COLORS)
HATCH = QBrush(QColor(120, 120, 120, 150), Qt.BDiagPattern)


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


def hidden_gaps(spans) -> list[tuple[int, int, sp.PhaseSpan]]:
    """(start, end, phase) of every stretch a phase spans that no stored step covers."""
    return [(a, b, s) for s in spans for a, b in s.hidden]


def phase_html(s: sp.PhaseSpan, clock_hz: float) -> str:
    """The details panel of a phase (click on the band or on a folded span)."""
    c = clock_hz
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


def label_font() -> QFont:
    f = QFont()
    f.setPointSize(8)
    return f


class PhaseBandItem(pg.GraphicsObject):
    """The phases ``spans`` in y [0, 1) of their plot: bars, hatched hidden stretches, names over both."""

    def __init__(self, spans: list[sp.PhaseSpan]):
        super().__init__()
        self.spans = list(spans)
        self.bars: dict[str, pg.BarGraphItem] = {}
        for k, col in PHASE_COLORS.items():
            b = pg.BarGraphItem(x0=[], width=[], y0=[], height=[], brush=pg.mkBrush(col), pen=pg.mkPen("#666666"))
            b.setParentItem(self)
            self.bars[k] = b
        gaps = hidden_gaps(self.spans)
        self.hatch = pg.BarGraphItem(x0=np.array([a for a, _, _ in gaps], float),
                                     width=np.array([b - a for a, b, _ in gaps], float), y0=np.zeros(len(gaps)),
                                     height=np.ones(len(gaps)), brush=HATCH, pen=pg.mkPen(None))
        self.hatch.setParentItem(self)
        self.hatch.setZValue(1)
        self.hatch.setVisible(bool(gaps))
        self.labels: list[pg.TextItem] = []

    def boundingRect(self) -> QRectF:  # noqa: N802 - Qt's name
        return self.childrenBoundingRect()

    def paint(self, painter, option, widget=None) -> None:
        """Nothing of its own: the bars, hatching and names are child items."""

    def draw(self, x0: float, x1: float, width_px: int) -> None:
        """Show the phases of [x0, x1) over ``width_px`` pixels, each named at its visible part."""
        px = width_px / max(x1 - x0, 1e-9)
        vis = [s for s in self.spans if s.end > x0 and s.start < x1]
        for k, bars in self.bars.items():
            mine = [s for s in vis if s.kind == k]
            bars.setOpts(x0=np.array([s.start for s in mine], float),
                         width=np.array([s.end - s.start for s in mine], float),
                         y0=np.zeros(len(mine)), height=np.ones(len(mine)))
        fm = QFontMetrics(label_font())
        widths = [fm.horizontalAdvance(s.label) + 6 for s in vis]
        centres = [((max(s.start, x0) + min(s.end, x1)) / 2 - x0) * px for s in vis]
        xs, rows = layout_labels(centres, widths, float(width_px))
        while len(self.labels) < len(vis):
            t = pg.TextItem(color="#111111", anchor=(0, 0.5))
            t.setFont(label_font())
            t.setZValue(2)
            t.setParentItem(self)
            self.labels.append(t)
        for t in self.labels[len(vis):]:
            t.hide()
        for t, s, xp, r in zip(self.labels, vis, xs, rows, strict=False):
            t.setText(s.label)
            t.phase = s
            t.setPos(x0 + xp / px, (r + 0.5) / LABEL_ROWS)
            t.show()

    def shown(self) -> list[str]:
        """The phase names drawn now."""
        return [t.toPlainText() for t in self.labels if t.isVisible()]

    def phase_at(self, x: float) -> sp.PhaseSpan | None:
        """The phase whose span holds cycle ``x``, or None."""
        return next((s for s in self.spans if s.start <= x < s.end), None)
