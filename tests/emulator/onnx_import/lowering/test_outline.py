"""lowering/outline.py: which runs are outlined, and when two blocks' nodes are the same body."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("onnx")

from onnx import helper, numpy_helper  # noqa: E402

from popvision_lite.emulator.onnx_import.lowering.outline import Outliner, _attr_signature, _offset  # noqa: E402


def _low(training=False, ipus=1, needs_values=False, replay=True):
    be = SimpleNamespace(needs_values=needs_values, ctx=SimpleNamespace(rotation=0))
    if replay:
        be.replay = lambda *a, **k: None
    return SimpleNamespace(be=be, training=training, ipus=ipus)


def test_only_timing_only_inference_on_one_ipu_is_outlined():
    assert Outliner.applies(_low())
    assert not Outliner.applies(_low(training=True))
    assert not Outliner.applies(_low(ipus=2))
    assert not Outliner.applies(_low(needs_values=True))      # full numerics need every block's own weights
    assert not Outliner.applies(_low(replay=False))           # the numpy backend cannot call a block's programs


def test_nodes_with_the_same_attributes_have_one_signature():
    a = helper.make_node("Gemm", ["x", "w"], ["y"], transB=1, alpha=0.5)
    b = helper.make_node("Gemm", ["u", "v"], ["z"], alpha=0.5, transB=1)  # other names, other attribute order
    c = helper.make_node("Gemm", ["x", "w"], ["y"], transB=0, alpha=0.5)
    assert _attr_signature(a) == _attr_signature(b) != _attr_signature(c)
    t1 = helper.make_node("Constant", [], ["k"], value=numpy_helper.from_array(np.ones(3, np.float32)))
    t2 = helper.make_node("Constant", [], ["k"], value=numpy_helper.from_array(np.zeros(3, np.float32)))
    assert _attr_signature(t1) != _attr_signature(t2)  # a tensor attribute by its values


def test_the_tile_offset_is_even_and_wraps():
    assert [_offset(r, 8) for r in (0, 1, 2, 3, 9, 15)] == [0, 0, 2, 2, 0, 6]
