"""lowering/conv.py: convolutions (strides, pads, groups), pooling and batch norm."""

from __future__ import annotations

import pytest

pytest.importorskip("onnxruntime")

from onnx import helper  # noqa: E402

from popvision_lite.emulator.onnx_import.lowering import conv  # noqa: E402

from .graphs import lower_and_compare, lowered_by, rand  # noqa: E402


def test_conv_with_stride_pads_and_bias_then_relu_and_max_pool(tmp_path):
    assert all(lowered_by(t, conv) for t in ("Conv", "MaxPool", "AveragePool", "BatchNormalization"))
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["y"], kernel_shape=[2, 2], strides=[2, 2])]
    out = lower_and_compare(tmp_path, nodes, {"x": rand(1, 3, 8, 8)}, ["y"],
                            {"w": rand(4, 3, 3, 3, seed=1), "b": rand(4, seed=2)}, atol=1e-4)
    assert out["y"].shape == (1, 4, 2, 2)


def test_grouped_conv_batch_norm_and_average_pools(tmp_path):
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[1, 1], group=2),
             helper.make_node("BatchNormalization", ["c", "s", "o", "m", "v"], ["n"], epsilon=1e-5),
             helper.make_node("AveragePool", ["n"], ["a"], kernel_shape=[2, 2], strides=[1, 1]),
             helper.make_node("GlobalAveragePool", ["a"], ["y"])]
    init = {"w": rand(4, 2, 1, 1, seed=1), "s": rand(4, seed=2), "o": rand(4, seed=3), "m": rand(4, seed=4),
            "v": abs(rand(4, seed=5)) + 0.5}
    lower_and_compare(tmp_path, nodes, {"x": rand(2, 4, 5, 5)}, ["y"], init, atol=1e-4)
