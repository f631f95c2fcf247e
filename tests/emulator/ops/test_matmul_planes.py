"""The uneven matmul's partials mapping built from one plane's layout (ops/matmul.py ``_planes_by_windows``) is the
mapping ``mapping.by_windows`` gives for the same windows: the same intervals, tiles and recorded windows."""

from types import SimpleNamespace

import numpy as np
import pytest

from popvision_lite.emulator import mapping as M
from popvision_lite.emulator.ops.matmul import _parts, _planes_by_windows


def _partials_windows(G, pk, pm, pn, Mm, N, vt):
    g_i, k_i, im_i, in_i = np.unravel_index(np.arange(G * pk * pm * pn), (G, pk, pm, pn))
    msz, moff = _parts(Mm, pm)
    nsz, noff = _parts(N, pn)
    T = len(vt)
    c_shape = np.stack([np.ones(T, np.int64), msz[im_i], nsz[in_i]], 1)
    c_org = np.stack([g_i * pk + k_i, moff[im_i], noff[in_i]], 1)
    return (G * pk, Mm, N), c_shape, c_org


def _same(a: M.Mapping, b: M.Mapping) -> None:
    for f in ("tile", "start", "stop"):
        assert getattr(a, f).dtype == getattr(b, f).dtype
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f))
    wa, wb = M.own_windows(a), M.own_windows(b)
    assert wa[0] == wb[0]
    for x, y in zip(wa[1:], wb[1:], strict=True):
        np.testing.assert_array_equal(x, y)
    assert M._merge(a) is a  # merged already, as by_windows' is


@pytest.mark.parametrize("G, pk, pm, pn, Mm, N, rotate", [
    (1, 4, 46, 8, 15680, 256, 0),  # ResNet block7/conv1: 341/340-row blocks, N even
    (1, 3, 5, 7, 101, 45, 17),  # uneven both ways, rotated tiles
    (2, 2, 3, 1, 20, 9, 5),  # batched, whole rows per block (pn = 1)
    (1, 8, 1, 5, 7, 33, 0),  # one block row
])
def test_partials_mapping_is_by_windows(G, pk, pm, pn, Mm, N, rotate):
    T = G * pk * pm * pn
    vt = (np.arange(T, dtype=np.int64) + rotate) % 1472
    shape, c_shape, c_org = _partials_windows(G, pk, pm, pn, Mm, N, vt)
    ctx = SimpleNamespace(window_layouts={})
    got = _planes_by_windows(ctx, shape, c_shape, c_org, vt)
    want = M.by_windows(shape, c_shape, c_org, vt, {})
    _same(got, want)
    _same(_planes_by_windows(ctx, shape, c_shape, c_org, vt), want)  # the plane's layout kept: the same again


def test_tiles_used_twice_take_by_windows():
    """Tiles that wrap round (more blocks than tiles) may join intervals across planes: by_windows itself."""
    G, pk, pm, pn, Mm, N = 1, 2, 3, 2, 9, 8
    vt = np.arange(12, dtype=np.int64) % 6
    shape, c_shape, c_org = _partials_windows(G, pk, pm, pn, Mm, N, vt)
    got = _planes_by_windows(SimpleNamespace(window_layouts={}), shape, c_shape, c_org, vt)
    want = M.by_windows(shape, c_shape, c_org, vt, {})
    for f in ("tile", "start", "stop"):
        np.testing.assert_array_equal(getattr(got, f), getattr(want, f))
