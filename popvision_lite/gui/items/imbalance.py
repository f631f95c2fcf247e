"""``ImbalanceItem``: the Execution view's tile imbalance of compute steps (busiest / mean busy cycles) on a
log10 scale, one horizontal segment per step or bucket of one
:class:`~popvision_lite.analysis.execution.StepBins` (a single ``PlotCurveItem`` with a connect array), and the
ticks of its axis.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg

from popvision_lite.analysis import execution as ex
from popvision_lite.gui.theme import STEP_KIND_COLORS


def imbalance_ticks(top_log10: float) -> list[list[tuple[float, str]]]:
    """Ticks of the log-scale imbalance axis up to 10**top_log10: labelled 1, 10, 100 ... (and 2, 5 when the
    range is under two decades), the others unlabelled ("1" = every tile equally busy)."""
    major, minor = [], []
    for e in range(0, int(np.ceil(top_log10)) + 1):
        for m in (1, 2, 5):
            v = m * 10**e
            if np.log10(v) > top_log10 + 1e-9:
                continue
            if m == 1 or top_log10 < 2:
                major.append((float(np.log10(v)), f"{v:g}"))
            else:
                minor.append((float(np.log10(v)), ""))
    return [major, minor]


class ImbalanceItem(pg.PlotCurveItem):
    """log10(max / mean busy) of each step or bucket as a horizontal segment.  On a linear axis a step where a
    few tiles work while the rest wait (max / mean in the hundreds) flattened every other step onto 1."""

    def __init__(self):
        super().__init__([], [], pen=pg.mkPen(STEP_KIND_COLORS["compute"], width=2))

    def set_bins(self, b: ex.StepBins, origin: float) -> float:
        """Draw ``b``; the y range top (log10) that shows the highest segment, at least log10(1.5)."""
        m = np.isfinite(b.imbalance) & (b.imbalance > 0)
        xs = np.column_stack([b.left[m], b.right[m]]).ravel() - origin
        ys = np.repeat(np.log10(np.maximum(b.imbalance[m], 1.0)), 2)
        conn = np.zeros(len(xs), dtype=bool)
        conn[0::2] = True
        self.setData(xs, ys, connect=conn)
        self.setPos(origin, 0)
        hi = float(ys.max()) if len(ys) else np.log10(2.0)
        return max(hi, np.log10(1.5)) * 1.08
