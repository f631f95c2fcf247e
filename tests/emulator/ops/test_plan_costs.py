"""A split's cost kept across memory budgets (ops/plan_costs.py): plan_matmul chooses what costing every split
afresh chooses, whatever the order the budgets come in, and a cost kept as a lower bound is handed out again only
under a bound it exceeds."""

import dataclasses

import numpy as np

from popvision_lite.emulator.ops import plan_costs as PC
from popvision_lite.emulator.ops import planners as PL

MK2 = PL.PlanTarget(tiles=1472, sram_bytes_per_tile=624 * 1024, flops_per_cycle_fp16=128,
                    flops_per_cycle_fp32=32, exchange_bytes_per_cycle=4, shared_bus_tiles=2)
FRACTIONS = (0.6, 0.14, 1.0, 0.25)
# operands as the matmuls find them (a weight laid out for the plan; both read transposed), and two targets whose
# costs differ (half partials): a cost kept must not serve another layout or target
FLAGS = ((False, False, True), (True, True, False))
TARGETS = (MK2, dataclasses.replace(MK2, partials_bytes=2))


def _fresh(monkeypatch):
    """plan_matmul with every split costed afresh (nothing kept across plans)."""
    monkeypatch.setattr(PL, "split_cost", lambda cost, *a: cost(*a[:-1], bound=a[-1]))
    PL.plan_matmul.cache_clear()


def _plans(shapes):
    out = []
    for f in FRACTIONS:
        for base in TARGETS:
            target = dataclasses.replace(base, usable_fraction=f)
            for M, N, K in shapes:
                for ta, tb, laid in FLAGS:
                    p = PL.plan_matmul(M, N, K, target, "fp16", tiles=1472 // (1 + M % 2), exact_k=True, ta=ta,
                                       tb=tb, b_laid_out=laid)
                    out.append(dataclasses.astuple(p))
    return out


def test_plans_with_costs_kept_are_the_fresh_plans(monkeypatch):
    rng = np.random.default_rng(5)
    shapes = [(1024, 1024, 1024), (1536, 768, 3072), (10052, 1024, 1024)]
    shapes += [tuple(int(x) for x in rng.integers(16, 6000, 3)) for _ in range(3)]
    PC.clear()
    PL.plan_matmul.cache_clear()
    kept = _plans(shapes)
    assert len(PC._costs) > 0
    with monkeypatch.context() as m:
        _fresh(m)
        fresh = _plans(shapes)
    PL.plan_matmul.cache_clear()
    assert kept == fresh


def test_a_lower_bound_is_reused_only_above_its_bound():
    calls = []

    def cost(*a, bound):
        calls.append(bound)
        # a K-split split whose reduction is left out past the bound: (bm, bn, bk, bytes, compute, exchange, reduce)
        return (1, 1, 1, 10, 100, 50, 5 if bound < 1000 else 500)

    PC.clear()
    args = (64, 64, 64, 2, 2, 4, 1, MK2, 2, "fp16", False, False)
    assert PC.split_cost(cost, *args, 120)[6] == 5  # 155 > 120: a lower bound
    assert PC.split_cost(cost, *args, 150)[6] == 5 and calls == [120]  # 155 > 150: the same choice, not costed
    assert PC.split_cost(cost, *args, 2000)[6] == 500 and calls == [120, 2000]  # within 2000: costed again, exact
    other = dataclasses.replace(MK2, usable_fraction=0.1, sram_bytes_per_tile=1)
    assert PC.split_cost(cost, *args[:7], other, *args[8:], 10)[6] == 500 and calls == [120, 2000]
    assert PC.split_cost(cost, *args[:2], 65, *args[3:], 10)[6] == 5 and len(calls) == 3  # another shape
    PC.clear()
