"""The convolution's kernel broadcast (ops/conv.py ``broadcast_kernel``: k x k windows per tile, the tiles of one
(ci part, co part) taking the same ones) and its input exchange (``exchange_input``: rows with halo, blocks that
share the halo rows' pieces) are compiled from their compact form (copy_broadcasts.broadcast_plan, several
vertices per destination unit; shared_pieces; decision 0445): the plan expands to copy_pieces' plan field for field
and the compiled graph (memory per tile and category, steps, cycles, bytes, code bytes) is the expanded compile's."""

import numpy as np
import pytest

import popvision_lite.emulator.compile as C
import popvision_lite.emulator.compile.copies as CO
import popvision_lite.emulator.compile.copy_broadcasts as CB
from popvision_lite.emulator import Graph
from popvision_lite.emulator import mapping as M
from popvision_lite.emulator import programs as P
from popvision_lite.emulator.codelets.poplin_conv import ConvShape
from popvision_lite.emulator.compile.copy_plans import copy_pieces
from popvision_lite.emulator.models.emulated import EmulatorBackend
from popvision_lite.emulator.target import Target
from tests.emulator.compile.test_copy_memo import _assert_same
from tests.support.program_tree import copies as _copies

SHAPES = [ConvShape(1, 14, 14, 64, 128, 3, 1, 1), ConvShape(4, 8, 8, 32, 32, 3, 1, 1)]


def _small_target(tiles: int = 96) -> Target:
    """An IPU of ``tiles`` tiles (the Mk2's spec otherwise): the convolutions split their rows over few tiles."""
    t = Target.from_device("ipu-mk2")
    t.tiles_per_ipu = t.num_tiles = tiles
    return t


def _conv_graph(s: ConvShape, tiles: int):
    be = EmulatorBackend(_small_target(tiles), "fp16")
    x = be.input("x", np.zeros((s.n * s.h * s.w, s.ci), np.float16))
    w = be.input("w", np.zeros((s.k * s.k * s.ci, s.co), np.float16))
    be.conv2d(x, w, s, "conv")
    return be.graph, be.program()


@pytest.mark.parametrize("s,tiles", [(SHAPES[0], 32), (SHAPES[1], 48)])
def test_kernel_broadcast_compiles_compact_and_equal(monkeypatch, s, tiles):
    g, prog = _conv_graph(s, tiles)
    kern = [p for p in _copies(prog) if p.name.endswith("broadcast_kernel")]
    assert kern and all(p.broadcast for p in kern)
    for p in kern:
        bp = CB.broadcast_plan(p.src, p.dst, g.target.num_tiles)
        assert bp is not None
        # several windows per destination unit (tile), and fewer pieces listed than the copy sends
        assert len(bp.rep) < p.src.n and len(bp.se) < len(CB.expand(bp).length)
        want, got = copy_pieces(p.src, p.dst), CB.expand(bp)
        for f in ("src_elem", "dst_elem", "length", "src_tile", "dst_tile", "src_k", "dst_k"):
            assert np.array_equal(getattr(got, f), getattr(want, f)), f
    # the input exchange: each tile's rows with halo, the tiles of one (ci part, row part) taking the same ones;
    # neighbouring row parts share their halo rows (blocks that share pieces: copy_broadcasts.shared_pieces)
    ex = [p for p in _copies(prog) if p.name.endswith("exchange_input")]
    assert ex and all(p.broadcast for p in ex)
    shared = [CB.shared_pieces(CB.broadcast_plan(p.src, p.dst, g.target.num_tiles)) for p in ex]
    assert all(sh is not False for sh in shared) and any(sh is not None for sh in shared)
    compact = []
    orig = CO._compile_broadcast
    monkeypatch.setattr(CO, "_compile_broadcast", lambda c, info, bp: compact.append(orig(c, info, bp)) or compact[-1])
    a = C.compile_graph(g, prog)
    assert len(compact) == len(kern) + len(ex) and all(compact)  # both took the compact path
    n = len(compact)
    g, prog = _conv_graph(s, tiles)
    for p in _copies(prog):
        p.broadcast = False
    b = C.compile_graph(g, prog)
    assert len(compact) == n  # ... and none here
    _assert_same(a, b)


