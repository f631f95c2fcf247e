"""analysis.summary: headline numbers checked against direct computations on the tables."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from popvision_lite.analysis.summary import format_bytes, format_seconds, phase_cycles, summarize
from popvision_lite.profile import schema


@pytest.fixture(scope="module")
def prof(synthetic_profile):
    return synthetic_profile(num_ipus=2, tiles_per_ipu=64, num_steps=150, seed=5, over_capacity_tiles=2)


def test_summary_matches_tables(prof):
    """One whole-run phase: every stored step runs once; a step on every IPU counts on each of the 2 IPUs, and
    the time an IPU is not busy is waiting at a sync, so the parts add up to 2 x the wall time."""
    s = summarize(prof)
    steps = prof.stored_table("steps")
    assert s.total_cycles == int(steps["end_cycle"].max())
    assert s.total_seconds == pytest.approx(s.total_cycles / prof.target.clock_hz)
    lanes = np.where(steps["ipu"].to_numpy() < 0, 2, 1)
    dur = (steps["end_cycle"] - steps["start_cycle"]).to_numpy() * lanes
    by_kind = pd.Series(dur).groupby(steps["kind"].to_numpy()).sum()
    waiting = 2 * s.total_cycles - int(dur.sum())
    assert waiting >= 0 and s.totals.waiting_cycles == waiting
    for code, cyc in by_kind.items():
        k = schema.STEP_KINDS[code]
        assert s.kind_cycles[k] == cyc + (waiting if k == "sync" else 0)
    assert s.phase_cycles["exchange"] == sum(
        by_kind.get(schema.STEP_KIND_CODE[k], 0) for k in ("exchange_internal", "exchange_global"))
    assert sum(s.phase_cycles.values()) == 2 * s.total_cycles == s.totals.ipu_time_cycles
    assert sum(s.phase_share.values()) == pytest.approx(1.0)
    bt = prof.stored_table("memory_by_tile")
    assert s.peak.tile == int(bt["total"].idxmax()) and s.peak.bytes == int(bt["total"].max())
    assert (s.peak.ipu, s.peak.tile_in_ipu) == divmod(s.peak.tile, prof.target.tiles_per_ipu)
    assert s.peak.over_capacity_tiles == int(bt["over_capacity"].sum()) > 0
    assert s.fits is False  # the run dict says so, and tiles are over capacity
    op = steps["op_id"].to_numpy()
    per_op = np.bincount(op[op >= 0], weights=dur[op >= 0], minlength=len(prof.stored_table("ops")))
    assert list(s.top_ops["cycles"]) == sorted(np.rint(per_op).astype(int), reverse=True)[: len(s.top_ops)]
    assert s.top_ops["share"].iloc[0] == pytest.approx(per_op.max() / (2 * s.total_cycles))
    ls = prof.stored_table("liveness_steps")
    assert s.peak_not_always_live == ls["max_tile_bytes"].max()
    assert ls.loc[ls["lstep"] == s.peak_not_always_live_lstep, "max_tile_bytes"].iloc[0] == s.peak_not_always_live


def _fake(run, steps=None):
    t = schema.TargetInfo("ipu-mk2", "IPU Mk2", 1, 4, 100, 1e9, 6)
    mem = np.zeros((4, len(schema.MEMORY_CATEGORIES), 2), dtype=np.int64)
    mem[2, 0, 0] = 150  # tile 2 over its 100 bytes
    steps = steps if steps is not None else pd.DataFrame(
        {"kind": [0, 1, 2], "start_cycle": [0, 10, 15], "end_cycle": [10, 15, 40]})
    ops = pd.DataFrame(columns=["op_id", "name", "type", "cycles", "flops", "tiles_used"])
    return SimpleNamespace(target=t, run=run, steps=steps, ops=ops,
                           liveness_steps=pd.DataFrame(columns=["lstep", "max_tile_bytes"]),
                           memory=SimpleNamespace(array=lambda: mem))


def test_fits_falls_back_to_capacity_and_checks_are_read():
    s = summarize(_fake({"model": "m", "numeric_checks": {"logits": {"passed": True, "max_abs_err": 1e-3},
                                                          "loss": False}}))
    assert s.fits is False and s.peak.tile == 2 and s.peak.fraction == pytest.approx(1.5)
    assert s.numeric_checks_passed() is False
    assert s.total_cycles == 40 and s.phase_cycles == {"compute": 10, "exchange": 25, "sync": 5, "stream": 0, "host": 0}
    assert s.peak_not_always_live_lstep == -1 and len(s.top_ops) == 0
    s2 = summarize(_fake({"numeric_checks": {"logits": {"passed": True}}}))
    assert s2.numeric_checks_passed() is True and s2.model == "?"
    assert summarize(_fake({})).numeric_checks_passed() is None


def test_phase_cycles_empty():
    phases, kinds = phase_cycles(pd.DataFrame({"kind": [], "start_cycle": [], "end_cycle": []}))
    assert set(phases.values()) == {0} and set(kinds) == set(schema.STEP_KINDS)


def test_formatting():
    assert format_bytes(512) == "512 B"
    assert format_bytes(1536) == "1.50 KiB"
    assert format_bytes(624 * 1024) == "624.00 KiB"
    assert format_bytes(3 * 1024**3) == "3.00 GiB"
    assert format_seconds(0.00125) == "1.25 ms"
    assert format_seconds(2.0) == "2 s"
