"""Insights: findings with numbers taken from the profile, and what recomputation saved."""


import numpy as np
import pytest

import popvision_lite as pvl
from popvision_lite.analysis import insights as I
from tests.support.insights_profile import write_small


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    d = tmp_path_factory.mktemp("ins")
    with pvl.open(write_small(d / "base.pvl")) as a, pvl.open(write_small(d / "rc.pvl", recompute=True)) as b:
        yield a, b


@pytest.fixture(scope="module")
def roomy(tmp_path_factory):
    with pvl.open(write_small(tmp_path_factory.mktemp("ins2") / "roomy.pvl", cap=4000)) as p:
        yield p


def _by_kind(found):
    return {f.kind: f for f in found}


def test_oom_names_worst_tiles_with_bytes(pair):
    p, _ = pair
    found = I.insights(p)
    assert found[0].severity == "error" and found[0].kind == "oom"
    f = found[0]
    bt = p.stored_table("memory_by_tile")
    over = bt[bt["total"] > bt["capacity"]]
    worst = over.assign(o=over["total"] - over["capacity"]).sort_values("o", ascending=False)
    assert list(f.tiles) == worst.index.tolist()
    t0 = int(worst.index[0])
    assert f.numbers["worst_tiles"][0] == t0
    # the text names the worst tile with its bytes, capacity and overflow
    assert f"tile {t0} needs {int(bt.loc[t0, 'total']):,} B" in f.text
    assert f"{int(bt.loc[t0, 'capacity']):,} B" in f.text
    assert f"over by {int(worst['o'].iloc[0]):,} B" in f.text
    assert f"{len(over)} of {len(bt)} tiles" in f.text


def test_recompute_advice_numbers_from_liveness(pair):
    p, _ = pair
    f = _by_kind(I.insights(p))["recompute"]
    ls, v, pr = p.stored_table("liveness_steps"), p.stored_table("variables"), p.stored_table("programs")
    pk = int(ls["lstep"][ls["total_bytes"].idxmax()])
    assert f.numbers["peak_lstep"] == pk and f.numbers["peak_bytes"] == int(ls["total_bytes"].max())
    # held across the peak: activations made before the op running there and used after it
    op = int(pr["op_id"][pr["lstep"] == pk].iloc[0])
    op_ls = pr["lstep"][(pr["op_id"] == op) & (pr["lstep"] >= 0)]
    held = v[(~v["always_live"]) & (v["op_id"] >= 0) & (v["op_id"] != op)
             & (v["first_lstep"] < op_ls.min()) & (v["last_lstep"] > op_ls.max())]
    # by construction of the fixture: the two forward outputs, kept for lstep 5
    assert sorted(held["name"]) == ["fwd/matmul/out", "fwd/relu/out"]
    assert f.numbers["held_bytes"] == int(held["bytes"].sum()) == 2900
    assert f"save up to {int(held['bytes'].sum()):,} B" in f.text
    assert set(f.variables) == set(held["var_id"])
    # the running op's own output is not counted as recomputable
    own = v[(~v["always_live"]) & (v["op_id"] == op) & (v["first_lstep"] <= pk) & (v["last_lstep"] >= pk)]
    assert f.numbers["own_bytes"] == int(own["bytes"].sum())
    # on the worst tile: held activations resident at that tile's own peak liveness step
    bt = p.stored_table("memory_by_tile")
    t = int((bt["total"] - bt["capacity"]).idxmax())
    col = p.liveness.tile_bytes(tiles=[t])[:, 0]
    tl = int(np.argmax(col))
    assert f.numbers["worst_tile"] == t and f.numbers["worst_tile_lstep"] == tl
    vt = p.stored_table("variable_tiles")
    # fwd/matmul/out (made at lstep 0, kept to 5) is held across tile 3's peak at lstep 2 (fwd/relu)
    on_tile = int(vt[(vt["tile"] == t) & (vt["var_id"] == 2)]["bytes"].sum())
    assert f.numbers["worst_tile_held_bytes"] == on_tile == 500
    assert on_tile >= f.numbers["worst_tile_over"] and "enough to fit" in f.text


def test_peak_of_op_temporaries_is_not_sent_to_recompute(tmp_path):
    # make bwd/grad's own output huge: the peak is then that op's temporaries, not held activations
    from popvision_lite.profile.writer import write_profile
    from tests.support.insights_profile import make_data

    data = make_data(cap=100_000)
    data.variables.loc[data.variables["var_id"] == 4, "bytes"] = 40_000
    data.liveness_tile_bytes[4, 4:8] += 10_000 - 100
    data.liveness_steps.loc[4, "total_bytes"] = int(data.liveness_tile_bytes[4].sum())
    write_profile(tmp_path / "t.pvl", data)
    with pvl.open(tmp_path / "t.pvl") as p:
        kinds = _by_kind(I.insights(p))
        f = kinds["peak_temporaries"]
        assert f.ops == (2,) and "bwd/grad" in f.text and "Recomputation cannot lower this peak" in f.text
        assert f.numbers["own_bytes"] == 40_000
        assert "recompute" not in kinds  # held share is small and nothing is over capacity


