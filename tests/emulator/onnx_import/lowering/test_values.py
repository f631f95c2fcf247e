"""lowering/values.py: the value algebra the lowerings share: handle shapes, pooling windows, attributes."""

from __future__ import annotations

import numpy as np
from onnx import helper

from popvision_lite.emulator.onnx_import.lowering.values import attrs, canon, ints, is_identity, windows


def test_canon_ints_attrs_and_identity():
    assert canon((2, 3, 4)) == (6, 4) and canon((5,)) == (5,) and canon(()) == (1,)
    assert ints(np.array([1, 2], np.int64)) == [1, 2]
    a = attrs(helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[3, 3], group=2))
    assert list(a["kernel_shape"]) == [3, 3] and a["group"] == 2
    assert is_identity(np.arange(5), 5) and not is_identity(np.array([1, 0, 2]), 3)


def test_windows_index_the_input_rows_and_mark_the_padding():
    # 1 image 4 x 5, 3 x 3 windows, stride 2, pads 1: ONNX's output size floor((4 + 2 - 3) / 2) + 1 = 2 by 3
    idx, (oh, ow) = windows(1, 4, 5, 3, 3, (2, 2), (1, 1, 1, 1))
    assert (oh, ow) == (2, 3) and idx.shape == (6, 9)
    # the first window starts at (-1, -1): its top row and left column read padding
    assert list(idx[0]) == [-1, -1, -1, -1, 0, 1, -1, 5, 6]
    # the middle window of the second row starts at (1, 1)
    assert list(idx[4]) == [6, 7, 8, 11, 12, 13, 16, 17, 18]
    # AveragePool's count_include_pad: padding inside the padded image counts (0), nothing outside it
    cnt, _ = windows(1, 4, 5, 3, 3, (2, 2), (1, 1, 1, 1), count_pads=True)
    assert (cnt >= 0).all()
