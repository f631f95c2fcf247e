"""The distinct-sends check (copies._distinct_sends) answers "every piece its own send" without a sort where no
two pieces start at one source element (copies._distinct_elems: a gather such as the matmul's partial sums, whose
pieces are disjoint but not in source order); its answer is the sort's, field for field, on gathers, multicasts,
pieces that share a first element with other lengths, and a source too wide for the mask."""

import numpy as np

import popvision_lite.emulator.compile as C
import popvision_lite.emulator.compile.copies as CO
from popvision_lite.emulator.compile.compiled import CopyPlan
from popvision_lite.emulator.models.emulated import EmulatorBackend
from popvision_lite.emulator.target import Target
from tests.emulator.compile.test_copy_memo import _assert_same


def _sorted_answer(monkeypatch, plan, cross):
    with monkeypatch.context() as m:
        m.setattr(CO, "_distinct_elems", lambda se, ln: False)
        return CO._distinct_sends(plan, cross)


def _same(got, want, trial) -> None:
    assert got[0] == want[0], trial
    assert got[1].dtype == want[1].dtype and np.array_equal(got[1], want[1]), trial
    assert (got[2] is None) == (want[2] is None), trial
    if want[2] is not None:
        for x, y in zip(got[2], want[2], strict=True):
            assert x.dtype == y.dtype and np.array_equal(x, y), trial


