"""Decomposition of pairs of measured MLPerf rows and the calibrated constants fitted on them (pure; the
report ``mlperf_validation`` renders these tables).

* :func:`measured_pairs`: rows of one submission family that differ in gradient accumulation or replicas,
  each with the measured and predicted (t, f) of step = G x t + f.
* :func:`fit_host_step`: ``host_step_seconds_<framework>`` per framework, fitted on ``CALIBRATION_PAIRS``.
* :func:`fit_multi_host`: ``multi_host_step_seconds``, fitted on ``MULTI_HOST_PAIR`` (one pair at the same
  gradient accumulation across a change of host servers), judged leave-one-out on the other such pairs.
"""

from __future__ import annotations

from typing import Any

from popvision_lite.devices import load_device
from popvision_lite.emulator import schedule as sch

# a mlperf_validation.Result (its case and extra["schedule"] are read; not imported: that module imports this one)
Result = Any


# The measured rows each calibrated constant of the device specs (resources/devices/ipu-*.toml,
# basis "calibrated") is fitted on: host_step_seconds_<framework> = the measured per-step cost f of the pair
# minus the emulator's per-step cost f of the same pair without host terms (fill / drain, all-reduce,
# optimizer, streams), where each pair's (t, f) solves step = G x t + f on its two rows.  Every other row is
# a check; no constant is fitted on one.
CALIBRATION_PAIRS = {
    "popart": ("gc-v2.0-bow-pod16-bert-closed", "gc-v2.0-bow-pod64-bert-closed"),
    "tensorflow": ("gc-v1.1-pod16-resnet", "gc-v1.1-pod64-resnet-closed"),
}
# multi_host_step_seconds (resources/devices/ipu-*.toml, basis "calibrated") is fitted on this pair alone: same
# gradient accumulation, 2 -> 4 host servers (one more synchronisation round, schedule.multi_host_rounds); the
# step time the emulator leaves unexplained between the two rows is the cost of that round.
MULTI_HOST_PAIR = ("gc-v1.1-pod128-resnet-closed", "gc-v1.1-pod256-resnet-closed")
CALIBRATION_ROWS = frozenset([*(i for pair in CALIBRATION_PAIRS.values() for i in pair), *MULTI_HOST_PAIR])


def measured_step_seconds(r: Result) -> float | None:
    """Seconds of one optimizer step of the measured run: samples per step / measured samples/s."""
    sps = r.case.measured_sps
    if not sps:
        return None
    c = r.case.config
    return c.get("replicas", 1) * c.get("grad_accum", 1) * r.case.samples_per_microbatch / sps


def predicted_step_seconds(r: Result, ipu_only: bool = False) -> float | None:
    """Seconds of one predicted optimizer step (``ipu_only``: without the per-step host terms)."""
    s = r.extra.get("schedule") or {}
    v = s.get("ipu_step_seconds" if ipu_only else "step_seconds")
    return float(v) if v else None


def schedule_t_f(r: Result) -> tuple[float, float] | None:
    """The prediction's own (t, f): seconds of a steady micro-batch, and the IPU-only seconds paid once per
    step (pipeline fill / drain, all-reduce, optimizer, streams) = IPU step - G x t."""
    s = r.extra.get("schedule") or {}
    ipu, cyc, steady = s.get("ipu_step_seconds"), s.get("step_cycles"), s.get("steady_cycles_per_microbatch")
    if not ipu or not cyc or steady is None:
        return None
    t = float(ipu) * float(steady) / float(cyc)
    return t, float(ipu) - float(s.get("grad_accum") or 1) * t


def _pair_key(r: Result) -> tuple:
    """Rows of one submission family: same round (SDK and code), model, device, micro-batch, pipeline depth,
    optimizer and host framework (placement and memory proportion may differ, as the Bow BERT pods' do)."""
    c = r.case.config
    return (r.case.round, r.case.model, r.case.device, c.get("batch"), c.get("packing", 1.0),
            c.get("pipeline_stages"), c.get("optimizer"), c.get("host_framework", "none"))


def solve_tf(g1: int, s1: float, g2: int, s2: float) -> tuple[float, float]:
    """(t, f) of step = G x t + f through two steps of G = g1, g2 (g1 != g2)."""
    t = (s1 - s2) / (g1 - g2)
    return t, s1 - g1 * t


