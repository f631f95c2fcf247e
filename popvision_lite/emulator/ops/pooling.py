"""Pooling and window gathers: numpy reference, emulator ops and codelets, and the backend methods.

Tensors are NHWC activations stored as rows of channels, ``(N*H*W, C)``.  Windowed ops (im2col,
max / average pooling and their gradients) are described by a *window index*: an int array
``(R_out, k)`` of input rows (``-1`` = padding), built once when the graph is built
(:func:`conv_windows`, :func:`global_windows`).  Its inverse (:func:`invert_windows`) lists, for
every input row, the ``(window, slot)`` positions that read it - the gather form of col2im and of
the pooling gradients, so every windowed op is "gather rows, then reduce each row's windows".

Semantics (the numpy reference below is the ground truth the emulator is checked against):

* max pool: padding never wins (``-inf``); its gradient goes to every input element equal to its
  window's maximum (the comparison ``in == out`` of poplibs' ``MaxPoolingGrad`` vertex);
* average pool divides by the window size including padding (``count_include_pad``); global
  average pooling is one window over all of an image's rows.

Cycle costs of the pooling vertices are poplibs' pooling estimator (``estimators.popnn.pooling_cycles``,
from ``getPoolingCycles``).  Batch norm is in ``ops/norm_pool.py``.
"""


import weakref

import numpy as np

from popvision_lite.emulator import mapping as M
from popvision_lite.emulator import programs as P
from popvision_lite.emulator.codelets import popops as CO
from popvision_lite.emulator.codelets.popnn import MAX_POOL_GRAD, WINDOW_MAX, WINDOW_SUM
from popvision_lite.emulator.ops.common import _elementwise_cs
from popvision_lite.emulator.ops.context import OpContext, View
from popvision_lite.errors import EmulatorError

# ============================================================================ window indices


