"""Pod-scale runs shown truthfully (a pipelined, replicated run whose profile stores one of its steady-state
runs): the Execution view's phase band, the folded steady state, lanes, pan limits, the data-moving phases'
bytes and links; the Summary's IPU count, bottleneck and shares."""

from __future__ import annotations

import numpy as np
import pytest

import popvision_lite as pvl
from popvision_lite.analysis import step_phases as sp
from popvision_lite.analysis.run_totals import run_totals
from popvision_lite.gui.items.phase_band import layout_labels


@pytest.fixture(scope="module")
def prof(pod_profile):
    with pvl.open(pod_profile) as p:
        yield p


@pytest.fixture
def doc(prof):
    from popvision_lite.gui.state.document import Document

    return Document(prof)


@pytest.fixture
def exe(qtbot, doc):
    from popvision_lite.gui.views.execution import ExecutionView
    from tests.support.qt import show_view

    v = show_view(qtbot, ExecutionView(doc))
    v.refresh()
    return v


# ------------------------------------------------------------------ analysis: the phases as drawn
def test_phase_spans_follow_the_phases_table(prof):
    spans = sp.phase_spans(prof)
    ph = prof.stored_table("phases")
    assert [s.name for s in spans] == list(ph["name"])
    for s, r in zip(spans, ph.itertuples(), strict=True):
        assert s.start == r.start_cycle and s.end == r.start_cycle + r.cycles * r.runs_per_step
    steady = next(s for s in spans if s.kind == "steady")
    assert steady.runs == 14 and steady.stored_runs == 1 and steady.folded and steady.folded_runs == 13
    assert steady.label == "steady state x14"
    # the hidden stretch is exactly the part of the steady state no stored step covers
    (a, b), = steady.hidden
    st = prof.stored_table("steps").iloc[steady.first_step:steady.last_step + 1]
    assert a == st["end_cycle"].max() and b == steady.end
    assert sp.hidden_at(spans, (a + b) / 2) is steady and sp.hidden_at(spans, a - 1) is None
    # the step ends where the last phase ends
    assert sp.run_end(spans, int(prof.stored_table("steps")["end_cycle"].max())) == spans[-1].end == run_totals(prof).step_cycles


def test_traffic_of_data_phases(prof):
    sch = dict(prof.run)["schedule"]
    ar = next(s for s in sp.phase_spans(prof) if s.kind == "allreduce")
    per = max(sch["allreduce_bytes_per_ipu"])
    params = max(t["params"] for t in dict(prof.run)["training_state"])
    assert per == params * 2  # fp16 gradients of the largest stage
    assert "IPU-Links" in ar.traffic and "2 replicas" in ar.traffic
    # a profile written before the bytes were recorded says so instead of showing 0
    from popvision_lite.profile.run_record import Schedule

    old = {k: v for k, v in sch.items() if k not in ("allreduce_bytes_per_ipu", "allreduce_links")}
    assert "not recorded" in sp.traffic_text(Schedule.build(old), "allreduce")
    assert "no link traffic" in sp.traffic_text(prof.schedule, "optimizer")


def test_label_layout_never_overlaps():
    # a wide phase, then four phases a few pixels wide at the right edge (the end of a pod-scale step)
    centres = [400.0, 960.0, 995.0, 996.0, 998.0, 999.0]
    widths = [110.0, 60.0, 70.0, 70.0, 60.0, 70.0]
    x, row = layout_labels(centres, widths, 1000.0)
    assert (x >= 0).all() and (x + np.array(widths) <= 1000.0 + 1e-9).all()
    for r in set(row):
        idx = sorted(np.flatnonzero(row == r), key=lambda i: x[i])
        for i, j in zip(idx, idx[1:], strict=False):
            assert x[i] + widths[i] <= x[j], (i, j)


# ------------------------------------------------------------------ execution view
def _band_labels(view):
    return [t for t in view.phase_band.labels if t.isVisible()]


def _assert_labels_apart(view):
    labels = _band_labels(view)
    m = labels[0].textItem.document().documentMargin()  # the text's blank margin is no part of what it covers
    boxes = [t.textItem.mapToScene(t.textItem.boundingRect().adjusted(m, m, -m, -m)).boundingRect() for t in labels]
    for i in range(len(boxes)):
        for j in range(i + 1, len(boxes)):
            inter = boxes[i].intersected(boxes[j])
            assert inter.isEmpty() or inter.width() * inter.height() < 4, (labels[i].textItem.toPlainText(),
                                                         labels[j].textItem.toPlainText())


def test_phase_band_names_every_phase_at_every_zoom(exe, qtbot):
    spans = exe.phase_spans
    names = {t.textItem.toPlainText() for t in _band_labels(exe)}
    assert names == {s.label for s in spans}
    _assert_labels_apart(exe)
    # zoomed into the stored steady-state run: the phases in view are still named, the rest not
    steady = next(s for s in spans if s.kind == "steady")
    exe.set_x_range(steady.start, steady.hidden[0][0])
    exe.refresh()
    names = {t.textItem.toPlainText() for t in _band_labels(exe)}
    assert steady.label in names and "all-reduce" not in names
    _assert_labels_apart(exe)
    # every visible label lies inside the band's view
    x0, x1 = exe.x_range()
    for t in _band_labels(exe):
        assert x0 - 1 <= t.pos().x() <= x1


