"""Operations: one row per model op (cycles, share of run, FLOPs, bytes, tiles, plan).

QAbstractTableModel over the ``analysis.operations.ops_table`` frame (values stay numpy
arrays; Qt asks only for visible cells), a QSortFilterProxyModel that sorts on the raw
numbers (UserRole) and filters with a precomputed name mask (substring or regex,
case-insensitive).  Selecting an op selects its tiles and steps everywhere; ops owning
steps of a step range selected elsewhere are highlighted.
"""

from __future__ import annotations

import re

import numpy as np
from PySide6.QtCore import QAbstractTableModel, QItemSelectionModel, QModelIndex, QSortFilterProxyModel, Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QCheckBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from popvision_lite.analysis.operations import COLUMNS, TEXT_COLUMNS, name_mask, ops_table
from popvision_lite.analysis.selection import ops_in_step_range
from popvision_lite.gui import theme
from popvision_lite.gui.views.selection_resolve import select_op

_ROOT = QModelIndex()  # the invalid index, as a default argument
SORT_ROLE = Qt.UserRole
OP_ROLE = Qt.UserRole + 1
_TIPS = {
    "pct_run": "op cycles / cycles of the whole run",
    "compute_cycles": "cycles of the op's compute steps", "exchange_cycles": "cycles of its exchange steps",
    "sync_cycles": "cycles of its sync steps", "stream_cycles": "cycles of its host / DDR stream copies",
    "flops": "floating-point operations", "bytes_sram": "bytes read + written from tile SRAM by vertices",
    "bytes_exchange": "bytes moved tile to tile on one IPU", "bytes_ipu_link": "bytes moved between IPUs",
    "bytes_ddr": "bytes moved to / from streaming memory", "tiles_used": "tiles the op runs on",
    "plan": "the planner's choice",
}


class OpsTableModel(QAbstractTableModel):
    def __init__(self, df, parent=None):
        super().__init__(parent)
        self.df = df
        self.keys = [c for c, _ in COLUMNS]
        self.headers = [h for _, h in COLUMNS]
        self.op_ids = df.index.to_numpy()
        self._row_of = {int(o): i for i, o in enumerate(self.op_ids)}
        self.cols = [df[k].to_numpy() for k in self.keys]
        self.highlight = np.zeros(len(df), dtype=bool)

    def rowCount(self, parent=_ROOT):
        return 0 if parent.isValid() else len(self.op_ids)

    def columnCount(self, parent=_ROOT):
        return 0 if parent.isValid() else len(self.keys)

    def row_of(self, op_id: int) -> int | None:
        return self._row_of.get(int(op_id))

    def headerData(self, section, orientation, role=Qt.DisplayRole):
        if orientation != Qt.Horizontal:
            return None
        if role == Qt.DisplayRole:
            return self.headers[section]
        if role == Qt.ToolTipRole:
            return _TIPS.get(self.keys[section], self.headers[section])
        return None

    def data(self, index, role=Qt.DisplayRole):
        if not index.isValid():
            return None
        r, c = index.row(), index.column()
        key = self.keys[c]
        v = self.cols[c][r]
        if role == Qt.DisplayRole:
            if key in TEXT_COLUMNS:
                return str(v)
            if key == "pct_run":
                return f"{float(v):.2f}"
            return f"{int(v):,}"
        if role == SORT_ROLE:
            return str(v).lower() if key in TEXT_COLUMNS else float(v)
        if role == OP_ROLE:
            return int(self.op_ids[r])
        if role == Qt.TextAlignmentRole and key not in TEXT_COLUMNS:
            return int(Qt.AlignRight | Qt.AlignVCenter)
        if role == Qt.BackgroundRole and self.highlight[r]:
            c = QColor(theme.colors()["select"])
            c.setAlpha(60)
            return c
        if role == Qt.ToolTipRole and key == "name":
            return str(v)
        return None

    def set_highlight(self, mask: np.ndarray) -> None:
        if not np.array_equal(mask, self.highlight):
            self.highlight = mask
            if len(mask):
                self.dataChanged.emit(self.index(0, 0), self.index(len(mask) - 1, len(self.keys) - 1),
                                      [Qt.BackgroundRole])


