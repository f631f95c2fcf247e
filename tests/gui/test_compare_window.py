"""Compare window: shared colour scale, linked maps, cursor, difference mode, tile-count mismatch, --compare."""

from __future__ import annotations

import numpy as np
import pytest

from popvision_lite.analysis import compare as C
from popvision_lite.units import format_seconds, time_unit


def _window(qtbot, a, b):
    import popvision_lite as pvl
    from popvision_lite.gui.app import create_app
    from popvision_lite.gui.compare_window import CompareWindow
    from popvision_lite.gui.state.document import Document

    create_app()
    w = CompareWindow(Document(pvl.open(a)), Document(pvl.open(b)))
    qtbot.addWidget(w)
    w.show()
    return w


def _summary_of(doc):
    """The document's cached summary (the one its Summary view shows); fails if it has none."""
    assert doc.has_cached("summary")
    return doc.cached("summary", None)


def test_memory_maps_share_one_colour_scale_and_difference(qtbot, run_pairs):
    w = _window(qtbot, run_pairs["mk2"], run_pairs["mk2_recompute"])
    page = w.show_page("memory")
    a, b = w.doc_a.profile, w.doc_b.profile
    tot_a, tot_b = a.memory.array().sum(axis=(1, 2)), b.memory.array().sum(axis=(1, 2))
    hi = max(tot_a.max(), tot_b.max()) / 1024
    assert page.img_a.levels is not None
    np.testing.assert_allclose(page.img_a.levels, (0, hi))
    np.testing.assert_allclose(page.img_b.levels, (0, hi))
    np.testing.assert_allclose(page.colorbar.levels(), (0, hi))
    # the one ColorBarItem drives both images: changing it changes both
    page.colorbar.setLevels((0, hi / 2))
    np.testing.assert_allclose(page.img_a.levels, (0, hi / 2))
    np.testing.assert_allclose(page.img_b.levels, (0, hi / 2))
    assert page.plot_b.getViewBox().linkedView(0) is page.plot_a.getViewBox()
    # cursor: the tile under the mouse is described with both values and marked in both maps
    tile = int(np.argmax(tot_b - tot_a))
    page.set_cursor(tile)
    assert f"global {tile}" in page.hover.text() and "B − A +" in page.hover.text()
    xa, ya = page.map_a.cursor.getData()
    xb, yb = page.map_b.cursor.getData()
    assert (xa[0], ya[0]) == (xb[0], yb[0]) == (page.lay_a.col[tile] + 0.5, page.lay_a.row[tile] + 0.5)
    # difference mode: B - A, symmetric levels (white = 0)
    page.set_difference(True)
    img = page.img_d.image
    d = (tot_b - tot_a) / 1024
    assert img[page.lay_a.row[tile], page.lay_a.col[tile]] == d[tile]
    m = np.abs(d).max()
    np.testing.assert_allclose(page.img_d.levels, (-m, m))
    assert "difference" in page.plot_items()
    w.close()


def test_tile_count_mismatch_shows_per_ipu(qtbot, tile_mismatch):
    w = _window(qtbot, *tile_mismatch)
    page = w.show_page("memory")
    assert not page.diff_box.isEnabled()
    assert page.note.isVisibleTo(w) and "not possible" in page.note.text()
    page.set_difference(True)
    assert not page.difference
    assert "per_ipu" in page.plot_items() and "per_ipu" in page.tables()
    summary = w.show_page("summary")
    assert any("not possible" in n for n in summary.cmp.notes)
    w.close()


