"""Soak: one app process opens, switches through every view, compares, exports and closes every sample
profile and a POD16-shaped run, many times; reports resident memory and open-file growth after warm-up.

Run: ``python -m bench.soak [--iterations 200] [--warmup 10] [--pod16-steps 2000] [--json out.json]``
(offscreen Qt).  One iteration, in one ``MainWindow``:

* every bundled sample (``sample_profiles/*.pvl``) and a synthetic POD16-shaped run (16 IPUs x 1472 tiles):
  File > Open (the loader thread), every view of the document shown (built and painted), one view's plots
  exported as PNG and its tables as CSV (the view changes from iteration to iteration, so every view is
  exported over the run), the tab closed;
* compare mode on a pair of samples (``open_compare``: both opened, compared, the window shown), every
  compare page shown, one page's plot exported, the window and both tabs closed.

After each iteration (deferred deletes flushed, ``gc.collect()``) it records RSS (psutil), open file
descriptors (``/proc/self/fd``; how many name a ``.pvl``), HDF5 files still open (``h5py``), threads and
live top-level widgets.  Growth is measured from the end of warm-up (caches, fonts, pyqtgraph's first
plots) to the end: the goal is < 10 % RSS growth and no leaked handle (the .pvl descriptors and HDF5
objects back to 0 between iterations).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

ROOT = Path(__file__).resolve().parents[1]
COMPARE_PAIR = ("mlp_mk2.pvl", "mlp_bow.pvl")
BOUND_S = 600.0


def _pump(app, cond, what: str) -> None:
    t0 = time.monotonic()
    while not cond():
        app.processEvents()
        if time.monotonic() - t0 > BOUND_S:
            raise TimeoutError(f"soak: waited {BOUND_S:g} s for {what}")
        time.sleep(0.002)
    app.processEvents()


def _flush(app) -> None:
    from PySide6.QtCore import QCoreApplication, QEvent

    for _ in range(3):
        app.processEvents()
        QCoreApplication.sendPostedEvents(None, QEvent.DeferredDelete)
    gc.collect()


def _fds() -> tuple[int, int]:
    names = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            names.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            continue
    return len(names), sum(1 for n in names if n.endswith(".pvl"))


def sample(app) -> dict:
    import threading

    import h5py
    import psutil
    from PySide6.QtWidgets import QApplication

    _flush(app)
    n_fds, pvl_fds = _fds()
    return {"rss_mib": psutil.Process().memory_info().rss / 2**20, "fds": n_fds, "pvl_fds": pvl_fds,
            "h5_files": len(h5py.h5f.get_obj_ids(types=h5py.h5f.OBJ_FILE)), "threads": threading.active_count(),
            "top_widgets": len(QApplication.topLevelWidgets())}


def _export_view(view, out_dir: Path, tag: str) -> int:
    from popvision_lite.gui.export import export_plot
    from popvision_lite.gui.export.plots import items_exportable, view_plot_items
    from popvision_lite.gui.export.tables import export_table, slug, view_tables

    n = 0
    for name, item in list(items_exportable(view_plot_items(view)).items())[:1]:
        export_plot(item, out_dir / f"{tag}-{slug(name)}.png", 640, 400)
        n += 1
    for name, df in list(view_tables(view).items())[:1]:
        export_table(df, out_dir / f"{tag}-{slug(name)}.csv")
        n += 1
    return n


def iteration(app, mw, profiles: list[Path], pair: tuple[Path, Path], i: int, out_dir: Path) -> dict:
    from popvision_lite.gui.compare_window import open_compare

    counts = {"opened": 0, "views": 0, "exports": 0, "compare_pages": 0}
    for path in profiles:
        before = mw.doc_tabs.count()
        mw.open_paths([path])
        _pump(app, lambda before=before: mw.doc_tabs.count() > before and not mw.busy(), f"opening {path.name}")
        dw = mw.current_document_widget()
        keys = dw.keys()
        for k in keys:
            dw.show_view(k)
            app.processEvents()
            counts["views"] += 1
        k = keys[i % len(keys)]
        counts["exports"] += _export_view(dw.view(k), out_dir, f"{path.stem}-{k}")
        mw.close_current()
        _flush(app)
        counts["opened"] += 1
    opened = []
    open_compare(mw, pair[0], pair[1], on_open=opened.append)
    _pump(app, lambda: bool(opened) and not mw.busy(), "compare mode")
    win = opened[0]
    keys = win.keys()
    for k in keys:
        win.show_page(k)
        app.processEvents()
        counts["compare_pages"] += 1
    counts["exports"] += _export_view(win.page(keys[i % len(keys)]), out_dir, f"compare-{keys[i % len(keys)]}")
    win.close()
    while mw.doc_tabs.count():
        mw.close_current()
    _flush(app)
    for f in out_dir.iterdir():
        f.unlink()
    return counts


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iterations", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=10, help="iterations before the baseline (default 10)")
    ap.add_argument("--pod16-steps", type=int, default=2000, help="steps of the POD16-shaped run (default 2000)")
    ap.add_argument("--json", help="write every iteration's sample here")
    args = ap.parse_args()
    if not 0 <= args.warmup < args.iterations:
        ap.error("--warmup must be below --iterations")

    from PySide6.QtCore import QSettings

    from popvision_lite.gui.app import create_app
    from popvision_lite.gui.headless import _quiet_offscreen_notes
    from popvision_lite.gui.main_window import MainWindow
    from popvision_lite.gui.start_page import bundled_samples
    from popvision_lite.testing.synthetic import write_synthetic

    app = create_app()
    _quiet_offscreen_notes()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        pod16 = tmp / "pod16_shaped.pvl"
        write_synthetic(pod16, num_ipus=16, tiles_per_ipu=1472, num_steps=args.pod16_steps, seed=16)
        samples = bundled_samples()
        by_name = {p.name: p for p in samples}
        pair = (by_name[COMPARE_PAIR[0]], by_name[COMPARE_PAIR[1]])
        profiles = [*samples, pod16]
        out_dir = tmp / "exports"
        out_dir.mkdir()
        mw = MainWindow(settings=QSettings(str(tmp / "settings.ini"), QSettings.IniFormat))
        mw.resize(1400, 900)
        mw.show()
        _flush(app)
        print(f"soak: {len(profiles)} profiles ({len(samples)} samples + POD16-shaped 16 x 1472 tiles x "
              f"{args.pod16_steps} steps) + compare {pair[0].name} / {pair[1].name}; {args.iterations} iterations, "
              f"{args.warmup} warm-up", flush=True)
        rows = [dict(sample(app), it=0, wall_s=0.0, cpu_s=0.0)]
        counts = {}
        for i in range(1, args.iterations + 1):
            t0, c0 = time.perf_counter(), time.process_time()
            counts = iteration(app, mw, profiles, pair, i, out_dir)
            rows.append(dict(sample(app), it=i, wall_s=time.perf_counter() - t0, cpu_s=time.process_time() - c0))
            r = rows[-1]
            print(f"  it {i:4d}: RSS {r['rss_mib']:7.1f} MiB, fds {r['fds']:3d} (.pvl {r['pvl_fds']}), "
                  f"HDF5 files {r['h5_files']}, threads {r['threads']}, top-level widgets {r['top_widgets']}, "
                  f"{r['wall_s']:.1f} s wall / {r['cpu_s']:.1f} s CPU", flush=True)
        mw.close()
        _flush(app)
    base, last = rows[args.warmup], rows[-1]
    post = rows[args.warmup:]
    rss = [r["rss_mib"] for r in post]
    growth = 100.0 * (last["rss_mib"] - base["rss_mib"]) / base["rss_mib"]
    # least-squares slope of RSS over the post-warm-up iterations: the trend, less sensitive to one sample
    n = len(rss)
    xs = list(range(n))
    mx, my = sum(xs) / n, sum(rss) / n
    slope = (sum((x - mx) * (y - my) for x, y in zip(xs, rss, strict=True))
             / max(1e-9, sum((x - mx) ** 2 for x in xs)))
    result = {
        "iterations": args.iterations, "warmup": args.warmup, "profiles": len(profiles), "per_iteration": counts,
        "rss_start_mib": rows[0]["rss_mib"], "rss_after_warmup_mib": base["rss_mib"], "rss_end_mib": last["rss_mib"],
        "rss_max_mib": max(r["rss_mib"] for r in rows), "rss_growth_after_warmup_pct": growth,
        "rss_slope_kib_per_iteration": slope * 1024,
        "fds_after_warmup": base["fds"], "fds_end": last["fds"], "pvl_fds_max_after_iterations": max(
            r["pvl_fds"] for r in rows[1:]),
        "h5_files_max_after_iterations": max(r["h5_files"] for r in rows[1:]),
        "threads_after_warmup": base["threads"], "threads_end": last["threads"],
        "top_widgets_after_warmup": base["top_widgets"], "top_widgets_end": last["top_widgets"],
        "wall_s_median": sorted(r["wall_s"] for r in rows[1:])[len(rows[1:]) // 2],
        "cpu_s_median": sorted(r["cpu_s"] for r in rows[1:])[len(rows[1:]) // 2],
    }
    print(f"\nRSS {result['rss_start_mib']:.1f} MiB at start, {base['rss_mib']:.1f} after {args.warmup} warm-up "
          f"iterations, {last['rss_mib']:.1f} at the end: {growth:+.1f} % after warm-up (goal < 10 %), "
          f"trend {result['rss_slope_kib_per_iteration']:+.0f} KiB per iteration")
    print(f"open files {base['fds']} -> {last['fds']}; .pvl descriptors open between iterations: max "
          f"{result['pvl_fds_max_after_iterations']}; HDF5 files open: max {result['h5_files_max_after_iterations']}; "
          f"threads {base['threads']} -> {last['threads']}; top-level widgets {base['top_widgets']} -> "
          f"{last['top_widgets']}")
    print("BENCH-RESULT " + json.dumps({"name": "soak", **{k: round(v, 2) if isinstance(v, float) else v
                                                          for k, v in result.items()}}))
    if args.json:
        Path(args.json).write_text(json.dumps({"result": result, "iterations": rows}, indent=1))
    ok = growth < 10 and last["fds"] <= base["fds"] and result["pvl_fds_max_after_iterations"] == 0 \
        and result["h5_files_max_after_iterations"] == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
