"""Liveness view: step click lists live variables; tile selection draws the tile's curve."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import QPointF, Qt

from popvision_lite.analysis.liveness import live_variables, peak_step

pytestmark = pytest.mark.gui

@pytest.fixture
def live(qtbot, document):
    from popvision_lite.gui.views.liveness_view import LivenessView
    from tests.support.qt import show_view

    return show_view(qtbot, LivenessView(document))


def test_click_on_step_lists_live_variables(qtbot, live):
    prof = live.profile
    step = peak_step(prof)
    seen = []
    live.document.selection.changed.connect(seen.append)
    vb = live.plot.getPlotItem().getViewBox()
    qtbot.wait(20)  # let the view box settle its range
    y = float(np.mean(vb.viewRange()[1]))
    pos = live.plot.mapFromScene(vb.mapViewToScene(QPointF(step, y)))
    qtbot.mouseClick(live.plot.viewport(), Qt.LeftButton, pos=pos)
    assert live.lstep == step
    assert seen and seen[-1].lstep == step and seen[-1].source == "liveness"
    ls = prof.stored_table("liveness_steps")
    assert seen[-1].prog_id == int(ls.loc[ls["lstep"] == step, "prog_id"].iloc[0])
    expect = live_variables(prof, step, tile=live.tile)
    assert live.var_model.rowCount() == len(expect) > 0
    assert set(live.var_model.df["var_id"]) == set(expect["var_id"])
    # the listed bytes on the tile add up to the stored not-always-live bytes at that step
    lt = prof.liveness.tile_bytes(lstart=step, lstop=step + 1, tiles=[live.tile])
    assert live.var_model.df["bytes_on_tile"].sum() == int(lt[0, 0])
    assert f"Step {step}" in live.info.text()


def test_tile_from_memory_selection_drives_tile_curve(qtbot, live):
    prof = live.profile
    live.document.selection.update(source="memory", tiles=(3,))
    assert live.tile == 3
    np.testing.assert_allclose(live.tile_curve.yData * 1024, prof.liveness.tile_bytes(tiles=[3])[:, 0])
    live.select_lstep(2)
    assert set(live.var_model.df["var_id"]) == set(live_variables(prof, 2, tile=3)["var_id"])


def test_lstep_from_other_view_moves_marker(qtbot, live):
    live.document.selection.update(source="program_tree", lstep=4)
    assert live.lstep == 4 and live.step_line.value() == 4 and live.step_box.value() == 4


def test_keys_step_through_liveness(qtbot, live):
    live.plot.setFocus()
    qtbot.keyClick(live.plot, Qt.Key_P)
    assert live.lstep == peak_step(live.profile)
    qtbot.keyClick(live.plot, Qt.Key_Left)
    assert live.lstep == max(peak_step(live.profile) - 1, 0)


def test_variable_click_selects_its_producing_op(qtbot, live):
    live.select_lstep(peak_step(live.profile))
    df = live.var_model.df
    rows = [i for i in range(len(df)) if int(df["op_id"].iloc[i]) >= 0]
    assert rows
    r = rows[0]
    rect = live.var_table.visualRect(live.var_model.index(r, 0))
    qtbot.mouseClick(live.var_table.viewport(), Qt.LeftButton, pos=rect.center())
    st = live.document.selection.state
    assert st.op_id == int(df["op_id"].iloc[r]) and st.source == "liveness" and len(st.tiles) > 0


def test_always_live_variables_listed(qtbot, live):
    v = live.profile.stored_table("variables")
    expect = v.loc[v["always_live"], "var_id"]
    assert set(live.always_model.df["var_id"]) == set(expect) and len(expect) > 0
    assert f"({len(expect):,})" in live.table_tabs.tabText(1)


def test_multi_ipu_liveness_marks_ipu_boundaries(qtbot):
    from pathlib import Path

    from popvision_lite.analysis.liveness import ipu_spans
    from popvision_lite.gui.state.document import Document
    from popvision_lite.gui.views.liveness_view import LivenessView
    from popvision_lite.profile.reader import open_profile

    path = Path(__file__).resolve().parents[2] / "sample_profiles" / "bert_mini_4ipu_pipeline.pvl"
    doc = Document(open_profile(path))
    v = LivenessView(doc)
    qtbot.addWidget(v)
    spans = ipu_spans(doc.profile)
    assert [ln.value() for ln in v.ipu_lines] == [float(f) - 0.5 for f in spans["first_lstep"]]
    assert [ln.label.toPlainText() for ln in v.ipu_lines] == ["IPU 0", "IPU 1", "IPU 2", "IPU 3"]
    # the legend does not cover any IPU's name (issue 46 item 18: it sat on "IPU 0")
    v.resize(1200, 800)
    v.show()
    qtbot.waitExposed(v)
    qtbot.wait(100)  # the plot lays out its legend and line labels
    legend = v.legend.sceneBoundingRect()
    assert legend.height() > 0
    for ln in v.ipu_lines:
        assert not legend.intersects(ln.label.sceneBoundingRect()), ln.label.toPlainText()
    doc.close()


def test_a_variable_live_in_several_intervals_shows_the_one_live_at_the_step(qtbot, tmp_path):
    """A recomputed variable's row shows the live interval that holds the chosen step ('live from' / 'live to')
    and how many intervals it has, not its whole first..last span."""
    from PySide6.QtCore import Qt as QtCore

    from popvision_lite.emulator.models.config import make_config
    from popvision_lite.emulator.models.emulated import run_model
    from popvision_lite.gui.state.document import Document
    from popvision_lite.gui.views.liveness_view import LivenessView
    from popvision_lite.profile.reader import open_profile
    from tests.support.qt import show_view

    path = tmp_path / "recompute.pvl"
    run_model(make_config("bert", layers=2, recompute=True), "ipu-mk2", timing_only=True, profile_path=path)
    doc = Document(open_profile(path))
    view = show_view(qtbot, LivenessView(doc))
    iv = doc.profile.stored_table("variable_intervals")
    counts = iv.groupby("var_id").size()
    var = int(counts.index[0])
    later = iv[iv["var_id"] == var].sort_values("first_lstep").iloc[-1]
    view.set_tile(None)
    view.select_lstep(int(later["first_lstep"]))
    df = view.var_model.df
    row = df.index[df["var_id"] == var][0]
    cols = list(df.columns)
    shown = {c: view.var_model.data(view.var_model.index(row, cols.index(c))) for c in
             ("first_lstep", "last_lstep", "intervals")}
    assert shown == {"first_lstep": f"{int(later['first_lstep']):,}", "last_lstep": f"{int(later['last_lstep']):,}",
                     "intervals": f"{int(counts[var]):,}"}
    span_first = int(doc.profile.stored_table("variables").set_index("var_id").loc[var, "first_lstep"])
    assert span_first < int(later["first_lstep"])  # the span's start is not what the row shows
    heads = [view.var_model.headerData(i, QtCore.Horizontal) for i in range(len(cols))]
    assert heads[cols.index("first_lstep")] == "live from" and heads[cols.index("intervals")] == "intervals"
    assert "live interval" in view.var_model.headerData(cols.index("first_lstep"), QtCore.Horizontal,
                                                        QtCore.ToolTipRole)
    doc.close()
