"""The binding constraint of a run that does not fit (analysis/fit_constraint.py): which tiles, the cause (total
bytes or an uneven layout), the category and the tensors, on a hand-built profile whose every byte is known
(tests/support/insights_profile.py) and on the bundled out-of-memory sample."""

from pathlib import Path

import numpy as np
import pytest

import popvision_lite as pvl
from popvision_lite.analysis.fit_constraint import TOTAL_BYTES, UNEVEN, binding_constraint
from tests.support.insights_profile import write_small

SAMPLES = Path(__file__).resolve().parents[2] / "sample_profiles"


def test_uneven_layout_names_the_tiles_the_category_and_the_tensors(tmp_path):
    # 8 tiles of 1000 B: always live 426 B each (w0 250, adam 100, code 76); fwd/matmul/out (400 B on tiles 0-2,
    # 500 on tile 3) and fwd/relu/out (300 B on tiles 2-5) pile up on tiles 2 and 3 from liveness step 2 on
    with pvl.open(write_small(tmp_path / "p.pvl")) as p:
        b = binding_constraint(p)
    c = b.binding
    assert not b.fits and b.cause == UNEVEN and c.cause == UNEVEN
    assert c.tiles_over == 2 and c.over_tiles.tolist() == [3, 2]          # fullest first
    assert c.fullest_tile == 3 and c.fullest_bytes == 426 + 500 + 300
    assert c.total_bytes == 8 + 4 * 826 + 1126 + 1226 + 2 * 526 and c.total_bytes < c.sram_bytes  # + constant c
    assert c.binding_category == "variable"
    cat = c.categories.loc["variable"]
    assert cat["mean_over"] == pytest.approx((1126 - 76 + 1226 - 76) / 2)
    assert cat["not_always_live_over"] == pytest.approx((700 + 800) / 2)
    # the tensors at the tiles' own peak (liveness step 2), beyond an even share of their bytes over 8 tiles;
    # the weights and the optimizer state are spread evenly, so they are not named
    t = c.tensors.set_index("name")
    assert list(t.index) == ["fwd/matmul/out", "fwd/relu/out"]
    assert t.loc["fwd/matmul/out", "bytes_on_tiles"] == 900 and t.loc["fwd/matmul/out", "tiles_mapped"] == 4
    assert t.loc["fwd/matmul/out", "excess"] == pytest.approx(900 - 2 * 1700 / 8)
    assert t.loc["fwd/relu/out", "excess"] == pytest.approx(600 - 2 * 1200 / 8)
    head = b.headline()
    assert "2 of 8 tiles over capacity" in head and "uneven layout" in head and "fwd/matmul/out" in head
    assert "tiles 2-3" in b.text()


def test_total_bytes_when_even_a_perfect_layout_cannot_fit(tmp_path):
    with pvl.open(write_small(tmp_path / "p.pvl", cap=300)) as p:
        b = binding_constraint(p)
        total = int(p.stored_table("memory_by_tile")["total"].sum())
    c = b.binding
    assert b.cause == TOTAL_BYTES and c.tiles_over == 8 and c.total_bytes == total > 8 * 300
    assert c.even_fill == pytest.approx(total / 2400)
    # a total too large is described by its largest parts, not by what sits above an even share
    assert c.tensors["name"].iloc[0] == "w0" and c.tensors["bytes_on_tiles"].iloc[0] == 8 * 250
    assert "even a perfectly even layout would not fit" in b.headline()


def test_each_ipu_is_judged_on_its_own(tmp_path):
    with pvl.open(write_small(tmp_path / "p.pvl", num_ipus=2)) as p:
        b = binding_constraint(p)
    assert [c.tiles_over for c in b.ipus] == [2, 0] and b.binding.ipu == 0
    # IPU 0 holds tiles 0-3: 834 + 826 + 1126 + 1226 = 4,012 B on 4 x 1000 B, just too many bytes for any layout
    assert [c.total_bytes for c in b.ipus] == [4012, 2704] and [c.cause for c in b.ipus] == [TOTAL_BYTES, "fits"]
    df = b.to_frame()
    assert df["total_bytes"].sum() == 8 + 4 * 826 + 1126 + 1226 + 2 * 526 and list(df["ipu"]) == [0, 1]
    # an IPU that fits names no tensors, and the numbers (fit.json, insights) still read (a KeyError on 'name' once
    # stopped a GPT-2-medium search at its report)
    n = b.numbers()
    assert n["ipus"][1]["tensors"] == [] and n["ipus"][0]["tensors"] and n["binding_ipu"] == 0


def test_the_oom_sample_sums_to_its_memory_and_names_its_largest_tensor():
    with pvl.open(SAMPLES / "bert_large_1ipu_oom.pvl") as p:
        b = binding_constraint(p)
        bt = p.stored_table("memory_by_tile")
        vt = p.variable_tiles
    c = b.binding
    assert c.total_bytes == int(bt["total"].sum()) and c.tiles_over == int(bt["over_capacity"].sum())
    assert c.fullest_bytes == int(bt["total"].max()) and c.cause == TOTAL_BYTES
    top = c.tensors.iloc[0]
    # the named tensor's bytes on the over-capacity tiles are at most what the variable_tiles table holds there
    on = vt[(vt["var_id"] == top["var_id"]) & vt["tile"].isin(c.over_tiles)]["bytes"].sum()
    assert 0 < top["bytes_on_tiles"] <= on
    n = b.numbers()
    assert n["cause"] == TOTAL_BYTES and n["ipus"][0]["tiles_over"] == c.tiles_over
    assert np.isfinite(c.imbalance) and c.imbalance >= 1


