"""Bench: the MLPerf v1.1 IPU-POD16 BERT-Large configuration (sample_configs/mlperf_v1.1_pod16_bert_large.toml)
predicted by the emulator next to Graphcore's measured ~1,524 sequences/s, and what the submission's memory
choices buy (each variant turns one of them off).

    python -m bench.mlperf_bert_pod16            # the submission + 4 variants, each in its own process
    python -m bench.mlperf_bert_pod16 --only     # the submission only

Per run: predicted sequences/s, ratio to the measurement, fits (worst tile per IPU), step time split,
wall seconds and peak RSS of the emulation (timing-only, no profile written; own process).
No constant is fitted to the measurement: the ratio is reported as it comes out.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "sample_configs" / "mlperf_v1.1_pod16_bert_large.toml"
VALIDATION = ROOT / "resources" / "validation" / "mlperf_training.csv"  # measured runs (PROVENANCE.md there)

VARIANTS = {
    "submission": {},
    "state on-chip (RTS on)": {"optimizer_state": "onchip"},
    "state on-chip, no RTS": {"optimizer_state": "onchip", "rts": False},
    "state off-chip, no RTS": {"rts": False},
    "AMP 0.6 (Poplar default)": {"available_memory_proportion": 0.6},
    "whole layers in order, heads on IPU 3": {"layer_split": [4, 7, 7, 6], "pipeline_placement": "sequential"},
}


def measured() -> float:
    import csv

    with open(VALIDATION, newline="") as f:
        return next(float(row["train_only_sps_median"]) for row in csv.DictReader(f)
                    if row["id"] == "gc-v1.1-pod16-bert-closed")


def one(overrides: dict) -> dict:
    from popvision_lite.emulator.models.config import make_config
    from popvision_lite.emulator.models.emulated import run_model
    from popvision_lite.emulator.run_config import load_run_config

    rc = load_run_config(CONFIG)
    t0 = time.perf_counter()
    cfg = make_config(rc.model, **(rc.model_args | overrides))
    r = run_model(cfg, device=rc.device, timing_only=True)
    wall = time.perf_counter() - t0
    from popvision_lite.profile.run_record import RunRecord

    s = r.schedule  # typed (profile/run_record.Schedule)
    ts = RunRecord.build({"training_state": r.profile_data.run["training_state"]}).training_state
    cap = r.profile_data.target.sram_bytes_per_tile
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return dict(sps=r.samples_per_second, fits=r.fits, wall_s=wall, cpu_s=ru.ru_utime + ru.ru_stime,
                rss_mib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                step_ms=s.step_seconds * 1e3, steady_cycles=s.steady_cycles_per_microbatch,
                stage_cycles=list(s.stage_cycles), fill_drain=s.fill_drain_cycles, allreduce=s.allreduce_cycles,
                optimizer=s.optimizer_cycles, stream=s.stream_cycles, clock=r.profile_data.target.clock_hz,
                worst_tile=[t.max_tile_bytes.need for t in ts], capacity=cap,
                state_onchip_kib_per_tile=[t.max_tile_bytes.optimizer_state_onchip / 1024 for t in ts],
                code_kib_per_tile=[t.max_tile_bytes.code / 1024 for t in ts])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", action="store_true", help="the submission only")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--quick", action="store_true", help="same as --only")
    a = ap.parse_args()
    if a.child is not None:
        print("RESULT " + json.dumps(one(json.loads(a.child))))
        return 0
    meas = measured()
    print(f"MLPerf v1.1 IPU-POD16 BERT-Large ({CONFIG.name}); measured {meas:,.1f} sequences/s train-only")
    names = ["submission"] if (a.only or a.quick) else list(VARIANTS)
    rows = {}
    for name in names:
        out = subprocess.run([sys.executable, "-m", "bench.mlperf_bert_pod16", "--child", json.dumps(VARIANTS[name])],
                             cwd=ROOT, capture_output=True, text=True)
        line = [x for x in out.stdout.splitlines() if x.startswith("RESULT ")]
        if out.returncode or not line:
            print(f"{name}: FAILED\n{out.stderr[-2000:]}")
            return 1
        r = json.loads(line[0][7:])
        rows[name] = r
        clock = r["clock"]

        def ms(c, clock=clock):
            return c / clock * 1e3

        print(f"\n[{name}] predicted {r['sps']:,.1f} seq/s, ratio predicted/measured {r['sps'] / meas:.3f}; "
              f"fits: {'yes' if r['fits'] else 'NO'}; emulation {r['wall_s']:.1f} s wall ({r['cpu_s']:.1f} s CPU "
              f"incl. imports), peak RSS {r['rss_mib']:,.0f} MiB")
        print(f"  step {r['step_ms']:.1f} ms: steady {ms(r['steady_cycles']):.2f} ms/micro-batch x 192, fill+drain "
              f"{ms(r['fill_drain']):.1f} ms, all-reduce {ms(r['allreduce']):.2f} ms, optimizer {ms(r['optimizer']):.2f} ms, "
              f"DDR stream {ms(r['stream']):.2f} ms")
        print("  stage cycles/micro-batch: " + ", ".join(f"{c:,}" for c in r["stage_cycles"]))
        print(f"  fullest tile per IPU (B, capacity {r['capacity']}): "
              + ", ".join(f"{b:,} ({100 * b / r['capacity']:.0f}%)" for b in r["worst_tile"]))
        print("  code per tile (KiB): " + ", ".join(f"{c:.0f}" for c in r["code_kib_per_tile"])
              + "; optimizer state on chip per tile (KiB): " + ", ".join(f"{c:.0f}" for c in r["state_onchip_kib_per_tile"]))
        print("BENCH-RESULT " + json.dumps({"name": f"mlperf_pod16_bert_large[{name}]", "predicted_sps": round(r["sps"], 1),
                                            "measured_sps": meas, "ratio": round(r["sps"] / meas, 4), "fits": r["fits"],
                                            "wall_s": round(r["wall_s"], 2), "cpu_s": round(r["cpu_s"], 2), "peak_rss_mib": round(r["rss_mib"], 1),
                                            "targets": {"wall_s": 30, "peak_rss_mib": 2048}}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
