"""Roofline view (offscreen): ceilings/labels/ridges drawn, points sized by share, click selects the op,
selection from elsewhere highlights it, GPU chooser, trace import (good and bad file), export items."""

from __future__ import annotations

import html
import json

import numpy as np
import pyqtgraph as pg
import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor

from popvision_lite.gui.items.roofline_ceilings import RooflineCeilingsItem
from tests.support.qt import capture_message_boxes

pytestmark = pytest.mark.gui


@pytest.fixture(scope="module")
def profile_path(tmp_path_factory):
    from popvision_lite.testing.synthetic import write_synthetic

    p = tmp_path_factory.mktemp("rv") / "rv.pvl"
    write_synthetic(p, num_ipus=2, tiles_per_ipu=64, num_steps=150, seed=2)
    return p


@pytest.fixture
def view(qtbot, profile_path):
    import popvision_lite as pvl
    from popvision_lite.gui.state.document import Document
    from popvision_lite.gui.views.roofline import RooflineView

    prof = pvl.open(profile_path)
    doc = Document(prof)
    v = RooflineView(doc)
    qtbot.addWidget(v)
    v.resize(1400, 800)
    v.show()
    yield v
    prof.close()


def _labels(v):
    """The ceiling labels on the plot (those with no place are hidden)."""
    return [it for it in v.ceiling_labels.labels() if it.isVisible()]


def _wait_all_gpus_drawn(v, qtbot):
    """Until the analysis with every GPU ticked is drawn (it comes back from a worker thread)."""
    qtbot.waitUntil(lambda: v.analysis is not None and {g.device_id for g in v.analysis.gpus} == set(v.gpu_boxes)
                    and all(g in v.points.scatter for g in v.gpu_boxes), timeout=30000)


def _texts(v):
    return [it.textItem.toPlainText() for it in v.ceiling_labels.labels()]


def test_axes_ceilings_and_ridges(view):
    pi = view.plot_items()["roofline"]
    assert isinstance(pi, pg.PlotItem)
    assert "FLOP/byte" in pi.getAxis("bottom").labelText and "FLOP/s" in pi.getAxis("left").labelText
    texts = _texts(view)
    legend = [lab.text for _, lab in view.legend.items]
    a = view.analysis
    for r in [a.ipu, *a.gpus]:
        for c in r.compute + r.bandwidth:
            # every ceiling labelled on the plot; GPU memory roofs in the GPU's legend entry
            on_plot = any(c.text() in t for t in texts)
            in_legend = any(r.name.replace("NVIDIA ", "") in t and c.text() in t for t in legend)
            assert on_plot or (r is not a.ipu and c in r.bandwidth and in_legend), c.text()
    ceilings = [it for it in pi.items if isinstance(it, RooflineCeilingsItem)]
    assert [c.roofline.name for c in ceilings] == [r.name for r in [a.ipu, *a.gpus]]
    ridges = [c.ridges for c in ceilings]
    assert all(str(c.ridge_tip(0)).startswith("ridge") for c in ceilings)
    n_ridges = sum(len(r.ridges()) for r in [a.ipu, *a.gpus])
    assert sum(len(it.data) for it in ridges) == n_ridges
    # a ridge marker sits at (log10 peak/bw, log10 peak)
    xs = np.concatenate([it.data["x"] for it in ridges])
    assert np.isclose(xs, np.log10(a.ipu.ridge("fp16", "sram"))).any()


def test_points_sized_by_share_and_gpu_symbols(view):
    a = view.analysis
    sp = view.points.scatter["ipu"]
    ids = sp.data["data"].astype(int)
    assert set(ids) == set(a.points.index)
    share = a.points.loc[ids, "share"].to_numpy()
    sizes = sp.data["size"]
    assert sizes[np.argmax(share)] == sizes.max() and sizes[np.argmin(share)] == sizes.min()
    # FLOP/s per chip the op ran on, against one chip's roofs
    np.testing.assert_allclose(sp.data["y"], np.log10(a.points.loc[ids, "chip_flops"]))
    for g in a.gpus:
        gs = view.points.scatter[g.device_id]
        assert gs.opts["symbol"] == "t"
    tip = view.tooltip_for(a.gpus[0].device_id, int(ids[0]))
    assert "not a measurement" in tip and a.ops.loc[ids[0], "name"] in tip