def test_a_run_that_fits_says_so():
    with pvl.open(SAMPLES / "bert_tiny_mk2.pvl") as p:
        b = pvl.binding_constraint(p)
    assert b.fits and b.cause == "fits" and b.headline().startswith("Fits:")


def test_every_surface_of_a_run_that_does_not_fit_says_what_binds_and_offers_the_search(capsys):
    """The report's summary.md, ``info`` and the verdict carry the same headline and the fit advisor's command."""
    from popvision_lite.analysis.summary import summary_markdown
    from popvision_lite.cli.main import main

    path = SAMPLES / "bert_large_1ipu_oom.pvl"
    with pvl.open(path) as p:
        head = binding_constraint(p).headline()
        md = summary_markdown(p)
    assert f"* why: {head}" in md and f"`popvision-lite fit {path}`" in md
    assert main(["info", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"why      {head}" in out and f"popvision-lite fit {path}" in out
    assert head in pvl.verdict(path).headline()


def test_the_tensors_of_a_recomputed_run_count_only_the_intervals_live_at_each_tiles_peak(tmp_path):
    """A recomputed BERT (its recomputed activations live in several intervals: ``variable_intervals``) judged
    against a quarter of its fullest tile: each named tensor's bytes on the tiles over capacity are those of the
    variable_tiles rows whose variable is live at that tile's own peak liveness step, counted here row by row
    from the tables (an interval of the variable holding the step, else its first..last span, or always live)."""
    from popvision_lite.emulator.models.config import make_config
    from popvision_lite.emulator.models.emulated import run_model
    from popvision_lite.profile.writer import write_profile
    from tests.support.devices import ID as SMALL  # the shipped Mk2 cut to 92 tiles (decision 0395)

    data = run_model(make_config("bert", layers=2, recompute=True, seq=32), SMALL, timing_only=True).profile_data
    data.target.sram_bytes_per_tile = int(data.memory.sum(axis=(1, 2)).max()) // 4
    data.run["fits"] = False
    write_profile(tmp_path / "p.pvl", data)
    with pvl.open(tmp_path / "p.pvl") as p:
        c = binding_constraint(p, top=10_000).binding
        vt, var = p.stored_table("variable_tiles"), p.stored_table("variables").set_index("var_id")
        iv = p.stored_table("variable_intervals")
        peaks = np.asarray(p.liveness.tile_bytes(tiles=c.focus_tiles.tolist())).argmax(axis=0)
    assert len(iv) and c.tiles_over > 1
    spans = {int(k): list(zip(g["first_lstep"], g["last_lstep"], strict=True)) for k, g in iv.groupby("var_id")}

    var_span = {int(k): (bool(a), int(f), int(la)) for k, a, f, la in
                zip(var.index, var["always_live"], var["first_lstep"], var["last_lstep"], strict=True)}
    peak_of = dict(zip(c.focus_tiles.tolist(), peaks.tolist(), strict=True))
    rows = vt[vt["tile"].isin(c.focus_tiles)]

    def on_focus(intervals: bool) -> dict[int, int]:
        got: dict[int, int] = {}
        for tile, vid, nbytes in zip(rows["tile"].tolist(), rows["var_id"].tolist(), rows["bytes"].tolist(),
                                     strict=True):
            always, first, last = var_span[vid]
            step = peak_of[tile]
            if always or any(a <= step <= b for a, b in (spans[vid] if intervals and vid in spans else [(first, last)])):
                got[vid] = got.get(vid, 0) + nbytes
        return got

    want = on_focus(True)
    assert want != on_focus(False)  # the intervals matter here
    t = c.tensors
    assert dict(zip(t["var_id"].tolist(), t["bytes_on_tiles"].tolist(), strict=True)) == (
        want if c.cause == TOTAL_BYTES else {k: want[k] for k in t["var_id"].tolist()})


def test_tiles_per_variable_counts_distinct_tiles_as_np_unique_of_the_pairs():
    """``_tiles_per_var`` (one sort of a combined key) gives what ``np.unique`` of the (var, tile) pairs and then
    of their vars gives: a variable with several rows on one tile counts that tile once; negative ids and an
    empty table included."""
    from popvision_lite.analysis.fit_constraint import _tiles_per_var

    rng = np.random.default_rng(7)
    for n, lo in ((0, 0), (1, 3), (40, -5), (3000, 0), (3000, 100)):
        var = rng.integers(lo, lo + 30, n).astype(np.int32)
        tile = rng.integers(2, 60, n).astype(np.int32)  # about one in three pairs repeated at n = 3000
        got = _tiles_per_var(var, tile)
        pairs = np.unique(np.stack([var.astype(np.int64), tile.astype(np.int64)]), axis=1)
        want = np.unique(pairs[0], return_counts=True)
        for g, w in zip(got, want, strict=True):
            assert g.dtype == w.dtype and np.array_equal(g, w), (n, lo)
