"""Compare two runs A and B (pure numpy/pandas over two Profiles, no Qt).

``compare(a, b)`` -> :class:`Comparison` with

* ``headline``: one row per numeric metric (IPUs, cycles, time, phase cycles, peak tile memory, peak
  not-always-live memory, totals ...) with columns metric, unit, a, b, delta (B - A), ratio (B / A)
  (all float64) and a_text, b_text (the values as people read them);
* ``facts``: the metrics that are not numbers, one row per run: ``device`` (string) and ``fits``
  (nullable boolean);
* ``notes``: plain sentences explaining the differences (clock vs cycles, what cannot be
  compared tile by tile, ops only in one run, recompute and memory);
* ``tile_by_tile``: True when both runs have the same IPU count and tiles per IPU, so per-tile
  differences (``memory_difference``) are meaningful; otherwise ``tile_note`` says why not and
  ``per_ipu`` / the headline compare per IPU and in totals.

Tables: ``op_table`` (ops matched by name), ``step_table`` (steps matched by (op name, kind,
n-th occurrence)), ``phase_table`` (cycles per BSP phase), ``per_ipu`` (memory per IPU) and
``liveness_curves`` (not-always-live bytes on the fullest tile per liveness step, both runs).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from popvision_lite.analysis.summary import PHASES, Summary, format_bytes, format_seconds, summarize
from popvision_lite.analysis.tile_memory import MEASURES, TileMemory
from popvision_lite.profile import schema
from popvision_lite.profile.schema import stored_table
from popvision_lite.units import format_change

COMPARE_COLUMNS = ("a", "b", "delta", "ratio")


def ratio(b, a):
    """B / A elementwise; NaN where A is 0 (and B is not), 1 where both are 0."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(a != 0, b / np.where(a != 0, a, 1.0), np.where(b == 0, 1.0, np.nan))
    return r


def label_of(profile, default: str) -> str:
    """A short name for a run: the file name, else ``default``."""
    path = getattr(profile, "path", None)
    return str(getattr(path, "name", None) or path or default)


def same_tile_layout(a, b) -> bool:
    ta, tb = a.target, b.target
    return int(ta.num_ipus) == int(tb.num_ipus) and int(ta.tiles_per_ipu) == int(tb.tiles_per_ipu)


def tile_layout_note(a, b) -> str:
    """'' when tiles match one to one, else a sentence saying what cannot be compared and what is."""
    ta, tb = a.target, b.target
    if same_tile_layout(a, b):
        return ""
    return (f"Tile-by-tile comparison is not possible: A has {ta.num_ipus} IPU(s) x {ta.tiles_per_ipu} tiles "
            f"({ta.num_tiles} tiles, {ta.name}), B has {tb.num_ipus} IPU(s) x {tb.tiles_per_ipu} tiles "
            f"({tb.num_tiles} tiles, {tb.name}), so tile i of A is not the same tile as tile i of B. "
            "Memory is compared per IPU (IPUs present in both runs) and in totals instead; "
            "no per-tile difference map is drawn.")


# ----------------------------------------------------------------------------- memory
def memory_difference(a, b, measure: str = "total", tm_a: TileMemory | None = None,
                      tm_b: TileMemory | None = None) -> np.ndarray | None:
    """(num_tiles,) float64 B - A bytes of ``measure`` per tile, or None when tiles do not match."""
    if measure not in MEASURES:
        raise ValueError(f"unknown memory measure {measure!r}; choose one of {', '.join(MEASURES)}")
    if not same_tile_layout(a, b):
        return None
    tm_a = tm_a or TileMemory(a)
    tm_b = tm_b or TileMemory(b)
    return tm_b.values(measure) - tm_a.values(measure)


