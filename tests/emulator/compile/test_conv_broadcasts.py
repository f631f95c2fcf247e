"""The convolution's kernel broadcast (ops/conv.py ``broadcast_kernel``: k x k windows per tile, the tiles of one
(ci part, co part) taking the same ones) is compiled from its compact form with several vertices per destination
unit (copy_broadcasts.broadcast_plan, decision 0445): its plan expands to copy_pieces' plan field for field and the
compiled graph (memory per tile and category, steps, cycles, bytes, code bytes) is the expanded compile's."""

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

SHAPES = [ConvShape(2, 12, 12, 32, 64, 3, 1, 1), ConvShape(1, 9, 7, 64, 32, 3, 2, 1)]


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


def _copies(prog):
    if isinstance(prog, P.Copy):
        yield prog
    for p in getattr(prog, "programs", ()) or ():
        yield from _copies(p)
    body = getattr(prog, "body", None)
    if body is not None:
        yield from _copies(body)


@pytest.mark.parametrize("s,tiles", [(SHAPES[0], 96), (SHAPES[1], 64)])
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
    compact = []
    orig = CO._compile_broadcast
    monkeypatch.setattr(CO, "_compile_broadcast", lambda c, info, bp: compact.append(orig(c, info, bp)) or compact[-1])
    a = C.compile_graph(g, prog)
    assert compact and all(compact)  # the kernel broadcast took the compact path
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
