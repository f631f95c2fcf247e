"""lowering/matmul.py: MatMul (batched, broadcast), Gemm (transposes, alpha / beta, bias), Einsum, CumSum."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnxruntime")

from onnx import helper  # noqa: E402

from popvision_lite.emulator.onnx_import.lowering import matmul  # noqa: E402

from .graphs import lower_and_compare, lowered_by, rand  # noqa: E402


def test_batched_matmul_against_a_weight(tmp_path):
    assert lowered_by("MatMul", matmul) and lowered_by("Gemm", matmul)
    out = lower_and_compare(tmp_path, [helper.make_node("MatMul", ["x", "w"], ["y"])], {"x": rand(2, 3, 8)}, ["y"],
                            {"w": rand(8, 5, seed=1)})
    assert out["y"].shape == (2, 3, 5) and out["y"].dtype == np.float32


def test_gemm_with_transposes_alpha_beta_and_bias(tmp_path):
    node = helper.make_node("Gemm", ["x", "w", "b"], ["y"], transB=1, alpha=0.5, beta=2.0)
    lower_and_compare(tmp_path, [node], {"x": rand(4, 6)}, ["y"], {"w": rand(3, 6, seed=1), "b": rand(3, seed=2)})


def test_einsum_and_cumsum(tmp_path):
    nodes = [helper.make_node("Einsum", ["x", "z"], ["e"], equation="bij,bjk->bik"),
             helper.make_node("CumSum", ["e", "axis"], ["y"])]
    lower_and_compare(tmp_path, nodes, {"x": rand(2, 3, 4), "z": rand(2, 4, 5, seed=1)}, ["y"],
                      {"axis": np.array(2, np.int64)})
