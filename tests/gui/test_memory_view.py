"""Memory view: tile click -> breakdown + variables; category switch; linked selection; hover."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import QPointF, Qt

from popvision_lite.analysis.tile_memory import PERCENT, TileMemory
from popvision_lite.profile import schema

pytestmark = pytest.mark.gui

@pytest.fixture
def mem(qtbot, document):
    from popvision_lite.gui.views.memory import MemoryView
    from tests.support.qt import show_view

    return show_view(qtbot, MemoryView(document))


def _widget_pos(view, tile):
    lay = view.tile_layout()
    vb = view.heat_plot.getViewBox()
    scene = vb.mapViewToScene(QPointF(lay.col[tile] + 0.5, lay.row[tile] + 0.5))
    return view.heat_widget.mapFromScene(scene)


def test_click_on_tile_shows_its_breakdown_and_variables(qtbot, mem):
    tm = TileMemory(mem.profile)
    tile = int(np.argmax(tm.total))  # an over-capacity tile on some IPU
    # before a pick: the table has its headers (it was a blank box) and the hint says what to do
    assert mem.var_model.rowCount() == 0
    heads = [mem.var_model.headerData(c, Qt.Horizontal) for c in range(mem.var_model.columnCount())]
    assert "name" in heads and "on tile" in heads and "total" in heads
    assert set(mem.var_model.df.columns) == set(tm.variables_on(tile).columns)
    assert heads[:3] == ["name", "on tile", "total"]  # the tile's own bytes right after the name, never cut off
    assert "click a tile" in mem.var_hint.text().lower()
    seen = []
    mem.document.selection.changed.connect(seen.append)
    qtbot.mouseClick(mem.heat_widget.viewport(), Qt.LeftButton, pos=_widget_pos(mem, tile))
    assert mem.tile == tile
    assert seen and seen[-1].tiles == (tile,) and seen[-1].source == "memory"
    # variables table: exactly the variables with bytes on that tile, with those bytes
    vt = mem.profile.stored_table("variable_tiles")
    expect = vt[vt["tile"] == tile].groupby("var_id")["bytes"].sum()
    df = mem.var_model.df
    assert mem.var_model.rowCount() == len(expect) > 0
    assert df.set_index("var_id")["bytes_on_tile"].sort_index().to_dict() == expect.sort_index().to_dict()
    assert f"tile {tile}: {len(expect):,}" in mem.var_hint.text()
    assert list(df.columns[:3]) == ["name", "bytes_on_tile", "bytes"]
    # stacked bars: one item per non-empty category, widths = that tile's bytes (KiB)
    arr = mem.profile.memory.array()[tile]
    cats = [c for i, c in enumerate(schema.MEMORY_CATEGORIES) if arr[i].any()]
    assert len(mem.breakdown_bars) == len(cats)
    widths = np.array([b.opts["width"] for b in mem.breakdown_bars])  # (cats, 2)
    np.testing.assert_allclose(widths.sum(axis=0) * 1024, arr.sum(axis=0))
    ipu, t = divmod(tile, mem.profile.target.tiles_per_ipu)
    assert f"IPU {ipu}, tile {t}" in mem.tile_title.text()
    # sorting the table by a column works and keeps the rows
    mem.var_table.sortByColumn(list(df.columns).index("bytes_on_tile"), Qt.AscendingOrder)
    assert list(mem.var_model.df["bytes_on_tile"]) == sorted(expect.to_list())


def test_click_in_gap_selects_nothing(qtbot, mem):
    lay = mem.tile_layout()
    gaps = np.argwhere(lay.pixel_tile < 0)
    r, c = gaps[len(gaps) // 2]
    vb = mem.heat_plot.getViewBox()
    pos = mem.heat_widget.mapFromScene(vb.mapViewToScene(QPointF(c + 0.5, r + 0.5)))
    qtbot.mouseClick(mem.heat_widget.viewport(), Qt.LeftButton, pos=pos)
    assert mem.tile is None


@pytest.mark.parametrize("measure", ["not_always_live", "vertexCode", PERCENT, "total"])
def test_category_switch_recolours_to_the_analysis(qtbot, mem, measure):
    tm = TileMemory(mem.profile)
    mem.measure_box.setCurrentIndex(mem.measure_box.findData(measure))
    assert mem.measure == measure
    scale = 1.0 if measure == PERCENT else 1024.0
    expect = tm.values(measure) / scale
    lay = mem.tile_layout()
    img = mem.image.image
    assert img.shape == (lay.height, lay.width)
    np.testing.assert_allclose(img[lay.row, lay.col], expect)
    lo, hi = mem.image.getLevels()
    cap = 100.0 if measure == PERCENT else tm.capacity / 1024.0
    assert lo == 0 and hi == pytest.approx(max(expect.max(), cap))  # default: relative to tile capacity
    assert tuple(mem.colorbar.levels()) == pytest.approx((lo, hi))
    mem.scale_box.setCurrentIndex(mem.scale_box.findData("fullest"))
    lo, hi = mem.image.getLevels()
    assert hi == pytest.approx(max(expect.max(), 100.0 if measure == PERCENT else 0))
    mem.scale_box.setCurrentIndex(mem.scale_box.findData("capacity"))
    # memory-by-tile bars: each bar is the max of the tiles it covers (exact when one tile per bar)
    edges = np.round(mem.bar_curve.xData + 0.5).astype(int)
    assert edges[0] >= 0 and edges[-1] <= len(expect)
    np.testing.assert_allclose(mem.bar_curve.yData, [expect[a:b].max() for a, b in zip(edges[:-1], edges[1:], strict=True)])
    unit = "%" if measure == PERCENT else "KiB"
    assert unit in mem.colorbar.axis.labelText


def test_bar_plot_bins_to_pixels_and_is_exact_when_zoomed(qtbot, mem):
    v = TileMemory(mem.profile).values("total") / 1024.0
    vb = mem.bar_plot.getPlotItem().getViewBox()
    mem.bar_plot.resize(120, 300)  # narrower than the 192 tiles: bars must bin
    qtbot.wait(20)
    vb.setXRange(-0.5, len(v) - 0.5, padding=0)
    mem._update_bar()
    assert mem.bar_bin > 1
    edges = np.round(mem.bar_curve.xData + 0.5).astype(int)
    assert edges[0] == 0 and edges[-1] == len(v)
    np.testing.assert_allclose(mem.bar_curve.yData, [v[a:b].max() for a, b in zip(edges[:-1], edges[1:], strict=True)])
    vb.setXRange(10, 30, padding=0)  # zoomed in: one bar per tile
    mem._update_bar()
    assert mem.bar_bin == 1
    edges = np.round(mem.bar_curve.xData + 0.5).astype(int)
    np.testing.assert_allclose(mem.bar_curve.yData, v[edges[0]:edges[-1]])


def test_layout_switch_keeps_colours_per_tile(qtbot, mem):
    before = mem.image.image[mem.tile_layout().row, mem.tile_layout().col].copy()
    mem.layout_box.setCurrentText("grid by tile id")
    lay = mem.tile_layout()
    assert lay.name == "grid by tile id"
    np.testing.assert_array_equal(mem.image.image[lay.row, lay.col], before)


def test_over_capacity_tiles_are_outlined(qtbot, mem):
    tm = TileMemory(mem.profile)
    over = np.flatnonzero(tm.over_capacity)
    assert len(over) > 0
    lay = mem.tile_layout()
    x, y = mem.tile_map.outlined.getData()
    assert sorted(zip(x - 0.5, y - 0.5, strict=True)) == sorted(zip(lay.col[over], lay.row[over], strict=True))
    mem.over_box.setChecked(False)
    assert len(mem.tile_map.outlined.getData()[0]) == 0


def test_selection_from_another_view_highlights_tiles(qtbot, mem):
    tiles = (1, 5, 100)
    mem.document.selection.update(source="operations", tiles=tiles)
    np.testing.assert_array_equal(mem.highlight_tiles, tiles)
    lay = mem.tile_layout()
    alpha = mem.tile_map.dim.image[..., 3]
    assert (alpha[lay.row[list(tiles)], lay.col[list(tiles)]] == 0).all()
    others = np.setdiff1d(np.arange(len(lay.row)), tiles)
    assert (alpha[lay.row[others], lay.col[others]] > 0).all()
    assert alpha.max() <= 128  # a light dim: the map keeps its colours under it
    xs, ys = mem.tile_map.highlighted.getData()  # the selected tiles are outlined
    assert sorted(zip(xs - 0.5, ys - 0.5, strict=True)) == sorted(zip(lay.col[list(tiles)], lay.row[list(tiles)],
                                                                    strict=True))
    # an op selection without tiles is resolved through analysis.selection
    from popvision_lite.analysis.selection import op_tiles

    op = int(mem.profile.stored_table("ops")["op_id"].iloc[0])
    mem.document.selection.update(source="operations", op_id=op, tiles=())
    np.testing.assert_array_equal(np.sort(mem.highlight_tiles), np.sort(op_tiles(mem.profile, op)))
    mem.document.selection.clear(source="operations")
    assert not mem.tile_map.dim.isVisible() and len(mem.tile_map.highlighted.getData()[0]) == 0


def test_hover_describes_tile(qtbot, mem):
    tile = 7
    scene = mem.heat_plot.getViewBox().mapViewToScene(
        QPointF(mem.tile_layout().col[tile] + 0.5, mem.tile_layout().row[tile] + 0.5))
    mem._hover(scene)
    assert "tile 7 (global 7)" in mem.hover_label.text()


def test_plot_items_exported(mem):
    import pyqtgraph as pg

    items = mem.plot_items()
    assert set(items) >= {"heatmap", "by_tile"} and all(isinstance(i, pg.GraphicsItem) for i in items.values())


def test_keyboard_shortcuts(qtbot, mem):
    mem.heat_widget.setFocus()
    start = mem.measure
    qtbot.keyClick(mem.heat_widget, Qt.Key_BracketRight)
    assert mem.measure != start
    qtbot.keyClick(mem.heat_widget, Qt.Key_BracketLeft)
    assert mem.measure == start
    qtbot.keyClick(mem.heat_widget, Qt.Key_L)
    assert mem.layout_name == "grid by tile id"
    qtbot.keyClick(mem.heat_widget, Qt.Key_P)
    assert mem.tile == int(np.argmax(TileMemory(mem.profile).total))
    qtbot.keyClick(mem.heat_widget, Qt.Key_Right)
    assert mem.tile == (int(np.argmax(TileMemory(mem.profile).total)) + 1) % mem.tm.num_tiles


def test_variable_click_highlights_its_tiles(qtbot, mem):
    tile = int(np.argmax(TileMemory(mem.profile).total))
    mem.select_tile(tile)
    row = 0
    var_id = int(mem.var_model.row(row)["var_id"])
    rect = mem.var_table.visualRect(mem.var_model.index(row, 0))
    qtbot.mouseClick(mem.var_table.viewport(), Qt.LeftButton, pos=rect.center())
    vt = mem.profile.stored_table("variable_tiles")
    expect = np.unique(vt.loc[vt["var_id"] == var_id, "tile"])
    np.testing.assert_array_equal(mem.highlight_tiles, expect)
    assert mem.document.selection.state.tiles == tuple(int(t) for t in expect)
    lay = mem.tile_layout()
    assert (mem.tile_map.dim.image[lay.row[expect], lay.col[expect], 3] == 0).all()


def test_liveness_step_measure_follows_selected_step(qtbot, mem):
    from popvision_lite.gui.views.memory import LSTEP

    mem.set_measure(LSTEP)
    mem.document.selection.update(source="liveness", lstep=5)
    lay = mem.tile_layout()
    expect = mem.profile.liveness.tile_bytes(lstart=5, lstop=6)[0] / 1024.0
    np.testing.assert_allclose(mem.image.image[lay.row, lay.col], expect)
    assert "liveness step 5" in mem.measure_box.currentText()
    assert "liveness step 5" in mem.colorbar.axis.labelText



def test_bar_plot_opens_showing_every_tile(qtbot):
    """Regression: the bars drawn for the initial view range fed auto-range, so a view built in a
    hidden tab (as in the main window) opened showing tiles 0-2 of a 1,472-tile IPU."""
    from pathlib import Path

    from PySide6.QtWidgets import QLabel, QTabWidget

    from popvision_lite.gui.app import create_app
    from popvision_lite.gui.state.document import Document
    from popvision_lite.gui.views.memory import MemoryView
    from popvision_lite.profile.reader import open_profile
    from tests.support.qt import show_view

    create_app()
    path = Path(__file__).resolve().parents[2] / "sample_profiles" / "bert_tiny_mk2.pvl"
    doc = Document(open_profile(path), path)
    try:
        tabs = QTabWidget()
        tabs.addTab(QLabel("other"), "other")
        view = MemoryView(doc)
        tabs.addTab(view, "Memory")
        show_view(qtbot, tabs)
        qtbot.wait(20)
        tabs.setCurrentIndex(1)
        qtbot.waitExposed(view)
        qtbot.wait(50)
        n = view.tm.num_tiles
        (x0, x1), _ = view.bar_plot.getPlotItem().getViewBox().viewRange()
        assert x0 <= -0.5 and x1 >= n - 0.5
        edges = np.round(view.bar_curve.xData + 0.5).astype(int)
        assert edges[0] == 0 and edges[-1] == n
    finally:
        doc.close()


def test_hover_on_bar_plot_describes_tile(qtbot, mem):
    vb = mem.bar_plot.getPlotItem().getViewBox()
    vb.setXRange(0, 40, padding=0)
    qtbot.wait(10)
    mem._bar_hover(vb.mapViewToScene(QPointF(12, 1)))
    assert "(global 12)" in mem.hover_label.text()


def test_breakdown_scale_before_a_tile_is_picked(mem):
    """With no tile selected the breakdown plot shows 0..capacity, not a sliver around the capacity line."""
    (x0, x1), _ = mem.breakdown_kp.getViewBox().viewRange()
    cap = mem.tm.capacity / 1024.0
    assert x0 <= 0 and cap < x1 < 1.2 * cap



def test_capacity_is_named_without_covering_the_bars(qtbot):
    """The tile capacity is named on the bar plot's axis; no label box sits on the line over the bars."""
    from pathlib import Path

    from popvision_lite.gui.app import create_app
    from popvision_lite.gui.state.document import Document
    from popvision_lite.gui.views.memory import MemoryView
    from popvision_lite.profile.reader import open_profile
    from tests.support.qt import show_view

    create_app()
    path = Path(__file__).resolve().parents[2] / "sample_profiles" / "bert_tiny_mk2.pvl"
    doc = Document(open_profile(path), path)
    try:
        view = show_view(qtbot, MemoryView(doc))
        assert getattr(view.cap_line, "label", None) is None
        bp = view.bar_plot.getPlotItem()
        assert "tile capacity 624.00 KiB" in bp.getAxis("bottom").labelText
        # the left label fits the plot's height (with the capacity in it, it was clipped at the top)
        left = bp.getAxis("left")
        assert left.label.boundingRect().width() <= left.boundingRect().height()
        assert view.cap_line.value() == 624.0
    finally:
        doc.close()
