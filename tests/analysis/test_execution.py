"""Execution LOD analysis: every number is checked against a direct computation on the profile."""

import numpy as np
import pandas as pd
import pytest

from popvision_lite.analysis import execution as ex
from popvision_lite.profile.schema import STEP_KINDS

TPI = 64


@pytest.fixture(scope="module")
def prof(synthetic_profile):
    return synthetic_profile(num_ipus=2, tiles_per_ipu=TPI, num_steps=300, seed=3)


@pytest.fixture(scope="module")
def idx(prof):
    return ex.StepIndex.from_profile(prof)


@pytest.fixture(scope="module")
def cycles(prof):
    return np.asarray(prof.step_tiles.window(0, prof.stored_table("steps").shape[0]).cycles, dtype=np.int64)


def _overlap_by_kind(steps: pd.DataFrame, a: float, b: float) -> np.ndarray:
    out = np.zeros(len(STEP_KINDS))
    for r in steps.itertuples():
        out[r.kind] += max(0.0, min(b, r.end_cycle) - max(a, r.start_cycle))
    return out


def test_visible_matches_brute_force(prof, idx):
    st = prof.stored_table("steps")
    rng = np.random.default_rng(0)
    for _ in range(30):
        a, b = np.sort(rng.uniform(idx.t0 - 100, idx.t1 + 100, 2))
        i0, i1 = idx.visible(a, b)
        want = np.flatnonzero((st.end_cycle > a).to_numpy() & (st.start_cycle < b).to_numpy())
        assert list(range(i0, i1)) == want.tolist()


def test_kind_cycles_equal_overlaps(prof, idx):
    edges = np.sort(np.random.default_rng(1).uniform(idx.t0, idx.t1, 9))
    got = idx.kind_cycles(edges)
    for j in range(len(edges) - 1):
        np.testing.assert_allclose(got[:, j], _overlap_by_kind(prof.stored_table("steps"), edges[j], edges[j + 1]), atol=1e-6)


def test_kind_cycles_with_overlapping_steps():
    # two IPUs whose steps overlap in time: cycles are summed per kind
    steps = pd.DataFrame({
        "step": [0, 1, 2], "kind": [0, 0, 1], "op_id": [0, 1, -1], "prog_id": [0, 0, 0], "ipu": [0, 1, -1],
        "start_cycle": [0, 5, 20], "end_cycle": [10, 15, 30], "busy_max": [1, 1, 0], "busy_mean": [1.0, 1.0, 0.0],
        "tiles_active": [1, 1, 0], "bytes_in": [0, 0, 0], "bytes_out": [0, 0, 0]})
    i = ex.StepIndex(steps, 2)
    got = i.kind_cycles(np.array([0.0, 8.0, 25.0]))
    np.testing.assert_allclose(got[:, 0], _overlap_by_kind(steps, 0, 8))
    np.testing.assert_allclose(got[:, 1], _overlap_by_kind(steps, 8, 25))
    assert i.visible(12, 13) == (1, 2)          # step 0 ended, step 1 still running
    assert i.step_at(7, ipu=0) == 0 and i.step_at(7, ipu=1) == 1 and i.step_at(17) == -1


def test_exact_cells_equal_profile_window(prof, idx, cycles):
    i0, i1, t0, t1 = 40, 47, 50, 80
    c = ex.exact_cells(prof, idx, i0, i1, t0, t1)
    assert len(c.step) == (i1 - i0) * (t1 - t0)  # every tile takes part in every step (ipu = -1)
    dur = (prof.stored_table("steps").end_cycle - prof.stored_table("steps").start_cycle).to_numpy()
    np.testing.assert_array_equal(c.busy, cycles[c.step, c.tile])
    np.testing.assert_array_equal(c.wait, dur[c.step] - cycles[c.step, c.tile])
    np.testing.assert_array_equal(c.start, prof.stored_table("steps").start_cycle.to_numpy()[c.step])
    np.testing.assert_array_equal(c.kind, prof.stored_table("steps").kind.to_numpy()[c.step])


