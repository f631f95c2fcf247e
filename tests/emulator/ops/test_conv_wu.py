"""The weight-update convolution on the halo path (emulator/ops/conv_wu.py): dW against numpy (several
shapes, stride 1 and 2, padding 0 / 1 / 2, fp32 and fp16 with float and half partials), each tile's input
rows with halo and dY rows moved once and no window block, partial blocks smaller than the kernel reduced
over the tiles, the vertex cost as poplibs' ConvPartial1x1Out estimate, and the ResNet call site."""

import numpy as np
import pytest

from popvision_lite.emulator import programs as P
from popvision_lite.emulator.backends.backend import NumpyBackend
from popvision_lite.emulator.codelets.poplin_conv import CONV_PARTIAL_WEIGHT_UPDATE, ConvShape
from popvision_lite.emulator.engine import Engine
from popvision_lite.emulator.estimators.poplin import amp_matmul_tile_cycles
from popvision_lite.emulator.models import resnet as RN
from popvision_lite.emulator.models.emulated import EmulatorBackend
from popvision_lite.emulator.ops.conv_wu import plan_conv_wu, ref_conv2d_weight_update
from popvision_lite.emulator.ops.pooling import conv_windows
from popvision_lite.emulator.target import Target
from popvision_lite.errors import EmulatorError

from .conv_direct import direct_taps

rng = np.random.default_rng(11)

SHAPES = [
    ConvShape(2, 8, 8, 16, 32, 3, 1, 1),  # same padding, two output-channel groups
    ConvShape(2, 6, 6, 16, 16, 3, 1, 0),  # no padding: 4x4 dY
    ConvShape(2, 6, 6, 16, 16, 5, 1, 2),  # a 5x5 kernel, halo of two rows
    ConvShape(1, 5, 6, 16, 48, 3, 1, 1),  # three output groups, odd sizes
    ConvShape(3, 9, 7, 16, 16, 3, 2, 1),  # stride 2 (numerics only: the ResNet call site keeps im2col there)
]


def _loop_dw(x, dy, s: ConvShape):
    """Direct definition: dW[ky, kx, c, o] = sum over b, i, j of x[b, i*s - p + ky, j*s - p + kx, c] dy[b, i, j, o]."""
    xi = x.reshape(s.n, s.h, s.w, s.ci).astype(np.float64)
    d = dy.reshape(s.n, s.oh, s.ow, s.co).astype(np.float64)
    out = np.zeros((s.k, s.k, s.ci, s.co))
    for i, j, ky, kx, r, c in direct_taps(s):
        out[ky, kx] += xi[:, r, c].T @ d[:, i, j]
    return out.reshape(-1, s.co)


def _data(s, dtype=np.float32):
    x = rng.standard_normal((s.n * s.h * s.w, s.ci)).astype(dtype)
    dy = (rng.standard_normal((s.out_rows * s.ow, s.co)) / 4).astype(dtype)
    return x, dy


def _emulate(s, x, dy, precision="fp32", partials_type=None):
    kw = {} if partials_type is None else {"partials_type": partials_type}
    be = EmulatorBackend(Target.from_device("ipu-mk2"), precision, **kw)
    dw = be.conv2d_weight_update(be.input("x", x), be.input("dy", dy), s, "c")
    run = Engine(be.graph, be.program(), mode="full").run(inputs=be.inputs)
    return be, dw, run.outputs[dw.name].reshape(-1, s.co)


