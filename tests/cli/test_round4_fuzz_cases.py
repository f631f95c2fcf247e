"""The two cases the round-4 fuzzer (bench/fuzz_records.py, seed 45) left open, as the CLI meets them: op counts
out of their bounds and of different lengths (case 791: its worker died of SIGSEGV), and a format-2.1 pipelined
profile with an empty ``profile_note`` whose phases are rebuilt (case 788: the verdict passed the worker's 4 GiB
cap).  Each exits 2 naming the file and the field, or gives its result."""

from __future__ import annotations

import contextlib
import io
import json

import pytest

from popvision_lite.cli import main
from popvision_lite.testing.hostile_run import with_run
from tests.cli.test_hostile_arguments import ROOT, _run

PIPE = ROOT / "sample_profiles" / "bert_mini_4ipu_pipeline.pvl"
PIPE_2_1 = ROOT / "tests" / "fixtures" / "v2.1" / "bert_mini_4ipu_pipeline.pvl"


def _op_counts(tmp_path, name, **change):
    return with_run(PIPE, tmp_path / name, lambda r: r["op_counts"].update(change))


@pytest.mark.parametrize("argv", [["info"], ["verdict"], ["export", "--view", "summary", "-o", "s.csv"]])
def test_case_791_op_counts_past_their_bound_exit_2_naming_the_field(tmp_path, argv):
    bad = _op_counts(tmp_path, "c791.pvl", runs_per_call=[1, 9, 0, 8], runs_per_step=[0])
    rc, msg = _run([argv[0], str(bad), *argv[1:]], tmp_path)
    assert rc == 2 and "c791.pvl" in msg and "run['op_counts']['runs_per_call']" in msg, msg
    assert "9 is outside 0..8" in msg and "Traceback" not in msg
    assert not (tmp_path / "s.csv").exists()


def test_op_counts_of_different_lengths_exit_2(tmp_path):
    """In bounds, but one list of 4 counts and one of 1: refused by the record check, before any array is built."""
    bad = _op_counts(tmp_path, "ragged.pvl", runs_per_call=[1, 2, 0, 1], runs_per_step=[0])
    rc, msg = _run(["verdict", str(bad)], tmp_path)
    assert rc == 2 and "ragged.pvl" in msg and "must each list one count per op" in msg, msg
    assert "4 (runs_per_call)" in msg and "1 (runs_per_step)" in msg


def test_op_counts_not_one_per_ops_row_exit_2(tmp_path):
    """Lists of one length that is not the ops table's: the file opens (info), the verdict says why it cannot."""
    bad = _op_counts(tmp_path, "short.pvl", runs_per_call=[1] * 4, runs_per_step=[2] * 4, calls_per_microbatch=[2] * 4)
    assert _run(["info", str(bad)], tmp_path)[0] == 0
    rc, msg = _run(["verdict", str(bad)], tmp_path)
    assert rc == 2 and "short.pvl" in msg and "run['op_counts'] lists 4 counts per key" in msg, msg


def test_case_788_a_2_1_pipeline_with_phases_rebuilt_gives_its_verdict(tmp_path):
    """The file itself was never the problem (its verdict peaks near 0.1 GB in a process of its own): the fuzz
    worker had kept every in-process export's widgets (bench/fuzz_records.py::_release_widgets)."""
    case = with_run(PIPE_2_1, tmp_path / "c788.pvl", lambda r: r.__setitem__("profile_note", ""))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(["verdict", str(case), "--json"])
    assert rc in (0, None)
    v = json.loads(out.getvalue())
    assert v["ipu"]["chips"] == 4 and v["ipu"]["samples_per_second"] > 0 and v["gpu_over_ipu"] > 0


def test_a_step_of_2_to_the_53_samples_searches_no_divisors_of_it(tmp_path, monkeypatch):
    """Seed 45's case 195 (in bounds: samples_per_step may be 2^53): the GPU placement search looked for every
    divisor of the samples each GPU group takes per step, 10^8 trial divisions, ~50 s per search and three searches
    per fuzz case (a timeout).  Past gpu_estimate.MAX_PASSES it takes the whole share as one pass, as the fitting
    micro-batch does."""
    from popvision_lite.analysis import gpu_estimate as ge
    from popvision_lite.analysis import gpu_parallel as gp

    def divisors(n, cap=None, _all=gp._divisors):
        assert n <= ge.MAX_PASSES, f"a divisor search of {n}"
        return _all(n, cap)

    monkeypatch.setattr(gp, "_divisors", divisors)
    monkeypatch.setattr(ge, "divisors", lambda n, _all=ge.divisors: divisors(n) and _all(n))

    setting = gp.Setting(samples_per_step=2.0 ** 53, samples_per_pass=8, params=1e6, optimizer="sgd",
                         precision="fp16", layers=1, activation_bytes=1.0, training=True)
    out = gp.candidates(4, {}, setting, transformer=False, node=8, framework="ddp")
    assert [(c.dp, c.micro_batch) for c in out] == [(4, 2 ** 51)]
    case = with_run(ROOT / "sample_profiles" / "gnn_mk2.pvl", tmp_path / "c195.pvl",
                    lambda r: r.setdefault("schedule", {}).update(samples_per_step=2.0 ** 53))
    rc, msg = _run(["verdict", str(case)], tmp_path)
    assert rc in (0, 2) and "Traceback" not in msg, msg
