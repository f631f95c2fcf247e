"""Graph functions (ops/graph_function.py): norms with the same operand signature are one body of programs,
called with their arguments copied in and their results copied out, as Graphcore's TensorFlow builds them."""

import numpy as np

from popvision_lite.emulator import programs as P
from popvision_lite.emulator.backends.backend import NumpyBackend
from popvision_lite.emulator.engine import Engine
from popvision_lite.emulator.models.emulated import EmulatorBackend
from popvision_lite.emulator.target import Target
from popvision_lite.profile.schema import CATEGORY_CODE


def _three_norms(be):
    """Two batch norms of one signature (other inputs, other weights) and one of another, forward and backward."""
    rng = np.random.default_rng(5)
    outs = []
    for i, (rows, c) in enumerate(((256, 32), (256, 32), (128, 64))):
        x = be.input(f"x{i}", rng.normal(1.0, 2.0, (rows, c)).astype(np.float32))
        dy = be.input(f"dy{i}", rng.normal(size=(rows, c)).astype(np.float32))
        g = be.input(f"g{i}", rng.uniform(0.5, 1.5, c).astype(np.float32))
        b = be.input(f"b{i}", rng.normal(size=c).astype(np.float32))
        y, mean, invstd = be.batch_norm(x, g, b, f"bn{i}")
        outs += [y, *be.batch_norm_bwd(x, dy, mean, invstd, g, f"bn{i}_bwd")]
    return outs


def _build(cache):
    be = EmulatorBackend(Target.from_device("ipu-mk2"), "fp32")
    be.function_cache = cache
    outs = _three_norms(be)
    return be, outs


def test_calls_of_one_signature_compute_what_separate_norms_do():
    be, outs = _build({})
    ref = NumpyBackend("fp32")
    want = _three_norms(ref)  # the same inputs
    run = Engine(be.graph, be.program(), mode="full").run(inputs=be.inputs)
    assert len(want) == len(outs) == 12
    for got, w in zip(outs, want, strict=True):
        np.testing.assert_allclose(run.outputs[got.name], np.asarray(w), rtol=2e-4, atol=2e-4)


def test_one_body_per_signature_and_its_code_once():
    cached, _ = _build({})
    plain, _ = _build(None)
    # two signatures (forward and backward each): the second norm of the first signature is a call
    calls = [p for p in cached.ctx.programs if isinstance(p, P.Sequence) and p.call_args]
    assert len(calls) == 2
    stats = lambda be: sum(cs.name.endswith("/stats") or "/stats#" in cs.name for cs in be.graph.compute_sets)  # noqa: E731
    assert stats(plain) == 3 and stats(cached) == 2
    r_c = Engine(cached.graph, cached.program(), mode="timing").run()
    r_p = Engine(plain.graph, plain.program(), mode="timing").run()
    vs = CATEGORY_CODE["vertexInstanceState"]
    assert r_c.profile_data.memory[:, vs, 0].sum() < r_p.profile_data.memory[:, vs, 0].sum()
    # the calls copy their arguments in and their results out: more cycles than building each norm
    assert r_c.total_cycles > r_p.total_cycles


def _convs(cache):
    """Two 3x3 convolutions of one signature, each with its own weight that nothing has used before the call."""
    from popvision_lite.emulator.codelets.poplin_conv import ConvShape
    from popvision_lite.emulator.ops import graph_function as GF

    be = EmulatorBackend(Target.from_device("ipu-mk2"), "fp16")
    be.function_cache = cache
    s = ConvShape(2, 8, 8, 32, 32, 3, 1, 1)
    rng = np.random.default_rng(1)
    ws = []
    for i in range(2):
        x = be.input(f"x{i}", rng.normal(size=(2 * 8 * 8, 32)).astype(np.float32))
        w = be.weight(f"w{i}", rng.normal(size=(9 * 32, 32)).astype(np.float32))
        GF.backend_call(be, ("conv",), lambda xp, wp: be.conv2d(xp, wp, s, "conv"), [x, w], f"conv{i}")
        ws.append(w)
    return be, ws


def _mapping(t):
    m = t.mapping
    return m.tile.tolist(), m.start.tolist(), m.stop.tolist()


def test_a_weight_first_used_by_a_call_takes_the_bodys_layout():
    """TensorFlow lets the op that consumes a weight allocate it: a kernel passed to a convolution's graph function
    gets poplin's createWeights layout, as it does without the function, and its argument copy stays on its tiles."""
    called, (w0, w1) = _convs({})
    plain, (p0, _) = _convs(None)
    assert len(w0.mapping.start) > 9 * 32  # blocks of 16 x 16 (several per kernel row), not one interval per row
    assert _mapping(w0) == _mapping(p0) == _mapping(w1)
    copies = [p for p in called.ctx.programs if isinstance(p, P.Copy) and p.name.endswith("copy_arg1")]
    calls = [p for p in called.ctx.programs if isinstance(p, P.Sequence) and p.call_args]
    copies += [p for c in calls for p in c.programs if isinstance(p, P.Copy) and p.name.endswith("copy_arg1")]
    assert len(copies) == 2
    for c in copies:
        assert _mapping(c.src.tensor) == _mapping(c.dst.tensor)
