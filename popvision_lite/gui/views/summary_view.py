"""Summary: target, model, fits or not, cycles and time, phase shares, peak memory, top ops."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QScrollArea, QSplitter, QVBoxLayout, QWidget

from popvision_lite.analysis import error_band as eb
from popvision_lite.analysis.fit_constraint import binding_constraint
from popvision_lite.analysis.insights import fit_command
from popvision_lite.analysis.run_totals import PEAK_NAL_NAME, PEAK_TILE_NAME, host_step_text
from popvision_lite.analysis.summary import PHASES, format_bytes, format_seconds, schedule_lines, summarize
from popvision_lite.emulator.run_config import unused_settings
from popvision_lite.gui import theme
from popvision_lite.gui.export import slug
from popvision_lite.gui.items.menu_on_demand import plot_kwargs
from popvision_lite.gui.state.resolve import select_op
from popvision_lite.gui.table_model import DataFrameModel, make_table_view
from popvision_lite.gui.text import plain_html
from popvision_lite.gui.theme import PHASE_COLORS
from popvision_lite.gui.views.verdict_panel import VerdictPanel
from popvision_lite.profile.run_record import Schedule


class SummaryView(QWidget):
    def __init__(self, document, parent=None):
        super().__init__(parent)
        self.document = document
        self.summary = document.cached("summary", summarize, document.profile)
        self.totals = self.summary.totals
        self._build_status()
        self._build_plot()
        self._build_ops()
        self._arrange()
        self._fill()
        theme.notifier.changed.connect(self._fill)

    def _build_status(self) -> None:
        """The fit banner, what binds a run that does not fit and the search for one that does, the info text."""
        s, document = self.summary, self.document
        self.banner = QLabel()
        self.banner.setAlignment(Qt.AlignCenter)
        self.banner.setToolTip("Whether every tile's memory fits in its SRAM")
        # a run that does not fit: what binds it (cheap, always shown) and the search for what fits (offered)
        self.binding = None if s.fits else document.cached("binding_constraint", binding_constraint, document.profile)
        self.fit_button = QPushButton("Find a configuration that fits…")
        self.fit_button.setToolTip("Search tensor parallelism, pipeline splits, replicas, micro-batch and the "
                                   "memory-saving settings for the cheapest configuration that fits (Run menu)")
        self.fit_button.clicked.connect(self.find_fit)
        self.fit_button.setVisible(not s.fits and fit_command(document.profile) is not None)
        self.info = QLabel()
        self.info.setTextFormat(Qt.RichText)
        self.info.setTextInteractionFlags(Qt.TextSelectableByMouse)
        self.info.setAlignment(Qt.AlignTop | Qt.AlignLeft)
        self.info.setWordWrap(True)

    def _build_plot(self) -> None:
        """Where the time goes: one bar per part of the IPU time, its share and cycles beside it."""
        s, rt = self.summary, self.totals
        self.plot = pg.PlotWidget(**plot_kwargs())
        self.plot.setToolTip(f"Share of the {rt.ipu_time_name} in one training step, by part; the parts add up to "
                             "100 % (an IPU waiting for another IPU or a phase counts as sync; every IPU waiting "
                             f"for the host's per-step work counts as host: {rt.host_text})")
        pi = self.plot.getPlotItem()
        # the exported chart says what run it is (the headless summary PNG is this plot alone)
        # three short lines: a title wider than the plot widened the plot item past its widget
        pi.setTitle(f"Where the time goes: {s.model} on {s.target.name}, {rt.ipu_count_text}\n"
                    f"bottleneck: {rt.bottleneck_text}\n"
                    f"{rt.ipu_time_name}: {rt.ipu_time_cycles:,} cycles; one step (wall time) "
                    f"{rt.step_cycles:,} cycles = {format_seconds(rt.step_seconds)}", size="10pt")
        pi.titleLabel.setMaximumHeight(58)  # pyqtgraph sizes the title row for one line
        pi.layout.setRowFixedHeight(0, 58)
        pi.setLabel("bottom", f"share of the {rt.ipu_time_name} (%)")
        pi.setMouseEnabled(False, False)
        pi.hideButtons()
        pi.getAxis("left").setTicks([[(i, p) for i, p in enumerate(PHASES)]])
        self._part_bars(pi)
        pi.setXRange(0, 103, padding=0)  # the 100 % tick label needs room at the right edge
        pi.getAxis("bottom").setTicks([[(v, str(v)) for v in range(0, 101, 20)],
                                       [(v, "") for v in range(0, 101, 10)]])
        pi.setYRange(-0.6, len(PHASES) - 0.4, padding=0)
        pi.getViewBox().invertY(True)

    def _part_bars(self, pi) -> None:
        """One bar per part, labelled with its share and cycles (inside a long bar, beside a short one)."""
        rt = self.totals
        share = rt.part_share
        self.phase_bars = []
        self.phase_texts: list[pg.TextItem] = []
        for i, p in enumerate(PHASES):
            bar = pg.BarGraphItem(x0=0, y=[i], height=0.6, width=[100 * share[p]],
                                  brush=PHASE_COLORS[p], pen=None)
            pi.addItem(bar)
            self.phase_bars.append(bar)
            inside = share[p] > 0.6  # a long bar carries its label inside, so the axis can end at 100 %
            # the host's source on a line of its own beside a short bar: on one line it ran past the plot's right
            # edge wherever the host bar reaches past about a third of the axis
            src = (":\n" if not inside else ": ") + rt.host_short if p == "host" else ""
            txt = pg.TextItem(f"{100 * share[p]:.1f}%  ({rt.part_cycles[p]:,} cycles){src}",
                              anchor=(1, 0.5) if inside else (0, 0.5),
                              color="#ffffff" if inside else theme.colors()["plot_fg"])
            txt.inside = inside
            self.phase_texts.append(txt)
            txt.setPos(100 * share[p] - 1 if inside else 100 * share[p] + 1, i)
            pi.addItem(txt)

    def _build_ops(self) -> None:
        """The top ops by cycles; a click selects the op in every view."""
        s = self.summary
        self.ops_model = DataFrameModel(
            s.top_ops.assign(share=lambda d: (100 * d["share"]).round(2)) if len(s.top_ops) else s.top_ops,
            headers={"op_id": "op", "share": "% of IPU time", "tiles_used": "tiles"})
        self.ops_table = make_table_view(self.ops_model, "Ops taking the most cycles; click to select the op")
        self.ops_table.clicked.connect(self._op_clicked)
        self.ops_table.resizeColumnsToContents()

    def _arrange(self) -> None:
        """Banner, info and verdict on the left; the parts chart over the top ops on the right."""
        right = QSplitter(Qt.Vertical)
        right.addWidget(self.plot)
        box = QWidget()
        bl = QVBoxLayout(box)
        bl.setContentsMargins(0, 0, 0, 0)
        bl.addWidget(QLabel("<b>Top ops by cycles</b>"))
        bl.addWidget(self.ops_table)
        right.addWidget(box)
        right.setSizes([260, 400])

        left = QWidget()
        ll = QVBoxLayout(left)
        ll.addWidget(self.banner)
        ll.addWidget(self.fit_button)
        scroll = QScrollArea()  # long configs must scroll, not grow the window
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QScrollArea.NoFrame)
        scroll.setWidget(self.info)
        ll.addWidget(scroll, 1)
        self.verdict = VerdictPanel(self.document)
        ll.addWidget(self.verdict)
        lay = QHBoxLayout(self)
        split = QSplitter(Qt.Horizontal)
        split.addWidget(left)
        split.addWidget(right)
        split.setSizes([520, 800])
        lay.addWidget(split)

    def _fill(self, *_):
        s = self.summary
        c = theme.colors()
        for t in self.phase_texts:
            t.setColor("#ffffff" if t.inside else c["plot_fg"])
        col = c["good"] if s.fits else c["bad"]
        text = s.fit_text
        self.banner.setText(f"<span style='font-size:18pt; font-weight:bold; color:{col}'>{text}</span>")
        self.banner.setStyleSheet(f"border: 2px solid {col}; border-radius: 6px; padding: 6px;")
        t = s.target
        p = s.peak
        cfg = "".join(f"<tr><td>{plain_html(str(k))}</td><td>{plain_html(_fmt_config(k, v))}</td></tr>"
                      for k, v in s.config.items() if _applies(k, s.config)) \
            or "<tr><td colspan=2>(none recorded)</td></tr>"
        checks_ok = s.numeric_checks_passed()
        if checks_ok is None:
            checks = "none recorded" + (" (timing-only run)" if s.timing_only else "")
        else:
            checks = (f"<span style='color:{c['good'] if checks_ok else c['bad']}'>"
                      f"{'all passed' if checks_ok else 'FAILED'}</span>")
            n = len(s.numeric_checks)
            worst = [float(v["max_rel_err"]) for v in s.numeric_checks.values()
                     if isinstance(v, dict) and isinstance(v.get("max_rel_err"), int | float)]
            checks += f" ({n:,} tensor{'s' if n != 1 else ''} vs numpy" + (
                f", worst max rel err {max(worst):.2g})" if worst else ")")
        # one row per check that did not pass (a run's dozens of passing checks would bury the rest)
        rows = "".join(f"<tr><td>{plain_html(str(k))}</td><td>{plain_html(_fmt_check(v))}</td></tr>"
                       for k, v in s.numeric_checks.items() if not _passed(v))
        rt = s.totals
        nal = (f"{format_bytes(rt.peak_not_always_live_bytes)} at liveness step {rt.peak_not_always_live_lstep}"
               if rt.peak_not_always_live_lstep >= 0 else "n/a")
        parts = ", ".join(f"{k} {100 * v:.1f}%" for k, v in rt.part_share.items()) + " (sum 100%)"
        phases = "; ".join(
            f"{plain_html(str(r.name))}" + (f" x{int(r.runs_per_step):,}" if int(r.runs_per_step) > 1 else "")
            + f" {format_seconds(int(r.wall_cycles) / t.clock_hz)} ({100 * r.share_of_step:.1f}%)"
            for r in rt.phases.itertuples())
        tput = (f"{rt.samples_per_second:,.1f} samples/s, all {rt.num_ipus:,} IPUs ({rt.samples_per_step:g} samples "
                f"per step)" if np.isfinite(rt.samples_per_second) else "n/a (no batch size recorded)")
        band = eb.run_band(s.record, rt.num_ipus)
        host = host_step_text(s.record.schedule)
        self.info.setText(f"""
