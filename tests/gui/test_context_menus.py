"""Plots keep their context menu, built on the first right click (gui/items/menu_on_demand.py): pyqtgraph
built each plot's ``ViewBoxMenu`` with the plot, ~3 ms a plot of every view and compare page opened."""

from __future__ import annotations

import pyqtgraph as pg
import pytest
from pyqtgraph.graphicsItems.ViewBox import ViewBoxMenu

from popvision_lite.gui.items.menu_on_demand import MenuOnDemandViewBox


@pytest.fixture
def menus_built(monkeypatch):
    """Every ViewBoxMenu constructed while the test runs (its ViewBox)."""
    built = []
    real = ViewBoxMenu.ViewBoxMenu.__init__

    def init(self, view):
        built.append(view)
        real(self, view)

    monkeypatch.setattr(ViewBoxMenu.ViewBoxMenu, "__init__", init)
    return built


def test_views_build_no_menu_until_one_is_asked_for(qtbot, document, menus_built):
    from popvision_lite.gui.views.liveness_view import LivenessView
    from popvision_lite.gui.views.memory.view import MemoryView
    from popvision_lite.gui.views.roofline import RooflineView
    from popvision_lite.gui.views.summary_view import SummaryView

    boxes = []
    for cls in (SummaryView, MemoryView, LivenessView, RooflineView):
        v = cls(document)
        qtbot.addWidget(v)
        for item in v.plot_items().values():
            if isinstance(item, pg.PlotItem) and item.getViewBox().menuEnabled():  # (the tile map has none)
                boxes.append(item.getViewBox())
    # (the Memory view's colour bar is pyqtgraph's ColorBarItem, which builds its own view box and menu)
    assert len(boxes) >= 4 and not set(boxes) & set(menus_built)
    before = len(menus_built)
    # each plot's menu is built when Qt asks for it, once
    for vb in boxes:
        menu = vb.getMenu(None)
        assert isinstance(menu, ViewBoxMenu.ViewBoxMenu) and vb.getMenu(None) is menu
        assert vb.getContextMenus(None) == menu.actions()
    assert menus_built[before:] == boxes


def test_the_menu_is_pyqtgraphs_menu_in_the_views_state(qtbot, menus_built):
    """The same entries as a stock ViewBox's menu, reading the view's state when it is built (a range set before
    the first right click shows in the menu's axis forms), and none when the menu is off."""
    stock, lazy = pg.ViewBox(), MenuOnDemandViewBox()
    for vb in (stock, lazy):
        vb.setRange(xRange=(2, 7), padding=0)
    assert len(menus_built) == 1  # the stock one, in its constructor
    a, b = stock.getMenu(None), lazy.getMenu(None)
    for m in (a, b):
        m.updateState()
    assert [x.text() for x in b.actions()] == [x.text() for x in a.actions()]
    assert b.ctrl[0].minText.text() == a.ctrl[0].minText.text() != ""
    off = MenuOnDemandViewBox(enableMenu=False)
    assert not off.menuEnabled() and off.getMenu(None) is None and off.getContextMenus(None) == []
    off.setMenuEnabled(True)   # pyqtgraph's own switch still builds it
    assert isinstance(off.menu, ViewBoxMenu.ViewBoxMenu)
