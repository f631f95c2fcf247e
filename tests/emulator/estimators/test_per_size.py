"""Elementwise pieces costed once per size give the cycles costing every piece gives (issue 49: the graph's
compute sets compiled cheaper with every cycle the same)."""

import numpy as np

from popvision_lite.emulator.codelets import popops as CO
from popvision_lite.emulator.codelets.base import Elementwise
from popvision_lite.emulator.estimators import elementwise as EW


def _models():
    seen = {}
    for mod in (CO,):
        for v in vars(mod).values():
            cands = v.values() if isinstance(v, dict) else [v]
            for c in cands:
                if isinstance(c, Elementwise) and c.model is not None:
                    seen[repr(c.model)] = c.model
    return list(seen.values())


def _direct(model, n, itemsize, src, on_tile, threads):
    """piece_cycles as it was: every piece costed."""
    c1 = EW.model_worker_cycles(model, n, itemsize, src)
    frag = on_tile > threads
    if not frag.any():
        return c1
    reg, pro = EW.model_region_cycles(model, n, itemsize, src)
    return np.where(frag, reg + -(-pro * threads // np.maximum(on_tile, 1)), c1)


def test_piece_cycles_per_size_are_every_pieces_cycles():
    rng = np.random.default_rng(49)
    models = _models()
    assert len(models) >= 10
    cases = [rng.integers(1, 9, 5000), rng.integers(1, 3000, 5000), rng.integers(100, 104, 300),
             np.full(2000, 17), rng.integers(1, 5, 40)]
    for model in models:
        for itemsize, src in ((2, 2), (4, 4), (2, 4), (4, 2)):
            for n in cases:
                n = n.astype(np.int64)
                on_tile = rng.integers(1, 13, len(n))
                for ot in (on_tile, np.minimum(on_tile, 6)):
                    want = _direct(model, n, itemsize, src, ot, 6)
                    got = EW.piece_cycles(model, n, itemsize, src, ot, 6)
                    assert got.dtype == want.dtype and np.array_equal(got, want), model


def test_per_size_reads_a_table_only_where_the_span_is_small():
    calls = []

    def fn(x):
        calls.append(len(x))
        return x * 3 + 1

    n = np.repeat(np.arange(5, 9, dtype=np.int64), 100)
    assert np.array_equal(EW.per_size(fn, n), n * 3 + 1) and calls == [4]
    wide = np.arange(1000, dtype=np.int64)
    assert np.array_equal(EW.per_size(fn, wide), wide * 3 + 1) and calls[-1] == 1000


def test_reduce_add_tile_vertices_by_tile_in_order_or_not():
    """The ReduceAdd estimate per tile, its tiles in order or not, against the estimate of every tile's total."""
    from popvision_lite.emulator.estimators import poplin as PL
    rng = np.random.default_rng(7)
    for case in range(40):
        n = int(rng.integers(1, 400))
        tiles = rng.integers(0, 50, n)
        if case % 2:
            tiles = np.sort(tiles)
        sizes = rng.integers(1, 5, n) * (8 if case % 3 else 1)
        got = PL.reduce_add_tile_vertex_cycles(tiles, sizes.astype(np.int32), 4, 2, 4, 6)
        want = np.zeros(n, np.int64)
        for t in np.unique(tiles):
            sel = np.nonzero(tiles == t)[0]
            want[sel[0]] = -(-PL.reduce_add_cycles(int(sizes[sel].sum()), 4, 2, 4, 6) // 6)
        assert got.dtype == np.int64 and np.array_equal(got, want)


def test_row_vertex_cycles_per_split_are_every_vertexs():
    """A row vertex's cycles read from its split's entry are those costing each vertex's split gives."""
    from popvision_lite.emulator.estimators import popops as PO
    rng = np.random.default_rng(3)
    parts = [("r", "add"), ("b", "mul"), ("u", "exp")]
    for L, itemsize in ((768, 2), (1024, 4), (7, 2)):
        rows = rng.integers(1, 40, 300)
        split = rng.choice([1, 2, 3, 6], 300)
        want = np.array([PO.row_prologue_cycles(parts, itemsize) + int(r) * (
            int(PO.row_pass_cycles(parts, -(-L // int(k)), itemsize))
            + (int(PO.strided_reduce_cycles(int(k), 1)) if k > 1 else 0)) for r, k in zip(rows, split, strict=True)])
        got = PO.row_vertex_cycles(parts, L, itemsize, rows, split)
        assert got.dtype == np.int64 and np.array_equal(got, want)
    assert PO.row_vertex_cycles(parts, 8, 2, np.zeros(0, np.int64), np.zeros(0, np.int64)).shape == (0,)
