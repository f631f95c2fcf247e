"""Issue 47: the ops people use - the softplus family of activations, broadcast gradients as reductions, and
training that names what it lacks.  Models built with onnx.helper, checked against ONNX Runtime (fp32) and
their gradients against central finite differences of ONNX Runtime's loss."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from popvision_lite.emulator.onnx_import import emulate_onnx, load  # noqa: E402
from popvision_lite.emulator.onnx_import.run import make_inputs, reference_numpy  # noqa: E402
from tests.emulator.onnx_import.test_onnx_import import _ort_loss  # noqa: E402


def _save(tmp_path, nodes, inputs, outputs, inits=(), name="m.onnx", opset=17):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    p = tmp_path / name
    onnx.save(m, str(p))
    return p


def _f(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


ACTIVATIONS = [("Softplus", {}), ("Softsign", {}), ("Mish", {}), ("Elu", {"alpha": 0.7}), ("Selu", {}),
               ("Celu", {"alpha": 1.5}), ("ThresholdedRelu", {"alpha": 0.3}), ("Log", {}), ("PRelu", {})]


def _act_model(tmp_path, op, at):
    """y = act(x W1) W2 (Log of a softplus-shifted input; PRelu with a per-feature slope weight)."""
    rng = np.random.default_rng(4)
    inits = [numpy_helper.from_array(rng.standard_normal((6, 8)).astype(np.float32), "W1"),
             numpy_helper.from_array(rng.standard_normal((8, 3)).astype(np.float32), "W2")]
    nodes = [helper.make_node("MatMul", ["x", "W1"], ["h"], name="fc1")]
    src = "h"
    if op == "Log":
        nodes.append(helper.make_node("Softplus", ["h"], ["hp"], name="pos"))
        src = "hp"
    ins = [src]
    if op == "PRelu":
        inits.append(numpy_helper.from_array(rng.uniform(0.05, 0.5, 8).astype(np.float32), "slope"))
        ins.append("slope")
    nodes += [helper.make_node(op, ins, ["a"], name="act", **at),
              helper.make_node("MatMul", ["a", "W2"], ["y"], name="fc2")]
    return _save(tmp_path, nodes, [_f("x", [5, 6])], [_f("y", [5, 3])], inits, name=f"{op}.onnx", opset=18)


@pytest.mark.parametrize("op,at", ACTIVATIONS)
def test_activation_matches_onnxruntime_and_its_gradient_finite_differences(tmp_path, op, at):
    p = _act_model(tmp_path, op, at)
    run = emulate_onnx(p, precision="fp32")
    assert all(c["passed"] for c in run.numeric_checks.values()), run.numeric_checks
    assert run.numeric_checks["y"]["max_rel_err"] < 1e-5
    lm = load(p)
    feeds = make_inputs(lm, 0, "fp32", None)
    upd = reference_numpy(p, precision="fp32", training=True, lr=1.0)
    eps = 1e-3
    for w in ["W1"] + (["slope"] if op == "PRelu" else []):
        w0 = lm.initializers[w].astype(np.float64)
        grad = w0.astype(np.float32) - upd[f"weight:{w}"].reshape(w0.shape)
        for flat in range(0, w0.size, max(1, w0.size // 6)):
            wp, wm = w0.copy(), w0.copy()
            wp.flat[flat] += eps
            wm.flat[flat] -= eps
            fd = (_ort_loss(p, feeds, {w: wp}) - _ort_loss(p, feeds, {w: wm})) / (2 * eps)
            assert abs(grad.flat[flat] - fd) <= 3e-3 * max(1.0, abs(fd)) + 3e-5, (op, w, flat, grad.flat[flat], fd)
    # one op in the profile, named after the node (Selu: the ELU then the scale by gamma)
    t = emulate_onnx(p, timing_only=True)
    kinds = dict(zip(t.profile_data.ops["name"], t.profile_data.ops["type"], strict=True))
    expect = {"Softplus": "softplus", "Softsign": "softsign", "Mish": "mish", "Elu": "elu", "Celu": "celu",
              "ThresholdedRelu": "thresholded_relu", "Log": "log", "Selu": "scale", "PRelu": "add"}[op]
    assert kinds["act"] == expect


def test_a_broadcast_gradient_is_a_reduction_not_a_scatter_matrix(tmp_path):
    """Issue 47: ViT-S/16 at batch 2 was refused ("the gradient of a broadcast of a 75648-element tensor is not
    supported at this size"): the gradient was a dense (n x m) scatter matrix.  Now the reads of each element
    are summed by reduce ops; an Expand of a weight (ViT's CLS token) and a bias broadcast over a large batch."""
    rng = np.random.default_rng(5)
    d, rows = 64, 4096
    inits = [numpy_helper.from_array(rng.standard_normal((1, 1, d)).astype(np.float32), "cls"),
             numpy_helper.from_array(np.array([2, rows, d], np.int64), "shape"),
             numpy_helper.from_array(rng.standard_normal((d, 8)).astype(np.float32), "W")]
    nodes = [helper.make_node("Expand", ["cls", "shape"], ["e"], name="expand_cls"),
             helper.make_node("Add", ["x", "e"], ["s"], name="add"),
             helper.make_node("MatMul", ["s", "W"], ["y"], name="mm")]
    p = _save(tmp_path, nodes, [_f("x", [2, rows, d])], [_f("y", [2, rows, 8])], inits, name="bcast.onnx")
    run = emulate_onnx(p, precision="fp32", training=True)
    assert all(c["passed"] for c in run.numeric_checks.values()), run.numeric_checks
    types = set(run.profile_data.ops["type"])
    assert "reduce" in types
    # the gradient of the (1, 1, 64) token read 8192 times: the mean loss's dy summed, checked by hand
    lm = load(p)
    x = make_inputs(lm, 0, "fp32", None)["x"]
    W = lm.initializers["W"]
    dy = np.full((2, rows, 8), 1.0 / (2 * rows * 8))
    want = lm.initializers["cls"].reshape(d) - 0.01 * (dy @ W.T).sum((0, 1))
    np.testing.assert_allclose(run.outputs["weight:cls"].reshape(d), want, rtol=1e-5, atol=1e-6)
    assert x.shape == (2, rows, d)


def test_a_missing_gradient_names_its_node_and_op(tmp_path):
    rng = np.random.default_rng(6)
    inits = [numpy_helper.from_array(rng.standard_normal((4, 4)).astype(np.float32), "W")]
    nodes = [helper.make_node("MatMul", ["x", "W"], ["h"], name="mm"),
             helper.make_node("Max", ["h", "x"], ["y"], name="block.3/max_of_two")]
    p = _save(tmp_path, nodes, [_f("x", [2, 4])], [_f("y", [2, 4])], inits, name="nobwd.onnx")
    from popvision_lite.emulator.onnx_import import OnnxImportError

    with pytest.raises(OnnxImportError, match=r"node 'block.3/max_of_two': --training: op type 'Max' has no "
                                              r"backward pass yet; training supports: .*\(run without --training\)"):
        emulate_onnx(p, timing_only=True, training=True)


def _rnn_model(tmp_path, op, **at):
    """y = op(x) (all outputs used: Y through a matmul, the final states summed into the loss), random weights,
    biases and initial states; batch 3, sequence 4, input 5, hidden 6."""
    rng = np.random.default_rng(7)
    gates = 4 if op == "LSTM" else 3
    dirs = 2 if at.get("direction") == "bidirectional" else 1
    layout = at.get("layout", 0)
    H, seq, batch = 6, 4, 3
    w = lambda n, s: numpy_helper.from_array((0.5 * rng.standard_normal(s)).astype(np.float32), n)  # noqa: E731
    inits = [w("W", (dirs, gates * H, 5)), w("R", (dirs, gates * H, H)), w("B", (dirs, 2 * gates * H)),
             w("h0", (batch, dirs, H) if layout else (dirs, batch, H)), w("P", (dirs * H, 2))]
    ins = ["x", "W", "R", "B", "", "h0"]
    outs = ["Y", "Y_h"]
    if op == "LSTM":
        inits.append(w("c0", (batch, dirs, H) if layout else (dirs, batch, H)))
        ins.append("c0")
        outs.append("Y_c")
    ydims = [batch, seq, dirs * H] if layout else [seq, batch, dirs * H]
    nodes = [helper.make_node(op, ins, outs, name="rnn", hidden_size=H, **at),
             # Y: (seq, dirs, batch, H) -> (seq, batch, dirs * H) (layout 1: (batch, seq, dirs, H) -> ...)
             helper.make_node("Transpose", ["Y"], ["Yt"], perm=[0, 1, 2, 3] if layout else [0, 2, 1, 3]),
             helper.make_node("Reshape", ["Yt", "ys"], ["Yr"]),
             helper.make_node("MatMul", ["Yr", "P"], ["y"], name="head")]
    inits.append(numpy_helper.from_array(np.array(ydims, np.int64), "ys"))
    xs = [batch, seq, 5] if layout else [seq, batch, 5]
    sdims = [batch, dirs, H] if layout else [dirs, batch, H]
    outputs = [_f("y", ydims[:2] + [2]), _f("Y_h", sdims)] + ([_f("Y_c", sdims)] if op == "LSTM" else [])
    if op == "LSTM":
        nodes[0].output[:] = ["Y", "Y_h", "Y_c"]
    return _save(tmp_path, nodes, [_f("x", xs)], outputs, inits, name=f"{op}_{len(at)}.onnx", opset=17)


@pytest.mark.parametrize("op,at", [
    ("LSTM", {"direction": "bidirectional"}),
    ("LSTM", {"direction": "reverse"}),
    ("GRU", {"linear_before_reset": 1, "direction": "bidirectional"}),
    ("GRU", {"linear_before_reset": 0}),
])
def test_lstm_and_gru_run_as_popnn_does_and_train(tmp_path, op, at):
    """Issue 47: LSTM and GRU were refused.  popnn's structure: the whole sequence's input times W in one matmul,
    then per step a matmul of the hidden state with R and the gates' sigmoid / tanh (lib/popnn/Lstm.cpp, Gru.cpp).
    Every output matches ONNX Runtime (fp32); the gradients of W and R match finite differences."""
    p = _rnn_model(tmp_path, op, **at)
    run = emulate_onnx(p, precision="fp32")
    outs = {"y", "Y_h"} | ({"Y_c"} if op == "LSTM" else set())
    assert outs | {"intermediates"} == set(run.numeric_checks)
    assert all(c["passed"] for c in run.numeric_checks.values()), run.numeric_checks
    assert max(run.numeric_checks[o]["max_rel_err"] for o in outs) < 1e-5
    ops = run.profile_data.ops
    dirs = 2 if at.get("direction") == "bidirectional" else 1
    names = list(ops["name"])
    assert sum(n.endswith("/input_weights") for n in names) == dirs  # one input matmul per direction
    assert sum("/recurrent" in n and n.endswith("recurrent") for n in names) == 4 * dirs  # one per step
    lm = load(p)
    feeds = make_inputs(lm, 0, "fp32", None)
    upd = reference_numpy(p, precision="fp32", training=True, lr=1.0)
    eps = 1e-3
    for w in ("W", "R"):
        w0 = lm.initializers[w].astype(np.float64)
        got = {k: v for k, v in upd.items() if k.startswith(f"weight:{w}/")}
        assert got, sorted(upd)
        for flat in range(0, w0.size, max(1, w0.size // 5)):
            wp, wm = w0.copy(), w0.copy()
            wp.flat[flat] += eps
            wm.flat[flat] -= eps
            fd = (_ort_loss(p, feeds, {w: wp}) - _ort_loss(p, feeds, {w: wm})) / (2 * eps)
            d, row, col = np.unravel_index(flat, w0.shape)
            g = 0.0
            for k, v in got.items():  # the derived weights (per direction, transposed, GRU's R split by rows)
                tag = k[len(f"weight:{w}/"):]
                if not tag.startswith(f"d{d}/"):
                    continue
                r0 = 2 * (w0.shape[1] // 3) if tag.endswith("/h/T") else 0
                rows = v.shape[1]
                if r0 <= row < r0 + rows:
                    g += float(w0[d, row, col] - v[col, row - r0])
            assert abs(g - fd) <= 3e-3 * max(1.0, abs(fd)) + 3e-5, (op, w, (d, row, col), g, fd)


@pytest.fixture(scope="module")
def quantized_models(tmp_path_factory):
    """A conv + matmul model quantized by ONNX Runtime's tool three ways: static QDQ, static QOperator (QLinearConv,
    QLinearMatMul, QLinearAdd), dynamic (DynamicQuantizeLinear, ConvInteger, MatMulInteger)."""
    q = pytest.importorskip("onnxruntime.quantization")
    d = tmp_path_factory.mktemp("quant")
    rng = np.random.default_rng(8)
    inits = [numpy_helper.from_array((0.3 * rng.standard_normal((8, 3, 3, 3))).astype(np.float32), "W1"),
             numpy_helper.from_array((0.1 * rng.standard_normal(8)).astype(np.float32), "b1"),
             numpy_helper.from_array((0.05 * rng.standard_normal((512, 10))).astype(np.float32), "W2"),
             numpy_helper.from_array((0.1 * rng.standard_normal(10)).astype(np.float32), "b2")]
    nodes = [helper.make_node("Conv", ["x", "W1", "b1"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("Flatten", ["r"], ["f"], name="flat"),
             helper.make_node("MatMul", ["f", "W2"], ["m"], name="fc"),
             helper.make_node("Add", ["m", "b2"], ["y"], name="bias")]
    src = _save(d, nodes, [_f("x", [2, 3, 8, 8])], [_f("y", [2, 10])], inits, name="float.onnx")

    class Reader(q.CalibrationDataReader):
        def __init__(self):
            self.it = iter([{"x": rng.standard_normal((2, 3, 8, 8)).astype(np.float32)} for _ in range(8)])

        def get_next(self):
            return next(self.it, None)
    out = {k: d / f"{k}.onnx" for k in ("qdq", "qop", "dynamic")}
    q.quantize_static(str(src), str(out["qdq"]), Reader(), quant_format=q.QuantFormat.QDQ)
    q.quantize_static(str(src), str(out["qop"]), Reader(), quant_format=q.QuantFormat.QOperator)
    q.quantize_dynamic(str(src), str(out["dynamic"]), weight_type=q.QuantType.QInt8)
    return out


@pytest.mark.parametrize("kind,ops", [("qdq", {"QuantizeLinear", "DequantizeLinear"}),
                                      ("qop", {"QLinearConv", "QLinearMatMul", "QLinearAdd"}),
                                      ("dynamic", {"DynamicQuantizeLinear", "ConvInteger", "MatMulInteger"})])
def test_quantized_models_run_in_float_with_dequantized_weights(quantized_models, kind, ops, capsys):
    """Issue 47: QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear were refused.  An IPU runs a quantized
    graph in float with its weights dequantized; the quantize steps on activations as poplibs' casts (round,
    saturate: static QDQ and QOperator match ONNX Runtime's integer arithmetic exactly in fp32); the run says so."""
    from popvision_lite.cli import main

    p = quantized_models[kind]
    assert ops <= {n.op_type for n in onnx.load(str(p)).graph.node}
    for prec in ("fp32", "fp16"):
        run = emulate_onnx(p, precision=prec)
        assert all(c["passed"] for c in run.numeric_checks.values()), run.numeric_checks
        c = run.numeric_checks["y"]
        assert "8-bit quantized model" in c["tolerance"]
        if prec == "fp32" and kind != "dynamic":
            assert c["max_rel_err"] < 1e-5  # the same integers as ONNX Runtime's
    (note,) = [n for n in run.notes if n.startswith("quantized model emulated as an IPU runs it")]
    assert ("activations are not rounded" in note) == (kind == "dynamic")
    assert run.profile_data.run["notes"] == list(run.notes)
    if kind == "qdq":
        assert {"round", "max_scalar", "min_scalar"} <= set(run.profile_data.ops["type"])
    rc = main(["emulate", "--onnx", str(p), "-q", "-o", str(p.with_suffix(f".{kind}.pvl"))])
    assert rc == 0 and "note: quantized model emulated as an IPU runs it" in capsys.readouterr().out


def test_a_threshold_mask_feeds_where(tmp_path):
    """Mamba's torch.export file: softplus with a threshold, ``where(x > t, x, softplus(x))`` on device values
    (Greater against a constant: a 0 / 1 mask, no gradient through it) - and the constant on the left (Less)."""
    rng = np.random.default_rng(9)
    inits = [numpy_helper.from_array((3 * rng.standard_normal((6, 8))).astype(np.float32), "W"),
             numpy_helper.from_array(np.array(2.0, np.float32), "t")]
    nodes = [helper.make_node("MatMul", ["x", "W"], ["h"], name="fc"),
             helper.make_node("Greater", ["h", "t"], ["m"], name="over"),
             helper.make_node("Softplus", ["h"], ["sp"], name="softplus"),
             helper.make_node("Where", ["m", "h", "sp"], ["w"], name="threshold"),
             helper.make_node("Less", ["t", "w"], ["m2"], name="over_left"),
             helper.make_node("Where", ["m2", "sp", "w"], ["y"], name="again")]
    p = _save(tmp_path, nodes, [_f("x", [5, 6])], [_f("y", [5, 8])], inits, name="thr.onnx")
    run = emulate_onnx(p, precision="fp32")
    assert all(c["passed"] for c in run.numeric_checks.values()), run.numeric_checks
    assert run.numeric_checks["y"]["max_rel_err"] < 1e-5
    t = emulate_onnx(p, precision="fp32", training=True)
    assert all(c["passed"] for c in t.numeric_checks.values()), t.numeric_checks
