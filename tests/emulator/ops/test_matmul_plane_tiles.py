"""The partials mapping's tiles gathered plane by plane (ops/matmul_layouts.py ``_plane_tiles``, ``np.take`` along
the positions' axis) are the tiles ``vt.reshape(planes, per)[:, lay_tile]`` names, on the built and the kept path."""

import numpy as np

from popvision_lite.emulator import mapping as M
from popvision_lite.emulator.ops import matmul_layouts as ML
from popvision_lite.emulator.ops.matmul import _parts


def test_plane_tiles_is_the_planes_gather():
    rng = np.random.default_rng(7)
    planes, per = 5, 12
    vt = rng.permutation(1472)[: planes * per].astype(np.int64)
    lay_tile = rng.integers(0, per, 40)
    got = ML._plane_tiles(vt, planes, per, lay_tile)
    want = np.concatenate([vt[p * per + lay_tile] for p in range(planes)])
    assert got.dtype == np.int64 and got.flags.c_contiguous
    np.testing.assert_array_equal(got, want)
    assert not np.shares_memory(got, vt)


def test_kept_split_on_shuffled_tiles_is_by_windows():
    """A split built once, twice, then found kept (the third time on): each time on other distinct tiles, the
    mapping is by_windows' (tiles, intervals, recorded windows)."""
    ML.clear()
    pk, pm, pn, Mm, N = 3, 4, 3, 22, 17
    T = pk * pm * pn
    k_i, im_i, in_i = np.unravel_index(np.arange(T), (pk, pm, pn))
    msz, moff = _parts(Mm, pm)
    nsz, noff = _parts(N, pn)
    c_shape = np.stack([np.ones(T, np.int64), msz[im_i], nsz[in_i]], 1)
    c_org = np.stack([k_i, moff[im_i], noff[in_i]], 1)
    rng = np.random.default_rng(3)
    try:
        for _ in range(4):
            vt = rng.permutation(1472)[:T].astype(np.int64)
            got = ML.planes_by_windows((pk, Mm, N), c_shape, c_org, vt, {})
            want = M.by_windows((pk, Mm, N), c_shape, c_org, vt, {})
            for f in ("tile", "start", "stop"):
                assert getattr(got, f).dtype == np.int64
                np.testing.assert_array_equal(getattr(got, f), getattr(want, f))
            np.testing.assert_array_equal(M.own_windows(got)[3], vt)
        assert ML.kept(("planes", (pk, Mm, N), (pm * pn, 2),
                        np.asarray(c_shape[: pm * pn, 1:], np.int64).tobytes(),
                        np.asarray(c_org[: pm * pn, 1:], np.int64).tobytes())) is not None  # the kept path ran
    finally:
        ML.clear()
