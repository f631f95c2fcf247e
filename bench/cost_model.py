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

from popvision_lite.emulator.models.config import make_config
from popvision_lite.emulator.models.emulated import run_model
from popvision_lite.profile.schema import STEP_KINDS


def layer_figures(layers: int, batch: int, seq: int, device: str = "ipu-mk2") -> dict:
    cfg = make_config("bert-large", layers=layers, batch=batch, seq=seq, ipus=1, vocab=1024)
    t0 = time.perf_counter()
    r = run_model(cfg, device=device, timing_only=True)
    wall = time.perf_counter() - t0
    pd_ = r.profile_data
    ops, steps = pd_.ops, pd_.steps
    in_layer = ops["name"].str.contains(r"(?:^|/)layer\d*/", regex=True)  # layer3/ (whole graph) or layer/ (stage program)
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


def _tile_cycles(t, codelet, n, dtype="float16", src_dtype=None, params=None, inputs=("a", "b")) -> int:
    """Our tile cycles for ``codelet`` over n elements of one tile, split over 6 workers as the op
    library does."""
    from popvision_lite.emulator import Engine, Graph
    from popvision_lite.emulator import mapping as M
    from popvision_lite.emulator import programs as P

    g = Graph(t)
    out = g.add_variable("out", (n,), dtype, mapping=M.single_tile(n, 0))
    ins = {k: g.add_variable(k, (n,), src_dtype or dtype, mapping=M.single_tile(n, 0)) for k in inputs}
    cs = g.add_compute_set("cs")
    tiles, starts, sizes = M.worker_split(out)
    fields = {k: v.regions(starts, sizes) for k, v in ins.items()}
    fields["out"] = out.regions(starts, sizes)
    g.add_vertices(cs, codelet, tiles, fields=fields, params=params or {})
    return Engine(g, P.Execute(cs), mode="timing").run(allow_out_of_memory=True).total_cycles


