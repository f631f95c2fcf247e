"""Shift+drag a range in the execution view: what it cost, by phase, op and busiest tiles.

Small ranges are summarised exactly at once; large ones from the stored per-block summaries at once and
exactly on a worker thread (the step x tile window is read in chunks).  A mixin of
:class:`~.view.ExecutionView`.
"""

from __future__ import annotations

from popvision_lite.analysis import execution as ex
from popvision_lite.gui.text import plain_html
from popvision_lite.gui.theme import STEP_KIND_COLORS, STEP_KIND_LABELS
from popvision_lite.gui.workers import start_task
from popvision_lite.units import format_seconds

SYNC_RANGE_CELLS = 4_000_000  # range summaries with more step x tile cells read exact data off-thread


class RangeSummary:
    """Mixin: the range selection and its summary panel."""

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
        a, b = self.region.getRegion()
        s0, s1 = self.index.visible(a, b)
        if s1 <= s0:
            return
        if self._range_worker is not None:
            self._range_worker.cancel()
            self._range_worker = None
        # small ranges: exact at once; large ones: per tile block from the summaries at once, and
        # the exact busiest tiles / imbalance from a worker thread (the window is read in chunks)
        exact_now = (s1 - s0) * self.ntiles <= SYNC_RANGE_CELLS
        rs = ex.range_summary(self.profile, self.index, s0, s1, names=self.names,
                              max_cells=SYNC_RANGE_CELLS if exact_now else 0)
        self.last_summary = rs
        self._show_summary(rs)
        self.document.selection.update(source="execution", step_range=(int(s0), int(s1)))
        if not rs.exact:
            self._start_exact_summary(s0, s1)

    def _start_exact_summary(self, s0: int, s1: int):
        profile, index, names = self.profile, self.index, self.names

        def work(task):
            return ex.range_summary(profile, index, s0, s1, names=names, max_cells=None,
                                    progress=lambda f: task.progress(f, "reading busy cycles"))

        def done(rs):
            if self._closed or self.last_summary is None or self.last_summary.step_range != (s0, s1):
                return
            self.last_summary = rs
            self._show_summary(rs)

        w = start_task(work, title=f"Range summary of steps {s0}-{s1 - 1}")
        w.signals.result.connect(done)
        w.signals.progress.connect(
            lambda f, m: self.status.setText(f"range summary: {m} {100 * f:.0f}%") if f >= 0 else None)
        self._range_worker = w

    def _show_summary(self, rs: ex.RangeSummary):
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
        self.info.setHtml(
            f"<h3>Range: steps {rs.step_range[0]}-{rs.step_range[1] - 1}</h3>"
            f"cycles {rs.cycle_range[0]:,}-{rs.cycle_range[1]:,} "
            f"({format_seconds((rs.cycle_range[1] - rs.cycle_range[0]) / self.clock_hz)})<br>"
            f"<b>imbalance</b> (max/mean tile busy): {rs.imbalance:.2f}"
            f"{'' if rs.exact else ' (by tile block; exact value being computed)'}"
            f"<h4>Cycles by phase</h4><table>{kinds}</table>"
            f"<h4>Ops in range ({len(rs.ops)})</h4><table>{ops}</table>"
            f"<h4>Busiest {what}</h4><table><tr><td>tile</td><td>busy cycles</td></tr>{busy}</table>")
