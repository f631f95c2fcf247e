"""Small ONNX models built with ``onnx.helper`` for tests and bench/ (no download, no torch)."""

from __future__ import annotations

from pathlib import Path


def write_tiny_mlp(path) -> Path:
    """A 2-layer MLP (x[16, 64] -> MatMul, Add, Relu, MatMul -> y[16, 32]), opset 17, seeded weights."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array((0.05 * rng.standard_normal((64, 128))).astype(np.float32), "w1"),
             numpy_helper.from_array(np.zeros(128, np.float32), "b1"),
             numpy_helper.from_array((0.05 * rng.standard_normal((128, 32))).astype(np.float32), "w2")]
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Add", ["h", "b1"], ["hb"]),
             helper.make_node("Relu", ["hb"], ["r"]), helper.make_node("MatMul", ["r", "w2"], ["y"])]
    g = helper.make_graph(nodes, "tiny_mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [16, 64])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [16, 32])], inits)
    path = Path(path)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path
