"""Views and data movement: Reshape, Flatten, Transpose, Squeeze, Unsqueeze, Slice, Split, Expand and Gather
with constant indices are views (flat element indices, no data moved); Pad, Tile, Trilu, GatherElements,
GatherND, DepthToSpace and SpaceToDepth are views whose index the op itself computes (:func:`index_op`);
Concat is a copy; Identity, Dropout and float-to-float Cast pass through."""

from __future__ import annotations

import numpy as np

from ..loader import OnnxImportError
from .fold import evaluate_node
from .values import Act, attrs, canon, ints


def lower_identity(low, i, node, ins, name):
    low.vals[node.output[0]] = ins[0]
    low.op_count -= 1


def lower_cast(low, i, node, ins, name):
    from ..loader import dtype_info, elem_name

    to = int(attrs(node)["to"])
    info = dtype_info(to)
    if info is None or not np.issubdtype(info[0], np.floating):
        raise OnnxImportError(f"{low.lm.path}: node '{name}': Cast of a device tensor to {elem_name(to)} is not "
                              "supported (the emulator keeps activations in the run's float precision)")
    low.notes.append(f"node '{name}': Cast to {elem_name(to)} kept in the run's precision "
                      f"({low.be.precision})")
    lower_identity(low, i, node, ins, name)


def lower_reshape(low, i, node, ins, name):
    a, shp = low.data(node, ins), ints(ins[1])
    allowzero = attrs(node).get("allowzero", 0)
    shp = [a.shape[j] if (s == 0 and not allowzero) else s for j, s in enumerate(shp)]
    if -1 in shp:
        known = int(np.prod([s for s in shp if s != -1]))
        shp[shp.index(-1)] = a.size // max(1, known)
    if int(np.prod(shp)) != a.size:
        raise OnnxImportError(f"{low.lm.path}: node '{name}': cannot reshape {a.shape} to {tuple(shp)}")
    low.set_output(node, low.reshape(a, shp))
    low.op_count -= 1


def lower_flatten(low, i, node, ins, name):
    a = low.data(node, ins)
    ax = attrs(node).get("axis", 1)
    ax = ax + len(a.shape) if ax < 0 else ax
    shp = (int(np.prod(a.shape[:ax])), int(np.prod(a.shape[ax:])))
    low.set_output(node, low.reshape(a, shp))
    low.op_count -= 1


def axes_of(node, ins):
    at = attrs(node)
    if "axes" in at:
        return list(at["axes"])
    if len(ins) > 1 and ins[1] is not None:
        return ints(ins[1])
    return None


def lower_squeeze(low, i, node, ins, name):
    a = low.data(node, ins)
    axes = axes_of(node, ins)
    nd = len(a.shape)
    axes = [x + nd if x < 0 else x for x in axes] if axes is not None else [j for j, s in enumerate(a.shape)
                                                                          if s == 1]
    shp = tuple(s for j, s in enumerate(a.shape) if j not in axes)
    low.set_output(node, low.reshape(a, shp))
    low.op_count -= 1


def lower_unsqueeze(low, i, node, ins, name):
    a = low.data(node, ins)
    axes = axes_of(node, ins)
    nd = len(a.shape) + len(axes)
    axes = sorted(x + nd if x < 0 else x for x in axes)
    shp = list(a.shape)
    for x in axes:
        shp.insert(x, 1)
    low.set_output(node, low.reshape(a, shp))
    low.op_count -= 1


def lower_transpose(low, i, node, ins, name):
    a = low.data(node, ins)
    perm = tuple(attrs(node).get("perm", list(range(len(a.shape)))[::-1]))
    key = (a.shape, perm)
    idx = low.perm_cache.get(key)
    if idx is None:  # every layer of a transformer transposes the same shapes: build the index once
        idx = low.perm_cache[key] = np.arange(a.size, dtype=np.int64).reshape(a.shape).transpose(perm)
    low.set_output(node, low.view(a, idx, idx.shape))
    low.op_count -= 1


def lower_expand(low, i, node, ins, name):
    a = low.data(node, ins)
    shp = tuple(int(s) for s in np.broadcast_shapes(a.shape, tuple(ints(ins[1]))))
    src = (1,) * (len(shp) - len(a.shape)) + a.shape
    idx = np.broadcast_to(np.arange(a.size).reshape(src), shp)
    low.set_output(node, low.view(a, idx, shp))
    low.op_count -= 1


