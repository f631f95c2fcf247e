"""The convolution ops mark their broadcast copies' destination units (``Copy.units``: ops/conv.py ``copy_units``;
the input rows with halo, the kernel's k x k windows, the weight update's dY rows; decision 0479) and the compile
takes the units and blocks from them (copy_broadcasts._op_units) instead of finding them from every source vertex.
The plan is the one found without them, array for array, on the ops' own shapes; the compiled graph is the one
compiled without them and the one compiled from the expanded pieces; a wrong word from an op is caught and the
units are found as before."""

import numpy as np
import pytest

import popvision_lite.emulator.compile as C
import popvision_lite.emulator.compile.copy_broadcasts as CB
from popvision_lite.emulator import Graph
from popvision_lite.emulator import mapping as M
from popvision_lite.emulator.codelets.poplin_conv import ConvShape
from popvision_lite.emulator.compile.copy_plans import copy_pieces
from popvision_lite.emulator.models.emulated import EmulatorBackend
from tests.emulator.compile.test_conv_broadcasts import _copies, _small_target
from tests.emulator.compile.test_copy_memo import _assert_same

FIELDS = ("se", "ln", "st", "sk", "blk", "off", "first", "count", "rep", "d0", "dk", "dt")

# (shape, tiles): input-channel splits (a region per pixel, several per unit) and none (a region per image a tile
# crosses: one per unit), output-channel splits (the dY rows' regions per pixel) and none (a dY run per tile), a
# 1 x 1 kernel (one window a tile)
CASES = [(ConvShape(1, 14, 14, 64, 128, 3, 1, 1), 48), (ConvShape(4, 8, 8, 32, 32, 3, 1, 1), 96),
         (ConvShape(2, 8, 8, 128, 64, 3, 1, 1), 32), (ConvShape(2, 7, 7, 256, 256, 3, 1, 1), 96),
         (ConvShape(4, 8, 8, 16, 64, 1, 1, 0), 32), (ConvShape(2, 8, 8, 16, 16, 3, 1, 1), 32),
         (ConvShape(2, 8, 8, 128, 16, 3, 1, 1), 32)]


