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
    v = prof.stored_table("variables")
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
    assert a["var_id"].isin(prof.stored_table("variables").loc[prof.stored_table("variables")["always_live"], "var_id"]).all()
    assert len(a) == int(prof.stored_table("variables")["always_live"].sum()) > 0


def test_ipu_spans_mark_each_ipus_programs():
    """A pipelined run's liveness steps come IPU by IPU: ipu_spans finds the runs (the view marks them)."""
    from pathlib import Path

    import popvision_lite as pvl
    from popvision_lite.analysis.liveness import ipu_spans

    samples = Path(__file__).resolve().parents[2] / "sample_profiles"
    with pvl.open(samples / "bert_mini_4ipu_pipeline.pvl") as p:
        spans = ipu_spans(p)
        ls = p.stored_table("liveness_steps")
        progs = p.stored_table("programs").set_index("prog_id")
        steps = p.stored_table("steps")
    assert list(spans["ipu"]) == [0, 1, 2, 3]
    assert spans["first_lstep"].iloc[0] == 0 and spans["last_lstep"].iloc[-1] == ls["lstep"].max()
    assert (spans["first_lstep"].to_numpy()[1:] == spans["last_lstep"].to_numpy()[:-1] + 1).all()
    for r in spans.itertuples(index=False):  # every step issued inside a span ran on that span's IPU
        sub = ls[(ls["lstep"] >= r.first_lstep) & (ls["lstep"] <= r.last_lstep)]
        first = progs.loc[sub["prog_id"], "first_step"].to_numpy()
        ipus = steps["ipu"].to_numpy()[first[first >= 0]]
        assert set(ipus) <= {r.ipu, -1}
    with pvl.open(samples / "bert_tiny_mk2.pvl") as p:
        assert list(ipu_spans(p)["ipu"]) == [-1]
