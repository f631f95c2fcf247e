"""lowering/tape.py: the backward pass of a training run (loss = mean of the output) and the SGD update."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

pytest.importorskip("onnxruntime")

from onnx import helper  # noqa: E402

from popvision_lite.emulator.onnx_import import OnnxImportError  # noqa: E402
from popvision_lite.emulator.onnx_import.lowering.tape import Tape  # noqa: E402
from popvision_lite.emulator.onnx_import.run import reference_numpy  # noqa: E402

from .graphs import model, rand  # noqa: E402


def _save(tmp_path, nodes, init):
    path = tmp_path / "m.onnx"
    onnx.save(model(nodes, {"x": rand(3, 4)}, ["y"], init), str(path))
    return path


def test_sgd_update_of_a_matmul_weight_is_the_hand_gradient(tmp_path):
    assert hasattr(Tape, "backward")
    w = rand(4, 2, seed=1)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Tanh", ["h"], ["y"])]
    out = reference_numpy(_save(tmp_path, nodes, {"w": w}), precision="fp32", inputs={"x": rand(3, 4)},
                          training=True, lr=0.1)
    x = rand(3, 4)
    dy = np.full((3, 2), 1.0 / 6, np.float32)            # d mean(y) / dy
    dh = dy * (1 - np.tanh(x @ w) ** 2)
    np.testing.assert_allclose(out["weight:w"], w - 0.1 * (x.T @ dh), rtol=0, atol=1e-6)
    np.testing.assert_allclose(out["y"], np.tanh(x @ w), rtol=0, atol=1e-6)


def test_a_loss_output_that_is_not_an_output_is_refused(tmp_path):
    path = _save(tmp_path, [helper.make_node("MatMul", ["x", "w"], ["y"])], {"w": rand(4, 2, seed=1)})
    with pytest.raises(OnnxImportError, match="'nope' is not a graph output"):
        reference_numpy(path, precision="fp32", inputs={"x": rand(3, 4)}, training=True, loss_output="nope")
