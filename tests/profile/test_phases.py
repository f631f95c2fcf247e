"""The phases table (format 2.2): stored by the writer, rebuilt for older files by the same function over
``run["schedule"]``, and the rule that rebuilds it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import popvision_lite as pvl
from popvision_lite.errors import ProfileError
from popvision_lite.profile import schema
from popvision_lite.profile.phases import phases_from_schedule
from popvision_lite.profile.run_record import Schedule
from popvision_lite.profile.writer import write_profile
from popvision_lite.testing.synthetic import make_synthetic

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
PIPE = "bert_mini_4ipu_pipeline.pvl"
OLD = sorted((FIXTURES / "v2.1").glob("*.pvl")) + sorted((FIXTURES / "v2.0").glob("*.pvl")) + \
    sorted((FIXTURES / "v1").glob("*.pvl"))


def _tiles_the_step(ph: pd.DataFrame, step_cycles: int) -> None:
    wall = ph["cycles"] * ph["runs_per_step"]
    assert ph["start_cycle"].iat[0] == 0
    assert (ph["start_cycle"].to_numpy()[1:] == (ph["start_cycle"] + wall).to_numpy()[:-1]).all()
    assert int(wall.sum()) == step_cycles


@pytest.mark.parametrize("path", OLD, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_older_files_open_with_phases_that_tile_their_step(path):
    with pvl.open(path) as p:
        assert (p.format_version, p.format_minor) < (2, 2)
        ph = p.stored_table("phases")
        assert list(ph.columns) == list(schema.TABLE_COLUMNS["phases"])
        for col, dt in schema.COLUMN_DTYPES["phases"].items():
            assert (ph[col].dtype == object) if dt == "str" else (ph[col].dtype == np.dtype(dt)), col
        _tiles_the_step(ph, int(p.run.get("total_cycles", p.stored_table("steps")["end_cycle"].max())))
        # every stored step belongs to a phase, and the phases' step ranges follow each other
        rng = ph[ph["first_step"] >= 0]
        assert rng["first_step"].iat[0] == 0 and rng["last_step"].iat[-1] == len(p.stored_table("steps")) - 1
        assert (rng["first_step"].to_numpy()[1:] == rng["last_step"].to_numpy()[:-1] + 1).all()
        sch = p.run.get("schedule") or {}
        if "pipeline_cycles" in sch and sch.get("pipeline_depth", sch.get("stages", 1)) > 1:
            assert list(ph["name"][:3]) == ["fill", "steady state", "drain"]
        elif "pipeline_cycles" in sch:  # one stage: no fill or drain, one micro-batch per pipeline cycle
            assert ph["name"].iat[0] == "steady state" and ph["runs_per_step"].iat[0] == sch["grad_accum"]
        elif path.parent.name == "v1":
            assert list(ph["name"]) == ["whole run"]  # no schedule: the trivial one-phase table


def test_rebuilt_rule_gives_the_table_the_writer_stores():
    """The 2.2 sample stores fill_cycles / drain_cycles / phase_ipu_cycles; without them (as a 2.1 file) the
    rule rebuilds the same fill, steady state and drain from the copy steps closing each pipeline cycle."""
    with pvl.open(ROOT / "sample_profiles" / PIPE) as p:
        assert (p.format_version, p.format_minor) >= (2, 2)  # regenerate the samples with make-samples
        stored = p.stored_table("phases")
        sch = dict(p.run["schedule"])
        for k in ("fill_cycles", "drain_cycles", "phase_ipu_cycles"):
            sch.pop(k)
        rebuilt = phases_from_schedule(Schedule.build(sch), p.stored_table("steps"), p.target.clock_hz)
    cols = ["name", "kind", "start_cycle", "cycles", "runs_per_step", "first_step", "last_step", "stored_runs"]
    pd.testing.assert_frame_equal(rebuilt[cols].reset_index(drop=True), stored[cols].reset_index(drop=True),
                                  check_dtype=False)
    assert (stored.loc[stored["kind"].isin(["fill", "steady", "drain"]), "ipu_compute"] > 0).all()
    assert (rebuilt["ipu_compute"] == -1).all()


def test_v2_1_fixture_rebuilt_like_the_same_run_stored_by_v2_2():
    """A v2.1 file has no phases table: it is rebuilt from its schedule exactly as v2.2 stored it for the same run
    (the v2.2 fixture: the sample of that release, same costs; today's sample has newer costs)."""
    with pvl.open(FIXTURES / "v2.1" / PIPE) as old, pvl.open(FIXTURES / "v2.2" / PIPE) as new:
        assert (new.format_version, new.format_minor) == (2, 2)
        cols = ["name", "cycles", "runs_per_step"]
        pd.testing.assert_frame_equal(old.stored_table("phases")[cols], new.stored_table("phases")[cols], check_dtype=False)


def _pipeline_schedule(**kw):
    s = dict(pipeline_cycles=13, pipeline_total_cycles=1000, pipeline_depth=4, stages=4, grad_accum=7,
             steady_cycles_per_microbatch=100, fill_cycles=420, drain_cycles=480, allreduce_cycles=30,
             optimizer_cycles=20, stream_cycles=11)
    s.update(kw)
    return s


def test_pipeline_rule_and_per_step_terms():
    ph = phases_from_schedule(Schedule.build(_pipeline_schedule(per_step_terms={"host sync": 2e-6, "launch": 0.0})),
                              None, 1e9)
    assert list(ph["name"]) == ["fill", "steady state", "drain", "stream in", "all-reduce", "optimizer",
                                "stream out", "host sync"]
    assert list(ph["cycles"]) == [420, 100, 480, 5, 30, 20, 6, 2000]
    assert ph["runs_per_step"].iat[1] == 7 - 6  # G - (2D - 2)
    # a host term is no step kind (format 3.2: the part "host"; 3.1 stored "sync")
    assert list(ph["time_kind"][3:]) == ["stream_copy", "exchange_global", "compute", "stream_copy", ""]
    assert (ph["first_step"] == -1).all()  # no steps given
    _tiles_the_step(ph, 1000 + 30 + 20 + 11 + 2000)


def test_whole_graph_schedule_and_no_schedule():
    steps = pd.DataFrame({"kind": [0, 1], "ipu": [0, 0], "start_cycle": [0, 60], "end_cycle": [60, 80]})
    one = phases_from_schedule(None, steps, 1e9)
    assert list(one["name"]) == ["whole run"] and one["cycles"].iat[0] == 80 and one["last_step"].iat[0] == 1
    g = phases_from_schedule(Schedule.build(dict(grad_accum=4, steady_cycles_per_microbatch=90, optimizer_cycles=7)),
                             steps, 1e9)
    assert list(g["name"]) == ["micro-batch", "gradient accumulation", "optimizer"]
    assert list(g["cycles"]) == [80, 10, 7] and list(g["runs_per_step"]) == [4, 4, 1]
    assert list(g["first_step"]) == [0, -1, -1]


def test_old_file_with_elided_fill_splits_fill_and_drain_evenly():
    sch = _pipeline_schedule(profile_pipeline_cycles_elided=3)
    del sch["fill_cycles"], sch["drain_cycles"]
    ph = phases_from_schedule(Schedule.build(sch), None, 1e9)
    assert list(ph["cycles"][:3]) == [450, 100, 450]  # (1000 - 1 x 100) / 2 each


def test_writer_refuses_an_unsorted_pipeline(tmp_path):
    data = make_synthetic(num_ipus=1, tiles_per_ipu=8, num_steps=4, seed=1, num_layers=1)
    data.steps["start_cycle"], data.steps["end_cycle"] = [10, 0, 20, 30], [20, 10, 30, 40]
    data.run["schedule"] = _pipeline_schedule()
    with pytest.raises(ProfileError, match="phases"):
        write_profile(tmp_path / "x.pvl", data)


def test_v3_1_host_term_stored_as_sync_counts_as_host():
    """A 3.1 file stored its host terms with time_kind "sync"; the totals count them as the part "host" (every IPU
    waiting for the host), as a 3.2 file that stores no step kind for them."""
    from popvision_lite.analysis.run_totals import run_totals

    with pvl.open(FIXTURES / "v3.1" / "bert_large_1ipu_oom.pvl") as p:
        assert (p.format_version, p.format_minor) == (3, 1)
        term = p.phases[p.phases["kind"] == "term"]
        assert list(term["name"]) == ["host_step"] and list(term["time_kind"]) == ["sync"]
        rt = run_totals(p)
        host = int(term["cycles"].iat[0]) * int(term["runs_per_step"].iat[0]) * rt.stages
        assert rt.part_cycles["host"] == host and rt.kind_cycles["host"] == host
        assert rt.part_cycles["sync"] < host / 100  # not in sync
        assert rt.bottleneck == "host" and "host step 167 ms (calibrated, PopART)" in rt.bottleneck_text
