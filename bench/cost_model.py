"""Bench: cost-model figures of a BERT-Large encoder layer and of single GEMMs on one Mk2 IPU.

    PYTHONPATH=. python bench/cost_model.py             # BERT-Large layer (seq 512, micro-batch 2) + GEMMs
    PYTHONPATH=. python bench/cost_model.py --layers 2 --batch 4

Timing-only emulation (cycles never depend on data).  Reports, for a training step of ``layers``
BERT-Large encoder layers (hidden 1024, 16 heads, FFN 4096) on ONE IPU:
  * cycles per layer (the whole step's cycles minus the embedding / head ops, divided by layers),
  * share of compute / exchange / sync cycles (all steps of the layer ops),
  * matmul FLOPs / matmul cycles as a fraction of the spec's AMP peak,
  * per-op-type cycles (top entries),
and the % of FP16 peak of a 1024^3 and a 4096^3 GEMM planned by the op library (``ops.matmul``).
Numbers are written to docs/emulator-fidelity.md by hand (method and date there).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from popvision_lite.emulator.models.emulated import run_model
from popvision_lite.emulator.models.workloads import make_config
from popvision_lite.profile.schema import STEP_KINDS


def layer_figures(layers: int, batch: int, seq: int, device: str = "ipu-mk2") -> dict:
    cfg = make_config("bert-large", layers=layers, batch=batch, seq=seq, ipus=1, vocab=1024)
    t0 = time.perf_counter()
    r = run_model(cfg, device=device, timing_only=True)
    wall = time.perf_counter() - t0
    pd_ = r.profile_data
    ops, steps = pd_.ops, pd_.steps
    in_layer = ops["name"].str.contains(r"layer\d+", regex=True)
    lops = ops[in_layer]
    dur = (steps["end_cycle"] - steps["start_cycle"]).to_numpy()
    kinds = np.array(STEP_KINDS)[steps["kind"].to_numpy()]
    lids = set(lops["op_id"].tolist())
    mask = steps["op_id"].isin(lids).to_numpy()
    share = {k: float(dur[mask & (kinds == k)].sum()) for k in ("compute", "sync", "exchange_internal")}
    tot = sum(share.values()) or 1.0
    mm = lops[lops["type"] == "matmul"]
    clock = pd_.target.clock_hz if hasattr(pd_.target, "clock_hz") else 1.325e9
    tiles = 1472
    peak_per_cycle = 128.0 * tiles
    mm_pct = float(mm["flops"].sum()) / max(float(mm["cycles"].sum()), 1.0) / peak_per_cycle * 100
    by_type = lops.groupby("type")["cycles"].sum().sort_values(ascending=False)
    return dict(cycles_total=int(r.total_cycles), layer_cycles=float(lops["cycles"].sum()) / layers,
                share={k: v / tot for k, v in share.items()}, matmul_pct_peak=mm_pct, fits=r.fits,
                by_type={k: int(v) / layers for k, v in by_type.items()}, wall_s=wall, clock=clock)


def gemm_pct(n: int, device: str = "ipu-mk2") -> tuple[float, int]:
    from popvision_lite.emulator import Engine, Graph, Target
    from popvision_lite.emulator.ops import basic as ops
    from popvision_lite.emulator.ops.context import OpContext

    t = Target.from_device(device, 1)
    g = Graph(t)
    ctx = OpContext(g, "fp16")
    a = ctx.variable("a", (n, n), mapping=ctx.linear_mapping(n * n))
    b = ctx.variable("b", (n, n), mapping=ctx.linear_mapping(n * n))
    ops.matmul(ctx, a, b, "gemm")
    res = Engine(g, ctx.sequence(), mode="timing").run()
    fpc = float(t.em["fp16_flops_per_cycle_per_tile"]) * t.tiles_per_ipu
    return 2.0 * n ** 3 / res.total_cycles / fpc * 100, res.total_cycles


def main(argv=None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--no-gemm", action="store_true")
    a = ap.parse_args(argv)
    if not a.no_gemm:
        for n in (1024, 4096):
            pct, cyc = gemm_pct(n)
            print(f"GEMM {n}^3 fp16, 1 Mk2: {cyc:,} cycles = {pct:.1f} % of AMP peak")
    f = layer_figures(a.layers, a.batch, a.seq)
    print(f"BERT-Large layer fwd+bwd (seq {a.seq}, micro-batch {a.batch}, {a.layers} layers, 1 Mk2, "
          f"timing-only, fits={f['fits']}): {f['layer_cycles']:,.0f} cycles/layer "
          f"({f['layer_cycles'] / 1.325e9 * 1e3:.3f} ms); step {f['cycles_total']:,} cycles; wall {f['wall_s']:.0f} s")
    print("  share: " + ", ".join(f"{k} {v * 100:.1f} %" for k, v in f["share"].items()))
    print(f"  matmul: {f['matmul_pct_peak']:.1f} % of AMP peak (matmul FLOPs / matmul op cycles)")
    for k, v in list(f["by_type"].items())[:10]:
        print(f"  {k:16s} {v:12,.0f} cycles/layer")


if __name__ == "__main__":
    main()
