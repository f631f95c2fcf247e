"""Every script in examples/ runs as it is and prints what it promises (as pyqtgraph runs its examples).
onnx_from_pytorch.py is run by tests/emulator/onnx_import/test_onnx_import.py (it needs ONNX Runtime).

The scripts run as ``__main__`` in one fresh interpreter, one after the other (each Python process compiles and
imports the package again: one child for the four, not four children); each script's output, exit status and any
traceback are its own."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
RUN_ELSEWHERE = {"onnx_from_pytorch.py"}
# a few words each script's output must contain: it ran to the end and computed something
EXPECT = {
    "tour_of_a_profile.py": ("BSP steps", "compute", "tile "),
    "compare_two_runs.py": ("total cycles", "B/A", "recompute"),
    "out_of_memory.py": ("Out of memory", "over capacity", "Verdict"),
    "emulate_in_python.py": ("cycles", "fits: True", "compute"),
}
MARK = "=== example: "
# runs each script as `python SCRIPT` would (its own __main__, sys.argv of its own, no arguments); its result line
# is written after its output: "<MARK>SCRIPT exit N" (N: 0, the SystemExit code, or "traceback")
DRIVER = f"""
import runpy, sys, traceback
for script in sys.argv[1:]:
    print({MARK!r} + script + " start", flush=True)
    sys.argv = [script]
    try:
        runpy.run_path(script, run_name="__main__")
        status = 0
    except SystemExit as e:
        status = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:
        traceback.print_exc(file=sys.stdout)
        status = "traceback"
    print({MARK!r} + script + f" exit {{status}}", flush=True)
"""


def test_every_example_is_listed():
    scripts = {p.name for p in EXAMPLES.glob("*.py")}
    assert scripts == set(EXPECT) | RUN_ELSEWHERE
    readme = (EXAMPLES / "README.md").read_text()
    assert all(f"`{s}`" in readme for s in scripts)


@pytest.fixture(scope="module")
def ran(tmp_path_factory) -> dict[str, tuple[str, str]]:
    """{script: (exit status, its output)} of the four scripts run in one fresh interpreter."""
    scripts = [str(EXAMPLES / s) for s in sorted(EXPECT)]
    r = subprocess.run([sys.executable, "-c", DRIVER, *scripts], capture_output=True, text=True, timeout=600,
                       cwd=tmp_path_factory.mktemp("examples"))
    assert r.returncode == 0, r.stderr[-3000:]
    out: dict[str, tuple[str, str]] = {}
    for chunk in r.stdout.split(MARK)[1:]:
        head, _, body = chunk.partition("\n")
        if head.endswith(" start"):
            out[Path(head.removesuffix(" start")).name] = ("unfinished", body)
        else:
            script, status = head.rsplit(" exit ", 1)
            out[Path(script).name] = (status, out[Path(script).name][1])
    return out


@pytest.mark.parametrize("script", sorted(EXPECT))
def test_example_runs(script, ran):
    status, stdout = ran[script]
    assert status == "0", stdout[-3000:]
    for word in EXPECT[script]:
        assert word in stdout, (word, stdout[-2000:])
