"""The Execution view's items and helpers on their own (pytest-qt, offscreen): what each draws given its inputs,
its hit-testing and tooltips, without the view around it."""

import numpy as np
import pandas as pd
import pyqtgraph as pg
import pytest
from PySide6.QtCore import QEvent, Qt
from PySide6.QtGui import QFontMetrics, QKeyEvent

import popvision_lite as pvl
from popvision_lite.analysis import execution as ex
from popvision_lite.analysis.step_phases import PhaseSpan
from popvision_lite.gui.items.fold_overlay import NOTE_MIN_PX, SHORT_NOTE_MIN_PX, FoldOverlayItem, fold_text
from popvision_lite.gui.items.imbalance import ImbalanceItem
from popvision_lite.gui.items.phase_band import PhaseBandItem, phase_html
from popvision_lite.gui.items.step_cycles import STACK_ORDER, StepCyclesItem
from popvision_lite.gui.items.step_highlight import StepHighlightItem
from popvision_lite.gui.items.step_labels import (
    LABEL_MIN_PX,
    TEXT_MARGIN_PX,
    StepLabelsItem,
    fit_name,
    label_font,
)
from popvision_lite.gui.items.step_lane import StepLaneItem
from popvision_lite.gui.items.tile_band import TileBandItem, tile_runs
from popvision_lite.gui.items.tile_lanes import TileLanesItem
from popvision_lite.gui.views.execution.navigation import PAN_STEP, ZOOM_STEP, Navigation
from popvision_lite.gui.views.execution.range_summary import RangeSummary
from popvision_lite.gui.views.execution.search import OpSearch
from popvision_lite.profile.schema import STEP_KINDS
from popvision_lite.testing.synthetic import write_synthetic

pytestmark = pytest.mark.gui
TPI = 32


@pytest.fixture(scope="module")
def prof(tmp_path_factory):
    p = tmp_path_factory.mktemp("items") / "run.pvl"
    write_synthetic(p, num_ipus=2, tiles_per_ipu=TPI, num_steps=120, seed=3)
    with pvl.open(p) as prof:
        yield prof


@pytest.fixture
def index(prof):
    return ex.StepIndex.from_profile(prof)


def _x(bar):
    return np.asarray(bar.opts["x0"], float) + bar.pos().x()


# ------------------------------------------------------------------ step lane and its names
def test_step_lane_draws_each_step_once_in_its_kind_then_a_raster(qapp, prof, index):
    lane = StepLaneItem(index, 2, prof.stored_table("steps"))
    x0, x1 = float(index.start[10]), float(index.end[30])
    origin = float(np.floor(x0))
    drawn = lane.draw(x0, x1, 1000, origin)
    i0, i1 = index.visible(x0, x1)
    assert drawn.tolist() == list(range(i0, i1)) and not lane.image.isVisible()
    for k, bar in enumerate(lane.bars):
        want = np.flatnonzero(index.kind[i0:i1] == k) + i0
        np.testing.assert_allclose(_x(bar), index.start[want])
        np.testing.assert_allclose(bar.opts["width"], index.dur[want])
        # an IPU's steps fill its half of the lane, steps on every IPU the whole lane
        ip = index.ipu[want]
        np.testing.assert_allclose(bar.opts["height"], np.where(ip >= 0, 0.5, 1.0))
    # more than two steps a pixel column: the kind shares, one band per IPU, no bars
    drawn = lane.draw(float(index.t0), float(index.t1), 20, 0.0)
    assert len(drawn) == 0 and lane.image.isVisible() and not any(b.isVisible() for b in lane.bars)
    img = lane.image.image
    assert img.shape == (2 * 24, 20, 4)   # rows = max(4, 48 // 2) per IPU band
    assert (img[..., 3] > 0).any()


def test_step_labels_name_only_wide_steps(qapp, index):
    names = {int(o): f"layer/op{o}" for o in np.unique(index.op_id) if o >= 0}
    labels = StepLabelsItem(index, names)
    i = int(np.flatnonzero(index.op_id >= 0)[5])
    x0, x1 = float(index.start[i]), float(index.end[i])
    labels.draw(np.array([i]), x0, x1, 400)  # the one step fills 400 px
    assert labels.shown() == [names[int(index.op_id[i])]]
    labels.draw(np.array([i]), x0, x0 + (x1 - x0) * 400 / (LABEL_MIN_PX - 1), 400)  # narrower than the minimum
    assert labels.shown() == []
    fm = QFontMetrics(label_font())
    short = fit_name("layer/attention/matmul", 60)
    # the end of the name after an ellipsis, as much as fits inside the label's margins, and no more
    assert short.startswith("…") and "layer/attention/matmul".endswith(short[1:]) and len(short) > 2
    longer = "…" + "layer/attention/matmul"[-len(short):]
    assert fm.horizontalAdvance(short) <= 60 - 2 * TEXT_MARGIN_PX < fm.horizontalAdvance(longer)


