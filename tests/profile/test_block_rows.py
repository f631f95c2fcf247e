"""A pipelined run's liveness array held as blocks (emulator/profile_builder.BlockRows: each IPU's rows on its own
tiles, never the dense rows of every tile of the replica): it reads as the dense array it stands for, slice by
slice, and the writer streams it into the file the dense array gives, dataset for dataset."""

from __future__ import annotations

import copy

import h5py
import numpy as np
import pytest

from popvision_lite.emulator.models.config import make_config
from popvision_lite.emulator.profile_builder import BlockRows
from popvision_lite.profile import writer as W
from tests.support.devices import ID as SMALL_DEVICE  # the shipped Mk2 cut to 92 tiles (decision 0395)
from tests.support.emulations import shared_run


def _blocks_and_dense(rng, n_rows=150, width=12):
    dense = np.zeros((n_rows, width), np.uint32)
    blocks = []
    for r, a, n, w in ((0, 0, 70, 4), (70, 4, 3, 4), (73, 8, 77, 4)):  # rows 0-69 IPU 0, 70-72 IPU 1, 73-149 IPU 2
        blk = rng.integers(0, 2**32, (n, w), dtype=np.uint64).astype(np.uint32)
        dense[r:r + n, a:a + w] = blk
        blocks.append((r, a, blk))
    return BlockRows(dense.shape, blocks), dense


def test_block_rows_read_as_the_dense_array():
    b, dense = _blocks_and_dense(np.random.default_rng(0))
    assert b.shape == dense.shape and b.dtype == np.uint32 and len(b) == len(dense)
    np.testing.assert_array_equal(np.asarray(b), dense)
    for key in (slice(0, 64), slice(64, 128), slice(60, 80), slice(140, 400), slice(None), 0, 71, -1,
                (slice(65, 75), slice(2, 9)), (72, 5), [3, 90]):
        np.testing.assert_array_equal(b[key], dense[key], err_msg=str(key))
    with pytest.raises(IndexError):
        b[150]


def _datasets(path) -> dict:
    out = {}
    with h5py.File(path) as f:
        f.visititems(lambda n, o: out.__setitem__(n, o[()]) if isinstance(o, h5py.Dataset) else None)
    return out


def test_pipelined_liveness_blocks_write_the_dense_arrays_file(tmp_path):
    # on the tests' device: how the writer streams the blocks does not depend on the tile count (each IPU's
    # rows on its own 92 tiles are blocks as its 1,472 are)
    # the session's run of this config (tests/analysis/test_binding_headline.py reads it too), read-only: the dense
    # array is set on a copy
    cfg = make_config("bert-tiny", ipus=2, pipeline_stages=2, grad_accum=4, seq=32)
    data = copy.copy(shared_run(cfg, SMALL_DEVICE, timing_only=True).profile_data)
    assert isinstance(data.liveness_tile_bytes, BlockRows)
    W.write_profile(tmp_path / "blocks.pvl", data)
    data.liveness_tile_bytes = np.asarray(data.liveness_tile_bytes)
    W.write_profile(tmp_path / "dense.pvl", data)
    a, b = _datasets(tmp_path / "blocks.pvl"), _datasets(tmp_path / "dense.pvl")
    assert a.keys() == b.keys() and a["arrays/liveness_tile_bytes"].any()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)
