"""Views of a pipelined, replicated run (profile format v2): Summary shows samples/s and the schedule,
the Execution view draws one step sub-lane per IPU with the IPUs overlapping in time, Insights gives the
training-state advice with numbers."""

import numpy as np
import pytest

import popvision_lite as pvl
from popvision_lite.emulator.models.config import make_config
from popvision_lite.emulator.models.emulated import run_model

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
    st = doc.profile.stored_table("steps")
    a = st[st.ipu == 0]
    b = st[st.ipu == 1]
    lo = max(a.start_cycle.min(), b.start_cycle.min())
    v.tile_vb.setRange(xRange=(lo, lo + 3000), padding=0)
    v.refresh()
    ys = set()
    for bar in v.step_lane.bars:
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


def test_zoomed_out_step_lane_keeps_one_band_per_ipu():
    """Zoomed out, the step lane is a raster of kind shares: one band per IPU (each that IPU's steps and the
    all-IPU ones), not one mix of every IPU under the per-IPU axis labels."""
    from pathlib import Path

    from popvision_lite.gui.app import create_app
    from popvision_lite.gui.items.step_lane import kind_share_image, lane_indexes
    from popvision_lite.gui.state.document import Document
    from popvision_lite.gui.views.execution import ExecutionView

    create_app()
    sample = Path(__file__).resolve().parents[2] / "sample_profiles" / "bert_mini_4ipu_pipeline.pvl"
    doc = Document(pvl.open(sample))
    try:
        v = ExecutionView(doc)
        v.resize(1200, 800)
        v.reset_view()
        v.refresh()
        # the whole step is 98 % the sample's host step (PopART's, no BSP step in it): zoomed out over the IPUs'
        # part before it, the steps are still far more than the pixels
        host = next(s for s in v.phase_spans if s.kind == "term")
        assert host.end == v.run_end and host.end - host.start > 0.9 * v.run_end
        v.set_x_range(0, host.start)
        v.refresh()
        img = v.step_lane.image.image
        assert v.step_lane.image.isVisible() and img is not None
        n = v.nipu
        rows = img.shape[0] // n
        assert img.shape[0] == rows * n
        x0, x1 = v.x_range()
        w, _h = v._pixels()
        lanes = lane_indexes(doc.profile.stored_table("steps"), n)
        bands = [img[i * rows:(i + 1) * rows] for i in range(n)]
        for i in range(n):  # IPU 0 at the bottom (row 0 of the image), as the exact bars
            np.testing.assert_array_equal(bands[i], kind_share_image(lanes[i], x0, x1, w, rows))
        busy = [(b[..., 3] > 0).any(axis=0) for b in bands]  # columns where the IPU runs a step
        assert not all(np.array_equal(busy[0], b) for b in busy[1:])  # the stages are not busy at the same times
        v.close()
    finally:
        doc.close()
