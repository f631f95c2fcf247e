"""The copy's pieces on its two tenth-pass fast paths (copy_plans._cut_one_run: a whole-tensor copy, one run a
side; copy_plans._splice_cut_runs: paired runs of which few cross an interval boundary) are the general cut's
(_cut_runs: every run cut at every boundary of both sides), field for field, dtype included, in copy order."""

from __future__ import annotations

import numpy as np
import pytest

from popvision_lite.emulator import Target
from popvision_lite.emulator import mapping as M
from popvision_lite.emulator.compile import copy_plans as S
from popvision_lite.emulator.graph import Graph, TensorView

FIELDS = ("src_elem", "dst_elem", "length", "src_tile", "dst_tile", "src_k", "dst_k")


@pytest.fixture(scope="module")
def mk2():
    return Target.from_device("ipu-mk2", num_ipus=1)


def _assert_same(got, want, trial) -> None:
    for f in FIELDS:
        g, w = getattr(got, f), getattr(want, f)
        assert g.dtype == w.dtype and np.array_equal(g, w), (trial, f)


def _mapping(rng, size: int, starts: np.ndarray) -> M.Mapping:
    starts = np.asarray(starts, np.int64)
    return M.intervals(rng.integers(0, 16, len(starts)), starts, np.append(starts[1:], size))


def _starts(rng, size: int, k: int) -> np.ndarray:
    cuts = np.sort(rng.choice(np.arange(1, size), size=min(k, size - 1), replace=False))
    return np.concatenate([[0], cuts]).astype(np.int64)


def _general(a: int, b: int, n: int, sm, dm):
    one = np.ones(1, np.int64)
    return S._cut_runs(one * a, one * n, sm, one * b, one * n, dm)[0]


def test_one_run_copy_where_one_side_starts_are_among_the_others():
    """A fine layout copied to a coarse one and back (the residual and ReLU gradients' operands): the pieces are
    the fine side's intervals, the coarse side's interval advancing at its own starts; runs starting inside an
    interval, at other offsets on the two sides, and a side with no start inside the run."""
    rng = np.random.default_rng(5)
    for trial in range(100):
        size = int(rng.integers(20, 300))
        fine = _starts(rng, size, int(rng.integers(4, 40)))
        coarse = np.sort(rng.choice(fine, size=int(rng.integers(1, len(fine) + 1)), replace=False))
        coarse[0] = 0
        shift = int(rng.integers(0, 3)) if trial % 3 == 0 else 0  # the same layout further along the other tensor
        fm, cm_ = _mapping(rng, size, fine), _mapping(rng, size + shift, np.append(coarse[:1], coarse[1:] + shift))
        n = int(rng.integers(1, size + 1))
        a = int(rng.integers(0, size - n + 1))
        b = a + shift
        sm, dm = (fm, cm_) if trial % 2 else (cm_, fm)
        aa, bb = (a, b) if trial % 2 else (b, a)
        got = S._cut_one_run(aa, bb, n, sm, dm)
        _assert_same(got, _general(aa, bb, n, sm, dm), trial)
        fine_inside = int(np.count_nonzero((fine > a) & (fine < a + n)))
        assert len(got.length) == fine_inside + 1, trial  # the fine side's intervals: no merge of the two sides


def test_one_run_copy_of_two_unrelated_layouts():
    """Two layouts whose starts interleave, coincide in part, or one side with none inside the run: the two
    sides' starts merged, each piece's interval on each side counted from its run's first interval."""
    rng = np.random.default_rng(17)
    merged = 0
    for trial in range(150):
        size = int(rng.integers(2, 250))
        sm = _mapping(rng, size, _starts(rng, size, int(rng.integers(0, 30))))
        dsize = size + int(rng.integers(0, 20))
        dm = _mapping(rng, dsize, _starts(rng, dsize, int(rng.integers(0, 30))))
        n = int(rng.integers(1, size + 1))
        a, b = int(rng.integers(0, size - n + 1)), int(rng.integers(0, dsize - n + 1))
        got = S._cut_one_run(a, b, n, sm, dm)
        _assert_same(got, _general(a, b, n, sm, dm), trial)
        cs = sm.start[(sm.start > a) & (sm.start < a + n)] - a
        cd = dm.start[(dm.start > b) & (dm.start < b + n)] - b
        merged += not (set(cs) <= set(cd) or set(cd) <= set(cs))
    assert merged >= 50  # most trials take the merge, not the one-side path


