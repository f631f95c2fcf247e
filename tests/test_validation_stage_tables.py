"""A composed run without its profile (``run_model(profile=False)``, what the validation report asks for) builds
no profile tables of its stage graphs (``StageGraph.base``: only the profile composition reads them), and the
kept stage graphs say so: a later run that composes a profile builds such a graph again, and its profile is the
one a fresh run gives; a run without its profile takes a kept graph with or without them."""

from __future__ import annotations

from bench.same_profiles import differences
from popvision_lite.emulator.models import emulated, pipeline
from popvision_lite.emulator.models.config import make_config
from tests.conftest import SMALL_DEVICE

# three distinct stage graphs (embedding, middle, heads) over three IPUs, replicas and accumulation composed
KW = dict(layers=3, hidden=64, heads=4, seq=32, vocab=512, batch=2, ipus=6, replicas=2, grad_accum=6)


def _kept() -> list:
    return [entry[2] for entry in pipeline._STAGE_GRAPHS._entries.values()]


def test_stage_graphs_of_a_run_without_profile_have_no_tables_and_are_built_again_for_one(tmp_path):
    cfg = make_config("bert", **KW)
    emulated.release_graphs()
    try:
        bare = emulated.run_model(cfg, SMALL_DEVICE, timing_only=True, profile=False)
        kept = _kept()
        assert len(kept) == 3 and all(sg.base is None for sg in kept)
        full = emulated.run_model(cfg, SMALL_DEVICE, timing_only=True)
        assert "reused" not in full.wall  # the kept graphs held no tables: built again, with them
        assert len(_kept()) == 3 and all(sg.base is not None for sg in _kept())
        assert not set(map(id, _kept())) & set(map(id, kept))
        again = emulated.run_model(cfg, SMALL_DEVICE, timing_only=True, profile=False)
        assert again.wall.get("reused") is True  # graphs with their tables serve a run without a profile
        emulated.write_run(full, tmp_path / "after_bare.pvl")
        emulated.release_graphs()
        fresh = emulated.run_model(cfg, SMALL_DEVICE, timing_only=True)
        emulated.write_run(fresh, tmp_path / "fresh.pvl")
    finally:
        emulated.release_graphs()
    assert differences(tmp_path / "after_bare.pvl", tmp_path / "fresh.pvl") == []
    for run in (bare, again):
        assert (run.fits, run.total_cycles, run.samples_per_second, run.oom_report) == \
            (fresh.fits, fresh.total_cycles, fresh.samples_per_second, fresh.oom_report)
        assert (run.profile_data.memory == fresh.profile_data.memory).all()
