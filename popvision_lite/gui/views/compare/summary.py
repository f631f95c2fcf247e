"""Compare Summary: the headline table (A, B, delta, B/A), the notes and a B/A ratio chart."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QLabel,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from popvision_lite.analysis import compare as C
from popvision_lite.gui import theme
from popvision_lite.gui.items.menu_on_demand import plot_kwargs
from popvision_lite.gui.table_model import DataFrameModel, make_table_view
from popvision_lite.gui.text import plain_html
from popvision_lite.gui.views.compare.common import notes_label


class CompareSummaryPage(QWidget):
    # samples/s first: the headline (a larger batch makes each step longer and still faster per sample)
    RATIO_METRICS = ("samples/s", "total cycles", "time", "compute cycles", "exchange cycles", "sync cycles",
                     "stream cycles", "host cycles", "peak tile memory", "peak not-always-live on a tile",
                     "total memory (all tiles)")
    HIGHER_IS_BETTER = ("samples/s",)
    # per-step times and cycles: better lower only when both steps hold the same samples
    PER_STEP = ("total cycles", "time", "compute cycles", "exchange cycles", "sync cycles", "stream cycles",
                "host cycles")

    def __init__(self, cmp: C.Comparison, parent=None):
        super().__init__(parent)
        self.cmp = cmp
        self.headline = C.headline_strings(cmp)
        self.title = QLabel(f"<b>A</b> = {plain_html(cmp.label_a)} ({plain_html(cmp.summary_a.target.name)})  vs  "
                            f"<b>B</b> = {plain_html(cmp.label_b)} ({plain_html(cmp.summary_b.target.name)}); "
                            "delta = B - A, ratio = B / A")
        self.title.setTextFormat(Qt.RichText)
        self.title.setWordWrap(True)
        # the runs' columns are named by their files: shown as they are (column_title turns _ into spaces,
        # which made bert_tiny_mk2.pvl read "bert tiny mk2.pvl")
        self.model = DataFrameModel(self.headline, headers={c: c for c in self.headline.columns[1:3]})
        self.table = make_table_view(self.model, "Headline numbers of both runs; delta = B - A, ratio = B / A")
        self.table.setObjectName("headline")
        self.table.resizeColumnsToContents()
        # plain text (file names keep their underscores and angle brackets), one bullet per note
        self.notes = notes_label("\n".join(f"\u2022 {n}" for n in cmp.notes))

        self.plot = pg.PlotWidget(**plot_kwargs())
        pi = self.plot.getPlotItem()
        # the exported picture names both runs (the table's caption is not part of it)
        # two lines: one line as wide as two file names widened the plot past its widget, cutting off the title,
        # the right-hand bars and their labels
        # plain text: pyqtgraph's titles escape what they are given (gui/text.install_plain_text_guards)
        pi.setTitle(f"B / A of the headline numbers (1 = same)\nA = {cmp.label_a}, B = {cmp.label_b}", size="9pt")
        pi.setLabel("bottom", "ratio B / A")
        pi.setMouseEnabled(False, False)
        pi.hideButtons()
        h = cmp.headline.set_index("metric")
        names = [m for m in self.RATIO_METRICS if m in h.index]
        r = np.array([h.loc[m, "ratio"] for m in names], dtype=np.float64)
        r = np.where(np.isfinite(r), r, 0.0)
        self.ratios = dict(zip(names, r, strict=True))
        same_batch = cmp.summary_a.totals.samples_per_step == cmp.summary_b.totals.samples_per_step
        self.colors = [self.ratio_color(m, v, same_batch) for m, v in zip(names, r, strict=True)]
        brushes = [pg.mkBrush(c) for c in self.colors]
        self.bars = pg.BarGraphItem(x0=0, y=np.arange(len(names)), height=0.6, width=r, brushes=brushes, pen=None)
        pi.addItem(self.bars)
        pi.addItem(pg.InfiniteLine(pos=1.0, angle=90, pen=pg.mkPen("#888888", style=Qt.DashLine)))
        for i, v in enumerate(r):
            t = pg.TextItem(f"{v:.3f}", anchor=(0, 0.5), color=theme.colors()["plot_fg"])
            t.setPos(v, i)
            pi.addItem(t)
        pi.getAxis("left").setTicks([[(i, n) for i, n in enumerate(names)]])
        pi.getViewBox().invertY(True)
        # room right of the longest bar for its label ("1.713": ~6 characters at ~1/40 of the plot each)
        pi.setXRange(0, max(1.2, float(r.max()) * 1.3 if len(r) else 1.2), padding=0)
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

    @classmethod
    def ratio_color(cls, metric: str, ratio: float, same_batch: bool) -> str:
        """Green where B is better, red where worse, grey where the ratio says neither: samples/s higher is
        better; times, cycles and memory lower, but a step's time or cycles only when both steps hold the same
        samples (a larger batch makes each step longer and can still be faster per sample)."""
        if ratio == 1 or ratio == 0 or (metric in cls.PER_STEP and not same_batch):
            return "#7f7f7f"
        better = ratio > 1 if metric in cls.HIGHER_IS_BETTER else ratio < 1
        return "#2ca02c" if better else "#d62728"

    def plot_items(self) -> dict:
        return {"ratios": self.plot.getPlotItem()}

    def tables(self) -> dict:
        return {"headline": self.cmp.headline, "phases": self.cmp.phases}
