"""The even matmul's B broadcast straight from a weight's blocks is a Windows source into the whole staging buffer,
which the compile takes in compact form (compile/copy_broadcasts.py, decision 0440), and compiles to exactly what
the same copy written block by block (a Blocks source into Blocks of the staging buffer, compiled from its
expanded pieces) compiles to."""

import numpy as np

import popvision_lite.emulator.compile as C
import popvision_lite.emulator.compile.copies as CO
import popvision_lite.emulator.compile.copy_broadcasts as CB
from popvision_lite.emulator import Graph, Target
from popvision_lite.emulator import programs as P
from popvision_lite.emulator.graph import Windows
from popvision_lite.emulator.ops.context import OpContext
from popvision_lite.emulator.ops.matmul import matmul
from tests.emulator.compile.test_copy_memo import _assert_same


def _broadcast_b():
    """A (736, 64) @ (64, 64) matmul with a fresh weight B: an even 46 x 8 x 4 split (blocks 16 x 8 x 16); its graph
    and its B broadcast copy."""
    target = Target.from_device("ipu-mk2", num_ipus=1)
    g = Graph(target)
    ctx = OpContext(g, "fp16")
    A = g.add_variable("A", (736, 64), "float16", mapping=ctx.linear_mapping(736 * 64))
    B = g.add_variable("B", (64, 64), "float16", mapping=ctx.linear_mapping(64 * 64))
    matmul(ctx, A, B, "mm")
    assert ctx.records[-1]["plan"].startswith("M=46 N=8 K=4 split")
    (copy,) = [p for p in ctx.programs if p.name == "mm/broadcast_b"]
    return g, copy


def test_weight_blocks_broadcast_compact():
    g, copy = _broadcast_b()
    assert isinstance(copy.src, Windows) and copy.src.block_shape == (16, 8)
    assert copy.dst.contiguous == (0, copy.dst.tensor.size)
    # tiles in (K chunk, M block, N block) order; tile i takes block (K chunk, N block) of B
    k, _m, n = np.unravel_index(np.arange(4 * 46 * 8), (4, 46, 8))
    assert np.array_equal(copy.src.origins, np.stack([k * 16, n * 8], 1))
    bp = CB.broadcast_plan(copy.src, copy.dst, g.target.num_tiles)
    assert bp is not None and len(bp.count) == 4 * 8  # one block per (K chunk, N block), each to 46 tiles
    assert np.array_equal(np.bincount(bp.rep), np.full(32, 46))


def test_weight_blocks_broadcast_compiles_as_the_blocks_copy(monkeypatch):
    compact = []
    orig = CO._compile_broadcast
    monkeypatch.setattr(CO, "_compile_broadcast", lambda c, info, bp: compact.append(orig(c, info, bp)) or compact[-1])
    g, copy = _broadcast_b()
    a = C.compile_graph(g, P.Sequence([copy]))
    assert compact == [True]
    # the same copy written block by block: block origins as block indices, tile t's block b_rep[t]
    src, b_rep = copy.src, copy.dst.tensor
    bks, bn = src.block_shape
    index = src.origins // np.array([bks, bn])
    T = len(index)
    blocks = P.Copy(src.tensor.blocks((bks, bn), index),
                    b_rep.blocks((1, bks, bn), np.stack([np.arange(T), 0 * index[:, 0], 0 * index[:, 0]], 1)),
                    name=copy.name, op=copy.op, broadcast=True)
    b = C.compile_graph(g, P.Sequence([blocks]))
    assert compact == [True]  # (not compact: a Blocks source)
    _assert_same(a, b)
