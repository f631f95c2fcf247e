"""poplin's multi-stage reduction of K partials (lib/poplin/ConvReducePlan.cpp, ConvReduce.cpp): from 16
partials a matmul's partials are reduced in two stages, from 125 in three, so that a tile receives a few
messages a stage instead of one from each other partial's tile; the product is unchanged."""

import numpy as np
import pytest

from popvision_lite.emulator import Engine, Target
from popvision_lite.emulator.models.emulated import EmulatorBackend
from popvision_lite.emulator.ops import planners as PL
from popvision_lite.profile.schema import CATEGORY_CODE


def test_stage_depths_follow_poplins_thresholds():
    assert PL.multi_stage_reduce_depths(15) == []
    assert len(PL.multi_stage_reduce_depths(16)) == 1
    assert len(PL.multi_stage_reduce_depths(124)) == 1
    assert len(PL.multi_stage_reduce_depths(125)) == 2
    # 244 partials: depth^(2/3) ~ 39 then ~6: about 6 messages a stage instead of 243
    d = PL.multi_stage_reduce_depths(244)
    assert d[0] in (38, 39, 40) and d[1] in (6, 7)
    for n in (16, 17, 50, 125, 300, 1000):
        ds = [n] + PL.multi_stage_reduce_depths(n)
        assert all(a > b for a, b in zip(ds, ds[1:], strict=False))  # each stage reduces


def test_sections_cover_every_partial_and_tile_once():
    for depth, d, tiles in ((244, 39, 244), (39, 6, 244), (17, 4, 17), (20, 7, 16)):
        secs = PL.reduce_stage_sections(depth, d, tiles)
        assert sum(k for _, k, _, _ in secs) == depth
        assert [q0 for q0, _, _, _ in secs] == sorted(q0 for q0, _, _, _ in secs)
        assert all(nt >= 1 and t0 + nt <= tiles for _, _, t0, nt in secs)


def _product(K, M=8, N=8, seed=3):
    rng = np.random.default_rng(seed)
    a = (rng.standard_normal((M, K)) * 0.1).astype(np.float32)
    b = (rng.standard_normal((K, N)) * 0.1).astype(np.float32)
    em = EmulatorBackend(Target.from_device("ipu-mk2"), "fp32")
    out = em.matmul(em.input("a", a), em.input("b", b), "mm")
    return em, out, a, b


@pytest.mark.parametrize(("M", "N", "K", "stages"), [(64, 64, 4096, 1), (8, 8, 160 * 1024, 2)])
def test_multi_stage_product_equals_numpy(M, N, K, stages):
    em, out, a, b = _product(K, M, N)
    names = [cs.name for cs in em.graph.compute_sets]
    pk = int(em.graph.tensors[[t.name for t in em.graph.tensors].index("mm/partials")].shape[0])
    assert len(PL.multi_stage_reduce_depths(pk)) == stages, f"K split {pk}: not the case this test is for"
    assert sum("reduce_partials_stage" in n for n in names) == stages
    r = Engine(em.graph, em.program(), mode="full").run(inputs=em.inputs)
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(r.outputs[out.name], want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_multi_stage_cuts_the_exchange_code_of_a_deep_reduction(monkeypatch):
    """The same product reduced in one stage (the pre-poplin-plan behaviour, forced) needs more exchange
    code on its fullest tile: every owner received a piece from each of the other partials' tiles."""
    def code(em):
        r = Engine(em.graph, em.program(), mode="timing").run()
        return int(np.asarray(r.profile_data.memory)[:, CATEGORY_CODE["internalExchangeCode"], 0].max())

    staged = code(_product(160 * 1024)[0])
    monkeypatch.setattr("popvision_lite.emulator.ops.matmul.multi_stage_reduce_depths", lambda pk: [])
    single = code(_product(160 * 1024)[0])
    assert staged < 0.5 * single
