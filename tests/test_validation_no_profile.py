"""The validation report's composed rows are emulated without composing their profile (``run_model(profile=False)``,
``pipeline.MemoryOnly``): every number a row reports (throughput, cycles, fit, schedule terms, the fullest tile)
is the one the run with its profile gives."""

from __future__ import annotations

import numpy as np

from popvision_lite import mlperf_validation as mv
from popvision_lite.emulator.models import emulated, pipeline
from popvision_lite.emulator.models.config import make_config
from tests.conftest import SMALL_DEVICE

# two distinct stage graphs over three IPUs, replicas and accumulation composed
KW = dict(layers=3, hidden=64, heads=4, seq=32, vocab=512, batch=2, ipus=6, replicas=2, grad_accum=6)


def test_a_composed_row_is_predicted_without_its_profile_and_reports_the_same(monkeypatch):
    composed = []
    real = pipeline.compose_profile
    monkeypatch.setattr(pipeline, "compose_profile", lambda *a, **k: composed.append(1) or real(*a, **k))
    case = mv.Case(id="t", label="t", model="bert", config=dict(KW), device=SMALL_DEVICE)
    cfg = make_config("bert", **KW)
    try:
        row = mv.predict(case)
        assert composed == [] and not row.error
        # the stage graphs are kept from the row's run: the same run with its profile, and without
        full = emulated.run_model(cfg, SMALL_DEVICE, timing_only=True)
        assert composed == [1]
        bare = emulated.run_model(cfg, SMALL_DEVICE, timing_only=True, profile=False)
    finally:
        emulated.release_graphs()
    assert composed == [1] and isinstance(bare.profile_data, pipeline.MemoryOnly)
    assert (row.predicted_sps, row.cycles, row.fits, row.extra["peak_tile"]) == \
        (full.samples_per_second, full.total_cycles, full.fits, mv.peak_tile_text(full))
    assert row.extra["schedule"] == {k: v for k, v in full.schedule.to_dict().items() if k in row.extra["schedule"]}
    assert row.extra["schedule"]["fill_drain_cycles"] > 0 and row.extra["peak_tile"]
    assert (bare.fits, bare.total_cycles, bare.seconds, bare.samples_per_second, bare.oom_report) == \
        (full.fits, full.total_cycles, full.seconds, full.samples_per_second, full.oom_report)
    np.testing.assert_array_equal(bare.profile_data.memory, full.profile_data.memory)
    assert bare.profile_data.target == full.profile_data.target
    # the schedule: every term the same; those only the profile's composition adds are the timeline's
    b, f = bare.schedule.to_dict(), full.schedule.to_dict()
    assert {k: f[k] for k in b} == b
    assert set(f) - set(b) <= {"fill_cycles", "drain_cycles", "phase_ipu_cycles", "profile_pipeline_cycles_shown",
                               "profile_pipeline_cycles_elided", "elided_microbatches"}
