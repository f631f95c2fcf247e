"""Format 4: a stored step x tile row spans ONE IPU's tiles, one row per (step, IPU) holding data, named in
``arrays/<array>.rows`` (decision 0400); the reader expands them to the replica's tiles.

The v3 fixtures are the bundled samples as format 3 wrote them: the v4 samples regenerated from the same
workloads read as the same arrays.  Hostile v4 files (rows naming an IPU or step outside the run, rows out of
order, rows of the wrong width) are refused with the file, the array and the problem named.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import h5py
import numpy as np
import pandas as pd
import pytest

import popvision_lite as pvl
from popvision_lite.errors import ProfileError
from popvision_lite.profile import schema
from popvision_lite.profile.writer import AGG_COLUMNS, STEP_TILE_ARRAYS, write_profile
from popvision_lite.testing.synthetic import make_synthetic

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "sample_profiles"
# each sample's newest format-3 fixture (3.2 where there is one)
V3 = {p.name: p for d in ("v3.1", "v3.2") for p in sorted((ROOT / "tests" / "fixtures" / d).glob("*.pvl"))}
PAIRS = sorted(n for n in V3 if (SAMPLES / n).exists())


def _equal(a, b) -> None:
    """``np.testing.assert_array_equal(a, b)`` at the cost of one comparison: its reporting (NaN and infinity
    positions, the mismatch count) runs only when the arrays differ (a 2,048-step block of the 4-IPU sample: 0.27 s
    against 0.006 s for ``np.array_equal``)."""
    if not (a.shape == b.shape and np.array_equal(a, b)):
        np.testing.assert_array_equal(a, b)
        raise AssertionError(f"arrays differ: {a.shape} {a.dtype} against {b.shape} {b.dtype}")


def _same_arrays(old, new, rng) -> None:
    n = old.num_steps
    assert new.num_steps == n and old.target == new.target
    for i in range(0, n, 2048):  # every step and tile, 2,048 steps at a time (the 4-IPU sample: 0.8 GB whole)
        for a, b in zip(old.step_tiles.window(i, i + 2048), new.step_tiles.window(i, i + 2048), strict=True):
            assert a.dtype == b.dtype == np.uint32
            _equal(a, b)
    nt = old.target.num_tiles
    for _ in range(6):  # windows over tile subsets: within one IPU, over several, out of order
        s = int(rng.integers(0, max(n, 1)))
        e = s + int(rng.integers(0, 200))
        tiles = rng.choice(nt, int(rng.integers(1, min(nt, 300))), replace=False)
        for a, b in zip(old.step_tiles.window(s, e, tiles=tiles), new.step_tiles.window(s, e, tiles=tiles),
                        strict=True):
            _equal(a, b)
    _equal(old.memory.array(), new.memory.array())
    if (old.format_version, old.format_minor) >= (3, 2):  # 3.2 counts a pipeline stash live (decision 0270)
        _equal(old.liveness.tile_bytes(), new.liveness.tile_bytes())


def test_every_sample_has_a_format_3_fixture():
    assert {p.name for p in SAMPLES.glob("*.pvl")} <= set(V3)


@pytest.mark.parametrize("name", PAIRS)
def test_v3_fixture_and_v4_sample_give_the_same_arrays(name):
    with pvl.open(V3[name]) as old, pvl.open(SAMPLES / name) as new:
        assert old.format_version == 3 and new.format_version == schema.FORMAT_VERSION == 4
        _same_arrays(old, new, np.random.default_rng(len(name)))
        steps_old, steps_new = old.stored_table("steps"), new.stored_table("steps")
        pd.testing.assert_frame_equal(steps_old, steps_new)


def test_pipelined_sample_stores_each_step_on_its_own_ipu():
    with pvl.open(SAMPLES / "bert_mini_4ipu_pipeline.pvl") as p, \
            h5py.File(SAMPLES / "bert_mini_4ipu_pipeline.pvl", "r", locking=False) as h:
        tpi = p.target.tiles_per_ipu
        steps = p.stored_table("steps")
        keys = h["arrays/step_tile_cycles.rows"][()]
        assert h["arrays/step_tile_cycles"].shape == (len(keys), tpi)
        one = steps["ipu"].to_numpy()[keys[:, 0]]
        # a step of one IPU is busy on that IPU's tiles only
        assert ((one < 0) | (one == keys[:, 1])).all() and (one >= 0).any()
        # far fewer cells than dense rows over the replica's tiles would take
        assert h["arrays/step_tile_cycles"].size * 2 < len(np.unique(keys[:, 0])) * p.target.num_tiles


@pytest.fixture(scope="module")
def crafted(tmp_path_factory):
    """A 3-IPU synthetic run with a step of every IPU (ipu -1) holding data on each, a step of IPU 0 whose
    bytes land on IPU 2's tiles, and a step with no data; written as format 4."""
    data = make_synthetic(num_ipus=3, tiles_per_ipu=16, num_steps=60, seed=3, lazy=False)
    cyc, b_in, b_out = (np.array(getattr(data, n)) for n in STEP_TILE_ARRAYS)
    steps = data.steps.drop(columns=list(AGG_COLUMNS))  # the writer works them out from the arrays
    every, cross, idle = 10, 20, 30
    steps.loc[every, "ipu"] = -1
    cyc[every] = np.arange(1, 49)
    steps.loc[cross, "ipu"] = 0
    b_out[cross] = 0
    b_out[cross, 3] = 64
    b_in[cross] = 0
    b_in[cross, 40] = 64
    cyc[idle] = b_in[idle] = b_out[idle] = 0
    data.steps = steps
    data.step_tile_cycles, data.step_tile_bytes_in, data.step_tile_bytes_out = cyc, b_in, b_out
    path = write_profile(tmp_path_factory.mktemp("v4") / "run.pvl", data)
    return (cyc, b_in, b_out), path, (every, cross, idle)


