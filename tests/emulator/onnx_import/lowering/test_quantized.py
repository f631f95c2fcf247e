"""lowering/quantized.py: quantize / dequantize and the integer matmul, as ONNX Runtime computes them."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnxruntime")

from onnx import helper  # noqa: E402

from popvision_lite.emulator.onnx_import.lowering import quantized  # noqa: E402

from .graphs import lower_and_compare, lowered_by, rand  # noqa: E402


def test_quantize_then_dequantize_rounds_to_the_scale(tmp_path):
    assert all(lowered_by(t, quantized) for t in ("QuantizeLinear", "DequantizeLinear", "MatMulInteger"))
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"])]
    out = lower_and_compare(tmp_path, nodes, {"x": rand(4, 6)}, ["y"],
                            {"s": np.array(0.05, np.float32), "z": np.array(128, np.uint8)})
    assert np.max(np.abs(out["y"] - np.clip(rand(4, 6), -6.4, 6.35))) <= 0.025 + 1e-6


def test_matmul_integer_of_quantized_activations(tmp_path):
    # integer graph inputs are known when the graph is built (folded): the activations are quantized on the device
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
             helper.make_node("MatMulInteger", ["q", "w", "z", "wz"], ["y"])]
    out = lower_and_compare(tmp_path, nodes, {"x": rand(3, 8)}, ["y"],
                            {"s": np.array(0.05, np.float32), "z": np.array(128, np.uint8),
                             "w": np.random.default_rng(1).integers(-100, 100, (8, 4)).astype(np.int8),
                             "wz": np.array(0, np.int8)}, atol=0, check_dtype=False)
    # the device holds the int32 products as exact integers in float32 (ONNX Runtime: int32)
    assert out["y"].shape == (3, 4) and np.array_equal(out["y"], np.round(out["y"]))
