"""The main window fits a 1024 x 768 screen with every view built (the memory view needed 1109 px and
the roofline view 1039 px, so the window could not be made narrower than that)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.gui

SAMPLE = Path(__file__).resolve().parents[2] / "sample_profiles" / "bert_mini_4ipu_pipeline.pvl"


def test_every_view_fits_1024_by_768(qtbot, tmp_path):
    from PySide6.QtCore import QSettings

    import popvision_lite as pvl
    from popvision_lite.gui.main_window import MainWindow
    from popvision_lite.gui.state.document import Document
    from popvision_lite.gui.views import VIEW_REGISTRY

    w = MainWindow(QSettings(str(tmp_path / "s.ini"), QSettings.IniFormat))
    qtbot.addWidget(w)
    dw = w.add_document(Document(pvl.open(SAMPLE)))
    w.resize(1024, 768)
    w.show()
    qtbot.waitExposed(w)
    built = []
    for key, _title, _factory in VIEW_REGISTRY:
        w.show_view(key)
        qtbot.wait(20)
        v = dw.view(key)
        if v is None:
            continue
        built.append(key)
        hint = v.minimumSizeHint()
        assert hint.width() <= 1000, (key, hint.width())
    assert {"memory", "roofline"} <= set(built)
    hint = w.minimumSizeHint()
    assert hint.width() <= 1024 and hint.height() <= 768, (hint.width(), hint.height())
    assert w.width() <= 1024 and w.height() <= 768
    for cb in dw.view("roofline").gpu_boxes.values():  # short names; the full one is in the tooltip
        assert cb.text() in cb.toolTip()
