"""lowering/seeded.py: Dropout is the identity outside training; a random op is drawn once from the run's seed."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

pytest.importorskip("onnxruntime")

from onnx import helper  # noqa: E402

from popvision_lite.emulator.onnx_import.lowering import seeded  # noqa: E402
from popvision_lite.emulator.onnx_import.run import reference_numpy  # noqa: E402

from .graphs import lower_and_compare, lowered_by, model, rand  # noqa: E402


def test_dropout_in_inference_is_the_identity(tmp_path):
    assert lowered_by("Dropout", seeded) and "Dropout" in seeded.SEEDED_OPS
    nodes = [helper.make_node("Dropout", ["x", "ratio"], ["y"])]
    out = lower_and_compare(tmp_path, nodes, {"x": rand(3, 7)}, ["y"], {"ratio": np.array(0.5, np.float32)})
    np.testing.assert_array_equal(out["y"], rand(3, 7))


def test_a_random_op_is_drawn_once_per_node_and_run(tmp_path):
    nodes = [helper.make_node("RandomNormalLike", ["x"], ["r1"]), helper.make_node("RandomNormalLike", ["x"], ["r2"]),
             helper.make_node("Sub", ["r1", "r2"], ["d"]), helper.make_node("Add", ["x", "d"], ["y"])]
    path = tmp_path / "m.onnx"
    onnx.save(model(nodes, {"x": rand(4, 5)}, ["y"]), str(path))
    a = reference_numpy(path, precision="fp32", inputs={"x": rand(4, 5)})["y"]
    b = reference_numpy(path, precision="fp32", inputs={"x": rand(4, 5)})["y"]
    # the same draw on every build of the run (folded: the draws depend on x's shape only); two nodes (two output
    # names) draw differently: r1 - r2 ~ N(0, 2), not zeros
    assert a.shape == (4, 5) and np.array_equal(a, b)
    assert 0.5 < float(np.std(a - rand(4, 5))) < 3.0
