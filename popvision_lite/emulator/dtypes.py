"""The emulator's element types: their numpy types (``DTYPES``), the check of a dtype name, and ``to_dtype``, the
fp16 <-> fp32 conversion of full-numerics results with exactly the values numpy's ``astype`` gives (held apart from
:mod:`popvision_lite.emulator.graph`, which re-exports them)."""

from __future__ import annotations

import numpy as np

from popvision_lite.errors import EmulatorError

DTYPES = {"float16": np.float16, "float32": np.float32, "int32": np.int32}

_F16_MIN_NORMAL = np.float32(2.0**-14)
_F16_SUBNORMAL_STEPS = np.float32(2.0**24)  # fp16 subnormals are the multiples of 2**-24 below 2**-14


def to_dtype(values, dtype: str) -> np.ndarray:
    """``values`` as the numpy type of the emulator dtype ``dtype`` (no copy when it already is), with
    exactly the values ``astype`` gives.

    numpy converts an fp16 subnormal, to fp32 or from it, 20-50x slower than any other value (a
    per-element slow path; from fp32 it also raises the underflow flag for each one), and small
    gradients are often fp16 subnormals.  Arrays with many of them take a branch-free route with the
    same result: an fp16 subnormal is its 10-bit mantissa times 2**-24, so the mantissa and the value
    convert as integers, the rest through numpy with the subnormals zeroed, and the sign bit is kept."""
    want = DTYPES[dtype]
    x = np.asarray(values)
    if x.dtype == want:
        return x
    if x.size < 1024 or {x.dtype.type, want} != {np.float16, np.float32}:
        return x.astype(want)
    if want is np.float32:
        return _f16_to_f32(x)
    return _f32_to_f16(x)


def _many_subnormals(nonzero_subnormal: np.ndarray) -> bool:
    """Whether the branch-free conversion is cheaper than numpy's (measured: ~7 ns per element against
    ~60-140 ns per subnormal)."""
    return np.count_nonzero(nonzero_subnormal) * 16 >= nonzero_subnormal.size


def _f32_to_f16(x: np.ndarray) -> np.ndarray:
    a = np.abs(x)
    small = a < _F16_MIN_NORMAL  # subnormal in fp16, or zero; NaN compares False
    if not _many_subnormals(small & (a > 0)):
        return x.astype(np.float16)
    sign = ((x.view(np.uint32) >> 16) & 0x8000).astype(np.uint16)
    normal = np.maximum(a, _F16_MIN_NORMAL).astype(np.float16).view(np.uint16)
    sub = np.rint(np.fmin(a, _F16_MIN_NORMAL) * _F16_SUBNORMAL_STEPS).astype(np.uint16)  # half to even
    mask = np.negative(small.view(np.uint8).astype(np.uint16))  # 0xFFFF where subnormal
    return ((sub & mask) | (normal & ~mask) | sign).view(np.float16)


def _f16_to_f32(x: np.ndarray) -> np.ndarray:
    u = x.view(np.uint16)
    small = (u & 0x7C00) == 0  # exponent 0: subnormal or zero
    mant = u & 0x3FF
    if not _many_subnormals(small & (mant != 0)):
        return x.astype(np.float32)
    mant &= np.negative(small.view(np.uint8).astype(np.uint16))  # subnormals' mantissas, 0 elsewhere
    normal = (u ^ mant).view(np.float16).astype(np.float32)  # subnormals become +-0
    return (normal.view(np.uint32) | (mant.astype(np.float32) / _F16_SUBNORMAL_STEPS).view(np.uint32)).view(np.float32)


def check_dtype(dtype, what: str) -> str:
    name = np.dtype(dtype).name if not isinstance(dtype, str) else dtype
    if name not in DTYPES:
        raise EmulatorError(f"{what}: unknown dtype '{dtype}'; fix: use one of {', '.join(DTYPES)}")
    return name
