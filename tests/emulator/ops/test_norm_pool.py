"""Batch norm and pooling: the numpy reference against independent formulations (loops, finite
differences), and every emulator op against the reference on all three backends."""

import numpy as np
import pytest

from popvision_lite.emulator.backends.backend import NumpyBackend
from popvision_lite.emulator.backends.planning import PlanOnlyBackend
from popvision_lite.emulator.codelets import popnn as CN
from popvision_lite.emulator.codelets import popops_rows as CR
from popvision_lite.emulator.engine import Engine
from popvision_lite.emulator.models.emulated import EmulatorBackend
from popvision_lite.emulator.ops import norm_pool as NP
from popvision_lite.emulator.ops import pooling as PL
from popvision_lite.emulator.ops.context import plan_target_of
from popvision_lite.emulator.target import Target

rng = np.random.default_rng(11)


def _run(fn, *arrays, precision="fp32"):
    em = EmulatorBackend(Target.from_device("ipu-mk2"), precision)
    ref = NumpyBackend(precision)
    outs = []
    for be in (em, ref):
        ins = [be.input(f"in{i}", a) for i, a in enumerate(arrays)]
        res = fn(be, *ins)
        outs.append(res if isinstance(res, tuple) else (res,))
    run = Engine(em.graph, em.program(), mode="full").run(inputs=em.inputs)
    got = tuple(run.outputs[t.name] for t in outs[0])
    # the plan-only backend walks the same code with shapes only and returns the same shapes
    plan = PlanOnlyBackend(plan_target_of(Target.from_device("ipu-mk2")), precision)
    pins = [plan.input(f"in{i}", a) for i, a in enumerate(arrays)]
    pres = fn(plan, *pins)
    pres = pres if isinstance(pres, tuple) else (pres,)
    assert [tuple(p.shape) for p in pres] == [tuple(np.shape(w)) for w in outs[1]]
    return got, outs[1], run.profile_data


def _close(got, want, tol=1e-4):
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g, np.float64).reshape(np.shape(w)), w, rtol=tol, atol=tol)


# ---------------------------------------------------------------- reference vs loops


def _loop_pool(x, n, h, w, k, s, p, mode):
    c = x.shape[-1]
    img = x.reshape(n, h, w, c)
    oh, ow = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
    out = np.zeros((n, oh, ow, c))
    for b in range(n):
        for i in range(oh):
            for j in range(ow):
                vals = [img[b, i * s - p + a, j * s - p + bb] for a in range(k) for bb in range(k)
                        if 0 <= i * s - p + a < h and 0 <= j * s - p + bb < w]
                out[b, i, j] = np.max(vals, 0) if mode == "max" else np.sum(vals, 0) / (k * k)
    return out.reshape(-1, c)


def test_windows_pool_and_im2col_match_loops():
    n, h, w, c = 2, 7, 6, 3
    x = rng.standard_normal((n * h * w, c)).astype(np.float32)
    idx, (oh, ow) = PL.conv_windows(n, h, w, 3, 2, 1)
    assert (oh, ow) == (4, 3) and idx.shape == (n * oh * ow, 9)
    np.testing.assert_allclose(PL.ref_pool(x, idx, "max"), _loop_pool(x, n, h, w, 3, 2, 1, "max"), rtol=1e-6)
    np.testing.assert_allclose(PL.ref_pool(x, idx, "sum", 1 / 9), _loop_pool(x, n, h, w, 3, 2, 1, "avg"), rtol=1e-5)
    cols = PL.ref_gather_windows(x, idx)
    # im2col column order (kh, kw, c): a (3,3,C,Co) kernel reshaped to (9C, Co) is the conv
    wk = rng.standard_normal((3, 3, c, 5)).astype(np.float32)
    y = cols @ wk.reshape(9 * c, 5)
    img = np.pad(x.reshape(n, h, w, c), ((0, 0), (1, 1), (1, 1), (0, 0)))
    want = np.zeros((n, oh, ow, 5))
    for i in range(oh):
        for j in range(ow):
            want[:, i, j] = np.einsum("nabc,abco->no", img[:, 2 * i:2 * i + 3, 2 * j:2 * j + 3], wk)
    np.testing.assert_allclose(y, want.reshape(-1, 5), rtol=1e-4, atol=1e-5)