def test_liveness_overlay_and_tables(qtbot, run_pairs, monkeypatch):
    w = _window(qtbot, run_pairs["mk2"], run_pairs["mk2_recompute"])
    page = w.show_page("liveness")
    xa, ya = page.curve_a.getData()
    xb, yb = page.curve_b.getData()
    la = w.doc_a.profile.liveness.tile_bytes().max(axis=1) / 1024
    lb = w.doc_b.profile.liveness.tile_bytes().max(axis=1) / 1024
    np.testing.assert_allclose(ya, la)
    np.testing.assert_allclose(yb, lb)
    assert yb.max() < ya.max()  # recompute: lower peak not-always-live
    page.set_cursor(3)
    assert page.cursor.value() == 3 and "step 3" in page.info.text()
    made = []
    real_op_table = C.op_table
    monkeypatch.setattr(C, "op_table", lambda *args: made.append(args) or real_op_table(*args))
    ops = w.show_page("ops")
    # the ops matched by name are the table compare() made for its notes (none made again), as a fresh one would be
    assert made == [] and ops.ops.equals(real_op_table(w.doc_a.profile, w.doc_b.profile))
    ops.filter.setText("recompute")
    assert len(ops.model.df) > 0 and ops.model.df["name"].str.contains("recompute").all()
    # the comparison reads both documents' own summaries (the Summary views'), not new ones
    assert w.comparison.summary_a is _summary_of(w.doc_a) and w.comparison.summary_b is _summary_of(w.doc_b)
    steps = w.show_page("steps")
    assert steps.tables()["steps"]["cycles_b"].sum() == int(
        (w.doc_b.profile.stored_table("steps")["end_cycle"] - w.doc_b.profile.stored_table("steps")["start_cycle"]).sum())
    w.close()


def test_cli_compare_flag_opens_compare_mode(qtbot, settings, run_pairs):
    import argparse

    from popvision_lite.gui.app import build_window, create_app

    create_app()
    args = argparse.Namespace(profiles=[], sample=False,
                              compare=[str(run_pairs["bow_base"]), str(run_pairs["bow"])])
    win = build_window(args, settings=settings)
    qtbot.addWidget(win)
    qtbot.waitUntil(lambda: bool(getattr(win, "compare_windows", [])), timeout=20000)
    cw = win.compare_windows[0]
    assert win.doc_tabs.count() == 2
    # the comparison made off the GUI thread reads the summaries the loader made for the documents
    assert cw.comparison.summary_a is _summary_of(cw.doc_a) and cw.comparison.summary_b is _summary_of(cw.doc_b)
    assert cw.doc_a.profile.target.device == "ipu-mk2" and cw.doc_b.profile.target.device == "ipu-bow"
    cw.close()


def test_execution_timelines_share_a_time_axis_and_cursor(qtbot, run_pairs):
    w = _window(qtbot, run_pairs["bow_base"], run_pairs["bow"])
    page = w.show_page("execution")
    ra, rb = page.runs
    # one WALL-TIME base: a zoom in A shows the same seconds in B, whatever each run's clock
    c0, c1 = 0.2 * page.t_max * ra.clock_hz, 0.4 * page.t_max * ra.clock_hz
    ra.step_plot.setXRange(c0, c1, padding=0)
    t0, t1 = c0 / ra.clock_hz, c1 / ra.clock_hz
    assert np.allclose(rb.time_range(), (t0, t1)) and np.allclose(page.time_range(), (t0, t1))
    (x0, x1), _ = rb.step_plot.getViewBox().viewRange()
    assert np.allclose((x0 / rb.clock_hz, x1 / rb.clock_hz), (t0, t1))
    # the time axis reads seconds with an SI prefix, not "1.8e+06 µs"
    ax = rb.step_plot.getAxis("bottom")
    assert ax.labelUnits == "s" and ax.scale == pytest.approx(1 / rb.clock_hz)
    # at a time inside A's step 5, the cursor names that step in A and the step running then in B
    a = w.doc_a.profile
    s5 = a.steps.iloc[5]
    t = (s5["start_cycle"] + 0.5 * (s5["end_cycle"] - s5["start_cycle"])) / a.target.clock_hz
    page.set_cursor(t)
    assert np.allclose(page.cursor_values(), [t, t])
    assert page.step_at(0, t) == 5 and "A: step 5 " in page.info.text()
    b = w.doc_b.profile
    j = page.step_at(1, t)
    if j >= 0:  # B runs faster: the step it is in at time t, checked against its own table
        sb = b.steps.iloc[j]
        assert sb["start_cycle"] / b.target.clock_hz <= t <= sb["end_cycle"] / b.target.clock_hz
    w.close()


