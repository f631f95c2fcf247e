"""Format 3 (step x tile arrays store only their non-zero rows, decision 0120) and the 2.2 files before it.

The 2.2 fixtures are the bundled samples as they were before format 3: they open, and every table and
step x tile array reads as HDF5 itself decodes it; rewritten by the current writer (format 4, tests/profile/
test_format_v4.py) they read the same again.  The format-3 checks run on the 3.1 fixture of ``mlp_mk2.pvl``.
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
from popvision_lite.profile import h5safety, schema
from popvision_lite.profile.writer import STEP_TILE_ARRAYS, write_profile
from popvision_lite.testing.synthetic import make_synthetic

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "v2.2"
V22 = sorted(FIXTURES.glob("*.pvl"))
SMALL = [p for p in V22 if p.stat().st_size < 2_000_000]  # the rewrite test on the smaller ones
V3_FILE = FIXTURES.parent / "v3.1" / "mlp_mk2.pvl"  # a file format 3 wrote (the bundled sample)
STEP_BLOCK = 1024


def _raw_table(h: h5py.File, name: str) -> dict[str, np.ndarray]:
    """A stored table decoded by h5py alone (dictionary-encoded text columns looked up)."""
    out = {}
    for col in schema.TABLE_COLUMNS[name]:
        vals = h[f"tables/{name}/{col}"][()]
        if f"tables/{name}/{col}.categories" in h:
            cats = np.asarray(h[f"tables/{name}/{col}.categories"].asstr("utf-8")[()], dtype=object)
            vals = cats[vals]
        out[col] = vals
    return out


@pytest.mark.parametrize("path", V22, ids=lambda p: p.stem)
def test_v2_2_files_open_with_tables_and_arrays_as_stored(path):
    with h5py.File(path, "r", locking=False) as h, pvl.open(path) as p:
        assert (p.format_version, p.format_minor) == (2, 2)
        for name in schema.TABLE_COLUMNS:
            got = p.stored_table(name)
            if f"tables/{name}" not in h:  # a table of a later minor version (3.1: variable_intervals)
                assert name in schema.OPTIONAL_TABLES and name != "phases" and len(got) == 0, name
                continue
            for col, want in _raw_table(h, name).items():
                assert got[col].tolist() == want.tolist(), (name, col)
        n = p.num_steps
        # every step, a block of steps at a time: the 4-IPU fixture's three arrays are 770 MB decoded, and
        # holding them whole (twice) cost 4 of this test's 5 s of CPU for the same comparison
        for a in range(0, n, STEP_BLOCK):
            window = p.step_tiles.window(a, a + STEP_BLOCK)
            for name, arr in zip(STEP_TILE_ARRAYS, window, strict=True):
                assert np.array_equal(arr, h[f"arrays/{name}"][a:a + STEP_BLOCK]), (name, a)
        tiles = np.arange(0, p.target.num_tiles, 7)
        a, b = n // 3, n // 3 + 50
        np.testing.assert_array_equal(p.step_tiles.cycles(a, b, tiles=tiles),
                                      h["arrays/step_tile_cycles"][a:b][:, tiles])
        np.testing.assert_array_equal(p.memory.array(), h["arrays/memory"][()])


@pytest.mark.parametrize("path", SMALL, ids=lambda p: p.stem)
def test_v2_2_file_rewritten_by_the_current_writer_reads_the_same(path, tmp_path):
    with pvl.open(path) as p:
        n = p.num_steps
        cyc, b_in, b_out = p.step_tiles.window(0, n)
        data = schema.ProfileData(
            target=p.target, run=p.run, memory=p.memory.array(), steps=p.stored_table("steps")[list(schema.TABLE_COLUMNS["steps"])],
            step_tile_cycles=cyc, step_tile_bytes_in=b_in, step_tile_bytes_out=b_out,
            liveness_tile_bytes=p.liveness.tile_bytes(), extra=p.extra,
            **{t: p.stored_table(t)[list(schema.TABLE_COLUMNS[t])] for t in schema.TABLE_COLUMNS if t != "steps"})
        tables = {t: p.stored_table(t) for t in schema.TABLE_COLUMNS}
    out = write_profile(tmp_path / "v4.pvl", data)
    with pvl.open(out) as q:
        assert q.format_version == schema.FORMAT_VERSION == 4
        for t, df in tables.items():
            pd.testing.assert_frame_equal(q.stored_table(t), df, check_dtype=True)
        for name, arr in zip(STEP_TILE_ARRAYS, q.step_tiles.window(0, n), strict=True):
            np.testing.assert_array_equal(arr, {"step_tile_cycles": cyc, "step_tile_bytes_in": b_in,
                                                "step_tile_bytes_out": b_out}[name], err_msg=name)
    with h5py.File(out, "r") as h:  # bytes move in exchange and stream steps only: those rows alone are stored
        kept = h[f"arrays/{schema.rows_of('step_tile_bytes_in')}"][:, 0]
        np.testing.assert_array_equal(kept, np.flatnonzero(b_in.any(axis=1)))  # one IPU: one row per step
        assert h["arrays/step_tile_bytes_in"].shape == (len(kept), b_in.shape[1]) and len(kept) < n


@pytest.fixture(scope="module")
def sparse(tmp_path_factory):
    """A 2-IPU synthetic run (sync steps: no tile busy; compute steps: no bytes) and its file."""
    data = make_synthetic(num_ipus=2, tiles_per_ipu=64, num_steps=700, seed=5, noise=0.02, lazy=False)
    path = write_profile(tmp_path_factory.mktemp("v3") / "run.pvl", data)
    return data, path


def test_windows_over_rows_left_out(sparse):
    data, path = sparse
    cyc = np.asarray(data.step_tile_cycles)
    idle = np.flatnonzero(~cyc.any(axis=1))
    assert 0 < len(idle) < len(cyc)  # the run has steps with no busy tile, so rows to leave out
    with pvl.open(path) as p, h5py.File(path, "r", locking=False) as h:  # format 4: a row per IPU holding data
        assert h["arrays/step_tile_cycles"].shape[0] == np.count_nonzero(cyc.reshape(len(cyc), 2, 64).any(axis=2))
        tiles = np.array([0, 5, 63, 64, 100, 127])
        for a, b in ((0, 700), (idle[0], idle[0] + 1), (max(idle[0] - 3, 0), idle[0] + 40), (650, 700), (10, 10)):
            w = p.step_tiles.window(a, b, tiles=tiles)
            np.testing.assert_array_equal(w.cycles, cyc[a:b][:, tiles])
            np.testing.assert_array_equal(w.bytes_in, np.asarray(data.step_tile_bytes_in)[a:b][:, tiles])
            np.testing.assert_array_equal(p.step_tiles.cycles(a, b), cyc[a:b])
        np.testing.assert_array_equal(p.liveness.tile_bytes(), data.liveness_tile_bytes)  # every row stored
        # a range that holds no stored row at all reads as zeros
        run = idle[np.flatnonzero(np.diff(idle) == 1)[0]]
        assert not p.step_tiles.cycles(run, run + 2).any()


@pytest.mark.parametrize("tile_chunk,compression", [(16, "lz4-5"), (32, "blosclz-5"), (64, "lz4-5-noshuffle")])
def test_chunk_and_codec_options_read_the_same(sparse, tmp_path, tile_chunk, compression):
    data, ref = sparse
    out = write_profile(tmp_path / "o.pvl", data, tile_chunk=tile_chunk, compression=compression)
    with pvl.open(ref) as a, pvl.open(out) as b:
        assert b._f["arrays/step_tile_cycles"].chunks[1] == tile_chunk
        tiles = np.arange(3, 128, 5)
        for x, y in zip(a.step_tiles.window(100, 400, tiles=tiles), b.step_tiles.window(100, 400, tiles=tiles),
                        strict=True):
            np.testing.assert_array_equal(x, y)


def test_tile_chunk_must_divide_an_ipu(sparse, tmp_path):
    with pytest.raises(ValueError, match="must divide"):
        write_profile(tmp_path / "x.pvl", sparse[0], tile_chunk=48)


def _copy(src, tmp_path) -> Path:
    dst = tmp_path / "bad.pvl"
    shutil.copyfile(src, dst)
    return dst


def _replace_mask(f, mask):
    with h5py.File(f, "r+") as h:
        del h[f"arrays/{schema.STORED_ROWS}"]
        if mask is not None:
            h["arrays"].create_dataset(schema.STORED_ROWS, data=mask)


def _mark_one_more(m: np.ndarray, col: int) -> np.ndarray:
    m = m.copy()
    m[np.flatnonzero(~m[:, col])[0], col] = True
    return m


def _v3_steps() -> int:
    with pvl.open(V3_FILE) as p:
        assert p.format_version == 3
        return p.num_steps


@pytest.mark.parametrize("change,words", [
    (None, "missing array 'step_tile_stored'"),
    (lambda m: m[:-1], "expected ({n}, 3)"),
    (lambda m: m.astype(np.int8), "expected bool"),
    # one more step marked than the array stores
    (lambda m: _mark_one_more(m, 1), "one row per step marked in 'step_tile_stored'"),
])
def test_bad_stored_rows_mask_is_refused(tmp_path, change, words):
    f = _copy(V3_FILE, tmp_path)
    with h5py.File(f, "r") as h:
        mask = h[f"arrays/{schema.STORED_ROWS}"][()]
    _replace_mask(f, None if change is None else change(mask))
    with pytest.raises(ProfileError) as e, pvl.open(f) as p:  # at open, or at the first read of the arrays
        p.step_tiles.cycles(0, 10)
    assert words.format(n=_v3_steps()) in str(e.value) and str(f) in str(e.value)


def test_more_rows_than_steps_is_refused_at_open(tmp_path):
    f = _copy(V3_FILE, tmp_path)
    n = _v3_steps()
    with h5py.File(f, "r+") as h:
        nt = h["arrays/step_tile_bytes_out"].shape[1]
        del h["arrays/step_tile_bytes_out"]
        h["arrays"].create_dataset("step_tile_bytes_out", data=np.zeros((n + 1, nt), np.uint32))
    with pytest.raises(ProfileError, match=rf"has shape \({n + 1}, {nt}\), expected \({n}, {nt}\)"):
        pvl.open(f)


def test_batched_chunk_check_names_the_bad_chunk(sparse, tmp_path):
    """A read of many chunks is checked at once; a damaged header among them is still found and named."""
    f = _copy(sparse[1], tmp_path)
    with h5py.File(f, "r") as h:
        ds = h["arrays/step_tile_cycles"]
        infos = []
        ds.id.chunk_iter(infos.append)
        assert len(infos) >= 2 * h5safety._BATCH_MIN
        bad = infos[len(infos) // 2]
    with open(f, "r+b") as fh:  # claim one byte more decompressed than the chunk holds
        fh.seek(bad.byte_offset + 4)
        nbytes = int.from_bytes(fh.read(4), "little")
        fh.seek(bad.byte_offset + 4)
        fh.write((nbytes + 1).to_bytes(4, "little"))
    with pvl.open(f) as p, pytest.raises(ProfileError, match="decompressed bytes") as e:
        p.step_tiles.cycles(0, 700)
    assert f"chunk at {tuple(bad.chunk_offset)}" in str(e.value)


def test_step_block_min_max_are_reduceat():
    """writer._step_blocks (whole step blocks reduced as a reshaped view) gives reduceat's step-block minima
    and maxima, dtype and shape, with and without a partial last block."""
    from popvision_lite.profile import writer as W

    rng = np.random.default_rng(5)
    for rows in (0, 1, 5, 16, 17, 1030):
        c = rng.integers(0, 2**32, (rows, 7), dtype=np.int64).astype(np.uint32)
        for sb in (1, 3, 16, 128):
            for f in (np.minimum, np.maximum):
                want = f.reduceat(c, np.arange(0, rows, sb), axis=0)
                got = W._step_blocks(f, c, sb)
                assert got.dtype == want.dtype and np.array_equal(got, want), (rows, sb)
