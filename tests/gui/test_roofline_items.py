"""The Roofline plot's items on their own (pytest-qt, offscreen): what a device's ceilings item draws given its
roofline, where the ceiling labels go given the points, and the read-outs of the points."""

import math

import numpy as np
import pandas as pd
import pyqtgraph as pg
import pytest

from popvision_lite.analysis.roofline import Ceiling, Roofline
from popvision_lite.gui.items.ceiling_labels import CeilingLabelsItem, point_discs, points_under
from popvision_lite.gui.items.roofline_ceilings import LABEL_INSET, RooflineCeilingsItem
from popvision_lite.gui.views.roofline.tooltips import measured_tooltip

pytestmark = pytest.mark.gui


def _roofline(name="Chip", kind="ipu"):
    compute = [Ceiling("compute", "fp16", "FP16 peak", 1e15, "spec", "datasheet"),
               Ceiling("compute", "fp32", "FP32 peak", 2.5e14, "spec", "datasheet")]
    bandwidth = [Ceiling("bandwidth", "sram", "SRAM", 1e13, "spec", "datasheet"),
                 Ceiling("bandwidth", "ddr", "DDR", 1e11, "spec", "datasheet")]
    return Roofline(device_id=name.lower(), name=name, kind=kind, compute=compute, bandwidth=bandwidth)


def _lines(item):
    return [c for c in item.childItems() if isinstance(c, pg.PlotDataItem)]


def test_ceilings_draw_roofs_peaks_and_ridges(qapp):
    r = _roofline()
    item = RooflineCeilingsItem(r, "#123456", -2.0, 6.0, solid=True)
    lines = _lines(item)
    assert len(lines) == 4  # two roofs, two peaks
    # roofs: from the left edge up to the top peak, on y = log10(bandwidth) + x, highest first
    for line, bw in zip(lines[:2], (1e13, 1e11), strict=True):
        x, y = line.getData()
        assert x[0] == -2.0 and x[-1] == pytest.approx(math.log10(1e15 / bw))
        np.testing.assert_allclose(y, np.log10(bw) + x)
    # peaks: from their first ridge (under the widest roof) to the right edge, the lower one dotted
    x, y = lines[3].getData()
    assert x.tolist() == pytest.approx([math.log10(2.5e14 / 1e13), 6.0]) and y.tolist() == pytest.approx([math.log10(2.5e14)] * 2)
    assert lines[3].opts["pen"].style() != lines[2].opts["pen"].style()
    # a diamond per (peak, roof) pair, its tip naming both
    assert len(item.ridges.data) == 4
    assert item.ridge_tip(0) == f"ridge FP16 peak / SRAM: {1e15 / 1e13:.3g} FLOP/B"
    # the IPU's roofs and peaks are labelled on the plot, right edge first; its legend entry is its name
    assert [t for *_, t in item.roof_labels] == ["SRAM 10 TB/s", "DDR 100 GB/s"]
    assert item.roof_labels[0][1] == -2.0 + LABEL_INSET
    assert [(t, right) for _, _, t, right in item.peak_labels] == [(c.text(), True) for c in r.compute]
    assert item.legend_entry[1] == "Chip" and item.legend_entry[0] is lines[0]


def test_gpu_ceilings_name_their_roofs_in_the_legend(qapp):
    r = _roofline("NVIDIA G100", kind="gpu")
    item = RooflineCeilingsItem(r, "#aa0000", -2.0, 6.0, solid=False)
    assert item.roof_labels == []  # a fraction of a decade apart: named in the legend, not on the lines
    assert item.legend_entry[1] == "G100 (SRAM 10 TB/s, DDR 100 GB/s)"
    assert [t for _, _, t, _ in item.peak_labels] == ["G100 FP16 peak 1 PFLOP/s", "G100 FP32 peak 250 TFLOP/s"]
    assert not any(right for *_, right in item.peak_labels)  # at the start of their line


@pytest.fixture
def plot(qtbot):
    w = pg.PlotWidget()
    qtbot.addWidget(w)
    w.resize(900, 600)
    w.show()
    qtbot.waitExposed(w)
    pi = w.getPlotItem()
    pi.setXRange(-2, 6, padding=0)
    pi.setYRange(9, 16, padding=0)
    return w, pi


def test_labels_placed_clear_of_points_and_each_other(qapp, plot):
    _, pi = plot
    r = _roofline()
    item = RooflineCeilingsItem(r, "#123456", -2.0, 6.0, solid=True)
    pi.addItem(item)
    labels = CeilingLabelsItem()
    labels.add_roofline(item.roof_labels, item.peak_labels, "#123456", 6.0)
    pi.addItem(labels)
    # a crowd of points right where the FP16 label starts (right edge, just above its line)
    xs, ys = np.meshgrid(np.linspace(4.0, 5.9, 12), np.linspace(15.03, 15.25, 4))
    crowd = pg.ScatterPlotItem(xs.ravel(), ys.ravel(), size=10)
    pi.addItem(crowd)
    fp16 = next(t for t in labels.labels() if t.textItem.toPlainText().startswith("FP16"))
    pi.getViewBox().updateMatrix()
    fp16.updateTransform(force=True)
    assert points_under(fp16, point_discs(pi, [crowd])).any()  # where it starts, it covers them
    assert labels.place(pi, [crowd], 6.0) == []
    shown = [t for t in labels.labels() if t.isVisible()]
    assert len(shown) == 4
    discs = point_discs(pi, [crowd])
    assert len(discs) == 48
    for t in shown:
        assert not points_under(t, discs).any(), t.textItem.toPlainText()
    boxes = [t.sceneBoundingRect() for t in shown]
    assert all(not a.intersects(b) or a.intersected(b).width() * a.intersected(b).height() < 60
               for i, a in enumerate(boxes) for b in boxes[i + 1:])


def test_labels_without_room_are_listed_not_drawn(qapp, plot):
    _, pi = plot
    r = _roofline()
    item = RooflineCeilingsItem(r, "#123456", -2.0, 6.0, solid=True)
    labels = CeilingLabelsItem()
    labels.add_roofline(item.roof_labels, item.peak_labels, "#123456", 6.0)
    pi.addItem(labels)
    # points everywhere: no place is free
    xs, ys = np.meshgrid(np.linspace(-2, 6, 80), np.linspace(9, 16, 70))
    wall = pg.ScatterPlotItem(xs.ravel(), ys.ravel(), size=14)
    pi.addItem(wall)
    unplaced = labels.place(pi, [wall], 6.0)
    assert sorted(unplaced) == sorted(c.text() for c in r.compute + r.bandwidth)
    assert not any(t.isVisible() for t in labels.labels())
    assert labels.visible_texts() == []


def test_measured_kernel_tooltip_reads_by_key():
    df = pd.DataFrame({"name": ["gemm_kernel"], "cat": ["kernel"], "dur_s": [2e-6], "achieved_flops": [3e12],
                       "intensity": [np.nan], "flops_from": ["trace args"], "op": ["aten::mm"]}, index=[4])
    tip = measured_tooltip(df, -1 - 4)
    assert tip.startswith("gemm_kernel\nmeasured GPU kernel (kernel), 2 µs\nlaunched by aten::mm\n")
    assert "intensity unknown" in tip and "FLOPs from trace args" in tip
