"""Screenshots of every view of popvision-lite for docs/screenshots (run under Xvfb or offscreen).

    Xvfb :99 -screen 0 1600x1000x24 & DISPLAY=:99 python bench/gui_screenshots.py [profile.pvl] [--out docs/screenshots]

Without a profile a synthetic one (2 IPUs x 1472 tiles, a few tiles over capacity) is made.
Each view is shown in a 1500x950 window, in the light and the dark theme.  The Execution view of a run whose
steady state is folded is also taken zoomed into its one stored steady-state micro-batch (``execution-steady-*``).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("profile", nargs="?")
    ap.add_argument("--out", default="docs/screenshots")
    ap.add_argument("--views", default="summary,insights,memory,liveness,program_tree,operations,execution,roofline",
                    help="comma-separated view keys (default: every view)")
    ap.add_argument("--themes", default="light,dark")
    ap.add_argument("--tile", type=int, default=None, help="tile to click in the memory view")
    ap.add_argument("--prefix", default="", help="file name prefix, e.g. 'pod16-' (default: none)")
    args = ap.parse_args(argv)
    from PySide6.QtCore import QSettings

    from popvision_lite.gui import theme
    from popvision_lite.gui.app import create_app
    from popvision_lite.gui.main_window import MainWindow
    from popvision_lite.gui.state.document import Document
    from popvision_lite.profile.reader import open_profile

    app = create_app()
    path = args.profile
    if path is None:
        from popvision_lite.testing.synthetic import write_synthetic

        path = Path(tempfile.mkdtemp()) / "synthetic-2ipu.pvl"
        write_synthetic(path, num_ipus=2, tiles_per_ipu=1472, num_steps=300, seed=1, over_capacity_tiles=12)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    settings = QSettings(str(Path(tempfile.mkdtemp()) / "s.ini"), QSettings.IniFormat)
    win = MainWindow(settings=settings)
    win.resize(1500, 950)
    win.show()
    doc = Document(open_profile(path), path)
    dw = win.add_document(doc)
    for name in args.themes.split(","):
        theme.apply_theme(name)
        for key in args.views.split(","):
            view = dw.show_view(key)
            if view is None:
                print(f"no view {key}", file=sys.stderr)
                continue
            if key == "memory":
                tm = view.tm
                tile = args.tile if args.tile is not None else int(tm.total.argmax())
                view.select_tile(tile)
            if key == "liveness" and hasattr(view, "select_lstep"):
                from popvision_lite.analysis.liveness import peak_step

                view.select_lstep(peak_step(doc.profile))
            from popvision_lite.gui.headless import wait_ready

            wait_ready(view)  # the roofline analyses on a worker thread
            for _ in range(5):
                app.processEvents()
            if key == "execution":
                view.reset_view()
                view.refresh()
                for _ in range(5):
                    app.processEvents()
            f = out / f"{args.prefix}{key}-{name}.png"
            win.grab().save(str(f))
            print(f)
            steady = [s for s in getattr(view, "phase_spans", []) if s.kind == "steady" and s.first_step >= 0]
            if key == "execution" and steady:  # also zoomed into the one stored steady-state micro-batch
                st = doc.profile.steps
                a = int(st["start_cycle"].iat[steady[0].first_step])
                b = int(st["end_cycle"].iloc[steady[0].first_step:steady[0].last_step + 1].max())
                view.set_x_range(a - 0.02 * (b - a), b + 0.02 * (b - a))
                view.refresh()
                for _ in range(5):
                    app.processEvents()
                f = out / f"{args.prefix}{key}-steady-{name}.png"
                win.grab().save(str(f))
                print(f)
    win.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
