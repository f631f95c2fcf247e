"""compiled.digest with each (dtype, shape)'s header made once per process: the same 16 bytes as formatting the
header every time (plain, structured and subarray dtypes, 0-d and non-contiguous arrays), arrays of another dtype or
shape apart, and the header table bounded."""

import numpy as np
import xxhash

from popvision_lite.emulator.compile import compiled as CC


def _formatted(*arrays) -> bytes:
    h = xxhash.xxh3_128()
    for a in arrays:
        a = np.ascontiguousarray(a)
        d = a.dtype
        h.update(f"{d.str if d.fields is None and d.subdtype is None else d}{a.shape}".encode())
        h.update(a.tobytes() if a.dtype.hasobject else a.reshape(-1).view(np.uint8))
    return h.digest()


def test_digest_equals_the_formatted_header_and_keeps_dtypes_and_shapes_apart(monkeypatch):
    arrays = [np.arange(6), np.arange(6, dtype=np.int32), np.arange(6).reshape(2, 3), np.zeros((2, 3)),
              np.array([(1, 2.0)], dtype=[("a", "i4"), ("b", "f8")]), np.zeros(3, dtype=("i4", (2,))), np.array(7),
              np.arange(12).reshape(3, 4)[:, ::2], np.zeros(0, np.uint8)]
    for _ in range(2):  # the first round makes the headers, the second reads them
        for a in arrays:
            assert CC.digest(a) == _formatted(a)
        assert CC.digest(*arrays) == _formatted(*arrays)
    assert len({CC.digest(a) for a in arrays[:4]}) == 4
    monkeypatch.setattr(CC, "_HEADS_MAX", 3)
    for n in range(10):
        assert CC.digest(np.zeros(n, np.int16)) == _formatted(np.zeros(n, np.int16))
        assert len(CC._HEADS) <= 3
