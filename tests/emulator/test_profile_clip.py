"""profile_builder._clip_u32, the profile's uint32 rows (the liveness bytes per step and tile): negative values
to 0, the rest as they are, for every small integer dtype, written in one pass; larger ones clipped at 2**32 - 1."""

import numpy as np

from popvision_lite.emulator.profile_builder import _clip_u32


def test_clip_u32_keeps_values_and_zeroes_negatives():
    cases = [np.array([[-5, 0, 2**31 - 1], [3, -(2**31), 7]], np.int32), np.array([1, 2, 65535], np.uint16),
             np.array([-1, 300], np.int16), np.array([-1, 5], np.int8), np.zeros((0, 4), np.int32),
             np.array([-3, 2**40, 9], np.int64), np.array([4, 2**32 + 1], np.uint64)]
    for a in cases:
        got = _clip_u32(a)
        want = np.clip(a.astype(np.float64), 0, 2**32 - 1).astype(np.uint32)
        assert got.dtype == np.uint32 and got.shape == a.shape and np.array_equal(got, want), a
    u = np.array([7, 8], np.uint32)
    assert _clip_u32(u) is u
