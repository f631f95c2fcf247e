"""Program tree: the program hierarchy with cycles, share of run, code bytes and op.

A lazy QAbstractItemModel over :class:`~popvision_lite.analysis.program_tree.ProgramTree`:
Qt asks only for the rows it shows, and each row is answered from numpy arrays, so
trees with very many programs open instantly.  Selecting a node selects its steps
elsewhere; selecting an op (or a program) elsewhere expands and selects its node here.
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QAbstractItemModel, QItemSelection, QItemSelectionModel, QModelIndex, Qt
from PySide6.QtGui import QColor, QFont, QKeySequence, QShortcut
from PySide6.QtWidgets import QHeaderView, QLineEdit, QTreeView, QVBoxLayout, QWidget

from popvision_lite.analysis.program_tree import COLUMNS, ProgramTree
from popvision_lite.gui.state.resolve import select_program
from popvision_lite.gui.table_model import ALIGN_NUMBER, ALIGNMENT, DISPLAY, TOOLTIP, ShownCells, role_int
from popvision_lite.gui.text import plain_label, plain_tip
from popvision_lite.gui.theme import PROGRAM_KIND_COLORS

_ROOT = QModelIndex()  # the invalid index, as a default argument
SORT_ROLE = Qt.UserRole  # raw value of a cell
PROG_ROLE = Qt.UserRole + 1  # prog_id of a row
_ROW_FLAGS = Qt.ItemIsEnabled | Qt.ItemIsSelectable  # once: OR-ing Qt's flags costs ~0.1 ms a call, per visible cell
_FOREGROUND = role_int(Qt.ItemDataRole.ForegroundRole)
# ints: a flat name such as Qt.DisplayRole costs PySide6 a compatibility lookup per use (table_model.py)
_ROLES = frozenset({DISPLAY, role_int(SORT_ROLE), role_int(PROG_ROLE), ALIGNMENT, _FOREGROUND, TOOLTIP})


class ProgramTreeModel(QAbstractItemModel):
    """internalId of an index = prog_id + 1 (0 is never used, so it cannot collide with 'no id')."""

    def __init__(self, tree: ProgramTree, parent=None):
        super().__init__(parent)
        self.tree = tree
        self._shown = ShownCells()
        self._bold = QFont()
        self._bold.setBold(True)

    # structure -------------------------------------------------------------------
    def _prog(self, index: QModelIndex) -> int:
        return int(index.internalId()) - 1 if index.isValid() else -1

    def index(self, row, column, parent=_ROOT):
        p = self._prog(parent)
        if row < 0 or column < 0 or column >= len(COLUMNS) or row >= self.tree.child_count(p):
            return QModelIndex()
        return self.createIndex(row, column, self.tree.child(p, row) + 1)

    def parent(self, index=_ROOT):  # noqa: A003 - Qt's name
        if not index.isValid():
            return QModelIndex()
        par = self.tree.parent_of(self._prog(index))
        if par < 0:
            return QModelIndex()
        return self.createIndex(self.tree.index_in_parent(par), 0, par + 1)

    def rowCount(self, parent=_ROOT):
        if parent.isValid() and parent.column() != 0:
            return 0
        return self.tree.child_count(self._prog(parent))

    def columnCount(self, parent=_ROOT):
        return len(COLUMNS)

    def hasChildren(self, parent=_ROOT):
        return self.rowCount(parent) > 0

    def index_for(self, prog_id: int, column: int = 0) -> QModelIndex:
        return self.createIndex(self.tree.index_in_parent(prog_id), column, prog_id + 1)

    # data -------------------------------------------------------------------------
    def headerData(self, section, orientation, role=Qt.DisplayRole):
        if orientation == Qt.Horizontal and role == Qt.DisplayRole:
            return COLUMNS[section]
        if orientation == Qt.Horizontal and role == Qt.ToolTipRole:
            return ["program name (Repeat count in brackets)", "program kind",
                    "cycles of all steps it issued, children and Repeat iterations included",
                    "cycles / cycles of the whole run", "control code bytes attributed to the program",
                    "model operation the program belongs to"][section]
        return None

    def data(self, index, role=DISPLAY):
        role = role_int(role)
        if role not in _ROLES or not index.isValid():  # Qt asks for many roles: answer the rest at once
            return None
        return self._shown.get(index.internalId(), index, role, self._cell)  # the tree does not change

    def _cell(self, index, role):
        prog = self._prog(index)
        col = index.column()
        t = self.tree
        if role == PROG_ROLE:
            return prog
        if role == ALIGNMENT:
            return ALIGN_NUMBER if col in (2, 3, 4) else None
        r = t.row(prog)
        if role == _FOREGROUND:
            c = PROGRAM_KIND_COLORS.get(str(t.kind[r])) if col == 1 else None
            return QColor(c) if c else None
        if role == TOOLTIP:
            first, last = int(t.first_step[r]), int(t.last_step[r])
            steps = f"steps {first}..{last}" if first >= 0 else "no steps of its own"
            return plain_tip(f"{t.kind[r]} {t.label(prog)} (program {prog}): {steps}, {int(t.cycles[r]):,} cycles")
        v = t.value(prog, col)
        if role == SORT_ROLE:
            return v
        if col == 3:
            return f"{v:.2f}"
        if isinstance(v, int):
            return f"{v:,}"
        return v

    def flags(self, index):
        if not index.isValid():
            return Qt.NoItemFlags
        return _ROW_FLAGS


class ProgramTreeView(QWidget):
    """Registered as ``program_tree``; constructed as ``ProgramTreeView(document)``."""

    SOURCE = "program_tree"

    def __init__(self, document, parent=None):
        super().__init__(parent)
        self.document = document
        self._syncing = False
        self.tree_data = document.cached("program_tree", ProgramTree, document.profile)
        self.model = ProgramTreeModel(self.tree_data, self)
        self.view = QTreeView(self)
        self.view.setModel(self.model)
        self.view.setUniformRowHeights(True)  # lets Qt skip measuring rows: big trees stay fast
        self.view.setAlternatingRowColors(True)
        self.view.setSelectionBehavior(QTreeView.SelectRows)
        self.view.setSelectionMode(QTreeView.SingleSelection)
        # fixed widths from the widest value of each column (ResizeToContents would measure rows)
        hdr = self.view.header()
        hdr.setSectionResizeMode(QHeaderView.Interactive)
        fm = self.view.fontMetrics()
        td = self.tree_data
        widest = ["m" * 40, "StreamCopy", f"{int(td.cycles.max(initial=0)):,}", "100.00",
                  f"{int(td.code_bytes.max(initial=0)):,}"]
        for c, text in enumerate(widest):
            hdr.resizeSection(c, max(fm.horizontalAdvance(text), fm.horizontalAdvance(COLUMNS[c])) + 24)
        hdr.setStretchLastSection(True)
        self.status = plain_label(parent=self)
        self.status.setTextInteractionFlags(Qt.TextSelectableByMouse)
        self.find_edit = QLineEdit(self)
        self.find_edit.setPlaceholderText("Find program by name (Enter: next match, Ctrl+F)")
        self.find_edit.setClearButtonEnabled(True)
        self.find_edit.returnPressed.connect(self.find_next)
        QShortcut(QKeySequence.Find, self, activated=self.find_edit.setFocus)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addWidget(self.find_edit)
        lay.addWidget(self.view, 1)
        lay.addWidget(self.status)
        total = self.tree_data.total_cycles
        n_prog = self.tree_data.num_programs
        self._summary = (f"{n_prog:,} programs; the top-level rows add up to the {total:,} cycles of IPU time of "
                         "one step (rows in brackets: time no program owns)")
        self.status.setText(self._summary)
        # the first levels open by default (a Sequence and its Repeat, usually)
        self.view.expandToDepth(1)
        # selectionChanged, not currentChanged: focusing the view moves 'current' to the first row
        # without selecting it, and that must not select the whole run
        self.view.selectionModel().selectionChanged.connect(self._on_selected)
        document.selection.changed.connect(self._on_selection)
        self._worker = None
        st = document.selection.state
        if st.op_id is not None or st.prog_id is not None:
            self._on_selection(st)  # views built later show the current selection

    # user -> selection -------------------------------------------------------------
    def _on_selected(self, selected, _deselected=None):
        idx = [i for i in selected.indexes() if i.column() == 0]
        if self._syncing or not idx:
            return
        self.select_program(self.model._prog(idx[0]))

    def select_program(self, prog: int) -> None:
        if self.tree_data.is_unattributed(prog):  # IPU time no program owns: nothing to select elsewhere
            self.status.setText(f"{self._summary} | {self.tree_data.label(prog)}: "
                                f"{int(self.tree_data.cycles[self.tree_data.row(prog)]):,} cycles of IPU time that no "
                                "program owns (no steps to select)")
            return
        if self.tree_data.is_group(prog):  # a group of programs: their steps, no single program or op
            rng = self.tree_data.step_range(prog)
            self.document.selection.update(source=self.SOURCE, prog_id=None, op_id=None, step_range=rng, tiles=())
            n = self.tree_data.child_count(prog)
            self.status.setText(f"{self._summary} | group {self.tree_data.label(prog)} ({n:,} items): "
                                + (f"steps {rng[0]}..{rng[1] - 1}" if rng else "no steps"))
            return
        r = self.tree_data.row(prog)
        op = int(self.tree_data.op_id[r])
        self._worker = select_program(self.document, prog, op, self.SOURCE)
        rng = self.document.selection.state.step_range
        rng_txt = f"steps {rng[0]}..{rng[1] - 1}" if rng else "no steps"
        self.status.setText(f"{self._summary} | selected {self.tree_data.label(prog)}: {rng_txt}")

    # selection -> tree -------------------------------------------------------------
    def _on_selection(self, state):
        if state.source == self.SOURCE:
            return
        prog = state.prog_id
        if state.op_id is not None and (prog is None or self.tree_data.op_id[self.tree_data.row(prog)] == state.op_id):
            nodes = self.tree_data.nodes_for_op(state.op_id)
            if len(nodes):
                self.show_programs(nodes.tolist())
                rng = state.step_range
                self.status.setText(f"{self._summary} | op {self.tree_data.op_name(int(nodes[0]))}: "
                                    f"{len(nodes):,} node{'s' if len(nodes) > 1 else ''}"
                                    + (f", steps {rng[0]}..{rng[1] - 1}" if rng else ""))
                return
        if prog is None and state.step_range is not None:
            # a step range from the timeline: the leaf programs that issued those steps
            st = self.document.profile.stored_table("steps")
            s0, s1 = state.step_range
            step = st["step"].to_numpy()
            progs = np.unique(st["prog_id"].to_numpy()[(step >= s0) & (step < s1)])
            progs = progs[progs >= 0]
            if 0 < len(progs) <= self.MAX_SELECTED:
                self.show_programs(progs.tolist())
                self.status.setText(f"{self._summary} | steps {s0}..{s1 - 1}: {len(progs):,} programs")
                return
        if prog is None:
            if not self.view.selectionModel().hasSelection():
                return
            self._syncing = True
            try:
                self.view.selectionModel().clearSelection()
            finally:
                self._syncing = False
            return
        self.show_program(prog)

    def show_program(self, prog: int) -> None:
        """Expand the ancestors of ``prog``, select and scroll to it (no selection echo)."""
        self._syncing = True
        try:
            for p in self.tree_data.path_to(prog)[:-1]:
                self.view.expand(self.model.index_for(p))
            idx = self.model.index_for(prog)
            self.view.selectionModel().setCurrentIndex(
                idx, QItemSelectionModel.ClearAndSelect | QItemSelectionModel.Rows)
            self.view.scrollTo(idx, QTreeView.PositionAtCenter)
        finally:
            self._syncing = False

    MAX_SELECTED = 500

    def show_programs(self, progs: list[int]) -> None:
        """Select several nodes (all top nodes of an op), current = the first (no selection echo)."""
        progs = progs[: self.MAX_SELECTED]
        self._syncing = True
        try:
            expanded = set()
            sel = QItemSelection()
            for prog in progs:
                for p in self.tree_data.path_to(prog)[:-1]:
                    if p not in expanded:
                        self.view.expand(self.model.index_for(p))
                        expanded.add(p)
                idx = self.model.index_for(prog)
                sel.select(idx, self.model.index_for(prog, len(COLUMNS) - 1))
            sm = self.view.selectionModel()
            sm.select(sel, QItemSelectionModel.ClearAndSelect)
            first = self.model.index_for(progs[0])
            sm.setCurrentIndex(first, QItemSelectionModel.NoUpdate)
            self.view.scrollTo(first, QTreeView.PositionAtCenter)
        finally:
            self._syncing = False

    def selected_programs(self) -> list[int]:
        return sorted({self.model._prog(i) for i in self.view.selectionModel().selectedRows()})

    def find_next(self) -> int | None:
        """Select the next program whose name contains the find text (as a click would)."""
        prog = self.tree_data.find(self.find_edit.text().strip(), self.selected_program())
        if prog is None:
            self.status.setText(f"{self._summary} | no program named like '{self.find_edit.text()}'")
            return None
        self.show_program(prog)
        self.select_program(prog)
        return prog

    def selected_program(self) -> int | None:
        idx = self.view.selectionModel().currentIndex()
        return self.model._prog(idx) if idx.isValid() else None
