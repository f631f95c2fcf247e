"""Plain-numpy reference implementations of every op and its backward pass.

These are the ground truth the emulated ops are compared against (tests and the
``numeric_checks`` of a full-numerics run).  They are written for clarity, not speed, and
compute in float32 (float16 inputs are up-cast, as AMP accumulates in FP32); callers round the
result to the op's output dtype.

Layouts: matmul ``A[M,K] @ B[K,N]``; conv2d NHWC input, HWIO weights; attention
``[batch, seq, hidden]`` with ``heads`` heads.
"""

from __future__ import annotations

import math

import numpy as np

F32 = np.float32


def f32(x):
    """``x`` as a float32 array (fp16 up-cast, as AMP accumulates in FP32)."""
    return np.asarray(x, dtype=F32)


_f = f32


# ---------------------------------------------------------------- matmul


def matmul(a, b):
    return _f(a) @ _f(b)


def matmul_bwd(a, b, dc):
    """Gradients of C = A @ B: (dA, dB)."""
    a, b, dc = _f(a), _f(b), _f(dc)
    return dc @ b.T, a.T @ dc


def block_sparse_mask(k_blocks: int, n_blocks: int, density: float, seed: int = 0) -> np.ndarray:
    """Boolean [k_blocks, n_blocks] mask with round(density * total) blocks set (at least one), seeded."""
    if not 0.0 < density <= 1.0:
        raise ValueError(f"block-sparse density {density} must be in (0, 1]")
    total = k_blocks * n_blocks
    keep = max(1, int(round(density * total)))
    rng = np.random.default_rng(seed)
    idx = rng.choice(total, size=keep, replace=False)
    mask = np.zeros(total, dtype=bool)
    mask[idx] = True
    return mask.reshape(k_blocks, n_blocks)


def expand_block_mask(mask: np.ndarray, block: int) -> np.ndarray:
    return np.kron(mask.astype(np.uint8), np.ones((block, block), dtype=np.uint8)).astype(bool)


def block_sparse_matmul(a, b, mask, block: int):
    """A @ (B masked by ``mask`` of [K/block, N/block] blocks)."""
    return _f(a) @ (_f(b) * expand_block_mask(mask, block))


def block_sparse_matmul_bwd(a, b, mask, block: int, dc):
    m = expand_block_mask(mask, block)
    bm = _f(b) * m
    a, dc = _f(a), _f(dc)
    return dc @ bm.T, (a.T @ dc) * m


# ---------------------------------------------------------------- conv2d (NHWC, HWIO)


def _pad(x, p):
    return np.pad(x, ((0, 0), (p, p), (p, p), (0, 0))) if p else x


def im2col(x, kh, kw, stride=1, padding=0):
    """[N,H,W,C] -> [N*OH*OW, KH*KW*C] patches (row order n, oh, ow; column order kh, kw, c)."""
    x = _pad(_f(x), padding)
    n, h, w, c = x.shape
    oh = (h - kh) // stride + 1
    ow = (w - kw) // stride + 1
    s = x.strides
    patches = np.lib.stride_tricks.as_strided(
        x, (n, oh, ow, kh, kw, c), (s[0], s[1] * stride, s[2] * stride, s[1], s[2], s[3]), writeable=False)
    return patches.reshape(n * oh * ow, kh * kw * c), (n, oh, ow)


def conv2d(x, w, stride=1, padding=0):
    kh, kw, cin, cout = w.shape
    cols, (n, oh, ow) = im2col(x, kh, kw, stride, padding)
    return (cols @ _f(w).reshape(kh * kw * cin, cout)).reshape(n, oh, ow, cout)


def conv2d_bwd(x, w, dy, stride=1, padding=0):
    """(dx, dw) of conv2d."""
    x, w, dy = _f(x), _f(w), _f(dy)
    kh, kw, cin, cout = w.shape
    cols, (n, oh, ow) = im2col(x, kh, kw, stride, padding)
    dy2 = dy.reshape(n * oh * ow, cout)
    dw = (cols.T @ dy2).reshape(w.shape)
    dcols = (dy2 @ w.reshape(kh * kw * cin, cout).T).reshape(n, oh, ow, kh, kw, cin)
    hp, wp = x.shape[1] + 2 * padding, x.shape[2] + 2 * padding
    dxp = np.zeros((n, hp, wp, cin), dtype=F32)
    for i in range(kh):
        for j in range(kw):
            dxp[:, i:i + stride * oh:stride, j:j + stride * ow:stride, :] += dcols[:, :, :, i, j, :]
    dx = dxp[:, padding:hp - padding, padding:wp - padding, :] if padding else dxp
    return dx, dw


# ---------------------------------------------------------------- elementwise and cast


def add(a, b):
    return _f(a) + _f(b)


def mul(a, b):
    return _f(a) * _f(b)


def relu(x):
    return np.maximum(_f(x), 0)


def relu_bwd(x, dy):
    return _f(dy) * (_f(x) > 0)


_GELU_C = math.sqrt(2.0 / math.pi)


def gelu(x):
    """tanh approximation (as BERT implementations on IPU use)."""
    x = _f(x)
    return 0.5 * x * (1.0 + np.tanh(_GELU_C * (x + 0.044715 * x ** 3)))


def gelu_bwd(x, dy):
    x = _f(x)
    u = _GELU_C * (x + 0.044715 * x ** 3)
    t = np.tanh(u)
    du = _GELU_C * (1.0 + 3 * 0.044715 * x ** 2)
    return _f(dy) * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du)


def scale(x, s):
    return _f(x) * F32(s)


def cast(x, dtype):
    return np.asarray(x).astype(dtype)


def sgd_update(w, g, lr):
    return _f(w) - F32(lr) * _f(g)


