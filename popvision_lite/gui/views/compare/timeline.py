"""Compare Execution: the BSP steps of A and B on one time axis, one lane per IPU of each run, one cursor.

Each run gets the lanes the Execution view's step lane draws: one per IPU, steps coloured by kind, a step that
involves every IPU (ipu = -1, e.g. a sync) across all of them, so pipeline stages that overlap in time stay
apart.  Visible steps come from :class:`popvision_lite.analysis.execution.StepIndex`: one rectangle each when
few are visible, else the share of each kind per pixel column (``kind_share_image``, the Execution view's
raster), per IPU.  x is µs = cycles / clock, so runs at different clocks line up.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, QTimer
from PySide6.QtWidgets import QVBoxLayout, QWidget

from popvision_lite.analysis import compare as C
from popvision_lite.analysis import execution as ex
from popvision_lite.gui import theme
from popvision_lite.gui.items.step_lane import kind_share_image, lane_indexes
from popvision_lite.gui.text import plain_label
from popvision_lite.gui.theme import STEP_KIND_COLORS, STEP_KIND_LABELS
from popvision_lite.profile import schema

LANE_HEIGHT = 0.8   # of one IPU lane; the gap keeps neighbouring IPUs apart
AXIS_WIDTH = 64     # px of both left axes, so the lanes of A and B start at the same x
DEBOUNCE_MS = 25


class RunLanes:
    """The per-IPU step lanes of one run in ``plot`` (x in µs, IPU 0 at the top), redrawn for the visible range."""

    def __init__(self, profile, plot: pg.PlotItem):
        self.profile = profile
        self.plot = plot
        self.us = 1e6 / float(profile.target.clock_hz)           # µs per cycle
        self.nipu = max(1, int(profile.target.num_ipus))
        self.index = ex.StepIndex.from_profile(profile)
        ipu = self.index.ipu
        # per IPU: its own steps and the all-IPU ones (ipu = -1), for the zoomed-out kind shares
        self._lane_index: list[ex.StepIndex] | None = None
        self.bars = []
        for k in schema.STEP_KINDS:
            b = pg.BarGraphItem(x0=[], width=[], y0=[], height=[], brush=STEP_KIND_COLORS[k], pen=None)
            plot.addItem(b)
            self.bars.append(b)
        self.images = []
        for _ in range(self.nipu):
            img = pg.ImageItem(axisOrder="row-major")
            img.hide()
            plot.addItem(img)
            self.images.append(img)
        self.mode = ""
        self._ipu_of_step = np.where(ipu >= 0, np.clip(ipu, 0, self.nipu - 1), -1)
        left = plot.getAxis("left")
        left.setTicks([[(i + 0.5, f"IPU {i}") for i in range(self.nipu)]])
        left.setWidth(AXIS_WIDTH)
        plot.setMouseEnabled(x=True, y=False)
        plot.invertY(True)
        plot.setYRange(0, self.nipu, padding=0.02)
        plot.setLimits(yMin=-0.1, yMax=self.nipu + 0.1)
        plot.hideButtons()
        plot.setMenuEnabled(False)

    def lane_index(self) -> list[ex.StepIndex]:
        if self._lane_index is None:
            self._lane_index = lane_indexes(self.profile.stored_table("steps"), self.nipu)
        return self._lane_index

    @property
    def t_end_us(self) -> float:
        return float(self.index.t1) * self.us if self.index.n else 0.0

    def draw(self, x0_us: float, x1_us: float, cols: int) -> None:
        """Rectangles for the steps visible in [x0_us, x1_us) when at most two per pixel column, else the
        kind shares per pixel column of every IPU lane."""
        c0, c1 = x0_us / self.us, x1_us / self.us
        i0, i1 = self.index.visible(c0, c1)
        if i1 - i0 <= 2 * cols:
            self.mode = "steps"
            for img in self.images:
                img.hide()
            ii = np.arange(i0, i1)
            ip = self._ipu_of_step[ii]
            for k, bar in enumerate(self.bars):
                m = self.index.kind[ii] == k
                y0 = np.where(ip[m] >= 0, ip[m] + (1 - LANE_HEIGHT) / 2, (1 - LANE_HEIGHT) / 2)
                h = np.where(ip[m] >= 0, LANE_HEIGHT, self.nipu - (1 - LANE_HEIGHT))
                bar.setOpts(x0=self.index.start[ii[m]] * self.us, width=self.index.dur[ii[m]] * self.us,
                            y0=y0, height=h)
                bar.show()
            return
        self.mode = "raster"
        for bar in self.bars:
            bar.hide()
        for i, (img, lane) in enumerate(zip(self.images, self.lane_index(), strict=True)):
            rgba = kind_share_image(lane, c0, c1, cols)
            img.setImage(rgba[::-1], autoLevels=False)  # image rows go down with the inverted y axis
            img.setRect(QRectF(x0_us, i + (1 - LANE_HEIGHT) / 2, x1_us - x0_us, LANE_HEIGHT))
            img.show()

    def step_at(self, t_us: float, ipu: int | None = None) -> int:
        """Index (in step order) of the step of this run running at ``t_us`` on ``ipu`` (any IPU if None), or -1."""
        return self.index.step_at(t_us / self.us, ipu)


class CompareTimelinePage(QWidget):
    """BSP steps of A and B on one time axis, one lane per IPU of each run, x axes linked, one cursor."""

    def __init__(self, cmp: C.Comparison, parent=None):
        super().__init__(parent)
        self.cmp = cmp
        self.glw = pg.GraphicsLayoutWidget()
        self.glw.setAntialiasing(False)
        self.plots: list[pg.PlotItem] = []
        self.lanes: list[RunLanes] = []
        self.cursors: list[pg.InfiniteLine] = []
        t_max = 0.0
        for row, (p, who, label) in enumerate(((cmp.a, "A", cmp.label_a), (cmp.b, "B", cmp.label_b))):
            pi = self.glw.addPlot(row=row, col=0)
            n = int(p.target.num_ipus)
            pi.setTitle(f"{who}: {label} — {p.target.name} at {p.target.clock_hz / 1e9:.3f} GHz, "
                        f"{n} IPU{'s' if n != 1 else ''}, {len(p.stored_table('steps')):,} steps", size="10pt")
            lanes = RunLanes(p, pi)
            pi.getAxis("bottom").enableAutoSIPrefix(False)
            pi.setLabel("bottom", "time since run start (µs)")
            cur = pg.InfiniteLine(angle=90, movable=False, pen=pg.mkPen(theme.colors()["select"], width=1))
            pi.addItem(cur, ignoreBounds=True)
            self.plots.append(pi)
            self.lanes.append(lanes)
            self.cursors.append(cur)
            t_max = max(t_max, lanes.t_end_us)
        # lanes of the run with more IPUs get more height, so one IPU lane is as tall in A as in B
        for row, lanes in enumerate(self.lanes):
            self.glw.ci.layout.setRowStretchFactor(row, lanes.nipu + 1)
        self.legend = pg.LegendItem(colCount=len(schema.STEP_KINDS), sampleType=None)
        for k in schema.STEP_KINDS:
            self.legend.addItem(pg.BarGraphItem(x0=[0], width=[1], height=[1], brush=STEP_KIND_COLORS[k], pen=None),
                                STEP_KIND_LABELS[k])
        self.glw.addItem(self.legend, row=2, col=0)
        self.plots[1].setXLink(self.plots[0])
        self.t_max = t_max or 1.0
        for pi in self.plots:
            pi.setLimits(xMin=-0.02 * self.t_max, xMax=1.02 * self.t_max)
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(DEBOUNCE_MS)
        self._timer.timeout.connect(self.redraw)
        self.plots[0].getViewBox().sigXRangeChanged.connect(lambda *_: self._timer.start())
        self.plots[0].getViewBox().sigResized.connect(lambda *_: self._timer.start())
        self.plots[0].setXRange(0, self.t_max, padding=0.01)
        self.info = plain_label("Move the mouse over a lane: the step running at that time on that IPU in A and "
                                "in B (drag / wheel to zoom; the two time axes are linked)")
        self.info.setWordWrap(True)
        self.glw.scene().sigMouseMoved.connect(self._moved)
        lay = QVBoxLayout(self)
        lay.addWidget(self.info)
        lay.addWidget(self.glw, 1)
        self.redraw()

    def x_range(self) -> tuple[float, float]:
        (x0, x1), _ = self.plots[0].getViewBox().viewRange()
        return float(x0), float(x1)

    def redraw(self) -> None:
        self._timer.stop()
        x0, x1 = self.x_range()
        cols = max(16, int(self.plots[0].getViewBox().width()) or 800)
        for lanes in self.lanes:
            lanes.draw(x0, x1, cols)

    def _moved(self, pos) -> None:
        for which, pi in enumerate(self.plots):
            vb = pi.getViewBox()
            if vb.sceneBoundingRect().contains(pos):
                q = vb.mapSceneToView(pos)
                ipu = int(np.floor(q.y()))
                self.set_cursor(q.x(), ipu if 0 <= ipu < self.lanes[which].nipu else None)
                return

    def step_at(self, which: int, t_us: float, ipu: int | None = None) -> int:
        """Index of the step of run ``which`` (0 = A, 1 = B) running at ``t_us`` (on ``ipu`` if given), or -1."""
        return self.lanes[which].step_at(t_us, ipu)

    def set_cursor(self, t_us: float, ipu: int | None = None) -> None:
        """The cursor at ``t_us`` in both runs; the read-out names the step on IPU ``ipu`` (where the run has
        it) or on any IPU."""
        for c in self.cursors:
            c.setValue(t_us)
        parts = []
        for which, (who, p) in enumerate((("A", self.cmp.a), ("B", self.cmp.b))):
            lanes = self.lanes[which]
            on = ipu if ipu is not None and ipu < lanes.nipu else None
            i = self.step_at(which, t_us, on)
            where = f" IPU {on}" if on is not None and lanes.nipu > 1 else ""
            if i < 0:
                parts.append(f"{who}{where}: —")
                continue
            idx = lanes.index
            ops = p.stored_table("ops")
            names = ops.set_index("op_id")["name"] if len(ops) else {}
            op_id = int(idx.op_id[i])
            op = names.get(op_id, "") if op_id >= 0 else ""
            ran_on = f" on IPU {int(idx.ipu[i])}" if idx.ipu[i] >= 0 and lanes.nipu > 1 else ""
            parts.append(f"{who}{where}: step {int(idx.step[i])} {schema.STEP_KINDS[int(idx.kind[i])]}{ran_on} {op} "
                         f"({int(idx.dur[i]):,} cycles)")
        self.info.setText(f"t = {t_us:.3f} µs — " + ";  ".join(parts))

    def plot_items(self) -> dict:
        return {"timeline": self.glw.ci}

    def tables(self) -> dict:
        return {"steps": C.step_table(self.cmp.a, self.cmp.b)}
