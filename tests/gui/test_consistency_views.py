"""The views show the numbers of analysis/run_totals.py (the GUI half of tests/analysis/test_consistency.py,
which checks every non-Qt consumer): every bundled sample opened in the Summary, Operations and Program tree
views.  Views that state more of the headline (IPU count, bottleneck, phases) add their assertions here."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from popvision_lite.analysis.run_totals import run_totals

SAMPLES = sorted((Path(__file__).resolve().parents[2] / "sample_profiles").glob("*.pvl"))


@pytest.fixture(params=SAMPLES, ids=lambda p: p.stem)
def doc(request, qtbot):
    from popvision_lite.gui.app import create_app
    from popvision_lite.gui.state.document import Document
    from popvision_lite.profile.reader import open_profile

    create_app()
    d = Document(open_profile(request.param), request.param)
    yield d
    d.close()


def test_views_show_the_run_totals(qtbot, doc):
    from popvision_lite.gui.views.operations_view import OperationsView
    from popvision_lite.gui.views.program_tree_view import ProgramTreeView
    from popvision_lite.gui.views.summary_view import SummaryView
    from tests.support.qt import show_view

    rt = run_totals(doc.profile)
    summary = show_view(qtbot, SummaryView(doc))
    assert f"{rt.step_cycles:,} cycles" in summary.info.text()
    top = summary.ops_model.df
    assert top["name"].iat[0] == rt.top_op[0] and top["share"].iat[0] == pytest.approx(100 * rt.top_op[1], abs=0.005)
    ops = show_view(qtbot, OperationsView(doc))
    assert ops.df["pct_run"].to_numpy() == pytest.approx(100 * rt.op_share)
    assert ops.df["cycles"].to_numpy() == pytest.approx(np.rint(rt.op_cycles))
    tree = show_view(qtbot, ProgramTreeView(doc))
    assert tree.tree_data.total_cycles == rt.ipu_time_cycles


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
