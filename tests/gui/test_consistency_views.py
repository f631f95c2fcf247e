"""The GUI side of the cross-view consistency test (tests/analysis/test_consistency.py has the non-Qt side): each
headline number read from the Summary, Insights, Operations, Program tree, Roofline and verdict panel widgets,
and the CLI's headless CSV exports, equals the one definition in
:func:`popvision_lite.analysis.run_totals.run_totals`, for every bundled sample and a pipelined, replicated run
whose profile folds its steady state, and a tensor-parallel run; and compare mode: every page of a comparison of
the pipelined run with the tensor-parallel one reads each run's step time, shares, chips and fits as the
single-profile views do."""

from __future__ import annotations

import html
import re
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import Qt

import popvision_lite as pvl
from popvision_lite.analysis.run_totals import PARTS, run_totals
from popvision_lite.units import format_bytes, format_seconds


def _held(qtbot, view):
    """``view`` built and held for the test (closed after it), not shown.  The numbers are the claim, not the
    pixels, and a view holds them from its construction: its labels' texts, its tables' models, its bars' widths,
    its findings; shown, each was laid out and painted for nobody (the five views of every case at 1400 x 900,
    then at 700 x 450, were ~10 % and then ~20 % of this module's CPU)."""
    qtbot.addWidget(view)
    return view

SAMPLES = sorted((Path(__file__).resolve().parents[2] / "sample_profiles").glob("*.pvl"))
CASES = [pytest.param(p, id=p.stem) for p in SAMPLES] + [pytest.param("pod_profile", id="pod-shaped"),
                                                         pytest.param("tp_profile", id="tensor-parallel")]


@pytest.fixture(params=CASES)
def doc(request):
    from popvision_lite.gui.state.document import Document

    p = request.param
    path = request.getfixturevalue(p) if isinstance(p, str) else p
    prof = pvl.open(path)
    yield Document(prof, path)
    prof.close()


