"""The K reduction's partials gathers, described by their op (ops.matmul_partials.BlockGather) and compiled per
block class (compile.copy_gathers, decision 0480): on the ops' real shapes (even and uneven blocks, one-stage and
multi-stage reductions, a convolution's input-channel split), with outlining off and on, the graph compiles to the
expanded compile's memory per tile and category, steps, cycles, bytes and code bytes; a description the compile
cannot use takes the expanded path."""

import numpy as np
import pytest

import popvision_lite.emulator.compile as C
import popvision_lite.emulator.compile.copies as CO
import popvision_lite.emulator.compile.copy_gathers as CG
from popvision_lite.emulator.codelets.poplin_conv import ConvShape
from popvision_lite.emulator.models.emulated import EmulatorBackend
from popvision_lite.emulator.ops.matmul_partials import BlockGather
from popvision_lite.emulator.target import Target
from tests.emulator.compile.test_copy_memo import _assert_same
from tests.support.program_tree import copies as _copies


def _target(tiles: int) -> Target:
    t = Target.from_device("ipu-mk2")
    t.tiles_per_ipu = t.num_tiles = tiles
    return t


def _matmul(tiles, m, k, n):
    be = EmulatorBackend(_target(tiles), "fp16")
    a = be.input("a", np.zeros((m, k), np.float16))
    b = be.input("b", np.zeros((k, n), np.float16))
    be.matmul(a, b, "mm")
    return be.graph, be.program()


def _conv(tiles, s):
    be = EmulatorBackend(_target(tiles), "fp16")
    x = be.input("x", np.zeros((s.n * s.h * s.w, s.ci), np.float16))
    w = be.input("w", np.zeros((s.k * s.k * s.ci, s.co), np.float16))
    be.conv2d(x, w, s, "conv")
    return be.graph, be.program()


# (tiles, M, K, N), then the final gather's blocks and block classes and whether an intermediate stage comes first:
# uneven blocks of two shapes in one stage; four blocks of one shape with a stage; one block over every tile with a
# stage; two blocks with a stage
MATMULS = [((64, 100, 512, 70), 8, 2, False), ((64, 16, 2048, 64), 4, 1, True), ((64, 48, 4096, 40), 1, 1, True),
           ((96, 30, 6000, 50), 2, 1, True)]


def _compile_both(monkeypatch, build, outline=False):
    """The graph compiled with its gathers' descriptions (each must take the compact path), then built again and
    compiled with them removed (the expanded path)."""
    taken = []
    real = CG.compile_gather
    monkeypatch.setattr(CG, "compile_gather", lambda c, info, g: taken.append(real(c, info, g)) or taken[-1])
    g, prog = build()
    gathers = [p for p in _copies(prog) if "gather_partials" in p.name]
    assert gathers and all(isinstance(p.gather, BlockGather) for p in gathers)
    a = C.compile_graph(g, prog, outline=outline)
    assert len(taken) == len(gathers) and all(taken)
    g, prog = build()
    for p in _copies(prog):
        p.gather = None
    b = C.compile_graph(g, prog, outline=outline)
    assert len(taken) == len(gathers)  # (none here)
    return a, b, gathers


@pytest.mark.parametrize("shape,blocks,classes,staged", MATMULS)
def test_matmul_gathers_compile_compact_and_equal(monkeypatch, shape, blocks, classes, staged):
    a, b, gathers = _compile_both(monkeypatch, lambda: _matmul(*shape))
    _assert_same(a, b)
    last = gathers[-1].gather  # (the final gather: the blocks moved from their class's representative)
    assert (len(last.owner), len(np.unique(last.block_class))) == (blocks, classes)
    assert any(p.gather.first is not None for p in gathers) == staged  # (an intermediate stage's row runs)


def test_gathers_compile_equal_with_outlining(monkeypatch):
    """With outlining, the copies' signatures are the expanded pieces' (cut for it): the outlined code is the same."""
    for shape, *_ in MATMULS[:2]:
        a, b, _ = _compile_both(monkeypatch, lambda s=shape: _matmul(*s), outline=True)
        _assert_same(a, b)


def test_conv_gathers_compile_compact_and_equal(monkeypatch):
    """The convolution's K reduction (an input-channel split, ops/conv.py via reduce_k_partials) too."""
    s = ConvShape(1, 14, 14, 256, 64, 3, 1, 1)
    a, b, gathers = _compile_both(monkeypatch, lambda: _conv(48, s))
    _assert_same(a, b)
    assert any(p.name.startswith("conv") for p in gathers)


def test_unusable_descriptions_take_the_expanded_path(monkeypatch):
    """Blocks sharing a tile, or a representative block with a piece off its row's tiles: the expanded compile,
    the same as with no description."""
    called = []
    real = CO.copy_pieces
    monkeypatch.setattr(CO, "copy_pieces", lambda *a, **k: called.append(1) or real(*a, **k))
    for spoil in ("shared tile", "off the row"):
        g, prog = _matmul(*MATMULS[0][0])
        gathers = [p for p in _copies(prog) if "gather_partials" in p.name]
        for p in gathers:
            d = p.gather
            owner = d.owner.copy()
            if spoil == "shared tile":
                owner[1, 0] = owner[0, 0]
            else:  # every block given the next block's row: distinct tiles, but not its pieces' own
                owner = np.roll(owner, 1, axis=0)
            p.gather = BlockGather(d.vertex_block, d.depth, owner, d.block_class, d.first)
        called.clear()
        a = C.compile_graph(g, prog)
        assert len(called) >= len(gathers), spoil  # every gather cut on the expanded path
        g, prog = _matmul(*MATMULS[0][0])
        for p in _copies(prog):
            p.gather = None
        _assert_same(a, C.compile_graph(g, prog))


def test_row_addr_is_tile_addr_on_the_rows_tiles():
    """_row_addr (tile positions from the marked tiles' intervals alone) equals memory.tile_addr (from the whole
    mapping) for elements on those tiles: random mappings whose tiles interleave in flat order, with empty
    intervals and tiles holding several intervals."""
    from types import SimpleNamespace

    from popvision_lite.emulator import mapping as M
    from popvision_lite.emulator.compile.memory import tile_addr
    from popvision_lite.emulator.mapping import interval_index

    rng = np.random.default_rng(7)
    for _ in range(60):
        T, n = int(rng.integers(4, 40)), int(rng.integers(5, 400))
        cuts = np.unique(np.concatenate([[0, 2000], rng.integers(0, 2000, n)]))
        mp = M.intervals(rng.integers(0, T, len(cuts) - 1), cuts[:-1], cuts[1:])
        c = SimpleNamespace(caches=SimpleNamespace(tile_offsets={}, copy_mappings=frozenset(), tile_base_last=None))
        on_row = np.zeros(T, bool)
        on_row[rng.choice(T, int(rng.integers(1, T)), replace=False)] = True
        elems = rng.integers(0, 2000, 300)
        k = interval_index(mp.start, elems)
        sel = on_row[mp.tile[k]]
        if not sel.any():
            continue
        elems, k = elems[sel], k[sel]
        assert np.array_equal(CG._row_addr(mp, on_row, elems, k), tile_addr(c, mp, elems, k))
