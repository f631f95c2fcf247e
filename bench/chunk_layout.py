"""Step x tile chunk layout and Blosc codec options, side by side (decision 0120).

    python -m bench.chunk_layout                 # 2 IPUs x 1472 tiles x 3,000 steps, every option
    python -m bench.chunk_layout --quick         # smaller, for a smoke run

One synthetic profile (the trace bench's: ``noise=0.02``) is written once per option with ``write_profile``'s
``step_chunk`` / ``tile_chunk`` / ``compression``; per option it reports the write time, the file size and, in
a fresh process per option, the CPU time (median over interleaved repetitions) of

* **trace**: open + ``step_tiles.window(1000, 1600, tiles)`` for 384 tiles spread over both IPUs + close, the
  read of ``bench.trace_load_peer`` (after each one a 48 MB buffer is filled and freed, as the peer's JSON
  parse does there, so caches are as cold as in that bench);
* **window**: a 100-step window of all tiles (3 arrays) from an open profile, a fresh step range each time;
* **steps**: whole-step busy cycles (``step_tiles.cycles(a, b)``, all tiles, 100 steps), the heatmap's read.

Every option's arrays are checked equal to the first option's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# (label, step_chunk, tile_chunk, compression)
OPTIONS = (
    ("32 x 1472, lz4-5 shuffle (default)", 32, 1472, "lz4-5"),
    ("32 x 736, lz4-5", 32, 736, "lz4-5"),
    ("32 x 368, lz4-5", 32, 368, "lz4-5"),
    ("32 x 184, lz4-5", 32, 184, "lz4-5"),
    ("64 x 368, lz4-5", 64, 368, "lz4-5"),
    ("64 x 1472, lz4-5", 64, 1472, "lz4-5"),
    ("128 x 1472, lz4-5", 128, 1472, "lz4-5"),
    ("16 x 1472, lz4-5", 16, 1472, "lz4-5"),
    ("8 x 1472, lz4-5", 8, 1472, "lz4-5"),
    ("32 x 1472, lz4-1", 32, 1472, "lz4-1"),
    ("32 x 1472, lz4-9", 32, 1472, "lz4-9"),
    ("32 x 1472, blosclz-5", 32, 1472, "blosclz-5"),
    ("32 x 1472, zstd-1", 32, 1472, "zstd-1"),
    ("32 x 1472, lz4-5 noshuffle", 32, 1472, "lz4-5-noshuffle"),
    ("32 x 1472, lz4-5 bitshuffle", 32, 1472, "lz4-5-bitshuffle"),
)


def _reads(path: str, reps: int, n_steps: int, window: tuple[int, int], n_sub: int) -> dict:
    """Child process: CPU times of the three reads, medians over ``reps`` interleaved repetitions."""
    import numpy as np

    import popvision_lite as pvl

    nt = 2 * 1472
    tiles = np.unique(np.linspace(0, nt - 1, n_sub).astype(np.int64))
    start, stop = window
    rng = np.random.default_rng(0)
    cpu = {"trace": [], "window": [], "steps": []}
    digest = None
    for _ in range(reps):
        c0 = time.process_time()
        with pvl.open(path) as p:
            w = p.step_tiles.window(start, stop, tiles=tiles)
        cpu["trace"].append(time.process_time() - c0)
        if digest is None:
            digest = [int(a.astype(np.uint64).sum() % (1 << 61)) for a in w]
        junk = np.ones(48 << 20, np.uint8)  # what the peer's parse does to the caches between our reads
        del junk
        with pvl.open(path) as p:
            a = int(rng.integers(0, n_steps - 100))
            c0 = time.process_time()
            p.step_tiles.window(a, a + 100)
            cpu["window"].append(time.process_time() - c0)
        with pvl.open(path) as p:
            a = int(rng.integers(0, n_steps - 100))
            c0 = time.process_time()
            p.step_tiles.cycles(a, a + 100)
            cpu["steps"].append(time.process_time() - c0)
    out = {k: statistics.median(v) for k, v in cpu.items()}
    out.update({f"{k}_min": min(v) for k, v in cpu.items()})
    out["digest"] = digest
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="bench.chunk_layout")
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default="", help="comma-separated option numbers (0-based) to run")
    ap.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        path, reps, steps, win, n_sub = args.child
        a, b = (int(x) for x in win.split(":"))
        print(json.dumps(_reads(path, int(reps), int(steps), (a, b), int(n_sub))))
        return 0
    window, n_sub = "1000:1600", 384
    if args.quick:
        args.steps, args.reps, window, n_sub = 400, 3, "100:200", 64

    from popvision_lite.profile.writer import write_profile
    from popvision_lite.testing.synthetic import make_synthetic

    data = make_synthetic(2, 1472, args.steps, noise=0.02, lazy=False)
    picked = [OPTIONS[int(i)] for i in args.only.split(",")] if args.only else list(OPTIONS)
    rows = []
    ref = None
    with tempfile.TemporaryDirectory(prefix="pvl-chunks-") as d:
        for label, sc, tc, comp in picked:
            path = Path(d) / "run.pvl"
            c0, t0 = time.process_time(), time.perf_counter()
            write_profile(path, data, step_chunk=sc, tile_chunk=tc, compression=comp)
            w_cpu, w_wall = time.process_time() - c0, time.perf_counter() - t0
            size = os.path.getsize(path)
            res = subprocess.run([sys.executable, "-m", "bench.chunk_layout", "--child", str(path), str(args.reps),
                                  str(args.steps), window, str(n_sub)], capture_output=True, text=True)
            if res.returncode:  # e.g. zstd: chunks compressed beyond the reader's 300:1 bound are refused
                why = (res.stderr.strip().splitlines() or ["?"])[-1]
                print(f"{label:<34} file {size / 1e6:6.2f} MB  write {w_cpu:5.2f} s CPU  NOT READ: {why}", flush=True)
                continue
            r = json.loads(res.stdout.strip().splitlines()[-1])
            ref = ref or r["digest"]
            if r["digest"] != ref:
                print(f"MISMATCH: {label} reads different data", file=sys.stderr)
                return 1
            rows.append((label, size, w_cpu, w_wall, r))
            print(f"{label:<34} file {size / 1e6:6.2f} MB  write {w_cpu:5.2f} s CPU  trace {r['trace'] * 1e3:6.2f} "
                  f"(min {r['trace_min'] * 1e3:5.2f}) ms  window100 {r['window'] * 1e3:6.2f} ms  "
                  f"steps100 {r['steps'] * 1e3:6.2f} ms", flush=True)
    print("BENCH-RESULT " + json.dumps({"bench": "chunk_layout", "steps": args.steps, "rows": [
        {"option": lab, "file_mb": round(s / 1e6, 2), "write_cpu_s": round(wc, 2),
         "trace_cpu_ms": round(r["trace"] * 1e3, 2), "window100_cpu_ms": round(r["window"] * 1e3, 2),
         "steps100_cpu_ms": round(r["steps"] * 1e3, 2)} for lab, s, wc, _, r in rows]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
