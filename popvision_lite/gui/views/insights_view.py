"""Insights: findings computed from the profile, as a readable list with clickable links.

Findings come from :func:`popvision_lite.analysis.insights.insights` (computed on a worker
thread).  Each card shows severity, title, the text with the profile's numbers, and links
that select the related tiles, ops or variables in every other view.  "Compare with a
recomputation run..." opens a second profile of the same model and adds what recomputation
saved (:func:`~popvision_lite.analysis.insights.recompute_savings`).
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QUrl, Signal
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from popvision_lite.analysis.insights import Finding, insights, recompute_savings
from popvision_lite.gui import theme
from popvision_lite.gui.state.resolve import select_op
from popvision_lite.gui.text import SafeTextBrowser, plain_html, plain_label
from popvision_lite.gui.theme import SEVERITY_COLORS
from popvision_lite.gui.workers import start_task
from popvision_lite.profile.consistency import clip

MAX_TEXT = 20_000  # characters of one finding shown (names inside are stored at most 4,096 long)

_MAX_LINKS = 12


def _compute(task, profile):
    return insights(profile)


def _compare(task, profile, other_path):
    import popvision_lite as pvl

    other = pvl.open(other_path)
    try:
        return recompute_savings(profile, other)
    finally:
        other.close()


class InsightsView(QWidget):
    """Registered as ``insights``; constructed as ``InsightsView(document)``."""

    SOURCE = "insights"
    ready = Signal()  # findings rendered

    def __init__(self, document, parent=None):
        super().__init__(parent)
        self.document = document
        self.findings: list[Finding] = []
        self.extra: list[Finding] = []
        self._shown: list[Finding] = []
        self._workers = []
        self.browser = SafeTextBrowser(self)
        self.browser.anchorClicked.connect(self._on_link)
        self.compare_btn = QPushButton("Compare with a recomputation run...", self)
        self.compare_btn.setToolTip("Open a second profile of the same model (recompute on/off) "
                                    "and say what recomputation saved")
        self.compare_btn.clicked.connect(self._ask_compare)
        self.status = plain_label("Computing insights...", self)
        bar = QHBoxLayout()
        bar.addWidget(self.status, 1)
        bar.addWidget(self.compare_btn)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addLayout(bar)
        lay.addWidget(self.browser, 1)
        self.browser.setHtml("<p><i>Computing insights...</i></p>")
        theme.notifier.changed.connect(self._on_theme)  # a bound slot: disconnected when the view dies
        if document.has_cached("insights"):
            self._show(document.cached("insights", insights, document.profile))
        else:
            w = start_task(_compute, document.profile, title="Computing insights")
            w.signals.result.connect(self._on_computed)
            w.signals.error.connect(self._on_error)
            self._workers.append(w)

    # computing --------------------------------------------------------------------
    def _on_computed(self, found):
        self.document.put_cached("insights", found)
        self._show(found)

    def _on_error(self, exc):
        self.status.setText("Insights failed")
        self.browser.setHtml(f"<p style='color:{SEVERITY_COLORS['error']}'>Could not compute insights: "
                             f"{plain_html(str(exc))}</p>")

    def _show(self, found):
        self.findings = list(found)
        n_err = sum(f.severity == "error" for f in self.findings)
        n_warn = sum(f.severity == "warning" for f in self.findings)
        self.status.setText(f"{len(self.findings)} findings: {n_err} error{'s' if n_err != 1 else ''}, "
                            f"{n_warn} warning{'s' if n_warn != 1 else ''}")
        self.render()
        self.ready.emit()

    def _ask_compare(self):
        path, _ = QFileDialog.getOpenFileName(self, "Profile of the same model with recomputation on/off",
                                              str(self.document.path.parent), "Profiles (*.pvl);;All files (*)")
        if path:
            self.compare_with_path(path)

    def compare_with_path(self, path):
        """Add what recomputation saved between this profile and the one at ``path`` (worker thread)."""
        self.status.setText(f"Comparing with {path}...")
        w = start_task(_compare, self.document.profile, str(path), title="Comparing recomputation")
        w.signals.result.connect(self.add_finding)
        w.signals.error.connect(lambda e: self.status.setText(f"Compare failed: {e}"))
        self._workers.append(w)
        return w

    def compare_with(self, other_profile) -> Finding:
        """Synchronous variant for an already open profile."""
        f = recompute_savings(self.document.profile, other_profile)
        self.add_finding(f)
        return f

    def add_finding(self, finding: Finding) -> None:
        self.extra = [f for f in self.extra if f.kind != finding.kind] + [finding]
        self.status.setText(f"{len(self.findings)} findings + {finding.title.lower()}")
        self.render()
        self.browser.verticalScrollBar().setValue(0)  # the new card is at the top

    # rendering --------------------------------------------------------------------
    def _links(self, f: Finding, i: int) -> str:
        p = self.document.profile
        parts = []
        if f.tiles:
            tl = ", ".join(f"<a href='pvl:tile/{t}'>{t}</a>" for t in f.tiles[:_MAX_LINKS])
            more = f" ... (+{len(f.tiles) - _MAX_LINKS})" if len(f.tiles) > _MAX_LINKS else ""
            all_link = f" &nbsp;<a href='pvl:finding-tiles/{i}'>select all {len(f.tiles):,}</a>" \
                if len(f.tiles) > 1 else ""
            parts.append(f"Tiles: {tl}{more}{all_link}")
        if f.ops:
            ops = p.stored_table("ops")
            names = dict(zip(ops["op_id"].tolist(), ops["name"].astype(str).tolist(), strict=True))
            ol = ", ".join(f"<a href='pvl:op/{o}'>{plain_html(clip(names.get(o, str(o))))}</a>"
                           for o in f.ops[:_MAX_LINKS])
            parts.append(f"Ops: {ol}")
        if f.variables:
            variables = p.stored_table("variables")
            vnames = dict(zip(variables["var_id"].tolist(), variables["name"].astype(str).tolist(),
                              strict=True))
            vl = ", ".join(f"<a href='pvl:var/{v}'>{plain_html(clip(vnames.get(v, str(v))))}</a>"
                           for v in f.variables[:_MAX_LINKS])
            parts.append(f"Variables: {vl}")
        return "<br>".join(parts)

    def to_html(self) -> str:
        c = theme.colors()
        out = [f"<html><body style='color:{c['text']}; background:{c['base']}'>"]
        self._shown = self.extra + self.findings  # comparisons the user asked for come first
        for i, f in enumerate(self._shown):
            col = SEVERITY_COLORS.get(f.severity, c["muted"])
            links = self._links(f, i)
            out.append(
                f"<table width='100%' cellspacing='0' cellpadding='6' style='margin-bottom:8px; "
                f"border-left: 4px solid {col}; background:{c['alt']}'><tr><td>"
                f"<span style='color:{col}; font-weight:bold'>{f.severity.upper()}</span> &nbsp;"
                f"<b style='font-size:large'>{plain_html(clip(f.title, 400))}</b>"
                f"<p style='margin:4px 0'>{plain_html(clip(f.text, MAX_TEXT)).replace(chr(10), '<br>')}</p>"
                + (f"<p style='margin:2px 0; color:{c['muted']}'>{links}</p>" if links else "")
                + "</td></tr></table>")
        if not self.findings and not self.extra:
            out.append("<p>No findings.</p>")
        out.append("</body></html>")
        return "".join(out)

    def _on_theme(self, *_):
        self.render()

    def render(self) -> None:
        bar = self.browser.verticalScrollBar().value()
        self.browser.setHtml(self.to_html())
        self.browser.verticalScrollBar().setValue(bar)

    # links -> selection -------------------------------------------------------------
    def _on_link(self, url: QUrl) -> None:
        self.follow(url.toString())

    def follow(self, link: str) -> None:
        """Act on a 'pvl:kind/ids' link: select tiles, an op or a variable's tiles."""
        if not link.startswith("pvl:"):
            return
        kind, _, arg = link[4:].partition("/")
        sel = self.document.selection
        if kind in ("tile", "tiles", "finding-tiles"):
            if kind == "finding-tiles":
                tiles = tuple(self._shown[int(arg)].tiles)
            else:
                tiles = tuple(int(t) for t in arg.split(",") if t)
            sel.update(source=self.SOURCE, tiles=tiles, op_id=None, prog_id=None, step_range=None)
        elif kind == "op":
            w = select_op(self.document, int(arg), self.SOURCE)
            if w is not None:
                self._workers.append(w)
        elif kind == "var":
            vt = self.document.profile.stored_table("variable_tiles")
            tiles = np.unique(vt["tile"].to_numpy()[vt["var_id"].to_numpy() == int(arg)])
            sel.update(source=self.SOURCE, tiles=tiles, op_id=None, prog_id=None, step_range=None)

    def links(self) -> list[str]:
        """Every link target in the rendered findings (for tests and keyboard users)."""
        import re

        return re.findall(r"href='(pvl:[^']+)'", self.to_html())

