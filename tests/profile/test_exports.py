"""Chrome trace and CSV exports: load the output back and check it against the profile."""

from __future__ import annotations

import json
from collections import defaultdict

import numpy as np
import pandas as pd
import pytest

from popvision_lite.errors import ConfigError, ProfileError
from popvision_lite.profile import schema
from popvision_lite.profile.chrome_trace import PHASES_TID, export_chrome_trace
from popvision_lite.profile.csv_export import CSV_TABLES, export_csv
from popvision_lite.profile.reader import open_profile
from popvision_lite.profile.writer import write_profile
from popvision_lite.testing.synthetic import make_synthetic


@pytest.fixture(scope="module")
def prof(tmp_path_factory):
    path = tmp_path_factory.mktemp("exp") / "run.pvl"
    write_profile(path, make_synthetic(num_ipus=2, tiles_per_ipu=24, num_steps=260, seed=5, num_layers=1,
                                       over_capacity_tiles=2))
    p = open_profile(path)
    yield p
    p.close()


def _load(path):
    doc = json.loads(path.read_text())
    return doc, doc["traceEvents"]


def _names(events):
    procs = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
               if e["ph"] == "M" and e["name"] == "thread_name"}
    return procs, threads


def test_trace_per_ipu(prof, tmp_path):
    out = tmp_path / "trace.json"
    counts = export_chrome_trace(prof, out)
    doc, ev = _load(out)
    procs, threads = _names(ev)
    # one process; Perfetto labels a lane "<thread name> <tid>" and orders lanes by tid: "IPU 0", "IPU 1", phases
    assert procs == {0: "Training step"}
    assert threads == {(0, 0): "IPU", (0, 1): "IPU", (0, PHASES_TID): "phases"}
    order = {e["tid"]: e["args"]["sort_index"] for e in ev if e["ph"] == "M" and e["name"] == "thread_sort_index"}
    assert sorted(order, key=order.get) == [PHASES_TID, 0, 1]  # chrome://tracing: phases, then IPUs in order
    xs = [e for e in ev if e["ph"] == "X"]
    assert counts["events"] == len(xs)
    steps = prof.steps
    clock = prof.target.clock_hz
    # the phases track: the synthetic run has no schedule, so one phase, the whole run, over every step
    phases = [e for e in xs if e["tid"] == PHASES_TID]
    assert [e["name"] for e in phases] == ["whole run"] and phases[0]["ts"] == 0
    assert phases[0]["dur"] == pytest.approx(steps["end_cycle"].max() / clock * 1e6, abs=1e-3)
    assert phases[0]["args"]["runs_per_step"] == 1 and phases[0]["args"]["last_step"] == len(steps) - 1
    # every IPU lane has every step (synthetic ops span both IPUs), busiest tile matches the data;
    # ts/dur in microseconds via the clock, rebased to the first step; raw cycles kept in args
    w = prof.step_tiles.window(0, len(steps))
    for ipu in (0, 1):
        lane = [e for e in xs if e["tid"] == ipu]
        assert len(lane) == len(steps) and lane[0]["ts"] == 0
        for e in lane[::17]:
            row = steps.iloc[e["args"]["step"]]
            assert e["args"]["cycles"] == row["end_cycle"] - row["start_cycle"]
            assert e["dur"] == pytest.approx(max(e["args"]["cycles"] / clock * 1e6, 1e-3), abs=1e-3)
            assert e["ts"] == pytest.approx((row["start_cycle"] - steps["start_cycle"].iloc[0]) / clock * 1e6,
                                            abs=1e-3)
            assert e["cat"] == schema.STEP_KINDS[int(steps["kind"].iloc[e["args"]["step"]])]
        for e in lane[::23]:
            seg = w.cycles[e["args"]["step"], ipu * 24:(ipu + 1) * 24]
            assert e["args"]["busy_max_cycles"] == seg.max()
    # no zero-length slice, no overlaps within a lane
    by_lane = defaultdict(list)
    for e in xs:
        assert e["dur"] >= 1e-3
        by_lane[(e["pid"], e["tid"])].append(e)
    for lane in by_lane.values():
        for a, b in zip(lane, lane[1:], strict=False):
            assert round(b["ts"] * 1000) >= round(a["ts"] * 1000) + round(a["dur"] * 1000)
    assert doc["otherData"]["clock_hz"] == clock
    # ts/dur are microseconds; no displayTimeUnit, which Perfetto before late 2021 took as the ts unit
    # ("ns" there made every time 1000x too short) and current Perfetto ignores with an import note
    assert "displayTimeUnit" not in doc


