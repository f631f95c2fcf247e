"""Bench: GPT-3-class runs on IPU-PODs, timing-only - CPU seconds, peak RSS against the host-memory pre-check's
estimate, and what the emulator says of each run (fits, the fullest tile and what fills it, tokens/s).

    python -m bench.gpt_scale                 # every row
    python -m bench.gpt_scale --rows gpt3_175b_pod64

Each row is one ``popvision-lite emulate`` process measured like ``bench.speed`` (CPU user + sys and peak RSS
of that process alone); the profile it writes is read back for the verdict.  The placements follow
Graphcore's GPT-3 on IPU-PODs (graphcore/examples nlp/gpt3_175B/popxl: phased execution, tensor parallelism,
data parallelism, replicated tensor sharding; micro-batch 1, global batch 128) with 1-D (Megatron) tensor
parallelism in place of Graphcore's 2-D 8 x 8 (96 heads do not split 64 ways).  Targets (issue 24): each
GPT-3 row < 60 s CPU and < 4 GB; the pre-check's estimate (emulator/models/host_memory.py) beside the measured
peak RSS (its 0.8 .. 1.5 band is bench/host_memory.py's goal).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

import numpy as np

from bench.speed import CLI, OOM_RC, chosen_rows, measure
from popvision_lite.emulator.models.host_memory import estimate

PHASED = ["--streaming-weights", "--recompute", "--optimizer", "adam", "--rts"]
ROWS = {
    # name: (model, arguments, what)
    "gpt3_175b_pod64": ("gpt3-175b", ["--ipus", "64", "--tensor-parallel", "32", "--replicas", "2", "--grad-accum", "64",
                                      *PHASED], "GPT-3 175B, POD64: TP 32 x DP 2, phased, GA 64"),
    "gpt3_175b_pod256": ("gpt3-175b", ["--ipus", "256", "--tensor-parallel", "32", "--replicas", "8", "--grad-accum",
                                       "16", *PHASED], "GPT-3 175B, POD256: TP 32 x DP 8, phased, GA 16"),
    "gpt3_13b_pod64": ("gpt3-13b", ["--ipus", "64", "--tensor-parallel", "8", "--replicas", "8", "--grad-accum", "16",
                                    *PHASED], "GPT-3 13B, POD64: TP 8 x DP 8, phased, GA 16"),
    "gpt3_13b_pod64_tp4": ("gpt3-13b", ["--ipus", "64", "--tensor-parallel", "4", "--replicas", "16", "--grad-accum",
                                        "8", *PHASED], "GPT-3 13B, POD64: TP 4 x DP 16, phased, GA 8"),
    "gpt3_175b_pod64_tp16": ("gpt3-175b", ["--ipus", "64", "--tensor-parallel", "16", "--replicas", "4", "--grad-accum",
                                           "32", *PHASED], "GPT-3 175B, POD64: TP 16 x DP 4, phased, GA 32"),
    "gpt3_13b_pod64_pipe": ("gpt3-13b", ["--ipus", "64", "--tensor-parallel", "8", "--pipeline-stages", "2",
                                         "--replicas", "4", "--grad-accum", "16", "--recompute", "--optimizer",
                                         "adam", "--optimizer-state", "offchip", "--rts"],
                            "GPT-3 13B, POD64: TP 8 x 2 pipeline stages x DP 4, weights on chip, GA 16"),
    # Graphcore's own placements (graphcore/examples nlp/gpt3_175B/popxl and nlp/gpt3_2.7B/popxl
    # config/pretraining.yml; sample_configs/gpt3_*.toml): 2-D tensor parallelism, attention serialisation, IO tiles
    "gpt3_175b_pod256_popxl": ("gpt3-175b", ["--config", "sample_configs/gpt3_175b_pod256.toml"],
                               "GPT-3 175B, POD256 as Graphcore ran it: 2-D TP 8 x 8 x DP 4, GA 32, attention "
                               "serialisation 8, 128 IO tiles, AMP 0.1"),
    "gpt3_175b_pod64_popxl": ("gpt3-175b", ["--config", "sample_configs/gpt3_175b_pod64.toml"],
                              "GPT-3 175B, POD64: one replica of Graphcore's placement, GA 128"),
    "gpt3_2.7b_pod64_popxl": ("gpt3-2.7b", ["--config", "sample_configs/gpt3_2.7b_pod64.toml"],
                              "GPT-3 2.7B, POD64 as Graphcore ran it: TP 8 x DP 8, GA 64, 128 IO tiles, AMP 0.2"),
    "gpt3_13b_pod64_popxl": ("gpt3-13b", ["--config", "sample_configs/gpt3_13b_pod64.toml"],
                             "GPT-3 13B, POD64: Graphcore's 175B placement at 13B's shapes, 2-D TP 8 x 4 x DP 2, GA 64"),
    "gpt2_xl_64": ("gpt2-xl", ["--replicas", "16", "--pipeline-stages", "4"],
                   "GPT-2-XL, 64 IPUs: 16 replicas x 4 pipeline stages (issue 26 row)"),
    "gpt2_xl_64_phased": ("gpt2-xl", ["--replicas", "64", "--grad-accum", "2", *PHASED],
                          "GPT-2-XL, 64 IPUs: 64 replicas, phased (one stage graph)"),
}


def _cfg(model: str, args: list[str], out: str):
    """The ModelConfig the command line builds from these arguments."""
    from popvision_lite.cli import emulate as E

    p = argparse.ArgumentParser()
    E.add_arguments(p)
    return E.resolve(p.parse_args([model, *args, "--timing-only", "-o", out]))[0]


def verdict(path: str) -> dict:
    """Fits, the fullest tile with its largest categories, tokens/s and step time from the written profile."""
    import popvision_lite as pvl
    from popvision_lite.profile import schema

    with pvl.open(path) as p:
        rec = p.record  # the typed run record (profile/run_record.py)
        mem = p.memory.array().sum(axis=2)
        per_tile = mem.sum(axis=1)
        t = int(per_tile.argmax())
        cats = sorted(((schema.MEMORY_CATEGORIES[i], int(b)) for i, b in enumerate(mem[t]) if b), key=lambda x: -x[1])
        sch = rec.schedule
        seq = rec.config.seq or 0
        return dict(fits=rec.fits, peak_tile=t, peak_ipu=t // p.target.tiles_per_ipu,
                    peak_bytes=int(per_tile[t]), capacity=int(p.target.sram_bytes_per_tile), peak_categories=cats[:3],
                    samples_per_second=rec.samples_per_second, seq=seq, step_seconds=sch.step_seconds,
                    stream_share=sch.stream_cycles / max(1, sch.step_cycles))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", nargs="*", help=f"only these rows ({', '.join(ROWS)})")
    ap.add_argument("--timeout", type=float, default=900.0)
    args = ap.parse_args()
    names = chosen_rows(args.rows, ROWS)
    if names is None:
        return 2
    print(f"{'row':20} {'CPU s':>7} {'RSS GB':>7} {'est GB':>7} {'est/RSS':>7} {'fits':>5} {'tokens/s':>9} "
          f"{'step s':>8}  fullest tile")
    failed = 0
    with tempfile.TemporaryDirectory(prefix="pvl_gpt_") as tmp:
        for name in names:
            model, a, what = ROWS[name]
            out = os.path.join(tmp, name + ".pvl")
            m = measure(CLI + ["emulate", model, *a, "--timing-only", "-q", "-o", out], args.timeout)
            cfg = _cfg(model, a, os.path.join(tmp, name + "_cfg.pvl"))
            e = estimate(cfg, timing_only=True)
            est = e.gib
            res = dict(bench="gpt_scale", row=name, what=what, rc=m["rc"], cpu_s=m["cpu_s"], wall_s=m["wall_s"],
                       peak_rss_gb=m["peak_rss_gb"], estimate_gb=round(est, 2),
                       estimate_terms={k: v for k, (v, _) in e.terms.items()})
            if m["rc"] not in (0, OOM_RC) or not os.path.exists(out):
                failed += 1
                print(f"{name:20} FAILED rc {m['rc']}: {' | '.join(m['tail'])}")
                print("BENCH-RESULT " + json.dumps(res), flush=True)
                continue
            v = verdict(out)
            res.update(v, tokens_per_second=v["samples_per_second"] * v["seq"])
            cats = ", ".join(f"{c} {b / 1024:.0f} KiB" for c, b in v["peak_categories"])
            print(f"{name:20} {m['cpu_s']:7.1f} {m['peak_rss_gb']:7.2f} {est:7.2f} {est / max(m['peak_rss_gb'], 1e-9):7.2f} "
                  f"{'yes' if v['fits'] else 'NO':>5} {res['tokens_per_second']:9.0f} {v['step_seconds']:8.2f}  "
                  f"tile {v['peak_tile']} (IPU {v['peak_ipu']}) {v['peak_bytes'] / 1024:.0f} KiB of "
                  f"{v['capacity'] / 1024:.0f}: {cats}; DDR stream {100 * v['stream_share']:.0f}% of the step",
                  flush=True)
            print("BENCH-RESULT " + json.dumps(res), flush=True)
    print(f"estimate: emulator/models/host_memory.py (calibrated and judged in bench/host_memory.py); "
          f"load {os.getloadavg()[0]:.1f}; numpy {np.__version__}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
