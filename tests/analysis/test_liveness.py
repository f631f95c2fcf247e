"""analysis.liveness: live variables at a step agree with the stored per-tile liveness bytes."""

from __future__ import annotations

import numpy as np
import pytest

from popvision_lite.analysis.liveness import (
    always_live_variables,
    live_variables,
    liveness_curve,
    peak_step,
    tile_curve,
)


@pytest.fixture(scope="module")
def prof(synthetic_profile):
    return synthetic_profile(num_ipus=2, tiles_per_ipu=48, num_steps=100, seed=9)


def test_curve_and_tile_curve(prof):
    c = liveness_curve(prof)
    lt = prof.liveness.tile_bytes()
    assert list(c["lstep"]) == list(range(lt.shape[0]))
    np.testing.assert_array_equal(c["max_tile_bytes"], lt.max(axis=1))
    for t in (0, 47, 48, 95):
        np.testing.assert_array_equal(tile_curve(prof, t), lt[:, t])
    assert peak_step(prof) == int(np.argmax(lt.max(axis=1)))


def test_live_variables_are_those_spanning_the_step(prof):
    v = prof.variables
    lt = prof.liveness.tile_bytes()
    for s in (0, lt.shape[0] // 3, peak_step(prof), lt.shape[0] - 1):
        df = live_variables(prof, s)
        expect = v[(~v["always_live"]) & (v["first_lstep"] <= s) & (s <= v["last_lstep"])]
        assert set(df["var_id"]) == set(expect["var_id"])
        assert list(df["bytes"]) == sorted(df["bytes"], reverse=True)
        for t in (0, int(np.argmax(lt[s]))):
            dt = live_variables(prof, s, tile=t)
            # what is live on the tile adds up to the stored not-always-live bytes there
            assert dt["bytes_on_tile"].sum() == lt[s, t]
            assert set(dt["var_id"]) <= set(df["var_id"])


def test_always_live_listed(prof):
    a = always_live_variables(prof)
    assert a["var_id"].isin(prof.variables.loc[prof.variables["always_live"], "var_id"]).all()
    assert len(a) == int(prof.variables["always_live"].sum()) > 0