<h2>{plain_html(s.model)}</h2>
<table cellpadding=2>
<tr><td><b>Target</b></td><td>{plain_html(t.name)} ({plain_html(t.device)}), {plain_html(rt.ipu_count_text)},
 {t.tiles_per_ipu:,} tiles/IPU, {format_bytes(t.sram_bytes_per_tile)} SRAM/tile, {t.clock_hz / 1e9:.4g} GHz;
 {plain_html(rt.drawn_text)}</td></tr>
<tr><td><b>Step (wall time)</b></td><td>{rt.step_cycles:,} cycles = {format_seconds(rt.step_seconds)}
 at {t.clock_hz / 1e9:.4g} GHz ({s.num_steps:,} BSP steps stored)</td></tr>
<tr><td><b>{plain_html(rt.ipu_time_name[0].upper() + rt.ipu_time_name[1:])}</b></td><td>{rt.ipu_time_cycles:,}
 cycles = {format_seconds(rt.ipu_time_seconds)}: {parts}</td></tr>
<tr><td><b>Bottleneck</b></td><td><b>{plain_html(rt.bottleneck_text)}</b></td></tr>
<tr><td><b>Phases of the step</b></td><td>{phases}</td></tr>
<tr><td><b>Throughput</b></td><td>{tput}</td></tr>
<tr><td><b>Error band</b></td><td>{plain_html(band.text())}</td></tr>
<tr><td><b>Host</b></td><td>{plain_html(host)}: {100 * rt.part_share.get("host", 0):.1f}% of the
 {plain_html(rt.ipu_time_name)} (the part "host", every IPU waiting)</td></tr>
{_schedule_rows(s.record.schedule, t.clock_hz)}
{self._why_row()}
<tr><td><b>Peak tile memory</b></td><td>{format_bytes(rt.peak_tile_bytes)} ({100 * p.fraction:.1f}% of
 {format_bytes(p.capacity)}) on tile {p.tile_in_ipu} of IPU {p.ipu} (global tile {p.tile}):
 {plain_html(PEAK_TILE_NAME)}</td></tr>
