"""Bench: what a view costs when it is shown again (issue 49 item 5) - every view of a document visited once
(built and painted), then revisited round after round, as a user going back and forth between tabs does.

    python -m bench.view_revisits                      # the bundled BERT-Large sample, a synthetic POD16-shaped
                                                       # run and an emulated POD16 BERT-Large run
    python -m bench.view_revisits --profile run.pvl    # only this profile
    python -m bench.view_revisits --rounds 8

One main window (1400 x 900, offscreen), one document open at a time.  A visit is ``show_view`` and the events
it posts (layout, resizes, the paint of the view), timed in CPU milliseconds of this process
(``time.process_time``: the machine is shared, wall time would count other processes).  Round 0 visits every
view for the first time; rounds 1.. revisit each in turn.  Goal: a revisit of every view under 50 ms (the
median over the rounds; the slowest round is printed beside it).
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

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
from bench import targets  # noqa: E402

REVISIT_MS = 50.0
POD16_CONFIG = ROOT / "sample_configs" / "mlperf_v1.1_pod16_bert_large.toml"


def _wait(app, cond, what: str, bound_s: float = 300.0) -> None:
    t0 = time.perf_counter()
    while not cond():
        app.processEvents()
        if time.perf_counter() - t0 > bound_s:
            raise SystemExit(f"view_revisits: {what} did not finish in {bound_s:.0f} s")
        time.sleep(0.005)


def measure_profile(app, mw, path: Path, rounds: int) -> dict[str, list[float]]:
    """view key -> CPU ms of each visit (index 0 the first visit, then one per revisit round)."""
    before = mw.doc_tabs.count()
    mw.open_paths([path])
    _wait(app, lambda: mw.doc_tabs.count() > before and not mw.busy(), f"opening {path.name}")
    dw = mw.current_document_widget()
    app.processEvents()
    times: dict[str, list[float]] = {k: [] for k in dw.keys()}
    for _ in range(rounds + 1):
        for k in times:
            c0 = time.process_time()
            dw.show_view(k)
            app.processEvents()
            times[k].append((time.process_time() - c0) * 1e3)
    mw.close_current()
    app.processEvents()
    return times


def _pod16_profile(tmp: Path) -> Path:
    out = tmp / "pod16_bert_large.pvl"
    r = subprocess.run([sys.executable, "-m", "popvision_lite.cli", "emulate", "--config", str(POD16_CONFIG), "-q",
                        "-o", str(out)], cwd=ROOT, capture_output=True, text=True)
    if not out.exists():
        raise SystemExit(f"view_revisits: emulating the POD16 config failed (rc {r.returncode}): {r.stderr[-500:]}")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", action="append", help="a .pvl to visit (repeatable; default: see above)")
    ap.add_argument("--rounds", type=int, default=6, help="revisit rounds (default 6)")
    ap.add_argument("--quick", action="store_true", help="the bundled sample only, 3 rounds")
    args = ap.parse_args(argv)
    from PySide6.QtCore import QSettings

    from popvision_lite.gui.app import create_app
    from popvision_lite.gui.headless import _quiet_offscreen_notes
    from popvision_lite.gui.main_window import MainWindow
    from popvision_lite.testing.synthetic import write_synthetic

    app = create_app()
    _quiet_offscreen_notes()
    rounds = 3 if args.quick else args.rounds
    rows, worst = [], {}
    with tempfile.TemporaryDirectory(prefix="pvl_revisit_") as tmp:
        tmp = Path(tmp)
        if args.profile:
            paths = [Path(p) for p in args.profile]
        else:
            paths = [ROOT / "sample_profiles" / "bert_large_1ipu_oom.pvl"]
            if not args.quick:
                syn = tmp / "pod16_shaped.pvl"
                write_synthetic(syn, num_ipus=16, tiles_per_ipu=1472, num_steps=2000, seed=16)
                paths += [syn, _pod16_profile(tmp)]
        mw = MainWindow(settings=QSettings(str(tmp / "settings.ini"), QSettings.IniFormat))
        mw.resize(1400, 900)
        mw.show()
        app.processEvents()
        print(f"{'profile':28} {'view':13} {'first ms':>9} {'revisit median':>15} {'slowest':>8}  (CPU ms, "
              f"{rounds} revisit rounds)")
        for path in paths:
            times = measure_profile(app, mw, path, rounds)
            for k, ts in times.items():
                med, top = statistics.median(ts[1:]), max(ts[1:])
                print(f"{path.name[:28]:28} {k:13} {ts[0]:9.1f} {med:15.1f} {top:8.1f}", flush=True)
                rows.append(dict(profile=path.name, view=k, first_ms=round(ts[0], 1), revisit_median_ms=round(med, 1),
                                 revisit_max_ms=round(top, 1)))
                worst[k] = max(worst.get(k, 0.0), med)
        mw.close()
        app.processEvents()
    goals = [targets.row(f"revisit of {k} (median, slowest profile)", v, REVISIT_MS, " ms") for k, v in worst.items()]
    targets.print_rows(goals)
    print("BENCH-RESULT " + json.dumps({"bench": "view_revisits", "rounds": rounds, "visits": rows, "targets": goals}))
    return 0 if all(g["met"] for g in goals) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
