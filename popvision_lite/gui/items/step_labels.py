"""``StepLabelsItem``: the op name on each step drawn wide enough to hold one (the Execution view's step lane).

Names are cut from the left (``…suffix``: the end of a scoped name says the most) to what the visible part
of the step holds in the label font; at most ``MAX_LABELS`` at once, reused between redraws.  Each name sits in the middle of
its step's sub-lane (one per IPU, IPU 0 at the bottom, as :class:`~.step_lane.StepLaneItem` draws them), so
the names of pipeline stages that overlap in time do not lie over each other; a step on every IPU is named
in the middle of the lane.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QFont, QFontMetrics

from popvision_lite.analysis import execution as ex

LABEL_MIN_PX = 70    # op names on steps at least this wide
MAX_LABELS = 80
TEXT_MARGIN_PX = 4   # pg.TextItem's document margin either side of the text
LABEL_GAP_PX = 4     # between two names in one sub-lane


def label_font() -> QFont:
    return QFont("Sans", 8)


def fit_name(name: str, width_px: float) -> str:
    """``name`` as it fits ``width_px`` pixels of the label font (less the label's margins): whole, or its end
    after an ellipsis (Qt's left elision, measured in the font)."""
    return QFontMetrics(label_font()).elidedText(name, Qt.ElideLeft, max(int(width_px) - 2 * TEXT_MARGIN_PX, 0))


class StepLabelsItem(pg.GraphicsObject):
    """Op names (``names``: op id -> name) on the steps of ``index``, in the sub-lane of their IPU of
    ``num_ipus``."""

    def __init__(self, index: ex.StepIndex, names: dict, num_ipus: int = 1):
        super().__init__()
        self.index = index
        self.names = names
        self.num_ipus = max(1, int(num_ipus))
        self.labels: list[pg.TextItem] = []

    def lane_y(self, steps: np.ndarray) -> np.ndarray:
        """The middle of each step's sub-lane (y in [0, 1] of the lane)."""
        ip = self.index.ipu[steps]
        n = self.num_ipus
        return np.where(ip >= 0, (np.clip(ip, 0, n - 1) + 0.5) / n, 0.5)

    def boundingRect(self) -> QRectF:  # noqa: N802 - Qt's name
        return QRectF()

    def paint(self, painter, option, widget=None) -> None:
        """Nothing of its own: the names are child text items."""

    def draw(self, steps: np.ndarray, x0: float, x1: float, width_px: int) -> None:
        """Name those of ``steps`` at least ``LABEL_MIN_PX`` wide at this zoom and clear of the names before
        them in their sub-lane (steps of one IPU may overlap in time); hide the rest."""
        idx = self.index
        for t in self.labels:
            t.hide()
        px = width_px / max(x1 - x0, 1e-9)
        wide = steps[(idx.dur[steps] * px >= LABEL_MIN_PX) & (idx.op_id[steps] >= 0)]
        # fitted to the step's visible part: a step that began left of the view does not lend its name the
        # width of the steps after it
        seen = (np.minimum(idx.end[wide], x1) - np.maximum(idx.start[wide], x0)) * px
        names = [fit_name(self.names.get(int(idx.op_id[i]), ""), w) for i, w in zip(wide, seen, strict=True)]
        keep = self.clear_of_each_other(wide, names, x0, px)[:MAX_LABELS]
        while len(self.labels) < len(keep):
            t = pg.TextItem(color="#ffffff", anchor=(0, 0.5))
            t.setFont(label_font())
            t.setParentItem(self)
            self.labels.append(t)
        ys = self.lane_y(wide)
        for t, k in zip(self.labels, keep, strict=False):
            t.setText(names[k])
            t.setPos(max(float(idx.start[wide[k]]), x0), float(ys[k]))
            t.show()

    def clear_of_each_other(self, steps: np.ndarray, names: list[str], x0: float, px: float) -> list[int]:
        """Positions in ``steps`` (in time order) whose name, starting at the step's visible start, begins past
        the end of the last name kept in the same sub-lane (``px`` pixels per cycle)."""
        fm = QFontMetrics(label_font())
        lane_end: dict[float, float] = {}
        keep = []
        for k, (y, name) in enumerate(zip(self.lane_y(steps), names, strict=True)):
            left = (max(float(self.index.start[steps[k]]), x0) - x0) * px
            if left >= lane_end.get(float(y), -np.inf):
                keep.append(k)
                lane_end[float(y)] = left + fm.horizontalAdvance(name) + LABEL_GAP_PX
        return keep

    def shown(self) -> list[str]:
        """The names drawn now, left to right."""
        vis = sorted((t for t in self.labels if t.isVisible()), key=lambda t: t.pos().x())
        return [t.toPlainText() for t in vis]
