"""Operations view (pytest-qt, offscreen): numeric sort, name filter, op -> tiles + steps selection."""

import numpy as np
import pytest
from PySide6.QtCore import Qt

import popvision_lite as pvl
from popvision_lite.gui.state.document import Document
from popvision_lite.gui.views.operations_view import OP_ROLE
from tests.support.insights_profile import make_data, write_small

pytestmark = pytest.mark.gui


@pytest.fixture(scope="module")
def small_path(tmp_path_factory):
    return write_small(tmp_path_factory.mktemp("opsview") / "small.pvl")


@pytest.fixture
def doc(qtbot, small_path):
    p = pvl.open(small_path)
    d = Document(p)
    yield d
    d.close()


@pytest.fixture
def view(qtbot, doc):
    from popvision_lite.gui.views.operations_view import OperationsView


    v = OperationsView(doc)
    qtbot.addWidget(v)
    return v


def _col(view, key):
    return view.model.keys.index(key)


def test_sort_is_numeric_on_every_numeric_column(view, doc):
    ops = doc.profile.stored_table("ops").set_index("op_id")
    for key in ("cycles", "flops", "bytes_sram", "tiles_used", "pct_run", "exchange_cycles"):
        c = _col(view, key)
        view.table.sortByColumn(c, Qt.DescendingOrder)
        got = view.visible_ops()
        vals = view.df.loc[got, key].to_numpy(float)
        assert (np.diff(vals) <= 0).all(), key
        view.table.sortByColumn(c, Qt.AscendingOrder)
        got = view.visible_ops()
        assert (np.diff(view.df.loc[got, key].to_numpy(float)) >= 0).all(), key
    # flops: 2,000,000 > 900,000 > 5,000 > 0, which a string sort would get wrong ("900,000" > "2,000,000")
    view.table.sortByColumn(_col(view, "flops"), Qt.DescendingOrder)
    assert view.visible_ops() == ops["flops"].sort_values(ascending=False).index.tolist()


def test_filter_by_name(view, qtbot):
    view.set_filter("MATMUL")
    assert sorted(view.visible_ops()) == [0]
    assert view.count_label.text() == "1 / 4 ops"
    view.set_filter("fwd")
    assert sorted(view.visible_ops()) == [0, 1]
    view.set_filter(r"^(bwd|weights)", regex=True)
    assert sorted(view.visible_ops()) == [2, 3]
    view.set_filter("(", regex=True)  # invalid regex: reported, table left as it was
    assert view.count_label.text() == "invalid regex"
    assert sorted(view.visible_ops()) == [2, 3]
    view.set_filter("")
    assert sorted(view.visible_ops()) == [0, 1, 2, 3]
    # typing in the box filters too
    view.filter_edit.clear()
    qtbot.keyClicks(view.filter_edit, "relu")
    assert view.visible_ops() == [1]


@pytest.mark.parametrize("op", [0, 1, 2, 3])
def test_selecting_op_selects_exactly_its_tiles_and_steps(view, doc, qtbot, op):
    data = make_data()
    seen = []
    doc.selection.changed.connect(seen.append)
    view.select_op(op)
    qtbot.waitUntil(lambda: doc.selection.state.op_id == op and doc.selection.state.tiles != ())
    st = doc.selection.state
    # direct computation from the arrays the profile was written from
    steps = np.flatnonzero(data.steps["op_id"].to_numpy() == op)
    active = (data.step_tile_cycles[steps] > 0) | (data.step_tile_bytes_in[steps] > 0) \
        | (data.step_tile_bytes_out[steps] > 0)
    tiles = set(np.flatnonzero(active.any(axis=0)).tolist())
    cs = data.compute_sets.loc[data.compute_sets["op_id"] == op, "cs_id"]
    tiles |= set(data.vertices.loc[data.vertices["cs_id"].isin(cs), "tile"].tolist())
    assert st.tiles == tuple(sorted(tiles))
    assert st.step_range == (int(steps.min()), int(steps.max()) + 1)
    assert st.source == "operations"
    assert seen and seen[-1] == st


def test_listens_to_other_views(view, doc):
    doc.selection.update(source="memory", op_id=2)
    idx = view.table.selectionModel().currentIndex()
    assert view.proxy.data(idx, OP_ROLE) == 2
    # a step range from the timeline highlights the rows of the ops owning steps in it
    doc.selection.update(source="execution", op_id=None, step_range=(4, 8))
    assert view.model.highlight.tolist() == [True, True, True, False]
    assert view.table.selectionModel().hasSelection() is False


