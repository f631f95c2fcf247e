"""Bench: the emulator's speed targets (issues 26 and 49), each row's CPU cost as a RATIO to a fixed reference
workload measured in the same run, so that the check holds on any machine.

    python -m bench.speed                       # every row once
    python -m bench.speed --repeats 3           # each row three times: min and median
    python -m bench.speed --rows pod16_bert_large gpt2_xl_64
    python -m bench.speed --quick               # the cheap rows only (mlp point, 2-layer ONNX BERT)

Each row runs as its own child process; its cost is that process's CPU seconds (user + sys) and peak RSS
from ``resource.getrusage(RUSAGE_CHILDREN)`` of a wrapper process around it (the machine is shared, so wall
time is printed but never judged).  Between rows the reference workload (``bench/reference.py``: numpy sorts,
searches and counts, SHA-256, interpreted Python; independent of this project) runs the same way; a row's
**ratio** is its CPU seconds over the median of the reference's CPU seconds in this run.  The targets are in
CPU seconds on the reference box (the shared 2-vCPU VM the issues measured on), where the reference took
``reference.BOX_SECONDS``: a row meets its target when ``ratio <= target / BOX_SECONDS``.  On a machine twice
as slow both sides double and the verdict stands; "box s" is the ratio times ``BOX_SECONDS``, the row's cost
on the reference box.

An imported model is also compared with the bundled model of the same shape run the same way (``ours /
bundled``, target 1.5x).  Every row is compared with its previous ratio, the ``speed`` entry of
``docs/performance-results.json`` (written by ``python -m bench speed --write-doc``): a row whose ratio is more
than 1.3x the previous one is FLAGGED.  The process exits 1 when a row is flagged, failed or past its target.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import reference, targets  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RESULTS_JSON = ROOT / "docs" / "performance-results.json"
WORSE = 1.3  # flag a row whose ratio is this much above its previous ratio
PY = sys.executable
CLI = [PY, "-m", "popvision_lite.cli"]
OOM_RC = 3  # emulate: the graph does not fit; the profile is written, a result rather than a failure
REFERENCE = [PY, "-c", "from bench.reference import run; run()"]
POD16_BERT = ROOT / "sample_configs" / "mlperf_v1.1_pod16_bert_large.toml"

_RESNET_ROW = """
from popvision_lite import mlperf_validation as V
import sys
case = next(c for c in V.build_cases(V.load_rows(V.data_dir(sys.argv[1] or None))) if c.model.startswith('resnet'))
r = V.predict(case)  # the replica graph as the validation report emulates it
if getattr(r, 'error', None):
    raise SystemExit(f'{case.id}: {r.error}')
print('row', case.id)
"""

_ONNX_FILE = """
import sys, onnx
from popvision_lite.emulator.models.config import make_config
from popvision_lite.emulator.onnx_import import builders
cfg = make_config('bert-base', training=False, layers=int(sys.argv[2]))
onnx.save(builders.bert_encoder(layers=cfg.layers, hidden=cfg.hidden, heads=cfg.heads, ffn=cfg.ffn_size,
                                vocab=cfg.vocab, residual_first=True), sys.argv[1])
