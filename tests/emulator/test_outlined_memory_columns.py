"""An outlined, recomputed ResNet run adds the other blocks' memory and its saved inputs' liveness from the
profile tables as the builder holds them (typed numpy columns, decision 0471): ``emulated._saved_on_liveness``
reads the programs table's columns, so the run builds no DataFrame and imports no pandas (~0.4 s CPU of the
ResNet-50 replica row before)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

RUN = """
import json, sys
from popvision_lite.emulator.models import emulated
from popvision_lite.emulator.models.config import make_config
from tests.support import devices

cfg = make_config("resnet-tiny", layers=50, hidden=8, image=32, batch=2, recompute=True, outline=True)
res = emulated.run_model(cfg, devices.register().id, timing_only=True)
heavy = "pandas" in sys.modules
names = [str(n) for n in res.profile_data.table("variables")["name"]]
saved = sum(n.endswith("[saved for an outlined block]") for n in names)
print("RESULT", json.dumps([heavy, saved, len(res.profile_data.table("variable_intervals") or [])]))
"""


def test_an_outlined_run_places_its_saved_inputs_without_pandas():
    out = subprocess.run([sys.executable, "-c", RUN], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    heavy, saved, _ = json.loads(next(ln for ln in out.splitlines() if ln.startswith("RESULT ")).split(" ", 1)[1])
    # the saved inputs were placed on their liveness steps (the path that reads the programs table ran) ...
    assert saved > 10, out
    # ... and nothing imported pandas
    assert heavy is False, out
