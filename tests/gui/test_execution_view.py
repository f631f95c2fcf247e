"""Execution view (pytest-qt, offscreen): what is drawn equals the data; keys, search, range, links."""

import numpy as np
import pytest
from PySide6.QtCore import QEvent, QPoint, QPointF, Qt
from PySide6.QtGui import QMouseEvent
from PySide6.QtWidgets import QApplication

import popvision_lite as pvl
from popvision_lite.analysis import execution as ex
from popvision_lite.gui.items.tile_lanes import tile_span
from popvision_lite.gui.state.document import Document
from popvision_lite.gui.views.execution import PAN_STEP, ZOOM_STEP, ExecutionView
from popvision_lite.testing.synthetic import write_synthetic

pytestmark = pytest.mark.gui
TPI = 64


@pytest.fixture(scope="module")
def path(tmp_path_factory):
    p = tmp_path_factory.mktemp("execview") / "run.pvl"
    write_synthetic(p, num_ipus=2, tiles_per_ipu=TPI, num_steps=300, seed=5)
    return p


@pytest.fixture
def view(qtbot, path):
    doc = Document(pvl.open(path))
    v = ExecutionView(doc)
    qtbot.addWidget(v)
    v.resize(1200, 800)
    v.show()
    qtbot.waitExposed(v)
    v.refresh()
    yield v
    doc.close()


def _bars(item):
    o = item.opts
    x0 = np.asarray(o["x0"], float) + item.pos().x()
    return x0, np.asarray(o["width"], float), np.asarray(o["y0"], float)


def _xrange(v):
    return np.array(v.x_range())


def test_whole_run_draws_summary_raster_and_chart(view):
    p = view.profile
    x0, x1 = view.x_range()
    assert x0 <= view.index.t0 and x1 >= view.index.t1
    assert view.tile_lanes.image.isVisible() and view.tile_lanes.raster is not None
    img = view.tile_lanes.image.image
    w, h = view._pixels()
    assert img.shape[1] == view.tile_lanes.raster.util.shape[1] <= w + 1 and img.shape[0] <= h + 1
    # per-step chart buckets hold every cycle of the run, by kind
    b = view.last_bins
    dur = (p.stored_table("steps").end_cycle - p.stored_table("steps").start_cycle).to_numpy()
    np.testing.assert_allclose(b.cycles.sum(), dur.sum())
    assert view.chart_plot.getAxis("left").labelText.startswith("mean cycles")


def test_zoomed_in_rectangles_equal_profile_cycles(view):
    p, idx = view.profile, view.index
    a, b = float(idx.start[100]), float(idx.end[105])
    view.tile_vb.setRange(xRange=(a, b), yRange=(60, 70), padding=0)
    view.refresh()
    assert view.tile_lanes.mode == "rects" and not view.tile_lanes.image.isVisible()
    i0, i1 = idx.visible(*view.x_range())
    t0, t1 = tile_span(*view.y_range(), view.ntiles)
    win = np.asarray(p.step_tiles.window(i0, i1, tiles=np.arange(t0, t1)).cycles, dtype=np.int64)
    drawn = {}
    for k, item in enumerate(view.tile_lanes.busy_bars):
        x, wd, y = _bars(item)
        for xi, wi, yi in zip(x, wd, y, strict=True):
            s = idx.step_at(xi)
            assert idx.kind[s] == k and xi == pytest.approx(idx.start[s])
            drawn[(s, int(np.floor(yi)))] = wi
    want = {(s, t): win[s - i0, t - t0] for s in range(i0, i1) for t in range(t0, t1) if win[s - i0, t - t0] > 0}
    assert drawn.keys() == want.keys()
    assert all(drawn[k] == pytest.approx(want[k]) for k in want)
    # waiting: from the end of the busy time to the end of the step
    x, wd, y = _bars(view.tile_lanes.wait_bars)
    for xi, wi, yi in zip(x, wd, y, strict=True):
        s = idx.step_at(xi - 0.5) if wi > 0 and idx.step_at(xi) < 0 else idx.step_at(xi)
        t = int(np.floor(yi))
        assert xi + wi == pytest.approx(idx.end[s])
        assert wi == pytest.approx(idx.dur[s] - win[s - i0, t - t0])
    # op names are drawn on wide steps
    shown = [t.toPlainText() for t in view.step_labels.labels if t.isVisible()]
    assert shown and all(any(n.endswith(s.lstrip("…")) for n in view.names.values()) for s in shown)


