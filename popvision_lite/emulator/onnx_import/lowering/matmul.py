"""The matmul family: MatMul (batched, broadcast), Gemm, two-operand Einsum, CumSum (a matmul with a triangular
matrix), each one (batched) matmul between views, with its backward pass (dX = dY W^T, dW = X^T dY)."""

from __future__ import annotations

import numpy as np

from ..loader import OnnxImportError
from .elementwise import binary_op, unary_act
from .values import Act, attrs


def matmul(low, a, b, name, a_name, b_name):
    be = low.be
    A = a if isinstance(a, Act) else low.act(a_name)
    B = b if isinstance(b, Act) else low.act(b_name)
    sa, sb = A.shape, B.shape
    sq_a = sq_b = False
    if len(sa) == 1:
        A = low.view(A, np.arange(A.size).reshape(1, -1), (1, sa[0]))
        sa, sq_a = A.shape, True
    if len(sb) == 1:
        B = low.view(B, np.arange(B.size).reshape(-1, 1), (sb[0], 1))
        sb, sq_b = B.shape, True
    K, N = sb[-2], sb[-1]
    if sa[-1] != K:
        raise OnnxImportError(f"{low.lm.path}: node '{name}': MatMul shapes {sa} @ {sb} do not chain")
    if len(sb) == 2:
        lead = sa[:-1]
        A, B = low.plain(A), low.plain(B)
        ha, hb = low.operand(A, (int(np.prod(lead)), K)), low.operand(B, (K, N))
        h = be.matmul(ha, hb, name)
        out_shape = lead + (N,)
    else:
        batch = tuple(int(s) for s in np.broadcast_shapes(sa[:-2], sb[:-2]))
        G = int(np.prod(batch))
        M = sa[-2]

        def expand(X, tail):
            s = X.shape
            src = (1,) * (len(batch) + 2 - len(s)) + s
            idx = np.broadcast_to(np.arange(X.size).reshape(src), batch + tail)
            return X if idx.shape == s else low.view(X, idx, batch + tail)
        A, B = low.plain(expand(A, (M, K))), low.plain(expand(B, (K, N)))
        ha, hb = low.operand(A, (G, M, K)), low.operand(B, (G, K, N))
        h = be.matmul(ha, hb, name)
        out_shape = batch + (M, N)
    out = Act(h, out_shape)
    if low.training:
        def bwd(dy, A=A, B=B, ha=ha, hb=hb, name=name):
            d = low.operand_raw(dy, tuple(h.shape))
            return [(A, lambda: be.matmul(d, be.t(hb), name + "/bwd_dx")),
                    (B, lambda: be.matmul(be.t(ha), d, name + "/bwd_dw"))]
        low.rec(out, [A, B], bwd)
    if sq_a or sq_b:
        shape = tuple(s for j, s in enumerate(out_shape)
                      if not ((sq_a and j == len(out_shape) - 2) or (sq_b and j == len(out_shape) - 1)))
        out = low.view(out, np.arange(out.size).reshape(shape), shape)
    return out


def lower_matmul(low, i, node, ins, name):
    low.set_output(node, matmul(low, ins[0], ins[1], name, node.input[0], node.input[1]))


def lower_gemm(low, i, node, ins, name):
    at = attrs(node)
    alpha, beta = float(at.get("alpha", 1.0)), float(at.get("beta", 1.0))
    a, b = ins[0], ins[1]
    an, bn = node.input[0], node.input[1]
    if not isinstance(b, Act):
        w = np.asarray(b, dtype=np.float32)
        if at.get("transB", 0):
            w = w.T
        if alpha != 1.0:
            w = w * alpha
            alpha = 1.0
        bn = node.input[1] + ("/T" if at.get("transB", 0) else "")
        low.vals[bn] = np.ascontiguousarray(w)
        if node.input[1] in low.params:
            low.params.add(bn)
        b = low.vals[bn]
    elif at.get("transB", 0):
        b = low.view(b, np.arange(b.size).reshape(b.shape).T, b.shape[::-1])
    if at.get("transA", 0):
        A = a if isinstance(a, Act) else low.act(an)
        a = low.view(A, np.arange(A.size).reshape(A.shape).T, A.shape[::-1])
    y = matmul(low, a, b, name, an, bn)
    if alpha != 1.0:
        y = unary_act(low, "scale", y, name + "/alpha", alpha)
    if len(ins) > 2 and ins[2] is not None and beta != 0.0:
        c = ins[2]
        cn = node.input[2]
        if beta != 1.0:
            if isinstance(c, Act):
                c = unary_act(low, "scale", c, name + "/beta", beta)
            else:
                cn = cn + "/beta"
                low.vals[cn] = np.asarray(c, np.float32) * beta
                c = low.vals[cn]
        y = binary_op(low, "add", node, y, c, name + "/bias", "", cn)
    low.set_output(node, y)


