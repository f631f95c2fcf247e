"""cost_model._place_on_tile: each vertex's place among its tile's vertices in their given order (which worker
compute_tile_cycles charges it to), found from the runs of one tile where the vertices come in runs, against the
definition (the vertices of the same tile before it) on run lengths of one size, of several sizes, on tiles that
come back in later runs, and on vertices in no runs (the stable sort of every vertex)."""

import numpy as np
import pytest

from popvision_lite.emulator import cost_model as cm


def _definition(tiles):
    seen: dict = {}
    out = np.empty(len(tiles), np.int64)
    for i, t in enumerate(tiles.tolist()):
        out[i] = seen.get(t, 0)
        seen[t] = out[i] + 1
    return out


def _first(tiles, num_tiles):
    count = np.bincount(tiles, minlength=num_tiles)
    return np.cumsum(count) - count


def _runs(rng, n_runs, lengths, num_tiles):
    tiles = rng.integers(0, num_tiles, size=n_runs)
    return np.repeat(tiles, lengths).astype(rng.choice([np.int32, np.int64]))


@pytest.mark.parametrize("case", ["one length", "several lengths", "no runs", "wide tiles"])
def test_place_matches_the_definition(case):
    rng = np.random.default_rng(abs(hash(case)) % 2**32)
    for _ in range(20):
        nt = int(rng.integers(2, 40))
        if case == "one length":  # an elementwise op's worker pieces: six per interval, tiles that come back
            tiles = _runs(rng, int(rng.integers(1, 300)), int(rng.integers(1, 8)), nt)
        elif case == "several lengths":
            k = int(rng.integers(1, 300))
            tiles = _runs(rng, k, rng.integers(1, 9, size=k), nt)
        elif case == "no runs":
            tiles = rng.integers(0, nt, size=int(rng.integers(2, 500)))
        else:  # tiles past 16 bits (a large multi-IPU target): the sorts on int64
            nt = 70000
            k = int(rng.integers(1, 200))
            tiles = _runs(rng, k, rng.integers(1, 7, size=k), nt)
        got = cm._place_on_tile(tiles, _first(tiles, nt))
        assert got.dtype == np.int64
        assert np.array_equal(got, _definition(tiles))


def test_compute_tile_cycles_charges_the_same_workers():
    """The whole cost on vertices in runs of six whose tiles come back: each worker's load as the definition's."""
    rng = np.random.default_rng(1)
    nt, threads, launch = 16, 6, 11
    tiles = _runs(rng, 400, 6, nt)
    vc = rng.integers(1, 1000, size=len(tiles)).astype(np.int32)
    busy, count = cm.compute_tile_cycles(tiles, vc, nt, threads, launch)
    worker = _definition(tiles) % threads + tiles.astype(np.int64) * threads
    load = np.bincount(worker, weights=vc, minlength=nt * threads).reshape(nt, threads).max(axis=1)
    cnt = np.bincount(tiles, minlength=nt)
    expect = np.maximum(threads * load, cnt * launch) + np.where(cnt > 0, launch, 0)
    assert np.array_equal(busy, expect.astype(np.int64))
    assert np.array_equal(count, cnt)