def test_items_are_rebased_near_the_view(view):
    idx = view.index
    a = float(idx.start[250])
    view.set_x_range(a, a + 3000)
    view.refresh()
    for item in view.step_lane.bars:
        if len(item.opts["x0"]):
            assert np.abs(np.asarray(item.opts["x0"])).max() < 1e5  # local coordinates stay small
            assert item.pos().x() == pytest.approx(np.floor(view.x_range()[0]))


def test_keys_zoom_and_pan(view, qtbot):
    c = view.canvas
    view.nav.cursor_x = None  # no cursor over the plot: zoom about the centre
    x0, x1 = view.x_range()
    qtbot.keyClick(c, Qt.Key_W)
    y0, y1 = view.x_range()
    assert y1 - y0 == pytest.approx((x1 - x0) * ZOOM_STEP, rel=1e-6)
    assert (y0 + y1) / 2 == pytest.approx((x0 + x1) / 2, rel=1e-6)
    qtbot.keyClick(c, Qt.Key_W)
    w0, w1 = view.x_range()
    qtbot.keyClick(c, Qt.Key_D)
    d0, d1 = view.x_range()
    assert d0 - w0 == pytest.approx(PAN_STEP * (w1 - w0), rel=1e-6)
    qtbot.keyClick(c, Qt.Key_A)
    np.testing.assert_allclose(view.x_range(), (w0, w1), rtol=1e-9)
    # zoom at the cursor keeps the cursor's cycle where it is on screen
    cur = w0 + 0.25 * (w1 - w0)
    view.nav.cursor_x = cur
    qtbot.keyClick(c, Qt.Key_W)
    z0, z1 = view.x_range()
    assert (cur - z0) / (z1 - z0) == pytest.approx(0.25, rel=1e-6)
    assert z1 - z0 == pytest.approx((w1 - w0) * ZOOM_STEP, rel=1e-6)
    qtbot.keyClick(c, Qt.Key_S)
    np.testing.assert_allclose(view.x_range(), (w0, w1), rtol=1e-9)
    qtbot.keyClick(c, Qt.Key_0)
    r0, r1 = view.x_range()
    assert r0 <= view.index.t0 and r1 >= view.index.t1


def test_help_marker_and_time_axis(view, qtbot):
    c = view.canvas
    assert not view.help.isVisible()
    qtbot.keyClick(c, Qt.Key_Question, Qt.ShiftModifier)
    assert view.help.isVisible() and "search" in view.help.text()
    qtbot.keyClick(c, Qt.Key_Question, Qt.ShiftModifier)
    assert not view.help.isVisible()
    view.nav.cursor_x = 12345.0
    qtbot.keyClick(c, Qt.Key_M)
    assert [m.value() for m in view.nav.markers] == [12345.0]
    ax = view.imb_plot.getAxis("bottom")
    assert ax.labelUnits == "cycles"
    view.time_box.setChecked(True)
    assert ax.labelUnits == "s" and ax.scale == pytest.approx(1.0 / view.profile.target.clock_hz)


def test_search_enter_and_shift_enter(view, qtbot):
    c = view.canvas
    qtbot.keyClick(c, Qt.Key_Slash)
    assert view.search_edit.hasFocus() or view.search_edit.isVisible()
    view.search_edit.setText("softmax")
    want = ex.match_steps(view.index, ex.search_ops(view.profile, "softmax"))
    assert len(want) > 2 and view.search.matches.tolist() == want.tolist()
    view.current_step = -1
    view.set_x_range(view.index.t0, view.index.t1)
    qtbot.keyClick(view.search_edit, Qt.Key_Return)
    assert view.current_step == want[0]
    qtbot.keyClick(view.search_edit, Qt.Key_Return)
    assert view.current_step == want[1]
    x0, x1 = view.x_range()
    assert x0 <= view.index.start[want[1]] and view.index.end[want[1]] <= x1  # jumped to it
    qtbot.keyClick(view.search_edit, Qt.Key_Return, Qt.ShiftModifier)
    assert view.current_step == want[0]
    qtbot.keyClick(view.search_edit, Qt.Key_Return, Qt.ShiftModifier)
    assert view.current_step == want[-1]  # wraps
    assert "softmax" in view.info.toPlainText()
    view.refresh()
    assert view.step_hl.isVisible()