def _plan(rng, kind: str) -> CopyPlan:
    n = int(rng.integers(2, 400))
    ln = rng.integers(1, 9, n).astype(np.int64)
    if kind == "gather":  # disjoint pieces in a shuffled order, some gaps between them
        se = np.cumsum(ln + rng.integers(0, 3, n)) - ln
        se = se[rng.permutation(n)] + int(rng.integers(0, 50))
    elif kind == "multicast":  # some (element, length) pieces repeated
        se = np.cumsum(ln) - ln
        rep = rng.integers(0, n, int(rng.integers(1, max(n // 4, 2))))
        se[rep[1:]], ln[rep[1:]] = se[rep[0]], ln[rep[0]]
        se = se[rng.permutation(n)] if rng.random() < 0.5 else se
    elif kind == "same_start":  # two pieces start at one element with other lengths: distinct, but not by start
        se = np.cumsum(ln) - ln
        i, j = rng.choice(n, 2, replace=False)
        se[j], ln[j] = se[i], ln[i] + 1
        se = se[rng.permutation(n)]
    else:  # "wide": a source far wider than 32 slots a piece (the caller sorts)
        se = np.sort(rng.choice(10_000 * n, n, replace=False)).astype(np.int64)[rng.permutation(n)]
        ln = np.ones(n, np.int64)
    t = rng.integers(0, 8, n).astype(np.int64)
    return CopyPlan(se.astype(np.int64), np.arange(n, dtype=np.int64), ln, t, (t + rng.integers(0, 3, n)) % 8)


def test_distinct_sends_without_a_sort_is_the_sorted_answer(monkeypatch):
    rng = np.random.default_rng(11)
    taken = []
    real = CO._distinct_elems
    monkeypatch.setattr(CO, "_distinct_elems", lambda se, ln: taken.append(real(se, ln)) or taken[-1])
    fast = {k: 0 for k in ("gather", "multicast", "same_start", "wide")}
    multicast = shared_start = 0
    for trial in range(400):
        kind = list(fast)[trial % 4]
        plan = _plan(rng, kind)
        cross = plan.src_tile != plan.dst_tile if trial % 3 else np.ones(len(plan.length), bool)
        del taken[:]
        got = CO._distinct_sends(plan, cross)
        want = _sorted_answer(monkeypatch, plan, cross)
        _same(got, want, (trial, kind))
        fast[kind] += bool(taken and taken[0])
        sel = plan.src_elem[cross] if not cross.all() else plan.src_elem
        if taken and taken[0]:  # only where no two selected pieces start at one element
            assert len(np.unique(sel)) == len(sel), (trial, kind)
        multicast += want[2] is not None
        shared_start += len(np.unique(sel)) < len(sel)
    # the gathers take the fast path (when not in source order already); many trials multicast, or hold two
    # pieces starting at one element, and there the sort answers
    assert fast["gather"] >= 60 and fast["wide"] == 0 and multicast >= 50 and shared_start >= 100, (
        fast, multicast, shared_start)


def test_distinct_elems_is_exact_where_it_answers():
    rng = np.random.default_rng(3)
    for _ in range(300):
        n = int(rng.integers(2, 60))
        ln = rng.integers(1, 6, n).astype(np.int64)
        se = rng.integers(0, 3 * n, n).astype(np.int64)
        if CO._distinct_elems(se, ln):
            assert len(np.unique(se)) == n
    # pieces 4 long, 4 apart, shuffled: each in its own slot; one start moved onto another's: not distinct
    se = (np.arange(50, dtype=np.int64) * 4)[rng.permutation(50)]
    ln = np.full(50, 4, np.int64)
    assert CO._distinct_elems(se, ln)
    se[7] = se[8]
    assert not CO._distinct_elems(se, ln)


def test_matmul_partial_gathers_compile_the_same_without_the_sort(monkeypatch):
    """A K-split matmul's gather of partial sums takes the fast path, and the whole graph compiles to the same
    memory, steps, cycles, bytes and code bytes as with the sort."""
    t = Target.from_device("ipu-mk2")
    t.tiles_per_ipu = t.num_tiles = 64

    def graph():
        be = EmulatorBackend(t, "fp16")
        a = be.input("a", np.zeros((16, 2048), np.float16))
        b = be.input("b", np.zeros((2048, 64), np.float16))
        be.matmul(a, b, "mm")
        prog = be.program()
        for p in prog.programs:  # (the gathers' expanded path: without their op's description, decision 0480)
            if hasattr(p, "gather"):
                p.gather = None
        return be.graph, prog

    taken = []
    real = CO._distinct_elems
    monkeypatch.setattr(CO, "now", None, raising=False)  # (the copy being compiled)
    monkeypatch.setattr(CO, "_distinct_elems", lambda se, ln: taken.append((CO.now, real(se, ln))) or taken[-1][1])
    fresh = CO._compile_copy_fresh
    monkeypatch.setattr(CO, "_compile_copy_fresh", lambda c, info: setattr(CO, "now", info.prog.name) or fresh(c, info))
    a = C.compile_graph(*graph())
    assert any(ok for name, ok in taken if "gather_partials" in name)
    monkeypatch.setattr(CO, "_distinct_elems", lambda se, ln: False)
    b = C.compile_graph(*graph())
    _assert_same(a, b)


def test_code_counts_of_pieces_of_one_length_are_the_two_step_counts():
    """Every piece one length (a transpose's elements, equal rows: copy_plans.exchange_code_counts then compares
    no lengths): the packed counts are the two-step path's, with and without multicast, and the receive side alone
    is code_patterns' per tile."""
    from popvision_lite.emulator.compile.copy_plans import code_patterns, exchange_code_counts
    from tests.emulator.compile.test_copy_code_counts import _plan as _pattern_plan

    rng = np.random.default_rng(23)
    for trial in range(90):
        T = int(rng.choice([4, 16, 64]))
        n = int(rng.integers(3, 300))
        plan = _pattern_plan(rng, n, T, ordered=trial % 3 == 0)
        L = int(rng.choice([1, 4]))
        step_s, step_d = rng.choice([1, 1, 1, 2], n), rng.choice([1, 1, 3], n)
        plan.length[:] = L
        plan.src_elem[:] = np.cumsum(L * step_s) - L
        plan.dst_elem[:] = np.cumsum(L * step_d) - L
        if trial % 4 == 1:  # few distinct tiles: long runs of equal tile pairs (loops)
            plan.src_tile //= max(T // 2, 1)
            plan.dst_tile = plan.src_tile + 1
        src_addr, dst_addr = plan.src_elem * 2 + 3, plan.dst_elem
        cross = plan.src_tile != plan.dst_tile
        if cross.sum() >= 2:
            send = cross
            if trial % 2:
                rep = rng.random(n) < 0.3
                plan.src_elem[1:][rep[1:]] = plan.src_elem[:-1][rep[1:]]
                src_addr = plan.src_elem * 2 + 3
                send = cross & ~rep
            got = exchange_code_counts(plan, cross, send, src_addr, dst_addr, T)
            want = CO._code_counts_two_step(plan, cross, send, src_addr, dst_addr, T)
            for g, w in zip(got, want, strict=True):
                assert np.array_equal(g, w), trial
            assert int(got[1].sum()) > 0 or trial % 4 != 1
        plan.dst_tile = plan.src_tile.copy()  # on-tile pieces: the copy descriptors' receive side only
        n_pat, n_loop = exchange_code_counts(plan, np.ones(n, bool), None, src_addr, dst_addr, T)
        ps, _pd, cnt = code_patterns(plan, np.ones(n, bool), src_addr, dst_addr, T)
        assert np.array_equal(n_pat, np.bincount(ps, minlength=T)), trial
        assert np.array_equal(n_loop, np.bincount(ps[cnt > 1], minlength=T)), trial