def test_invert_windows_lists_every_reader():
    idx, _ = PL.conv_windows(1, 5, 5, 3, 2, 1)
    inv = PL.invert_windows(idx, 25)
    assert inv.shape == (25, 4)  # stride 2, k 3: a row is read by up to 2 x 2 windows
    for r in range(25):
        want = sorted(np.flatnonzero(idx.ravel() == r))
        assert sorted(inv[r][inv[r] >= 0]) == want


def test_interval_work_lists_match_a_unique_per_interval():
    """max_pool_bwd's work lists from one sort equal np.unique's, interval by interval (rows outside every
    interval, empty intervals and rows reading no window included)."""
    rng = np.random.default_rng(5)
    win = rng.integers(-1, 9, size=(23, 3))
    win[4:7] = -1
    r0, r1 = np.array([0, 5, 5, 12]), np.array([5, 5, 12, 20])  # rows 20-22 in no interval
    work, src, counts = PL._interval_work_lists(win, r0, r1)
    want, used = np.full(win.shape, -1), []
    for a, b in zip(r0, r1, strict=True):
        u, pos = np.unique(win[a:b][win[a:b] >= 0], return_inverse=True)
        want[a:b][win[a:b] >= 0] = pos
        used.append(u)
    assert np.array_equal(counts, [len(u) for u in used]) and np.array_equal(src, np.concatenate(used))
    assert np.array_equal(work, want) and work.dtype == src.dtype == counts.dtype == np.int64


def _numgrad(f, x, eps=1e-3):
    g = np.zeros_like(x)
    it = np.nditer(x, flags=["multi_index"])
    for _ in it:
        i = it.multi_index
        xp, xm = x.copy(), x.copy()
        xp[i] += eps
        xm[i] -= eps
        g[i] = (f(xp) - f(xm)) / (2 * eps)
    return g


def test_reference_gradients_match_finite_differences():
    n, h, w, c = 1, 4, 4, 2
    x = rng.standard_normal((n * h * w, c))
    idx, _ = PL.conv_windows(n, h, w, 3, 2, 1)
    up = rng.standard_normal((idx.shape[0], c))
    # max pool (distinct values: no ties)
    y = PL.ref_pool(x, idx, "max")
    got = PL.ref_max_pool_bwd(x, y, up, idx)
    np.testing.assert_allclose(got, _numgrad(lambda v: (PL.ref_pool(v, idx, "max") * up).sum(), x), atol=1e-3)
    # average pool and col2im
    got = PL.ref_avg_pool_bwd(up, idx, x.shape[0])
    np.testing.assert_allclose(got, _numgrad(lambda v: (PL.ref_pool(v, idx, "sum", 1 / 9) * up).sum(), x), atol=1e-3)
    upc = rng.standard_normal((idx.shape[0], 9 * c))
    got = PL.ref_col2im(upc, idx, x.shape[0])
    np.testing.assert_allclose(got, _numgrad(lambda v: (PL.ref_gather_windows(v, idx) * upc).sum(), x), atol=1e-3)
    # batch norm
    xb = rng.standard_normal((6, 3))
    gam, bet, dy = rng.standard_normal(3), rng.standard_normal(3), rng.standard_normal((6, 3))
    _, mean, invstd = NP.ref_batch_norm(xb, gam, bet)
    dx, dg, db = NP.ref_batch_norm_bwd(xb, dy, mean, invstd, gam)
    loss = lambda v: (NP.ref_batch_norm(v, gam, bet)[0].astype(np.float64) * dy).sum()  # noqa: E731
    np.testing.assert_allclose(dx, _numgrad(loss, xb), atol=2e-2, rtol=2e-2)
    np.testing.assert_allclose(db, dy.sum(0), rtol=1e-5)
    xhat = (xb - xb.mean(0)) / np.sqrt(xb.var(0) + CN.BN_EPS)
    np.testing.assert_allclose(dg, (dy * xhat).sum(0), rtol=1e-4)


# ---------------------------------------------------------------- emulator vs reference


