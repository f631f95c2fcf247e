"""lowering/blocks.py: the repeated blocks (layers) of a graph, from node names or torch.export's scope metadata."""

from __future__ import annotations

from onnx import helper

from popvision_lite.emulator.onnx_import.lowering.blocks import block_key, find_blocks


def _node(name, scopes=None):
    n = helper.make_node("Relu", ["x"], ["y"], name=name)
    if scopes:
        p = n.metadata_props.add()
        p.key, p.value = "pkg.torch.onnx.name_scopes", scopes
    return n


def test_block_key_from_names_and_scopes():
    assert block_key(_node("/encoder/layer.3/attention/MatMul")) == "encoder/layer.3"
    assert block_key(_node("/model/blocks.0/mlp/fc1/Gemm")) == "model/blocks.0"
    assert block_key(_node("/head/Gemm")) is None
    assert block_key(_node("linear_3", "['', 'm', 'm.layers', 'm.layers.1', 'm.layers.1.mlp', 'linear_3']")) \
        == "m.layers.1"


def test_find_blocks_needs_two_numbers_of_one_stem():
    nodes = [_node("/stem/Conv"), _node("/layers.0/a"), _node("/layers.0/b"), _node("/layers.1/a"),
             _node("/layers.1/b"), _node("/other.7/a"), _node("/head/Gemm")]
    assert find_blocks(nodes) == [(1, 3), (3, 5)]  # [first node, last node + 1)