def _lanes_ns(xs):
    by_lane = defaultdict(list)
    for e in xs:
        by_lane[(e["pid"], e["tid"])].append((round(e["ts"] * 1000), round(e["dur"] * 1000)))
    return by_lane


def test_trace_of_a_pipeline_has_no_overlaps_in_a_lane_and_names_its_phases(tmp_path):
    """The 4-IPU pipeline sample: its IPUs' steps overlap in time, so they are on their own lanes (one lane
    holding all of them made Perfetto drop 1,877 slices); the phases are named slices with their counts."""
    from pathlib import Path

    sample = Path(__file__).resolve().parents[2] / "sample_profiles" / "bert_mini_4ipu_pipeline.pvl"
    out = tmp_path / "pipe.json"
    with open_profile(sample) as p:
        counts = export_chrome_trace(p, out)
        steps, ph = p.stored_table("steps"), p.stored_table("phases")
    _, ev = _load(out)
    xs = [e for e in ev if e["ph"] == "X"]
    assert counts["events"] == len(xs)
    lanes = _lanes_ns(xs)
    assert set(lanes) == {(0, PHASES_TID), (0, 0), (0, 1), (0, 2), (0, 3)}  # no overflow thread was needed
    for v in lanes.values():
        v.sort()
        assert all(d >= 1 for _, d in v)
        assert all(b >= a + d for (a, d), (b, _) in zip(v, v[1:], strict=False))
    # each IPU lane has exactly the steps of its IPU and those on every IPU
    ipu = steps["ipu"].to_numpy()
    for i in range(4):
        assert len(lanes[(0, i)]) == int(((ipu == i) | (ipu == -1)).sum())
    names = [e["name"] for e in xs if e["tid"] == PHASES_TID]
    want = [n + (f" x{r:,}" if r > 1 else "") for n, r in zip(ph["name"], ph["runs_per_step"], strict=True)]
    assert names == want and names[0] == "fill"


def _trace_of_steps(tmp_path, starts, ends) -> list:
    """Trace events of a one-IPU synthetic profile whose steps start and end at the given cycles."""
    data = make_synthetic(num_ipus=1, tiles_per_ipu=8, num_steps=len(starts), seed=1, num_layers=1)
    data.steps["start_cycle"], data.steps["end_cycle"] = starts, ends
    path = tmp_path / "steps.pvl"
    write_profile(path, data)
    out = tmp_path / "steps.json"
    with open_profile(path) as p:
        export_chrome_trace(p, out)
    return _load(out)[1]


def test_trace_one_cycle_and_empty_steps_last_one_ns(tmp_path):
    """A 1-cycle step (0.75 ns at 1.325 GHz) and a 0-cycle step are drawn 1 ns long; the next step starts where
    they end, so no slice has zero length and none overlaps."""
    edges = np.array([0, 1, 1, 2, 1000, 1001, 3000])
    ev = _trace_of_steps(tmp_path, edges[:-1], edges[1:])
    lane = sorted(_lanes_ns([e for e in ev if e["ph"] == "X" and e["tid"] == 0])[(0, 0)])
    # edges at 1.325 GHz: 0, 0.75, 0.75, 1.51, 754.7 ns -> rounded 0, 1, 1, 2, 755; each slice >= 1 ns and the
    # next one pushed to its end (the 4th starts at 3 instead of 2 and still ends at 755)
    assert lane[:4] == [(0, 1), (1, 1), (2, 1), (3, 752)]
    assert all(b >= a + d for (a, d), (b, _) in zip(lane, lane[1:], strict=False))


