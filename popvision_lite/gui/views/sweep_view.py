"""A sweep's results (``popvision-lite sweep`` -> sweep.csv) in one tab: the table plus two plots.

* Throughput vs chips: samples/s against IPUs (log-log), one marker colour per device; filled circles fit,
  red crosses do not fit in tile memory.
* Cost vs throughput: estimated USD per 1 M samples against samples/s (log-log); the Pareto front (no
  other fitting point is both faster and cheaper) is joined by a line and ringed.  Points on a device
  whose spec has no price are not drawn there; the plot says so.

Click a point (or double-click a table row) to open its profile; Ctrl+click points or select two table rows
to pick two, then "Compare picked" opens them in compare mode.  ``plot_items()`` / ``tables()`` make both
plots and the table exportable through File > Export like every other view.

``gui/actions/sweep.py: open_sweep_tab(main_window, path)`` loads a results file off the GUI thread and
adds the tab; the main window calls it for a ``.csv`` or a folder.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyqtgraph as pg
from PySide6.QtCore import QItemSelectionModel, Qt, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from popvision_lite.gui import theme
from popvision_lite.gui.items.log_value_axis import LogValueAxis
from popvision_lite.gui.items.menu_on_demand import plot_kwargs
from popvision_lite.gui.table_model import DISPLAY, TOOLTIP, DataFrameModel, make_table_view, role_int
from popvision_lite.gui.text import plain_html, plain_label, plain_tip
from popvision_lite.gui.theme import DEVICE_COLORS
from popvision_lite.sweep.results import grid_names, pareto_front
from popvision_lite.units import format_count, format_number, format_usd

NO_FIT = "#d62728"
SERIES_AA_LIMIT = 400  # segments of scaling lines drawn antialiased; more are drawn aliased
MAX_SERIES = 60  # per device; with more configurations the scaling lines are left out
BIG = 1000  # points: smaller markers above this many
PICK = "#00a0ff"
TABLE_HEADERS = {"samples_per_second": "samples/s", "peak_tile_memory_pct": "peak tile mem %",
                 "cost_per_1m_samples_usd": "USD / 1M samples", "total_cycles": "cycles",
                 "step_seconds": "step s", "compute_share": "compute", "exchange_share": "exchange",
                 "sync_share": "sync", "stream_copy_share": "stream copy", "host_share": "host", "usd_per_chip_hour": "USD / chip-h"}


MONEY_COLUMNS = ("cost_per_1m_samples_usd", "usd_per_chip_hour")


class _SweepTableModel(DataFrameModel):
    """The results table; a missing number (no price, failed point) shows empty, not 'nan'; money in the one
    money format (``units.format_usd``); a column of whole numbers stored as floats (point, chips: the table
    holds NaN for failed points) as whole numbers, not '1.000'."""

    def _cache_columns(self) -> None:
        super()._cache_columns()
        self._whole = set()
        for j, c in enumerate(self._df.columns):
            v = self._df[c]
            if pd.api.types.is_float_dtype(v):
                f = v.to_numpy(np.float64)
                f = f[np.isfinite(f)]
                if len(f) and np.array_equal(f, np.round(f)) and np.abs(f).max() < 2**53:
                    self._whole.add(j)

    def data(self, index, role=DISPLAY):
        role = role_int(role)  # ints: a flat name such as Qt.DisplayRole costs a lookup per use (table_model.py)
        if role in (DISPLAY, TOOLTIP) and index.isValid():
            v = self._cols[index.column()][index.row()]
            if isinstance(v, float | np.floating):
                if not np.isfinite(v):
                    return "" if role == DISPLAY else "no value (see cost_note / error)"
                if role == DISPLAY and self._names[index.column()] in MONEY_COLUMNS:
                    return format_usd(float(v))
                if role == DISPLAY and index.column() in self._whole:
                    return f"{int(v):,}"
        return super().data(index, role)  # (the base class makes tooltips plain text)


class SweepDocument:
    """What the main window's tab bookkeeping needs of an open sweep (title, path, close)."""

    def __init__(self, df: pd.DataFrame, path):
        self.df = df
        self.path = Path(path)
        self.title = f"{self.path.parent.name}/{self.path.name}" if self.path.is_file() else self.path.name
        self.profile = None

    def close(self) -> None:
        pass


