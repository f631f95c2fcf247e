"""The Roofline view's per-op table: ``RooflineAnalysis.table()`` with a bold TOTAL row at the bottom."""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QAbstractTableModel, QModelIndex, Qt
from PySide6.QtGui import QFont

from popvision_lite.gui.table_model import ALIGN_NUMBER, ALIGNMENT, DISPLAY, USER, ShownCells, role_int
from popvision_lite.units import format_flops, format_ratio, format_seconds, format_usd

_ROOT = QModelIndex()
_FONT = role_int(Qt.ItemDataRole.FontRole)
_ANSWERED = frozenset((DISPLAY, _FONT, ALIGNMENT, USER))


class RooflineTableModel(QAbstractTableModel):
    """The per-op table (``RooflineAnalysis.table()``) with a bold TOTAL row at the bottom."""

    def __init__(self, df, gpus, parent=None):
        super().__init__(parent)
        self.df = df
        self.op_ids = df.index.to_numpy()
        cols = [("name", "op", None), ("bound", "bound by (own time)", None), ("roof_bound", "roof", None),
                ("intensity", "FLOP/B", lambda v: f"{v:.3g}" if np.isfinite(v) else ""),
                ("achieved_flops", "IPU achieved", lambda v: format_flops(v) if v > 0 else ""),
                ("ipu_time_s", "IPU time", format_seconds),
                ("share", "% run", lambda v: f"{100 * v:.1f}%" if np.isfinite(v) else "")]
        for g in gpus:
            short = g.device_id.upper()
            cols += [(f"{g.device_id}_est_time_s", f"{short} est.", format_seconds),
                     (f"{g.device_id}_est_speedup", f"IPU/{short} est.", format_ratio),
                     (f"{g.device_id}_time_s", f"{short} bound", format_seconds),
                     (f"{g.device_id}_speedup", f"IPU/{short} bound", format_ratio)]
        cols += [("ipu_cost_usd", "IPU cost/run", format_usd)]
        cols += [(f"{g.device_id}_cost_usd", f"{g.device_id.upper()} cost/run", format_usd) for g in gpus]
        cols += [("spills", "what-if: spills", lambda v: "DDR" if v else "")]
        self.cols = cols
        self.values = [df[c].to_numpy() for c, _, _ in cols]
        self._shown = ShownCells()
        self.text = [self._column_text(key, fmt, v) for (key, _, fmt), v in zip(cols, self.values, strict=True)]
        # the TOTAL row holds no IPU/GPU ratio of its own: the whole-run comparison is the verdict's
        for (key, _, _), col in zip(cols, self.text, strict=True):
            if key.endswith("_speedup") and len(col) and self.op_ids[-1] < 0:
                col[-1] = "see verdict"


    @staticmethod
    def _column_text(key, fmt, values) -> list[str]:
        """The displayed text of one column, formatted once (views ask for cells on every repaint)."""
        out = []
        for v in values:
            if fmt is None:
                out.append(str(v))
                continue
            try:
                out.append(fmt(float(v)) if key != "spills" else fmt(bool(v)))
            except (TypeError, ValueError):
                out.append("")
        return out

    def rowCount(self, parent=_ROOT):
        return 0 if parent.isValid() else len(self.op_ids)

    def columnCount(self, parent=_ROOT):
        return 0 if parent.isValid() else len(self.cols)

    def headerData(self, section, orientation, role=Qt.DisplayRole):
        if orientation == Qt.Horizontal and role == Qt.DisplayRole:
            return self.cols[section][1]
        if orientation == Qt.Horizontal and role == Qt.ToolTipRole:
            key = self.cols[section][0]
            if key.endswith("_est_speedup"):
                return "IPU time / estimated GPU time (>1: the GPU estimate is faster)"
            if key.endswith("_est_time_s"):
                return ("GPU estimate: max(FLOPs / (peak x measured GEMM fraction x occupancy), bytes / (HBM x "
                        "measured fraction)) + kernel launch overhead; constants cited in resources/devices")
            if key.endswith("_speedup"):
                return "IPU time / GPU roofline-bound time (>1: the GPU bound is faster). A bound, not a measurement."
            if key.endswith("_time_s") and key != "ipu_time_s":
                return "GPU roofline bound: max(FLOPs / peak, min_bytes / HBM bandwidth); not a measurement"
            if key.endswith("_cost_usd"):
                return ("IPU: wall time x all IPUs x price, shared over ops by time; GPU: estimated time x one GPU x "
                        "price per chip-hour (from resources/devices)")
            if key == "intensity":
                return "operational intensity against the memory level that bounds the op (see 'bound by' / tooltip)"
            if key == "achieved_flops":
                return "FLOPs / emulated time of the op"
            if key == "spills":
                return "ops whose compulsory bytes exceed the SRAM left after always-live data (at the what-if capacity)"
        return None

    def data(self, index, role=DISPLAY):
        role = role_int(role)
        if role not in _ANSWERED or not index.isValid():  # Qt asks for many roles: answer the rest at once
            return None
        return self._shown.get(index.row(), index, role, self._cell)  # a model per analysis: its cells do not change

    def _cell(self, index, role: int):
        r, c = index.row(), index.column()
        _, _, fmt = self.cols[c]
        if role == DISPLAY:
            return self.text[c][r]
        if role == _FONT and self.op_ids[r] < 0:
            f = QFont()
            f.setBold(True)
            return f
        if role == ALIGNMENT and fmt is not None:
            return ALIGN_NUMBER
        if role == USER:
            return int(self.op_ids[r])
        return None

    def row_of(self, op_id) -> int | None:
        hits = np.nonzero(self.op_ids == op_id)[0]
        return int(hits[0]) if len(hits) else None
