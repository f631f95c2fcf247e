"""The norms' reduction gathers (ops/basic._reduce_stage), described by their op (ops.basic.RowGather) and compiled
without cutting or sorting their pieces (compile.copy_gathers.compile_rows, decision 0491): on the ops' real
shapes (one reduction stage and several, rows on the reducing tile and not, destination tiles whose pairs repeat
one vertex sequence and tiles whose pieces are written down), with outlining off and on, the graph compiles to the
expanded compile's memory per tile and category, steps, cycles, bytes and code bytes; a description whose
conditions fail takes the expanded path."""

import numpy as np
import pytest

import popvision_lite.emulator.compile as C
import popvision_lite.emulator.compile.copies as CO
import popvision_lite.emulator.compile.copy_gathers as CG
from popvision_lite.emulator.models.emulated import EmulatorBackend
from popvision_lite.emulator.ops import basic as B
from popvision_lite.emulator.target import Target
from tests.emulator.compile.test_copy_memo import _assert_same
from tests.support.program_tree import copies as _copies


def _target(tiles: int) -> Target:
    t = Target.from_device("ipu-mk2")
    t.tiles_per_ipu = t.num_tiles = tiles
    return t


def _norms(tiles, rows, c):
    """A batch norm and its backward pass: their statistics' reductions (one stage or several)."""
    be = EmulatorBackend(_target(tiles), "fp16")
    x = be.input("x", np.zeros((rows, c), np.float16))
    g = be.input("g", np.zeros((c,), np.float32))
    b = be.input("b", np.zeros((c,), np.float32))
    y, m, s = be.batch_norm(x, g, b, "bn")
    be.batch_norm_bwd(x, y, m, s, g, "bn_bwd")
    return be.graph, be.program()


def _rows(tiles, rows, c):
    """A layer norm's backward pass and a bias gradient (reduce_rows): per-vertex partials, several to a tile."""
    be = EmulatorBackend(_target(tiles), "fp16")
    x = be.input("x", np.zeros((rows, c), np.float16))
    dy = be.input("dy", np.zeros((rows, c), np.float16))
    g = be.input("g", np.zeros((c,), np.float16))
    B.layer_norm_bwd(be.ctx, x, g, dy, "ln_bwd")
    B.reduce_rows(be.ctx, dy, "bias_grad")
    return be.graph, be.program()


# (tiles, rows, channels): one stage, rows on their reducing tiles; two stages, some destination tiles written
# down and a stage with no row on its reducing tile
SHAPES = [(64, 4096, 64), (200, 1500, 256)]


def _compile_both(monkeypatch, build, outline=False):
    """The graph compiled with its gathers' descriptions, then built again and compiled with them removed (the
    expanded path); returns both and, per described gather, whether it took the compact path."""
    taken, expanded, runs = [], [], []
    real, real_sums, real_runs = CG.compile_rows, CG._expanded_sums, CG._tile_runs
    monkeypatch.setattr(CG, "compile_rows", lambda c, info, g: taken.append(real(c, info, g)) or taken[-1])
    monkeypatch.setattr(CG, "_expanded_sums", lambda *a: expanded.append(1) or real_sums(*a))
    monkeypatch.setattr(CG, "_tile_runs", lambda *a: runs.append(real_runs(*a)) or runs[-1])
    g, prog = build()
    described = [p for p in _copies(prog) if isinstance(p.gather, B.RowGather)]
    assert described and all("/gather" in p.name for p in described)
    a = C.compile_graph(g, prog, outline=outline)
    g, prog = build()
    for p in _copies(prog):
        p.gather = None
    n = len(taken)
    b = C.compile_graph(g, prog, outline=outline)
    assert len(taken) == n  # (none here)
    return a, b, taken, (len(expanded), runs)


@pytest.mark.parametrize("shape", SHAPES)
def test_norm_gathers_compile_compact_and_equal(monkeypatch, shape):
    a, b, taken, (n_expanded, runs) = _compile_both(monkeypatch, lambda: _norms(*shape))
    _assert_same(a, b)
    assert taken[0] and sum(taken) >= 3  # (every first stage's gathers: the two statistics, the gradients' one)
    assert all(per is not None and len(per[0]) for _bad, per in runs)  # (tiles whose pairs repeat a sequence)
    if shape == SHAPES[1]:
        assert n_expanded and any(bad.any() for bad, _per in runs)  # (and tiles written down)


def test_norm_gathers_compile_equal_with_outlining(monkeypatch):
    """With outlining, the pieces written down are copy_pieces' (the copies' signatures): the same outlined code."""
    a, b, taken, _ = _compile_both(monkeypatch, lambda: _norms(*SHAPES[1]), outline=True)
    _assert_same(a, b)
    assert any(taken)


def test_row_gathers_of_per_vertex_partials_compile_equal(monkeypatch):
    """The layer norm's and the bias gradient's reductions: described too; compact or not, the same compile."""
    a, b, taken, _ = _compile_both(monkeypatch, lambda: _rows(64, 1024, 96))
    _assert_same(a, b)
    assert taken


