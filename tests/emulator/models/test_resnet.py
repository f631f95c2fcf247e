"""ResNet (the MLPerf ResNet-50 graph) on the emulator: full numerics equal the numpy reference on a
tiny configuration, the graph is ResNet-50 (parameter count, FLOPs), recomputation and the three
backends work.  Tests whose behaviour does not depend on the shipped chip's 1,472 tiles run on the tests'
device with 92 (decision 0395), the outlined-against-built ResNet-50-deep builds among them (decision 0475)."""

import numpy as np
import pytest

from popvision_lite.emulator.backends.backend import NumpyBackend
from popvision_lite.emulator.backends.emulator_backend import EmulatorBackend
from popvision_lite.emulator.backends.planning import PlanOnlyBackend
from popvision_lite.emulator.engine import Engine
from popvision_lite.emulator.models import resnet as RN
from popvision_lite.emulator.models.catalog import build
from popvision_lite.emulator.models.config import MODEL_NAMES, make_config
from popvision_lite.emulator.models.emulated import build_model, run_model
from popvision_lite.emulator.ops.context import View, plan_target_of
from popvision_lite.emulator.target import Target
from popvision_lite.errors import ConfigError
from tests.support.devices import ID as SMALL  # the shipped Mk2 cut to 92 tiles (decision 0395)
from tests.support.emulations import shared_run


def test_presets_are_registered():
    assert {"resnet50", "resnet-tiny"} <= set(MODEL_NAMES)
    cfg = make_config("resnet50")
    assert (cfg.model, cfg.layers, cfg.hidden, cfg.image, cfg.vocab, cfg.batch) == ("resnet", 50, 64, 224, 1000, 20)
    with pytest.raises(ConfigError, match="layers: ResNet depth"):
        make_config("resnet50", layers=49)
    with pytest.raises(ConfigError, match="image: ResNet needs a multiple of 32"):
        make_config("resnet-tiny", image=40)


def test_resnet50_graph_has_the_published_size():
    """25,557,032 parameters (torchvision resnet50: convs, BN gamma/beta, fc) and ~4.1 G multiply-adds."""
    be = PlanOnlyBackend(plan_target_of(Target.from_device("ipu-mk2")))
    count = []
    orig = be.weight
    be.weight = lambda name, values, dtype=None, streamed=False: (count.append(int(np.prod(np.shape(values)))),
                                                                 orig(name, values, dtype, streamed))[1]
    cfg = make_config("resnet50", image=32, batch=1)
    build(be, cfg)
    assert sum(count) == 25_557_032
    assert 4.0e9 < RN.flops_per_image(make_config("resnet50")) / 2 < 4.2e9
    types = {t for _, t, _ in be.plans}
    assert {"im2col", "batch_norm", "batch_norm_bwd", "max_pool", "max_pool_bwd", "avg_pool", "matmul"} <= types


def test_training_step_matches_numpy_fp32():
    """The training step on the halo convolution (the default lowering) matches numpy, on the shipped chip:
    its convolutions are split over more tiles there, so more of their halo rows cross a tile."""
    r = run_model(make_config("resnet-tiny", precision="fp32", conv_lowering="halo"), "ipu-mk2")
    assert r.fits and r.config.get("conv_lowering") == "halo" and "conv" in set(r.profile_data.ops.type)
    checks = r.numeric_checks
    assert "output" in checks and "stem/dconv_w" in checks and "block3/dbn3_gamma" in checks and len(checks) > 100
    failed = {k: (v["max_abs_err"], v["max_rel_err"]) for k, v in checks.items() if not v["passed"]}
    assert not failed
    assert max(v["max_abs_err"] for v in checks.values()) < 1e-3


def test_fp16_step_is_as_accurate_as_the_fp16_reference():
    """fp16 batch-norm gradients round at every op (both sides); against an fp32 truth the emulator's
    error is of the size of the numpy fp16 reference's own error."""
    cfg = make_config("resnet-tiny", precision="fp16")
    be, built = build_model(cfg, SMALL)
    res = Engine(be.graph, be.program(), mode="full").run(inputs=be.inputs)
    r16, r32 = NumpyBackend("fp16"), NumpyBackend("fp32")
    b16, b32 = build(r16, cfg), build(r32, make_config("resnet-tiny", precision="fp32"))
    em_err, ref_err = [], []
    for k, h in built.results.items():
        if isinstance(h, View) or k.endswith("_new"):
            continue
        truth = np.asarray(b32.results[k], np.float64)
        scale = np.abs(truth).max()
        em_err.append(np.abs(res.outputs[h.name].reshape(truth.shape) - truth).max() / scale)
        ref_err.append(np.abs(np.asarray(b16.results[k], np.float64) - truth).max() / scale)
    assert max(em_err) < 1.5 * max(ref_err) and np.median(em_err) < 1.5 * np.median(ref_err)
    assert np.median(em_err) < 0.1


