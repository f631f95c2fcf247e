"""Bench: the speed regression guard - each row of the emulator speed table (issue 26) in CPU seconds.

    python -m bench.speed                  # every row
    python -m bench.speed --rows mlp_point onnx_bert_base
    python -m bench.speed --quick          # the cheap rows only (mlp point, 2-layer ONNX BERT)

Each row runs as its own child process; its cost is that process's CPU seconds (user + sys) and peak
RSS from ``resource.getrusage(RUSAGE_CHILDREN)`` of a wrapper process around it (the machine is shared,
so wall time is printed but not judged).  Each row is compared with its reference:

* an imported model against the bundled model of the same shape run the same way (``ours / bundled``,
  judged against the row's target ratio);
* every row against its previous numbers, the ``speed`` entry of ``docs/performance-results.json``
  (written by ``python -m bench speed``): a row more than 1.3x dearer than before is FLAGGED, as is a
  row past its target.

The process exits 1 when a row is flagged or failed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS_JSON = ROOT / "docs" / "performance-results.json"
WORSE = 1.3  # flag a row this much dearer than its previous numbers
PY = sys.executable
CLI = [PY, "-m", "popvision_lite.cli"]
OOM_RC = 3  # emulate: the graph does not fit; the profile is written, a result rather than a failure

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


def rows(tmp: str, quick: bool, data: str) -> dict[str, dict]:
    """name -> command, target (CPU seconds or ratio to the bundled reference), what it is."""
    layers = "2" if quick else "12"
    onnx_path = os.path.join(tmp, "bert_base.onnx")
    return {
        "mlp_point": dict(
            what="one mlp sweep point, whole process (emulate mlp hidden 256, 2 layers, batch 8, timing-only)",
            cmd=CLI + ["emulate", "mlp", "--hidden", "256", "--layers", "2", "--batch", "8", "--timing-only",
                       "-q", "-o", os.path.join(tmp, "mlp.pvl")],
            target_cpu=3.9),
        "onnx_bert_base": dict(
            what=f"{layers}-layer BERT-base from ONNX (bench/onnx_import.py model), import + timing-only",
            setup=[PY, "-c", _ONNX_FILE, onnx_path, layers],
            cmd=CLI + ["emulate", "--onnx", onnx_path, "--batch", "8", "--seq", "128", "--timing-only", "-q",
                       "-o", os.path.join(tmp, "onnx.pvl")],
            ref=CLI + ["emulate", "bert-base", "--layers", layers, "--inference", "--timing-only", "-q",
                       "-o", os.path.join(tmp, "bundled.pvl")],
            target_ratio=1.5),
        "resnet50_replica": dict(
            what="ResNet-50 replica graph of the first ResNet validation row, timing-only",
            cmd=[PY, "-c", _RESNET_ROW, data], target_cpu=20.0, heavy=True),
        "gpt2_xl_64": dict(
            what="GPT-2-XL on 64 IPUs (16 replicas x 4 stages), timing-only",
            cmd=CLI + ["emulate", "gpt2-xl", "--replicas", "16", "--pipeline-stages", "4", "--timing-only", "-q",
                       "-o", os.path.join(tmp, "gpt.pvl")],
            target_cpu=15.0, heavy=True),
        "validate": dict(
            what="popvision-lite validate --jobs 1 (every measured row)",
            cmd=CLI + ["validate", "--jobs", "1"] + (["--data", data] if data else []), target_cpu=120.0,
            target_rss_gb=2.0, heavy=True),
    }


_WRAPPER = """
import json, resource, subprocess, sys
try:
    p = subprocess.run(json.loads(sys.argv[1]), capture_output=True, text=True, timeout=float(sys.argv[2]))
    rc, tail = p.returncode, (p.stdout + p.stderr).strip().splitlines()[-3:]
except subprocess.TimeoutExpired:  # run() has killed the child
    rc, tail = "timeout", ["killed after " + sys.argv[2] + " s"]
r = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps(dict(rc=rc, cpu=r.ru_utime + r.ru_stime, maxrss_kib=r.ru_maxrss, tail=tail)))
"""


def measure(cmd: list[str], timeout: float) -> dict:
    """CPU seconds (user + sys) and peak RSS of one child process: a small wrapper process runs it and
    reads its own RUSAGE_CHILDREN, so the numbers are that command's alone (this process's
    RUSAGE_CHILDREN maximum would carry the largest earlier row's RSS)."""
    t0 = time.perf_counter()
    p = subprocess.run([PY, "-c", _WRAPPER, json.dumps(cmd), str(timeout)], cwd=ROOT, capture_output=True, text=True)
    try:
        got = json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        got = dict(rc="wrapper failed", cpu=float("nan"), maxrss_kib=0, tail=[])
    return dict(rc=got["rc"], cpu_s=round(got["cpu"], 2), wall_s=round(time.perf_counter() - t0, 2),
                peak_rss_gb=round(got["maxrss_kib"] / 2**20, 2), tail=got["tail"])