def _legend(plot, offset) -> None:
    """A legend with a translucent background, so points behind it stay visible and its text readable."""
    bg = QColor(theme.colors()["plot_bg"])
    bg.setAlpha(200)
    plot.addLegend(offset=offset, brush=pg.mkBrush(bg), pen=pg.mkPen(theme.colors()["muted"]))


def _fit_range(plot, items) -> None:
    """Show every point of ``items`` with room above them for the legend (axes in log10 units)."""
    xs = np.concatenate([it.data["x"] for it in items]) if items else np.array([])
    ys = np.concatenate([it.data["y"] for it in items]) if items else np.array([])
    if not len(xs):
        return
    x0, x1, y0, y1 = np.nanmin(xs), np.nanmax(xs), np.nanmin(ys), np.nanmax(ys)
    # at least a decade each way, so a log axis always has labelled ticks; markers at the extremes stay
    # whole (10 % of the span beyond the outermost points)
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
    dx, dy = max(x1 - x0, 1.0), max(y1 - y0, 1.0)
    x0, x1 = min(x0, cx - dx / 2), max(x1, cx + dx / 2)
    y0, y1 = min(y0, cy - dy / 2), max(y1, cy + dy / 2)
    plot.setRange(xRange=(x0 - 0.1 * dx, x1 + 0.1 * dx), yRange=(y0 - 0.08 * dy, y1 + 0.3 * dy), padding=0)


