"""A whole graph compiled for one device serves another whose target agrees on everything the compile read
(``Engine.compile_reads``, ``emulated._shared_build``), as the build already did (decision 0468): the Bow
ResNet-50 rows of ``validate`` take the Mk2 rows' compiled graph (the compile reads no clock, link or streaming
constant), not only their build.  The run must be the one a fresh build and compile for the Bow IPU give."""

from __future__ import annotations

from bench.same_profiles import differences
from popvision_lite.emulator import engine
from popvision_lite.emulator.models import emulated
from popvision_lite.emulator.models.config import make_config
from popvision_lite.emulator.target import Target
from tests.support import devices as test_devices

MK2, BOW = test_devices.register().id, test_devices.register_bow().id  # the GC200 at two clocks, 92 tiles each
CFG = dict(batch=2)  # ResNet-14 at tiny widths: outlined blocks and graph functions, as the validation rows'


def _counting_compiles(monkeypatch):
    compiled = []
    real = engine.compile_graph

    def count(graph, *a, **k):
        compiled.append(graph)  # (not its target: a read of it is one the compile made)
        return real(graph, *a, **k)

    monkeypatch.setattr(engine, "compile_graph", count)
    return compiled


def test_the_bow_run_takes_the_mk2_compile_and_is_the_fresh_bow_run(monkeypatch, tmp_path):
    cfg = make_config("resnet-tiny", **CFG)
    emulated.release_graphs()
    try:
        compiled = _counting_compiles(monkeypatch)
        mk2 = emulated.run_model(cfg, MK2, timing_only=True, profile=False)   # as the report's row runs it
        shared = emulated.run_model(cfg, BOW, timing_only=True)
        assert len(compiled) == 1 and not shared.wall.get("reused")
        emulated.write_run(shared, tmp_path / "shared.pvl")
        emulated.release_graphs()
        fresh = emulated.run_model(cfg, BOW, timing_only=True)
        assert len(compiled) == 2
        emulated.write_run(fresh, tmp_path / "fresh.pvl")
    finally:
        emulated.release_graphs()
    assert differences(tmp_path / "shared.pvl", tmp_path / "fresh.pvl") == []
    assert (shared.total_cycles, shared.seconds, shared.samples_per_second, shared.fits, shared.schedule) == \
        (fresh.total_cycles, fresh.seconds, fresh.samples_per_second, fresh.fits, fresh.schedule)
    assert shared.profile_data.target == fresh.profile_data.target != mk2.profile_data.target
    assert shared.seconds < mk2.seconds and shared.total_cycles == mk2.total_cycles   # the Bow clock, same cycles


def test_a_device_that_differs_in_what_the_compile_read_compiles_its_own(monkeypatch):
    real = Target.from_device.__func__

    def slower_sync(cls, device_id="ipu-mk2", num_ipus=1):
        t = real(cls, device_id, num_ipus)
        if device_id == BOW:
            # the compile's (each tile's internal sync), not the build's: above the maximum, so the sync takes longer
            t.em["min_ipu_sync_delay_cycles"] = 10 * t.em["max_ipu_sync_delay_cycles"]
        return t

    monkeypatch.setattr(Target, "from_device", classmethod(slower_sync))
    # one convolution (tests/test_validation_shared_build.py's build-read test runs it too): the compile reads the
    # sync for any graph, and the ResNet-14 rows' sharing is the test above
    cfg = make_config("conv")
    emulated.release_graphs()
    try:
        compiled = _counting_compiles(monkeypatch)
        builds = []
        real_build = emulated.build_model
        monkeypatch.setattr(emulated, "build_model", lambda *a, **k: builds.append(1) or real_build(*a, **k))
        mk2 = emulated.run_model(cfg, MK2, timing_only=True, profile=False)
        bow = emulated.run_model(cfg, BOW, timing_only=True, profile=False)
        assert (len(builds), len(compiled)) == (1, 2)              # the build shared, the compile not
        assert compiled[0] is compiled[1]
        emulated.release_graphs()
        fresh = emulated.run_model(cfg, BOW, timing_only=True, profile=False)
    finally:
        emulated.release_graphs()
    assert bow.total_cycles == fresh.total_cycles != mk2.total_cycles