def test_sort_and_filter_together_keep_selection(view, doc, qtbot):
    view.set_filter("fwd")
    view.select_op(1)
    qtbot.waitUntil(lambda: doc.selection.state.op_id == 1)
    view.table.sortByColumn(_col(view, "flops"), Qt.DescendingOrder)
    assert view.visible_ops() == [0, 1]  # 2,000,000 then 5,000 FLOPs
    view.table.sortByColumn(_col(view, "flops"), Qt.AscendingOrder)
    assert view.visible_ops() == [1, 0]
    # the selected row follows its op through the sort, and clearing the filter keeps the order
    idx = view.table.selectionModel().currentIndex()
    assert view.proxy.data(idx, OP_ROLE) == 1
    view.set_filter("")
    assert view.visible_ops() == [3, 1, 2, 0]
    view.table.sortByColumn(_col(view, "name"), Qt.AscendingOrder)
    assert [view.df.loc[o, "name"] for o in view.visible_ops()] == sorted(view.df["name"])


def test_large_ops_resolve_tiles_off_the_gui_thread(view, doc, qtbot, monkeypatch):
    from popvision_lite.gui.state import resolve as selection_resolve

    monkeypatch.setattr(selection_resolve, "SYNC_CELLS", 0)  # every op counts as large
    seen = []
    doc.selection.changed.connect(lambda s: seen.append(s.tiles))
    view.select_op(0)
    # first: the tiles running the op's vertices (0-3), at once; then the exact set incl. the receiver tile 4
    assert seen[0] == (0, 1, 2, 3)
    qtbot.waitUntil(lambda: doc.selection.state.tiles == (0, 1, 2, 3, 4), timeout=10000)
    assert doc.selection.state.op_id == 0 and doc.selection.state.step_range == (0, 5)
    # a second selection of the same op is answered from the cache, in one update
    doc.selection.clear()
    seen.clear()
    view.table.selectionModel().clearCurrentIndex()
    view.select_op(0)
    assert seen[-1] == (0, 1, 2, 3, 4)


def test_focusing_the_table_does_not_select_an_op(view, doc):
    from PySide6.QtCore import QEvent
    from PySide6.QtGui import QFocusEvent
    from PySide6.QtWidgets import QApplication

    doc.selection.update(source="execution", step_range=(6, 7))
    before = doc.selection.state
    QApplication.sendEvent(view.table, QFocusEvent(QEvent.FocusIn, Qt.TabFocusReason))
    assert view.table.currentIndex().isValid()
    assert doc.selection.state == before


def test_key_columns_fit_in_1400_px(qtbot):
    """At 1400 px the numeric columns (tiles included; it used to be cut off) are in view; long op names
    elide in the middle and keep the whole name in their tooltip."""
    from pathlib import Path

    from popvision_lite.gui.views.operations_view import NAME_WIDTH, OperationsView

    sample = Path(__file__).resolve().parents[2] / "sample_profiles" / "bert_mini_4ipu_pipeline.pvl"
    d = Document(pvl.open(sample))
    try:
        v = OperationsView(d)
        qtbot.addWidget(v)
        v.resize(1400, 700)
        v.show()
        qtbot.waitExposed(v)
        hdr = v.table.horizontalHeader()
        visible = v.table.viewport().width()
        for key in ("name", "type", "cycles", "pct_run", "tiles_used", "compute_cycles", "exchange_cycles",
                    "sync_cycles", "flops", "bytes_sram", "bytes_exchange"):
            c = _col(v, key)
            assert hdr.sectionViewportPosition(c) + hdr.sectionSize(c) <= visible, key
        assert hdr.sectionSize(_col(v, "name")) <= NAME_WIDTH
        assert hdr.visualIndex(_col(v, "tiles_used")) == hdr.visualIndex(_col(v, "pct_run")) + 1
        assert v.table.textElideMode() == Qt.ElideMiddle
        # numbers are never elided: each numeric column is as wide as its widest value
        fm = v.table.fontMetrics()
        for key in ("cycles", "tiles_used", "flops", "bytes_sram"):
            c = _col(v, key)
            assert hdr.sectionSize(c) >= fm.horizontalAdvance(v.model.widest(c)) + 8, key
        longest = max(v.model._display[0], key=len)
        row = v.model._display[0].index(longest)
        idx = v.model.index(v.model.perm.index(row), 0)
        assert v.model.data(idx, Qt.ToolTipRole) == longest
    finally:
        d.close()