def _ipu_memory(profile, tm: TileMemory) -> pd.DataFrame:
    ipu = np.arange(tm.num_tiles) // tm.tiles_per_ipu
    df = pd.DataFrame({"ipu": ipu, "total": tm.total, "always_live": tm.values("always_live"),
                       "not_always_live": tm.values("not_always_live"), "over": tm.over_capacity})
    g = df.groupby("ipu")
    return pd.DataFrame({"total": g["total"].sum(), "always_live": g["always_live"].sum(),
                         "not_always_live": g["not_always_live"].sum(), "max_tile": g["total"].max(),
                         "over_capacity_tiles": g["over"].sum()}).astype(np.int64)


def per_ipu(a, b, tm_a: TileMemory | None = None, tm_b: TileMemory | None = None) -> pd.DataFrame:
    """Memory per IPU of both runs, outer-joined on the IPU index, plus an ``all`` row.

    Columns: ipu (int, or "all"), then ``<field>_a``, ``<field>_b``, ``<field>_delta`` for field in
    total, max_tile, over_capacity_tiles, and ``total_ratio``.  A missing IPU gives NaN.
    """
    ma = _ipu_memory(a, tm_a or TileMemory(a))
    mb = _ipu_memory(b, tm_b or TileMemory(b))
    idx = ma.index.union(mb.index)
    ma, mb = ma.reindex(idx), mb.reindex(idx)
    all_a = pd.Series({"total": ma["total"].sum(), "max_tile": ma["max_tile"].max(),
                       "over_capacity_tiles": ma["over_capacity_tiles"].sum()})
    all_b = pd.Series({"total": mb["total"].sum(), "max_tile": mb["max_tile"].max(),
                       "over_capacity_tiles": mb["over_capacity_tiles"].sum()})
    rows = {"ipu": [str(i) for i in idx] + ["all"]}
    for f in ("total", "max_tile", "over_capacity_tiles"):
        # whole numbers stay whole (nullable Int64: a missing IPU is <NA>, an empty CSV cell), so a
        # CSV export says 0 rather than 0.0
        va = pd.array(np.append(ma[f].to_numpy(np.float64), float(all_a[f])), dtype="Int64")
        vb = pd.array(np.append(mb[f].to_numpy(np.float64), float(all_b[f])), dtype="Int64")
        rows[f"{f}_a"], rows[f"{f}_b"], rows[f"{f}_delta"] = va, vb, vb - va
    out = pd.DataFrame(rows)
    out["total_ratio"] = ratio(out["total_b"].to_numpy(np.float64), out["total_a"].to_numpy(np.float64))
    return out