"""

# GPT-3 175B on an IPU-POD64 as bench/gpt_scale.py's first row (Graphcore's placement: TP 32 x DP 2, phased)
GPT3_175B_POD64 = ["gpt3-175b", "--ipus", "64", "--tensor-parallel", "32", "--replicas", "2", "--grad-accum", "64",
                   "--streaming-weights", "--recompute", "--optimizer", "adam", "--rts"]


# the placement search (issue 49): every combination, 100 points; each worker builds a stage graph once for all the
# points that share it (models/stage_cache.py)
SEARCH_GRID = ["--grid", "tensor_parallel=4,8", "--grid", "pipeline_stages=1,2", "--grid", "replicas=1,2,4,8,16",
               "--grid", "grad_accum=16,32,64,128,256", "--grid", "streaming_weights=true", "--grid", "recompute=true",
               "--grid", "optimizer=adam", "--grid", "rts=true"]


def rows(tmp: str, quick: bool, data: str) -> dict[str, dict]:
    """name -> command, target (CPU seconds on the reference box, or a ratio to the bundled reference), what."""
    layers = "2" if quick else "12"
    onnx_path = os.path.join(tmp, "bert_base.onnx")
    emulate = CLI + ["emulate"]
    return {
        "mlp_point": dict(
            what="one mlp sweep point, whole process (emulate mlp hidden 256, 2 layers, batch 8, timing-only)",
            cmd=emulate + ["mlp", "--hidden", "256", "--layers", "2", "--batch", "8", "--timing-only",
                           "-q", "-o", os.path.join(tmp, "mlp.pvl")],
            target_cpu=3.9),
        "onnx_bert_base": dict(
            what=f"{layers}-layer BERT-base from ONNX (bench/onnx_import.py model), import + timing-only",
            setup=[PY, "-c", _ONNX_FILE, onnx_path, layers],
            cmd=emulate + ["--onnx", onnx_path, "--batch", "8", "--seq", "128", "--timing-only", "-q",
                           "-o", os.path.join(tmp, "onnx.pvl")],
            ref=emulate + ["bert-base", "--layers", layers, "--inference", "--timing-only", "-q",
                           "-o", os.path.join(tmp, "bundled.pvl")],
            target_ratio=1.5),
        "pod16_bert_large": dict(
            what="MLPerf v1.1 POD16 BERT-Large config (sample_configs/), timing-only",
            cmd=emulate + ["--config", str(POD16_BERT), "-q", "-o", os.path.join(tmp, "pod16.pvl")],
            target_cpu=4.0, heavy=True),
        "resnet50_replica": dict(
            what="ResNet-50 replica graph of the first ResNet validation row, timing-only",
            cmd=[PY, "-c", _RESNET_ROW, data], target_cpu=8.0, heavy=True),
        "gpt2_xl_64": dict(
            what="GPT-2-XL on 64 IPUs (16 replicas x 4 stages), timing-only",
            cmd=emulate + ["gpt2-xl", "--replicas", "16", "--pipeline-stages", "4", "--timing-only", "-q",
                           "-o", os.path.join(tmp, "gpt.pvl")],
            target_cpu=6.0, heavy=True),
        "gpt3_175b_pod64": dict(
            what="GPT-3 175B on an IPU-POD64 (TP 32 x DP 2, phased, GA 64), timing-only",
            cmd=emulate + GPT3_175B_POD64 + ["--timing-only", "-q", "-o", os.path.join(tmp, "gpt3.pvl")],
            target_cpu=8.0, heavy=True),
        "placement_search_13b": dict(
            what="a 100-point placement search of GPT-3 13B (tensor parallel 4 / 8 x pipeline stages 1 / 2 x replicas "
                 "1-16 x accumulation 16-256, phased, Adam, RTS) on the local Dask cluster, points in the workers",
            cmd=CLI + ["sweep", "--model", "gpt3-13b", *SEARCH_GRID, "--isolate", "worker", "--workers", "2", "-q",
                       "-o", os.path.join(tmp, "search")],
            target_cpu=600.0, heavy=True),
        "validate": dict(
            what="popvision-lite validate --jobs 1 (every measured row)",
            cmd=CLI + ["validate", "--jobs", "1"] + (["--data", data] if data else []), target_cpu=45.0,
            target_rss_gb=2.0, heavy=True),
    }


_WRAPPER = """
import json, os, resource, subprocess, sys
env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
try:
    p = subprocess.run(json.loads(sys.argv[1]), capture_output=True, text=True, timeout=float(sys.argv[2]), env=env)
    rc, tail = p.returncode, (p.stdout + p.stderr).strip().splitlines()[-3:]
except subprocess.TimeoutExpired:  # run() has killed the child
    rc, tail = "timeout", ["killed after " + sys.argv[2] + " s"]
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps(dict(rc=rc, cpu=r.ru_utime + r.ru_stime, maxrss_kib=r.ru_maxrss, tail=tail)))
"""


def chosen_rows(given: list[str] | None, known) -> list[str] | None:
    """The rows ``--rows`` names (every row when it names none), or None with the unknown ones said on stderr."""
    names = given or list(known)
    bad = sorted(set(names) - set(known))
    if bad:
        print(f"--rows: unknown {', '.join(bad)}", file=sys.stderr)
        return None
    return names


def measure(cmd: list[str], timeout: float) -> dict:
    """CPU seconds (user + sys) and peak RSS of one child process and its own children: a small wrapper process
    runs it and reads its own RUSAGE_CHILDREN, so the numbers are that command's alone (this process's
    RUSAGE_CHILDREN maximum would carry the largest earlier row's RSS).  BLAS runs on one thread."""
    t0 = time.perf_counter()
    p = subprocess.run([PY, "-c", _WRAPPER, json.dumps(cmd), str(timeout)], cwd=ROOT, capture_output=True, text=True)
    try:
        got = json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        got = dict(rc="wrapper failed", cpu=float("nan"), maxrss_kib=0, tail=[])
    return dict(rc=got["rc"], cpu_s=round(got["cpu"], 2), wall_s=round(time.perf_counter() - t0, 2),
                peak_rss_gb=round(got["maxrss_kib"] / 2**20, 2), tail=got["tail"])


