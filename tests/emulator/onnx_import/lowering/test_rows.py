"""lowering/rows.py: row ops (softmax, the normalisations) and reductions."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnxruntime")

from onnx import helper  # noqa: E402

from popvision_lite.emulator.onnx_import.lowering import rows  # noqa: E402

from .graphs import lower_and_compare, lowered_by, rand  # noqa: E402


def test_softmax_and_layer_norm_over_the_last_axis(tmp_path):
    assert lowered_by("Softmax", rows) and lowered_by("LayerNormalization", rows)
    nodes = [helper.make_node("LayerNormalization", ["x", "g", "b"], ["n"], axis=-1, epsilon=1e-5),
             helper.make_node("Softmax", ["n"], ["y"], axis=-1)]
    out = lower_and_compare(tmp_path, nodes, {"x": rand(2, 3, 16)}, ["y"],
                            {"g": rand(16, seed=1), "b": rand(16, seed=2)})
    np.testing.assert_allclose(out["y"].sum(axis=-1), 1.0, atol=1e-5)


def test_reductions_keep_or_drop_the_axes(tmp_path):
    nodes = [helper.make_node("ReduceMean", ["x"], ["m"], axes=[1], keepdims=1),
             helper.make_node("ReduceSum", ["x", "ax"], ["s"], keepdims=0)]
    out = lower_and_compare(tmp_path, nodes, {"x": rand(3, 4, 5)}, ["m", "s"], {"ax": np.array([2], np.int64)},
                            opset=13)
    assert out["m"].shape == (3, 1, 5) and out["s"].shape == (3, 4)


def test_instance_normalization(tmp_path):
    node = helper.make_node("InstanceNormalization", ["x", "g", "b"], ["y"], epsilon=1e-5)
    lower_and_compare(tmp_path, [node], {"x": rand(2, 4, 3, 3)}, ["y"], {"g": rand(4, seed=1), "b": rand(4, seed=2)})
