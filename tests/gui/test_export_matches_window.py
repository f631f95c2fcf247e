"""Every headless export shows what the window shows (issue 46, items 11-15): the whole plot at a size that
holds it, the same plot in PNG and SVG, every row of a table, every line of a panel, and SVG that renders
alike in Qt, rsvg and ImageMagick (no embedded images, masks or clips that those read differently)."""

from __future__ import annotations

import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from tests.gui.test_export import _near  # a mask grown by r pixels

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "sample_profiles"
NS = "{http://www.w3.org/2000/svg}"


def _rgb(img):
    from PySide6.QtGui import QImage

    img = img.convertToFormat(QImage.Format_RGBA8888)
    a = np.frombuffer(img.constBits(), dtype=np.uint8).reshape(img.height(), img.bytesPerLine() // 4, 4)
    return a[:, : img.width(), :3].astype(int)


def _masks(img):
    """(coloured, dark) pixel masks: curves and fills; axes, text and hatch lines."""
    a = _rgb(img)
    spread, top = a.max(axis=2) - a.min(axis=2), a.max(axis=2)
    return spread > 60, (top < 150) & (spread < 30)


def _alike(png, other, what):
    """``other`` (an SVG rendering) draws colour and dark lines where the PNG does, and the PNG where it does."""
    h, w = min(png.height(), other.height()), min(png.width(), other.width())
    for k, (m1, m2) in enumerate(zip(_masks(png), _masks(other), strict=True)):
        m1, m2 = m1[:h, :w], m2[:h, :w]
        assert m1.sum() > 200, (what, k)
        assert (m1 & _near(m2)).sum() > 0.85 * m1.sum(), (what, k, (m1 & _near(m2)).sum(), m1.sum())
        assert (m2 & _near(m1)).sum() > 0.85 * m2.sum(), (what, k, (m2 & _near(m1)).sum(), m2.sum())


def _qt_render(svg_path, size):
    from PySide6.QtGui import QColor, QImage, QPainter
    from PySide6.QtSvg import QSvgRenderer

    r = QSvgRenderer(str(svg_path))
    img = QImage(size[0], size[1], QImage.Format_ARGB32)
    img.fill(QColor("white"))
    p = QPainter(img)
    r.render(p)
    p.end()
    return img


def test_execution_svg_is_plain_svg_that_renders_like_the_png(qtbot, tmp_path):
    """The Execution SVG lost its hatching (a pattern scaled by its shape's matrix), its phase band vanished
    under the chart's unclipped hatch in rsvg, and ImageMagick could not open its embedded images."""
    from PySide6.QtGui import QImage

    from popvision_lite.gui.headless import export_view

    sample = SAMPLES / "bert_large_1ipu_oom.pvl"  # a folded steady state: hatched
    export_view(sample, "execution", tmp_path / "e.png", also=[tmp_path / "e.svg"])  # one drawing, both writers
    root = ET.parse(tmp_path / "e.svg").getroot()
    for tag in ("image", "mask"):
        assert not list(root.iter(NS + tag)), tag
    assert "clip-path" not in (tmp_path / "e.svg").read_text()
    patterns = {p.get("id") for p in root.iter(NS + "pattern")}
    hatched = [g for g in root.iter(NS + "g") if re.search(r"url\(#([^)]+)\)", g.get("fill", ""))]
    assert patterns and hatched  # the folded steady state is hatched ...
    assert all(g.get("transform") is None for g in hatched)  # ... in page units, not 5e-7 of them
    png = QImage(str(tmp_path / "e.png"))
    _alike(png, _qt_render(tmp_path / "e.svg", (png.width(), png.height())), "Qt")
    for tool, cmd in (("rsvg-convert", ["rsvg-convert", "-b", "white", "e.svg", "-o", "r.png"]),
                      ("ImageMagick", ["convert", "e.svg", "-background", "white", "-flatten", "m.png"])):
        exe = shutil.which(cmd[0])
        if exe is None:
            continue  # the Qt rendering above is checked everywhere; these where the tools are installed
        run = subprocess.run([exe, *cmd[1:]], cwd=tmp_path, capture_output=True, text=True, timeout=120)
        out = tmp_path / cmd[-1]
        if tool == "ImageMagick" and (run.returncode != 0 or not out.exists()) and "stand-in" in run.stderr:
            continue  # not ImageMagick at all
        assert run.returncode == 0 and out.exists(), (tool, run.stderr[-500:])
        _alike(png, QImage(str(out)), tool)


def test_steps_png_and_svg_are_the_whole_per_step_chart(qtbot, small_profile, tmp_path):
    """--view steps drew a 1400 x 160 chart into a 1400 x 900 PNG from its top-left corner (60 % blank, the
    lanes below it bleeding in) and the SVG was only the 160 px chart: both are now the chart with its
    imbalance strip (its time axis) and legend, at their own aspect ratio."""
    from PySide6.QtGui import QImage
    from PySide6.QtSvg import QSvgRenderer

    from popvision_lite.gui.headless import export_view

    assert "1400 x" in export_view(small_profile, "steps", tmp_path / "s.png", also=[tmp_path / "s.svg"])
    png = QImage(str(tmp_path / "s.png"))
    vb = QSvgRenderer(str(tmp_path / "s.svg")).viewBoxF()
    assert abs(vb.width() - png.width()) <= 2 and abs(vb.height() - png.height()) <= 2
    assert 250 <= png.height() <= 600  # chart + strip + legend, not padded to 900
    a = _rgb(png)
    rows_blank = (a.max(axis=(1, 2)) - a.min(axis=(1, 2))) < 10
    assert not rows_blank[-png.height() // 10:].all()  # the legend is at the bottom: no blank band
    _alike(png, _qt_render(tmp_path / "s.svg", (png.width(), png.height())), "Qt")
    # a height that the chart cannot take: the chart as large as fits, centred on the background
    export_view(small_profile, "steps", tmp_path / "t.png", width=1400, height=900)
    t = QImage(str(tmp_path / "t.png"))
    assert (t.width(), t.height()) == (1400, 900)
    b = _rgb(t)
    blank = np.flatnonzero((b.max(axis=(1, 2)) - b.min(axis=(1, 2))) >= 10)
    top, bottom = blank[0], t.height() - 1 - blank[-1]
    assert top > 100 and abs(top - bottom) <= 20, (top, bottom)  # centred (the plot has its own margins)


def test_ops_png_has_every_row(qtbot, small_profile, tmp_path, monkeypatch):
    """The Operations PNG was the table as it fit in a 1400 x 900 window (about 40 of 183 rows)."""
    import popvision_lite as pvl
    from popvision_lite.gui.export import pictures
    from popvision_lite.gui.headless import export_view

    with pvl.open(small_profile) as p:
        n = len(p.stored_table("ops"))
    info = export_view(small_profile, "ops", tmp_path / "o.png")
    assert info.endswith(f"{n:,} of {n:,} rows"), info
    from PySide6.QtGui import QImage

    img = QImage(str(tmp_path / "o.png"))
    assert img.height() >= 20 * n  # every row, at the table's own row height (Qt's minimum is about 20 px)
    # taller than a PNG may be: the rows that fit, and a line under them naming the CSV export
    monkeypatch.setattr(pictures, "MAX_PIXELS", 300)
    info = export_view(small_profile, "ops", tmp_path / "p.png")
    shown = int(re.search(r"([\d,]+) of", info).group(1).replace(",", ""))
    assert 5 < shown < n and QImage(str(tmp_path / "p.png")).height() <= 300, info


def test_verdict_png_has_every_line_of_the_panel(qtbot, tmp_path):
    """The verdict PNG was the panel as the Summary's 375 px column showed it, cut under the table: the price
    caveats under it were lost.  It is 900 px wide and as tall as every line of the panel."""
    from PySide6.QtGui import QImage

    from popvision_lite.gui.app import create_app
    from popvision_lite.gui.export.pictures import PAD, export_panel_png
    from popvision_lite.gui.headless import wait_ready
    from popvision_lite.gui.state.document import Document
    from popvision_lite.gui.views.summary_view import SummaryView
    from popvision_lite.profile.reader import open_profile
    from tests.support.qt import show_view

    create_app()
    doc = Document(open_profile(SAMPLES / "bert_tiny_mk2.pvl"))
    try:
        view = show_view(qtbot, SummaryView(doc), size=(1200, 800))
        wait_ready(view)
        panel = view.verdict
        notes = panel.result.price_notes()
        assert notes  # the sample's Mk2 has no published price: the caveat says what it is costed at
        parent = panel.parentWidget()
        w, h = export_panel_png(panel, tmp_path / "v.png")
        assert (w, h) == (QImage(str(tmp_path / "v.png")).width(), QImage(str(tmp_path / "v.png")).height())
        assert w == 900
        text = panel.body.text()
        assert all(n.split(":")[0][:30] in text for n in notes)  # the caveats are in the panel ...
        body_h = panel.body.heightForWidth(w - 2 * PAD)
        assert h >= body_h + panel.gpus.sizeHint().height() + 2 * PAD  # ... and the picture holds all of it
        assert panel.parentWidget() is parent and panel.isVisible()  # back in the Summary
    finally:
        doc.close()


@pytest.mark.parametrize("kind", ["rect", "clip"])
def test_portable_svg_flattens_patterns_and_clips(kind):
    """Qt's hatch is a pattern of one rect masked by pixel rects; a plot's clip is a clip-path rect, and Qt
    leaves a clip set on the next item (a legend swatch clipped to the previous label).  The portable SVG
    has the pixel rects in the pattern, shapes cut to their clip, and the left-over clip gone."""
    from popvision_lite.gui.export.svg_portable import portable_svg

    src = """<?xml version="1.0"?><svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 100 100"><defs>
    <mask id="m" x="0" y="0" width="8" height="8"><rect x="7" y="0" width="1" height="1"/></mask>
    <pattern id="p" width="8" height="8" patternUnits="userSpaceOnUse">
    <rect x="0" y="0" width="8" height="8" fill="#787878" mask="url(#m)"/></pattern>
    <clipPath id="c1"><path vector-effect="none" d="M10,10 L50,10 L50,50 L10,50 L10,10 Z"/></clipPath>
    <clipPath id="c2"><path vector-effect="none" d="M60,60 L70,60 L70,70 L60,70 L60,60 Z"/></clipPath></defs>
    <g clip-path="url(#c1)"><g fill="url(#p)" transform="matrix(1e-6,0,0,-2,10,50)">
    <rect x="0" y="0" width="2e7" height="1e15"/></g></g>
    <g clip-path="url(#c2)"><g fill="#2ca02c" transform="matrix(1,0,0,1,20,80)"><rect x="0" y="0" width="5" height="5"/>
    </g></g></svg>"""
    root = ET.fromstring(portable_svg(src.encode()))
    assert not list(root.iter(NS + "mask"))
    pat = next(root.iter(NS + "pattern"))
    assert [(r.get("x"), r.get("y"), r.get("fill")) for r in pat] == [("7", "0", "#787878")]
    hatch, swatch = [g for g in root.iter(NS + "g") if g.get("fill") in ("url(#p)", "#2ca02c")]
    r = next(iter(hatch))
    # 1e15 units tall at -2 px each: cut to the clip's 40 x 40 px
    assert (r.get("x"), r.get("y"), r.get("width"), r.get("height")) == ("10", "10", "20", "40")
    assert next(iter(swatch)).get("x") == "20"  # the swatch outside its left-over clip is drawn, unclipped
    assert not [g for g in root.iter(NS + "g") if g.get("clip-path")]
    assert not list(root.iter(NS + "clipPath"))
