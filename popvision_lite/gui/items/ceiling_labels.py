"""``CeilingLabelsItem``: the Roofline plot's ceiling labels, placed so that none covers another label or any
point (in pixels, after layout and again on resize: text keeps its pixel size while the axes scale).

Each label lies on a translucent patch of the plot background (lines and points under it do not strike
through it), above every line and point and below the selection rings and the hover read-out (z 15).
Memory-roof labels (rotated, on their diagonal) are placed first, highest roof first, trying positions from
the left edge to the ridge, above then below the line; then the compute-ceiling labels, highest peak first:
IPU labels at the right edge, GPU labels at their ridge, above their line, else below, moving along the line
past what is in the way, then trying the other end.  A label with no free place anywhere is taken off the
plot and its text listed in ``unplaced`` (the view names those ceilings under the plot).  (H100 / H200 both
989 TFLOP/s, A100 / V100 FP32 19.5 vs 15.7 wrote one label over another; IPU-Links' label lay over the BERT
ops' points.)
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF
from PySide6.QtGui import QColor

from popvision_lite.gui import theme

# a label may touch a point's outline by this many pixels (anti-aliasing), not more
POINT_SLACK_PX = 1.0
MOVES = 12          # steps along its line a compute-ceiling label takes past what is in the way
ROOF_STEPS = 16     # positions tried along a memory roof's diagonal
EDGE_INSET = 0.05   # decades between a right-aligned label and the right edge
KEPT_PLACEMENTS = 8  # placements kept for the layouts seen most recently


def scene_outline(item: pg.TextItem):
    """The text's own (possibly rotated) outline in scene coordinates, without the text document's
    4-px margin (two labels whose margins touch do not cover each other)."""
    return item.textItem.mapToScene(item.textItem.boundingRect().adjusted(3, 3, -3, -3))


def overlap_area(a, b) -> float:
    """Area (px²) two convex outlines share."""
    if not a.boundingRect().intersects(b.boundingRect()) or not a.intersects(b):
        return 0.0
    pts = [(p.x(), p.y()) for p in a.intersected(b)]
    if len(pts) < 3:
        return 0.0
    return 0.5 * abs(sum(x0 * y1 - x1 * y0 for (x0, y0), (x1, y1) in zip(pts, pts[1:] + pts[:1], strict=True)))


def point_discs(plot_item: pg.PlotItem, scatters) -> np.ndarray:
    """(n, 3) scene x, y and radius (px) of every point of ``scatters`` (ScatterPlotItems of ``plot_item``)."""
    tr = plot_item.getViewBox().childGroup.sceneTransform()
    out = []
    for sp in scatters:
        d = sp.data
        if not len(d):
            continue
        x, y = d["x"].astype(float), d["y"].astype(float)
        size = d["size"].astype(float)
        size = np.where(size < 0, float(sp.opts["size"]), size)
        ok = np.isfinite(x) & np.isfinite(y)
        sx = tr.m11() * x + tr.m21() * y + tr.dx()
        sy = tr.m12() * x + tr.m22() * y + tr.dy()
        out.append(np.stack([sx[ok], sy[ok], size[ok] / 2.0], axis=1))
    return np.concatenate(out) if out else np.zeros((0, 3))


def points_under(item: pg.TextItem, discs: np.ndarray, slack: float = POINT_SLACK_PX) -> np.ndarray:
    """Mask of the discs that the text of ``item`` (its own rotated outline, less the blank margin) covers."""
    if not len(discs):
        return np.zeros(0, dtype=bool)
    inv, ok = item.textItem.sceneTransform().inverted()
    if not ok:
        return np.zeros(len(discs), dtype=bool)
    cx, cy, r = discs[:, 0], discs[:, 1], discs[:, 2]
    lx = inv.m11() * cx + inv.m21() * cy + inv.dx()
    ly = inv.m12() * cx + inv.m22() * cy + inv.dy()
    rect = item.textItem.boundingRect().adjusted(3, 3, -3, -3)
    dx = np.maximum(np.maximum(rect.left() - lx, lx - rect.right()), 0.0)
    dy = np.maximum(np.maximum(rect.top() - ly, ly - rect.bottom()), 0.0)
    reach = np.maximum(r - slack, 0.0)
    return dx * dx + dy * dy < reach * reach


def _placement_key(rect: QRectF, view_range, x_max: float, discs: np.ndarray, outlines) -> tuple:
    """Everything a placement depends on besides the labels themselves: the view box's scene rect, its range (which
    maps the labels' data positions to pixels), the right edge, the points' discs and the other texts' outlines."""
    poly = tuple(tuple((round(p.x(), 2), round(p.y(), 2)) for p in o) for o in outlines)
    return ((round(rect.x(), 2), round(rect.y(), 2), round(rect.width(), 2), round(rect.height(), 2)),
            tuple(round(float(v), 9) for r in view_range for v in r), float(x_max),
            np.round(discs, 2).tobytes(), poly)


