"""The numpy references are the ground truth: check them against finite differences and identities."""

import numpy as np
import pytest

from popvision_lite.emulator import reference as R

rng = np.random.default_rng(0)


def _fd_grad(f, x, eps=1e-3):
    """Central finite-difference gradient of scalar f at x (float64)."""
    x = x.astype(np.float64)
    g = np.zeros_like(x)
    it = np.nditer(x, flags=["multi_index"])
    for _ in it:
        i = it.multi_index
        old = x[i]
        x[i] = old + eps
        fp = f(x)
        x[i] = old - eps
        fm = f(x)
        x[i] = old
        g[i] = (fp - fm) / (2 * eps)
    return g


def _check(analytic, f, x, tol=2e-2):
    num = _fd_grad(f, x)
    np.testing.assert_allclose(analytic, num, rtol=tol, atol=tol * max(1.0, np.abs(num).max()))


def test_matmul_bwd():
    a, b = rng.normal(size=(4, 5)), rng.normal(size=(5, 3))
    dc = rng.normal(size=(4, 3))
    da, db = R.matmul_bwd(a, b, dc)
    _check(da, lambda x: float((R.matmul(x, b) * dc).sum()), a)
    _check(db, lambda x: float((R.matmul(a, x) * dc).sum()), b)


def test_conv2d_matches_direct_loop_and_bwd():
    x = rng.normal(size=(2, 5, 6, 3))
    w = rng.normal(size=(3, 3, 3, 4))
    y = R.conv2d(x, w, stride=2, padding=1)
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    direct = np.zeros_like(y)
    for n in range(2):
        for i in range(y.shape[1]):
            for j in range(y.shape[2]):
                patch = xp[n, 2 * i:2 * i + 3, 2 * j:2 * j + 3, :]
                direct[n, i, j] = np.tensordot(patch, w, axes=3)
    np.testing.assert_allclose(y, direct, rtol=1e-5, atol=1e-5)
    dy = rng.normal(size=y.shape)
    dx, dw = R.conv2d_bwd(x, w, dy, stride=2, padding=1)
    _check(dx, lambda v: float((R.conv2d(v, w, 2, 1) * dy).sum()), x)
    _check(dw, lambda v: float((R.conv2d(x, v, 2, 1) * dy).sum()), w)


def test_gelu_relu_bwd():
    x = rng.normal(size=(3, 7))
    dy = rng.normal(size=(3, 7))
    _check(R.gelu_bwd(x, dy), lambda v: float((R.gelu(v) * dy).sum()), x)
    _check(R.relu_bwd(x, dy), lambda v: float((R.relu(v) * dy).sum()), x)


def test_softmax_and_bwd():
    x = rng.normal(size=(3, 6))
    y = R.softmax(x)
    np.testing.assert_allclose(y.sum(-1), 1.0, rtol=1e-6)
    dy = rng.normal(size=x.shape)
    _check(R.softmax_bwd(y, dy), lambda v: float((R.softmax(v) * dy).sum()), x)


def test_layer_norm_and_bwd():
    x = rng.normal(size=(4, 8)) * 3 + 1
    g, b = rng.normal(size=8), rng.normal(size=8)
    y = R.layer_norm(x, np.ones(8), np.zeros(8))
    np.testing.assert_allclose(y.mean(-1), 0, atol=1e-5)
    np.testing.assert_allclose(y.std(-1), 1, atol=1e-3)
    dy = rng.normal(size=x.shape)
    dx, dg, db = R.layer_norm_bwd(x, g, dy)
    _check(dx, lambda v: float((R.layer_norm(v, g, b) * dy).sum()), x)
    _check(dg, lambda v: float((R.layer_norm(x, v, b) * dy).sum()), g)
    _check(db, lambda v: float((R.layer_norm(x, g, v) * dy).sum()), b)


def test_embedding_bwd_is_scatter_add():
    table = rng.normal(size=(10, 4))
    ids = np.array([[1, 3, 1], [9, 0, 1]])
    dy = rng.normal(size=(2, 3, 4))
    d = R.embedding_bwd(table.shape, ids, dy)
    np.testing.assert_allclose(d[1], dy[0, 0] + dy[0, 2] + dy[1, 2], rtol=1e-6)
    assert np.all(d[[2, 4, 5, 6, 7, 8]] == 0)
    np.testing.assert_array_equal(R.embedding(table, ids)[1, 0], table[9].astype(np.float32))


def test_attention_bwd():
    b, s, h, heads = 2, 3, 4, 2
    x = rng.normal(size=(b, s, h))
    ws = [rng.normal(size=(h, h)) * 0.5 for _ in range(4)]
    dout = rng.normal(size=(b, s, h))
    out, cache = R.attention(x, *ws, heads)
    grads = R.attention_bwd(cache, *ws, heads, dout)

    def loss(which, v):
        args = list(ws)
        if which == 0:
            return float((R.attention(v, *args, heads)[0] * dout).sum())
        args[which - 1] = v
        return float((R.attention(x, *args, heads)[0] * dout).sum())

    _check(grads[0], lambda v: loss(0, v), x)
    for i in range(4):
        _check(grads[i + 1], lambda v, i=i: loss(i + 1, v), ws[i])


def test_block_sparse():
    mask = R.block_sparse_mask(4, 3, density=0.5, seed=1)
    assert mask.sum() == 6
    np.testing.assert_array_equal(mask, R.block_sparse_mask(4, 3, density=0.5, seed=1))
    a, b = rng.normal(size=(5, 8)), rng.normal(size=(8, 6))
    c = R.block_sparse_matmul(a, b, mask, 2)
    dense = a @ (b * np.kron(mask, np.ones((2, 2))))
    np.testing.assert_allclose(c, dense, rtol=1e-5, atol=1e-5)
    dc = rng.normal(size=c.shape)
    da, db = R.block_sparse_matmul_bwd(a, b, mask, 2, dc)
    _check(da, lambda v: float((R.block_sparse_matmul(v, b, mask, 2) * dc).sum()), a)
    _check(db, lambda v: float((R.block_sparse_matmul(a, v, mask, 2) * dc).sum()), b)
    with pytest.raises(ValueError, match="density"):
        R.block_sparse_mask(2, 2, 0.0)


def test_numeric_check_record():
    ok = R.numeric_check("x", np.array([1.0, 2.0]), np.array([1.0, 2.001]), rtol=1e-2, atol=1e-3)
    assert ok["passed"] and ok["max_abs_err"] == pytest.approx(0.001)
    bad = R.numeric_check("x", np.array([1.0, 3.0]), np.array([1.0, 2.0]), rtol=1e-2, atol=1e-3)
    assert not bad["passed"] and bad["max_rel_err"] == pytest.approx(0.5)
    assert not R.numeric_check("x", np.zeros(2), np.zeros(3), 1, 1)["passed"]
