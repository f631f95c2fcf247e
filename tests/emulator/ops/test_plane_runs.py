"""matmul._plane_runs: the row runs of the multi-stage K reduction's owner slices in their partial planes, cut
once per slice, are the runs cutting every (slice, plane) pair gave."""

import numpy as np

from popvision_lite.emulator.ops import matmul as MM


def _every_pair(blocks, b_, s0, ln, x, q, pk, Mm, N):
    """As _intermediate_stage cut them before: every (slice, plane) pair's runs."""
    ri, st, lens = MM._row_runs(s0[x], ln[x], blocks["nsz"][b_[x]])
    bx, qx = b_[x][ri], q[ri]
    row, col = np.divmod(st, blocks["nsz"][bx])
    return ((blocks["g"][bx] * pk + qx) * Mm + blocks["moff"][bx] + row) * N + blocks["noff"][bx] + col, lens


def test_plane_runs_are_every_pairs_runs():
    rng = np.random.default_rng(7)
    for _ in range(40):
        G, pm, pn = (int(v) for v in rng.integers(1, 4, 3))
        pk = int(rng.integers(2, 20))
        Mm, N = pm * int(rng.integers(1, 9)) + int(rng.integers(0, pm)), pn * int(rng.integers(1, 9)) + \
            int(rng.integers(0, pn))
        msz, moff = MM._parts(Mm, pm)
        nsz, noff = MM._parts(N, pn)
        gb, ib, jb = np.unravel_index(np.arange(G * pm * pn), (G, pm, pn))
        blocks = dict(g=gb, moff=moff[ib], msz=msz[ib], noff=noff[jb], nsz=nsz[jb])
        be = blocks["msz"] * blocks["nsz"]
        # owner slices: each block cut in a few even slices, some of them empty-free
        p = np.maximum(1, np.minimum(int(rng.integers(1, 6)), be))
        b_ = np.repeat(np.arange(len(be)), p)
        sl = np.arange(int(p.sum())) - np.repeat(np.cumsum(p) - p, p)
        base, extra = np.divmod(be, p)
        ln = base[b_] + (sl < extra[b_])
        s0 = sl * base[b_] + np.minimum(sl, extra[b_])
        k = rng.integers(1, 5, len(b_))
        q0 = rng.integers(0, max(1, pk - 4), len(b_))
        x = np.repeat(np.arange(len(b_)), k)
        q = q0[x] + (np.arange(len(x)) - np.repeat(np.cumsum(k) - k, k))
        got = MM._plane_runs(blocks, b_, s0, ln, x, q, pk, Mm, N)
        want = _every_pair(blocks, b_, s0, ln, x, q, pk, Mm, N)
        for g, w in zip(got, want, strict=True):
            assert g.dtype == w.dtype and np.array_equal(g, w)
