"""Helpers shared by the op modules (``basic``, ``matmul``, ``norm_pool``, ``pooling``): operand sizes, flat
views as copy endpoints, materialising a View or a tensor in another layout, and one elementwise
compute set over an output's worker pieces."""

from __future__ import annotations

import copy
import weakref

import numpy as np

from popvision_lite.emulator import mapping as M
from popvision_lite.emulator import programs as P
from popvision_lite.emulator.codelets import popops as CO
from popvision_lite.emulator.graph import Regions, TensorView, _ranges_index
from popvision_lite.emulator.ops.context import OpContext, View
from popvision_lite.emulator.shared_arrays import share


def _nbytes(x) -> int:
    if isinstance(x, View):
        # from the shape: reading ``index`` would build a lazy transpose's whole index array
        return int(np.prod(x.shape, dtype=np.int64)) * x.base.itemsize
    return int(x.nbytes)


def _same_mapping(a, b) -> bool:
    if a is b:
        return a is not None
    return (a is not None and b is not None and len(a) == len(b)
            and all(x is y or np.array_equal(x, y) for x, y in ((a.tile, b.tile), (a.start, b.start), (a.stop, b.stop))))


_CHUNK = 1 << 16  # elements per pass of the index scans below: their temporaries stay in the CPU's cache


def run_breaks(index: np.ndarray) -> np.ndarray:
    """``np.flatnonzero(np.diff(index) != 1) + 1`` for a 1-D int64 index: where a new run of consecutive elements
    starts.  Scanned in chunks: an activation's index has millions of elements and few breaks, and the whole
    difference array and its mask (9 bytes an element) cost more to write and read back than the scan."""
    n = len(index)
    if n <= _CHUNK:
        return np.flatnonzero(np.diff(index) != 1) + 1
    d = np.empty(_CHUNK, np.int64)
    m = np.empty(_CHUNK, bool)
    out = []
    for a in range(0, n - 1, _CHUNK):
        k = min(_CHUNK, n - 1 - a)
        np.subtract(index[a + 1:a + 1 + k], index[a:a + k], out=d[:k])
        np.not_equal(d[:k], 1, out=m[:k])
        nz = np.flatnonzero(m[:k])
        if len(nz):
            out.append(nz + (a + 1))
    return np.concatenate(out) if out else np.zeros(0, np.int64)


# (data address, shape, strides, dtype, axis) of a read-only index -> (a weak reference to the array owning its
# memory, unit_steps): a model's head layouts (transformer._heads, read-only) are read by a layer's attention
# matmuls forward and backward, each a view of the same layout, so their runs are counted once while it lives
_STEPS: dict[tuple, tuple] = {}


def unit_steps(index: np.ndarray, axis: int) -> int:
    """``np.count_nonzero(np.diff(index, axis=axis) == 1)`` for an int index of at least two dimensions and
    ``axis`` -1 or -2 (how many neighbours along that axis are consecutive elements), scanned in chunks of rows
    (see :func:`run_breaks`); counted once per read-only index (whose memory cannot change while it lives)."""
    owner = index
    while isinstance(owner.base, np.ndarray):
        owner = owner.base
    if index.flags.writeable or owner.flags.writeable or owner.base is not None:  # (memory that may change)
        return _unit_steps(index, axis)
    key = (index.__array_interface__["data"][0], index.shape, index.strides, index.dtype.str, axis)
    hit = _STEPS.get(key)
    if hit is not None and hit[0]() is owner:
        return hit[1]
    n = _unit_steps(index, axis)
    _STEPS[key] = (weakref.ref(owner, lambda _r, key=key: _STEPS.pop(key, None)), n)
    return n


