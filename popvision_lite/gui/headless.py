"""Headless export of one view (``popvision-lite export``): the window's own view classes, drawn offscreen.

``export_view(profile, view, output, compare=None, width=None, height=None, dpi=96, difference=False)``
builds the view (or the compare page) in a hidden top-level widget sized so that the exported plot
is ``width`` x ``height`` pixels at the view's natural font size, and writes PNG / SVG / CSV.
"""

from __future__ import annotations

import time
from pathlib import Path

from popvision_lite.analysis.liveness import liveness_curve
from popvision_lite.analysis.run_totals import run_totals
from popvision_lite.analysis.summary import summary_table
from popvision_lite.errors import ConfigError
from popvision_lite.gui.app import create_app, delete_now
from popvision_lite.gui.export.pictures import export_panel_png, export_table_png
from popvision_lite.gui.export.plots import PLOT_SUFFIXES, Region, export_plot, export_target
from popvision_lite.gui.export.tables import export_table, view_tables
from popvision_lite.gui.state.document import Document
from popvision_lite.gui.views import VIEW_REGISTRY
from popvision_lite.profile.csv_export import table_frame
from popvision_lite.profile.reader import open_profile

DEFAULT_SIZE = (1400, 900)
VERDICT_WIDTH = 900  # the verdict panel: wide enough for its table on a page, as tall as its text needs

# view -> (registry key, plot item key or None for "grab the table widget")
SINGLE = {
    "memory": ("memory", "heatmap"),
    "execution": ("execution", "execution"),
    "roofline": ("roofline", "roofline"),
    "liveness": ("liveness", "liveness"),
    "summary": ("summary", "phases"),
    "ops": ("operations", None),
    "steps": ("execution", "per_step"),
    "verdict": ("summary", "verdict"),   # the Summary's IPU-or-GPU verdict panel (PNG) / its table (CSV)
}
COMPARE = {
    "memory": ("memory", "maps"),
    "liveness": ("liveness", "liveness"),
    "summary": ("summary", "ratios"),
    "ops": ("ops", None),
    "steps": ("steps", "phases"),
    "execution": ("execution", "timeline"),
    "roofline": ("roofline", "roofline"),
}


def _quiet_offscreen_notes() -> None:
    """Drop the offscreen platform's 'does not support propagateSizeHints()' note; keep other messages."""
    import logging

    from PySide6.QtCore import qInstallMessageHandler

    log = logging.getLogger("popvision_lite.gui.qt")

    def handler(_mode, _ctx, msg):
        if "propagateSizeHints" not in msg:
            log.warning("%s", msg)

    qInstallMessageHandler(handler)


def _settle(view=None, seconds: float = 0.15) -> None:
    from PySide6.QtWidgets import QApplication

    refresh = getattr(view, "refresh", None)
    if callable(refresh):
        try:
            refresh()
        except TypeError:
            pass
    end = time.perf_counter() + seconds
    while True:
        QApplication.processEvents()
        if time.perf_counter() >= end:
            break
        time.sleep(0.01)
    wait_ready(view)


READY_TIMEOUT_S = 300.0


def wait_ready(view, timeout: float = READY_TIMEOUT_S) -> None:
    """Process events until a view whose analysis runs on a worker thread (``is_ready()``, e.g. the
    Roofline of a real-size target) has its result, so an export never draws or tabulates a view that
    is still computing."""
    from PySide6.QtWidgets import QApplication

    is_ready = getattr(view, "is_ready", None)
    if not callable(is_ready):
        return
    end = time.perf_counter() + timeout
    while not is_ready():
        if time.perf_counter() >= end:
            raise ConfigError(f"the {type(view).__name__} did not finish its analysis in {timeout:.0f} s")
        QApplication.processEvents()
        time.sleep(0.01)


def fit_item(host, item, width: int, height: int) -> None:
    """Resize ``host`` until ``item`` (as exported) is about ``width`` x ``height`` scene pixels.  The sizes on
    the way are laid out, not painted (a hidden export's every repaint drew the whole view for nobody) and the
    view is not redrawn at each of them (the PNG and SVG of every view of three samples came out byte-identical
    with and without this).  ``host``'s updates are as they were when it returns."""
    target = export_target(item)
    was = host.updatesEnabled()
    host.setUpdatesEnabled(False)
    try:
        for _ in range(5):
            r = target.sceneBoundingRect()
            dw, dh = width - r.width(), height - r.height()
            if abs(dw) < 2 and abs(dh) < 2:
                break
            host.resize(int(min(20000, max(300, host.width() + dw))), int(min(20000, max(300, host.height() + dh))))
            _settle(None, 0.05)
    finally:
        host.setUpdatesEnabled(was)


def steps_region(view) -> Region:
    """What ``--view steps`` draws: the Execution view's per-step chart, the imbalance strip under it (which
    carries the shared time axis) and the legend naming the step kinds' colours, as one picture."""
    import pyqtgraph as pg

    items = view.plot_items()
    chart = items["per_step"]
    parts = [chart, items["imbalance"]]
    layout = chart.parentItem()
    parts += [it for it in getattr(layout, "items", {}) if isinstance(it, pg.LegendItem)]
    return Region(parts)