def test_range_select_summary_and_selection(view):
    idx, p = view.index, view.profile
    a, b = float(idx.start[40]) + 1, float(idx.start[90]) - 1
    view.select_range(a, b)
    s0, s1 = idx.visible(a, b)
    assert (s0, s1) == (40, 90)
    assert view.document.selection.state.step_range == (40, 90)
    assert view.document.selection.state.source == "execution"
    rs = view.ranges.last
    cyc = np.asarray(p.step_tiles.window(40, 90).cycles, dtype=np.float64).sum(axis=0)
    assert rs.imbalance == pytest.approx(cyc.max() / cyc.mean())
    dur = idx.dur[40:90]
    assert sum(rs.cycles_by_kind.values()) == dur.sum()
    assert rs.cycles_by_kind["compute"] == dur[idx.kind[40:90] == 0].sum()
    assert f"{rs.imbalance:.2f}" in view.info.toPlainText()
    # F fits the selected range
    view.fit_selection()
    x0, x1 = view.x_range()
    assert x0 <= a and x1 >= b and (x1 - x0) < 1.1 * (b - a)


def test_shift_drag_selects_range(view, qtbot):
    vb = view.tile_vb
    x0, x1 = view.x_range()
    pa = vb.mapViewToScene(QPointF(x0 + 0.2 * (x1 - x0), 30))
    pb = vb.mapViewToScene(QPointF(x0 + 0.4 * (x1 - x0), 30))
    vp = view.canvas.viewport()
    qa, qb = view.canvas.mapFromScene(pa), view.canvas.mapFromScene(pb)
    # QTest.mouseMove carries no button state, so send the drag's events by hand
    def send(kind, pt, button, buttons):
        ev = QMouseEvent(kind, QPointF(pt), QPointF(vp.mapToGlobal(pt)), button, buttons, Qt.ShiftModifier)
        QApplication.sendEvent(vp, ev)

    send(QEvent.MouseButtonPress, qa, Qt.LeftButton, Qt.LeftButton)
    for f in np.linspace(0.1, 1, 4):
        qtbot.wait(40)  # the scene drops move events closer than ~1/60 s apart
        send(QEvent.MouseMove, qa + (qb - qa) * f, Qt.NoButton, Qt.LeftButton)
    send(QEvent.MouseButtonRelease, qb, Qt.LeftButton, Qt.NoButton)
    sr = view.document.selection.state.step_range
    assert sr is not None and view.region.isVisible()
    ra, rb = view.region.getRegion()
    assert view.index.visible(ra, rb) == sr
    np.testing.assert_allclose(view.x_range(), (x0, x1))  # shift+drag does not pan


def test_click_step_writes_op_and_shows_details(view, qtbot):
    idx = view.index
    s = int(np.flatnonzero(idx.op_id >= 0)[30])
    view.set_x_range(float(idx.start[s - 2]), float(idx.end[s + 2]))
    view.refresh()
    pos = view.step_vb.mapViewToScene(QPointF((idx.start[s] + idx.end[s]) / 2, 0.5))
    qtbot.mouseClick(view.canvas.viewport(), Qt.LeftButton, pos=view.canvas.mapFromScene(pos))
    assert view.current_step == s
    assert view.document.selection.state.op_id == idx.op_id[s]
    assert f"Step {s}" in view.info.toPlainText()
    assert view.names[int(idx.op_id[s])] in view.info.toPlainText()


def test_selection_from_other_view_highlights_steps(view):
    op = int(view.index.op_id[view.index.op_id >= 0][3])
    view.document.selection.update(source="operations", op_id=op)
    assert view.highlight_steps.tolist() == np.flatnonzero(view.index.op_id == op).tolist()
    view.refresh()
    assert view.step_hl.isVisible()
    view.document.selection.update(source="program_tree", step_range=(10, 20), op_id=None)
    assert view.region.isVisible()
    assert view.index.visible(*view.region.getRegion()) == (10, 20)
    view.refresh()
    assert not view.step_hl.isVisible()


