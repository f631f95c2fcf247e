"""``StepLabelsItem``: the op name on each step drawn wide enough to hold one (the Execution view's step lane).

Names are cut from the left (``…suffix``: the end of a scoped name says the most) to the characters the
step's width holds; at most ``MAX_LABELS`` at once, reused between redraws.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF
from PySide6.QtGui import QFont

from popvision_lite.analysis import execution as ex

LABEL_MIN_PX = 70    # op names on steps at least this wide
MAX_LABELS = 80
CHAR_PX = 6.5        # width of one character of the 8 pt label font


def fit_name(name: str, width_px: float) -> str:
    """``name`` as it fits ``width_px`` pixels: whole, or its end after an ellipsis."""
    chars = int(width_px / CHAR_PX)
    return name if len(name) <= chars else ("…" + name[-max(chars - 1, 1):])


class StepLabelsItem(pg.GraphicsObject):
    """Op names (``names``: op id -> name) on the steps of ``index`` at y = 0.5 of the lane."""

    def __init__(self, index: ex.StepIndex, names: dict):
        super().__init__()
        self.index = index
        self.names = names
        self.labels: list[pg.TextItem] = []

    def boundingRect(self) -> QRectF:  # noqa: N802 - Qt's name
        return QRectF()

    def paint(self, painter, option, widget=None) -> None:
        """Nothing of its own: the names are child text items."""

    def draw(self, steps: np.ndarray, x0: float, x1: float, width_px: int) -> None:
        """Name those of ``steps`` at least ``LABEL_MIN_PX`` wide at this zoom; hide the rest."""
        idx = self.index
        for t in self.labels:
            t.hide()
        px = width_px / max(x1 - x0, 1e-9)
        wide = steps[(idx.dur[steps] * px >= LABEL_MIN_PX) & (idx.op_id[steps] >= 0)][:MAX_LABELS]
        while len(self.labels) < len(wide):
            t = pg.TextItem(color="#ffffff", anchor=(0, 0.5))
            t.setFont(QFont("Sans", 8))
            t.setParentItem(self)
            self.labels.append(t)
        for t, i in zip(self.labels, wide, strict=False):
            t.setText(fit_name(self.names.get(int(idx.op_id[i]), ""), idx.dur[i] * px))
            t.setPos(max(float(idx.start[i]), x0), 0.5)
            t.show()

    def shown(self) -> list[str]:
        """The names drawn now, left to right."""
        vis = sorted((t for t in self.labels if t.isVisible()), key=lambda t: t.pos().x())
        return [t.toPlainText() for t in vis]