def _plain(text: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", text)).replace("\n", " ")


def test_views_show_the_run_totals(qtbot, doc):
    from popvision_lite.gui.views.insights_view import InsightsView
    from popvision_lite.gui.views.operations_view import OperationsView
    from popvision_lite.gui.views.program_tree_view import ProgramTreeView
    from popvision_lite.gui.views.roofline import RooflineView
    from popvision_lite.gui.views.summary_view import SummaryView

    prof = doc.profile
    rt = run_totals(prof)
    share = rt.part_share
    top_name, top_share = rt.top_op

    # invariants of the one definition
    assert sum(rt.part_cycles.values()) == rt.ipu_time_cycles
    assert sum(share.values()) == pytest.approx(1.0)
    assert all(0 <= v <= rt.ipu_time_cycles for v in rt.part_cycles.values())
    assert 0 <= top_share <= 1 and rt.step_cycles <= rt.ipu_time_cycles

    # Summary: the bars, the title, the info table, the top-ops table
    s = _held(qtbot, SummaryView(doc))
    bars = {p: float(b.opts["width"][0]) for p, b in zip(PARTS, s.phase_bars, strict=True)}
    assert bars == pytest.approx({p: 100 * share[p] for p in PARTS})
    title = _plain(s.plot.getPlotItem().titleLabel.text)
    info = _plain(s.info.text())
    for text in (title, info):
        assert rt.ipu_count_text in text and rt.bottleneck_text in text
    assert f"{rt.step_cycles:,} cycles" in title and format_seconds(rt.step_seconds) in title
    assert f"{rt.ipu_time_cycles:,}" in title
    assert format_bytes(rt.peak_tile_bytes) in info
    if np.isfinite(rt.samples_per_second):
        assert f"{rt.samples_per_second:,.1f} samples/s" in info
    if len(s.ops_model.df):
        first = s.ops_model.row(0)
        assert first["name"] == top_name and first["share"] == pytest.approx(round(100 * top_share, 2))

    # verdict panel (on the Summary): IPU count, samples/s, bottleneck
    v = s.verdict.result
    if v is not None:
        rows = {a: b for a, b, _ in v.rows()}
        assert rows["chips"] == rt.ipu_count_text and v.ipu.chips == rt.num_ipus
        # the panel's column head names the chips of the whole run (64 for 8 replicas x TP 8, not the 8 drawn)
        assert f" x{rt.num_ipus} " in v.ipu.label and html.escape(v.ipu.label) in s.verdict.body.text()
        assert v.ipu.bound_by == rt.bottleneck_text
        if np.isfinite(rt.samples_per_second):
            assert v.ipu.samples_per_second == pytest.approx(rt.samples_per_second)
        assert html.escape(v.headline()) in s.verdict.body.text()

    # Operations: every op's share and cycles per step; the top row by cycles is the top op, at its share
    o = _held(qtbot, OperationsView(doc))
    df = o.df
    assert df["pct_run"].to_numpy() == pytest.approx(100 * rt.op_share)
    assert df["cycles"].to_numpy() == pytest.approx(np.rint(rt.op_cycles))
    if len(df):
        top = df.sort_values("cycles", ascending=False, kind="stable").iloc[0]
        assert top["name"] == top_name and top["pct_run"] == pytest.approx(100 * top_share)
        # the table sorted by cycles shows it first
        idx = o.proxy.index(0, 0)
        assert o.proxy.data(idx, Qt.DisplayRole) == top_name or top_name in str(o.proxy.data(idx, Qt.DisplayRole))

    # Program tree: its total is the IPU time
    tree = _held(qtbot, ProgramTreeView(doc))
    assert tree.tree_data.total_cycles == rt.ipu_time_cycles

    # Insights: an exchange finding states the same share of the same IPU time
    ins = _held(qtbot, InsightsView(doc))
    qtbot.waitUntil(lambda: bool(ins.findings), timeout=30000)
    from popvision_lite.analysis.insights import EXCHANGE_SHARE_WARN

    found = [f for f in ins.findings if f.kind == "exchange"]
    assert bool(found) == (share["exchange"] >= EXCHANGE_SHARE_WARN)
    for f in found:
        if f.kind == "exchange":
            assert f.numbers["share"] == pytest.approx(share["exchange"])
            assert f.numbers["exchange_cycles"] == rt.part_cycles["exchange"]
            assert f.numbers["run_cycles"] == rt.ipu_time_cycles

    # Roofline: the op shares, the step's wall time, and the verdict's answer as the one comparison
    r = _held(qtbot, RooflineView(doc))
    qtbot.waitUntil(lambda: r.is_ready(), timeout=30000)
    if r.analysis is not None and len(r.analysis.ops):
        a = r.analysis
        np.testing.assert_allclose(a.ops["share"].to_numpy(), rt.op_share)
        assert a.totals["run_time_s"] == pytest.approx(rt.step_seconds)
        text = _plain(r.summary.text())
        assert format_seconds(rt.step_seconds) in text
        if v is not None:
            assert v.headline() in text


def test_cli_csv_exports_show_the_run_totals(tmp_path):
    """``popvision-lite export --view summary|ops -o x.csv`` (headless, through the GUI package) writes the
    run_totals numbers: the POD16-class pipeline sample, where summing stored steps once gave other numbers."""
    import pandas as pd

    from popvision_lite.cli import main
    from popvision_lite.profile.reader import open_profile

    sample = next(p for p in SAMPLES if p.stem == "bert_mini_4ipu_pipeline")
    assert main(["export", str(sample), "--view", "summary", "-o", str(tmp_path / "s.csv")]) == 0
    assert main(["export", str(sample), "--view", "ops", "-o", str(tmp_path / "o.csv")]) == 0
    s = pd.read_csv(tmp_path / "s.csv").set_index("metric")["value"]
    o = pd.read_csv(tmp_path / "o.csv")
    with open_profile(sample) as p:
        rt = run_totals(p)
    assert int(s["step_cycles"]) == rt.step_cycles and s["ipu_count"] == rt.ipu_count_text
    assert [int(s[f"{k}_cycles"]) for k in rt.part_cycles] == list(rt.part_cycles.values())
    assert sum(int(s[f"{k}_cycles"]) for k in rt.part_cycles) == int(s["ipu_time_cycles"])
    assert s["bottleneck"] == rt.bottleneck and s["top_op"] == rt.top_op[0]
    assert o["share_of_ipu_time"].to_numpy() == pytest.approx(rt.op_share)
    assert o["cycles_per_step"].to_numpy() == pytest.approx(np.rint(rt.op_cycles))


def test_compare_mode_reads_the_same_numbers(qtbot, pod_profile, tp_profile):
    """Compare mode (A pipelined and replicated with its steady state folded, B tensor parallel): the Summary page's
    headline, the Execution page's run headers and lane sentence, the Memory page's fit and over-capacity count
    and the Steps page's wall time are each run's run_totals / summary numbers, as the single-profile views show."""
    from popvision_lite.analysis import step_phases as sp
    from popvision_lite.analysis.compare import WALL_ROW
    from popvision_lite.analysis.summary import summarize
    from popvision_lite.gui.app import create_app
    from popvision_lite.gui.compare_window import CompareWindow
    from popvision_lite.gui.state.document import Document
    from popvision_lite.gui.views.summary_view import SummaryView

    create_app()
    docs = [Document(pvl.open(pod_profile), pod_profile), Document(pvl.open(tp_profile), tp_profile)]
    w = _held(qtbot, CompareWindow(*docs))
    cmp = w.comparison
    summary, exe, mem, steps = (w.show_page(k) for k in ("summary", "execution", "memory", "steps"))
    ph = cmp.phases.set_index("phase")
    for i, (doc, side) in enumerate(zip(docs, ("a", "b"), strict=True)):
        rt, s = run_totals(doc.profile), summarize(doc.profile)
        # the single-profile Summary of the run: its title, fit banner and verdict chips
        single = _held(qtbot, SummaryView(doc))
        title = _plain(single.plot.getPlotItem().titleLabel.text)
        assert rt.ipu_count_text in title and format_seconds(rt.step_seconds) in title
        assert s.fit_text in _plain(single.banner.text())
        # Summary page: chips, the step's wall time, throughput, tiles over capacity
        assert cmp.metric("IPUs")[side] == rt.num_ipus
        assert cmp.metric("time")[side] == pytest.approx(rt.step_seconds)
        assert cmp.metric("total cycles")[side] == rt.step_cycles
        assert cmp.metric("tiles over capacity")[side] == s.peak.over_capacity_tiles
        if np.isfinite(rt.samples_per_second):
            assert cmp.metric("samples/s")[side] == pytest.approx(rt.samples_per_second)
        fits_row = summary.headline[summary.headline["metric"] == "fits"].iloc[0]
        assert fits_row.iloc[1 + i] == ("yes" if s.fits else "no")
        # Execution page: the run totals and the Execution view's sentence on the lanes
        run = exe.runs[i]
        head = " ".join(run.header_text.split())
        assert rt.ipu_count_text in head and f"step {format_seconds(rt.step_seconds)} wall" in head
        assert s.fit_text in head
        for p in PARTS:
            assert f"{p} {100 * rt.part_share[p]:.1f} %" in head
        assert " ".join(sp.lanes_text(rt, run.spans).split()) in head
        assert run.t_end == pytest.approx(max(rt.step_seconds, run.index.t1 / rt.clock_hz))
        # Memory page: fits and the tiles over capacity
        plot = mem.plot_a if side == "a" else mem.plot_b
        assert s.fit_text in plot.titleLabel.text
        assert f"{side.upper()} {s.peak.over_capacity_tiles:,}" in mem.over_label.text() or \
            (s.peak.over_capacity_tiles == 0 and "no tile over capacity" in mem.over_label.text())
        # Steps page: the wall time of the step it names
        assert ph.loc[WALL_ROW, f"time_{side}_s"] == pytest.approx(rt.step_seconds)
        assert format_seconds(rt.step_seconds) in steps.plot.getPlotItem().titleLabel.text
    # the tensor-parallel run's lanes say what one lane stands for
    tp_rt = run_totals(docs[1].profile)
    assert tp_rt.tensor_parallel == 2 and "ONE IPU of the stage's 2-IPU tensor-parallel group" in exe.runs[1].header_text
    w.close()
    for d in docs:
        d.close()
