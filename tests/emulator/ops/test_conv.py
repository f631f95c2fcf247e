"""The halo convolution (emulator/ops/conv.py): numerics against numpy (forward, dx, dw through the ResNet
call sites, stride 2, padding), each tile's input moved once, no im2col block, the ConvPartialnx1
estimate against poplibs' formula by hand, and the plan."""

import numpy as np
import pytest

from popvision_lite.emulator import programs as P
from popvision_lite.emulator.backends.backend import NumpyBackend
from popvision_lite.emulator.codelets.poplin_conv import ConvShape
from popvision_lite.emulator.engine import Engine
from popvision_lite.emulator.estimators.poplin import amp_params
from popvision_lite.emulator.estimators.poplin_conv import nx1_tile_cycles, nx1_worker_cycles
from popvision_lite.emulator.models import resnet as RN
from popvision_lite.emulator.models.config import make_config
from popvision_lite.emulator.models.emulated import EmulatorBackend
from popvision_lite.emulator.ops.conv import plan_conv, ref_conv2d, transposed_shape
from popvision_lite.emulator.ops.pooling import conv_windows, ref_col2im
from popvision_lite.emulator.target import Target
from popvision_lite.errors import ConfigError

from .conv_direct import direct_taps

rng = np.random.default_rng(5)

SHAPES = [
    ConvShape(2, 8, 8, 16, 32, 3, 1, 1),  # same padding, two output-channel groups
    ConvShape(3, 9, 7, 16, 16, 3, 2, 1),  # stride 2, odd sizes: windows of the last row / column clipped
    ConvShape(2, 8, 8, 32, 64, 1, 2, 0),  # a 1x1 stride-2 (ResNet's downsample)
    ConvShape(1, 5, 6, 16, 48, 3, 1, 1),  # three output groups (not a power of two)
    ConvShape(2, 6, 6, 16, 16, 5, 1, 2),  # a 5x5 kernel, halo of two rows
]


def _emulate(fn, arrays, precision="fp32"):
    be = EmulatorBackend(Target.from_device("ipu-mk2"), precision)
    ins = [be.input(f"in{i}", a) for i, a in enumerate(arrays)]
    outs = fn(be, *ins)
    run = Engine(be.graph, be.program(), mode="full").run(inputs=be.inputs)
    return be, [run.outputs[o.name] for o in outs]


def _loop_conv(x, w, s: ConvShape):
    """Direct definition: y[b, i, j, o] = sum over ky, kx, c of x[b, i*s - p + ky, j*s - p + kx, c] w[ky, kx, c, o]."""
    xi = x.reshape(s.n, s.h, s.w, s.ci).astype(np.float64)
    k = w.reshape(s.k, s.k, s.ci, s.co).astype(np.float64)
    y = np.zeros((s.n, s.oh, s.ow, s.co))
    for i, j, ky, kx, r, c in direct_taps(s):
        y[:, i, j] += xi[:, r, c] @ k[ky, kx]
    return y.reshape(-1, s.co)


