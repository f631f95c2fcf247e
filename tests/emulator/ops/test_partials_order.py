"""The K reduction's vertices in output order, as k_partial_vertices_uneven hands them to C's mapping, are the
stable sort of their output starts (issue 49: the graph build without sorting them twice)."""

import numpy as np

from popvision_lite.emulator.ops import matmul as MM


def test_by_start_is_the_sort_of_the_reordered_starts():
    rng = np.random.default_rng(11)
    for _ in range(60):
        G, pk = int(rng.integers(1, 4)), int(rng.integers(2, 9))
        Mm, N = int(rng.integers(1, 60)), int(rng.integers(1, 60))
        pm, pn = int(rng.integers(1, Mm + 1)), int(rng.integers(1, N + 1))
        msz, moff = MM._parts(Mm, pm)
        nsz, noff = MM._parts(N, pn)
        vt = rng.integers(0, 1472, G * pk * pm * pn)
        red = MM.k_partial_vertices_uneven(G, pk, pm, pn, msz, moff, nsz, noff, Mm, N, vt)
        assert np.array_equal(red["by_start"], np.argsort(red["out_start"], kind="stable"))
        st = red["out_start"][red["by_start"]]
        assert np.all(st[1:] > st[:-1]) and st[0] == 0  # disjoint slices covering C
        assert int(red["len"].sum()) == G * Mm * N
