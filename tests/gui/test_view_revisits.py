"""Views shown again keep what they drew (issue 49 item 5): a revisit of a tab paints the Liveness curves from
their cached pixmaps, re-places no Roofline label for a layout it placed before, and formats no table cell twice -
while what is drawn and exported stays the same."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
import pytest

pytestmark = pytest.mark.gui


def _tabs(qtbot, document):
    from popvision_lite.gui.document_widget import DocumentWidget
    from tests.support.qt import show_view

    dw = show_view(qtbot, DocumentWidget(document))
    for k in dw.keys():
        dw.show_view(k)
        qtbot.wait(5)
    return dw


def test_a_revisited_liveness_view_paints_its_curves_from_the_cache(qtbot, document, monkeypatch):
    # the paint hook is in place before any curve is made or painted: set on the class after the curves' first
    # paint, Qt's calls to paint did not always reach it (no curve painted at all in ~1 run of 14, the same state
    # otherwise); set first, every run reached it
    painted = []
    orig = pg.PlotCurveItem.paint
    monkeypatch.setattr(pg.PlotCurveItem, "paint", lambda self, *a: (painted.append(self), orig(self, *a))[1])
    dw = _tabs(qtbot, document)
    view = dw.view("liveness")
    painted.clear()
    counts = []
    for _ in range(5):
        dw.show_view("summary")
        qtbot.wait(10)
        dw.show_view("liveness")
        qtbot.wait(10)
        view.plot.grab()  # a paint of the whole plot
        counts.append(painted.count(view.max_curve.curve))
        painted.clear()
    assert counts[-3:] == [0, 0, 0], counts  # once the tabs' layout has settled: blitted, never drawn again
    view.set_tile(1 if view.tile != 1 else 2)  # new data: drawn afresh
    view.plot.grab()
    assert view.tile_curve.curve in painted and view.max_curve.curve not in painted


def test_an_export_draws_the_items_not_their_pixmaps(qtbot, document, tmp_path):
    from PySide6.QtWidgets import QGraphicsItem

    from popvision_lite.gui.export.plots import export_svg

    dw = _tabs(qtbot, document)
    view = dw.show_view("liveness")
    qtbot.wait(20)
    curve = view.max_curve.curve
    assert curve.cacheMode() == QGraphicsItem.CacheMode.DeviceCoordinateCache
    export_svg(view.plot_items()["liveness"], tmp_path / "l.svg")
    assert b"<image" not in (tmp_path / "l.svg").read_bytes()  # the curve as a path, not its cached pixmap
    assert curve.cacheMode() == QGraphicsItem.CacheMode.DeviceCoordinateCache  # and cached again after


def test_roofline_labels_are_placed_once_per_layout(qtbot, document, monkeypatch):
    from popvision_lite.gui.items import ceiling_labels as CL
    from popvision_lite.gui.views.roofline import RooflineView
    from tests.support.qt import show_view

    view = show_view(qtbot, RooflineView(document), size=(1000, 600))
    qtbot.waitUntil(view.is_ready, timeout=20000)
    qtbot.wait(50)
    labels = view.ceiling_labels.labels()
    before = [(tuple(t.anchor), (t.pos().x(), t.pos().y()), t.isVisible()) for t in labels]
    placed = []
    orig = CL.CeilingLabelsItem._place_roof
    monkeypatch.setattr(CL.CeilingLabelsItem, "_place_roof", lambda self, *a: (placed.append(1), orig(self, *a))[1])
    view._place_labels()  # the same layout: the kept placement, not a new one
    assert not placed
    assert [(tuple(t.anchor), (t.pos().x(), t.pos().y()), t.isVisible()) for t in labels] == before
    view.resize(800, 500)  # another layout: placed afresh
    qtbot.wait(50)
    view._place_labels()
    assert placed or not view.ceiling_labels.roofs


def test_table_cells_are_formatted_once_and_follow_a_sort(qtbot):
    import pandas as pd
    from PySide6.QtCore import Qt

    from popvision_lite.gui.table_model import DataFrameModel

    m = DataFrameModel(pd.DataFrame({"bytes": [2048, 10], "name": ["b", "a"]}), byte_columns=("bytes",))
    cell = m.index(0, 0)
    first = m.data(cell, Qt.DisplayRole)
    calls = []
    orig = m._cell
    m._cell = lambda *a: (calls.append(a), orig(*a))[1]
    assert m.data(cell, Qt.DisplayRole) == first and not calls  # kept
    m.sort(1, Qt.AscendingOrder)  # rows move: what a cell shows is formatted again
    assert m.data(m.index(0, 1), Qt.DisplayRole) == "a" and calls
    assert np.array_equal(m.df["name"].to_numpy(), ["a", "b"])


def test_table_models_answer_their_roles_and_nothing_else(qtbot):
    """Qt asks a table's model for a dozen roles per cell on every paint: the roles the models show are answered as
    before (by the enum or the int Qt passes), every other role is None at once, without formatting the cell."""
    import pandas as pd
    from PySide6.QtCore import Qt

    from popvision_lite.analysis.summary import format_bytes
    from popvision_lite.gui.table_model import DataFrameModel
    from popvision_lite.gui.views.roofline.table import RooflineTableModel

    m = DataFrameModel(pd.DataFrame({"bytes": [2048, 10], "cycles": [1234567, 8], "on": [True, False],
                                     "name": ["b<i>", "a"]}), byte_columns=("bytes",))
    calls = []
    orig = m._cell
    m._cell = lambda *a: (calls.append(a), orig(*a))[1]
    for role in (Qt.FontRole, Qt.ForegroundRole, Qt.BackgroundRole, Qt.DecorationRole, Qt.CheckStateRole,
                 Qt.SizeHintRole, Qt.EditRole, Qt.StatusTipRole):
        for enum_or_int in (role, role.value):
            assert m.data(m.index(0, 1), enum_or_int) is None, role
    assert not calls
    right = int((Qt.AlignRight | Qt.AlignVCenter).value)
    for role in (Qt.DisplayRole, Qt.DisplayRole.value):
        assert [m.data(m.index(0, c), role) for c in range(4)] == [format_bytes(2048), "1,234,567", "yes", "b<i>"]
    assert m.data(m.index(0, 0), Qt.ToolTipRole) == "2,048 bytes"
    assert [m.data(m.index(0, c), Qt.TextAlignmentRole) for c in range(4)] == [right, right, None, None]
    assert m.data(m.index(1, 1), Qt.UserRole) == 8
    # the Roofline's per-op table: its TOTAL row bold, numbers right-aligned, the op id as the user role
    df = pd.DataFrame({"name": ["mm", "TOTAL"], "bound": ["compute", ""], "roof_bound": ["x", ""],
                       "intensity": [2.0, 2.0], "achieved_flops": [1e12, 1e12], "ipu_time_s": [1e-3, 1e-3],
                       "share": [1.0, 1.0], "ipu_cost_usd": [0.1, 0.1], "spills": [False, False]},
                      index=pd.Index([7, -1]))
    t = RooflineTableModel(df, [])
    assert t.data(t.index(1, 0)) == "TOTAL" and t.data(t.index(1, 0), Qt.FontRole).bold()
    assert t.data(t.index(0, 0), Qt.FontRole) is None and t.data(t.index(0, 0), Qt.ForegroundRole) is None
    assert t.data(t.index(0, 3), Qt.TextAlignmentRole) == right and t.data(t.index(0, 0), Qt.TextAlignmentRole) is None
    assert t.data(t.index(0, 2), Qt.UserRole.value) == 7


def test_an_axis_label_is_laid_out_again_only_when_its_text_changes(qtbot):
    """pyqtgraph set an axis label's HTML on every range change (its SI-prefix check): a text layout per axis
    per pan or zoom.  The label is set again when its text, unit prefix or colour changes, and only then."""
    from PySide6.QtWidgets import QGraphicsTextItem

    from popvision_lite.gui.app import create_app

    create_app()  # installs the text guards, the label's update among them
    w = pg.PlotWidget()
    qtbot.addWidget(w)
    axis = w.getPlotItem().getAxis("left")
    axis.setLabel("bytes <b>", units="B")
    sets = []
    real = QGraphicsTextItem.setHtml
    axis.label.setHtml = lambda text: (sets.append(text), real(axis.label, text))[1]
    for top in (10.0, 20.0, 30.0):  # the same prefix: the same text
        w.setYRange(0, top, padding=0)
    assert sets == []
    w.setYRange(0, 3e6, padding=0)  # a new prefix: the label says MB
    assert len(sets) == 1 and "(MB)" in axis.label.toPlainText() and "bytes <b>" in axis.label.toPlainText()
    w.setYRange(0, 5e6, padding=0)
    assert len(sets) == 1
    axis.setTextPen("#ff0000")  # the colour is in the label's style
    assert len(sets) == 2 and "#ff0000" in sets[-1]
    axis.setLabel("cycles", units="")
    assert len(sets) == 3 and axis.label.toPlainText().strip() == "cycles"
