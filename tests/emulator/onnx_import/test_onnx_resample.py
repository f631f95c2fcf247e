"""ConvTranspose and Resize (U-Net decoders, SegFormer / FPN heads, upsampling layers): small graphs built with
onnx.helper against ONNX Runtime, their training step, and the attributes refused by name."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from popvision_lite.emulator.onnx_import import OnnxImportError, emulate_onnx  # noqa: E402


def _save(tmp_path, nodes, inputs, outputs, inits=(), opset=17):
    m = helper.make_model(helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits)),
                          opset_imports=[helper.make_opsetid("", opset)])
    p = tmp_path / "m.onnx"
    onnx.save(m, str(p))
    return p


def _vi(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _c(name, v, t=np.float32):
    return numpy_helper.from_array(np.asarray(v, t), name)


def _resample_graph(tmp_path):
    """Strided / padded / output-padded, grouped + dilated and 1-D ConvTranspose; linear, nearest (sizes) and
    cubic (align_corners at a non-integer scale) Resize."""
    rng = np.random.default_rng(0)
    w = lambda n, s: _c(n, rng.standard_normal(s))  # noqa: E731
    nodes = [
        helper.make_node("ConvTranspose", ["x", "w1", "b1"], ["t1"], strides=[2, 2], pads=[1, 0, 0, 1],
                         output_padding=[1, 0]),
        helper.make_node("ConvTranspose", ["t1", "w2"], ["t2"], group=3, dilations=[2, 1], strides=[1, 2]),
        helper.make_node("Resize", ["t2", "", "sc"], ["r1"], mode="linear", coordinate_transformation_mode="half_pixel"),
        helper.make_node("Resize", ["r1", "", "", "sz"], ["r2"], mode="nearest",
                         coordinate_transformation_mode="asymmetric", nearest_mode="floor"),
        helper.make_node("Resize", ["x", "", "sc2"], ["r3"], mode="cubic", coordinate_transformation_mode="align_corners"),
        helper.make_node("ConvTranspose", ["s", "w3"], ["t3"], strides=[3], pads=[1, 2]),
    ]
    inits = [w("w1", (4, 3, 3, 3)), w("b1", (3,)), w("w2", (3, 2, 2, 3)), w("w3", (2, 2, 4)),
             _c("sc", [1, 1, 2, 1.5]), _c("sz", [2, 6, 9, 13], np.int64), _c("sc2", [1, 1, 1.5, 2])]
    return _save(tmp_path, nodes, [_vi("x", [2, 4, 5, 6]), _vi("s", [1, 2, 7])],
                 [_vi("r2", [2, 6, 9, 13]), _vi("r3", [2, 4, 7, 12]), _vi("t3", [1, 2, 19])], inits)


def test_conv_transpose_and_resize_match_onnxruntime(tmp_path):
    run = emulate_onnx(_resample_graph(tmp_path), precision="fp32")
    assert set(run.numeric_checks) == {"r2", "r3", "t3", "intermediates"}
    assert run.numeric_checks["intermediates"]["compared"] == 3  # t1, t2, r1
    for k, c in run.numeric_checks.items():
        assert c["passed"] and c["max_rel_err"] < 1e-5, (k, c)
    types = set(run.profile_data.ops["type"])
    # ConvTranspose: im2col + matmul of the spread-out input; linear / cubic Resize: matmuls; nearest: a view
    assert {"im2col", "matmul", "concat"} <= types


def test_conv_transpose_and_resize_train(tmp_path):
    run = emulate_onnx(_resample_graph(tmp_path), precision="fp32", training=True)
    weights = {k for k in run.numeric_checks if k.startswith("weight:")}
    assert {"weight:b1", "weight:w1", "weight:w2", "weight:w3"} <= weights  # in the initializers' layouts
    assert all(c["passed"] for c in run.numeric_checks.values()), run.numeric_checks


def test_nearest_resize_is_a_view_without_arithmetic(tmp_path):
    p = _save(tmp_path, [helper.make_node("Resize", ["x", "", "sc"], ["y"], mode="nearest")],
              [_vi("x", [1, 2, 3, 4])], [_vi("y", [1, 2, 6, 8])], [_c("sc", [1, 1, 2, 2])])
    run = emulate_onnx(p, precision="fp32")
    assert run.numeric_checks["y"]["max_abs_err"] == 0.0
    assert "matmul" not in set(run.profile_data.ops["type"])


@pytest.mark.parametrize("node,needle", [
    (helper.make_node("ConvTranspose", ["x", "w"], ["y"], output_shape=[5, 5]), "output_shape of ConvTranspose"),
    (helper.make_node("ConvTranspose", ["x", "w"], ["y"], auto_pad="SAME_UPPER"), "auto_pad SAME_UPPER"),
    (helper.make_node("Resize", ["x", "roi", "sc"], ["y"], mode="linear",
                      coordinate_transformation_mode="tf_crop_and_resize"), "tf_crop_and_resize"),
])
def test_resample_attributes_it_cannot_honour_are_refused_by_name(tmp_path, node, needle):
    inits = [_c("w", np.ones((2, 2, 3, 3))), _c("roi", [0, 0, 0, 0, 1, 1, 1, 1]), _c("sc", [1, 1, 2, 2])]
    p = _save(tmp_path, [node], [_vi("x", [1, 2, 3, 3])], [_vi("y", [1, 2, 5, 5])], inits)
    with pytest.raises(OnnxImportError, match=needle):
        emulate_onnx(p, precision="fp32", timing_only=True)


@pytest.mark.parametrize("opset", [17, 21])
def test_instance_and_group_norm_match_onnxruntime_and_train(tmp_path, opset):
    """wav2vec2 / HuBERT's feature extractor (GroupNorm with one group per channel: InstanceNormalization in the
    TorchScript export) and GroupNormalization (opset 21)."""
    rng = np.random.default_rng(1)
    nodes = [helper.make_node("InstanceNormalization", ["x", "s", "b"], ["y"], epsilon=1e-3)]
    inits = [_c("s", rng.standard_normal(4)), _c("b", rng.standard_normal(4))]
    outs = [_vi("y", [2, 4, 10])]
    if opset >= 21:
        k = 6
        nodes.append(helper.make_node("GroupNormalization", ["z", "gs", "gb"], ["w"], num_groups=2, epsilon=1e-4))
        inits += [_c("gs", rng.standard_normal(k)), _c("gb", rng.standard_normal(k))]
        outs.append(_vi("w", [2, 6, 3, 5]))
    p = _save(tmp_path, nodes, [_vi("x", [2, 4, 10]), _vi("z", [2, 6, 3, 5])], outs, inits, opset=opset)
    x = {"x": (3 + 2 * rng.standard_normal((2, 4, 10))).astype(np.float32),
         "z": rng.standard_normal((2, 6, 3, 5)).astype(np.float32)}
    run = emulate_onnx(p, precision="fp32", inputs=x)
    assert len(run.numeric_checks) == len(outs)
    for k, c in run.numeric_checks.items():
        assert c["passed"] and c["max_rel_err"] < 1e-5, (k, c)
    t = emulate_onnx(p, precision="fp32", inputs=x, training=True)
    trained = {k for k in t.numeric_checks if k.startswith("weight:")}
    assert {"weight:s", "weight:b"} <= trained
    assert {"weight:gs", "weight:gb"} <= trained or opset < 21
    assert all(c["passed"] for c in t.numeric_checks.values()), t.numeric_checks


def test_conv_transpose_gradients_match_finite_differences_of_onnxruntime(tmp_path):
    """The ConvTranspose weights' update (one group, strided + output-padded; grouped, dilated; 1-D) is lr x the
    gradient of ONNX Runtime's loss (central differences), element by element, in the initializer's layout."""
    import onnxruntime as ort

    from popvision_lite.emulator.onnx_import.run import reference_numpy

    path = _resample_graph(tmp_path)
    rng = np.random.default_rng(2)
    feeds = {"x": rng.standard_normal((2, 4, 5, 6)).astype(np.float32),
             "s": rng.standard_normal((1, 2, 7)).astype(np.float32)}
    upd = reference_numpy(path, precision="fp32", training=True, lr=1.0, inputs=feeds)
    model = onnx.load(str(path))
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}

    def loss(name, w):
        m = onnx.load(str(path))
        for t in m.graph.initializer:
            if t.name == name:
                t.CopyFrom(numpy_helper.from_array(w.astype(np.float32), name))
        sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        return sum(float(np.mean(o, dtype=np.float64)) for o in sess.run(None, feeds))

    eps = 1e-2
    for name in ("w1", "w2", "w3"):
        w0 = inits[name].astype(np.float64)
        grad = w0.astype(np.float32) - upd[f"weight:{name}"]
        assert grad.shape == w0.shape
        for flat in rng.choice(w0.size, size=4, replace=False):
            wp, wm = w0.copy(), w0.copy()
            wp.flat[flat] += eps
            wm.flat[flat] -= eps
            fd = (loss(name, wp) - loss(name, wm)) / (2 * eps)
            assert abs(grad.flat[flat] - fd) <= 2e-3 * max(1.0, abs(fd)) + 2e-5, (name, flat, grad.flat[flat], fd)
