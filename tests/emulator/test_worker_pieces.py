"""mapping.worker_pieces and ops.common.split_field: an elementwise op's worker pieces written as int32 and its output
field built from them without the constructor's bounds pass are worker_split's pieces and the Regions the constructor
builds from them, value for value, dtype and layout; equal mappings share one answer while it lives; a field's and a
block's ``size`` is its elements' sum; a vertex group holds a read-only int32 tiles array as it is."""

import gc

import numpy as np
import pytest

from popvision_lite.emulator import Graph, Target
from popvision_lite.emulator import mapping as M
from popvision_lite.emulator.graph import Regions
from popvision_lite.emulator.ops.common import split_field


@pytest.fixture(scope="module")
def graph():
    return Graph(Target.from_device("ipu-mk2", num_ipus=1))


def _mapping(rng, kind: int, n: int):
    """Intervals of one length, of two or three (close or apart: equal or unequal piece offsets), of many (the
    per-interval table), or of lengths whose piece counts differ (short intervals: fewer pieces than workers)."""
    if kind == 0:
        lengths = np.full(n, int(rng.integers(1, 300)))
    elif kind == 1:
        lengths = rng.choice(rng.integers(1, 80, 3), n)
    elif kind == 2:
        lengths = rng.choice([28, 29], n)
    elif kind == 3:
        lengths = rng.integers(1, 400, n)
    else:
        lengths = rng.choice([2, 3, 64], n)
    stop = np.cumsum(lengths)
    return M.Mapping(rng.integers(0, 1472, n), stop - lengths, stop), int(stop[-1])


def _same_field(a: Regions, b: Regions):
    """Attribute for attribute, as tests/emulator/test_regions_on.py compares fields (``_hi``: an end bound)."""
    assert set(vars(a)) == set(vars(b))
    assert a.tensor is b.tensor and a.n == b.n and a.regular == b.regular and a._idx is b._idx is None
    assert a._whole is b._whole is None
    assert a.starts.dtype == b.starts.dtype and np.array_equal(a.starts, b.starts) and not a.starts.flags.writeable
    assert a.sizes.dtype == b.sizes.dtype and np.array_equal(a.sizes, b.sizes) and not a.sizes.flags.writeable
    assert a.sizes.strides == b.sizes.strides and a.starts.strides == b.starts.strides
    assert int((a.starts.astype(np.int64) + a.sizes).max()) <= a._hi <= a.tensor.size
    assert a.size == b.size and np.array_equal(a.elems(), b.elems())


def test_pieces_are_worker_splits_as_int32(graph):
    rng = np.random.default_rng(49)
    for trial in range(400):
        m, size = _mapping(rng, trial % 5, int(rng.integers(1, 90)))
        t = graph.add_variable(f"wp{trial}", (size,), "float16", mapping=m)
        workers = int(rng.integers(1, 7))
        want = M.worker_split(t, workers)
        cut = M.worker_pieces(t, workers)
        for got, exp in zip(cut[:3], want, strict=True):
            assert got.dtype == np.int32 and not got.flags.writeable and np.array_equal(got, exp)
        one = int(want[2].min()) == int(want[2].max())
        assert (cut[2].strides == (0,)) == one  # one size: the constructor's broadcast, else an array
        assert cut[3] == int(t.mapping.stop.max())
        _same_field(split_field(t, cut), t.regions(*want[1:]))


def test_an_equal_mapping_gets_the_same_pieces_while_they_live(graph):
    rng = np.random.default_rng(7)
    m, size = _mapping(rng, 1, 3000)
    a = graph.add_variable("eq_a", (size,), "float16", mapping=m)
    b = graph.add_variable("eq_b", (size,), "float16", mapping=M.Mapping(a.mapping.tile, a.mapping.start, a.mapping.stop))
    assert b.mapping is not a.mapping and b.mapping.start is a.mapping.start  # equal arrays are one object
    first = M.worker_pieces(a, 6)
    again = M.worker_pieces(b, 6)
    assert all(x is y for x, y in zip(first, again[:3], strict=False))
    assert M.worker_pieces(b, 5)[1] is not first[1]  # another worker count: its own pieces
    am = a.mapping
    key = (id(am.tile), id(am.start), id(am.stop), 6)
    assert M._PIECES[key][1][1]() is first[1]
    del first, again
    gc.collect()
    assert key not in M._PIECES  # nothing kept alive: the answer went with its pieces
    assert np.array_equal(M.worker_pieces(b, 6)[1], M.worker_split(b, 6)[1])  # made again
    other, size2 = _mapping(rng, 0, 2000)
    c = graph.add_variable("eq_c", (size2,), "float16", mapping=other)
    assert np.array_equal(M.worker_pieces(c, 6)[1], M.worker_split(c, 6)[1])


def test_no_int32_pieces_past_int32(graph):
    n = 2**31
    t = graph.add_variable("huge", (n,), "float32", mapping=M.linear(n, range(1472)))
    assert M.worker_pieces(t, 6) is None  # (the int64 split: worker_split)
    assert M.worker_pieces(graph.add_variable("unmapped", (8,), "float32"), 6) is None