# the recomputed ResNet-tiny step on 8 replicas: the recompute test's run and the composition test's cold run
_RECOMPUTED = dict(batch=2, recompute=True, replicas=8, ipus=8, grad_accum=5)


def test_recompute_keeps_block_inputs_only():
    """(On 8 replicas: a replica's graph, its liveness and its programs are the one replica's; the recomputed run
    is the composition test's cold run, emulated once a session.)"""
    a = run_model(make_config("resnet-tiny", **(_RECOMPUTED | dict(recompute=False))), SMALL, timing_only=True)
    b = shared_run(make_config("resnet-tiny", **_RECOMPUTED), SMALL, timing_only=True)
    assert a.fits and b.fits
    # the peak is the stem's im2col (3 channels -> 147 per window) in both; over the step, only the
    # block inputs stay live between the forward and the backward pass (without recomputation the blocks
    # keep their activations - a convolution's input, not its windows)
    la, lb = a.profile_data.liveness_steps.total_bytes, b.profile_data.liveness_steps.total_bytes
    assert lb.mean() < la.mean() / 2
    names = list(b.profile_data.ops.name)
    # the blocks' recomputation re-runs their forward programs (the same code); the stem's is rebuilt
    progs = set(b.profile_data.programs.name)
    assert "block_fwd/0/replay" in progs and "block_fwd/0/replay" not in set(a.profile_data.programs.name)
    assert any(n.startswith("stem/recompute/") for n in names)
    assert b.total_cycles > a.total_cycles


def test_conv_backward_paths_match_numpy():
    """Stride-1 3x3 dx (flipped-kernel path) and strided dx (col2im path) against the reference."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2 * 6 * 6, 3)).astype(np.float32)
    w = rng.standard_normal((9 * 3, 4)).astype(np.float32)
    res = {}
    for stride in (1, 2):
        for be in (NumpyBackend("fp32"), None):
            if be is None:
                be = EmulatorBackend(Target.from_device("ipu-mk2"), "fp32")  # a fresh graph to add ops to
            xi, wi = be.input("x", x), be.input("w", w)
            y, cache, og = RN.conv(be, xi, wi, RN._Geom(2, 6, 6), 3, stride, "c")
            dy = be.input("dy", np.ones((og.rows, 4), np.float32))
            dx, dw = RN.conv_bwd(be, cache, wi, dy, "c")
            if isinstance(be, NumpyBackend):
                res[stride] = (y, dx, dw)
            else:
                run = Engine(be.graph, be.program(), mode="full").run(inputs=be.inputs)
                for got, want in zip((y, dx, dw), res[stride], strict=True):
                    np.testing.assert_allclose(run.outputs[got.name].reshape(np.shape(want)), want, rtol=1e-4,
                                               atol=1e-4)
    # dx of a conv = gradient of sum(y * dy): check the reference itself by finite differences on one element
    idx, _ = RN._Geom(2, 6, 6).windows(3, 2, 1)
    cols = x.astype(np.float64).reshape(-1, 3)[np.maximum(idx, 0)] * (idx >= 0)[..., None]
    f = lambda xx: ((xx.reshape(-1, 3)[np.maximum(idx, 0)] * (idx >= 0)[..., None]).reshape(len(idx), -1) @ w).sum()  # noqa: E731
    e = np.zeros_like(x, dtype=np.float64)
    e[7, 1] = 1e-3
    num = (f(x + e) - f(x - e)) / 2e-3
    assert np.asarray(res[2][1])[7, 1] == pytest.approx(num, rel=1e-3)
    assert cols.shape == (len(idx), 9, 3)


def test_blocks_spread_over_the_stages_of_one_replica():
    from types import SimpleNamespace

    assert RN.pipeline_stages(SimpleNamespace(ipus=4)) == 4
    # contract fields (scale helper): 16 replicas x 1 stage -> the blocks stay on one IPU
    assert RN.pipeline_stages(SimpleNamespace(ipus=16, replicas=16, pipeline_stages=1)) == 1
    assert RN.pipeline_stages(SimpleNamespace(ipus=16, replicas=4, pipeline_stages=0)) == 4
    r = run_model(make_config("resnet-tiny", batch=2, ipus=2), SMALL, timing_only=True)
    ops = r.profile_data.ops
    assert {0, 1} <= set(ops.ipu) and (ops[ops.name.str.startswith("fc/")].ipu == 1).all()


def test_timing_runs_outline_identical_blocks(resnet50_deep):
    """A timing-only ResNet-50 builds one program per block kind and calls it once per block: the same
    cycles and the same parameters and weight memory as building every block, code stored once.  (Outlining
    alone: norms built per block in both builds; with graph functions see the test below.)  The session's
    ``resnet50_deep`` builds without graph functions, recomputed, in a step of 2 micro-batches under momentum, on
    the tests' device (decision 0475: the two builds' cycles are 5.2e-5 apart there)."""
    from popvision_lite.profile import schema

    full, out = (resnet50_deep(o, True, graph_functions=False, composed=True) for o in (False, True))
    assert out.config["grad_accum"] == 2 and out.config["optimizer"] == "momentum"  # a training state to compare
    # not bit-equal: in the full build each block's ops start on tiles rotated past the previous op's, and an
    # exchange's cycles depend on which of its tiles share an exchange bus (a few cycles on ~10 copies)
    assert abs(out.total_cycles - full.total_cycles) <= 3e-4 * full.total_cycles
    params = [t["params"] for t in full.profile_data.run["training_state"]]
    assert params == [t["params"] for t in out.profile_data.run["training_state"]]
    var, xc = schema.CATEGORY_CODE["variable"], schema.CATEGORY_CODE["internalExchangeCode"]
    mf, mo = full.profile_data.memory, out.profile_data.memory
    assert mo[:, var, 0].sum() == mf[:, var, 0].sum()  # every block's weights (and training state)
    assert mo[:, xc, 0].sum() < 0.7 * mf[:, xc, 0].sum()  # 8 distinct blocks of 16 hold exchange code
    assert out.num_ops < full.num_ops


@pytest.fixture
def outlined_small(resnet50_deep):
    """``{outline: run}``: a timing-only ResNet-50-deep step (hidden 4, image 32, batch 4, recomputed) on the
    tests' device, built with every block (False) and with identical blocks outlined (True), as ``emulate``
    builds it (batch norms as graph functions): the session's ``resnet50_deep`` (tests/conftest.py)."""
    return lambda outline: resnet50_deep(outline, True)