def test_batch_norm_forward_and_backward_on_the_emulator():
    x = (rng.standard_normal((40, 12)) * 3 + 1).astype(np.float32)
    g = rng.standard_normal(12).astype(np.float32)
    b = rng.standard_normal(12).astype(np.float32)
    dy = rng.standard_normal((40, 12)).astype(np.float32)

    def f(be, x_, g_, b_, dy_):
        y, mean, invstd = be.batch_norm(x_, g_, b_, "bn")
        return (y, mean, invstd, *be.batch_norm_bwd(x_, dy_, mean, invstd, g_, "bn_bwd"))

    got, want, pd_ = _run(f, x, g, b, dy)
    _close(got, want, 1e-3)
    types = set(pd_.ops.type)
    assert {"batch_norm", "batch_norm_bwd"} <= types


@pytest.mark.parametrize("k,s,p", [(3, 2, 1), (2, 2, 0), (3, 1, 1)])
def test_pooling_and_windows_on_the_emulator(k, s, p):
    n, h, w, c = 2, 6, 5, 8
    x = rng.standard_normal((n * h * w, c)).astype(np.float32)
    idx, (oh, ow) = PL.conv_windows(n, h, w, k, s, p)
    dy = rng.standard_normal((idx.shape[0], c)).astype(np.float32)
    dcols = rng.standard_normal((idx.shape[0], k * k * c)).astype(np.float32)

    def f(be, x_, dy_, dc_):
        y = be.max_pool(x_, idx, "maxpool")
        return (y, be.max_pool_bwd(x_, y, dy_, idx, "maxpool_bwd"), be.avg_pool(x_, idx, "avgpool"),
                be.avg_pool_bwd(dy_, idx, n * h * w, "avgpool_bwd"), be.gather_windows(x_, idx, "im2col"),
                be.col2im(dc_, idx, n * h * w, "col2im"))

    got, want, pd_ = _run(f, x, dy, dcols)
    _close(got, want, 1e-4)
    assert {"max_pool", "max_pool_bwd", "avg_pool", "im2col"} <= set(pd_.ops.type)


def test_global_average_pool_and_fp16():
    n, hw, c = 3, 16, 24
    x = rng.standard_normal((n * hw, c)).astype(np.float32)
    idx = PL.global_windows(n, hw)
    dy = rng.standard_normal((n, c)).astype(np.float32)

    def f(be, x_, dy_):
        return be.avg_pool(x_, idx, "gap"), be.avg_pool_bwd(dy_, idx, n * hw, "gap_bwd")

    got, want, _ = _run(f, x, dy, precision="fp16")
    _close(got, want, 2e-3)
    np.testing.assert_allclose(np.asarray(want[0], np.float32), x.reshape(n, hw, c).mean(1), atol=2e-3)


def test_max_pool_gradient_reaches_every_tied_maximum():
    x = np.zeros((4, 2), np.float32)  # one 2x2 window, all equal: every element gets the gradient
    idx, _ = PL.conv_windows(1, 2, 2, 2, 2, 0)
    dy = np.array([[1.0, 2.0]], np.float32)

    def f(be, x_, dy_):
        return be.max_pool_bwd(x_, be.max_pool(x_, idx, "mp"), dy_, idx, "mp_bwd")

    got, want, _ = _run(f, x, dy)
    _close(got, want)
    np.testing.assert_array_equal(np.asarray(want[0]), np.tile([1.0, 2.0], (4, 1)))


def test_window_codelet_cost_follows_the_pooling_estimator():
    """Cycles of a max-pool vertex: 14 + rows * (13 + k * (4 + 3 * vectors)) (poplibs getPoolingCycles)."""
    em = EmulatorBackend(Target.from_device("ipu-mk2"), "fp16")
    x = em.input("x", np.zeros((2 * 4 * 4, 8), np.float32))
    idx, _ = PL.conv_windows(2, 4, 4, 2, 2, 0)
    em.max_pool(x, idx, "mp")
    grp = next(g for g in em.graph.groups if g.codelet is CN.WINDOW_MAX)
    cyc = CN.WINDOW_MAX.cycles(grp, em.graph.target)
    rows = grp.fields["out"].sizes // 8
    np.testing.assert_array_equal(cyc, 14 + rows * (13 + 4 * (4 + 3 * 2)))


