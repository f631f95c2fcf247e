"""The op library's matmul whole-GEMM path (TileMatMul reading through deferred broadcast copies).

Full numerics must not depend on the path: every case runs with the engine's lazy copies on (the
fast path) and off (every broadcast copy done, every vertex block multiplied on its own), and the
fast path must actually be taken when it is on."""

import numpy as np
import pytest

from popvision_lite.emulator import Engine, Graph, Target
from popvision_lite.emulator import mapping as M
from popvision_lite.emulator import programs as P
from popvision_lite.emulator.codelets import poplin as CL
from popvision_lite.emulator.codelets import popops as CO
from popvision_lite.emulator.models.emulated import EmulatorBackend

rng = np.random.default_rng(11)


@pytest.fixture
def whole_calls(monkeypatch):
    calls = []
    orig = CL.TileMatMul._compute_whole

    def counting(self, group, data, plan):
        calls.append(self.name)
        return orig(self, group, data, plan)

    monkeypatch.setattr(CL.TileMatMul, "_compute_whole", counting)
    return calls


def _build(fn, arrays, precision):
    em = EmulatorBackend(Target.from_device("ipu-mk2"), precision)
    ins = [em.input(f"in{i}", a) for i, a in enumerate(arrays)]
    out = fn(em, *ins)
    return em, out


def _run_both(fn, arrays, precision, calls):
    em, out = _build(fn, arrays, precision)
    res = {}
    for lazy in (False, True):
        calls.clear()
        eng = Engine(em.graph, em.program(), mode="full")
        eng.lazy_copies = lazy
        r = eng.run(inputs=em.inputs)
        res[lazy] = (r, len(calls))
    return em, out, res


CASES = [
    # (a shape, b shape, ta, tb)
    ((40, 24), (24, 16), False, False),
    ((40, 24), (24, 16), True, False),
    ((40, 24), (24, 16), False, True),
    ((40, 24), (24, 16), True, True),
    ((3, 16, 64), (3, 64, 8), False, False),  # batched (G = 3)
    ((128, 128), (128, 512), False, False),
]


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
@pytest.mark.parametrize("ash,bsh,ta,tb", CASES)
def test_fast_path_equals_per_vertex_path(whole_calls, precision, ash, bsh, ta, tb):
    a = rng.standard_normal(ash).astype(np.float32)
    b = rng.standard_normal(bsh).astype(np.float32)

    def f(be, x, y):
        return be.matmul(be.t(x) if ta else x, be.t(y) if tb else y, "mm")

    a_in = np.swapaxes(a, -1, -2).copy() if ta else a
    b_in = np.swapaxes(b, -1, -2).copy() if tb else b
    em, out, res = _run_both(f, [a_in, b_in], precision, whole_calls)
    (eager, n_eager), (lazy, n_lazy) = res[False], res[True]
    assert n_eager == 0 and n_lazy >= 1
    got, ref = lazy.outputs[out.name], eager.outputs[out.name]
    # same products in FP32 (BLAS may sum in another order): within FP32 rounding, then the output cast
    tol = 2e-6 if precision == "fp32" else 2e-3
    np.testing.assert_allclose(got.astype(np.float64), ref.astype(np.float64), rtol=tol,
                               atol=tol * np.abs(ref).max())
    # fp16 inputs, FP32 accumulation: equals the FP32 GEMM of the fp16-rounded inputs
    dt = np.float16 if precision == "fp16" else np.float32
    want = np.matmul(a.astype(dt).astype(np.float32), b.astype(dt).astype(np.float32))
    np.testing.assert_allclose(got.astype(np.float64).reshape(want.shape), want.astype(dt).astype(np.float64),
                               rtol=tol, atol=tol * np.abs(want).max())
    # deferred broadcast copies are still done by the end: every tensor's final value is the same
    # (FP32 accumulators - "/acc", and the K-split partials "/partials" with what is gathered from
    # them - are GEMM outputs whose summation order differs between the batched and per-block paths)
    for name, v in eager.outputs.items():
        if name != out.name and not name.endswith(("/acc", "/partials", "/partials_gathered")):
            np.testing.assert_array_equal(lazy.outputs[name], v, err_msg=name)