class OpsFilterProxy(QSortFilterProxyModel):
    """Numeric sort on SORT_ROLE; row filter from a boolean mask computed once per pattern."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setSortRole(SORT_ROLE)
        self._mask: np.ndarray | None = None

    def set_mask(self, mask: np.ndarray | None) -> None:
        if hasattr(self, "beginFilterChange"):  # Qt >= 6.9; invalidateFilter is deprecated there
            self.beginFilterChange()
            self._mask = mask
            self.endFilterChange(QSortFilterProxyModel.Direction.Rows)
        else:  # pragma: no cover - older Qt
            self._mask = mask
            self.invalidateFilter()

    def filterAcceptsRow(self, row, parent):
        return True if self._mask is None else bool(self._mask[row])


class OperationsView(QWidget):
    """Registered as ``operations``; constructed as ``OperationsView(document)``."""

    SOURCE = "operations"

    def __init__(self, document, parent=None):
        super().__init__(parent)
        self.document = document
        self._syncing = False
        self._worker = None
        self.df = document.cached("ops_table", ops_table, document.profile)
        self.model = OpsTableModel(self.df, self)
        self.proxy = OpsFilterProxy(self)
        self.proxy.setSourceModel(self.model)

        self.filter_edit = QLineEdit(self)
        self.filter_edit.setPlaceholderText("Filter ops by name (case-insensitive)")
        self.filter_edit.setClearButtonEnabled(True)
        self.regex_box = QCheckBox("regex", self)
        self.count_label = QLabel(self)
        top = QHBoxLayout()
        top.addWidget(QLabel("Filter:", self))
        top.addWidget(self.filter_edit, 1)
        top.addWidget(self.regex_box)
        top.addWidget(self.count_label)

        self.table = QTableView(self)
        self.table.setModel(self.proxy)
        self.table.setSortingEnabled(True)
        self.table.sortByColumn(self.model.keys.index("cycles"), Qt.DescendingOrder)
        self.table.setSelectionBehavior(QTableView.SelectRows)
        self.table.setSelectionMode(QTableView.SingleSelection)
        self.table.setAlternatingRowColors(True)
        self.table.verticalHeader().setVisible(False)
        self.table.verticalHeader().setDefaultSectionSize(22)
        hdr = self.table.horizontalHeader()
        hdr.setSectionResizeMode(QHeaderView.Interactive)
        hdr.resizeSection(0, 280)
        for c in range(1, len(self.model.keys)):
            self.table.resizeColumnToContents(c)
        hdr.setStretchLastSection(True)

        self.status = QLabel(self)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addLayout(top)
        lay.addWidget(self.table, 1)
        lay.addWidget(self.status)

        self.filter_edit.textChanged.connect(self._apply_filter)
        self.regex_box.toggled.connect(self._apply_filter)
        self.table.selectionModel().currentRowChanged.connect(self._on_current)
        document.selection.changed.connect(self._on_selection)
        self._apply_filter()
        if document.selection.state != type(document.selection.state)():
            self._on_selection(document.selection.state)  # views built later show the current selection

    # filter -----------------------------------------------------------------------
    def set_filter(self, text: str, regex: bool = False) -> None:
        self.regex_box.setChecked(regex)
        self.filter_edit.setText(text)
        self._apply_filter()

    def _apply_filter(self, *_):
        text = self.filter_edit.text()
        try:
            mask = name_mask(self.model.cols[0], text, self.regex_box.isChecked())
        except re.error as e:
            self.filter_edit.setStyleSheet(f"border: 1px solid {theme.colors()['bad']};")
            self.filter_edit.setToolTip(f"invalid regular expression: {e}")
            self.count_label.setText("invalid regex")
            return
        self.filter_edit.setStyleSheet("")
        self.filter_edit.setToolTip("")
        self.proxy.set_mask(None if not text else mask)
        self.count_label.setText(f"{int(mask.sum()):,} / {len(mask):,} ops")

    # user -> selection -------------------------------------------------------------
    def _on_current(self, current: QModelIndex, _previous=None):
        if self._syncing or not current.isValid():
            return
        op = int(self.proxy.data(current, OP_ROLE))
        self._worker = select_op(self.document, op, self.SOURCE)

    def visible_ops(self) -> list[int]:
        """Op ids in display order (after filter and sort)."""
        return [int(self.proxy.data(self.proxy.index(r, 0), OP_ROLE)) for r in range(self.proxy.rowCount())]

    def select_op(self, op_id: int) -> None:
        """Select an op as if clicked (the row must pass the filter)."""
        row = self.model.row_of(op_id)
        idx = self.proxy.mapFromSource(self.model.index(row, 0))
        self.table.selectionModel().setCurrentIndex(
            idx, QItemSelectionModel.ClearAndSelect | QItemSelectionModel.Rows)

    # selection -> table -----------------------------------------------------------
    def _status(self, state) -> str:
        if state.op_id is not None and self.model.row_of(state.op_id) is not None:
            rng = f"steps {state.step_range[0]}..{state.step_range[1] - 1}" if state.step_range else "no steps"
            tiles = f"{len(state.tiles):,} tiles" if state.tiles else "tiles: resolving..."
            return f"selected {self.model.cols[0][self.model.row_of(state.op_id)]}: {rng}, {tiles}"
        if state.step_range is not None:
            n = int(self.model.highlight.sum())
            return f"steps {state.step_range[0]}..{state.step_range[1] - 1}: {n:,} ops own steps there (highlighted)"
        return ""

    def _on_selection(self, state):
        # ops owning steps of a step range chosen without an op (timeline, program node) are highlighted
        if state.step_range is not None and state.op_id is None:
            ops = ops_in_step_range(self.document.profile, *state.step_range)
            self.model.set_highlight(np.isin(self.model.op_ids, ops))
        else:
            self.model.set_highlight(np.zeros(len(self.model.op_ids), dtype=bool))
        self.status.setText(self._status(state))
        if state.source == self.SOURCE:
            return
        self._syncing = True
        try:
            sm = self.table.selectionModel()
            row = self.model.row_of(state.op_id) if state.op_id is not None else None
            if row is None:
                sm.clearSelection()
                return
            idx = self.proxy.mapFromSource(self.model.index(row, 0))
            if idx.isValid():
                sm.setCurrentIndex(idx, QItemSelectionModel.ClearAndSelect | QItemSelectionModel.Rows)
                self.table.scrollTo(idx)
            else:
                sm.clearSelection()
        finally:
            self._syncing = False