def test_per_ipu_display_marks_missing_ipus():
    import pandas as pd

    from popvision_lite.gui.views.compare import per_ipu_display

    df = pd.DataFrame({"ipu": ["0", "1", "all"], "total_a": [2048.0, np.nan, 2048.0],
                       "total_b": [1024.0, 4096.0, 5120.0], "total_delta": [-1024.0, np.nan, 3072.0],
                       "over_capacity_tiles_a": [0.0, np.nan, 0.0], "total_ratio": [0.5, np.nan, 2.5]})
    out = per_ipu_display(df)
    assert list(out["total_a"]) == ["2.00 KiB", "—", "2.00 KiB"]
    assert out["total_delta"].iloc[0] == "−1.00 KiB" and out["total_ratio"].iloc[2] == "2.500"
    assert out["over_capacity_tiles_a"].iloc[1] == "—"


def test_roofline_page_overlays_both_runs(qtbot, run_pairs):
    w = _window(qtbot, run_pairs["bow_base"], run_pairs["bow"])
    page = w.show_page("roofline")
    a, b = w.doc_a.profile, w.doc_b.profile
    xa, ya = page.curves[("A", "ops")].getData()
    xb, yb = page.curves[("B", "ops")].getData()
    assert len(xa) == len(page.ra.points) and len(xb) == len(page.rb.points) and len(xa) > 0
    # same op, same cycles on both chips: same intensity, FLOP/s higher by the clock ratio
    pa = page.ra.points.set_index("name")
    pb = page.rb.points.set_index("name")
    common = pa.index.intersection(pb.index)
    same = [n for n in common if pa.loc[n, "ipu_time_s"] * a.target.clock_hz == pytest.approx(
        pb.loc[n, "ipu_time_s"] * b.target.clock_hz)]
    assert same
    for n in same[:10]:
        assert pb.loc[n, "intensity"] == pytest.approx(pa.loc[n, "intensity"])
        assert pb.loc[n, "achieved_flops"] / pa.loc[n, "achieved_flops"] == pytest.approx(
            b.target.clock_hz / a.target.clock_hz)
    w.close()


def test_comparison_report_folder(qtbot, run_pairs, tmp_path):
    from popvision_lite.gui.export import pixel_stats

    w = _window(qtbot, run_pairs["mk2"], run_pairs["mk2_recompute"])
    # 400 px wide: the claim is that every page's plots and tables are written and drawn, not the report's width
    rep = w.export_report(str(tmp_path / "cmp"), width=400)
    with qtbot.waitSignal(rep.finished, timeout=60000) as blocker:
        pass
    man = blocker.args[0]
    assert not man["errors"], man["errors"]
    names = {p.split("/")[-1] for p in man["images"]}
    for key in ("summary", "memory", "liveness", "execution", "roofline", "steps"):
        assert any(n.startswith(key + "_") for n in names), (key, names)
    for p in man["images"]:
        assert pixel_stats(p)[2] > 5, p
    md = (tmp_path / "cmp" / "summary.md").read_text()
    assert md.startswith("# Compare: A = ") and "| peak not-always-live on a tile |" in md
    assert "ops.csv" in " ".join(man["csv"]) or any(c.startswith("ops_") for c in man["csv"])
    w.close()


