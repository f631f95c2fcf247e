"""Operations: one row per model op (cycles, share of the IPU time, FLOPs, bytes, tiles, plan).

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
from PySide6.QtGui import QColor, QKeySequence, QShortcut
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
from popvision_lite.gui.state.resolve import select_op
from popvision_lite.gui.text import plain_label, plain_tip

_ROOT = QModelIndex()  # the invalid index, as a default argument
SORT_ROLE = Qt.UserRole
OP_ROLE = Qt.UserRole + 1
_TIPS = {
    "pct_run": "the op's cycles per training step / the IPU time of the step summed over the replica's IPUs "
               "(the same share in Summary, Insights, Program tree and Roofline)",
    "compute_cycles": "cycles of the op's compute steps", "exchange_cycles": "cycles of its exchange steps",
    "sync_cycles": "cycles of its sync steps", "stream_cycles": "cycles of its host / DDR stream copies",
    "flops": "floating-point operations", "bytes_sram": "bytes read + written from tile SRAM by vertices",
    "bytes_exchange": "bytes moved tile to tile on one IPU", "bytes_ipu_link": "bytes moved between IPUs",
    "bytes_ddr": "bytes moved to / from streaming memory", "tiles_used": "tiles the op runs on",
    "plan": "the planner's choice",
}


def _role(r) -> int:
    return int(getattr(r, "value", r))


# roles as plain ints: comparing Python ints is much cheaper than comparing Qt enums per cell
_DISPLAY, _SORT, _OP, _ALIGN, _BG, _TIP = (_role(Qt.DisplayRole), _role(SORT_ROLE), _role(OP_ROLE),
                                          _role(Qt.TextAlignmentRole), _role(Qt.BackgroundRole),
                                          _role(Qt.ToolTipRole))
_RIGHT = int(_role(Qt.AlignRight) | _role(Qt.AlignVCenter))


class OpsTableModel(QAbstractTableModel):
    """Cells are preformatted once (a few strings per op), so ``data()`` is a list lookup."""

    def __init__(self, df, parent=None):
        super().__init__(parent)
        self.df = df
        self.keys = [c for c, _ in COLUMNS]
        self.headers = [h for _, h in COLUMNS]
        self.op_ids = df.index.to_numpy()
        self._ops_list = [int(o) for o in self.op_ids]
        self._row_of = {o: i for i, o in enumerate(self._ops_list)}
        self.cols = [df[k].to_numpy() for k in self.keys]
        self._text = [k in TEXT_COLUMNS for k in self.keys]
        self._display = []
        self._sort = []
        for k, col in zip(self.keys, self.cols, strict=True):
            if k in TEXT_COLUMNS:
                self._display.append([str(v) for v in col])
                self._sort.append([str(v).lower() for v in col])
            elif k == "pct_run":
                self._display.append([f"{v:.2f}" for v in col.tolist()])
                self._sort.append([float(v) for v in col.tolist()])
            else:
                self._display.append([f"{int(v):,}" for v in col.tolist()])
                self._sort.append([float(v) for v in col.tolist()])
        self.highlight = np.zeros(len(df), dtype=bool)  # in op_ids (table) order
        self._hl: list[bool] = self.highlight.tolist()
        self._n = len(self._ops_list)
        self.perm: list[int] = list(range(self._n))  # display row -> table row (the sort)
        self._row_of = {o: i for i, o in enumerate(self._ops_list)}

    def sort(self, column, order=Qt.AscendingOrder):
        """Sort with numpy on the raw values (numbers as numbers), then one layout change."""
        if column < 0 or column >= len(self.keys):
            return
        keys = np.asarray(self._sort[column], dtype=object if self._text[column] else np.float64)
        perm = np.argsort(keys, kind="stable")
        if order == Qt.DescendingOrder:
            # stable descending: reverse the ascending order of the reversed input
            perm = (self._n - 1 - np.argsort(keys[::-1], kind="stable"))[::-1]
        self.layoutAboutToBeChanged.emit()
        old = self.persistentIndexList()
        old_rows = [(self.perm[i.row()], i.column()) for i in old]
        self.perm = [int(i) for i in perm]
        pos = {t: r for r, t in enumerate(self.perm)}
        self._row_of = {self._ops_list[t]: r for r, t in enumerate(self.perm)}
        self.changePersistentIndexList(old, [self.index(pos[t], c) for t, c in old_rows])
        self.layoutChanged.emit()

    def rowCount(self, parent=_ROOT):
        return 0 if parent.isValid() else self._n

    def columnCount(self, parent=_ROOT):
        return 0 if parent.isValid() else len(self.keys)

    def row_of(self, op_id: int) -> int | None:
        """Display row of an op (after sorting)."""
        return self._row_of.get(int(op_id))

    def name_of(self, op_id: int) -> str:
        return self._display[0][self._ops_list.index(int(op_id))]

    def widest(self, col: int) -> str:
        """The longest display string of a column (for sizing without measuring every row)."""
        return max(self._display[col], key=len, default="")

    def headerData(self, section, orientation, role=Qt.DisplayRole):
        if orientation != Qt.Horizontal:
            return None
        if role == Qt.DisplayRole:
            return self.headers[section]
        if role == Qt.ToolTipRole:
            return _TIPS.get(self.keys[section], self.headers[section])
        return None

    def data(self, index, role=_DISPLAY):
        role = _role(role)
        if role == _DISPLAY:
            return self._display[index.column()][self.perm[index.row()]]
        if role == _SORT:
            return self._sort[index.column()][self.perm[index.row()]]
        if role == _OP:
            return self._ops_list[self.perm[index.row()]]
        if role == _ALIGN:
            return None if self._text[index.column()] else _RIGHT
        if role == _BG:
            if self._hl[self.perm[index.row()]]:
                c = QColor(theme.colors()["select"])
                c.setAlpha(60)
                return c
            return None
        if role == _TIP and index.column() == 0:
            return plain_tip(self._display[0][self.perm[index.row()]])
        return None

    def set_highlight(self, mask: np.ndarray) -> None:
        if not np.array_equal(mask, self.highlight):
            self.highlight = mask
            self._hl = mask.tolist()
            if len(mask):
                self.dataChanged.emit(self.index(0, 0), self.index(len(mask) - 1, len(self.keys) - 1),
                                      [Qt.BackgroundRole])


class OpsFilterProxy(QSortFilterProxyModel):
    """Filters rows with a boolean mask (table order) computed once per pattern; sorting is done by
    the source model with numpy (a proxy sort would call ``data()`` n log n times)."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setSortRole(SORT_ROLE)
        self.setDynamicSortFilter(False)
        self._mask: np.ndarray | None = None

    def sort(self, column, order=Qt.AscendingOrder):
        src = self.sourceModel()
        if src is not None:
            src.sort(column, order)

    def set_mask(self, mask: np.ndarray | None) -> None:
        if hasattr(self, "beginFilterChange"):  # Qt >= 6.9; invalidateFilter is deprecated there
            self.beginFilterChange()
            self._mask = mask
            self.endFilterChange(QSortFilterProxyModel.Direction.Rows)
        else:  # pragma: no cover - older Qt
            self._mask = mask
            self.invalidateFilter()

    def filterAcceptsRow(self, row, parent):
        return True if self._mask is None else bool(self._mask[self.sourceModel().perm[row]])