def conv_windows(n: int, h: int, w: int, k: int, stride: int = 1, pad: int = 0):
    """Window index of a k x k, ``stride``, ``pad`` window over an (n, h, w) grid of rows.

    Returns ``(index (n*oh*ow, k*k) int64 of input rows, -1 where the window reads padding), (oh, ow))``;
    slot ``s = kh * k + kw`` (the im2col column order of a (k, k, C, Co) kernel)."""
    oh, ow = (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1
    if oh < 1 or ow < 1:
        raise ValueError(f"window {k}x{k} stride {stride} pad {pad} does not fit a {h}x{w} image")
    hi = (np.arange(oh) * stride - pad)[:, None] + np.arange(k)[None, :]  # (oh, k)
    wi = (np.arange(ow) * stride - pad)[:, None] + np.arange(k)[None, :]  # (ow, k)
    okh = (hi >= 0) & (hi < h)
    okw = (wi >= 0) & (wi < w)
    row = hi[:, None, :, None] * w + wi[None, :, None, :]  # (oh, ow, k, k)
    ok = okh[:, None, :, None] & okw[None, :, None, :]
    base = np.arange(n, dtype=np.int64)[:, None, None, None, None] * (h * w)
    idx = base + row[None]  # int64, (n, oh, ow, k, k): the padding slots set in place, no second array
    np.copyto(idx, -1, where=~ok[None])
    out = idx.reshape(n * oh * ow, k * k)
    if n > 1:  # (its images: what _index_runs checks and scans once, not n times)
        key = id(out)
        _IMAGES[key] = (weakref.ref(out, lambda _r, key=key: _IMAGES.pop(key, None)), n, h * w)
    return out, (oh, ow)


# id(index) -> (a weak reference to it, images, input rows per image) for a window index conv_windows made: each
# image's windows are the first image's reading rows ``rows per image`` further on (the same slots padding).  A
# hint only: _index_runs checks it against the index before it uses it
_IMAGES: dict[int, tuple] = {}


def global_windows(n: int, rows_per_image: int) -> np.ndarray:
    """One window over all rows of each image: (n, rows_per_image)."""
    return np.arange(n * rows_per_image, dtype=np.int64).reshape(n, rows_per_image)


def invert_windows(index: np.ndarray, n_rows: int) -> np.ndarray:
    """For each input row r, the flat positions ``o * k + s`` with ``index[o, s] == r``.

    Returns ``(n_rows, kc)`` int64 (``kc`` = most windows reading one row), ``-1`` padded."""
    index = np.asarray(index, dtype=np.int64)
    flat = index.ravel()
    pos = np.flatnonzero(flat >= 0)
    rows = flat[pos]
    order = np.argsort(rows, kind="stable")
    rows, pos = rows[order], pos[order]
    counts = np.bincount(rows, minlength=n_rows)
    kc = max(1, int(counts.max()) if counts.size else 1)
    first = np.cumsum(counts) - counts
    rank = np.arange(len(rows)) - first[rows]
    out = np.full((n_rows, kc), -1, dtype=np.int64)
    out[rows, rank] = pos
    return out


# ============================================================================ numpy reference


def ref_gather_windows(x, index, row_len=None, fill=0.0):
    """(R, k * C): rows ``index`` of x viewed as rows of ``row_len`` (default: last dim), ``fill`` at -1."""
    x = np.asarray(x)
    c = int(row_len or x.shape[-1])
    xr = x.reshape(-1, c)
    idx = np.asarray(index, dtype=np.int64)
    out = xr[np.maximum(idx, 0)].astype(np.float32)
    out[idx < 0] = fill
    return out.reshape(idx.shape[0], idx.shape[1] * c)


def ref_pool(x, index, mode: str, scale: float = 1.0, row_len=None):
    """Max or (scaled) sum over each window of rows; ``mode`` "max" (padding = -inf) or "sum"."""
    c = int(row_len or np.asarray(x).shape[-1])
    idx = np.asarray(index)
    fill = -np.inf if mode == "max" else 0.0
    g = ref_gather_windows(x, idx, c, fill).reshape(idx.shape[0], idx.shape[1], c)
    if mode == "max":
        return g.max(1)
    if mode == "sum":
        return g.sum(1) * np.float32(scale)
    raise ValueError(f"pool mode {mode!r}: expected 'max' or 'sum'")


def ref_col2im(dcols, index, n_rows):
    """Gradient of gather_windows: input row r gets the sum of every (window, slot) that read it."""
    idx = np.asarray(index)
    c = np.asarray(dcols).shape[-1] // idx.shape[1]
    return ref_pool(dcols, invert_windows(idx, n_rows), "sum", row_len=c)


def ref_avg_pool_bwd(dy, index, n_rows):
    idx = np.asarray(index)
    inv = invert_windows(idx, n_rows)
    win = np.where(inv >= 0, inv // idx.shape[1], -1)
    return ref_pool(dy, win, "sum", scale=1.0 / idx.shape[1])


def ref_max_pool_bwd(x, y, dy, index):
    """dx[r] = sum over windows o reading r of dy[o] * (x[r] == y[o])."""
    x = np.asarray(x, dtype=np.float32)
    idx = np.asarray(index)
    inv = invert_windows(idx, x.shape[0])
    win = np.where(inv >= 0, inv // idx.shape[1], -1)
    c = x.shape[-1]
    yw = ref_gather_windows(y, win, c, 0.0).reshape(x.shape[0], -1, c)
    dyw = ref_gather_windows(dy, win, c, 0.0).reshape(x.shape[0], -1, c)
    return (dyw * (x[:, None, :] == yw)).sum(1)


# ============================================================================ codelets


# ============================================================================ emulator ops


def _basic():
    from popvision_lite.emulator.ops import basic

    return basic


def _as_tensor(ctx, x, name, op):
    """A graph Tensor holding x (a View is materialised linearly)."""
    if isinstance(x, View):
        return _basic().materialize(ctx, x, name, op)
    return x


def _window_runs(index: np.ndarray):
    """Contiguous runs of a window index: (src_row_start, dst_position_start, length) for the valid
    entries, merging neighbouring slots that read neighbouring rows (a kernel row of an image row)."""
    flat = np.asarray(index, dtype=np.int64).ravel()
    k = index.shape[1]
    valid = flat >= 0
    # a valid slot continues the run of the slot before it when that slot is valid, in the same window (not a
    # window's first slot) and reads the row before (per slot, not per valid entry: no modulo of positions).  A
    # run is a stretch of consecutive slots, so its first and last slots give its place and length: no array of
    # the valid positions (a 7 x 7 stem's index has 12 M slots) is gathered
    cont = np.zeros(len(flat), dtype=bool)
    np.equal(np.subtract(flat[1:], flat[:-1]), 1, out=cont[1:])
    cont[1:] &= valid[:-1]
    cont[::k] = False
    first = np.flatnonzero(valid & ~cont)
    last_mask = valid.copy()
    last_mask[:-1] &= ~cont[1:]
    last = np.flatnonzero(last_mask)
    return flat[first], first, last - first + 1


# id(index) -> (a weak reference to the index, whether it reads padding, its _window_runs): a read-only window
# index (a model's, e.g. models/resnet.py's per geometry) is scanned once however many ops gather with it (a
# convolution's forward and its weight update gather the same windows)
_RUNS: dict[int, tuple] = {}


def _index_runs(index: np.ndarray) -> tuple[bool, tuple]:
    """(does ``index`` read padding, its :func:`_window_runs`), kept while a read-only ``index`` lives."""
    if index.flags.writeable:
        return _scan(index)
    key = id(index)
    hit = _RUNS.get(key)
    if hit is not None and hit[0]() is index:
        return hit[1], hit[2]
    out = _scan(index)
    _RUNS[key] = (weakref.ref(index, lambda _r, key=key: _RUNS.pop(key, None)), *out)
    return out


def _scan(index: np.ndarray) -> tuple[bool, tuple]:
    """(does ``index`` read padding, its :func:`_window_runs`): for an index of ``n`` images that conv_windows
    made (``_IMAGES``) and that still is one image's windows repeated ``rows`` further on per image (checked: one
    comparison of the index with its first image), the first image's scan with its runs repeated per image.  A
    run never leaves its window (_window_runs), so image b's runs are image 0's, b x ``rows`` on in the source and
    b x (its windows x slots) on in the destination: the same arrays as scanning the whole index."""
    hit = _IMAGES.get(id(index))
    if hit is not None and hit[0]() is index and index.ndim == 2 and len(index) % hit[1] == 0:
        n, rows = hit[1], hit[2]
        img = index.reshape(n, -1)
        first = img[0]
        pad = first < 0
        shift = np.where(pad, 0, rows)  # (image b's slot: the first image's + b x this)
        want = first.copy()
        for b in range(1, n):  # (an image at a time: no second index-sized array; want = first + b x shift)
            want += shift
            if not np.array_equal(img[b], want):
                break
        else:
            src, dst, length = _window_runs(index[:len(index) // n])
            step = np.arange(n, dtype=np.int64)[:, None]
            return bool(pad.any()), ((src[None, :] + step * rows).ravel(), (dst[None, :] + step * first.size).ravel(),
                                     np.tile(length, n))
    return bool(np.any(index < 0)), _window_runs(index)


def gather_windows(ctx: OpContext, x, index, op: str, fill: float = 0.0, row_len=None, mapping=None,
                   label: str = "windows"):
    """Tensor (R, k * C) of rows ``index`` of x (rows of ``row_len`` elements; -1 -> ``fill``),
    rows spread over the IPU's tiles (or on ``mapping``): a fill step when padding is read, then one
    exchange of whole runs of rows."""
    index = np.asarray(index, dtype=np.int64)
    R, k = index.shape
    c = int(row_len or x.shape[-1])
    xt = _as_tensor(ctx, x, f"{label}_src", op)
    if mapping is None:
        mapping = ctx.row_mapping(R, k * c)
    out = ctx.variable(f"{op}/{label}", (R, k * c), xt.dtype, mapping=mapping, op=op)
    padded, (src, dst, length) = _index_runs(index)
    if padded:
        cs = ctx.graph.add_compute_set(ctx.unique(f"{op}/{label}_fill"), op=op)
        tiles, starts, sizes = M.worker_split(out, workers=ctx.target.threads_per_tile)
        ctx.graph.add_vertices(cs, CO.FILL, tiles=tiles, fields={"out": out.regions(starts, sizes)},
                               params={"value": np.float32(fill)})
        ctx.add(P.Execute(cs, name=cs.name, op=op))
    if len(src):
        ctx.add(P.Copy(xt.regions(_times(src, c, xt), _times(length, c, xt)),
                       out.regions(_times(dst, c, out), _times(length, c, out)), name=f"{op}/gather_{label}", op=op))
    return out


def _times(a: np.ndarray, c: int, t) -> np.ndarray:
    """``a * c`` (element offsets inside ``t``) as a field holds them: read-only int32 where ``t`` has fewer than
    2^31 elements (computed in int32, no int64 product to convert), so the field takes it as it is."""
    if t.size >= 2**31:
        return a * c
    r = np.multiply(a, c, dtype=np.int32)
    r.setflags(write=False)
    return r


def _per_row_mapping(ctx, t, k):
    """Mapping of an (R, c) tensor whose row r lives where row r of the (R, k*c) tensor ``t`` does."""
    m = t.mapping
    return M.intervals(m.tile, m.start // k, m.stop // k)


def _window_reduce(ctx, win, k, c, codelet, op, out_dtype, params=None, out_shape=None):
    R = win.shape[0]
    out = ctx.variable(op, out_shape or (R, c), out_dtype, mapping=_per_row_mapping(ctx, win, k), op=op)
    tiles, starts, sizes = M.worker_split(win, workers=ctx.target.threads_per_tile, grain=k * c)
    cs = ctx.graph.add_compute_set(ctx.unique(op), op=op)
    ctx.graph.add_vertices(cs, codelet, tiles=tiles, fields={"in": win.regions(starts, sizes),
                                                             "out": out.regions(starts // k, sizes // k)},
                           params={"row": np.int64(c), "k": np.int64(k), **(params or {})})
    ctx.add(P.Execute(cs, name=cs.name, op=op))
    return out


def im2col(ctx: OpContext, x, index, name: str):
    """(R, k * C) window rows of x (zero padding): the A operand of a convolution as a GEMM."""
    index = np.asarray(index)
    R, k = index.shape
    c = x.shape[-1]
    op = ctx.begin_op(name, "im2col", plan=f"{R} windows of {k} rows of {c} gathered by exchange",
                      min_bytes=_basic()._nbytes(x) + R * k * c * 2)
    return gather_windows(ctx, x, index, op, fill=0.0)


def pool(ctx: OpContext, x, index, mode: str, name: str, scale: float = 1.0, row_len=None):
    """Max (padding -inf) or scaled-sum pooling of the rows of x over ``index`` -> (R, C)."""
    index = np.asarray(index)
    R, k = index.shape
    c = int(row_len or x.shape[-1])
    if mode not in ("max", "sum"):
        raise EmulatorError(f"pool '{name}': mode {mode!r} is not 'max' or 'sum'")
    type_ = "max_pool" if mode == "max" else ("avg_pool" if scale != 1.0 else "sum_pool")
    op = ctx.begin_op(name, type_, plan=f"{R} windows of {k} rows of {c}; windows gathered by exchange, "
                      "reduced on tile", min_bytes=_basic()._nbytes(x) + R * c * 2)
    fill = float(np.finfo(np.float16).min) if mode == "max" else 0.0
    if mode == "max" and x.dtype == "float32":
        fill = float(np.finfo(np.float32).min)
    codelet = WINDOW_MAX if mode == "max" else WINDOW_SUM
    params = {} if mode == "max" else {"scale": np.float32(scale)}
    groups = channel_groups(R, c, ctx.n_tiles)
    if groups > 1:
        # few windows (global pooling: one per image): split the channels into groups so that the
        # windows spread over the tiles; window (r, g) reads channel group g of window r's rows, and its
        # output row is row r's channels g*c/G.. -- the (R, c) output's own flat layout
        cg = c // groups
        gidx = np.where(index[:, None, :] >= 0, index[:, None, :] * groups + np.arange(groups)[None, :, None], -1)
        win = gather_windows(ctx, x, gidx.reshape(R * groups, k), op, fill=fill, row_len=cg)
        return _window_reduce(ctx, win, k, cg, codelet, op, ctx.dtype, params, out_shape=(R, c))
    win = gather_windows(ctx, x, index, op, fill=fill, row_len=c)
    return _window_reduce(ctx, win, k, c, codelet, op, ctx.dtype, params)


MIN_GROUP_CHANNELS = 16  # a channel group's row: 16 fp16 = 32 B, whole 8-byte exchange words


def channel_groups(windows: int, channels: int, tiles: int) -> int:
    """Channel groups G of a pooling with few windows: the largest power of two that divides the channels,
    leaves at least MIN_GROUP_CHANNELS per group and keeps windows x G within the tiles (1 when the windows
    alone cover a quarter of the tiles: ordinary pooling)."""
    if windows * 4 > tiles:
        return 1
    g = 1
    while channels % (2 * g) == 0 and channels // (2 * g) >= MIN_GROUP_CHANNELS and windows * 2 * g <= tiles:
        g *= 2
    return g


def col2im(ctx: OpContext, dcols, index, n_rows: int, name: str):
    """Gradient of im2col: (n_rows, C) sums of every window slot that read each row."""
    index = np.asarray(index)
    k = index.shape[1]
    c = dcols.shape[-1] // k
    inv = invert_windows(index, n_rows)
    return pool(ctx, dcols, inv, "sum", name, row_len=c)


def avg_pool_bwd(ctx: OpContext, dy, index, n_rows: int, name: str):
    """dx of average pooling: each input row gets the sum of its windows' gradients / window size.

    Global pooling (one window over all of an image's rows, no padding) is what poplibs replaces with a
    broadcast (``popnn/Pooling.cpp`` ``substPoolingGradientWithBroadcast``): the pooled gradient scaled
    once, then copied to every row of its window; no window buffer."""
    index = np.asarray(index)
    k = index.shape[1]
    inv = invert_windows(index, n_rows)
    win = np.where(inv >= 0, inv // k, -1)
    if index.size == n_rows and np.array_equal(index.ravel(), np.arange(n_rows)):
        c = dy.shape[-1]
        op = ctx.begin_op(name, "avg_pool", plan=f"{index.shape[0]} windows of {k} rows of {c}: the gradient "
                          f"scaled by 1/{k}, then broadcast to the rows", min_bytes=n_rows * c * 2)
        dyt = _as_tensor(ctx, dy, "dy", op)
        scaled = ctx.variable(f"{op}/scaled", dyt.shape, ctx.dtype, mapping=dyt.mapping, op=op)
        _elementwise_cs(ctx, CO.SCALE, {"in": dyt}, scaled, op, f"{op}/scale", params={"scale": np.float32(1.0 / k)})
        return gather_windows(ctx, scaled, win, op, label="broadcast")
    return pool(ctx, dy, win, "sum", name, scale=1.0 / k)


def _interval_work_lists(win: np.ndarray, r0: np.ndarray, r1: np.ndarray):
    """Per row interval [r0[i], r1[i]) (a tile's rows): the windows its rows read, sorted, once each
    (concatenated over the intervals: ``src``, ``counts[i]`` of them for interval i) and each row's work list,
    the positions of its windows among its interval's (-1 where ``win`` is -1).

    The same arrays as ``np.unique(w[w >= 0], return_inverse=True)`` interval by interval (rows outside every
    interval keep -1): where each interval's windows lie in a short range (a window index's rows read neighbouring
    windows), from one mark array (:func:`_dense_ranks`, no sort); else from one sort of (interval, window) keys over
    all the intervals' rows."""
    r0, r1 = np.asarray(r0, np.int64), np.asarray(r1, np.int64)
    n_iv, kc = len(r0), win.shape[1]
    work = np.full(win.shape, -1, dtype=np.int64)
    lens = r1 - r0
    rows = np.repeat(r0 - (np.cumsum(lens) - lens), lens) + np.arange(int(lens.sum()), dtype=np.int64)
    w = win[rows]
    valid = w >= 0
    vals = w[valid]
    iv = np.repeat(np.repeat(np.arange(n_iv, dtype=np.int64), lens), valid.sum(axis=1))
    wr = np.full((len(rows), kc), -1, dtype=np.int64)
    dense = _dense_ranks(iv, vals, n_iv)
    if dense is not None:  # (no sort: each interval's windows lie in a short range)
        src, counts, rank = dense
        wr[valid] = rank
        work[rows] = wr
        return work, src, counts
    span = int(vals.max()) + 1 if len(vals) else 1
    keys, pos = np.unique(iv * span + vals, return_inverse=True)  # sorted by interval, then window
    first = np.searchsorted(keys, np.arange(n_iv, dtype=np.int64) * span)
    counts = np.diff(np.append(first, len(keys)))
    wr[valid] = pos.reshape(-1) - first[iv]
    work[rows] = wr
    return work, keys % span, counts


def _dense_ranks(iv: np.ndarray, vals: np.ndarray, n_iv: int):
    """_interval_work_lists' (windows, counts, each entry's rank among its interval's windows) without a sort, where
    every interval's windows lie in a range no longer than a few times its entries (a window index's rows read
    neighbouring windows): each interval's range [lowest, highest window] gets its own stretch of one mark array,
    an entry marks its window there, and a cumulative count of the marks gives every window its rank; the same
    arrays as the unique of (interval, window) keys.  ``iv``: each entry's interval, ascending (the intervals'
    rows in order); None where the ranges are too long."""
    if len(vals) == 0:
        return None
    per = np.bincount(iv, minlength=n_iv)
    has = np.flatnonzero(per)
    seg = np.cumsum(per) - per  # (each interval's first entry: iv ascends, the intervals' rows in order)
    lo = np.zeros(n_iv, np.int64)
    hi = np.full(n_iv, -1, np.int64)
    lo[has] = np.minimum.reduceat(vals, seg[has])
    hi[has] = np.maximum.reduceat(vals, seg[has])
    width = hi - lo + 1  # (0 for an interval with no entries)
    total = int(width.sum())
    if total > 4 * len(vals) + 1024:
        return None
    start = np.cumsum(width) - width
    base = start - lo  # (a window's place in the mark array: base[interval] + window)
    at = base[iv] + vals
    mark = np.zeros(total, bool)
    mark[at] = True
    cum = np.zeros(total + 1, np.int64)  # (the marks before each place)
    np.cumsum(mark, out=cum[1:])
    first = cum[start]
    counts = cum[start + width] - first
    src = np.flatnonzero(mark) - np.repeat(base, counts)
    rank = cum[at] - first[iv]
    return src, counts, rank


def max_pool_bwd(ctx: OpContext, x, y, dy, index, name: str):
    """dx of max pooling: every element equal to its window's max gets the window's gradient.

    As poplibs' pooling gradient (``popnn/PoolVertices.cpp`` ``generateVertices``: each tile's vertex
    reads one slice of the pooled gradient and of the forward output, and a ``workList`` of
    unsigned-short offsets into them): the input rows (and dx) spread over the tiles; each tile receives
    the forward output and gradient of the windows its rows are read by once each, not once per reading
    row, and a work list per row names them.  The work lists are an int32 constant (poplibs: 16-bit)."""
    index = np.asarray(index)
    c = x.shape[-1]
    R_in = int(np.prod(x.shape)) // c
    inv = invert_windows(index, R_in)
    kc = inv.shape[1]
    win = np.where(inv >= 0, inv // index.shape[1], -1)
    op = ctx.begin_op(name, "max_pool_bwd", plan=f"{R_in} rows of {c}, up to {kc} windows each; each tile "
                      "receives its windows' forward output and gradient once, work lists per row",
                      min_bytes=3 * _basic()._nbytes(x))
    rows_map = ctx.row_mapping(R_in, c)
    r0, r1 = rows_map.start // c, rows_map.stop // c
    work, src, counts = _interval_work_lists(win, r0, r1)
    off = np.cumsum(counts) - counts
    keep = counts > 0
    local_map = M.intervals(rows_map.tile[keep], off[keep] * c, (off + counts)[keep] * c)
    total = int(counts.sum())
    ys, yd, yl = _window_runs(src[None, :])
    bufs = []
    for t, label in ((y, "fwd_out"), (dy, "grad_windows")):
        tt = _as_tensor(ctx, t, f"{label}_src", op)
        buf = ctx.variable(f"{op}/{label}", (total, c), tt.dtype, mapping=local_map, op=op)
        if len(ys):
            ctx.add(P.Copy(tt.regions(ys * c, yl * c), buf.regions(yd * c, yl * c), name=f"{op}/gather_{label}",
                           op=op))
        bufs.append(buf)
    yw, dyw = bufs
    wl = ctx.graph.add_constant(ctx.unique(f"{op}/work_list"), work.astype(np.int32), "int32",
                                mapping=M.intervals(rows_map.tile, r0 * kc, r1 * kc), op=op)
    xt = _basic().materialize(ctx, x, "x", op, mapping=rows_map, shape=(R_in, c))
    out = ctx.variable(op, (R_in, c), ctx.dtype, mapping=rows_map, op=op)
    tiles, starts, sizes = M.worker_split(xt, workers=ctx.target.threads_per_tile, grain=c)
    iv = np.searchsorted(rows_map.start, starts, side="right") - 1
    cs = ctx.graph.add_compute_set(ctx.unique(op), op=op)
    ctx.graph.add_vertices(cs, MAX_POOL_GRAD, tiles=tiles, fields={
        "x": xt.regions(starts, sizes), "y": yw.regions(off[iv] * c, counts[iv] * c),
        "dy": dyw.regions(off[iv] * c, counts[iv] * c), "work": wl.regions(starts // c * kc, sizes // c * kc),
        "out": out.regions(starts, sizes)}, params={"row": np.int64(c), "k": np.int64(kc)})
    ctx.add(P.Execute(cs, name=cs.name, op=op))
    return out


# ============================================================================ backend methods
# One mixin per backend (models/backend.py NumpyBackend, models/emulated.py EmulatorBackend,
# models/planning.py PlanOnlyBackend): the same vocabulary on all three.  The batch-norm halves are
# in ops/norm_pool.py (NumpyNormPool, EmulatorNormPool, PlanNormPool derive from these).


class NumpyPool:
    """Reference execution (NumpyBackend)."""

    def gather_windows(self, x, index, name):
        return self._out(name, "im2col", ref_gather_windows(self._val(x), index))

    def col2im(self, dcols, index, n_rows, name):
        return self._out(name, "sum_pool", ref_col2im(self._val(dcols), index, n_rows))

    def max_pool(self, x, index, name):
        return self._out(name, "max_pool", ref_pool(self._val(x), index, "max"))

    def avg_pool(self, x, index, name):
        return self._out(name, "avg_pool", ref_pool(self._val(x), index, "sum", scale=1.0 / np.shape(index)[1]))

    def max_pool_bwd(self, x, y, dy, index, name):
        return self._out(name, "max_pool_bwd", ref_max_pool_bwd(self._val(x), self._val(y), self._val(dy), index))

    def avg_pool_bwd(self, dy, index, n_rows, name):
        return self._out(name, "avg_pool", ref_avg_pool_bwd(self._val(dy), index, n_rows))


class EmulatorPool:
    """Graph building (EmulatorBackend)."""

    def gather_windows(self, x, index, name):
        return self._op(im2col, x, index, self.qual(name))

    def col2im(self, dcols, index, n_rows, name):
        return self._op(col2im, dcols, index, n_rows, self.qual(name))

    def max_pool(self, x, index, name):
        return self._op(pool, x, index, "max", self.qual(name))

    def avg_pool(self, x, index, name):
        return self._op(pool, x, index, "sum", self.qual(name), 1.0 / np.shape(index)[1])

    def max_pool_bwd(self, x, y, dy, index, name):
        return self._op(max_pool_bwd, x, y, dy, index, self.qual(name))

    def avg_pool_bwd(self, dy, index, n_rows, name):
        return self._op(avg_pool_bwd, dy, index, n_rows, self.qual(name))


class PlanPool:
    """Shapes and plan records only (PlanOnlyBackend)."""

    def _windows(self, x, index, name, typ, c=None):
        from popvision_lite.emulator.ops.planners import plan_elementwise

        from ..shape import Shape

        R, k = np.shape(index)
        c = int(c or x.shape[-1])
        self._rec(name, typ, plan_elementwise(R * k * c, self.pt))
        return Shape((R, c), self.dtype)

    def gather_windows(self, x, index, name):
        from ..shape import Shape

        R, k = np.shape(index)
        self._windows(x, index, name, "im2col")
        return Shape((R, k * x.shape[-1]), self.dtype)

    def col2im(self, dcols, index, n_rows, name):
        from ..shape import Shape

        c = dcols.shape[-1] // np.shape(index)[1]
        self._windows(dcols, index, name, "sum_pool", c)
        return Shape((n_rows, c), self.dtype)

    def max_pool(self, x, index, name):
        return self._windows(x, index, name, "max_pool")

    def avg_pool(self, x, index, name):
        return self._windows(x, index, name, "avg_pool")

    def max_pool_bwd(self, x, y, dy, index, name):
        return self._ew(x, name, "max_pool_bwd")

    def avg_pool_bwd(self, dy, index, n_rows, name):
        from ..shape import Shape

        self._rec(name, "avg_pool", f"{n_rows} rows")
        return Shape((n_rows, dy.shape[-1]), self.dtype)