def test_unusable_descriptions_take_the_expanded_path(monkeypatch):
    """A description whose row length is not the source's rows', or whose vertices end inside the next vertex's
    destination interval: the expanded compile (every described gather cut), the same as with no description."""
    called = []
    real = CO.copy_pieces
    monkeypatch.setattr(CO, "copy_pieces", lambda *a, **k: called.append(1) or real(*a, **k))
    for spoil in ("row", "first"):
        g, prog = _norms(*SHAPES[0])
        described = [p for p in _copies(prog) if isinstance(p.gather, B.RowGather)]
        for p in described:
            d = p.gather
            p.gather = B.RowGather(d.row * 2, d.first) if spoil == "row" else \
                B.RowGather(d.row, np.concatenate([[0], d.first[1:-1] + 1, d.first[-1:]]))
        called.clear()
        a = C.compile_graph(g, prog)
        assert len(called) >= len(described), spoil
        g, prog = _norms(*SHAPES[0])
        for p in _copies(prog):
            p.gather = None
        _assert_same(a, C.compile_graph(g, prog))


def _permute_vertices(prog, how: str) -> int:
    """Every described gather's vertices put in another order (the same pieces, another copy order): ``swap``
    each two neighbours (a tile's columns out of order), ``split`` the odd vertices after the even ones (a tile's
    vertices in two runs).  Returns how many gathers changed."""
    from types import SimpleNamespace

    done = 0
    for p in _copies(prog):
        d = p.gather
        if not isinstance(d, B.RowGather) or len(d.first) < 4:
            continue
        cnt = np.diff(d.first)
        L = int(p.src.sizes[0])
        e, _k = CG._vertex_destinations(SimpleNamespace(caches=SimpleNamespace(copy_runs={})), p.dst, d.first, L)
        V = len(cnt)
        if how == "swap":
            order = np.arange(V).reshape(-1, 2)[:, ::-1].ravel() if V % 2 == 0 else np.r_[np.arange(1, V)[::-1], 0]
        else:
            order = np.r_[np.arange(0, V, 2), np.arange(1, V, 2)]
        idx = np.concatenate([np.arange(d.first[v], d.first[v + 1]) for v in order])
        p.src = p.src.tensor.regions(p.src.starts[idx], p.src.sizes[idx])
        p.dst = p.dst.tensor.regions(e[order], cnt[order] * L)
        p.gather = B.RowGather(d.row, np.concatenate([[0], np.cumsum(cnt[order])]))
        done += 1
    return done


@pytest.mark.parametrize("how", ["swap", "split"])
def test_vertex_orders_the_sequences_do_not_cover_are_written_down(monkeypatch, how):
    """A destination tile whose vertices' columns are out of order, or whose vertices are in two runs: its pairs'
    pieces are not its vertex sequence, so they are written down (and counted as the expanded path counts them):
    the same compile as the expanded path's on the same copies."""
    expanded = []
    real = CG._expanded_sums
    monkeypatch.setattr(CG, "_expanded_sums", lambda *a: expanded.append(a[-3].sum()) or real(*a))
    g, prog = _norms(*SHAPES[1])
    assert _permute_vertices(prog, how)
    a = C.compile_graph(g, prog)
    assert sum(expanded) > 32 * 2  # (more than the unpermuted stage's written-down vertices: 32 a statistic)
    g, prog = _norms(*SHAPES[1])
    _permute_vertices(prog, how)
    for p in _copies(prog):
        p.gather = None
    _assert_same(a, C.compile_graph(g, prog))


def test_weight_update_gather_compiles_per_block_class_and_equal(monkeypatch):
    """The weight-update convolution's partials gather (ops/conv_wu.py), described as a BlockGather of one class:
    compact (compile_gather True) and the same compile as the expanded path's, on the output-channel and input-channel
    splits of two shapes (32 blocks, 2 blocks)."""
    from popvision_lite.emulator.codelets.poplin_conv import ConvShape
    from popvision_lite.emulator.ops.matmul_partials import BlockGather

    taken = []
    real = CG.compile_gather
    monkeypatch.setattr(CG, "compile_gather", lambda c, info, g: taken.append(real(c, info, g)) or taken[-1])

    def build(tiles, s):
        be = EmulatorBackend(_target(tiles), "fp16")
        be.conv2d_weight_update(be.input("x", np.zeros((s.n * s.h * s.w, s.ci), np.float16)),
                                be.input("dy", np.zeros((s.out_rows * s.ow, s.co), np.float16)), s, "wu")
        return be.graph, be.program()

    for tiles, s, blocks in ((100, ConvShape(1, 14, 14, 64, 128, 3, 1, 1), 32), (64, ConvShape(2, 8, 8, 16, 32, 3, 1, 1), 2)):
        taken.clear()
        g, prog = build(tiles, s)
        (gather,) = [p for p in _copies(prog) if p.name.endswith("gather_partials")]
        assert isinstance(gather.gather, BlockGather) and len(gather.gather.owner) == blocks, len(gather.gather.owner)
        a = C.compile_graph(g, prog)
        assert taken == [True]
        g, prog = build(tiles, s)
        for p in _copies(prog):
            p.gather = None
        _assert_same(a, C.compile_graph(g, prog))