def test_selection_of_op_with_its_own_range_tiles_and_program(view):
    from popvision_lite.analysis import selection as S

    idx = view.index
    op = int(idx.op_id[idx.op_id >= 0][5])
    steps = np.flatnonzero(idx.op_id == op)
    view.document.selection.update(source="operations", op_id=op, step_range=(int(steps[0]), int(steps[-1]) + 1),
                                   tiles=(3, 4, 5, 90))
    assert view.highlight_steps.tolist() == steps.tolist()
    assert not view.region.isVisible()          # the op's own extent is shown by its highlighted steps
    view.refresh()
    o = view.tile_band.opts
    bands = sorted(zip(np.asarray(o["y0"]).tolist(), np.asarray(o["height"]).tolist(), strict=True))
    assert bands == [(3.0, 3.0), (90.0, 1.0)]   # tiles 3-5 and 90 as two bands
    prog = int(view.profile.stored_table("programs").prog_id[view.profile.stored_table("programs").first_step >= 0].iloc[2])
    view.document.selection.update(source="program_tree", prog_id=prog, op_id=None, step_range=None, tiles=())
    assert view.highlight_steps.tolist() == S.program_steps(view.profile, prog).tolist()
    view.refresh()
    assert not view.tile_band.isVisible()


def test_double_click_expands_ipu(view):
    view._on_click(1000.0, TPI + 5.0, True, view.tile_vb)
    assert view.y_range() == pytest.approx((TPI, 2 * TPI))
    view._on_click(1000.0, TPI + 5.0, True, view.tile_vb)
    assert view.y_range() == pytest.approx((0, 2 * TPI))


def test_plot_items(view):
    items = view.plot_items()
    assert {"execution", "steps", "per_step", "imbalance"} <= set(items)
    for vb in (view.phase_vb, view.step_vb, view.tile_vb, view.chart_vb, view.imb_vb):
        assert vb.menu is None and not vb.menuEnabled()   # the lanes have no context menu


def test_the_lanes_build_no_context_menu(qtbot, path, monkeypatch):
    """The lanes have no context menu, so none is built for them (a ViewBoxMenu per lane was built, then
    dropped)."""
    import importlib

    vb_module = importlib.import_module("pyqtgraph.graphicsItems.ViewBox.ViewBox")
    built = []
    real = vb_module.ViewBoxMenu
    monkeypatch.setattr(vb_module, "ViewBoxMenu", lambda vb: built.append(vb) or real(vb))
    doc = Document(pvl.open(path))
    try:
        v = ExecutionView(doc)
        qtbot.addWidget(v)
        lanes = {v.phase_vb, v.step_vb, v.tile_vb, v.chart_vb, v.imb_vb}
        assert not lanes & set(built) and v.tile_vb.menu is None
    finally:
        doc.close()


def _wheel(view, vb, x_view, mods, delta=120):
    from PySide6.QtGui import QWheelEvent

    y0, y1 = view.y_range()
    scene = vb.mapViewToScene(QPointF(x_view, (y0 + y1) / 2))
    pt = view.canvas.mapFromScene(scene)
    vp = view.canvas.viewport()
    ev = QWheelEvent(QPointF(pt), QPointF(vp.mapToGlobal(pt)), QPoint(0, 0), QPoint(0, delta),
                     Qt.NoButton, mods, Qt.NoScrollPhase, False)
    QApplication.sendEvent(vp, ev)


def test_ctrl_wheel_zooms_time_at_cursor_and_wheel_scrolls_tiles(view):
    x0, x1 = view.x_range()
    cur = x0 + 0.25 * (x1 - x0)
    _wheel(view, view.tile_vb, cur, Qt.ControlModifier)
    z0, z1 = view.x_range()
    assert z1 - z0 < x1 - x0                               # zoomed in
    assert (cur - z0) / (z1 - z0) == pytest.approx(0.25, abs=0.01)  # about the cursor
    view.tile_vb.setYRange(20, 60, padding=0)
    y0, y1 = view.y_range()
    _wheel(view, view.tile_vb, cur, Qt.NoModifier, delta=-120)
    s0, s1 = view.y_range()
    assert s1 - s0 == pytest.approx(y1 - y0) and s0 > y0      # scrolled down through the tiles
    assert view.x_range() == pytest.approx((z0, z1))          # time untouched


class _Shifted:
    """The same profile with every step moved to start near 3e9 cycles (float precision check)."""

    OFFSET = 3_000_000_000

    def __init__(self, p):
        self._p = p
        st = p.stored_table("steps").copy()
        st["start_cycle"] += self.OFFSET
        st["end_cycle"] += self.OFFSET
        self.steps = st

    def stored_table(self, name):  # what the views read
        return self.steps if name == "steps" else self._p.stored_table(name)

    def __getattr__(self, name):
        return getattr(self._p, name)