def _check_raster(prof, idx, cycles, r, t0, t1):
    """min <= every exact cell behind a pixel <= max, and busy fractions add up to the busy cycles."""
    st = prof.stored_table("steps")
    starts, ends = st.start_cycle.to_numpy(), st.end_cycle.to_numpy()
    checked = 0
    for c in range(r.util.shape[1]):
        a, b = r.edges[c], r.edges[c + 1]
        s = np.flatnonzero((ends > a) & (starts < b))
        for row in range(r.util.shape[0]):
            ta, tb = r.row_tiles[row], r.row_tiles[row + 1]
            if len(s) == 0:
                assert np.isnan(r.bmin[row, c])
                continue
            vals = cycles[s][:, ta:tb]
            assert r.bmin[row, c] <= vals.min() and vals.max() <= r.bmax[row, c], (row, c)
            checked += 1
    assert checked > 0
    # busy fraction x column width summed over the whole run = busy cycles per tile of each row
    width = np.diff(r.edges)
    for row in range(r.util.shape[0]):
        ta, tb = r.row_tiles[row], r.row_tiles[row + 1]
        want = cycles[:, ta:tb].sum() / (tb - ta)
        got = np.nansum(r.util[row] * width)
        np.testing.assert_allclose(got, want, rtol=1e-4)


def test_summary_raster_brackets_exact_values(prof, idx, cycles):
    n = prof.stored_table("steps").shape[0]
    r = ex.tile_raster(prof, idx, idx.t0, idx.t1, 40, 0, 2 * TPI, 8, max_cells=0)
    assert r.source.startswith("summary") and r.level[0] in (16, 128, 1024)
    assert r.util.shape[1] == 40 and r.row_tiles[0] == 0 and r.row_tiles[-1] == 2 * TPI
    assert TPI in r.row_tiles  # rows never straddle the IPU boundary
    _check_raster(prof, idx, cycles, r, 0, 2 * TPI)
    assert r.step_range == (0, n)


def test_summary_spread_over_steps_keeps_brackets_and_sums(prof, idx, cycles):
    # at most one step per pixel: block totals are spread over the steps by their mean busy
    r = ex.tile_raster(prof, idx, idx.t0, idx.t1, 320, 0, 2 * TPI, 8, max_cells=0)
    assert r.source.endswith("+steps")
    _check_raster(prof, idx, cycles, r, 0, 2 * TPI)
    # zoomed on a sync step (no tile busy in it): its pixel columns show no busy time, while the
    # 16-step block around it is busy
    st = prof.stored_table("steps")
    s = int(np.flatnonzero((st.kind == 1).to_numpy() & (st.end_cycle - st.start_cycle > 50).to_numpy())[3])
    a, b, d = float(st.start_cycle[s]), float(st.end_cycle[s]), float(st.end_cycle[s] - st.start_cycle[s])
    z = ex.tile_raster(prof, idx, a - 10 * d, b + 10 * d, 210, 0, 2 * TPI, 8, max_cells=0)
    assert z.source.endswith("+steps")
    inside = (z.edges[:-1] >= a) & (z.edges[1:] <= b)
    assert inside.sum() >= 5 and np.all(z.util[:, inside] == 0)
    assert np.nanmax(z.util) > 0


def test_exact_raster_brackets_and_sums(prof, idx, cycles):
    r = ex.tile_raster(prof, idx, idx.t0, idx.t1, 64, 0, 2 * TPI, 10)
    assert r.source == "window"
    _check_raster(prof, idx, cycles, r, 0, 2 * TPI)


def test_raster_cost_is_bounded_by_pixels(prof, idx):
    r = ex.tile_raster(prof, idx, idx.t0, idx.t1, 17, 0, 2 * TPI, 5, max_cells=0)
    assert r.util.shape[1] == 17 and r.util.shape[0] <= 5 + 1


def test_choose_level():
    levels = [(16, 16), (128, 64), (1024, 1472)]
    assert ex.choose_level(levels, 10000, 1000, 23) == (16, 16)       # fine rows: finest tiles
    assert ex.choose_level(levels, 1_000_000, 800, 100) == (128, 64)  # 1250 steps/px -> 128 step blocks
    assert ex.choose_level(levels, 1_000_000, 800, 5000) == (1024, 1472)
    assert ex.choose_level(levels, 100, 1000, 3) == (16, 16)          # nothing finer exists


