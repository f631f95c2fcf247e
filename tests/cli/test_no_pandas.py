"""Which processes import pandas (~0.17 s of every process that does) and Qt: the command line's --version and
--help, the emulator's build -> compile -> run -> profile data -> written profile, and a whole ``emulate`` of a
bundled model with its end-of-run lines (run_totals over the run in memory) and, for a run that does not fit, its
advice (fit_constraint's headline from the run's numpy columns, decision 0478), need neither (decision 0471: the
profile tables are typed numpy columns until a caller asks for a DataFrame)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# prints the heavy modules this process imported, after running the code given
REPORT = """
import json, sys
print(json.dumps(sorted(m for m in ("pandas", "PySide6") if m in sys.modules)))
"""

CLI = """
import sys
from popvision_lite.cli.main import main
sys.argv = ["popvision-lite", *{args!r}]
try:
    main()
except SystemExit:
    pass
"""

# one compute set over 3 tiles (tests/emulator/test_memory.py), run and written as `emulate` writes a run
EMULATE = """
import sys
from popvision_lite.emulator import Engine, Graph, Target
from popvision_lite.emulator import mapping as M
from popvision_lite.emulator import programs as P
from popvision_lite.emulator.codelets import popops as CO
from popvision_lite.profile.writer import write_profile

g = Graph(Target.from_device("ipu-mk2", num_ipus=1))
mp = M.linear(600, range(3))
x, y = (g.add_variable(n, (600,), "float32", mapping=mp) for n in ("x", "y"))
cs = g.add_compute_set("add")
tiles, starts, sizes = M.worker_split(y)
g.add_vertices(cs, CO.ADD, tiles, fields={"a": x.regions(starts, sizes), "b": x.regions(starts, sizes),
                                          "out": y.regions(starts, sizes)})
res = Engine(g, P.Sequence([P.Execute(cs)]), mode="timing").run()
write_profile(sys.argv[1], res.profile_data)
"""


def _heavy(code: str, *argv: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", code + REPORT, *argv], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.parametrize("args", [["--version"], ["--help"], ["emulate", "--help"]])
def test_version_and_help_import_neither_pandas_nor_qt(args):
    assert _heavy(CLI.format(args=args)) == []


def test_the_emulator_builds_runs_and_writes_a_profile_without_pandas(tmp_path):
    path = tmp_path / "run.pvl"
    assert _heavy(EMULATE, str(path)) == []
    from popvision_lite.profile.reader import open_profile

    with open_profile(path) as p:  # the file is whole: its tables read back
        assert p.stored_table("compute_sets")["name"].tolist() == ["add"]
        assert len(p.stored_table("steps")) >= 1


# whole `emulate` commands in one process, each followed by the heavy modules imported so far
EMULATES = """
import json, sys
from popvision_lite.cli.main import main
for i, args in enumerate({runs!r}):
    rc = main(["emulate", *args, "-q", "-o", sys.argv[1 + i]])
    print("RESULT", json.dumps([rc, sorted(m for m in ("pandas", "PySide6") if m in sys.modules)]), flush=True)
"""


def test_a_whole_emulate_of_a_bundled_model_prints_its_end_of_run_lines_without_pandas(tmp_path):
    # bert-tiny as bundled (one stage; its schedule's lines) and pipelined over two IPUs (two stages, IPUs waiting
    # for each other): run_totals' time split, the schedule and training-state lines (analysis.summary/insights);
    # then an MLP too large for a Mk1 (exit 3): the advice, what binds it down to the tensor (fit_constraint)
    runs = [["bert-tiny", "--timing-only"], ["bert-tiny", "--pipeline-stages", "2", "--timing-only"],
            ["mlp", "--device", "mk1", "--hidden", "8192", "--layers", "1", "--batch", "4", "--inference",
             "--precision", "fp32", "--timing-only"]]
    paths = [tmp_path / f"run{i}.pvl" for i in range(len(runs))]
    r = subprocess.run([sys.executable, "-c", EMULATES.format(runs=runs), *map(str, paths)], cwd=ROOT,
                       capture_output=True, text=True, check=True)
    out = r.stdout
    results = [json.loads(line.split(" ", 1)[1]) for line in out.splitlines() if line.startswith("RESULT ")]
    assert results == [[0, []], [0, []], [3, []]], out + r.stderr
    splits = [line for line in out.splitlines() if line.startswith("time split of one optimizer step")]
    assert [s.split(" (", 1)[1].split(")", 1)[0] for s in splits] == ["IPU time summed over 1 IPU",
                                                                        "IPU time summed over 2 IPUs"]
    assert "IPU 1: " in out  # the second stage's training-state line
    from popvision_lite.cli.info import profile_totals, time_split_line

    for path, line in zip(paths[:2], splits, strict=True):  # the lines are the written profiles' (read back)
        assert time_split_line(profile_totals(path)) == line
    from popvision_lite.analysis.fit_constraint import binding_constraint
    from popvision_lite.profile.reader import open_profile

    why = [line for line in r.stderr.splitlines() if line.startswith("why: ")]
    with open_profile(paths[2]) as p:  # the advice is the written profile's whole analysis' headline
        assert why == [f"why: {binding_constraint(p).headline()}"]
    assert "mostly variable (layer0/w, on 1,024 of 1,216 tiles)" in why[0]