def test_every_row_codelet_is_charged_its_loops():
    """Each row codelet declares the poplibs loops it runs per row (``parts``), so none is free: a
    codelet without them would cost 0 cycles (the batch-norm codelets did after a merge)."""
    from popvision_lite.emulator.codelets import popops_rows as CR
    from popvision_lite.emulator.estimators import popops

    subclasses = [c for m in (CR,) for c in vars(m).values()
                  if isinstance(c, type) and issubclass(c, CR.RowCodelet) and c is not CR.RowCodelet]
    assert len(subclasses) >= 8
    for cls in subclasses:
        if cls is CR.BatchNormStats:
            continue  # no elementwise loop: charged as popops' strided reduce (test below)
        assert cls.parts, f"{cls.__name__} has no per-row loops"
        assert popops.row_pass_cycles(cls.parts, 64, 2) > 0


def test_batch_norm_statistics_are_charged_as_popops_strided_reduces():
    """popnn's statistics are one reduceMany (ADD, SQUARE_ADD) over the rows: per tile a strided reduce of
    each op over ALL the tile's rows, the channels split over the six workers.  Six vertices of 10 rows of
    64 half channels on one tile: each worker reduces 60 rows x 12 channels (3 vectors of 4) per op:
    16 + 3 x (3 + post + 3 + 59), post 7 for ADD to float, 1 for SQUARE_ADD (no table entry)."""
    from popvision_lite.emulator import Engine, Graph, Target
    from popvision_lite.emulator import mapping as M
    from popvision_lite.emulator import programs as P

    t = Target.from_device("ipu-mk2", 1)
    g = Graph(t)
    c, rows, nv = 64, 10, 6
    x = g.add_variable("x", (nv * rows, c), "float16", mapping=M.single_tile(nv * rows * c, 0))
    ps = g.add_variable("s", (nv, c), "float32", mapping=M.single_tile(nv * c, 0))
    pq = g.add_variable("q", (nv, c), "float32", mapping=M.single_tile(nv * c, 0))
    cs = g.add_compute_set("stats")
    v = np.arange(nv)
    g.add_vertices(cs, CR.BN_STATS, np.zeros(nv, np.int64), fields={
        "in": x.regions(v * rows * c, rows * c), "sum": ps.regions(v * c, c), "sumsq": pq.regions(v * c, c)},
        params={"row": np.int64(c)})
    worker = (16 + 3 * (3 + 7 + 3 + 59)) + (16 + 3 * (3 + 1 + 3 + 59))
    got = Engine(g, P.Execute(cs), mode="timing").run(allow_out_of_memory=True).total_cycles
    assert got == 6 * worker + int(t.em["vertex_launch_cycles"])


def test_channel_groups_spread_few_windows_over_the_tiles():
    assert PL.channel_groups(20, 2048, 1472) == 64  # ResNet-50's global pool at micro-batch 20: 1280 windows
    assert PL.channel_groups(2, 2048, 1472) == 128  # 16 channels per group at the least
    assert PL.channel_groups(980, 64, 1472) == 1  # ordinary pooling: the windows already cover the tiles
    assert PL.channel_groups(4, 24, 1472) == 1  # 24 = 2 x 12: a group would be under 16 channels


def test_global_average_pool_splits_channels_over_tiles():
    """Global pooling of few images: the window buffers spread over n x G tiles (not one tile per image),
    and the result is the mean over each image's rows."""
    n, hw, c = 2, 49, 64
    x = rng.standard_normal((n * hw, c)).astype(np.float32)
    idx = PL.global_windows(n, hw)
    dy = rng.standard_normal((n, c)).astype(np.float32)
    G = PL.channel_groups(n, c, 1472)
    assert G == 4
    windows = {}

    def f(be, x_, dy_):
        y = be.avg_pool(x_, idx, "gap")
        if hasattr(be, "graph"):
            windows.update({t.name: t for t in be.graph.tensors if t.name.endswith("gap/windows")})
        return y, be.avg_pool_bwd(dy_, idx, n * hw, "gap_bwd")

    got, want, _ = _run(f, x, dy, precision="fp16")
    _close(got, want, 2e-3)
    np.testing.assert_allclose(np.asarray(got[0], np.float32).reshape(n, c), x.reshape(n, hw, c).mean(1), atol=2e-3)
    (win,) = windows.values()
    per_tile = win.mapping.elements_per_tile(1472)
    assert np.count_nonzero(per_tile) == n * G and per_tile.max() == hw * c // G