def _ops_frame(profile):
    """The ops table as stored, plus each op's cycles per training step and its share of the IPU time
    (analysis/run_totals.py: the Operations view's numbers)."""
    rt = run_totals(profile)
    df = table_frame(profile, "ops")
    df["cycles_per_step"] = rt.op_cycles.round().astype("int64")
    df["share_of_ipu_time"] = rt.op_share
    return df


def execution_lanes(profile):
    """The timeline as the Execution view draws it: one row per BSP step in its IPU's lane, with its kind, the
    op's name and its start / end / duration in seconds at the target's clock (``--view steps`` gives the raw
    step table in cycles)."""
    import pandas as pd

    st = profile.stored_table("steps")
    clock = float(profile.target.clock_hz)
    names = profile.stored_table("ops")["name"].astype(str)
    op = st["op_id"].to_numpy()
    op_name = pd.Series(names.to_numpy()[op.clip(0, max(len(names) - 1, 0))] if len(names) else "",
                        index=st.index).where(op >= 0, "")
    return pd.DataFrame({
        "ipu": st["ipu"], "step": st["step"], "kind": st["kind_name"].astype(str), "op": op_name,
        "start_s": st["start_cycle"] / clock, "end_s": st["end_cycle"] / clock,
        "duration_s": (st["end_cycle"] - st["start_cycle"]) / clock,
    }).sort_values(["ipu", "start_s", "step"], kind="stable").reset_index(drop=True)


def _csv_frame(profile, view: str, view_widget):
    """The table a single-profile view exports as CSV."""

    if view == "memory":
        return table_frame(profile, "memory_by_tile")
    if view == "steps":
        return table_frame(profile, "steps")
    if view == "execution":
        return execution_lanes(profile)
    if view == "ops":
        return _ops_frame(profile)
    if view == "liveness":
        return liveness_curve(profile)
    if view == "roofline":
        tables = view_tables(view_widget)
        if not tables:
            return _ops_frame(profile)
        if "measured" not in tables:
            return tables["roofline"]
        # one CSV: the IPU ops, then every measured kernel with whether it was plotted and why not
        import pandas as pd

        ops = tables["roofline"].assign(source="IPU op (emulated)")
        kernels = tables["measured"].assign(source="GPU kernel (measured)")
        return pd.concat([ops, kernels], ignore_index=True, sort=False)
    if view == "summary":
        return summary_table(profile)
    raise ConfigError(f"view {view!r} has no table")


COMPARE_TABLE = {"memory": "per_ipu", "liveness": "liveness", "summary": "headline", "ops": "ops",
                 "steps": "steps", "execution": "steps",
                 "roofline": "roofline"}