def test_rectangles_render_at_their_cycles_near_3e9(qtbot, path):
    from popvision_lite.gui.theme import STEP_KIND_COLORS as KIND_COLORS
    from popvision_lite.gui.theme import wait_color

    p = pvl.open(path)
    doc = Document(_Shifted(p))
    v = ExecutionView(doc)
    qtbot.addWidget(v)
    v.resize(1200, 800)
    v.show()
    qtbot.waitExposed(v)
    idx = v.index
    assert idx.t0 >= _Shifted.OFFSET
    # a compute step with a busy tile that also waits: check busy and waiting pixels on screen
    cyc = np.asarray(p.step_tiles.window(0, idx.n).cycles)
    s = next(i for i in range(idx.n) if idx.kind[i] == 0 and idx.dur[i] > 0
             and 0.2 * idx.dur[i] < cyc[i, 70] < 0.8 * idx.dur[i])
    v.tile_vb.setRange(xRange=(float(idx.start[s - 1]), float(idx.end[s + 1])), yRange=(66, 74), padding=0)
    v.refresh()
    assert v.tile_lanes.mode == "rects"
    img = v.canvas.grab().toImage()

    def colour_at(x, y):
        pt = v.canvas.mapFromScene(v.tile_vb.mapViewToScene(QPointF(x, y)))
        return img.pixelColor(pt).name()

    a, busy, e = float(idx.start[s]), float(cyc[s, 70]), float(idx.end[s])
    assert colour_at(a + 0.5 * busy, 70.5) == KIND_COLORS["compute"]
    assert colour_at(a + busy + 0.5 * (e - a - busy), 70.5) == wait_color("light")
    doc.close()


@pytest.mark.parametrize("steps", [0, 1])
def test_tiny_profiles_draw(qtbot, tmp_path, steps):
    path = tmp_path / f"tiny{steps}.pvl"
    write_synthetic(path, num_ipus=1, tiles_per_ipu=8, num_steps=steps)
    doc = Document(pvl.open(path))
    v = ExecutionView(doc)
    qtbot.addWidget(v)
    v.resize(900, 700)
    v.show()
    v.refresh()
    qtbot.keyClick(v.canvas, Qt.Key_W)
    qtbot.keyClick(v.canvas, Qt.Key_0)
    v.refresh()
    assert v.index.n == steps
    if steps:
        assert v.tile_lanes.mode == "rects" and len(v.tile_lanes.cells.step) == 8
    assert not v.grab().isNull()  # drawn here, in the test: an exception in a paint fails it (pytest-qt)
    doc.close()


def test_in_main_window_linked_with_operations_selection(qtbot, tmp_path):
    """Opened through the window's registry; an op selected the way the operations view does it
    highlights exactly the op's steps here, and a step clicked here selects its op for the others."""
    from PySide6.QtCore import QSettings

    from popvision_lite.gui.app import create_app
    from popvision_lite.gui.main_window import MainWindow
    from popvision_lite.gui.state.resolve import select_op

    path = tmp_path / "w.pvl"
    write_synthetic(path, num_ipus=2, tiles_per_ipu=32, num_steps=150, seed=7)
    create_app()
    win = MainWindow(settings=QSettings(str(tmp_path / "s.ini"), QSettings.IniFormat))
    qtbot.addWidget(win)
    win.show()
    win.open_paths([path])
    qtbot.waitUntil(lambda: win.doc_tabs.count() == 1, timeout=15000)
    dw = win.doc_tabs.widget(0)
    win.show_view("execution")
    v = dw.view("execution")
    assert isinstance(v, ExecutionView)
    doc = dw.document
    op = int(v.index.op_id[v.index.op_id >= 0][7])
    select_op(doc, op, "operations")
    assert v.highlight_steps.tolist() == np.flatnonzero(v.index.op_id == op).tolist()
    s = int(np.flatnonzero(v.index.op_id >= 0)[20])
    v._on_click(float(v.index.start[s]) + 0.5, 0.5, False, v.step_vb)
    assert doc.selection.state.op_id == v.index.op_id[s] and doc.selection.state.source == "execution"
    win.cancel_tasks()
    qtbot.waitUntil(lambda: not win.busy(), timeout=10000)


