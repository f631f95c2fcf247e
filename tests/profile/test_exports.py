"""Chrome trace and CSV exports: load the output back and check it against the profile."""

from __future__ import annotations

import json
from collections import defaultdict

import numpy as np
import pandas as pd
import pytest

from popvision_lite.errors import ConfigError, ProfileError
from popvision_lite.profile import schema
from popvision_lite.profile.chrome_trace import TILE_TID_BASE, export_chrome_trace
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
    assert procs == {0: "BSP steps", 1: "IPU 0", 2: "IPU 1"}
    assert set(threads) == {(0, 0), (1, 0), (2, 0)}
    xs = [e for e in ev if e["ph"] == "X"]
    assert counts["events"] == len(xs)
    steps = prof.steps
    clock = prof.target.clock_hz
    bsp = [e for e in xs if e["pid"] == 0]
    assert len(bsp) == len(steps)
    # ts/dur in microseconds via the clock, rebased to the first step; raw cycles kept in args
    assert bsp[0]["ts"] == 0
    for e in bsp[::17]:
        row = steps.iloc[e["args"]["step"]]
        assert e["args"]["cycles"] == row["end_cycle"] - row["start_cycle"]
        assert e["dur"] == pytest.approx(e["args"]["cycles"] / clock * 1e6, abs=1e-3)
        assert e["ts"] == pytest.approx((row["start_cycle"] - steps["start_cycle"].iloc[0]) / clock * 1e6, abs=1e-3)
        assert e["cat"] == schema.STEP_KINDS[int(steps["kind"].iloc[e["args"]["step"]])]
    # every IPU lane has every step (synthetic ops span both IPUs), busiest tile matches the data
    w = prof.step_tiles.window(0, len(steps))
    for ipu in (0, 1):
        lane = [e for e in xs if e["pid"] == 1 + ipu]
        assert len(lane) == len(steps)
        for e in lane[::23]:
            seg = w.cycles[e["args"]["step"], ipu * 24:(ipu + 1) * 24]
            assert e["args"]["busy_max_cycles"] == seg.max()
    # ts non-decreasing and no overlaps within a lane
    by_lane = defaultdict(list)
    for e in xs:
        by_lane[(e["pid"], e["tid"])].append(e)
    for lane in by_lane.values():
        for a, b in zip(lane, lane[1:], strict=False):
            assert b["ts"] >= a["ts"] + a["dur"] - 1e-3
    assert doc["otherData"]["clock_hz"] == clock
    # ts/dur are microseconds; no displayTimeUnit, which Perfetto before late 2021 took as the ts unit
    # ("ns" there made every time 1000x too short) and current Perfetto ignores with an import note
    assert "displayTimeUnit" not in doc


def test_trace_window_and_tiles(prof, tmp_path):
    out = tmp_path / "sub.json"
    tiles = [3, 30, 47]
    export_chrome_trace(prof, out, step_range=(100, 180), tiles=tiles)
    _, ev = _load(out)
    procs, threads = _names(ev)
    assert procs == {0: "BSP steps", 1: "IPU 0", 2: "IPU 1"}
    assert set(threads) == {(0, 0), (1, TILE_TID_BASE + 3), (2, TILE_TID_BASE + 30), (2, TILE_TID_BASE + 47)}
    xs = [e for e in ev if e["ph"] == "X"]
    bsp = [e for e in xs if e["pid"] == 0]
    assert [e["args"]["step"] for e in bsp] == list(range(100, 180))
    assert bsp[0]["ts"] == 0  # rebased to the window's first step
    w = prof.step_tiles.window(100, 180)
    kinds = prof.steps["kind"].to_numpy()
    for tile in tiles:
        lane = [e for e in xs if e["tid"] == TILE_TID_BASE + tile and e["pid"] != 0]
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
                assert e["dur"] == pytest.approx(e["args"]["cycles"] / prof.target.clock_hz * 1e6, abs=1e-3)
        ts = [e["ts"] for e in lane]
        assert ts == sorted(ts)