def make_label(text: str, color: str, anchor=(0, 1), rotate_axis=None) -> pg.TextItem:
    """A ceiling label on a translucent patch of the plot background."""
    bg = QColor(theme.colors()["plot_bg"])
    bg.setAlpha(215)
    kw = {} if rotate_axis is None else {"rotateAxis": rotate_axis, "angle": 0}
    return pg.TextItem(text, color=color, anchor=anchor, fill=pg.mkBrush(bg), **kw)


class _Placement:
    """One placing pass: the outlines placed so far, the points to keep clear, the view box's scene rect."""

    def __init__(self, placed: list, discs: np.ndarray, view_box):
        self.placed = placed
        self.discs = discs
        self.view_box = view_box

    def put(self, t: pg.TextItem, anchor, x: float, y: float):
        t.setAnchor(anchor)
        t.setPos(x, y)
        t.updateTransform(force=True)
        return scene_outline(t)

    def free(self, c: float) -> bool:
        """Whether a badness ``c`` counts as covering nothing (a few px² of each placed label allowed)."""
        return c <= 4.0 * len(self.placed)

    def cost(self, t: pg.TextItem, poly) -> tuple[float, list, np.ndarray]:
        """(badness, labels in the way, points covered); inf when off the plot."""
        box, vb = poly.boundingRect(), self.view_box
        if (box.right() > vb.right() + 1 or box.left() < vb.left() - 1
                or box.top() < vb.top() - 1 or box.bottom() > vb.bottom() + 1):
            return float("inf"), [], np.zeros(0, dtype=bool)
        areas = [overlap_area(p, poly) for p in self.placed]
        block = [p for p, a in zip(self.placed, areas, strict=True) if a > 4.0]
        hit = points_under(t, self.discs)
        return sum(areas) + 1e4 * int(hit.sum()), block, hit


