"""The notebook API as a data scientist uses it: pandas-native tables, typed columns, rich reprs, context
managers, one money / duration format."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import popvision_lite as pvl
from popvision_lite import units
from popvision_lite.profile.reader import Profile

SAMPLES = Path(__file__).resolve().parents[2] / "sample_profiles"


@pytest.fixture(scope="module")
def sample():
    return SAMPLES / "bert_tiny_mk2.pvl"


def test_tables_are_documented_and_edits_stay_local(sample):
    for name in ("steps", "ops", "programs", "compute_sets", "vertices", "variables", "variable_tiles",
                 "liveness_steps"):
        doc = getattr(Profile, name).__doc__
        assert doc and len(doc) > 40, name
    from popvision_lite.profile.reader import _StepTiles

    assert Profile.close.__doc__ and _StepTiles.window.__doc__
    with pvl.open(sample) as p:
        before = int(p.steps["cycles"].sum())
        s = p.steps
        s["cycles"] = 0
        s.loc[0, "kind_name"] = "sync"
        m = p.memory.by_tile()
        m["total_bytes"] = -1
        assert (p.memory.by_tile()["total_bytes"] > 0).all() and (p.stored_table("memory_by_tile")["total"] > 0).all()
        assert int(p.steps["cycles"].sum()) == before > 0
        assert p.steps is not p.steps


def test_window_frame_is_labelled(sample):
    with pvl.open(sample) as p:
        w = p.step_tiles.window(3, 6, tiles=[5, 7])
        f = w.to_frame()
        assert list(f.columns) == ["step", "tile", "cycles", "bytes_in", "bytes_out"]
        assert list(f["step"]) == [3, 3, 4, 4, 5, 5] and list(f["tile"]) == [5, 7] * 3
        np.testing.assert_array_equal(f["cycles"].to_numpy().reshape(3, 2), w.cycles)


def test_reprs_are_short_and_html_escapes(sample, tmp_path):
    with pvl.open(sample) as p:
        html = p._repr_html_()
        assert "<table>" in html and p.target.name in html
        v = pvl.verdict(p)
        assert len(repr(v)) < 400 and v.headline() in repr(v)
        assert "<table" in v._repr_html_() and "<script" not in v._repr_html_()
        found = pvl.insights(p)
        df = found.to_frame()
        assert len(df) == len(found) and list(df["kind"]) == [f.kind for f in found]
        assert str(df["severity"].dtype) == "category" and df["title"].dtype == "string"
        assert "<table" in found._repr_html_()


def test_compare_typed_and_closes():
    with pvl.compare(SAMPLES / "mlp_mk2.pvl", SAMPLES / "mlp_bow.pvl") as c:
        assert c.headline[["a", "b", "delta", "ratio"]].dtypes.eq(np.float64).all()
        assert not c.headline["a"].isna().any()  # no text row left as NaN in a numeric column
        assert c.facts["fits"].dtype == "boolean" and bool(c.facts["fits"].all())
        assert "present_in" in c.op_table().columns and "in" not in c.op_table().columns
        assert len(repr(c)) < 300 and "<table" in c._repr_html_()
        a = c.a
    assert a._f is None  # closed on leaving the with block


def test_open_sweep_nullable_booleans(tmp_path):
    from tests.support.sweep_table import write_sweep_table

    write_sweep_table(tmp_path, ["timing_only"], [dict(status="ok", fits="True", timing_only="True", profile="a.pvl"),
                                                  dict(status="failed", fits="", timing_only="", error="boom")])
    df = pvl.open_sweep(tmp_path)
    assert df["fits"].dtype == "boolean" and df["timing_only"].dtype == "boolean"
    assert len(df[df.fits]) == 1 and bool(pd.isna(df["fits"].iloc[1]))


@pytest.mark.parametrize("value, text", [(9.81e-5, "$0.0000981"), (0.0123, "$0.0123"), (0.07, "$0.0700"),
                                         (12.345, "$12.35"), (1234.5, "$1,234"), (0, "$0.00"),
                                         (float("nan"), "n/a")])
def test_one_money_format(value, text):
    assert units.format_usd(value) == text


def test_money_shows_the_ratio():
    """Two prices side by side keep their ratio readable (no '$0.01 vs $0.07')."""
    a, b = units.format_usd(0.0123), units.format_usd(0.0561)
    assert float(b[1:]) / float(a[1:]) == pytest.approx(0.0561 / 0.0123, rel=0.01)


@pytest.mark.parametrize("s, text", [(2e-4, "200 µs"), (31.76, "31.8 s"), (90, "1.5 min"), (7200, "2 h")])
def test_one_duration_format(s, text):
    assert units.format_seconds(s) == text