def test_click_selects_and_selection_highlights(view, qtbot):
    from PySide6.QtCore import Qt

    sp = view.points.scatter["ipu"]
    pt = sp.points()[2]
    op = int(pt.data())
    with qtbot.waitSignal(view.document.selection.changed, timeout=3000):
        sp.sigClicked.emit(sp, [pt], None)
    st = view.document.selection.state
    assert st.op_id == op and st.source == "roofline"
    # hovering shows the op's name and numbers next to the point
    sp.sigHovered.emit(sp, [pt], None)
    assert view.hover.isVisible() and view.analysis.ops.loc[op, "name"] in view.hover.textItem.toPlainText()
    assert "FLOPs" in view.hover.textItem.toPlainText()
    sp.sigHovered.emit(sp, [], None)
    assert not view.hover.isVisible()
    hl = view.points.scatter["selected"]
    assert np.isclose(hl.data["x"][0], pt.pos().x()) and np.isclose(hl.data["y"][0], pt.pos().y())
    # a selection made by another view moves the highlight and the table row
    other = int(view.analysis.points.index[0])
    view.document.selection.update(source="operations", op_id=other)
    hl = view.points.scatter["selected"]
    o = view.analysis.points.loc[other]
    assert np.isclose(hl.data["x"][0], np.log10(o.intensity))
    rows = view.table.selectionModel().selectedRows()
    assert rows and view.table.model().data(rows[0], Qt.UserRole) == other


def test_table_totals_and_gpu_chooser(view):
    from PySide6.QtCore import Qt

    m = view.table.model()
    last = m.rowCount() - 1
    assert m.data(m.index(last, 0)).startswith("TOTAL")
    assert m.data(m.index(last, 0), 0).startswith("TOTAL")
    headers = [m.headerData(c, Qt.Horizontal) for c in range(m.columnCount())]
    assert "IPU time" in headers and "A100-80GB bound" in headers and "V100 bound" not in headers
    view.gpu_boxes["v100"].setChecked(True)
    m = view.table.model()
    headers = [m.headerData(c, Qt.Horizontal) for c in range(m.columnCount())]
    assert "V100 bound" in headers and "v100" in view.points.scatter
    exported = view.tables()["roofline"]      # what CSV export writes: same rows as the table, TOTAL last
    assert len(exported) == m.rowCount() and exported.iloc[-1]["name"].startswith("TOTAL")
    assert "v100_speedup" in exported.columns
    view.gpu_boxes["v100"].setChecked(False)
    assert "v100" not in view.points.scatter


def test_what_if_capacity(view):
    view.capacity.setValue(0.1)   # 0.1% of SRAM left: big ops spill
    assert view.analysis.ops["spills"].any()
    assert "whatif" in view.points.scatter
    view.capacity.setValue(100.0)


def test_import_trace(view, qtbot, tmp_path, monkeypatch):
    ev = [{"ph": "X", "cat": "kernel", "name": "gemm", "ts": 0, "dur": 10, "args": {"flops": 2e9, "bytes": 1e7}},
          {"ph": "X", "cat": "kernel", "name": "relu", "ts": 20, "dur": 5, "args": {"flops": 1e6}}]
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": ev}))
    w = view.import_trace(p)
    qtbot.waitUntil(lambda: w.done and view.measured is not None, timeout=5000)
    ms = view.points.scatter["measured"]
    assert np.isclose(ms.data["x"][0], np.log10(200.0)) and np.isclose(ms.data["y"][0], np.log10(2e9 / 1e-5))
    assert "measured_noint" in view.points.scatter
    # a malformed file: warning shown, nothing raised, earlier points kept

    boxes = capture_message_boxes(monkeypatch)
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    w = view.import_trace(bad)
    qtbot.waitUntil(lambda: w.done and bool(boxes), timeout=5000)
    assert str(bad) in boxes[0][2] and "JSON" in boxes[0][2]
    assert view.measured is not None


