"""Emulate a bundled workload from Python and read the profile back, without the command line.

    python examples/emulate_in_python.py [OUT.pvl]

The same as ``popvision-lite emulate mlp --batch 8 --hidden 64 --timing-only -o OUT.pvl``.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import popvision_lite as pvl
from popvision_lite.emulator.models.config import make_config
from popvision_lite.emulator.models.emulated import run_model, write_run
from popvision_lite.units import format_seconds


def main(out=None) -> None:
    cfg = make_config("mlp", batch=8, hidden=64)
    run = run_model(cfg, device="ipu-mk2", timing_only=True)  # returns the run; nothing written yet
    print(f"{cfg.model}: {run.total_cycles:,} cycles = {format_seconds(run.seconds)}, fits: {run.fits}")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(out) if out else Path(tmp) / "mlp.pvl"
        write_run(run, path)
        with pvl.open(path) as p:
            print(p.steps.groupby("kind_name", observed=True)["ipu_cycles"].sum().to_string())


if __name__ == "__main__":
    main(*sys.argv[1:2])
