"""The Export plot and Export table dialogs, for any window that shows views (the main window's File >
Export menu, the compare window's File menu): choose the plot or table, format, size and DPI, then write."""

from __future__ import annotations

from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QInputDialog,
    QSpinBox,
)

from popvision_lite.errors import PopvisionError
from popvision_lite.gui.export import plots as ex
from popvision_lite.gui.export.tables import export_table, view_tables
from popvision_lite.gui.text import show_error, show_info


class PlotExportDialog(QDialog):
    """Choose which plot, the format, the size in pixels and the DPI."""

    def __init__(self, items: dict, parent=None):
        super().__init__(parent)
        self.setWindowTitle("Export plot")
        self.items = items
        form = QFormLayout(self)
        self.which = QComboBox()
        self.which.addItems(list(items))
        self.fmt = QComboBox()
        self.fmt.addItems(["PNG", "SVG"])
        first = ex.export_target(next(iter(items.values()))).sceneBoundingRect()
        self.width = QSpinBox()
        self.width.setRange(16, ex.MAX_PIXELS)
        self.width.setValue(max(16, int(first.width()) * 2))
        self.width.setSuffix(" px")
        self.height = QSpinBox()
        self.height.setRange(0, ex.MAX_PIXELS)
        self.height.setSpecialValueText("keep aspect ratio")
        self.height.setValue(0)
        self.height.setSuffix(" px")
        self.dpi = QDoubleSpinBox()
        self.dpi.setRange(10, 2400)
        self.dpi.setValue(192)
        self.dpi.setToolTip("Resolution stored in the PNG (print size = pixels / DPI)")
        form.addRow("Plot:", self.which)
        form.addRow("Format:", self.fmt)
        form.addRow("Width:", self.width)
        form.addRow("Height:", self.height)
        form.addRow("DPI:", self.dpi)
        bb = QDialogButtonBox(QDialogButtonBox.Ok | QDialogButtonBox.Cancel)
        bb.accepted.connect(self.accept)
        bb.rejected.connect(self.reject)
        form.addRow(bb)
        self.fmt.currentTextChanged.connect(self._fmt_changed)

    def _fmt_changed(self, fmt: str) -> None:
        png = fmt == "PNG"
        for w in (self.width, self.height, self.dpi):
            w.setEnabled(png)

    def values(self) -> dict:
        return dict(key=self.which.currentText(), fmt=self.fmt.currentText().lower(), width=self.width.value(),
                    height=self.height.value() or None, dpi=self.dpi.value())


def export_plot_dialog(parent, view, path: str | None = None) -> str | None:
    items = ex.items_exportable(ex.view_plot_items(view))
    if not items:
        show_info(parent, "Export plot", "This view has no plot to export; "
                                "use File > Export table… for its tables.")
        return None
    dlg = PlotExportDialog(items, parent)
    if dlg.exec() != QDialog.Accepted:
        return None
    v = dlg.values()
    if path is None:
        path, _ = QFileDialog.getSaveFileName(parent, "Export plot", f"{v['key']}.{v['fmt']}",
                                              "PNG image (*.png)" if v["fmt"] == "png" else "SVG drawing (*.svg)")
        if not path:
            return None
    if not path.lower().endswith("." + v["fmt"]):
        path += "." + v["fmt"]
    try:
        ex.export_plot(items[v["key"]], path, v["width"], v["height"], v["dpi"])
    except PopvisionError as e:
        show_error(parent, "Export plot", str(e))
        return None
    status_message(parent, f"Exported {path}")
    return path


def export_table_dialog(parent, view, path: str | None = None) -> str | None:
    tables = view_tables(view) if view is not None else {}
    if not tables:
        show_info(parent, "Export table", "This view shows no table.")
        return None
    names = list(tables)
    name = names[0]
    if len(names) > 1:
        name, ok = QInputDialog.getItem(parent, "Export table", "Table:", names, 0, False)
        if not ok:
            return None
    if path is None:
        path, _ = QFileDialog.getSaveFileName(parent, "Export table", f"{name}.csv", "CSV (*.csv)")
        if not path:
            return None
    try:
        n = export_table(tables[name], path)
    except PopvisionError as e:
        show_error(parent, "Export table", str(e))
        return None
    status_message(parent, f"Exported {n:,} rows to {path}")
    return path


def status_message(w, text: str) -> None:
    sb = getattr(w, "statusBar", None)
    if callable(sb):
        sb().showMessage(text, 8000)
