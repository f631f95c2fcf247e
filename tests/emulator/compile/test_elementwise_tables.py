"""An elementwise group's vertex cycles from tables by size and by tile (codelets.base._table_cycles, issue 49's
fourteenth pass) are the cycles costing every piece gives (estimators.elementwise.piece_cycles with each piece's
tile count), held as VertexGroup.cycles held them (int64, then int32 where every value fits), and the compute
set's tile cycles read the group's count of its vertices per tile to the same result."""

from __future__ import annotations

import numpy as np
import pytest

from popvision_lite.emulator import cost_model as cm
from popvision_lite.emulator.codelets import base as B
from popvision_lite.emulator.codelets import popops as CO
from popvision_lite.emulator.estimators import elementwise as EW
from popvision_lite.emulator.graph import Graph, Regions, VertexGroup
from popvision_lite.emulator.target import Target


def _codelets():
    seen = {}
    for v in vars(CO).values():
        for c in (v.values() if isinstance(v, dict) else [v]):
            if isinstance(c, B.Elementwise) and c.model is not None:
                seen.setdefault(repr(c.model), c)
    return list(seen.values())


def _reference(codelet, sizes, tiles, isz, src, threads):
    """VertexGroup.cycles as it was: every piece costed with its tile's piece count, then int64, then int32 where
    every value lies in 0..2**31 - 1."""
    on_tile = np.bincount(tiles)[tiles]
    c = np.asarray(EW.piece_cycles(codelet.model, np.asarray(sizes, np.int64), isz, src, on_tile, threads), np.int64)
    if len(c) and 0 <= int(c.min()) and int(c.max()) <= np.iinfo(np.int32).max:
        c = c.astype(np.int32)
    return c


def _tiles(rng, kind: str, n: int, T: int, threads: int) -> np.ndarray:
    """Tiles of n pieces: none over ``threads`` a tile, every used tile over it, or some of each, in no order."""
    if kind == "none":
        t = np.repeat(rng.permutation(T)[: -(-n // threads)], threads)[:n]
    elif kind == "all":
        t = np.repeat(rng.permutation(T)[: max(n // (threads + 3), 1)], threads + 3)
        t = np.resize(t, n)
    else:
        t = np.concatenate([np.repeat(rng.permutation(T)[:5], threads + 4), rng.integers(0, T, n)])[:n]
    return rng.permutation(t).astype(np.int32)


@pytest.mark.parametrize("kind", ["none", "all", "some"])
def test_table_cycles_are_every_pieces_cycles(kind):
    rng = np.random.default_rng({"none": 1, "all": 2, "some": 3}[kind])
    target = Target.from_device("ipu-mk2", num_ipus=1)
    T, threads = target.num_tiles, int(target.threads_per_tile)
    g = Graph(target)
    codelets = _codelets()
    assert len(codelets) >= 10
    tables = 0
    for i, codelet in enumerate(codelets):
        for dtype in ("float16", "float32"):
            for n, sizes in ((4000, rng.integers(1, 300, 4000)), (3000, np.full(3000, 17)),
                             (800, rng.integers(1, 5000, 800)), (40, rng.integers(1, 3, 40))):
                t = g.add_variable(f"t{i}_{dtype}_{n}_{kind}", (int(np.sum(sizes)) + 8,), dtype)
                starts = np.cumsum(sizes) - sizes
                f = Regions(t, starts, 17 if n == 3000 else sizes)  # (one size: a broadcast int32 array)
                fields = {name: f for name in codelet.inputs} | {"out": f}
                grp = VertexGroup(0, None, codelet, _tiles(rng, kind, n, T, threads), fields, {})
                want = _reference(codelet, f.sizes, grp.tiles, t.itemsize, t.itemsize, threads)
                got = grp.cycles(target)
                assert got.dtype == want.dtype and np.array_equal(got, want), (codelet.name, n)
                assert np.array_equal(grp.tile_counts, np.bincount(grp.tiles, minlength=T))
                tables += B._table_cycles(codelet.model, f.sizes, grp.tiles, grp.tile_counts, t.itemsize,
                                          t.itemsize, threads) is not None
    assert tables >= 2 * len(codelets)  # (the small spans: the tables taken, not only the per-piece path)


@pytest.mark.parametrize("seed", range(4))
def test_compute_tile_cycles_with_the_count_known(seed):
    """The vertices per tile handed in (``known``) give what counting them gives, with and without supervisor
    vertices (whose removal makes the count of the others differ from the one handed in)."""
    rng = np.random.default_rng(200 + seed)
    T, threads, n = 11, 6, int(rng.integers(50, 400))
    tiles = rng.integers(0, T, n).astype(np.int32)
    vcycles = rng.integers(1, 500, n).astype(np.int32)
    supervisor = rng.random(n) < (0.3 if seed % 2 else 0)
    regions = np.ones(n, bool) if seed < 2 else rng.random(n) < 0.5
    known = np.bincount(tiles, minlength=T)
    want = cm.compute_tile_cycles(tiles, vcycles, T, threads, 11, supervisor=supervisor, regions=regions)
    got = cm.compute_tile_cycles(tiles, vcycles, T, threads, 11, supervisor=supervisor, regions=regions,
                                 known=known)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


@pytest.mark.parametrize("values", [[-3, 5, 7], [3, 5, 7]])
def test_other_codelets_int32_cycles_are_converted_as_before(values):
    """Only Elementwise.cycles' own int32 arrays are held as they are: another codelet's int32 cycles go through
    the int64 conversion as before (int64 where one is negative, else an int32 copy, never the codelet's array)."""
    class Fixed:
        name = "Fixed"

        def __init__(self, out):
            self.out = out

        def cycles(self, group, target):
            return self.out

    target = Target.from_device("ipu-mk2", num_ipus=1)
    kept = np.asarray(values, np.int32)
    got = VertexGroup(0, None, Fixed(kept), np.zeros(3, np.int32), {}, {}).cycles(target)
    assert np.array_equal(got, values)
    assert got.dtype == (np.int64 if min(values) < 0 else np.int32)
    assert not np.shares_memory(got, kept)


def test_a_subclass_that_adds_to_the_cycles_gets_int64():
    """A subclass overriding cycles (popops_rows' BatchNormGradStatsRows adds to them) gets int64 from
    Elementwise.cycles, so its sums cannot wrap at 2**31."""
    target = Target.from_device("ipu-mk2", num_ipus=1)
    g = Graph(target)
    t = g.add_variable("x", (6000,), "float32")
    f = Regions(t, np.arange(0, 6000, 6), 6)

    class Plus(B.Elementwise):
        def cycles(self, group, target):
            return super().cycles(group, target) + 2**31

    base = CO.ADD
    plus = Plus("Plus", np.add, model=base.model)
    tiles = np.repeat(np.arange(200, dtype=np.int32), 5)
    fields = {"a": f, "b": f, "out": f}
    plain = VertexGroup(0, None, base, tiles, fields, {}).cycles(target)
    assert plain.dtype == np.int32  # (the table path, narrowed)
    got = VertexGroup(0, None, plus, tiles, fields, {}).cycles(target)
    assert got.dtype == np.int64 and np.array_equal(got, plain.astype(np.int64) + 2**31)