def test_stand_in_document(qtbot):
    """Works with any object holding .profile and .selection (no Document, no file)."""
    from types import SimpleNamespace

    from popvision_lite.gui.state.selection import SelectionModel
    from popvision_lite.gui.views.roofline import RooflineView
    from popvision_lite.testing.synthetic import make_synthetic

    doc = SimpleNamespace(profile=make_synthetic(num_ipus=1, tiles_per_ipu=32, num_steps=80), selection=SelectionModel())
    v = RooflineView(doc)
    qtbot.addWidget(v)
    sp = v.points.scatter["ipu"]
    pt = sp.points()[0]
    sp.sigClicked.emit(sp, [pt], None)
    assert doc.selection.state.op_id == int(pt.data())


def test_large_profile_analysis_off_gui_thread(qtbot, profile_path, monkeypatch, fresh_analyses):
    import popvision_lite as pvl
    from popvision_lite.gui.state.document import Document
    from popvision_lite.gui.views.roofline import RooflineView

    monkeypatch.setattr(RooflineView, "SYNC_MAX_TILES", 0)  # treat the small profile as large
    with pvl.open(profile_path) as prof:
        v = RooflineView(Document(prof))
        qtbot.addWidget(v)
        assert v.analysis is None and "Computing" in v.notes.text()   # returned at once
        qtbot.waitUntil(lambda: v.analysis is not None, timeout=10000)
        assert "ipu" in v.points.scatter and v.table.model().rowCount() == len(prof.stored_table("ops")) + 1
        # a second identical request is served from the document cache, synchronously
        v.refresh()
        assert v.analysis is v.document.cached(v._pending_key, lambda: None)


def test_log_ticks_all_powers_of_ten(view):
    """Both log axes label every tick the same way (was '0.1, 1, 10¹, 10²')."""
    from popvision_lite.gui.views.roofline import power_of_ten_label

    assert [power_of_ten_label(v) for v in (-1, 0, 1, 2, 15)] == ["10⁻¹", "10⁰", "10¹", "10²", "10¹⁵"]
    assert power_of_ten_label(np.log10(2000)) == "2·10³"
    for name in ("bottom", "left"):
        ax = view.plot.getPlotItem().getAxis(name)
        lo, hi = ax.range
        majors = [float(v) for v in range(int(np.ceil(lo)), int(np.floor(hi)) + 1)]
        strings = ax.tickStrings(majors, 1.0, 1.0)
        assert strings and all(s.startswith("10") for s in strings), strings


def test_ceiling_labels_do_not_overlap(view, qtbot):
    """No two ceiling labels cover each other, with every GPU shown (GPU memory-roof labels used to
    pile up at the left edge)."""
    for cb in view.gpu_boxes.values():
        cb.setChecked(True)
    _wait_all_gpus_drawn(view, qtbot)
    _assert_no_label_overlap(view)
    # GPU ceilings are labelled with the names the legend uses, not the spec ids ("h100-sxm")
    texts = _texts(view)
    for g in view.analysis.gpus:
        assert not any(g.device_id in t for t in texts), (g.device_id, texts)
        assert any(t.startswith(g.name.replace("NVIDIA ", "")) for t in texts), (g.name, texts)


def test_ceiling_labels_do_not_overlap_4_ipus_at_1024_px(qtbot):
    """The 4-IPU sample (IPU FP16 1000 TFLOP/s next to the H100's 989) in a 1024-px-wide window."""
    from pathlib import Path

    import popvision_lite as pvl
    from popvision_lite.gui.state.document import Document
    from popvision_lite.gui.views.roofline import RooflineView

    prof = pvl.open(Path(__file__).resolve().parents[2] / "sample_profiles" / "bert_mini_4ipu_pipeline.pvl")
    try:
        v = RooflineView(Document(prof))
        qtbot.addWidget(v)
        v.resize(1010, 640)
        v.show()
        qtbot.waitUntil(lambda: v.analysis is not None, timeout=20000)
        qtbot.wait(50)
        _assert_no_label_overlap(v)
    finally:
        prof.close()


def _assert_no_label_overlap(view):
    items = [it for it in _labels(view) if it.textItem.toPlainText()]
    assert len(items) >= 4
    # the text's own (rotated) outline in scene coordinates, not its axis-aligned box, less the text
    # document's blank 4-px margin
    margin = items[0].textItem.document().documentMargin()
    polys = [it.textItem.mapToScene(it.textItem.boundingRect().adjusted(margin, margin, -margin, -margin))
             for it in items]

    def area(poly):
        pts = [(p.x(), p.y()) for p in poly]
        return 0.5 * abs(sum(x0 * y1 - x1 * y0 for (x0, y0), (x1, y1) in zip(pts, pts[1:] + pts[:1], strict=True)))

    for i in range(len(polys)):
        for j in range(i + 1, len(polys)):
            shared = area(polys[i].intersected(polys[j])) if polys[i].intersects(polys[j]) else 0.0
            assert shared < 0.1 * min(area(polys[i]), area(polys[j])), (
                items[i].textItem.toPlainText(), items[j].textItem.toPlainText())


