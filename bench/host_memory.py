"""Bench: the host-memory pre-check's estimate against the measured peak of the same run, for every model family,
sequence length, batch and placement in the table below (issue 49 item 1).

    python -m bench.host_memory                    # measure every row, print the table and the goal rows
    python -m bench.host_memory --rows bert_large_4_s512_b24 pod16_bert_large
    python -m bench.host_memory --fit              # also least-squares the coefficients on the fit rows
    python -m bench.host_memory --from-log LOG     # measure nothing: the peaks from an earlier run's output

Each row is the real command (``popvision-lite emulate ...``) in a fresh process, with the pre-check told this
machine has unlimited memory (so rows it would refuse run too); its peak is ``ru_maxrss`` of that process
(``RUSAGE_CHILDREN`` of a wrapper, bench.speed.measure).  The estimate is computed here from the same command
line, before anything is built, as the pre-check computes it (emulator/models/host_memory.py; ONNX models
emulator/onnx_import/host_memory.py).  Goal: estimate / peak within 0.8 .. 1.5 on every row.

The coefficients are *calibrated* (no public figure says how many bytes a vertex of our emulator takes): least
squares of the relative error on the rows named in :data:`FIT_ROWS`, separately for each path; ``--fit`` prints
the fitted values (copy them into the estimate's module) and, for each fit row, its estimate when the fit leaves
it out (leave-one-out).  The other rows judge the fit.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench import targets  # noqa: E402
from bench.speed import PY, ROOT, measure  # noqa: E402

LO, HI = 0.8, 1.5  # estimate / measured peak, every row
CENTRE = (LO * HI) ** 0.5  # what the fit aims the ratio at: the band's geometric centre, the same room either way
POD16 = str(ROOT / "sample_configs" / "mlperf_v1.1_pod16_bert_large.toml")
PHASED = ["--streaming-weights", "--recompute", "--optimizer", "adam", "--rts"]
ZOO = ROOT / "tests" / "data" / "onnx_zoo"

# name -> (family, emulate arguments (bundled model) or ("onnx", builder arguments, emulate arguments))
ROWS: dict[str, tuple] = {
    # BERT, composed (timing-only): sequence lengths, batches, placements
    "bert_base_1ipu": ("bert", ["bert-base", "--timing-only"]),
    "bert_large_4_s128_b8": ("bert", ["bert-large", "--ipus", "4", "--seq", "128", "--batch", "8", "--timing-only"]),
    "bert_large_4_s128_b32": ("bert", ["bert-large", "--ipus", "4", "--seq", "128", "--batch", "32", "--timing-only"]),
    "bert_large_4_s512_b2": ("bert", ["bert-large", "--ipus", "4", "--seq", "512", "--batch", "2", "--timing-only"]),
    "bert_large_4_s512_b8": ("bert", ["bert-large", "--ipus", "4", "--seq", "512", "--batch", "8", "--timing-only"]),
    "bert_large_4_s512_b16": ("bert", ["bert-large", "--ipus", "4", "--seq", "512", "--batch", "16", "--timing-only"]),
    "bert_large_4_s512_b24": ("bert", ["bert-large", "--ipus", "4", "--seq", "512", "--batch", "24", "--timing-only"]),
    "bert_large_8": ("bert", ["bert-large", "--ipus", "8", "--timing-only"]),
    "bert_large_16": ("bert", ["bert-large", "--ipus", "16", "--timing-only"]),
    "bert_base_2x4": ("bert", ["bert-base", "--ipus", "8", "--replicas", "2", "--grad-accum", "16", "--timing-only"]),
    "bert_large_tp4": ("tensor parallel", ["bert-large", "--ipus", "8", "--tensor-parallel", "4", "--replicas", "2",
                                           "--seq", "384", "--timing-only"]),
    "pod16_bert_large": ("bert", ["--config", POD16]),
    # GPT, composed
    "gpt2_small_4": ("gpt", ["gpt2-small", "--ipus", "4", "--timing-only"]),
    "gpt2_medium_8_b4": ("gpt", ["gpt2-medium", "--ipus", "8", "--batch", "4", "--timing-only"]),
    "gpt2_xl_16x4": ("gpt", ["gpt2-xl", "--replicas", "16", "--pipeline-stages", "4", "--timing-only"]),
    "gpt2_xl_phased": ("gpt", ["gpt2-xl", "--replicas", "64", "--grad-accum", "2", *PHASED, "--timing-only"]),
    "gpt3_13b_tp1": ("gpt", ["gpt3-13b", "--ipus", "64", "--replicas", "64", *PHASED, "--timing-only"]),  # a whole layer
    "gpt3_13b_tp8": ("tensor parallel", ["gpt3-13b", "--ipus", "64", "--tensor-parallel", "8", "--replicas", "8",
                                         "--grad-accum", "16", *PHASED, "--timing-only"]),
    "gpt3_13b_tp4": ("tensor parallel", ["gpt3-13b", "--ipus", "64", "--tensor-parallel", "4", "--replicas", "16",
                                         "--grad-accum", "8", *PHASED, "--timing-only"]),
    "gpt3_13b_tp8_pipe": ("tensor parallel", ["gpt3-13b", "--ipus", "64", "--tensor-parallel", "8", "--pipeline-stages",
                                              "2", "--replicas", "4", "--grad-accum", "16", "--recompute", "--optimizer",
                                              "adam", "--optimizer-state", "offchip", "--rts", "--timing-only"]),
    "gpt3_13b_pod64_popxl": ("tensor parallel", ["--config", str(ROOT / "sample_configs" / "gpt3_13b_pod64.toml")]),
    "gpt3_175b_pod64": ("tensor parallel", ["gpt3-175b", "--ipus", "64", "--tensor-parallel", "32", "--replicas", "2",
                                            "--grad-accum", "64", *PHASED, "--timing-only"]),
    # whole graph: ResNet timing-only, numerics of the small models
    "resnet50_b20": ("resnet", ["resnet50", "--timing-only"]),
    "resnet50_b4": ("resnet", ["resnet50", "--batch", "4", "--timing-only"]),
    "resnet101_b8": ("resnet", ["resnet50", "--layers", "101", "--batch", "8", "--timing-only"]),
    "resnet_tiny_numerics": ("resnet", ["resnet-tiny", "--batch", "32"]),
    "bert_mini_numerics": ("bert", ["bert-mini", "--batch", "8", "--seq", "128"]),
    "mlp_numerics": ("mlp", ["mlp", "--hidden", "2048", "--batch", "256"]),
    "conv_timing": ("conv", ["conv", "--batch", "8", "--image", "64", "--hidden", "64", "--timing-only"]),
    "gnn_numerics": ("gnn", ["gnn", "--batch", "4", "--hidden", "128"]),
    "resnet50_b12": ("resnet", ["resnet50", "--batch", "12", "--timing-only"]),
    "resnet_tiny_b64_numerics": ("resnet", ["resnet-tiny", "--batch", "64"]),
    "conv_numerics": ("conv", ["conv", "--batch", "4", "--image", "32", "--hidden", "64"]),
    "mlp_timing": ("mlp", ["mlp", "--hidden", "4096", "--batch", "512", "--timing-only"]),
    # ONNX imports: (layers, batch, seq, training)
    "onnx_bert_base_12l": ("onnx", ("bert", 12), ["--batch", "8", "--seq", "128", "--timing-only"]),
    "onnx_bert_base_12l_s384": ("onnx", ("bert", 12), ["--batch", "8", "--seq", "384", "--timing-only"]),
    "onnx_bert_base_4l_train": ("onnx", ("bert", 4), ["--batch", "8", "--seq", "128", "--training", "--timing-only"]),
    "onnx_zoo_resnet50_b16": ("onnx", ("zoo", "resnet50.classic"), ["--batch", "16", "--timing-only"]),
    "onnx_zoo_gpt2_b8": ("onnx", ("zoo", "gpt2.classic"), ["--batch", "8", "--seq", "64", "--timing-only"]),
    "onnx_bert_base_4l": ("onnx", ("bert", 4), ["--batch", "8", "--seq", "128", "--timing-only"]),
    "onnx_bert_base_12l_b2": ("onnx", ("bert", 12), ["--batch", "2", "--seq", "128", "--timing-only"]),
    "onnx_bert_base_12l_s256_b16": ("onnx", ("bert", 12), ["--batch", "16", "--seq", "256", "--timing-only"]),
    "onnx_bert_base_2l_train": ("onnx", ("bert", 2), ["--batch", "4", "--seq", "128", "--training", "--timing-only"]),
    "onnx_bert_base_3l_train_s256": ("onnx", ("bert", 3), ["--batch", "4", "--seq", "256", "--training",
                                                            "--timing-only"]),
    "onnx_zoo_t5_b8": ("onnx", ("zoo", "t5.classic"), ["--batch", "8", "--seq", "128", "--timing-only"]),
    "onnx_zoo_llama_b8": ("onnx", ("zoo", "llama.classic"), ["--batch", "8", "--seq", "128", "--timing-only"]),
    "onnx_zoo_minilm_b8": ("onnx", ("zoo", "minilm_sdpa.classic"), ["--batch", "8", "--seq", "64", "--timing-only"]),
    "onnx_zoo_efficientnet_b8": ("onnx", ("zoo", "efficientnet_b0.classic"), ["--batch", "8", "--timing-only"]),
    "onnx_zoo_mobilenet_v2_b32": ("onnx", ("zoo", "mobilenet_v2.classic"), ["--batch", "32", "--timing-only"]),
    "onnx_zoo_unet_b8": ("onnx", ("zoo", "unet.classic"), ["--batch", "8", "--timing-only"]),
}
# the rows each path's coefficients are fitted on (least squares of the relative error); every other row judges
FIT_ROWS = ("bert_large_4_s128_b8", "bert_large_4_s512_b16", "bert_large_16", "bert_large_tp4", "gpt2_medium_8_b4",
            "gpt2_xl_16x4", "gpt3_13b_tp4", "gpt3_13b_tp1",
            "resnet50_b4", "resnet101_b8", "resnet_tiny_numerics", "bert_mini_numerics", "mlp_numerics", "gnn_numerics",
            "onnx_bert_base_12l", "onnx_bert_base_12l_s256_b16", "onnx_bert_base_4l_train", "onnx_bert_base_2l_train",
            "onnx_zoo_t5_b8",
            "onnx_zoo_efficientnet_b8", "onnx_zoo_resnet50_b16", "onnx_zoo_unet_b8")

_DRIVER = """
import json, sys
from popvision_lite import value_checks
value_checks.host_memory_bytes = lambda: 1 << 60  # the pre-check off: measure the rows it would refuse too
from popvision_lite.emulator.models import host_memory as hm
built = hm.built_terms
def report(graph, numerics):  # the built graph's counts (whole-graph rows), for the estimate of the check's 2nd stage
    counts = built(graph, numerics)
    with open(sys.argv[1], "w") as f:
        json.dump(counts, f)
    return counts