def previous() -> dict[str, dict]:
    """The rows of the last recorded ``python -m bench speed`` run, by name."""
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", nargs="*", help="only these rows")
    ap.add_argument("--quick", action="store_true", help="cheap rows only, 2-layer ONNX BERT")
    ap.add_argument("--data", default="", help="folder with mlperf_training.csv for the ResNet and validate rows "
                    "(default: validate's default, resources/validation of this repository)")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per process (default 1800)")
    args = ap.parse_args()
    prev = previous()
    flagged = 0
    compile_package()
    with tempfile.TemporaryDirectory(prefix="pvl_speed_") as tmp:
        table = rows(tmp, args.quick, args.data)
        unknown = sorted(set(args.rows or ()) - set(table))
        if unknown:
            print(f"--rows: unknown {', '.join(unknown)}; choose from {', '.join(table)}", file=sys.stderr)
            return 2
        names = args.rows or [n for n, r in table.items() if not (args.quick and r.get("heavy"))]
        print(f"{'row':18} {'CPU s':>8} {'wall s':>8} {'RSS GB':>7} {'target':>10} {'ratio':>7} {'prev CPU':>9}  verdict")
        for name in names:
            r = table[name]
            if "setup" in r:
                subprocess.run(r["setup"], cwd=ROOT, check=True, capture_output=True)
            m = measure(r["cmd"], args.timeout)
            res = dict(bench="speed", row=name, what=r["what"], quick=args.quick, **{k: m[k] for k in
                                                                                     ("rc", "cpu_s", "wall_s", "peak_rss_gb")})
            notes = []
            if m["rc"] == OOM_RC and r["cmd"][:len(CLI) + 1] == CLI + ["emulate"]:
                notes.append("does not fit (exit 3; timed as emulated)")
            elif m["rc"] != 0:
                notes.append(f"FAILED (rc {m['rc']}): {' | '.join(m['tail'])}")
            target = ""
            ratio = ""
            if "ref" in r:
                ref = measure(r["ref"], args.timeout)
                res["ref_cpu_s"] = ref["cpu_s"]
                res["ratio_to_bundled"] = round(m["cpu_s"] / max(ref["cpu_s"], 1e-9), 2)
                ratio, target = f"{res['ratio_to_bundled']:.2f}x", f"<{r['target_ratio']}x bund."
                if res["ratio_to_bundled"] > r["target_ratio"]:
                    notes.append(f"past target: {res['ratio_to_bundled']:.2f}x the bundled model's "
                                 f"{ref['cpu_s']:.1f} s CPU")
            if "target_cpu" in r:
                target = f"<{r['target_cpu']:g} s"
                if m["cpu_s"] > r["target_cpu"]:
                    notes.append(f"past target {r['target_cpu']:g} s CPU")
            if "target_rss_gb" in r and m["peak_rss_gb"] > r["target_rss_gb"]:
                notes.append(f"past target {r['target_rss_gb']:g} GB peak RSS")
            p = prev.get(name)
            pcpu = ""
            if p and p.get("quick") == args.quick and p.get("rc") in (0, OOM_RC):
                pcpu = f"{p['cpu_s']:.1f}"
                res["prev_cpu_s"] = p["cpu_s"]
                if m["cpu_s"] > WORSE * p["cpu_s"]:
                    notes.append(f"FLAG: {m['cpu_s'] / p['cpu_s']:.2f}x the previous {p['cpu_s']:.1f} s CPU")
            flag = any(n.startswith(("FLAG", "FAILED")) for n in notes)
            flagged += flag
            res["notes"] = notes
            print(f"{name:18} {m['cpu_s']:8.1f} {m['wall_s']:8.1f} {m['peak_rss_gb']:7.2f} {target:>10} {ratio:>7} "
                  f"{pcpu:>9}  {'; '.join(notes) or 'ok'}", flush=True)
            print("BENCH-RESULT " + json.dumps(res), flush=True)
    print(f"load {os.getloadavg()[0]:.1f}; {flagged} row(s) flagged (> {WORSE}x the previous CPU, or failed)")
    return 1 if flagged else 0


if __name__ == "__main__":
    sys.exit(main())