def _graph(s: ConvShape, tiles: int):
    """A convolution, its weight update and its dX convolution (the flipped kernel) on a small IPU."""
    be = EmulatorBackend(_small_target(tiles), "fp16")
    x = be.input("x", np.zeros((s.n * s.h * s.w, s.ci), np.float16))
    w = be.input("w", np.zeros((s.k * s.k * s.ci, s.co), np.float16))
    dy = be.input("dy", np.zeros((s.out_rows * s.ow, s.co), np.float16))
    be.conv2d(x, w, s, "fwd")
    be.conv2d_weight_update(x, dy, s, "wu")
    wt = be.flip_transpose_kernel(w, s.k, s.ci, s.co, "flip")
    be.conv2d(dy, wt, ConvShape(s.n, s.oh, s.ow, s.co, s.ci, s.k, 1, s.k // 2), "dx")
    return be.graph, be.program()


def _marked(prog):
    return [p for p in _copies(prog) if getattr(p, "units", None) is not None]


def _same_plan(a, b):
    assert a is not None and b is not None
    for f in FIELDS:
        assert np.array_equal(getattr(a, f), getattr(b, f)), f


@pytest.mark.parametrize("s,tiles", CASES)
def test_op_units_give_the_plan_found_from_the_vertices(s, tiles):
    g, prog = _graph(s, tiles)
    marked = _marked(prog)
    kinds = {p.name.rsplit("/", 1)[1] for p in marked}
    assert kinds == {"exchange_input", "broadcast_kernel", "exchange_output_grad"}
    T = g.target.num_tiles
    compact = 0
    for p in marked:
        assert p.broadcast
        got, want = CB.broadcast_plan(p.src, p.dst, T, units=p.units), CB.broadcast_plan(p.src, p.dst, T)
        if want is None:  # (no block repeats: every tile takes its own rows; not a broadcast either way)
            assert got is None and len(set(p.units[1].tolist())) == len(p.units[1])
            continue
        assert CB._op_units(p.src, p.dst, p.units) is not None, p.name  # the op's units were taken
        _same_plan(got, want)
        compact += 1
        exp, pieces = CB.expand(got), copy_pieces(p.src, p.dst)
        for f in ("src_elem", "dst_elem", "length", "src_tile", "dst_tile", "src_k", "dst_k"):
            assert np.array_equal(getattr(exp, f), getattr(pieces, f)), f
    assert compact >= 2


def test_the_cases_cover_one_and_several_vertices_per_unit():
    """Both of _op_units' block orders are taken: units of one region (np.unique's order of the vertex keys) and
    units of several (the order of (count, first key, last key))."""
    one, several = set(), set()
    for s, tiles in CASES:
        for p in _marked(_graph(s, tiles)[1]):
            if CB._op_units(p.src, p.dst, p.units) is None:
                continue
            (one if int(np.max(p.units[0])) == 1 else several).add(p.name.rsplit("/", 1)[1])
    assert "exchange_input" in one and "exchange_output_grad" in one and "broadcast_kernel" in one
    assert "exchange_input" in several and "exchange_output_grad" in several and "broadcast_kernel" in several


@pytest.mark.parametrize("s,tiles", CASES[:4])
def test_compiled_with_units_is_compiled_without_and_expanded(s, tiles):
    a = C.compile_graph(*_graph(s, tiles))
    g, prog = _graph(s, tiles)
    for p in _marked(prog):
        del p.units
    b = C.compile_graph(g, prog)
    g, prog = _graph(s, tiles)
    for p in _copies(prog):
        p.broadcast = False
    c = C.compile_graph(g, prog)
    _assert_same(a, b)
    _assert_same(a, c)


def _halo(first, tiles, starts):
    target = _small_target(32)
    g = Graph(target)
    B = g.add_variable("B", (64,), "float16", mapping=M.linear(64, np.arange(4)))
    stops = np.append(starts[1:], 8 * len(first))
    dst = g.add_variable("d", (8 * len(first),), "float16", mapping=M.intervals(tiles, starts, stops))
    return B.regions(first, 8), dst.whole(), target.num_tiles


def test_a_wrong_word_from_the_op_is_caught():
    """Each way an op's units can be wrong is caught (_op_units declines) and broadcast_plan finds the units from
    the vertices: the same plan as with no word."""
    # units of two 8-element regions each on tiles 10, 11, 12, 13: [0, 8] [0, 8] [0, 16] [0, 8]
    src, dst, T = _halo(np.array([0, 8, 0, 8, 0, 16, 0, 8]), np.arange(10, 14), np.arange(4) * 16)
    want = CB.broadcast_plan(src, dst, T)
    assert want is not None and len(want.count) == 2
    right = (np.full(4, 2), np.array([0, 0, 1, 0]))
    assert CB._op_units(src, dst, right) is not None
    _same_plan(CB.broadcast_plan(src, dst, T, units=right), want)
    for wrong in ((np.full(4, 2), np.zeros(4)),  # the third unit is not the others' block
                  (np.array([2, 2, 2, 1]), np.array([0, 0, 1, 0])),  # seven vertices, not eight
                  (np.array([2, 2, 2, 3]), np.array([0, 0, 1, 2])),  # nine
                  (np.ones(8), np.array([0, 1, 0, 1, 0, 2, 0, 1]))):  # two units in one interval
        assert CB._op_units(src, dst, wrong) is None
        _same_plan(CB.broadcast_plan(src, dst, T, units=wrong), want)
    # a unit across two intervals: [0, 8, 16] [24] [0, 8] [0, 8] where the intervals take [0, 8] [16, 24] [0, 8]
    # [0, 8]
    src, dst, T = _halo(np.array([0, 8, 16, 24, 0, 8, 0, 8]), np.arange(10, 14), np.arange(4) * 16)
    wrong = (np.array([3, 1, 2, 2]), np.array([0, 1, 2, 2]))
    assert CB._op_units(src, dst, wrong) is None
    _same_plan(CB.broadcast_plan(src, dst, T, units=wrong), CB.broadcast_plan(src, dst, T))
    # one label on units of two regions and of one, the one the other's first: [0, 8] [0] [0, 8] [0]
    src, dst, T = _halo(np.array([0, 8, 0, 0, 8, 0]), np.arange(10, 14), np.array([0, 16, 24, 40]))
    wrong = (np.array([2, 1, 2, 1]), np.zeros(4))
    assert CB._op_units(src, dst, wrong) is None
    want = CB.broadcast_plan(src, dst, T)
    assert len(want.count) == 2
    _same_plan(CB.broadcast_plan(src, dst, T, units=wrong), want)


def test_blocks_are_numbered_as_the_vertices_number_them():
    """The op's labels are in any order: the blocks are numbered by their keys, as broadcast_plan numbers them
    from the vertices: (count, first region, last region), so block 0 is [8, 24] (label 1), before [16, 0]."""
    src, dst, T = _halo(np.array([16, 0, 8, 24, 16, 0, 8, 24]), np.arange(10, 14), np.arange(4) * 16)
    units = (np.full(4, 2), np.array([0, 1, 0, 1]))
    got = CB.broadcast_plan(src, dst, T, units=units)
    assert list(got.rep) == [1, 0, 1, 0]
    _same_plan(got, CB.broadcast_plan(src, dst, T))


def test_blocks_tied_in_their_key_are_left_to_the_vertices():
    """Two blocks with one (count, first region, last region) but another middle one: the order by those keys does
    not say which is first, so _op_units declines and the vertices number them (the tied unit that differs from
    the first one is a block of its own, numbered after it)."""
    src, dst, T = _halo(np.array([0, 8, 16, 0, 8, 16, 0, 24, 16, 0, 8, 16]), np.arange(10, 14), np.arange(4) * 24)
    units = (np.full(4, 3), np.array([1, 1, 0, 1]))
    assert CB._op_units(src, dst, units) is None
    got = CB.broadcast_plan(src, dst, T, units=units)
    assert list(got.rep) == [0, 0, 1, 0]
    _same_plan(got, CB.broadcast_plan(src, dst, T))
