"""Insights view (pytest-qt, offscreen): findings rendered with links that select tiles / ops / variables."""

import pytest
from PySide6.QtCore import Qt

import popvision_lite as pvl
from popvision_lite.gui.state.document import Document
from popvision_lite.gui.views.insights_view import InsightsView
from tests.support.insights_profile import write_small

pytestmark = pytest.mark.gui


@pytest.fixture(scope="module")
def paths(tmp_path_factory):
    d = tmp_path_factory.mktemp("insview")
    return write_small(d / "base.pvl"), write_small(d / "rc.pvl", recompute=True)


@pytest.fixture
def view(qtbot, paths):
    d = Document(pvl.open(paths[0]))
    v = InsightsView(d)
    qtbot.addWidget(v)
    qtbot.waitUntil(lambda: bool(v.findings), timeout=10000)
    yield v
    d.close()


def test_renders_findings_worst_first(view):
    text = view.browser.toPlainText()
    assert text.index("Out of memory") < text.index("Why it does not fit") < text.index("Try recomputation") \
        < text.index("Tiles using the most memory")
    bt = view.document.profile.stored_table("memory_by_tile")
    worst = int((bt["total"] - bt["capacity"]).idxmax())
    assert f"tile {worst} needs {int(bt.loc[worst, 'total']):,} B" in text
    assert view.status.text().startswith(f"{len(view.findings)} findings: 2 errors, ")  # out of memory, why


def test_links_select_tiles_ops_and_variables(view, qtbot):
    doc = view.document
    links = view.links()
    oom = next(f for f in view.findings if f.kind == "oom")
    assert f"pvl:tile/{oom.tiles[0]}" in links
    view.follow(f"pvl:tile/{oom.tiles[0]}")
    assert doc.selection.state.tiles == (oom.tiles[0],) and doc.selection.state.source == "insights"
    view.follow("pvl:tiles/" + ",".join(map(str, oom.tiles)))
    assert doc.selection.state.tiles == tuple(oom.tiles)
    # "select all" selects every over-capacity tile of the finding
    i = view._shown.index(oom)
    assert f"pvl:finding-tiles/{i}" in links
    doc.selection.clear()
    view.follow(f"pvl:finding-tiles/{i}")
    bt = doc.profile.stored_table("memory_by_tile")
    assert sorted(doc.selection.state.tiles) == bt.index[bt["over_capacity"]].tolist()
    # an op link selects the op with its tiles and steps
    assert "pvl:op/0" in links
    view.follow("pvl:op/0")
    qtbot.waitUntil(lambda: doc.selection.state.op_id == 0 and doc.selection.state.tiles != ())
    assert doc.selection.state.step_range == (0, 5) and doc.selection.state.tiles == (0, 1, 2, 3, 4)
    # a variable link selects the tiles the variable lives on
    vt = doc.profile.stored_table("variable_tiles")
    view.follow("pvl:var/3")
    assert doc.selection.state.tiles == tuple(sorted(vt[vt["var_id"] == 3]["tile"].tolist()))
    assert doc.selection.state.op_id is None


def test_compare_with_recompute_run(view, paths, qtbot):
    w = view.compare_with_path(paths[1])
    qtbot.waitUntil(lambda: any(f.kind == "recompute_saved" for f in view.extra), timeout=10000)
    assert w is not None
    f = view.extra[-1]
    with pvl.open(paths[1]) as rc:
        saved = int(view.document.profile.stored_table("liveness_steps")["total_bytes"].max() - rc.liveness_steps["total_bytes"].max())
    assert f.numbers["saved_peak_bytes"] == saved
    assert f"saved {saved:,} B" in view.browser.toPlainText()


def test_recompute_profile_says_it_is_on(qtbot, paths):
    d = Document(pvl.open(paths[1]))
    v = InsightsView(d)
    qtbot.addWidget(v)
    qtbot.waitUntil(lambda: bool(v.findings), timeout=10000)
    assert "Recomputation is on" in v.browser.toPlainText()
    # cached: a second view shows the findings at once
    v2 = InsightsView(d)
    qtbot.addWidget(v2)
    assert v2.findings == v.findings
    d.close()


def test_compare_button_asks_for_a_file(view, paths, qtbot, monkeypatch):
    from PySide6.QtWidgets import QFileDialog

    asked = []

    def fake(*args, **kwargs):
        asked.append(args)
        return str(paths[1]), "Profiles (*.pvl)"

    monkeypatch.setattr(QFileDialog, "getOpenFileName", staticmethod(fake))
    qtbot.mouseClick(view.compare_btn, Qt.LeftButton)
    qtbot.waitUntil(lambda: bool(view.extra), timeout=10000)
    assert asked and view.extra[0].kind == "recompute_saved"
    text = view.browser.toPlainText().strip()
    assert text.startswith("INFO") and text.index("What recomputation saved") < text.index("Out of memory")


def test_compare_with_a_broken_file_reports_it(view, tmp_path, qtbot):
    bad = tmp_path / "bad.pvl"
    bad.write_bytes(b"not a profile")
    view.compare_with_path(bad)
    qtbot.waitUntil(lambda: view.status.text().startswith("Compare failed"), timeout=10000)
    assert "bad.pvl" in view.status.text() and not view.extra


def test_theme_change_after_the_view_is_gone(qtbot, paths):
    import shiboken6

    from popvision_lite.gui import theme

    d = Document(pvl.open(paths[0]))
    v = InsightsView(d)
    qtbot.waitUntil(lambda: bool(v.findings), timeout=10000)
    theme.notifier.changed.emit("dark")  # alive: re-renders
    shiboken6.delete(v)
    theme.notifier.changed.emit("light")  # gone: must not touch the deleted browser
    d.close()
