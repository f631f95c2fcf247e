"""``LaneViewBox``: a ViewBox with trace-viewer mouse conventions (execution view lanes)."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal


class LaneViewBox(pg.ViewBox):
    """ViewBox with trace-viewer mouse conventions, reporting clicks and range drags."""

    sigClicked = Signal(float, float, bool)          # x, y, double
    sigRangeDrag = Signal(float, float, bool)        # x0, x1, finished

    def __init__(self, zoom_y: bool = True, **kw):
        super().__init__(**kw)
        self.zoom_y = zoom_y
        self.setMouseEnabled(x=True, y=zoom_y)

    def wheelEvent(self, ev, axis=None):
        mods = ev.modifiers()
        delta = ev.delta() if hasattr(ev, "delta") else ev.angleDelta().y()
        if not delta:
            ev.ignore()
            return
        s = 1.0015 ** (-delta)
        pos = self.mapToView(ev.pos())
        if mods & Qt.ControlModifier:
            self.scaleBy(x=s, y=1.0, center=pos)
        elif mods & Qt.ShiftModifier and self.zoom_y:
            self.scaleBy(x=1.0, y=s, center=pos)
        elif self.zoom_y:
            (y0, y1) = self.viewRange()[1]
            self.translateBy(y=-np.sign(delta) * 0.1 * (y1 - y0))
        else:
            self.scaleBy(x=s, y=1.0, center=pos)
        ev.accept()

    def mouseDragEvent(self, ev, axis=None):
        if ev.button() == Qt.LeftButton and ev.modifiers() & Qt.ShiftModifier:
            ev.accept()
            a = self.mapToView(ev.buttonDownPos()).x()
            b = self.mapToView(ev.pos()).x()
            self.sigRangeDrag.emit(min(a, b), max(a, b), ev.isFinish())
            return
        if ev.button() == Qt.LeftButton and not self.zoom_y:
            # step lane / chart: pan only in x
            ev.accept()
            d = self.mapToView(ev.lastPos()) - self.mapToView(ev.pos())
            self.translateBy(x=d.x())
            self.sigRangeChangedManually.emit([True, False])
            return
        super().mouseDragEvent(ev, axis)

    def mouseClickEvent(self, ev):
        if ev.button() == Qt.LeftButton:
            p = self.mapToView(ev.pos())
            self.sigClicked.emit(p.x(), p.y(), bool(ev.double()))
            ev.accept()
            return
        super().mouseClickEvent(ev)
