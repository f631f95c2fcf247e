"""``FoldOverlayItem``: the stretches of a run that the profile does not store (a folded phase's other runs)
marked over one lane of the Execution view instead of reading as idle IPUs: blanked in the plot background,
hatched, and, where ``notes`` and the stretch is wide enough on screen, a note of what it stands for (runs,
durations)."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF

from popvision_lite.analysis import step_phases as sp
from popvision_lite.gui import theme
from popvision_lite.gui.items.phase_band import HATCH, hidden_gaps
from popvision_lite.units import format_count, format_seconds

NOTE_MIN_PX = 260    # a note over a hidden stretch at least this wide on screen
SHORT_NOTE_MIN_PX = 56  # narrower, down to this: a short note ("fill: not stored"), so no hatched span is unnamed


def short_fold_text(s: sp.PhaseSpan) -> str:
    """The note of a hidden stretch too narrow for :func:`fold_text`: the phase and 'folded', 'not stored' or (a
    host term) 'IPUs wait for the host'."""
    what = "folded" if s.folded else "IPUs wait for the host" if s.kind == "term" else "not stored"
    return f"{s.name.replace('_', ' ')}:\n{what}"


def fold_text(s: sp.PhaseSpan, a: int, b: int, clock_hz: float) -> str:
    """What the hidden stretch [a, b) of phase ``s`` stands for."""
    runs = (f"\nx{s.runs:,} in the step, {format_count(s.one_run)} cycles = {format_seconds(s.one_run / clock_hz)}"
            " each" if s.runs > 1 else "")
    return (f"{s.hidden_text()}{runs}\nthis span: {format_count(b - a)} cycles = "
            f"{format_seconds((b - a) / clock_hz)}")


def note_x(a: float, b: float, text_width: float, x0: float, x1: float) -> float:
    """The centre of a note over [a, b): the middle, moved in so a note wider than its stretch near the view's
    edge [x0, x1) is not cut off there (the host step at the end of a step)."""
    half = min(text_width, x1 - x0) / 2
    return float(np.clip((a + b) / 2, x0 + half, x1 - half))


class FoldOverlayItem(pg.GraphicsObject):
    """The hidden stretches of ``spans`` over y [y_lo, y_hi) of one lane (over its rasters and bars: z 25)."""

    def __init__(self, spans: list[sp.PhaseSpan], y_lo: float, y_hi: float, clock_hz: float, notes: bool = False):
        super().__init__()
        self.y_lo, self.y_hi = float(y_lo), float(y_hi)
        self.clock_hz = float(clock_hz)
        self.gaps = hidden_gaps(spans)
        self.with_notes = notes
        x = np.array([a for a, _, _ in self.gaps], float)
        w = np.array([b - a for a, b, _ in self.gaps], float)
        y = np.full(len(self.gaps), self.y_lo)
        h = np.full(len(self.gaps), self.y_hi - self.y_lo)
        self.cover = pg.BarGraphItem(x0=x, width=w, y0=y, height=h, brush=pg.mkBrush(theme.colors()["plot_bg"]),
                                     pen=pg.mkPen(None))
        self.hatch = pg.BarGraphItem(x0=x, width=w, y0=y, height=h, brush=HATCH, pen=pg.mkPen(None))
        for z, it in enumerate((self.cover, self.hatch)):
            it.setParentItem(self)
            it.setZValue(z)
        self.notes: list[pg.TextItem] = []
        self.setZValue(25)
        self.setVisible(bool(self.gaps))

    def boundingRect(self) -> QRectF:  # noqa: N802 - Qt's name
        return QRectF()

    def paint(self, painter, option, widget=None) -> None:
        """Nothing of its own: the cover, hatching and notes are child items."""

    def restyle(self) -> None:
        """Blank in the current theme's plot background (the notes take it at the next draw)."""
        self.cover.setOpts(brush=pg.mkBrush(theme.colors()["plot_bg"]))

    def draw(self, x0: float, x1: float, width_px: int, y0: float, y1: float) -> None:
        """Notes over the visible part of each hidden stretch at least ``NOTE_MIN_PX`` wide in the view
        [x0, x1) x [y0, y1) (``width_px`` wide), at its middle; a short note over one at least
        ``SHORT_NOTE_MIN_PX`` wide."""
        for t in self.notes:
            t.hide()
        if not self.with_notes:
            return
        px = width_px / max(x1 - x0, 1e-9)
        shown = [(a, b, s) for a, b, s in self.gaps
                 if b > x0 and a < x1 and (min(b, x1) - max(a, x0)) * px > SHORT_NOTE_MIN_PX]
        c = theme.colors()
        while len(self.notes) < len(shown):
            t = pg.TextItem(color=c["plot_fg"], anchor=(0.5, 0.5), fill=pg.mkBrush(c["plot_bg"]))
            t.setParentItem(self)
            t.setZValue(2)
            self.notes.append(t)
        for t, (a, b, s) in zip(self.notes, shown, strict=False):
            t.fill = pg.mkBrush(c["plot_bg"])  # the theme of now, not of when the note was made
            t.setColor(c["plot_fg"])
            wide = (min(b, x1) - max(a, x0)) * px > NOTE_MIN_PX
            t.setText(fold_text(s, a, b, self.clock_hz) if wide else short_fold_text(s))
            t.setPos(note_x(max(a, x0), min(b, x1), t.boundingRect().width() / px, x0, x1), (y0 + y1) / 2)
            t.show()

    def shown_notes(self) -> list[str]:
        """The notes drawn now."""
        return [t.toPlainText() for t in self.notes if t.isVisible()]
