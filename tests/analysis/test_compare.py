"""analysis/compare.py on the recompute on/off pair, the Mk2 vs Bow pair and runs with different tile counts."""

from __future__ import annotations

import numpy as np
import pytest

import popvision_lite as pvl
from popvision_lite.analysis import compare as C


def _open(path):
    return pvl.open(path)


def _durations(p):
    s = p.stored_table("steps")
    return (s["end_cycle"] - s["start_cycle"]).to_numpy(np.int64)


def test_ratio_edge_cases():
    r = C.ratio([2.0, 0.0, 5.0], [1.0, 0.0, 0.0])
    assert r[0] == 2.0 and r[1] == 1.0 and np.isnan(r[2])


def test_recompute_lowers_peak_not_always_live(run_pairs):
    a, b = _open(run_pairs["mk2"]), _open(run_pairs["mk2_recompute"])
    c = C.compare(a, b)
    assert c.tile_by_tile and c.tile_note == ""
    row = c.metric("peak not-always-live on a tile")
    # independent: the fullest tile's not-always-live bytes over every liveness step
    direct_a = int(a.liveness.tile_bytes().max())
    direct_b = int(b.liveness.tile_bytes().max())
    assert (row["a"], row["b"]) == (direct_a, direct_b)
    assert row["b"] < row["a"], "recompute must lower the peak not-always-live memory"
    assert row["delta"] == direct_b - direct_a
    # recompute costs cycles: extra forward ops only in B, all named .../recompute/...
    ops = C.op_table(a, b)
    only_b = ops[ops["present_in"] == "B only"]
    assert len(only_b) > 0 and only_b["name"].str.contains("/recompute/").all()
    assert (ops["present_in"] == "A only").sum() == 0
    assert c.metric("total cycles")["b"] > c.metric("total cycles")["a"]
    assert any("recomputes" in n and "is lower" in n for n in c.notes)


def test_bow_same_cycles_less_time(run_pairs):
    """Bow has Mk2's per-cycle architecture at a higher clock: compute cycles are the same, time is less."""
    a, b = _open(run_pairs["bow_base"]), _open(run_pairs["bow"])
    c = C.compare(a, b)
    assert b.target.clock_hz > a.target.clock_hz
    comp = c.metric("compute cycles")
    assert comp["a"] == comp["b"] and comp["a"] > 0
    t = c.metric("time")
    assert t["b"] < t["a"]
    cyc = c.metric("total cycles")
    assert t["ratio"] == pytest.approx(cyc["ratio"] * a.target.clock_hz / b.target.clock_hz, rel=1e-9)
    note = next(n for n in c.notes if n.startswith("Clocks differ"))
    assert "same cycles" in note and "clock" in note
    # per step: where the cycles match, the time ratio is exactly the clock ratio
    st = C.step_table(a, b)
    same = st[(st["cycles_a"] == st["cycles_b"]) & (st["cycles_a"] > 0)]
    assert len(same) > 0
    np.testing.assert_allclose(same["time_ratio"], a.target.clock_hz / b.target.clock_hz, rtol=1e-9)


def test_memory_difference_per_tile(run_pairs):
    a, b = _open(run_pairs["mk2"]), _open(run_pairs["mk2_recompute"])
    d = C.memory_difference(a, b, "total")
    want = b.memory.array().sum(axis=(1, 2)) - a.memory.array().sum(axis=(1, 2))
    np.testing.assert_array_equal(d, want.astype(np.float64))
    nal = C.memory_difference(a, b, "not_always_live")
    np.testing.assert_array_equal(nal, (b.memory.array()[:, :, 1].sum(1) - a.memory.array()[:, :, 1].sum(1)))
    with pytest.raises(ValueError, match="unknown memory measure"):
        C.memory_difference(a, b, "nonsense")


