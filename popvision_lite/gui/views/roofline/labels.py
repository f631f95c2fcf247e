"""Placing the Roofline's ceiling labels so that none covers another (in pixels, after layout and again on
resize: text keeps its pixel size while the axes scale).  A mixin of :class:`~.view.RooflineView`."""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import QPointF


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


class CeilingLabels:
    """Mixin: label placement of the roofline plot."""

    def _place_peak_labels(self, *_) -> None:
        """Put each compute-ceiling label (highest peak first) where it covers no label placed before it
        (the memory-roof labels first of all): IPU labels at the right edge, above their line, else below;
        GPU labels at their ridge, above, else below; either moving along the line past the labels in the
        way, then trying the other end.  Done in pixels, after layout and again on resize (text keeps its
        pixel size while the axes scale).  (H100 / H200 both 989 TFLOP/s, A100 / V100 FP32 19.5 vs 15.7, and
        4 IPUs' 1000 vs the H100's 989 and 250 vs the A100's 312 wrote one label over another.)"""
        labels = getattr(self, "_peak_labels", [])
        pi = self.plot.getPlotItem()
        vb = pi.getViewBox()
        if not labels or vb.width() < 50 or vb.height() < 50:
            return
        vb.updateMatrix()  # a range set just now reaches the view's transform only at the next paint
        mine = {id(t) for _, _, t, _ in labels}
        fixed = [it for it in pi.items
                 if isinstance(it, pg.TextItem) and it is not self.hover and id(it) not in mine and it.isVisible()]
        for it in fixed:  # their transforms follow the view only when painted: bring them up to date
            it.updateTransform(force=True)
        placed = [_scene_outline(it) for it in fixed]
        x_max = self._xr[1] if hasattr(self, "_xr") else float("inf")
        view_box = vb.sceneBoundingRect()

        def put(t, anchor, x, y):
            t.setAnchor(anchor)
            t.setPos(x, y)
            t.updateTransform(force=True)
            return _scene_outline(t)

        for y, x_ridge, t, right_first in sorted(labels, key=lambda r: -r[0]):
            ridge = (((0, 1), x_ridge), ((0, 0), x_ridge))
            edge = (((1, 1), x_max - 0.05), ((1, 0), x_max - 0.05))
            tried = []  # (overlap px², anchor, x)
            for anchor, start in (edge + ridge) if right_first else (ridge + edge):
                x, poly = start, None
                for _ in range(6):
                    poly = put(t, anchor, x, y)
                    box = poly.boundingRect()
                    if box.right() > view_box.right() + 1 or box.left() < view_box.left() - 1:  # off the plot
                        tried.append((float("inf"), anchor, x))
                        break
                    areas = [_overlap_area(p, poly) for p in placed]
                    tried.append((sum(areas), anchor, x))
                    block = [p for p, a in zip(placed, areas, strict=True) if a > 4.0]
                    if not block:
                        break
                    if anchor[0] == 0:  # left-aligned: move right past the labels in the way
                        right = max(p.boundingRect().right() for p in block)
                        x = max(x, vb.mapSceneToView(QPointF(right + 6, 0)).x())
                    else:  # right-aligned: move left past them
                        left = min(p.boundingRect().left() for p in block)
                        x = min(x, vb.mapSceneToView(QPointF(left - 6, 0)).x())
                if tried and tried[-1][0] <= 4.0 * len(placed):
                    break
            _, anchor, x = min(tried, key=lambda r: r[0])  # a free place, else the least covered one
            placed.append(put(t, anchor, x, y))
