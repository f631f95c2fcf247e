"""Every byte on a tile belongs to a listed item: the variables on a pipelined run's fullest tile (always-live,
live at its peak liveness step: the pipeline stash among them) and its code add up to its bytes, with
recomputation off (the stash then holds every layer's saved activations: the POD16 BERT OOM of issue 46)."""

from __future__ import annotations

import numpy as np
import pytest

from popvision_lite.analysis.liveness import live_variables
from popvision_lite.analysis.tile_memory import TileMemory
from popvision_lite.emulator.models.config import make_config
from popvision_lite.emulator.models.emulated import run_model, write_run
from popvision_lite.profile.reader import open_profile
from tests.support.devices import ID as SMALL  # the shipped Mk2 cut to 92 tiles (decision 0395)


def _run(tmp_path_factory, name, **kw):
    cfg = make_config("bert-tiny", layers=4, seq=32, batch=2, ipus=4, **kw)
    path = tmp_path_factory.mktemp("stash") / f"{name}.pvl"
    write_run(run_model(cfg, device=SMALL, timing_only=True), path)
    return open_profile(path)


@pytest.fixture(scope="module")
def no_recompute(tmp_path_factory):
    # LAMB with off-chip state: its stream buffers are not-always-live bytes too
    return _run(tmp_path_factory, "norec", recompute=False, optimizer="lamb", optimizer_state="offchip")


@pytest.fixture(scope="module")
def recompute(tmp_path_factory):
    return _run(tmp_path_factory, "rec", recompute=True, optimizer="lamb", optimizer_state="offchip")


def test_the_fullest_tile_s_variables_and_code_add_up_to_its_bytes_at_the_peak(no_recompute):
    p = no_recompute
    tm = TileMemory(p)
    tile = int(np.argmax(tm.total))
    c = tm.contents(tile)
    assert int(c["bytes_on_tile"].sum()) == int(tm.total[tile])
    # the memory array's not-always-live bytes of every tile are the peak of its liveness curve
    ltb = np.asarray(p.liveness.tile_bytes(), np.int64)
    assert np.array_equal(p.memory.array()[:, :, 1].sum(axis=1), ltb.max(axis=0))
    # and at each IPU's own fullest tile too (the stash sits on IPUs 0 .. S-2)
    ipu = np.arange(tm.num_tiles) // tm.tiles_per_ipu
    for i in range(int(p.target.num_ipus)):
        t = int(np.flatnonzero(ipu == i)[np.argmax(tm.total[ipu == i])])
        assert int(tm.contents(t)["bytes_on_tile"].sum()) == int(tm.total[t]), f"IPU {i} tile {t}"


def test_the_stash_is_a_variable_live_through_the_stage_program(no_recompute, recompute):
    for p, words in ((no_recompute, "input and saved activations"), (recompute, "input of")):
        v = p.stored_table("variables")
        stash = v[v["name"].str.contains("pipeline stash")]
        assert len(stash) == int(p.target.num_ipus) - 1  # the last stage holds no stash
        assert stash["name"].str.contains(words).all()
        assert not stash["always_live"].any()
        first = stash.iloc[0]
        # live at every liveness step of its IPU's stage program: listed at the first and the last
        for lstep in (int(first["first_lstep"]), int(first["last_lstep"])):
            assert int(first["var_id"]) in set(live_variables(p, lstep)["var_id"])
    # without recomputation the stash holds the saved activations too: larger, on the same IPU
    def stash_bytes(p):
        v = p.stored_table("variables")
        return int(v[v["name"].str.startswith("ipu0/pipeline stash")]["bytes"].sum())
    assert stash_bytes(no_recompute) > stash_bytes(recompute) > 0


def test_the_off_chip_optimizer_s_stream_buffer_is_live_at_the_optimizer_s_liveness_step(no_recompute):
    p = no_recompute
    v = p.stored_table("variables")
    buf = v[v["name"].str.contains("stream buffer")]
    assert len(buf) == int(p.target.num_ipus)
    ls = p.stored_table("liveness_steps").set_index("lstep")
    for r in buf.itertuples():
        assert r.first_lstep == r.last_lstep and "optimizer" in ls.loc[r.first_lstep, "name"]
        live = live_variables(p, int(r.first_lstep))
        assert int(r.var_id) in set(live["var_id"]) and not live["name"].str.contains("pipeline stash").any()


def test_a_format_3_1_file_names_the_bytes_no_variable_lists():
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "fixtures" / "v3.1" / "bert_large_1ipu_oom.pvl"
    with open_profile(path) as p:
        assert (p.format_version, p.format_minor) == (3, 1)
        tm = TileMemory(p)
        tile = int(np.argmax(tm.total))
        c = tm.contents(tile)
        assert int(c["bytes_on_tile"].sum()) == int(tm.total[tile])
        rest = c[c["kind"] == "unlisted"]
        assert len(rest) == 1 and "3.1" in rest["name"].iat[0] and int(rest["bytes_on_tile"].iat[0]) > 0


def test_insights_count_the_stash_on_an_out_of_memory_tile(tmp_path_factory):
    """Recomputation off and over capacity: the recompute advice names the stash on the worst tile (the saved
    activations of the micro-batches in flight), not only the activations held across the peak."""
    from popvision_lite.analysis.insights import insights

    # over the test device's capacity (on the shipped 1,472 tiles: seq 512 x batch 64); the worst tile holds stash
    cfg = make_config("bert-tiny", layers=4, seq=256, batch=32, ipus=4, grad_accum=8, recompute=False)
    path = tmp_path_factory.mktemp("stash") / "oom.pvl"
    write_run(run_model(cfg, device=SMALL, timing_only=True), path)
    with open_profile(path) as p:
        f = next(f for f in insights(p) if f.kind == "recompute")
        t, lstep = f.numbers["worst_tile"], f.numbers["worst_tile_lstep"]
        live = live_variables(p, lstep, tile=t)
        stash = int(live[live["name"].str.contains("pipeline stash")]["bytes_on_tile"].sum())
        assert stash > 0 and f.numbers["worst_tile_stash_bytes"] == stash
        assert f"the pipeline stash on this tile takes {stash:,} B" in f.text
        assert f.numbers["worst_tile_over"] > 0
