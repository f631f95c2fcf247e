"""Helpers shared by the compare pages."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel


def notes_label(text: str) -> QLabel:
    lab = QLabel(text)
    lab.setTextFormat(Qt.PlainText)
    lab.setWordWrap(True)
    lab.setTextInteractionFlags(Qt.TextSelectableByMouse)
    return lab


def fit_columns(table) -> None:
    """Size columns to their contents, sampling the first rows only (fast on big tables)."""
    table.horizontalHeader().setResizeContentsPrecision(30)
    table.resizeColumnsToContents()
