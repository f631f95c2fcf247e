"""ReducePartials with vertices of several widths (an uneven split), fed by the partials-gathering copy
the engine defers: the sums equal a per-vertex numpy sum bit for bit, eager or reading through."""

import numpy as np
import pytest

from popvision_lite.emulator import Engine, Graph, Target
from popvision_lite.emulator import mapping as M
from popvision_lite.emulator import programs as P
from popvision_lite.emulator.codelets import popops_rows as CR


def _graph(widths, k, out_dtype="float16", seed=0):
    t = Target.from_device("ipu-mk2", 1)
    g = Graph(t)
    widths = np.asarray(widths, np.int64)
    n = int(widths.sum())
    tiles = np.arange(len(widths)) % t.num_tiles
    # partials: k slices of the output, laid out slice-major as a matmul leaves them
    part = g.add_variable("partials", (k, n), "float32", mapping=M.linear(k * n, range(8)))
    g_len = k * widths
    g_start = np.cumsum(g_len) - g_len
    gathered = g.add_variable("partials_gathered", (int(g_len.sum()),), "float32",
                              mapping=M.intervals(tiles, g_start, g_start + g_len))
    o_start = np.cumsum(widths) - widths
    out = g.add_variable("out", (n,), out_dtype, mapping=M.intervals(tiles, o_start, o_start + widths))
    src_start = (np.arange(k)[None, :] * n + o_start[:, None]).ravel()  # vertex v's slice q
    cs = g.add_compute_set("reduce", op="mm")
    g.add_vertices(cs, CR.REDUCE_PARTIALS, tiles=tiles,
                   fields={"in": gathered.regions(g_start, g_len), "out": out.regions(o_start, widths)},
                   params={"k": np.int64(k)})
    prog = P.Sequence([P.Copy(part.regions(src_start, np.repeat(widths, k)), gathered.whole()), P.Execute(cs)])
    # magnitudes over many decades, so that the order of the additions shows in the rounding
    rng = np.random.default_rng(seed)
    vals = (rng.standard_normal((k, n)) * 10.0 ** rng.integers(-3, 4, (k, n))).astype(np.float32)
    return g, prog, vals


# k >= 8 matters: numpy sums the k partials of a width-1 vertex pairwise, of a wider one row by row
# (an fp32 output keeps the last bits an fp16 one would round away)
@pytest.mark.parametrize("out_dtype", ["float16", "float32"])
@pytest.mark.parametrize("k", [5, 8, 16])
@pytest.mark.parametrize("lazy", [True, False])
@pytest.mark.parametrize("widths", [[3, 5, 5, 1, 7, 3, 3], [4, 4, 4], [6], [1, 1, 2, 1] * 8])
def test_uneven_reduce_equals_per_vertex_sums(widths, lazy, k, out_dtype):
    g, prog, vals = _graph(widths, k, out_dtype)
    eng = Engine(g, prog, mode="full")
    eng.lazy_copies = lazy
    res = eng.run(inputs={"partials": vals})
    # the codelet's definition, vertex by vertex: its k x w partials as gathered, summed over k
    want = np.concatenate([np.ascontiguousarray(vals[:, o:o + w]).sum(axis=0) for o, w in
                           zip(np.cumsum(widths) - widths, widths, strict=True)]).astype(out_dtype)
    got = res.outputs["out"]
    assert got.dtype == want.dtype and np.array_equal(got.view(np.uint8), want.view(np.uint8))
    # the gathered copy is made current by the end of the run whether or not the reduce read through it
    gathered = np.concatenate([vals[:, o:o + w].ravel() for o, w in
                               zip(np.cumsum(widths) - widths, widths, strict=True)])
    assert np.array_equal(res.outputs["partials_gathered"], gathered)


def test_stage_split_follows_popops_calculate_split():
    """popops (ReductionPlan.cpp calculateSplit / calculateNextStep) on batch-norm statistics of 1,459 tile
    rows: columns in pieces of 4 (twice the float vector width), rows in groups holding ~64 partials a piece
    (one piece a tile, at least 64 partials); 91 groups are still a fan-in of more than 2 sqrt(1472), so a
    second intermediate stage follows; 23 groups of 256 columns go straight to the output."""
    from popvision_lite.emulator.ops import basic as B

    groups, lc = B.popops_stage_split(1459, 64, 1472)
    assert lc == 4 and len(groups) == 91 and sum(groups) == 1459 and max(groups) - min(groups) <= 1
    assert not B.popops_next_is_output(91, 64, 91 * 16, 1472)
    groups2, _ = B.popops_stage_split(91, 64, 1472)
    assert len(groups2) == 5 and B.popops_next_is_output(5, 64, 80, 1472)
    groups3, lc3 = B.popops_stage_split(1459, 256, 1472)
    assert lc3 == 4 and len(groups3) == 23 and B.popops_next_is_output(23, 256, 1472, 1472)
    # wide rows take wider pieces: (2048 / 4) / sqrt(1459) = 13 grains
    assert B.popops_stage_split(1459, 2048, 1472)[1] >= 52
