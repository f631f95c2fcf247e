"""Analysis of file-derived values is bounded by checked values (issue 45): the GPU micro-batch search, the model
pass's kernel list, the verdict's cost ratio and the Chrome export's arithmetic and lanes."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import numpy as np
import pytest

import popvision_lite as pvl
from popvision_lite.analysis import gpu_estimate as ge
from popvision_lite.analysis import model_pass as wl
from popvision_lite.analysis.verdict import Side, Verdict
from popvision_lite.errors import ConfigError
from popvision_lite.profile import chrome_trace
from popvision_lite.testing.hostile_run import with_run

ROOT = Path(__file__).resolve().parents[2]
PIPE = ROOT / "sample_profiles" / "bert_mini_4ipu_pipeline.pvl"


def test_divisors_in_order_and_in_square_root_steps():
    assert ge.divisors(1) == [1] and ge.divisors(12) == [1, 2, 3, 4, 6, 12] and ge.divisors(49) == [1, 7, 49]
    assert ge.divisors(2 ** 31 - 1) == [1, 2 ** 31 - 1]  # a prime: 46,341 trial divisions
    with pytest.raises(ValueError):
        ge.divisors(ge.MAX_PASSES + 1)


def test_fitting_micro_batch_of_a_huge_pass_count_returns_at_once():
    """replicas x grad_accum of 1e308 x 10^30 counted divisors one by one: the app froze on open."""
    t0 = time.perf_counter()
    for per_gpu in (4 * 1e300, 4.0 * (ge.MAX_PASSES + 1), 4.0 * (2 ** 31 - 1)):
        mb = ge.fitting_micro_batch(4, per_gpu, params=0, optimizer="sgd", activation_bytes_per_sample=1e9,
                                    gpu="a100-80gb")
        assert mb == 4  # a prime or unsearched pass count: the op list's own micro-batch
    assert time.perf_counter() - t0 < 2


def test_a_model_pass_past_the_kernel_bound_is_refused(tmp_path):
    """Counts within each field's bound can still multiply into an allocation no model needs (10.7 PiB)."""
    with pvl.open(PIPE) as p:
        n = len(p.ops)
        g = p.schedule.grad_accum
    calls = 5_000

    def many(run):
        run["op_counts"].update(calls_per_microbatch=[calls] * n, runs_per_call=[1] * n, runs_per_step=[calls * g] * n)

    path = with_run(PIPE, tmp_path / "many.pvl", many)
    with pvl.open(path) as p, pytest.raises(ConfigError, match=f"kernel launches for one model pass \\(at most "
                                                                f"{wl.MAX_KERNELS:,}\\)"):
        wl.model_pass(p)


def _side(kind, usd_per_chip_hour, sps=100.0):
    return Side(label=kind, kind=kind, chips=1, samples_per_second=sps, basis="", fits=True, bound_by="",
                usd_per_chip_hour=usd_per_chip_hour, price_source="")


def test_the_cheaper_ratio_of_a_side_that_costs_nothing_is_not_a_division_by_zero():
    v = Verdict(model="m", samples=1, ipu=_side("ipu", 0.0), gpu=_side("gpu", 2.0), gpu_same_chips=_side("gpu", 2.0),
                gpu_bound_samples_per_second=1.0, gpu_estimate=None)
    text = v.headline()
    assert "cost ratio n/a" in text and "cheaper" not in text
    v.ipu = _side("ipu", 1.0)
    assert "x cheaper per sample" in v.headline()


def test_the_chrome_encoder_writes_what_orjson_refuses():
    enc = chrome_trace._encoder()
    for ev in ({"n": 2 ** 70}, {"name": "bad \ud800 surrogate"}):
        out = enc(ev)
        assert json.loads(out) == ev
        out.encode("utf-8")  # written to a UTF-8 file: no lone surrogate reaches it


def test_chrome_times_are_checked_not_wrapped():
    assert chrome_trace._ns(np.array([0, 10]), 0, 2.0).tolist() == [0, 20]
    with pytest.raises(ConfigError, match="trace times past"):
        chrome_trace._ns(np.array([2 ** 62]), 0, 4.0)


def test_steps_that_all_overlap_use_a_bounded_number_of_threads():
    n = 5_000
    start = np.zeros(n, np.int64)
    end = np.full(n, 1000, np.int64)
    t0 = time.perf_counter()
    idx, ts, dur, sub = chrome_trace.lane_times(start, end, np.arange(n))
    assert max(sub) == chrome_trace.MAX_LANE_THREADS - 1 and len(idx) == n and min(dur) >= 1
    assert time.perf_counter() - t0 < 5
    assert math.isfinite(sum(dur))
