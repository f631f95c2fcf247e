"""Program tree view (pytest-qt, offscreen): lazy model, node -> steps, op -> node."""

import pytest
from PySide6.QtCore import QModelIndex

import popvision_lite as pvl
from popvision_lite.gui.state.document import Document
from popvision_lite.gui.views.program_tree_view import ProgramTreeView
from tests.support.insights_profile import PROGRAMS, write_small

pytestmark = pytest.mark.gui


@pytest.fixture(scope="module")
def small_path(tmp_path_factory):
    return write_small(tmp_path_factory.mktemp("treeview") / "small.pvl")


@pytest.fixture
def doc(small_path):
    d = Document(pvl.open(small_path))
    yield d
    d.close()


@pytest.fixture
def view(qtbot, doc):
    v = ProgramTreeView(doc)
    qtbot.addWidget(v)
    return v


def par_is_valid(model, idx) -> bool:
    return model.parent(idx).isValid()


def _walk(model, parent=None):
    parent = QModelIndex() if parent is None else parent
    for r in range(model.rowCount(parent)):
        idx = model.index(r, 0, parent)
        yield idx
        yield from _walk(model, idx)


def test_model_mirrors_programs_table(view, qtmodeltester):
    m = view.model
    qtmodeltester.check(m)
    seen = []
    for idx in _walk(m):
        prog = m._prog(idx)
        if view.tree_data.is_unattributed(prog):  # a row of IPU time no program owns
            assert not par_is_valid(m, idx) and view.tree_data.values(prog)[1] == "not a program"
            continue
        seen.append(prog)
        par = m.parent(idx)
        assert (m._prog(par) if par.isValid() else -1) == PROGRAMS[prog][1]
        assert m.index(idx.row(), 2, par).data() == f"{view.tree_data.values(prog)[2]:,}"
    assert sorted(seen) == [p[0] for p in PROGRAMS]


def test_selecting_node_selects_its_steps(view, doc):
    p = doc.profile
    for prog in (1, 4, 0, 7):
        before = doc.selection.state
        view.show_program(prog)  # programmatic: no echo
        assert doc.selection.state == before
        view.view.selectionModel().clear()
        view.view.setCurrentIndex(view.model.index_for(prog))  # as a click does
        st = doc.selection.state
        assert st.source == "program_tree" and st.prog_id == prog
        # range over the node and all its descendants, straight from the tables
        sub = {prog}
        for q in PROGRAMS:  # parent before child
            if q[1] in sub:
                sub.add(q[0])
        rows = p.stored_table("programs")[p.stored_table("programs")["prog_id"].isin(sub) & (p.stored_table("programs")["first_step"] >= 0)]
        assert st.step_range == (int(rows["first_step"].min()), int(rows["last_step"].max()) + 1)
        steps = p.stored_table("steps")[p.stored_table("steps")["prog_id"].isin(sub)]
        assert st.op_id == (PROGRAMS[prog][4] if PROGRAMS[prog][4] >= 0 else None)
        assert set(st.tiles) <= set(range(p.target.num_tiles))
        if prog == 7:
            assert st.tiles == (4, 5, 6, 7) and len(steps) == 1


def test_op_selected_elsewhere_expands_and_selects_node(view, doc):
    view.view.collapseAll()
    doc.selection.update(source="operations", op_id=1, prog_id=None)
    assert view.selected_program() == 5  # fwd/relu, inside loop/body
    for anc in (0, 1, 2):
        assert view.view.isExpanded(view.model.index_for(anc))
    # the tree did not write back (no echo)
    assert doc.selection.state.source == "operations"
    doc.selection.update(source="operations", op_id=None, prog_id=None)
    assert view.selected_program() is None or not view.view.selectionModel().hasSelection()


def test_focusing_the_tree_does_not_select_the_run(view, doc):
    from PySide6.QtCore import QEvent, Qt
    from PySide6.QtGui import QFocusEvent
    from PySide6.QtWidgets import QApplication

    doc.selection.update(source="operations", op_id=2, prog_id=7, step_range=(7, 8))
    before = doc.selection.state
    view.view.selectionModel().clear()
    QApplication.sendEvent(view.view, QFocusEvent(QEvent.FocusIn, Qt.TabFocusReason))
    assert view.view.currentIndex().isValid()  # Qt moved 'current' to the first row ...
    assert doc.selection.state == before       # ... which must not select the whole run


