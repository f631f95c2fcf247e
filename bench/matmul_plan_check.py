"""Bench: our matmul plan and its charged cycles beside poplin's planner estimate of the same plan.

    PYTHONPATH=. python bench/matmul_plan_check.py [--device ipu-mk2]

For a BERT-Large layer matmul (FFN in: [mb x seq, 1024] x [1024, 4096]) and two ResNet-50 convolutions
at micro-batch 20 (stage 1 3x3: im2col [20*56*56, 576] x [576, 64]; stage 4 1x1: [20*7*7, 2048] x
[2048, 512]), each emulated alone (timing only) with A an activation spread linearly over the tiles (as
an elementwise op leaves it) and B a weight nothing has used yet, prints

* our plan (M, N, K splits, serial passes, blocks),
* what the engine charged the op: compute / exchange / sync cycles, exchange bytes, per program,
* poplin's planner estimate for the SAME partition (graphcore/poplibs lib/poplin/ConvModel.cpp
  addExchangeCycleEstimates with ExchangeEstimator.hpp; addEstimates: every term once per serial
  pass): per tile and pass, input elements exchanged = n - floor(n / outChanSplit) (the share
  already on the tile is not moved), at twice the bandwidth when outChanSplit is even (shared
  exchange bus); weights exchanged = n - floor(n / (fieldSplit x batchSplit)); partials of the
  first reduction stage = the tile's outputs (float); no sync term (the planner has none).
  Compute: the same ConvPartial1x1Out estimate the engine charges (estimators.poplin), plus the
  reduction of K partials (estimateConvReduceCycles: one ReduceAdd per tile) or, with serial passes
  and no K split, the cast of the float accumulator (estimateCastCycles).

Numbers go to docs/emulator-fidelity.md by hand.
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from popvision_lite.emulator import Engine, Graph, Target
from popvision_lite.emulator.estimators import poplin
from popvision_lite.emulator.ops import matmul as mm
from popvision_lite.emulator.ops.context import OpContext
from popvision_lite.profile.schema import STEP_KINDS

CASES = (
    # (label, M, K, N, availableMemoryProportion: BERT's encoder stages 0.25 (resources/validation/
    # configs.toml), ResNet-50 0.15 (the MLPerf rows' available_memory_proportion))
    ("BERT-Large FFN in, mb 3 packs (Bow)", 3 * 512, 1024, 4096, 0.25),
    ("BERT-Large FFN in, mb 2 packs (Mk2)", 2 * 512, 1024, 4096, 0.25),
    ("ResNet-50 stage 1 3x3 conv (im2col), mb 20", 20 * 56 * 56, 9 * 64, 64, 0.15),
    ("ResNet-50 stage 3 3x3 conv (im2col), mb 20", 20 * 14 * 14, 9 * 256, 256, 0.15),
    ("ResNet-50 stage 4 1x1 conv 2048->512, mb 20", 20 * 7 * 7, 2048, 512, 0.15),
)


def emulate(M: int, K: int, N: int, device: str, amp: float = 0.6) -> dict:
    """One matmul alone on one IPU, timing only: its plan and the engine's cycles per program kind."""
    t = Target.from_device(device, 1)
    g = Graph(t)
    ctx = OpContext(g, "fp16")
    ctx.available_memory_proportion = amp
    a = ctx.variable("a", (M, K), mapping=ctx.linear_mapping(M * K))
    b = ctx.variable("b", (K, N), mapping=ctx.linear_mapping(K * N))
    mm.matmul(ctx, a, b, "mm")
    res = Engine(g, ctx.sequence(), mode="timing").run(allow_out_of_memory=True)
    pd_ = res.profile_data
    steps, progs = pd_.steps, pd_.programs
    names = dict(zip(progs["prog_id"].tolist(), progs["name"].tolist(), strict=True))
    kinds = np.array(STEP_KINDS)[steps["kind"].to_numpy()]
    dur = (steps["end_cycle"] - steps["start_cycle"]).to_numpy()
    per_prog: dict[str, list] = {}
    for pid, k, d, bi in zip(steps["prog_id"].tolist(), kinds, dur, steps["bytes_in"].tolist(), strict=True):
        key = names.get(pid, "?").split("/")[-1].split(" pass")[0].split("#")[0]
        row = per_prog.setdefault(key, [0, 0, 0, 0])
        row[{"compute": 0, "exchange_internal": 1, "sync": 2}.get(k, 0)] += int(d)
        row[3] += int(bi) if k == "exchange_internal" else 0
    plan = ctx.records[-1]["plan"]
    tot = {k: int(dur[kinds == k].sum()) for k in ("compute", "exchange_internal", "sync")}
    return dict(plan=plan, total=int(res.total_cycles), per_prog=per_prog, **tot, target=t)


