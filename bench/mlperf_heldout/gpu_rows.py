"""NVIDIA single-node MLPerf Training rows (DGX A100 v2.0, DGX H100 v3.0): BERT and ResNet-50 throughput from
the result logs, by the method of ``resources/validation/PROVENANCE.md`` (run from this folder:
``python3 gpu_rows.py [--mirrors DIR]``; needs the mlcommons result repositories as git mirrors, see paths.py).

* BERT (NVIDIA evaluates inside its one training block): per run, the median over evaluation intervals of
  sequences trained (difference of the ``eval_accuracy`` ``epoch_num``, the logged sample count) / time between
  evaluations (the first interval from ``block_start``): throughput including evaluation, as the v1.1 row.
* ResNet-50: per run, the median over epochs of 1,281,167 images / (``epoch_stop`` - ``epoch_start``): train-only,
  as the v1.1 row (NVIDIA's MXNet loop trains the whole set each epoch; evaluation runs outside the epochs).
* The set's figure is the median of the per-run medians over all runs; min / max over runs beside it.

Writes ``resources/validation/mlperf_training_gpu.csv`` (temp file + rename).
"""

from __future__ import annotations

import csv
import os
import statistics as st
import sys
import tempfile
from pathlib import Path

from mllog import all_, first, git_ls, git_show, parse
from paths import MIRRORS, mirror

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "resources" / "validation" / "mlperf_training_gpu.csv"
IMAGENET = 1_281_167
EVAL_ITER_SAMPLES = 150_000

# the v1.1 rows of the validation CSV, derived again by this code as a check of the method
V11 = (
    dict(id="nv-v1.1-dgxa100-bert", round="v1.1", repo="mlcommons/training_results_v1.1",
         results="NVIDIA/results/dgxa100_ngc21.09_pytorch/bert", benchmark="BERT", micro_batch=56),
    dict(id="nv-v1.1-dgxa100-resnet", round="v1.1", repo="mlcommons/training_results_v1.1",
         results="NVIDIA/results/dgxa100_ngc21.09_mxnet/resnet", benchmark="ResNet-50", micro_batch=408),
)
SETS = (
    # id, round, repo, commit dir, results dir, benchmark, config, system, accelerators, precision, notes
    dict(id="nv-v2.0-dgxa100-bert", round="v2.0", repo="mlcommons/training_results_v2.0",
         results="NVIDIA/results/dgxa100_ngc22.04_pytorch/bert", benchmark="BERT", gpu="a100-80gb",
         config="NVIDIA/benchmarks/bert/implementations/pytorch/config_DGXA100_1x8x56x1.sh",
         system="DGX A100 (closed, PyTorch NGC 22.04)", accelerators="8x A100-SXM4-80GB", framework="PyTorch NGC 22.04",
         micro_batch=56, optimizer="lamb", precision="fp16",
         precision_text="FP16 AMP, fused kernels (apex); no FP8 on Ampere",
         packing="none (unpadded kernels); 1 sample = 1 sequence"),
    dict(id="nv-v2.0-dgxa100-resnet", round="v2.0", repo="mlcommons/training_results_v2.0",
         results="NVIDIA/results/dgxa100_ngc22.04_mxnet/resnet", benchmark="ResNet-50", gpu="a100-80gb",
         config="NVIDIA/benchmarks/resnet/implementations/mxnet/config_DGXA100.sh",
         system="DGX A100 (closed, MXNet NGC 22.04)", accelerators="8x A100-SXM4-80GB", framework="MXNet NGC 22.04",
         micro_batch=408, optimizer="momentum", precision="fp16", precision_text="FP16 (NHWC), DALI input",
         packing="n/a (images)"),
    dict(id="nv-v3.0-dgxh100-bert", round="v3.0", repo="mlcommons/training_results_v3.0",
         results="NVIDIA/results/dgxh100_ngc23.04_pytorch/bert", benchmark="BERT", gpu="h100-sxm",
         config="NVIDIA/benchmarks/bert/implementations/pytorch/config_DGXH100_1x8x48x1_pack.sh",
         system="DGX H100 (closed, PyTorch NGC 23.04)", accelerators="8x H100-SXM5-80GB", framework="PyTorch NGC 23.04",
         micro_batch=96, optimizer="lamb", precision="fp8",
         precision_text=("FP8 encoder layers through Transformer Engine (--use_transformer_engine2: fp8_autocast, "
                         "DelayedScaling HYBRID, modeling.py), FP16 elsewhere"),
         packing="packed: 48 packs x 2 sequences per GPU (PACKING_FACTOR=2); GBS 768 sequences"),
    dict(id="nv-v3.0-dgxh100-resnet", round="v3.0", repo="mlcommons/training_results_v3.0",
         results="NVIDIA/results/dgxh100_ngc23.04_mxnet/resnet", benchmark="ResNet-50", gpu="h100-sxm",
         config="NVIDIA/benchmarks/resnet/implementations/mxnet/config_DGXH100.sh",
         system="DGX H100 (closed, MXNet NGC 23.04)", accelerators="8x H100-SXM5-80GB", framework="MXNet NGC 23.04",
         micro_batch=400, optimizer="momentum", precision="fp16", precision_text="FP16 (NHWC), DALI input",
         packing="n/a (images)"),
)
COLUMNS = ("id", "round", "system", "accelerators", "n_accel", "benchmark", "framework", "gpu", "gbs", "micro_batch",
           "packing", "precision", "precision_text", "optimizer", "n_runs", "n_success", "sps_median", "sps_min",
           "sps_max", "sps_kind", "ttt_min_median", "repo", "commit", "results_path", "config_path", "example")


