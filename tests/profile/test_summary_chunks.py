"""The writer's summary levels are stored a whole chunk at a time (``_StepTileWriter._summary_rows``): rows of
several write batches are kept until they fill a chunk of the level's min / mean / max datasets, and the last
rows are stored after the last batch.  The stored summaries are the ones of the whole step x tile array computed at
once (``writer.block_summary``), whatever the batches, chunks and step blocks, when neither divides the other."""

from __future__ import annotations

import h5py
import numpy as np
import pytest

from popvision_lite.profile import writer as W
from popvision_lite.testing.synthetic import make_synthetic


@pytest.mark.parametrize(("n_steps", "batch", "chunk"), [(101, 8, 3), (50, 8, 4), (5, 8, 256), (40, 8, 1), (4100, 1024, 256)])
def test_summaries_stored_by_whole_chunks_are_those_of_the_whole_array(tmp_path, monkeypatch, n_steps, batch,
                                                                       chunk):
    monkeypatch.setattr(W, "WRITE_BATCH", batch)
    monkeypatch.setattr(W, "SUMMARY_CHUNK", chunk)
    d = make_synthetic(num_ipus=2, tiles_per_ipu=12, num_steps=n_steps, num_layers=1, noise=0.05, seed=n_steps)
    levels = ((4, 5), (8, 0))  # 4-step blocks: 2 or 4 summary rows per batch; 8-step blocks: 1 or 2
    path = W.write_profile(tmp_path / "s.pvl", d, summary_levels=levels)
    raw = np.asarray(d.step_tile_cycles)
    with h5py.File(path) as f:
        for sb, tb in levels:
            g = f["summaries"][W.level_name(sb, tb)]
            edges = W.tile_block_edges(2, 12, tb)
            want = W.block_summary(raw, sb, edges)
            rows = -(-n_steps // sb)
            assert g["max"].chunks[0] == min(rows, chunk)
            for stat, w in zip(("min", "mean", "max"), want, strict=True):
                assert g[stat].shape == (rows, len(edges))
                np.testing.assert_array_equal(g[stat][()], w, err_msg=f"{sb}, {tb}: {stat}")