def measured_pairs(results: list[Result]) -> list[dict]:
    """Pairs of measured rows of one submission family (:func:`_pair_key`) that differ in gradient
    accumulation or replicas, each next to the next larger system.  Per pair:
    measured, predicted and IPU-only predicted (t, f) when G differs, and the step ratio b / a."""
    groups: dict[tuple, list[Result]] = {}
    for r in results:
        if r.error or r.ratio is None or predicted_step_seconds(r) is None:
            continue
        groups.setdefault(_pair_key(r), []).append(r)
    out = []
    for rs in groups.values():
        rs.sort(key=lambda r: (r.case.config.get("ipus", 1), -r.case.config.get("grad_accum", 1)))
        for a, b in zip(rs, rs[1:], strict=False):
            ga, gb = a.case.config.get("grad_accum", 1), b.case.config.get("grad_accum", 1)
            steps = {k: (f(a), f(b)) for k, f in (("measured", measured_step_seconds),
                                                   ("predicted", predicted_step_seconds),
                                                   ("ipu", lambda r: predicted_step_seconds(r, True)))}
            d = dict(a=a, b=b, ga=ga, gb=gb, ra=a.case.replicas, rb=b.case.replicas,
                     framework=a.case.config.get("host_framework", "none"), steps=steps,
                     schedule=(schedule_t_f(a), schedule_t_f(b)))
            if ga != gb:
                for k, (sa, sb) in steps.items():
                    d[k] = solve_tf(ga, sa, gb, sb)
            out.append(d)
    return out


def _multi_host(r: Result) -> float:
    """The row's predicted multi-host synchronisation seconds per step (0 without one)."""
    return float(((r.extra.get("schedule") or {}).get("per_step_terms") or {}).get("multi_host", 0.0))


def fit_host_step(pairs: list[dict]) -> dict[str, dict]:
    """Per framework, the host step constant its calibration pair implies (the measured f minus the mean of
    the two rows' IPU-only fixed cost per step, :func:`schedule_t_f`), and each pair's implied value with the
    leave-one-out estimate (the mean of the framework's other pairs) and the step ratios of its two rows
    under that estimate."""
    out: dict[str, dict] = {}
    implied = {}
    for p in pairs:
        if "measured" in p and all(p["schedule"]):
            # the rows' own multi-host synchronisation is a per-step cost of its own (fit_multi_host), not the loop's
            multi = [_multi_host(r) for r in (p["a"], p["b"])]
            f_ipu = (p["schedule"][0][1] + p["schedule"][1][1] + multi[0] + multi[1]) / 2
            implied[(p["a"].case.id, p["b"].case.id)] = (p["framework"], p["measured"][1] - f_ipu, p)
    for fw, ids in CALIBRATION_PAIRS.items():
        if ids in implied:
            out[fw] = dict(fitted_on=ids, value=implied[ids][1], pairs=[])
    for key, (fw, val, p) in implied.items():
        others = [v for k, (f, v, _) in implied.items() if f == fw and k != key]
        loo = sum(others) / len(others) if others else None
        ratios = None
        if loo is not None:
            ratios = tuple(p["steps"]["measured"][i] / (p["steps"]["ipu"][i] + _multi_host(r) + loo)
                           for i, r in enumerate((p["a"], p["b"])))
        out.setdefault(fw, dict(fitted_on=None, value=None, pairs=[]))["pairs"].append(
            dict(ids=key, implied=val, loo=loo, loo_ratios=ratios))
    return out


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{1e3 * v:,.1f} ms"