def bert_run(ev) -> tuple[float, list]:
    start = first(ev, "block_start")["time_ms"]
    gbs = first(ev, "global_batch_size")["value"]
    evals = all_(ev, "eval_accuracy")
    counted = len({e["metadata"]["epoch_num"] for e in evals}) == len(evals)
    prev_n, prev_t, rates = 0, start, []
    for k, e in enumerate(evals, 1):
        # v2.0 / v3.0 log the samples trained as epoch_num; v1.1 logs 1 throughout, and its samples follow the
        # evaluation schedule ceil(k x EVAL_ITER_SAMPLES / GBS) x GBS (EVAL_ITER_SAMPLES = 150000 in its config)
        n = e["metadata"]["epoch_num"] if counted else -(-k * EVAL_ITER_SAMPLES // gbs) * gbs
        t = e["time_ms"]
        rates.append(((n - prev_n) / ((t - prev_t) / 1e3), n - prev_n, t - prev_t))
        prev_n, prev_t = n, t
    return st.median(r[0] for r in rates), rates


def resnet_run(ev) -> tuple[float, list]:
    starts = {e["metadata"]["epoch_num"]: e["time_ms"] for e in all_(ev, "epoch_start")}
    rates = [(IMAGENET / ((e["time_ms"] - starts[e["metadata"]["epoch_num"]]) / 1e3), e["metadata"]["epoch_num"],
              e["time_ms"] - starts[e["metadata"]["epoch_num"]])
             for e in all_(ev, "epoch_stop") if e["metadata"]["epoch_num"] in starts]
    return st.median(r[0] for r in rates), rates


def derive(s: dict) -> dict:
    repo = mirror(s["repo"])
    import subprocess
    commit = subprocess.run(["git", "-C", repo, "rev-parse", "HEAD"], capture_output=True, text=True,
                            check=True).stdout.strip()
    files = sorted(f for f in git_ls(repo, s["results"]) if f.endswith(".txt"))
    per, ttt, ok, gbs, example = [], [], 0, None, ""
    for f in files:
        ev = parse(git_show(repo, f))
        gbs = first(ev, "global_batch_size")["value"]
        med, rates = (bert_run if s["benchmark"] == "BERT" else resnet_run)(ev)
        per.append((med, f, rates))
        stop = first(ev, "run_stop")
        if stop and stop["metadata"].get("status") == "success":
            ok += 1
            ttt.append((stop["time_ms"] - first(ev, "run_start")["time_ms"]) / 60e3)
    meds = [p[0] for p in per]
    mid = min(per, key=lambda p: abs(p[0] - st.median(meds)))
    r = min(mid[2], key=lambda x: abs(x[0] - mid[0]))
    unit = "sequences" if s["benchmark"] == "BERT" else "images"
    what = f"{r[1]:,} sequences" if s["benchmark"] == "BERT" else f"epoch {r[1]}: {IMAGENET:,} images"
    example = f"{mid[1]}: {what} in {r[2] / 1e3:.3f} s -> {r[0]:,.1f} {unit}/s (run median {mid[0]:,.1f})"
    assert gbs == 8 * s["micro_batch"], (s["id"], gbs)
    return dict(id=s["id"], round=s["round"], system=s["system"], accelerators=s["accelerators"], n_accel=8,
                benchmark=s["benchmark"], framework=s["framework"], gpu=s["gpu"], gbs=gbs, micro_batch=s["micro_batch"],
                packing=s["packing"], precision=s["precision"], precision_text=s["precision_text"],
                optimizer=s["optimizer"], n_runs=len(per), n_success=ok, sps_median=round(st.median(meds), 1),
                sps_min=round(min(meds), 1), sps_max=round(max(meds), 1),
                sps_kind="incl. eval (eval to eval)" if s["benchmark"] == "BERT" else "train-only (epochs)",
                ttt_min_median=round(st.median(ttt), 3) if ttt else "", repo=s["repo"], commit=commit,
                results_path=s["results"] + "/result_*.txt", config_path=s["config"], example=example)


def main() -> int:
    if (MIRRORS / "mlcommons+training_results_v1.1").exists():
        for s in V11:
            r = derive({**s, **{k: "" for k in ("system", "accelerators", "framework", "gpu", "packing", "precision",
                                                "precision_text", "optimizer", "config")}})
            print(f"method check, {r['id']}: {r['sps_median']:,} ({r['sps_min']:,}..{r['sps_max']:,})")
    rows = [derive(s) for s in SETS]
    fd, tmp = tempfile.mkstemp(dir=OUT.parent, prefix=".mlperf_gpu.", suffix=".tmp")
    with os.fdopen(fd, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=COLUMNS)
        w.writeheader()
        w.writerows(rows)
    os.replace(tmp, OUT)
    for r in rows:
        print(f"{r['id']}: {r['sps_median']:,} ({r['sps_min']:,}..{r['sps_max']:,}) {r['sps_kind']}, "
              f"{r['n_runs']} runs, {r['n_success']} successful; {r['example']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
