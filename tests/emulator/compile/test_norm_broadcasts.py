"""The norms' per-channel vectors replicated to their row tiles (ops/basic.py ``_replicate_rows``: batch norm's
scale, shift, mean, invstd and gradient coefficients, layer norm's gamma and beta) are broadcasts compiled from
their compact form (copy_broadcasts.broadcast_plan, decision 0440): the compact plan expands to copy_pieces' plan
field for field, and the compiled graph (memory per tile and category, steps, cycles, bytes, code bytes) is the
expanded compile's, on vectors spread over several tiles (pieces cut at their interval starts) and on one."""

import numpy as np
import pytest

import popvision_lite.emulator.compile as C
import popvision_lite.emulator.compile.copies as CO
import popvision_lite.emulator.compile.copy_broadcasts as CB
from popvision_lite.emulator.compile.copy_plans import copy_pieces
from popvision_lite.emulator.models.emulated import EmulatorBackend
from tests.emulator.compile.test_conv_broadcasts import _copies, _small_target
from tests.emulator.compile.test_copy_memo import _assert_same


def _norm_graph(kind: str, rows: int, c: int, tiles: int):
    be = EmulatorBackend(_small_target(tiles), "fp16")
    x = be.input("x", np.zeros((rows, c), np.float16))
    g = be.input("g", np.ones(c, np.float32 if kind == "bn" else np.float16))
    b = be.input("b", np.zeros(c, np.float32 if kind == "bn" else np.float16))
    if kind == "bn":
        y, mean, invstd = be.batch_norm(x, g, b, "bn")
        be.batch_norm_bwd(x, y, mean, invstd, g, "bn_bwd")
    else:
        y = be.layer_norm(x, g, b, "ln")
        be.layer_norm_bwd(x, g, y, "ln_bwd")
    return be.graph, be.program()


@pytest.mark.parametrize("kind,rows,c,tiles", [("bn", 784, 64, 48), ("bn", 196, 256, 96), ("ln", 512, 96, 64),
                                               ("ln", 128, 1024, 32)])
def test_norm_vectors_broadcast_compact_and_equal(monkeypatch, kind, rows, c, tiles):
    g, prog = _norm_graph(kind, rows, c, tiles)
    rep = [p for p in _copies(prog) if "/broadcast_" in p.name]
    assert rep and all(p.broadcast for p in rep)
    for p in rep:
        bp = CB.broadcast_plan(p.src, p.dst, g.target.num_tiles)
        assert bp is not None and len(bp.se) < len(CB.expand(bp).length)  # (the vector listed once, not per tile)
        want, got = copy_pieces(p.src, p.dst), CB.expand(bp)
        for f in ("src_elem", "dst_elem", "length", "src_tile", "dst_tile", "src_k", "dst_k"):
            assert np.array_equal(getattr(got, f), getattr(want, f)), f
    compact = []
    orig = CO._compile_broadcast
    monkeypatch.setattr(CO, "_compile_broadcast", lambda c_, info, bp: compact.append(orig(c_, info, bp)) or compact[-1])
    a = C.compile_graph(g, prog)
    assert compact and all(compact)
    n = len(compact)
    g, prog = _norm_graph(kind, rows, c, tiles)
    for p in _copies(prog):
        p.broadcast = False
    b = C.compile_graph(g, prog)
    assert len(compact) == n
    _assert_same(a, b)
