"""TileMapItem: values placed by the tile layout, picking by scene position, marks and dimming, theme colours;
the Memory view and every map of compare's Memory page draw with it."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
import pytest

from popvision_lite.analysis.floor_plan import floor_plan_layout, grid_layout


class _Target:
    num_ipus, tiles_per_ipu, device = 2, 96, "ipu-mk2"

    @property
    def num_tiles(self):
        return self.num_ipus * self.tiles_per_ipu


@pytest.fixture
def plot(qtbot):
    from popvision_lite.gui.app import create_app

    create_app()
    w = pg.PlotWidget()
    w.resize(600, 400)
    qtbot.addWidget(w)
    w.show()
    pi = w.getPlotItem()
    pi.setAspectLocked(True)
    pi.invertY(True)
    return w


@pytest.mark.parametrize("make_layout", [floor_plan_layout, grid_layout])
def test_values_land_where_the_layout_puts_each_tile_and_picking_inverts_it(plot, qtbot, make_layout):
    from popvision_lite.gui.items.tile_map import TileMapItem

    lay = make_layout(_Target())
    item = TileMapItem(lay)
    plot.addItem(item)
    v = np.arange(lay.num_ipus * lay.tiles_per_ipu, dtype=np.float64) * 3.0
    item.set_values(v, (0.0, float(v.max())))
    img = item.image.image
    assert img.shape == (lay.height, lay.width)
    np.testing.assert_array_equal(img[lay.row, lay.col], v)
    assert np.isnan(img[lay.pixel_tile < 0]).all()  # gaps between IPU blocks stay empty
    assert tuple(item.image.getLevels()) == (0.0, float(v.max()))
    xr, yr = item.view_rect()
    plot.getPlotItem().setRange(xRange=xr, yRange=yr, padding=0)
    qtbot.wait(10)
    vb = plot.getPlotItem().getViewBox()
    for tile in (0, 5, lay.tiles_per_ipu, len(v) - 1):
        x, y = item.tile_centre([tile])
        scene = vb.mapViewToScene(pg.Point(float(x[0]), float(y[0])))
        assert item.tile_at_scene(scene) == tile
    assert item.tile_at(-5, -5) == -1
    assert [t.toPlainText() for t in item.ipu_labels] == ["IPU 0", "IPU 1"]


def test_marks_dimming_and_theme(plot):
    from popvision_lite.gui import theme
    from popvision_lite.gui.items.tile_map import DIM_ALPHA, TileMapItem

    lay = floor_plan_layout(_Target())
    item = TileMapItem(lay)
    plot.addItem(item)
    item.set_values(np.ones(192), (0, 2))
    item.set_outlined([3, 4, 999])  # a tile the layout has not is left out
    x, _ = item.outlined.getData()
    np.testing.assert_allclose(sorted(x), sorted(lay.col[[3, 4]] + 0.5))
    item.set_highlighted([7])
    assert item.dim.isVisible()
    alpha = item.dim.image[..., 3]
    assert alpha[lay.row[7], lay.col[7]] == 0 and alpha[lay.row[8], lay.col[8]] == DIM_ALPHA
    assert (alpha[lay.pixel_tile < 0] == 0).all()  # gaps are not dimmed
    item.set_highlighted([])
    assert not item.dim.isVisible() and len(item.highlighted.getData()[0]) == 0
    item.set_cursor(9)
    assert item.cursor.getData()[0][0] == lay.col[9] + 0.5 and item.cursor_tile() == 9
    item.set_cursor(None)
    assert len(item.cursor.getData()[0]) == 0
    try:
        theme.apply_theme("dark")
        item.restyle()
        assert item.ipu_labels[0].color.name() == pg.mkColor(theme.colors()["plot_fg"]).name()
        assert item.outlined.opts["pen"].color().name() == pg.mkColor(theme.colors()["over"]).name()
    finally:
        theme.apply_theme("light")
        item.restyle()


def test_memory_view_and_compare_maps_use_the_one_item(qtbot, document):
    import popvision_lite as pvl
    from popvision_lite.gui.compare_window import CompareWindow
    from popvision_lite.gui.items.tile_map import TileMapItem
    from popvision_lite.gui.state.document import Document
    from popvision_lite.gui.views.memory import MemoryView

    mem = MemoryView(document)
    qtbot.addWidget(mem)
    assert isinstance(mem.tile_map, TileMapItem) and [r() for r in mem.colorbar.img_list] == [mem.tile_map.image]
    w = CompareWindow(Document(pvl.open(document.path)), Document(pvl.open(document.path)))
    qtbot.addWidget(w)
    page = w.show_page("memory")
    assert all(isinstance(it, TileMapItem) for it in (page.map_a, page.map_b, page.map_d))
    # the same values on the same layout draw the same image in both
    mem.set_measure("total")
    page.set_measure("total")
    np.testing.assert_allclose(page.img_a.image, mem.image.image, equal_nan=True)
    w.close()