NAME_WIDTH = 280  # px at most for the op-name column (names elide in the middle)


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
        self.count_label = plain_label(parent=self)
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
        # widths from the widest string of each column (resizeColumnToContents would measure every row)
        hdr = self.table.horizontalHeader()
        hdr.setSectionResizeMode(QHeaderView.Interactive)
        # (with whole op names the table is over 1400 px wide, the tiles column cut off): long op names elide in the
        # middle (the tooltip has the whole name), numbers get their widest value plus a little, and
        # 'tiles' sits next to '% of run', so the key numbers fit at 1400 px; scroll for the rest
        self.table.setTextElideMode(Qt.ElideMiddle)
        fm = self.table.fontMetrics()
        for c, key in enumerate(self.model.keys):
            content = fm.horizontalAdvance(self.model.widest(c)) + 12
            head = fm.horizontalAdvance(self.model.headers[c]) + 24  # room for the sort arrow
            cap = NAME_WIDTH if key == "name" else 150 if key in TEXT_COLUMNS else 160
            hdr.resizeSection(c, min(max(content, head), cap))
        keys = self.model.keys
        if "tiles_used" in keys and "pct_run" in keys:
            hdr.moveSection(hdr.visualIndex(keys.index("tiles_used")), hdr.visualIndex(keys.index("pct_run")) + 1)
        hdr.setStretchLastSection(True)

        self.status = plain_label(parent=self)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addLayout(top)
        lay.addWidget(self.table, 1)
        lay.addWidget(self.status)

        QShortcut(QKeySequence.Find, self, activated=self.filter_edit.setFocus)
        self.filter_edit.setToolTip("Substring of the op name, case-insensitive; tick 'regex' for a regular "
                                    "expression (Ctrl+F)")
        self.filter_edit.textChanged.connect(self._apply_filter)
        self.regex_box.toggled.connect(self._apply_filter)
        # selectionChanged, not currentChanged: focusing the table moves 'current' to the first row
        # without selecting it, and that must not select an op
        self.table.selectionModel().selectionChanged.connect(self._on_selected)
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
            mask = name_mask(self.model.cols[0], text, self.regex_box.isChecked())  # table order
        except re.error as e:
            self.filter_edit.setStyleSheet(f"border: 1px solid {theme.colors()['bad']};")
            self.filter_edit.setToolTip(plain_tip(f"invalid regular expression: {e}"))
            self.count_label.setText("invalid regex")
            return
        self.filter_edit.setStyleSheet("")
        self.filter_edit.setToolTip("Substring of the op name, case-insensitive; tick 'regex' for a regular "
                                    "expression (Ctrl+F)")
        self.proxy.set_mask(None if not text else mask)
        self.count_label.setText(f"{int(mask.sum()):,} / {len(mask):,} ops")

    # user -> selection -------------------------------------------------------------
    def _on_selected(self, selected, _deselected=None):
        idx = [i for i in selected.indexes() if i.column() == 0]
        if self._syncing or not idx:
            return
        op = int(self.proxy.data(idx[0], OP_ROLE))
        if op == self.document.selection.state.op_id and self.document.selection.state.source == self.SOURCE:
            return  # e.g. the selection re-announced after a sort
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
            return f"selected {self.model.name_of(state.op_id)}: {rng}, {tiles}"
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