hm.built_terms = report
from popvision_lite.cli.main import main
sys.exit(main(sys.argv[2:]))
"""


def built_counts(path: str) -> dict | None:
    """The built graph's counts a whole-graph row's run wrote (:data:`_DRIVER`); None when it built no whole graph."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None

_ONNX_FILE = """
import sys, onnx
from popvision_lite.emulator.models.config import make_config
from popvision_lite.emulator.onnx_import import builders
cfg = make_config('bert-base', training=False, layers=int(sys.argv[2]))
onnx.save(builders.bert_encoder(layers=cfg.layers, hidden=cfg.hidden, heads=cfg.heads, ffn=cfg.ffn_size,
                                vocab=cfg.vocab, residual_first=True), sys.argv[1])
"""


def onnx_model(spec: tuple, tmp: str) -> str:
    """The .onnx file of an ONNX row: the bench's BERT-base encoder with ``layers`` layers, or a zoo model."""
    kind, what = spec
    if kind == "zoo":
        return str(ZOO / f"{what}.onnx")
    path = os.path.join(tmp, f"bert_base_{what}l.onnx")
    if not os.path.exists(path):
        import subprocess

        subprocess.run([PY, "-c", _ONNX_FILE, path, str(what)], cwd=ROOT, check=True, capture_output=True)
    return path


