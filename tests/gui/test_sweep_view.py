"""The sweep results tab: File > Open of a sweep.csv, both plots, picking, opening and comparing profiles,
export."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PySide6.QtCore import Qt

from popvision_lite.sweep.results import write_meta, write_results
from tests.support.qt import capture_message_boxes

pytestmark = pytest.mark.gui
SAMPLES = Path(__file__).resolve().parents[2] / "sample_profiles"


@pytest.fixture
def sweep_csv(tmp_path):
    """A results folder in the format the engine writes: 6 points (2 devices x 3 chip counts) whose
    profiles are bundled samples, one that does not fit, one failed, prices only for ipu-bow."""
    (tmp_path / "profiles").mkdir()
    rows = []
    specs = [("ipu-mk2", 1, 1000.0, True), ("ipu-mk2", 2, 1800.0, True), ("ipu-mk2", 4, 3000.0, False),
             ("ipu-bow", 1, 1400.0, True), ("ipu-bow", 2, 2600.0, True), ("ipu-bow", 4, 0.0, None)]
    for i, (dev, chips, sps, fits) in enumerate(specs):
        src = SAMPLES / ("mlp_bow.pvl" if dev == "ipu-bow" else "mlp_mk2.pvl")
        dst = tmp_path / "profiles" / f"p{i}.pvl"
        dst.write_bytes(src.read_bytes())
        failed = fits is None
        cost = 1.67 * chips * 1e6 / sps / 3600 if dev == "ipu-bow" and not failed else float("nan")
        rows.append(dict(point=i, status="failed" if failed else "ok", error="killed by SIGSEGV" if failed else "",
                         ipus=chips, device=dev, model="mlp", fits=bool(fits), chips=chips,
                         peak_tile_memory_pct=120.0 if fits is False else 50.0,
                         samples_per_second=float("nan") if failed else sps, total_cycles=1000,
                         cost_per_1m_samples_usd=cost, cost_note="" if dev == "ipu-bow" else "no [price] (old sweep)",
                         profile="" if failed else f"profiles/p{i}.pvl", config_hash=f"h{i}", key=f"k{i}"))
    write_meta(tmp_path, {"grid": {"ipus": [1, 2, 4], "device": ["ipu-mk2", "ipu-bow"]}})
    return write_results(tmp_path, rows, ["ipus", "device"])


def _sweep_tab(qtbot, window, path):
    from popvision_lite.gui.views.sweep_view import SweepView

    window.open_paths([str(path)])
    qtbot.waitUntil(lambda: isinstance(window.doc_tabs.currentWidget(), SweepView), timeout=10000)
    return window.doc_tabs.currentWidget()


def test_file_open_shows_table_and_plots(qtbot, window, sweep_csv, tmp_path):
    from popvision_lite.gui import export as ex
    from popvision_lite.gui.actions.export import _current_view

    v = _sweep_tab(qtbot, window, sweep_csv)
    assert v.model.rowCount() == 6 and "pareto" in v.model.df.columns
    assert window.documents() == []  # a sweep tab is not a profile document
    # throughput vs chips: 4 fitting points by device, one cross for the point that does not fit, none for
    # the failed one
    fit_pts = sum(len(it.data) for it in v.throughput_items if it.opts["symbol"] == "o")
    cross = [it for it in v.throughput_items if it.opts["symbol"] == "x"]
    assert fit_pts == 4 and len(cross) == 1 and len(cross[0].data) == 1
    assert cross[0].data["x"][0] == pytest.approx(np.log10(4))
    # cost: only ipu-bow has a price; its two fitting points are both on the Pareto front (2 chips at 2600/s
    # are faster but cost more per sample than 1 chip at 1400/s: neither beats the other on both)
    assert list(v.front) == [False, False, False, True, True, False]
    assert len(v.front_line.xData) == 2
    assert "no price for ipu-mk2" in v.cost_plot.getPlotItem().titleLabel.text
    # exportable through File > Export like any view
    assert _current_view(window) is v
    out = tmp_path / "t.png"
    ex.export_plot(v.plot_items()["throughput_vs_chips"], out, 400)
    assert out.stat().st_size > 1000
    assert set(ex.view_tables(v)) == {"sweep"}


def test_click_opens_profile_and_two_picks_compare(qtbot, window, sweep_csv):
    v = _sweep_tab(qtbot, window, sweep_csv)
    item = next(it for it in v.throughput_items if it.opts["symbol"] == "o")
    spot = item.points()[0]
    with qtbot.waitSignal(v.open_requested) as sig:
        item.sigClicked.emit(item, [spot], None)
    assert sig.args[0] == v.df.loc[int(spot.data()), "profile"]
    qtbot.waitUntil(lambda: len(window.documents()) == 1, timeout=20000)
    assert Path(window.documents()[0].path) == Path(sig.args[0])
    # the tab is named by the point's grid values, not its file's hash
    r = v.df.loc[int(spot.data())]
    title = window.doc_tabs.tabText(window.doc_tabs.currentIndex())
    assert title == sig.args[1] == f"mlp ipus={r['ipus']} {r['device']}" and ".pvl" not in title

    # Ctrl+click picks instead of opening
    class CtrlClick:
        def modifiers(self):
            return Qt.ControlModifier

    opened = []
    v.open_requested.connect(lambda p, t: opened.append(p))
    item.sigClicked.emit(item, [item.points()[1]], CtrlClick())
    assert not opened and v.picked == [int(item.points()[1].data())]

    # two rows picked in the table -> Compare picked opens compare mode with both profiles
    window.doc_tabs.setCurrentWidget(v)
    v.select_rows([0, 3])
    assert v.picked == [0, 3] and v.compare_button.isEnabled()
    assert len(v.pick_items[0].data) == 2 and len(v.pick_items[1].data) == 1  # mk2 point has no cost
    with qtbot.waitSignal(v.compare_requested) as sig:
        qtbot.mouseClick(v.compare_button, Qt.LeftButton)
    assert {Path(p).name for p in sig.args} == {"p0.pvl", "p3.pvl"}
    qtbot.waitUntil(lambda: bool(getattr(window, "compare_windows", [])), timeout=30000)
    for w in window.compare_windows:
        w.close()


def test_failed_point_cannot_be_opened_and_bad_csv_is_refused(qtbot, window, sweep_csv, tmp_path, monkeypatch):

    v = _sweep_tab(qtbot, window, sweep_csv)
    got = []
    v.open_requested.connect(lambda p, t: got.append(p))
    v._open_row(5)
    assert not got and "SIGSEGV" in v.hint.text()
    v.toggle_pick(5)
    assert v.picked == []  # a failed point has no profile to compare
    v.toggle_pick(0)
    v.toggle_pick(4)  # Ctrl+click on two points: the table shows them selected
    assert v.picked == [0, 4] and v.compare_button.isEnabled()
    assert sorted(v._row_of(ix.row()) for ix in v.table.selectionModel().selectedRows()) == [0, 4]
    boxes = capture_message_boxes(monkeypatch)
    other = tmp_path / "other.csv"
    other.write_text("a,b\n1,2\n")
    window.open_paths([str(other)])
    qtbot.waitUntil(lambda: bool(boxes), timeout=10000)
    assert "not a sweep results table" in boxes[0][2]


def test_no_prices_says_why_instead_of_an_empty_plot(qtbot, sweep_csv):
    import popvision_lite as pvl
    from popvision_lite.gui.app import create_app
    from popvision_lite.gui.views.sweep_view import SweepView

    create_app()
    df = pvl.open_sweep(sweep_csv)
    v = SweepView(df[df.device == "ipu-mk2"])
    qtbot.addWidget(v)
    assert "no [price]" in v.no_cost_text.textItem.toPlainText()
    assert not v.front.any() and "no prices" in v.cost_plot.getPlotItem().titleLabel.text
    assert sum(len(it.data) for it in v.throughput_items) == 3  # 2 fit + 1 does not fit; still plotted


def test_series_join_points_that_differ_only_in_chips():
    import pandas as pd

    from popvision_lite.gui.views.sweep_view import _series

    df = pd.DataFrame({"batch": [8, 16, 8, 16, 8, 32], "chips": [4, 1, 1, 4, 2, 1]})
    x = df["chips"].to_numpy(dtype=float)
    y = np.arange(6, dtype=float)
    xs, ys = _series(df, ["batch"], x, y)
    # batch 8: chips 1, 2, 4 (rows 2, 4, 0); batch 16: chips 1, 4 (rows 1, 3); batch 32 alone: not drawn
    lines = {tuple(zip(*seg, strict=True)) for seg in _split(xs, ys)}
    assert lines == {((1, 2), (2, 4), (4, 0)), ((1, 1), (4, 3))}


def _split(xs, ys):
    cut = np.flatnonzero(np.isnan(xs))
    for a, b in zip(np.r_[0, cut + 1], np.r_[cut, len(xs)], strict=True):
        yield [int(v) for v in xs[a:b]], [int(v) for v in ys[a:b]]


def test_hover_shows_the_point_with_readable_numbers(qtbot, sweep_csv):
    import popvision_lite as pvl
    from popvision_lite.gui.app import create_app
    from popvision_lite.gui.views.sweep_view import SweepView

    create_app()
    df = pvl.open_sweep(sweep_csv)
    df.loc[3, "samples_per_second"] = 600_300.0
    v = SweepView(df)
    qtbot.addWidget(v)
    item = next(it for it in v.throughput_items if any(int(p.data()) == 3 for p in it.points()))
    spot = next(p for p in item.points() if int(p.data()) == 3)
    item.sigHovered.emit(item, [spot], None)  # what pyqtgraph emits under the mouse
    label = v.hover_labels[v.throughput_plot]
    text = label.toPlainText()
    assert label.isVisible() and "600,300 samples/s" in text and "e+05" not in text
    assert "mlp ipus=1 ipu-bow" in text and v.throughput_plot.toolTip() == text
    # the point's fit as the table says it (the column holds numpy bools), and its number as a whole number
    fits = bool(df.loc[3, "fits"])
    assert ("fits (peak tile" in text) == fits and ("does NOT fit" in text) == (not fits) and "fit unknown" not in text
    assert text.startswith(f"point {int(df.loc[3, 'point'])}: ") and not text.startswith("point 3.0")
    assert f"on {int(df.loc[3, 'chips'])} chip(s)" in text
    item.sigHovered.emit(item, [], None)
    assert not label.isVisible()
    # the table shows the same number the same way
    col = list(v.model.df.columns).index("samples_per_second")
    row = list(v.model.df["point"]).index(3)
    assert v.model.data(v.model.index(row, col)) == "600,300"


def test_extreme_points_inside_the_axes_with_labelled_ticks(qtbot, sweep_csv):
    import popvision_lite as pvl
    from popvision_lite.gui.app import create_app
    from popvision_lite.gui.views.sweep_view import SweepView

    create_app()
    v = SweepView(pvl.open_sweep(sweep_csv))
    qtbot.addWidget(v)
    for plot, items in ((v.throughput_plot, v.throughput_items), (v.cost_plot, v.cost_items)):
        (x0, x1), (y0, y1) = plot.getPlotItem().getViewBox().viewRange()
        xs = np.concatenate([it.data["x"] for it in items])
        ys = np.concatenate([it.data["y"] for it in items])
        span = x1 - x0
        assert x0 < xs.min() - 0.05 * span and xs.max() + 0.05 * span < x1  # whole markers, not clipped
        assert y0 < ys.min() and ys.max() < y1
        assert span >= 1.0 and y1 - y0 >= 1.0  # a decade at least: the log axis has a labelled tick


def test_table_shows_money_and_whole_numbers_in_one_format(qtbot, window, sweep_csv):
    """Costs in the one money format (no '9.81e-05' next to '0.0004132'), and whole numbers stored as floats
    (the table holds NaN for a failed point) without decimals ('1', not '1.000')."""
    from popvision_lite.units import format_usd

    v = _sweep_tab(qtbot, window, sweep_csv)
    m = v.model
    cols = list(m.df.columns)

    def shown(row, col):
        return m.data(m.index(row, cols.index(col)), Qt.DisplayRole)

    for r in range(m.rowCount()):
        cost = m.df["cost_per_1m_samples_usd"].iloc[r]
        assert shown(r, "cost_per_1m_samples_usd") == (format_usd(cost) if np.isfinite(cost) else "")
        if "chips" in cols and np.isfinite(m.df["chips"].iloc[r]):
            assert shown(r, "chips") == f"{int(m.df['chips'].iloc[r]):,}"
    assert any(shown(r, "cost_per_1m_samples_usd").startswith("$") for r in range(m.rowCount()))
    assert not any("e-" in str(shown(r, c)) for r in range(m.rowCount()) for c in cols)


def test_log_axes_label_1_2_5_in_the_quantitys_format(qtbot, window, sweep_csv):
    """The cost plot's axes read '$0.0002' and '2 M', not '9·10⁻⁵' next to '0.0001' or minor labels run
    together ('7·10⁵8·10⁵9·10⁵')."""
    from popvision_lite.gui.items.log_value_axis import LogValueAxis
    from popvision_lite.units import format_count, format_usd

    v = _sweep_tab(qtbot, window, sweep_csv)
    left = v.cost_plot.getPlotItem().getAxis("left")
    bottom = v.cost_plot.getPlotItem().getAxis("bottom")
    assert isinstance(left, LogValueAxis) and isinstance(bottom, LogValueAxis)
    assert left.tick_label(np.log10(2e-4)) == format_usd(2e-4) == "$0.000200"
    assert bottom.tick_label(np.log10(2e6)) == format_count(2e6) == "2 M"
    assert bottom.tick_label(np.log10(7e5)) == "" and bottom.tick_label(np.log10(1e6)) == "1 M"
    # what pyqtgraph asks for in log mode: log10 values and a scale
    assert left.logTickStrings([np.log10(5e-5), np.log10(9e-5)], 1.0, 1.0) == ["$0.0000500", ""]


def test_cost_title_says_plainly_which_device_was_costed_at_another_rate(qtbot, window, tmp_path):
    """As the verdict says it: the Mk2 has no published price of its own and is costed at the Bow's rate;
    the title names it in those words (it is not a device without a price)."""
    from popvision_lite.devices import chip_price

    (tmp_path / "profiles").mkdir()
    note = chip_price("ipu-mk2").source
    rows = []
    for i, (dev, chips, sps) in enumerate([("ipu-mk2", 1, 1000.0), ("ipu-bow", 1, 1400.0)]):
        dst = tmp_path / "profiles" / f"p{i}.pvl"
        dst.write_bytes((SAMPLES / ("mlp_bow.pvl" if dev == "ipu-bow" else "mlp_mk2.pvl")).read_bytes())
        rows.append(dict(point=i, status="ok", error="", ipus=chips, device=dev, model="mlp", fits=True, chips=chips,
                         peak_tile_memory_pct=50.0, samples_per_second=sps, total_cycles=1000,
                         cost_per_1m_samples_usd=1.67 * chips * 1e6 / sps / 3600,
                         cost_note=note if dev == "ipu-mk2" else "", profile=f"profiles/p{i}.pvl",
                         config_hash=f"h{i}", key=f"k{i}"))
    write_meta(tmp_path, {"grid": {"device": ["ipu-mk2", "ipu-bow"]}})
    v = _sweep_tab(qtbot, window, write_results(tmp_path, rows, ["device"]))
    title = v.cost_plot.getPlotItem().titleLabel.text
    assert "ipu-mk2 has no published price of its own: costed at another IPU's rate" in title
    assert "no price for" not in title
