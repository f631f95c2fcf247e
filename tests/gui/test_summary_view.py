"""Summary view: numbers shown match the analysis; clicking a top op selects it."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from popvision_lite.analysis.summary import PHASES, format_bytes, summarize

pytestmark = pytest.mark.gui

ROOT = Path(__file__).resolve().parents[2]

def test_summary_view_shows_the_analysis(qtbot, document):
    from popvision_lite.gui.views.summary_view import SummaryView
    from tests.support.qt import show_view

    view = show_view(qtbot, SummaryView(document))
    s = summarize(document.profile)
    text = view.info.text()
    assert f"{s.total_cycles:,} cycles" in text
    assert format_bytes(s.peak.bytes) in text and f"IPU {s.peak.ipu}" in text
    assert ("DOES NOT FIT" in view.banner.text()) == (not s.fits)
    widths = [b.opts["width"][0] for b in view.phase_bars]
    assert widths == pytest.approx([100 * s.phase_share[p] for p in PHASES])
    # rows in descending cycles, as the analysis returns them
    assert list(view.ops_model.df["cycles"]) == list(s.top_ops["cycles"])
    seen = []
    document.selection.changed.connect(seen.append)
    idx = view.ops_model.index(1, 0)
    rect = view.ops_table.visualRect(idx)
    qtbot.mouseClick(view.ops_table.viewport(), Qt.LeftButton, pos=rect.center())
    assert seen and seen[-1].op_id == int(s.top_ops["op_id"].iloc[1]) and seen[-1].source == "summary"


def test_summary_phase_axis_stops_at_100_percent(qtbot, document):
    """The phase-share axis showed ticks up to 120% (the range leaves room for the bar labels)."""
    from popvision_lite.gui.views.summary_view import SummaryView
    from tests.support.qt import show_view

    view = show_view(qtbot, SummaryView(document))
    axis = view.plot.getPlotItem().getAxis("bottom")
    levels = axis._tickLevels or []  # set ticks (None: pyqtgraph's automatic ones, up to 120)
    labelled = [float(v) for v, text in (levels[0] if levels else []) if text]
    assert labelled and max(labelled) == 100 and 0 in labelled
    # the axis itself ends at (about) 100 %, not 130 %: the longest bar carries its label inside
    x0, x1 = view.plot.getPlotItem().getViewBox().viewRange()[0]
    assert x0 == pytest.approx(0, abs=0.5) and x1 <= 104
    # the exported chart says which run it is (the headless summary PNG is this plot alone)
    title = view.plot.getPlotItem().titleLabel.text
    s = view.summary
    assert s.model in title and s.target.name in title and f"{s.total_cycles:,} cycles" in title
    # three lines as shown, not one line with the markup spelled out ("...1 IPU<br>bottleneck...")
    shown = view.plot.getPlotItem().titleLabel.item.toPlainText()
    assert "<br>" not in shown and len(shown.splitlines()) == 3


def test_a_short_host_bar_puts_its_source_on_a_line_of_its_own(qtbot, document):
    """Beside a short bar the host's label ran past the plot's right edge on one line ("... host step 4.5 ms
    (calibrated, Tens" in a ResNet-50 profile whose host bar reached 56 %): its source now has a line of its own."""
    from popvision_lite.analysis.run_totals import run_totals
    from popvision_lite.gui.views.summary_view import SummaryView
    from tests.support.qt import show_view

    view = show_view(qtbot, SummaryView(document))
    rt = run_totals(document.profile)
    host = view.phase_texts[PHASES.index("host")]
    assert not host.inside
    lines = host.textItem.toPlainText().splitlines()
    assert lines == [f"{100 * rt.part_share['host']:.1f}%  ({rt.part_cycles['host']:,} cycles):", rt.host_short]
    # the other parts' labels stay one line
    assert all(len(t.textItem.toPlainText().splitlines()) == 1 for t in view.phase_texts if t is not host)


def test_summary_lists_only_failed_numeric_checks(qtbot):
    """The summary listed every passing check as a raw dict (dozens of 'atol=0.02, elements=...' rows)."""
    from popvision_lite.gui.app import create_app
    from popvision_lite.gui.state.document import Document
    from popvision_lite.gui.views.summary_view import SummaryView
    from popvision_lite.profile.reader import open_profile
    from tests.support.qt import show_view

    create_app()
    path = ROOT / "sample_profiles" / "mlp_mk2.pvl"
    doc = Document(open_profile(path), path)
    try:
        checks = doc.profile.run["numeric_checks"]
        view = show_view(qtbot, SummaryView(doc))
        text = view.info.text()
        assert "all passed" in text and f"({len(checks)} tensors vs numpy" in text
        assert "atol=" not in text
        worst = max(v["max_rel_err"] for v in checks.values())
        assert f"worst max rel err {worst:.2g}" in text
        # a failing check is listed with its numbers
        name = next(iter(checks))
        view.summary.numeric_checks[name] = dict(checks[name], passed=False)
        view._fill()
        text = view.info.text()
        assert "FAILED" in text and name in text and "atol=" in text
    finally:
        doc.close()


def test_summary_config_shows_only_the_models_settings(qtbot):
    """A BERT run's config table listed the GNN's nodes/edges and the conv's image size."""
    import re

    from popvision_lite.gui.app import create_app
    from popvision_lite.gui.state.document import Document
    from popvision_lite.gui.views.summary_view import SummaryView
    from popvision_lite.profile.reader import open_profile
    from tests.support.qt import show_view

    create_app()
    shown = {}
    for name in ("bert_tiny_mk2", "gnn_mk2"):
        path = ROOT / "sample_profiles" / f"{name}.pvl"
        doc = Document(open_profile(path), path)
        try:
            view = show_view(qtbot, SummaryView(doc))
            text = view.info.text()
            config = text.split("<h3>Config</h3>", 1)[1]
            shown[name] = set(re.findall(r"<tr><td>([a-z_]+)</td>", config))
            assert set(doc.profile.run["config"]) >= shown[name]
        finally:
            doc.close()
    assert {"seq", "heads", "batch", "hidden"} <= shown["bert_tiny_mk2"]
    assert not {"nodes", "edges", "image"} & shown["bert_tiny_mk2"]
    assert {"nodes", "edges", "batch", "hidden"} <= shown["gnn_mk2"]
    assert not {"seq", "heads", "image", "vocab"} & shown["gnn_mk2"]
