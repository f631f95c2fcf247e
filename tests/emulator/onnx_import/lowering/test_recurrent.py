"""lowering/recurrent.py: LSTM and GRU unrolled over the sequence onto matmuls and gates."""

from __future__ import annotations

import pytest

pytest.importorskip("onnxruntime")

from onnx import helper  # noqa: E402

from popvision_lite.emulator.onnx_import.lowering import recurrent  # noqa: E402

from .graphs import lower_and_compare, lowered_by, rand  # noqa: E402

SEQ, BATCH, IN, HID = 3, 2, 4, 5


def test_lstm_outputs_and_last_state(tmp_path):
    assert lowered_by("LSTM", recurrent) and lowered_by("GRU", recurrent)
    node = helper.make_node("LSTM", ["x", "w", "r", "b"], ["y", "h"], hidden_size=HID)
    out = lower_and_compare(tmp_path, [node], {"x": rand(SEQ, BATCH, IN)}, ["y", "h"],
                            {"w": rand(1, 4 * HID, IN, seed=1), "r": rand(1, 4 * HID, HID, seed=2),
                             "b": rand(1, 8 * HID, seed=3)}, atol=1e-4)
    assert out["y"].shape == (SEQ, 1, BATCH, HID) and out["h"].shape == (1, BATCH, HID)


def test_gru_with_linear_before_reset(tmp_path):
    node = helper.make_node("GRU", ["x", "w", "r", "b"], ["y"], hidden_size=HID, linear_before_reset=1)
    lower_and_compare(tmp_path, [node], {"x": rand(SEQ, BATCH, IN)}, ["y"],
                      {"w": rand(1, 3 * HID, IN, seed=1), "r": rand(1, 3 * HID, HID, seed=2),
                       "b": rand(1, 6 * HID, seed=3)}, atol=1e-4)
