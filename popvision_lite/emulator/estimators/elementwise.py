"""Which poplibs estimator costs an elementwise codelet piece, in its 1D and 2D vertex forms.

A codelet's ``model`` names the estimator: ``("binary", op)``, ``("binary_inplace", op)``,
``("unary", op)``, ``("nonlinearity", kind, grad)``, ``("cast",)``, ``("fill",)``,
``("scaled_add",)``, or ``("composite", [models...])`` for a fused op (the parts one after the other
on the same piece).
"""

from __future__ import annotations

import numpy as np

from popvision_lite.emulator.estimators import popnn, popops


def model_worker_cycles(model, n, itemsize: int, src_itemsize: int | None = None) -> np.ndarray:
    """Worker cycles of an elementwise piece of ``n`` elements under a poplibs estimator ``model``."""
    kind = model[0]
    if kind == "binary":
        return popops.binary_op_worker_cycles(model[1], itemsize, n)
    if kind == "binary_inplace":
        return popops.binary_op_inplace_worker_cycles(model[1], itemsize, n)
    if kind == "unary":
        return popops.unary_op_worker_cycles(model[1], itemsize, n)
    if kind == "nonlinearity":
        return popnn.nonlinearity_worker_cycles(model[1], itemsize, n, grad=bool(model[2]))
    if kind == "cast":
        return popops.cast_worker_cycles(n, int(src_itemsize or itemsize), int(itemsize))
    if kind == "fill":
        return popops.fill_worker_cycles(n, itemsize)
    if kind == "scaled_add":
        return popops.scaled_add_worker_cycles(n, itemsize)
    if kind == "composite":
        return sum(model_worker_cycles(m, n, itemsize, src_itemsize) for m in model[1])
    raise ValueError(f"unknown cycle model {model!r}")


# When a tile holds more pieces of an op than it has workers (a fragmented mapping, e.g. the rows of
# matmul output blocks), Poplar runs 2D worker vertices, each looping over a list of regions:
# (per-region overhead, per-vertex prologue) of the 2D estimators, and the 1D worker prologue that
# the per-region cost replaces.  popops BinaryOp2D: 5 + sum of inner loops; BinaryOp2DInPlace: 20 +;
# UnaryOp2D: 20 +; getCast2DCycleEstimate: 5 + sum(11 + castWorkerCycles); getFill2DCycleEstimate:
# 5 + sum(fill - 2); popnn nonLinearity2DCycleEstimator: 5 + 9 + per region 12 + loop (half).
# ScaledAdd2D is costed like BinaryOp2D (assumption: its estimator was not read).
MODEL_2D = {  # kind -> (per-region overhead, per-vertex prologue)
    "binary": (0, 5), "binary_inplace": (0, 20), "unary": (0, 20), "nonlinearity": (12, 14),
    "cast": (11, 5), "fill": (-2, 5), "scaled_add": (0, 5),
}


def _model_1d_prologue(model, itemsize: int) -> int:
    kind = model[0]
    if kind == "binary":
        return popops.binary_op_1d_prologue(itemsize)
    if kind == "binary_inplace":
        return popops.BINARY_INPLACE_1D_PROLOGUE
    if kind == "unary":
        return popops.unary_op_1d_prologue(model[1]) + popops.UNARY_SUPERVISOR_EXTRA
    if kind == "nonlinearity":
        return popnn.NONLINEARITY_1D_PROLOGUE + popops.UNARY_SUPERVISOR_EXTRA
    if kind == "cast":
        return popops.CAST_1D_PROLOGUE
    if kind in ("fill", "scaled_add"):
        return 0
    raise ValueError(kind)


def model_region_cycles(model, n, itemsize: int, src_itemsize: int | None = None) -> tuple[np.ndarray, int]:
    """(cycles of one region of a 2D worker vertex, 2D vertex prologue) under ``model``."""
    if model[0] == "composite":
        parts = [model_region_cycles(m, n, itemsize, src_itemsize) for m in model[1]]
        return sum(p[0] for p in parts), sum(p[1] for p in parts)
    if model[0] == "scaled_add":
        loop = popops.binary_op_loop_cycles("add", itemsize, n)
    else:
        loop = model_worker_cycles(model, n, itemsize, src_itemsize) - _model_1d_prologue(model, itemsize)
    per_region, prologue = MODEL_2D[model[0]]
    return loop + per_region, prologue


def piece_cycles(model, n, itemsize: int, src_itemsize: int | None, on_tile, threads: int) -> np.ndarray:
    """Worker cycles of each piece of an elementwise op: a 1D worker vertex where its tile holds at
    most ``threads`` pieces, else a region of one of the tile's ``threads`` 2D worker vertices (the
    2D prologue shared by the pieces of a vertex).  The estimators are functions of a piece's size alone,
    so they are evaluated once per size (:func:`per_size`): an op's pieces have a few sizes."""
    def one(x):
        return model_worker_cycles(model, x, itemsize, src_itemsize)

    frag = on_tile > threads
    if not frag.any():
        return per_size(one, n)
    pro = model_region_cycles(model, n[:1], itemsize, src_itemsize)[1]
    reg = per_size(lambda x: model_region_cycles(model, x, itemsize, src_itemsize)[0], n)
    # the prologue's share per piece by the tile's piece count: divided once per count, read back per piece
    share = -(-pro * threads // np.maximum(np.arange(int(on_tile.max()) + 1), 1))
    c2 = reg + share[on_tile]
    if frag.all():  # every piece a region of a 2D vertex (a large op's): the 1D cycles are not read, only their type
        return c2.astype(np.result_type(c2, one(n[:1])), copy=False)
    return np.where(frag, c2, per_size(one, n))


# per_size: a table of every size in the pieces' span when the span is at most this share of their count
_TABLE_SPAN_SHARE = 8


def per_size(fn, n: np.ndarray) -> np.ndarray:
    """``fn(n)`` for a function ``fn`` of each element of the int array ``n`` alone (an estimator of a piece's
    cycles from its size): where ``n`` spans few values for its length (the worker pieces of an op: a few
    sizes), ``fn`` is evaluated on every value of the span once and read back at ``n``; the same array."""
    n = np.asarray(n)
    if n.size < 64 or n.ndim != 1:
        return fn(n)
    lo, hi = int(n.min()), int(n.max())
    if (hi - lo + 1) * _TABLE_SPAN_SHARE > n.size:
        return fn(n)
    table = np.asarray(fn(np.arange(lo, hi + 1, dtype=n.dtype)))
    if table.shape != (hi - lo + 1,):
        return fn(n)
    return table[n - lo] if lo else table[n]
