"""Emulator speed, measured side by side in one process.

1. Full numerics vs plain numpy doing the same math: an MLP block
   ``out = relu(x @ W1) @ W2 + x`` (fp16 operands, fp32 accumulation as AMP does), emulated with
   the tiled matmul of ``emulator.microbench.planned_matmul`` (broadcast copies + AMP block
   vertices) and elementwise vertices; numpy does ``(x.f32 @ W1.f32)`` etc. directly.
   Reported: emulator execute (numerics only) / numpy, and (compile + execute) / numpy.
2. Timing-only throughput on a 16-IPU target: vertices per second of compile + run
   (graph building reported separately), for a few compute sets with ~1M vertices in total.

Both numerics comparisons run with one BLAS thread (set before numpy loads) and are judged on CPU time
(``time.process_time``; wall time printed beside it): on the shared machine wall time follows the load,
and one thread makes CPU time the work done.  Every model printed is judged against its goal.

Run: ``python -m bench emulator_speed`` or ``python -m bench.emulator_speed [--quick]``.
"""

from __future__ import annotations

import os

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")  # before numpy is imported: the ratios are at one BLAS thread

import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from bench.targets import bench_result, print_rows, row  # noqa: E402
from popvision_lite.emulator import Engine, Graph, Target  # noqa: E402
from popvision_lite.emulator import mapping as M  # noqa: E402
from popvision_lite.emulator import programs as P  # noqa: E402
from popvision_lite.emulator.codelets import popops as CO  # noqa: E402
from popvision_lite.testing.microbench import matmul_output_mapping, planned_matmul  # noqa: E402

# goals (docs/performance.md, "Emulator"): full numerics / the same math in numpy, one BLAS thread
GOALS = {"mlp_block": 1.2, "bert": 1.5}


def build_mlp(target: Target, m: int, d: int, f: int, bm=128, bk=256, bn=128, rows=8):
    g = Graph(target)
    tiles = np.arange(target.num_tiles)
    x = g.add_variable("x", (m, d), "float16", mapping=M.by_blocks((m, d), (bm, bk), tiles))
    w1 = g.add_variable("W1", (d, f), "float16", mapping=M.by_blocks((d, f), (bk, bn), tiles[::-1]))
    w2 = g.add_variable("W2", (f, d), "float16", mapping=M.by_blocks((f, d), (bk, bn), tiles[::-1]))
    c1 = g.add_variable("c1", (m, f), "float32", mapping=matmul_output_mapping(m, f, bm, bn, tiles))
    h = g.add_variable("h", (m, f), "float16", mapping=c1.mapping)
    c2 = g.add_variable("c2", (m, d), "float32", mapping=matmul_output_mapping(m, d, bm, bn, tiles))
    xr = g.add_variable("x_resid", (m, d), "float16", mapping=c2.mapping)
    out = g.add_variable("out", (m, d), "float32", mapping=c2.mapping)
    mm1 = planned_matmul(g, x, w1, c1, tiles, bm, bn, bk, rows, op="ffn/mm1", name="mm1")
    relu = g.add_compute_set("relu", op="ffn/relu")
    vt, s, z = M.worker_split(c1)
    g.add_vertices(relu, CO.RELU, vt, fields={"in": c1.regions(s, z), "out": h.regions(s, z)})
    mm2 = planned_matmul(g, h, w2, c2, tiles, bm, bn, bk, rows, op="ffn/mm2", name="mm2")
    add = g.add_compute_set("residual", op="ffn/residual")
    vt, s, z = M.worker_split(c2)
    g.add_vertices(add, CO.ADD, vt, fields={"a": c2.regions(s, z), "b": xr.regions(s, z), "out": out.regions(s, z)})
    prog = P.Sequence([mm1, P.Execute(relu), mm2, P.Copy(x, xr, op="ffn/residual"), P.Execute(add)], name="ffn")
    return g, prog


