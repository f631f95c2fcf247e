"""NVIDIA MLPerf Training rows: BERT and ResNet-50 on one DGX (A100 v2.0; H100 v3.0, v3.1 (ResNet-50), v4.0 (ResNet-50); H200 v4.0) and
GPT-3-175B on 512 to 11,616 H100s (v3.0, v3.1, v4.0), throughput from the result logs by the method of
``resources/validation/PROVENANCE.md`` (run from this folder: ``python3 gpu_rows.py [--mirrors DIR]``, DIR holding
the mlcommons result repositories as git mirrors, ``DIR/mlcommons+training_results_v3.1/repo`` and so on; default
and layout in paths.py).

* BERT (NVIDIA evaluates inside its one training block): per run, the median over evaluation intervals of
  sequences trained (difference of the ``eval_accuracy`` ``epoch_num``, the logged sample count) / time between
  evaluations (the first interval from ``block_start``): throughput including evaluation, as the v1.1 row.
* ResNet-50: per run, the median over epochs of 1,281,167 images / (``epoch_stop`` - ``epoch_start``): train-only,
  as the v1.1 row (NVIDIA's MXNet loop trains the whole set each epoch; evaluation runs outside the epochs).
* GPT-3-175B: per run, the median over training stretches (from ``block_start`` or an ``eval_stop`` to the next
  ``eval_start``) of the tokens trained in it (difference of the ``eval_start`` ``epoch_num``, which counts tokens)
  / its duration, in sequences of 2,048 tokens: train-only (the evaluations run between stretches).  The placement: tensor x pipeline parallel from the config file the run names
  (``config_DGXH100_<nodes>x8x<minibs>x<TP>x<PP>_mbs<n>.sh``), data parallel = GPUs / (TP x PP), the micro-batch
  = logged global batch / (data parallel x logged gradient accumulation) (the config's MINIBS default is
  overridden at launch in some runs: the log is what ran); the interleaved pipeline depth from the config.
* The set's figure is the median of the per-run medians over all runs; min / max over runs beside it.

Writes ``resources/validation/mlperf_training_gpu.csv`` (temp file + rename).
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics as st
import subprocess
import sys
import tempfile
from pathlib import Path

from mllog import all_, first, git_ls, git_show, parse
from paths import MIRRORS

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "resources" / "validation" / "mlperf_training_gpu.csv"
IMAGENET = 1_281_167
EVAL_ITER_SAMPLES = 150_000
GPT3_SEQ = 2048

# the v1.1 rows of the validation CSV, derived again by this code as a check of the method
V11 = (
    dict(id="nv-v1.1-dgxa100-bert", round="v1.1", repo="mlcommons/training_results_v1.1",
         results="NVIDIA/results/dgxa100_ngc21.09_pytorch/bert", benchmark="BERT", micro_batch=56),
    dict(id="nv-v1.1-dgxa100-resnet", round="v1.1", repo="mlcommons/training_results_v1.1",
         results="NVIDIA/results/dgxa100_ngc21.09_mxnet/resnet", benchmark="ResNet-50", micro_batch=408),
)
_BERT_H100_PRECISION = ("FP8 encoder layers through Transformer Engine (--use_transformer_engine2: fp8_autocast, "
                        "DelayedScaling HYBRID, modeling.py), FP16 elsewhere")
_BERT_H100_PACKING = "packed: 48 packs x 2 sequences per GPU (PACKING_FACTOR=2); GBS 768 sequences"
_GPT3_PRECISION = ("FP8 GEMMs through Transformer Engine (config_fp8.sh: FP8=True, FP8_HYBRID=True), BF16 elsewhere "
                   "(megatron_amp_O2); sequence parallel, distributed optimizer (USE_DIST_OPTIMIZER=True), "
                   "tensor-parallel communication overlapped (TP_COMM_OVERLAP=True)")


def _bert(id_, round_, repo, results, gpu, config, system, accelerators, framework, micro_batch, precision,
          precision_text, packing):
    return dict(id=id_, round=round_, repo=repo, results=results, benchmark="BERT", gpu=gpu, config=config,
                system=system, accelerators=accelerators, framework=framework, micro_batch=micro_batch,
                optimizer="lamb", precision=precision, precision_text=precision_text, packing=packing)


def _resnet(id_, round_, repo, results, gpu, config, system, accelerators, framework, micro_batch=400):
    return dict(id=id_, round=round_, repo=repo, results=results, benchmark="ResNet-50", gpu=gpu, config=config,
                system=system, accelerators=accelerators, framework=framework, micro_batch=micro_batch,
                optimizer="momentum", precision="fp16", precision_text="FP16 (NHWC), DALI input",
                packing="n/a (images)")


def _gpt3(round_, repo, results, config, nodes, tp, pp, vp, framework):
    return dict(id=f"nv-{round_}-h100-n{nodes}-gpt3", round=round_, repo=repo, results=results,
                benchmark="GPT-3-175B", gpu="h100-sxm", config=config, nodes=nodes,
                system=f"{nodes}x DGX H100 (closed, {framework})", accelerators=f"{8 * nodes}x H100-SXM5-80GB",
                framework=framework, tp=tp, pp=pp, vp=vp, optimizer="adam", precision="fp8",
                precision_text=_GPT3_PRECISION, packing="n/a (sequences of 2,048 tokens)")


V20, V30, V31, V40 = (f"mlcommons/training_results_{v}" for v in ("v2.0", "v3.0", "v3.1", "v4.0"))
SETS = (
    _bert("nv-v2.0-dgxa100-bert", "v2.0", V20, "NVIDIA/results/dgxa100_ngc22.04_pytorch/bert", "a100-80gb",
          "NVIDIA/benchmarks/bert/implementations/pytorch/config_DGXA100_1x8x56x1.sh",
          "DGX A100 (closed, PyTorch NGC 22.04)", "8x A100-SXM4-80GB", "PyTorch NGC 22.04", 56, "fp16",
          "FP16 AMP, fused kernels (apex); no FP8 on Ampere", "none (unpadded kernels); 1 sample = 1 sequence"),
    _resnet("nv-v2.0-dgxa100-resnet", "v2.0", V20, "NVIDIA/results/dgxa100_ngc22.04_mxnet/resnet", "a100-80gb",
            "NVIDIA/benchmarks/resnet/implementations/mxnet/config_DGXA100.sh", "DGX A100 (closed, MXNet NGC 22.04)",
            "8x A100-SXM4-80GB", "MXNet NGC 22.04", micro_batch=408),
    _bert("nv-v3.0-dgxh100-bert", "v3.0", V30, "NVIDIA/results/dgxh100_ngc23.04_pytorch/bert", "h100-sxm",
          "NVIDIA/benchmarks/bert/implementations/pytorch/config_DGXH100_1x8x48x1_pack.sh",
          "DGX H100 (closed, PyTorch NGC 23.04)", "8x H100-SXM5-80GB", "PyTorch NGC 23.04", 96, "fp8",
          _BERT_H100_PRECISION, _BERT_H100_PACKING),
    _resnet("nv-v3.0-dgxh100-resnet", "v3.0", V30, "NVIDIA/results/dgxh100_ngc23.04_mxnet/resnet", "h100-sxm",
            "NVIDIA/benchmarks/resnet/implementations/mxnet/config_DGXH100.sh", "DGX H100 (closed, MXNet NGC 23.04)",
            "8x H100-SXM5-80GB", "MXNet NGC 23.04"),
    _resnet("nv-v3.1-dgxh100-resnet", "v3.1", V31, "NVIDIA/results/eos_ngc23.09_mxnet/resnet", "h100-sxm",
            "NVIDIA/benchmarks/resnet/implementations/mxnet/config_DGXH100.sh",
            "DGX H100 / Eos, 1 node (closed, MXNet NGC 23.09)", "8x H100-SXM5-80GB", "MXNet NGC 23.09"),
    _resnet("nv-v4.0-dgxh100-resnet", "v4.0", V40, "NVIDIA/results/eos_ngc24.04_mxnet/resnet", "h100-sxm",
            "NVIDIA/benchmarks/resnet/implementations/eos_ngc24.04_mxnet/config_DGXH100.sh",
            "DGX H100 / Eos, 1 node (closed, MXNet NGC 24.04)", "8x H100-SXM5-80GB", "MXNet NGC 24.04"),
    _bert("nv-v4.0-h200-bert", "v4.0", V40, "NVIDIA/results/h200_ngc23.09_pytorch/bert", "h200",
          "NVIDIA/benchmarks/bert/implementations/h200_ngc23.09_pytorch/config_DGXH100_1x8x48x1_pack.sh",
          "NVIDIA H200, 1 node (closed, PyTorch NGC 23.09)", "8x H200-SXM5-141GB", "PyTorch NGC 23.09", 96, "fp8",
          _BERT_H100_PRECISION + "; the same config file as the H100 row's", _BERT_H100_PACKING),
    _resnet("nv-v4.0-h200-resnet", "v4.0", V40, "NVIDIA/results/h200_ngc24.04_mxnet/resnet", "h200",
            "NVIDIA/benchmarks/resnet/implementations/h200_ngc24.04_mxnet/config_DGXH100.sh",
            "NVIDIA H200, 1 node (closed, MXNet NGC 24.04)", "8x H200-SXM5-141GB", "MXNet NGC 24.04"),
    _gpt3("v3.0", V30, "NVIDIA/results/dgxh100_n64_nemo/gpt3",
          "NVIDIA/benchmarks/gpt3/implementations/pytorch/config_DGXH100_64x8x128x4x8_mbs1.sh", 64, 4, 8, 12,
          "NeMo NGC 23.04"),
    _gpt3("v3.0", V30, "NVIDIA/results/dgxh100_n96_nemo/gpt3",
          "NVIDIA/benchmarks/gpt3/implementations/pytorch/config_DGXH100_96x8x128x4x8_mbs1.sh", 96, 4, 8, 12,
          "NeMo NGC 23.04"),
    *(_gpt3("v3.1", V31, f"NVIDIA/results/{d}/gpt3",
            f"NVIDIA/benchmarks/gpt3/implementations/pytorch/config_DGXH100_{cfg}_mbs1.sh", n, 4, 8, 12,
            "NeMo NGC 23.09")
      for d, cfg, n in (("eos_n64_ngc23.09_nemo", "64x8x192x4x8", 64), ("eos_n96_ngc23.09_nemo", "96x8x128x4x8", 96),
                        ("eos-dfw_n512_ngc23.09_nemo", "512x8x16x4x8", 512),
                        ("eos-dfw_n768_ngc23.09_nemo", "768x8x16x4x8", 768),
                        ("eos-dfw_n1024_ngc23.09_nemo", "1024x8x16x4x8", 1024),
                        ("eos-dfw_n1280_ngc23.09_nemo", "1280x8x8x4x8", 1280),
                        ("eos-dfw_n1344_ngc23.09_nemo", "1344x8x8x4x8", 1344))),
    _gpt3("v4.0", V40, "NVIDIA/results/eos_n64_ngc24.04_nemo/gpt3",
          "NVIDIA/benchmarks/gpt3/implementations/nemo/config_DGXH100_64x8x128x4x8_mbs2.sh", 64, 4, 8, 4,
          "NeMo NGC 24.04"),
    _gpt3("v4.0", V40, "NVIDIA/results/eos-dfw_n1344_ngc24.04_nemo/gpt3",
          "NVIDIA/benchmarks/gpt3/implementations/nemo/config_DGXH100_1344x8x6x4x6_mbs1_cg.sh", 1344, 4, 6, 8,
          "NeMo NGC 24.04"),
    _gpt3("v4.0", V40, "NVIDIA/results/eos-dfw_n1452_ngc24.04_nemo/gpt3",
          "NVIDIA/benchmarks/gpt3/implementations/nemo/config_DGXH100_1452x8x6x4x6_mbs1_cg.sh", 1452, 4, 6, 8,
          "NeMo NGC 24.04"),
)
COLUMNS = ("id", "round", "system", "accelerators", "n_accel", "benchmark", "framework", "gpu", "gbs", "micro_batch",
           "tensor_parallel", "pipeline_parallel", "virtual_pipeline", "data_parallel", "grad_accum", "seq_len",
           "packing", "precision", "precision_text", "optimizer", "n_runs", "n_success", "sps_median", "sps_min",
           "sps_max", "sps_kind", "ttt_min_median", "repo", "commit", "results_path", "config_path", "example")


def bert_run(ev) -> tuple[float, list]:
    start = first(ev, "block_start")["time_ms"]
    gbs = first(ev, "global_batch_size")["value"]
    evals = all_(ev, "eval_accuracy")
    counted = len({e["metadata"]["epoch_num"] for e in evals}) == len(evals)
    prev_n, prev_t, rates = 0, start, []
    for k, e in enumerate(evals, 1):
        # v2.0 and later log the samples trained as epoch_num; v1.1 logs 1 throughout, and its samples follow the
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


def gpt3_run(ev) -> tuple[float, list]:
    """Sequences/s of one run: the median over its training stretches of tokens / duration.  A stretch runs from
    the first ``block_start`` or an ``eval_stop`` to the next ``eval_start``, whose ``epoch_num`` counts the tokens
    trained so far (v3.0 logs one block for the whole run, v3.1 and later one block per evaluation interval:
    the stretches are the same either way)."""
    t0, n0 = first(ev, "block_start")["time_ms"], first(ev, "block_start")["metadata"]["first_epoch_num"]
    stops = {e["metadata"]["epoch_num"]: e["time_ms"] for e in all_(ev, "eval_stop")}
    rates = []
    for e in all_(ev, "eval_start"):
        n = e["metadata"]["epoch_num"]
        tokens, ms = n - n0, e["time_ms"] - t0
        if tokens > 0 and ms > 0:
            rates.append((tokens / GPT3_SEQ / (ms / 1e3), tokens, ms))
        if n not in stops:
            break
        t0, n0 = stops[n], n
    return st.median(r[0] for r in rates), rates


def derive(s: dict, mirrors: Path) -> dict:
    repo = str(mirrors / s["repo"].replace("/", "+") / "repo")
    commit = subprocess.run(["git", "-C", repo, "rev-parse", "HEAD"], capture_output=True, text=True,
                            check=True).stdout.strip()
    files = sorted(f for f in git_ls(repo, s["results"]) if f.endswith(".txt"))
    per, ttt, ok, gbs, ga = [], [], 0, None, None
    method = {"BERT": bert_run, "ResNet-50": resnet_run, "GPT-3-175B": gpt3_run}[s["benchmark"]]
    for f in files:
        ev = parse(git_show(repo, f))
        gbs = first(ev, "global_batch_size")["value"]
        g = first(ev, "gradient_accumulation_steps")
        ga = g["value"] if g else 1
        med, rates = method(ev)
        per.append((med, f, rates))
        stop = first(ev, "run_stop")
        if stop and stop["metadata"].get("status") == "success":
            ok += 1
            ttt.append((stop["time_ms"] - first(ev, "run_start")["time_ms"]) / 60e3)
    meds = [p[0] for p in per]
    mid = min(per, key=lambda p: abs(p[0] - st.median(meds)))
    r = min(mid[2], key=lambda x: abs(x[0] - mid[0]))
    if s["benchmark"] == "BERT":
        example = f"{mid[1]}: {r[1]:,} sequences in {r[2] / 1e3:.3f} s -> {r[0]:,.1f} sequences/s"
    elif s["benchmark"] == "ResNet-50":
        example = f"{mid[1]}: epoch {r[1]}: {IMAGENET:,} images in {r[2] / 1e3:.3f} s -> {r[0]:,.1f} images/s"
    else:
        example = (f"{mid[1]}: a stretch of {r[1]:,} tokens in {r[2] / 1e3:.3f} s -> {r[1] / (r[2] / 1e3):,.0f} tokens/s "
                   f"= {r[0]:,.2f} sequences/s")
    example += f" (run median {mid[0]:,.2f})"
    if s["benchmark"] == "GPT-3-175B":
        n = 8 * s["nodes"]
        tp, pp, vp = s["tp"], s["pp"], s["vp"]
        dp = n // (tp * pp)
        assert dp * tp * pp == n, s["id"]
        mb = gbs // (dp * ga)
        assert mb * dp * ga == gbs, (s["id"], gbs, dp, ga)
        seq = GPT3_SEQ
    else:
        n, tp, pp, vp, dp, ga, seq = 8, 1, 1, 1, 8, 1, (512 if s["benchmark"] == "BERT" else "")
        mb = s["micro_batch"]
        assert gbs == 8 * mb, (s["id"], gbs)
    kind = {"BERT": "incl. eval (eval to eval)", "ResNet-50": "train-only (epochs)",
            "GPT-3-175B": "train-only (training between evaluations; sequences of 2,048 tokens)"}[s["benchmark"]]
    return dict(id=s["id"], round=s["round"], system=s["system"], accelerators=s["accelerators"], n_accel=n,
                benchmark=s["benchmark"], framework=s["framework"], gpu=s["gpu"], gbs=gbs, micro_batch=mb,
                tensor_parallel=tp, pipeline_parallel=pp, virtual_pipeline=vp, data_parallel=dp, grad_accum=ga,
                seq_len=seq, packing=s["packing"], precision=s["precision"], precision_text=s["precision_text"],
                optimizer=s["optimizer"], n_runs=len(per), n_success=ok, sps_median=round(st.median(meds), 2),
                sps_min=round(min(meds), 2), sps_max=round(max(meds), 2), sps_kind=kind,
                ttt_min_median=round(st.median(ttt), 3) if ttt else "", repo=s["repo"], commit=commit,
                results_path=s["results"] + "/result_*.txt", config_path=s["config"], example=example)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mirrors", default=MIRRORS, type=Path,
                    help="folder holding the mlcommons result repositories as git mirrors (<owner>+<name>/repo)")
    ap.add_argument("--out", type=Path, default=OUT, help=f"CSV to write (default {OUT.relative_to(ROOT)})")
    args = ap.parse_args(argv)
    if (args.mirrors / "mlcommons+training_results_v1.1").exists():
        blank = {k: "" for k in ("system", "accelerators", "framework", "gpu", "packing", "precision",
                                 "precision_text", "optimizer", "config")}
        for s in V11:
            r = derive({**s, **blank}, args.mirrors)
            print(f"method check, {r['id']}: {r['sps_median']:,} ({r['sps_min']:,}..{r['sps_max']:,})")
    rows = [derive(s, args.mirrors) for s in SETS]
    fd, tmp = tempfile.mkstemp(dir=args.out.parent, prefix=".mlperf_gpu.", suffix=".tmp")
    with os.fdopen(fd, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=COLUMNS)
        w.writeheader()
        w.writerows(rows)
    os.replace(tmp, args.out)
    for r in rows:
        print(f"{r['id']}: {r['sps_median']:,} ({r['sps_min']:,}..{r['sps_max']:,}) {r['sps_kind']}, "
              f"{r['n_runs']} runs, {r['n_success']} successful; TP {r['tensor_parallel']} x PP "
              f"{r['pipeline_parallel']} x DP {r['data_parallel']}, mb {r['micro_batch']}, GA {r['grad_accum']}; "
              f"{r['example']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
