"""Compare Operations: ops matched by name with A, B, delta and ratio, filterable."""

from __future__ import annotations

from PySide6.QtWidgets import (
    QLineEdit,
    QVBoxLayout,
    QWidget,
)

from popvision_lite.analysis import compare as C
from popvision_lite.gui.table_model import DataFrameModel, make_table_view
from popvision_lite.gui.views.compare.common import fit_columns


class CompareOpsPage(QWidget):
    def __init__(self, cmp: C.Comparison, parent=None):
        super().__init__(parent)
        self.cmp = cmp
        self.ops = cmp.op_table()  # the table compare() made for its notes
        self.filter = QLineEdit()
        self.filter.setPlaceholderText("filter ops by name (substring)")
        self.filter.setToolTip("Show only ops whose name contains this text")
        self.model = DataFrameModel(self.ops)
        self.table = make_table_view(self.model, "Ops matched by name; largest change in cycles first")
        self.table.setObjectName("ops")
        fit_columns(self.table)
        self.filter.textChanged.connect(self._filter)
        lay = QVBoxLayout(self)
        lay.addWidget(self.filter)
        lay.addWidget(self.table, 1)

    def _filter(self, text: str) -> None:
        df = self.ops if not text else self.ops[self.ops["name"].str.contains(text, regex=False)]
        self.model.set_frame(df)

    def tables(self) -> dict:
        return {"ops": self.model.df}
