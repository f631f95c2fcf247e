"""The run record typed and checked (issue 45, decision 0211): the schedule, op counts, config and training state
of a profile's header are refused with a message naming the key when a value has the wrong kind or is out of its
bounds; the phases tile the step (bounded count, no gap, no overlap, adding up to the step); variable intervals lie
inside their variable's range; every sample and fixture still opens through the same checks."""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np
import pytest

import popvision_lite as pvl
from popvision_lite.errors import EmulatorError, ProfileError
from popvision_lite.profile.run_record import STEP_LIMIT, RunRecord, Schedule
from popvision_lite.testing.hostile_run import columns, resize_table, set_column, with_run

ROOT = Path(__file__).resolve().parents[2]
PIPE = ROOT / "sample_profiles" / "bert_mini_4ipu_pipeline.pvl"
MLP = ROOT / "sample_profiles" / "mlp_mk2.pvl"
V21 = ROOT / "tests" / "fixtures" / "v2.1" / "bert_mini_4ipu_pipeline.pvl"  # no phases table: rebuilt
ALL = sorted((ROOT / "sample_profiles").glob("*.pvl")) + sorted((ROOT / "tests" / "fixtures").glob("*/*.pvl"))


@pytest.mark.parametrize("path", ALL, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_sample_and_fixture_opens_through_the_checks(path):
    with pvl.open(path) as p:
        rec = p.record
        assert isinstance(rec.schedule, Schedule) and p.schedule is rec.schedule
        assert len(p.phases) >= 1 and p.replicas == rec.replicas_of_run >= 1
        sch = p.run.get("schedule")
        if sch:  # every recorded key is typed and keeps its value
            assert rec.schedule.to_dict() == {k: v for k, v in sch.items() if k in Schedule.KEYS}
        else:
            assert not rec.schedule and rec.schedule.replicas == 1 and rec.schedule.grad_accum == 1


def _sch(**kw):
    return lambda run: run["schedule"].update(kw)


@pytest.mark.parametrize("src, change, needle", [
    (PIPE, _sch(replicas="x"), "run['schedule']['replicas']: 'x' is not a whole number; expected a whole number 1..1024"),
    (PIPE, _sch(grad_accum=[4]), "run['schedule']['grad_accum']: [4] is not a whole number"),
    (PIPE, _sch(replicas={"a": 1}), "run['schedule']['replicas']: {'a': 1} is not a whole number"),
    (MLP, lambda r: r.update(replicas=1e308), "run['replicas']: 1e+308 is outside 1..1024"),
    (MLP, _sch(grad_accum=10 ** 30), "run['schedule']['grad_accum']: 1000000000000000000000000000000 is outside"),
    (V21, _sch(fill_cycles=10 ** 30, drain_cycles=5), "run['schedule']['fill_cycles']"),
    (PIPE, _sch(per_step_terms={"host": math.inf}), "is not a finite number"),
    (PIPE, _sch(per_step_terms={f"t{i}": 0.0 for i in range(65)}), "per_step_terms lists 65 terms (at most 64)"),
    (PIPE, _sch(phase_ipu_cycles={"fill": {"compute": -1}}), "['fill']: ['compute']: -1 is outside"),
    (PIPE, _sch(layer_split=list(range(2_000_000))), "a list of 2,000,000 entries"),
    (PIPE, lambda r: r["op_counts"].update(calls_per_microbatch=[10 ** 9] * 103), "is outside 0..65536"),
    (PIPE, lambda r: r["op_counts"].update(runs_per_call=[1, 2]), "must each list one count per op"),
    (PIPE, lambda r: r["training_state"][0].update(params="many"), "run['training_state'][0]['params']"),
    (PIPE, lambda r: r["training_state"][0]["mib"].update(weights=-1.0), "['mib']['weights']: -1.0 is outside"),
    (MLP, lambda r: r["config"].update(batch="x"), "run['config']['batch']: 'x' is not a whole number"),
    (MLP, lambda r: r.update(samples_per_second=1e300), "run['samples_per_second']: 1e+300 is outside"),
    (MLP, lambda r: r.update(schedule=[1, 2]), "run['schedule'] must be an object"),
])
def test_a_bad_run_record_is_refused_naming_the_key(tmp_path, src, change, needle):
    path = with_run(src, tmp_path / "bad.pvl", change)
    with pvl.open(path) as p, pytest.raises(ProfileError) as e:
        p.record  # noqa: B018 - checked when first read
    assert needle in str(e.value) and str(path) in str(e.value)


@pytest.mark.parametrize("argv", [["info"], ["verdict"], ["export", "--view", "summary", "-o", "{out}/s.csv"],
                                  ["export", "--chrome-trace", "-o", "{out}/t.json"]])
def test_the_commands_refuse_a_bad_schedule_with_exit_2(tmp_path, capsys, argv):
    """The issue's repros: a schedule of replicas "x" (verdict: ValueError), grad_accum as a list (summary
    export: TypeError), 1e308 replicas (verdict: a divisor search that never ended)."""
    from popvision_lite.cli import main

    bad = with_run(PIPE, tmp_path / "bad.pvl", _sch(replicas="x", grad_accum=[4]))
    cmd = [a.format(out=tmp_path) for a in argv]
    assert main([cmd[0], str(bad), *cmd[1:]]) == 2
    err = capsys.readouterr().err
    assert "run['schedule']['replicas']: 'x'" in err and "Traceback" not in err
    assert not list(tmp_path.glob("s.csv")) and not list(tmp_path.glob("t.json"))


# ---------------------------------------------------------------------------------------------- phases
def _phases_copy(tmp_path, src=PIPE):
    dst = tmp_path / "ph.pvl"
    dst.write_bytes(src.read_bytes())
    return dst, columns(dst, "phases")


def test_overlapping_phases_are_refused(tmp_path):
    """Overlaps summing to 220 % of the step inflated throughput 2.2x."""
    path, cols = _phases_copy(tmp_path)
    start = cols["start_cycle"].copy()
    start[1:] //= 2
    set_column(path, "phases", "start_cycle", start)
    with pvl.open(path) as p, pytest.raises(ProfileError, match=r"row 1: starts at cycle .* \(an overlap"):
        p.phases  # noqa: B018


def test_a_gap_between_phases_is_refused(tmp_path):
    """A gap made a 708-hour step."""
    path, cols = _phases_copy(tmp_path)
    start = cols["start_cycle"].copy()
    start[-1] += 5 * 10 ** 15
    set_column(path, "phases", "start_cycle", start)
    with pvl.open(path) as p, pytest.raises(ProfileError, match=r"\(a gap;"):
        p.phases  # noqa: B018


def test_phases_that_do_not_add_up_to_the_step_are_refused(tmp_path):
    path, cols = _phases_copy(tmp_path)
    cyc = cols["cycles"].copy()
    cyc[-1] += 1000  # the last phase longer: still contiguous, but past the schedule's step
    set_column(path, "phases", "cycles", cyc)
    with pvl.open(path) as p, pytest.raises(ProfileError, match="the phases add up to .* but the schedule's step is"):
        p.phases  # noqa: B018


def test_a_phase_past_any_step_is_refused_before_an_export_multiplies_it(tmp_path):
    """cycles x runs past 2^63 (each column within the reader's bound) ended the Chrome export in a traceback."""
    path, cols = _phases_copy(tmp_path, MLP)
    set_column(path, "phases", "runs_per_step", np.full_like(cols["runs_per_step"], 2 ** 40))
    set_column(path, "phases", "cycles", np.full_like(cols["cycles"], 2 ** 30))
    with pvl.open(path) as p, pytest.raises(ProfileError, match=f"past {STEP_LIMIT:,}"):
        p.phases  # noqa: B018


def test_a_phases_table_of_too_many_rows_is_refused_before_it_is_read(tmp_path):
    """10^6 valid phases kept info busy past 400 s; the row count alone refuses them now."""
    path, _ = _phases_copy(tmp_path, MLP)
    n = 100_000
    resize_table(path, "phases", n, {"phase_id": np.arange(n), "first_step": np.full(n, -1),
                                     "last_step": np.full(n, -1), "stored_runs": np.zeros(n)})
    t0 = time.perf_counter()
    with pvl.open(path) as p, pytest.raises(ProfileError, match="has 100,000 rows; a training step has at most 256"):
        p.phases  # noqa: B018
    assert time.perf_counter() - t0 < 5


def test_a_rebuilt_phases_table_gets_the_same_checks(tmp_path):
    """A 2.x file (no phases table) whose schedule makes a step past 2^50 cycles: refused when rebuilt."""
    path = with_run(V21, tmp_path / "v21.pvl", _sch(steady_cycles_per_microbatch=2 ** 49, pipeline_cycles=100))
    with pvl.open(path) as p, pytest.raises(ProfileError, match="cannot be rebuilt from run\\['schedule'\\]"):
        p.phases  # noqa: B018


def test_variable_intervals_outside_their_variable_are_refused(tmp_path):
    path = tmp_path / "iv.pvl"
    path.write_bytes(MLP.read_bytes())
    var = columns(path, "variables")
    v = int(np.flatnonzero(var["first_lstep"] >= 0)[0])  # a variable that is not always live
    lo, hi = int(var["first_lstep"][v]), int(var["last_lstep"][v])

    def intervals(a, b):
        resize_table(path, "variable_intervals", 1, {"var_id": [v], "first_lstep": [a], "last_lstep": [b]})

    intervals(lo, hi)  # inside its range: a valid interval
    with pvl.open(path) as p:
        assert p.variable_intervals[["var_id", "first_lstep", "last_lstep"]].values.tolist() == [[v, lo, hi]]
    intervals(lo, hi + 1)
    with pvl.open(path) as p, pytest.raises(ProfileError, match=f"variable_intervals' row 0: interval {lo}..{hi + 1} of "
                                                                f"variable {v} is outside its live range {lo}..{hi}"):
        p.variable_intervals  # noqa: B018


# ---------------------------------------------------------------------------------------------- the record type
def test_the_emulator_may_write_only_declared_keys_and_values_in_bounds():
    assert Schedule.build({"replicas": 4, "grad_accum": 8}).replicas == 4
    with pytest.raises(EmulatorError, match="'new_key' are not declared in profile/run_record.py"):
        Schedule.build({"replicas": 4, "new_key": 1})
    with pytest.raises(EmulatorError, match="run\\['schedule'\\]\\['replicas'\\]: 0 is outside 1..1024"):
        Schedule.build({"replicas": 0})


def test_absent_keys_read_as_their_declared_defaults_and_present_ones_as_recorded():
    s = Schedule.build({"grad_accum": 8, "per_step_terms": {"host": 0.5}})
    assert (s.replicas, s.grad_accum, s.terms_seconds, s.pipelined) == (1, 8, 0.5, False)
    assert "grad_accum" in s and "replicas" not in s and s["grad_accum"] == 8
    with pytest.raises(AttributeError):
        s.replicas = 2
    with pytest.raises(AttributeError, match="no key 'replica'"):
        s.replica  # noqa: B018 - a misspelt key is an error, not a silent default
    assert RunRecord.read(None, ValueError, "run").schedule.grad_accum == 1


def test_half_layers_are_recorded_as_they_are():
    """A placement that splits a layer's attention and FFN over two IPUs records 6.5 layers on a stage (the MLPerf
    POD16 BERT-Large config): a number, kept an int where it is whole."""
    s = Schedule.build({"layer_split": [1, 6.5, 6.5, 2]})
    assert s.layer_split == [1, 6.5, 6.5, 2] and isinstance(s.layer_split[0], int)
    rec = RunRecord.read({"training_state": [{"ipu": 0, "layers": 4.5}, {"ipu": 1, "layers": 4}]}, ValueError, "run")
    assert [t.layers for t in rec.training_state] == [4.5, 4] and isinstance(rec.training_state[1].layers, int)
