"""Insights on profiles made by the emulator: the bundled samples in sample_profiles/ when they are
there (an out-of-memory run, a recompute on/off pair), else a tiny BERT pair emulated here."""

from pathlib import Path

import numpy as np
import pytest

import popvision_lite as pvl
from popvision_lite.analysis import insights as I
from popvision_lite.analysis.program_tree import run_cycles

SAMPLES = Path(__file__).resolve().parents[2] / "sample_profiles"


def _samples():
    out = []
    for p in sorted(SAMPLES.glob("*.pvl")):
        try:
            prof = pvl.open(p)
        except pvl.ProfileError:
            continue
        out.append(prof)
    return out


def _config_key(p):
    cfg = dict((p.run or {}).get("config") or {})
    cfg.pop("recompute", None)
    return (p.run.get("model"), p.target.device, p.target.num_ipus, repr(sorted(cfg.items())))


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """(base, recompute) of one model: a bundled pair if any, else emulated now."""
    profs = _samples()
    by_key = {}
    for p in profs:
        by_key.setdefault(_config_key(p), {})[I.is_recompute_run(p)] = p
    for d in by_key.values():
        if False in d and True in d:
            yield d[False], d[True]
            break
    else:
        from popvision_lite.emulator.models.config import make_config
        from popvision_lite.emulator.models.emulated import run_model

        tmp = tmp_path_factory.mktemp("emu")
        paths = []
        for rc in (False, True):
            cfg = make_config("bert", recompute=rc, layers=2, batch=1, seq=32, hidden=64, heads=2)
            run_model(cfg, timing_only=True, profile_path=tmp / f"bert-rc{int(rc)}.pvl")
            paths.append(tmp / f"bert-rc{int(rc)}.pvl")
        profs += [pvl.open(paths[0]), pvl.open(paths[1])]
        yield profs[-2], profs[-1]
    for p in profs:
        p.close()


def test_split_of_live_bytes_partitions_the_liveness(pair):
    # held + own + other must add up to the emulator's not-always-live bytes at every step checked
    for p in pair:
        ls = p.stored_table("liveness_steps")
        for k in np.linspace(0, len(ls) - 1, 7).astype(int).tolist() + [int(ls["total_bytes"].idxmax())]:
            lstep = int(ls["lstep"].iloc[k])
            parts = I.split_live_at(p, lstep)
            total = sum(int(parts[x]["bytes"].sum()) for x in ("held", "own", "other"))
            assert total == int(ls["total_bytes"].iloc[k]), lstep


def test_recompute_pair_says_what_it_saved(pair):
    base, rc = pair
    assert not I.is_recompute_run(base) and I.is_recompute_run(rc)
    f = I.recompute_savings(rc, base)
    saved = int(base.stored_table("liveness_steps")["total_bytes"].max() - rc.liveness_steps["total_bytes"].max())
    assert f.numbers["saved_peak_bytes"] == saved
    assert f.numbers["extra_cycles"] == run_cycles(rc) - run_cycles(base)
    bt0, bt1 = base.stored_table("memory_by_tile"), rc.memory.by_tile()
    assert f.numbers["saved_max_tile_bytes"] == int(bt0["total"].max() - bt1["total_bytes"].max())
    if saved > 0:
        assert f"saved {saved:,} B" in f.text
    assert f"Tiles over capacity: {int(bt0['over_capacity'].sum()):,} -> {int(bt1['over_capacity'].sum()):,}" in f.text


def test_recompute_run_reports_its_cost(pair):
    _, rc = pair
    f = {x.kind: x for x in I.insights(rc)}["recompute_on"]
    ops = rc.ops
    rec = ops[ops["name"].str.contains("recompute/")]
    assert len(rec) > 0 and f.numbers["recompute_cycles"] == int(rec["cycles"].sum())
    assert f"{int(rec['cycles'].sum()):,} cycles" in f.text


def test_peak_advice_on_base_run(pair):
    base, _ = pair
    found = {x.kind: x for x in I.insights(base)}
    ls = base.stored_table("liveness_steps")
    pk = int(ls["lstep"][ls["total_bytes"].idxmax()])
    parts = I.split_live_at(base, pk)
    held, own = int(parts["held"]["bytes"].sum()), int(parts["own"]["bytes"].sum())
    peak = int(ls["total_bytes"].max())
    # whichever advice applies names the peak's numbers
    advice = [found[k] for k in ("recompute", "peak_temporaries") if k in found]
    if held >= peak / 2 or own >= peak / 2:
        assert advice
    for a in advice:
        assert a.numbers["peak_bytes"] == peak and a.numbers["held_bytes"] == held
        assert f"{peak:,} B" in a.text


def test_out_of_memory_sample():
    """The out-of-memory sample names its worst tiles, what binds them and the fit advisor's command."""
    oom = [p for p in _samples() if p.stored_table("memory_by_tile")["over_capacity"].any()]
    assert oom, "sample_profiles/ lacks the out-of-memory sample (regenerate: popvision-lite make-samples)"
    for p in oom:
        found = {x.kind: x for x in I.insights(p)}
        bt = p.stored_table("memory_by_tile")
        over = bt["total"] - bt["capacity"]
        f = found["oom"]
        t = f.numbers["worst_tiles"][0]
        assert over.loc[t] == over.max()
        assert f"{I._tile_name(p, t)} needs {int(bt.loc[t, 'total']):,} B" in f.text
        assert f"over by {int(over.max()):,} B" in f.text
        assert f.numbers["tiles_over"] == int((over > 0).sum())
        # what binds it (fit_constraint) and the search for what fits, instead of generic advice
        assert found["binding"].numbers["cause"] in ("total bytes", "uneven layout")
        assert f"popvision-lite fit {p.path}" in found["fit_search"].text
        p.close()