def test_op_with_several_nodes_selects_them_all(view, doc):
    # fwd/matmul (op 0) issued an Execute and a Copy, siblings in the Repeat body
    doc.selection.update(source="operations", op_id=0, prog_id=3, step_range=(0, 5))
    assert view.selected_programs() == [3, 4]
    assert view.selected_program() == 3
    assert doc.selection.state.source == "operations"


def test_step_range_from_timeline_selects_the_programs_that_issued_it(view, doc):
    doc.selection.update(source="execution", step_range=(4, 7))
    st = doc.profile.stored_table("steps")
    want = sorted(set(st["prog_id"][(st["step"] >= 4) & (st["step"] < 7)]))
    assert view.selected_programs() == want == [4, 5, 6]
    assert doc.selection.state.source == "execution"


def test_find_box_selects_matching_programs(view, doc, qtbot):
    from PySide6.QtCore import Qt

    qtbot.keyClicks(view.find_edit, "RELU")
    qtbot.keyClick(view.find_edit, Qt.Key_Return)
    assert view.selected_program() == 5
    assert doc.selection.state.prog_id == 5 and doc.selection.state.source == "program_tree"
    assert doc.selection.state.step_range == (2, 6)
    view.find_edit.setText("no such program")
    assert view.find_next() is None and "no program named" in view.status.text()


def test_selecting_a_group_selects_its_steps(qtbot):
    from pathlib import Path

    import popvision_lite as pvl
    from popvision_lite.gui.state.document import Document
    from popvision_lite.gui.views.program_tree_view import ProgramTreeView

    path = Path(__file__).resolve().parents[2] / "sample_profiles" / "bert_tiny_mk2.pvl"
    d = Document(pvl.open(path))
    v = ProgramTreeView(d)
    qtbot.addWidget(v)
    t = v.tree_data
    g = next(i for i in range(t.num_programs, len(t)) if t.label(i) == "layer0")
    v.select_program(g)
    st = d.selection.state
    assert st.prog_id is None and st.op_id is None and st.step_range == t.step_range(g)
    assert "group layer0" in v.status.text()
    d.close()


def test_top_level_rows_add_up_to_the_stated_total(qtbot):
    """Pipelined sample: the top-level rows (the IPUs' stage programs and the rows of time no program owns: host,
    waiting at syncs) add up to the total the status line states, and the stage programs are named after their
    own IPU (they all read "stage1" on IPUs 1-3 before)."""
    from pathlib import Path

    from popvision_lite.analysis.run_totals import run_totals

    path = Path(__file__).resolve().parents[2] / "sample_profiles" / "bert_mini_4ipu_pipeline.pvl"
    d = Document(pvl.open(path))
    v = ProgramTreeView(d)
    qtbot.addWidget(v)
    t = v.tree_data
    rt = run_totals(d.profile)
    top = [v.model._prog(v.model.index(r, 0)) for r in range(v.model.rowCount())]
    assert sum(int(t.cycles[t.row(p)]) for p in top) == t.total_cycles == rt.ipu_time_cycles
    assert f"{t.total_cycles:,} cycles" in v.status.text()
    assert sum(t.pct_of_run(p) for p in top) == pytest.approx(100.0)
    extra = {t.label(p): int(t.cycles[t.row(p)]) for p in top if t.is_unattributed(p)}
    host = next(c for n, c in extra.items() if n.startswith("(host"))
    assert host == rt.part_cycles["host"] and extra["(waiting at syncs for other IPUs)"] == rt.waiting_cycles
    stages = [t.label(p) for p in top if not t.is_unattributed(p)]
    assert stages == ["ipu0/stage0", "ipu1/stage1", "ipu2/stage2", "ipu3/stage3"]
    v.select_program(top[-1])  # a row of time no program owns selects nothing elsewhere
    assert "no program owns" in v.status.text() and d.selection.state.prog_id is None
    d.close()
