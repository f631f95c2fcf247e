"""``RangeSummary``: what a range of the execution view (Shift+drag) cost, by phase, op and busiest tiles.

A helper object the view owns, with explicit inputs (the profile, its step index and op names, the tile count
and clock) and its results as signals: ``shown`` (the summary's HTML for the details panel) and ``progress``
(a status line).  Small ranges are summarised exactly at once; large ones from the stored per-block summaries
at once and exactly on a worker thread (the step x tile window is read in chunks).
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal

from popvision_lite.analysis import execution as ex
from popvision_lite.gui.text import plain_html
from popvision_lite.gui.theme import STEP_KIND_COLORS, STEP_KIND_LABELS
from popvision_lite.gui.workers import start_task
from popvision_lite.units import format_seconds

SYNC_RANGE_CELLS = 4_000_000  # range summaries with more step x tile cells read exact data off-thread


def summary_html(rs: ex.RangeSummary, clock_hz: float) -> str:
    """The details panel of a range summary: cycles by step kind (compute, exchange, sync, stream copy: the
    kinds of its steps, not the phases of the step, which the phase band names), the ops in it, the busiest
    tiles."""
    tot = max(sum(rs.cycles_by_kind.values()), 1)
    kinds = "".join(
        f"<tr><td><span style='color:{STEP_KIND_COLORS[k]}'>&#9632;</span> {STEP_KIND_LABELS[k]}</td>"
        f"<td align=right>{v:,}</td><td align=right>{100 * v / tot:.1f}%</td></tr>"
        for k, v in rs.cycles_by_kind.items())
    ops = "".join(f"<tr><td>{plain_html(r.name)}</td><td align=right>{r.cycles:,}</td></tr>"
                  for r in rs.ops.head(10).itertuples())
    what = "tile" if rs.exact else f"tiles (blocks of {rs.tile_block})"
    busy = "".join(
        f"<tr><td>{r.tile}{'' if r.tiles == 1 else f'-{r.tile + r.tiles - 1}'}</td>"
        f"<td align=right>{r.busy:,.0f}</td></tr>" for r in rs.busiest.head(8).itertuples())
    return (f"<h3>Range: steps {rs.step_range[0]}-{rs.step_range[1] - 1}</h3>"
            f"cycles {rs.cycle_range[0]:,}-{rs.cycle_range[1]:,} "
            f"({format_seconds((rs.cycle_range[1] - rs.cycle_range[0]) / clock_hz)})<br>"
            f"<b>imbalance</b> (max/mean tile busy): {rs.imbalance:.2f}"
            f"{'' if rs.exact else ' (by tile block; exact value being computed)'}"
            f"<h4>Cycles by step kind</h4><table>{kinds}</table>"
            f"<h4>Ops in range ({len(rs.ops)})</h4><table>{ops}</table>"
            f"<h4>Busiest {what}</h4><table><tr><td>tile</td><td>busy cycles</td></tr>{busy}</table>")


class RangeSummary(QObject):
    """Summaries of step ranges of ``profile``; ``last`` is the latest (exact once its worker is done)."""

    shown = Signal(str)       # HTML of the summary (again when the exact one replaces the estimate)
    progress = Signal(str)    # status line while the exact summary is read

    def __init__(self, profile, index: ex.StepIndex, names: dict, num_tiles: int, clock_hz: float, parent=None):
        super().__init__(parent)
        self.profile, self.index, self.names = profile, index, names
        self.num_tiles, self.clock_hz = int(num_tiles), float(clock_hz)
        self.last: ex.RangeSummary | None = None
        self._worker = None
        self._closed = False

    def summarise(self, a: float, b: float) -> tuple[int, int] | None:
        """Summarise the steps that cycles [a, b) show; their (first, end) step, or None when none."""
        s0, s1 = self.index.visible(a, b)
        if s1 <= s0:
            return None
        self.cancel()
        # small ranges: exact at once; large ones: per tile block from the summaries at once, and
        # the exact busiest tiles / imbalance from a worker thread (the window is read in chunks)
        exact_now = (s1 - s0) * self.num_tiles <= SYNC_RANGE_CELLS
        rs = ex.range_summary(self.profile, self.index, s0, s1, names=self.names,
                              max_cells=SYNC_RANGE_CELLS if exact_now else 0)
        self._show(rs)
        if not rs.exact:
            self._start_exact(s0, s1)
        return int(s0), int(s1)

    def cancel(self) -> None:
        """Stop the exact summary being read, if any."""
        if self._worker is not None:
            self._worker.cancel()
            self._worker = None

    def close(self) -> None:
        """No more summaries: the document is closing."""
        self._closed = True
        self.cancel()

    def _show(self, rs: ex.RangeSummary) -> None:
        self.last = rs
        self.shown.emit(summary_html(rs, self.clock_hz))

    def _start_exact(self, s0: int, s1: int) -> None:
        profile, index, names = self.profile, self.index, self.names

        def work(task):
            return ex.range_summary(profile, index, s0, s1, names=names, max_cells=None,
                                    progress=lambda f: task.progress(f, "reading busy cycles"))

        def done(rs):
            if self._closed or self.last is None or self.last.step_range != (s0, s1):
                return
            self._show(rs)

        w = start_task(work, title=f"Range summary of steps {s0}-{s1 - 1}")
        w.signals.result.connect(done)
        w.signals.progress.connect(lambda f, m: self.progress.emit(f"range summary: {m} {100 * f:.0f}%")
                                   if f >= 0 else None)
        self._worker = w