def _pipelined_index():
    """Three steps that overlap in time: IPU 0's, IPU 1's, and one on every IPU (ipu = -1)."""
    steps = pd.DataFrame({"step": [0, 1, 2], "start_cycle": [0, 10, 20], "end_cycle": [1000, 1000, 1000], "kind": [0, 0, 1],
                          "op_id": [0, 1, 2], "ipu": [0, 1, -1], "busy_max": 0.0, "busy_mean": 0.0,
                          "tiles_active": 0, "bytes_in": 0, "bytes_out": 0})
    return ex.StepIndex(steps, 2)


def test_step_labels_sit_in_their_ipus_sub_lane(qapp):
    index = _pipelined_index()
    labels = StepLabelsItem(index, {0: "stage0/op", 1: "stage1/op", 2: "all/sync"}, num_ipus=2)
    labels.draw(np.arange(3), 0.0, 1000.0, 800)
    y = {t.toPlainText(): t.pos().y() for t in labels.labels if t.isVisible()}
    # IPU 0 at the bottom of the lane, IPU 1 above it, a step on every IPU across the middle
    assert y == {"stage0/op": 0.25, "stage1/op": 0.75, "all/sync": 0.5}
    one_lane = StepLabelsItem(index, {0: "first", 1: "second", 2: "third"})
    np.testing.assert_allclose(one_lane.lane_y(np.arange(3)), [0.5, 0.5, 0.5])
    # in one lane the three start 8 and 16 px apart: only the first name is drawn, the others would lie over it
    one_lane.draw(np.arange(3), 0.0, 1000.0, 800)
    assert one_lane.shown() == ["first"]
    one_lane.draw(np.arange(3), 0.0, 100.0, 800)  # zoomed in 10x: 80 and 160 px apart, room for all three
    assert one_lane.shown() == ["first", "second", "third"]
    # a step that began left of the view: its name fits the part in view (100 cycles = 80 px), not its whole
    long = StepLabelsItem(index, {0: "layer0/attention/softmax"})
    long.draw(np.array([0]), 900.0, 1900.0, 800)
    (shown,) = long.shown()
    assert shown == fit_name("layer0/attention/softmax", 80.0) and shown.startswith("…")
    assert QFontMetrics(label_font()).horizontalAdvance(shown) <= 80 - 2 * TEXT_MARGIN_PX


# ------------------------------------------------------------------ tile lanes: level of detail, hover
def test_tile_lanes_exact_then_raster_with_tooltips(qapp, prof, index):
    lanes = TileLanesItem(prof, index, 2 * TPI)
    a, b = 20, 24
    x0, x1 = float(index.start[a]), float(index.cummax_end[b - 1])
    assert lanes.draw(x0, x1, 0, 8, 1000, 400, float(np.floor(x0)))   # 8 tiles on 400 px: exact
    assert lanes.mode == "rects" and lanes.raster is None and not lanes.image.isVisible()
    cells = lanes.cells
    assert set(cells.tile.tolist()) <= set(range(8)) and "every step of every tile" in lanes.status
    busy = sum(int((np.asarray(bar.opts["width"]) > 0).sum()) for bar in lanes.busy_bars)
    assert busy == int((cells.busy > 0).sum())
    assert lanes.tooltip_at(x0 + 1, 1.0) is None  # no raster to describe
    # the whole run on 64 px rows of 2 tiles: a raster, and a tooltip of the pixel under the mouse
    assert not lanes.draw(float(index.t0), float(index.t1), 0, 2 * TPI, 50, 32, 0.0)
    r = lanes.raster
    assert lanes.image.isVisible() and r is not None and not any(b.isVisible() for b in lanes.busy_bars)
    c, row = 7, 3
    x, y = (r.edges[c] + r.edges[c + 1]) / 2, (r.row_tiles[row] + r.row_tiles[row + 1]) / 2
    tip = lanes.tooltip_at(x, y)
    assert tip.startswith(f"tiles {r.row_tiles[row]}-{r.row_tiles[row + 1] - 1}\n")
    assert f"busy {100 * r.util[row, c]:.0f}% of time" in tip
    assert lanes.tooltip_at(r.edges[-1] + 10, y) is None and lanes.tooltip_at(x, -5) is None