def test_max_pool_gradient_reads_each_window_once_per_tile():
    """The stem's max-pool gradient shape (3x3 stride 2, 112 -> 56) with several vertices per tile: each
    tile receives a window's forward output and gradient once (poplibs' work lists), not once per input
    row that reads it (up to 4 copies), and the numerics still match the reference."""
    n, h, c = 1, 112, 8
    idx, _ = PL.conv_windows(n, h, h, 3, 2, 1)
    x = rng.standard_normal((n * h * h, c)).astype(np.float32)
    dy = rng.standard_normal((idx.shape[0], c)).astype(np.float32)

    def f(be, x_, dy_):
        return be.max_pool_bwd(x_, be.max_pool(x_, idx, "mp"), dy_, idx, "mp_bwd")

    got, want, _ = _run(f, x, dy)
    _close(got, want)
    em = EmulatorBackend(Target.from_device("ipu-mk2"), "fp16")
    f(em, em.input("x", x), em.input("dy", dy))
    bufs = [t for t in em.graph.tensors if t.name.endswith("mp_bwd/fwd_out")]
    assert len(bufs) == 1
    rows_in, rows_out = n * h * h, idx.shape[0]
    groups = [g for g in em.graph.groups if g.codelet is CN.MAX_POOL_GRAD]
    assert np.bincount(groups[0].tiles).max() > 1  # several vertices share a tile's windows
    # a window lands on each tile whose rows read it, once: fewer rows than the input's (the gathered
    # copies were one per reading row, up to 4 per input row here)
    assert rows_out <= bufs[0].shape[0] < rows_in


def test_global_average_pool_gradient_is_a_broadcast():
    """Global pooling's gradient is the scaled pooled gradient copied to its rows (poplibs'
    substPoolingGradientWithBroadcast): no window buffer beside the output, no pooling vertices."""
    n, hw, c = 4, 49, 32
    em = EmulatorBackend(Target.from_device("ipu-mk2"), "fp16")
    dy = em.input("dy", np.ones((n, c), np.float32))
    out = em.avg_pool_bwd(dy, PL.global_windows(n, hw), n * hw, "gap_bwd")
    assert out.shape == (n * hw, c)
    made = [t for t in em.graph.tensors if t.op is not None and "gap_bwd" in t.op]
    assert sum(t.size for t in made) == n * hw * c + n * c  # the output and the scaled gradient
    assert not any(g.codelet is CN.WINDOW_SUM for g in em.graph.groups)


def test_window_runs_merge_neighbouring_rows():
    """pooling._window_runs: runs of a window index (-1: padding) over consecutive slots of one window reading
    consecutive rows; the same runs as comparing each valid entry with the valid entry before it."""
    from popvision_lite.emulator.ops.pooling import _window_runs

    rng = np.random.default_rng(41)
    for trial in range(60):
        windows, k = int(rng.integers(1, 50)), int(rng.integers(1, 12))
        index = rng.integers(0, 30, (windows, k))
        if trial % 2:  # kernel rows reading consecutive image rows, across window boundaries too
            index = (np.arange(windows * k) // 3 + rng.integers(0, 2, windows * k)).reshape(windows, k)
        index[rng.random(index.shape) < (0.0, 0.2, 0.6)[trial % 3]] = -1
        flat = index.ravel()
        pos = np.flatnonzero(flat >= 0)
        src = flat[pos]
        brk = np.ones(len(pos), dtype=bool)
        brk[1:] = (np.diff(pos) != 1) | (np.diff(src) != 1) | (pos[1:] % k == 0)
        first = np.flatnonzero(brk)
        want = (src[first], pos[first], np.diff(np.concatenate([first, [len(pos)]])))
        got = _window_runs(index)
        assert all(np.array_equal(a, b) for a, b in zip(got, want, strict=True)), trial
