"""Every script in examples/ runs as it is and prints what it promises (as pyqtgraph runs its examples).
onnx_from_pytorch.py is run by tests/emulator/onnx_import/test_onnx_import.py (it needs ONNX Runtime)."""

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


def test_every_example_is_listed():
    scripts = {p.name for p in EXAMPLES.glob("*.py")}
    assert scripts == set(EXPECT) | RUN_ELSEWHERE
    readme = (EXAMPLES / "README.md").read_text()
    assert all(f"`{s}`" in readme for s in scripts)


@pytest.mark.parametrize("script", sorted(EXPECT))
def test_example_runs(script, tmp_path):
    r = subprocess.run([sys.executable, str(EXAMPLES / script)], capture_output=True, text=True, timeout=300,
                       cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    for word in EXPECT[script]:
        assert word in r.stdout, (word, r.stdout[-2000:])
