"""dtypes.to_dtype (re-exported by graph), the fp16 <-> fp32 conversion of full-numerics results: the same
bits as numpy's ``astype`` for every value, whichever of its two routes (numpy's, or the branch-free one for arrays
with many fp16 subnormals) an array takes."""

import warnings

import numpy as np
import pytest

from popvision_lite.emulator import dtypes as G
from popvision_lite.emulator.graph import to_dtype


@pytest.fixture
def routes(monkeypatch):
    """Which route each conversion took: True = branch-free."""
    taken = []
    orig = G._many_subnormals

    def recording(mask):
        taken.append(bool(orig(mask)))
        return taken[-1]

    monkeypatch.setattr(G, "_many_subnormals", recording)
    return taken


def _same_bits(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    assert np.array_equal(got.view(f"u{got.itemsize}"), want.view(f"u{want.itemsize}"))


def test_every_fp16_value_to_fp32(routes):
    every = np.arange(2**16, dtype=np.uint16).view(np.float16)
    _same_bits(to_dtype(every, "float32"), every.astype(np.float32))  # 3 % subnormals: numpy's route
    subnormals = every[(every.view(np.uint16) & 0x7C00) == 0]  # with both zeros and both signs
    mixed = np.concatenate([every, np.tile(subnormals, 4)]).reshape(-1, 2)
    _same_bits(to_dtype(mixed, "float32"), mixed.astype(np.float32))
    assert routes == [False, True]


def test_fp32_to_fp16_over_the_bit_patterns(routes):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # numpy's overflow warning for the values above fp16
        for offset in (0, 488):  # every 977th bit pattern: all exponents, signs, NaNs, infinities
            x = np.arange(offset, 2**32, 977, dtype=np.uint64).astype(np.uint32).view(np.float32)
            _same_bits(to_dtype(x, "float16"), x.astype(np.float16))
    assert routes == [True, True]


def test_fp32_to_fp16_rounding_at_the_subnormal_boundaries(routes):
    tiny = np.float32(2.0**-24)  # the smallest fp16 subnormal
    edges = np.array([0.5, 1.5, 2.5, 1023.5, 1023.49, 1024.0, 0.49, 3.0], np.float32) * tiny
    x = np.concatenate([edges, -edges, np.nextafter(edges, np.float32(1)), np.nextafter(edges, np.float32(0))])
    x = np.tile(x, 64)  # above the size where the branch-free route is considered
    _same_bits(to_dtype(x, "float16"), x.astype(np.float16))
    assert routes == [True]


def test_no_copy_and_other_types():
    a = np.ones(4096, np.float32)
    assert to_dtype(a, "float32") is a
    i = np.arange(5000, dtype=np.int64)
    _same_bits(to_dtype(i, "int32"), i.astype(np.int32))
    d = np.linspace(-1, 1, 3000)
    _same_bits(to_dtype(d, "float16"), d.astype(np.float16))
