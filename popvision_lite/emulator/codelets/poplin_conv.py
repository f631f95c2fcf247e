"""poplin convolution codelets: the halo convolution partials (ConvPartialnx1, forward / dX) and the weight
update partials (ConvPartialWeightUpdate), with the geometry (ConvShape) and work lists their cycles and numerics
read.  The ops that plan and build them are ops/conv.py and ops/conv_wu.py."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from popvision_lite.emulator.codelets.base import Codelet
from popvision_lite.emulator.estimators.poplin import (
    amp_matmul_tile_cycles,
    amp_params,
)
from popvision_lite.emulator.estimators.poplin_conv import nx1_tile_cycles
from popvision_lite.emulator.graph import Regions, Windows, to_dtype
from popvision_lite.errors import EmulatorError


@dataclass(frozen=True)
class ConvShape:
    """A 2-D convolution: (n, h, w) input grid of ``ci`` channels, ``k`` x ``k`` kernel to ``co``
    channels, ``stride``; zero padding ``pad`` before and ``pad_hi`` (default ``pad``) after each spatial
    dimension; input dilation ``dil`` (``dil - 1`` zeros between input elements: the gradient of a strided
    convolution, poplin's inputTransform.dilation).  Dilation zeros and padding are never stored: the
    work lists skip them."""

    n: int
    h: int
    w: int
    ci: int
    co: int
    k: int
    stride: int
    pad: int
    pad_hi: int | None = None
    dil: int = 1

    @property
    def upper(self) -> int:
        return self.pad if self.pad_hi is None else self.pad_hi

    @property
    def he(self) -> int:
        """Height of the dilated input."""
        return (self.h - 1) * self.dil + 1

    @property
    def we(self) -> int:
        return (self.w - 1) * self.dil + 1

    @property
    def oh(self) -> int:
        return (self.he + self.pad + self.upper - self.k) // self.stride + 1

    @property
    def ow(self) -> int:
        return (self.we + self.pad + self.upper - self.k) // self.stride + 1

    @property
    def out_rows(self) -> int:
        """(image, output row) pairs: the dimension the plan splits over tiles."""
        return self.n * self.oh

    def input_rows(self, r0: int, nr: int) -> list[tuple[int, int, int]]:
        """(image, first, stop) input rows that output rows [r0, r0 + nr) of the (image, row) sequence
        read, halo included, clipped to the image (padding and dilation rows are not stored)."""
        out = []
        r = r0
        while r < r0 + nr:
            b, y0 = divmod(r, self.oh)
            y1 = min(self.oh, y0 + (r0 + nr - r))
            lo = max(0, y0 * self.stride - self.pad)  # dilated coordinates
            hi = min(self.he, (y1 - 1) * self.stride - self.pad + self.k)
            first, stop = -(-lo // self.dil), (hi - 1) // self.dil + 1 if hi > lo else 0
            out.append((b, first, max(first, stop)))
            r += y1 - y0
        return out

    def input_elems(self, r0: int, nr: int) -> int:
        return sum(hi - lo for _, lo, hi in self.input_rows(r0, nr)) * self.w * self.ci


GEOMETRY = ("n", "h", "w", "ci", "co", "k", "stride", "pad", "pad_hi", "dil")  # a vertex's ConvShape params


def split_parts(n: int, p: int) -> tuple[np.ndarray, np.ndarray]:
    """(sizes, offsets) of ``p`` contiguous parts of ``n``, ceil-sized parts first (poplin's splits)."""
    q, r = divmod(int(n), int(p))
    sz = np.full(int(p), q, np.int64)
    sz[:r] += 1
    return sz, np.concatenate([[0], np.cumsum(sz)[:-1]]).astype(np.int64)


@functools.lru_cache(maxsize=4096)
def _worklists(s: ConvShape, ys: tuple, workers: int) -> tuple:
    """Per kernel position (ky, kx) and worker, the work list entries (field positions per entry) of a
    vertex whose output rows have image-row coordinates ``ys``: the vertex's ``len(ys) * OW`` positions
    cut into ``workers`` contiguous shares, each share's positions per output row one entry per kernel
    position, less the positions whose input lies in the padding (an empty entry is not listed)."""
    ow = s.ow
    total = len(ys) * ow
    sz, off = split_parts(total, workers)
    shares = []  # per worker: [(y, x0, x1)]
    for a, n in zip(off, sz, strict=True):
        segs, p = [], int(a)
        while p < a + n:
            i, x0 = divmod(p, ow)
            x1 = min(ow, x0 + int(a + n - p))
            segs.append((ys[i], x0, x1))
            p += x1 - x0
        shares.append(segs)
    xs = np.arange(ow) * s.stride - s.pad
    out = []
    for ky in range(s.k):
        for kx in range(s.k):
            xi = xs + kx
            ok = (xi >= 0) & (xi < s.we) & (xi % s.dil == 0)
            okx = np.cumsum(np.concatenate([[0], ok.astype(np.int64)]))
            per_worker = []
            for segs in shares:
                e = []
                for y, x0, x1 in segs:
                    yi = y * s.stride - s.pad + ky
                    if 0 <= yi < s.he and yi % s.dil == 0:
                        c = int(okx[x1] - okx[x0])
                        if c:
                            e.append(c)
                per_worker.append(tuple(e))
            out.append(tuple(per_worker))
    return tuple(out)


def vertex_tile_cycles(s: ConvShape, r0: int, nr: int, cop: int, fp16: bool, target) -> int:
    """Tile cycles of the ConvPartialnx1 vertex of output rows [r0, r0 + nr) and ``cop`` output channels."""
    amp = amp_params(fp16, target)
    workers = int(target.threads_per_tile)
    ys = tuple(int(r % s.oh) for r in range(r0, r0 + nr))
    wl = _worklists(s, ys, workers)
    return nx1_tile_cycles(wl, s.k, s.k, -(-s.ci // amp["in_group"]), -(-cop // amp["out_group"]), nr * s.ow, amp,
                           workers)


class HaloConvCodelet(Codelet):
    """A supervisor vertex of the halo convolutions (forward / dX here, the weight update in conv_wu.py):
    its geometry in the params (``GEOMETRY``), its input rows with halo one region a vertex."""

    supervisor = True
    # assumption (no public figure): code and per-vertex state sizes; the work lists themselves (per kernel
    # position and worker, 3 x 16-bit words an entry in poplin's limited version) are not charged
    code_bytes = 2048
    state_bytes = 32

    @staticmethod
    def shape_of(group) -> ConvShape:
        return ConvShape(**{k: int(group.param(k)) for k in GEOMETRY})


class ConvPartialNx1(HaloConvCodelet):
    """A tile's convolution partials (poplin ConvPartialnx1, supervisor vertex): ``out`` (nr*OW, cop)
    = the k x k convolution of the input rows in ``in`` (the tile's input region with halo, images in
    order, see ConvShape.input_rows) with the kernel block ``w`` (k*k*Ci, cop), FP32 accumulation.
    Params: the geometry (``GEOMETRY``, a ConvShape with the tile's ``ci``), per vertex its first output
    row ``r0`` and the group's ``nr`` rows.  Cost: estimators.poplin_conv.nx1_tile_cycles over the vertex's
    work lists, in worker-slot units (tile cycles / threads)."""

    name = "ConvPartialnx1"
    fields = {"in": "in", "w": "in", "out": "out"}

    def check(self, group):
        f = group.fields["out"]
        if not isinstance(f, Windows) or not isinstance(group.fields["in"], Regions):
            raise EmulatorError(f"codelet '{self.name}' in '{group.cs.name}': 'out' must be windows, 'in' regions")

    def _fp16(self, group) -> bool:
        return group.fields["in"].tensor.dtype == "float16" and group.fields["w"].tensor.dtype == "float16"

    def cycles(self, group, target):
        s = self.shape_of(group)
        nr = int(group.param("nr"))
        cop = int(group.fields["out"].block_shape[-1])
        fp16 = self._fp16(group)
        r0 = np.asarray(group.param("r0"), np.int64)
        phase = r0 % s.oh  # vertices whose rows start at the same image row have the same work lists
        uniq, inv = np.unique(phase, return_inverse=True)
        vals = np.array([vertex_tile_cycles(s, int(p), nr, cop, fp16, target) for p in uniq], np.int64)
        t = int(target.threads_per_tile)
        return -(-vals[inv.ravel()] // t)

    def flops(self, group):
        s = self.shape_of(group)
        nr = int(group.param("nr"))
        cop = int(group.fields["out"].block_shape[-1])
        return int(2 * nr * s.ow * cop * s.k * s.k * s.ci * group.n)

    def compute(self, group, data):
        s = self.shape_of(group)
        nr = int(group.param("nr"))
        fin, fw, fo = group.fields["in"], group.fields["w"], group.fields["out"]
        cop = int(fo.block_shape[-1])
        xin = np.asarray(fin.gather(data), np.float32)
        wts = np.asarray(fw.gather(data), np.float32)
        out = np.empty((group.n, nr * s.ow, cop), np.float32)
        in_off = np.concatenate([[0], np.cumsum(fin.sizes)])
        r0s = np.asarray(group.param("r0"), np.int64)
        for v in range(group.n):
            kern = wts[v * s.k * s.k * s.ci * cop:(v + 1) * s.k * s.k * s.ci * cop].reshape(s.k, s.k, s.ci, cop)
            out[v] = conv_rows(s, xin[in_off[v]:in_off[v + 1]], int(r0s[v]), nr, kern).reshape(nr * s.ow, cop)
        fo.scatter(data, to_dtype(out, fo.tensor.dtype))


def row_windows(s: ConvShape, region: np.ndarray, r0: int, nr: int):
    """The k x k input windows of output rows [r0, r0 + nr) of the (image, row) sequence, given a tile's input
    region (the rows of ``s.input_rows(r0, nr)`` one after another): per image, (offset of its first row
    from r0, rows, windows (rows, OW, Ci, k, k)) with padding and dilation as zeros, FP32."""
    wp = s.we + s.pad + s.upper
    pos, r = 0, r0
    for _b, lo, hi in s.input_rows(r0, nr):
        rows = region[pos:pos + (hi - lo) * s.w * s.ci].reshape(hi - lo, s.w, s.ci)
        pos += (hi - lo) * s.w * s.ci
        y0 = r % s.oh
        y1 = min(s.oh, y0 + (r0 + nr - r))
        first = y0 * s.stride - s.pad  # dilated, padded-image row of the first window row
        patch = np.zeros(((y1 - 1 - y0) * s.stride + s.k, wp, s.ci), np.float32)
        if hi > lo:
            a = lo * s.dil - first
            patch[a:a + (hi - lo - 1) * s.dil + 1:s.dil, s.pad:s.pad + s.we:s.dil] = rows
        win = np.lib.stride_tricks.sliding_window_view(patch, (s.k, s.k), axis=(0, 1))[::s.stride, ::s.stride]
        yield r - r0, y1 - y0, win[:y1 - y0, :s.ow]
        r += y1 - y0


def conv_rows(s: ConvShape, region: np.ndarray, r0: int, nr: int, kern: np.ndarray) -> np.ndarray:
    """Output rows [r0, r0 + nr) (nr, OW, cop) of a convolution given the tile's input region (the rows
    of ``s.input_rows(r0, nr)`` one after another) and its kernel block (k, k, Ci, cop), FP32."""
    out = np.zeros((nr, s.ow, kern.shape[-1]), np.float32)
    for o, c, win in row_windows(s, region, r0, nr):
        out[o:o + c] = np.einsum("yxcij,ijco->yxo", win, kern, optimize=True)
    return out


CONV_PARTIAL_NX1 = ConvPartialNx1()


def wu_vertex_tile_cycles(s: ConvShape, nr: int, cik: int, cop: int, fp16: bool, target) -> int:
    """Tile cycles of a tile's weight-update vertex over ``nr`` dY rows: ConvPartial1x1Out with field =
    k*k*cik (kernel position, input channel) pairs, input channels = its nr*OW dY pixels, cop outputs."""
    return amp_matmul_tile_cycles(s.k * s.k * cik, nr * s.ow, cop, fp16, target)


def wu_rows(s: ConvShape, region: np.ndarray, dyb: np.ndarray, r0: int, nr: int) -> np.ndarray:
    """Partial dW (k, k, Ci, cop) of dY rows [r0, r0 + nr) of the (image, row) sequence, given the tile's
    input region (the rows of ``s.input_rows(r0, nr)`` one after another, ``s.ci`` channels) and its dY
    rows ``dyb`` (nr*OW, cop), FP32."""
    cop = dyb.shape[-1]
    dyr = dyb.reshape(nr, s.ow, cop)
    out = np.zeros((s.k, s.k, s.ci, cop), np.float32)
    for o, c, win in row_windows(s, region, r0, nr):
        out += np.einsum("yxcij,yxo->ijco", win, dyr[o:o + c], optimize=True)
    return out


class ConvPartialWeightUpdate(HaloConvCodelet):
    """A tile's partial dW (poplin ConvPartial1x1Out on the weight-update convolution, supervisor vertex):
    ``out`` (k*k*cik*cop elements, (ky, kx, ci, co) order) = the sum over the tile's dY rows of their k x k
    input windows (from ``in``, the tile's input rows with halo, images in order, see ConvShape.input_rows)
    times ``dy`` (nr*OW, cop), FP32 accumulation, written in the partials' type.  Params: the geometry
    (``GEOMETRY``, a ConvShape with the tile's ``ci`` = cik and ``co`` = cop), per vertex its first dY row
    ``r0`` and the group's ``nr`` rows.  Cost: :func:`wu_vertex_tile_cycles` in worker-slot units (tile
    cycles / threads)."""

    name = "ConvPartialWeightUpdate"
    fields = {"in": "in", "dy": "in", "out": "out"}

    def check(self, group):
        s = self.shape_of(group)
        nr = int(group.param("nr"))
        fi, fd, fo = (group.fields[k] for k in ("in", "dy", "out"))
        if not all(isinstance(f, Regions) for f in (fi, fd, fo)):
            raise EmulatorError(f"codelet '{self.name}' in '{group.cs.name}': 'in', 'dy' and 'out' must be regions")
        if np.any(fd.sizes != nr * s.ow * s.co) or np.any(fo.sizes != s.k * s.k * s.ci * s.co):
            raise EmulatorError(f"codelet '{self.name}' in '{group.cs.name}': 'dy' must be {nr} rows of {s.ow} x "
                                f"{s.co} and 'out' {s.k}x{s.k}x{s.ci}x{s.co} elements per vertex")

    def cycles(self, group, target):
        s = self.shape_of(group)
        fp16 = group.fields["in"].tensor.dtype == "float16" and group.fields["dy"].tensor.dtype == "float16"
        c = wu_vertex_tile_cycles(s, int(group.param("nr")), s.ci, s.co, fp16, target)
        return np.full(group.n, -(-c // int(target.threads_per_tile)), np.int64)

    def flops(self, group):
        s = self.shape_of(group)
        return int(2 * s.k * s.k * s.ci * int(group.param("nr")) * s.ow * s.co * group.n)

    def compute(self, group, data):
        s = self.shape_of(group)
        nr = int(group.param("nr"))
        fin, fdy, fo = group.fields["in"], group.fields["dy"], group.fields["out"]
        xin = np.asarray(fin.gather(data), np.float32)
        dyv = np.asarray(fdy.gather(data), np.float32)
        blk = s.k * s.k * s.ci * s.co
        out = np.empty((group.n, blk), np.float32)
        in_off = np.concatenate([[0], np.cumsum(fin.sizes)])
        dy_blk = nr * s.ow * s.co
        r0s = np.asarray(group.param("r0"), np.int64)
        for v in range(group.n):
            out[v] = wu_rows(s, xin[in_off[v]:in_off[v + 1]], dyv[v * dy_blk:(v + 1) * dy_blk].reshape(-1, s.co),
                             int(r0s[v]), nr).ravel()
        fo.scatter(data, to_dtype(out.ravel(), fo.tensor.dtype))


CONV_PARTIAL_WEIGHT_UPDATE = ConvPartialWeightUpdate()
