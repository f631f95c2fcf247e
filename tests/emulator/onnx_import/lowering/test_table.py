"""lowering/table.py: the one table of lowered op types; the supported and trainable lists derive from it."""

from __future__ import annotations

import pytest

pytest.importorskip("onnx")

from popvision_lite.emulator.onnx_import import SUPPORTED_OPS  # noqa: E402
from popvision_lite.emulator.onnx_import.lowering.table import LOWERINGS, Lowering  # noqa: E402


def test_every_entry_lowers_through_a_lowering_module():
    for op, low in LOWERINGS.items():
        assert isinstance(low, Lowering) and callable(low.fn), op
        mod = getattr(low.fn, "__module__", None) or type(low.fn).__module__
        assert mod.startswith("popvision_lite.emulator.onnx_import.lowering."), (op, mod)
        assert all(isinstance(a, str) for a in low.attrs), op


def test_the_supported_list_is_the_table():
    assert set(LOWERINGS) <= set(SUPPORTED_OPS)
    assert {"MatMul", "Conv", "Softmax", "LSTM", "Resize", "QuantizeLinear", "Dropout", "Reshape"} <= set(LOWERINGS)
    assert not LOWERINGS["Abs"].trainable and LOWERINGS["MatMul"].trainable