def poplin_estimate(M, K, N, pm, pn, pk, ps, target) -> dict:
    """poplin's planner estimate (ConvModel.cpp) for the partition (pm, pn, pk, ps): matmul rows are
    the conv's field (fieldSplit = pm), N its output channels (outChanSplit = pn), K its input
    channels (inChanSplit.parallel = pk, inChanSplit.serial = ps)."""
    xb = float(target.em["exchange_bytes_per_cycle"])
    bus = int(target.em.get("tiles_per_shared_exchange_bus", 1))
    bm, bn = math.ceil(M / pm), math.ceil(N / pn)
    bks = math.ceil(math.ceil(K / pk) / ps)
    n_in, n_w, n_out = bm * bks, bks * bn, bm * bn
    in_x = n_in - n_in // pn
    w_x = n_w - n_w // pm
    in_rate = xb * (2 if (bus == 2 and pn % 2 == 0) else 1)
    in_c = math.ceil(in_x * 2 / in_rate)
    w_c = math.ceil(w_x * 2 / xb)
    part_c = math.ceil(n_out * 4 / xb) if pk > 1 else 0
    comp = ps * poplin.amp_matmul_tile_cycles(bm, bks, bn, True, target)
    threads = int(target.threads_per_tile)
    if pk > 1:  # estimateConvReduceCycles: one ReduceAdd over the tile's share of the outputs
        comp += poplin.reduce_add_cycles(math.ceil(n_out / pk), pk, 2, 4, threads)
    elif ps > 1:  # addOutputCastEstimate -> estimateCastCycles (float partials 2 / half output 4 per vector)
        per_worker = math.ceil(n_out / threads)
        comp += (max(math.ceil(per_worker / 2), math.ceil(per_worker / 4)) + 26) * threads
    return dict(in_elems=in_x, w_elems=w_x, in_cycles=in_c, w_cycles=w_c, partial_cycles=part_c,
                exchange=ps * (in_c + w_c) + part_c, compute=comp)


def _splits(plan: str) -> tuple[int, int, int, int]:
    import re

    m = re.match(r"M=(\d+) N=(\d+) K=(\d+) split(?: x (\d+) serial passes)?", plan)
    return int(m[1]), int(m[2]), int(m[3]), int(m[4] or 1)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="ipu-mk2")
    args = ap.parse_args(argv)
    for label, M, K, N, amp in CASES:
        r = emulate(M, K, N, args.device, amp)
        pm, pn, pk, ps = _splits(r["plan"])
        est = poplin_estimate(M, K, N, pm, pn, pk, ps, r["target"])
        print(f"== {label}: [{M}, {K}] x [{K}, {N}]")
        print(f"   plan: {r['plan']}")
        print(f"   ours (engine): total {r['total']:,}  compute {r['compute']:,}  exchange {r['exchange_internal']:,}"
              f"  sync {r['sync']:,}")
        for k, (c, x, s, b) in r["per_prog"].items():
            print(f"     {k:28s} compute {c:>8,}  exchange {x:>8,}  sync {s:>6,}  bytes in {b:>12,}")
        print(f"   poplin estimate, same plan: compute {est['compute']:,}  exchange {est['exchange']:,}"
              f" (per pass: inputs {est['in_elems']:,} el -> {est['in_cycles']:,} cyc, weights {est['w_elems']:,} el"
              f" -> {est['w_cycles']:,} cyc; partials {est['partial_cycles']:,} cyc once)")
        ratio = r["exchange_internal"] / max(est["exchange"], 1)
        print(f"   exchange ours / poplin: {ratio:.2f}   compute ours / poplin: "
              f"{r['compute'] / max(est['compute'], 1):.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
