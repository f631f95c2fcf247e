"""The writer's coarser summary levels are reduced from the finest level's per-template figures
(``profile_builder._coarser_blocks``): the same minimum, sum and maximum, dtype for dtype, as computing each level
from the templates' tiles alone, for every kind of template layout (every tile, a run of tiles, scattered tiles, a
tile left out, no tile, values shared by templates moved to another IPU)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from popvision_lite.emulator.profile_builder import StepTileArray
from popvision_lite.profile.writer import SUMMARY_LEVELS, tile_block_edges


def _templates(rng, ipus: int, tpi: int) -> list:
    n = ipus * tpi
    shared = rng.integers(0, 2**32 - 1, 40, dtype=np.uint32)
    ts = [SimpleNamespace(tiles=None, cycles=rng.integers(0, 2**32 - 1, n, dtype=np.uint32))]  # every tile
    for ipu in range(ipus):  # one array on a run of tiles of each IPU (a pipelined stage step)
        ts.append(SimpleNamespace(tiles=np.arange(ipu * tpi + 5, ipu * tpi + 45), cycles=shared))
    for _ in range(6):  # scattered tiles, some blocks partly covered
        tiles = np.sort(rng.choice(n, int(rng.integers(1, n // 2)), replace=False))
        ts.append(SimpleNamespace(tiles=tiles, cycles=rng.integers(0, 2**32 - 1, len(tiles), dtype=np.uint32)))
    ts.append(SimpleNamespace(tiles=np.arange(0, 0), cycles=np.zeros(0, np.uint32)))  # no tile
    ts.append(SimpleNamespace(tiles=np.arange(n - 16, n), cycles=np.zeros(16, np.uint32)))  # zeros on the last
    return ts


def test_coarser_levels_reduced_from_the_finest_are_the_levels_computed_alone():
    rng = np.random.default_rng(7)
    for ipus, tpi in ((1, 92), (3, 160), (4, 1472)):
        ts = _templates(rng, ipus, tpi)
        seq = rng.integers(0, len(ts), 300)
        chained = StepTileArray(ts, seq, "cycles", ipus * tpi)
        for _, tb in SUMMARY_LEVELS:  # finest first, as the writer asks for them
            edges = tile_block_edges(ipus, tpi, tb)
            got = chained.tile_block_rows(0, len(seq), edges)
            want = StepTileArray(ts, seq, "cycles", ipus * tpi).tile_block_rows(0, len(seq), edges)
            for g, w in zip(got, want, strict=True):
                assert g.dtype == w.dtype and np.array_equal(g, w), (ipus, tpi, tb)
        assert len(chained._blocks) == len(SUMMARY_LEVELS)
