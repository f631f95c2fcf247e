"""lowering/lowerer.py: the walk over the nodes: an attribute the table does not honour is refused by name,
never ignored; a graph of several families lowers in graph order."""

from __future__ import annotations

import pytest

pytest.importorskip("onnxruntime")

from onnx import helper  # noqa: E402

from popvision_lite.emulator.onnx_import import OnnxImportError  # noqa: E402
from popvision_lite.emulator.onnx_import.lowering.lowerer import Lowerer  # noqa: E402

from .graphs import lower_and_compare, rand  # noqa: E402


def test_an_attribute_the_lowering_does_not_honour_is_refused_by_name(tmp_path):
    assert Lowerer.run
    node = helper.make_node("Softmax", ["x"], ["y"], name="sm", axis=-1, made_up=3)
    with pytest.raises(OnnxImportError, match="made_up"):
        lower_and_compare(tmp_path, [node], {"x": rand(2, 3)}, ["y"])


def test_a_small_graph_of_several_families(tmp_path):
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("Transpose", ["r"], ["t"], perm=[1, 0]), helper.make_node("Softmax", ["t"], ["y"])]
    out = lower_and_compare(tmp_path, nodes, {"x": rand(3, 4)}, ["y"], {"w": rand(4, 5, seed=1)})
    assert out["y"].shape == (5, 3)