def numpy_mlp(x, w1, w2):
    c1 = x.astype(np.float32) @ w1.astype(np.float32)
    h = np.maximum(c1, 0).astype(np.float16)
    c2 = h.astype(np.float32) @ w2.astype(np.float32)
    return c2 + x


def _best(fn, reps):
    """(best wall s, best CPU s, result) of ``reps`` calls."""
    best = cpu = float("inf")
    out = None
    for _ in range(reps):
        t0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        best = min(best, time.perf_counter() - t0)
        cpu = min(cpu, time.process_time() - c0)
    return best, cpu, out


def bench_numerics(m=1024, d=1024, f=4096, reps=3) -> dict:
    t = Target.from_device("ipu-mk2", 1)
    rng = np.random.default_rng(0)
    xv = (rng.standard_normal((m, d)) * 0.1).astype(np.float16)
    w1v = (rng.standard_normal((d, f)) * 0.05).astype(np.float16)
    w2v = (rng.standard_normal((f, d)) * 0.05).astype(np.float16)
    g, prog = build_mlp(t, m, d, f)
    eng = Engine(g, prog, mode="full")
    t0 = time.perf_counter()
    cg = eng.compile()
    t_compile = time.perf_counter() - t0
    assert cg.fits, cg.oom_message()
    inputs = {"x": xv, "W1": w1v, "W2": w2v}

    def emu():  # as Engine.run: execute, then the result (deferred work that fills it done on lookup)
        data, hosts = eng._initial_data(inputs)
        return eng.outputs(eng._execute(prog, data, hosts, finish=False), hosts)["out"].reshape(m, d)

    # interleaved, best of reps each: the machine is shared, so both see the same load
    t_np = t_emu = c_np = c_emu = float("inf")
    emu()  # first run builds the gather indices
    for _ in range(reps):
        a, ca, ref = _best(lambda: numpy_mlp(xv, w1v, w2v), 1)
        b, cb, got = _best(emu, 1)
        t_np, t_emu, c_np, c_emu = min(t_np, a), min(t_emu, b), min(c_np, ca), min(c_emu, cb)
    err = float(np.max(np.abs(got - ref)) / (np.max(np.abs(ref)) + 1e-30))
    return {"shape": f"x({m},{d}) W1({d},{f}) W2({f},{d})", "numpy_s": t_np, "emulator_execute_s": t_emu,
            "numpy_cpu_s": c_np, "emulator_execute_cpu_s": c_emu,
            "emulator_compile_s": t_compile, "ratio_execute": t_emu / t_np, "ratio_execute_cpu": c_emu / c_np,
            "ratio_compile_plus_execute": (t_emu + t_compile) / t_np, "max_rel_err": err,
            "emulated_cycles": cg.total_cycles}


def bench_model(model="bert", reps=3, **overrides) -> dict:
    """The ops engineer's model (emulator ops on this API) vs the same model on their numpy backend."""
    from popvision_lite.emulator.backends.backend import NumpyBackend
    from popvision_lite.emulator.models.catalog import build
    from popvision_lite.emulator.models.config import make_config
    from popvision_lite.emulator.models.emulated import build_model

    cfg = make_config(model, **overrides)
    be, _built = build_model(cfg)
    eng = Engine(be.graph, be.program(), mode="full")
    t0 = time.perf_counter()
    eng.compile()
    t_compile = time.perf_counter() - t0

    names = [h.name for h in _built.results.values() if hasattr(h, "name")]

    def emu():  # as Engine.run + the numeric checks: execute, then every result the model returns
        data, hosts = eng._initial_data(be.inputs)
        outs = eng.outputs(eng._execute(eng.program, data, hosts, finish=False), hosts)
        return [outs[n] for n in names]

    t_np = t_emu = c_np = c_emu = float("inf")
    emu()  # first run builds the gather indices
    for _ in range(reps):
        a, ca, _ = _best(lambda: build(NumpyBackend(cfg.precision, cfg.ipus), cfg), 1)
        b, cb, _ = _best(emu, 1)
        t_np, t_emu, c_np, c_emu = min(t_np, a), min(t_emu, b), min(c_np, ca), min(c_emu, cb)
    return {"model": f"{model} {overrides or ''}", "vertices": sum(g.n for g in be.graph.groups),
            "numpy_backend_s": t_np, "emulator_execute_s": t_emu, "numpy_backend_cpu_s": c_np,
            "emulator_execute_cpu_s": c_emu, "emulator_compile_s": t_compile,
            "ratio_execute": t_emu / t_np, "ratio_execute_cpu": c_emu / c_np}


