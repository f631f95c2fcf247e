"""Bench: import + timing-only emulation of a 12-layer BERT-base-sized ONNX graph, next to the
bundled ``bert-base`` preset (issue 16).

    python -m bench.onnx_import            # BERT-base: 12 layers, hidden 768, 12 heads, batch 8, seq 128
    python -m bench.onnx_import --quick    # 2 layers (smoke run)

The ONNX graph is built here with onnx.helper the way PyTorch exports a BERT encoder (MatMul
weights, Shape/Gather/Concat feeding the head Reshape, Transpose, Div by sqrt(d), Softmax, the Erf
GELU, LayerNormalization), with the bundled workload's math: an embedding gather, no biases, fp16
weights; saved to a temp file, then ``emulate_onnx(..., timing_only=True)`` reads, checks,
shape-infers, folds, lowers, compiles and writes the profile - the wall time of all of it is the
number (target: under 20 s on one Mk2).  The bundled ``bert-base`` preset (inference) runs in the
same process for the side-by-side: total cycles, and cycles per op type, twice: as ``emulate bert-base
--inference --timing-only`` runs it (since the multi-IPU merge: the composed path of pipeline.py, one
outlined layer body emulated once) and on the whole-graph path an imported model takes (every layer in
one graph: the same graph as the ONNX one, op for op).  CPU seconds are printed next to wall seconds,
since the machine is shared.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

import numpy as np


def op_cycles(pd_) -> dict:
    """Cycles per op type (the profile's ops table)."""
    return {k: int(v) for k, v in pd_.ops.groupby("type")["cycles"].sum().items()}


def main():
    import onnx

    from popvision_lite.emulator.models.config import make_config
    from popvision_lite.emulator.models.emulated import run_model
    from popvision_lite.emulator.onnx_import import builders, emulate_onnx

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="2 layers")
    ap.add_argument("--hf-order", action="store_true",
                    help="residual adds as Hugging Face exports them (sublayer + residual) instead of the "
                         "bundled workload's order (residual + sublayer)")
    args = ap.parse_args()
    layers = 2 if args.quick else 12
    cfg = make_config("bert-base", training=False, layers=layers)
    tmp = tempfile.mkdtemp(prefix="pvl_onnx_bench_")
    path = os.path.join(tmp, "bert_base.onnx")
    t0 = time.perf_counter()
    m = builders.bert_encoder(layers=cfg.layers, hidden=cfg.hidden, heads=cfg.heads, ffn=cfg.ffn_size,
                              vocab=cfg.vocab, residual_first=not args.hf_order)
    onnx.save(m, path)
    del m
    t_make = time.perf_counter() - t0
    size_mb = os.path.getsize(path) / 2**20
    print(f"ONNX BERT: {cfg.layers} layers, hidden {cfg.hidden}, {cfg.heads} heads, ffn {cfg.ffn_size}, vocab "
          f"{cfg.vocab}; {size_mb:.0f} MiB file, built and saved in {t_make:.1f} s (not counted)")

    from popvision_lite.emulator.engine import Engine
    from popvision_lite.emulator.models.emulated import build_model

    load0 = os.getloadavg()[0]
    t1, c1 = time.perf_counter(), time.process_time()
    run = emulate_onnx(path, os.path.join(tmp, "onnx.pvl"), batch=cfg.batch, seq=cfg.seq, timing_only=True)
    wall_onnx, cpu_onnx = time.perf_counter() - t1, time.process_time() - c1
    t2 = time.perf_counter()
    ref = run_model(cfg, timing_only=True, profile_path=os.path.join(tmp, "bundled.pvl"))
    wall_ref = time.perf_counter() - t2
    t3 = time.perf_counter()
    be, _ = build_model(cfg, "ipu-mk2", needs_values=False)
    whole = Engine(be.graph, be.program(), mode="timing", model="bert", config={}).run(
        inputs=None, profile_path=None, allow_out_of_memory=True)
    wall_whole = time.perf_counter() - t3

    stages = ", ".join(f"{k} {v:.1f} s" for k, v in run.wall.items())
    print(f"import + emulate --onnx --timing-only: {wall_onnx:.1f} s wall, {cpu_onnx:.1f} s CPU, load {load0:.1f} "
          f"(target < 20 s: {'met' if wall_onnx < 20 else 'NOT met'}); stages: {stages}")
    print(f"bundled bert-base (inference) emulate --timing-only: {wall_ref:.1f} s; ONNX run / bundled run = "
          f"{wall_onnx / wall_ref:.2f}x (the extra is reading + checking + lowering the file)")
    ratio = run.total_cycles / ref.total_cycles
    print(f"cycles: ONNX {run.total_cycles:,}  bundled {ref.total_cycles:,}  ratio {ratio:.4f}; "
          f"ops {run.num_ops} vs {ref.num_ops}; fits {run.fits} / {ref.fits}")
    ratio_whole = run.total_cycles / whole.total_cycles
    print(f"bundled bert-base on the whole-graph path (the imported model's path): {wall_whole:.1f} s, cycles "
          f"{whole.total_cycles:,}, ONNX / whole-graph {ratio_whole:.5f}")
    a, b, w = op_cycles(run.profile_data), op_cycles(ref.profile_data), op_cycles(whole.profile_data)
    print(f"{'op type':<16}{'ONNX cycles':>14}{'preset':>14}{'diff':>12}{'whole-graph':>14}{'diff':>10}")
    for k in sorted(set(a) | set(b) | set(w), key=lambda k: -max(a.get(k, 0), b.get(k, 0))):
        print(f"{k:<16}{a.get(k, 0):>14,}{b.get(k, 0):>14,}{a.get(k, 0) - b.get(k, 0):>12,}{w.get(k, 0):>14,}"
              f"{a.get(k, 0) - w.get(k, 0):>10,}")
    cols = ["compute_cycles", "exchange_cycles", "sync_cycles"]
    diff = {c: int(run.profile_data.ops[c].sum() - whole.profile_data.ops[c].sum()) for c in cols}
    print("ONNX - whole-graph by kind: " + ", ".join(f"{k.split('_')[0]} {v:+,}" for k, v in diff.items()))
    print("BENCH-RESULT " + json.dumps({
        "bench": "onnx_import", "seconds": round(wall_onnx, 2), "target_seconds": 20,
        "met": wall_onnx < 20, "layers": cfg.layers, "onnx_cycles": int(run.total_cycles),
        "bundled_cycles": int(ref.total_cycles), "cycle_ratio": round(float(ratio), 5),
        "bundled_seconds": round(wall_ref, 2), "cpu_seconds": round(cpu_onnx, 2), "load": round(load0, 1),
        "whole_graph_cycles": int(whole.total_cycles), "whole_graph_ratio": round(float(ratio_whole), 6)}))
    for f in os.listdir(tmp):
        os.remove(os.path.join(tmp, f))
    os.rmdir(tmp)
    return 0 if np.isfinite(ratio) else 1


if __name__ == "__main__":
    raise SystemExit(main())