<tr><td><b>All tiles</b></td><td>{format_bytes(p.total_bytes)}: always-live {format_bytes(p.always_live_bytes)},
 not-always-live {format_bytes(p.not_always_live_bytes)} (each tile at its own peak)</td></tr>
<tr><td><b>Peak not-always-live</b></td><td>{nal}: {plain_html(PEAK_NAL_NAME)}</td></tr>
<tr><td><b>Numeric checks</b></td><td>{checks}</td></tr>
{rows}
</table>
<h3>Config</h3><table cellpadding=2>{cfg}</table>
<p style='color:{c["muted"]}'>{plain_html(str(self.document.path))}<br>emulator
 {plain_html(s.record.emulator_version or "?")}</p>""")

    def _why_row(self) -> str:
        """For a run that does not fit: what binds it (analysis/fit_constraint.py)."""
        if self.binding is None:
            return ""
        return (f"<tr><td><b>Why it does not fit</b></td><td>{plain_html(self.binding.headline())}"
                + (f" ({plain_html('Each drawn IPU stands for ' + self.binding.drawn)})" if self.binding.drawn else "")
                + "</td></tr>")

    def find_fit(self) -> None:
        """The window's Run > Find a configuration that fits… (gui/actions/fit.py) for this profile."""
        act = getattr(self.window(), "act_fit", None)
        if act is not None:
            act.trigger()

    def _op_clicked(self, index):
        row = self.ops_model.row(index.row())
        select_op(self.document, int(row["op_id"]), "summary")  # op, its steps and tiles

    def is_ready(self) -> bool:
        """True once the verdict panel has its result (a large model pass is estimated on a worker thread):
        a headless export waits for it."""
        return self.verdict.is_ready()

    def plot_items(self) -> dict:
        return {"phases": self.plot.getPlotItem()}

    def tables(self) -> dict:
        """The top-ops table (named as the generic export named it) and the verdict table."""
        tip = self.ops_table.toolTip().split(";")[0][:40]
        return {slug(tip): self.ops_model.df, **self.verdict.tables()}