@pytest.mark.parametrize("s", SHAPES[:3])
def test_reference_matches_direct_loops_and_the_im2col_gemm(s):
    x = rng.standard_normal((s.n * s.h * s.w, s.ci)).astype(np.float32)
    w = rng.standard_normal((s.k * s.k * s.ci, s.co)).astype(np.float32)
    ref = ref_conv2d(x, w, s)
    np.testing.assert_allclose(ref, _loop_conv(x, w, s), rtol=1e-4, atol=1e-4)
    idx, (oh, ow) = conv_windows(s.n, s.h, s.w, s.k, s.stride, s.pad)
    cols = (x[np.maximum(idx, 0)] * (idx >= 0)[..., None]).reshape(len(idx), -1)
    assert (oh, ow) == (s.oh, s.ow)
    np.testing.assert_allclose(ref, cols @ w, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("s", SHAPES)
def test_conv2d_matches_numpy(s):
    """(fp32: 8 input channels per AMP group, so these plans split the input channels and reduce FP32
    partials; the unsplit plan is checked in the exchange test below)"""
    x = rng.standard_normal((s.n * s.h * s.w, s.ci)).astype(np.float32)
    w = rng.standard_normal((s.k * s.k * s.ci, s.co)).astype(np.float32)
    be, (y,) = _emulate(lambda be, a, b: [be.conv2d(a, b, s, "c")], [x, w])
    np.testing.assert_allclose(y.reshape(-1, s.co), ref_conv2d(x, w, s), rtol=1e-4, atol=1e-4)
    assert [r["type"] for r in be.ctx.records] == ["conv"]
    assert "(partials reduced)" in be.ctx.records[0]["plan"]


FORWARD = [(2, 8, 8, 16, 16, 3, 2, 1), (2, 7, 9, 16, 32, 3, 2, 1), (1, 8, 8, 16, 16, 1, 2, 0), (2, 6, 6, 16, 16, 3, 1, 1)]


@pytest.mark.parametrize("fwd", FORWARD)
def test_transposed_convolution_is_the_input_gradient(fwd):
    """dX of a convolution (stride 2, odd sizes, 1x1 / 3x3) as ops/conv.py computes it - dY dilated by the
    stride, padded, convolved with the flipped kernel - against col2im(dY W^T), the gradient written as the
    im2col GEMM's transpose."""
    n, h, w, ci, co, k, stride, pad = fwd
    idx, (oh, ow) = conv_windows(n, h, w, k, stride, pad)
    dy = rng.standard_normal((n * oh * ow, co)).astype(np.float32)
    wt = rng.standard_normal((k * k * ci, co)).astype(np.float32)
    want = ref_col2im(dy @ wt.T, idx, n * h * w)
    s = transposed_shape(n, h, w, ci, co, k, stride, pad)
    assert (s.oh, s.ow, s.dil) == (h, w, stride)
    flipped = wt.reshape(k * k, ci, co)[::-1].transpose(0, 2, 1).reshape(k * k * co, ci)
    np.testing.assert_allclose(ref_conv2d(dy, flipped, s), want, rtol=1e-4, atol=1e-4)
    _, (got,) = _emulate(lambda be, a, b: [be.conv2d(a, b, s, "dx")], [dy, flipped])
    np.testing.assert_allclose(got.reshape(want.shape), want, rtol=1e-4, atol=1e-4)


def test_conv2d_fp16_within_fp16_rounding():
    s = SHAPES[0]
    x = rng.standard_normal((s.n * s.h * s.w, s.ci)).astype(np.float16)
    w = (rng.standard_normal((s.k * s.k * s.ci, s.co)) / 12).astype(np.float16)
    _, (y,) = _emulate(lambda be, a, b: [be.conv2d(a, b, s, "c")], [x, w], precision="fp16")
    want = ref_conv2d(x, w, s)
    # FP32 accumulation, one rounding of the output to fp16
    np.testing.assert_allclose(np.asarray(y, np.float32).reshape(want.shape), want, rtol=2e-3, atol=2e-3)


def _halo_backend():
    be = EmulatorBackend(Target.from_device("ipu-mk2"), "fp32")
    be.conv_lowering = "halo"
    return be


@pytest.mark.parametrize("stride", [1, 2])
def test_resnet_conv_forward_dx_dw_on_the_halo_path_match_numpy(stride):
    """models/resnet.py conv / conv_bwd with conv_lowering "halo": y and dx (stride 1: the flipped kernel
    convolved over dy; stride 2: col2im) and dw against the numpy backend's im2col formulation."""
    n, h, c, co = 2, 6, 16, 16
    x = rng.standard_normal((n * h * h, c)).astype(np.float32)
    w = rng.standard_normal((9 * c, co)).astype(np.float32)
    dy_rows = n * (h // stride) ** 2
    dyv = rng.standard_normal((dy_rows, co)).astype(np.float32)
    want = None
    for be in (NumpyBackend("fp32"), _halo_backend()):
        xi, wi, dy = be.input("x", x), be.input("w", w), be.input("dy", dyv)
        y, cache, og = RN.conv(be, xi, wi, RN._Geom(n, h, h), 3, stride, "c")
        dx, dw = RN.conv_bwd(be, cache, wi, dy, "c")
        if want is None:
            want = [np.asarray(v) for v in (y, dx, dw)]
            continue
        run = Engine(be.graph, be.program(), mode="full").run(inputs=be.inputs)
        for got, ref in zip((y, dx, dw), want, strict=True):
            np.testing.assert_allclose(run.outputs[got.name].reshape(ref.shape), ref, rtol=1e-4, atol=1e-4)
        names = [r["name"] for r in be.ctx.records]
        assert "c/conv" in names and "c/im2col" not in names
        assert ("c/dx_conv" in names) == (stride == 1) and "c/dx_im2col" not in names
    np.testing.assert_allclose(want[0], ref_conv2d(x, w, ConvShape(n, h, h, c, co, 3, stride, 1)), rtol=1e-4,
                               atol=1e-4)


def test_each_tile_receives_its_input_rows_and_halo_once():
    s = ConvShape(4, 16, 16, 8, 32, 3, 1, 1)  # fp32: one input-channel group of 8
    x = rng.standard_normal((s.n * s.h * s.w, s.ci)).astype(np.float32)
    w = rng.standard_normal((s.k * s.k * s.ci, s.co)).astype(np.float32)
    be = EmulatorBackend(Target.from_device("ipu-mk2"), "fp32")
    y = be.conv2d(be.input("x", x), be.weight("w", w), s, "c")
    copies = {p.name: p for p in be.ctx.programs if isinstance(p, P.Copy)}
    plan = plan_conv(s, be.ctx.target, False, be.ctx.target.tiles_per_ipu, 0.6 * be.ctx.target.sram_bytes_per_tile)
    assert plan.pci == 1
    src = copies["c/exchange_input"].src
    # per output-row part: the input rows its output rows read (one above and below, clipped at the image
    # edge), each once, sent to each of the pco tiles of the part
    sizes = np.full(plan.pr, s.out_rows // plan.pr)
    sizes[:s.out_rows % plan.pr] += 1
    offsets = np.cumsum(sizes) - sizes
    want = 0
    for r0, nr in zip(offsets, sizes, strict=True):
        rows = set()
        for r in range(r0, r0 + nr):
            b, oy = divmod(r, s.oh)
            rows |= {(b, yi) for yi in (oy - 1, oy, oy + 1) if 0 <= yi < s.h}
        want += len(rows) * s.w * s.ci * plan.pco
    assert int(src.sizes.sum()) == want
    assert want < 9 * s.n * s.oh * s.ow * s.ci  # the elements of the windows an im2col gather moves
    # the op's tensors: the tiles' input rows (each element once per tile), kernel blocks and the output;
    # no (rows, k*k*C) window block
    ts = {t.name: t for t in be.graph.tensors if t.name.startswith("c")}
    assert set(ts) == {y.name, "c/input_with_halo", "c/kernel_blocks"}
    assert ts["c/input_with_halo"].size == want
    # without an input-channel split the vertices write the output itself
    run = Engine(be.graph, be.program(), mode="full").run(inputs=be.inputs)
    np.testing.assert_allclose(run.outputs[y.name].reshape(-1, s.co), ref_conv2d(x, w, s), rtol=1e-4, atol=1e-4)


def test_nx1_worker_cycles_follow_the_poplibs_formula():
    # getConvPartialnx1WorkerCycles, half activations, float partials: 17 to the partition loop, per entry
    # 3 + (34 + (n - 3) * 4) for n >= 3, 29 for n = 1, 33 for n = 2, 17 for n = 0, less 9 retained
    assert nx1_worker_cycles([], 4, False) == 17
    assert nx1_worker_cycles([5], 4, False) == 17 + 3 + 34 + 2 * 4 - 9
    assert nx1_worker_cycles([1, 2], 4, False) == 17 + (3 + 29 - 9) + (3 + 33 - 9)
    assert nx1_worker_cycles([4], 8, True) == 17 + 3 + 45 + 8 - 9


def test_nx1_vertex_runs_near_the_amp_rate_on_a_large_block():
    amp = amp_params(True)
    wl = [[(56,) * 4] * 6 for _ in range(9)]  # 9 kernel positions, every worker 4 rows of 56 positions
    cyc = nx1_tile_cycles(wl, 3, 3, 4, 4, 6 * 4 * 56, amp)
    macs = 6 * 4 * 56 * 9 * 64 * 64
    assert 0.75 * 64 < macs / cyc < 64  # the AMP's 64 MAC per tile cycle is the bound


@pytest.mark.parametrize("h,c,stride", [(56, 64, 1), (56, 128, 2), (28, 128, 1), (14, 256, 1), (7, 512, 1)])
def test_plan_of_resnet50_convolutions_fills_the_tiles_and_fits(h, c, stride):
    t = Target.from_device("ipu-mk2")
    s = ConvShape(20, h, h, c, c, 3, stride, 1)
    plan = plan_conv(s, t, True, t.tiles_per_ipu, 0.6 * t.sram_bytes_per_tile)
    used = plan.pr * plan.pco * plan.pci
    assert plan.fits and used <= t.tiles_per_ipu
    assert (c // 16) % plan.pco == 0 and (c // 16) % plan.pci == 0
    assert used >= t.tiles_per_ipu // 2


# ResNet-tiny's training step on the halo path against numpy, on the shipped chip: tests/emulator/models/test_resnet.py,
# test_training_step_matches_numpy_fp32 (one run for both: the halo lowering is the default).


def test_conv_lowering_is_checked():
    with pytest.raises(ConfigError, match="conv_lowering"):
        make_config("resnet-tiny", conv_lowering="winograd")


def test_dx_kernel_is_flipped_and_transposed_on_the_tiles_that_hold_it():
    """poplin's weightsTransposeChansFlipXY transposes the kernel on its tiles ("avoids exchange"), the kernel
    laid out by createWeights in blocks of one AMP input x output group (16 x 16 in fp16), each on one tile:
    the result is exact and nothing crosses a tile."""
    from popvision_lite.profile.schema import CATEGORY_CODE

    k, cin, cout = 3, 64, 32
    w = rng.standard_normal((k * k * cin, cout)).astype(np.float32)
    be = EmulatorBackend(Target.from_device("ipu-mk2"), "fp16")
    wi = be.weight("w", w)
    wt = be.flip_transpose_kernel(wi, k, cin, cout, "flip")
    mp = wi.mapping
    owner = np.repeat(mp.tile, mp.stop - mp.start)[np.argsort(np.concatenate(
        [np.arange(a, b) for a, b in zip(mp.start, mp.stop, strict=True)]))].reshape(k * k * cin, cout)
    blocks = owner.reshape(k * k * cin // 16, 16, cout // 16, 16).transpose(0, 2, 1, 3).reshape(-1, 256)
    assert (blocks == blocks[:, :1]).all() and len(np.unique(blocks[:, 0])) == len(blocks)  # whole blocks, one a tile
    run = Engine(be.graph, be.program(), mode="full").run(inputs=be.inputs)
    want = w.astype(np.float16).reshape(k * k, cin, cout)[::-1].transpose(0, 2, 1).reshape(k * k * cout, cin)
    np.testing.assert_array_equal(run.outputs[wt.name], want)
    mem = np.asarray(run.profile_data.memory)
    assert mem[:, CATEGORY_CODE["internalExchangeCode"], 0].sum() == 0
    assert mem[:, CATEGORY_CODE["copyDescriptor"], 0].sum() > 0


def test_tiles_input_regions_are_each_tiles_input_regions_in_tile_order():
    """ops/conv.tiles_input_regions (every tile at once, the exchange's source regions) gives the arrays of
    concatenating input_regions tile by tile: strided, dilated (a dX's transposed shape), uneven padding, parts
    that cross images, and input-channel splits."""
    from popvision_lite.emulator.codelets.poplin_conv import split_parts
    from popvision_lite.emulator.ops.conv import input_regions, tiles_input_regions

    rng = np.random.default_rng(7)
    for n, h, ci, k, stride in ((3, 9, 16, 3, 1), (2, 14, 32, 3, 2), (2, 8, 16, 5, 1), (4, 5, 48, 1, 1)):
        for s in (ConvShape(n, h, h, ci, 8, k, stride, k // 2), transposed_shape(n, h, h, ci, 8, k, stride, k // 2)):
            for parts in (1, 3, s.out_rows // 2 + 1, s.out_rows):
                for pci in (1, 2, 4):
                    sz, off = split_parts(s.out_rows, parts)
                    sz, off = sz[sz > 0], off[sz > 0]
                    ik = rng.integers(0, pci, len(sz))
                    regs = [input_regions(s, int(off[t]), int(sz[t]), pci, int(ik[t])) for t in range(len(sz))]
                    starts, sizes, per_tile = tiles_input_regions(s, off, sz, pci, ik)
                    assert np.array_equal(starts, np.concatenate([a for a, _ in regs]))
                    assert np.array_equal(sizes, np.concatenate([z for _, z in regs]))
                    assert per_tile.tolist() == [int(z.sum()) for _, z in regs]
                    # (each tile's regions: the copy's destination units, ops/conv.copy_units)
                    *same, regions = tiles_input_regions(s, off, sz, pci, ik, vertices=True)
                    assert all(np.array_equal(a, b) for a, b in zip(same, (starts, sizes, per_tile), strict=True))
                    assert regions.tolist() == [len(a) for a, _ in regs]


@pytest.mark.parametrize("tiles,k,cin,cout,laid_out", [(1472, 3, 64, 64, True), (50, 3, 48, 48, True),
                                                       (7, 5, 32, 96, True), (3, 1, 16, 32, True),
                                                       (37, 3, 24, 48, "fp32"), (64, 3, 2, 5, False),
                                                       (64, 3, 32, 32, False), (64, 3, 1, 4, False),
                                                       (64, 3, 16, 32, "blocks"), (64, 2, 12, 32, "across")])
def test_dx_kernel_mapping_from_blocks_is_each_elements_source_tile(tiles, k, cin, cout, laid_out):
    """flip_transpose_kernel's result: each element on its source element's tile, in runs of one tile (as found
    element by element with tile_of), whether the runs come from map_kernel's blocks (a tile per gi elements, the
    copy then described for the compile: Copy.transpose) or, for a kernel laid out otherwise, from each element;
    the copy's source is flat_view's endpoint."""
    from popvision_lite.emulator import mapping as M
    from popvision_lite.emulator.ops.common import flat_view
    from popvision_lite.emulator.ops.conv import flipped_kernel_index

    t = Target.from_device("ipu-mk2")
    t.tiles_per_ipu = t.num_tiles = tiles
    be = EmulatorBackend(t, "fp32" if laid_out == "fp32" else "fp16")  # (fp32: blocks of 8 x 16)
    w = be.weight("w", np.zeros((k * k * cin, cout), np.float32))
    if not laid_out:  # (used before, with another layout: map_kernel does not lay it out)
        be.graph.set_mapping(w, M.linear(w.size, np.arange(min(tiles, 5))))
        be.ctx.mark_used(w)
    elif laid_out in ("blocks", "across"):  # laid out in blocks before, not by map_kernel: the mapping says how
        be.graph.set_mapping(w, M.by_blocks(w.shape, (8, 16), np.arange(5)))
        be.ctx.mark_used(w)
    wt = be.flip_transpose_kernel(w, k, cin, cout, "flip")
    idx = flipped_kernel_index(k, cin, cout).ravel()
    tile = w.mapping.tile_of(idx)
    brk = np.flatnonzero(np.diff(tile)) + 1
    starts, stops = np.r_[0, brk], np.r_[brk, len(idx)]
    assert np.array_equal(wt.mapping.tile, tile[starts]) and np.array_equal(wt.mapping.start, starts)
    assert np.array_equal(wt.mapping.stop, stops)
    (cp,) = [p for p in be.ctx.programs if isinstance(p, P.Copy)]
    # (blocks across kernel positions, 8-row blocks of 12 input channels: no transpose of whole segments)
    assert (cp.transpose is not None) == (bool(laid_out) and laid_out != "across")
    want = flat_view(w, idx)
    assert type(cp.src) is type(want) and np.array_equal(cp.src.runs()[0], want.runs()[0])
    assert np.array_equal(cp.src.runs()[1], want.runs()[1])
