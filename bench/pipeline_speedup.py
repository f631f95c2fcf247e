"""Bench: per-sample time of `emulate bert-mini --batch 8 --seq 128` on 1 IPU vs pipelined over 2 and 4 IPUs
(timing-only; grad_accum = PopART's minimum 2S - 1 unless --grad-accum), side by side in one run.

    python -m bench.pipeline_speedup [--grad-accum 32] [--model bert-mini]
"""

from __future__ import annotations

import argparse
import json
import time


def main() -> int:
    from popvision_lite.emulator.models.config import make_config
    from popvision_lite.emulator.models.emulated import run_model

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="bert-mini")
    ap.add_argument("--grad-accum", type=int, default=None)
    ap.add_argument("--quick", action="store_true", help="1 and 2 IPUs only")
    a = ap.parse_args()
    base = None
    for ipus in ((1, 2) if a.quick else (1, 2, 4)):
        t0 = time.perf_counter()
        ga = a.grad_accum if (a.grad_accum and ipus > 1) else None
        cfg = make_config(a.model, batch=8, seq=128, ipus=ipus, grad_accum=ga)
        r = run_model(cfg, timing_only=True)
        wall = time.perf_counter() - t0
        per = 1e3 / r.samples_per_second
        base = base or per
        s = r.schedule
        print(f"{a.model} on {ipus} IPU(s), G={cfg.grad_accum}: {r.samples_per_second:,.0f} seq/s = {per:.3f} ms/sample "
              f"(x{base / per:.2f} vs 1 IPU); steady {s.steady_cycles_per_microbatch:,} cycles/micro-batch, "
              f"stage cycles {list(s.stage_cycles)}; fits {r.fits}; emulated in {wall:.1f} s")
        print("BENCH-RESULT " + json.dumps({"name": f"pipeline_speedup[{a.model},{ipus}ipu]",
                                            "ms_per_sample": round(per, 4), "speedup_vs_1ipu": round(base / per, 3),
                                            "grad_accum": cfg.grad_accum, "wall_s": round(wall, 2)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