def _applies(key, config: dict) -> bool:
    """Whether the run's model reads setting ``key`` (the run config's definition of each field: a BERT run's
    config also carries the GNN's nodes/edges and the conv's image size, which only confuse)."""
    family = str(config.get("model", ""))
    return not family or not unused_settings(family, [key])


def _fmt_config(key, value) -> str:
    if key == "ffn" and value == 0:
        return "0 (= 4 × hidden)"
    return str(value)


def _schedule_rows(sch: Schedule, clock_hz: float) -> str:
    """The schedule row (profile format v2; empty for older profiles): ``summary.schedule_lines``, the text
    ``emulate`` prints, of the checked schedule."""
    lines = schedule_lines(sch, clock_hz)
    if not lines:
        return ""
    text = "; ".join(x.strip().removeprefix("schedule: ") for x in lines)
    return f"<tr><td><b>Schedule</b></td><td>{plain_html(text)}</td></tr>"


def _passed(v) -> bool:
    return v is True or (isinstance(v, dict) and v.get("passed") is True)


def _fmt_check(v) -> str:
    if isinstance(v, dict):
        return ", ".join(f"{k}={_fmt_check(x)}" for k, x in v.items())
    if isinstance(v, float | np.floating):
        return f"{v:.3g}"
    return str(v)