def test_units_of_unequal_vertices_are_distinct_blocks():
    """Units (destination intervals) of several vertices are one block only where their vertices are equal one by
    one: units with the same count, first and last vertex but another middle one are two blocks."""
    target = _small_target(32)
    g = Graph(target)
    B = g.add_variable("B", (64,), "float16", mapping=M.linear(64, np.arange(4)))
    # four units of three 4-element vertices: [0, 4, 8], [0, 4, 8], [0, 12, 8], [0, 4, 8]
    first = np.array([0, 4, 8, 0, 4, 8, 0, 12, 8, 0, 4, 8])
    dst = g.add_variable("d", (48,), "float16", mapping=M.intervals(np.arange(10, 14), np.arange(4) * 12,
                                                                    np.arange(1, 5) * 12))
    bp = CB.broadcast_plan(B.regions(first, 4), dst.whole(), target.num_tiles)
    assert bp is not None
    assert list(bp.rep) == [0, 0, 1, 0] or list(bp.rep) == [1, 1, 0, 1]
    want, got = copy_pieces(B.regions(first, 4), dst.whole()), CB.expand(bp)
    for f in ("src_elem", "dst_elem", "length", "src_tile", "dst_tile"):
        assert np.array_equal(getattr(got, f), getattr(want, f)), f


@pytest.mark.parametrize("case", ["first", "pair"])
def test_shared_piece_is_sent_once_by_its_first_crossing_receiver(monkeypatch, case):
    """Blocks that share a piece (B's [24, 32) in two blocks): it is sent once, as the expanded copy's first crossing
    occurrence: not the first vertex's (on the piece's own tile: an on-tile copy) but the next one's, where it
    makes one loop with the block's other piece from that tile; a block whose one vertex is on its piece's tile
    sends nothing.  Compiled compact and expanded: the same.  ``pair``: a bus pair (tiles 10, 11) takes two blocks
    that share a piece: its halved bytes are not per block, so the copy takes the expanded path."""
    target = _small_target(32)

    def graph(marked: bool):
        g = Graph(target)
        B = g.add_variable("B", (64,), "float16", mapping=M.linear(64, np.arange(4)))
        if case == "first":
            # units: [24, 32) on tile 1 (B's own tile for it), [16, 24) + [24, 32) on tiles 10 and 11 (a bus pair),
            # [48, 56) on tile 3 (its own: nothing sent)
            first = np.array([24, 16, 24, 16, 24, 48])
            tiles, starts = np.array([1, 10, 11, 3]), np.array([0, 8, 24, 40])
        else:  # [16, 32) on tiles 10 and 12, [24, 40) on tile 11
            first = np.array([16, 24, 24, 32, 16, 24])
            tiles, starts = np.array([10, 11, 12]), np.array([0, 16, 32])
        stops = np.append(starts[1:], 48)
        dst = g.add_variable("d", (48,), "float16", mapping=M.intervals(tiles, starts, stops))
        return g, P.Sequence([P.Copy(B.regions(first, 8), dst.whole(), name="halo", broadcast=marked)])

    g, prog = graph(True)
    p = prog.programs[0]
    bp = CB.broadcast_plan(p.src, p.dst, target.num_tiles)
    assert bp is not None and isinstance(CB.shared_pieces(bp), tuple)
    got, want = CB.expand(bp), copy_pieces(p.src, p.dst)
    for f in ("src_elem", "dst_elem", "length", "src_tile", "dst_tile"):
        assert np.array_equal(getattr(got, f), getattr(want, f)), f
    compact = []
    orig = CO._compile_broadcast
    monkeypatch.setattr(CO, "_compile_broadcast", lambda c, info, bp: compact.append(orig(c, info, bp)) or compact[-1])
    a = C.compile_graph(g, prog)
    assert compact == [case == "first"]
    b = C.compile_graph(*graph(False))
    assert len(compact) == 1
    _assert_same(a, b)
