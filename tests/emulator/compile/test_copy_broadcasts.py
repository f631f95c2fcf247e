"""A copy the op marks as a broadcast (``P.Copy(..., broadcast=True)``: the matmul's B blocks) is compiled from
its compact form (compile/copy_broadcasts.py, decision 0440): the plan it expands to is copy_pieces' plan field for
field, and the compiled copy (memory per tile and category, steps, cycles, bytes, code bytes, outlining) is the
expanded compile's exactly."""

import numpy as np
import pytest

import popvision_lite.emulator.compile as C
import popvision_lite.emulator.compile.copies as CO
import popvision_lite.emulator.compile.copy_broadcasts as CB
from popvision_lite.emulator import Graph, Target
from popvision_lite.emulator import cost_model as cm
from popvision_lite.emulator import mapping as M
from popvision_lite.emulator import programs as P
from popvision_lite.emulator.compile.copy_plans import copy_pieces
from popvision_lite.emulator.graph import Concat
from tests.emulator.compile.test_copy_memo import _assert_same


def _graph(target, seed: int, outline_twice: bool = False):
    """Broadcast copies of a (64 x 96) B into per-vertex staging blocks, one vertex per destination tile: Regions
    (whole rows, some blocks across B's interval boundaries), Windows (column blocks: a run per row), a Concat of
    two window shapes; some vertices on the tile that holds their block's source (on-tile pieces), bus pairs
    (tiles 2k, 2k + 1) that take the same block, and vertices whose partner takes another."""
    rng = np.random.default_rng(seed)
    g = Graph(target)
    K, N = 64, 96
    # B over 24 tiles in uneven intervals: some blocks cross a boundary
    cuts = np.sort(rng.choice(np.arange(1, K * N), 23, replace=False))
    starts = np.concatenate([[0], cuts])
    stops = np.concatenate([cuts, [K * N]])
    b_tiles = np.arange(24) * 2
    B = g.add_variable("B", (K, N), "float16", mapping=M.intervals(b_tiles, starts, stops))
    progs = []
    nv = 40
    vt = np.concatenate([np.arange(0, 16), 100 + rng.permutation(24)])  # tiles 0-15 hold B's first intervals too
    for i, (kind, nblk) in enumerate((("regions", 6), ("windows", 5), ("concat", 4), ("regions", 3))):
        rep = rng.integers(0, nblk, nv)
        rep[1::2] = np.where(rng.random(nv // 2) < 0.6, rep[::2], rep[1::2])  # bus pairs (vertices 2k, 2k + 1)
        if kind == "regions":
            size = 8 * N // nblk
            first = rep * size
            sizes = np.full(nv, size)
            # two blocks of one vertex each: one from B's end (sent to one tile only), one the vertex's own tile
            # holds (an interval past the others, on a tile of its own: no piece crosses)
            k = int(np.nonzero((starts >= 8 * N) & (b_tiles >= 16))[0][0])
            first[-1], first[-2] = K * N - size, starts[k]
            sizes[-2] = min(size, stops[k] - starts[k])
            vt_i = vt.copy()
            vt_i[-2] = b_tiles[k]
            src = B.regions(first, sizes)
        elif kind == "windows":
            w = N // nblk
            src = B.windows((K, w), np.stack([0 * rep, rep * w], 1))
            sizes = np.full(nv, K * w)
            vt_i = vt
        else:  # two window shapes: (K, 16) blocks first, then (K, 8)
            wide = rep % 2 == 0
            a, b = np.nonzero(wide)[0], np.nonzero(~wide)[0]
            src = Concat([B.windows((K, 16), np.stack([0 * a, rep[a] * 16], 1)),
                          B.windows((K, 8), np.stack([0 * b, 64 + rep[b] * 8], 1))])
            sizes = np.concatenate([np.full(len(a), K * 16), np.full(len(b), K * 8)])
            vt_i = vt
        st = np.cumsum(sizes) - sizes
        dst = g.add_variable(f"b_rep{i}", (int(sizes.sum()),), "float16", mapping=M.intervals(vt_i, st, st + sizes))
        progs.append(P.Copy(src, dst.whole(), name=f"broadcast_b{i}", broadcast=True))
        if outline_twice:
            progs.append(P.Copy(src, dst.whole(), name=f"again_b{i}", broadcast=True))
    return g, P.Sequence(progs)


def _unmarked(prog):
    for p in prog.programs:
        p.broadcast = False
    return prog


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_compact_plan_expands_to_copy_pieces(seed):
    target = Target.from_device("ipu-mk2", num_ipus=1)
    g, prog = _graph(target, seed)
    for p in prog.programs:
        bp = CB.broadcast_plan(p.src, p.dst, target.num_tiles)
        assert bp is not None, p.name
        assert len(bp.se) < len(CB.expand(bp).length)  # compact: fewer pieces than the copy sends
        want, got = copy_pieces(p.src, p.dst), CB.expand(bp)
        for f in ("src_elem", "dst_elem", "length", "src_tile", "dst_tile", "src_k", "dst_k"):
            assert np.array_equal(getattr(got, f), getattr(want, f)), (p.name, f)


@pytest.mark.parametrize("seed,outline", [(0, False), (1, True), (2, False)])
def test_compact_compile_is_the_expanded_compile(monkeypatch, seed, outline):
    target = Target.from_device("ipu-mk2", num_ipus=1)
    compact = []
    orig = CO._compile_broadcast
    monkeypatch.setattr(CO, "_compile_broadcast", lambda c, info, bp: compact.append(orig(c, info, bp)) or compact[-1])
    g, prog = _graph(target, seed, outline_twice=outline)
    a = C.compile_graph(g, prog, outline=outline)
    assert compact and all(compact)  # every copy took the compact path
    n = len(compact)
    g, prog = _graph(target, seed, outline_twice=outline)
    b = C.compile_graph(g, _unmarked(prog), outline=outline)
    assert len(compact) == n  # ... and none here
    _assert_same(a, b)
    assert a.outlined_copies == b.outlined_copies
    # the compact form had on-tile pieces, bus partners with one block, and halved receive bytes
    assert any(int(t.bytes_sram) > 0 for t in a.templates if t.bytes_sram is not None)


def test_compact_bus_bytes_are_the_expanded_ones():
    """cost_model.broadcast_bus_receive_bytes on the compact form equals shared_bus_receive_bytes on the
    expanded pieces, tile for tile, where bus pairs share blocks (some bytes count half) and where not."""
    target = Target.from_device("ipu-mk2", num_ipus=1)
    T = target.num_tiles
    g, prog = _graph(target, 3)
    halved = 0
    for p in prog.programs:
        bp = CB.broadcast_plan(p.src, p.dst, T)
        plan = CB.expand(bp)
        isz = p.src.tensor.itemsize
        cross = plan.src_tile != plan.dst_tile
        want = cm.shared_bus_receive_bytes(target, plan, cross, plan.length * isz)
        r = CB.receivers(bp, T, True)
        pv = r.tile_vertex[bp.dt ^ 1]
        partner = (pv >= 0) & (bp.rep[np.maximum(pv, 0)] == bp.rep)
        block = np.add.reduceat(bp.ln, bp.first)[bp.rep]
        got = cm.broadcast_bus_receive_bytes(target, block, r.local, r.partner_local, partner, bp.dt, isz)
        assert np.array_equal(got, want), p.name
        whole = np.bincount(plan.dst_tile[cross], weights=plan.length[cross] * isz, minlength=T)
        halved += int((got < whole).sum())
    assert halved > 0


def test_no_repeat_or_shared_tile_is_not_compact():
    """The compact form only where it says the same thing: a copy with no repeated block, or two destination
    intervals on one tile, is compiled from its expanded pieces (broadcast_plan: None)."""
    target = Target.from_device("ipu-mk2", num_ipus=1)
    g = Graph(target)
    B = g.add_variable("B", (8, 16), "float16", mapping=M.linear(128, np.arange(4)))
    dst = g.add_variable("d", (64,), "float16", mapping=M.intervals(np.arange(10, 14), np.arange(4) * 16,
                                                                    np.arange(1, 5) * 16))
    assert CB.broadcast_plan(B.regions(np.arange(4) * 16, 16), dst.whole(), target.num_tiles) is None
    assert CB.broadcast_plan(B.regions(np.zeros(4, np.int64), 16), dst.whole(), target.num_tiles) is not None
    # (two intervals on one tile: tile 10's are not adjacent, so not one interval, one unit: decision 0445)
    two = g.add_variable("d2", (64,), "float16", mapping=M.intervals(np.array([10, 11, 10, 12]), np.arange(4) * 16,
                                                                     np.arange(1, 5) * 16))
    assert CB.broadcast_plan(B.regions(np.zeros(4, np.int64), 16), two.whole(), target.num_tiles) is None
