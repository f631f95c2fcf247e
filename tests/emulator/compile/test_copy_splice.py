"""A copy of field endpoints whose source vertices span mapping intervals (the stem's im2col windows): the source's
runs and their intervals found once (copy_plans._vertex_intervals, handed to _copy_pieces_runs) and the few cut
runs spliced among the whole ones by a masked write (copy_plans._splice_cut_runs) give the general cut's pieces
(_cut_runs: every run cut at every boundary of both sides), field for field, dtype included, in copy order; and
_cut_runs of paired runs (one lengths array for both sides) cuts them as it cuts unpaired ones."""

from __future__ import annotations

import numpy as np
import pytest

from popvision_lite.emulator import Target
from popvision_lite.emulator import mapping as M
from popvision_lite.emulator.compile import copy_plans as S
from popvision_lite.emulator.graph import Graph, Regions

FIELDS = ("src_elem", "dst_elem", "length", "src_tile", "dst_tile", "src_k", "dst_k")


@pytest.fixture(scope="module")
def mk2():
    return Target.from_device("ipu-mk2", num_ipus=1)


def _tensor(g, rng, name: str, n: int, cuts: int):
    at = np.sort(rng.choice(np.arange(1, n), size=min(cuts, n - 1), replace=False))
    return g.add_variable(name, (n,), "float32", mapping=M.intervals(
        rng.integers(0, 8, len(at) + 1), np.concatenate([[0], at]), np.concatenate([at, [n]])))


def _regions(rng, t, sizes: np.ndarray, spaced: bool) -> Regions:
    """One region a vertex of the given sizes: apart in a random order, or overlapping windows (a gather's)."""
    if spaced:
        order = rng.permutation(len(sizes))
        step = sizes[order] + rng.integers(0, 3, len(sizes))
        at = np.empty(len(sizes), np.int64)
        at[order] = np.cumsum(step) - step
    else:
        at = rng.integers(0, t.size - int(sizes.max()) + 1, len(sizes))
    return Regions(t, at, sizes)


def _want(src, dst):
    ss, sl, sm = S._runs_and_mapping(src)
    ds, dl, dm = S._runs_and_mapping(dst)
    return S._cut_runs(ss, sl, sm, ds, dl, dm)[0]


def test_field_copy_with_few_cut_runs_is_the_general_cut(mk2, monkeypatch):
    """Regions to Regions, one run a vertex, sizes alike on both sides: few of the source's (or destination's)
    runs cross an interval boundary (spliced), many do (the per-run path), or the source's runs cross on both
    sides; the spliced path is taken in most trials, and with the source's runs handed in."""
    rng = np.random.default_rng(7)
    spliced, handed = [], []
    real_splice, real_runs = S._splice_cut_runs, S._copy_pieces_runs
    monkeypatch.setattr(S, "_splice_cut_runs", lambda *a: spliced.append(len(a[5])) or real_splice(*a))
    monkeypatch.setattr(S, "_copy_pieces_runs",
                        lambda *a: handed.append(len(a) > 3 and a[3] is not None) or real_runs(*a))
    for trial in range(120):
        g = Graph(mk2)
        v = int(rng.integers(20, 200))
        sizes = rng.integers(1, 6, v)
        n = int(3 * sizes.sum()) + 8
        few = trial % 3 != 2  # few boundaries in a large tensor: few runs cut
        a = _tensor(g, rng, f"a{trial}", n, int(rng.integers(1, 6)) if few else int(rng.integers(20, 60)))
        b = _tensor(g, rng, f"b{trial}", n, int(rng.integers(0, 4)) if trial % 2 else int(rng.integers(10, 40)))
        src = _regions(rng, a, sizes, spaced=trial % 4 != 3)
        dst = _regions(rng, b, sizes, spaced=True)
        before = len(spliced)
        got = S.copy_pieces(src, dst)
        want = _want(src, dst)
        for f in FIELDS:
            gf, wf = getattr(got, f), getattr(want, f)
            assert gf.dtype == wf.dtype and np.array_equal(gf, wf), (trial, f)
        if len(spliced) > before:
            assert 0 < spliced[-1] * 8 <= v, trial  # (the cut runs, few)
    assert len(spliced) >= 30 and sum(handed) >= 60, (len(spliced), sum(handed))


