"""Progress reports real fractions of the work, with an ETA: an emulation's fraction moves as its stage graphs
are built and compiled program by program and as its profile is written (the POD16 BERT-Large emulate sat at 5 %
for 24 s: building and compiling were one step of the line); the sweep's line and validate's rows say the share
done and when the rest will be (emulator/progress.py)."""

from __future__ import annotations

import io

import pytest

from popvision_lite.emulator import progress as pg
from tests.support.devices import ID as SMALL  # the shipped Mk2 cut to 92 tiles (decision 0395)


def test_eta_is_the_time_so_far_over_the_share_done():
    assert pg.eta_text(10.0, 0.5) == "ETA 10 s"
    assert pg.eta_text(30.0, 0.25) == "ETA 1.5 min"
    assert pg.eta_text(10.0, 0.01) == "" and pg.eta_text(0.5, 0.5) == ""  # too early to say
    assert pg.eta_text(10.0, 1.0) == ""


def test_the_line_carries_the_eta_and_the_app_still_reads_it(monkeypatch):
    clock = iter([0.0, 4.0, 4.0])
    monkeypatch.setattr(pg.time, "perf_counter", lambda: next(clock))
    out = io.StringIO()
    bar = pg.ProgressBar(stream=out)
    bar("compiling stage program 1 of 2", 0.4)
    line = out.getvalue().strip()
    assert line.endswith("40% compiling stage program 1 of 2 (4.0 s, ETA 6 s)"), line
    assert pg.parse_progress(line) == (0.4, "compiling stage program 1 of 2")
    assert pg.parse_progress("[###...]  30% compiling (2.2 s)") == (0.3, "compiling")  # the form before


def test_within_maps_a_stage_onto_its_share():
    seen = []
    f = pg.within(lambda s, x: seen.append((s, x)), "writing profile", 0.8, 1.0)
    f(0.0), f(0.5), f(2.0)
    assert seen == [("writing profile", 0.8), ("writing profile", 0.9), ("writing profile", 1.0)]
    assert pg.within(None, "x", 0, 1) is None


@pytest.mark.parametrize("model", ["composed", "whole"])
def test_an_emulation_reports_its_work_as_it_goes(tmp_path, monkeypatch, model):
    """Every program compiled and every batch of steps written moves the fraction (the compile's time throttle
    off); the fraction never goes back and the stages come in order."""
    from popvision_lite.emulator.compile import _Ticker
    from popvision_lite.emulator.models.config import make_config
    from popvision_lite.emulator.models.emulated import WRITE_STARTS, release_graphs, run_model
    from popvision_lite.profile import writer

    monkeypatch.setattr(_Ticker, "PROGRESS_EVERY_S", 0.0)
    release_graphs()  # build and compile the graphs: no earlier test's kept ones (models/stage_cache.py)
    seen = []
    if model == "composed":  # a pipelined BERT: two distinct stage graphs
        cfg = make_config("bert-tiny", layers=2, batch=2, seq=32, ipus=2, pipeline_stages=2, grad_accum=4)
    else:
        cfg = make_config("mlp", batch=8, hidden=32, layers=2)
    # on the tests' device with 92 tiles (decision 0395): a report per program and per batch of steps, any tile count
    run = run_model(cfg, SMALL, timing_only=True, profile_path=tmp_path / "r.pvl",
                    progress=lambda s, f: seen.append((s, f)))
    fr = [f for _, f in seen]
    assert fr == sorted(fr) and fr[-1] == 1.0 and seen[-1][0] == "done"
    stages = list(dict.fromkeys(s for s, _ in seen))
    compiling = [f for s, f in seen if s.startswith("compiling")]
    assert len(set(compiling)) > 20, compiling  # one report per program compiled, not one per stage
    writing = [f for s, f in seen if s == "writing profile"]
    batches = -(-len(run.profile_data.steps) // writer.WRITE_BATCH)  # a report per batch of steps written
    assert writing[0] == WRITE_STARTS and len(set(writing)) == 1 + batches
    if model == "composed":
        assert stages[:4] == ["building stage program 1 of 2", "compiling stage program 1 of 2",
                              "building stage program 2 of 2", "compiling stage program 2 of 2"]
        assert len({f for s, f in seen if s == "building stage program 1 of 2"}) > 3  # the build's phases
        # run again: both stage graphs are kept ones, each stage's share is passed at once and the line goes on
        again = []
        run_model(cfg, SMALL, timing_only=True, progress=lambda s, f: again.append((s, f)))
        fr = [f for _, f in again]
        assert fr == sorted(fr) and fr[-1] == 1.0
        compiled = [f for s, f in again if s.startswith("compiling stage program")]
        assert len(compiled) == 2, again  # the end of each kept stage's share, nothing compiled
    else:
        assert stages[:2] == ["planning and building graph", "compiling"]


def test_the_sweep_line_says_the_share_and_the_eta(monkeypatch):
    from popvision_lite.sweep import engine, progress_line

    clock = iter([100.0, 120.0, 140.0])
    monkeypatch.setattr(progress_line.time, "perf_counter", lambda: next(clock))
    out = io.StringIO()
    line = progress_line.ProgressLine(stream=out)
    o = engine.Outcome(ok=1, failed=1, resumed=2, workers=2)
    line(o, 10)  # 4 of 10 done at 20 s, 2 of them run (the 2 resumed cost nothing): 6 left at 10 s each
    assert out.getvalue().strip() == ("sweep: 4/10 (40%) | 3 ok (2 resumed), 1 failed, 6 remaining | 2 worker(s) | "
                                      "20.0 s, ETA 1 min")
    line(o, 10, final=True)
    assert "ETA" not in out.getvalue().splitlines()[-1]
