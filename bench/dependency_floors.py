"""Do the lowest versions pyproject.toml allows really work?  (``python -m bench.dependency_floors``)

pip keeps a package a user's environment already has when it meets the requirement, so a floor that is too low
is a broken install for someone.  This script reads the runtime requirements of ``pyproject.toml``, turns each
floor ``name>=X`` into ``name==X`` (a requirement without a floor, such as ``ml_dtypes<0.7``, is left to pip),
installs them into a fresh venv together with this repository (non-editable: the wheel a user gets), and in
that venv:

1. prints the versions it got (and the HDF5 library h5py was built with);
2. writes a profile (``popvision-lite emulate mlp``, full numerics) and opens it;
3. opens every bundled sample (``sample_profiles/*.pvl``) and reads every table, the memory, liveness and a step
   x tile window;
4. exports one view headless (``popvision-lite export SAMPLE --view memory -o memory.png``; Qt offscreen);
5. runs a small sweep on a local Dask cluster (``popvision-lite sweep``, two points).

Each check prints ``ok`` or the error, and one ``BENCH-RESULT`` JSON line sums them up.  Options:
``--venv DIR`` (default: a new temporary folder, removed afterwards; an existing DIR is reused as it is),
``--pin NAME==VERSION`` (repeatable: try another version of one package, e.g. ``--pin h5py==3.15.1``),
``--keep`` (keep the temporary venv).  Needs the package registry pip is configured for.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# what runs inside the floor venv, from a scratch folder outside the repository (the installed wheel is tested)
CHECKS = r"""
import json, subprocess, sys, os, time, traceback
from importlib import metadata
from pathlib import Path

samples = Path(sys.argv[1])
out = Path(sys.argv[2])
cli = [sys.executable, "-m", "popvision_lite.cli"]
results = {}

def check(name, fn):
    t0 = time.perf_counter()
    try:
        detail = fn()
        results[name] = "ok"
        print(f"{name}: ok ({time.perf_counter() - t0:.1f} s){': ' + detail if detail else ''}", flush=True)
    except Exception as e:
        results[name] = f"{type(e).__name__}: {e}"[:400]
        print(f"{name}: FAILED: {results[name]}", flush=True)
        traceback.print_exc(limit=3)

def versions():
    import h5py
    names = ["numpy", "pandas", "h5py", "hdf5plugin", "PySide6-Essentials", "pyqtgraph", "psutil", "onnx",
             "ml_dtypes", "dask", "distributed", "xxhash"]
    got = {n: metadata.version(n) for n in names}
    got["HDF5"] = h5py.version.hdf5_version
    results["versions"] = got
    return ", ".join(f"{k} {v}" for k, v in got.items())

def run(args):
    p = subprocess.run(cli + args, capture_output=True, text=True, timeout=900, env=os.environ | {"QT_QPA_PLATFORM": "offscreen"})
    if p.returncode != 0:
        raise RuntimeError(f"exit {p.returncode}: {(p.stderr or p.stdout).strip()[-600:]}")
    return p.stdout

def write_profile():
    run(["emulate", "mlp", "--batch", "8", "-o", str(out / "mlp.pvl")])
    import popvision_lite as pvl
    with pvl.open(out / "mlp.pvl") as p:
        assert p.run["fits"] and all(c["passed"] for c in p.run["numeric_checks"].values())
        return f"{(out / 'mlp.pvl').stat().st_size:,} bytes, {len(p.steps)} steps"

def open_samples():
    import popvision_lite as pvl
    from popvision_lite.profile.schema import TABLE_COLUMNS
    names = sorted(samples.glob("*.pvl"))
    assert len(names) >= 8, names
    for path in names:
        with pvl.open(path) as p:
            for t in TABLE_COLUMNS:
                p.table(t)
            p.memory.by_tile(); p.liveness.tile_bytes()
            p.step_tiles.window(0, min(100, p.num_steps))
    return f"{len(names)} samples"

def export_view():
    run(["export", str(samples / "bert_tiny_mk2.pvl"), "--view", "memory", "-o", str(out / "memory.png")])
    size = (out / "memory.png").stat().st_size
    assert size > 10_000, size
    return f"memory.png {size:,} bytes"

