"""Run every benchmark and write the measured-numbers report.

    python -m bench                         # every script in SCRIPTS, full size; prints, writes nothing
    python -m bench --write-doc             # ... and writes the report (docs/performance-results.*)
    python -m bench gui_heatmap roofline --write-doc   # only these (their sections of the report are replaced)
    python -m bench --quick                 # smoke run at small sizes (QUICK_ARGS); a report would say "quick"
    python -m bench -- --foo                # arguments after -- go to every script

The report is written only with ``--write-doc``: a run on another machine, or to check a change, leaves the
recorded numbers alone.

Each entry of SCRIPTS is a module ``bench/<name>.py`` runnable as ``python -m bench.<name>``; each runs in
its own process (Qt scripts need their own application; memory numbers stay per script), its output is
shown live and kept.  The report is generated, never hand-edited:

* ``docs/performance-results.json`` keeps, per script, the latest run: output, exit code, wall time,
  ``BENCH-RESULT`` JSON lines, the date, git commit and the machine (CPU model, cores, RAM, load, Python,
  numpy, h5py / HDF5, Qt versions);
* ``docs/performance-results.md`` is rebuilt from it: a machine table, a summary table, then each script's
  full output (its ratios and targets as it printed them).

Method notes and discussion stay hand-written in ``docs/performance.md``, which links to the results file.
Scripts that are not benchmarks (screenshots, external verification) are listed in NOT_BENCHMARKS.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import targets  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
RESULTS_JSON = DOCS / "performance-results.json"
RESULTS_MD = DOCS / "performance-results.md"

# name -> what it measures (issue), in run order
SCRIPTS: dict[str, str] = {
    "profile_scale": "profile format at scale: write, size ratio, open, window and overview reads (issue 2)",
    "emulator_speed": "emulator full numerics vs numpy; timing-only vertices/s (issue 3)",
    "emulate_models": "emulate wall time of BERT-base / BERT-large vs planning alone (issue 4)",
    "onnx_import": "import + timing-only emulation of a BERT-base-sized ONNX graph vs the bundled preset (issue 16)",
    "onnx_zoo": "the ONNX model zoo: import, ops, numerics vs ONNX Runtime, fits, CPU s and RSS per model",
    "execution_redraw": "execution view whole-run redraw ratio, pan/zoom redraws, RSS (issue 7)",
    "gui_heatmap": "memory heatmap recolour, open -> Summary painted, RSS (issue 5)",
    "insights_views": "program tree / ops filter and sort / insights vs naive Qt models (issue 6)",
    "roofline": "roofline analysis time (issue 8)",
    "compare_export": "compare mode and export, large / small ratios (issue 9)",
    "fuzz_profiles": "reader fuzzing: 600 mutated profiles, outcomes (issue 10)",
    "fuzz_hostile": "structural fuzzing: 2,400 hostile-but-valid profiles + special files + CLI abuse (issue 19)",
    "fuzz_records": "round-4 fuzzing: run records, phases, variable intervals, planted sweep folders, concurrent "
                    "sweeps, strace sample (issue 45)",
    "trace_load_peer": "peer: a step window from the Chrome-trace JSON (orjson, json) vs from the .pvl (issue 10)",
    "scalesim_peer": "peer: GEMM layer emulation time vs SCALE-Sim 3.0.0 (issue 10)",
    "mlperf_bert_pod16": "MLPerf v1.1 POD16 BERT-Large: predicted vs measured seq/s, fits, wall, RSS (issue 13)",
    "pipeline_speedup": "bert-mini per-sample time on 1 vs 2 vs 4 pipelined IPUs (issue 13)",
    "cost_model": "codelet cycles vs poplibs' estimators; GEMM % of peak; BERT-Large layer cycles (issue 14)",
    "validate": "emulator vs measured MLPerf IPU-POD16 BERT-Large / ResNet-50 throughput (issue 14)",
    "sweep_throughput": "sweep points/minute on Dask, 1 vs 2 workers, overhead per point vs a plain loop (issue 17)",
    "sweep_view": "opening a 10,000-point sweep in the desktop app: read, build, first paint (issue 17)",
    "soak": "one app process opening, viewing, comparing, exporting, closing every sample N times: RSS and "
            "open-file growth (issue 27)",
    "gpt_scale": "GPT-3-175B / 13B on IPU-POD64/256, timing-only: CPU s, peak RSS vs the host-memory pre-check, fits, "
                 "tokens/s (issue 24)",
    "speed": "emulator speed targets: each row's CPU seconds as a ratio to a fixed reference workload, vs target and "
             "previous run (issues 26, 49)",
    "view_revisits": "GUI views shown again: CPU ms of a revisit of every view, POD16-sized runs (issue 49)",
    "host_memory": "the host-memory pre-check's estimate vs the measured peak RSS of the same run, every model family, "
                   "sequence, batch and placement; calibrated coefficients fitted on named rows, leave-one-out (issue 49)",
    "fit_advisor": "the fit advisor: CPU s of a whole search on the local Dask cluster (GPT-3-13B up to 256 IPUs), its "
                   "answer run by emulate (issue 43)",
}

# bench/*.py modules that are deliberately not run by `python -m bench`, with the reason
NOT_BENCHMARKS: dict[str, str] = {
    "execution_screenshots": "makes pictures for docs/screenshots, not numbers",
    "gui_screenshots": "makes pictures for docs/screenshots, not numbers",
    "doc_numbers": "checks / rewrites the numbers the docs quote from sample-config runs and the POD16 screenshots; "
                   "its cheap part is tests/project/test_doc_numbers.py",
    "fuzz_surfaces": "helper: the text-payload, torch-trace, ONNX and CSV case makers that fuzz_hostile runs, not a "
                     "benchmark of its own",
    "perfetto_check": "verification in Perfetto; needs chromium and vizviewer, which are not dependencies",
    "onnx_wild": "builds and exports models outside the zoo at run time; needs torch, torchvision, transformers and "
                 "onnxscript, which are not dependencies (docs/onnx.md \"Beyond the zoo\")",
    "onnx_memory": "exports full-size models (BERT-base, GPT-2 ...) at run time; needs torch, torchvision and "
                   "transformers, which are not dependencies (docs/performance.md \"Imported models at full size\")",
    "same_profiles": "a check that two profiles hold the same data (emulator speed changes must leave every cycle "
                     "and byte as it was), not a benchmark; tests/bench/test_same_profiles.py",
    "gui_pixels": "pixel-by-pixel comparison of fixed GUI states between two trees (decision 0130): a refactoring "
                  "check with no goal of its own",
    "matmul_plan_check": "one matmul's plan and cycles beside poplin's planner estimate (decision 0105): an accuracy "
                         "check of the cost model, not a speed benchmark",
    "reference": "helper: the fixed reference workload bench.speed measures every row against, not a benchmark",
    "targets": "helper: the goal rows (measured, target, ratio) the scripts print and report, not a benchmark",
    "chunk_layout": "the chunk shape / codec options of decision 0120 side by side (writes 15 profiles); a design "
                    "comparison for choosing the layout, with no goal of its own",
    "verdict_check": "accuracy check of the GPU estimate against measured MLPerf rows (docs/gpu-estimate.md), "
                     "not a speed benchmark",
    "dependency_floors": "installs the lowest dependency versions pyproject.toml allows in a fresh venv and checks "
                         "they work (decision 0201): a compatibility check, not a speed benchmark",
    "notebook_kernel": "runs examples/notebook_tour.ipynb in a real Jupyter kernel (extra notebook-kernel; decision "
                       "0465): a check, not a speed benchmark; the suite runs its cells in one interpreter",
    "gpu_ops": "accuracy check of the GPU estimate per op against measured A100 kernels (docs/gpu-estimate.md), "
               "not a speed benchmark",
}

QUICK_ARGS: dict[str, list[str]] = {
    "profile_scale": ["--ipus", "2", "--tiles", "64", "--steps", "480", "--windows", "3"],
    "emulator_speed": ["--quick"],
    "emulate_models": ["--quick"],
    "onnx_import": ["--quick"],
    "onnx_zoo": ["--quick"],
    "execution_redraw": ["--ipus", "2", "--steps", "500", "--reps", "3", "--passes", "1"],
    "gui_heatmap": ["--steps", "200", "--reps", "5"],
    "insights_views": ["--steps", "2000", "--layers", "20", "--reps", "2"],
    "roofline": [],
    "compare_export": ["--ipus", "2", "--steps", "1000"],
    "fuzz_profiles": ["--cases", "60"],
    "fuzz_hostile": ["--cases", "60"],
    "fuzz_records": ["--cases", "40", "--strace", "2"],
    "trace_load_peer": ["--quick"],
    "scalesim_peer": ["--quick"],
    "mlperf_bert_pod16": ["--only"],
    "pipeline_speedup": ["--quick"],
    "cost_model": ["--quick"],
    "validate": ["--quick"],
    "sweep_throughput": ["--quick"],
    "sweep_view": ["--points", "1000"],
    "soak": ["--iterations", "3", "--warmup", "1", "--pod16-steps", "200"],
    "speed": ["--quick"],
    "view_revisits": ["--quick"],
    "host_memory": ["--rows", "mlp_numerics", "bert_mini_numerics", "bert_base_1ipu"],
    "gpt_scale": ["--rows", "gpt3_13b_pod64"],
    "fit_advisor": ["--rows", "gpt_small_oom"],
}


# ---------------------------------------------------------------------------------------------
def _version(mod: str) -> str:
    try:
        m = __import__(mod)
        return getattr(m, "__version__", "?")
    except Exception as e:  # pragma: no cover - optional packages
        return f"not available ({type(e).__name__})"


def machine_info() -> dict:
    """The machine and software the numbers were measured on."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    info = {"cpu": cpu, "logical_cores": os.cpu_count(), "os": f"{platform.system()} {platform.release()}",
            "python": platform.python_version(), "numpy": _version("numpy"), "pandas": _version("pandas")}
    try:
        import psutil

        info["ram_gb"] = round(psutil.virtual_memory().total / 2**30, 1)
        info["usable_cores"] = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    except Exception:  # pragma: no cover
        pass
    try:
        import h5py

        info["h5py"] = h5py.version.version
        info["hdf5"] = h5py.version.hdf5_version
    except Exception:  # pragma: no cover
        pass
    try:
        import pyqtgraph
        import PySide6

        info["pyside6"] = PySide6.__version__
        info["pyqtgraph"] = pyqtgraph.__version__
    except Exception:  # pragma: no cover
        pass
    info["scalesim"] = _dist_version("scalesim")
    info["orjson"] = _dist_version("orjson")
    return info