def _series(sub: pd.DataFrame, others: list[str], x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """x, y of polylines joining the rows of ``sub`` that share every field in ``others`` (ordered by chips),
    NaN between polylines; groups of one row draw nothing.  One sort, no per-group Python loop."""
    if not len(sub):
        return np.array([]), np.array([])
    # text keys, a missing value as "nan" too (pandas' str dtype keeps NaN, which lexsort cannot compare)
    keys = [np.array([str(v) for v in sub[c].tolist()]) for c in others] if others else []
    order = np.lexsort([sub["chips"].to_numpy(dtype=float), *reversed(keys)]) if keys else \
        np.argsort(sub["chips"].to_numpy(dtype=float), kind="stable")
    idx = sub.index.to_numpy()[order]
    new = np.ones(len(idx), dtype=bool)  # True where a new group starts
    if keys:
        new[1:] = np.zeros(len(idx) - 1, dtype=bool)
        for k in keys:
            ks = k[order]
            new[1:] |= ks[1:] != ks[:-1]
    else:
        new[1:] = False
    group = np.cumsum(new)
    sizes = np.bincount(group)
    keep = sizes[group] > 1
    idx, new = idx[keep], new[keep]
    if not len(idx):
        return np.array([]), np.array([])
    # insert a NaN before every group start except the first
    starts = np.flatnonzero(new)[1:]
    xs = np.insert(x[idx].astype(float), starts, np.nan)
    ys = np.insert(y[idx].astype(float), starts, np.nan)
    return xs, ys


def _log10(v) -> np.ndarray:
    v = np.asarray(v, dtype=float)
    out = np.full(v.shape, np.nan)
    ok = np.isfinite(v) & (v > 0)
    out[ok] = np.log10(v[ok])
    return out


class SweepView(QWidget):
    """Table + throughput plot + cost plot of one sweep; emits what the user asks to open."""

    open_requested = Signal(str, str)  # a profile path, the tab title (the point's grid values)
    compare_requested = Signal(str, str)

    def __init__(self, df: pd.DataFrame, path=None, parent=None):
        super().__init__(parent)
        self.df = df.reset_index(drop=True)
        self.document = SweepDocument(self.df, path or df.attrs.get("path", "sweep.csv"))
        self.picked: list[int] = []  # row indices of self.df
        ok = (self.df["status"] == "ok").to_numpy()
        fits = self.df["fits"].fillna(False).astype(bool).to_numpy()
        self.ok, self.fits = ok, fits & ok
        self.front = pareto_front(np.where(self.fits, self.df["samples_per_second"], np.nan),
                                  self.df["cost_per_1m_samples_usd"])
        # the fields that really vary (a grid field given one value is a constant of the sweep)
        self.grid = [g for g in grid_names(self.df) if g in self.df and self.df[g].nunique(dropna=True) > 1]

        n_fail = int((~ok).sum())
        self.header = QLabel(
            f"<b>{plain_html(self.document.path)}</b> — {len(self.df)} points ({int(self.fits.sum())} fit, "
            f"{int((ok & ~fits).sum())} do not fit, {n_fail} failed); varied: "
            + (", ".join(f"<b>{plain_html(g)}</b>" for g in self.grid) or "nothing"))
        self.header.setTextFormat(Qt.RichText)
        self.header.setWordWrap(True)
        self.hint = plain_label("Click a point to open its profile · Ctrl+click (or select two rows) to pick two, "
                           "then Compare picked")
        self.hint.setStyleSheet("color: gray")
        self.compare_button = QPushButton("Compare picked")
        self.compare_button.setToolTip("Open the two picked points' profiles side by side (compare mode)")
        self.compare_button.setEnabled(False)
        self.compare_button.clicked.connect(self.compare_picked)
        self.clear_button = QPushButton("Clear picks")
        self.clear_button.clicked.connect(lambda: self.set_picked([]))

        # log axes labelled at 1, 2, 5 x 10^n in each quantity's own format (units.py)
        self.throughput_plot = pg.PlotWidget(**plot_kwargs(axisItems={"bottom": LogValueAxis("bottom", format_count),
                                                                      "left": LogValueAxis("left", format_count)}))
        self.cost_plot = pg.PlotWidget(**plot_kwargs(axisItems={"bottom": LogValueAxis("bottom", format_count),
                                                                "left": LogValueAxis("left", format_usd)}))
        self.hover_labels = {}
        for plot in (self.throughput_plot, self.cost_plot):
            label = pg.TextItem("", anchor=(0, 1), color=theme.colors()["plot_fg"],
                                fill=pg.mkBrush(theme.colors()["plot_bg"]), border=pg.mkPen(theme.colors()["muted"]))
            label.setZValue(100)
            label.hide()
            plot.addItem(label, ignoreBounds=True)
            self.hover_labels[plot] = label
        self._build_throughput()
        self._build_cost()

        shown = self._table_frame()
        self.model = _SweepTableModel(shown, headers=TABLE_HEADERS)
        self.table = make_table_view(self.model, "One row per sweep point; double-click to open its profile")
        self.table.setObjectName("sweep")
        self.table.setSelectionMode(QAbstractItemView.ExtendedSelection)
        self.table.horizontalHeader().setResizeContentsPrecision(25)  # 10,000 rows: sizes from the first rows
        self.table.resizeColumnsToContents()
        self.table.doubleClicked.connect(lambda idx: self._open_row(self._row_of(idx.row())))
        self.table.selectionModel().selectionChanged.connect(self._table_selection)

        plots = QSplitter(Qt.Horizontal)
        plots.addWidget(self.throughput_plot)
        plots.addWidget(self.cost_plot)
        main = QSplitter(Qt.Vertical)
        main.addWidget(plots)
        main.addWidget(self.table)
        main.setSizes([500, 300])
        bar = QHBoxLayout()
        bar.addWidget(self.hint, 1)
        bar.addWidget(self.clear_button)
        bar.addWidget(self.compare_button)
        lay = QVBoxLayout(self)
        lay.addWidget(self.header)
        lay.addWidget(main, 1)
        lay.addLayout(bar)

    # ------------------------------------------------------------------ building
    def _table_frame(self) -> pd.DataFrame:
        df = self.df.copy()
        df.insert(1, "pareto", self.front)
        lead = ["point", "status", "pareto", *self.grid, "fits", "chips", "samples_per_second",
                "cost_per_1m_samples_usd", "peak_tile_memory_pct"]
        lead = [c for c in dict.fromkeys(lead) if c in df.columns]
        return df[lead + [c for c in df.columns if c not in lead]]

    def _row_of(self, table_row: int) -> int:
        return int(self.model.row(table_row)["point"]) if "point" in self.model.df else table_row

    def _devices(self) -> list[str]:
        return list(dict.fromkeys(self.df["device"].astype(str))) if "device" in self.df else [""]

    def _spots(self, mask, x, y) -> list[dict]:
        return [{"pos": (x[i], y[i]), "data": int(i)} for i in np.flatnonzero(mask & np.isfinite(x) & np.isfinite(y))]

    def _scatter(self, plot, spots, name, symbol, color, size=10, filled=True) -> pg.ScatterPlotItem:
        if len(self.df) > BIG:  # thousands of points: small markers, so the classes stay distinguishable
            size = max(5, size // 2)
        c = QColor(color)
        item = pg.ScatterPlotItem(spots=spots, symbol=symbol, size=size, name=name,
                                  pen=pg.mkPen(c, width=1.5), brush=pg.mkBrush(c) if filled else None,
                                  hoverable=True, tip=lambda x, y, data: plain_tip(self._tip(x, y, data)), hoverSize=size + 4)
        item.sigClicked.connect(self._clicked)
        item.sigHovered.connect(lambda _item, points, _ev, pl=plot: self._hovered(pl, points))
        plot.addItem(item)
        return item

    def point_title(self, i: int) -> str:
        """A point's name as people read it: the model and its grid values ('mlp batch=16 ipu-bow')."""
        r = self.df.iloc[int(i)]
        model = str(r["model"]) if "model" in r and pd.notna(r["model"]) else ""
        vals = [str(r[g]) if g == "device" else f"{g}={r[g]}" for g in self.grid if g in r]
        return " ".join([model, *vals]).strip() or f"point {_as_whole(r['point'])}"

    def _tip(self, x, y, data) -> str:
        r = self.df.iloc[int(data)]
        cost = r.get("cost_per_1m_samples_usd")
        note = str(r.get("cost_note", "") or "")
        cost_s = (f"{format_usd(cost)} per 1M samples" + (" (borrowed price)" if "priced at" in note else "")
                  if pd.notna(cost) else f"no price ({note})" if note else "no price")
        fits = r.get("fits")
        # a numpy / pandas bool is no Python True: tested with "is", a fitting point read "fit unknown" (issue 46)
        fit_s = "fit unknown" if fits is None or pd.isna(fits) else "fits" if bool(fits) else "does NOT fit"
        return (f"point {_as_whole(r['point'])}: {self.point_title(int(data))}\n"
                f"{format_number(r['samples_per_second'])} samples/s on {_as_whole(r['chips'])} chip(s), {cost_s}\n"
                f"{fit_s} (peak tile {format_number(r['peak_tile_memory_pct'])}%)"
                "\nclick: open profile · Ctrl+click: pick for compare")

    def _hovered(self, plot, points) -> None:
        """Hovering a point shows its row beside it (plain text), and the same text as a tooltip."""
        label = self.hover_labels[plot]
        if not len(points):
            label.hide()
            plot.setToolTip("")
            return
        pt = points[0]
        text = self._tip(None, None, pt.data())
        label.setText(text)
        label.setPos(pt.pos())
        label.show()
        plot.setToolTip(text)

    def _build_throughput(self) -> None:
        p = self.throughput_plot
        p.setTitle("Throughput vs chips")
        p.setLabel("bottom", "chips (IPUs)")
        p.setLabel("left", "samples/s")
        p.setLogMode(x=True, y=True)
        p.showGrid(x=True, y=True, alpha=0.25)
        _legend(p, (10, 10))
        p.getAxis("left").enableAutoSIPrefix(False)
        chips = _log10(self.df["chips"]) if "chips" in self.df else np.full(len(self.df), np.nan)
        sps = _log10(self.df["samples_per_second"])
        dev = self.df["device"].astype(str).to_numpy() if "device" in self.df else np.array([""] * len(self.df))
        self.throughput_items = []
        self.series_items = []
        # faint lines join the points that differ only in chips: how each configuration scales
        others = [g for g in self.grid if g not in ("ipus", "chips", "replicas", "pipeline_stages")]
        for i, d in enumerate(self._devices()):
            xs, ys = _series(self.df[self.ok & (dev == d)], others, chips, sps)
            if 0 < int(np.isnan(xs).sum()) + 1 <= MAX_SERIES:  # hundreds of lines are a hairball, not a trend
                c = QColor(DEVICE_COLORS[i % len(DEVICE_COLORS)])
                c.setAlpha(90)
                # antialiased translucent paths cost ~0.3 ms per segment to paint in Qt's raster engine (3.3 s
                # for a 10,000-point sweep): thin aliased lines once there are many
                many = len(xs) > SERIES_AA_LIMIT
                line = pg.PlotCurveItem(xs, ys, pen=pg.mkPen(c, width=1 if many else 1.2), connect="finite",
                                        antialias=not many)
                p.addItem(line)
                self.series_items.append(line)
        for i, d in enumerate(self._devices()):
            spots = self._spots(self.fits & (dev == d), chips, sps)
            if spots:
                self.throughput_items.append(self._scatter(p, spots, f"{d} fits", "o",
                                                           DEVICE_COLORS[i % len(DEVICE_COLORS)]))
        spots = self._spots(self.ok & ~self.fits, chips, sps)
        if spots:
            self.throughput_items.append(self._scatter(p, spots, "does not fit", "x", NO_FIT, size=13))
        self.pick_items = [pg.ScatterPlotItem(symbol="o", size=20, pen=pg.mkPen(PICK, width=2.5), brush=None)]
        p.addItem(self.pick_items[0])
        if self.throughput_items:
            _fit_range(p, self.throughput_items)

    def _build_cost(self) -> None:
        p = self.cost_plot
        p.setTitle("Cost vs throughput (Pareto front joined)")
        p.setLabel("bottom", "samples/s")
        p.setLabel("left", "USD per 1M samples")
        p.setLogMode(x=True, y=True)
        p.showGrid(x=True, y=True, alpha=0.25)
        _legend(p, (-10, 10))
        p.getAxis("left").enableAutoSIPrefix(False)
        x = _log10(self.df["samples_per_second"])
        y = _log10(self.df["cost_per_1m_samples_usd"])
        dev = self.df["device"].astype(str).to_numpy() if "device" in self.df else np.array([""] * len(self.df))
        self.cost_items = []
        for i, d in enumerate(self._devices()):
            spots = self._spots(self.fits & (dev == d), x, y)
            if spots:
                self.cost_items.append(self._scatter(p, spots, f"{d} fits", "o",
                                                     DEVICE_COLORS[i % len(DEVICE_COLORS)]))
        spots = self._spots(self.ok & ~self.fits, x, y)
        if spots:
            self.cost_items.append(self._scatter(p, spots, "does not fit", "x", NO_FIT, size=13))
        idx = np.flatnonzero(self.front)
        idx = idx[np.argsort(x[idx])]
        if len(idx):
            self.front_line = pg.PlotDataItem(x[idx], y[idx], pen=pg.mkPen(theme.colors()["good"], width=2),
                                              name="Pareto front")
            p.addItem(self.front_line)
            ring = self._scatter(p, self._spots(self.front, x, y), None, "o", theme.colors()["good"], size=17,
                                 filled=False)
            self.cost_items.append(ring)
        priced = np.isfinite(y)
        if not priced[self.ok].any():
            notes = sorted(set(self.df.loc[self.ok, "cost_note"].dropna().astype(str))) if "cost_note" in self.df else []
            text = pg.TextItem("No cost estimate: " + ("; ".join(notes) or "no prices"), anchor=(0.5, 0.5),
                               color=theme.colors()["muted"])
            p.addItem(text)
            text.setPos(0.5, 0.5)
            p.setLogMode(x=False, y=False)
            p.setRange(xRange=(0, 1), yRange=(0, 1))
            p.showGrid(x=False, y=False)
            p.setTitle("Cost vs throughput: no prices")
            for ax in ("left", "bottom"):
                p.getAxis(ax).setTicks([[], []])
            p.getPlotItem().legend.hide()
            self.no_cost_text = text
        else:
            missing = sorted(set(self.df.loc[self.ok & ~priced, "device"].astype(str))) if "device" in self.df else []
            notes = self.df["cost_note"].astype(str) if "cost_note" in self.df else pd.Series([""] * len(self.df))
            borrowed = sorted(set(self.df.loc[self.ok & priced & notes.str.contains("priced at").to_numpy(),
                                              "device"].astype(str))) if "device" in self.df else []
            said = (["no price for " + ", ".join(missing)] if missing else []) + \
                ([", ".join(borrowed) + (" has" if len(borrowed) == 1 else " have") + " no published price of "
                  "its own: costed at another IPU's rate"] if borrowed else [])
            if said:
                p.setTitle("Cost vs throughput (Pareto front joined; " + "; ".join(said) + ")")
        self.pick_items.append(pg.ScatterPlotItem(symbol="o", size=20, pen=pg.mkPen(PICK, width=2.5), brush=None))
        p.addItem(self.pick_items[1])
        if self.cost_items and not hasattr(self, "no_cost_text"):
            _fit_range(p, self.cost_items)

    # ------------------------------------------------------------------ interaction
    def _clicked(self, item, points, ev=None) -> None:
        if not len(points):
            return
        i = int(points[0].data())
        mods = ev.modifiers() if ev is not None and hasattr(ev, "modifiers") else Qt.NoModifier
        if mods & (Qt.ControlModifier | Qt.ShiftModifier | Qt.MetaModifier):
            self.toggle_pick(i)
        else:
            self._open_row(i)

    def _open_row(self, i: int) -> None:
        path = self.df.loc[i, "profile"] if 0 <= i < len(self.df) else ""
        if isinstance(path, str) and path:
            self.open_requested.emit(path, self.point_title(i))
        else:
            err = self.df.loc[i, "error"] if "error" in self.df else ""
            self.hint.setText(f"Point {i} has no profile: {err or 'it failed'}")

    def toggle_pick(self, i: int) -> None:
        picked = [p for p in self.picked if p != i] if i in self.picked else (self.picked + [i])[-2:]
        self.set_picked(picked)
        sm = self.table.selectionModel()  # show the picks in the table too, without re-entering _table_selection
        sm.blockSignals(True)
        try:
            self.select_rows(self.picked)
        finally:
            sm.blockSignals(False)
        self.table.viewport().update()

    def set_picked(self, rows: list[int]) -> None:
        self.picked = [int(r) for r in rows if self.df.loc[int(r), "status"] == "ok"][-2:]
        x1 = _log10(self.df["chips"]) if "chips" in self.df else None
        xs = _log10(self.df["samples_per_second"])
        yc = _log10(self.df["cost_per_1m_samples_usd"])
        sel = np.array(self.picked, dtype=int)
        if x1 is not None:
            self.pick_items[0].setData(x=x1[sel], y=xs[sel])
        keep = sel[np.isfinite(yc[sel])] if len(sel) else sel
        self.pick_items[1].setData(x=xs[keep], y=yc[keep])
        self.compare_button.setEnabled(len(self.picked) == 2)
        self.compare_button.setText(f"Compare picked ({len(self.picked)}/2)")

    def _table_selection(self, *_):
        rows = sorted({self._row_of(ix.row()) for ix in self.table.selectionModel().selectedRows()})
        if rows:
            self.set_picked(rows[-2:])

    def select_rows(self, rows: list[int]) -> None:
        """Select these points in the table (as a user's click / Ctrl+click there would)."""
        sm = self.table.selectionModel()
        sm.clearSelection()
        pts = list(self.model.df["point"])
        for r in rows:
            t = pts.index(r)
            sm.select(self.model.index(t, 0), QItemSelectionModel.Select | QItemSelectionModel.Rows)
            self.table.scrollTo(self.model.index(t, 0))

    def compare_picked(self) -> None:
        if len(self.picked) == 2:
            a, b = (str(self.df.loc[i, "profile"]) for i in self.picked)
            self.compare_requested.emit(a, b)

    # ------------------------------------------------------------------ export protocol
    def plot_items(self) -> dict:
        return {"throughput_vs_chips": self.throughput_plot.getPlotItem(),
                "cost_vs_throughput": self.cost_plot.getPlotItem()}

    def tables(self) -> dict:
        return {"sweep": self.model.df}


def _as_whole(v) -> str:
    """A whole number as one ('point 3', '1 chip(s)', not 'point 3.0': a CSV column reads as floats when a failed
    point leaves a gap in it)."""
    try:
        f = float(v)
    except (TypeError, ValueError):
        return str(v)
    return f"{int(f)}" if f.is_integer() else str(v)