# ------------------------------------------------------------------ highlights
def test_step_highlight_merges_to_pixel_columns(qapp, index):
    hl = StepHighlightItem(index, 64.0, pg.mkBrush("r"), pg.mkPen(None))
    hl.set_steps(np.array([3, 9]), float(index.t0), float(index.t1), 1000, 0.0)
    assert hl.isVisible()
    np.testing.assert_allclose(_x(hl), index.start[[3, 9]])
    np.testing.assert_allclose(hl.opts["height"], [64.0, 64.0])
    every = np.arange(index.n)
    hl.set_steps(every, float(index.t0), float(index.t1), 10, 0.0)  # 120 steps on 10 px: one bar a column
    assert len(hl.opts["x0"]) <= 10
    np.testing.assert_allclose(hl.opts["width"], (index.t1 - index.t0) / 10)
    hl.set_steps(np.zeros(0, np.int64), 0.0, 1.0, 10, 0.0)
    assert not hl.isVisible()


def test_tile_band_one_bar_per_run_of_tiles(qapp):
    a, b = tile_runs([9, 3, 5, 4, 4])
    assert a.tolist() == [3, 9] and b.tolist() == [6, 10]
    band = TileBandItem()
    band.set_tiles([9, 3, 5, 4], 100.0, 300.0)
    assert band.isVisible() and band.opts["y0"].tolist() == [3.0, 9.0] and band.opts["height"].tolist() == [3.0, 1.0]
    np.testing.assert_allclose(_x(band), [100.0, 100.0])
    np.testing.assert_allclose(band.opts["width"], [200.0, 200.0])
    band.set_tiles([], 0.0, 1.0)
    assert not band.isVisible()


# ------------------------------------------------------------------ per-step charts
def test_cycles_stack_in_order_and_imbalance_on_log_scale(qapp, index):
    b = ex.step_bins(index, float(index.start[0]), float(index.end[9]), 1000)
    cyc = StepCyclesItem()
    top = cyc.set_bins(b, 0.0)
    base = np.zeros(len(b.left))
    for kind in STACK_ORDER:  # each kind sits on the ones before it
        k = STEP_KINDS.index(kind)
        np.testing.assert_allclose(cyc.bars[k].opts["y0"], base)
        base = base + b.per_step_cycles[k]
    assert top == pytest.approx(max(base.max(), 1.0) * 1.1)
    imb = ImbalanceItem()
    top = imb.set_bins(b, 0.0)
    xs, ys = imb.getData()
    m = np.isfinite(b.imbalance) & (b.imbalance > 0)
    np.testing.assert_allclose(ys[0::2], np.log10(np.maximum(b.imbalance[m], 1.0)))
    np.testing.assert_allclose(xs[0::2], b.left[m])
    assert top == pytest.approx(max(ys.max(), np.log10(1.5)) * 1.08)


# ------------------------------------------------------------------ phases and folded stretches
def _span(name, kind, start, end, runs=1, hidden=()):
    return PhaseSpan(phase_id=0, name=name, kind=kind, label=f"{name} x{runs}" if runs > 1 else name, start=start,
                     end=end, one_run=(end - start) // runs, runs=runs, stored_runs=1, first_step=0, last_step=3,
                     traffic="", hidden=hidden)


SPANS = [_span("fill", "fill", 0, 1000), _span("steady state", "steady", 1000, 15000, runs=14,
                                                 hidden=((2000, 15000),)), _span("drain", "drain", 15000, 16000)]


def test_phase_band_names_visible_phases_and_hit_tests(qapp):
    band = PhaseBandItem(SPANS)
    band.draw(0.0, 16000.0, 1600)
    assert sorted(band.shown()) == sorted(s.label for s in SPANS)
    assert band.bars["steady"].opts["x0"].tolist() == [1000.0] and band.bars["fill"].opts["width"].tolist() == [1000.0]
    assert band.hatch.isVisible() and band.hatch.opts["x0"].tolist() == [2000.0]
    band.draw(0.0, 900.0, 1600)  # only the fill in view
    assert band.shown() == ["fill"]
    assert band.phase_at(1500).name == "steady state" and band.phase_at(16000) is None
    assert "Phase: steady state x14" in phase_html(SPANS[1], 1e9) and "hatched" in phase_html(SPANS[1], 1e9)