def test_step_bins_per_step_and_buckets(prof, idx):
    st = prof.stored_table("steps")
    a, b = float(st.start_cycle[10]), float(st.end_cycle[19])
    bins = ex.step_bins(idx, a, b, cols=2000)
    assert bins.per_step and bins.steps.tolist() == list(range(10, 20))
    dur = (st.end_cycle - st.start_cycle).to_numpy()
    for j, s in enumerate(bins.steps):
        assert bins.per_step_cycles[st.kind[s], j] == dur[s]
        assert bins.per_step_cycles[:, j].sum() == dur[s]
        if st.kind[s] == 0 and st.busy_mean[s] > 0:
            assert bins.imbalance[j] == pytest.approx(st.busy_max[s] / st.busy_mean[s])
        else:
            assert np.isnan(bins.imbalance[j])
    whole = ex.step_bins(idx, idx.t0, idx.t1, cols=90)
    assert not whole.per_step and len(whole.left) == 30
    np.testing.assert_allclose(whole.cycles.sum(axis=1), _overlap_by_kind(st, idx.t0, idx.t1))
    comp = (st.kind == 0) & (st.busy_mean > 0)
    assert np.nanmax(whole.imbalance) == pytest.approx((st.busy_max[comp] / st.busy_mean[comp]).max())


def test_range_summary_equals_direct(prof, idx, cycles):
    st = prof.stored_table("steps")
    s0, s1 = 23, 171
    rs = ex.range_summary(prof, idx, s0, s1)
    sub = st.iloc[s0:s1]
    dur = sub.end_cycle - sub.start_cycle
    for k, name in enumerate(STEP_KINDS):
        assert rs.cycles_by_kind[name] == int(dur[sub.kind == k].sum())
    want_ops = dur[sub.op_id >= 0].groupby(sub.op_id[sub.op_id >= 0]).sum()
    assert dict(zip(rs.ops.op_id, rs.ops.cycles, strict=True)) == want_ops.to_dict()
    assert rs.ops.cycles.is_monotonic_decreasing
    per_tile = cycles[s0:s1].sum(axis=0)
    assert rs.exact
    assert rs.busiest.busy.tolist() == sorted(per_tile, reverse=True)[:10]
    assert per_tile[rs.busiest.tile.to_numpy()].tolist() == rs.busiest.busy.tolist()
    assert rs.imbalance == pytest.approx(per_tile.max() / per_tile.mean())
    assert rs.cycle_range == (int(st.start_cycle[s0]), int(st.end_cycle[s1 - 1]))


def test_range_summary_from_summaries_when_large(prof, idx, cycles):
    s0, s1 = 32, 160  # aligned to the 16-step blocks
    rs = ex.range_summary(prof, idx, s0, s1, max_cells=0)
    assert not rs.exact and rs.tile_block == 16
    blocks = cycles[s0:s1].reshape(s1 - s0, -1, 16).sum(axis=(0, 2)) / 16.0
    np.testing.assert_allclose(rs.busiest.busy.to_numpy(), np.sort(blocks)[::-1][:10], rtol=1e-5)
    assert rs.imbalance == pytest.approx(blocks.max() / blocks.mean(), rel=1e-5)


def test_search_and_navigation(prof, idx):
    ops = prof.stored_table("ops")
    found = ex.search_ops(prof, "MatMul")
    want = np.sort(ops.op_id[ops.name.str.lower().str.contains("matmul")].to_numpy())
    assert len(found) > 0 and found.tolist() == want.tolist()
    steps = ex.match_steps(idx, found)
    assert steps.tolist() == np.flatnonzero(prof.stored_table("steps").op_id.isin(found).to_numpy()).tolist()
    assert ex.search_ops(prof, "").size == 0 and ex.search_ops(prof, "no-such-op").size == 0
    assert ex.next_match(steps, -1) == steps[0]
    assert ex.next_match(steps, int(steps[0])) == steps[1]
    assert ex.next_match(steps, int(steps[-1])) == steps[0]        # wraps
    assert ex.next_match(steps, int(steps[0]), forward=False) == steps[-1]
    assert ex.next_match(steps, int(steps[3]), forward=False) == steps[2]
    assert ex.next_match(np.zeros(0, np.int64), 5) == -1


def test_step_details(prof, idx):
    st = prof.stored_table("steps")
    s = int(np.flatnonzero(st.op_id.to_numpy() >= 0)[5])
    d = ex.step_details(prof, idx, s)
    assert d["op"] == prof.stored_table("ops").set_index("op_id").name[st.op_id[s]]
    assert d["kind"] == STEP_KINDS[st.kind[s]]
    assert d["cycles"] == st.end_cycle[s] - st.start_cycle[s]
    assert d["tiles_active"] == st.tiles_active[s] and d["bytes_in"] == st.bytes_in[s]
