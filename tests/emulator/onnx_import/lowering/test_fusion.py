"""lowering/fusion.py: the decomposed Erf GELU and layer norm exporters emit are fused back into one op each."""

from __future__ import annotations

import math

import numpy as np
import onnx
import pytest

pytest.importorskip("onnxruntime")

from onnx import helper  # noqa: E402

from popvision_lite.emulator.onnx_import.loader import load  # noqa: E402
from popvision_lite.emulator.onnx_import.lowering.fusion import Patterns  # noqa: E402

from .graphs import lower_and_compare, model, rand  # noqa: E402

C = lambda v: np.array(v, np.float32)  # noqa: E731


def _gelu_and_layer_norm():
    nodes = [helper.make_node("Div", ["x", "sqrt2"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
             helper.make_node("Add", ["e", "one"], ["p"]), helper.make_node("Mul", ["x", "p"], ["m"]),
             helper.make_node("Mul", ["m", "half"], ["g"]),
             helper.make_node("ReduceMean", ["g"], ["mu"], axes=[-1]), helper.make_node("Sub", ["g", "mu"], ["c"]),
             helper.make_node("Pow", ["c", "two"], ["sq"]), helper.make_node("ReduceMean", ["sq"], ["var"], axes=[-1]),
             helper.make_node("Add", ["var", "eps"], ["ve"]), helper.make_node("Sqrt", ["ve"], ["sd"]),
             helper.make_node("Div", ["c", "sd"], ["y"])]
    init = {"sqrt2": C(math.sqrt(2)), "one": C(1.0), "half": C(0.5), "two": C(2.0), "eps": C(1e-5)}
    return nodes, init


def test_the_patterns_are_found(tmp_path):
    nodes, init = _gelu_and_layer_norm()
    path = tmp_path / "m.onnx"
    onnx.save(model(nodes, {"x": rand(2, 16)}, ["y"], init, opset=13), str(path))
    p = Patterns(load(path))
    assert sorted(spec[0] for spec in p.fused.values()) == ["gelu", "layer_norm"]
    assert set(p.fused) == {4, 11}  # the patterns' last nodes lower them; the others are skipped
    assert set(p.skip) == {0, 1, 2, 3, 5, 6, 7, 8, 9, 10}


def test_the_fused_ops_compute_what_onnxruntime_computes(tmp_path):
    nodes, init = _gelu_and_layer_norm()
    lower_and_compare(tmp_path, nodes, {"x": rand(2, 16)}, ["y"], init, opset=13, atol=1e-4)