def test_serial_k_passes_accumulate_in_fp32(whole_calls):
    # K = 65536 on 8x8: the planner splits K over the tiles (K-split partials reduced on tile); a
    # tiny available_memory_proportion (~1.9 KiB per tile) leaves too little room for one pass of
    # a tile's K chunk, so it also streams K in serial passes into an FP32 accumulator
    a = (rng.standard_normal((8, 65536)) * 0.1).astype(np.float32)
    b = (rng.standard_normal((65536, 8)) * 0.1).astype(np.float32)

    def mm(be, x, y):
        be.ctx.available_memory_proportion = 0.003
        return be.matmul(x, y, "mm")

    em, out, res = _run_both(mm, [a, b], "fp16", whole_calls)
    assert "serial passes" in em.ctx.records[-1]["plan"]
    (eager, _), (lazy, n_lazy) = res[False], res[True]
    assert n_lazy >= 2 and any(n.endswith("Acc") for n in whole_calls)
    want = np.matmul(a.astype(np.float16).astype(np.float32), b.astype(np.float16).astype(np.float32))
    got = lazy.outputs[out.name].astype(np.float64)
    np.testing.assert_allclose(got, eager.outputs[out.name].astype(np.float64), rtol=2e-3, atol=2e-3)
    np.testing.assert_allclose(got, want.astype(np.float16).astype(np.float64), rtol=2e-3, atol=2e-3)


def test_deferred_regions_copy_is_done_before_an_ordinary_reader():
    """A Regions -> whole-tensor copy is deferred by the engine; a codelet that does not read
    through copies (here SCALE), a later overwrite of the source, and the final outputs must all
    see the copied values."""
    t = Target.from_device("ipu-mk2")
    g = Graph(t)
    n, L = 64, 8
    src = g.add_variable("src", (n,), "float32", mapping=M.linear(n, range(4)))
    stage = g.add_variable("stage", (2 * n,), "float32", mapping=M.linear(2 * n, range(4)))
    out = g.add_variable("out", (2 * n,), "float32", mapping=stage.mapping)
    starts = np.repeat(np.arange(0, n, L), 2)  # every source piece broadcast twice
    cs = g.add_compute_set("scale")
    vt, s, z = M.worker_split(stage)
    g.add_vertices(cs, CO.SCALE, vt, fields={"in": stage.regions(s, z), "out": out.regions(s, z)},
                   params={"scale": np.float32(2.0)})
    zero = g.add_compute_set("zero_src")
    vt2, s2, z2 = M.worker_split(src)
    g.add_vertices(zero, CO.FILL, vt2, fields={"out": src.regions(s2, z2)}, params={"value": np.float32(0.0)})
    prog = P.Sequence([P.Copy(src.regions(starts, L), stage.whole()), P.Execute(cs), P.Execute(zero)])
    x = rng.standard_normal(n).astype(np.float32)
    expect_stage = x[(starts[:, None] + np.arange(L)).ravel()]
    for lazy in (True, False):
        eng = Engine(g, prog, mode="full")
        eng.lazy_copies = lazy
        r = eng.run(inputs={"src": x})
        np.testing.assert_array_equal(r.outputs["out"], 2 * expect_stage)
        np.testing.assert_array_equal(r.outputs["stage"], expect_stage)
        np.testing.assert_array_equal(r.outputs["src"], np.zeros(n, np.float32))


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_window_rectangle_write_equals_window_scatter(monkeypatch, precision):
    """An uneven split's output windows that form one rectangle of C are written as one slice; the
    same values, bit for bit, as scattering them window by window."""
    a = rng.standard_normal((128, 128)).astype(np.float32)
    b = rng.standard_normal((128, 512)).astype(np.float32)
    em, out = _build(lambda be, x, y: be.matmul(x, y, "mm"), [a, b], precision)
    rects = []
    orig_plan = CL.TileMatMul._whole_plan

    def plan_without_rect(self, group, aliases):
        p = orig_plan(self, group, aliases)
        if p is not None and p[-1] is not None:
            rects.append(p[-1][3])
            p = (*p[:-1], (*p[-1][:3], None))
        return p

    runs = []
    for strip in (False, True):
        if strip:
            monkeypatch.setattr(CL.TileMatMul, "_whole_plan", plan_without_rect)
        runs.append(Engine(em.graph, em.program(), mode="full").run(inputs=em.inputs).outputs)
    assert rects and all(r is not None for r in rects)  # the rectangle path was the one taken
    for name, v in runs[1].items():
        np.testing.assert_array_equal(runs[0][name], v, err_msg=name)
