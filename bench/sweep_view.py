"""Opening a large sweep in the desktop app (issue 17): time to read the table and to build and paint the
sweep tab, for 10,000 points.

The table is made in the engine's format (``results.write_results``) from synthetic rows: 2 devices x
chips 1..16 x batches, random throughput and costs, 20 % not fitting, 1 % failed; no emulation runs.
Reported: ``open_sweep`` (CSV read), ``SweepView`` construction and first paint (docs/performance.md).

Run: ``python -m bench sweep_view`` or ``python bench/sweep_view.py [--points N]``.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np


def make_table(folder: Path, n: int, seed: int = 0) -> Path:
    from popvision_lite.sweep.results import write_meta, write_results

    rng = np.random.default_rng(seed)
    rows = []
    chips = [1, 2, 4, 8, 16]
    for i in range(n):
        dev = "ipu-bow" if i % 2 else "ipu-mk2"
        c = chips[(i // 2) % len(chips)]
        sps = float(rng.uniform(1e3, 1e5)) * c ** 0.8
        failed = rng.random() < 0.01
        rows.append(dict(point=i, status="failed" if failed else "ok", error="killed by SIGSEGV" if failed else "",
                         batch=int(8 * (1 + i // 10)), ipus=c, device=dev, model="bert-base",
                         fits=bool(rng.random() > 0.2), chips=c, peak_tile_memory_pct=float(rng.uniform(20, 140)),
                         samples_per_second=float("nan") if failed else sps, total_cycles=int(rng.integers(1e6, 1e9)),
                         cost_per_1m_samples_usd=1.67 * c * 1e6 / sps / 3600 if dev == "ipu-bow" else float("nan"),
                         cost_note="" if dev == "ipu-bow" else "no [price] in the ipu-mk2 device spec",
                         profile="" if failed else f"profiles/{i:016x}.pvl", config_hash=f"{i:064x}",
                         key=f"{i:016x}"))
    write_meta(folder, {"grid": {"batch": sorted({r["batch"] for r in rows}), "ipus": chips,
                                 "device": ["ipu-mk2", "ipu-bow"]}})
    return write_results(folder, rows, ["batch", "ipus", "device"])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--points", type=int, default=10_000)
    args = ap.parse_args(argv)
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from popvision_lite.gui.app import create_app

    app = create_app()
    import popvision_lite as pvl
    from popvision_lite.gui.views.sweep_view import SweepView

    with tempfile.TemporaryDirectory() as tmp:
        path = make_table(Path(tmp), args.points)
        t0 = time.perf_counter()
        df = pvl.open_sweep(path)
        t_read = time.perf_counter() - t0
        t0 = time.perf_counter()
        v = SweepView(df)
        t_build = time.perf_counter() - t0
        v.resize(1400, 900)
        t0 = time.perf_counter()
        v.show()
        v.grab()  # forces a full paint of the plots and the visible table rows
        t_paint = time.perf_counter() - t0
        app.processEvents()
        v.close()
    total = t_read + t_build + t_paint
    print(f"{args.points:,} points: open_sweep {t_read * 1e3:.0f} ms, SweepView built {t_build * 1e3:.0f} ms, "
          f"first paint {t_paint * 1e3:.0f} ms; total {total:.2f} s (target: under 2 s)")
    print("BENCH-RESULT " + json.dumps({"bench": "sweep_view", "points": args.points, "read_s": t_read,
                                        "build_s": t_build, "paint_s": t_paint, "total_s": total}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