# ---------------------------------------------------------------- reductions


def reduce_sum(x, axis=-1):
    return _f(x).sum(axis=axis)


def reduce_mean(x, axis=-1):
    return _f(x).mean(axis=axis)


def reduce_max(x, axis=-1):
    return _f(x).max(axis=axis)


# ---------------------------------------------------------------- softmax, layer norm


def softmax(x, axis=-1):
    x = _f(x)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def softmax_bwd(y, dy, axis=-1):
    """Gradient given the softmax output y."""
    y, dy = _f(y), _f(dy)
    return y * (dy - (dy * y).sum(axis=axis, keepdims=True))


LN_EPS = 1e-5


def layer_norm(x, gamma, beta, eps=LN_EPS):
    x = _f(x)
    mu = x.mean(-1, keepdims=True)
    var = x.var(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * _f(gamma) + _f(beta)


def layer_norm_bwd(x, gamma, dy, eps=LN_EPS):
    """(dx, dgamma, dbeta) of layer norm over the last axis."""
    x, gamma, dy = _f(x), _f(gamma), _f(dy)
    h = x.shape[-1]
    mu = x.mean(-1, keepdims=True)
    rstd = 1.0 / np.sqrt(x.var(-1, keepdims=True) + eps)
    xhat = (x - mu) * rstd
    lead = tuple(range(x.ndim - 1))
    dgamma = (dy * xhat).sum(lead)
    dbeta = dy.sum(lead)
    dxhat = dy * gamma
    dx = rstd / h * (h * dxhat - dxhat.sum(-1, keepdims=True) - xhat * (dxhat * xhat).sum(-1, keepdims=True))
    return dx, dgamma, dbeta


# ---------------------------------------------------------------- embedding / gather


def embedding(table, ids):
    return _f(table)[np.asarray(ids)]


def embedding_bwd(table_shape, ids, dy):
    """Scatter-add of dy rows into a zero table."""
    d = np.zeros(table_shape, dtype=F32)
    np.add.at(d, np.asarray(ids).reshape(-1), _f(dy).reshape(-1, table_shape[-1]))
    return d


def scatter_add(rows: int, idx, values):
    out = np.zeros((rows,) + np.shape(values)[1:], dtype=F32)
    np.add.at(out, np.asarray(idx), _f(values))
    return out


# ---------------------------------------------------------------- attention


def split_heads(x, heads):
    b, s, h = x.shape
    return x.reshape(b, s, heads, h // heads).transpose(0, 2, 1, 3)


def merge_heads(x):
    b, a, s, d = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, s, a * d)


def attention(x, wq, wk, wv, wo, heads):
    """Multi-head self attention, no mask, no biases.  Returns (out, cache) with cache for backward."""
    x = _f(x)
    q = split_heads(x @ _f(wq), heads)
    k = split_heads(x @ _f(wk), heads)
    v = split_heads(x @ _f(wv), heads)
    d = q.shape[-1]
    s = (q @ k.transpose(0, 1, 3, 2)) / F32(math.sqrt(d))
    p = softmax(s)
    ctx = merge_heads(p @ v)
    out = ctx @ _f(wo)
    return out, dict(x=x, q=q, k=k, v=v, p=p, ctx=ctx)


def attention_bwd(cache, wq, wk, wv, wo, heads, dout):
    """Returns dx, dwq, dwk, dwv, dwo."""
    x, q, k, v, p, ctx = (cache[n] for n in ("x", "q", "k", "v", "p", "ctx"))
    wq, wk, wv, wo, dout = _f(wq), _f(wk), _f(wv), _f(wo), _f(dout)
    b, s, h = x.shape
    d = q.shape[-1]
    x2 = x.reshape(-1, h)
    dwo = ctx.reshape(-1, h).T @ dout.reshape(-1, h)
    dctx = split_heads(dout @ wo.T, heads)
    dp = dctx @ v.transpose(0, 1, 3, 2)
    dv = p.transpose(0, 1, 3, 2) @ dctx
    ds = softmax_bwd(p, dp) / F32(math.sqrt(d))
    dq = ds @ k
    dk = ds.transpose(0, 1, 3, 2) @ q
    dq, dk, dv = (merge_heads(t).reshape(-1, h) for t in (dq, dk, dv))
    dwq, dwk, dwv = x2.T @ dq, x2.T @ dk, x2.T @ dv
    dx = (dq @ wq.T + dk @ wk.T + dv @ wv.T).reshape(b, s, h)
    return dx, dwq, dwk, dwv, dwo


# ---------------------------------------------------------------- losses


def mse_loss(y, target):
    y, target = _f(y), _f(target)
    diff = y - target
    return F32((diff * diff).mean()), F32(2.0 / diff.size) * diff


def numeric_check(name: str, got, want, rtol: float, atol: float) -> dict:
    """Compare an emulated result with its reference: the record stored in run['numeric_checks']."""
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    if got.shape != want.shape:
        return dict(name=name, passed=False, problem=f"shape {got.shape} != reference {want.shape}",
                    max_abs_err=float("inf"), max_rel_err=float("inf"), rtol=rtol, atol=atol)
    err = np.abs(got - want)
    scale_ = np.abs(want)
    max_abs = float(err.max()) if err.size else 0.0
    denom = np.maximum(scale_, atol if atol > 0 else 1e-30)
    max_rel = float((err / denom).max()) if err.size else 0.0
    passed = bool(np.all(err <= atol + rtol * scale_)) and bool(np.all(np.isfinite(got)))
    return dict(name=name, passed=passed, max_abs_err=max_abs, max_rel_err=max_rel, rtol=rtol, atol=atol,
                elements=int(got.size))