def sweep():
    run(["sweep", "--model", "mlp", "--grid", "batch=4,8", "--workers", "1", "-o", str(out / "sweep")])
    rows = (out / "sweep" / "sweep.csv").read_text().strip().splitlines()
    assert len(rows) == 3, rows
    return "2 points"

check("versions", versions)
check("write a profile", write_profile)
check("open every sample", open_samples)
check("export one view", export_view)
check("sweep on dask", sweep)
print("RESULTS " + json.dumps(results), flush=True)
"""


def floors(pyproject: Path = ROOT / "pyproject.toml", extra: list[str] | None = None) -> list[str]:
    """Each runtime requirement with its floor pinned (``name>=X`` -> ``name==X``, other clauses dropped);
    requirements without a floor are kept as written.  ``extra`` (``NAME==VERSION``) replaces a package's pin."""
    deps = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["dependencies"]
    over = {re.split(r"[=<>!\[]", p, maxsplit=1)[0].lower(): p for p in (extra or [])}
    out = []
    for d in deps:
        d = d.split(";")[0].strip()
        name = re.split(r"[=<>!~ ]", d, maxsplit=1)[0]
        base = name.split("[")[0].lower()
        if base in over:
            out.append(over.pop(base))
            continue
        m = re.search(r">=\s*([\w.]+)", d)
        out.append(f"{name}=={m.group(1)}" if m else d)
        if m and name.startswith("dask[distributed]"):  # the extra pins distributed to dask's own version
            out.append(f"distributed=={m.group(1)}")
    return out + list(over.values())


def _pip(venv: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(venv / "bin" / "python"), "-m", "pip", *args], capture_output=True, text=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--venv", type=Path, help="venv folder (default: a temporary one)")
    ap.add_argument("--pin", action="append", default=[], metavar="NAME==VERSION", help="another version of one package")
    ap.add_argument("--keep", action="store_true", help="keep the temporary venv")
    args = ap.parse_args(argv)
    pins = floors(extra=args.pin)
    scratch = Path(tempfile.mkdtemp(prefix="pvl-floors-"))
    venv = args.venv or scratch / "venv"
    t0 = time.perf_counter()
    try:
        if not (venv / "bin" / "python").exists():
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        print("installing:", " ".join(pins), flush=True)
        constraints = scratch / "floors.txt"
        constraints.write_text("\n".join(re.sub(r"\[.*?\]", "", p) for p in pins) + "\n")  # no extras there
        p = _pip(venv, "install", "-q", "--disable-pip-version-check", *pins, str(ROOT), "-c", str(constraints))
        if p.returncode == 0:  # this tree's code even in a reused venv that holds an older build of the same version
            p = _pip(venv, "install", "-q", "--disable-pip-version-check", "--no-deps", "--force-reinstall", str(ROOT))
        if p.returncode != 0:
            print(p.stdout[-3000:], p.stderr[-3000:])
            print("BENCH-RESULT " + json.dumps(dict(name="dependency_floors", pins=pins, install="failed")))
            return 1
        print(f"installed in {time.perf_counter() - t0:.0f} s", flush=True)
        (scratch / "out").mkdir(exist_ok=True)
        (scratch / "checks.py").write_text(CHECKS)
        # run outside the repository, so the installed wheel is imported and not the source tree
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        p = subprocess.run([str(venv / "bin" / "python"), str(scratch / "checks.py"), str(ROOT / "sample_profiles"),
                            str(scratch / "out")], cwd=scratch, text=True, capture_output=True, env=env)
        print(p.stdout, end="")
        if p.returncode != 0 or "RESULTS " not in p.stdout:
            print(p.stderr[-3000:])
        results = next((json.loads(line[8:]) for line in p.stdout.splitlines() if line.startswith("RESULTS ")), {})
        failed = [k for k, v in results.items() if k != "versions" and v != "ok"]
        print("BENCH-RESULT " + json.dumps(dict(name="dependency_floors", pins=pins,
                                                versions=results.get("versions"), failed=failed,
                                                checks={k: v for k, v in results.items() if k != "versions"},
                                                wall_s=round(time.perf_counter() - t0, 1))))
        return 0 if results and not failed else 1
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)
        else:
            print(f"kept {scratch}")


if __name__ == "__main__":
    sys.exit(main())
