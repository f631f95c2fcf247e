"""Uneven splits of a matrix into windows, as a matmul cuts its outputs and partials: the random cases of the
tests of window mappings (tests/emulator/test_local_by_construction.py, test_elements_per_tile.py)."""

import numpy as np


def parts(n: int, p: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` split into ``p`` sizes differing by at most one (the larger first), and their offsets."""
    sz = np.full(p, n // p, np.int64)
    sz[: n % p] += 1
    return sz, np.concatenate([[0], np.cumsum(sz)[:-1]])


def uneven(rng, three_d: bool):
    """An uneven (pm x pn) split of an (m, n) matrix, or of each plane of a (g, m, n) stack: (shape, window
    shapes, window origins).  About a third of the cases have full-width windows (pn = 1: a window's rows are
    one run, so its intervals merge)."""
    g = int(rng.integers(2, 4)) if three_d else 1
    m, n = int(rng.integers(20, 90)), int(rng.integers(20, 90))
    pm, pn = int(rng.integers(2, 7)), int(rng.integers(1, 7))
    if rng.random() < 0.3:
        pn = 1
    msz, moff = parts(m, pm)
    nsz, noff = parts(n, pn)
    gi, ii, jj = (x.ravel() for x in np.meshgrid(np.arange(g), np.arange(pm), np.arange(pn), indexing="ij"))
    shapes = np.stack([np.ones_like(gi), msz[ii], nsz[jj]], 1)
    origins = np.stack([gi, moff[ii], noff[jj]], 1)
    if not three_d:
        return (m, n), shapes[:, 1:], origins[:, 1:]
    return (g, m, n), shapes, origins
