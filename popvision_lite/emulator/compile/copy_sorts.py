"""The sorts of a copy's compile (:func:`stable_argsort`, a three-field lexsort, a sorted unique of cut positions):
numpy's stable sorts of packed int64 keys, several times faster than the general forms on a copy's mostly
ascending arrays (copy_plans, copies)."""

from __future__ import annotations

import numpy as np


def _sorted_unique(a: np.ndarray) -> np.ndarray:
    """np.unique for int arrays via one sort (numpy's hash-based unique is slow on large int arrays)."""
    if len(a) == 0:
        return a
    if np.all(a[1:] > a[:-1]):
        return a
    # stable: the same values, and numpy's stable sort runs through the few ascending runs these arrays are
    # made of (the cut positions of each side) ~7x faster than its quicksort (3 runs of 0.7 M: 0.018 s)
    a = np.sort(a, kind="stable")
    return a[np.concatenate([[True], a[1:] != a[:-1]])]


def stable_argsort(key: np.ndarray, values: bool = False):
    """np.argsort(key, kind="stable") of an int64 array: when key x 2^k + index (2^k >= n) fits int64, a stable sort
    of those values (all distinct, so any sort gives the stable order) and the indices read back.  A
    value sort moves no index array: 2 M keys, random 0.17 against 0.22 s, sorted blocks 0.10 against
    0.14 s; a quicksort would lose on the mostly ordered keys of a copy's pieces (0.14 against 0.005 s on
    sorted keys), so it is numpy's stable (merge / run-aware) sort too.  ``values``: (the sorted keys, the order),
    the keys read back from the sorted values too (a shift, where ``key[order]`` is a gather through a
    permutation, several times the cost)."""
    n = len(key)
    if n < 2:
        order = np.arange(n, dtype=np.int64)
        return (key.copy(), order) if values else order
    lo, hi = int(key.min()), int(key.max())
    shift = (n - 1).bit_length()  # the index in the low bits: a mask reads it back (4x cheaper than % n)
    if lo < 0 or (hi + 1) << shift >= 2**63:
        order = np.argsort(key, kind="stable")
        return (key[order], order) if values else order
    v = key << shift
    v |= np.arange(n, dtype=np.int64)
    v.sort(kind="stable")
    order = v & ((1 << shift) - 1)
    if not values:
        return order
    v >>= shift
    return v, order


def _lexsort3(a: np.ndarray, b: np.ndarray, c: np.ndarray, bc_bound: int | None = None) -> np.ndarray | None:
    """np.lexsort((a, b, c)) for non-negative ints: one stable argsort of a combined int64 key when
    it fits (the same order: lexsort is stable too), which is several times faster.  None when the
    pieces are in that order already (the order is the identity).  ``bc_bound``: ``b`` and ``c`` are known to
    lie in [0, bc_bound) (tiles), not searched for their least and greatest values."""
    if len(a) == 0:
        return np.zeros(0, np.int64)
    am = int(a.max()) + 1
    if bc_bound is None:
        bm, cm_ = int(b.max()) + 1, int(c.max()) + 1
        low = min(int(a.min()), int(b.min()), int(c.min()))
    else:
        bm = cm_ = bc_bound
        low = int(a.min())
    if low < 0 or am * bm * cm_ >= 2**62:
        order = np.lexsort((a, b, c))
        return None if np.array_equal(order, np.arange(len(a))) else order
    key = np.multiply(c, bm, dtype=np.int64)
    key += b
    key *= am
    key += a
    if np.all(key[1:] >= key[:-1]):
        return None
    return stable_argsort(key)
