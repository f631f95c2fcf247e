"""Screenshots of every view of popvision-lite for docs/screenshots (run under Xvfb or offscreen).

    Xvfb :99 -screen 0 1600x1000x24 & DISPLAY=:99 python bench/gui_screenshots.py [profile.pvl] [--out docs/screenshots]

Without a profile a synthetic one (2 IPUs x 1472 tiles, a few tiles over capacity) is made.
Each view is shown in a 1500x950 window, in the light and the dark theme.  The Execution view of a run whose
steady state is folded is also taken zoomed into its one stored steady-state micro-batch (``execution-steady-*``).

    --compare OTHER.pvl [--compare-pages execution,memory,roofline]   compare mode, A = profile, B = OTHER:
        ``compare_<page>-<theme>.png``
    --sweep sweep.csv          the sweep tab after a click on its first fitting point opened that point's
                               profile in its own tab: ``sweep-<theme>.png`` (the sweep tab, the point marked,
                               the new tab named by its grid point) and ``sweep-point-<theme>.png`` (that tab)
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
    ap.add_argument("--compare", help="also compare mode with this profile as B")
    ap.add_argument("--compare-pages", default="execution,memory,roofline")
    ap.add_argument("--sweep", help="also a sweep results table, with its first fitting point opened")
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
        for key in filter(None, args.views.split(",")):
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
            if key == "insights":
                _wait_insights(app, view)  # computed on a worker thread: the shot showed "Computing insights..."
            _settle(app, 5)
            if key == "execution":
                view.reset_view()
                view.refresh()
                _settle(app, 5)
            f = out / f"{args.prefix}{key}-{name}.png"
            _save_shot(win, f)
            steady = [s for s in getattr(view, "phase_spans", []) if s.kind == "steady" and s.first_step >= 0]
            if key == "execution" and steady:  # also zoomed into the one stored steady-state micro-batch
                st = doc.profile.stored_table("steps")
                a = int(st["start_cycle"].iat[steady[0].first_step])
                b = int(st["end_cycle"].iloc[steady[0].first_step:steady[0].last_step + 1].max())
                view.set_x_range(a - 0.02 * (b - a), b + 0.02 * (b - a))
                view.refresh()
                _settle(app, 5)
                f = out / f"{args.prefix}{key}-steady-{name}.png"
                _save_shot(win, f)
    if args.compare:
        _compare_shots(app, doc, args, out)
    if args.sweep:
        _sweep_shots(app, win, args, out)
    win.close()
    return 0


def _wait_insights(app, view, timeout: float = 300.0) -> None:
    """Process events until the Insights view shows its findings (or says why it could not)."""
    import time

    deadline = time.monotonic() + timeout
    while view.status.text().startswith("Computing") and time.monotonic() < deadline:
        _settle(app, 1)
        time.sleep(0.05)
    if view.status.text().startswith("Computing"):
        raise RuntimeError(f"the Insights were not computed in {timeout:.0f} s")


def _settle(app, n: int = 8) -> None:
    for _ in range(n):
        app.processEvents()


def _save_shot(widget, path: Path) -> None:
    """The widget as it is on screen, written to ``path`` (whose name is printed)."""
    widget.grab().save(str(path))
    print(path)


def _compare_shots(app, doc, args, out: Path) -> None:
    from popvision_lite.gui import theme
    from popvision_lite.gui.compare_window import CompareWindow
    from popvision_lite.gui.state.document import Document
    from popvision_lite.profile.reader import open_profile

    other = Document(open_profile(args.compare), args.compare)
    for name in args.themes.split(","):
        theme.apply_theme(name)
        cw = CompareWindow(doc, other)  # built in the theme, as a user opening it then would see it
        cw.resize(1500, 950)
        cw.show()
        for page in args.compare_pages.split(","):
            if page not in cw.keys():  # show_page ignores an unknown key: the shot would be of another page
                raise SystemExit(f"--compare-pages: no compare page '{page}' (pages: {', '.join(cw.keys())})")
            view = cw.show_page(page)
            _settle(app)
            if hasattr(view, "redraw"):
                view.redraw()
                _settle(app)
            f = out / f"{args.prefix}compare_{page}-{name}.png"
            _save_shot(cw, f)
        cw.close()


def _sweep_shots(app, win, args, out: Path) -> None:
    import time

    from popvision_lite.gui import theme
    from popvision_lite.gui.views.sweep_view import SweepView

    win.open_paths([str(args.sweep)])
    deadline = time.monotonic() + 60
    while not isinstance(win.doc_tabs.currentWidget(), SweepView) and time.monotonic() < deadline:
        _settle(app, 1)
        time.sleep(0.05)
    sweep = win.doc_tabs.currentWidget()
    ok = [i for i in range(len(sweep.df)) if bool(sweep.df.loc[i, "fits"]) and str(sweep.df.loc[i, "profile"])]
    n_tabs = win.doc_tabs.count()
    sweep._open_row(ok[0] if ok else 0)  # what a click on the point does
    deadline = time.monotonic() + 60
    while win.doc_tabs.count() == n_tabs and time.monotonic() < deadline:
        _settle(app, 1)
        time.sleep(0.05)
    point_tab = win.doc_tabs.currentWidget()
    sweep.set_picked([ok[0]] if ok else [])
    for name in args.themes.split(","):
        theme.apply_theme(name)
        win.doc_tabs.setCurrentWidget(sweep)
        _settle(app)
        f = out / f"sweep-{name}.png"
        _save_shot(win, f)
        win.doc_tabs.setCurrentWidget(point_tab)
        _settle(app)
        f = out / f"sweep-point-{name}.png"
        _save_shot(win, f)


if __name__ == "__main__":
    sys.exit(main())