class Reference:
    """The reference workload's CPU seconds in this run: measured at the start and again after each row, so a
    change in the machine's load over the run reaches both sides; a row's ratio uses the median of all."""

    def __init__(self, timeout: float):
        self.timeout = timeout
        self.cpu: list[float] = []

    def measure(self) -> None:
        m = measure(REFERENCE, self.timeout)
        if m["rc"] != 0:
            raise SystemExit(f"bench.speed: the reference workload failed (rc {m['rc']}): {' | '.join(m['tail'])}")
        self.cpu.append(m["cpu_s"])

    @property
    def median(self) -> float:
        return statistics.median(self.cpu)


def previous() -> dict[str, dict]:
    """The rows of the last recorded ``python -m bench speed --write-doc`` run, by name."""
    try:
        run = json.loads(RESULTS_JSON.read_text())["runs"].get("speed", {})
    except (OSError, ValueError, KeyError):
        return {}
    return {r["row"]: r for r in run.get("results", []) if r.get("bench") == "speed" and "row" in r}


def compile_package() -> None:
    """Byte-compile the package before timing anything, as an installed package has it from its second run on:
    with ``PYTHONDONTWRITEBYTECODE`` set (this project's dev machines set it) no run ever caches its bytecode,
    so every row would compile the package's modules from source again (97 modules, ~0.3 s of the ONNX row,
    whose import path reads more of them than the bundled model's).  Reading cached bytecode is not affected
    by that variable; ``compileall`` writes it regardless."""
    import compileall

    compileall.compile_dir(str(ROOT / "popvision_lite"), quiet=1)
    compileall.compile_file(str(ROOT / "bench" / "reference.py"), quiet=1)


def run_row(name: str, r: dict, repeats: int, timeout: float, ref: Reference) -> dict:
    """Measure one row ``repeats`` times (the reference after each); its result record."""
    runs = []
    for _ in range(repeats):
        if "setup" in r:
            subprocess.run(r["setup"], cwd=ROOT, check=True, capture_output=True)
        runs.append(measure(r["cmd"], timeout))
        ref.measure()
    cpu = [m["cpu_s"] for m in runs]
    res = dict(bench="speed", row=name, what=r["what"], repeats=repeats, rc=runs[-1]["rc"],
               cpu_s=min(cpu), cpu_median_s=round(statistics.median(cpu), 2), cpu_all_s=cpu,
               wall_s=min(m["wall_s"] for m in runs), peak_rss_gb=max(m["peak_rss_gb"] for m in runs),
               tail=runs[-1]["tail"])
    if "ref" in r:
        bundled = [measure(r["ref"], timeout)["cpu_s"] for _ in range(repeats)]
        res["ref_cpu_s"] = min(bundled)
        res["ratio_to_bundled"] = round(min(cpu) / max(min(bundled), 1e-9), 2)
    return res