class CeilingLabelsItem(pg.GraphicsObject):
    """The ceiling labels of the rooflines on one plot, and their placement."""

    def __init__(self):
        super().__init__()
        self.roofs: list[tuple[float, float, float, pg.TextItem]] = []  # (log10 bw, first x, last x, label)
        self.peaks: list[tuple[float, float, pg.TextItem, bool]] = []   # (log10 peak, ridge x, label, right first)
        self.unplaced: list[str] = []
        # placements already computed, by what they depend on (_placement_key): a tab shown again lays its plot out
        # anew, often at one of the sizes it had before, and a placement costs ~0.1 s
        self._placements: dict[tuple, tuple] = {}
        self.setZValue(15)

    def boundingRect(self) -> QRectF:  # noqa: N802 - Qt's name
        return QRectF()

    def paint(self, painter, option, widget=None) -> None:
        """Nothing of its own: the labels are child text items."""

    def add_roofline(self, roof_labels, peak_labels, color: str, x_max: float) -> None:
        """The labels of one roofline (:class:`~.roofline_ceilings.RooflineCeilingsItem`'s ``roof_labels`` and
        ``peak_labels``) in its colour, where :meth:`place` starts from (right-first ones at ``x_max``, the
        right edge) until it runs."""
        for lbw, x_first, x_last, text in roof_labels:
            t = self._child(make_label(text, color, anchor=(0, 1), rotate_axis=(1, 1)))
            t.setPos(x_first, lbw + x_first)
            self.roofs.append((lbw, x_first, x_last, t))
        for ly, x_ridge, text, right_first in peak_labels:
            t = self._child(make_label(text, color, anchor=(1, 1) if right_first else (0, 1)))
            t.setPos(x_max - EDGE_INSET if right_first else x_ridge, ly)
            self.peaks.append((ly, x_ridge, t, right_first))

    def _child(self, t: pg.TextItem) -> pg.TextItem:
        t.setParentItem(self)
        return t

    def labels(self) -> list[pg.TextItem]:
        """Every label, placed or not."""
        return [t for *_, t in self.roofs] + [t for _, _, t, _ in self.peaks]

    def visible_texts(self) -> list[str]:
        return [t.textItem.toPlainText() for t in self.labels() if t.isVisible()]

    def place(self, plot_item: pg.PlotItem, scatters, x_max: float, fixed=()) -> list[str]:
        """Place every label clear of the points of ``scatters`` (ScatterPlotItems), of ``fixed`` (other text
        items) and of each other on ``plot_item`` (x up to ``x_max``); returns the texts of those taken off
        the plot."""
        vb = plot_item.getViewBox()
        if not (self.roofs or self.peaks) or vb.width() < 50 or vb.height() < 50:
            return self.unplaced
        vb.updateMatrix()  # a range set just now reaches the view's transform only at the next paint
        for it in fixed:  # their transforms follow the view only when painted: bring them up to date
            it.updateTransform(force=True)
        # the points where they are drawn now: after the matrix update
        outlines, discs, rect = [scene_outline(it) for it in fixed], point_discs(plot_item, scatters), vb.sceneBoundingRect()
        key = _placement_key(rect, vb.viewRange(), x_max, discs, outlines)
        kept = self._placements.get(key)
        if kept is not None:  # this very layout was placed before (a tab shown again): put the labels back
            self._restore(kept)
            return self.unplaced
        self.unplaced = []
        ctx = _Placement(outlines, discs, rect)
        for lbw, x_first, x_last, t in sorted(self.roofs, key=lambda r: -r[0]):
            self._place_roof(ctx, t, lbw, x_first, x_last)
        for y, x_ridge, t, right_first in sorted(self.peaks, key=lambda r: -r[0]):
            self._place_peak(ctx, vb, t, y, x_ridge, x_max, right_first)
        if len(self._placements) >= KEPT_PLACEMENTS:
            self._placements.pop(next(iter(self._placements)))
        self._placements[key] = ([(t, tuple(t.anchor), QPointF(t.pos()), t.isVisible()) for t in self.labels()],
                                 list(self.unplaced))
        return self.unplaced

    def _restore(self, kept) -> None:
        """Each label's anchor, position and visibility as a placement left them."""
        labels, unplaced = kept
        for t, anchor, pos, visible in labels:
            t.setAnchor(anchor)
            t.setPos(pos)
            t.setVisible(visible)
        self.unplaced = list(unplaced)

    def _place_roof(self, ctx: _Placement, t, lbw: float, x_first: float, x_last: float) -> None:
        """Along the diagonal (x in log10 units; y = log10 bandwidth + x), above then below the line."""
        t.show()
        tried = []
        for x in np.linspace(x_first, max(x_last, x_first), ROOF_STEPS):
            for anchor in ((0, 1), (0, 0)):
                poly = ctx.put(t, anchor, x, lbw + x)
                c, _, _ = ctx.cost(t, poly)
                tried.append((c, anchor, x, lbw + x))
                if ctx.free(c):
                    ctx.placed.append(poly)
                    return
        self._give_up(ctx, t, tried)

    def _place_peak(self, ctx: _Placement, vb, t, y: float, x_ridge: float, x_max: float, right_first: bool) -> None:
        """At the right edge or the ridge, above or below the line, moving along it past what is in the way."""
        t.show()
        ridge = (((0, 1), x_ridge), ((0, 0), x_ridge))
        edge = (((1, 1), x_max - EDGE_INSET), ((1, 0), x_max - EDGE_INSET))
        tried = []  # (badness, anchor, x, y)
        for anchor, start in (edge + ridge) if right_first else (ridge + edge):
            x = start
            for _ in range(MOVES):
                poly = ctx.put(t, anchor, x, y)
                c, block, hit = ctx.cost(t, poly)
                tried.append((c, anchor, x, y))
                if c == float("inf") or ctx.free(c):
                    break
                x = self._past(vb, ctx, anchor, x, block, hit)
            if ctx.free(tried[-1][0]):
                ctx.placed.append(poly)
                return
        self._give_up(ctx, t, tried)

    @staticmethod
    def _past(vb, ctx: _Placement, anchor, x: float, block: list, hit: np.ndarray) -> float:
        """The x (log10) that takes a label past the labels and points in its way: left-aligned to the right
        of them, right-aligned to their left."""
        d = ctx.discs
        if anchor[0] == 0:
            right = max([p.boundingRect().right() for p in block] + list(d[hit, 0] + d[hit, 2]))
            return max(x, vb.mapSceneToView(QPointF(right + 6, 0)).x())
        left = min([p.boundingRect().left() for p in block] + list(d[hit, 0] - d[hit, 2]))
        return min(x, vb.mapSceneToView(QPointF(left - 6, 0)).x())

    def _give_up(self, ctx: _Placement, t, tried) -> None:
        """No place is free: the best one if it covers no point, else off the plot (listed in ``unplaced``)."""
        best = min(tried, key=lambda r: r[0]) if tried else None
        if best is not None and ctx.free(best[0]):
            _, anchor, x, y = best
            ctx.placed.append(ctx.put(t, anchor, x, y))
            return
        t.hide()
        self.unplaced.append(t.textItem.toPlainText())