def test_trace_overlapping_steps_of_one_ipu_go_to_an_extra_thread(tmp_path):
    ev = _trace_of_steps(tmp_path, [0, 100, 150, 400], [100, 300, 250, 500])  # step 2 inside step 1
    procs, threads = _names(ev)
    lanes = _lanes_ns([e for e in ev if e["ph"] == "X" and e["tid"] != PHASES_TID])
    assert len(lanes) == 2 and sum(len(v) for v in lanes.values()) == 4
    assert any("overlapping steps" in n for n in threads.values())


def test_trace_window_and_tiles(prof, tmp_path):
    out = tmp_path / "sub.json"
    tiles = [3, 30, 47]
    export_chrome_trace(prof, out, step_range=(100, 180), tiles=tiles)
    _, ev = _load(out)
    procs, threads = _names(ev)
    assert procs == {0: "Training step"}
    assert threads == {(0, PHASES_TID): "phases", (0, 3): "tile", (0, 30): "tile", (0, 47): "tile"}  # "tile 30"
    xs = [e for e in ev if e["ph"] == "X"]
    phase = [e for e in xs if e["tid"] == PHASES_TID]
    assert len(phase) == 1 and phase[0]["ts"] == 0  # the whole-run phase, clipped to the window's steps
    w = prof.step_tiles.window(100, 180)
    kinds = prof.steps["kind"].to_numpy()
    for tile in tiles:
        lane = [e for e in xs if e["tid"] == tile]
        assert all(e["args"]["tile"] == tile for e in lane)
        busy_steps = [e["args"]["step"] for e in lane if e["name"] != "sync"]
        expected = [s for s in range(100, 180) if w.cycles[s - 100, tile] > 0]
        assert busy_steps == expected
        n_sync = sum(1 for s in range(100, 180) if kinds[s] == schema.STEP_KIND_CODE["sync"])
        assert sum(1 for e in lane if e["name"] == "sync") == n_sync
        for e in lane:
            if e["name"] != "sync":
                assert e["args"]["cycles"] == w.cycles[e["args"]["step"] - 100, tile]
                assert e["args"]["bytes_in"] == w.bytes_in[e["args"]["step"] - 100, tile]
                assert e["dur"] == pytest.approx(max(e["args"]["cycles"] / prof.target.clock_hz * 1e6, 1e-3),
                                                 abs=1e-3)
        ts = [e["ts"] for e in lane]
        assert ts == sorted(ts)


def test_trace_tile_lanes_perfetto_safe_tids(prof, tmp_path):
    """Perfetto (v52, seen in bench/perfetto_check.py) reads tid 0 as the process's main thread (tid = pid): with
    tile lanes in a process pid 1, tile 0's lane merged into tile 1's.  Every lane is a thread of process 0, its
    tid the tile id (tile 0 is the main thread: nothing to merge with) and the phases far above every tile."""
    out = tmp_path / "t.json"
    tiles = [0, 1, 2, 24, 25, 47]
    export_chrome_trace(prof, out, step_range=(0, 40), tiles=tiles)
    _, ev = _load(out)
    procs, threads = _names(ev)
    assert set(procs) == {0}
    tile_lanes = {k: v for k, v in threads.items() if k[1] != PHASES_TID}
    assert sorted(tid for _, tid in tile_lanes) == tiles and set(tile_lanes.values()) == {"tile"}
    assert PHASES_TID > prof.target.num_tiles
    by_tile = defaultdict(set)
    for e in ev:
        if e["ph"] == "X" and e["tid"] != PHASES_TID:
            by_tile[e["args"]["tile"]].add((e["pid"], e["tid"]))
            assert (e["pid"], e["tid"]) == (0, e["args"]["tile"])
    assert sorted(by_tile) == tiles and all(len(v) == 1 for v in by_tile.values())
    # the per-IPU layout: one lane per IPU, tid = IPU
    export_chrome_trace(prof, out, step_range=(0, 40))
    _, ev = _load(out)
    assert set(_names(ev)[1]) == {(0, PHASES_TID), (0, 0), (0, 1)}


