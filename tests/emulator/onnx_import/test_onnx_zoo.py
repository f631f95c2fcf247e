"""The ONNX model zoo (tests/data/onnx_zoo, built by its make_zoo.py from transformers / torchvision configs with
both torch exporters): models import, fit (on the tests' device with 92 tiles, decision 0395: a sixteenth of
the shipped chip), and match ONNX Runtime - in the suite, the cases that together run every op signature the zoo
holds (FP32_CASES); every model and exporter in ``python -m bench.onnx_zoo`` (the same bar, docs/performance.md);
new ops and attributes on small models built with onnx.helper; bad dims and config paths."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from popvision_lite.cli import main  # noqa: E402
from popvision_lite.emulator.onnx_import import OnnxImportError, builders, emulate_onnx  # noqa: E402
from popvision_lite.emulator.onnx_import.run import REL_TOL, judge  # noqa: E402
from tests.support.devices import ID as SMALL  # noqa: E402  (the shipped Mk2 cut to 92 tiles, decision 0395)

ZOO = Path(__file__).resolve().parents[2] / "data" / "onnx_zoo"
MANIFEST = json.loads((ZOO / "manifest.json").read_text())
CASES = [(m, e) for m in sorted(MANIFEST["models"]) for e in ("classic", "dynamo")]
# the models the zoo must hold (each with both exporters)
EXPECTED = {"bert_sdpa", "bert_eager", "minilm_sdpa", "minilm_eager", "distilbert_sdpa", "distilbert_eager", "gpt2",
            "t5", "llama", "vit", "convnext", "whisper_encoder", "resnet50", "mobilenet_v2", "mobilenet_v3",
            "efficientnet_b0", "unet", "wav2vec2"}


# The suite's fp32 cases: together they hold every op signature of the zoo (_signature: the op type; for convs and
# pools their rank, grouping, stride and dilation; the attributes that pick another lowering), both exporters
# among them.  Each other model and exporter repeats signatures these run; bench.onnx_zoo runs all 36 to the same
# bar (fits on the tests' device, fp32 error under 1e-5 of the output's max, ONNX Runtime's committed output).
# The cheapest such set (an exact weighted set cover over the 36 files' signatures, each case weighted by its
# measured CPU: 12 cases, ~7 % less than the greedy cover's 13; docs/performance.md, twelfth pass).
FP32_CASES = [("gpt2", "classic"), ("gpt2", "dynamo"), ("llama", "classic"), ("t5", "classic"), ("llama", "dynamo"),
              ("unet", "dynamo"), ("whisper_encoder", "dynamo"), ("minilm_eager", "dynamo"), ("wav2vec2", "classic"),
              ("resnet50", "classic"), ("convnext", "dynamo"), ("mobilenet_v3", "dynamo")]
_LOWERING_ATTRS = {"mode", "coordinate_transformation_mode", "approximate", "keepdims", "transA", "transB", "to",
                   "upper", "ceil_mode", "reverse", "exclusive"}


def _signature(node) -> str:
    """An op as the importer tells its lowerings apart: its type; for a conv or pool its rank and whether it is
    grouped, strided or dilated; the attributes that choose another lowering (a Resize's mode, a Cast's type)."""
    at = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    parts = [node.op_type]
    if node.op_type in ("Conv", "ConvTranspose", "MaxPool", "AveragePool"):
        parts.append(f"{len(at.get('kernel_shape', ()))}d")
        parts += [w for w, key, v in (("grouped", "group", [at.get("group", 1)]), ("strided", "strides", None),
                                      ("dilated", "dilations", None)) if any(x > 1 for x in (v or at.get(key, ())))]
    parts += [f"{k}={at[k].decode() if isinstance(at[k], bytes) else at[k]}" for k in sorted(_LOWERING_ATTRS & at.keys())]
    return " ".join(parts)


def _signatures(name, exporter) -> set[str]:
    return {_signature(n) for n in onnx.load(str(ZOO / f"{name}.{exporter}.onnx")).graph.node}


def _data(name, exporter):
    with np.load(ZOO / f"{name}.{exporter}.npz") as z:
        pick = lambda p: {k[len(p):]: z[k] for k in z.files if k.startswith(p)}  # noqa: E731
        return pick("in:"), pick("ref:"), pick("ref16:")


# The runs the last-use test (test_freeing_tensors_after_their_last_use_changes_no_result) compares with a run that
# keeps every tensor: each is also a run of the fp32, fp16 or training test, which emulates it once for both.
FREEING_CASES = [("gpt2", "dynamo", "fp32", False), ("bert_sdpa", "classic", "fp16", False),
                 ("bert_sdpa", "classic", "fp32", True)]


def _zoo_emulation(name, exporter, precision, training=False):
    """A zoo file on its committed inputs on the tests' device (in fp16 with ONNX Runtime's fp16 run beside it):
    (the run, the count of tensors the engine released after their last use)."""
    from popvision_lite.emulator.engine import Engine

    ins, _, ref16 = _data(name, exporter)
    released = []
    outputs = Engine.outputs

    def spy(self, data, hosts):
        released.append(len(data.released))
        return outputs(self, data, hosts)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Engine, "outputs", spy)
        run = emulate_onnx(ZOO / f"{name}.{exporter}.onnx", inputs=ins, precision=precision, training=training,
                           reference_fp16=ref16 if precision == "fp16" else None, device=SMALL)
    (count,) = released
    return run, count


@pytest.fixture(scope="module")
def zoo_run():
    """``zoo_run(name, exporter, precision, training=False)``: :func:`_zoo_emulation`, run once per module for a
    case of FREEING_CASES (two tests read it) and afresh for any other."""
    kept = {}

    def run(name, exporter, precision, training=False):
        key = (name, exporter, precision, training)
        if key not in FREEING_CASES:
            return _zoo_emulation(*key)
        if key not in kept:
            kept[key] = _zoo_emulation(*key)
        return kept[key]
    return run


def test_zoo_holds_every_model_with_both_exporters_and_stays_small():
    assert set(MANIFEST["models"]) == EXPECTED
    total = 0
    for name, exporter in CASES:
        entry = MANIFEST["models"][name][exporter]
        path = ZOO / entry["file"]
        assert path.stat().st_size == entry["bytes"], path  # the files are the ones the manifest describes
        total += path.stat().st_size + (ZOO / f"{name}.{exporter}.npz").stat().st_size
        assert entry["opset"] == (17 if exporter == "classic" else entry["opset"]) and entry["opset"] >= 17
    assert total < 15e6
    assert MANIFEST["versions"]["torch"].startswith("2.13")


def test_the_suites_fp32_cases_run_every_op_signature_of_the_zoo():
    """A model added to the zoo with an op (or a conv of a kind) no suite case runs fails here until a case that
    runs it joins FP32_CASES; both exporters stay represented."""
    held = {sig: (name, exporter) for name, exporter in CASES for sig in _signatures(name, exporter)}
    run = set().union(*(_signatures(*c) for c in FP32_CASES))
    assert {sig: case for sig, case in held.items() if sig not in run} == {}
    assert {e for _, e in FP32_CASES} == {"classic", "dynamo"} and set(FP32_CASES) <= set(CASES)
    assert {"Conv 2d grouped strided", "Conv 1d grouped", "HardSwish", "Resize coordinate_transformation_mode="
            "half_pixel mode=linear"} <= run  # the signature tells these apart


@pytest.mark.parametrize("name,exporter", FP32_CASES)
def test_zoo_model_imports_fits_and_matches_onnxruntime_fp32(zoo_run, name, exporter):
    _, ref, _ = _data(name, exporter)
    run, _ = zoo_run(name, exporter, "fp32")
    assert run.fits is True and run.total_cycles > 0
    (out,) = ref
    c = run.numeric_checks[out]
    assert c["passed"] and c["outside_share"] == 0.0, c
    # fp32 rounding, not a lowering mistake (a wrong epsilon or axis is 1e-3 .. 1 of the output's max)
    assert c["max_rel_err"] < 1e-5, c
    # the committed reference is ONNX Runtime's output on the committed inputs
    np.testing.assert_allclose(run.reference[out], ref[out], rtol=1e-5, atol=1e-6 * np.abs(ref[out]).max())


@pytest.mark.parametrize("name", ["bert_sdpa", "llama", "resnet50", "mobilenet_v3", "whisper_encoder"])
def test_zoo_fp16_within_tolerance_and_compared_with_onnxruntime_fp16(zoo_run, name):
    _, ref, ref16 = _data(name, "classic")
    run, _ = zoo_run(name, "classic", "fp16")
    (out,) = ref
    c = run.numeric_checks[out]
    assert c["passed"] and c["atol"] == pytest.approx(REL_TOL["fp16"] * np.abs(ref[out]).max(), rel=1e-6)
    rms16 = float(np.sqrt(np.mean((ref16[out].astype(np.float64) - ref[out]) ** 2)))
    assert c["reference_fp16_rms_err"] == pytest.approx(rms16, rel=1e-3)  # vs this run's own ORT fp32 output
    assert c["rms_err_vs_reference_fp16"] == pytest.approx(c["rms_err"] / rms16, rel=1e-3)
    # fp16 errors, not fp32 ones (the run does compute in fp16)
    assert c["max_rel_err"] > 1e-4


def _assert_trains_as_the_reference(run):
    weights = {k: v for k, v in run.numeric_checks.items() if k.startswith("weight:")}
    assert run.fits and len(weights) >= 10
    assert all(v["passed"] for v in run.numeric_checks.values()), \
        [k for k, v in run.numeric_checks.items() if not v["passed"]]


@pytest.mark.parametrize("name,exporter", [("bert_sdpa", "classic"), ("llama", "dynamo"),
                                           ("whisper_encoder", "dynamo"), ("unet", "dynamo"), ("wav2vec2", "classic")])
def test_zoo_training_step_updates_weights_as_the_reference(zoo_run, name, exporter):
    _assert_trains_as_the_reference(zoo_run(name, exporter, "fp32", training=True)[0])


def _mobilenet_v3_block(path):
    """MobileNetV3's inverted residual block with squeeze-excite, as torchvision exports it: 1x1 expansion,
    HardSwish, a depthwise (grouped) strided 3x3 conv, HardSwish, squeeze-excite (global average pool, 1x1 conv,
    ReLU, 1x1 conv, HardSigmoid, scale), 1x1 projection; then pool, flatten and a transB Gemm head."""
    rng = np.random.default_rng(3)
    w = lambda n, *s: numpy_helper.from_array((rng.standard_normal(s) / np.sqrt(np.prod(s[1:]))).astype(np.float32), n)  # noqa: E731
    b = lambda n, k: numpy_helper.from_array((0.1 * rng.standard_normal(k)).astype(np.float32), n)  # noqa: E731
    inits = [w("w_exp", 32, 8, 1, 1), b("b_exp", 32), w("w_dw", 32, 1, 3, 3), b("b_dw", 32), w("w_se1", 8, 32, 1, 1),
             b("b_se1", 8), w("w_se2", 32, 8, 1, 1), b("b_se2", 32), w("w_prj", 16, 32, 1, 1), b("b_prj", 16),
             w("w_fc", 10, 16), b("b_fc", 10)]
    n = helper.make_node
    nodes = [n("Conv", ["x", "w_exp", "b_exp"], ["e"], name="blk/expand", kernel_shape=[1, 1]),
             n("HardSwish", ["e"], ["ea"], name="blk/hswish1"),
             n("Conv", ["ea", "w_dw", "b_dw"], ["d"], name="blk/dw", group=32, kernel_shape=[3, 3], pads=[1] * 4,
               strides=[2, 2]),
             n("HardSwish", ["d"], ["da"], name="blk/hswish2"),
             n("GlobalAveragePool", ["da"], ["s0"], name="blk/se/pool"),
             n("Conv", ["s0", "w_se1", "b_se1"], ["s1"], name="blk/se/fc1", kernel_shape=[1, 1]),
             n("Relu", ["s1"], ["s1a"], name="blk/se/relu"),
             n("Conv", ["s1a", "w_se2", "b_se2"], ["s2"], name="blk/se/fc2", kernel_shape=[1, 1]),
             n("HardSigmoid", ["s2"], ["s3"], name="blk/se/hsig", alpha=1 / 6, beta=0.5),
             n("Mul", ["da", "s3"], ["m"], name="blk/se/scale"),
             n("Conv", ["m", "w_prj", "b_prj"], ["p"], name="blk/project", kernel_shape=[1, 1]),
             n("GlobalAveragePool", ["p"], ["g"], name="head/pool"),
             n("Flatten", ["g"], ["f"], name="head/flatten", axis=1),
             n("Gemm", ["f", "w_fc", "b_fc"], ["y"], name="head/fc", transB=1)]
    return _save(path, nodes, [_vi("x", [2, 8, 16, 16])], [_vi("y", [2, 10])], inits, name="mbv3_block.onnx")


def test_mobilenet_v3_block_training_step_updates_weights_as_the_reference(tmp_path):
    """The training step of MobileNetV3's block (its ops' backward passes: HardSwish, HardSigmoid, the depthwise
    conv's weight gradient and its slot layout) at a size whose tensors spread over many of the 92 tiles; the
    zoo's whole mobilenet_v3 trains the same ops (python -m bench.onnx_zoo, at 6x the CPU)."""
    run = emulate_onnx(_mobilenet_v3_block(tmp_path), precision="fp32", training=True, device=SMALL)
    _assert_trains_as_the_reference(run)
    assert {"hard_swish_bwd", "hard_sigmoid_bwd", "im2col", "avg_pool"} <= set(run.profile_data.ops["type"])
    assert "weight:w_dw/slots" in run.numeric_checks  # the depthwise conv's weights, in their grouped layout


