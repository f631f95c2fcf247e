"""The graph builder's faster index helpers give exactly what the numpy expressions they replace give (issue 49:
graph building cheaper with every cycle and byte the same)."""

import weakref

import numpy as np
import pytest

from popvision_lite.emulator import mapping as M
from popvision_lite.emulator.ops import common as C
from popvision_lite.emulator.ops import matmul as MM
from popvision_lite.errors import EmulatorError


def _indexes(rng):
    """1-D int64 indexes: long runs with few breaks, many breaks, and lengths around the scan's chunk."""
    for n in (0, 1, 2, 5, C._CHUNK - 1, C._CHUNK, C._CHUNK + 1, C._CHUNK + 2, 3 * C._CHUNK + 7):
        yield np.arange(n, dtype=np.int64)
        yield rng.integers(0, 3, n).cumsum().astype(np.int64)
    yield np.tile(np.arange(5000, dtype=np.int64), 40)  # the position index of an embedding: 40 runs
    yield rng.integers(-50, 50, 200_000).astype(np.int64)


def test_run_breaks_is_where_diff_is_not_one():
    rng = np.random.default_rng(0)
    for idx in _indexes(rng):
        want = np.flatnonzero(np.diff(idx) != 1) + 1 if len(idx) > 1 else np.zeros(0, np.int64)
        got = C.run_breaks(idx) if len(idx) > 1 else np.zeros(0, np.int64)
        assert np.array_equal(got, want)


@pytest.mark.parametrize("shape", [(3, 4), (7, 1, 9), (2, 300, 300), (40, 2000), (5, 64, 1024), (3, 2, 5, 4)])
def test_unit_steps_counts_consecutive_neighbours(shape):
    rng = np.random.default_rng(1)
    n = int(np.prod(shape))
    heads = np.arange(n, dtype=np.int64).reshape(shape)
    for idx in (heads, np.swapaxes(heads, -1, -2), rng.integers(0, 3, n).cumsum().reshape(shape)):
        for axis in (-1, -2):
            assert C.unit_steps(idx, axis) == np.count_nonzero(np.diff(idx, axis=axis) == 1)


def test_unique_rows_is_numpys_unique_by_rows():
    rng = np.random.default_rng(2)
    cases = [rng.integers(0, hi, (n, d)).astype(dt) for n, d, hi, dt in
             [(1, 1, 3, np.int64), (50, 2, 3, np.int64), (1400, 3, 200, np.int64), (900, 2, 5000, np.int32),
              (10, 4, 2, np.int64)]]
    cases.append(np.array([[-1, 2], [3, -4], [-1, 2]]))  # negative values: numpy's own path
    for a in cases:
        keys, inv = np.unique(a, axis=0, return_inverse=True)
        got_keys, got_inv = M.unique_rows(a)
        assert got_keys.dtype == keys.dtype
        assert np.array_equal(got_keys, keys) and np.array_equal(got_inv, inv.ravel())


def _worker_split_by_repeat(m, workers, grain):
    """worker_split as it was written before (one np.repeat per array)."""
    length = m.stop - m.start
    grains = -(-length // grain)
    pieces = np.minimum(grains, workers)
    per = -(-grains // np.maximum(pieces, 1)) * grain
    total = int(pieces.sum())
    first = np.cumsum(pieces) - pieces
    k = np.arange(total) - np.repeat(first, pieces)
    per_p = np.repeat(per, pieces)
    starts = np.repeat(m.start, pieces) + k * per_p
    stops = np.minimum(starts + per_p, np.repeat(m.stop, pieces))
    tiles = np.repeat(m.tile, pieces)
    keep = stops > starts
    return tiles[keep], starts[keep], (stops - starts)[keep]


class _Mapped:
    def __init__(self, mapping):
        self.mapping, self.name = mapping, "t"


def test_worker_split_pieces_are_unchanged():
    rng = np.random.default_rng(3)
    for _ in range(60):
        n = int(rng.integers(1, 400))
        lengths = rng.integers(1, int(rng.choice([3, 10, 50, 1000])), n)
        if rng.random() < 0.5:  # intervals of one length (worker_split cuts one and places it at every start)
            lengths[:] = lengths[0]
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]) + rng.integers(0, 3, n).cumsum()
        m = M.Mapping(rng.integers(0, 1472, n), starts, starts + lengths)
        for workers in (1, 2, 6):
            for grain in (1, 2, 4, 7, 64):
                got = M.worker_split(_Mapped(m), workers=workers, grain=grain)
                want = _worker_split_by_repeat(m, workers, grain)
                for g, w in zip(got, want, strict=True):
                    assert g.dtype == w.dtype and np.array_equal(g, w)


def test_k_partial_orders_are_lexsorts():
    rng = np.random.default_rng(4)
    for n, hi in [(0, 10), (1, 10), (5000, 10), (20000, 1472), (3000, 100_000)]:
        tile = rng.integers(0, hi, n)
        key = rng.permutation(3 * n)[:n]
        assert np.array_equal(MM._stable_by(tile), np.lexsort((np.arange(n), tile)))
        assert np.array_equal(MM._by_tile_then(tile, key), np.lexsort((key, tile)))
        dup = rng.integers(0, 7, n)  # equal keys too: both orders are stable
        assert np.array_equal(MM._by_tile_then(tile, dup), np.lexsort((dup, tile)))


def test_a_mapping_remembers_only_a_check_that_passed():
    m = M.Mapping([0, 1], [0, 4], [4, 8])
    m.check("t", 8, 2)
    m.check("t", 8, 2)  # remembered: the same answer
    with pytest.raises(EmulatorError, match="not mapped"):
        m.check("t", 9, 2)  # another size is checked afresh, and a failure is never remembered
    with pytest.raises(EmulatorError, match="not mapped"):
        m.check("t", 9, 2)
    joined = M.Mapping([0, 0], [0, 4], [4, 8])
    assert M._merge(joined) is M._merge(joined) and len(M._merge(joined)) == 1
    assert M._merge(m) is m


