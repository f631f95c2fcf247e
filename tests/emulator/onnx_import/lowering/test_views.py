"""lowering/views.py: reshapes, transposes, slices, gathers, concatenation, padding: index views, no arithmetic."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnxruntime")

from onnx import helper  # noqa: E402

from popvision_lite.emulator.onnx_import.lowering import views  # noqa: E402

from .graphs import lower_and_compare, lowered_by, rand  # noqa: E402


def test_reshape_transpose_slice_concat(tmp_path):
    assert all(lowered_by(t, views) for t in ("Reshape", "Transpose", "Slice", "Concat", "Gather", "Pad"))
    i64 = lambda *v: np.array(v, np.int64)  # noqa: E731
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["r"]),
             helper.make_node("Transpose", ["r"], ["t"], perm=[0, 2, 1]),
             helper.make_node("Slice", ["t", "starts", "ends", "axes"], ["s"]),
             helper.make_node("Concat", ["s", "s"], ["y"], axis=1)]
    out = lower_and_compare(tmp_path, nodes, {"x": rand(2, 12)}, ["y"],
                            {"shape": i64(2, 3, 4), "starts": i64(1), "ends": i64(3), "axes": i64(1)})
    x = rand(2, 12).reshape(2, 3, 4).transpose(0, 2, 1)[:, 1:3]
    np.testing.assert_array_equal(out["y"], np.concatenate([x, x], axis=1))  # a view: exact


def test_gather_rows_of_a_table_and_pad(tmp_path):
    nodes = [helper.make_node("Gather", ["table", "ids"], ["g"], axis=0),
             helper.make_node("Pad", ["g", "pads"], ["y"], mode="constant")]
    lower_and_compare(tmp_path, nodes, {"ids": np.array([[0, 3], [2, 2]], np.int64)}, ["y"],
                      {"table": rand(5, 4), "pads": np.array([0, 0, 1, 0, 0, 2], np.int64)})