def _dist_version(name: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


def _load() -> str:
    try:
        return " / ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:  # pragma: no cover
        return "?"


def _git_commit() -> str:
    try:
        r = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                           timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "bench", "popvision_lite"], cwd=ROOT,
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return r.stdout.strip() + (" (+ uncommitted changes)" if dirty else "")
    except Exception:  # pragma: no cover
        return "?"


# ---------------------------------------------------------------------------------------------
def run_script(name: str, args: list[str], timeout: float, echo: bool = True) -> dict:
    """Run ``python -m bench.<name> args``; stream its output; return the record for the report."""
    cmd = [sys.executable, "-m", f"bench.{name}", *args]
    env = dict(os.environ)
    env.setdefault("QT_QPA_PLATFORM", "offscreen")
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    load_before = _load()
    t0 = time.perf_counter()
    lines: list[str] = []
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            bufsize=1)
    timed_out = False
    try:
        deadline = t0 + timeout
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            if echo:
                print(line, end="", flush=True)
            if time.perf_counter() > deadline:
                timed_out = True
                proc.kill()
                break
        rc = proc.wait(timeout=max(1.0, deadline - time.perf_counter()))
    except subprocess.TimeoutExpired:
        timed_out = True
        proc.kill()
        rc = proc.wait()
    secs = time.perf_counter() - t0
    results = []
    for line in lines:
        if line.startswith("BENCH-RESULT "):
            try:
                results.append(json.loads(line[len("BENCH-RESULT "):]))
            except ValueError:
                pass
    return {"name": name, "args": args, "rc": rc, "timed_out": timed_out, "seconds": round(secs, 1),
            "date": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "load_before": load_before, "load_after": _load(), "output": lines[-400:], "results": results}