def _by_windows_sorted(shape, bs, origins, tiles):
    """by_windows as it was written before: every window's runs, class by class, then the Mapping's sort."""
    starts, stops, tl = [], [], []
    for key in np.unique(bs, axis=0):
        sel = np.nonzero(np.all(bs == key, axis=1))[0]
        s, e = M.window_intervals(shape, key, origins[sel])
        starts.append(s.ravel())
        stops.append(e.ravel())
        tl.append(np.repeat(tiles[sel], s.shape[1]))
    return M._merge(M.Mapping(np.concatenate(tl), np.concatenate(starts), np.concatenate(stops)))


def test_by_windows_of_uneven_splits_is_the_sorted_mapping():
    """Windows of an uneven block split (a matmul's outputs, 2-D, and its partials, a stack of them), in any
    order and on any tiles: the runs put in order without a sort give the mapping sorting them gives."""
    rng = np.random.default_rng(6)
    in_order = 0
    for case in range(200):
        G, Mm, N = int(rng.integers(1, 4)), int(rng.integers(1, 50)), int(rng.integers(1, 50))
        msz, moff = MM._parts(Mm, int(rng.integers(1, Mm + 1)))
        nsz, noff = MM._parts(N, int(rng.integers(1, N + 1)))
        gg, ii, jj = (x.ravel() for x in np.meshgrid(np.arange(G), np.arange(len(msz)), np.arange(len(nsz)),
                                                     indexing="ij"))
        p = rng.permutation(len(gg)) if case % 2 else np.arange(len(gg))
        gg, ii, jj = gg[p], ii[p], jj[p]
        tiles = rng.integers(0, 1472, len(gg)) if case % 3 else np.full(len(gg), 5)
        if case % 4 < 2:
            shape, bs, org = (G, Mm, N), np.stack([np.ones_like(gg), msz[ii], nsz[jj]], 1), np.stack(
                [gg, moff[ii], noff[jj]], 1)
        else:
            sel = gg == 0
            shape, bs, org, tiles = (Mm, N), np.stack([msz[ii], nsz[jj]], 1)[sel], np.stack(
                [moff[ii], noff[jj]], 1)[sel], tiles[sel]
        got, want = M.by_windows(shape, bs, org, tiles), _by_windows_sorted(shape, bs, org, tiles)
        for f in ("tile", "start", "stop"):
            assert np.array_equal(getattr(got, f), getattr(want, f))
        in_order += M._row_runs_in_order(shape, bs, org, tiles) is not None
    assert in_order > 150  # the path without a sort is the one these splits take (full-width blocks are not)


def test_a_read_only_window_index_is_scanned_once_while_it_lives():
    """gather_windows' scan of a window index (does it read padding, its runs) is kept for a read-only index (a
    convolution's forward and weight update gather the same one), never for one that may change."""
    from popvision_lite.emulator.ops import pooling as PO

    idx, _ = PO.conv_windows(2, 8, 8, 3, 1, 1)
    want = PO._window_runs(idx)
    assert PO._index_runs(idx)[1] is not PO._index_runs(idx)[1]  # writeable: scanned every time
    idx.setflags(write=False)
    first = PO._index_runs(idx)
    assert first[0] and PO._index_runs(idx)[1] is first[1]
    assert all(np.array_equal(g, w) for g, w in zip(first[1], want, strict=True))
    key = id(idx)
    del idx, first
    assert key not in PO._RUNS  # gone with its index


@pytest.mark.parametrize("geom", [(3, 7, 9, 3, 1, 1), (4, 9, 9, 7, 2, 3), (2, 5, 5, 5, 1, 0), (3, 4, 6, 2, 2, 0),
                                  (2, 3, 3, 3, 1, 1), (5, 1, 8, 1, 1, 0), (2, 6, 4, 4, 3, 2)])
def test_a_window_index_of_several_images_is_scanned_one_image_at_a_time(geom, monkeypatch):
    """pooling._scan of an index conv_windows made: the first image's runs repeated per image, the same arrays as
    scanning the whole index (kernels as wide as the image, where a kernel row continues the one before, padding,
    strides), found from one image's scan; an index changed since conv_windows made it is scanned whole."""
    from popvision_lite.emulator.ops import pooling as PO

    idx, _ = PO.conv_windows(*geom)
    want = bool(np.any(idx < 0)), PO._window_runs(idx)
    scanned = []
    real = PO._window_runs
    monkeypatch.setattr(PO, "_window_runs", lambda index: scanned.append(len(index)) or real(index))
    got = PO._scan(idx)
    assert scanned == [len(idx) // geom[0]]  # one image's windows
    assert got[0] == want[0]
    assert all(np.array_equal(g, w) and g.dtype == w.dtype for g, w in zip(got[1], want[1], strict=True))
    for where in (len(idx) - 1, len(idx) // geom[0]):  # the last image's or the second's first window changed
        changed = idx.copy()
        PO._IMAGES[id(changed)] = (weakref.ref(changed), *PO._IMAGES[id(idx)][1:])  # (still said to be images)
        changed[where, 0] = 0 if changed[where, 0] != 0 else 1
        scanned.clear()
        out = PO._scan(changed)
        assert scanned == [len(idx)]  # (the whole index)
        assert all(np.array_equal(g, w) for g, w in zip(out[1], real(changed), strict=True))
        del PO._IMAGES[id(changed)]
