"""Small fixes found in new-user QA (each a behaviour a user saw)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
pytest_plugins = ["gui_fixtures"]


def test_start_page_sample_descriptions_are_plain_text(tmp_path):
    """The start page showed markdown source ('the same with `--recompute`') for the samples."""
    from popvision_lite.gui.start_page import sample_descriptions

    (tmp_path / "a.pvl").write_bytes(b"")
    (tmp_path / "README.md").write_text(
        "| file | workload | shows |\n|---|---|---|\n"
        "| `a.pvl` | the same with `--recompute` | **lower** peak, `more` cycles |\n", encoding="utf-8")
    assert sample_descriptions([tmp_path / "a.pvl"]) == {
        "a.pvl": ("the same with --recompute", "lower peak, more cycles")}


def test_bundled_sample_descriptions_have_no_markdown():
    from popvision_lite.gui.start_page import sample_descriptions

    samples = sorted((ROOT / "sample_profiles").glob("*.pvl"))
    desc = sample_descriptions(samples)
    assert set(desc) == {p.name for p in samples}
    for name, (workload, shows) in desc.items():
        for text in (workload, shows):
            assert "`" not in text and "**" not in text, (name, text)


def _gui_main(monkeypatch, argv, env):
    """Run the GUI entry with a patched environment; run_app must never be reached."""
    import popvision_lite.gui.app as app
    from popvision_lite import cli

    for k in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM"):
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(app, "run_app", lambda args: (_ for _ in ()).throw(AssertionError("GUI started")))
    return cli.main(argv)


def test_mistyped_subcommand_is_exit_2_not_a_window(monkeypatch, capsys):
    import pytest

    with pytest.raises(SystemExit) as e:
        _gui_main(monkeypatch, ["emulat", "bert-tiny"], {"QT_QPA_PLATFORM": "offscreen"})
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "emulat: no such file" in err and "not a sub-command" in err and "emulate" in err


def test_missing_compare_file_is_exit_2(monkeypatch, capsys, tmp_path):
    import pytest

    a = ROOT / "sample_profiles" / "mlp_mk2.pvl"
    with pytest.raises(SystemExit) as e:
        _gui_main(monkeypatch, ["--compare", str(a), str(tmp_path / "b.pvl")], {"QT_QPA_PLATFORM": "offscreen"})
    assert e.value.code == 2
    assert f"{tmp_path / 'b.pvl'}: no such file" in capsys.readouterr().err


def test_no_display_is_a_clear_exit_2(monkeypatch, capsys):
    """Without a display Qt aborted the process (exit 134) with a plugin list."""
    import sys

    import pytest

    if not sys.platform.startswith("linux"):
        pytest.skip("the display check applies on Linux only")
    with pytest.raises(SystemExit) as e:
        _gui_main(monkeypatch, [str(ROOT / "sample_profiles" / "mlp_mk2.pvl")], {})
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "no display" in err and "popvision-lite export" in err


def _expected_mode() -> int:
    import os

    umask = os.umask(0o022)
    os.umask(umask)
    return 0o666 & ~umask


def test_profiles_and_exports_get_the_usual_file_mode(tmp_path):
    """mkstemp makes 0600 files: profiles and exports were unreadable by other users."""
    import stat
    import sys

    import pytest

    if sys.platform.startswith("win"):
        pytest.skip("POSIX modes")
    from popvision_lite.atomic_io import atomic_text, write_bytes_atomic
    from popvision_lite.profile import open_profile
    from popvision_lite.profile.csv_export import export_csv
    from popvision_lite.profile.synthetic import write_synthetic

    pvl = tmp_path / "run.pvl"
    write_synthetic(pvl, num_ipus=1, tiles_per_ipu=16, num_steps=8, seed=1)
    png = write_bytes_atomic(tmp_path / "a.png", b"\x89PNG")
    with atomic_text(tmp_path / "b.txt") as fh:
        fh.write("x")
    with open_profile(pvl) as p:
        export_csv(p, "ops", tmp_path / "ops.csv")
    for f in (pvl, png, tmp_path / "b.txt", tmp_path / "ops.csv"):
        assert stat.S_IMODE(f.stat().st_mode) == _expected_mode(), f



def _colour_mask(img):
    """Boolean mask of the saturated (curve-coloured) pixels of a QImage."""
    import numpy as np
    from PySide6.QtGui import QImage

    img = img.convertToFormat(QImage.Format_RGBA8888)
    a = np.frombuffer(img.constBits(), dtype=np.uint8).reshape(img.height(), img.bytesPerLine() // 4, 4)
    a = a[:, : img.width(), :3].astype(int)
    return a.max(axis=2) - a.min(axis=2) > 100


def _dark_mask(img):
    """Boolean mask of the dark grey/black pixels (axes, ticks, labels) of a QImage."""
    import numpy as np
    from PySide6.QtGui import QImage

    img = img.convertToFormat(QImage.Format_RGBA8888)
    a = np.frombuffer(img.constBits(), dtype=np.uint8).reshape(img.height(), img.bytesPerLine() // 4, 4)
    a = a[:, : img.width(), :3].astype(int)
    return (a.max(axis=2) < 110) & (a.max(axis=2) - a.min(axis=2) < 30)


def _near(mask, r=3):
    """``mask`` grown by ``r`` pixels in every direction."""
    import numpy as np

    out = mask.copy()
    for dy in range(-r, r + 1):
        for dx in range(-r, r + 1):
            out |= np.roll(np.roll(mask, dy, axis=0), dx, axis=1)
    return out


def test_plot_svg_matches_the_png(qtbot, document, tmp_path):
    """SVGs drawn by Qt (pyqtgraph's own SVG writer fails on our plots) had the liveness curves 1.25x
    the size of their axes (QSvgGenerator's 72 dpi vs the screen's 96), and every scatter point
    embedded the whole symbol atlas as a PNG (an 18 MB roofline SVG)."""
    from gui_fixtures import show_view
    from PySide6.QtGui import QColor, QImage, QPainter
    from PySide6.QtSvg import QSvgRenderer

    from popvision_lite.gui.export import _qt_svg
    from popvision_lite.gui.headless import export_view
    from popvision_lite.gui.views.roofline_view import RooflineView

    sample = ROOT / "sample_profiles" / "bert_tiny_mk2.pvl"  # as the export command does
    export_view(sample, "liveness", tmp_path / "l.svg")
    export_view(sample, "liveness", tmp_path / "l.png")
    r = QSvgRenderer(str(tmp_path / "l.svg"))
    vb = r.viewBoxF()
    svg = QImage(int(vb.width()), int(vb.height()), QImage.Format_ARGB32)
    svg.fill(QColor("white"))
    p = QPainter(svg)
    r.render(p)
    p.end()
    png = QImage(str(tmp_path / "l.png"))
    assert abs(png.width() - svg.width()) <= 8 and abs(png.height() - svg.height()) <= 8
    h, w = min(png.height(), svg.height()), min(png.width(), svg.width())
    m_png, m_svg = _colour_mask(png)[:h, :w], _colour_mask(svg)[:h, :w]
    assert m_png.sum() > 500
    # curves, axes and labels are where the PNG has them (the broken SVG drew axes at 72/96 scale)
    assert (m_svg & _near(m_png)).sum() > 0.9 * m_svg.sum()
    assert (m_png & _near(m_svg)).sum() > 0.9 * m_png.sum()
    d_png, d_svg = _dark_mask(png)[:h, :w], _dark_mask(svg)[:h, :w]
    assert d_png.sum() > 500
    assert (d_png & _near(d_svg)).sum() > 0.8 * d_png.sum()
    assert (d_svg & _near(d_png)).sum() > 0.8 * d_svg.sum()

    roof = show_view(qtbot, RooflineView(document), size=(1000, 600))
    qtbot.wait(50)
    data = _qt_svg(next(iter(roof.plot_items().values())))
    assert b"<image" not in data  # scatter symbols as vector paths, not copies of their atlas


def test_summary_phase_axis_stops_at_100_percent(qtbot, document):
    """The phase-share axis showed ticks up to 120% (the range leaves room for the bar labels)."""
    from gui_fixtures import show_view

    from popvision_lite.gui.views.summary_view import SummaryView

    view = show_view(qtbot, SummaryView(document))
    axis = view.plot.getPlotItem().getAxis("bottom")
    levels = axis._tickLevels or []  # set ticks (None: pyqtgraph's automatic ones, up to 120)
    labelled = [float(v) for v, text in (levels[0] if levels else []) if text]
    assert labelled and max(labelled) == 100 and 0 in labelled


def test_summary_lists_only_failed_numeric_checks(qtbot):
    """The summary listed every passing check as a raw dict (dozens of 'atol=0.02, elements=...' rows)."""
    from gui_fixtures import show_view

    from popvision_lite.gui.app import create_app
    from popvision_lite.gui.document import Document
    from popvision_lite.gui.views.summary_view import SummaryView
    from popvision_lite.profile.reader import open_profile

    create_app()
    path = ROOT / "sample_profiles" / "mlp_mk2.pvl"
    doc = Document(open_profile(path), path)
    try:
        checks = doc.profile.run["numeric_checks"]
        view = show_view(qtbot, SummaryView(doc))
        text = view.info.text()
        assert "all passed" in text and f"({len(checks)} tensors vs numpy" in text
        assert "atol=" not in text
        worst = max(v["max_rel_err"] for v in checks.values())
        assert f"worst max rel err {worst:.2g}" in text
        # a failing check is listed with its numbers
        name = next(iter(checks))
        view.summary.numeric_checks[name] = dict(checks[name], passed=False)
        view._fill()
        text = view.info.text()
        assert "FAILED" in text and name in text and "atol=" in text
    finally:
        doc.close()


def test_summary_config_shows_only_the_models_settings(qtbot):
    """A BERT run's config table listed the GNN's nodes/edges and the conv's image size."""
    import re

    from gui_fixtures import show_view

    from popvision_lite.gui.app import create_app
    from popvision_lite.gui.document import Document
    from popvision_lite.gui.views.summary_view import SummaryView
    from popvision_lite.profile.reader import open_profile

    create_app()
    shown = {}
    for name in ("bert_tiny_mk2", "gnn_mk2"):
        path = ROOT / "sample_profiles" / f"{name}.pvl"
        doc = Document(open_profile(path), path)
        try:
            view = show_view(qtbot, SummaryView(doc))
            text = view.info.text()
            config = text.split("<h3>Config</h3>", 1)[1]
            shown[name] = set(re.findall(r"<tr><td>([a-z_]+)</td>", config))
            assert set(doc.profile.run["config"]) >= shown[name]
        finally:
            doc.close()
    assert {"seq", "heads", "batch", "hidden"} <= shown["bert_tiny_mk2"]
    assert not {"nodes", "edges", "image"} & shown["bert_tiny_mk2"]
    assert {"nodes", "edges", "batch", "hidden"} <= shown["gnn_mk2"]
    assert not {"seq", "heads", "image", "vocab"} & shown["gnn_mk2"]
