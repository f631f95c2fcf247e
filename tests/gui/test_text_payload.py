"""Names from a file are shown as literal text on every surface, never as Qt rich text.

A profile (every name column, the model, the target name, a config entry), a torch trace (kernel
names), a sweep.csv (a header and a failed point's error) and a profile's ``format`` attribute carry
``<img src="file:///BAIT/bait.png">`` and ``<a href="file:///BAIT/link.txt">`` payloads.  The test
walks every view, selection, tooltip, dialog, the compare window and the headless exports, and checks:

* nothing opened a file in the bait folder: Linux inotify sees every open, including Qt's C++ reads
  of ``<img>`` resources, which Python audit hooks do not (``popvision_lite.testing.openwatch``);
* every text a widget shows (labels in their text format, tooltips as Qt decides rich or plain,
  QTextBrowser / pyqtgraph text items as HTML) renders without requesting any resource, and wherever
  the payload's marker is visible its tags are visible too (it was not parsed as markup);
* the literal payload is seen on the surfaces the issue names (so the walk is not vacuous).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import QByteArray, QModelIndex, Qt
from PySide6.QtGui import QImage, QTextDocument
from PySide6.QtGui import Qt as QtGuiNs

from popvision_lite.testing import openwatch
from tests.support.qt import capture_message_boxes

pytestmark = [pytest.mark.gui,
              pytest.mark.skipif(not openwatch.available(), reason="open watching needs Linux inotify")]

MARK = "PVLX"


class _RecordingDocument(QTextDocument):
    """Renders HTML as Qt would, recording (never loading) every resource it asks for."""

    def __init__(self):
        super().__init__()
        self.requested = []

    def loadResource(self, kind, url):  # noqa: N802 (Qt override)
        self.requested.append(url.toString())
        return QByteArray()


def shown(text: str, fmt=Qt.AutoText) -> tuple[str, list[str]]:
    """(visible text, resources requested) of ``text`` displayed in ``fmt`` as a QLabel / tooltip would."""
    text = str(text)
    if fmt == Qt.PlainText or (fmt == Qt.AutoText and not QtGuiNs.mightBeRichText(text)):
        return text, []
    d = _RecordingDocument()
    d.setHtml(text)
    d.size()  # lays it out: images are fetched for their size here
    return d.toPlainText(), d.requested


def normal(text: str) -> str:
    """Text compared as a reader sees it: control characters dropped, any run of whitespace (rich text
    collapses spaces and turns <br> into U+2028) one space."""
    import re

    return re.sub(r"[\s\u2028\u2029]+", " ", "".join(c for c in text if c.isprintable() or c.isspace()))


class Audit:
    """Checks every text a widget shows: ``mark`` visible means one of ``literals`` must be visible too."""

    def __init__(self, bait: Path, mark: str = MARK, literals=None):
        self.bait = bait
        self.mark = mark
        self.payload = (f'<img src="file://{bait}/bait.png"><a href="file://{bait}/link.txt">{MARK}</a>'
                        f'<b>&amp;</b>')
        # any of the payload's tags visible = shown literally (an elided name keeps only some of them);
        # rendered as markup, none is
        self.literals = [normal(x) for x in (literals or [f'<img src="file://{bait}/bait.png">',
                                                          f'<a href="file://{bait}/link.txt">', "</a>",
                                                          "<b>&amp;</b>"])]
        self.seen: set[str] = set()
        self.problems: list[str] = []
        self.checked = 0

    def check(self, where: str, text, fmt=Qt.AutoText) -> None:
        if not text:
            return
        self.checked += 1
        visible, requested = shown(text, fmt)
        if requested:
            self.problems.append(f"{where}: requests {requested}")
        if self.mark in visible:
            v = normal(visible)
            if any(lit in v for lit in self.literals) or (v.startswith("\u2026") and fmt == Qt.RichText
                                                          and "&lt;" in text):
                # an elided lane label keeps the name's tail; its HTML (escaped tags) says it is plain text
                self.seen.add(where.split("[")[0])
            else:
                self.problems.append(f"{where}: payload shown as markup: {visible[:200]!r}")

    def widget_tree(self, where: str, root) -> None:
        """Every text under ``root``: labels, tooltips, text browsers, item views, pyqtgraph scenes."""
        from PySide6.QtWidgets import QAbstractItemView, QGraphicsView, QLabel, QTextEdit, QWidget

        widgets = [root, *root.findChildren(QWidget)]
        for w in widgets:
            name = f"{where}/{type(w).__name__}"
            self.check(name + ".toolTip", w.toolTip())
            if isinstance(w, QLabel):
                self.check(name, w.text(), w.textFormat())
            elif isinstance(w, QTextEdit):
                self.check(name, w.toHtml(), Qt.RichText)
            elif isinstance(w, QAbstractItemView) and w.model() is not None:
                self.item_view(name, w.model())
            elif isinstance(w, QGraphicsView) and w.scene() is not None:
                self.scene(name, w.scene())

    def item_view(self, where: str, model) -> None:
        root = QModelIndex()
        rows = min(model.rowCount(root), 40)
        try:
            cols = model.columnCount(root)
        except TypeError:  # a list model keeps columnCount private: one column
            cols = 1
        for c in range(cols):
            self.check(f"{where}.header[{c}]", model.headerData(c, Qt.Horizontal, Qt.ToolTipRole))
            for r in range(rows):
                ix = model.index(r, c)
                self.check(f"{where}.tooltip[{r},{c}]", model.data(ix, Qt.ToolTipRole))
                self.check(f"{where}.cell[{r},{c}]", model.data(ix, Qt.DisplayRole), Qt.PlainText)

    def scene(self, where: str, scene) -> None:
        from PySide6.QtWidgets import QGraphicsTextItem

        for it in scene.items():
            self.check(f"{where}.item.toolTip", it.toolTip())
            if isinstance(it, QGraphicsTextItem):
                self.check(f"{where}.text", it.toHtml(), Qt.RichText)


@pytest.fixture(scope="module")
def bait(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bait")
    img = QImage(8, 8, QImage.Format_RGB32)
    img.fill(0xFF0000)
    assert img.save(str(folder / "bait.png"))
    (folder / "link.txt").write_text("private\n")
    return folder


@pytest.fixture
def audit(bait):
    a = Audit(bait)
    with openwatch.OpenWatch(bait) as watch:
        watch.events()
        yield a
        touched = watch.events()
    assert not touched, f"files outside the input were opened: {touched}"
    assert not a.problems, "\n".join(a.problems[:20])


def _hostile_profile(path: Path, payload: str) -> Path:
    from popvision_lite.profile.writer import write_profile
    from popvision_lite.testing.synthetic import make_synthetic

    data = make_synthetic(num_ipus=1, tiles_per_ipu=32, num_steps=120, num_layers=2)
    for name in ("ops", "programs", "compute_sets", "vertices", "variables", "liveness_steps"):
        df = getattr(data, name)
        if "name" in df:
            df["name"] = [f"{payload}{i}" for i in range(len(df))]
    data.target.name = payload
    data.run["model"] = payload
    data.run.setdefault("config", {})[payload] = payload
    data.run["config"]["batch"] = 8  # so the verdict view has a throughput to show the names next to
    data.run["samples_per_second"] = 1000.0
    write_profile(path, data)
    return path


@pytest.fixture(scope="module")
def hostile(tmp_path_factory, bait):
    folder = tmp_path_factory.mktemp("payload")
    return _hostile_profile(folder / "hostile.pvl", Audit(bait).payload)


def _walk_views(qtbot, audit, dw, doc):
    from popvision_lite.gui.state.resolve import select_op

    for key in dw.keys():
        view = dw.show_view(key)
        qtbot.waitUntil(lambda v=view: not callable(getattr(v, "is_ready", None)) or v.is_ready(), timeout=60000)
        qtbot.wait(50)
    op_id = int(doc.profile.stored_table("ops")["op_id"].iloc[1])
    select_op(doc, op_id, "test")
    qtbot.wait(200)
    views = dw.built_views()
    ex = views["execution"]
    s = int(np.flatnonzero(ex.index.op_id >= 0)[0])
    ex.show_step(s)
    ex.set_search("bait.png")
    assert ex.jump_match() >= 0  # the match's op name in the status line
    rf = views["roofline"]
    for key in ("ipu",):
        audit.check("roofline.hover", rf.tooltip_for(key, op_id), Qt.PlainText)
        audit.check("roofline.hover_item", rf.hover.textItem.toHtml(), Qt.RichText)
    for key, view in views.items():
        audit.widget_tree(key, view)


def test_every_view_selection_and_tooltip_shows_names_literally(qtbot, window, hostile, audit):
    window.open_paths([hostile])
    qtbot.waitUntil(lambda: window.doc_tabs.count() == 1, timeout=30000)
    dw = window.doc_tabs.widget(0)
    _walk_views(qtbot, audit, dw, window.current_document())
    audit.widget_tree("window", window)
    for must in ("summary/QLabel", "summary/PlotWidget.text", "execution/SafeTextBrowser",
                 "operations/QTableView.tooltip", "execution/QLabel"):
        assert must in audit.seen, f"{must} never showed the payload (seen: {sorted(audit.seen)})"
    assert audit.checked > 1000


def test_compare_window_shows_names_literally(qtbot, window, hostile, tmp_path, audit):
    from popvision_lite.gui.compare_window import open_compare

    other = tmp_path / "other.pvl"
    other.write_bytes(hostile.read_bytes())
    opened = []
    open_compare(window, str(hostile), str(other), on_open=opened.append)
    qtbot.waitUntil(lambda: bool(opened), timeout=60000)
    cw = opened[0]
    for key in cw.keys():
        cw.show_page(key)
        qtbot.wait(50)
    audit.widget_tree("compare", cw)
    assert "compare/QLabel" in audit.seen, sorted(audit.seen)
    cw.close()


def test_error_dialog_quotes_the_format_attribute_literally(qtbot, window, tmp_path, audit, monkeypatch):
    import h5py

    bad = tmp_path / "bad.pvl"
    with h5py.File(bad, "w") as h:
        h.attrs["format"] = audit.payload
    boxes = capture_message_boxes(monkeypatch)  # asserts each box is plain text
    window.open_paths([bad])
    qtbot.waitUntil(lambda: bool(boxes), timeout=10000)
    audit.check("dialog", boxes[0][2], Qt.PlainText)
    assert "dialog" in audit.seen


def test_torch_trace_kernel_names_are_literal(qtbot, document, tmp_path, audit):
    from popvision_lite.analysis.torch_trace import load_torch_trace
    from popvision_lite.gui.views.roofline.view import RooflineView
    from tests.support.qt import show_view

    trace = tmp_path / "trace.json"
    ev = [{"ph": "X", "cat": "kernel", "name": f"{audit.payload}gemm", "ts": 10 * i, "dur": 5,
           "args": {"flops": 1e9, "bytes": 1e6}} for i in range(3)]
    trace.write_text(json.dumps({"traceEvents": ev}))
    view = show_view(qtbot, RooflineView(document))
    qtbot.waitUntil(view.is_ready, timeout=60000)
    view.show_trace(load_torch_trace(trace), trace)
    qtbot.wait(50)
    key = next(k for k in view.points.scatter if k.startswith("measured"))
    spot = view.points.scatter[key].points()[0]
    view._on_hover(key, [spot])
    audit.check("roofline.measured_tip", view.hover.textItem.toHtml(), Qt.RichText)
    audit.widget_tree("roofline", view)
    assert "roofline.measured_tip" in audit.seen


def test_sweep_header_and_error_are_literal(qtbot, window, tmp_path, audit):
    from popvision_lite.sweep.results import write_meta, write_results

    samples = Path(__file__).resolve().parents[2] / "sample_profiles"
    (tmp_path / "profiles").mkdir()
    rows = []
    for i, failed in enumerate((False, False, True)):
        if not failed:
            (tmp_path / "profiles" / f"p{i}.pvl").write_bytes((samples / "mlp_mk2.pvl").read_bytes())
        rows.append({"point": i, "status": "failed" if failed else "ok",
                     "error": f"{audit.payload} crashed" if failed else "", "ipus": 1 + i,
                     audit.payload: f"v{i % 2}", "device": "ipu-mk2", "model": audit.payload,
                     "fits": not failed, "chips": 1 + i, "peak_tile_memory_pct": 50.0,
                     "samples_per_second": float("nan") if failed else 1000.0 * (1 + i), "total_cycles": 1000,
                     "cost_per_1m_samples_usd": float("nan"), "cost_note": audit.payload,
                     "profile": "" if failed else f"profiles/p{i}.pvl", "config_hash": f"h{i}", "key": f"k{i}"})
    write_meta(tmp_path, {"grid": {"ipus": [1, 2, 3], audit.payload: ["v0", "v1"]}})
    path = write_results(tmp_path, rows, ["ipus", audit.payload])
    from popvision_lite.gui.views.sweep_view import SweepView

    window.open_paths([str(path)])
    qtbot.waitUntil(lambda: isinstance(window.doc_tabs.currentWidget(), SweepView), timeout=10000)
    v = window.doc_tabs.currentWidget()
    v._open_row(2)  # the failed point: its error in the hint
    audit.widget_tree("sweep", v)
    for it in v.throughput_items:
        for spot in it.points():
            audit.check("sweep.point_tip", it.opts["tip"](x=spot.pos().x(), y=spot.pos().y(), data=spot.data()))
    assert {"sweep/QLabel", "sweep.point_tip"} <= audit.seen, sorted(audit.seen)


@pytest.mark.parametrize("view,suffix", [("summary", ".png"), ("roofline", ".png"), ("memory", ".png"),
                                         ("execution", ".png"), ("liveness", ".png"), ("ops", ".png"),
                                         ("verdict", ".png"), ("steps", ".svg"), ("roofline", ".csv")])
def test_headless_exports_open_nothing_outside(qtbot, hostile, tmp_path, audit, view, suffix):
    from popvision_lite.gui.headless import export_view

    trace = None
    if view == "roofline":
        trace = tmp_path / "trace.json"
        trace.write_text(json.dumps({"traceEvents": [
            {"ph": "X", "cat": "kernel", "name": f"{audit.payload}k", "ts": 0, "dur": 5, "args": {}}]}))
    out = tmp_path / f"{view}{suffix}"
    export_view(hostile, view, out, torch_trace=trace)
    assert out.stat().st_size > 0
    if suffix == ".svg":  # the SVG carries the names as escaped text, not as markup
        svg = out.read_text()
        assert "<img" not in svg and "<a href" not in svg


def test_onnx_node_names_reach_the_views_literally(qtbot, window, tmp_path, audit):
    """ONNX node and tensor names become op / variable names of the emulated profile."""
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    from popvision_lite.emulator.onnx_import import emulate_onnx

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 16])
    w = helper.make_tensor("w", TensorProto.FLOAT, [16, 16], np.ones(256, np.float32).tolist())
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name=f"{audit.payload}matmul"),
             helper.make_node("Relu", ["h"], ["y"], name=f"{audit.payload}relu")]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y], [w]),
                              opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    src = tmp_path / "m.onnx"
    src.write_bytes(model.SerializeToString())
    out = tmp_path / "m.pvl"
    emulate_onnx(src, out, timing_only=True)
    window.open_paths([out])
    qtbot.waitUntil(lambda: window.doc_tabs.count() == 1, timeout=30000)
    dw = window.doc_tabs.widget(0)
    _walk_views(qtbot, audit, dw, window.current_document())
    assert {"operations/QTableView.tooltip", "execution/SafeTextBrowser"} <= audit.seen, sorted(audit.seen)
