"""Sweep throughput on Dask, side by side in one run (issue 17).

The same N timing-only emulations (mlp, hidden 256, 2 layers, batch 8, 16, ... : each writes its profile and
its row) are run
1. in a plain loop in this process (``point.run_point`` one after another: no Dask, no child processes);
2. on a LocalCluster with 1 worker process, points inside the worker (``isolate="worker"``);
3. the same with 2 worker processes;
4. 1 and 2 workers with every point in its own child process (``isolate="process"``, the CLI default).
Cluster start-up (with the workers' warm-up: imports, fork server) is timed on its own; points/minute exclude it (it is paid once per sweep) and the line
"with start-up" includes it.  Dask overhead per point = (Dask run time x workers - loop time) / N: the time a
point costs beyond its emulation (scheduling, serialisation, result transfer and, in process mode, a fork).
On a shared machine wall time also measures the other processes' load, so the CPU seconds of every process
involved (client and scheduler, workers, and the points' own processes) are reported too: CPU overhead per
point = (those CPU seconds - the loop's) / N, which contention does not inflate.

Run: ``python -m bench sweep_throughput`` or ``python bench/sweep_throughput.py [--points N] [--quick]``.
A ``BENCH-RESULT`` JSON line carries the numbers for ``python -m bench``'s report.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path


def _points(n: int, hidden: int):
    from popvision_lite.sweep import grid as g

    base = g.Base(model="mlp", model_args={"hidden": hidden, "layers": 2})
    grid = g.check_grid({"batch": [8 * (i + 1) for i in range(n)]}, "bench")
    return g.expand(base, grid), list(grid)


def plain_loop(points, folder: Path) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of the points run one after another in this process."""
    from popvision_lite.sweep import point as pt

    folder.mkdir(parents=True)
    t0, c0 = time.perf_counter(), time.process_time()
    for p in points:
        row = pt.run_point(p.spec, str(folder), p.config_hash, p.key)
        assert row["status"] == "ok", row["error"]
    return time.perf_counter() - t0, time.process_time() - c0


def _cpu() -> float:
    import psutil

    t = psutil.Process().cpu_times()
    return t.user + t.system


def on_dask(points, names, folder: Path, workers: int, isolate: str) -> tuple[float, float, float]:
    """(start-up s, run wall s, run CPU s of every process involved: client + scheduler, workers, and the
    points' own processes in process mode)."""
    from distributed import Client

    from popvision_lite.sweep import engine
    from popvision_lite.sweep import point as pt

    t0 = time.perf_counter()
    cluster = engine.local_cluster(workers)
    client = Client(cluster)
    client.wait_for_workers(workers)
    client.run(pt.warm_up, isolate)  # what run_sweep does first: imports / fork server in every worker
    startup = time.perf_counter() - t0
    try:
        w0 = sum(client.run(_cpu).values())
        t1, c1 = time.perf_counter(), time.process_time()
        o = engine.run_sweep(points, folder, grid_names=names, client=client, isolate=isolate, resume=False)
        run = time.perf_counter() - t1
        cpu = time.process_time() - c1 + sum(client.run(_cpu).values()) - w0
        if isolate == "process":
            cpu += sum(r["cpu_seconds"] for r in o.rows)
        assert o.ok == len(points), [r.get("error") for r in o.rows if r.get("status") != "ok"]
    finally:
        client.close()
        cluster.close()
    return startup, run, cpu


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--points", type=int, default=24)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--quick", action="store_true", help="8 points")
    args = ap.parse_args(argv)
    n = 8 if args.quick else args.points
    points, names = _points(n, args.hidden)
    tmp = Path(tempfile.mkdtemp(prefix="sweep_bench_"))
    try:
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        print(f"{n} points: mlp hidden {args.hidden}, 2 layers, batch 8..{8 * n}, timing-only, profile + row each; "
              f"{os.cpu_count()} logical cores, load average {load:.1f} at start")
        # the same warm-up the workers get (imports only), so both pay the first point's one-time costs alike
        from popvision_lite.sweep import point as pt

        pt.warm_up("worker")
        loop, loop_cpu = plain_loop(points, tmp / "loop")
        res = {"points": n, "loop_s": loop, "loop_cpu_s": loop_cpu}
        print(f"plain loop (no Dask)             : {loop:7.2f} s  {60 * n / loop:7.1f} points/min  "
              f"{loop / n * 1e3:6.0f} ms/point; CPU {loop_cpu / n * 1e3:5.0f} ms/point")
        for isolate in ("worker", "process"):
            for w in (1, 2):
                startup, run, cpu = on_dask(points, names, tmp / f"{isolate}{w}", w, isolate)
                over = (run * w - loop) / n
                res[f"{isolate}_{w}w_run_s"] = run
                res[f"{isolate}_{w}w_startup_s"] = startup
                res[f"{isolate}_{w}w_overhead_ms_per_point"] = over * 1e3
                res[f"{isolate}_{w}w_cpu_overhead_ms_per_point"] = (cpu - loop_cpu) / n * 1e3
                print(f"Dask {w} worker(s), isolate={isolate:7s}: {run:7.2f} s  {60 * n / run:7.1f} points/min  "
                      f"(start-up {startup:.1f} s; with it {60 * n / (run + startup):6.1f} points/min); overhead "
                      f"vs the loop: wall x workers {over * 1e3:+6.0f} ms/point, CPU {(cpu - loop_cpu) / n * 1e3:+5.0f} "
                      "ms/point")
            r1, r2 = res[f"{isolate}_1w_run_s"], res[f"{isolate}_2w_run_s"]
            res[f"{isolate}_2w_vs_1w"] = r1 / r2
            print(f"  -> isolate={isolate}: 2 workers / 1 worker throughput = {r1 / r2:.2f}x "
                  f"(ideal 2.00x on 2 free cores); 1 worker / plain loop = {loop / r1:.2f}x")
        res["load_end"] = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
        print("BENCH-RESULT " + json.dumps({"bench": "sweep_throughput", **res}))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
