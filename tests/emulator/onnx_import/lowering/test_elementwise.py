"""lowering/elementwise.py: unary and binary ops (broadcast operands, a one-element constant as a scalar op)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnxruntime")

from onnx import helper  # noqa: E402

from popvision_lite.emulator.onnx_import import OnnxImportError  # noqa: E402
from popvision_lite.emulator.onnx_import.lowering import elementwise  # noqa: E402

from .graphs import lower_and_compare, lowered_by, rand  # noqa: E402


def test_binary_ops_broadcast_as_onnxruntime(tmp_path):
    assert all(lowered_by(t, elementwise) for t in ("Add", "Mul", "Sub", "Div", "Max"))
    nodes = [helper.make_node("Add", ["x", "b"], ["s"]), helper.make_node("Mul", ["s", "x"], ["m"]),
             helper.make_node("Sub", ["m", "b"], ["d"]), helper.make_node("Max", ["d", "x"], ["y"])]
    out = lower_and_compare(tmp_path, nodes, {"x": rand(2, 3, 4)}, ["y"], {"b": rand(4, seed=1)})
    assert out["y"].shape == (2, 3, 4)


def test_unary_ops_and_a_scalar_constant(tmp_path):
    nodes = [helper.make_node("Tanh", ["x"], ["t"]), helper.make_node("Sigmoid", ["t"], ["s"]),
             helper.make_node("Pow", ["s", "two"], ["p"]), helper.make_node("LeakyRelu", ["p"], ["y"], alpha=0.2)]
    lower_and_compare(tmp_path, nodes, {"x": rand(3, 5)}, ["y"], {"two": np.array(2.0, np.float32)})


def test_where_of_a_comparison_with_a_constant_threshold(tmp_path):
    nodes = [helper.make_node("Greater", ["x", "t"], ["c"]), helper.make_node("Where", ["c", "x", "z"], ["y"])]
    lower_and_compare(tmp_path, nodes, {"x": rand(4, 6), "z": rand(4, 6, seed=2)}, ["y"],
                      {"t": np.array(0.1, np.float32)})


def test_a_comparison_of_two_device_tensors_is_refused_by_name(tmp_path):
    nodes = [helper.make_node("Greater", ["x", "z"], ["c"], name="cmp"), helper.make_node("Where", ["c", "x", "z"], ["y"])]
    with pytest.raises(OnnxImportError, match="node 'cmp': Greater of two device tensors is not supported"):
        lower_and_compare(tmp_path, nodes, {"x": rand(4, 6), "z": rand(4, 6, seed=2)}, ["y"])
