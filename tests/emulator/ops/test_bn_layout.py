"""Batch norm's broadcast per-channel vectors: laid out linearly with at least 128 bytes per tile (as poplibs lays out
the norm parameters of a rank-2 activation), so that each row tile receives a broadcast vector from few
tiles in few pieces, not one piece per 8 bytes of the vector (numerics: test_norm_pool.py)."""

import numpy as np

from popvision_lite.emulator import programs as P
from popvision_lite.emulator.compile import copy_pieces
from popvision_lite.emulator.models.emulated import EmulatorBackend
from popvision_lite.emulator.ops import norm_pool as NP
from popvision_lite.emulator.target import Target


def _bn_graph(rows, c):
    be = EmulatorBackend(Target.from_device("ipu-mk2"), "fp16", needs_values=False)
    x = be.input("x", np.zeros((rows, c), np.float16))
    dy = be.input("dy", np.zeros((rows, c), np.float16))
    g = be.weight("gamma", np.ones(c, np.float32))
    b = be.weight("beta", np.zeros(c, np.float32))
    y, mean, invstd = be.batch_norm(x, g, b, "bn")
    be.batch_norm_bwd(x, dy, mean, invstd, g, "bn_bwd")
    return be


def _copies(prog, suffix):
    out = []
    if isinstance(prog, P.Copy) and (prog.name or "").rsplit("/", 1)[-1].startswith(suffix):
        out.append(prog)
    for ch in prog.children():
        out += _copies(ch, suffix)
    return out


def test_each_row_tile_receives_a_channel_vector_from_few_tiles():
    rows, c = 20 * 28 * 28, 512  # a stage-2 batch norm of ResNet-50 at micro-batch 20
    be = _bn_graph(rows, c)
    per_tile = NP.STAT_CHUNK_BYTES // 4
    bcasts = _copies(be.program(), "broadcast_")
    names = {p.name.rsplit("/", 1)[-1] for p in bcasts}
    assert {"broadcast_scale", "broadcast_shift", "broadcast_a", "broadcast_b", "broadcast_c"} <= names
    for prog in bcasts:
        plan = copy_pieces(prog.src, prog.dst)
        cross = plan.src_tile != plan.dst_tile
        # source tiles feeding each destination tile (one exchange pattern per pair at the least)
        pairs = np.unique(plan.dst_tile[cross] * 10**6 + plan.src_tile[cross])
        per_dst = np.bincount(pairs // 10**6)
        assert per_dst.max() <= c // per_tile, prog.name  # was up to c / 2
        assert len(np.unique(plan.dst_tile)) > 1000  # the rows (and so the vector's readers) span the IPU


def test_broadcast_vectors_are_grouped_in_whole_chunks():
    rows, c = 20 * 7 * 7, 2048
    be = _bn_graph(rows, c)
    chunk = NP.STAT_CHUNK_BYTES // 4
    grouped = [t for t in be.graph.tensors if t.name.endswith("_grouped")]
    assert {t.name.rsplit("/", 1)[-1] for t in grouped} >= {"scale_grouped", "shift_grouped", "mean_grouped",
                                                           "invstd_grouped", "a_grouped", "b_grouped", "c_grouped"}
    for t in grouped:
        ept = t.mapping.elements_per_tile(be.graph.target.num_tiles)
        assert np.count_nonzero(ept) == c // chunk and set(ept[ept > 0]) == {chunk}