def test_emulation_dialogs(qtbot, run_pairs):
    import popvision_lite as pvl
    from popvision_lite.gui.actions import run as whatif

    with pvl.open(run_pairs["mk2"]) as p:
        base = whatif.settings_from_profile(p)
    d = whatif.RerunDialog(base)
    qtbot.addWidget(d)
    d.select("recompute")
    assert d.current.text() == "off" and d.value.text() == "on"
    assert d.settings()["recompute"] is True and d.settings()["batch"] == base["batch"]
    d.select("batch")
    assert d.value.text() == str(2 * base["batch"])
    e = whatif.EmulationDialog(base, out="runs/x.pvl")
    qtbot.addWidget(e)
    e.device.setCurrentText("ipu-bow")
    e.inputs["ipus"].widget.setValue(4)
    s = e.settings()
    assert s["device"] == "ipu-bow" and s["ipus"] == 4 and s["model"] == base["model"] and e.output() == "runs/x.pvl"


def test_compare_window_menus_keys_and_readable_pages(qtbot, run_pairs):
    """View menu with Ctrl+1..N like the main window; the Steps page reads like the others (titles, units,
    legend clear of the bars); the roofline legend tells every entry apart; the summary plot names A and B."""
    import pyqtgraph as pg
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QKeySequence

    w = _window(qtbot, run_pairs["bow_base"], run_pairs["bow"])
    menus = [a.text() for a in w.menuBar().actions()]
    assert menus == ["&File", "&View"]
    keys = [a.shortcut().toString(QKeySequence.PortableText) for a in w.page_actions]
    assert keys == [f"Ctrl+{i + 1}" for i in range(w.tabs.count())]
    w.page_actions[3].trigger()
    assert w.tabs.currentIndex() == 3

    steps = w.show_page("steps")
    m = steps.model
    heads = [m.headerData(c, Qt.Horizontal) for c in range(m.columnCount())]
    assert "step A" in heads and "time B" in heads and "cycles B / A" in heads
    assert not any("_" in h for h in heads)
    col = list(m.df.columns).index("time_a_s")
    shown = m.data(m.index(0, col))
    assert "e-" not in shown and shown.split()[-1] in ("s", "ms", "µs", "ns")
    vb = steps.plot.getPlotItem().getViewBox()
    top = vb.viewRange()[1][1]
    ph = steps.cmp.phases
    drawn = ph[ph["basis"] == "IPU time"]  # one time base: the parts and their sum, never the wall time beside them
    assert steps.names == list(drawn["phase"]) and "host" in steps.names and C.WALL_ROW not in steps.names
    unit, scale = time_unit(max(drawn["time_a_s"].max(), drawn["time_b_s"].max()))
    assert steps.unit == unit and unit in steps.plot.getPlotItem().getAxis("left").labelText
    tallest = max(drawn["time_a_s"].max(), drawn["time_b_s"].max()) / scale
    assert top >= tallest * 1.3  # headroom above the IPU time bar for the legend
    # the tallest bar is the parts' sum, and the wall time is said in the title
    assert tallest == pytest.approx(max(drawn.set_index("phase").loc[C.IPU_TIME_ROW, ["time_a_s", "time_b_s"]]) / scale)
    assert "wall time" in steps.plot.getPlotItem().titleLabel.text

    roof = w.show_page("roofline")
    legend = roof.plot.getPlotItem().legend
    def style(sample):  # the legend sample wraps the plotted item
        pen = getattr(sample.item, "opts", {}).get("pen")
        return pg.mkPen(pen).style() if pen is not None else None

    entries = [(lbl.text, style(sample)) for sample, lbl in legend.items]
    names = [e[0] for e in entries]
    assert len(set(names)) == len(names)
    roofs = [e for e in entries if " roof: " in e[0]]
    assert len({(n.split(" ")[0], s) for n, s in roofs}) == len(roofs)  # run and line style differ per roof

    summary = w.show_page("summary")
    title = summary.plot.getPlotItem().titleLabel.text
    assert f"A = {w.comparison.label_a}" in title and f"B = {w.comparison.label_b}" in title
    # the notes are plain text (a QLabel showing markup as text showed raw "<ul><li>"), one bullet per note
    notes = summary.notes.text()
    assert "<li>" not in notes and "<ul>" not in notes and notes.count("\u2022 ") == len(w.comparison.notes)
    # the runs' columns are named by their files as they are (underscores kept), and the chart's title is two
    # short lines, so the plot stays within its widget and the longest bar keeps its label
    m = summary.model
    heads = [m.headerData(c, Qt.Horizontal) for c in range(m.columnCount())]
    assert heads[1:3] == [w.comparison.label_a, w.comparison.label_b]
    assert "\n" in title and "<br>" not in title and "&" not in title
    pi = summary.plot.getPlotItem()
    assert pi.sceneBoundingRect().width() <= summary.plot.width() + 1
    assert pi.getViewBox().viewRange()[0][1] >= max(summary.ratios.values()) * 1.25
    # the ratio chart leads with throughput and shows the host as its own part
    assert list(summary.ratios)[0] == "samples/s" and "host cycles" in summary.ratios
    w.close()


