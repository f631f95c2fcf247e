"""A ProfileError raised in any Qt slot reaches the user in the same plain-text error dialog as a file
that fails to open; other exceptions still reach the previous hook (a bug is never hidden)."""

from __future__ import annotations

import sys

import pytest
from PySide6.QtCore import QTimer

from popvision_lite.errors import ProfileError
from tests.support.qt import capture_message_boxes

pytestmark = pytest.mark.gui


def test_profile_error_in_a_slot_is_shown_in_the_error_dialog(qtbot, window, monkeypatch):
    from popvision_lite.gui.main_window import install_slot_guard

    boxes = capture_message_boxes(monkeypatch)
    passed_on = []
    monkeypatch.setattr(sys, "excepthook", lambda *a: passed_on.append(a[1]))
    install_slot_guard(window)

    def bad_slot():
        raise ProfileError("/data/run.pvl", "tables/ops/name row 3: <b>not</b> text")

    QTimer.singleShot(0, bad_slot)
    qtbot.waitUntil(lambda: bool(boxes), timeout=5000)
    parent, title, text = boxes[0]
    assert parent is window and title == "Problem in the profile"
    assert text == "/data/run.pvl: tables/ops/name row 3: <b>not</b> text"  # literal, plain text
    assert not passed_on

    def buggy_slot():
        raise ZeroDivisionError("a bug")

    QTimer.singleShot(0, buggy_slot)
    qtbot.waitUntil(lambda: bool(passed_on), timeout=5000)
    assert isinstance(passed_on[0], ZeroDivisionError) and len(boxes) == 1
