"""The convolution's on-tile kernel transposes, described by their op (ops.conv.KernelTranspose) and compiled per
class of tiles (compile.copy_windows, decision 0490): on kernels of several block counts per tile (one block a tile,
several, rows of blocks dealt with a carry from tile to tile, one block row per kernel position), fp16 and fp32
blocks, with outlining off and on, the graph compiles to the expanded compile's memory per tile and category,
steps, cycles, bytes and code bytes; a description that does not hold takes the expanded path."""

import numpy as np
import pytest

import popvision_lite.emulator.compile as C
import popvision_lite.emulator.compile.copy_windows as CW
from popvision_lite.emulator.models.emulated import EmulatorBackend
from popvision_lite.emulator.ops.conv import KernelTranspose
from popvision_lite.emulator.target import Target
from tests.emulator.compile.test_copy_memo import _assert_same
from tests.support.program_tree import copies as _copies


def _target(tiles: int) -> Target:
    t = Target.from_device("ipu-mk2")
    t.tiles_per_ipu = t.num_tiles = tiles
    return t


def _flip(tiles, k, cin, cout, precision, twice=False):
    """A kernel laid out by map_kernel, flipped and transposed on its tiles (twice: a second kernel of the same
    shape, on tiles rotated on from the first's)."""
    be = EmulatorBackend(_target(tiles), precision)
    for i in range(2 if twice else 1):
        w = be.weight(f"w{i}", np.zeros((k * k * cin, cout), np.float32))
        be.flip_transpose_kernel(w, k, cin, cout, f"flip{i}")
    return be.graph, be.program()


# (tiles, k, cin, cout, precision): blocks (16 x 16 fp16, 8 x 16 fp32) per tile 1-2 with no carry; 1-2 with a carry
# from tile to tile (the tiles not a multiple of the block columns); 4-5; ~6.5 with a carry and a 5 x 5 kernel; fewer
# blocks than tiles; one block row per kernel position; fp32 blocks with a carry; fewer tiles than block columns (a
# tile's blocks side by side in a row: one pattern runs on from block to block), one tile, and seven
CASES = [(64, 3, 64, 32, "fp16"), (50, 3, 48, 48, "fp16"), (16, 3, 32, 64, "fp16"), (23, 5, 32, 48, "fp16"),
         (512, 3, 32, 32, "fp16"), (40, 3, 16, 48, "fp16"), (37, 3, 24, 48, "fp32"), (3, 3, 32, 80, "fp16"),
         (1, 3, 32, 32, "fp16"), (7, 3, 48, 96, "fp16")]


def _compile_both(monkeypatch, build, outline=False):
    """The graph compiled with its transposes' descriptions (each must take the compact path), then built again and
    compiled with them removed (the expanded path)."""
    taken = []
    real = CW.compile_transpose
    monkeypatch.setattr(CW, "compile_transpose", lambda *a: taken.append(real(*a)) or taken[-1])
    g, prog = build()
    flips = [p for p in _copies(prog) if "transpose_on_tile" in p.name]
    assert flips and all(isinstance(p.transpose, KernelTranspose) for p in flips)
    a = C.compile_graph(g, prog, outline=outline)
    assert 1 <= len(taken) <= len(flips) and all(taken)  # (a copy of the same structure: the memo's replay)
    fresh = len(taken)
    g, prog = build()
    for p in _copies(prog):
        p.transpose = None
    b = C.compile_graph(g, prog, outline=outline)
    assert len(taken) == fresh  # (none here)
    return a, b, flips


@pytest.mark.parametrize("case", CASES)
def test_kernel_transposes_compile_per_class_and_equal(monkeypatch, case):
    a, b, flips = _compile_both(monkeypatch, lambda: _flip(*case))
    _assert_same(a, b)
    t = flips[0].transpose
    assert len(np.asarray(t.tiles)) == min(case[0], (case[1] ** 2 * case[2] // t.block[0]) * (case[3] // t.block[1]))


def test_kernel_transposes_compile_equal_with_outlining_and_on_rotated_tiles(monkeypatch):
    """With outlining the copies' signatures are the expanded pieces' (cut for it); a second kernel of the shape on
    other tiles (the copy memo's replay, or a fresh compact compile) compiles the same too."""
    for case in CASES[1:4:2]:
        a, b, _ = _compile_both(monkeypatch, lambda case=case: _flip(*case, twice=True), outline=True)
        _assert_same(a, b)
        assert a.outlined_copies == b.outlined_copies


def test_a_description_that_does_not_hold_takes_the_expanded_path(monkeypatch):
    """The compact compile gives way (False, nothing done) where the copy is not the transpose described: another
    index, another source mapping, a tile out of range, a repeated tile, a result not whole."""
    import dataclasses

    g, prog = _flip(*CASES[1])
    (cp,) = [p for p in _copies(prog) if "transpose_on_tile" in p.name]
    t = cp.transpose
    c = C.compile_graph(g, prog)  # (a Compiled of the target, for the checks)
    assert CW._tile_blocks(c, cp, t) is not None
    idx = t.index.copy()
    idx[[0, 1]] = idx[[1, 0]]
    bad = [dataclasses.replace(t, index=idx), dataclasses.replace(t, src_mapping=t.dst_mapping),
           dataclasses.replace(t, tiles=np.where(np.arange(len(t.tiles)) == 0, c.num_tiles, t.tiles)),
           dataclasses.replace(t, tiles=np.where(np.arange(len(t.tiles)) == 1, t.tiles[0], t.tiles)),
           dataclasses.replace(t, block=(t.block[0], 2 * t.block[1]) if t.cout % (2 * t.block[1]) == 0 else (5, 5))]
    for d in bad:
        assert CW._tile_blocks(c, cp, d) is None
    part = type(cp)(cp.src, cp.dst, name="x")
    part.dst = cp.dst.tensor.whole()
    assert CW._tile_blocks(c, part, t) is not None