# ----------------------------------------------------------------------------- liveness
def liveness_curves(a, b) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(curve_a, curve_b): lstep, name, max_tile_bytes, total_bytes of each run (lengths may differ)."""
    def one(p):
        ls = stored_table(p, "liveness_steps")
        return ls[["lstep", "name", "max_tile_bytes", "total_bytes"]].sort_values("lstep").reset_index(drop=True)
    return one(a), one(b)


# ----------------------------------------------------------------------------- ops / steps
def op_table(a, b) -> pd.DataFrame:
    """Ops matched by name (outer join), largest |delta cycles| first.

    Columns: name, type, present_in ("both" | "A only" | "B only", categorical), cycles_a, cycles_b,
    cycles_delta, cycles_ratio, time_a_s, time_b_s, time_ratio, flops_a, flops_b, tiles_a, tiles_b.
    """
    def prep(p):
        o = stored_table(p, "ops")[["name", "type", "cycles", "flops", "tiles_used"]].copy()
        # duplicate names (rare) are summed so the join stays one row per name
        o = o.groupby("name", sort=False).agg(type=("type", "first"), cycles=("cycles", "sum"),
                                              flops=("flops", "sum"), tiles=("tiles_used", "max"))
        o["time_s"] = o["cycles"] / float(p.target.clock_hz)
        return o
    oa, ob = prep(a), prep(b)
    j = oa.merge(ob, how="outer", left_index=True, right_index=True, suffixes=("_a", "_b"))
    where = np.where(j["cycles_a"].notna() & j["cycles_b"].notna(), "both",
                     np.where(j["cycles_a"].notna(), "A only", "B only"))
    ca = j["cycles_a"].fillna(0).to_numpy(np.float64)
    cb = j["cycles_b"].fillna(0).to_numpy(np.float64)
    ta = j["time_s_a"].fillna(0).to_numpy(np.float64)
    tb = j["time_s_b"].fillna(0).to_numpy(np.float64)
    out = pd.DataFrame({
        "name": j.index.astype(str), "type": j["type_a"].fillna(j["type_b"]).astype(str).to_numpy(),
        "present_in": pd.Categorical(where, categories=["both", "A only", "B only"]),
        "cycles_a": ca.astype(np.int64), "cycles_b": cb.astype(np.int64),
        "cycles_delta": (cb - ca).astype(np.int64), "cycles_ratio": ratio(cb, ca),
        "time_a_s": ta, "time_b_s": tb, "time_ratio": ratio(tb, ta),
        "flops_a": j["flops_a"].fillna(0).to_numpy(np.int64), "flops_b": j["flops_b"].fillna(0).to_numpy(np.int64),
        "tiles_a": j["tiles_a"].fillna(0).to_numpy(np.int64), "tiles_b": j["tiles_b"].fillna(0).to_numpy(np.int64),
    })
    order = np.lexsort((out["name"].to_numpy(), -np.abs(out["cycles_delta"].to_numpy())))
    return out.iloc[order].reset_index(drop=True)


def _step_keys(p) -> pd.DataFrame:
    s = stored_table(p, "steps")
    ops = stored_table(p, "ops")
    names = dict(zip(ops["op_id"].to_numpy().tolist(), ops["name"].tolist(), strict=False))
    df = pd.DataFrame({
        "step": s["step"].to_numpy(np.int64),
        "op": [names.get(int(o), "") for o in s["op_id"].to_numpy()],
        "kind": [schema.STEP_KINDS[int(k)] for k in s["kind"].to_numpy()],
        "cycles": (s["end_cycle"] - s["start_cycle"]).to_numpy(np.int64),
        "start": s["start_cycle"].to_numpy(np.int64),
    })
    df["n"] = df.groupby(["op", "kind"], sort=False).cumcount()
    return df


def step_table(a, b) -> pd.DataFrame:
    """BSP steps matched by (op name, step kind, n-th occurrence of that pair), in A's order then B-only.

    Columns: op, kind, n, step_a, step_b (-1 when missing), cycles_a, cycles_b, cycles_delta, cycles_ratio,
    time_a_s, time_b_s, time_ratio.
    """
    sa, sb = _step_keys(a), _step_keys(b)
    m = sa.merge(sb, on=["op", "kind", "n"], how="outer", suffixes=("_a", "_b"), sort=False)
    m["order_a"] = m["step_a"].fillna(np.inf)
    m["order_b"] = m["step_b"].fillna(np.inf)
    m = m.sort_values(["order_a", "order_b"], kind="stable").reset_index(drop=True)
    ca = m["cycles_a"].fillna(0).to_numpy(np.float64)
    cb = m["cycles_b"].fillna(0).to_numpy(np.float64)
    ta = ca / float(a.target.clock_hz)
    tb = cb / float(b.target.clock_hz)
    return pd.DataFrame({
        "op": m["op"].astype(str), "kind": m["kind"].astype(str), "n": m["n"].astype(np.int64),
        "step_a": m["step_a"].fillna(-1).astype(np.int64), "step_b": m["step_b"].fillna(-1).astype(np.int64),
        "cycles_a": ca.astype(np.int64), "cycles_b": cb.astype(np.int64), "cycles_delta": (cb - ca).astype(np.int64),
        "cycles_ratio": ratio(cb, ca), "time_a_s": ta, "time_b_s": tb, "time_ratio": ratio(tb, ta),
    })


IPU_TIME_ROW = "IPU time"  # the parts' sum (one time base with them)
WALL_ROW = "step (wall time)"  # one step from start to end: another time base, never drawn with the parts


def phase_table(sa: Summary, sb: Summary) -> pd.DataFrame:
    """Cycles and time of each part of the IPU time (compute, exchange, sync, stream, host: run_totals.PARTS,
    summed over a replica's IPUs), their sum (:data:`IPU_TIME_ROW`) and the step's wall time
    (:data:`WALL_ROW`).  ``basis`` says which time each row is: "IPU time" (summed over the IPUs of a
    replica, so S x the wall time) or "wall time"; a chart draws one basis only."""
    rows = []
    for ph in PHASES:
        rows.append((ph, "IPU time", sa.phase_cycles.get(ph, 0), sb.phase_cycles.get(ph, 0)))
    rows.append((IPU_TIME_ROW, "IPU time", sa.totals.ipu_time_cycles, sb.totals.ipu_time_cycles))
    rows.append((WALL_ROW, "wall time", sa.total_cycles, sb.total_cycles))
    df = pd.DataFrame(rows, columns=["phase", "basis", "cycles_a", "cycles_b"])
    df["cycles_delta"] = df["cycles_b"] - df["cycles_a"]
    df["cycles_ratio"] = ratio(df["cycles_b"], df["cycles_a"])
    df["time_a_s"] = df["cycles_a"] / sa.clock_hz
    df["time_b_s"] = df["cycles_b"] / sb.clock_hz
    df["time_ratio"] = ratio(df["time_b_s"], df["time_a_s"])
    return df


# ----------------------------------------------------------------------------- headline
@dataclass
class Comparison:
    a: object
    b: object
    label_a: str
    label_b: str
    summary_a: Summary
    summary_b: Summary
    tile_by_tile: bool
    tile_note: str
    headline: pd.DataFrame
    phases: pd.DataFrame
    notes: list[str] = field(default_factory=list)
    facts: pd.DataFrame | None = None  # the non-numeric metrics (device, fits): metric, a, b
    ops: pd.DataFrame | None = field(default=None, repr=False)  # op_table(a, b), made once for the notes

    def __repr__(self) -> str:
        return (f"<Comparison A={self.label_a!r} B={self.label_b!r}: {len(self.headline)} headline metrics, "
                f"{len(self.notes)} notes; .headline, .facts, .phases, .op_table(), .markdown()>")

    def _repr_html_(self) -> str:
        return comparison_html(self)

    def close(self) -> None:
        """Close both profiles (``pvl.compare`` opened them when given paths)."""
        for p in (self.a, self.b):
            close = getattr(p, "close", None)
            if close is not None:
                close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def op_table(self) -> pd.DataFrame:
        """Ops matched by name (see :func:`op_table`): a copy of the table :func:`compare` made for its notes
        (the caller may change it), else computed now."""
        return op_table(self.a, self.b) if self.ops is None else self.ops.copy()

    def metric(self, name: str) -> pd.Series:
        """The headline row of ``name`` (a, b, delta, ratio ...)."""
        rows = self.headline[self.headline["metric"] == name]
        if len(rows) == 0:
            raise KeyError(f"no headline metric {name!r}; have {', '.join(self.headline['metric'])}")
        return rows.iloc[0]

    def markdown(self) -> str:
        """The comparison as Markdown: targets, the headline table and the notes."""
        return comparison_markdown(self)


def _whole(v):
    """``v`` as an int when it is a whole number (a clock of 1.325e9 Hz), else unchanged."""
    return int(v) if isinstance(v, float) and v.is_integer() else v


def _facts(sa: Summary, sb: Summary) -> pd.DataFrame:
    """The metrics that are not numbers, each column of one type: ``device`` names (str) and ``fits``
    (nullable boolean), one row per run: ``run`` is "A" or "B"."""
    return pd.DataFrame({
        "run": ["A", "B"],
        "device": pd.array([sa.target.name, sb.target.name], dtype="string"),
        "fits": pd.array([bool(sa.fits), bool(sb.fits)], dtype="boolean"),
    })


def _headline(sa: Summary, sb: Summary) -> pd.DataFrame:
    """The numeric metrics: a, b, delta and ratio are float64 (the text beside them in a_text, b_text)."""
    rows = [
        ("IPUs", "", sa.totals.num_ipus, sb.totals.num_ipus),
        ("IPUs per replica", "", sa.target.num_ipus, sb.target.num_ipus),
        ("tiles", "", sa.target.num_tiles, sb.target.num_tiles),
        ("clock", "Hz", _whole(sa.clock_hz), _whole(sb.clock_hz)),
        ("total cycles", "cycles", sa.total_cycles, sb.total_cycles),
        ("time", "s", sa.total_seconds, sb.total_seconds),
        ("samples/s", "samples/s", sa.totals.samples_per_second, sb.totals.samples_per_second),
        ("IPU time summed over a replica's IPUs", "cycles", sa.totals.ipu_time_cycles, sb.totals.ipu_time_cycles),
        ("host time per step", "s", sa.totals.host_seconds, sb.totals.host_seconds),
    ]
    for ph in PHASES:
        rows.append((f"{ph} cycles", "cycles", sa.phase_cycles.get(ph, 0), sb.phase_cycles.get(ph, 0)))
    rows += [
        ("BSP steps", "", sa.num_steps, sb.num_steps),
        ("peak tile memory", "B", sa.peak.bytes, sb.peak.bytes),
        ("peak tile memory % of capacity", "%", 100 * sa.peak.fraction, 100 * sb.peak.fraction),
        ("peak not-always-live on a tile", "B", sa.peak_not_always_live, sb.peak_not_always_live),
        ("always-live memory (all tiles)", "B", sa.peak.always_live_bytes, sb.peak.always_live_bytes),
        ("not-always-live memory (all tiles)", "B", sa.peak.not_always_live_bytes, sb.peak.not_always_live_bytes),
        ("total memory (all tiles)", "B", sa.peak.total_bytes, sb.peak.total_bytes),
        ("tiles over capacity", "tiles", sa.peak.over_capacity_tiles, sb.peak.over_capacity_tiles),
    ]
    out = []
    for name, unit, va, vb in rows:
        na, nb = float(va), float(vb)
        out.append((name, unit, na, nb, nb - na, float(ratio(vb, va)), format_value(va, unit), format_value(vb, unit)))
    return pd.DataFrame(out, columns=["metric", "unit", "a", "b", "delta", "ratio", "a_text", "b_text"]).astype(
        {"a": np.float64, "b": np.float64, "delta": np.float64, "ratio": np.float64})


def _notes(a, b, sa: Summary, sb: Summary, tile_note: str, ops: pd.DataFrame) -> list[str]:
    notes = []
    ca, cb = sa.clock_hz, sb.clock_hz
    if tile_note:
        notes.append(tile_note)
    # time vs cycles: the clock
    rc, rt = float(ratio(sb.total_cycles, sa.total_cycles)), float(ratio(sb.total_seconds, sa.total_seconds))
    if ca != cb:
        comp_r = float(ratio(sb.phase_cycles.get("compute", 0), sa.phase_cycles.get("compute", 0)))
        txt = (f"Clocks differ: A runs at {ca / 1e9:.3f} GHz, B at {cb / 1e9:.3f} GHz (B/A = {cb / ca:.3f}). "
               f"Cycles B/A = {rc:.3f} ({format_change(rc)}); time B/A = {rt:.3f} ({format_change(rt)}).")
        if np.isfinite(comp_r) and abs(comp_r - 1) < 1e-3:
            txt += (f" Compute takes the same cycles in both ({sa.phase_cycles['compute']:,}): the per-cycle "
                    f"architecture is the same, so compute-bound parts finish in {ca / cb:.3f} x the time at "
                    "B's clock. A faster clock does not reduce cycles; the time saving comes from the clock.")
        elif np.isfinite(comp_r):
            txt += f" Compute cycles B/A = {comp_r:.3f} ({format_change(comp_r)})."
        diff = [f"{ph} {sa.phase_cycles.get(ph, 0):,} -> {sb.phase_cycles.get(ph, 0):,}" for ph in PHASES
                if ph != "host" and sa.phase_cycles.get(ph, 0) != sb.phase_cycles.get(ph, 0)]
        if diff:
            txt += (" Parts whose cycle counts differ (exchange, sync and stream copies to DDR depend on "
                    "the device's exchange/sync/link model, not only the clock): " + "; ".join(diff) + ".")
        ha, hb = sa.totals.host_seconds, sb.totals.host_seconds
        if ha or hb:  # the host's time is seconds, not cycles: at another clock the same host step is other cycles
            txt += (f" Host: A {sa.totals.host_short} ({format_seconds(ha)} per step), B {sb.totals.host_short} "
                    f"({format_seconds(hb)})" + (": the same host time, more or fewer cycles only at the other clock."
                                                  if abs(ha - hb) <= 1e-9 * max(ha, hb, 1e-30) else "."))
        notes.append(txt)
    else:
        notes.append(f"Same clock ({ca / 1e9:.3f} GHz): time follows cycles; cycles B/A = {rc:.3f} ({format_change(rc)}).")
    # the headline: throughput (a larger batch makes each step longer and still faster per sample)
    ra = float(ratio(sb.totals.samples_per_second, sa.totals.samples_per_second))
    if np.isfinite(ra) and abs(ra - 1) > 1e-9:
        notes.append(f"Throughput: A {sa.totals.samples_per_second:,.1f} samples/s, B "
                     f"{sb.totals.samples_per_second:,.1f} samples/s: B is {ra:.3f}x "
                     f"({'faster' if ra > 1 else 'slower'} per sample)"
                     + (f" although its step takes {rt:.3f}x the time ({sa.totals.samples_per_step:g} -> "
                        f"{sb.totals.samples_per_step:g} samples per step)." if (rt > 1) == (ra > 1) else "."))
    # memory
    r_nal = float(ratio(sb.peak_not_always_live, sa.peak_not_always_live))
    notes.append(f"Peak not-always-live memory on a tile: A {format_bytes(sa.peak_not_always_live)}, "
                 f"B {format_bytes(sb.peak_not_always_live)} ({format_change(r_nal)}); peak tile total: "
                 f"A {format_bytes(sa.peak.bytes)}, B {format_bytes(sb.peak.bytes)}.")
    rec_a = bool((sa.config or {}).get("recompute", False))
    rec_b = bool((sb.config or {}).get("recompute", False))
    if rec_a != rec_b:
        who, other = ("B", "A") if rec_b else ("A", "B")
        lower = (sb.peak_not_always_live < sa.peak_not_always_live) if rec_b else \
            (sa.peak_not_always_live < sb.peak_not_always_live)
        notes.append(f"{who} recomputes activations in the backward pass, {other} stores them: "
                     f"{who}'s peak not-always-live memory is {'lower' if lower else 'NOT lower'} and it takes "
                     f"{'more' if (rc > 1) == rec_b else 'fewer'} cycles (the recomputed forward ops).")
    if sa.fits != sb.fits:
        notes.append(f"A {'fits' if sa.fits else 'does NOT fit'} in tile memory, B {'fits' if sb.fits else 'does NOT fit'}.")
    n_a, n_b = int((ops["present_in"] == "A only").sum()), int((ops["present_in"] == "B only").sum())
    if n_a or n_b:
        ex = ops[ops["present_in"] != "both"]["name"].head(3).tolist()
        notes.append(f"Ops matched by name: {int((ops['present_in'] == 'both').sum())} in both, {n_a} only in A, "
                     f"{n_b} only in B (e.g. {', '.join(ex)}).")
    return notes


def compare(a, b, label_a: str | None = None, label_b: str | None = None, *,
            summary_a: Summary | None = None, summary_b: Summary | None = None) -> Comparison:
    """Compare runs ``a`` and ``b`` (open Profiles); every delta is B - A, every ratio B / A.

    ``summary_a`` / ``summary_b``: ``summarize(a)`` / ``summarize(b)`` when the caller already has them (the
    GUI's documents keep their Summary view's), so they are not computed again; else computed here."""
    sa = summarize(a) if summary_a is None else summary_a
    sb = summarize(b) if summary_b is None else summary_b
    tile_note = tile_layout_note(a, b)
    ops = op_table(a, b)
    return Comparison(
        a=a, b=b, label_a=label_a or label_of(a, "A"), label_b=label_b or label_of(b, "B"),
        summary_a=sa, summary_b=sb, tile_by_tile=not tile_note, tile_note=tile_note,
        headline=_headline(sa, sb), phases=phase_table(sa, sb), notes=_notes(a, b, sa, sb, tile_note, ops),
        facts=_facts(sa, sb), ops=ops,
    )


def format_value(v, unit: str) -> str:
    if isinstance(v, bool | np.bool_):
        return "yes" if v else "no"
    if isinstance(v, str):
        return v
    if v is None or (isinstance(v, float) and not np.isfinite(v)):
        return "n/a"
    if unit == "B":
        return format_bytes(v)
    if unit == "s":
        return format_seconds(v)
    if unit == "Hz":
        return f"{v / 1e9:.3f} GHz"
    if unit == "%":
        return f"{v:.1f}%"
    return f"{int(v):,}" if float(v).is_integer() else f"{v:,.4g}"


def headline_strings(c: Comparison) -> pd.DataFrame:
    """The headline table formatted for people: metric, A, B, delta, B/A (device and fits first)."""
    rows = []
    if c.facts is not None:
        fa, fb = c.facts.iloc[0], c.facts.iloc[1]
        rows.append(("device", str(fa["device"]), str(fb["device"]), "", ""))
        rows.append(("fits", format_value(bool(fa["fits"]), ""), format_value(bool(fb["fits"]), ""), "", ""))
    for r in c.headline.itertuples(index=False):
        d = r.delta
        dtxt = "" if not np.isfinite(d) else (("+" if d > 0 else "") + format_value(d, r.unit)
                                             if r.unit != "Hz" else f"{d / 1e9:+.3f} GHz")
        if r.unit == "B" and np.isfinite(d) and d < 0:
            dtxt = "-" + format_bytes(-d)
        rtxt = "" if not np.isfinite(r.ratio) else f"{r.ratio:.3f}"
        rows.append((r.metric, r.a_text, r.b_text, dtxt, rtxt))
    return pd.DataFrame(rows, columns=["metric", c.label_a, c.label_b, "delta (B - A)", "B / A"])


def comparison_markdown(c: Comparison) -> str:
    h = headline_strings(c)
    lines = [f"# Compare: A = {c.label_a}, B = {c.label_b}", "",
             f"A: {c.summary_a.target.name}, {c.summary_a.model} {c.summary_a.config}",
             f"B: {c.summary_b.target.name}, {c.summary_b.model} {c.summary_b.config}", "",
             "| " + " | ".join(h.columns) + " |", "|" + "---|" * len(h.columns)]
    for row in h.itertuples(index=False):
        lines.append("| " + " | ".join(str(x) for x in row) + " |")
    lines += ["", "## Notes", ""] + [f"* {n}" for n in c.notes]
    return "\n".join(lines) + "\n"


def comparison_html(c: Comparison) -> str:
    """The comparison as an HTML fragment for notebooks: the headline table and the notes (text escaped)."""
    import html

    h = headline_strings(c)
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in c.notes)
    return (f"<p><b>Compare</b>: A = {html.escape(c.label_a)}, B = {html.escape(c.label_b)}</p>"
            + h.to_html(index=False, escape=True) + (f"<ul>{notes}</ul>" if notes else ""))
