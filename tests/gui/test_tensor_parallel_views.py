"""A tensor-parallel run in the views (issue 46 item 7): the profile stores one IPU of each stage's tensor-parallel
group, and the views say so; Insights state the optimizer state per IPU the same way in every line."""

from __future__ import annotations

import re

import popvision_lite as pvl
from popvision_lite.analysis.insights import insights
from popvision_lite.analysis.run_totals import run_totals


def test_execution_says_a_lane_is_one_ipu_of_its_group(qtbot, tp_profile):
    from popvision_lite.gui.state.document import Document
    from popvision_lite.gui.views.execution import ExecutionView
    from tests.support.qt import show_view

    doc = Document(pvl.open(tp_profile), tp_profile)
    v = show_view(qtbot, ExecutionView(doc))
    rt = run_totals(doc.profile)
    text = v.drawn_label.text()
    assert rt.tensor_parallel == 2 and rt.ipu_count_text in text
    assert "ONE IPU of the stage's 2-IPU tensor-parallel group" in text and "one lane per IPU of the replica" not in text
    doc.close()


def test_optimizer_state_per_ipu_reads_the_same_in_every_line(tp_profile):
    """The advice line's 'frees N MiB per IPU' and the per-IPU line's off-chip figure are one number: with RTS the
    state is sharded over the replicas (the per-IPU line said the unsharded figure, R times larger)."""
    with pvl.open(tp_profile) as p:
        f = next(f for f in insights(p) if f.kind == "training_state")
    per_ipu = f.numbers["state_bytes_per_ipu"] / 2 ** 20
    assert f"frees {per_ipu:.0f} MiB per IPU" in f.text
    off = re.search(r"off chip ([\d.]+) MiB per IPU \(([\d.]+) MiB sharded over the 2 replicas, RTS\)", f.text)
    assert off is not None, f.text
    assert float(off.group(1)) == round(per_ipu, 1) and float(off.group(2)) == round(2 * per_ipu, 1)
    assert "on-chip optimiser state" not in f.text and "Optimizer state off-chip would free" not in f.text