def test_different_tile_counts_compare_per_ipu(tile_mismatch):
    a, b = _open(tile_mismatch[0]), _open(tile_mismatch[1])
    c = C.compare(a, b)
    assert not c.tile_by_tile
    assert "not possible" in c.tile_note and "1472" in c.tile_note and "1216" in c.tile_note
    assert c.notes[0] == c.tile_note
    assert C.memory_difference(a, b) is None
    t = C.per_ipu(a, b)
    assert list(t["ipu"]) == ["0", "1", "all"]
    # IPU 1 exists only in B
    assert np.isnan(t.loc[t["ipu"] == "1", "total_a"]).all()
    mb = b.memory.array().sum(axis=(1, 2))
    assert t.loc[t["ipu"] == "1", "total_b"].iloc[0] == mb[1216:].sum()
    assert t.loc[t["ipu"] == "0", "max_tile_b"].iloc[0] == mb[:1216].max()
    allrow = t[t["ipu"] == "all"].iloc[0]
    assert allrow["total_a"] == a.memory.array().sum() and allrow["total_b"] == mb.sum()
    assert c.metric("tiles")["a"] == 1472 and c.metric("tiles")["b"] == 2432
    md = c.markdown()
    assert "Tile-by-tile comparison is not possible" in md and "| total cycles |" in md


def test_op_and_step_tables_match_direct_sums(run_pairs):
    a, b = _open(run_pairs["mk2"]), _open(run_pairs["mk2_recompute"])
    ops = C.op_table(a, b)
    names_a, names_b = set(a.ops["name"]), set(b.ops["name"])
    assert set(ops["name"]) == names_a | names_b
    assert (ops["present_in"] == "both").sum() == len(names_a & names_b)
    ca = a.ops.groupby("name")["cycles"].sum()
    cb = b.ops.groupby("name")["cycles"].sum()
    for r in ops.head(20).itertuples():
        assert r.cycles_a == ca.get(r.name, 0) and r.cycles_b == cb.get(r.name, 0)
        assert r.cycles_delta == r.cycles_b - r.cycles_a
    assert (np.abs(ops["cycles_delta"]).diff().dropna() <= 0).all()  # largest change first
    st = C.step_table(a, b)
    assert st["cycles_a"].sum() == _durations(a).sum() and st["cycles_b"].sum() == _durations(b).sum()
    assert sorted(st.loc[st["step_a"] >= 0, "step_a"]) == list(range(len(a.steps)))
    assert sorted(st.loc[st["step_b"] >= 0, "step_b"]) == list(range(len(b.steps)))
    ph = C.phase_table(C.summarize(a), C.summarize(b))
    # the run's total: its stored steps and the host's per-step terms of its schedule (the samples' BERT step is
    # costed with PopART's host step loop, inferred from the model), at the IPU clock
    terms = sum((a.run.get("schedule") or {}).get("per_step_terms", {}).values())
    t = ph.set_index("phase")
    assert t.loc[C.WALL_ROW, "cycles_a"] == pytest.approx(
        int(a.steps["end_cycle"].max()) + terms * a.target.clock_hz, abs=len(a.run["schedule"]["per_step_terms"]))
    # the parts share one time base, the IPU time, which they add up to; the wall time is the other base
    parts = t[t["basis"] == "IPU time"].drop(C.IPU_TIME_ROW)
    assert int(parts["cycles_a"].sum()) == int(t.loc[C.IPU_TIME_ROW, "cycles_a"])
    assert set(t["basis"]) == {"IPU time", "wall time"} and t.loc[C.WALL_ROW, "basis"] == "wall time"
    # the host's terms are the part "host", not sync
    assert t.loc["host", "cycles_a"] == pytest.approx(terms * a.target.clock_hz, abs=3)


def test_liveness_curves_and_headline_strings(run_pairs):
    a, b = _open(run_pairs["mk2"]), _open(run_pairs["mk2_recompute"])
    la, lb = C.liveness_curves(a, b)
    assert len(la) == a.liveness.tile_bytes().shape[0] and len(lb) == b.liveness.tile_bytes().shape[0]
    np.testing.assert_array_equal(la["max_tile_bytes"], a.liveness.tile_bytes().max(axis=1))
    c = C.compare(a, b, "off", "on")
    h = C.headline_strings(c)
    assert list(h.columns[:3]) == ["metric", "off", "on"]
    row = h[h["metric"] == "fits"].iloc[0]
    assert row["off"] == "yes" and row["on"] == "yes"