def _keys(h, name):
    return [tuple(k) for k in h[f"arrays/{name}.rows"][()].tolist()]


def test_round_trip_stores_one_row_per_ipu_holding_data(crafted):
    dense, path, (every, cross, idle) = crafted
    with pvl.open(path) as p, h5py.File(path, "r", locking=False) as h:
        assert (p.format_version, p.format_minor) == (4, 0)
        n, nt = p.num_steps, p.target.num_tiles
        for name, arr in zip(STEP_TILE_ARRAYS, dense, strict=True):
            want = [(s, u) for s in range(n) for u in range(3) if arr[s, u * 16:(u + 1) * 16].any()]
            assert _keys(h, name) == want, name
            stored = h[f"arrays/{name}"][()]
            assert stored.shape == (len(want), 16)
            for (s, u), row in zip(want, stored, strict=True):
                np.testing.assert_array_equal(row, arr[s, u * 16:(u + 1) * 16])
        w = p.step_tiles.window(0, n)
        for got, arr in zip(w, dense, strict=True):
            np.testing.assert_array_equal(got, arr)
        assert w.cycles.shape == (n, nt)
        # the step of every IPU: a row on each IPU; the cross-IPU step: bytes out on IPU 0, in on IPU 2
        assert [k for k in _keys(h, "step_tile_cycles") if k[0] == every] == [(every, 0), (every, 1), (every, 2)]
        assert [k for k in _keys(h, "step_tile_bytes_out") if k[0] == cross] == [(cross, 0)]
        assert [k for k in _keys(h, "step_tile_bytes_in") if k[0] == cross] == [(cross, 2)]
        assert all(k[0] != idle for name in STEP_TILE_ARRAYS for k in _keys(h, name))
        assert p.stored_table("steps").loc[every, "busy_max"] == 48
        assert p.stored_table("steps").loc[cross, "bytes_in"] == 64
        np.testing.assert_array_equal(p.step_tiles.window(cross, cross + 1, tiles=[40, 3]).bytes_in, [[64, 0]])


@pytest.mark.parametrize("tiles", [[5], [17, 2, 47], list(range(16, 32)), [47, 0], np.arange(48) % 2 == 0])
@pytest.mark.parametrize("a,b", [(0, 60), (9, 11), (30, 31), (19, 45), (59, 60), (5, 5)])
def test_windows_over_tile_subsets(crafted, a, b, tiles):
    dense, path, _ = crafted
    sel = np.flatnonzero(tiles) if isinstance(tiles, np.ndarray) else np.asarray(tiles)
    with pvl.open(path) as p:
        for got, arr in zip(p.step_tiles.window(a, b, tiles=tiles), dense, strict=True):
            np.testing.assert_array_equal(got, arr[a:b][:, sel])
        np.testing.assert_array_equal(p.step_tiles.cycles(a, b, tiles=tiles), dense[0][a:b][:, sel])