def command(name: str, tmp: str) -> list[str]:
    row = ROWS[name]
    out = ["-q", "-o", os.path.join(tmp, name + ".pvl")]
    if row[0] == "onnx":
        return ["emulate", "--onnx", onnx_model(row[1], tmp), *row[2], *out]
    return ["emulate", *row[1], *out]


def row_estimate(name: str, tmp: str, built: dict | None = None):
    """(Estimate, the counts of its fitted terms, the pre-build estimate) of a row as the check computes it, from
    the same command line (the counts differ from the estimate's terms where the composed path's floor sets it);
    on the whole-graph path the second stage's, from the counts of the graph its run built (``built``)."""
    from popvision_lite import value_checks

    saved = value_checks.host_memory_bytes
    value_checks.host_memory_bytes = lambda: None  # the command line's own check: nothing to compare against here
    try:
        row = ROWS[name]
        if row[0] == "onnx":
            from popvision_lite.emulator.onnx_import import host_memory as onnx_hm
            from popvision_lite.emulator.onnx_import.loader import load

            a = row[2]
            batch = int(a[a.index("--batch") + 1]) if "--batch" in a else None
            seq = int(a[a.index("--seq") + 1]) if "--seq" in a else None
            lm = load(onnx_model(row[1], tmp), batch=batch, seq=seq)
            est = onnx_hm.estimate(lm, training="--training" in a, timing_only="--timing-only" in a)
            return est, {k: v for k, (v, _) in est.terms.items()}, est
        from popvision_lite.cli import emulate as E
        from popvision_lite.emulator.models import host_memory as hm

        p = argparse.ArgumentParser()
        E.add_arguments(p)
        cfg, _, _, timing = E.resolve(p.parse_args([a for a in command(name, tmp)[1:] if a != "-q"]))
        pre = hm.estimate(cfg, timing)
        if pre.path != "whole":
            return pre, hm.fitted_counts(cfg, timing), pre
        counts = built or {k: 0.0 for k in hm.BUILT if k != "base"}
        b = hm.BUILT["base"] + sum(hm.BUILT[k] * v for k, v in counts.items())
        return hm.Estimate(int(b), "built", {k: (v, hm.BUILT[k] * v) for k, v in counts.items()}, pre.field), \
            counts, pre
    finally:
        value_checks.host_memory_bytes = saved


