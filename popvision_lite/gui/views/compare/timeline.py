"""Compare Execution: the BSP steps of A and B on one time axis, one lane per step kind, one cursor."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import (
    QVBoxLayout,
    QWidget,
)

from popvision_lite.analysis import compare as C
from popvision_lite.gui import theme
from popvision_lite.gui.text import plain_label
from popvision_lite.gui.theme import STEP_KIND_COLORS
from popvision_lite.profile import schema


class CompareTimelinePage(QWidget):
    """BSP steps of A and B on one time axis (µs = cycles / clock, so runs at different clocks line up),
    one lane per step kind, x axes linked, and one cursor drawn in both."""

    def __init__(self, cmp: C.Comparison, parent=None):
        super().__init__(parent)
        self.cmp = cmp
        self.glw = pg.GraphicsLayoutWidget()
        self.plots: list[pg.PlotItem] = []
        self.cursors: list[pg.InfiniteLine] = []
        self.starts: list[np.ndarray] = []
        self.steps_of: list = []
        kinds = list(schema.STEP_KINDS)
        t_max = 0.0
        for row, (p, who, label) in enumerate(((cmp.a, "A", cmp.label_a), (cmp.b, "B", cmp.label_b))):
            s = p.steps
            us = 1e6 / float(p.target.clock_hz)
            start = s["start_cycle"].to_numpy(np.float64) * us
            dur = (s["end_cycle"] - s["start_cycle"]).to_numpy(np.float64) * us
            kind = s["kind"].to_numpy()
            pi = self.glw.addPlot(row=row, col=0)
            pi.setTitle(f"{who}: {label} — {p.target.name} at {p.target.clock_hz / 1e9:.3f} GHz, "
                        f"{len(s):,} steps", size="10pt")
            for k, name in enumerate(kinds):
                m = kind == k
                if m.any():
                    pi.addItem(pg.BarGraphItem(x0=start[m], width=dur[m], y=np.full(int(m.sum()), k), height=0.8,
                                               brush=STEP_KIND_COLORS.get(name, "#7f7f7f"), pen=None))
            pi.getAxis("left").setTicks([[(k, n.replace("_", " ")) for k, n in enumerate(kinds)]])
            pi.getAxis("bottom").enableAutoSIPrefix(False)
            pi.setLabel("bottom", "time since run start (µs)")
            pi.setMouseEnabled(x=True, y=False)
            pi.invertY(True)
            pi.setYRange(-0.6, len(kinds) - 0.4, padding=0)
            cur = pg.InfiniteLine(angle=90, movable=False, pen=pg.mkPen(theme.colors()["select"], width=1))
            pi.addItem(cur)
            self.plots.append(pi)
            self.cursors.append(cur)
            self.starts.append(start)
            self.steps_of.append((s, dur))
            if len(start):
                t_max = max(t_max, float(start[-1] + dur[-1]))
        self.plots[1].setXLink(self.plots[0])
        self.plots[0].setXRange(0, t_max or 1.0, padding=0.01)
        self.info = plain_label("Move the mouse over a lane: the step running at that time in A and in B "
                           "(drag / wheel to zoom; the two time axes are linked)")
        self.info.setWordWrap(True)
        self.glw.scene().sigMouseMoved.connect(self._moved)
        lay = QVBoxLayout(self)
        lay.addWidget(self.info)
        lay.addWidget(self.glw, 1)

    def _moved(self, pos) -> None:
        for pi in self.plots:
            vb = pi.getViewBox()
            if vb.sceneBoundingRect().contains(pos):
                self.set_cursor(vb.mapSceneToView(pos).x())
                return

    def step_at(self, which: int, t_us: float) -> int:
        """Index of the step of run ``which`` (0 = A, 1 = B) running at ``t_us``, or -1."""
        start = self.starts[which]
        i = int(np.searchsorted(start, t_us, side="right")) - 1
        if i < 0:
            return -1
        _s, dur = self.steps_of[which]
        return i if t_us <= start[i] + dur[i] else -1

    def set_cursor(self, t_us: float) -> None:
        for c in self.cursors:
            c.setValue(t_us)
        parts = []
        for which, (who, p) in enumerate((("A", self.cmp.a), ("B", self.cmp.b))):
            i = self.step_at(which, t_us)
            if i < 0:
                parts.append(f"{who}: —")
                continue
            s, _dur = self.steps_of[which]
            r = s.iloc[i]
            names = p.ops.set_index("op_id")["name"] if len(p.ops) else {}
            op = names.get(int(r["op_id"]), "") if int(r["op_id"]) >= 0 else ""
            parts.append(f"{who}: step {int(r['step'])} {schema.STEP_KINDS[int(r['kind'])]} {op} "
                         f"({int(r['end_cycle'] - r['start_cycle']):,} cycles)")
        self.info.setText(f"t = {t_us:.3f} µs — " + ";  ".join(parts))

    def plot_items(self) -> dict:
        return {"timeline": self.glw.ci}

    def tables(self) -> dict:
        return {"steps": C.step_table(self.cmp.a, self.cmp.b)}