def lower_einsum(low, i, node, ins, name):
    """Two-operand Einsum as a batched matmul (batch letters, free letters of each side, contracted letters)
    between views; one operand: a transpose."""
    eq = attrs(node)["equation"]
    eq = (eq.decode() if isinstance(eq, bytes) else str(eq)).replace(" ", "")
    if "..." in eq or "->" not in eq:
        raise OnnxImportError(f"{low.lm.path}: node '{name}': Einsum '{eq}': only explicit equations without "
                              "'...' are supported")
    lhs, out = eq.split("->")
    terms = lhs.split(",")
    ops = [v if isinstance(v, Act) else low.act(nm) for v, nm in zip(ins, node.input, strict=True)]
    if any(len(set(t)) != len(t) for t in terms) or len(set(out)) != len(out):
        raise OnnxImportError(f"{low.lm.path}: node '{name}': Einsum '{eq}': repeated letters in a term "
                              "(diagonals, traces) are not supported")
    if len(terms) == 1:
        if sorted(terms[0]) != sorted(out):
            raise OnnxImportError(f"{low.lm.path}: node '{name}': Einsum '{eq}': a sum over letters of one "
                                  "operand is not supported (only a transpose)")
        perm = [terms[0].index(c) for c in out]
        a = ops[0]
        idx = np.arange(a.size).reshape(a.shape).transpose(perm)
        low.set_output(node, low.view(a, idx, idx.shape))
        return
    if len(terms) != 2:
        raise OnnxImportError(f"{low.lm.path}: node '{name}': Einsum '{eq}' of {len(terms)} operands: 1 or 2 "
                              "are supported")
    ta, tb = terms
    A, B = ops
    size = {}
    for t, X in ((ta, A), (tb, B)):
        for c, d in zip(t, X.shape, strict=True):
            if size.setdefault(c, d) != d:
                raise OnnxImportError(f"{low.lm.path}: node '{name}': Einsum '{eq}': letter {c} has sizes "
                                      f"{size[c]} and {d}")
    batch = [c for c in out if c in ta and c in tb]
    lfree = [c for c in out if c in ta and c not in tb]
    rfree = [c for c in out if c in tb and c not in ta]
    contract = [c for c in ta if c in tb and c not in out]
    if any(c not in out and c not in tb for c in ta) or any(c not in out and c not in ta for c in tb):
        raise OnnxImportError(f"{low.lm.path}: node '{name}': Einsum '{eq}': a letter summed within one "
                              "operand is not supported")
    prod = lambda cs: int(np.prod([size[c] for c in cs]))  # noqa: E731
    G, M, K, N = prod(batch), prod(lfree), prod(contract), prod(rfree)
    ia = np.arange(A.size).reshape(A.shape).transpose([ta.index(c) for c in batch + lfree + contract])
    ib = np.arange(B.size).reshape(B.shape).transpose([tb.index(c) for c in batch + contract + rfree])
    Av = low.view(A, ia.reshape(G, M, K), (G, M, K))
    Bv = low.view(B, ib.reshape(G, K, N), (G, K, N))
    Y = matmul(low, Av, Bv, name, "", "")
    mid = [size[c] for c in batch + lfree + rfree]
    order = batch + lfree + rfree
    iy = np.arange(Y.size).reshape(mid).transpose([order.index(c) for c in out])
    low.set_output(node, low.view(Y, iy, iy.shape))


def lower_cumsum(low, i, node, ins, name):
    """Cumulative sum along an axis: a matmul of the rows with a triangular matrix of ones."""
    a = low.data(node, ins)
    if isinstance(ins[1], Act):
        raise OnnxImportError(f"{low.lm.path}: node '{name}': CumSum with an axis computed on the device")
    at = attrs(node)
    nd = len(a.shape)
    ax = int(np.asarray(ins[1]).ravel()[0])
    ax = ax + nd if ax < 0 else ax
    n = a.shape[ax]
    j, k = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")  # out[k] = sum_j x[j] T[j, k]
    if at.get("reverse", 0):
        tri = (j > k) if at.get("exclusive", 0) else (j >= k)
    else:
        tri = (j < k) if at.get("exclusive", 0) else (j <= k)
    tn = f"{name}/triangle"
    low.vals[tn] = tri.astype(np.float32)
    low.set_output(node, matmul_along(low, a, ax, low.vals[tn], name, tn))


def matmul_along(low, a, ax, m, name, m_name):
    """``a`` with axis ``ax`` multiplied by the constant matrix ``m`` (size, out): ``y[..., o, ...] = sum_s
    a[..., s, ...] m[s, o]``; one matmul with ``ax`` moved last (views around it)."""
    nd = len(a.shape)
    perm = [d for d in range(nd) if d != ax] + [ax]
    idx = np.arange(a.size).reshape(a.shape).transpose(perm)
    t = low.view(a, idx, idx.shape) if perm != list(range(nd)) else a
    y = matmul(low, t, m, name, "", m_name)
    back = np.arange(y.size).reshape(y.shape).transpose(np.argsort(perm))
    return low.view(y, back, back.shape) if perm != list(range(nd)) else y