def test_compare_ratio_colours_say_better_or_worse_only_where_they_can():
    from popvision_lite.gui.views.compare.summary import CompareSummaryPage as P

    green, red, grey = "#2ca02c", "#d62728", "#7f7f7f"
    assert P.ratio_color("samples/s", 1.171, same_batch=False) == green  # more samples/s: better
    assert P.ratio_color("samples/s", 0.8, same_batch=True) == red
    # a longer step with a larger batch is neither better nor worse; with the same batch it is worse
    assert P.ratio_color("time", 1.7, same_batch=False) == grey
    assert P.ratio_color("time", 1.7, same_batch=True) == red
    assert P.ratio_color("peak tile memory", 0.5, same_batch=False) == green
    assert P.ratio_color("time", 1.0, same_batch=True) == grey


SAMPLES = __import__("pathlib").Path(__file__).resolve().parents[2] / "sample_profiles"


def test_compare_execution_draws_one_lane_per_ipu_of_each_run(qtbot):
    """A pipelined 4-IPU run against a 1-IPU run: 4 named lanes for A, 1 for B, drawn by the Execution view's own
    items; zoomed in, every step is a rectangle in the lane of its IPU; zoomed out, a kind raster per IPU."""
    from popvision_lite.analysis import execution as ex
    from popvision_lite.gui.items.phase_band import PhaseBandItem
    from popvision_lite.gui.items.step_lane import StepLaneItem

    w = _window(qtbot, SAMPLES / "bert_mini_4ipu_pipeline.pvl", SAMPLES / "bert_tiny_mk2.pvl")
    page = w.show_page("execution")
    la, lb = page.runs
    assert (la.nipu, lb.nipu) == (4, 1)
    assert isinstance(la.step_lane, StepLaneItem) and isinstance(la.phase_band, PhaseBandItem)
    axis = la.step_plot.getAxis("left")
    assert [t for _, t in axis.lane_labels(200)] == ["IPU 0", "IPU 1", "IPU 2", "IPU 3"]
    assert [t for _, t in lb.step_plot.getAxis("left").lane_labels(200)] == ["steps"]
    # both left axes equally wide: the time axes of A and B start at the same pixel
    assert la.step_plot.getAxis("left").width() == lb.step_plot.getAxis("left").width()
    # whole run: far more steps than pixels -> kind shares per IPU lane
    page.redraw()
    assert la.mode == "raster"
    # zoom into a window where stages overlap in time: steps of different IPUs run at once
    a = w.doc_a.profile
    idx = ex.StepIndex.from_profile(a)
    mid = idx.n // 2
    c0, c1 = idx.start[mid], idx.start[mid] + 40_000
    page.set_time_range(c0 / la.clock_hz, c1 / la.clock_hz)
    page.redraw()
    assert la.mode == "steps"
    i0, i1 = idx.visible(c0, c1)
    drawn_y, drawn_x = [], []
    for bar in la.step_lane.bars:
        if bar.isVisible():
            drawn_y += list(bar.opts["y0"])
            drawn_x += list(np.asarray(bar.opts["x0"]) + bar.pos().x())
    assert len(drawn_x) == i1 - i0
    seen = {int(np.floor(y * 4 + 1e-9)) for y in drawn_y}
    visible_ipus = {int(i) for i in idx.ipu[i0:i1] if i >= 0}
    assert seen >= visible_ipus and len(visible_ipus) > 1  # several IPUs busy at once, each in its own lane
    # the cursor on a lane names the step running on that IPU
    ipu = int(idx.ipu[i0])
    t = (idx.start[i0] + 0.5 * idx.dur[i0]) / la.clock_hz
    page.set_cursor(t, ipu if ipu >= 0 else 0)
    s = idx.step_at(t * la.clock_hz, ipu if ipu >= 0 else 0)
    assert f"step {int(idx.step[s])} " in page.info.text()
    w.close()