def test_judge_scales_with_the_output_and_reports_the_share_outside():
    want = np.array([100.0, 1e-3, -50.0, 0.0])
    got = want + np.array([0.05, 0.05, 0.0, 0.0])  # 5e-4 of the max: fine for fp32 here, not for an elementwise rtol
    c = judge("y", got, want, "fp32")
    assert c["passed"] and c["max_abs_err"] == pytest.approx(0.05) and c["max_rel_err"] == pytest.approx(5e-4)
    bad = judge("y", want + np.array([0.0, 0.2, 0.0, 0.0]), want, "fp32")
    assert not bad["passed"] and bad["outside_share"] == 0.25
    assert not judge("y", np.array([np.nan, 0, 0, 0]), want, "fp32")["passed"]


def _save(tmp_path, nodes, inputs, outputs, inits=(), opset=17, name="m.onnx"):
    m = helper.make_model(helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits)),
                          opset_imports=[helper.make_opsetid("", opset)])
    p = tmp_path / name
    onnx.save(m, str(p))
    return p


def _vi(name, shape, t=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, t, shape)


def test_new_device_ops_match_onnxruntime(tmp_path):
    """Einsum (with a weight), Pad (reflect and constant), CumSum, GatherElements and Trilu on device tensors,
    IsNaN feeding a Where, a grouped conv, a dilated conv, a ceil-mode average pool."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((2, 6, 5)).astype(np.float32), "w")
    gw = numpy_helper.from_array(rng.standard_normal((4, 1, 3, 3)).astype(np.float32), "gw")
    dw = numpy_helper.from_array(rng.standard_normal((3, 4, 3, 3)).astype(np.float32), "dw")
    c = lambda n, v, t=np.int64: numpy_helper.from_array(np.asarray(v, t), n)  # noqa: E731
    nodes = [
        helper.make_node("Einsum", ["x", "w"], ["e"], equation="bij,bjk->bik"),
        helper.make_node("Pad", ["e", "pads"], ["p"], mode="reflect"),
        helper.make_node("Pad", ["p", "pads2", "pv"], ["p2"], mode="constant"),
        helper.make_node("CumSum", ["p2", "ax"], ["cs"], reverse=1),
        helper.make_node("GatherElements", ["cs", "gi"], ["ge"], axis=2),
        helper.make_node("Trilu", ["ge"], ["tr"], upper=0),
        helper.make_node("IsNaN", ["tr"], ["nan"]),
        helper.make_node("Where", ["nan", "zero", "tr"], ["y"]),
        helper.make_node("Conv", ["img", "gw"], ["g1"], group=4, pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["g1", "dw"], ["g2"], dilations=[2, 2], pads=[2, 1, 2, 1]),
        helper.make_node("AveragePool", ["g2"], ["z"], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1,
                         count_include_pad=1, pads=[0, 0, 1, 1]),
    ]
    gi = np.array([[[0, 1, 2, 3, 4, 5, 6, 7, 8]] * 3, [[8, 7, 6, 5, 4, 3, 2, 1, 0]] * 3]).repeat(1, 0)
    inits = [w, gw, dw, c("pads", [0, 1, 1, 0, 1, 2]), c("pads2", [0, 0, 0, 0, 1, 1]),
             c("pv", 0.5, np.float32), c("ax", 2), c("gi", gi[:, :3, :]), c("zero", 0.0, np.float32)]
    p = _save(tmp_path, nodes, [_vi("x", [2, 3, 6]), _vi("img", [2, 4, 7, 7])], [_vi("y", [2, 3, 9]), _vi("z", [2, 3, 4, 3])],
              inits)
    run = emulate_onnx(p, precision="fp32")
    assert set(run.numeric_checks) == {"y", "z", "intermediates"}
    # every node output between them too (views included: e, p, p2, cs, ge, tr, g1, g2; the mask nan is not float)
    assert run.numeric_checks["intermediates"]["compared"] == 8
    for k, v in run.numeric_checks.items():
        assert v["passed"] and v["max_rel_err"] < 1e-5, (k, v)
    types = set(run.profile_data.ops["type"])
    assert "concat" in types  # the constant pad's fill value joined to the data


def test_layer_norm_epsilon_is_honoured(tmp_path):
    g = numpy_helper.from_array(np.ones(4, np.float32), "g")
    b = numpy_helper.from_array(np.zeros(4, np.float32), "b")
    p = _save(tmp_path, [helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], epsilon=0.5)],
              [_vi("x", [3, 4])], [_vi("y", [3, 4])], [g, b])
    x = {"x": np.array([[0.1, -0.2, 0.3, 0.05]] * 3, np.float32)}  # variance 0.03: eps 0.5 dominates
    c = emulate_onnx(p, precision="fp32", inputs=x).numeric_checks["y"]
    assert c["passed"] and c["max_rel_err"] < 1e-6, c


@pytest.mark.parametrize("node,needle", [
    (helper.make_node("LayerNormalization", ["x", "g"], ["y"], stash_type=0), "stash_type 0 cannot be honoured"),
    (helper.make_node("IsInf", ["x"], ["y"], detect_negative=0), "detect_negative 0"),
])
def test_attribute_the_library_cannot_honour_is_refused_by_name(tmp_path, node, needle):
    p = _save(tmp_path, [node], [_vi("x", [2, 4])], [_vi("y", [2, 4], TensorProto.BOOL if node.op_type == "IsInf"
                                                         else TensorProto.FLOAT)],
              [numpy_helper.from_array(np.ones(4, np.float32), "g")])
    with pytest.raises(OnnxImportError, match=needle):
        emulate_onnx(p, precision="fp32")


def test_any_op_with_known_inputs_is_folded(tmp_path):
    # Sin and Hardmax have no device lowering; on constants they are evaluated when the graph is built
    nodes = [helper.make_node("Sin", ["k"], ["s"]), helper.make_node("Hardmax", ["s"], ["h"]),
             helper.make_node("Add", ["x", "h"], ["y"])]
    k = numpy_helper.from_array(np.linspace(0, 3, 8, dtype=np.float32).reshape(2, 4), "k")
    p = _save(tmp_path, nodes, [_vi("x", [2, 4])], [_vi("y", [2, 4])], [k])
    run = emulate_onnx(p, precision="fp32")
    assert run.numeric_checks["y"]["passed"] and run.num_ops >= 1


def test_huge_dim_exits_2_before_allocating(tmp_path, capsys):
    p = ZOO / "bert_eager.classic.onnx"
    out = tmp_path / "r.pvl"
    rc = main(["emulate", "--onnx", str(p), "--dim", "batch=1000000000000", "--dim", "sequence=8", "-o", str(out)])
    err = capsys.readouterr().err
    assert rc == 2 and "--dim" in err and "batch=1000000000000 is outside 1 .. 65536" in err and not out.exists()
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'onnx = "{p}"\noutput = "{out}"\n[dims]\nbatch = 2\nsequence = 100000000\n')
    assert main(["emulate", "--config", str(cfg)]) == 2
    assert "sequence=100000000 is outside 1 .. 65536" in capsys.readouterr().err and not out.exists()


def test_relative_onnx_path_in_a_config_is_read_beside_the_config(tmp_path, monkeypatch, capsys):
    d = tmp_path / "project"
    d.mkdir()
    onnx.save(builders.mlp(), str(d / "model.onnx"))  # any model: what is read, and from where, is the claim
    cfg = d / "run.toml"
    cfg.write_text('onnx = "model.onnx"\ntiming_only = true\nbatch = 1\n')
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert main(["emulate", "--config", str(cfg), "-o", "r.pvl", "--quiet"]) == 0, capsys.readouterr().err
    assert (elsewhere / "r.pvl").exists()


def test_no_throughput_is_printed_for_a_run_that_does_not_fit():
    from types import SimpleNamespace

    from popvision_lite.cli.emulate_onnx import onnx_end_of_run_text
    from popvision_lite.profile.run_record import Schedule

    s = {"fits": False, "peak_bytes": 900_000, "capacity": 638_976, "peak_tile": 3, "total_cycles": 1000,
         "seconds": 1e-6, "clock_hz": 1.33e9}
    run = SimpleNamespace(path="m.onnx", num_ops=5, dims={"batch": 8}, casts=[], numeric_checks={}, schedule=Schedule(),
                          samples_per_second=123456.0, config={"precision": "fp32", "ipus": 1, "training": True,
                                                               "optimizer": "adam", "optimizer_state": "onchip"})
    text = onnx_end_of_run_text(s, run, "r.pvl", "time split of one step (...)")
    assert "samples/s" not in text and "123,456" not in text
    line = next(x for x in text.splitlines() if x.startswith("throughput:"))
    for needle in ("does not fit", "1.41x its capacity", "smaller --batch", "--ipus 2", "--optimizer-state offchip",
                   "--recompute", "--grad-accum", "--precision fp16"):
        assert needle in line, line
    s["fits"] = True
    assert "throughput: 123,456.0 samples/s" in onnx_end_of_run_text(s, run, "r.pvl", "time split of one step (...)")


def test_recompute_reruns_each_layer_and_keeps_fewer_activations():
    from popvision_lite.emulator.onnx_import.lowering import find_blocks
    from popvision_lite.profile.schema import CATEGORY_CODE

    m = onnx.load(str(ZOO / "gpt2.classic.onnx"))
    assert len(find_blocks(m.graph.node)) == 2  # GPT-2's two transformer blocks, from the node names
    # torch.export's generic node names: from the deepest name scope that names a layer ('m.transformer.h.0')
    assert len(find_blocks(onnx.load(str(ZOO / "gpt2.dynamo.onnx")).graph.node)) == 2
    # activations large enough to matter: batch 2, sequence 32 (recomputation keeps ~78 % of the variable bytes on
    # the tests' device; 64 % at batch 8 x sequence 64, 99 % at the zoo's 2 x 8).  Both runs in full numerics (the
    # two memories are of one mode), the recomputing one checked: it updates the weights as the reference does
    runs = {rc: emulate_onnx(ZOO / "gpt2.classic.onnx", batch=2, seq=32, precision="fp32", training=True,
                             recompute=rc, reference=rc, device=SMALL) for rc in (False, True)}
    run = runs[True]
    assert len(run.numeric_checks) > 10 and all(c["passed"] for c in run.numeric_checks.values())  # same update
    assert any("recompute/" in n for n in runs[True].profile_data.ops["name"])
    assert not any("recompute/" in n for n in runs[False].profile_data.ops["name"])
    assert runs[True].total_cycles > runs[False].total_cycles
    var = {rc: np.asarray(r.profile_data.memory)[:, CATEGORY_CODE["variable"], 1].sum() for rc, r in runs.items()}
    assert var[True] < 0.9 * var[False]  # the layers' forward activations are not live through the backward pass
    with pytest.raises(OnnxImportError, match="recompute: only with training"):
        emulate_onnx(ZOO / "gpt2.classic.onnx", inputs=_data("gpt2", "classic")[0], recompute=True, timing_only=True)


@pytest.mark.parametrize("name,exporter,precision,training", FREEING_CASES)
def test_freeing_tensors_after_their_last_use_changes_no_result(zoo_run, name, exporter, precision, training,
                                                                monkeypatch):
    """emulate_onnx frees every tensor but the outputs and the compared intermediates after its last use (issue 47:
    peak memory): outputs, numeric checks, cycles and bytes are bit for bit those of a run that keeps them all.
    The freed run is the fp32, fp16 or training test's own (fp32 and fp16 inference, a training step)."""
    from popvision_lite.emulator.engine import Engine

    freed, released = zoo_run(name, exporter, precision, training)
    run = Engine.run
    monkeypatch.setattr(Engine, "run", lambda self, *a, keep=None, **k: run(self, *a, **k))
    kept, kept_released = _zoo_emulation(name, exporter, precision, training)
    assert released > 0 and kept_released == 0
    assert freed.outputs.keys() == kept.outputs.keys()
    for k in kept.outputs:
        np.testing.assert_array_equal(freed.outputs[k], kept.outputs[k])
    assert freed.numeric_checks == kept.numeric_checks and freed.numeric_checks
    assert freed.total_cycles == kept.total_cycles
    np.testing.assert_array_equal(freed.profile_data.memory, kept.profile_data.memory)
