"""``MenuOnDemandViewBox``: a ViewBox whose context menu is built the first time it is shown.

pyqtgraph builds every ViewBox's context menu (``ViewBoxMenu``: two axis forms, a dozen actions, their widget
groups) in the ViewBox's constructor: about 3 ms a plot, paid by every view and compare page built, although
few plots are ever right-clicked.  This ViewBox has the same menu, on (``menuEnabled()``) as before, built
when Qt first asks for it (``getMenu`` on a right click, ``getContextMenus`` when a child item's menu
adds its parents' entries).  The menu then reads the view's state as it is at that moment, as pyqtgraph's does
whenever it pops up (``ViewBoxMenu.popup`` updates itself first).
"""

from __future__ import annotations

import pyqtgraph as pg
from pyqtgraph.graphicsItems.ViewBox import ViewBoxMenu


class MenuOnDemandViewBox(pg.ViewBox):
    """A ``pg.ViewBox`` (same arguments) whose context menu is built on first use; ``enableMenu=False`` gives
    a ViewBox without one, as pyqtgraph's."""

    def __init__(self, *args, enableMenu: bool = True, **kwargs):
        super().__init__(*args, enableMenu=False, **kwargs)   # pyqtgraph builds no menu
        self.state["enableMenu"] = bool(enableMenu)           # on as asked: built by menu_now()

    def menu_now(self):
        """The context menu, built now if it is on and not built yet (None when it is off)."""
        if self.menu is None and self.menuEnabled():
            self.menu = ViewBoxMenu.ViewBoxMenu(self)
            self.updateViewLists()   # the axis-link lists, as pyqtgraph fills them when it builds its menu
        return self.menu

    def getMenu(self, ev):
        return self.menu_now()

    def getContextMenus(self, event):
        return self.menu_now().actions() if self.menuEnabled() else []


def plot_kwargs(**kwargs) -> dict:
    """``kwargs`` for ``pg.PlotWidget`` / ``GraphicsLayout.addPlot`` / ``pg.PlotItem`` with a
    :class:`MenuOnDemandViewBox` as the plot's view box."""
    return {"viewBox": MenuOnDemandViewBox(), **kwargs}