SAMPLES = __import__("pathlib").Path(__file__).resolve().parents[2] / "sample_profiles"


def _sample_view(qtbot, name, w=1400, h=800, shown=True):
    """The Roofline view of a bundled sample, shown at ``w`` x ``h`` once its analysis is drawn; ``shown`` False:
    built and analysed, not shown (for claims about what its items and texts hold, not where they are placed)."""
    import popvision_lite as pvl
    from popvision_lite.gui.state.document import Document
    from popvision_lite.gui.views.roofline import RooflineView

    prof = pvl.open(SAMPLES / name)
    v = RooflineView(Document(prof))
    qtbot.addWidget(v)
    v.resize(w, h)
    if shown:
        v.show()
    qtbot.waitUntil(lambda: v.analysis is not None, timeout=30000)
    if shown:
        qtbot.wait(50)
    return v, prof


def _covered_points(view):
    """(label text, number of points it covers) for every visible ceiling label."""
    from popvision_lite.gui.items.ceiling_labels import point_discs, points_under

    pi = view.plot.getPlotItem()
    scatters = [sp for k, sp in view.points.scatter.items() if isinstance(sp, pg.ScatterPlotItem)
                and k.split(":")[0] not in ("selected", "linked")]
    discs = point_discs(pi, scatters)
    assert len(discs) > 10
    out = []
    for it in _labels(view):
        if it.textItem.toPlainText():
            it.updateTransform(force=True)
            out.append((it.textItem.toPlainText(), int(points_under(it, discs).sum())))
    return out


@pytest.mark.parametrize("name,size", [("bert_mini_4ipu_pipeline.pvl", (1010, 640)),
                                       ("bert_mini_4ipu_pipeline.pvl", (1500, 900)),
                                       ("bert_tiny_mk2.pvl", (1400, 800))])
def test_labels_never_cover_points(qtbot, name, size):
    v, prof = _sample_view(qtbot, name, *size)
    try:
        for cb in v.gpu_boxes.values():
            cb.setChecked(True)
        _wait_all_gpus_drawn(v, qtbot)
        covered = _covered_points(v)
        assert len(covered) >= 4
        assert [c for c in covered if c[1]] == []
        # every ceiling is named: on the plot, or in the line under it when no place was free
        a = v.analysis
        shown = [t for t, _ in covered] + v.unplaced_labels
        for c in a.ipu.compute + a.ipu.bandwidth:
            assert any(c.text() in t for t in shown), c.text()
        assert v.offplot.isVisible() == bool(v.unplaced_labels)
        _assert_no_label_overlap(v)
        # the legend is under the plot, not over it
        vb = v.plot.getPlotItem().getViewBox()
        assert v.legend.sceneBoundingRect().top() >= vb.sceneBoundingRect().bottom()
        assert v.plot.getPlotItem().sceneBoundingRect().width() <= v.plot.width() + 1
    finally:
        prof.close()


def test_ceilings_per_chip_on_both_sides(qtbot):
    from popvision_lite import devices
    from popvision_lite.units import format_flops

    v, prof = _sample_view(qtbot, "bert_mini_4ipu_pipeline.pvl")
    try:
        mk2 = devices.load_device("ipu-mk2")
        texts = _texts(v)
        assert any(t == f"FP16 peak {format_flops(mk2.peak_fp16_flops)}" for t in texts), texts
        assert not any("1 PFLOP/s" in t for t in texts)   # 4 x 250 TFLOP/s no longer drawn
        assert "per chip" in v.analysis.ipu.name
        assert any("IPU-Links" in t for t in texts + v.unplaced_labels)
    finally:
        prof.close()
    v, prof = _sample_view(qtbot, "bert_large_1ipu_oom.pvl")
    try:   # one IPU: no links roof, not called pipelined
        assert not v.analysis.ipu.has("ipu_link")
        assert not any("IPU-Links" in t for t in _texts(v) + v.unplaced_labels)
        assert "pipelined profile:" not in v.notes.text() and "pipelined run" not in v.notes.text()
        assert "composed run (layers x micro-batches)" in v.notes.text()
    finally:
        prof.close()


