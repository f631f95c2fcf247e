"""A whole graph run without its profile's tables (``run_model(profile=False)``, what the validation report asks
for) builds none of them (``profile_builder.build_profile(tables=False)``), and the graph cache says so: a later
run of the kept graph that needs them (``profile=True``) builds them then, and its profile is the one a fresh run
gives."""

from __future__ import annotations

import numpy as np

from bench.same_profiles import differences
from popvision_lite.emulator.models import emulated
from popvision_lite.emulator.models.config import make_config
from popvision_lite.emulator.profile_builder import BARE_TABLES
from tests.conftest import SMALL_DEVICE

# ResNet-14 at tiny widths (outlined blocks and graph functions, as the validation rows' ResNet-50)
CFG = dict(batch=2)


def _entry():
    (entry,) = emulated._GRAPH_CACHE.values()
    return entry


def test_a_kept_graph_without_tables_builds_them_for_a_run_that_needs_them(tmp_path):
    cfg = make_config("resnet-tiny", **CFG)
    emulated.release_graphs()
    try:
        bare = emulated.run_model(cfg, SMALL_DEVICE, timing_only=True, profile=False)
        assert _entry()[4] is False                     # kept, and known to hold no tables
        full = emulated.run_model(cfg, SMALL_DEVICE, timing_only=True)
        assert full.wall.get("reused") and _entry()[4] is True
        emulated.write_run(full, tmp_path / "kept.pvl")
        emulated.release_graphs()
        fresh = emulated.run_model(cfg, SMALL_DEVICE, timing_only=True)
        emulated.write_run(fresh, tmp_path / "fresh.pvl")
    finally:
        emulated.release_graphs()
    assert differences(tmp_path / "kept.pvl", tmp_path / "fresh.pvl") == []
    b, f = bare.profile_data, fresh.profile_data
    # no table but those the memory and fit read; those, the memory, the target and every number as the full run's
    for name in ("steps", "ops", "compute_sets", "vertices", "variables", "variable_tiles"):
        assert len(b.table(name)) == 0 < len(f.table(name)), name
    assert BARE_TABLES == ("programs", "liveness_steps", "liveness_tile_bytes")
    for name in ("programs", "liveness_steps"):
        got, want = b.table(name), f.table(name)
        assert list(got.data) == list(want.data) and all(
            np.array_equal(got.data[c], want.data[c]) for c in got.data), name
    np.testing.assert_array_equal(b.liveness_tile_bytes, f.liveness_tile_bytes)
    np.testing.assert_array_equal(b.memory, f.memory)
    assert b.target == f.target
    assert {k: v for k, v in b.run.items() if k != "created"} == {k: v for k, v in f.run.items() if k != "created"}
    assert (bare.fits, bare.total_cycles, bare.seconds, bare.samples_per_second, bare.schedule) == \
        (fresh.fits, fresh.total_cycles, fresh.seconds, fresh.samples_per_second, fresh.schedule)