def test_csv_keeps_whole_numbers_whole(tile_mismatch, tmp_path):
    """Counts are whole in the CSV ("0", not "0.0") although the headline's value columns are float64
    (one column holds counts and seconds); other values keep their decimals."""
    import csv

    from popvision_lite.gui.export import export_table

    a, b = _open(tile_mismatch[0]), _open(tile_mismatch[1])
    c = C.compare(a, b)
    export_table(c.headline, tmp_path / "h.csv")
    rows = {r["metric"]: r for r in csv.DictReader(open(tmp_path / "h.csv"))}
    assert rows["tiles"]["delta"] == str(2432 - 1472) and rows["tiles"]["a"] == "1472"
    assert rows["tiles over capacity"]["delta"].lstrip("-").isdigit()
    assert rows["total cycles"]["delta"] == str(int(rows["total cycles"]["b"]) - int(rows["total cycles"]["a"]))
    assert float(rows["tiles"]["ratio"]) == pytest.approx(2432 / 1472) and "." in rows["tiles"]["ratio"]
    assert c.headline[["a", "b", "delta", "ratio"]].dtypes.eq(np.float64).all()  # numeric columns numeric
    assert "." in rows["time"]["delta"]  # seconds stay float
    assert "device" not in rows and "fits" not in rows  # text and yes/no metrics live in c.facts, typed
    assert c.facts["device"].dtype == "string" and c.facts["fits"].dtype == "boolean"
    assert list(c.facts["device"]) == [a.target.name, b.target.name]

    export_table(C.per_ipu(a, b), tmp_path / "m.csv")
    ipus = {r["ipu"]: r for r in csv.DictReader(open(tmp_path / "m.csv"))}
    for f in ("total", "max_tile", "over_capacity_tiles"):
        for col in (f"{f}_a", f"{f}_b", f"{f}_delta"):
            v = ipus["all"][col]
            assert v.lstrip("-").isdigit(), (col, v)
    assert ipus["1"]["total_a"] == "" and ipus["1"]["total_delta"] == ""  # IPU 1 is only in B
    assert int(ipus["all"]["total_delta"]) == int(ipus["all"]["total_b"]) - int(ipus["all"]["total_a"])


def test_given_summaries_are_used_as_they_are_and_the_op_table_is_made_once(run_pairs, monkeypatch):
    """``compare`` takes summaries a caller already has (the GUI's documents keep theirs) instead of computing them
    again, and keeps the op table it made for its notes: ``op_table()`` hands out copies of it, equal to a fresh one."""
    from popvision_lite.analysis.summary import summarize

    a, b = _open(run_pairs["mk2"]), _open(run_pairs["mk2_recompute"])
    plain = C.compare(a, b)
    sa, sb = summarize(a), summarize(b)
    made = []
    real_op_table = C.op_table
    monkeypatch.setattr(C, "summarize", lambda p: (_ for _ in ()).throw(AssertionError("summarized again")))
    monkeypatch.setattr(C, "op_table", lambda *args: made.append(args) or real_op_table(*args))
    c = C.compare(a, b, summary_a=sa, summary_b=sb)
    assert c.summary_a is sa and c.summary_b is sb
    assert c.headline.equals(plain.headline) and c.phases.equals(plain.phases) and c.notes == plain.notes
    assert c.facts.equals(plain.facts)
    ops = c.op_table()
    assert len(made) == 1 and ops.equals(real_op_table(a, b))
    ops.loc[0, "cycles_a"] = -1  # a caller's change stays in its copy
    assert c.op_table().equals(real_op_table(a, b))
    a.close()
    b.close()
