"""The variables a liveness step lists are the ones whose bytes make its curve: a variable that a re-run
program (recomputation) writes anew is listed only inside its live intervals (``variable_intervals``), not
over its whole first..last span."""

from pathlib import Path

import numpy as np
import pytest

from popvision_lite.analysis.liveness import live_variables
from popvision_lite.emulator.models.config import make_config
from popvision_lite.emulator.models.emulated import run_model
from popvision_lite.profile import schema
from popvision_lite.profile.reader import open_profile
from tests.support.devices import ID as SMALL  # the shipped Mk2 cut to 92 tiles (decision 0395)

ROOT = Path(__file__).resolve().parents[2]
V3_0 = ROOT / "tests" / "fixtures" / "v3.0" / "mlp_mk2.pvl"


@pytest.fixture(scope="module")
def recompute_profile(tmp_path_factory):
    """A 2-layer BERT with recomputation, timing only: the recomputed forward replays the forward's programs."""
    path = tmp_path_factory.mktemp("live") / "bert_recompute.pvl"
    run_model(make_config("bert", layers=2, recompute=True), SMALL, timing_only=True, profile_path=path)
    return open_profile(path)


def _listed_bytes(prof, lstep, tile):
    return int(live_variables(prof, lstep, tile=tile)["bytes_on_tile"].sum())


def test_recomputed_variables_listed_only_while_live_and_the_list_adds_up_to_the_curve(recompute_profile):
    prof = recompute_profile
    iv = prof.stored_table("variable_intervals")
    assert len(iv) and iv.groupby("var_id").size().min() >= 2, "the recompute sample re-runs its forward programs"
    ltb = np.asarray(prof.liveness.tile_bytes(), dtype=np.int64)
    checked = 0
    for s in range(ltb.shape[0]):
        tile = int(np.argmax(ltb[s]))
        assert _listed_bytes(prof, s, tile) == ltb[s, tile], f"liveness step {s}, tile {tile}"
        checked += 1
    # a step between two intervals of a variable does not list it
    v = prof.stored_table("variables").set_index("var_id")
    var, rows = next(iter(iv.groupby("var_id")))
    gap = int(rows["last_lstep"].min()) + 1
    assert v.loc[var, "first_lstep"] <= gap <= v.loc[var, "last_lstep"]
    if not ((rows["first_lstep"] <= gap) & (rows["last_lstep"] >= gap)).any():
        assert var not in set(live_variables(prof, gap)["var_id"])
    assert checked == ltb.shape[0]


def test_a_variable_live_in_several_intervals_shows_the_interval_live_at_the_step(recompute_profile):
    """first/last lstep of a listed variable are those of its interval that holds the step (not its whole
    first..last span), and 'intervals' counts its live intervals; a variable live once shows its span and 1."""
    prof = recompute_profile
    iv = prof.stored_table("variable_intervals")
    v = prof.stored_table("variables").set_index("var_id")
    counts = iv.groupby("var_id").size()
    var = int(counts.index[0])
    rows = iv[iv["var_id"] == var].sort_values("first_lstep")
    last = rows.iloc[-1]  # the recomputed interval, after the span's start
    step = int(last["first_lstep"])
    assert step > v.loc[var, "first_lstep"]
    live = live_variables(prof, step).set_index("var_id")
    assert (live.loc[var, "first_lstep"], live.loc[var, "last_lstep"], live.loc[var, "intervals"]) == \
        (step, int(last["last_lstep"]), int(counts[var]))
    once = live[~live.index.isin(counts.index)]
    assert len(once) and (once["intervals"] == 1).all()
    assert (once["first_lstep"] == v.loc[once.index, "first_lstep"]).all()
    assert (once["last_lstep"] == v.loc[once.index, "last_lstep"]).all()
    # every listed variable's interval holds the step, also on a tile
    for tile in (None, int(np.argmax(np.asarray(prof.liveness.tile_bytes(), dtype=np.int64)[step]))):
        df = live_variables(prof, step, tile=tile)
        assert ((df["first_lstep"] <= step) & (df["last_lstep"] >= step)).all()
        assert list(df.columns[-3:]) == ["intervals", "op_id", "var_id"]
        # largest first (bytes on the tile when one is given), equal sizes by var_id
        key = df["bytes" if tile is None else "bytes_on_tile"].to_numpy()
        ids = df["var_id"].to_numpy()
        assert len(df) > 1 and ((key[1:] < key[:-1]) | ((key[1:] == key[:-1]) & (ids[1:] > ids[:-1]))).all()


@pytest.mark.parametrize("step", [0, 3])
def test_a_format_3_0_file_opens_with_no_intervals_and_lists_by_span(step):
    prof = open_profile(V3_0)
    assert (prof.format_version, prof.format_minor) == (3, 0)
    assert len(prof.stored_table("variable_intervals")) == 0
    v = prof.stored_table("variables")
    want = set(v[(~v["always_live"]) & (v["first_lstep"] <= step) & (v["last_lstep"] >= step)]["var_id"])
    got = live_variables(prof, step)
    assert set(got["var_id"]) == want and (got["intervals"] == 1).all()


@pytest.mark.parametrize("model,kw", [
    ("mlp", dict(grad_accum=4, optimizer="adam")),  # whole-graph path: accumulators and optimizer state added
    ("bert", dict(layers=4, ipus=2, grad_accum=4, optimizer="lamb")),  # pipeline: per-IPU training state
])
def test_always_live_variables_add_up_to_the_variable_memory_of_every_tile(model, kw, tmp_path):
    path = tmp_path / "p.pvl"
    run_model(make_config(model, **kw), SMALL, timing_only=True, profile_path=path)  # a per-tile identity: any tile count
    prof = open_profile(path)
    vt = prof.stored_table("variable_tiles").merge(prof.stored_table("variables")[["var_id", "always_live", "kind"]], on="var_id")
    al = vt[vt["always_live"] & (vt["kind"] == "variable")].groupby("tile")["bytes"].sum()
    listed = np.zeros(prof.target.num_tiles, np.int64)
    listed[al.index.to_numpy()] = al.to_numpy()
    want = prof.memory.array()[:, schema.CATEGORY_CODE["variable"], 0]
    np.testing.assert_array_equal(listed, want)
    assert prof.stored_table("variables")["name"].str.contains("optimizer state").any()