# ---------------------------------------------------------------------------------------------
def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; a report is for everyone to read
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_results(path: Path = RESULTS_JSON) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"runs": {}}


# harmless lines some libraries print (Qt's offscreen platform) that say nothing about the numbers
_NOISE = {"This plugin does not support propagateSizeHints()"}


def goal_rows(rec: dict) -> list[dict]:
    """The goal rows (bench/targets.py) in a script's BENCH-RESULT lines."""
    return [g for res in rec.get("results", []) for g in res.get("targets", [])]


def render_report(data: dict) -> str:
    runs = data.get("runs", {})
    out = ["# Performance results (generated)", "",
           "Written by `python -m bench` from each script's latest run; do not edit by hand (method notes and "
           "discussion: [performance.md](performance.md)). Every section says when, where and with which "
           "arguments it ran; `quick` runs use small sizes and are smoke tests, not measurements.", ""]
    machines = {}
    for r in runs.values():
        key = json.dumps(r.get("machine", {}), sort_keys=True)
        machines.setdefault(key, []).append(r["name"])
    out += ["## Machine", ""]
    for i, (key, names) in enumerate(machines.items()):
        m = json.loads(key)
        if len(machines) > 1:
            out.append(f"Machine {i + 1} (used by: {', '.join(names)}):")
            out.append("")
        out += ["| | |", "|---|---|"]
        labels = [("cpu", "CPU"), ("logical_cores", "logical cores"), ("usable_cores", "cores usable by the run"),
                  ("ram_gb", "RAM (GiB)"), ("os", "OS"), ("python", "Python"), ("numpy", "numpy"),
                  ("pandas", "pandas"), ("h5py", "h5py"), ("hdf5", "HDF5"), ("pyside6", "PySide6"),
                  ("pyqtgraph", "pyqtgraph"), ("orjson", "orjson"), ("scalesim", "scalesim")]
        out += [f"| {label} | {m.get(k, '?')} |" for k, label in labels]
        out.append("")
    out += ["## Summary", "",
            "| script | what | ran | mode | exit | wall s | load avg before -> after (1/5/15 min) |",
            "|---|---|---|---|---|---|---|"]
    order = [n for n in SCRIPTS if n in runs] + [n for n in runs if n not in SCRIPTS]
    for n in order:
        r = runs[n]
        status = "timed out" if r.get("timed_out") else str(r["rc"])
        mode = "quick" if r.get("quick") else "full"
        out.append(f"| [{n}](#{n}) | {SCRIPTS.get(n, '')} | {r['date']} | {mode} | {status} | "
                   f"{r['seconds']} | {r['load_before']} -> {r['load_after']} |")
    out.append("")
    out.append("Exit 0: ran and met its targets; 1: ran, some target missed or a check failed (see its output); "
               "other: did not finish.")
    out.append("")
    goals = [(n, g) for n in order for g in goal_rows(runs[n])]
    if goals:
        out += ["## Goals", "", "Every goal row the scripts report (bench/targets.py): ratio = measured / target for an "
                "upper bound, target / measured for a lower bound; <= 1 is met.", "",
                "| script | goal | measured | target | ratio | met |", "|---|---|---|---|---|---|"]
        for n, g in goals:
            out.append(f"| {n} | {g['what']} | {targets.fmt(g['value'])}{g['unit']} | {g['bound']} "
                       f"{targets.fmt(g['target'])}{g['unit']} | {g['ratio']:.2f} | {'yes' if g['met'] else '**MISSED**'} |")
        out.append("")
    for n in order:
        r = runs[n]
        args = " ".join(r.get("args") or [])
        out += [f"## {n}", "",
                f"`python -m bench.{n}{(' ' + args) if args else ''}` - {r['date']}, commit {r.get('commit', '?')}, "
                f"exit {r['rc']}{' (timed out)' if r.get('timed_out') else ''}, {r['seconds']} s wall, "
                f"{'quick (smoke) run' if r.get('quick') else 'full run'}.", "", "```text"]
        out += [line for line in r["output"] if not line.startswith("BENCH-RESULT ") and line not in _NOISE]
        out += ["```", ""]
    return "\n".join(out).rstrip() + "\n"


