"""One format for a bench's goals: each row a measured value next to its target and the ratio to it.

A script builds rows with :func:`row`, prints them with :func:`print_rows` and emits them in its
``BENCH-RESULT`` line under ``"targets"``; ``python -m bench`` gathers every script's rows into one
table (the run's output and docs/performance-results.md)."""

from __future__ import annotations

import json


def row(what: str, value: float, target: float, unit: str = "", at_least: bool = False) -> dict:
    """``value`` against ``target`` (an upper bound, or a lower bound with ``at_least``).  ``ratio`` is
    value / target for an upper bound and target / value for a lower bound, so <= 1 always means met."""
    value, target = float(value), float(target)
    if at_least:
        ratio = target / value if value else float("inf")
    else:
        ratio = value / target if target else float("inf")
    return {"what": what, "value": value, "target": target, "unit": unit, "bound": ">=" if at_least else "<=",
            "ratio": ratio, "met": ratio <= 1.0}


def fmt(v: float) -> str:
    return f"{v:.3g}" if abs(v) < 100 else f"{v:,.0f}"


def lines(rows: list[dict]) -> list[str]:
    out = [f"  {'goal':58s} {'measured':>10s} {'target':>12s} {'ratio':>6s}"]
    for r in rows:
        tgt = f"{r['bound']} {fmt(r['target'])}{r['unit']}"
        out.append(f"  {r['what'][:58]:58s} {fmt(r['value']) + r['unit']:>10s} {tgt:>12s} {r['ratio']:6.2f}  "
                   f"{'ok' if r['met'] else 'MISSED'}")
    return out


def print_rows(rows: list[dict]) -> None:
    print("\n".join(lines(rows)))


def bench_result(name: str, rows: list[dict], **extra) -> str:
    return "BENCH-RESULT " + json.dumps({"bench": name, **extra, "targets": rows})
