"""Equal read-only index arrays of a graph held once.

A large model builds many tensors, fields and vertex groups alike: an activation and its gradient, a graph
function's argument and its parameter, every weight of one shape, the same per-vertex regions of each
replayed body.  Their tile, start and size arrays repeat.  In ResNet-50's replica graph (the first ResNet
validation row) the mappings held 498 MB of arrays, 259 MB of them distinct, and the vertex fields and
tiles 505 MB, 180 MB distinct.

:func:`share` looks an array of at least ``MIN_SIZE`` elements up by its dtype, length and an even sample of
its values, compares it in full with the arrays held under that key, and returns the one already held when
they are equal.  Every array it is given is made read-only (its owner never changes it after building it),
and arrays are held weakly: one goes with the last mapping, field or group that uses it.
"""

from __future__ import annotations

import threading
import weakref

import numpy as np

MIN_SIZE = 1024  # smaller arrays are not worth a lookup


class SharedArrays:
    def __init__(self, min_size: int = MIN_SIZE):
        self.min_size = min_size
        self._by_key: dict[tuple, list[weakref.ref]] = {}
        # graphs may be built on several threads (a GUI worker, a threaded Dask worker); re-entrant because a
        # weak reference's callback (_forget) can run inside share() when a collection happens there
        self._lock = threading.RLock()

    def share(self, a: np.ndarray) -> np.ndarray:
        """``a`` (an array its caller owns), or an equal array already held; read-only either way."""
        a.setflags(write=False)
        if a.size < self.min_size or a.ndim != 1:
            return a
        key = (a.dtype.str, a.size, a[:: a.size // 32].tobytes())
        with self._lock:
            refs = self._by_key.setdefault(key, [])
            for r in tuple(refs):
                b = r()
                if b is a or (b is not None and np.array_equal(a, b)):
                    return b
            refs.append(weakref.ref(a, lambda r, key=key: self._forget(key, r)))
        return a

    def held(self) -> int:
        """How many distinct keys have an array alive (for tests)."""
        return len(self._by_key)

    def _forget(self, key: tuple, ref: weakref.ref) -> None:
        with self._lock:
            refs = self._by_key.get(key)
            if refs is not None:
                refs[:] = [r for r in refs if r is not ref]
                if not refs:
                    del self._by_key[key]


_POOL = SharedArrays()
share = _POOL.share
held = _POOL.held


def int_array(x) -> np.ndarray:
    """``x`` as an int32 or int64 array (other types as int64), without a copy where it is one already."""
    a = np.asarray(x)
    return a if a.dtype == np.int64 or a.dtype == np.int32 else a.astype(np.int64)


def share_int32(a: np.ndarray) -> np.ndarray:
    """:func:`share` of ``a`` as int32: a read-only contiguous int32 array (one held already, e.g. another field's)
    as it is, anything else as an int32 copy (a caller's array is never made read-only)."""
    if a.dtype == np.int32 and not a.flags.writeable and a.ndim == 1 and (len(a) < 2 or a.strides[0] == 4):
        return share(a)
    return share(a.astype(np.int32))