def test_fold_overlay_notes_only_where_wide_enough(qapp):
    fold = FoldOverlayItem(SPANS, -0.5, 64.5, 1e9, notes=True)
    assert fold.isVisible() and fold.cover.opts["x0"].tolist() == [2000.0]
    assert fold.hatch.opts["height"].tolist() == [65.0]
    fold.draw(0.0, 16000.0, 1600, 0.0, 64.0)  # 13,000 cycles = 1300 px
    (note,) = fold.shown_notes()
    assert note == fold_text(SPANS[1], 2000, 15000, 1e9) and "13 more runs" in note and "x14" in note
    fold.draw(0.0, 16000.0, int(NOTE_MIN_PX * 16000 / 13000) - 2, 0.0, 64.0)  # narrower than a note needs
    assert fold.shown_notes() == ["steady state:\nfolded"]  # a short one: no hatched span is left unnamed
    fold.draw(0.0, 16000.0, int(SHORT_NOTE_MIN_PX * 16000 / 13000) - 2, 0.0, 64.0)  # narrower still: none
    assert fold.shown_notes() == []
    quiet = FoldOverlayItem(SPANS, 0.0, 1.0, 1e9)
    quiet.draw(0.0, 16000.0, 1600, 0.0, 1.0)
    assert quiet.shown_notes() == []
    assert not FoldOverlayItem(SPANS[:1], 0.0, 1.0, 1e9).isVisible()  # nothing hidden, nothing drawn


# ------------------------------------------------------------------ helpers: navigation, search, range
def _key(key, text="", mods=Qt.NoModifier):
    return QKeyEvent(QEvent.KeyPress, key, mods, text)


def test_navigation_zooms_pans_and_runs_commands(qapp):
    plot = pg.PlotItem()
    vb = plot.getViewBox()
    vb.setXRange(0.0, 1000.0, padding=0)
    ran = []
    jumps = iter([5, -1])
    nav = Navigation(vb, plot, 1e9, {"fit": lambda: ran.append("fit"), "reset": lambda: ran.append("reset"),
                                      "search": lambda: ran.append("search"), "help": lambda: ran.append("help"),
                                      "escape": lambda: ran.append("escape"),
                                      "jump": lambda fwd: ran.append(("jump", fwd)) or next(jumps)})
    nav.cursor_x = 250.0
    assert nav.handle_key(_key(Qt.Key_W, "w"))
    x0, x1 = nav.x_range()
    assert x1 - x0 == pytest.approx(1000.0 * ZOOM_STEP) and (250 - x0) / (x1 - x0) == pytest.approx(0.25)
    assert nav.handle_key(_key(Qt.Key_D, "d"))
    assert nav.x_range()[0] - x0 == pytest.approx(PAN_STEP * (x1 - x0))
    said = []
    nav.message.connect(said.append)
    assert nav.handle_key(_key(Qt.Key_M, "m"))
    assert [m.value() for m in nav.markers] == [250.0] and said == ["marker at cycle 250 (250 ns)"]
    for key, text in ((Qt.Key_F, "f"), (Qt.Key_0, "0"), (Qt.Key_Slash, "/"), (Qt.Key_Question, "?"),
                      (Qt.Key_Escape, "")):
        assert nav.handle_key(_key(key, text))
    assert ran == ["fit", "reset", "search", "help", "escape"]
    # Enter is the view's only while there is a match to jump to
    assert nav.handle_key(_key(Qt.Key_Return, "\r", Qt.ShiftModifier)) and ran[-1] == ("jump", False)
    assert not nav.handle_key(_key(Qt.Key_Return, "\r"))
    assert not nav.handle_key(_key(Qt.Key_Q, "q"))


def test_op_search_jumps_and_wraps(prof, index):
    search = OpSearch(prof, index)
    assert search.jump(0) == -1
    said = search.set_text("softmax")
    want = ex.match_steps(index, ex.search_ops(prof, "softmax"))
    assert len(want) > 1 and search.matches.tolist() == want.tolist()
    assert said == f"search 'softmax': {len(ex.search_ops(prof, 'softmax'))} ops, {len(want)} steps"
    assert search.jump(-1) == want[0] and search.pos == 0
    assert search.jump(int(want[-1])) == want[0]             # wraps forward
    assert search.jump(int(want[0]), forward=False) == want[-1]  # and backward
    assert search.set_text("") == "" and len(search.matches) == 0


