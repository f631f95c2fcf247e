"""Bench: the ONNX model zoo (tests/data/onnx_zoo), one line per model and exporter.

    python -m bench.onnx_zoo              # every model, both exporters
    python -m bench.onnx_zoo --quick      # classic exports of four models
    python -m bench.onnx_zoo bert_sdpa    # these models only

Per model, in a child process of its own (so its memory is its own): a timing-only emulation of one
inference step at the zoo's inputs (batch 2, sequence 8 / 32x32 images) - its CPU seconds and the process's
peak RSS; the number of ONNX node types and of emulated ops; fits; then full numerics in fp32 and fp16 against
ONNX Runtime on the committed inputs (max |error| relative to the output's max, the check's verdict) and the
fp16 run's RMS error as a multiple of ONNX Runtime's own fp16 run's (the committed ``ref16``); and a
timing-only training step (fits, cycles).  CPU seconds, not wall: the machine is shared.

The fp32 run is on the tests' device (92 tiles, tests/support/devices) and held to the bar the suite holds its
representative cases to (tests/emulator/onnx_import/test_onnx_zoo.py, FP32_CASES): it fits, its error is under
1e-5 of the output's max with no element outside the tolerance, and ONNX Runtime's output today is the committed
one.  The suite runs the cases that together hold every op signature of the zoo; this bench runs all of them.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ZOO = Path(__file__).resolve().parents[1] / "tests" / "data" / "onnx_zoo"
QUICK = ["bert_sdpa", "llama", "resnet50", "mobilenet_v3"]


def one(name: str, exporter: str) -> dict:
    """Measure one model (runs in the child process)."""
    import onnx

    from popvision_lite.emulator.onnx_import import emulate_onnx
    from tests.support import devices as test_device

    path = ZOO / f"{name}.{exporter}.onnx"
    with np.load(ZOO / f"{name}.{exporter}.npz") as z:
        ins = {k[3:]: z[k] for k in z.files if k.startswith("in:")}
        ref16 = {k[6:]: z[k] for k in z.files if k.startswith("ref16:")}
        ref = {k[4:]: z[k] for k in z.files if k.startswith("ref:")}
    rec = {"model": name, "exporter": exporter,
           "node_types": len({n.op_type for n in onnx.load(str(path), load_external_data=False).graph.node})}
    try:
        t0 = time.process_time()
        run = emulate_onnx(path, inputs=ins, timing_only=True)
        rec.update(ok=True, ops=run.num_ops, fits=bool(run.fits), cycles=int(run.total_cycles),
                   cpu_s=time.process_time() - t0, rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
        for prec in ("fp32", "fp16"):
            # fp32 on the tests' device (92 tiles), held to the bar of the suite's FP32_CASES
            # (tests/emulator/onnx_import/test_onnx_zoo.py) for every model
            kw = {"device": test_device.register().id} if prec == "fp32" else {"reference_fp16": ref16}
            r = emulate_onnx(path, inputs=ins, precision=prec, **kw)
            ((out, c),) = ((k, v) for k, v in r.numeric_checks.items() if k != "intermediates")
            rec[prec] = {"passed": bool(c["passed"]), "max_rel": c["max_rel_err"], "outside": c["outside_share"],
                         "vs_ort16": c.get("rms_err_vs_reference_fp16")}
            if prec == "fp32":
                want = ref[out]
                rec[prec]["suite_bar"] = bool(
                    r.fits and c["passed"] and c["outside_share"] == 0.0 and c["max_rel_err"] < 1e-5
                    and np.allclose(r.reference[out], want, rtol=1e-5, atol=1e-6 * np.abs(want).max()))
        t = emulate_onnx(path, inputs=ins, timing_only=True, training=True)
        rec["training"] = {"fits": bool(t.fits), "cycles": int(t.total_cycles), "ops": t.num_ops}
    except Exception as e:  # a model that does not import: the line says why
        rec.update(ok=False, error=f"{type(e).__name__}: {str(e)[:200]}")
    return rec


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="*")
    ap.add_argument("--quick", action="store_true", help=f"classic exports of {', '.join(QUICK)}")
    ap.add_argument("--one", nargs=2, metavar=("MODEL", "EXPORTER"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(*args.one)))
        return 0
    manifest = json.loads((ZOO / "manifest.json").read_text())
    names = args.models or (QUICK if args.quick else sorted(manifest["models"]))
    exporters = ("classic",) if args.quick else ("classic", "dynamo")
    print(f"{'model':<18}{'export':<8}{'import':>7}{'types':>6}{'ops':>5}{'fits':>5}{'cycles':>9}"
          f"{'fp32 err':>10}{'fp16 err':>10}{'vs ORT16':>9}{'train':>14}{'CPU s':>7}{'RSS MB':>8}")
    rows = []
    for name in names:
        for exporter in exporters:
            out = subprocess.run([sys.executable, "-m", "bench.onnx_zoo", "--one", name, exporter],
                                 capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1])
            try:
                rec = json.loads(out.stdout.strip().splitlines()[-1])
            except (ValueError, IndexError):
                rec = {"model": name, "exporter": exporter, "ok": False, "error": out.stderr.strip()[-200:]}
            rows.append(rec)
            if not rec.get("ok"):
                print(f"{name:<18}{exporter:<8}{'FAILED':>7}  {rec.get('error')}")
                continue
            f32, f16, tr = rec["fp32"], rec["fp16"], rec["training"]
            mark = lambda c: f"{c['max_rel']:.1e}" + ("" if c["passed"] and c.get("suite_bar", 1) else "!")  # noqa: E731
            v16 = f"{f16['vs_ort16']:.2f}x" if f16["vs_ort16"] is not None else "-"
            train = f"{'fits' if tr['fits'] else 'NO FIT'} {tr['cycles'] / 1e3:.0f}k"
            print(f"{name:<18}{exporter:<8}{'ok':>7}{rec['node_types']:>6}{rec['ops']:>5}"
                  f"{'yes' if rec['fits'] else 'NO':>5}{rec['cycles']:>9,}{mark(f32):>10}{mark(f16):>10}{v16:>9}"
                  f"{train:>14}{rec['cpu_s']:>7.1f}{rec['rss_mb']:>8.0f}", flush=True)
    ok = [r for r in rows if r.get("ok")]
    passed = [r for r in ok if r["fp32"]["passed"] and r["fp32"]["suite_bar"] and r["fp16"]["passed"]]
    ratios = [r["fp16"]["vs_ort16"] for r in ok if r["fp16"]["vs_ort16"] is not None]
    print(f"\n{len(ok)}/{len(rows)} import; {len(passed)}/{len(rows)} pass the numerics check in fp32 and fp16 "
          "(error relative to the output's max; '!' = failed, fp32: or missed the suite's bar); fp16 RMS error / ONNX Runtime fp16's: "
          + (f"median {np.median(ratios):.2f}x, range {min(ratios):.2f}x .. {max(ratios):.2f}x" if ratios else "-"))
    print("BENCH-RESULT " + json.dumps({"bench": "onnx_zoo", "models": len(rows), "imported": len(ok),
                                        "numerics_passed": len(passed),
                                        "fp16_rms_vs_ort16_median": float(np.median(ratios)) if ratios else None,
                                        "rows": rows}))
    return 0 if len(passed) == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
