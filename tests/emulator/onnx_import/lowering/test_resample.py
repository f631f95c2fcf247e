"""lowering/resample.py: Resize (nearest, linear) and ConvTranspose."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnxruntime")

from onnx import helper  # noqa: E402

from popvision_lite.emulator.onnx_import.lowering import resample  # noqa: E402

from .graphs import lower_and_compare, lowered_by, rand  # noqa: E402


def test_resize_nearest_and_linear_by_scales(tmp_path):
    assert lowered_by("Resize", resample) and lowered_by("ConvTranspose", resample)
    scales = np.array([1, 1, 2, 2], np.float32)
    nodes = [helper.make_node("Resize", ["x", "", "sc"], ["n"], mode="nearest"),
             helper.make_node("Resize", ["x", "", "sc"], ["l"], mode="linear")]
    out = lower_and_compare(tmp_path, nodes, {"x": rand(1, 2, 3, 4)}, ["n", "l"], {"sc": scales})
    assert out["n"].shape == out["l"].shape == (1, 2, 6, 8)


def test_conv_transpose_with_stride(tmp_path):
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    out = lower_and_compare(tmp_path, [node], {"x": rand(1, 3, 4, 4)}, ["y"], {"w": rand(3, 2, 3, 3, seed=1)},
                            atol=1e-4)
    assert out["y"].shape == (1, 2, 7, 7)
