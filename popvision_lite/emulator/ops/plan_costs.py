"""A matmul split's cost kept across plans that differ in the memory budget alone (issue 49, decision 0501).

``planners.plan_matmul`` costs the splits that fit ``target.budget_bytes``: the budget (the available memory
proportion of the tile's SRAM) decides which splits are costed, never what a split costs.  ``validate`` plans the
same (M, N, K) under several proportions (its BERT / GPT rows: 0.14 to 1.0), so a split is costed once per process
here, under a key that leaves the proportion and the SRAM size out.

``plan_matmul`` passes a bound (the best total so far): past it ``_matmul_cost`` leaves out the rest of the K
reduction and returns a lower bound.  A kept cost is exact when its total is within the bound it was costed under
(or the split has no K reduction); a lower bound is handed out again only under a bound it already exceeds, where
any answer above the bound makes the same choice (the split loses: its key is above the best's), and otherwise the
split is costed again.  The plans are the same (tests/emulator/ops/test_plan_costs.py)."""

from __future__ import annotations

import dataclasses
import threading

KEPT = 1 << 15  # costs kept (about 300 bytes each): past it they are dropped all at once

_lock = threading.Lock()
_costs: dict = {}
_targets: dict = {}  # id(target) -> (target, the target with the proportion and SRAM left out)


def _cost_target(target):
    hit = _targets.get(id(target))
    if hit is not None and hit[0] is target:
        return hit[1]
    key = dataclasses.replace(target, usable_fraction=0.0, sram_bytes_per_tile=0)
    with _lock:
        if len(_targets) > 256:
            _targets.clear()
        _targets[id(target)] = (target, key)
    return key


def split_cost(cost, M, N, K, pm, pn, pk, ps, target, in_b, precision, ra, rb, bound):
    """``cost(M, N, K, pm, pn, pk, ps, target, in_b, precision, ra, rb, bound=bound)`` (planners._matmul_cost:
    (bm, bn, bk, bytes per tile, compute, exchange, reduce)), kept across budgets (module doc)."""
    key = (_cost_target(target), M, N, K, pm, pn, pk, ps, in_b, precision, ra, rb)
    hit = _costs.get(key)
    if hit is not None:
        res, exact = hit
        if exact or res[4] + res[5] + res[6] > bound:
            return res
    res = cost(M, N, K, pm, pn, pk, ps, target, in_b, precision, ra, rb, bound=bound)
    with _lock:
        if len(_costs) >= KEPT:
            _costs.clear()
        _costs[key] = (res, pk == 1 or res[4] + res[5] + res[6] <= bound)
    return res


def clear() -> None:
    """Drop every kept cost (tests)."""
    with _lock:
        _costs.clear()
        _targets.clear()
