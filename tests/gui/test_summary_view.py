"""Summary view: numbers shown match the analysis; clicking a top op selects it."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from popvision_lite.analysis.summary import PHASES, format_bytes, summarize

pytestmark = pytest.mark.gui
pytest_plugins = ["gui_fixtures"]


def test_summary_view_shows_the_analysis(qtbot, document):
    from gui_fixtures import show_view

    from popvision_lite.gui.views.summary_view import SummaryView

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