def bench_timing(num_ipus=16, vertices_per_tile=48, compute_sets=1) -> dict:
    t = Target.from_device("ipu-mk2", num_ipus)
    t0 = time.perf_counter()
    g = Graph(t)
    T = t.num_tiles
    n_per_vertex = 64
    n = T * vertices_per_tile * n_per_vertex
    x = g.add_variable("x", (n,), "float16", mapping=M.linear(n, range(T)))
    y = g.add_variable("y", (n,), "float16", mapping=M.linear(n, range(T)))
    starts = np.arange(T * vertices_per_tile, dtype=np.int64) * n_per_vertex
    vt = np.repeat(np.arange(T), vertices_per_tile)
    # vary the per-vertex work so that tile loads differ
    sizes = np.full(len(vt), n_per_vertex)
    seq = P.Sequence(name="main")
    for i in range(compute_sets):
        cs = g.add_compute_set(f"cs{i}", op=f"layer{i}")
        g.add_vertices(cs, CO.ADD if i % 2 == 0 else CO.MUL, vt,
                       fields={"a": x.regions(starts, sizes), "b": y.regions(starts, sizes),
                               "out": (y if i % 2 == 0 else x).regions(starts, sizes)})
        seq.add(P.Execute(cs))
        seq.add(P.Sync("global"))
    t_build = time.perf_counter() - t0
    nv = len(vt) * compute_sets
    t1 = time.perf_counter()
    res = Engine(g, P.Repeat(10, seq), mode="timing").run()
    t_run = time.perf_counter() - t1
    return {"target": f"{num_ipus} x ipu-mk2 ({T} tiles)", "vertices": nv, "build_s": t_build,
            "compile_run_s": t_run, "vertices_per_s": nv / t_run, "vertices_per_s_incl_build": nv / (t_run + t_build),
            "steps": len(res.profile_data.steps), "total_cycles": res.total_cycles,
            "wall": res.wall}


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    quick = "--quick" in argv
    r = bench_numerics(*( (256, 512, 1024) if quick else (1024, 1024, 4096)), reps=5)
    print("numerics:", {k: (round(v, 4) if isinstance(v, float) else v) for k, v in r.items()})
    rows = [row("MLP block: full numerics / numpy, CPU time (1 BLAS thread)", r["ratio_execute_cpu"],
                GOALS["mlp_block"], "x")]
    try:
        bm = bench_model("bert", reps=2 if quick else 3)
        print("model:", {k: (round(v, 4) if isinstance(v, float) else v) for k, v in bm.items()})
        rows.append(row("2-layer BERT: full numerics / numpy backend, CPU time", bm["ratio_execute_cpu"],
                        GOALS["bert"], "x"))
    except ImportError as e:  # the ops engineer's models are optional for this bench
        print("model: skipped:", e)
    tm = bench_timing(num_ipus=16, vertices_per_tile=8 if quick else 48, compute_sets=1 if quick else 4)
    print("timing:", {k: (round(v, 4) if isinstance(v, float) else v) for k, v in tm.items()})
    rows.append(row("timing-only vertices per second (M)", tm["vertices_per_s"] / 1e6, 1.0, "M", at_least=True))
    print(f"wall-time ratios (load-dependent): MLP block {r['ratio_execute']:.2f}x"
          + (f", BERT {bm['ratio_execute']:.2f}x" if "bm" in locals() else ""))
    print_rows(rows)
    print(bench_result("emulator_speed", rows))
    return 0 if quick or all(x["met"] for x in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