def judge(res: dict, r: dict, ref: Reference, prev: dict, quick: bool) -> tuple[list[str], list[dict]]:
    """The row's notes (FLAG / FAILED / past target) and its goal rows (bench/targets.py)."""
    notes, goals = [], []
    failed_rc = res["rc"] not in (0, OOM_RC) or (res["rc"] == OOM_RC and r["cmd"][:len(CLI) + 1] != CLI + ["emulate"])
    if failed_rc:
        notes.append(f"FAILED (rc {res['rc']}): {' | '.join(res['tail'])}")
    elif res["rc"] == OOM_RC:
        notes.append("does not fit (exit 3; timed as emulated)")
    box = reference.BOX_SECONDS
    res["ratio"] = round(res["cpu_s"] / ref.median, 3)
    res["ratio_median"] = round(res["cpu_median_s"] / ref.median, 3)
    res["box_s"], res["box_median_s"] = round(res["ratio"] * box, 2), round(res["ratio_median"] * box, 2)
    if "target_cpu" in r:
        res["target_box_s"], res["target_reference_ratio"] = r["target_cpu"], round(r["target_cpu"] / box, 3)
        goals.append(targets.row(f"{res['row']}: CPU on the reference box (ratio x {box:g} s)", res["box_median_s"],
                                 r["target_cpu"], " s"))
        if res["ratio_median"] > res["target_reference_ratio"]:
            notes.append(f"past target: {res['box_median_s']:.1f} s on the reference box > {r['target_cpu']:g} s")
    if "target_ratio" in r:
        goals.append(targets.row(f"{res['row']}: ours / bundled model", res["ratio_to_bundled"], r["target_ratio"], "x"))
        if res["ratio_to_bundled"] > r["target_ratio"]:
            notes.append(f"past target: {res['ratio_to_bundled']:.2f}x the bundled model")
    if "target_rss_gb" in r:
        goals.append(targets.row(f"{res['row']}: peak RSS", res["peak_rss_gb"], r["target_rss_gb"], " GB"))
        if res["peak_rss_gb"] > r["target_rss_gb"]:
            notes.append(f"past target {r['target_rss_gb']:g} GB peak RSS")
    p = prev.get(res["row"])
    if p and p.get("quick") == quick and p.get("rc") in (0, OOM_RC) and p.get("ratio"):
        res["prev_ratio"] = p["ratio"]
        if res["ratio"] > WORSE * p["ratio"]:
            notes.append(f"FLAG: ratio {res['ratio']:.2f} is {res['ratio'] / p['ratio']:.2f}x the previous {p['ratio']:.2f}")
    return notes, goals


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", nargs="*", help="only these rows")
    ap.add_argument("--quick", action="store_true", help="cheap rows only, 2-layer ONNX BERT")
    ap.add_argument("--repeats", type=int, default=1, help="runs of each row (min and median reported; default 1)")
    ap.add_argument("--data", default="", help="folder with mlperf_training.csv for the ResNet and validate rows "
                    "(default: validate's default, resources/validation of this repository)")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per process (default 1800)")
    args = ap.parse_args()
    if args.repeats < 1:
        ap.error("--repeats must be at least 1")
    prev = previous()
    compile_package()
    ref = Reference(args.timeout)
    failed = 0
    goals: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="pvl_speed_") as tmp:
        table = rows(tmp, args.quick, args.data)
        unknown = sorted(set(args.rows or ()) - set(table))
        if unknown:
            print(f"--rows: unknown {', '.join(unknown)}; choose from {', '.join(table)}", file=sys.stderr)
            return 2
        names = args.rows or [n for n, r in table.items() if not (args.quick and r.get("heavy"))]
        ref.measure()
        print(f"reference workload (bench/reference.py): {ref.cpu[0]:.2f} s CPU here; {reference.BOX_SECONDS:g} s on "
              f"the reference box", flush=True)
        print(f"{'row':18} {'CPU s min/med':>14} {'ratio':>7} {'box s':>7} {'target':>8} {'RSS GB':>7} {'wall s':>7}"
              f"  verdict")
        for name in names:
            r = table[name]
            res = run_row(name, r, args.repeats, args.timeout, ref)
            notes, g = judge(res, r, ref, prev, args.quick)
            goals += g
            failed += any(n.startswith(("FLAG", "FAILED", "past target")) for n in notes)
            res["notes"] = notes
            tgt = f"{r['target_cpu']:g} s" if "target_cpu" in r else f"{r.get('target_ratio', '')}x bund."
            print(f"{name:18} {res['cpu_s']:6.1f}/{res['cpu_median_s']:<7.1f} {res['ratio_median']:7.2f} "
                  f"{res['box_median_s']:7.1f} {tgt:>8} {res['peak_rss_gb']:7.2f} {res['wall_s']:7.1f}  "
                  f"{'; '.join(notes) or 'ok'}", flush=True)
            res.pop("tail", None)
            print("BENCH-RESULT " + json.dumps(res), flush=True)
    print(f"reference workload over the run: {len(ref.cpu)} runs, min {min(ref.cpu):.2f} s, median {ref.median:.2f} s "
          f"CPU; load {os.getloadavg()[0]:.1f}")
    targets.print_rows(goals)
    print(targets.bench_result("speed_goals", goals, reference_cpu_s=ref.cpu, box_seconds=reference.BOX_SECONDS))
    print(f"{failed} row(s) flagged, failed or past target")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
