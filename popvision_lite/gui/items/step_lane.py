"""``StepLaneItem``: the BSP steps of the visible range coloured by kind, at the level of detail the pixels allow.

Few steps visible (at most two per pixel column): one rectangle per step, one ``BarGraphItem`` per kind (one
drawRects call per colour), one sub-lane per IPU (a pipelined run's stages overlap in time) and steps on every
IPU across the lane.  More: a raster (``ImageItem``) of the share of each kind per pixel column, one band per
IPU.  Children are rebased to the view start (``setPos(origin)`` + small local x) to avoid float artefacts
on long runs.  The op names on wide steps are :class:`~.step_labels.StepLabelsItem` (they lie over the
selection outline, which lies over these bars).
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF

from popvision_lite.analysis import execution as ex
from popvision_lite.gui.theme import STEP_KIND_COLORS
from popvision_lite.profile.schema import STEP_KINDS


def kind_lut() -> np.ndarray:
    """RGBA of each step kind, then transparent (no step)."""
    return np.array([pg.mkColor(STEP_KIND_COLORS[k]).getRgb() for k in STEP_KINDS] + [(0, 0, 0, 0)],
                    dtype=np.uint8)


def kind_share_image(index: ex.StepIndex, x0: float, x1: float, cols: int, rows: int = 24) -> np.ndarray:
    """(rows, cols, 4) RGBA: each pixel column of [x0, x1) split bottom-up into the share of each step kind
    (:meth:`~popvision_lite.analysis.execution.StepIndex.kind_cycles`); transparent where no step runs.  The
    step lane of the Execution view and the per-IPU lanes of compare's Execution page draw it when too many
    steps are visible for one rectangle each."""
    edges = np.linspace(x0, x1, cols + 1)
    cyc = index.kind_cycles(edges)
    tot = cyc.sum(axis=0)
    frac = np.divide(cyc, tot, out=np.zeros_like(cyc), where=tot > 0)
    cum = np.cumsum(frac, axis=0)                               # (kinds, cols)
    rf = (np.arange(rows) + 0.5) / rows
    kind_at = (cum[None, :, :] < rf[:, None, None]).sum(axis=1)  # (rows, cols)
    kind_at = np.where(tot[None, :] > 0, np.minimum(kind_at, len(STEP_KINDS) - 1), len(STEP_KINDS))
    return kind_lut()[kind_at[::-1]]


def lane_indexes(steps, num_ipus: int) -> list[ex.StepIndex]:
    """One :class:`~popvision_lite.analysis.execution.StepIndex` per IPU lane: the IPU's own steps and the
    steps on every IPU (ipu = -1), for the per-lane kind shares when zoomed out."""
    ipu = steps["ipu"]
    return [ex.StepIndex(steps[(ipu == i) | (ipu < 0)], 1) for i in range(int(num_ipus))]


def exact_steps(index: ex.StepIndex, i0: int, i1: int, width_px: int) -> bool:
    """Whether steps [i0, i1) are drawn one rectangle each (at most two per pixel column)."""
    return i1 - i0 <= 2 * width_px


class StepLaneItem(pg.GraphicsObject):
    """Steps of ``index`` in y [0, 1) of its plot; ``steps`` (the profile's step table) gives the per-IPU
    bands of the raster when ``num_ipus`` > 1."""

    def __init__(self, index: ex.StepIndex, num_ipus: int, steps=None):
        super().__init__()
        self.index = index
        self.num_ipus = max(1, int(num_ipus))
        self._steps = steps
        self._lanes: list[ex.StepIndex] | None = None
        self.bars = [pg.BarGraphItem(x0=[], width=[], y0=[], height=[], brush=pg.mkBrush(STEP_KIND_COLORS[k]),
                                     pen=pg.mkPen(None)) for k in STEP_KINDS]
        for b in self.bars:
            b.setParentItem(self)
        self.image = pg.ImageItem()
        self.image.setParentItem(self)

    def boundingRect(self) -> QRectF:  # noqa: N802 - Qt's name
        return self.childrenBoundingRect()

    def paint(self, painter, option, widget=None) -> None:
        """Nothing of its own: the bars and the raster are child items."""

    def draw(self, x0: float, x1: float, width_px: int, origin: float) -> np.ndarray:
        """Redraw for x range [x0, x1) over ``width_px`` pixels; the indexes of the steps drawn one rectangle
        each (empty when the raster is shown)."""
        idx = self.index
        i0, i1 = idx.visible(x0, x1)
        if exact_steps(idx, i0, i1, width_px):
            self.image.hide()
            ii = np.arange(i0, i1)
            n = self.num_ipus
            for k, bar in enumerate(self.bars):
                m = ii[idx.kind[ii] == k]
                ip = idx.ipu[m]
                bar.setOpts(x0=idx.start[m] - origin, width=idx.dur[m],
                            y0=np.where(ip >= 0, np.clip(ip, 0, n - 1) / n, 0.0),
                            height=np.where(ip >= 0, 1.0 / n, 1.0))
                bar.setPos(origin, 0)
                bar.show()
            return ii
        for bar in self.bars:
            bar.hide()
        self.image.setImage(self.raster(x0, x1, width_px), autoLevels=False)
        self.image.setPos(origin, 0)
        self.image.setRect(QRectF(x0 - origin, 0.0, x1 - x0, 1.0))
        self.image.show()
        return np.zeros(0, np.int64)

    def raster(self, x0: float, x1: float, width_px: int) -> np.ndarray:
        """RGBA kind shares of [x0, x1): one band per IPU (IPU 0 at the bottom, as the bars) when there are
        several, since pipeline stages overlap in time."""
        if self.num_ipus > 1 and self._steps is not None:
            if self._lanes is None:
                self._lanes = lane_indexes(self._steps, self.num_ipus)
            rows = max(4, 48 // self.num_ipus)
            return np.concatenate([kind_share_image(lane, x0, x1, width_px, rows) for lane in self._lanes], axis=0)
        return kind_share_image(self.index, x0, x1, width_px)