def test_trace_limits_and_bad_options(prof, tmp_path):
    out = tmp_path / "t.json"
    with pytest.raises(ConfigError, match="step window"):
        export_chrome_trace(prof, out, max_events=100)
    with pytest.raises(ConfigError, match="outside"):
        export_chrome_trace(prof, out, step_range=(10, 10_000))
    with pytest.raises(ConfigError, match="tile ids"):
        export_chrome_trace(prof, out, tiles=[0, 48])
    with pytest.raises(ProfileError, match="does not exist"):
        export_chrome_trace(prof, tmp_path / "missing" / "t.json")
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_csv_memory_by_tile(prof, tmp_path):
    out = tmp_path / "mem.csv"
    n = export_csv(prof, "memory_by_tile", out)
    df = pd.read_csv(out)
    assert n == len(df) == 48
    assert list(df.columns[:3]) == ["tile", "ipu", "tile_in_ipu"]
    mem = prof.memory.array()
    for cat, col in (("variable", "variable_bytes"), ("vertexCode", "vertex_code_bytes"), ("stack", "stack_bytes")):
        np.testing.assert_array_equal(df[col], mem[:, schema.CATEGORY_CODE[cat], :].sum(axis=1))
    np.testing.assert_array_equal(df["total_bytes"], mem.sum(axis=(1, 2)))
    assert df["over_capacity"].sum() == 2
    assert (df.loc[df["tile"] == 30, "ipu"] == 1).all()


def test_csv_ops_and_steps(prof, tmp_path):
    """The CSV is the notebook form of the table (profile/public.py), its index (the id) the first column and an
    empty cell where the table has <NA>."""
    export_csv(prof, "ops", tmp_path / "ops.csv")
    ops = pd.read_csv(tmp_path / "ops.csv", keep_default_na=False)
    stored = prof.stored_table("ops")
    assert ops.columns[0] == "op_id" and list(ops["op_id"]) == list(stored["op_id"])
    assert list(ops["name"]) == list(stored["name"])
    np.testing.assert_array_equal(ops["flops"], stored["flops"])
    np.testing.assert_allclose(ops["seconds"], stored["cycles"] / prof.target.clock_hz)
    export_csv(prof, "steps", tmp_path / "steps.csv")
    st = pd.read_csv(tmp_path / "steps.csv")
    ss = prof.stored_table("steps")
    assert len(st) == len(ss) and st.columns[0] == "step"
    assert set(st["kind_name"]) <= set(schema.STEP_KINDS)
    np.testing.assert_array_equal(st["cycles"], ss["end_cycle"] - ss["start_cycle"])
    assert list(st.columns) == ["step", *prof.steps.columns.insert(list(prof.steps.columns).index("op_id") + 1,
                                                                    "op_name")]
    np.testing.assert_allclose(st["runs"], prof.steps["runs"])
    for t in CSV_TABLES:
        assert export_csv(prof, t, tmp_path / f"{t}.csv") >= 0
    with pytest.raises(ConfigError, match="unknown CSV table"):
        export_csv(prof, "nope", tmp_path / "x.csv")


def test_csv_leaves_none_empty(tmp_path):
    """A step of no op (the pipeline sample's copies between IPUs) and a step on every IPU: empty cells, where
    the file stores -1."""
    from pathlib import Path

    sample = Path(__file__).resolve().parents[2] / "sample_profiles" / "bert_mini_4ipu_pipeline.pvl"
    with open_profile(sample) as p:
        export_csv(p, "steps", tmp_path / "steps.csv")
        ss = p.stored_table("steps")
    st = pd.read_csv(tmp_path / "steps.csv")
    for col, name in (("op_id", "op_name"), ("ipu", None)):
        none = ss[col].to_numpy() < 0
        assert none.any() and st.loc[none, col].isna().all() and not st.loc[~none, col].isna().any()
        assert (st.loc[~none, col] == ss.loc[~none, col]).all()
        if name:
            assert st.loc[none, name].isna().all() and not st.loc[~none, name].isna().any()


def test_trace_same_with_plain_json_encoder(prof, tmp_path, monkeypatch):
    from popvision_lite.profile import chrome_trace

    export_chrome_trace(prof, tmp_path / "a.json", step_range=(0, 60), tiles=[1, 40])
    monkeypatch.setattr(chrome_trace, "_encoder",
                        lambda: json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode)
    export_chrome_trace(prof, tmp_path / "b.json", step_range=(0, 60), tiles=[1, 40])
    assert json.loads((tmp_path / "a.json").read_text()) == json.loads((tmp_path / "b.json").read_text())
