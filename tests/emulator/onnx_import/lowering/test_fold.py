"""lowering/fold.py: a node of known inputs is evaluated when the graph is built (onnx.reference, else ONNX Runtime)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnxruntime")

from onnx import helper  # noqa: E402

from popvision_lite.emulator.onnx_import.lowering.fold import evaluate_node  # noqa: E402

from .graphs import lower_and_compare, rand  # noqa: E402


def test_evaluate_node_on_known_inputs():
    node = helper.make_node("Range", ["a", "b", "d"], ["y"])
    (y,) = evaluate_node(node, {"a": np.array(1, np.int64), "b": np.array(9, np.int64), "d": np.array(3, np.int64)}, 17)
    np.testing.assert_array_equal(y, [1, 4, 7])
    (z,) = evaluate_node(helper.make_node("Shape", ["x"], ["z"]), {"x": np.zeros((2, 5), np.float32)}, 17,
                         prefer_onnxruntime=True)
    np.testing.assert_array_equal(z, [2, 5])


def test_an_unknown_op_names_both_evaluators():
    with pytest.raises(ValueError, match="onnx.reference.*onnxruntime"):
        evaluate_node(helper.make_node("NoSuchOp", ["x"], ["y"]), {"x": np.zeros(2, np.float32)}, 17)


def test_a_shape_computation_folds_into_the_graph(tmp_path):
    # Shape -> Gather -> Unsqueeze -> Concat -> Reshape: all known when the graph is built, only the Reshape runs
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
             helper.make_node("Unsqueeze", ["n", "zero1"], ["n1"]),
             helper.make_node("Concat", ["n1", "minus1"], ["shape"], axis=0),
             helper.make_node("Reshape", ["x", "shape"], ["y"])]
    out = lower_and_compare(tmp_path, nodes, {"x": rand(3, 2, 4)}, ["y"],
                            {"zero": np.array(0, np.int64), "zero1": np.array([0], np.int64),
                             "minus1": np.array([-1], np.int64)})
    assert out["y"].shape == (3, 8)