@pytest.mark.parametrize("s", SHAPES)
def test_reference_matches_direct_loops_and_the_im2col_gemm(s):
    x, dy = _data(s)
    ref = ref_conv2d_weight_update(x, dy, s)
    np.testing.assert_allclose(ref, _loop_dw(x, dy, s), rtol=1e-4, atol=1e-4)
    if s.pad == s.k // 2:  # conv_windows pads k // 2
        idx, _ = conv_windows(s.n, s.h, s.w, s.k, s.stride, s.pad)
        cols = (x[np.maximum(idx, 0)] * (idx >= 0)[..., None]).reshape(len(idx), -1)
        np.testing.assert_allclose(ref, cols.T @ dy, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("s", SHAPES)
def test_weight_update_matches_numpy(s):
    x, dy = _data(s)
    be, _, got = _emulate(s, x, dy)
    np.testing.assert_allclose(got, ref_conv2d_weight_update(x, dy, s), rtol=1e-4, atol=1e-4)
    assert [r["type"] for r in be.ctx.records] == ["conv"]
    assert "(partials reduced)" in be.ctx.records[0]["plan"]


@pytest.mark.parametrize("partials_type", ["float", "half"])
def test_weight_update_fp16_within_fp16_rounding(partials_type):
    s = SHAPES[0]
    x, dy = _data(s, np.float16)
    be, _, got = _emulate(s, x, dy, "fp16", partials_type)
    parts = [t for t in be.graph.tensors if t.name == "c/partials"]
    assert len(parts) == 1 and parts[0].dtype == ("float16" if partials_type == "half" else "float32")
    want = ref_conv2d_weight_update(x, dy, s)
    got = np.asarray(got, np.float32)
    # FP32 accumulation on the tile; the partials rounded to fp16 once more with half partials, then the sum
    tol = 2e-3 if partials_type == "float" else 6e-3
    assert np.max(np.abs(got - want)) <= tol * np.max(np.abs(want))


def test_each_tile_receives_its_rows_once_and_computes_a_partial_block():
    s = ConvShape(4, 16, 16, 32, 32, 3, 1, 1)  # fp16: two input and two output groups of 16
    x, dy = _data(s, np.float16)
    be = EmulatorBackend(Target.from_device("ipu-mk2"), "fp16")
    dw = be.conv2d_weight_update(be.input("x", x), be.input("dy", dy), s, "c")
    t = be.ctx.target
    plan = plan_conv_wu(s, t, True, t.tiles_per_ipu, be.ctx.available_memory_proportion * t.sram_bytes_per_tile, 4)
    assert plan.pci * plan.pco > 1  # the per-tile partial dW is a slice of the kernel's channels
    copies = {p.name: p for p in be.ctx.programs if isinstance(p, P.Copy)}
    sizes = np.full(plan.pr, s.out_rows // plan.pr)
    sizes[:s.out_rows % plan.pr] += 1
    offsets = np.cumsum(sizes) - sizes
    want_in = want_dy = 0
    for r0, nr in zip(offsets, sizes, strict=True):
        rows = set()
        for r in range(r0, r0 + nr):
            b, oy = divmod(r, s.oh)
            rows |= {(b, yi) for yi in (oy - 1, oy, oy + 1) if 0 <= yi < s.h}
        want_in += len(rows) * s.w * s.ci * plan.pco  # each input-channel slice once per output-channel part
        want_dy += nr * s.ow * s.co * plan.pci
    assert int(copies["c/exchange_input"].src.sizes.sum()) == want_in
    assert int(copies["c/exchange_output_grad"].src.sizes.sum()) == want_dy
    assert want_in < 9 * s.out_rows * s.ow * s.ci * plan.pco  # an im2col gather's window elements
    ts = {t.name: t for t in be.graph.tensors if t.name.startswith("c")}
    assert set(ts) == {dw.name, "c/input_with_halo", "c/output_grad_rows", "c/partials", "c/partials_gathered",
                       "c/reduced_blocks"}
    tiles = plan.pr * plan.pci * plan.pco
    blk = 9 * (s.ci // plan.pci) * (s.co // plan.pco)
    assert ts["c/partials"].size == tiles * blk and ts["c/partials"].dtype == "float32"
    (group,) = [g for g in be.graph.groups if g.codelet is CONV_PARTIAL_WEIGHT_UPDATE]
    assert group.n == tiles and set(group.fields["out"].sizes.tolist()) == {blk}
    # every owner receives its slice of a block from each of the other tiles of the block: one piece each
    gather = copies["c/gather_partials"].src
    assert len(gather.sizes) == plan.pci * plan.pco * plan.pr * min(plan.pr, blk)
    run = Engine(be.graph, be.program(), mode="full").run(inputs=be.inputs)
    want = ref_conv2d_weight_update(x, dy, s)
    got = np.asarray(run.outputs[dw.name], np.float32).reshape(want.shape)
    assert np.max(np.abs(got - want)) <= 2e-3 * np.max(np.abs(want))


def test_vertex_cost_is_the_conv_partial_1x1_estimate_of_its_block():
    s = ConvShape(2, 8, 8, 32, 32, 3, 1, 1)
    x, dy = _data(s, np.float16)
    be = EmulatorBackend(Target.from_device("ipu-mk2"), "fp16")
    be.conv2d_weight_update(be.input("x", x), be.input("dy", dy), s, "c")
    t = be.ctx.target
    for g in (g for g in be.graph.groups if g.codelet is CONV_PARTIAL_WEIGHT_UPDATE):
        cik, cop, nr = (int(g.param(k)) for k in ("ci", "co", "nr"))
        assert g.fields["out"].sizes[0] == 9 * cik * cop
        # field = (kernel position, input channel) pairs, input channels = the tile's dY pixels
        want = -(-amp_matmul_tile_cycles(9 * cik, nr * s.ow, cop, True, t) // t.threads_per_tile)
        assert set(CONV_PARTIAL_WEIGHT_UPDATE.cycles(g, t).tolist()) == {want}
        assert CONV_PARTIAL_WEIGHT_UPDATE.flops(g) == 2 * 9 * cik * nr * s.ow * cop * g.n


@pytest.mark.parametrize("h,c", [(56, 64), (28, 128), (14, 256), (7, 512)])
def test_plan_of_resnet50_weight_updates_fills_the_tiles_and_fits(h, c):
    t = Target.from_device("ipu-mk2")
    s = ConvShape(20, h, h, c, c, 3, 1, 1)
    plan = plan_conv_wu(s, t, True, t.tiles_per_ipu, 0.15 * t.sram_bytes_per_tile, 2)
    used = plan.pr * plan.pco * plan.pci
    assert plan.fits and t.tiles_per_ipu // 2 <= used <= t.tiles_per_ipu
    assert (c // 16) % plan.pco == 0 and (c // 16) % plan.pci == 0


def test_dilated_input_is_refused():
    s = ConvShape(1, 4, 4, 16, 16, 3, 1, 1, dil=2)
    be = EmulatorBackend(Target.from_device("ipu-mk2"), "fp32")
    x = be.input("x", np.zeros((16, 16), np.float32))
    dy = be.input("dy", np.zeros((s.out_rows * s.ow, 16), np.float32))
    with pytest.raises(EmulatorError, match="dilation"):
        be.conv2d_weight_update(x, dy, s, "c")


@pytest.mark.parametrize("stride", [1, 2])
def test_resnet_conv_bwd_takes_the_weight_update_convolution_at_stride_1(stride):
    """models/resnet.py conv_bwd with conv_lowering "halo": dW of a stride-1 3x3 convolution from
    conv2d_weight_update (no window gather), of a strided one from cols^T dY; both against the numpy backend."""
    n, h, c, co = 2, 6, 16, 32
    x = rng.standard_normal((n * h * h, c)).astype(np.float32)
    w = rng.standard_normal((9 * c, co)).astype(np.float32)
    dyv = rng.standard_normal((n * (h // stride) ** 2, co)).astype(np.float32)
    want = None
    for be in (NumpyBackend("fp32"), EmulatorBackend(Target.from_device("ipu-mk2"), "fp32")):
        be.conv_lowering = "halo"
        xi, wi, dy = be.input("x", x), be.input("w", w), be.input("dy", dyv)
        _, cache, _ = RN.conv(be, xi, wi, RN._Geom(n, h, h), 3, stride, "c")
        _, dw = RN.conv_bwd(be, cache, wi, dy, "c")
        if want is None:
            want = np.asarray(dw)
            continue
        run = Engine(be.graph, be.program(), mode="full").run(inputs=be.inputs)
        np.testing.assert_allclose(run.outputs[dw.name].reshape(want.shape), want, rtol=1e-4, atol=1e-4)
        names = [r["name"] for r in be.ctx.records]
        assert ("c/dw_conv" in names) == (stride == 1)
        assert ("c/wu_im2col" in names) == (stride == 2) and ("c/dw_matmul" in names) == (stride == 2)
