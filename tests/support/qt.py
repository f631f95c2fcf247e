"""Helpers of the Qt tests (not fixtures)."""

from __future__ import annotations


def show_view(qtbot, view, size=(1400, 900)):
    qtbot.addWidget(view)
    view.resize(*size)
    view.show()
    qtbot.waitExposed(view)
    return view