def test_outlined_blocks_saved_inputs_are_live_from_their_forward_to_their_backward(outlined_small):
    """An outlined block's saved input is placed on the liveness steps between its block's forward and
    backward (not counted at the peak whatever the peak is): the memory table's not-always-live bytes are
    the liveness table's peak per tile, and close to the exact figure of building every block."""
    from popvision_lite.profile import schema

    full, out = outlined_small(False), outlined_small(True)
    var = schema.CATEGORY_CODE["variable"]
    nal = np.asarray(out.profile_data.memory)[:, var, 1]
    ltb = np.asarray(out.profile_data.liveness_tile_bytes)
    np.testing.assert_array_equal(nal, ltb.max(axis=0))  # one definition: the table is the liveness peak
    assert np.array_equal(out.profile_data.liveness_steps.max_tile_bytes.to_numpy(), ltb.max(axis=1))
    exact = np.asarray(full.profile_data.memory)[:, var, 1]
    # the saved copies take the representative's layout, so per tile they differ a little from the exact build
    assert abs(int(nal.sum()) - int(exact.sum())) < 0.05 * exact.sum()


def test_norms_are_graph_functions_per_signature_in_both_builds(resnet50_deep):
    """Every batch norm is a call of one graph function per operand signature (Graphcore's TensorFlow,
    ops/graph_function.py), in the outlined and in the full build: fewer norm bodies than norms, exchange code
    below the build without them, and the outlined build within 1 % of the full one in cycles (the full build's
    blocks lay their convolutions out on other tiles, so their norm calls copy arguments across tiles where the
    outlined build's replayed calls copy on the tile; convolutions are not graph functions here).  On the tests'
    device (the session's ``resnet50_deep``): a norm's call is per op, not per tile."""
    from popvision_lite.profile import schema

    full, out = resnet50_deep(False, True), resnet50_deep(True, True)
    ops = full.profile_data.ops
    norms, calls = (ops.type == "batch_norm").sum(), (ops.type == "call").sum()
    assert 0 < norms < 53 and calls >= 2 * 53  # ResNet-50: 53 batch norms, each forward and backward a call
    out_norms = (out.profile_data.ops.type == "batch_norm").sum()
    assert 0 < out_norms <= norms and (out.profile_data.ops.type == "call").sum() >= 2 * 53
    assert abs(out.total_cycles - full.total_cycles) <= 0.01 * full.total_cycles
    plain = resnet50_deep(True, True, graph_functions=False)  # the outlined build without graph functions
    xc = schema.CATEGORY_CODE["internalExchangeCode"]
    assert (plain.profile_data.memory[:, xc, 0].sum() > out.profile_data.memory[:, xc, 0].sum())
    assert (plain.profile_data.ops.type == "batch_norm").sum() > out_norms  # one per norm kind of block


