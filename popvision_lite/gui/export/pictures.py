"""Tables and text panels as PNG pictures that show all of them: every row of a table, every line of a panel.

A widget grabbed at the size its window gives it shows what fits there: the Operations table exported 40 of
its 183 rows, the verdict panel (375 px wide in the Summary's left column) lost its price caveats under the
fold (issue 46, items 13 and 14).  Here the widget is drawn at the size its content needs:

* :func:`export_table_png(table, path, width)`: the table view grown to the height of all its rows (the
  header, every row, the frame) and to ``width`` or the width of all its columns.  A table taller than a
  PNG may be (:data:`~popvision_lite.gui.export.plots.MAX_PIXELS`) shows the rows that fit and says under
  them how many are left out and where they all are (the CSV export).
* :func:`export_panel_png(panel, path, width)`: a panel taken out of its window's layout, ``width`` wide and
  as tall as its text needs there; put back afterwards.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QFont, QImage, QPainter
from PySide6.QtWidgets import QApplication, QTableView, QWidget

from popvision_lite.atomic_io import write_bytes_atomic
from popvision_lite.gui.export.plots import MAX_PIXELS, image_png_bytes

FOOTER_PX = 28
PAD = 10  # pixels around a panel: its text does not touch the picture's edge


def table_size(table: QTableView) -> tuple[int, int]:
    """(width, height) in pixels that shows every column and every row of ``table``."""
    frame = 2 * table.frameWidth()
    vh, hh = table.verticalHeader(), table.horizontalHeader()
    rows = table.model().rowCount() if table.model() is not None else 0
    h = frame + (hh.height() if hh.isVisible() else 0) + sum(vh.sectionSize(r) for r in range(rows))
    w = frame + (vh.width() if vh.isVisible() else 0) + hh.length()
    return w, h


def export_table_png(table: QTableView, host: QWidget, path, width: int | None = None,
                     csv_hint: str = "export the table as .csv") -> tuple[int, int, int, int]:
    """Write a PNG of ``table`` showing every row (``host``: the top-level widget holding it, resized so the
    table gets that height).  Returns (width, height, rows shown, rows)."""
    rows = table.model().rowCount() if table.model() is not None else 0
    need_w, need_h = table_size(table)
    w = max(int(width or need_w), 16)
    cap = MAX_PIXELS - FOOTER_PX
    h = min(need_h, cap)
    table.setVerticalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
    table.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
    table.scrollToTop()
    for _ in range(4):  # the layout around the table takes its share of each resize
        host.resize(min(MAX_PIXELS, host.width() + w - table.width()),
                    min(MAX_PIXELS * 2, host.height() + h - table.height()))
        QApplication.processEvents()
        if table.width() >= w and table.height() >= h:
            break
    img = table.grab().toImage()
    shown = _rows_shown(table, img.height())
    if shown < rows:  # too tall for one picture: say what is left out, and where every row is
        img = _with_footer(img, f"rows {shown + 1:,} to {rows:,} of {rows:,} are not shown (a PNG is at most "
                                f"{MAX_PIXELS:,} px tall): {csv_hint} for every row")
    write_bytes_atomic(path, image_png_bytes(img))
    return img.width(), img.height(), shown, rows


def _rows_shown(table: QTableView, height: int) -> int:
    """Rows wholly inside the top ``height`` pixels of the table."""
    vh = table.verticalHeader()
    top = table.frameWidth() + (table.horizontalHeader().height() if table.horizontalHeader().isVisible() else 0)
    n = 0
    for r in range(table.model().rowCount()):
        top += vh.sectionSize(r)
        if top > height:
            break
        n += 1
    return n


def _with_footer(img: QImage, text: str) -> QImage:
    out = QImage(img.width(), img.height() + FOOTER_PX, QImage.Format_ARGB32)
    out.fill(QColor("white"))
    p = QPainter(out)
    p.drawImage(0, 0, img)
    p.setPen(QColor("#a00000"))
    f = QFont()
    f.setBold(True)
    p.setFont(f)
    p.drawText(8, img.height(), img.width() - 16, FOOTER_PX, int(Qt.AlignVCenter | Qt.AlignLeft), text)
    p.end()
    return out


def export_panel_png(panel: QWidget, path, width: int = 900, min_height: int = 0) -> tuple[int, int]:
    """Write a PNG of ``panel`` ``width`` px wide and as tall as its content needs (at least ``min_height``):
    it is taken out of its parent's layout for the picture and put back."""
    parent = panel.parentWidget()
    layout = parent.layout() if parent is not None else None
    index = layout.indexOf(panel) if layout is not None else -1
    shown = panel.isVisible()
    panel.setParent(None)
    try:
        panel.show()
        inner = width - 2 * PAD
        panel.resize(inner, max(min_height, 100))
        QApplication.processEvents()
        h = panel.layout().heightForWidth(inner) if panel.layout() is not None else -1
        h = max(h if h > 0 else panel.sizeHint().height(), panel.minimumSizeHint().height(), min_height - 2 * PAD)
        panel.resize(inner, min(h, MAX_PIXELS - 2 * PAD))
        focus = QApplication.focusWidget()
        if focus is not None and panel.isAncestorOf(focus):
            focus.clearFocus()  # no text cursor in the picture
        QApplication.processEvents()
        shot = panel.grab().toImage()
        img = QImage(shot.width() + 2 * PAD, shot.height() + 2 * PAD, QImage.Format_ARGB32)
        img.fill(panel.palette().window().color())
        p = QPainter(img)
        p.drawImage(PAD, PAD, shot)
        p.end()
        write_bytes_atomic(path, image_png_bytes(img))
        return img.width(), img.height()
    finally:
        panel.hide()  # before it goes back: a top-level window must not flash up
        if layout is not None and index >= 0:
            layout.insertWidget(index, panel)
        elif parent is not None:
            panel.setParent(parent)
        panel.setVisible(shown)
