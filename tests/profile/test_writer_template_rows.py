"""The profile writer's path for arrays that know their rows' data and tile-block figures without forming the rows
(the emulator's StepTileArray: rows of step templates): the file is the one the dense path writes, dataset for
dataset."""

from __future__ import annotations

import h5py
import numpy as np

from popvision_lite.emulator.compile.compiled import StepTemplate
from popvision_lite.emulator.models.config import make_config
from popvision_lite.emulator.models.emulated import run_model
from popvision_lite.emulator.profile_builder import StepTileArray
from popvision_lite.profile import writer as W
from tests.support.devices import ID as SMALL  # the shipped Mk2 cut to 92 tiles (decision 0395)


def _datasets(path) -> dict:
    out = {}
    with h5py.File(path) as f:
        f.visititems(lambda n, o: out.__setitem__(n, o[()]) if isinstance(o, h5py.Dataset) else None)
    return out


def test_template_rows_write_the_dense_paths_file(tmp_path, monkeypatch):
    # on the tests' device: the two paths write the same file whatever the tile count (the templates' tile
    # blocks and the dense rows have the device's tiles as their columns either way)
    run = run_model(make_config("bert-tiny", ipus=4, replicas=2, pipeline_stages=2, grad_accum=4, seq=32), SMALL,
                    timing_only=True)
    data = run.profile_data
    assert isinstance(data.step_tile_cycles, StepTileArray)
    seen = []
    orig = W._StepTileWriter.__init__

    def spy(self, *a, **k):
        orig(self, *a, **k)
        seen.append(self.lazy)

    monkeypatch.setattr(W._StepTileWriter, "__init__", spy)
    W.write_profile(tmp_path / "lazy.pvl", data)
    monkeypatch.setattr(W._StepTileWriter, "__init__", lambda self, *a, **k: (orig(self, *a, **k),
                                                                               setattr(self, "lazy", False))[0])
    W.write_profile(tmp_path / "dense.pvl", data)
    assert seen == [True]
    lazy, dense = _datasets(tmp_path / "lazy.pvl"), _datasets(tmp_path / "dense.pvl")
    assert lazy.keys() == dense.keys() and any(k.startswith("summaries/") for k in lazy)
    for k in lazy:
        np.testing.assert_array_equal(lazy[k], dense[k], err_msg=k)


def test_template_block_figures_of_partly_listed_blocks():
    """A block some of whose tiles a template leaves out has minimum 0; sums and maxima count the listed tiles."""
    z = np.zeros(0, np.uint32)
    tpl = [StepTemplate(kind=0, prog_id=0, op_id=0, ipu=0, duration=9, tiles=np.array([1, 2, 3, 5]),
                        cycles=np.array([4, 9, 6, 7], np.uint32), bytes_in=z, bytes_out=z),
           StepTemplate(kind=0, prog_id=0, op_id=0, ipu=0, duration=3, tiles=None,
                        cycles=np.array([3, 1, 2, 2, 5, 8, 1, 1], np.uint32), bytes_in=z, bytes_out=z)]
    a = StepTileArray(tpl, np.array([0, 1, 1, 0]), "cycles", 8)
    mn, sm, mx = a.tile_block_rows(0, 4, np.array([0, 4]))
    dense = np.asarray(a)
    for r in range(4):
        for b, (lo, hi) in enumerate(((0, 4), (4, 8))):
            assert mn[r, b] == dense[r, lo:hi].min() and mx[r, b] == dense[r, lo:hi].max()
            assert sm[r, b] == dense[r, lo:hi].sum()
    steps, ipus, rows = StepTileArray(tpl, np.array([0, 1]), "bytes_in", 8).ipu_rows(0, 2, 4)
    assert len(steps) == len(ipus) == 0 and rows.shape == (0, 4)


def test_template_blocks_of_templates_sharing_their_values_on_moved_tiles():
    """Templates holding the same value array on tiles moved by d (a stage graph on each IPU of a pipeline) get the
    figures of the dense rows, whether their blocks line up with the first one's (copied) or not (summed again)."""
    z = np.zeros(0, np.uint32)
    vals = np.array([5, 0, 7, 2, 9], np.uint32)

    def tpl(tiles):
        return StepTemplate(kind=0, prog_id=0, op_id=0, ipu=0, duration=9, tiles=np.asarray(tiles), cycles=vals,
                            bytes_in=z, bytes_out=z)
    base = [1, 2, 3, 4, 6]
    # IPU blocks of 4 tiles restart every 8 tiles: moved by 8 and 16 the blocks line up; by 3 and 1 they do not
    tpls = [tpl(np.array(base) + d) for d in (0, 8, 16, 3, 1)] + [tpl([0, 2, 3, 4, 5])]
    edges = np.array([0, 4, 8, 12, 16, 20])
    a = StepTileArray(tpls, np.arange(len(tpls)), "cycles", 24)
    mn, sm, mx = a.tile_block_rows(0, len(tpls), edges)
    dense = np.asarray(a)
    ends = np.append(edges[1:], 24)
    for r in range(len(tpls)):
        for b, (lo, hi) in enumerate(zip(edges, ends, strict=True)):
            assert (mn[r, b], sm[r, b], mx[r, b]) == (dense[r, lo:hi].min(), dense[r, lo:hi].sum(),
                                                       dense[r, lo:hi].max()), (r, b)
    assert mx[1, 2] == 7 and mn[1, 2] == 0  # (IPU 1's first block: tiles 9-11 listed, tile 8 not)


def test_ipu_rows_are_the_dense_rows_split_by_ipu():
    """StepTileArray.ipu_rows (format 4's rows of one IPU's tiles, formed from the templates) against the dense
    rows split per IPU: templates on every tile, a run on one IPU (two sharing their values on two IPUs), a run
    across IPUs, scattered tiles, zeros on some IPUs, and none."""
    z = np.zeros(0, np.uint32)
    shared = np.array([5, 0, 7], np.uint32)

    def tpl(tiles, cycles):
        return StepTemplate(kind=0, prog_id=0, op_id=0, ipu=0, duration=9, tiles=tiles, cycles=cycles, bytes_in=z,
                            bytes_out=z)

    tpls = [tpl(None, np.arange(12, dtype=np.uint32) % 3),           # every tile; IPU 1 (tiles 4-7) not all zero
            tpl(np.array([1, 2, 3]), shared), tpl(np.array([9, 10, 11]), shared),   # one run, shared values
            tpl(np.array([2, 3, 4, 5]), np.array([1, 2, 3, 4], np.uint32)),         # a run across IPUs 0 and 1
            tpl(np.array([0, 11]), np.array([6, 0], np.uint32)),      # scattered; IPU 2's value zero
            tpl(np.array([4, 5]), np.zeros(2, np.uint32)),            # all zero: no row
            tpl(np.zeros(0, np.int64), z)]                            # no tile
    seq = np.array([0, 1, 2, 3, 4, 5, 6, 2, 1, 1, 3, 0, 4])
    a = StepTileArray(tpls, seq, "cycles", 12)
    dense = np.asarray(a).reshape(len(seq), 3, 4)
    for i, j in ((0, len(seq)), (2, 9), (5, 7), (6, 7)):
        steps, ipus, rows = a.ipu_rows(i, j, 4)
        s, u = np.nonzero(dense[i:j].any(axis=2))
        np.testing.assert_array_equal(steps, s + i)
        np.testing.assert_array_equal(ipus, u)
        np.testing.assert_array_equal(rows, dense[i:j][s, u])
        assert rows.dtype == np.uint32 and steps.dtype == ipus.dtype == np.int64