def test_outlined_backward_call_takes_its_block_values_as_arguments(outlined_small):
    """Blocks 1 and 2 of ResNet-50 are one kind in one recomputation segment: block 2's backward runs the
    kind's program on the representative's cache tensors (holding block 2's recomputed values), block 1's
    backward calls it again.  Those tensors hold block 2's values until their last read in block 2's
    backward and block 1's from the call on (block 1's are held by saved copies until then), as in the exact
    build, where they are other tensors: live in two intervals with a gap, not throughout."""
    pd_ = outlined_small(True).profile_data
    vid = pd_.variables.set_index("name").loc["block1/conv1/matmul#1", "var_id"]
    spans = pd_.variable_intervals
    spans = spans.loc[spans.var_id == vid, ["first_lstep", "last_lstep"]].values.tolist()
    (_, end_block2), (call, _) = spans[-2], spans[-1]
    assert call - end_block2 > 10  # dead over the rest of block 2's backward


def test_runs_that_differ_in_composition_only_reuse_the_replica_graph():
    """A timing run that changes only replicas / accumulation / optimizer reuses the emulated graph of the
    previous run, with the same result as emulating it afresh."""
    from popvision_lite.emulator.models import emulated as E

    kw = dict(batch=2, recompute=True)
    E._GRAPH_CACHE.clear()
    run_model(make_config("resnet-tiny", replicas=2, ipus=2, grad_accum=3, optimizer="lars", **kw), SMALL,
              timing_only=True)
    again = run_model(make_config("resnet-tiny", replicas=8, ipus=8, grad_accum=5, **kw), SMALL, timing_only=True)
    assert again.wall.get("reused") is True
    # another micro-batch is another graph: asked while the graph of the run before (micro-batch 2) is kept
    other = run_model(make_config("resnet-tiny", replicas=8, ipus=8, grad_accum=5, batch=4, recompute=True),
                      SMALL, timing_only=True)
    assert "reused" not in other.wall
    E._GRAPH_CACHE.clear()
    # emulated afresh: no graph kept, or the session's run of this config (test_recompute_keeps_block_inputs_only's,
    # whose run before it was of another graph)
    assert dict(replicas=8, ipus=8, grad_accum=5, **kw) == _RECOMPUTED
    fresh = shared_run(make_config("resnet-tiny", **_RECOMPUTED), SMALL, timing_only=True)
    assert "reused" not in fresh.wall
    assert again.schedule == fresh.schedule and again.samples_per_second == fresh.samples_per_second
    assert (again.profile_data.memory == fresh.profile_data.memory).all()


def test_resnet50_recomputes_the_mlperf_pipeline_stages():
    """The MLPerf submissions' seven stages (pipeline_splits b1/0, b1/2, b2/0, b2/2, b3/0, b3/3 of the
    TensorFlow configs.yml) are ResNet-50's recomputation segments; other depths recompute per block."""
    assert RN.recompute_segments(make_config("resnet50")) == [(0, 0), (1, 2), (3, 3), (4, 5), (6, 7), (8, 10),
                                                               (11, 15)]
    assert RN.recompute_segments(make_config("resnet-tiny")) == [(0, 0), (1, 1), (2, 2), (3, 3)]


def test_multi_block_recompute_segments_match_numpy(monkeypatch):
    """Segments of two blocks (the forward of the whole segment re-run before its last block's backward,
    the stem's with the first) give the reference's gradients and outputs."""
    monkeypatch.setitem(RN.RECOMPUTE_SPLITS, 14, (1,))
    cfg = make_config("resnet-tiny", precision="fp32", recompute=True)
    assert RN.recompute_segments(cfg) == [(0, 1), (2, 3)]
    r = run_model(cfg, SMALL)
    checks = r.numeric_checks
    assert r.fits and "stem/dconv_w" in checks and "block0/dbn1_gamma" in checks and len(checks) > 100
    failed = {k: (v["max_abs_err"], v["max_rel_err"]) for k, v in checks.items() if not v["passed"]}
    assert not failed
    progs = list(r.profile_data.programs.name)
    # segment (2, 3): both forwards re-run, in order, before block 3's backward begins
    i2, i3 = progs.index("block_fwd/2/replay"), progs.index("block_fwd/3/replay")
    assert i2 < i3 < min(i for i, n in enumerate(progs) if n.startswith("block3/bwd"))
