"""`python -m bench` runs the scripts and rebuilds the generated report from every script's latest run."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
import bench.__main__ as runner  # noqa: E402


def test_every_bench_script_is_listed_with_quick_args():
    scripts = {p.stem for p in (ROOT / "bench").glob("*.py")} - {"__init__", "__main__"}
    unlisted = scripts - set(runner.SCRIPTS) - set(runner.NOT_BENCHMARKS)
    assert not unlisted, f"add {sorted(unlisted)} to bench/__main__.py SCRIPTS (or NOT_BENCHMARKS with a reason)"
    assert set(runner.SCRIPTS) <= scripts
    assert set(runner.QUICK_ARGS) == set(runner.SCRIPTS)


def test_runner_writes_report_and_keeps_other_scripts_sections(tmp_path, capsys):
    # the runner in this process (``python -m bench`` is ``sys.exit(main())``): the script still runs in its own
    assert runner.main(["trace_load_peer", "--quick", "--write-doc", "--report-dir", str(tmp_path)]) == 0, \
        capsys.readouterr().err[-2000:]
    data = json.loads((tmp_path / "performance-results.json").read_text())
    rec = data["runs"]["trace_load_peer"]
    assert rec["rc"] == 0 and rec["quick"] is True and rec["seconds"] > 0
    assert rec["results"][0]["bench"] == "trace_load_peer"
    for key in ("cpu", "logical_cores", "ram_gb", "python", "numpy", "hdf5"):
        assert rec["machine"].get(key), key
    md = (tmp_path / "performance-results.md").read_text()
    assert "## trace_load_peer" in md and "x ours" in md and "| CPU |" in md
    assert "BENCH-RESULT" not in md
    # a second run of another script adds its section and keeps the first one
    data["runs"]["roofline"] = dict(rec, name="roofline", output=["analyze: 5 ms"], results=[])
    (tmp_path / "performance-results.json").write_text(json.dumps(data))
    runner.write_report([dict(rec, name="fuzz_profiles", output=["outcomes: profile_error 60"])], quick=True,
                        json_path=tmp_path / "performance-results.json", md_path=tmp_path / "performance-results.md")
    md = (tmp_path / "performance-results.md").read_text()
    for name in ("trace_load_peer", "roofline", "fuzz_profiles"):
        assert f"## {name}" in md
    assert md.index("## fuzz_profiles") < md.index("## trace_load_peer")  # SCRIPTS order


def test_unknown_script_is_exit_2():
    assert runner.main(["nope"]) == 2


def test_runner_writes_no_report_without_write_doc(tmp_path, capsys, monkeypatch):
    """A run checks and prints; only --write-doc touches the recorded report (a run on another machine or of a
    change in progress leaves the numbers alone).  The script's run is a record with a result and a goal row, as
    ``run_script`` returns it: running a script for real, and the report it then writes, is the test above; what
    is tested here is what ``main`` does with the record."""
    ran = []

    def run_script(name, args, timeout, echo=True):
        ran.append((name, args))
        goal = runner.targets.row("a window's load", 0.5, 1.0, " s")
        return dict(name=name, args=args, rc=0, timed_out=False, seconds=0.4, date="2026-12-07 21:00 UTC",
                    load_before=None, load_after=None, output=["BENCH-RESULT {}"],
                    results=[dict(bench=name, targets=[goal])])

    monkeypatch.setattr(runner, "run_script", run_script)
    assert runner.main(["trace_load_peer", "--quick", "--report-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert ran == [("trace_load_peer", runner.QUICK_ARGS["trace_load_peer"])]
    assert "=== bench/trace_load_peer.py" in out and "a window's load" in out  # it printed what it ran
    assert not list(tmp_path.iterdir())


def test_failing_script_is_reported(tmp_path, monkeypatch):
    rec = runner.run_script("fuzz_profiles", ["--cases", "not-a-number"], timeout=120, echo=False)
    assert rec["rc"] == 2 and any("invalid int value" in line for line in rec["output"])
    runner.write_report([rec], quick=True, json_path=tmp_path / "r.json", md_path=tmp_path / "r.md")
    assert "| 2 |" in (tmp_path / "r.md").read_text()