def test_verdict_line_is_the_summary_verdict(qtbot):
    """One IPU-vs-GPU answer: the roofline states the verdict panel's own result, and follows its GPU choice."""
    import popvision_lite as pvl
    from popvision_lite.gui.state.document import Document
    from popvision_lite.gui.views.roofline import RooflineView
    from popvision_lite.gui.views.verdict_panel import VerdictPanel

    with pvl.open(SAMPLES / "bert_mini_4ipu_pipeline.pvl") as prof:
        doc = Document(prof)
        panel = VerdictPanel(doc)
        qtbot.addWidget(panel)
        v = RooflineView(doc)
        qtbot.addWidget(v)
        qtbot.waitUntil(lambda: v.analysis is not None, timeout=30000)
        text = v.summary.text()
        assert panel.result.headline() in html.unescape(text)
        assert text.count("faster") == 1 and "x faster" in text
        # the TOTAL row of the table carries no ratio of its own
        m = v.table.model()
        heads = [m.headerData(c, Qt.Horizontal) for c in range(m.columnCount())]
        last = m.rowCount() - 1
        for c, h in enumerate(heads):
            if h.startswith("IPU/"):
                assert m.data(m.index(last, c)) == "see verdict"
        panel.gpu.setCurrentIndex(panel.gpu.findData("h100-sxm"))
        panel.gpus.setValue(2)
        assert panel.result.gpu.chips == 2 and "H100" in panel.result.gpu.label
        assert panel.result.headline() in html.unescape(v.summary.text())


def test_hover_links_an_ops_ipu_and_gpu_points(view):
    a = view.analysis
    sp = view.points.scatter["ipu"]
    pt = sp.points()[3]
    op = int(pt.data())
    sp.sigHovered.emit(sp, [pt], None)
    ring = view.points.scatter["linked"]
    got = sorted(zip(np.round(ring.data["x"], 9), np.round(ring.data["y"], 9), strict=True))
    o = a.points.loc[op]
    want = [(np.log10(o.intensity), np.log10(o.chip_flops))]
    for g in a.gpus:
        gid = g.device_id
        want.append((np.log10(o[f"{gid}_intensity"]), np.log10(o[f"{gid}_flops"])))
        want.append((np.log10(o[f"{gid}_intensity"]), np.log10(o[f"{gid}_est_flops"])))
    assert got == sorted((round(x, 9), round(y, 9)) for x, y in want)
    assert "linked:line" in view.points.scatter
    # another scatter's empty hover (the mouse is inside its extent, on no point of it) keeps the link
    gs = view.points.scatter[a.gpus[0].device_id]
    gs.sigHovered.emit(gs, [], None)
    assert "linked" in view.points.scatter and view.hover.isVisible()
    # hovering the GPU point of another op rings that op's IPU point
    other = gs.points()[0]
    gs.sigHovered.emit(gs, [other], None)
    o2 = a.points.loc[int(other.data())]
    ring = view.points.scatter["linked"]
    assert any(np.isclose(x, np.log10(o2.intensity)) and np.isclose(y, np.log10(o2.chip_flops))
               for x, y in zip(ring.data["x"], ring.data["y"], strict=True))
    gs.sigHovered.emit(gs, [], None)
    assert "linked" not in view.points.scatter and not view.hover.isVisible()


def test_table_columns_not_truncated(qtbot):
    from PySide6.QtGui import QFontMetrics

    v, prof = _sample_view(qtbot, "bert_mini_4ipu_pipeline.pvl")
    try:
        m, t = v.table.model(), v.table
        fm = t.fontMetrics()
        bold = t.font()
        bold.setBold(True)
        fmb = QFontMetrics(bold)
        hfm = t.horizontalHeader().fontMetrics()
        for c in range(m.columnCount()):
            texts = [m.data(m.index(r, c)) for r in range(m.rowCount())]
            widest = max([fm.horizontalAdvance(s) for s in texts[:-1]] + [fmb.horizontalAdvance(texts[-1])])
            head = hfm.horizontalAdvance(m.headerData(c, Qt.Horizontal))
            assert t.columnWidth(c) >= max(widest, head) + 8, (m.headerData(c, Qt.Horizontal), t.columnWidth(c))
    finally:
        prof.close()