def test_folded_steady_state_is_marked_not_idle(exe):
    steady = next(s for s in exe.phase_spans if s.kind == "steady")
    host = next(s for s in exe.phase_spans if s.kind == "term")  # the run's default host step (host framework auto)
    (a, b), = steady.hidden
    assert host.hidden == ((host.start, host.end),) and host.name == "host_step"
    tiles = next(f for f in exe.folds if f.y_hi > exe.ntiles)  # over the tile lanes
    assert tiles.isVisible()
    # the stretches no stored step covers: the folded steady state and the host step (no BSP step runs in it)
    for it in (tiles.cover, tiles.hatch, exe.phase_band.hatch):
        assert list(it.opts["x0"]) == [a, host.start] and list(it.opts["width"]) == [b - a, host.end - host.start]
    # the whole step: the host step takes most of it and says so, with its source
    notes = tiles.shown_notes()
    assert any(n.startswith("host step: the IPUs wait for the host (host step 167 ms (calibrated, PopART))")
               for n in notes), notes
    # the IPUs' part of the step: the folded steady state is wide enough for its note
    exe.set_x_range(0, host.start)
    exe.refresh()
    notes = tiles.shown_notes()
    assert any("13 more runs" in n and "x14" in n for n in notes), notes
    # a click in the folded span tells what it stands for
    exe._on_click((a + b) / 2, 10, False, exe.tile_vb)
    text = exe.info.toPlainText()
    assert "steady state x14" in text and "13 more runs" in text


def test_lanes_replica_and_ipu_count_said(exe, prof):
    rt = run_totals(prof)
    assert "replica 1 of 2" in exe.drawn_label.text() and "2 replicas x 2 stages = 4 IPUs" in exe.drawn_label.text()
    assert "steady state x14: 1 drawn, 13 folded; host step: the IPUs wait for the host" in exe.drawn_label.text()
    axis = exe.step_plot.getAxis("left")
    assert [t for _, t in axis.lane_labels(exe.step_plot.height())] == ["IPU 0", "IPU 1"] and rt.stages == 2


def test_view_cannot_pan_past_the_run(exe):
    end = exe.run_end
    exe.set_x_range(end - 1000, end + 10 * end)
    x0, x1 = exe.x_range()
    assert x1 <= end + 1e-6
    exe.pan(5.0)
    assert exe.x_range()[1] <= end + 1e-6
    exe.set_x_range(-end, end / 2)
    assert exe.x_range()[0] >= -1e-6


def test_all_reduce_step_shows_bytes_and_links(exe, prof):
    ar = next(s for s in exe.phase_spans if s.kind == "allreduce")
    exe.show_step(ar.first_step)
    text = exe.info.toPlainText()
    assert "all-reduce" in text and "IPU-Links" in text and ("MiB" in text or "KiB" in text)
    assert "(none)" not in text and "id -1" not in text


def test_cycles_strip_whole_and_in_units(exe):
    tops = [np.max(np.asarray(b.opts["y0"]) + np.asarray(b.opts["height"])) for b in exe.cycles.bars
            if len(b.opts["height"])]
    assert max(tops) <= exe.chart_vb.viewRange()[1][1]
    ax = exe.chart_plot.getAxis("left")
    strings = ax.tickStrings([0.0, 2.5e6, 1.5e7], 1.0, 1e6)
    assert strings == ["0", "2.5 M", "15 M"]
    assert not any("e+" in s for s in strings)


# ------------------------------------------------------------------ summary
def test_summary_names_the_bottleneck_and_counts_ipus(qtbot, doc, prof):
    """The fixture's run has the default host step (host framework auto: PopART for BERT, issue 44), 167 ms against
    a few ms of IPU work: the bottleneck is the host, named with its source, and its own bar, not sync."""
    from popvision_lite.gui.views.summary_view import SummaryView
    from tests.support.qt import show_view

    v = show_view(qtbot, SummaryView(doc))
    rt = run_totals(prof)
    title = v.plot.getPlotItem().titleLabel.text
    assert rt.ipu_count_text in title and rt.bottleneck_text in title
    assert rt.bottleneck == "host" and rt.part_share["host"] > 0.9
    assert rt.bottleneck_text.startswith("host: IPUs waiting for the host step 167 ms (calibrated, PopART) (")
    assert rt.part_share["sync"] < 0.05  # the host's time is not sync
    info = v.info.text()
    assert rt.ipu_count_text in info and "replica 1 of 2" in info and rt.bottleneck_text in info
    # the bars are the shares of the IPU time and add up to 100 %
    widths = [float(b.opts["width"][0]) for b in v.phase_bars]
    assert sum(widths) == pytest.approx(100.0, abs=1e-6)
    assert widths == pytest.approx([100 * rt.part_share[k] for k in ("compute", "exchange", "sync", "stream", "host")])
    host_label = v.phase_texts[-1].textItem.toPlainText()
    assert host_label.endswith(": host step 167 ms (calibrated, PopART)") and f"{rt.part_cycles['host']:,}" in host_label
    assert v.phase_texts[-1].inside  # (a long bar: its label on one line inside it)
    # the IPUs' own work, without the host: the steady state's compute leads it
    ipu = {k: rt.part_cycles[k] for k in ("compute", "exchange", "sync", "stream")}
    assert max(ipu, key=ipu.get) == "compute"
