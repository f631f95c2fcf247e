"""Helpers of the Qt tests (not fixtures)."""

from __future__ import annotations


def show_view(qtbot, view, size=(1400, 900)):
    qtbot.addWidget(view)
    view.resize(*size)
    view.show()
    qtbot.waitExposed(view)
    return view


def capture_message_boxes(monkeypatch, on_show=None) -> list:
    """Every message box the app shows, as (parent, title, text), instead of a modal dialog.

    The app's boxes come from ``gui.text.show_message`` (a QMessageBox in plain-text format); its
    ``exec`` is replaced, and a box whose text could be read as rich text fails the test.
    ``on_show(parent, title, text)`` runs for each box (e.g. ``pytest.fail``)."""
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QMessageBox

    seen = []

    def fake_exec(box):
        assert box.textFormat() == Qt.PlainText, f"message box {box.windowTitle()!r} is not plain text"
        entry = (box.parent(), box.windowTitle(), box.text())
        seen.append(entry)
        if on_show is not None:
            on_show(*entry)
        return int(QMessageBox.Ok)

    monkeypatch.setattr(QMessageBox, "exec", fake_exec)
    return seen
