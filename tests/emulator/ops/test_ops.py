"""Each op on the emulator equals its numpy reference (fp32, tight tolerance) and records itself."""

import numpy as np
import pytest

from popvision_lite.emulator import reference as R
from popvision_lite.emulator.backends.backend import NumpyBackend
from popvision_lite.emulator.engine import Engine
from popvision_lite.emulator.models.emulated import EmulatorBackend
from popvision_lite.emulator.target import Target

rng = np.random.default_rng(5)


def _run(fn, *arrays, precision="fp32"):
    """Build fn(backend, *inputs) on both backends; return (emulated outputs, numpy outputs, profile)."""
    em = EmulatorBackend(Target.from_device("ipu-mk2"), precision)
    ref = NumpyBackend(precision)
    outs = []
    for be in (em, ref):
        ins = [be.input(f"in{i}", a) for i, a in enumerate(arrays)]
        res = fn(be, *ins)
        outs.append(res if isinstance(res, tuple) else (res,))
    run = Engine(em.graph, em.program(), mode="full").run(inputs=em.inputs)
    got = tuple(run.outputs[t.name] for t in outs[0])
    return got, outs[1], run.profile_data


def _close(got, want, tol=1e-4):
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g, np.float64).reshape(np.shape(w)), w, rtol=tol, atol=tol)


@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_matmul_with_transposed_operands(ta, tb):
    a = rng.standard_normal((24, 40) if ta else (40, 24)).astype(np.float32)
    b = rng.standard_normal((16, 24) if tb else (24, 16)).astype(np.float32)

    def f(be, x, y):
        return be.matmul(be.t(x) if ta else x, be.t(y) if tb else y, "mm")

    got, want, pd_ = _run(f, a, b)
    _close(got, want)
    np.testing.assert_allclose(want[0], (a.T if ta else a) @ (b.T if tb else b), rtol=1e-5, atol=1e-5)
    row = pd_.ops.set_index("name").loc["mm"]
    assert row["type"] == "matmul" and row["flops"] >= 2 * 40 * 24 * 16
    assert ("A read transposed" in row["plan"]) == ta and ("B read transposed" in row["plan"]) == tb


def test_batched_matmul_and_fp16_accumulates_in_fp32():
    a = rng.standard_normal((3, 16, 64)).astype(np.float32)
    b = rng.standard_normal((3, 64, 8)).astype(np.float32)
    got, want, _ = _run(lambda be, x, y: be.matmul(x, y, "bmm"), a, b, precision="fp16")
    exact = np.matmul(a.astype(np.float16).astype(np.float64), b.astype(np.float16).astype(np.float64))
    # fp16 output rounding only (K=64 sums in FP32): error ~ 2^-11 relative to the output magnitude
    assert np.abs(got[0] - exact).max() <= 2e-3 * np.abs(exact).max()


def test_rows_ops_and_reductions():
    x = rng.standard_normal((12, 20)).astype(np.float32)
    g = rng.standard_normal(20).astype(np.float32)
    dy = rng.standard_normal((12, 20)).astype(np.float32)

    def f(be, x_, g_, dy_):
        y = be.softmax(x_, "sm")
        dsm = be.softmax_bwd(y, dy_, "smb")
        dx, dg, db = be.layer_norm_bwd(x_, g_, dy_, "lnb")
        s = be.reduce_rows(dy_, "red")
        return y, dsm, dx, dg, db, s

    got, want, _ = _run(f, x, g, dy)
    _close(got, want)
    np.testing.assert_allclose(want[5], dy.sum(0), rtol=1e-5)


def test_gather_pad_and_elementwise():
    table = rng.standard_normal((10, 6)).astype(np.float32)
    ids = np.array([3, 3, 9, 0, 1])
    x = rng.standard_normal((2, 3, 3, 4)).astype(np.float32)

    def f(be, t, x_):
        e = be.gather_rows(t, ids, "emb")
        p = be.pad_hw(x_, (2, 3, 3, 4), 1, "pad")
        gl = be.gelu(e, "gelu")
        return e, p, gl, be.gelu_bwd(e, gl, "gelu_bwd")

    got, want, _ = _run(f, table, x)
    _close(got, want)
    np.testing.assert_array_equal(want[0], table[ids])
    assert want[1].shape == (2, 5, 5, 4) and np.all(want[1][:, 0] == 0)


@pytest.mark.parametrize("density", [0.25, 1.0])
def test_block_sparse_matmul(density):
    mask = R.block_sparse_mask(4, 3, density, seed=2)
    a = rng.standard_normal((16, 32)).astype(np.float32)
    b = rng.standard_normal((32, 24)).astype(np.float32)
    got, want, pd_ = _run(lambda be, x, y: be.block_sparse_matmul(x, y, mask, 8, "bsmm"), a, b)
    _close(got, want)
    np.testing.assert_allclose(want[0], R.block_sparse_matmul(a, b, mask, 8), rtol=1e-5, atol=1e-5)
    row = pd_.ops.set_index("name").loc["bsmm"]
    assert row["flops"] == 2 * 16 * 8 * 8 * mask.sum()


def _split(plan: str) -> tuple[int, int]:
    pm = int(plan.split("M=")[1].split()[0])
    pn = int(plan.split("N=")[1].split()[0])
    return pm, pn


@pytest.mark.parametrize("ash,bsh,ta,tb", [
    ((1000, 72), (72, 999), False, False),   # M and N both uneven, whole K per tile
    ((40, 300), (300, 61), True, False),     # K split + transposed A (block-major rearrangement)
    ((37, 64), (64, 50), False, True),       # transposed B
    ((97, 128), (128, 33), True, True),
    ((3, 45, 64), (3, 64, 29), False, False),  # batched products
    ((256, 1000), (1000, 257), False, False),  # K split with uneven output blocks
])
def test_matmul_with_uneven_splits(ash, bsh, ta, tb):
    """Splits that do not divide M or N (parts of ceil and floor size, as poplin partitions) give the
    numpy result, and the plan is really uneven."""
    def stored(shape, t):
        return (shape[:-2] + (shape[-1], shape[-2])) if t else shape

    a = rng.standard_normal(stored(ash, ta)).astype(np.float32)
    b = rng.standard_normal(stored(bsh, tb)).astype(np.float32)

    def f(be, x, y):
        return be.matmul(be.t(x) if ta else x, be.t(y) if tb else y, "mm")

    got, want, pd_ = _run(f, a, b)
    _close(got, want, 1e-3)
    plan = pd_.ops.set_index("name").loc["mm"]["plan"]
    pm, pn = _split(plan)
    assert ash[-2] % pm or bsh[-1] % pn, plan


def test_weight_laid_out_for_an_uneven_split():
    W = rng.standard_normal((300, 451)).astype(np.float32)
    x = rng.standard_normal((130, 300)).astype(np.float32)

    def f(be, inp):
        return be.matmul(inp, be.weight("w", W), "mmw")

    got, want, pd_ = _run(f, x)
    _close(got, want, 1e-3)
    plan = pd_.ops.set_index("name").loc["mmw"]["plan"]
    assert "B laid out for this plan once" in plan and 451 % _split(plan)[1], plan