def test_single_ipu_run(tmp_path):
    data = make_synthetic(num_ipus=1, tiles_per_ipu=32, num_steps=40, seed=1, lazy=False)
    path = write_profile(tmp_path / "one.pvl", data)
    with pvl.open(path) as p, h5py.File(path, "r", locking=False) as h:
        keys = h["arrays/step_tile_cycles.rows"][()]
        assert (keys[:, 1] == 0).all()
        cyc = np.asarray(data.step_tile_cycles)
        np.testing.assert_array_equal(keys[:, 0], np.flatnonzero(cyc.any(axis=1)))
        for got, name in zip(p.step_tiles.window(0, 40), STEP_TILE_ARRAYS, strict=True):
            np.testing.assert_array_equal(got, np.asarray(getattr(data, name)))


# ---- hostile v4 files ----------------------------------------------------------------------------------------
def _with(src, tmp_path, change) -> Path:
    dst = tmp_path / "bad.pvl"
    shutil.copyfile(src, dst)
    with h5py.File(dst, "r+") as h:
        change(h)
    return dst


def _set_keys(fn):
    def change(h):
        keys = h["arrays/step_tile_cycles.rows"][()]
        del h["arrays/step_tile_cycles.rows"]
        h["arrays"].create_dataset("step_tile_cycles.rows", data=fn(keys))
    return change


def _set_row(r, col, v):
    def fn(keys):
        keys[r, col] = v
        return keys
    return fn


def _widen(h):
    d = h["arrays/step_tile_cycles"][()]
    del h["arrays/step_tile_cycles"]
    h["arrays"].create_dataset("step_tile_cycles", data=np.zeros((len(d), 48), np.uint32))


@pytest.mark.parametrize("change,words", [
    (_set_keys(_set_row(4, 1, 3)), ["'step_tile_cycles.rows' row 4", "IPU 3", "outside 0..2"]),
    (_set_keys(_set_row(4, 1, -1)), ["'step_tile_cycles.rows' row 4", "IPU -1", "outside 0..2"]),
    (_set_keys(_set_row(2, 0, 60)), ["'step_tile_cycles.rows' row 2", "step 60", "outside 0..59"]),
    (_set_keys(lambda k: k[::-1].copy()), ["'step_tile_cycles.rows' row 1", "increasing (step, IPU) order"]),
    (_set_keys(lambda k: np.concatenate([k[:1], k[:-1]])), ["row 1", "one per pair"]),
    (_set_keys(lambda k: k[:, :1].copy()), ["'step_tile_cycles.rows' has shape", "expected"]),
    (_set_keys(lambda k: k.astype(np.float64)), ["'step_tile_cycles.rows' has dtype float64"]),
    (lambda h: h.__delitem__("arrays/step_tile_bytes_in.rows"), ["missing array 'step_tile_bytes_in.rows'"]),
    (_widen, ["array 'step_tile_cycles'", "(", "48)", "rows of 16 tiles", "one IPU's tiles"]),
])
def test_hostile_v4_rows_are_refused(crafted, tmp_path, change, words):
    f = _with(crafted[1], tmp_path, change)
    with pytest.raises(ProfileError) as e, pvl.open(f) as p:  # at open, or at the first read of the arrays
        p.step_tiles.window(0, p.num_steps)
    msg = str(e.value)
    assert msg.startswith(f"{f}: "), msg
    for w in words:
        assert w in msg, (w, msg)



def test_same_profiles_compares_mixed_versions_through_the_reader(tmp_path):
    """bench.same_profiles: a v3 file and its v4 sample are the same; a changed value of a v4 row is found."""
    import sys

    sys.path.insert(0, str(ROOT))  # the bench package lives at the repo root
    from bench import same_profiles

    name = "mlp_mk2.pvl"
    assert same_profiles.differences(V3[name], SAMPLES / name) == []
    b = tmp_path / name
    shutil.copyfile(SAMPLES / name, b)
    with h5py.File(b, "r+") as h:
        h["arrays/step_tile_bytes_in"][7, 3] += 1
    assert same_profiles.differences(V3[name], b) == ["arrays/step_tile_bytes_in (as read): 1 value(s) differ"]
    assert same_profiles.differences(SAMPLES / name, b) == ["arrays/step_tile_bytes_in: 1 value(s) differ"]
