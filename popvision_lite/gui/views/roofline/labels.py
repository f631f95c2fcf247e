"""Placing the Roofline's ceiling labels so that none covers another label or any point (in pixels, after layout
and again on resize: text keeps its pixel size while the axes scale).  A mixin of :class:`~.view.RooflineView`."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF

# scatter keys that are highlights of points, not points
_RINGS = ("selected", "linked")
# a label may touch a point's outline by this many pixels (anti-aliasing), not more
POINT_SLACK_PX = 1.0


def _scene_outline(item: pg.TextItem):
    """The text's own (possibly rotated) outline in scene coordinates, without the text document's
    4-px margin (two labels whose margins touch do not cover each other)."""
    return item.textItem.mapToScene(item.textItem.boundingRect().adjusted(3, 3, -3, -3))


def _overlap_area(a, b) -> float:
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


class CeilingLabels:
    """Mixin: label placement of the roofline plot."""

    def _place_peak_labels(self, *_) -> None:
        """Put each ceiling label where it covers no point and no label placed before it.  Memory-roof labels
        (rotated, on their diagonal) first, highest roof first, trying positions from the left edge to the
        ridge, above then below the line; then the compute-ceiling labels, highest peak first: IPU labels at
        the right edge, GPU labels at their ridge, above their line, else below, moving along the line past
        what is in the way, then trying the other end.  A label with no free place anywhere is taken off the
        plot and its text listed in ``unplaced_labels`` (the view names those ceilings under the plot).  Done
        in pixels, after layout and again on resize.  (H100 / H200
        both 989 TFLOP/s, A100 / V100 FP32 19.5 vs 15.7 wrote one label over another; IPU-Links' label lay
        over the BERT ops' points.)"""
        labels = getattr(self, "_peak_labels", [])
        roofs = getattr(self, "_roof_labels", [])
        pi = self.plot.getPlotItem()
        vb = pi.getViewBox()
        if not (labels or roofs) or vb.width() < 50 or vb.height() < 50:
            return
        vb.updateMatrix()  # a range set just now reaches the view's transform only at the next paint
        self.unplaced_labels: list[str] = []  # named under the plot instead (the view's ceilings line)
        mine = {id(t) for _, _, t, _ in labels} | {id(t) for _, _, _, t in roofs}
        fixed = [it for it in pi.items
                 if isinstance(it, pg.TextItem) and it is not self.hover and id(it) not in mine and it.isVisible()]
        for it in fixed:  # their transforms follow the view only when painted: bring them up to date
            it.updateTransform(force=True)
        placed = [_scene_outline(it) for it in fixed]
        scatters = [sp for k, sp in self._scatter.items()
                    if isinstance(sp, pg.ScatterPlotItem) and k.split(":")[0] not in _RINGS]
        discs = point_discs(pi, scatters)
        x_max = self._xr[1] if hasattr(self, "_xr") else float("inf")
        view_box = vb.sceneBoundingRect()

        def put(t, anchor, x, y):
            t.setAnchor(anchor)
            t.setPos(x, y)
            t.updateTransform(force=True)
            return _scene_outline(t)

        def cost(t, poly) -> tuple[float, list, np.ndarray]:
            """(badness, labels in the way, points covered); inf when off the plot."""
            box = poly.boundingRect()
            if (box.right() > view_box.right() + 1 or box.left() < view_box.left() - 1
                    or box.top() < view_box.top() - 1 or box.bottom() > view_box.bottom() + 1):
                return float("inf"), [], np.zeros(0, dtype=bool)
            areas = [_overlap_area(p, poly) for p in placed]
            block = [p for p, a in zip(placed, areas, strict=True) if a > 4.0]
            hit = points_under(t, discs)
            return sum(areas) + 1e4 * int(hit.sum()), block, hit

        def give_up(t, tried) -> None:
            """No place is free: the best one if it covers no point, else off the plot and into the legend."""
            best = min(tried, key=lambda r: r[0]) if tried else None
            if best is not None and best[0] <= 4.0 * len(placed):
                _, anchor, x, y = best
                placed.append(put(t, anchor, x, y))
                return
            t.hide()
            self.unplaced_labels.append(t.textItem.toPlainText())

        # memory roofs: along the diagonal (x in the plot's log10 units; y = log10 bandwidth + x)
        for lbw, x_first, x_last, t in sorted(roofs, key=lambda r: -r[0]):
            t.show()
            tried = []
            xs = np.linspace(x_first, max(x_last, x_first), 16)
            done = False
            for x in xs:
                for anchor in ((0, 1), (0, 0)):
                    poly = put(t, anchor, x, lbw + x)
                    c, _, _ = cost(t, poly)
                    tried.append((c, anchor, x, lbw + x))
                    if c <= 4.0 * len(placed):
                        placed.append(poly)
                        done = True
                        break
                if done:
                    break
            if not done:
                give_up(t, tried)

        for y, x_ridge, t, right_first in sorted(labels, key=lambda r: -r[0]):
            t.show()
            ridge = (((0, 1), x_ridge), ((0, 0), x_ridge))
            edge = (((1, 1), x_max - 0.05), ((1, 0), x_max - 0.05))
            tried = []  # (badness, anchor, x, y)
            done = False
            for anchor, start in (edge + ridge) if right_first else (ridge + edge):
                x = start
                for _ in range(12):
                    poly = put(t, anchor, x, y)
                    c, block, hit = cost(t, poly)
                    tried.append((c, anchor, x, y))
                    if c == float("inf") or c <= 4.0 * len(placed):
                        break
                    if anchor[0] == 0:  # left-aligned: move right past what is in the way
                        right = max([p.boundingRect().right() for p in block]
                                    + list(discs[hit, 0] + discs[hit, 2]))
                        x = max(x, vb.mapSceneToView(QPointF(right + 6, 0)).x())
                    else:  # right-aligned: move left past it
                        left = min([p.boundingRect().left() for p in block]
                                   + list(discs[hit, 0] - discs[hit, 2]))
                        x = min(x, vb.mapSceneToView(QPointF(left - 6, 0)).x())
                if tried[-1][0] <= 4.0 * len(placed):
                    placed.append(poly)
                    done = True
                    break
            if not done:
                give_up(t, tried)
        shown = getattr(self, "offplot", None)
        if shown is not None:
            shown.setText("Ceilings without room for a label on the plot: " + "; ".join(self.unplaced_labels)
                          if self.unplaced_labels else "")
            shown.setVisible(bool(self.unplaced_labels))