@pytest.mark.parametrize("theme_name", ["light", "dark"])
def test_legend_samples_of_ipu_ops_are_drawn_as_the_points(qtbot, theme_name):
    """Every legend entry of the IPU ops shows the fill and outline its points are drawn with, in both themes;
    no entry shows a colour no point has (pyqtgraph's default brush for a per-point-coloured item)."""
    from popvision_lite.gui import theme

    theme.apply_theme(theme_name)
    try:
        v, prof = _sample_view(qtbot, "bert_mini_4ipu_pipeline.pvl", shown=False)  # the items' brushes and pens
        sp = v.points.scatter["ipu"]
        bound = v.analysis.points["bound"].to_numpy()
        point_fill = {}
        for spot, lvl in zip(sp.points(), bound, strict=True):
            point_fill.setdefault(lvl, set()).add(spot.brush().color().name(QColor.HexArgb))
        entries = {lab.text: sample.item for sample, lab in v.legend.items}
        ipu_entries = {t: it for t, it in entries.items() if t.startswith("IPU ops")}
        assert {t.rsplit(" ", 1)[-1] for t in ipu_entries} == set(bound)
        for text, item in ipu_entries.items():
            lvl = text.rsplit(" ", 1)[-1]
            assert point_fill[lvl] == {item.opts["brush"].color().name(QColor.HexArgb)}
            assert item.opts["pen"].color() == sp.points()[0].pen().color()
        # no other legend circle: the remaining entries are the ceilings, GPU points and what-if marks
        assert all(not (isinstance(it, pg.ScatterPlotItem) and it.opts["symbol"] == "o")
                   for t, it in entries.items() if t not in ipu_entries)
        prof.close()
    finally:
        theme.apply_theme("light")


def test_a_large_model_pass_is_estimated_off_the_gui_thread(qtbot, tmp_path):
    """Issue 45: the verdict of a pass of more than SYNC_MAX_KERNELS launches runs on a worker thread; the panel
    says so, then shows the result, and the Roofline's verdict line takes it from the cache once there."""
    import popvision_lite as pvl
    from popvision_lite.gui.state.document import Document
    from popvision_lite.gui.views import verdict_panel as vp
    from popvision_lite.testing.hostile_run import with_run

    src = SAMPLES / "bert_mini_4ipu_pipeline.pvl"
    with pvl.open(src) as p:
        n, g = len(p.ops), p.schedule.grad_accum
    calls = vp.SYNC_MAX_KERNELS // n + 1

    def bigger(run):
        run["op_counts"].update(calls_per_microbatch=[calls] * n, runs_per_call=[1] * n, runs_per_step=[calls * g] * n)

    path = with_run(src, tmp_path / "big.pvl", bigger)
    with pvl.open(path) as prof:
        assert not vp.small_pass(prof)
        doc = Document(prof)
        panel = vp.VerdictPanel(doc)
        qtbot.addWidget(panel)
        assert panel.result is None and "Computing the verdict" in panel.body.text()
        assert vp.document_verdict(doc, compute=False) is None  # not computed on this thread
        qtbot.waitUntil(panel.is_ready, timeout=120000)
        assert panel.failed is None and panel.result.ipu.fits is not None
        assert vp.document_verdict(doc, compute=False) is panel.result  # cached for the Roofline's line


def test_notes_relate_the_points_bounds_to_the_run_s_bottleneck(qtbot):
    """The points are bound by their own dominant time; the notes line says how that relates to the Summary's
    bottleneck (the sample's is the host step: time no op owns)."""
    from popvision_lite.analysis import roofline as rl
    from popvision_lite.analysis.run_totals import run_totals

    v, prof = _sample_view(qtbot, "bert_mini_4ipu_pipeline.pvl", shown=False)  # the notes' text
    try:
        rt = run_totals(prof)
        assert rt.bottleneck == "host"
        rel = rl.bottleneck_relation(v.analysis, rt.bottleneck)
        assert v.notes.text().startswith(rel) and "run bottleneck host (Summary): time no op owns" in rel
    finally:
        prof.close()