def test_range_summary_of_cycles_says_its_steps(qapp, prof, index):
    names = ex.op_names(prof)
    rs = RangeSummary(prof, index, names, 2 * TPI, 1e9)
    shown = []
    rs.shown.connect(shown.append)
    assert rs.summarise(float(index.start[10]) + 1, float(index.start[40]) - 1) == (10, 40)
    assert rs.last.step_range == (10, 40) and rs.last.exact
    assert len(shown) == 1 and "Range: steps 10-39" in shown[0] and f"{rs.last.imbalance:.2f}" in shown[0]
    # its cycles are by step kind (the phases of the step are the phase band's): the heading says which
    assert "Cycles by step kind" in shown[0] and "Cycles by phase" not in shown[0]
    assert rs.summarise(float(index.t1) + 10, float(index.t1) + 20) is None and len(shown) == 1


def test_lane_axis_names_as_many_ipus_as_the_pixels_allow(qtbot):
    """64 IPUs on a 60-pixel lane printed on top of each other (issue 46): names are thinned to every k-th IPU
    (k in 1, 2, 4, 5, 8, 10, 16, ...), at least MIN_LABEL_PX apart, none when even two do not fit."""
    from popvision_lite.gui.items.lane_axis import MIN_LABEL_PX, LaneAxis, label_stride

    assert label_stride(4, 200) == 1 and label_stride(1, 5) == 1
    assert label_stride(64, 160) == 8 and label_stride(64, 60) == 20 and label_stride(64, 10) == 0
    ax = LaneAxis(64)
    for px in (10, 60, 160, 400, 2000):
        labels = ax.lane_labels(px)
        ys = [y for y, _ in labels]
        assert all(b - a >= MIN_LABEL_PX / px - 1e-12 for a, b in zip(ys, ys[1:], strict=False))
        assert all(t == f"IPU {int(y * 64)}" for y, t in labels)
    assert [t for _, t in ax.lane_labels(2000)] == [f"IPU {i}" for i in range(64)]
    # every 8th IPU; IPU 0's lane is 1.25 px from the end, where its name would be cut: left out
    assert [t for _, t in ax.lane_labels(160)] == [f"IPU {i}" for i in range(8, 64, 8)]
    assert [t for _, t in LaneAxis(1).lane_labels(30)] == ["steps"]
    # pyqtgraph asks for the ticks of the visible y range at the axis' pixel size
    (spacing, values), = ax.tickValues(0.0, 1.0, 160)
    assert ax.tickStrings(values, 1.0, spacing) == [f"IPU {i}" for i in range(8, 64, 8)]


def test_lanes_text_names_every_span_not_stored():
    """Fill and drain of a deep pipeline that the profile does not store (98.8 % of a 64-stage step) are named in
    the lanes sentence with their share of the step, beside a folded steady state and the host's terms."""
    from types import SimpleNamespace

    from popvision_lite.analysis.step_phases import lanes_text

    rt = SimpleNamespace(drawn_text="the only replica drawn", ipu_count_text="1 replica x 64 stages = 64 IPUs",
                         step_cycles=1000, tensor_parallel=1)
    why = "pipeline cycles the profile does not store"
    spans = [PhaseSpan(0, "fill", "fill", "fill", 0, 490, 490, 1, 0, -1, -1, "", ((0, 490),), why),
             PhaseSpan(1, "steady state", "steady", "steady state x2", 490, 502, 6, 2, 1, 0, 9, "", ((496, 502),)),
             PhaseSpan(2, "drain", "drain", "drain", 502, 990, 488, 1, 0, -1, -1, "", ((502, 990),), why),
             PhaseSpan(3, "host_step", "term", "host step", 990, 1000, 10, 1, 0, -1, -1, "", ((990, 1000),), "host")]
    text = lanes_text(rt, spans)
    assert "one lane per IPU of the replica" in text
    assert "(fill: not stored, 49.0 % of the step; steady state x2: 1 drawn, 1 folded; drain: not stored, 48.8 % " \
           "of the step; host step: the IPUs wait for the host)" in text
    tp = lanes_text(SimpleNamespace(**{**vars(rt), "tensor_parallel": 8}), [])
    assert "ONE IPU of the stage's 8-IPU tensor-parallel group" in tp and "Hatched" not in tp


def test_a_note_wider_than_its_stretch_at_the_views_edge_stays_in_the_view():
    from popvision_lite.gui.items.fold_overlay import note_x

    assert note_x(40.0, 60.0, 10.0, 0.0, 100.0) == 50.0  # fits: the middle of its stretch
    assert note_x(90.0, 100.0, 30.0, 0.0, 100.0) == 85.0  # the host step at the end: moved in to end at 100
    assert note_x(0.0, 4.0, 30.0, 0.0, 100.0) == 15.0  # the fill at the start: moved in to start at 0
    assert note_x(0.0, 100.0, 300.0, 0.0, 100.0) == 50.0  # wider than the view: centred