def test_compare_execution_reads_the_run_totals_and_hatches_what_is_not_stored(qtbot, pod_profile):
    """Each run's header carries the run totals the Summary shows (wall time, IPU count, shares, fits) and the
    Execution view's sentence on the lanes; the folded steady state is hatched with its note."""
    from popvision_lite.analysis import step_phases as sp
    from popvision_lite.analysis.run_totals import run_totals

    w = _window(qtbot, pod_profile, SAMPLES / "bert_mini_4ipu_pipeline.pvl")
    page = w.show_page("execution")
    ra = page.runs[0]
    rt = run_totals(w.doc_a.profile)
    head = " ".join(ra.header_text.split())
    assert rt.ipu_count_text in head and f"step {format_seconds(rt.step_seconds)} wall" in head
    assert f"compute {100 * rt.part_share['compute']:.1f} %" in head and w.comparison.summary_a.fit_text in head
    assert " ".join(sp.lanes_text(rt, ra.spans).split()) in head
    fold = next(s for s in ra.spans if s.folded)
    a, b = fold.hidden[0]
    page.set_time_range(a / ra.clock_hz, b / ra.clock_hz)  # the folded span across the lane: wide enough for its note
    page.redraw()
    assert ra.fold.isVisible() and any("more runs" in n for n in ra.fold.shown_notes())
    page.set_cursor((a + b) / 2 / ra.clock_hz, 0)
    assert "folded here" in page.info.text()
    w.close()


def test_compare_memory_marks_tiles_over_capacity_in_both_runs(qtbot, small_profile, tmp_path):
    """A run that fits against one with tiles over capacity: the header counts them per run (the Summary's
    count), B's map outlines exactly those tiles, A's none, and the shared scale turns red above capacity."""
    from popvision_lite.analysis.tile_memory import TileMemory
    from popvision_lite.testing.synthetic import write_synthetic

    fits = tmp_path / "fits.pvl"
    write_synthetic(fits, num_ipus=2, tiles_per_ipu=96, num_steps=120, seed=3, over_capacity_tiles=0)
    w = _window(qtbot, fits, small_profile)
    page = w.show_page("memory")
    over = np.flatnonzero(TileMemory(w.doc_b.profile).over_capacity)
    n = w.comparison.summary_b.peak.over_capacity_tiles
    assert n == len(over) > 0 and w.comparison.summary_a.peak.over_capacity_tiles == 0
    assert page.over_label.text() == f"tiles over capacity: A 0, B {n:,} (outlined; red to magenta above capacity)"
    assert f"DOES NOT FIT: {n:,} tiles over capacity" in page.plot_b.titleLabel.text
    assert "FITS in tile memory" in page.plot_a.titleLabel.text
    assert list(page.map_b._outlined_tiles) == list(over) and len(page.map_a._outlined_tiles) == 0
    # the colour above the tile capacity is the over ramp's red, below it viridis
    lo, hi = page.colorbar.levels()
    cap = page.tm_b.capacity / 1024
    assert hi > cap
    cmap = page.colorbar.colorMap()
    above = cmap.map(np.array([(cap + 0.01 * (hi - cap)) / hi]), mode="qcolor")[0]
    assert above.red() > 200 and above.green() < 60
    page.over_box.setChecked(False)
    assert len(page.map_b._outlined_tiles) == 0
    w.close()
