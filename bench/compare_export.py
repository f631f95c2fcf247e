"""Compare mode and export at scale: time to compare two runs, build the compare window, export plots.

Run: ``python -m bench.compare_export [--ipus 16] [--steps 20000]``.  Makes a small (1 IPU) and a
large (``--ipus`` IPUs) synthetic pair, measures both in one run and prints the times and the
large / small ratios (so machine load cancels out).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


def timed(fn, *a, **k):
    t0 = time.perf_counter()
    out = fn(*a, **k)
    return time.perf_counter() - t0, out


def measure(pa, pb, out_dir: Path) -> dict:
    from PySide6.QtWidgets import QApplication

    import popvision_lite as pvl
    from popvision_lite.analysis.compare import compare, memory_difference
    from popvision_lite.gui.compare_window import CompareWindow
    from popvision_lite.gui.export import export_plot
    from popvision_lite.gui.state.document import Document

    r = {}
    a, b = pvl.open(pa), pvl.open(pb)
    r["compare() s"], cmp = timed(compare, a, b)
    r["memory_difference s"], _ = timed(memory_difference, a, b)
    da, db = Document(a, pa), Document(b, pb)
    da.put_cached(("compare", str(db.path)), cmp)
    r["window + summary page s"], w = timed(CompareWindow, da, db)
    w.resize(1600, 1000)
    w.show()
    QApplication.processEvents()
    times = {}
    for key in ("memory", "liveness", "execution", "steps", "ops"):
        t, _ = timed(w.show_page, key)
        QApplication.processEvents()
        times[key] = t
    r.update({f"{k} page s": v for k, v in times.items()})
    mem = w.page("memory")
    r["memory maps PNG 1600x1000 s"], _ = timed(export_plot, mem.plot_items()["maps"], out_dir / "m.png", 1600, 1000)
    mem.set_difference(True)
    r["B-A map PNG 1600x1000 s"], _ = timed(export_plot, mem.plot_items()["difference"], out_dir / "d.png", 1600, 1000)
    r["timeline SVG s"], _ = timed(export_plot, w.page("execution").plot_items()["timeline"], out_dir / "t.svg")
    w.close()
    da.close()
    db.close()
    return r


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ipus", type=int, default=16)
    ap.add_argument("--steps", type=int, default=20000)
    args = ap.parse_args()
    from popvision_lite.gui.app import create_app
    from popvision_lite.testing.synthetic import write_synthetic

    create_app()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        cases = {"small": (1, 400), "large": (args.ipus, args.steps)}
        res = {}
        for name, (ipus, steps) in cases.items():
            pa, pb = tmp / f"{name}_a.pvl", tmp / f"{name}_b.pvl"
            write_synthetic(pa, num_ipus=ipus, num_steps=steps, seed=1)
            write_synthetic(pb, num_ipus=ipus, num_steps=steps, seed=2, device="ipu-bow")
            res[name] = measure(pa, pb, tmp)
            print(f"{name}: {ipus} IPU(s) x 1472 tiles, {steps:,} steps per run", flush=True)
        print(f"{'measure':32s} {'small':>9s} {'large':>9s} {'large/small':>12s}")
        for k in res["small"]:
            s, lg = res["small"][k], res["large"][k]
            print(f"{k:32s} {s:9.3f} {lg:9.3f} {lg / s if s else float('nan'):12.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