def test_field_sizes_are_their_elements(graph):
    t = graph.add_variable("sz", (40, 60), "float16", mapping=M.linear(2400, range(4)))
    for starts, sizes in ((np.arange(0, 2000, 7), np.arange(0, 2000, 7) % 5), (np.arange(0, 2000, 7), 3),
                          (np.zeros(0, np.int64), np.zeros(0, np.int64)), ([5], [0])):
        f = t.regions(starts, sizes)
        assert f.size == int(f.elems().sum())
    assert t.blocks((10, 20), [[0, 0], [3, 2], [1, 1]]).size == 600
    assert t.windows((3, 7), [[0, 0], [5, 50]]).size == 42
    big = graph.add_variable("sz_big", (2**31 + 8,), "float16", mapping=M.linear(2**31 + 8, range(4)))
    f = big.regions([0, 2**31], [4, 8])  # int64 arrays
    assert f.sizes.dtype == np.int64 and f.size == 12


def test_a_group_holds_read_only_int32_tiles_as_they_are(graph):
    from popvision_lite.emulator.codelets import popops as CO

    t = graph.add_variable("tl", (6000,), "float16", mapping=M.linear(6000, range(4)))
    cut = M.worker_pieces(t, 6)
    f = split_field(t, cut)
    cs = graph.add_compute_set("tl_cs")
    grp = graph.add_vertices(cs, CO.RELU, tiles=cut[0], fields={"in": f, "out": f})
    assert grp.tiles is cut[0]
    mine = np.asarray(cut[0]).astype(np.int32)  # writable: copied, never made read-only
    grp2 = graph.add_vertices(cs, CO.RELU, tiles=mine, fields={"in": f, "out": f})
    assert grp2.tiles is not mine and mine.flags.writeable and np.array_equal(grp2.tiles, mine)
    grp3 = graph.add_vertices(cs, CO.RELU, tiles=cut[0].astype(np.int64), fields={"in": f, "out": f})
    assert grp3.tiles.dtype == np.int32 and np.array_equal(grp3.tiles, cut[0])


def test_an_answer_of_other_arrays_under_the_same_ids_is_not_taken(graph, monkeypatch):
    """(An id is reused once its array is gone; the answer is taken only for the very arrays it was made from.)"""
    import weakref

    rng = np.random.default_rng(3)
    m, size = _mapping(rng, 0, 1500)
    t = graph.add_variable("stale", (size,), "float16", mapping=m)
    other, _ = _mapping(rng, 3, 1500)
    wrong = M._pieces_int32(other, 6)
    tm = t.mapping
    stale = (tuple(weakref.ref(a) for a in (other.tile, other.start, other.stop)), tuple(map(weakref.ref, wrong)), 1)
    monkeypatch.setitem(M._PIECES, (id(tm.tile), id(tm.start), id(tm.stop), 6), stale)
    got = M.worker_pieces(t, 6)
    assert all(np.array_equal(x, y) for x, y in zip(got[:3], M.worker_split(t, 6), strict=True))


def test_row_runs_in_order_are_ascending_or_refused():
    """mapping._row_runs_in_order (by_windows' runs formed in order, checked per window): where it answers, the runs
    strictly ascend and are the sorted mapping's; windows whose bands' rows interleave (a brick pattern) are refused,
    and by_windows still gives the sorted mapping."""
    from tests.emulator.ops.test_index_scans import _by_windows_sorted

    rng = np.random.default_rng(11)
    refused = 0
    for case in range(150):
        rows, cols, h, w = int(rng.integers(2, 6)), int(rng.integers(1, 5)), int(rng.integers(1, 5)), 4
        shift = int(rng.integers(1, h + 1)) if case % 2 else 0  # odd columns start lower: bands interleave
        org = np.array([(r * h + (shift if c % 2 else 0), c * w) for r in range(rows) for c in range(cols)])
        shape = (rows * h + shift, cols * w + int(rng.integers(1, 3)))
        bs = np.tile([h, w], (len(org), 1))
        p = rng.permutation(len(org))
        tiles = rng.integers(0, 1472, len(org))
        got = M._row_runs_in_order(shape, bs[p], org[p], tiles[p])
        if got is None:
            refused += 1
        else:
            assert np.all(got[1][1:] > got[1][:-1])
        want = _by_windows_sorted(shape, bs, org, tiles)
        m = M.by_windows(shape, bs[p], org[p], tiles[p])
        assert all(np.array_equal(getattr(m, f), getattr(want, f)) for f in ("tile", "start", "stop"))
    assert 20 < refused < 150
    twice = np.array([[0, 0], [0, 0], [0, 4]])  # (a window given twice: equal starts, not strictly ascending)
    assert M._row_runs_in_order((4, 8), np.tile([2, 4], (3, 1)), twice, np.arange(3)) is None