def format_decomposition(pairs: list[dict]) -> str:
    """Markdown: per pair, measured vs predicted time per micro-batch t and fixed cost per step f (and the
    IPU-only f), the step ratio b / a, and each row's ratio."""
    lines = ["| pair (a -> b) | G a / b | replicas a / b | measured t / f | predicted t / f | schedule t a / b | "
             "schedule IPU-only f a / b | t predicted / measured | step b / a measured / predicted | ratio a / b |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for p in pairs:
        (ma, mb), (pa, pb) = p["steps"]["measured"], p["steps"]["predicted"]
        if "measured" in p:
            (tm, fm), (tp, fp) = p["measured"], p["predicted"]
            mt, pt, tr = f"{_ms(tm)} / {_ms(fm)}", f"{_ms(tp)} / {_ms(fp)}", f"{tp / tm:.2f}"
        else:
            mt = pt = tr = "- (same G)"
        sa, sb = p["schedule"]
        st = "-" if not (sa and sb) else f"{_ms(sa[0])} / {_ms(sb[0])}"
        sf = "-" if not (sa and sb) else f"{_ms(sa[1])} / {_ms(sb[1])}"
        lines.append(f"| {p['a'].case.id} -> {p['b'].case.id} | {p['ga']} / {p['gb']} | {p['ra']} / {p['rb']} | "
                     f"{mt} | {pt} | {st} | {sf} | {tr} | {mb / ma:.3f} / {pb / pa:.3f} | "
                     f"{p['a'].ratio:.3f} / {p['b'].ratio:.3f} |")
    return "\n".join(lines)


def format_calibration(fit: dict[str, dict]) -> str:
    """Markdown: each calibrated constant with the pair it is fitted on, and every pair's implied value
    with its leave-one-out estimate and the resulting row ratios."""
    lines = ["| constant | fitted on (pair) | fitted value | pair | value the pair implies | leave-one-out "
             "estimate (mean of the other pairs) | ratio a / b with that estimate |", "|---|---|---|---|---|---|---|"]
    for fw, d in fit.items():
        name = f"host_step_seconds_{fw}"
        fitted = " + ".join(d["fitted_on"]) if d["fitted_on"] else "-"
        for p in d["pairs"]:
            r = "-" if p["loo_ratios"] is None else f"{p['loo_ratios'][0]:.3f} / {p['loo_ratios'][1]:.3f}"
            lines.append(f"| {name} | {fitted} | {_ms(d['value'])} | {' -> '.join(p['ids'])} | {_ms(p['implied'])} | "
                         f"{_ms(p['loo'])} | {r} |")
    return "\n".join(lines)


def _rounds(r: Result) -> int:
    """Host synchronisation rounds of a row's system (schedule.multi_host_rounds with its device's hosts)."""
    em = dict(load_device(r.case.device).emulator)
    return sch.multi_host_rounds(em, int(r.case.config.get("ipus", r.case.config.get("replicas", 1))))


def _without_multi_host(r: Result) -> float | None:
    """Predicted step seconds without the multi-host term."""
    step = predicted_step_seconds(r)
    return None if step is None else step - _multi_host(r)


def fit_multi_host(pairs: list[dict]) -> dict:
    """``multi_host_step_seconds`` fitted on ``MULTI_HOST_PAIR``, and every pair of rows whose systems differ in
    host synchronisation rounds: the value it implies (same G only: the measured step change minus the
    predicted change without the term, per added round), its leave-one-out estimate (the mean of the other
    same-G pairs' values) and the step ratios b / a measured, predicted with the term and without it."""
    out = dict(fitted_on=MULTI_HOST_PAIR, value=None, pairs=[])
    rows = []
    for p in pairs:
        a, b = p["a"], p["b"]
        da = _rounds(b) - _rounds(a)
        (ma, mb), (pa, pb) = p["steps"]["measured"], p["steps"]["predicted"]
        wa, wb = _without_multi_host(a), _without_multi_host(b)
        if da == 0 or None in (ma, mb, pa, pb, wa, wb):
            continue
        implied = ((mb - ma) - (wb - wa)) / da if p["ga"] == p["gb"] else None
        rows.append(dict(ids=(a.case.id, b.case.id), rounds=(_rounds(a), _rounds(b)), same_g=p["ga"] == p["gb"],
                         implied=implied, measured_ratio=mb / ma, predicted_ratio=pb / pa, without_ratio=wb / wa))
    for d in rows:
        if d["ids"] == MULTI_HOST_PAIR:
            out["value"] = d["implied"]
        others = [o["implied"] for o in rows if o is not d and o["implied"] is not None]
        d["loo"] = sum(others) / len(others) if others else None
    out["pairs"] = rows
    return out


def format_multi_host(fit: dict) -> str:
    """Markdown: the multi-host constant, each pair of rows across host servers with the value it implies,
    leave-one-out, and the step ratio b / a measured vs predicted with and without the term."""
    lines = [f"`multi_host_step_seconds` fitted on {' -> '.join(fit['fitted_on'])}: {_ms(fit['value'])} per "
             "round (ceil(log2 host servers) rounds per step).", "",
             "| pair (a -> b) | rounds a / b | same G | value the pair implies | leave-one-out estimate | "
             "step b / a measured | predicted | without the term |", "|---|---|---|---|---|---|---|---|"]
    for d in fit["pairs"]:
        lines.append(f"| {' -> '.join(d['ids'])} | {d['rounds'][0]} / {d['rounds'][1]} | "
                     f"{'yes' if d['same_g'] else 'no'} | {_ms(d['implied'])} | {_ms(d['loo'])} | "
                     f"{d['measured_ratio']:.3f} | {d['predicted_ratio']:.3f} | {d['without_ratio']:.3f} |")
    return "\n".join(lines)


def loo_constants(results: list[Result]) -> dict[str, dict]:
    """Per row id in a calibration set: the value each calibrated constant takes when fitted WITHOUT that row's
    pair (the leave-one-out estimates of :func:`fit_host_step` and :func:`fit_multi_host`):
    ``{row id: {"host_step": seconds, "multi_host": seconds per round}}`` (a key only where the row is in that
    constant's fit set and another pair gives an estimate)."""
    pairs = measured_pairs(results)
    out: dict[str, dict] = {}
    for fw, d in fit_host_step(pairs).items():
        ids = CALIBRATION_PAIRS.get(fw)
        for p in d["pairs"]:
            if p["ids"] == ids and p["loo"] is not None:
                for rid in ids:
                    out.setdefault(rid, {})["host_step"] = p["loo"]
    for p in fit_multi_host(pairs)["pairs"]:
        if p["ids"] == MULTI_HOST_PAIR and p.get("loo") is not None:
            for rid in MULTI_HOST_PAIR:
                out.setdefault(rid, {})["multi_host"] = p["loo"]
    return out


def loo_step_seconds(r: Result, loo: dict[str, dict]) -> float | None:
    """The row's predicted step with every calibrated constant it rests on fitted without it (its plain prediction
    when no constant was fitted on it): the IPUs' step + the host input + the host step + the multi-host rounds."""
    step = predicted_step_seconds(r)
    if step is None:
        return None
    mine = loo.get(r.case.id)
    if not mine:
        return step
    s = r.extra.get("schedule") or {}
    terms = dict(s.get("per_step_terms") or {})
    if "host_step" in mine:
        terms["host_step"] = mine["host_step"]
    if "multi_host" in mine:
        terms["multi_host"] = mine["multi_host"] * _rounds(r)
    return float(s.get("ipu_step_seconds") or 0.0) + sum(float(v) for v in terms.values())


def format_constants(results: list[Result]) -> str:
    """Markdown, calibration in the open: each calibrated constant, the pair it is fitted on, and every measured
    row whose prediction includes it: its ratio with the constant, without it (the term left out) and with the
    constant fitted without the row (leave-one-out; the same as with it for a row no constant was fitted on)."""
    loo = loo_constants(results)
    consts = [(f"host_step_seconds_{fw}", " + ".join(ids), "host_step", fw) for fw, ids in CALIBRATION_PAIRS.items()]
    consts.append(("multi_host_step_seconds", " + ".join(MULTI_HOST_PAIR) + " (ONE pair)", "multi_host", None))
    lines = ["| constant | fitted on | row | role | term in its step | ratio with it | without it | "
             "fitted without the row (leave-one-out) |", "|---|---|---|---|---|---|---|---|"]
    for name, fitted, term, fw in consts:
        for r in results:
            if r.error or r.ratio is None:
                continue
            s = r.extra.get("schedule") or {}
            if fw is not None and s.get("host_framework") != fw:
                continue
            t = float((s.get("per_step_terms") or {}).get(term, 0.0) or 0.0)
            if t <= 0:
                continue
            step = predicted_step_seconds(r)
            without = r.ratio * step / (step - t)
            step_loo = loo_step_seconds(r, {r.case.id: {term: loo[r.case.id][term]}}
                                        if term in loo.get(r.case.id, {}) else {})
            with_loo = r.ratio * step / step_loo if step_loo else r.ratio
            role = "calibration" if r.case.id in CALIBRATION_ROWS else "check"
            lines.append(f"| {name} | {fitted} | {r.case.id} | {role} | {1e3 * t:,.1f} ms of {1e3 * step:,.1f} ms | "
                         f"{r.ratio:.3f} | {without:.3f} | {with_loo:.3f} |")
    return "\n".join(lines)