def _solve(rows: list[dict], names: list[str]) -> dict[str, float]:
    """Intercept and coefficients minimising the squared deviation of estimate / peak from :data:`CENTRE` over
    ``rows``, none negative: a term whose coefficient comes out negative is dropped and the rest refitted."""
    keep = ["base"] + names
    while True:
        X = np.array([[1.0 if k == "base" else r["counts"][k] for k in keep] for r in rows])
        y = np.array([r["peak_bytes"] for r in rows], float)
        coef, *_ = np.linalg.lstsq(X / y[:, None], np.full(len(rows), CENTRE), rcond=None)
        if (coef >= 0).all() or len(keep) == 1:
            return dict(zip(keep, coef, strict=True)) | {k: 0.0 for k in ["base"] + names if k not in keep}
        keep = [k for k, c in zip(keep, coef, strict=True) if c >= 0 or k == "base"]


def _predict(coef: dict, r: dict, names: list[str]) -> float:
    return coef["base"] + sum(coef[k] * r["counts"][k] for k in names)


def fit(records: list[dict]) -> dict[str, dict]:
    """Per path: the fitted coefficients (:func:`_solve`) on its fit rows, and each fit row's estimate / peak with
    the fit leaving it out."""
    out = {}
    for path in sorted({r["path"] for r in records}):
        rows = [r for r in records if r["path"] == path and r["name"] in FIT_ROWS and r["peak_bytes"] > 0]
        if not rows:
            continue
        names = sorted(rows[0]["counts"])
        coef = _solve(rows, names)
        loo = {r["name"]: _predict(_solve([q for q in rows if q is not r], names), r, names) / r["peak_bytes"]
               for r in rows} if len(rows) > 2 else {}
        out[path] = dict(coefficients=coef, leave_one_out=loo, rows=[r["name"] for r in rows])
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", nargs="*", help=f"only these rows ({', '.join(ROWS)})")
    ap.add_argument("--fit", action="store_true", help="least-squares the coefficients on the fit rows and print them")
    ap.add_argument("--from-log", help="measure nothing: take each row's peak from this earlier output")
    ap.add_argument("--timeout", type=float, default=1800.0)
    ap.add_argument("--jobs", type=int, default=1, help="rows measured side by side (each peak is its own process's)")
    args = ap.parse_args(argv)
    names = args.rows or list(ROWS)
    bad = sorted(set(names) - set(ROWS))
    if bad:
        print(f"--rows: unknown {', '.join(bad)}", file=sys.stderr)
        return 2
    logged = {}
    if args.from_log:
        for line in Path(args.from_log).read_text().splitlines():
            if line.startswith("BENCH-RESULT "):
                d = json.loads(line[len("BENCH-RESULT "):])
                if d.get("bench") == "host_memory" and "row" in d:
                    logged[d["row"]] = d
    records, goals, failed = [], [], 0
    print(f"{'row':26} {'family':15} {'path':9} {'peak GiB':>8} {'est GiB':>8} {'est/peak':>8}  fit  CPU s"
          "  (built rows: pre-build floor / peak)")
    with tempfile.TemporaryDirectory(prefix="pvl_hostmem_") as tmp, ThreadPoolExecutor(max(1, args.jobs)) as pool:
        for name in names:  # the ONNX files once, before rows run side by side
            if ROWS[name][0] == "onnx":
                onnx_model(ROWS[name][1], tmp)
        runs = {n: pool.submit(measure, [PY, "-c", _DRIVER, os.path.join(tmp, n + ".counts"), *command(n, tmp)],
                               args.timeout) for n in names if n not in logged}
        for name in names:
            if name in logged:
                m = dict(rc=logged[name]["rc"], peak_rss_gb=logged[name]["peak_gib"], cpu_s=logged[name]["cpu_s"])
                built = logged[name]["counts"] if logged[name].get("path") == "built" else None
            else:
                m = runs[name].result()
                built = built_counts(os.path.join(tmp, name + ".counts"))
            est, counts, pre = row_estimate(name, tmp, built)
            peak = m["peak_rss_gb"] * 2**30
            rec = dict(bench="host_memory", row=name, family=ROWS[name][0], path=est.path, rc=m["rc"],
                       cpu_s=m["cpu_s"], peak_gib=m["peak_rss_gb"], estimate_gib=round(est.gib, 3),
                       ratio=round(est.bytes / peak, 3) if peak else None, fit_row=name in FIT_ROWS,
                       counts=counts, floor="largest_tensor" in est.terms,
                       pre_build_gib=round(pre.gib, 3), pre_build_ratio=round(pre.bytes / peak, 3) if peak else None)
            ok_rc = m["rc"] in (0, 3)
            failed += not ok_rc
            records.append(dict(name=name, path=est.path, peak_bytes=peak if ok_rc else 0, counts=rec["counts"]))
            ratio = f"{rec['ratio']:8.2f}" if rec["ratio"] else "       -"
            pre_note = f"  ({rec['pre_build_ratio']:.2f})" if est.path == "built" and peak else ""
            print(f"{name:26} {rec['family']:15} {est.path:9} {m['peak_rss_gb']:8.2f} {est.gib:8.2f} {ratio}  "
                  f"{'fit' if rec['fit_row'] else '   '}  {m['cpu_s']:5.1f}{'  (floor)' if rec['floor'] else ''}"
                  f"{pre_note}"
                  f"{'' if ok_rc else '  FAILED rc ' + str(m['rc'])}",
                  flush=True)
            print("BENCH-RESULT " + json.dumps(rec), flush=True)
            if ok_rc and peak:
                r = est.bytes / peak
                goals.append(targets.row(f"{name}: estimate / peak >= {LO}", r, LO, at_least=True) if r < 1 else
                             targets.row(f"{name}: estimate / peak <= {HI}", r, HI))
                if est.path == "built":  # the first stage's floor must never refuse a run that fits
                    goals.append(targets.row(f"{name}: pre-build floor / peak <= 1", pre.bytes / peak, 1.0))
    targets.print_rows(goals)
    print(targets.bench_result("host_memory_goals", goals))
    if args.fit:
        for path, f in fit(records).items():
            coef = ", ".join(f"{k} {v:.4g}" for k, v in f["coefficients"].items())
            print(f"fit ({path}, rows {', '.join(f['rows'])}): {coef}")
            for n, r in f["leave_one_out"].items():
                print(f"  leave-one-out {n:26} estimate / peak {r:.2f}")
            print("BENCH-RESULT " + json.dumps({"bench": "host_memory_fit", "path": path, **f}))
    in_band = all(g["met"] for g in goals)
    return 0 if in_band and not failed else 1


if __name__ == "__main__":
    sys.exit(main())