def _few_cut_runs(rng, trial: int):
    """Paired runs (copy order: a random permutation of runs laid apart on each side) of which a few cross an
    interval boundary on one side, some on the source, some on the destination, some more than one boundary."""
    R = int(rng.integers(40, 120))
    lens = rng.integers(4, 12, R)
    out = []
    for side in range(2):
        step = lens + int(rng.integers(0, 3))
        order = rng.permutation(R)
        at = np.empty(R, np.int64)
        at[order] = np.cumsum(step[order]) - step[order]
        size = int(at.max() + step.max() + 1)
        starts = [0]
        crossing = rng.choice(R, size=int(rng.integers(1, max(2, R // 16))), replace=False)
        if side == 1:  # the other side crosses at other runs only (a run cut on both sides is another path)
            crossing = np.setdiff1d(crossing, out[0][2])
        for r in crossing:
            starts += list(at[r] + 1 + rng.choice(lens[r] - 1, size=int(rng.integers(1, 3)), replace=False))
        ends = at + lens  # other interval starts: at runs' ends and in the gaps only (not inside an uncut run)
        starts += list(rng.choice(ends, size=R // 3, replace=False))
        mp = _mapping(rng, size, np.unique(starts))
        out.append((at, mp, crossing))
    (qs, sm, _), (qd, dm, _) = out
    return qs, qd, lens.astype(np.int64), sm, dm


def _spy(monkeypatch, name: str) -> list:
    """The argument tuples of every call of ``copy_plans.<name>`` from here on (the function still runs)."""
    calls, real = [], getattr(S, name)
    monkeypatch.setattr(S, name, lambda *a: calls.append(a) or real(*a))
    return calls


def test_few_cut_runs_spliced_among_the_whole_ones(monkeypatch):
    """Where at most one run in 8 crosses a boundary (the stem's im2col windows), only those are cut and written
    over their places among the whole runs: the pieces, in copy order, of cutting every run."""
    rng = np.random.default_rng(23)
    spliced = _spy(monkeypatch, "_splice_cut_runs")
    for trial in range(60):
        qs, qd, ql, sm, dm = _few_cut_runs(rng, trial)
        ks, kd = M.interval_index(sm.start, qs), M.interval_index(dm.start, qd)
        ok_s, ok_d = qs + ql <= sm.stop[ks], qd + ql <= dm.stop[kd]
        assert (ok_s | ok_d).all() and not (ok_s & ok_d).all()
        before = len(spliced)
        got = S._cut_one_side(qs, qd, ql, ks, kd, ok_s, ok_d, sm, dm)
        assert len(spliced) == before + 1, trial
        want, _run = S._cut_runs(qs, ql, sm, qd, ql, dm)
        _assert_same(got, want, trial)
        assert len(got.length) > len(qs)


def test_copy_of_few_crossing_runs_takes_the_splice(mk2, monkeypatch):
    """Through the copy's pieces (copy_pieces on two Regions endpoints of a graph's tensors): the splice is taken
    and its pieces are the general cut's."""
    from popvision_lite.emulator.compile import copy_pieces

    rng = np.random.default_rng(31)
    spliced = _spy(monkeypatch, "_splice_cut_runs")
    for trial in range(10):
        qs, qd, ql, sm, dm = _few_cut_runs(rng, trial)
        g = Graph(mk2)
        a = g.add_variable(f"a{trial}", (int(sm.stop[-1]),), "float32", mapping=M.intervals(sm.tile % 8, sm.start,
                                                                                              sm.stop))
        b = g.add_variable(f"b{trial}", (int(dm.stop[-1]),), "float32", mapping=M.intervals(dm.tile % 8, dm.start,
                                                                                              dm.stop))
        src, dst = a.regions(qs, ql), b.regions(qd, ql)
        got = copy_pieces(src, dst)
        want, _run = S._cut_runs(qs, ql, a.mapping, qd, ql, b.mapping)
        _assert_same(got, want, trial)
    assert len(spliced) == 10


def test_whole_tensor_copy_of_views_takes_the_one_run_cut(mk2, monkeypatch):
    """A whole-tensor copy between two tensors of a graph (one run a side, crossing on both): cut by
    _cut_one_run, the general cut's pieces."""
    from popvision_lite.emulator.compile import copy_pieces

    rng = np.random.default_rng(37)
    calls = _spy(monkeypatch, "_cut_one_run")
    for trial in range(10):
        g = Graph(mk2)
        n = int(rng.integers(100, 400))
        fine = _starts(rng, n, 30)
        a = g.add_variable(f"a{trial}", (n,), "float32", mapping=_mapping(rng, n, fine))
        coarse = fine[:: int(rng.integers(2, 5))] if trial % 2 else _starts(rng, n, 7)
        b = g.add_variable(f"b{trial}", (n,), "float32", mapping=M.intervals(rng.integers(0, 8, len(coarse)), coarse,
                                                                          np.append(coarse[1:], n)))
        g.set_mapping(a, M.intervals(a.mapping.tile % 8, a.mapping.start, a.mapping.stop))
        src, dst = TensorView(a, np.arange(n), (n,)), TensorView(b, np.arange(n), (n,))
        got = copy_pieces(src, dst)
        want = _general(0, 0, n, a.mapping, b.mapping)
        _assert_same(got, want, trial)
    assert len(calls) == 10


def test_runs_joined_on_one_side_paired_like_the_general_cut(mk2, monkeypatch):
    """One side's runs are joins of the other's consecutive runs (ResNet's Blocks-to-Blocks B broadcasts: a
    destination block per tile, source rows from B's tiles): the coarse side is cut to the fine side's runs and
    paired, the pieces those of cutting both sides' runs; source or destination the fine side, runs crossing
    interval boundaries too; runs that do not nest take the general cut."""
    from popvision_lite.emulator.compile import copy_pieces

    rng = np.random.default_rng(41)
    nested = []
    real = S._nested_runs
    monkeypatch.setattr(S, "_nested_runs", lambda *a: nested.append(r := real(*a)) or r)
    kinds = set()
    for trial in range(40):
        g = Graph(mk2)
        R = int(rng.integers(6, 40))
        fl = rng.integers(1, 9, R).astype(np.int64)
        joins = np.sort(rng.choice(np.arange(1, R), size=int(rng.integers(1, R - 1)), replace=False))
        cl = np.add.reduceat(fl, np.concatenate([[0], joins]))
        if trial % 4 >= 2:  # not nested: one coarse run boundary moved inside a fine run
            k = int(rng.integers(0, len(cl) - 1))
            shift = 1 if cl[k + 1] > 1 else -1
            cl[k] += shift
            cl[k + 1] -= shift
        views = []
        for name, lens in (("f", fl), ("c", cl)):
            gap = rng.integers(0, 3, len(lens))
            order = rng.permutation(len(lens))
            step = lens[order] + gap
            at = np.empty(len(lens), np.int64)
            at[order] = np.cumsum(step) - step
            size = int((at + lens).max()) + 2
            starts = np.unique(np.concatenate([[0], rng.choice(np.arange(1, size), size=int(rng.integers(0, size // 3)),
                                                                 replace=False)]))
            t = g.add_variable(f"{name}{trial}", (size,), "float32",
                               mapping=M.intervals(rng.integers(0, 8, len(starts)), starts, np.append(starts[1:], size)))
            views.append((t, t.regions(at, lens), at, lens))
        (ft, fv, fs, _), (ct, cv, cs_, _) = views
        src, dst = (fv, cv) if trial % 2 == 0 else (cv, fv)
        before = len(nested)
        got = copy_pieces(src, dst)
        (st_, sv_s, ss, sl), (dt_, sv_d, ds, dl) = (views if trial % 2 == 0 else views[::-1])
        want, _run = S._cut_runs(ss, sl, st_.mapping, ds, dl, dt_.mapping)
        _assert_same(got, want, trial)
        assert len(nested) == before + 1, trial
        kinds.add((trial % 2, nested[-1] is not None))
    assert kinds == {(0, True), (1, True), (0, False), (1, False)}