def _unit_steps(index: np.ndarray, axis: int) -> int:
    a = index.reshape((-1,) + index.shape[-2:])
    L, R, W = a.shape
    rows = max(1, _CHUNK // max(W, 1))
    total = 0
    if axis == -1:
        flat = a.reshape(L * R, W)
        for s in range(0, L * R, rows):
            blk = flat[s:s + rows]
            total += int(np.count_nonzero(blk[:, 1:] - blk[:, :-1] == 1))
        return total
    if R * W <= _CHUNK:  # several whole planes a pass
        step = max(1, _CHUNK // max(R * W, 1))
        for p in range(0, L, step):
            blk = a[p:p + step]
            total += int(np.count_nonzero(blk[:, 1:] - blk[:, :-1] == 1))
        return total
    for p in range(L):
        for s in range(0, R - 1, rows):
            e = min(s + rows, R - 1)
            total += int(np.count_nonzero(a[p, s + 1:e + 1] - a[p, s:e] == 1))
    return total


def flat_view(t, index):
    """Copy endpoint: elements of tensor ``t`` at flat positions ``index`` (in that order).

    Stored as contiguous runs (a Regions endpoint) when the index has long runs - e.g. a head
    split moves rows of 64 - so the program keeps (start, length) pairs, not one int per element."""
    index = np.asarray(index, dtype=np.int64).ravel()
    n = len(index)
    if n > 1:
        brk = run_breaks(index)
        if len(brk) + 1 <= n // 4:
            first = np.concatenate([[0], brk])
            sizes = np.diff(np.concatenate([first, [n]]))
            return t.regions(index[first], sizes)
    return TensorView(t, index, (n,))


def ranges_view(t, starts, sizes):
    """``flat_view(t, concatenation of arange(s, s + n) for every (s, n))``, without forming that index: adjacent
    ranges are merged into the runs flat_view would find, and only when the runs are too many for a Regions
    endpoint (more than a quarter of the elements) is the index formed.  The same endpoint as flat_view's."""
    starts, sizes = np.asarray(starts, np.int64).ravel(), np.asarray(sizes, np.int64).ravel()
    keep = sizes > 0
    starts, sizes = starts[keep], sizes[keep]
    n = int(sizes.sum())
    if n > 1:
        new = np.r_[True, starts[1:] != starts[:-1] + sizes[:-1]]  # a range that does not continue the last one
        first = np.flatnonzero(new)
        if len(first) <= n // 4:
            return t.regions(starts[first], np.add.reduceat(sizes, first))
    return flat_view(t, _ranges_index(starts, sizes))


def _copy_src(x):
    if isinstance(x, View):
        if x._index is None and x.reps is not None:  # the whole base, reps times: flat_view's endpoint by ranges
            return ranges_view(x.base, np.zeros(x.reps, np.int64), np.full(x.reps, x.base.size, np.int64))
        return flat_view(x.base, x.index)
    return x.whole()


def materialize(ctx: OpContext, x, name: str, op: str, mapping=None, shape=None, dtype=None):
    """A graph Tensor holding x with ``mapping`` (default linear over the IPU); copies when needed."""
    if not isinstance(x, View) and (mapping is None or _same_mapping(x.mapping, mapping)) \
            and (shape is None or tuple(shape) == x.shape) and (dtype is None or dtype == x.dtype):
        return x
    shape = tuple(shape) if shape is not None else tuple(x.shape)
    size = int(np.prod(shape))
    if mapping is None:
        mapping = ctx.linear_mapping(size)
    t = ctx.variable(f"{op}/{name}", shape, dtype or x.dtype, mapping=mapping, op=op)
    if dtype is not None and dtype != x.dtype:
        src = materialize(ctx, x, name + "_src", op, mapping=mapping, shape=shape)
        _elementwise_cs(ctx, CO.CAST, {"in": src}, t, op, f"{op}/cast_{name}")
    else:
        ctx.add(P.Copy(_copy_src(x), t.whole(), name=f"{op}/copy_{name}", op=op))
    return t


def regions_on(field, tensor):
    """``tensor.regions(field.starts, field.sizes)`` (an elementwise op's input, read where its output field
    writes) without a second bounds pass: the field's arrays, checked against ``tensor``'s size by the end the
    field's own check found (``Regions._hi``); an empty or int64 field, or one that does not fit, is built as
    before (and refused there)."""
    if not field.n or max(field.tensor.size, tensor.size) >= 2**31 or field._hi > tensor.size:
        return tensor.regions(field.starts, field.sizes)
    r = copy.copy(field)  # (sizes held as an array: not regular, as the constructor would make it)
    r.tensor, r.regular, r._idx, r._whole = tensor, False, None, None
    return r


def _elementwise_cs(ctx, codelet, inputs: dict, out, op, cs_name, params=None):
    """One compute set: codelet over every worker piece of ``out``'s mapping; inputs share it."""
    cs = ctx.graph.add_compute_set(ctx.unique(cs_name), op=op)
    tiles, out_f = worker_field(ctx, out)  # (the inputs' fields take its read-only int32 arrays as they are)
    fields = {k: regions_on(out_f, v) for k, v in inputs.items()}
    fields["out"] = out_f
    grp = ctx.graph.add_vertices(cs, codelet, tiles=tiles, fields=fields, params=params or {})
    for f in fields.values():
        mark_split(f, out.mapping, grp.tiles)
    ctx.add(P.Execute(cs, name=cs.name, op=op))
    return cs


def worker_field(ctx, t):
    """``(tiles, t.regions(starts, sizes))`` of ``mapping.worker_split(t)``'s pieces, the tiles and the field
    written as int32 as the vertex group and the field hold them (``mapping.worker_pieces``, :func:`split_field`)."""
    cut = M.worker_pieces(t, workers=ctx.target.threads_per_tile)
    if cut is None:
        tiles, starts, sizes = M.worker_split(t, workers=ctx.target.threads_per_tile)
        return tiles, t.regions(starts, sizes)
    return cut[0], split_field(t, cut)


def split_field(tensor, cut):
    """``tensor.regions(starts, sizes)`` of the pieces ``cut`` = ``mapping.worker_pieces(tensor)`` without the
    constructor's bounds pass and conversions (each piece lies in an interval of the tensor's checked mapping, and
    the arrays are read-only int32 already): the field the constructor would build, attribute for attribute, with
    ``_hi`` the pieces' largest end."""
    _tiles, starts, sizes, hi = cut
    r = Regions.__new__(Regions)
    r.tensor, r.n, r.regular, r._hi, r._idx, r._whole = tensor, len(starts), False, hi, None, None
    r.starts = share(starts)
    r.sizes = sizes if sizes.strides[0] == 0 else share(sizes)  # (one size: the constructor's broadcast)
    return r


def mark_split(field, mapping, tiles) -> None:
    """Note on ``field`` that its regions are ``mapping``'s own worker pieces (``mapping.worker_split``: each a
    part of one interval) with ``tiles`` (the vertex group's array) their intervals' tiles, so each vertex's
    region lies on its vertex's tile by construction.  The graph check (``compile.check.split_local``) then
    skips its interval search for the field while its tensor still has that mapping and its group those tiles."""
    field.split_of = (mapping, tiles)
