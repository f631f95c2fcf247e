"""A copy from a whole tensor to a whole tensor laid out alike (a graph function's results, and its arguments
already in the parameters' layout) compiled from the mapping alone (copies._compile_same_layout): the same
pieces, memory, steps, cycles, bytes and code bytes as the general path (pieces cut, tile positions looked up,
the on-tile descriptors' patterns found by sorting), on layouts with several intervals per tile out of tile
order, runs of equal lengths, and on two IPUs."""

from __future__ import annotations

import numpy as np
import pytest

import popvision_lite.emulator.compile as C
import popvision_lite.emulator.compile.copies as CO
from popvision_lite.emulator import Target
from popvision_lite.emulator import programs as P
from popvision_lite.emulator.graph import Graph, TensorView
from popvision_lite.emulator.mapping import Mapping
from tests.emulator.compile.test_copy_memo import _assert_same


def _layout(rng, n: int, k: int, tiles: int, kind: str):
    """k intervals over n elements: lengths random, or in runs of one length (loops); tiles random (out of tile
    order, several intervals a tile) or ascending (a linear layout)."""
    if kind == "runs":
        ln = np.repeat(rng.integers(1, 9, k // 6 + 1), 6)[:k]
        start = np.concatenate([[0], np.cumsum(ln)[:-1]])
        stop, n = start + ln, int(ln.sum())
    else:
        cuts = np.sort(rng.choice(np.arange(1, n), k - 1, replace=False))
        start, stop = np.concatenate([[0], cuts]), np.concatenate([cuts, [n]])
    tile = np.sort(rng.integers(0, tiles, k)) if kind == "ascending" else rng.integers(0, tiles, k)
    if kind == "runs":
        tile = np.repeat(rng.integers(0, tiles, k // 4 + 1), 4)[:k]  # (several pieces of a tile in a row)
    return n, tile, start, stop


@pytest.mark.parametrize("ipus", [1, 2])
def test_whole_copies_of_one_layout_compile_as_the_general_path(monkeypatch, ipus):
    target = Target.from_device("ipu-mk2", num_ipus=ipus)
    T = target.num_tiles
    rng = np.random.default_rng(23 + ipus)
    taken = []
    real = CO._compile_same_layout
    monkeypatch.setattr(CO, "_compile_same_layout", lambda c, info: taken.append(real(c, info)) or taken[-1])
    for trial, kind in enumerate(["random", "ascending", "runs"] * 3):
        n, tile, start, stop = _layout(rng, int(rng.integers(2000, 9000)), int(rng.integers(40, 400)),
                                       int(rng.integers(2, T)), kind)

        def graph(tile=tile, start=start, stop=stop, n=n):
            g = Graph(target)
            m = Mapping(tile, start, stop)
            a = g.add_variable("a", (n,), "float16", mapping=m)
            b = g.add_variable("b", (n,), "float16", mapping=m)  # (one mapping object: a call's result)
            # (equal arrays of another mapping; another element size, so not replayed from the first copy)
            a4 = g.add_variable("a4", (n,), "float32", mapping=m)
            d = g.add_variable("d", (n // 2, 2) if n % 2 == 0 else (n,), "float32",
                               mapping=Mapping(tile.copy(), start.copy(), stop.copy()))
            return g, P.Sequence([P.Copy(a, b), P.Copy(a4, d)])

        del taken[:]
        fast = C.compile_graph(*graph())
        assert taken == [True, True], (trial, kind)
        monkeypatch.setattr(CO, "_compile_same_layout", lambda c, info: False)
        plain = C.compile_graph(*graph())
        monkeypatch.setattr(CO, "_compile_same_layout", lambda c, info: taken.append(real(c, info)) or taken[-1])
        _assert_same(fast, plain)
        for pid, plan in fast.copy_plans.items():  # (kept for outlining: the pieces of the general path)
            want = plain.copy_plans[pid]
            for f in ("src_elem", "dst_elem", "length", "src_tile", "dst_tile", "src_k", "dst_k"):
                x, y = getattr(plan, f), getattr(want, f)
                assert x.dtype == y.dtype and np.array_equal(x, y), (trial, f)


def test_other_copies_take_the_general_path():
    """Not whole, not alike, or one interval: the general path (nothing done by the fast one)."""
    target = Target.from_device("ipu-mk2", num_ipus=1)
    rng = np.random.default_rng(5)
    n, tile, start, stop = _layout(rng, 3000, 60, 40, "random")
    g = Graph(target)
    m = Mapping(tile, start, stop)
    a = g.add_variable("a", (n,), "float16", mapping=m)
    b = g.add_variable("b", (n,), "float16", mapping=m)
    other = Mapping(tile[::-1].copy(), start, stop)
    c = g.add_variable("c", (n,), "float16", mapping=other)
    one = Mapping([3], [0], [n])
    e = g.add_variable("e", (n,), "float16", mapping=one)
    f = g.add_variable("f", (n,), "float16", mapping=one)
    idx = np.arange(n - 1)
    progs = [P.Copy(TensorView(a, idx, (n - 1,)), TensorView(b, idx, (n - 1,))),  # not whole
             P.Copy(TensorView(a, idx[::-1].copy(), (n - 1,)), TensorView(b, idx, (n - 1,))),  # reversed
             P.Copy(a, c),  # another layout
             P.Copy(e, f)]  # one interval
    seen = []
    real = CO._compile_same_layout

    def spy(cc, info):
        seen.append(real(cc, info))
        return seen[-1]

    CO._compile_same_layout, old = spy, CO._compile_same_layout
    try:
        C.compile_graph(g, P.Sequence(progs))
    finally:
        CO._compile_same_layout = old
    assert seen == [False] * 4
