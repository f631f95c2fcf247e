"""The whole-graph compile replays the effects of a copy whose structure it has compiled before
(the same op in another layer, possibly on tiles rotated by an even count): the result must be
exactly what compiling every copy afresh gives."""

import numpy as np

import popvision_lite.emulator.compile.steps as S
import popvision_lite.emulator.compiler as C
from popvision_lite.emulator import Graph, Target, TensorView
from popvision_lite.emulator import mapping as M
from popvision_lite.emulator import programs as P
from popvision_lite.emulator.models.config import make_config
from popvision_lite.emulator.models.emulated import build_model


def test_copy_memo_matches_fresh_compile(monkeypatch):
    be, _ = build_model(make_config("bert-tiny", training=False, layers=2), "ipu-mk2", needs_values=False)
    memo, plain, n_memo, n_plain = _compile_both(monkeypatch, be.graph, be.program())
    assert n_memo < n_plain  # the second layer's copies were replayed
    _assert_same(memo, plain)

def _compile_both(monkeypatch, graph, prog):
    fresh = []
    orig = S._compile_copy_fresh
    monkeypatch.setattr(S, "_compile_copy_fresh", lambda c, info: (fresh.append(1), orig(c, info))[1])
    memo = C.compile_graph(graph, prog)
    n_memo = len(fresh)
    counter = iter(range(10**9))
    monkeypatch.setattr(S, "_copy_structure_key", lambda c, p: (str(next(counter)).encode(), 0))
    plain = C.compile_graph(graph, prog)
    return memo, plain, n_memo, len(fresh) - n_memo


def _assert_same(memo, plain):
    assert np.array_equal(memo.memory, plain.memory)
    assert len(memo.templates) == len(plain.templates)
    for a, b in zip(memo.templates, plain.templates, strict=True):
        for f in ("kind", "duration", "ipu", "busy_max", "busy_sum", "in_sum", "out_sum", "tiles_active",
                  "bytes_exchange", "bytes_sram", "bytes_ipu_link"):
            assert getattr(a, f) == getattr(b, f), f
        for f in ("tiles", "cycles", "bytes_in", "bytes_out"):
            x, y = getattr(a, f), getattr(b, f)
            assert (x is None and y is None) or np.array_equal(x, y), f
    assert [i.code_bytes for i in memo.progs] == [i.code_bytes for i in plain.progs]
    assert np.array_equal(memo.tile_need, plain.tile_need)


def test_copy_memo_on_rotated_tiles(monkeypatch):
    """A broadcast copy (multicast pieces, shared-bus pairs) placed at several tile offsets, one of
    them wrapping past the last tile: replayed on rotated tiles it equals the fresh compile."""
    target = Target.from_device("ipu-mk2", num_ipus=1)
    T = target.num_tiles
    g = Graph(target)
    progs = []
    n_src, reps = 8 * 40, 8
    n_dst = n_src * reps
    for i, r in enumerate((0, 100, T - 20, 7, 100)):
        x = g.add_variable(f"x{i}", (n_src,), "float16", mapping=M.linear(n_src, (np.arange(8) + r) % T))
        y = g.add_variable(f"y{i}", (n_dst,), "float16", mapping=M.linear(n_dst, (np.arange(64) + r) % T))
        bcast = np.tile(np.arange(n_src), reps)
        progs.append(P.Copy(TensorView(x, bcast, (n_dst,)), y))
        progs.append(P.Copy(TensorView(y, np.arange(n_src)[::-1].copy(), (n_src,)), x))
    memo, plain, n_memo, n_plain = _compile_both(monkeypatch, g, P.Sequence(progs))
    assert n_plain == len(progs) and n_memo < n_plain
    _assert_same(memo, plain)
