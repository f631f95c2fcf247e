"""A whole graph built for one device serves another whose target agrees on everything the build read
(``emulated.TargetReads``, ``_shared_build``; decision 0468): the Bow ResNet-50 rows of ``validate`` compile the
Mk2 rows' graph for the Bow IPU instead of building it again.  The run must be the one a fresh build gives.
The runs are on the tests' Mk2 and Bow devices with 92 tiles (decision 0483): what a build reads of its target
and what the compile for another one changes are not about the tile count."""

from __future__ import annotations

from bench.same_profiles import differences
from popvision_lite.emulator.models import emulated
from popvision_lite.emulator.models.config import make_config
from popvision_lite.emulator.target import Target
from tests.support import devices as test_devices

MK2, BOW = test_devices.register().id, test_devices.register_bow().id  # the GC200 at two clocks, 92 tiles each

# ResNet-14 at tiny widths: outlined blocks and graph functions, as the validation rows' ResNet-50
CFG = dict(batch=2)


def _counting_builds(monkeypatch):
    built = []
    real = emulated.build_model

    def count(cfg, device="ipu-mk2", needs_values=True):
        built.append(device)
        return real(cfg, device, needs_values)

    monkeypatch.setattr(emulated, "build_model", count)
    return built


def _keeping_runs(monkeypatch):
    runs = []
    real = emulated.run_model

    def keep(*a, **k):
        runs.append(real(*a, **k))
        return runs[-1]

    monkeypatch.setattr(emulated, "run_model", keep)  # predict imports it from the module when it runs
    return runs


def test_validate_runs_the_bow_row_on_the_mk2_build_and_it_is_the_fresh_bow_run(monkeypatch, tmp_path):
    """``validate``'s two rows of one configuration (Mk2, then Bow) build one graph: the Mk2 group keeps it for
    the Bow group (``run_cases``), whose run compiles it for the Bow IPU; that run is the one a fresh Bow build
    gives, profile for profile.  (The rows' runs are the ones ``predict`` made, ``profile=False`` as the report runs
    them: ResNet-14's four blocks are four kinds, so nothing is outlined and the flag changes nothing here.)"""
    from popvision_lite.mlperf_validation import Case, run_cases

    cases = [Case(id=f"r-{d}", label=d, model="resnet-tiny", config=dict(CFG), device=d)
             for d in (MK2, BOW)]
    emulated.release_graphs()
    built = _counting_builds(monkeypatch)
    runs = _keeping_runs(monkeypatch)
    try:
        together = run_cases(cases)
        assert built == [MK2] and not emulated._GRAPH_CACHE            # one build; the last group still releases
        # the Bow row is compiled for the Bow IPU, not the Mk2 row's kept run
        assert all(not r.error and not r.extra.get("graph_reused") for r in together)
        assert together[0].predicted_sps != together[1].predicted_sps
        mk2, shared = runs
        assert not shared.wall.get("reused")
        emulated.write_run(shared, tmp_path / "shared.pvl")
        fresh = emulated.run_model(make_config("resnet-tiny", **CFG), BOW, timing_only=True, profile=False)
        assert built == [MK2, BOW]
        emulated.write_run(fresh, tmp_path / "fresh.pvl")
    finally:
        emulated.release_graphs()
    assert differences(tmp_path / "shared.pvl", tmp_path / "fresh.pvl") == []
    assert (shared.total_cycles, shared.samples_per_second, shared.fits) == \
        (fresh.total_cycles, fresh.samples_per_second, fresh.fits)
    assert shared.seconds != mk2.seconds                            # compiled for the Bow clock


def test_a_device_that_differs_in_what_the_build_read_builds_its_own(monkeypatch):
    real = Target.from_device.__func__

    def wider_exchange(cls, device_id="ipu-mk2", num_ipus=1):
        t = real(cls, device_id, num_ipus)
        if device_id == BOW:
            t.em["exchange_bytes_per_cycle"] = 8   # read by the planners (ops/context.plan_target_of)
        return t

    monkeypatch.setattr(Target, "from_device", classmethod(wider_exchange))
    cfg = make_config("conv")
    emulated.release_graphs()
    built = _counting_builds(monkeypatch)
    try:
        emulated.run_model(cfg, MK2, timing_only=True)
        emulated.run_model(cfg, BOW, timing_only=True)
    finally:
        emulated.release_graphs()
    assert built == [MK2, BOW]


def test_target_reads_compare_what_was_read_and_only_that():
    mk2 = Target.from_device("ipu-mk2")
    with emulated.TargetReads.recording(mk2) as reads:
        _ = mk2.tiles_per_ipu, mk2.em["exchange_bytes_per_cycle"], mk2.em.get("nothing")
        mk2.ipu_of([0])
    assert type(mk2) is Target and type(mk2.em) is dict           # the target is itself again
    assert {"tiles_per_ipu", "ipu_of"} <= reads.attrs and "clock_hz" not in reads.attrs
    assert reads.em_keys == {"exchange_bytes_per_cycle", "nothing"}
    bow = Target.from_device("ipu-bow")
    assert mk2.clock_hz != bow.clock_hz and reads.same_build(mk2, bow)
    bow.em["exchange_bytes_per_cycle"] = 8
    assert not reads.same_build(mk2, bow)
    bow = Target.from_device("ipu-bow")
    bow.em["nothing"] = 1                                          # a key one has and the other has not
    assert not reads.same_build(mk2, bow)
    with emulated.TargetReads.recording(mk2) as clock:
        _ = mk2.clock_hz
    assert not clock.same_build(mk2, Target.from_device("ipu-bow"))
    with emulated.TargetReads.recording(mk2) as every:
        _ = dict(mk2.em.items())
    assert not every.same_build(mk2, Target.from_device("ipu-mk2"))   # the whole em read: never shared


def test_a_target_of_another_class_is_left_as_it_is_and_shares_nothing():
    class Own(Target):
        pass

    t = Own(Target.from_device("ipu-mk2").spec)
    with emulated.TargetReads.recording(t) as reads:
        _ = t.tiles_per_ipu
    assert type(t) is Own and not reads.same_build(t, Target.from_device("ipu-mk2"))
