"""Which processes import pandas (~0.17 s of every process that does) and Qt: the command line's --version and
--help, and the emulator's build -> compile -> run -> profile data -> written profile, need neither (decision 0471:
the profile tables are typed numpy columns until a caller asks for a DataFrame)."""

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
