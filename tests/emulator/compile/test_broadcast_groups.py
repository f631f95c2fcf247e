"""The compact broadcast compile sorts its block pieces once (copy_broadcasts.piece_groups: by block, source tile
and source position) for both the receivers' sums and the exchange-code counts: the same receivers and counts as
each grouping the pieces on its own (receivers' (block, source tile) sort, code_counts' own sort and key search);
and the bytes each tile sends are summed per (block, source tile) group (send_bytes), not per piece."""

import dataclasses

import numpy as np
import pytest

import popvision_lite.emulator.compile.copy_broadcasts as CB
from popvision_lite.emulator import Target
from popvision_lite.emulator.compile import CompileCaches
from popvision_lite.emulator.compile.memory import tile_addr
from tests.emulator.compile.test_copy_broadcasts import _graph


def _plans(seed: int):
    target = Target.from_device("ipu-mk2", num_ipus=1)
    g, prog = _graph(target, seed)
    c = type("C", (), {"caches": CompileCaches()})()
    for p in prog.programs:
        bp = CB.broadcast_plan(p.src, p.dst, target.num_tiles)
        yield p.name, bp, tile_addr(c, p.src.tensor.mapping, bp.se, bp.sk), target.num_tiles


def _same(a, b, what):
    if isinstance(a, tuple):
        assert len(a) == len(b), what
        for x, y in zip(a, b, strict=True):
            _same(x, y, what)
        return
    assert a.dtype == b.dtype and np.array_equal(a, b), what


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_one_sort_gives_the_receivers_and_code_counts_of_two(seed):
    n = quiet = 0
    for name, bp, addr, T in _plans(seed):
        groups = CB.piece_groups(bp, addr, T)
        assert groups is not None
        alone, shared = CB.receivers(bp, T, True), CB.receivers(bp, T, True, groups)
        for f in ("local", "partner_local", "vertices", "tile_vertex"):
            _same(getattr(alone, f), getattr(shared, f), (name, f))
        _same(CB.code_counts(bp, alone, addr, T), CB.code_counts(bp, shared, addr, T, None, groups), name)
        # the bytes sent, per group, are the per-piece sum of the pieces some vertex on another tile receives
        recv = CB.piece_receivers(bp, alone)
        want = np.bincount(bp.st, weights=np.where(recv > 0, bp.ln, 0) * 2, minlength=T).astype(np.int64)
        _same(CB.send_bytes(bp, shared, groups, T, 2), want, name)
        quiet += int((recv == 0).sum())
        # the groups: each (block, source tile) once, ascending, and each piece's group holds its key
        assert np.all(groups.keys[1:] > groups.keys[:-1])
        np.testing.assert_array_equal(groups.keys[groups.gid], (bp.blk * T + bp.st)[groups.order])
        n += int((np.bincount(groups.gid) > 1).sum())
    assert n > 0  # (groups of several pieces)
    assert quiet > 0  # (pieces no other tile receives: the one vertex of their block is on their tile)


def test_a_source_tile_past_the_tiles_is_grouped_apart():
    """Where a piece's source tile is T or more (its key would fall among the next block's), no shared groups:
    the receivers and counts group the pieces each on their own, as before."""
    name, bp, addr, T = next(_plans(0))
    wide = dataclasses.replace(bp, st=np.where(np.arange(len(bp.st)) % 3 == 0, bp.st + T, bp.st))
    assert CB.piece_groups(wide, addr, T) is None
    assert CB.piece_groups(bp, addr, T) is not None
