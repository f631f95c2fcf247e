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


def test_a_whole_graph_without_its_tables_gives_the_same_memory_and_fit():
    # ResNet-50's depth at tiny widths, outlined and recomputed: the other blocks' weights and the saved inputs of
    # the outlined blocks (each live over its own stretch of liveness steps) added to the memory per tile
    cfg = make_config("resnet-tiny", layers=50, hidden=8, image=32, batch=2, recompute=True, outline=True)
    try:
        full = emulated.run_model(cfg, SMALL_DEVICE, timing_only=True)
        bare = emulated.run_model(cfg, SMALL_DEVICE, timing_only=True, profile=False)  # the kept graph's run
        be = next(iter(emulated._GRAPH_CACHE.values()))[0]
    finally:
        emulated.release_graphs()
    assert len(be.saved_spans) == len(be.saved_copies) > 10 and be.multiplicity
    np.testing.assert_array_equal(bare.profile_data.memory, full.profile_data.memory)
    assert (bare.fits, bare.total_cycles, bare.samples_per_second) == (full.fits, full.total_cycles,
                                                                       full.samples_per_second)
    assert bare.profile_data.run["oom_tiles"] == full.profile_data.run["oom_tiles"]
    assert mv.peak_tile_text(bare) == mv.peak_tile_text(full)
    assert len(bare.profile_data.variables) < len(full.profile_data.variables)  # (the row reads no table)


def test_the_saved_inputs_peak_without_the_tables_is_the_tables_peak():
    """``_saved_on_liveness`` without the tables: the peak per tile of the compile's not-always-live bytes with the
    outlined blocks' saved inputs added over their stretches, the integers the (steps x tiles) table gives."""
    from types import SimpleNamespace as NS

    import pandas as pd

    T = 3
    # a root and four top-level programs, one liveness step each (the outlined blocks' programs)
    progs = pd.DataFrame({"prog_id": [0, 1, 2, 3, 4], "parent_id": [-1, 0, 0, 0, 0], "lstep": [-1, 0, 1, 2, 3]})
    ltb = np.array([[5, 0, 9], [1, 2, 0], [0, 7, 1], [8, 1, 2]], np.uint32)   # (steps, tiles)

    def tensor(per_tile):
        a = np.array(per_tile, np.int64)
        return NS(mapping=NS(elements_per_tile=lambda _T: a), itemsize=2)

    # one saved input live over programs 1-2 (steps 0-2: from the step before its first), one over program 3
    # (steps 2-3)
    be = NS(saved_spans=[(1, 2), (3, 3)], saved_copies=[tensor([2, 1, 0]), tensor([0, 0, 4])],
            ctx=NS(programs=[0, 1, 2, 3]))

    def pd_():
        return NS(programs=progs, liveness_tile_bytes=ltb.copy(),
                  liveness_steps=pd.DataFrame({"total_bytes": [0] * 4, "max_tile_bytes": [0] * 4, "max_tile": [0] * 4}))

    bare = pd_()
    peak, spans = emulated._saved_on_liveness(be, bare, T, tables=False)
    full = pd_()
    want, want_spans = emulated._saved_on_liveness(be, full, T)
    assert spans == want_spans == [(0, 2), (2, 3)]
    np.testing.assert_array_equal(peak, want)
    # tile 0: 5 + 4 at step 0 (not 8 at step 3: the first saved input is not live there); tile 1: 7 + 2 at
    # step 2; tile 2: 2 + 8 at step 3 (9 at step 0 without any)
    np.testing.assert_array_equal(peak, [9, 9, 10])
    np.testing.assert_array_equal(bare.liveness_tile_bytes, ltb)   # the tables left as they were
    assert not np.array_equal(full.liveness_tile_bytes, ltb)
