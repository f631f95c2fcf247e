"""``TileLanesItem``: every tile's busy time in the visible range (y = global tile), at the level of detail the
pixels allow.

Few steps and tiles visible (rows at least ``EXACT_MIN_ROW_PX`` high, cells within half of
:data:`~popvision_lite.analysis.execution.MAX_EXACT_RECTS`): exact rectangles, busy in its step kind's colour
then waiting at the sync in grey, one ``BarGraphItem`` per colour class.  Otherwise a raster (``ImageItem``
through the theme's busy LUT) of how busy each row of tiles was, from the stored summaries or an exact window
aggregated to pixels (:func:`~popvision_lite.analysis.execution.tile_raster`).  Children are rebased to the
view start (``setPos(origin)``) to avoid float artefacts on long runs.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF

from popvision_lite.analysis import execution as ex
from popvision_lite.gui import theme
from popvision_lite.gui.theme import STEP_KIND_COLORS
from popvision_lite.profile.schema import STEP_KINDS

EXACT_MIN_ROW_PX = 3.0


def util_to_index(util: np.ndarray) -> np.ndarray:
    """Busy fraction (nan = no step) -> uint8 LUT index (fast ImageItem path, no float rescale)."""
    t = np.multiply(util, 254.0, dtype=np.float32)
    np.clip(t, 0.0, 254.0, out=t)
    out = np.empty(util.shape, dtype=np.uint8)
    with np.errstate(invalid="ignore"):
        out[...] = t
    out[np.isnan(util)] = 255
    return out


def raster_note(source: str, level) -> str:
    """What one pixel of the tile raster shows, in words (not the internal source name)."""
    if source == "window":
        return "each pixel is the busy share of its steps and tiles, read from the step x tile data"
    if source.startswith("summary"):
        s, t = (int(level[0]), int(level[1])) if level else (1, 1)
        tiles = "one IPU's tiles" if t == 0 else f"{t:,} tile{'s' if t != 1 else ''}"
        return f"each pixel is the mean busy share of blocks of {s:,} steps x {tiles} (stored summary)"
    return "no step x tile data in this range"


def tile_span(y0: float, y1: float, num_tiles: int) -> tuple[int, int]:
    """The tiles [t0, t1) a y range shows (at least one)."""
    t0 = max(0, int(np.floor(y0)))
    t1 = min(num_tiles, int(np.ceil(y1)))
    return t0, max(t0 + 1, t1)


class TileLanesItem(pg.GraphicsObject):
    """Busy tiles of ``profile`` (steps indexed by ``index``), one row per global tile.

    After :meth:`draw`: ``mode`` ("rects", or the raster's source), ``raster`` or ``cells`` (what was drawn)
    and ``status`` (what one rectangle / pixel shows, in words)."""

    def __init__(self, profile, index: ex.StepIndex, num_tiles: int):
        super().__init__()
        self.profile = profile
        self.index = index
        self.num_tiles = int(num_tiles)
        self.mode = ""
        self.raster: ex.TileRaster | None = None
        self.cells: ex.ExactCells | None = None
        self.status = ""
        none_pen = pg.mkPen(None)
        self.image = pg.ImageItem()
        self.image.setLookupTable(theme.busy_lut())
        self.image.setLevels((0, 255))
        self.image.setParentItem(self)
        self.wait_bars = pg.BarGraphItem(x0=[], width=[], y0=[], height=[], brush=pg.mkBrush(theme.wait_color()),
                                         pen=none_pen)
        self.wait_bars.setParentItem(self)
        self.busy_bars = [pg.BarGraphItem(x0=[], width=[], y0=[], height=[], brush=pg.mkBrush(STEP_KIND_COLORS[k]),
                                          pen=none_pen) for k in STEP_KINDS]
        for b in self.busy_bars:
            b.setParentItem(self)

    def boundingRect(self) -> QRectF:  # noqa: N802 - Qt's name
        return self.childrenBoundingRect()

    def paint(self, painter, option, widget=None) -> None:
        """Nothing of its own: the raster and the bars are child items."""

    def restyle(self) -> None:
        """Take the current theme's busy LUT and waiting colour."""
        self.image.setLookupTable(theme.busy_lut())
        self.wait_bars.setOpts(brush=pg.mkBrush(theme.wait_color()))

    def draw(self, x0: float, x1: float, y0: float, y1: float, w: int, h: int, origin: float) -> bool:
        """Redraw the range [x0, x1) x [y0, y1) shown on ``w`` x ``h`` pixels; True when exact rectangles."""
        idx = self.index
        t0, t1 = tile_span(y0, y1, self.num_tiles)
        i0, i1 = idx.visible(x0, x1)
        rows_px = h / max(y1 - y0, 1e-9)
        if rows_px >= EXACT_MIN_ROW_PX and (i1 - i0) * (t1 - t0) <= ex.MAX_EXACT_RECTS // 2 and (i1 - i0) <= w:
            self._draw_cells(ex.exact_cells(self.profile, idx, i0, i1, t0, t1), origin)
            self.status = (f"Steps {i0:,}-{i1 - 1:,}, tiles {t0:,}-{t1 - 1:,}: every step of every tile drawn "
                           f"({len(self.cells.step):,} rectangles)")
            return True
        rows = max(1, min(int(h), t1 - t0))
        self._draw_raster(ex.tile_raster(self.profile, idx, x0, x1, w, t0, t1, rows), t0, t1, rows, origin)
        self.status = (f"Steps {i0:,}-{max(i0, i1 - 1):,}, tiles {t0:,}-{t1 - 1:,}: "
                       + raster_note(self.raster.source, self.raster.level) + "; zoom in (W, Ctrl+wheel) for single steps")
        return False

    def _draw_cells(self, cells: ex.ExactCells, origin: float) -> None:
        """One rectangle per step and tile: busy (kind colour), then waiting at the sync."""
        self.mode, self.cells, self.raster = "rects", cells, None
        self.image.hide()
        y = cells.tile.astype(float) + 0.1
        self.wait_bars.setOpts(x0=cells.start + cells.busy - origin, width=cells.wait, y0=y,
                               height=np.full(len(y), 0.8))
        self.wait_bars.setPos(origin, 0)
        self.wait_bars.show()
        for k, bar in enumerate(self.busy_bars):
            m = (cells.kind == k) & (cells.busy > 0)
            bar.setOpts(x0=cells.start[m] - origin, width=cells.busy[m], y0=y[m], height=np.full(int(m.sum()), 0.8))
            bar.setPos(origin, 0)
            bar.show()

    def _draw_raster(self, r: ex.TileRaster, t0: int, t1: int, rows: int, origin: float) -> None:
        """The raster's non-uniform tile rows resampled onto ``rows`` uniform pixel rows covering [t0, t1)."""
        self.mode, self.raster, self.cells = r.source, r, None
        self.wait_bars.hide()
        for bar in self.busy_bars:
            bar.hide()
        centres = t0 + (np.arange(rows) + 0.5) * (t1 - t0) / rows
        ri = np.clip(np.searchsorted(r.row_tiles, centres, side="right") - 1, 0, r.util.shape[0] - 1)
        same = len(ri) == r.util.shape[0] and bool((ri == np.arange(len(ri))).all())
        self.image.setImage(util_to_index(r.util if same else r.util[ri]), autoLevels=False, levels=(0, 255))
        self.image.setPos(origin, 0)
        self.image.setRect(QRectF(r.edges[0] - origin, float(t0), r.edges[-1] - r.edges[0], float(t1 - t0)))
        self.image.show()

    def tooltip_at(self, x: float, y: float) -> str | None:
        """What the raster pixel at (x cycles, y tile) shows, or None (exact rectangles, or outside)."""
        r = self.raster
        if r is None:
            return None
        c = int(np.searchsorted(r.edges, x, side="right") - 1)
        row = int(np.searchsorted(r.row_tiles, y, side="right") - 1)
        if not (0 <= c < r.util.shape[1] and 0 <= row < r.util.shape[0]):
            return None
        return (f"tiles {r.row_tiles[row]}-{r.row_tiles[row + 1] - 1}\nbusy {100 * r.util[row, c]:.0f}% of time\n"
                f"busy cycles per step: min {r.bmin[row, c]:.0f} mean {r.bmean[row, c]:.0f} max {r.bmax[row, c]:.0f}")