def test_trace_tile_lanes_perfetto_safe_tids(prof, tmp_path):
    """Perfetto (v52, seen in bench/perfetto_check.py) reads tid 0 as the process's main thread (tid = pid):
    tile 0's lane merged into tile 1's (pid 1).  Every tile lane needs its own tid, never 0 and never a pid."""
    out = tmp_path / "t.json"
    tiles = [0, 1, 2, 24, 25, 47]  # tile ids 0..2 equal the steps/IPU pids
    export_chrome_trace(prof, out, step_range=(0, 40), tiles=tiles)
    _, ev = _load(out)
    procs, threads = _names(ev)
    pids = set(procs)
    tile_lanes = {k: v for k, v in threads.items() if k[0] != 0}
    assert len(tile_lanes) == len(tiles)
    assert len({tid for _, tid in tile_lanes}) == len(tiles)
    assert all(tid != 0 and tid not in pids for _, tid in tile_lanes)
    by_tile = defaultdict(set)
    for e in ev:
        if e["ph"] == "X" and e["pid"] != 0:
            assert (e["pid"], e["tid"]) in tile_lanes
            by_tile[e["args"]["tile"]].add((e["pid"], e["tid"]))
            assert tile_lanes[(e["pid"], e["tid"])].startswith(f"tile {e['args']['tile']} ")
    assert sorted(by_tile) == tiles and all(len(v) == 1 for v in by_tile.values())
    # the per-IPU layout keeps one lane per IPU process
    export_chrome_trace(prof, out, step_range=(0, 40))
    _, ev = _load(out)
    assert set(_names(ev)[1]) == {(0, 0), (1, 0), (2, 0)}


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
    for cat in ("variable", "vertexCode", "stack"):
        np.testing.assert_array_equal(df[cat], mem[:, schema.CATEGORY_CODE[cat], :].sum(axis=1))
    np.testing.assert_array_equal(df["total"], mem.sum(axis=(1, 2)))
    assert df["over_capacity"].sum() == 2
    assert (df.loc[df["tile"] == 30, "ipu"] == 1).all()


def test_csv_ops_and_steps(prof, tmp_path):
    export_csv(prof, "ops", tmp_path / "ops.csv")
    ops = pd.read_csv(tmp_path / "ops.csv", keep_default_na=False)
    assert list(ops["name"]) == list(prof.ops["name"])
    np.testing.assert_array_equal(ops["flops"], prof.ops["flops"])
    np.testing.assert_allclose(ops["time_s"], prof.ops["cycles"] / prof.target.clock_hz)
    export_csv(prof, "steps", tmp_path / "steps.csv")
    st = pd.read_csv(tmp_path / "steps.csv", keep_default_na=False)
    assert len(st) == len(prof.steps)
    assert set(st["kind_name"]) <= set(schema.STEP_KINDS)
    np.testing.assert_array_equal(st["cycles"], prof.steps["end_cycle"] - prof.steps["start_cycle"])
    assert all(c in st.columns for c in schema.TABLE_COLUMNS["steps"])
    for t in CSV_TABLES:
        assert export_csv(prof, t, tmp_path / f"{t}.csv") >= 0
    with pytest.raises(ConfigError, match="unknown CSV table"):
        export_csv(prof, "nope", tmp_path / "x.csv")


def test_trace_same_with_plain_json_encoder(prof, tmp_path, monkeypatch):
    from popvision_lite.profile import chrome_trace

    export_chrome_trace(prof, tmp_path / "a.json", step_range=(0, 60), tiles=[1, 40])
    monkeypatch.setattr(chrome_trace, "_encoder",
                        lambda: json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode)
    export_chrome_trace(prof, tmp_path / "b.json", step_range=(0, 60), tiles=[1, 40])
    assert json.loads((tmp_path / "a.json").read_text()) == json.loads((tmp_path / "b.json").read_text())