def lower_slice(low, i, node, ins, name):
    a = low.data(node, ins)
    nd = len(a.shape)
    at = attrs(node)
    if low.opset < 10:
        starts, ends = at["starts"], at["ends"]
        axes = at.get("axes", list(range(len(starts))))
        steps = [1] * len(starts)
    else:
        starts, ends = ints(ins[1]), ints(ins[2])
        axes = ints(ins[3]) if len(ins) > 3 and ins[3] is not None else list(range(len(starts)))
        steps = ints(ins[4]) if len(ins) > 4 and ins[4] is not None else [1] * len(starts)
    sl = [slice(None)] * nd
    for s, e, ax, st in zip(starts, ends, axes, steps, strict=True):
        ax = ax + nd if ax < 0 else ax
        big = 2 ** 62
        e = None if (st > 0 and e >= big) or (st < 0 and e <= -big) else e
        sl[ax] = slice(s, e, st)
    idx = np.arange(a.size).reshape(a.shape)[tuple(sl)]
    low.set_output(node, low.view(a, idx, idx.shape))
    low.op_count -= 1


def lower_split(low, i, node, ins, name):
    a = low.data(node, ins)
    nd = len(a.shape)
    at = attrs(node)
    ax = at.get("axis", 0)
    ax = ax + nd if ax < 0 else ax
    sizes = at.get("split")
    if sizes is None and len(ins) > 1 and ins[1] is not None:
        sizes = ints(ins[1])
    nout = len(node.output)
    if sizes is None:
        d = a.shape[ax]
        per = -(-d // nout)
        sizes = [min(per, d - per * j) for j in range(nout)]
    full = np.arange(a.size).reshape(a.shape)
    off = 0
    for o, s in zip(node.output, sizes, strict=True):
        sl = [slice(None)] * nd
        sl[ax] = slice(off, off + s)
        idx = full[tuple(sl)]
        if o:
            low.vals[o] = low.view(a, idx, idx.shape)
        off += s
    low.op_count -= 1


def lower_gather(low, i, node, ins, name):
    data, ids = ins
    if isinstance(ids, Act):
        raise OnnxImportError(f"{low.lm.path}: node '{name}': Gather with indices computed on the device is "
                              "not supported (indices must be inputs or constants, known when the graph is built)")
    ids = np.asarray(ids).astype(np.int64)
    ax = attrs(node).get("axis", 0)
    shape = data.shape if isinstance(data, Act) else np.shape(data)
    nd = len(shape)
    ax = ax + nd if ax < 0 else ax
    n = shape[ax]
    if ids.size and (ids.min() < -n or ids.max() >= n):
        raise OnnxImportError(f"{low.lm.path}: node '{name}': Gather indices out of range [-{n}, {n}) on axis "
                              f"{ax}")
    ids = np.where(ids < 0, ids + n, ids)
    if not isinstance(data, Act) and ax == 0 and nd == 2:
        table = low.tensor_of(node.input[0])
        h = low.be.gather_rows(table, ids.ravel(), name)
        low.set_output(node, Act(h, ids.shape + (shape[1],)))
        return
    a = data if isinstance(data, Act) else low.act(node.input[0])
    idx = np.take(np.arange(a.size).reshape(a.shape), ids, axis=ax)
    low.set_output(node, low.view(a, idx, idx.shape))
    low.op_count -= 1


def index_op(low, i, node, ins, name):
    """A data-movement op (Pad, Tile, Trilu, GatherElements, GatherND, DepthToSpace, SpaceToDepth) as a view:
    the op itself, evaluated by ONNX's reference implementation on the 1-based positions of its data input
    (its other inputs must be known when the graph is built), says which element each output element
    reads; 0 there is a fill value (Pad's constant, Trilu's zeros), read from a one-element constant
    appended to the data (a copy, as Poplar's pad)."""
    a = low.data(node, ins)
    if any(isinstance(v, Act) for v in ins[1:]):
        raise OnnxImportError(f"{low.lm.path}: node '{name}': {node.op_type} with indices / sizes computed on "
                              "the device is not supported (they must be known when the graph is built)")
    fill = 0.0
    feeds = {node.input[0]: np.arange(1, a.size + 1, dtype=np.int64).reshape(a.shape)}
    for nm, v in zip(node.input[1:], ins[1:], strict=True):
        if nm:
            feeds[nm] = np.asarray(v)
    if node.op_type == "Pad":
        mode = attrs(node).get("mode", b"constant")
        mode = mode.decode() if isinstance(mode, bytes) else str(mode)
        if mode == "constant":
            if len(node.input) > 2 and node.input[2]:
                fill = float(np.asarray(ins[2]).ravel()[0]) if np.size(ins[2]) else 0.0
                feeds[node.input[2]] = np.zeros((), np.int64)
            elif "value" in attrs(node):  # opset < 11
                fill = float(attrs(node)["value"])
    try:
        pos = np.asarray(evaluate_node(node, feeds, low.opset)[0])
    except Exception as e:
        raise OnnxImportError(f"{low.lm.path}: node '{name}' ({node.op_type}) could not be evaluated on its "
                              f"index: {type(e).__name__}: {e}") from None
    low.set_output(node, view_with_fill(low, a, pos.astype(np.int64) - 1, fill, name))


def view_with_fill(low, a: Act, idx, fill: float, name) -> Act:
    """Act of ``idx``'s shape whose elements are ``a``'s logical elements ``idx``, ``fill`` where ``idx`` is
    negative: read from a one-element constant appended to the data (a copy, as Poplar's pad)."""
    idx = np.asarray(idx, np.int64)
    if (idx < 0).any():
        cn = f"{name}/fill"
        low.vals[cn] = np.full(1, fill, np.float32)
        src = low.plain(a)
        flat = low.reshape(src, (a.size,))
        one = low.act(cn)
        h = low.be.concat([(low.operand_raw(flat.h, (a.size,)), (a.size,)), (one.h, (1,))], 0, (a.size + 1,),
                           name + "/fill")
        joined = Act(h, (a.size + 1,))
        if low.training:
            n = a.size
            low.rec(joined, [flat], lambda dy: [(flat, lambda: low.be.take(dy, np.arange(n)))])
        idx = np.where(idx < 0, a.size, idx)
        return low.view(joined, idx, idx.shape, fill_last=True)
    return low.view(a, idx, idx.shape)


def lower_concat(low, i, node, ins, name):
    ax = attrs(node)["axis"]
    parts = []
    for v, nm in zip(ins, node.input, strict=True):
        a = v if isinstance(v, Act) else low.act(nm)
        if a.size:
            parts.append(a)
    nd = len(parts[0].shape)
    ax = ax + nd if ax < 0 else ax
    shp = list(parts[0].shape)
    shp[ax] = sum(p.shape[ax] for p in parts)
    handles, plains = [], []
    for p in parts:
        pp = low.plain(p)
        plains.append(pp)
        handles.append((pp.h, pp.shape))
    out = Act(low.be.concat(handles, ax, canon(shp), name), tuple(shp))
    if low.training:
        from ..ops import concat_index

        pos, _ = concat_index([p.shape for p in plains], ax)
        low.rec(out, plains, lambda dy: [(pp, lambda q=q: low.be.take(dy, q))
                                           for pp, q in zip(plains, pos, strict=True)])
    low.set_output(node, out)


def lower_scatter_nd(low, i, node, ins, name):
    """ScatterND (reduction 'none') with its indices known when the graph is built, data and / or updates
    computed on the device (Funnel's torch.export file writes its pooled tokens back this way): a view of the data
    and the updates joined - the op itself, evaluated on their positions, says which one each output element
    reads."""
    data, idx, upd = ins[:3]
    red = attrs(node).get("reduction", b"none")
    red = red.decode() if isinstance(red, bytes) else str(red)
    if isinstance(idx, Act):
        raise OnnxImportError(f"{low.lm.path}: node '{name}': ScatterND with indices computed on the device is not "
                              "supported; instead: compute the indices from inputs or constants")
    if red != "none":
        raise OnnxImportError(f"{low.lm.path}: node '{name}': ScatterND reduction '{red}' is not supported (only "
                              "'none'); instead: write the update as an Add / Mul of a scattered tensor")
    a = data if isinstance(data, Act) else low.act(node.input[0])
    u = upd if isinstance(upd, Act) else low.act(node.input[2])
    n, m = a.size, u.size
    feeds = {node.input[0]: np.arange(n, dtype=np.int64).reshape(a.shape), node.input[1]: np.asarray(idx),
             node.input[2]: np.arange(n, n + m, dtype=np.int64).reshape(u.shape)}
    try:
        pos = np.asarray(evaluate_node(node, feeds, low.opset)[0])
    except Exception as e:
        raise OnnxImportError(f"{low.lm.path}: node '{name}' (ScatterND) could not be evaluated on its index: "
                              f"{type(e).__name__}: {e}") from None
    fa, fu = low.reshape(low.plain(a), (n,)), low.reshape(low.plain(u), (m,))
    h = low.be.concat([(low.operand_raw(fa.h, (n,)), (n,)), (low.operand_raw(fu.h, (m,)), (m,))], 0, (n + m,),
                      name + "/join")
    joined = Act(h, (n + m,))
    if low.training:
        low.rec(joined, [fa, fu], lambda dy: [(fa, lambda: low.be.take(dy, np.arange(n))),
                                               (fu, lambda: low.be.take(dy, np.arange(n, n + m)))])
    low.set_output(node, low.view(joined, pos, pos.shape))
