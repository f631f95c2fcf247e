"""Tile statistics over the tiles a step runs on (issue 46 item 5): a step of one IPU is measured over that IPU's
tiles, not the replica's, in the Execution view's imbalance, the step details, the range summary and Insights."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import popvision_lite as pvl
from popvision_lite.analysis import execution as ex
from popvision_lite.profile.schema import STEP_KIND_CODE

SAMPLE = Path(__file__).resolve().parents[2] / "sample_profiles" / "bert_mini_4ipu_pipeline.pvl"


@pytest.fixture(scope="module")
def prof():
    with pvl.open(SAMPLE) as p:
        yield p


def test_a_one_ipu_step_s_mean_is_over_its_ipu_s_tiles(prof):
    idx = ex.StepIndex(prof.stored_table("steps"), int(prof.target.num_ipus))
    tpi = int(prof.target.tiles_per_ipu)
    comp = np.flatnonzero((idx.kind == STEP_KIND_CODE["compute"]) & (idx.ipu >= 0))
    assert len(comp) and int(prof.target.num_ipus) == 4
    for i in comp[:: max(len(comp) // 20, 1)]:  # some steps of every IPU, read from the step x tile array
        row = prof.step_tiles.cycles(int(i), int(i) + 1)[0].astype(np.float64)
        own = row[int(idx.ipu[i]) * tpi:(int(idx.ipu[i]) + 1) * tpi]
        assert row.sum() == own.sum()  # a step of one IPU: the other IPUs' tiles are idle
        assert idx.busy_mean_own[i] == pytest.approx(own.mean(), rel=1e-5)
        d = ex.step_details(prof, idx, int(i))
        assert d["tiles_of_step"] == tpi and d["busy_mean"] == pytest.approx(own.mean(), rel=1e-5)
        # one step's range summary and its imbalance agree: max over the mean of the same tiles
        rs = ex.range_summary(prof, idx, int(i), int(i) + 1, max_cells=None)
        if own.mean() > 0:
            assert rs.imbalance == pytest.approx(own.max() / own.mean(), rel=1e-5)


def test_insights_idle_share_is_over_each_step_s_own_tiles(prof):
    from popvision_lite.analysis.insights import COMPUTE_IDLE_WARN, insights

    st = prof.stored_table("steps")
    comp = st[st["kind"] == STEP_KIND_CODE["compute"]]
    bmax = comp["busy_max"].to_numpy(np.float64)
    own = ex.own_tiles_mean(comp["busy_mean"].to_numpy(np.float64), comp["ipu"].to_numpy(), 4)
    idle = 1 - own.sum() / bmax.sum()
    replica = 1 - comp["busy_mean"].to_numpy(np.float64).sum() / bmax.sum()
    assert idle < replica  # over the replica's tiles the three idle IPUs counted as idle tiles
    found = [f for f in insights(prof) if f.kind == "compute_imbalance"]
    assert len(found) == (idle >= COMPUTE_IDLE_WARN)
    if found:
        assert found[0].numbers["idle_share"] == pytest.approx(idle)
