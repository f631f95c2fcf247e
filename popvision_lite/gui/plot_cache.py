"""What a plot drew, kept for its next paint.

Qt paints every item of a graphics view anew on each paint, and a view shown again (its tab revisited) is
painted in full: the Liveness view's curves over ~40,000 liveness steps cost ~80 ms a paint.
:func:`keep_drawing` gives items Qt's device-coordinate cache: an item is drawn once into a pixmap of the
view's pixels and repainted from it until the item changes (new data, pen), or the view pans, zooms or
resizes, which draw it afresh.  Exports draw every item afresh (:func:`drawn_afresh`): an SVG holds the
items' shapes, not the cached pixmaps, and a PNG is drawn at its own size.

Two things would defeat the cache, and are handled here:

* a graphics view sends its scene a window deactivation when it is hidden and an activation when it is
  shown (``QGraphicsView::viewportEvent``); the scene passes them on and every graphics *widget* (the plot,
  its axes, legend and view box) calls ``update()`` on them: each visit of a tab then threw away the cached
  drawings and painted the whole plot twice.  Nothing our plots draw depends on the window being active (no
  focus, no panels, no active/inactive palette), so the scenes of cached items do not receive them;
* Qt keeps the pixmaps in its global QPixmapCache, least recently used first out, 10 MiB by default: the
  Liveness view's curves and gridded axes alone take ~5.6 MiB at 1400 x 900, so with the Roofline's axes and
  a second document the default would drop them before the next visit.  The limit is raised to
  :data:`PIXMAP_CACHE_KIB` (a bound, not an allocation).
"""

from __future__ import annotations

import contextlib

import pyqtgraph as pg
from PySide6.QtCore import QEvent, QObject
from PySide6.QtGui import QPixmapCache
from PySide6.QtWidgets import QGraphicsItem

PIXMAP_CACHE_KIB = 64 * 1024
_ACTIVATION = (QEvent.Type.WindowActivate, QEvent.Type.WindowDeactivate)


class _NoActivationRepaint(QObject):
    """An event filter on a graphics scene that drops window (de)activation events (see the module's text)."""

    def eventFilter(self, obj, event) -> bool:  # noqa: N802 - Qt's name
        return event.type() in _ACTIVATION


_filter: _NoActivationRepaint | None = None


def keep_drawing(*items) -> None:
    """Cache what each of ``items`` draws (a ``PlotDataItem`` draws through its curve, which is what is cached);
    the items are in their scene already."""
    global _filter
    if QPixmapCache.cacheLimit() < PIXMAP_CACHE_KIB:
        QPixmapCache.setCacheLimit(PIXMAP_CACHE_KIB)
    if _filter is None:
        _filter = _NoActivationRepaint()
    for it in items:
        target = it.curve if isinstance(it, pg.PlotDataItem) else it
        target.setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)
        scene = target.scene()
        if scene is not None:
            scene.installEventFilter(_filter)  # once per scene: installing it again only moves it


def keep_plot_drawing(plot_item: pg.PlotItem) -> None:
    """Cache the drawing of a plot's axes (their ticks, labels and grid lines) and of its data items so far."""
    keep_drawing(*(plot_item.getAxis(name) for name in ("left", "bottom", "top", "right")), *plot_item.listDataItems())


@contextlib.contextmanager
def drawn_afresh(scene):
    """While an export renders ``scene``, its items draw themselves (no cached pixmaps in an SVG or a PNG)."""
    cached = [] if scene is None else [it for it in scene.items() if it.cacheMode() != QGraphicsItem.CacheMode.NoCache]
    try:
        for it in cached:
            it.setCacheMode(QGraphicsItem.CacheMode.NoCache)
        yield
    finally:
        for it in cached:
            it.setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)