def codelet_table(device: str = "ipu-mk2") -> list[tuple]:
    """(codelet, size, ours, poplibs, ratio) rows: our engine's tile cycles vs the poplibs estimator
    written out independently (estimators.popops.*_tile_cycles / poplin.amp_matmul_tile_cycles)."""
    import math

    from popvision_lite.emulator import Engine, Graph, Target
    from popvision_lite.emulator import mapping as M
    from popvision_lite.emulator import programs as P
    from popvision_lite.emulator.codelets import poplin as CL
    from popvision_lite.emulator.codelets import popnn as CN
    from popvision_lite.emulator.codelets import popops as CO
    from popvision_lite.emulator.codelets import popops_rows as CR
    from popvision_lite.emulator.estimators import poplin, popnn, popops

    t = Target.from_device(device)
    launch = int(t.em["vertex_launch_cycles"])
    rows = []
    sizes = (96, 1536, 24576)

    def add(name, n, ours, ref):
        rows.append((name, n, int(ours), int(ref), ours / ref))

    for n in sizes:
        add("Add half (BinaryOp1D ADD)", n, _tile_cycles(t, CO.ADD, n), popops.binary_op_1d_tile_cycles("add", 2, n))
        add("Max float (BinaryOp1D MAXIMUM)", n, _tile_cycles(t, CO.MAX, n, "float32"),
            popops.binary_op_1d_tile_cycles("max", 4, n))
        add("Relu half (UnaryOp1D RELU)", n, _tile_cycles(t, CO.RELU, n, inputs=("in",)),
            popops.unary_op_1d_tile_cycles("relu", 2, n))
        add("Exp half (UnaryOp1D EXPONENT)", n, _tile_cycles(t, CO.EXP, n, inputs=("in",)),
            popops.unary_op_1d_tile_cycles("exp", 2, n))
        add("Cast float->half (Cast1D)", n, _tile_cycles(t, CO.CAST, n, "float16", "float32", inputs=("in",)),
            popops.cast_1d_tile_cycles(n, 4, 2))
        add("ScaledSubtract half (SGD)", n, _tile_cycles(t, CO.SGD, n, inputs=("in",),
                                                         params={"lr": np.float32(0.1)}),
            popops.scaled_add_tile_cycles(n, 2))
        fw = math.ceil(n / 6)
        add("Gelu half (popnn NonLinearity1D)", n, _tile_cycles(t, CN.GELU, n, inputs=("in",)),
            9 + launch + 6 * (int(popnn.nonlinearity_worker_cycles("gelu", 2, fw)) - popops.UNARY_SUPERVISOR_EXTRA))
    for k, m in ((4, 64), (16, 256), (64, 1024)):
        g = Graph(t)
        src = g.add_variable("p", (k * m,), "float32", mapping=M.single_tile(k * m, 0))
        out = g.add_variable("o", (m,), "float16", mapping=M.single_tile(m, 0))
        cs = g.add_compute_set("r")
        per = max(2, (m + 11) // 12 * 2)  # ceil(m / 6) rounded up to an fp32 pair: <= 6 pieces
        starts = np.arange(0, m, per)
        lens = np.minimum(per, m - starts)
        ins = np.concatenate([[0], np.cumsum(k * lens)[:-1]])
        g.add_vertices(cs, CR.REDUCE_PARTIALS, np.zeros(len(starts), int), fields={
            "in": src.regions(ins, k * lens), "out": out.regions(starts, lens)}, params={"k": np.int64(k)})
        ours = Engine(g, P.Execute(cs), mode="timing").run(allow_out_of_memory=True).total_cycles
        worst = max(int(popops.strided_reduce_cycles(k, int(x), 4, 2)) for x in lens)
        add(f"Reduce {k} fp32 partials (strided reduce), 6 workers", m, ours, 6 * worst + launch)
    # row ops: one row alone on a tile (spread over the six workers) vs the sum of the poplibs
    # vertices Poplar runs for it, each as its own MultiVertex over the row (reductions: six
    # single-input reduces + one strided reduce of the six partials)
    for codelet, fields in ((CR.LAYER_NORM, ("in", "gamma", "beta", "out")), (CR.SOFTMAX, ("in", "out")),
                            (CR.LAYER_NORM_GRAD, ("x", "gamma", "dy", "dx", "dgamma", "dbeta"))):
        for L in (256, 1024, 4096):
            g = Graph(t)
            regs = {}
            for f in fields:
                dt = "float32" if f in ("dgamma", "dbeta") else "float16"
                v = g.add_variable(f, (L,), dt, mapping=M.single_tile(L, 0))
                regs[f] = v.regions([0], L)
            cs = g.add_compute_set("row")
            g.add_vertices(cs, codelet, [0], fields=regs, params={"row": np.int64(L)})
            ours = Engine(g, P.Execute(cs), mode="timing").run(allow_out_of_memory=True).total_cycles
            ref = 0
            for kind, op in codelet.parts:
                if kind == "b":
                    ref += popops.binary_op_1d_tile_cycles(op, 2, L)
                elif kind == "u":
                    ref += popops.unary_op_1d_tile_cycles(op, 2, L)
                else:
                    ref += (6 * int(popops.single_input_reduce_cycles(math.ceil(L / 6), 2, op)) + launch
                            + int(popops.strided_reduce_cycles(6, 1)) * 6 + launch)
            add(f"{codelet.name} row (sum of its poplibs vertices)", L, ours, ref)
    for m, kk, nn in ((48, 64, 64), (192, 256, 128), (1024, 256, 256)):
        g = Graph(t)
        a = g.add_variable("a", (m * kk,), "float16", mapping=M.single_tile(m * kk, 0))
        b = g.add_variable("b", (kk * nn,), "float16", mapping=M.single_tile(kk * nn, 0))
        c = g.add_variable("c", (m, nn), "float32", mapping=M.single_tile(m * nn, 0))
        cs = g.add_compute_set("amp")
        g.add_vertices(cs, CL.TILE_MATMUL[(False, False, False)], [0], fields={
            "a": a.regions([0], m * kk), "b": b.regions([0], kk * nn), "out": c.blocks((m, nn), np.array([[0, 0]]))},
            params={"k": np.int64(kk)})
        ours = Engine(g, P.Execute(cs), mode="timing").run(allow_out_of_memory=True).total_cycles
        add(f"AMP matmul {m}x{kk}x{nn} (ConvPartial1x1Out)", m * kk * nn, ours,
            poplin.amp_matmul_tile_cycles(m, kk, nn, True) + launch)
    return rows


def main(argv=None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--no-gemm", action="store_true")
    ap.add_argument("--quick", action="store_true", help="smoke run: table, 1024^3 GEMM, 1 layer at seq 128")
    a = ap.parse_args(argv)
    print("| codelet | size | ours (tile cycles) | poplibs estimator | ratio |")
    print("|---|---|---|---|---|")
    for name, n, ours, ref, ratio in codelet_table():
        print(f"| {name} | {n} | {ours} | {ref} | {ratio:.3f} |")
    if a.quick:
        a.layers, a.seq = 1, 128
    if not a.no_gemm:
        for n in ((1024,) if a.quick else (1024, 4096)):
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
