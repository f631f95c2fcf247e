"""copy_plans.exchange_code_counts with what its caller already read (``one_length``: the plan's pieces of one
length) gives the counts it finds on its own; a negative tile position still declines the packed key (None); and
a general-path copy hands it the plan's own answer (copies._compile_copy_fresh reads the lengths once)."""

from __future__ import annotations

import numpy as np

from popvision_lite.emulator import Target
from popvision_lite.emulator import mapping as M
from popvision_lite.emulator import programs as P
from popvision_lite.emulator.compile import compile_graph
from popvision_lite.emulator.compile import copies as CO
from popvision_lite.emulator.compile.compiled import CopyPlan
from popvision_lite.emulator.compile.copy_plans import exchange_code_counts
from popvision_lite.emulator.graph import Graph, TensorView


def _plan(rng, n: int, T: int, one: bool) -> CopyPlan:
    length = np.full(n, 4, np.int64) if one else rng.choice([2, 4, 4, 8], n)
    src = np.cumsum(length * rng.choice([1, 1, 2], n)) - length
    dst = np.cumsum(length * rng.choice([1, 1, 3], n)) - length
    return CopyPlan(src, dst, length, rng.integers(0, T, n), rng.integers(0, T, n))


def test_known_one_length_gives_the_counts_found():
    rng = np.random.default_rng(31)
    for trial in range(80):
        T = int(rng.choice([4, 16, 1472]))
        plan = _plan(rng, int(rng.integers(2, 300)), T, one=trial % 2 == 0)
        cross = plan.src_tile != plan.dst_tile
        if cross.sum() < 2:
            continue
        send = cross if trial % 3 else cross & (rng.random(len(cross)) < 0.7)
        addr = (plan.src_elem, plan.dst_elem) if trial % 4 else (plan.src_elem, plan.src_elem)
        one = bool(np.all(plan.length == plan.length[0]))
        want = exchange_code_counts(plan, cross, send, *addr, T)
        got = exchange_code_counts(plan, cross, send, *addr, T, one)
        assert want is not None and got is not None
        for w, g in zip(want, got, strict=True):
            assert np.array_equal(w, g), trial


def test_a_negative_position_declines_the_packed_key():
    rng = np.random.default_rng(2)
    plan = _plan(rng, 50, 16, one=False)
    cross = np.ones(50, bool)
    src = plan.src_elem.copy()
    src[17] = -3
    assert exchange_code_counts(plan, cross, cross, src, plan.dst_elem, 16) is None
    assert exchange_code_counts(plan, cross, cross, plan.src_elem, plan.dst_elem, 16) is not None


def test_the_general_path_hands_the_plans_own_answer(monkeypatch):
    """Copies of one length and of several between two layouts: each exchange-code call is told what the plan
    holds."""
    seen = []
    real = CO.exchange_code_counts

    def spy(plan, mask, send, src_addr, dst_addr, T, one_length=None):
        seen.append((one_length, bool(np.all(plan.length == plan.length[0]))))
        return real(plan, mask, send, src_addr, dst_addr, T, one_length)

    monkeypatch.setattr(CO, "exchange_code_counts", spy)
    rng = np.random.default_rng(5)
    target = Target.from_device("ipu-mk2", num_ipus=1)
    for trial in range(6):
        g = Graph(target)
        n = 960
        step = (8, 16, 24)[trial % 3]
        a = g.add_variable(f"a{trial}", (n,), "float32", mapping=M.intervals(
            (np.arange(n // step) + trial) % 40, np.arange(0, n, step), np.arange(step, n + 1, step)))  # (no two alike)
        cuts = np.sort(rng.choice(np.arange(1, n), 30, replace=False)) if trial % 2 else np.arange(5 * step, n, 5 * step)
        b = g.add_variable(f"b{trial}", (n,), "float32", mapping=M.intervals(
            rng.integers(0, 40, len(cuts) + 1), np.concatenate([[0], cuts]), np.concatenate([cuts, [n]])))
        compile_graph(g, P.Copy(TensorView(a, np.arange(n), (n,)), TensorView(b, np.arange(n), (n,)), f"c{trial}"))
    assert len(seen) >= 6 and all(k == w for k, w in seen), seen
    assert {w for _k, w in seen} == {True, False}, seen