def test_binding_constraint_replaces_generic_advice(pair):
    """Out of memory: the finding says what binds (fit_constraint: the tiles, the cause, the category, the tensors)
    and offers the fit advisor's search - not a generic 'more IPUs or streaming memory'."""
    p, _ = pair
    kinds = _by_kind(I.insights(p))
    assert "more_ipus" not in kinds
    f = kinds["binding"]
    assert f.severity == "error" and f.title == "Why it does not fit"
    n = f.numbers
    assert n["cause"] == "uneven layout" and n["ipus"][0]["tiles_over"] == 2   # tiles 2 and 3 (insights_profile.py)
    assert set(f.tiles) == {2, 3} and n["ipus"][0]["tensors"][:2] == ["fwd/matmul/out", "fwd/relu/out"]
    assert "fwd/matmul/out" in f.text and "tiles 2-3" in f.text
    # its run config names no bundled model (a hand-built profile, like an imported ONNX model's): what binds it,
    # but no search offered (the advisor searches the bundled models' placements; tests/analysis/
    # test_insights_emulated.py sees it offered on the emulated out-of-memory sample)
    assert "fit_search" not in kinds and I.fit_command(p) is None


def test_binding_says_total_bytes_when_no_layout_can_fit(tmp_path):
    # 300 B tiles: the total alone exceeds the IPU
    with pvl.open(write_small(tmp_path / "tiny.pvl", cap=300)) as p:
        f = _by_kind(I.insights(p))["binding"]
        total = int(p.stored_table("memory_by_tile")["total"].sum())
        assert f.numbers["cause"] == "total bytes" and f.numbers["ipus"][0]["total_bytes"] == total > 8 * 300
        assert "even a perfectly even layout would not fit" in f.text


def test_no_oom_advice_when_it_fits(roomy):
    kinds = _by_kind(I.insights(roomy))
    assert "oom" not in kinds and "binding" not in kinds and "fit_search" not in kinds
    assert kinds["recompute"].severity == "info"  # still a hint, not a warning
    assert {"top_tiles", "top_vertices", "top_variables", "top_exchanges"} <= set(kinds)


def test_top_lists(roomy):
    kinds = _by_kind(I.insights(roomy))
    bt = roomy.stored_table("memory_by_tile")
    assert list(kinds["top_tiles"].tiles) == bt["total"].sort_values(ascending=False, kind="stable").index[:5].tolist()
    v = roomy.stored_table("vertices").groupby("codelet")["state_bytes"].sum().sort_values(ascending=False)
    assert kinds["top_vertices"].numbers["codelets"][0] == v.index[0]
    assert kinds["top_variables"].variables[0] == int(roomy.stored_table("variables")["bytes"].idxmax())


def test_exchange_and_imbalance(roomy):
    kinds = _by_kind(I.insights(roomy))
    st = roomy.stored_table("steps")
    dur = st["end_cycle"] - st["start_cycle"]
    ex = int(dur[st["kind"].isin([2, 3])].sum())
    assert kinds["exchange"].numbers["exchange_cycles"] == ex
    assert f"{ex:,} of {int(dur.sum()):,} cycles" in kinds["exchange"].text
    assert 0 in kinds["exchange"].ops  # fwd/matmul owns the exchange
    comp = st[st["kind"] == 0]
    idle = 1 - comp["busy_mean"].sum() / comp["busy_max"].sum()
    assert kinds["compute_imbalance"].numbers["idle_share"] == pytest.approx(idle)


def test_recompute_run_is_flagged(pair):
    _, rc = pair
    kinds = _by_kind(I.insights(rc))
    assert "recompute_on" in kinds and "recompute" not in kinds


def test_recompute_savings(pair):
    base, rc = pair
    f = I.recompute_savings(base, rc)
    g = I.recompute_savings(rc, base)  # order-free
    assert f.numbers == g.numbers
    saved = int(base.stored_table("liveness_steps")["total_bytes"].max() - rc.liveness_steps["total_bytes"].max())
    assert saved > 0 and f.numbers["saved_peak_bytes"] == saved
    assert f"saved {saved:,} B" in f.text
    over0 = int(base.stored_table("memory_by_tile")["over_capacity"].sum())
    over1 = int(rc.memory.by_tile()["over_capacity"].sum())
    assert f"Tiles over capacity: {over0:,} -> {over1:,}" in f.text
    assert over1 < over0


def test_fmt_bytes():
    assert I.fmt_bytes(999) == "999 B"
    assert I.fmt_bytes(3 * 2**20) == "3,145,728 B (3.00 MiB)"