def write_report(records: list[dict], quick: bool, json_path: Path = RESULTS_JSON, md_path: Path = RESULTS_MD):
    data = load_results(json_path)
    machine = machine_info()
    commit = _git_commit()
    for rec in records:
        data["runs"][rec["name"]] = dict(rec, quick=quick, machine=machine, commit=commit)
    _atomic_write(json_path, json.dumps(data, indent=1, sort_keys=True) + "\n")
    _atomic_write(md_path, render_report(data))


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    ap = argparse.ArgumentParser(prog="python -m bench", description="run the benchmarks and write the report")
    ap.add_argument("names", nargs="*", help=f"scripts to run (default all): {', '.join(SCRIPTS)}")
    ap.add_argument("--quick", action="store_true", help="small sizes (smoke run)")
    ap.add_argument("--write-doc", action="store_true", help="write the report: docs/performance-results.json and "
                    ".md (default: print only)")
    ap.add_argument("--timeout", type=float, default=3600, help="seconds per script")
    ap.add_argument("--report-dir", help=argparse.SUPPRESS)  # tests: write the report elsewhere
    args = ap.parse_args(argv)
    names = args.names or list(SCRIPTS)
    unknown = [n for n in names if n not in SCRIPTS]
    if unknown:
        print(f"unknown bench script(s) {unknown}; known: {list(SCRIPTS)}", file=sys.stderr)
        return 2
    records, failed = [], []
    for name in names:
        print(f"=== bench/{name}.py: {SCRIPTS[name]} ===", flush=True)
        rec = run_script(name, (QUICK_ARGS[name] if args.quick else []) + extra, args.timeout)
        print(f"=== {name}: rc={rec['rc']} in {rec['seconds']:.1f} s ===", flush=True)
        records.append(rec)
        if rec["rc"] or rec["timed_out"]:
            failed.append(name)
        if args.write_doc:  # after each script, so a long run leaves a report even if interrupted
            d = Path(args.report_dir) if args.report_dir else None
            write_report([rec], args.quick, *((d / RESULTS_JSON.name, d / RESULTS_MD.name) if d else ()))
    goals = [(rec["name"], g) for rec in records for g in goal_rows(rec)]
    if goals:
        print("=== goals: measured, target, ratio to target (<= 1 met) ===")
        for name in dict.fromkeys(n for n, _ in goals):
            print(f"{name}:")
            targets.print_rows([g for n, g in goals if n == name])
    if args.write_doc:
        print(f"report: {(Path(args.report_dir) / RESULTS_MD.name) if args.report_dir else RESULTS_MD}")
    if failed:
        print(f"failed or missed targets: {failed}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
