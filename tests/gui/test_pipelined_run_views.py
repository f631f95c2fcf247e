"""Views of a pipelined, replicated run (profile format v2): Summary shows samples/s and the schedule,
the Execution view draws one step sub-lane per IPU with the IPUs overlapping in time, Insights gives the
training-state advice with numbers."""

import numpy as np
import pytest

import popvision_lite as pvl
from popvision_lite.emulator.models.emulated import run_model
from popvision_lite.emulator.models.workloads import make_config

pytestmark = pytest.mark.gui


@pytest.fixture(scope="module")
def path(tmp_path_factory):
    p = tmp_path_factory.mktemp("pipe") / "pipe.pvl"
    cfg = make_config("bert", layers=2, ipus=4, replicas=2, batch=2, seq=16, hidden=32, heads=2, vocab=64,
                      optimizer="lamb", optimizer_state="onchip")
    run_model(cfg, timing_only=True, profile_path=p)
    return p


def test_summary_shows_throughput_and_schedule(qtbot, path):
    from popvision_lite.gui.state.document import Document
    from popvision_lite.gui.views.summary_view import SummaryView

    doc = Document(pvl.open(path))
    v = SummaryView(doc)
    qtbot.addWidget(v)
    text = v.info.text()
    sps = doc.profile.run["samples_per_second"]
    assert f"{sps:,.1f} samples/s" in text
    assert "2 replica(s) x 2 pipeline stage(s)" in text and "steady state" in text
    doc.close()


def test_execution_step_lane_has_overlapping_ipu_sub_lanes(qtbot, path):
    from popvision_lite.gui.state.document import Document
    from popvision_lite.gui.views.execution import ExecutionView

    doc = Document(pvl.open(path))
    v = ExecutionView(doc)
    qtbot.addWidget(v)
    v.resize(1200, 800)
    v.show()
    qtbot.waitExposed(v)
    idx = v.index
    # zoom to the overlap of IPU 0 and IPU 1 (the steady cycle): few steps -> exact bars
    st = doc.profile.steps
    a = st[st.ipu == 0]
    b = st[st.ipu == 1]
    lo = max(a.start_cycle.min(), b.start_cycle.min())
    v.tile_vb.setRange(xRange=(lo, lo + 3000), padding=0)
    v.refresh()
    ys = set()
    for bar in v.step_bars:
        if bar.isVisible() and len(np.atleast_1d(bar.opts["y0"])):
            ys |= {round(float(y), 3) for y in np.atleast_1d(bar.opts["y0"])}
    assert {0.0, 0.5} <= ys  # IPU 0 in the top half, IPU 1 in the bottom half of the step lane
    assert idx.n == len(st)
    doc.close()


def test_insights_training_state_advice(path):
    from popvision_lite.analysis.insights import insights

    with pvl.open(path) as p:
        f = [x for x in insights(p) if x.kind == "training_state"]
        assert len(f) == 1
        assert "Optimizer state off-chip would free" in f[0].text and "GB/s" in f[0].text
        n = f[0].numbers
        ts = p.run["training_state"]
        want = max(t["mib"]["optimizer_moments"] for t in ts) * 2**20
        assert n["state_bytes_per_ipu"] == pytest.approx(want)
        assert n["stream_ms_per_step"] == pytest.approx(2 * want / n["ddr_bytes_per_s"] * 1e3)