def test_splice_places_every_runs_first_piece():
    """_splice_cut_runs on its own: whole runs and cut runs at the start, the end and side by side (including
    every run cut but one), against cutting every run."""
    rng = np.random.default_rng(19)
    for trial in range(200):
        m = int(rng.integers(1, 30))
        ql = rng.integers(1, 9, m)
        qs = np.cumsum(ql + 1) - ql - 1  # (apart: no run joins the next)
        size = int(qs[-1] + ql[-1]) + 2
        starts = np.sort(rng.choice(np.arange(1, size), size=int(rng.integers(1, size - 1)), replace=False))
        sm = M.intervals(rng.integers(0, 8, len(starts) + 1), np.concatenate([[0], starts]),
                         np.concatenate([starts, [size]]))
        dm = M.intervals(np.zeros(1, np.int64), np.zeros(1, np.int64), np.array([size]))  # (one interval)
        ks = M.interval_index(sm.start, qs)
        kd = M.interval_index(dm.start, qs)
        ok_s = qs + ql <= sm.stop[ks]
        cut = np.nonzero(~ok_s)[0]
        if len(cut) == 0:
            continue
        ok_d = np.ones(m, bool)
        counts = (S._side_cuts(qs[cut], ql[cut], ks[cut], ok_s[cut], sm), np.zeros(len(cut), np.int64))
        sub = S._cut_one_side(qs[cut], qs[cut], ql[cut], ks[cut], kd[cut], ok_s[cut], ok_d[cut], sm, dm, counts)
        got = S._splice_cut_runs(qs, qs, ql, ks, kd, cut, counts[0] + 1, sub, sm, dm)
        want = S._cut_runs(qs, ql, sm, qs, ql.copy(), dm)[0]  # (unpaired: two arrays)
        for f in FIELDS:
            gf, wf = getattr(got, f), getattr(want, f)
            assert gf.dtype == wf.dtype and np.array_equal(gf, wf), (trial, f)


def test_vertex_intervals_runs_are_the_runs_searched(mk2):
    """_vertex_intervals' runs (one run a vertex, every size positive) are _runs_and_mapping's, their intervals
    the searched ones and inside-ness the run's end against its interval's stop; none with an empty region;
    its first five arrays are _whole_vertex's."""
    rng = np.random.default_rng(3)
    for trial in range(60):
        g = Graph(mk2)
        v = int(rng.integers(1, 80))
        sizes = rng.integers(0 if trial % 5 == 0 else 1, 6, v)
        t = _tensor(g, rng, f"t{trial}", int(3 * sizes.sum()) + 8, int(rng.integers(1, 30)))
        ep = _regions(rng, t, sizes, spaced=trial % 2 == 0)
        out = S._vertex_intervals(ep)
        for x, y in zip(out[:5], S._whole_vertex(ep), strict=True):
            assert x.dtype == y.dtype and np.array_equal(x, y), trial
        runs = out[5]
        if int(sizes.min()) == 0:
            assert runs is None, trial
            continue
        ss, sl, sm = S._runs_and_mapping(ep)
        ks = np.searchsorted(sm.start, ss, side="right") - 1
        for x, y in zip(runs, (ss, sl, ks, ss + sl <= sm.stop[ks]), strict=True):
            assert x.dtype == y.dtype and np.array_equal(x, y), trial


def test_paired_runs_are_cut_as_unpaired_ones():
    """_cut_runs given one lengths array for both sides (paired runs: one run-offset list, one search) cuts them
    as it cuts the same runs given two equal arrays: the pieces, their intervals and their runs; runs crossing
    boundaries on both sides, on one, on none, and empty runs among them."""
    rng = np.random.default_rng(41)
    for trial in range(150):
        m = int(rng.integers(1, 40))
        ql = rng.integers(0 if trial % 7 == 0 else 1, 12, m)
        size = int(ql.sum()) * 3 + 16
        qs = rng.permutation(np.cumsum(ql + 2) - ql - 2)[:m] if trial % 2 else np.cumsum(ql + 1) - ql - 1
        qd = np.cumsum(ql) - ql + int(rng.integers(0, 5))
        sm, dm = (M.intervals(rng.integers(0, 8, len(a) + 1), np.concatenate([[0], a]), np.concatenate([a, [size]]))
                  for a in (np.sort(rng.choice(np.arange(1, size), size=int(rng.integers(0, 30)), replace=False))
                            for _ in range(2)))
        got, got_run = S._cut_runs(qs, ql, sm, qd, ql, dm)
        want, want_run = S._cut_runs(qs, ql, sm, qd, ql.copy(), dm)
        assert np.array_equal(got_run, want_run), trial
        for f in FIELDS:
            gf, wf = getattr(got, f), getattr(want, f)
            assert gf.dtype == wf.dtype and np.array_equal(gf, wf), (trial, f)