def test_large_range_summary_turns_exact_off_thread(view, qtbot, monkeypatch):
    from popvision_lite.gui.views.execution import range_summary as mod

    monkeypatch.setattr(mod, "SYNC_RANGE_CELLS", 0)  # every range counts as large
    idx, p = view.index, view.profile
    view.select_range(float(idx.start[32]) + 1, float(idx.start[160]) - 1)
    assert view.ranges.last.step_range == (32, 160)
    assert not view.ranges.last.exact and "being computed" in view.info.toPlainText()
    qtbot.waitUntil(lambda: view.ranges.last.exact, timeout=10000)
    cyc = np.asarray(p.step_tiles.window(32, 160).cycles, dtype=np.float64).sum(axis=0)
    assert view.ranges.last.imbalance == pytest.approx(cyc.max() / cyc.mean())
    assert view.ranges.last.busiest.busy.tolist() == sorted(cyc, reverse=True)[:10]
    assert "being computed" not in view.info.toPlainText()


def test_busy_colour_map_follows_the_theme(view):
    """Dark theme: idle is near-black and busy bright (a white idle end glared on the dark background);
    the colour bar, the waiting bars and the legend follow; back to light restores the light map."""
    from PySide6.QtGui import QColor
    from PySide6.QtWidgets import QApplication

    from popvision_lite.gui import theme

    def lum(rgb):
        return 0.2126 * rgb[0] + 0.7152 * rgb[1] + 0.0722 * rgb[2]

    def bar_colour(lo, hi):
        return np.array(view.colorbar.colorMap().map(np.array([lo, hi]), mode="byte"))[:, :3]

    light_idle, light_busy = v_lut = view.tile_lanes.image.lut[0, :3], view.tile_lanes.image.lut[254, :3]
    assert lum(light_idle) > 200 and lum(light_busy) < 100, v_lut
    try:
        theme.apply_theme("dark", QApplication.instance())
        lut = view.tile_lanes.image.lut
        bg = lum(QColor(theme.colors()["plot_bg"]).getRgb())
        assert lum(lut[0, :3]) < 60 and lum(lut[0, :3]) > bg  # idle: dark, but not the background
        assert lum(lut[254, :3]) > 150  # fully busy: bright
        assert np.all(np.diff([lum(c) for c in lut[:255, :3]]) >= -1e-9)  # brighter as busier
        cb = bar_colour(0.0, 1.0)
        assert np.array_equal(cb[0], lut[0, :3]) and np.array_equal(cb[1], lut[254, :3])
        wait = view.tile_lanes.wait_bars.opts["brush"].color()
        assert lum(wait.getRgb()) < 100 and wait == view._legend_samples[-1].opts["brush"].color()
    finally:
        theme.apply_theme("light", QApplication.instance())
    assert np.array_equal(view.tile_lanes.image.lut[0, :3], light_idle)
    assert view.tile_lanes.wait_bars.opts["brush"].color().name() == WAIT_COLOR_LIGHT


WAIT_COLOR_LIGHT = "#c8c8c8"


def test_keys_without_a_click_marked_step_and_plain_words(qtbot, view):
    """Keys work as soon as the view shows (W/S needed a click first); a clicked step is marked on the lanes;
    the imbalance axis has no SI scale; the status line speaks words, not the raster's internal source."""
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QApplication

    view.activateWindow()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is view.canvas, timeout=5000)
    x0, x1 = view.x_range()
    qtbot.keyClick(QApplication.focusWidget(), Qt.Key_W)
    nx0, nx1 = view.x_range()
    assert nx1 - nx0 < 0.9 * (x1 - x0)
    s = int(view.index.n // 2)
    mid = (view.index.start[s] + view.index.end[s]) / 2
    view._on_click(mid, 0.5, False, view.tile_vb)
    s = view.current_step
    for band in view._step_marks:
        assert band.isVisible()
        lo, hi = band.getRegion()
        assert lo == view.index.start[s] and hi >= view.index.end[s]
    assert "x0." not in view.imb_plot.getAxis("left").labelString()
    view.reset_view()
    qtbot.waitUntil(lambda: view.status.text().startswith("Steps "), timeout=5000)
    text = view.status.text()
    assert "raster from" not in text and "summary(" not in text and "px" not in text.split()


def test_f1_lists_the_trace_viewer_keys(qtbot, settings):
    from popvision_lite.gui.main_window import MainWindow

    w = MainWindow(settings=settings)
    qtbot.addWidget(w)
    text = w.shortcuts_html()
    assert "Ctrl+wheel" in text and "<b>W</b> / <b>S</b>" in text and "<b>A</b> / <b>D</b>" in text
    assert "Show Memory" in text or "Ctrl+3" in text
