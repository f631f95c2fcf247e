"""The verdicts of bench/speed.py and the fit of bench/host_memory.py, on made-up measurements (no timing is
run): a speed row's verdict is a ratio to the reference workload, so a machine N times slower gives the same
verdict; the host-memory fit recovers coefficients that generated the peaks and drops a negative term."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from bench import host_memory, reference, speed  # noqa: E402


class _Ref:
    def __init__(self, median):
        self.median = median


def _verdict(row_cpu: float, ref_cpu: float, target: float):
    res = dict(row="x", rc=0, cpu_s=row_cpu, cpu_median_s=row_cpu, tail=[])
    r = dict(cmd=["x"], target_cpu=target)
    notes, goals = speed.judge(res, r, _Ref(ref_cpu), {}, quick=False)
    return res, notes, goals


@pytest.mark.parametrize("slower", [1.0, 2.0, 3.7])
def test_speed_verdict_holds_on_a_slower_machine(slower):
    box = reference.BOX_SECONDS
    # a row at 0.9x its target on the reference box, and one at 1.2x, measured on a machine `slower` times slower
    ok, ok_notes, _ = _verdict(0.9 * 6.0 * slower, box * slower, 6.0)
    past, past_notes, _ = _verdict(1.2 * 6.0 * slower, box * slower, 6.0)
    assert not ok_notes and ok["box_median_s"] == pytest.approx(5.4, abs=0.01)
    assert past_notes and past_notes[0].startswith("past target")
    assert past["box_median_s"] == pytest.approx(7.2, abs=0.01)


def test_speed_flags_a_row_against_its_previous_ratio_not_its_seconds():
    prev = {"x": dict(quick=False, rc=0, ratio=1.0)}
    r = dict(cmd=["x"], target_cpu=100.0)
    # twice the seconds on a machine twice as slow: the same ratio, no flag
    res = dict(row="x", rc=0, cpu_s=4.0, cpu_median_s=4.0, tail=[])
    notes, _ = speed.judge(res, r, _Ref(4.0), prev, quick=False)
    assert not notes
    res = dict(row="x", rc=0, cpu_s=6.0, cpu_median_s=6.0, tail=[])
    notes, _ = speed.judge(res, r, _Ref(4.0), prev, quick=False)  # ratio 1.5 > 1.3 x 1.0
    assert notes and notes[0].startswith("FLAG")


def test_host_memory_fit_recovers_the_coefficients_and_drops_a_negative_term():
    coef = {"base": 3e8, "a": 10.0, "b": 2.0}
    counts = [dict(a=a, b=b, c=c) for a, b, c in
              [(1e7, 5e7, 1.0), (4e7, 1e8, 3.0), (9e7, 2e7, 2.0), (2e7, 3e8, 5.0), (6e7, 6e7, 4.0)]]
    # peaks that the coefficients give exactly (c contributes nothing); the fit aims at CENTRE, so it scales them
    rows = [dict(name=f"r{i}", path="composed", counts=c,
                 peak_bytes=coef["base"] + coef["a"] * c["a"] + coef["b"] * c["b"]) for i, c in enumerate(counts)]
    got = host_memory._solve(rows, ["a", "b", "c"])
    for k in ("base", "a", "b"):
        assert got[k] == pytest.approx(coef[k] * host_memory.CENTRE, rel=1e-6)
    assert got["c"] == pytest.approx(0.0, abs=1e-3)
    # a term that only hurts comes out negative and is dropped, the rest refitted
    for r, c in zip(rows, [9.0, 1.0, 7.0, 2.0, 5.0], strict=True):
        r["counts"] = dict(r["counts"], c=c)
        r["peak_bytes"] -= 1e7 * c  # peaks that fall as c grows
    got = host_memory._solve(rows, ["a", "b", "c"])
    assert got["c"] == 0.0 and got["a"] > 0 and got["b"] > 0


def test_host_memory_fit_leaves_each_fit_row_out():
    rows = [dict(name=n, path="composed", counts=dict(a=float(i + 1)), peak_bytes=1e9 + 1e8 * (i + 1))
            for i, n in enumerate(host_memory.FIT_ROWS[:4])]
    f = host_memory.fit(rows)["composed"]
    assert set(f["leave_one_out"]) == {r["name"] for r in rows}
    # exact linear peaks: each row predicted from the others at the fit's aim
    for ratio in f["leave_one_out"].values():
        assert ratio == pytest.approx(host_memory.CENTRE, rel=1e-6)
