"""The tile map: every tile of every IPU as one pixel of one image, in a :class:`~popvision_lite.analysis.
floor_plan.TileLayout` (floor plan or grid), with what views draw on top of it.

:class:`TileMapItem` is a ``pg.GraphicsObject`` holding, in the image's pixel coordinates (x = column,
y = row), its ``image`` (a plain ``pg.ImageItem``: a ``ColorBarItem`` drives its levels and colour map as for
any image, and the SVG export upscales it without touching the marks) and, over it:

* the IPU names above each IPU block;
* outlined tiles (over capacity), in the theme's ``over`` colour;
* highlighted tiles (selected in another view), outlined in the ``select`` colour, every other tile lightly
  dimmed by one RGBA overlay image;
* the cursor tile, a thicker ring in the ``select`` colour.

Recolouring is one fancy-index into the reused image buffer and one ``setImage``.  Used by the Memory view
and by both maps (and the difference map) of compare's Memory page.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF

from popvision_lite.analysis.floor_plan import TileLayout, floor_plan_layout, grid_layout
from popvision_lite.gui import theme

# the tile layouts a map can be drawn in, by the name the Memory view's Layout box shows
TILE_LAYOUTS = {"floor plan": floor_plan_layout, "grid by tile id": grid_layout}

DIM_ALPHA = 110         # of the plot background over tiles that are not highlighted (out of 255)
LABEL_ROWS = 3          # image rows above the map kept free for the IPU names


class TileMapItem(pg.GraphicsObject):
    """Per-tile values of every IPU in one image laid out by ``layout``; see the module docstring."""

    def __init__(self, layout: TileLayout | None = None, cursor_size: float = 1.6):
        super().__init__()
        self.layout: TileLayout | None = None
        self.image = pg.ImageItem(axisOrder="row-major")
        self.image.setParentItem(self)
        self._buf = np.zeros(0)
        self.ipu_labels: list[pg.TextItem] = []
        self._mark_style: dict[int, tuple[str, float]] = {}  # id(mark) -> (theme colour key, pen width)
        # children are drawn over the image, in this order (z among siblings)
        self.dim = pg.ImageItem(axisOrder="row-major")
        self.dim.setParentItem(self)
        self.dim.setZValue(1)
        self.dim.hide()
        self.highlighted = self._marks(1.0, "select", 1.5, z=2)
        self.outlined = self._marks(1.0, "over", 2, z=3)
        self.cursor = self._marks(cursor_size, "select", 3, z=4)
        self._cursor_tile: int | None = None
        self._outlined_tiles = np.zeros(0, np.int64)
        self._highlight_tiles = np.zeros(0, np.int64)
        if layout is not None:
            self.set_layout(layout)

    def _marks(self, size: float, color_key: str, width: float, z: int) -> pg.ScatterPlotItem:
        """Square outlines one tile wide (``size`` tiles), in the theme colour ``color_key``."""
        m = pg.ScatterPlotItem(pxMode=False, symbol="s", size=size, brush=None,
                               pen=pg.mkPen(theme.colors()[color_key], width=width))
        self._mark_style[id(m)] = (color_key, width)
        m.setParentItem(self)
        m.setZValue(z)
        return m

    # ------------------------------------------------------------------ layout and values
    def set_layout(self, layout: TileLayout) -> None:
        """Place tiles by ``layout`` (names of the IPUs above their blocks); redraws the marks there."""
        self.prepareGeometryChange()
        self.layout = layout
        self._buf = np.full(layout.height * layout.width, np.nan)
        for t in self.ipu_labels:
            t.setParentItem(None)
            if t.scene() is not None:
                t.scene().removeItem(t)
        self.ipu_labels = []
        for ipu in range(layout.num_ipus):
            r, c = layout.ipu_origin(ipu)
            t = pg.TextItem(f"IPU {ipu}", color=theme.colors()["plot_fg"], anchor=(0, 1))
            t.setParentItem(self)
            t.setZValue(5)
            t.setPos(c, r)
            self.ipu_labels.append(t)
        self._draw_marks()

    def set_values(self, values: np.ndarray, levels: tuple[float, float]) -> None:
        """Colour tile i by ``values[i]`` on ``levels``; pixels between IPU blocks stay empty."""
        lay = self._need_layout()
        self._buf[lay.flat_index] = values
        self.image.setImage(self._buf.reshape(lay.height, lay.width), autoLevels=False, levels=levels)

    # ------------------------------------------------------------------ QGraphicsItem
    def boundingRect(self) -> QRectF:  # noqa: N802 - Qt's name
        lay = self.layout
        return QRectF() if lay is None else QRectF(0.0, 0.0, float(lay.width), float(lay.height))

    def paint(self, painter, option, widget=None) -> None:
        """Nothing of its own: the image and the marks are child items."""

    def view_rect(self) -> tuple[tuple[float, float], tuple[float, float]]:
        """(x range, y range) showing the whole map and the IPU names above it (for ``ViewBox.setRange``)."""
        lay = self._need_layout()
        return (0.0, float(lay.width)), (-float(LABEL_ROWS), float(lay.height))

    def _need_layout(self) -> TileLayout:
        if self.layout is None:
            raise RuntimeError("TileMapItem has no layout: call set_layout first")
        return self.layout

    # ------------------------------------------------------------------ picking
    def tile_at(self, x: float, y: float) -> int:
        """Global tile at image coordinates (x = column, y = row), or -1 (outside, or between IPU blocks)."""
        return -1 if self.layout is None else self.layout.tile_at(y, x)

    def tile_at_scene(self, scene_pos) -> int:
        """Global tile under a scene position, or -1."""
        p = self.mapFromScene(scene_pos)
        return self.tile_at(p.x(), p.y())

    def tile_centre(self, tiles) -> tuple[np.ndarray, np.ndarray]:
        """(x, y) of the centres of ``tiles`` in image coordinates."""
        lay = self._need_layout()
        t = np.asarray(tiles, dtype=np.int64)
        return lay.col[t] + 0.5, lay.row[t] + 0.5

    # ------------------------------------------------------------------ marks
    def set_outlined(self, tiles) -> None:
        """Outline ``tiles`` (e.g. over capacity) in the ``over`` colour; empty clears."""
        self._outlined_tiles = np.asarray(tiles, dtype=np.int64)
        self._draw_marks()

    def set_highlighted(self, tiles) -> None:
        """Outline ``tiles`` in the ``select`` colour and dim every other tile; empty clears."""
        self._highlight_tiles = np.asarray(tiles, dtype=np.int64)
        self._draw_marks()

    def set_cursor(self, tile: int | None) -> None:
        """Ring ``tile`` (None, or a tile the layout has not, clears)."""
        self._cursor_tile = tile
        self._draw_marks()

    def cursor_tile(self) -> int | None:
        return self._cursor_tile

    def _draw_marks(self) -> None:
        lay = self.layout
        if lay is None:
            return
        n = len(lay.row)
        for item, tiles in ((self.outlined, self._outlined_tiles), (self.highlighted, self._highlight_tiles)):
            t = tiles[(tiles >= 0) & (tiles < n)]
            if len(t):
                item.setData(*self.tile_centre(t))
            else:
                item.setData([], [])
        c = self._cursor_tile
        if c is not None and 0 <= c < n:
            self.cursor.setData(*self.tile_centre([c]))
        else:
            self.cursor.setData([], [])
        self._draw_dim()

    def _draw_dim(self) -> None:
        lay = self.layout
        tiles = self._highlight_tiles
        tiles = tiles[(tiles >= 0) & (tiles < len(lay.row))]
        if len(tiles) == 0:
            self.dim.clear()
            self.dim.hide()
            return
        bg = pg.mkColor(theme.colors()["plot_bg"])
        rgba = np.zeros((lay.height, lay.width, 4), dtype=np.uint8)
        rgba[..., 0], rgba[..., 1], rgba[..., 2] = bg.red(), bg.green(), bg.blue()
        mask = np.zeros(lay.height * lay.width, dtype=bool)
        mask[lay.flat_index] = True          # real tiles get dimmed ...
        mask[lay.flat_index[tiles]] = False  # ... except the highlighted ones
        rgba[..., 3] = mask.reshape(lay.height, lay.width) * DIM_ALPHA
        self.dim.setImage(rgba, autoLevels=False, levels=(0, 255))
        self.dim.show()

    def restyle(self) -> None:
        """Take the current theme's colours (IPU names, marks, the dimming overlay)."""
        c = theme.colors()
        for t in self.ipu_labels:
            t.setColor(c["plot_fg"])
        for m in (self.outlined, self.highlighted, self.cursor):
            key, width = self._mark_style[id(m)]
            m.setPen(pg.mkPen(c[key], width=width))
        self._draw_marks()
