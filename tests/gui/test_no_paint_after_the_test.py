"""tests/gui/conftest.py turns off the updates of a test's widgets once its function has returned
(``stop_painting``): the events pytest-qt processes after the call, and again before it closes the widgets,
paint nothing the test could still read."""

from __future__ import annotations

from PySide6.QtWidgets import QApplication, QWidget


class _Counting(QWidget):
    def __init__(self):
        super().__init__()
        self.paints = 0

    def paintEvent(self, event):
        self.paints += 1
        super().paintEvent(event)


def test_a_repaint_pending_when_the_test_returns_is_not_drawn(qtbot, request):
    from tests.gui.conftest import stop_painting

    w = _Counting()
    qtbot.addWidget(w)
    w.resize(200, 100)
    w.show()
    qtbot.waitUntil(lambda: w.paints > 0)
    w.update()  # without it: the pending repaint is drawn by the next processEvents
    QApplication.processEvents()
    drawn = w.paints
    assert drawn > 1
    w.update()  # a change on a test's last line
    stop_painting(request.node)
    QApplication.processEvents()
    assert w.paints == drawn and w.isVisible()  # alive for the fixtures' teardown, only not painted


def test_the_hook_runs_after_every_gui_test(request):
    impls = request.node.ihook.pytest_runtest_call.get_hookimpls()
    ours = [h for h in impls if getattr(h.function, "__module__", "").endswith("gui.conftest")]
    assert ours and ours[0].wrapper
