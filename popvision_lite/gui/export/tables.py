"""Tables as CSV: a DataFrame (or a DataFrameModel) written atomically, and the tables a view shows."""

from __future__ import annotations

import pandas as pd
from PySide6.QtWidgets import QTableView, QWidget

from popvision_lite.errors import ConfigError
from popvision_lite.gui.table_model import DataFrameModel
from popvision_lite.profile.csv_export import write_frame_csv


def export_table(data, path) -> int:
    """Write a DataFrame (or a DataFrameModel's frame) as CSV atomically; returns the row count."""
    df = data.df if hasattr(data, "df") and not isinstance(data, pd.DataFrame) else data
    if not isinstance(df, pd.DataFrame):
        raise ConfigError(f"cannot export {type(data).__name__} as CSV")
    return write_frame_csv(df, path)  # atomic; cells a spreadsheet would run as formulas neutralised


def slug(text: str) -> str:
    s = "".join(ch.lower() if ch.isalnum() else "_" for ch in str(text)).strip("_")
    while "__" in s:
        s = s.replace("__", "_")
    return s or "table"


def view_tables(view) -> dict[str, pd.DataFrame]:
    """Tables shown by ``view``: its ``tables()`` if it has one, else every DataFrameModel table in it."""
    if callable(getattr(view, "tables", None)):  # the export protocol: a method, not a widget attribute
        return dict(view.tables())
    out: dict[str, pd.DataFrame] = {}
    if not isinstance(view, QWidget):
        return out
    for i, tv in enumerate(view.findChildren(QTableView)):
        m = tv.model()
        while hasattr(m, "sourceModel") and m.sourceModel() is not None:
            m = m.sourceModel()
        if m is None:
            continue
        df = m.df if isinstance(m, DataFrameModel) else getattr(m, "df", None)
        if not isinstance(df, pd.DataFrame):
            df = _model_frame(m)
        if df is None or not len(df.columns):
            continue
        name = slug(tv.objectName() or (tv.toolTip() or "").split(";")[0][:40] or f"table{i}")
        while name in out:
            name += "_2"
        out[name] = df
    return out


def _model_frame(model, max_rows: int = 1_000_000):
    """A DataFrame of what any flat Qt table model displays (headers as columns)."""
    from PySide6.QtCore import Qt

    rows, cols = model.rowCount(), model.columnCount()
    if cols == 0:
        return None
    headers = [str(model.headerData(c, Qt.Horizontal, Qt.DisplayRole)) for c in range(cols)]
    data = [[model.data(model.index(r, c), Qt.DisplayRole) for c in range(cols)] for r in range(min(rows, max_rows))]
    return pd.DataFrame(data, columns=headers)