def export_view(profile_path, view: str, output, compare=None, width: int | None = None,
                height: int | None = None, dpi: float = 96.0, difference: bool = False,
                torch_trace=None, also=()) -> str:
    """Write ``view`` of ``profile_path`` (compared with ``compare`` when given) to ``output``.
    ``torch_trace``: a PyTorch profiler trace whose GPU kernels the roofline view plots as measured points.
    ``also``: more .png / .svg files of the same plot, written from the same drawing (one build of the view for a
    PNG and an SVG of it); only where ``output`` is a plot too."""
    from PySide6.QtWidgets import QVBoxLayout, QWidget

    _quiet_offscreen_notes()
    suffix = Path(output).suffix.lower()
    also = [Path(p) for p in also]
    if also and (view in ("ops", "verdict") or any(p.suffix.lower() not in PLOT_SUFFIXES
                                                     for p in (Path(output), *also))):
        raise ConfigError(f"only the pictures of a plot are written from one drawing: {view} to "
                          + ", ".join(str(p) for p in (output, *also)))
    table = compare is None and view in SINGLE and suffix == ".csv"
    create_app()
    docs = [Document(open_profile(profile_path))]
    host = None
    try:
        if compare is not None:
            from popvision_lite.gui.compare_window import CompareWindow

            docs.append(Document(open_profile(compare)))
            if view not in COMPARE:
                raise ConfigError(f"view {view!r} has no compare mode; use one of {', '.join(COMPARE)}")
            page_key, item_key = COMPARE[view]
            host = CompareWindow(docs[0], docs[1])
            widget = host.show_page(page_key)
            if difference:
                if not docs[0].profile.target.num_tiles == docs[1].profile.target.num_tiles or \
                        not widget.cmp.tile_by_tile:
                    raise ConfigError(widget.cmp.tile_note or "tiles cannot be compared one to one")
                widget.set_difference(True)
                item_key = "difference"
            if suffix == ".csv":
                df = widget.tables()[COMPARE_TABLE[view]]
                return f"{export_table(df, output)} rows"
        else:
            if torch_trace is not None and view != "roofline":
                raise ConfigError("--torch-trace applies to --view roofline only")
            if table and view not in ("roofline", "verdict"):
                return f"{export_table(_csv_frame(docs[0].profile, view, None), output)} rows"
            reg_key, item_key = SINGLE[view]
            factory = next(f for k, _, f in VIEW_REGISTRY if k == reg_key)
            widget = factory(docs[0])
            host = QWidget()
            lay = QVBoxLayout(host)
            lay.setContentsMargins(0, 0, 0, 0)
            lay.addWidget(widget)
            trace_info = ""
            wait_ready(widget)
            if torch_trace is not None:
                from popvision_lite.analysis.torch_trace import load_torch_trace

                trace_info = widget.show_trace(load_torch_trace(torch_trace), torch_trace)
            if view == "verdict":
                return _export_verdict(widget, host, profile_path, output, suffix, width, height)
            if suffix == ".csv":
                return f"{export_table(_csv_frame(docs[0].profile, view, widget), output)} rows" + trace_info
        w, h = width or DEFAULT_SIZE[0], height or DEFAULT_SIZE[1]
        if height is None and width is not None:
            h = int(round(width * DEFAULT_SIZE[1] / DEFAULT_SIZE[0]))
        host.resize(w + 200, h + 200)
        host.show()
        _settle(widget, 0.2)
        if item_key is None:  # a table view: draw the widget itself
            return _export_table_picture(widget, host, view, output, suffix, width)
        if not callable(getattr(widget, "plot_items", None)):  # the page failed to build: it shows why
            raise ConfigError(f"the {view} view could not be drawn: {getattr(widget, 'text', lambda: '')()}")
        items = widget.plot_items()
        if item_key not in items:
            raise ConfigError(f"the {view} view has no plot {item_key!r} (has {', '.join(items)})")
        item = items[item_key]
        if compare is None and view == "steps":
            item = steps_region(widget)
        # drawn once on the offscreen screen, at the first size (tick labels' widths, which pyqtgraph measures
        # while painting an axis, lay the plot out), and not again at the size exported: the export renders the
        # scene itself, and that paint of the hidden host drew every curve for nobody (a Liveness PNG: a fifth
        # of its CPU).  The PNG and SVG of every view and compare page of four samples are byte-identical with
        # and without it (decision 0488)
        host.setUpdatesEnabled(False)
        fit_item(host, item, w, h)
        _settle(widget, 0.05)
        r = export_target(item).sceneBoundingRect()
        if height is None and abs(r.height() * w / r.width() - h) >= 2:
            h = None  # the plot cannot take that shape (rows of a fixed height): its own, showing all of it
        res = export_plot(item, output, width=w, height=h, dpi=dpi)
        for extra in also:
            export_plot(item, extra, width=w, height=h, dpi=dpi)
        out = f"{res[0]} x {res[1]} px" if isinstance(res, tuple) else f"{res:,} bytes SVG"
        return out + (trace_info if compare is None else "")
    finally:
        if host is not None:
            _delete_now(host)
        for d in docs:
            d.close()


def _export_verdict(widget, host, profile_path, output, suffix: str, width, height) -> str:
    """The verdict panel as a .png picture or its table as .csv; a profile without a verdict is refused."""
    if widget.verdict.result is None:  # the verdict could not be computed for this profile
        why = "" if widget.verdict.failed is None else str(widget.verdict.failed)
        raise ConfigError(f"no verdict to export: {why}" if str(profile_path) in why else
                          f"{profile_path}: no verdict to export" + (f": {why}" if why else ""))
    if suffix == ".csv":
        return f"{export_table(widget.verdict.tables()['verdict'], output)} rows"
    if suffix != ".png":
        raise ConfigError(f"the verdict is a panel: export it as .png or .csv, not {suffix}")
    host.resize(1000, 700)
    host.show()
    _settle(widget, 0.1)
    pw, ph = export_panel_png(widget.verdict, output, width or VERDICT_WIDTH, height or 0)
    return f"{pw} x {ph} px"


def _export_table_picture(widget, host, view: str, output, suffix: str, width) -> str:
    """A table view drawn as a .png of every row (or as many as a picture holds, with a pointer to the CSV)."""
    from PySide6.QtWidgets import QTableView

    if suffix != ".png":
        raise ConfigError(f"the {view} view is a table: export it as .png (a picture) or .csv, not {suffix}")
    tv = widget.findChildren(QTableView)
    if not tv:
        raise ConfigError(f"the {view} view shows no table to draw")
    pw, ph, shown, rows = export_table_png(tv[0], host, output, width,
                                           csv_hint=f"export --view {view} -o {Path(output).stem}.csv")
    return f"{pw} x {ph} px, {shown:,} of {rows:,} rows"


def _delete_now(host) -> None:
    """Close and delete the export's widgets now, not at exit (a loop of exports kept ~14 MB each)."""
    host.close()
    host.deleteLater()
    delete_now()
