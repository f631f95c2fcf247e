"""Bench: `emulate` wall time of big models vs the time of planning alone, measured side by side.

    python bench/emulate_models.py            # BERT-base training step on Mk2 + BERT-large on 16 IPUs
    python bench/emulate_models.py --quick    # 2-layer versions (for a smoke run)

For each workload, in one process and one run:
  * plan   = walking the model with shapes only and running every tile planner
             (PlanOnlyBackend; no graph, no vertices); "planners" = the time inside plan_* alone;
  * emulate = what `popvision-lite emulate --timing-only` does: build the graph (planning included),
             compile (placement, memory, liveness, step costs), build the profile, write it.
Prints wall seconds of each stage, vertices, steps, and the ratio emulate / plan.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

from popvision_lite.emulator.backends.planning import PlanOnlyBackend
from popvision_lite.emulator.models.catalog import build
from popvision_lite.emulator.models.config import make_config
from popvision_lite.emulator.models.emulated import run_model
from popvision_lite.emulator.ops import planners
from popvision_lite.emulator.ops.context import plan_target_of
from popvision_lite.emulator.target import Target


def _timed_planners():
    """Wrap the planner functions to accumulate the time spent inside them."""
    acc = {"t": 0.0}
    originals = {}
    for name in ("plan_matmul", "plan_elementwise", "plan_reduction"):
        fn = getattr(planners, name)
        originals[name] = fn

        def wrapper(*a, _fn=fn, **k):
            t0 = time.perf_counter()
            try:
                return _fn(*a, **k)
            finally:
                acc["t"] += time.perf_counter() - t0

        wrapper.cache_clear = getattr(fn, "cache_clear", lambda: None)
        setattr(planners, name, wrapper)
    return acc, originals


def plan_only(cfg, device):
    import popvision_lite.emulator.backends.planning as planning_mod

    planners.plan_matmul.cache_clear()
    acc, originals = _timed_planners()
    for name in originals:
        setattr(planning_mod, name, getattr(planners, name))
    try:
        t0 = time.perf_counter()
        be = PlanOnlyBackend(plan_target_of(Target.from_device(device, cfg.ipus)), cfg.precision, cfg.ipus)
        build(be, cfg)
        wall = time.perf_counter() - t0
    finally:
        for name, fn in originals.items():
            setattr(planners, name, fn)
            setattr(planning_mod, name, fn)
    return wall, acc["t"], len(be.plans)


def bench(label, cfg, device="ipu-mk2"):
    plan_wall, planner_wall, n_ops = plan_only(cfg, device)
    planners.plan_matmul.cache_clear()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "run.pvl")
        t0 = time.perf_counter()
        r = run_model(cfg, device=device, timing_only=True, profile_path=path)
        wall = time.perf_counter() - t0
        size = os.path.getsize(path)
    steps = len(r.profile_data.steps)
    stages = ", ".join(f"{k} {v:.1f} s" for k, v in r.wall.items())
    print(f"{label}: {n_ops} ops, {r.num_vertices:,} vertices, {steps:,} steps, fits={r.fits}, "
          f"{r.total_cycles:,} cycles ({r.seconds * 1e3:.2f} ms at clock)")
    print(f"  plan alone {plan_wall:.2f} s (inside planners {planner_wall:.2f} s); emulate {wall:.1f} s "
          f"({stages}); profile {size / 1e6:.1f} MB")
    print(f"  ratio emulate / plan = {wall / plan_wall:.1f}x; emulate / planners = {wall / max(planner_wall, 1e-9):.0f}x; "
          f"{r.num_vertices / max(r.wall.get('compile', wall), 1e-9) / 1e6:.2f} M vertices/s compiled")
    return wall, plan_wall


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="2-layer versions")
    ap.add_argument("--only", choices=("base", "large"))
    a = ap.parse_args()
    layers = {"layers": 2} if a.quick else {}
    if a.only in (None, "base"):
        bench("BERT-base training step, Mk2, 1 IPU, timing-only",
              make_config("bert-base", batch=8, seq=128, **layers))
    if a.only in (None, "large"):
        bench("BERT-large training step, Mk2, 16 IPUs pipelined, timing-only",
              make_config("bert-large", batch=8, seq=128, ipus=16, **layers))


if __name__ == "__main__":
    main()
