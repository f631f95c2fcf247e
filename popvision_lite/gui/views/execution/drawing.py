"""Drawing the execution view's lanes at the level of detail the pixels allow.

Every redraw reads only what is visible, bounded by the pixel size (see
:mod:`popvision_lite.analysis.execution`): exact rectangles (one BarGraphItem per colour class) when few
steps and tiles are visible, else rasters (ImageItem) of kind shares and busy fractions per pixel.  Items are
rebased to the view start (``setPos(origin)`` + small local coordinates) to avoid float artefacts on long
runs.  A mixin of :class:`~.view.ExecutionView`.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF
from PySide6.QtGui import QFont

from popvision_lite.analysis import execution as ex
from popvision_lite.gui.theme import STEP_KIND_COLORS
from popvision_lite.profile.schema import STEP_KINDS

LABEL_MIN_PX = 70    # op names on steps at least this wide
MAX_LABELS = 80
EXACT_MIN_ROW_PX = 3.0


def util_to_index(util: np.ndarray) -> np.ndarray:
    """Busy fraction (nan = no step) -> uint8 LUT index (fast ImageItem path, no float rescale)."""
    t = np.multiply(util, 254.0, dtype=np.float32)
    np.clip(t, 0.0, 254.0, out=t)
    out = np.empty(util.shape, dtype=np.uint8)
    with np.errstate(invalid="ignore"):
        out[...] = t
    out[np.isnan(util)] = 255
    return out


def imbalance_ticks(top_log10: float) -> list[list[tuple[float, str]]]:
    """Ticks of the log-scale imbalance axis up to 10**top_log10: labelled 1, 10, 100 ... (and 2, 5 when the
    range is under two decades), the others unlabelled ("1" = every tile equally busy)."""
    major, minor = [], []
    for e in range(0, int(np.ceil(top_log10)) + 1):
        for m in (1, 2, 5):
            v = m * 10**e
            if np.log10(v) > top_log10 + 1e-9:
                continue
            if m == 1 or top_log10 < 2:
                major.append((float(np.log10(v)), f"{v:g}"))
            else:
                minor.append((float(np.log10(v)), ""))
    return [major, minor]


def kind_share_image(index: ex.StepIndex, x0: float, x1: float, cols: int, rows: int = 24) -> np.ndarray:
    """(rows, cols, 4) RGBA: each pixel column of [x0, x1) split bottom-up into the share of each step kind
    (:meth:`~popvision_lite.analysis.execution.StepIndex.kind_cycles`); transparent where no step runs.  The
    step lane of the Execution view and the per-IPU lanes of compare's Execution page draw it when too many
    steps are visible for one rectangle each."""
    edges = np.linspace(x0, x1, cols + 1)
    cyc = index.kind_cycles(edges)
    tot = cyc.sum(axis=0)
    frac = np.divide(cyc, tot, out=np.zeros_like(cyc), where=tot > 0)
    cum = np.cumsum(frac, axis=0)                               # (kinds, cols)
    rf = (np.arange(rows) + 0.5) / rows
    kind_at = (cum[None, :, :] < rf[:, None, None]).sum(axis=1)  # (rows, cols)
    kind_at = np.where(tot[None, :] > 0, np.minimum(kind_at, len(STEP_KINDS) - 1), len(STEP_KINDS))
    return kind_lut()[kind_at[::-1]]


def lane_indexes(steps, num_ipus: int) -> list[ex.StepIndex]:
    """One :class:`~popvision_lite.analysis.execution.StepIndex` per IPU lane: the IPU's own steps and the
    steps on every IPU (ipu = -1), for the per-lane kind shares when zoomed out."""
    ipu = steps["ipu"]
    return [ex.StepIndex(steps[(ipu == i) | (ipu < 0)], 1) for i in range(int(num_ipus))]


def kind_lut() -> np.ndarray:
    """RGBA of each step kind, then transparent (no step)."""
    return np.array([pg.mkColor(STEP_KIND_COLORS[k]).getRgb() for k in STEP_KINDS] + [(0, 0, 0, 0)],
                    dtype=np.uint8)


class LaneDrawing:
    """Mixin: redraws the step lane, tile lanes, per-step chart and highlights for the visible range."""

    # ------------------------------------------------------------------ redraw (LOD)
    def refresh(self):
        """Recompute what is visible and redraw every lane (called debounced on range changes)."""
        self._timer.stop()
        if self._closed:
            return
        x0, x1 = self.x_range()
        y0, y1 = self.y_range()
        w, h = self._pixels()
        origin = float(np.floor(x0))
        self._draw_phases(x0, x1, w)
        self._draw_step_lane(x0, x1, w, origin)
        self._draw_tiles(x0, x1, y0, y1, w, h, origin)
        self._draw_chart(x0, x1, w, origin)
        self._draw_highlight(x0, x1, w, origin)
        self.redrawn.emit()

    def _draw_step_lane(self, x0, x1, w, origin):
        idx = self.index
        i0, i1 = idx.visible(x0, x1)
        for t in self.labels:
            t.hide()
        if i1 - i0 <= 2 * w:
            self.step_img.hide()
            ii = np.arange(i0, i1)
            n = max(1, self.nipu)
            for k, bar in enumerate(self.step_bars):
                m = ii[idx.kind[ii] == k]
                # one sub-lane per IPU (pipelined runs overlap in time); all-IPU steps span the lane
                ip = idx.ipu[m]
                bar.setOpts(x0=idx.start[m] - origin, width=idx.dur[m],
                            y0=np.where(ip >= 0, np.clip(ip, 0, n - 1) / n, 0.0),
                            height=np.where(ip >= 0, 1.0 / n, 1.0))
                bar.setPos(origin, 0)
                bar.show()
            self._draw_labels(ii, x0, x1, w)
        else:
            for bar in self.step_bars:
                bar.hide()
            if self.nipu > 1:  # one band per IPU (IPU 0 at the bottom, as the bars): stages overlap in time
                lanes = getattr(self, "_lane_indexes", None)
                if lanes is None:
                    lanes = self._lane_indexes = lane_indexes(self.profile.steps, self.nipu)
                rows = max(4, 48 // self.nipu)
                img = np.concatenate([kind_share_image(lane, x0, x1, w, rows) for lane in lanes], axis=0)
            else:
                img = kind_share_image(idx, x0, x1, w)
            self.step_img.setImage(img, autoLevels=False)
            self.step_img.setPos(origin, 0)
            self.step_img.setRect(QRectF(x0 - origin, 0.0, x1 - x0, 1.0))
            self.step_img.show()

    def _draw_labels(self, ii, x0, x1, w):
        idx = self.index
        px = w / max(x1 - x0, 1e-9)
        wide = ii[(idx.dur[ii] * px >= LABEL_MIN_PX) & (idx.op_id[ii] >= 0)][:MAX_LABELS]
        while len(self.labels) < len(wide):
            t = pg.TextItem(color="#ffffff", anchor=(0, 0.5))
            t.setFont(QFont("Sans", 8))
            self.step_plot.addItem(t)
            self.labels.append(t)
        for t, i in zip(self.labels, wide, strict=False):
            name = self.names.get(int(idx.op_id[i]), "")
            chars = int(idx.dur[i] * px / 6.5)
            text = name if len(name) <= chars else ("…" + name[-max(chars - 1, 1):])
            t.setText(text)
            t.setPos(max(float(idx.start[i]), x0), 0.5)
            t.show()

    def _tile_span(self, y0, y1):
        t0 = max(0, int(np.floor(y0)))
        t1 = min(self.ntiles, int(np.ceil(y1)))
        return t0, max(t0 + 1, t1)

    def _draw_tiles(self, x0, x1, y0, y1, w, h, origin):
        idx = self.index
        t0, t1 = self._tile_span(y0, y1)
        i0, i1 = idx.visible(x0, x1)
        rows_px = h / max(y1 - y0, 1e-9)
        n_cells = (i1 - i0) * (t1 - t0)
        exact = (rows_px >= EXACT_MIN_ROW_PX and n_cells <= ex.MAX_EXACT_RECTS // 2
                 and (i1 - i0) <= w)
        if exact:
            self.last_mode = "rects"
            self.tile_img.hide()
            self.colorbar.hide()  # colours are step kinds here, not a busy scale
            cells = ex.exact_cells(self.profile, idx, i0, i1, t0, t1)
            self.last_cells = cells
            self.last_raster = None
            y = cells.tile.astype(float) + 0.1
            self.wait_bars.setOpts(x0=cells.start + cells.busy - origin, width=cells.wait, y0=y,
                                   height=np.full(len(y), 0.8))
            self.wait_bars.setPos(origin, 0)
            self.wait_bars.show()
            for k, bar in enumerate(self.busy_bars):
                m = (cells.kind == k) & (cells.busy > 0)
                bar.setOpts(x0=cells.start[m] - origin, width=cells.busy[m], y0=y[m],
                            height=np.full(int(m.sum()), 0.8))
                bar.setPos(origin, 0)
                bar.show()
            self.status.setText(f"Steps {i0:,}-{i1 - 1:,}, tiles {t0:,}-{t1 - 1:,}: every step of every tile drawn "
                                f"({len(cells.step):,} rectangles)")
            return
        self.wait_bars.hide()
        for bar in self.busy_bars:
            bar.hide()
        self.colorbar.show()
        rows = max(1, min(int(h), t1 - t0))
        r = ex.tile_raster(self.profile, idx, x0, x1, w, t0, t1, rows)
        self.last_raster = r
        self.last_cells = None
        self.last_mode = r.source
        # resample non-uniform tile rows onto uniform pixel rows covering [t0, t1)
        ny = max(1, min(rows, int(h)))
        centres = t0 + (np.arange(ny) + 0.5) * (t1 - t0) / ny
        ri = np.clip(np.searchsorted(r.row_tiles, centres, side="right") - 1, 0, r.util.shape[0] - 1)
        same = len(ri) == r.util.shape[0] and bool((ri == np.arange(len(ri))).all())
        img = util_to_index(r.util if same else r.util[ri])
        self.tile_img.setImage(img, autoLevels=False, levels=(0, 255))
        self.tile_img.setPos(origin, 0)
        self.tile_img.setRect(QRectF(r.edges[0] - origin, float(t0), r.edges[-1] - r.edges[0], float(t1 - t0)))
        self.tile_img.show()
        self.status.setText(f"Steps {i0:,}-{max(i0, i1 - 1):,}, tiles {t0:,}-{t1 - 1:,}: "
                            + raster_note(r.source, r.level) + "; zoom in (W, Ctrl+wheel) for single steps")

    def _draw_chart(self, x0, x1, w, origin):
        b = ex.step_bins(self.index, x0, x1, w)
        self.last_bins = b
        base = np.zeros(len(b.left))
        order = [STEP_KINDS.index(k) for k in ("compute", "exchange_internal", "exchange_global",
                                                 "stream_copy", "sync")]
        for k in order:
            hgt = b.per_step_cycles[k]
            self.chart_bars[k].setOpts(x0=b.left - origin, width=b.right - b.left, y0=base.copy(), height=hgt)
            self.chart_bars[k].setPos(origin, 0)
            base = base + hgt
        top = float(np.nanmax(base)) if len(base) else 1.0
        self.chart_vb.setYRange(0, max(top, 1.0) * 1.1, padding=0)  # the tallest bar whole, with its top edge
        self.chart_plot.setLabel("left", "cycles / step" if b.per_step else "mean cycles/step")
        # imbalance on a log scale: a step where a few tiles work while the rest wait reaches max/mean in the
        # hundreds, and on a linear axis it flattened every other step onto the line at 1
        m = np.isfinite(b.imbalance) & (b.imbalance > 0)
        xs = np.column_stack([b.left[m], b.right[m]]).ravel() - origin
        ys = np.repeat(np.log10(np.maximum(b.imbalance[m], 1.0)), 2)
        conn = np.zeros(len(xs), dtype=bool)
        conn[0::2] = True
        self.imb_curve.setData(xs, ys, connect=conn)
        self.imb_curve.setPos(origin, 0)
        hi = float(ys.max()) if len(ys) else np.log10(2.0)
        top = max(hi, np.log10(1.5)) * 1.08
        self.imb_vb.setYRange(0.0, top, padding=0)
        self.imb_plot.getAxis("left").setTicks(imbalance_ticks(top))

    def _draw_tile_band(self, x0, x1, origin):
        """Selected tiles (from the memory view, an op's tiles ...) as bands across the lanes."""
        t = np.unique(self.selected_tiles)
        if len(t) == 0:
            self.tile_band.hide()
            return
        brk = np.flatnonzero(np.diff(t) != 1) + 1
        a = t[np.concatenate([[0], brk])]
        b = t[np.concatenate([brk - 1, [len(t) - 1]])] + 1
        self.tile_band.setOpts(x0=np.zeros(len(a)), width=np.full(len(a), x1 - x0), y0=a.astype(float),
                               height=(b - a).astype(float))
        self.tile_band.setPos(x0, 0)
        self.tile_band.show()

    def _draw_highlight(self, x0, x1, w, origin):
        self._draw_tile_band(x0, x1, origin)
        hs = self.highlight_steps
        if len(hs) == 0:
            self.step_hl.hide()
            self.tile_hl.hide()
            return
        i0, i1 = self.index.visible(x0, x1)
        vis = hs[(hs >= i0) & (hs < i1)]
        starts, ends = self.index.start[vis].astype(float), self.index.end[vis].astype(float)
        if len(vis) > 2 * w:  # merge to pixel resolution
            px = (x1 - x0) / w
            cells = np.unique(((starts - x0) // px).astype(np.int64))
            starts = x0 + cells * px
            ends = starts + px
        self.step_hl.setOpts(x0=starts - origin, width=ends - starts, y0=np.zeros(len(starts)),
                             height=np.ones(len(starts)))
        self.step_hl.setPos(origin, 0)
        self.step_hl.show()
        self.tile_hl.setOpts(x0=starts - origin, width=ends - starts, y0=np.zeros(len(starts)),
                             height=np.full(len(starts), float(self.ntiles)))
        self.tile_hl.setPos(origin, 0)
        self.tile_hl.show()


def raster_note(source: str, level) -> str:
    """What one pixel of the tile raster shows, in words (not the internal source name)."""
    if source == "window":
        return "each pixel is the busy share of its steps and tiles, read from the step x tile data"
    if source.startswith("summary"):
        s, t = (int(level[0]), int(level[1])) if level else (1, 1)
        tiles = "one IPU's tiles" if t == 0 else f"{t:,} tile{'s' if t != 1 else ''}"
        return f"each pixel is the mean busy share of blocks of {s:,} steps x {tiles} (stored summary)"
    return "no step x tile data in this range"
