"""A read-only, sortable Qt table model over a pandas DataFrame (sorting done by pandas)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from PySide6.QtCore import QAbstractTableModel, QModelIndex, Qt
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableView

from popvision_lite.analysis.summary import format_bytes
from popvision_lite.gui.text import plain_tip
from popvision_lite.units import format_number, format_seconds

# the roles the models answer, as ints: PySide6 looks an old-style flat name such as ``Qt.DisplayRole`` up through its
# compatibility layer (~9 us each on this box), and Qt asks a table's model for a dozen roles per cell per paint
_ROLE = Qt.ItemDataRole
DISPLAY, TOOLTIP, ALIGNMENT, USER = (int(r.value) for r in (_ROLE.DisplayRole, _ROLE.ToolTipRole,
                                                             _ROLE.TextAlignmentRole, _ROLE.UserRole))
_ANSWERED = frozenset((DISPLAY, TOOLTIP, ALIGNMENT, USER))
ALIGN_NUMBER = int((Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter).value)


def role_int(role) -> int:
    """``role`` (a Qt.ItemDataRole or the int Qt passes) as an int."""
    return int(getattr(role, "value", role))


_SUFFIXES = (("_delta", " B − A"), ("_ratio", " B / A"), ("_pct", " %"), ("_usd", " (USD)"), ("_a", " A"),
             ("_b", " B"), ("_id", ""))


def column_title(col: str) -> str:
    """A column's title as people read it, from its snake_case name: 'time_a_s' -> 'time A' (the cells carry
    the unit), 'cycles_ratio' -> 'cycles B / A', 'cycles_delta' -> 'cycles B − A', 'op_id' -> 'op'."""
    name = col[:-2] if col.endswith("_s") and len(col) > 2 else col
    tail = ""
    changed = True
    while changed:
        changed = False
        for suffix, words in _SUFFIXES:
            if name.endswith(suffix) and len(name) > len(suffix):
                name, tail, changed = name[: -len(suffix)], words + tail, True
                break
    return (name.replace("_", " ") + tail).strip()


def _format_float(col: str, v: float) -> str:
    """One cell: durations (columns ending in ``_s`` / ``seconds``) with units.format_seconds, other numbers with
    units.format_number (no exponent: '600,300', '12.35'), an exponent only below 1e-4 or from 1e15."""
    if not np.isfinite(v):
        return "" if np.isnan(v) else str(v)
    if col.endswith("_s") or col.endswith("seconds"):
        return format_seconds(v)
    if v != 0 and (abs(v) < 1e-4 or abs(v) >= 1e15):
        return f"{v:.4g}"
    return format_number(v)


class ShownCells:
    """What each cell of a read-only model showed, by (row key, column, role).  Qt asks a view's model for every
    visible cell on every paint, and a tab shown again is painted anew: a cell is formatted once, then looked up.
    The owner clears it when its rows change (a new frame, a sort)."""

    __slots__ = ("_cells",)

    def __init__(self):
        self._cells: dict[tuple, object] = {}

    def get(self, row, index, role, compute):
        """The value ``compute(index, role)`` gave for this cell and role, computed on the first call."""
        key = (row, index.column(), role_int(role))
        try:
            return self._cells[key]
        except KeyError:
            v = self._cells[key] = compute(index, role)
            return v


class DataFrameModel(QAbstractTableModel):
    """Shows ``df``; columns named in ``byte_columns`` display as KiB/MiB but sort by value.

    ``headers`` maps column -> shown title, ``header_tips`` column -> what the column means (the header's
    tooltip); a cell's tooltip shows its exact value.
    """

    def __init__(self, df: pd.DataFrame | None = None, headers: dict[str, str] | None = None,
                 byte_columns: tuple[str, ...] = (), parent=None, header_tips: dict[str, str] | None = None):
        super().__init__(parent)
        self.headers = headers or {}
        self.header_tips = header_tips or {}
        self.byte_columns = set(byte_columns)
        self._df = pd.DataFrame() if df is None else df.reset_index(drop=True)
        self._cache_columns()

    def _cache_columns(self) -> None:
        # plain object arrays: ``data()`` is called per visible cell, and pandas/Arrow element
        # access costs ~100 us per call, which made a 200-row table take 0.3 s to lay out
        self._cols = [self._df[c].to_numpy(dtype=object) for c in self._df.columns]
        self._names = [str(c) for c in self._df.columns]
        self._shown = ShownCells()

    @property
    def df(self) -> pd.DataFrame:
        return self._df

    def set_frame(self, df: pd.DataFrame) -> None:
        self.beginResetModel()
        self._df = df.reset_index(drop=True)
        self._cache_columns()
        self.endResetModel()

    def rowCount(self, parent=QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self._df)

    def columnCount(self, parent=QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self._df.columns)

    def data(self, index, role=DISPLAY):
        role = role_int(role)
        if role not in _ANSWERED or not index.isValid():  # Qt asks for many roles: answer the rest at once
            return None
        return self._shown.get(index.row(), index, role, self._cell)

    def _cell(self, index, role: int):
        j = index.column()
        col = self._names[j]
        v = self._cols[j][index.row()]
        if role == DISPLAY:
            if col in self.byte_columns and isinstance(v, (int, float, np.integer, np.floating)):
                return format_bytes(v)
            if isinstance(v, (float, np.floating)):
                return _format_float(col, float(v))
            if isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)):
                return f"{v:,}"
            if isinstance(v, (bool, np.bool_)):
                return "yes" if v else "no"
            return str(v)
        if role == TOOLTIP:
            if col in self.byte_columns:
                return f"{int(v):,} bytes"
            return plain_tip(v)
        if role == ALIGNMENT:
            if isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_)):
                return ALIGN_NUMBER
        if role == USER:
            return v
        return None

    def headerData(self, section, orientation, role=Qt.DisplayRole):
        if orientation == Qt.Horizontal and role == Qt.ToolTipRole:
            tip = self.header_tips.get(str(self._df.columns[section]))
            return plain_tip(tip) if tip else None
        if role != Qt.DisplayRole:
            return None
        if orientation == Qt.Horizontal:
            col = str(self._df.columns[section])
            return self.headers.get(col) or column_title(col)
        return str(section + 1)

    def sort(self, column: int, order=Qt.AscendingOrder) -> None:
        if column < 0 or column >= len(self._df.columns):
            return
        self.layoutAboutToBeChanged.emit()
        name = self._df.columns[column]
        self._df = self._df.sort_values(name, ascending=(order == Qt.AscendingOrder), kind="stable") \
            .reset_index(drop=True)
        self._cache_columns()
        self.layoutChanged.emit()

    def row(self, r: int) -> pd.Series:
        return self._df.iloc[r]


def make_table_view(model: DataFrameModel, tooltip: str = "") -> QTableView:
    view = QTableView()
    view.setModel(model)
    view.horizontalHeader().setSortIndicator(-1, Qt.AscendingOrder)  # keep the given order until asked
    view.setSortingEnabled(True)
    view.setSelectionBehavior(QAbstractItemView.SelectRows)
    view.setAlternatingRowColors(True)
    view.horizontalHeader().setSectionResizeMode(QHeaderView.Interactive)
    view.horizontalHeader().setStretchLastSection(True)
    view.verticalHeader().setVisible(False)
    view.verticalHeader().setDefaultSectionSize(22)
    if tooltip:
        view.setToolTip(tooltip)
    return view
