"""Round trip write_profile -> open_profile, the reader API, and the synthetic profile's consistency."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import popvision_lite as pvl
from popvision_lite.profile import schema
from popvision_lite.profile.phases import phases_from_schedule
from popvision_lite.profile.reader import open_profile
from popvision_lite.profile.run_record import Schedule
from popvision_lite.profile.writer import write_profile
from popvision_lite.testing.synthetic import make_synthetic, write_synthetic


@pytest.fixture(scope="module")
def data():
    return make_synthetic(num_ipus=2, tiles_per_ipu=100, num_steps=300, seed=3, num_layers=2,
                          over_capacity_tiles=3)


@pytest.fixture(scope="module")
def path(data, tmp_path_factory):
    p = tmp_path_factory.mktemp("rt") / "run.pvl"
    write_profile(p, data)
    return p


def test_tables_round_trip(data, path):
    with pvl.open(path) as p:
        assert p.format_version == schema.FORMAT_VERSION
        assert p.target == data.target
        assert p.run["config"]["seed"] == 3
        for name, cols in schema.TABLE_COLUMNS.items():
            got = p.stored_table(name)
            want = getattr(data, name)
            if want is None and name == "variable_intervals":  # none given: every variable live once
                want = schema.empty_table(name)
            elif want is None:  # an optional table the producer left to the writer: built from run["schedule"]
                want = phases_from_schedule(Schedule.build(data.run.get("schedule")), data.steps, data.target.clock_hz)
            assert list(got.columns) == list(cols) + list(schema.DERIVED_COLUMNS.get(name, ()))
            assert len(got) == len(want), name
            for c in cols:
                g, w = got[c].to_numpy(), want[c].to_numpy()
                if w.dtype == object:
                    assert list(g) == list(w), (name, c)
                else:
                    np.testing.assert_array_equal(g, w, err_msg=f"{name}.{c}")
                # the reader returns the schema's dtypes whatever the producer used
                dt = schema.COLUMN_DTYPES[name][c]
                assert (g.dtype == object) if dt == "str" else (g.dtype == np.dtype(dt)), (name, c, g.dtype)


def test_arrays_round_trip(data, path):
    with open_profile(path) as p:
        np.testing.assert_array_equal(p.memory.array(), data.memory)
        np.testing.assert_array_equal(p.liveness.tile_bytes(), data.liveness_tile_bytes)
        np.testing.assert_array_equal(p.liveness.tile_bytes(2, 5, tiles=[0, 150]),
                                      data.liveness_tile_bytes[2:5][:, [0, 150]])
        w = p.step_tiles.window(37, 137)
        assert w.cycles.shape == (100, 200) and w.cycles.dtype == np.uint32
        np.testing.assert_array_equal(w.cycles, data.step_tile_cycles[37:137])
        np.testing.assert_array_equal(w.bytes_in, data.step_tile_bytes_in[37:137])
        np.testing.assert_array_equal(w.bytes_out, data.step_tile_bytes_out[37:137])
        tiles = [5, 99, 100, 177]
        ws = p.step_tiles.window(290, 400, tiles=tiles)  # clipped at the end of the run
        assert ws.cycles.shape == (10, 4)
        np.testing.assert_array_equal(ws.bytes_in, data.step_tile_bytes_in[290:300][:, tiles])


def test_a_scrolled_window_reads_through_a_chunk_cache_with_the_same_values(data, path):
    """A first read decodes its chunks without a chunk cache; a read that comes back to chunks read
    before goes through a cached handle of the same dataset: every window equals the data either way,
    for tile subsets in order, out of order and spread over both IPUs."""
    name = "arrays/step_tile_cycles"
    ref = np.asarray(data.step_tile_cycles)
    with open_profile(path) as p:
        for tiles in (None, [3, 50, 120, 199], [150, 7, 101, 99, 0]):
            np.testing.assert_array_equal(p.step_tiles.window(10, 40, tiles=tiles).cycles,
                                          ref[10:40] if tiles is None else ref[10:40][:, tiles])
            if tiles is None:
                assert name not in p._cached  # read once so far: no cache
        assert name in p._cached  # read again: the cached handle
        for a in range(20, 200, 15):  # scrolling
            np.testing.assert_array_equal(p.step_tiles.window(a, a + 30, tiles=[150, 7, 101]).cycles,
                                          ref[a:a + 30][:, [150, 7, 101]])
            np.testing.assert_array_equal(p.step_tiles.cycles(a, a + 30), ref[a:a + 30])


def test_a_span_above_the_buffer_limit_reads_into_its_own_array(data, path, monkeypatch):
    from popvision_lite.profile import step_tiles

    monkeypatch.setattr(step_tiles, "_SPAN_BUFFER_BYTES", 64)  # every span of this window is larger
    tiles = [150, 7, 101, 99, 0, 3]
    with open_profile(path) as p:
        np.testing.assert_array_equal(p.step_tiles.window(5, 250, tiles=tiles).bytes_in,
                                      np.asarray(data.step_tile_bytes_in)[5:250][:, tiles])


def test_tiles_and_memory_by_tile(data, path):
    from popvision_lite.profile.public import snake

    with open_profile(path) as p:
        t = p.tiles  # notebook form: index = tile
        assert len(t) == 200 and t.index.name == "tile" and list(t.columns) == ["ipu", "tile_in_ipu", "capacity_bytes"]
        assert t.loc[150, "ipu"] == 1 and t.loc[150, "tile_in_ipu"] == 50
        st = p.stored_table("tiles")  # the views' form: the id column and a RangeIndex equal to it
        assert list(st.columns) == ["tile", "ipu", "tile_in_ipu", "capacity_bytes"] and (st.index == st["tile"]).all()
        m = p.stored_table("memory_by_tile")
        assert len(m) == 200 and (m.index == m["tile"]).all() and m.columns[0] == "tile"  # one convention
        for cat in schema.MEMORY_CATEGORIES:
            i = schema.CATEGORY_CODE[cat]
            np.testing.assert_array_equal(m[cat].to_numpy(), data.memory[:, i, :].sum(axis=1))
        np.testing.assert_array_equal(m["total"], data.memory.sum(axis=(1, 2)))
        assert (m["always_live"] + m["not_always_live"] == m["total"]).all()
        assert int(m["over_capacity"].sum()) == 3
        assert (m.loc[m["over_capacity"], "total"] > p.target.sram_bytes_per_tile).all()
        pub = p.memory.by_tile()  # the same numbers under snake_case names with their unit, index = tile
        assert pub.index.name == "tile" and pub.equals(p.table("memory_by_tile"))
        for cat in schema.MEMORY_CATEGORIES:
            np.testing.assert_array_equal(pub[f"{snake(cat)}_bytes"].to_numpy(), m[cat].to_numpy())
        for old, new in (("total", "total_bytes"), ("capacity", "capacity_bytes"), ("always_live", "always_live_bytes")):
            np.testing.assert_array_equal(pub[new].to_numpy(), m[old].to_numpy())


def test_summaries_match_raw(data, path):
    raw = np.asarray(data.step_tile_cycles)
    with open_profile(path) as p:
        levels = p.step_tiles.levels
        assert levels[0][0] < levels[-1][0]
        for sb, tb in levels:
            s = p.step_tiles.summary(sb, tb)
            edges = s["tile_edges"]
            tb_eff = 100 if tb == 0 else tb
            # blocks never straddle an IPU: every IPU start is a block edge
            assert 100 in set(edges.tolist())
            assert s["max"].shape == (-(-300 // sb), len(edges))
            # check a few blocks by brute force
            for bi in (0, s["max"].shape[0] - 1):
                for bj in (0, len(edges) - 1):
                    t0 = edges[bj]
                    t1 = min(t0 + tb_eff, (t0 // 100 + 1) * 100)
                    blk = raw[bi * sb:(bi + 1) * sb, t0:t1]
                    assert s["max"][bi, bj] == blk.max()
                    assert s["min"][bi, bj] == blk.min()
                    assert s["mean"][bi, bj] == pytest.approx(blk.mean(), rel=1e-5)
        sb, tb = levels[0]
        part = p.step_tiles.summary(sb, tb, start=sb * 2 + 1, stop=sb * 4)
        assert part["max"].shape[0] == 2 and part["step_edges"][0] == sb * 2
        assert p.step_tiles.pick_level(300, max_step_blocks=2) == levels[-1]
        assert p.step_tiles.pick_level(300, max_step_blocks=19) == levels[0]  # 300 / 16 -> 19 blocks


def test_writer_fills_missing_step_aggregates(data, tmp_path):
    steps = data.steps.copy()
    steps["busy_max"] = np.nan
    steps = steps.drop(columns=["bytes_in"])
    steps["tiles_active"] = steps["tiles_active"].astype(float)
    steps.loc[5, "tiles_active"] = np.nan
    d2 = schema.ProfileData(**{**data.__dict__, "steps": steps})
    out = write_profile(tmp_path / "agg.pvl", d2)
    raw = np.asarray(data.step_tile_cycles)
    with open_profile(out) as p:
        s = p.stored_table("steps")
        np.testing.assert_array_equal(s["busy_max"], raw.max(axis=1))
        np.testing.assert_array_equal(s["bytes_in"], np.asarray(data.step_tile_bytes_in).sum(axis=1))
        assert s.loc[5, "tiles_active"] == np.count_nonzero(raw[5])
        assert s["busy_max"].dtype == np.int64


def test_synthetic_is_internally_consistent(data):
    steps, ops, progs = data.steps, data.ops, data.programs
    dur = steps["end_cycle"] - steps["start_cycle"]
    assert (dur > 0).all()
    assert (steps["start_cycle"].to_numpy()[1:] == steps["end_cycle"].to_numpy()[:-1]).all()
    raw = np.asarray(data.step_tile_cycles)
    assert (raw.max(axis=1) <= dur.to_numpy()).all()
    assert set(np.unique(steps["kind"])) >= {schema.STEP_KIND_CODE[k] for k in
                                             ("compute", "sync", "exchange_internal", "exchange_global",
                                              "stream_copy")}
    # sync steps have no busy tiles; compute steps vary across tiles (imbalance)
    sync = steps["kind"].to_numpy() == schema.STEP_KIND_CODE["sync"]
    assert raw[sync].max() == 0
    comp = steps["kind"].to_numpy() == schema.STEP_KIND_CODE["compute"]
    assert (raw[comp].max(axis=1) > raw[comp].mean(axis=1)).all()
    # op cycles are sums of their steps' durations, split by kind
    per_op = dur.groupby(steps["op_id"]).sum()
    np.testing.assert_array_equal(ops.set_index("op_id").loc[per_op.index, "cycles"], per_op)
    split = ops[["compute_cycles", "exchange_cycles", "sync_cycles", "stream_cycles"]].sum(axis=1)
    np.testing.assert_array_equal(split, ops["cycles"])
    assert (ops.loc[ops["type"] == "matmul", "flops"] > 0).all()
    # programs: root covers everything; leaves map to their steps
    root = progs.iloc[0]
    assert root["first_step"] == 0 and root["last_step"] == len(steps) - 1 and root["cycles"] == dur.sum()
    leaf_cycles = dur.groupby(steps["prog_id"]).sum()
    np.testing.assert_array_equal(progs.set_index("prog_id").loc[leaf_cycles.index, "cycles"], leaf_cycles)
    assert (progs["parent_id"] < progs["prog_id"]).all()
    # memory variables match the tile mapping; liveness peak equals not-always-live memory
    vt = data.variable_tiles
    tot = vt.groupby("var_id")["bytes"].sum()
    np.testing.assert_array_equal(data.variables.set_index("var_id").loc[tot.index, "bytes"], tot)
    var_i = schema.CATEGORY_CODE["variable"]
    np.testing.assert_array_equal(data.liveness_tile_bytes.max(axis=0), data.memory[:, var_i, 1])
    ls = data.liveness_steps
    np.testing.assert_array_equal(ls["total_bytes"], data.liveness_tile_bytes.sum(axis=1))
    assert data.run["fits"] is False


def test_synthetic_deterministic_and_seeded():
    a = make_synthetic(num_ipus=1, tiles_per_ipu=32, num_steps=50, seed=1)
    b = make_synthetic(num_ipus=1, tiles_per_ipu=32, num_steps=50, seed=1)
    c = make_synthetic(num_ipus=1, tiles_per_ipu=32, num_steps=50, seed=2)
    np.testing.assert_array_equal(a.step_tile_cycles, b.step_tile_cycles)
    pd.testing.assert_frame_equal(a.ops, b.ops)
    assert not a.ops["cycles"].equals(c.ops["cycles"])
    assert a.run["fits"] is True and a.target.device == "ipu-mk2"


def test_write_synthetic_streams_lazily(tmp_path):
    calls = []
    out = write_synthetic(tmp_path / "big.pvl", num_ipus=1, tiles_per_ipu=16, num_steps=2500,
                          progress=lambda done, total: calls.append((done, total)))
    assert calls[-1] == (2500, 2500) and len(calls) == 3  # batches of 1024 steps
    ref = make_synthetic(num_ipus=1, tiles_per_ipu=16, num_steps=2500, lazy=False)
    with open_profile(out) as p:
        np.testing.assert_array_equal(p.step_tiles.window(2000, 2500).cycles, ref.step_tile_cycles[2000:2500])
        assert p.num_steps == 2500


def test_empty_run_round_trips(tmp_path):
    d = make_synthetic(num_ipus=1, tiles_per_ipu=8, num_steps=0)
    out = write_profile(tmp_path / "empty.pvl", d)
    with open_profile(out) as p:
        assert len(p.stored_table("steps")) == 0
        assert p.step_tiles.window(0, 100).cycles.shape == (0, 8)
        assert p.step_tiles.summary(*p.step_tiles.levels[0])["max"].shape[0] == 0


def test_many_layers_repeat_earlier_layers():
    from popvision_lite.testing.synthetic_model import DISTINCT_LAYERS

    n = DISTINCT_LAYERS + 2
    d = make_synthetic(num_ipus=1, tiles_per_ipu=16, num_steps=2000, num_layers=n, lazy=True)
    ops = d.ops.set_index("name")
    assert f"layer{n - 1}/ffn/matmul" in ops.index
    # layer DISTINCT_LAYERS repeats layer 0: same per-op work and the same per-tile cycles
    a, b = ops.loc["layer0/ffn/matmul"], ops.loc[f"layer{DISTINCT_LAYERS}/ffn/matmul"]
    assert a["tiles_used"] == b["tiles_used"] and a["plan"] == b["plan"]
    steps = d.steps
    sa = steps.loc[steps["op_id"] == a["op_id"], "step"].to_numpy()
    sb = steps.loc[steps["op_id"] == b["op_id"], "step"].to_numpy()
    np.testing.assert_array_equal(d.step_tile_cycles[sa[0]:sa[0] + 4], d.step_tile_cycles[sb[0]:sb[0] + 4])
    # templates are shared, so far fewer template rows than leaf programs
    leaves = (d.programs["lstep"] >= 0).sum()
    assert d.step_tile_cycles.templates.shape[0] < leaves


def test_package_level_names():
    import popvision_lite.profile as prof

    assert prof.open_profile is open_profile and prof.write_profile is write_profile
    with pytest.raises(AttributeError):
        prof.nope  # noqa: B018


@settings(max_examples=12, deadline=None)
@given(ipus=st.integers(1, 3), tpi=st.integers(1, 40), n_steps=st.integers(1, 90),
       data=st.data())
def test_windows_and_summaries_any_shape(tmp_path_factory, ipus, tpi, n_steps, data):
    d = make_synthetic(num_ipus=ipus, tiles_per_ipu=tpi, num_steps=n_steps, num_layers=1, noise=0.05,
                       seed=n_steps)
    path = write_profile(tmp_path_factory.mktemp("h") / "h.pvl", d,
                         summary_levels=((4, 3), (16, 0)), step_chunk=7)
    raw = np.asarray(d.step_tile_cycles)
    nt = ipus * tpi
    a = data.draw(st.integers(0, n_steps))
    b = data.draw(st.integers(a, n_steps + 5))
    tiles = data.draw(st.lists(st.integers(0, nt - 1), min_size=1, max_size=6))
    with open_profile(path) as p:
        np.testing.assert_array_equal(p.step_tiles.window(a, b).cycles, raw[a:b])
        np.testing.assert_array_equal(p.step_tiles.window(a, b, tiles=tiles).bytes_out,
                                      np.asarray(d.step_tile_bytes_out)[a:b][:, tiles])
        s = p.step_tiles.summary(4, 3)
        edges = s["tile_edges"]
        assert set(range(0, nt, tpi)) <= set(edges.tolist())  # a block starts at every IPU
        ends = [min(e + 3, (e // tpi + 1) * tpi) for e in edges]
        for bi in range(s["max"].shape[0]):
            for bj, (t0, t1) in enumerate(zip(edges, ends, strict=True)):
                blk = raw[bi * 4:(bi + 1) * 4, t0:t1]
                assert s["max"][bi, bj] == blk.max() and s["min"][bi, bj] == blk.min()
        np.testing.assert_array_equal(p.stored_table("steps")["busy_max"], raw.max(axis=1))


def test_summary_step_blocks_must_divide_the_write_batch(data, tmp_path):
    with pytest.raises(ValueError, match="divide"):
        write_profile(tmp_path / "x.pvl", data, summary_levels=((100, 16),))
    assert list(tmp_path.iterdir()) == []


def test_window_unpacks_like_a_tuple(data, path):
    with open_profile(path) as p:
        cycles, bytes_in, bytes_out = p.step_tiles.window(5, 25)
        np.testing.assert_array_equal(cycles, data.step_tile_cycles[5:25])
        np.testing.assert_array_equal(bytes_out, data.step_tile_bytes_out[5:25])


def test_a_profile_replaced_on_disk_after_opening_reads_as_the_one_opened(tmp_path):
    """A writer's atomic replace of the path (another `emulate -o` of the same file) after a profile was opened:
    its arrays still read from the file that was opened. The chunk checks read that file, not the path again,
    where the other profile's bytes would sit at this file's chunk addresses."""
    import shutil

    samples = Path(__file__).resolve().parents[2] / "sample_profiles"
    path = tmp_path / "same.pvl"
    shutil.copy(samples / "gnn_mk2.pvl", path)
    with pvl.open(samples / "gnn_mk2.pvl") as ref:
        want_memory = ref.memory.array()
        want_cycles = ref.step_tiles.window(0, len(ref.stored_table("steps"))).cycles
    with pvl.open(path) as p:
        shutil.copy(samples / "mlp_mk2.pvl", tmp_path / "other.pvl")
        os.replace(tmp_path / "other.pvl", path)  # as write_profile publishes a file
        np.testing.assert_array_equal(p.memory.array(), want_memory)
        np.testing.assert_array_equal(p.step_tiles.window(0, len(p.stored_table("steps"))).cycles, want_cycles)
