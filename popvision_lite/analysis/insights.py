"""Insights: where to look first, and concrete advice computed from a profile (pure, no Qt).

``insights(profile)`` returns a list of :class:`Finding` (most severe first).  Every number
in a finding's text comes from the profile (or the device spec for bandwidths) and is also
kept machine-readable in ``Finding.numbers``.  ``recompute_savings(a, b)`` compares the
liveness of two runs of one model, one with recomputation on, and says what it saved.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from popvision_lite.analysis.run_totals import STEP_PARTS, run_totals
from popvision_lite.profile.run_record import record_of
from popvision_lite.profile.schema import STEP_KIND_CODE, stored_table
from popvision_lite.units import format_bytes_exact, format_percent, format_seconds

if TYPE_CHECKING:
    import pandas as pd

# pandas, and the analyses that import it (execution, fit_constraint, liveness), are imported by the functions
# that use them: emulate's end-of-run lines (placed_text) import this module without pandas (decision 0471)

SEVERITIES = ("error", "warning", "info")

# thresholds for advice (fractions); kept here so tests and docs can name them
EXCHANGE_SHARE_WARN = 0.30      # exchange steps take >= 30% of the run
HOST_SHARE_NOTE = 0.30          # the host's per-step terms take >= 30% of the IPU time
ACTIVATION_SHARE_RECOMPUTE = 0.5  # activations are >= half of the not-always-live peak
COMPUTE_IDLE_WARN = 0.5         # tiles idle >= 50% of compute-step time
MEMORY_IMBALANCE_WARN = 2.0     # fullest tile holds >= 2x the mean tile
_MAX_IDS = 50  # related ids kept per finding
STASH_NAME = "pipeline stash ("  # the stash variables of a pipelined run (emulator/models/pipeline.py, format 3.2)


@dataclass
class Finding:
    severity: str                       # "error" | "warning" | "info"
    kind: str                           # stable key: "oom", "recompute", "binding", "fit_search", ...
    title: str
    text: str
    tiles: tuple[int, ...] = ()
    ops: tuple[int, ...] = ()
    variables: tuple[int, ...] = ()
    numbers: dict[str, Any] = field(default_factory=dict)


class Insights(list):
    """The findings of one profile, most severe first: a list of :class:`Finding`, with a table view."""

    def to_frame(self) -> pd.DataFrame:
        """One row per finding: severity (ordered categorical), kind, title, text, the tiles / ops / variables
        it points at (tuples) and its numbers (dict)."""
        import pandas as pd

        df = pd.DataFrame({
            "severity": pd.Categorical([f.severity for f in self], categories=["error", "warning", "info"],
                                       ordered=True),
            "kind": pd.array([f.kind for f in self], dtype="string"),
            "title": pd.array([f.title for f in self], dtype="string"),
            "text": pd.array([f.text for f in self], dtype="string"),
            "tiles": [f.tiles for f in self],
            "ops": [f.ops for f in self],
            "variables": [f.variables for f in self],
            "numbers": [dict(f.numbers) for f in self],
        })
        return df

    def __repr__(self) -> str:
        return f"<Insights: {len(self)} findings: " + "; ".join(f"[{f.severity}] {f.title}" for f in self) + ">"

    def _repr_html_(self) -> str:
        return self.to_frame()[["severity", "kind", "title", "text"]].to_html(index=False, escape=True)


# ---------------------------------------------------------------- formatting

fmt_bytes = format_bytes_exact  # '1,234,567 B (1.18 MiB)': exact bytes plus a readable size


def _bullets(lines, first: bool = True) -> str:
    """Lines as a bulleted list in plain text (views render each line on its own)."""
    body = "\n".join(f"\u2022 {line}" for line in lines)
    return ("\n" + body) if first else body


def _tile_name(profile, tile: int) -> str:
    tpi = int(profile.target.tiles_per_ipu)
    if int(profile.target.num_ipus) > 1:
        return f"tile {tile} (IPU {tile // tpi}, tile {tile % tpi})"
    return f"tile {tile}"


# ---------------------------------------------------------------- device facts

def device_spec(profile):
    """The DeviceSpec of the profile's target (popvision_lite.devices), or None if it is unknown."""
    from popvision_lite import devices
    from popvision_lite.errors import PopvisionError

    try:
        return devices.load_bundled_device(profile.target.device)  # an id from a file, never a path
    except PopvisionError:  # unknown id or a broken spec: advice without bandwidths
        return None


def ddr_bandwidth(spec) -> float | None:
    """Streaming-memory (DDR) bandwidth in bytes/s per IPU from the device spec, None if absent."""
    if spec is None or not spec.has_memory("ddr"):
        return None
    return spec.memory("ddr").bandwidth_bytes_per_s


# ---------------------------------------------------------------- building blocks

def memory_table(profile) -> pd.DataFrame:
    """``profile.memory.by_tile()`` with an ``over`` column (bytes above capacity, >= 0)."""
    bt = stored_table(profile, "memory_by_tile").copy()
    bt["over"] = np.maximum(bt["total"].to_numpy(np.int64) - bt["capacity"].to_numpy(np.int64), 0)
    return bt


def top_tiles(profile, n: int = 5) -> pd.DataFrame:
    bt = memory_table(profile)
    return bt.sort_values(["total"], ascending=False, kind="stable").head(n)


def codelet_totals(profile) -> pd.DataFrame:
    """Codelets summed over compute sets and tiles: count, state_bytes, code_bytes, cycles."""
    v = stored_table(profile, "vertices")
    return v.groupby("codelet", sort=False)[["count", "state_bytes", "code_bytes", "cycles"]].sum()


def top_vertices(profile, n: int = 5, by: str = "state_bytes", totals: pd.DataFrame | None = None) -> pd.DataFrame:
    g = codelet_totals(profile) if totals is None else totals
    return g.sort_values(by, ascending=False, kind="stable").head(n)


def top_variables(profile, n: int = 5) -> pd.DataFrame:
    return stored_table(profile, "variables").sort_values("bytes", ascending=False, kind="stable").head(n)


def top_exchanges(profile, n: int = 5) -> pd.DataFrame:
    """Exchange programs (Copy / StreamCopy) with the most code bytes."""
    pr = stored_table(profile, "programs")
    ex = pr[pr["kind"].isin(["Copy", "StreamCopy"])]
    return ex.sort_values("code_bytes", ascending=False, kind="stable").head(n)


def peak_lstep(profile) -> int | None:
    ls = stored_table(profile, "liveness_steps")
    if len(ls) == 0:
        return None
    return int(ls["lstep"].to_numpy()[int(np.argmax(ls["total_bytes"].to_numpy()))])


def _activation_mask(variables: pd.DataFrame) -> np.ndarray:
    """Not-always-live variables produced by an op: activations (recomputable)."""
    return ((~variables["always_live"].to_numpy(bool)) & (variables["op_id"].to_numpy() >= 0)
            & (variables["kind"].astype(str).to_numpy() == "variable"))


def op_at_lstep(profile, lstep: int) -> int:
    """Op of the leaf program at liveness step ``lstep`` (-1 if none)."""
    pr = stored_table(profile, "programs")
    hit = pr["op_id"].to_numpy()[pr["lstep"].to_numpy() == lstep]
    return int(hit[0]) if len(hit) else -1


def op_lstep_range(profile, op_id: int, lstep: int) -> tuple[int, int]:
    """First and last liveness step of the op's leaf programs (``(lstep, lstep)`` for no op)."""
    if op_id < 0:
        return lstep, lstep
    pr = stored_table(profile, "programs")
    ls = pr["lstep"].to_numpy()[(pr["op_id"].to_numpy() == op_id) & (pr["lstep"].to_numpy() >= 0)]
    if len(ls) == 0:
        return lstep, lstep
    return int(ls.min()), int(ls.max())


def split_live_at(profile, lstep: int) -> dict[str, pd.DataFrame]:
    """Not-always-live variables live at ``lstep``, split three ways:

    * ``held``: activations produced before the op running at ``lstep`` and used after it: kept
      across it only for a later use (the backward pass); recomputation can free these;
    * ``own``: produced by the running op (its outputs and temporaries): recomputation cannot help,
      a plan with less temporary memory can;
    * ``other``: the rest (inputs the running op reads now, host data, ...).
    """
    v = stored_table(profile, "variables")
    live = (v["first_lstep"].to_numpy() <= lstep) & (v["last_lstep"].to_numpy() >= lstep) \
        & ~v["always_live"].to_numpy(bool)
    op = op_at_lstep(profile, lstep)
    of, ol = op_lstep_range(profile, op, lstep)
    prod = v["op_id"].to_numpy()
    own = live & (prod == op) & (op >= 0)
    held = live & _activation_mask(v) & ~own & (v["first_lstep"].to_numpy() < of) & (v["last_lstep"].to_numpy() > ol)
    return {"held": v[held], "own": v[own], "other": v[live & ~held & ~own], "op": op}


def tile_peak(profile, tile: int) -> tuple[int, int]:
    """(lstep, bytes) where ``tile`` holds the most not-always-live bytes."""
    tb = np.asarray(profile.liveness.tile_bytes(0, None, tiles=[tile]))[:, 0]
    if len(tb) == 0:
        return -1, 0
    i = int(np.argmax(tb))
    return i, int(tb[i])


def bytes_on_tile(profile, tile: int, var_ids) -> int:
    vt = stored_table(profile, "variable_tiles")
    on = (vt["tile"].to_numpy() == tile) & np.isin(vt["var_id"].to_numpy(), np.asarray(list(var_ids), dtype=np.int64))
    return int(vt["bytes"].to_numpy()[on].sum())


def step_kind_cycles(profile) -> dict[str, int]:
    """IPU cycles of one training step per step kind (``run_totals.kind_cycles``: stored steps weighted by their
    runs, summed over the replica's IPUs, waiting at syncs in "sync")."""
    return dict(run_totals(profile).kind_cycles)


def is_recompute_run(profile) -> bool:
    return record_of(profile).config.recompute


# ---------------------------------------------------------------- the findings

def _top_findings(profile, bt: pd.DataFrame) -> list[Finding]:
    out = []
    tt = bt.sort_values("total", ascending=False, kind="stable").head(5)
    cap = bt["capacity"].to_numpy(np.int64)
    lines = [f"{_tile_name(profile, int(t))}: {fmt_bytes(r.total)} of {fmt_bytes(r.capacity)} "
             f"({format_percent(r.total / r.capacity) if r.capacity else '-'})" for t, r in tt.iterrows()]
    out.append(Finding("info", "top_tiles", "Tiles using the most memory",
                       f"Mean tile: {fmt_bytes(bt['total'].mean())} of {fmt_bytes(cap.mean() if len(cap) else 0)}."
                       + _bullets(lines),
                       tiles=tuple(int(t) for t in tt.index),
                       numbers={"tiles": [int(t) for t in tt.index], "bytes": tt["total"].astype(int).tolist()}))
    if len(stored_table(profile, "vertices")):
        totals = codelet_totals(profile)
        tv = top_vertices(profile, 5, "state_bytes", totals)
        tc = top_vertices(profile, 3, "count", totals)
        txt = "By state bytes:" + _bullets(
            f"{c}: {int(r['count']):,} vertices, {fmt_bytes(r.state_bytes)} state" for c, r in tv.iterrows())
        txt += "\nBy count: " + "; ".join(f"{c} ({int(r['count']):,})" for c, r in tc.iterrows()) + "."
        out.append(Finding("info", "top_vertices", "Vertices using the most memory", txt,
                           numbers={"codelets": list(tv.index), "state_bytes": tv["state_bytes"].astype(int).tolist()}))
    if len(stored_table(profile, "variables")):
        tvar = top_variables(profile, 5)
        txt = _bullets((f"{r['name']} {r['shape']} {r['dtype']}: {fmt_bytes(r['bytes'])}"
                        f" ({'always live' if r['always_live'] else 'not always live'})"
                        for _, r in tvar.iterrows()), first=False)
        out.append(Finding("info", "top_variables", "Largest variables", txt,
                           variables=tuple(int(i) for i in tvar["var_id"]),
                           numbers={"var_ids": tvar["var_id"].astype(int).tolist(),
                                    "bytes": tvar["bytes"].astype(int).tolist()}))
    ex = top_exchanges(profile, 5)
    if len(ex) and ex["code_bytes"].sum() > 0:
        txt = _bullets((f"{r['name']}: {fmt_bytes(r['code_bytes'])} of exchange code" for _, r in ex.iterrows()),
                       first=False)
        ops = tuple(sorted({int(o) for o in ex["op_id"] if o >= 0}))
        out.append(Finding("info", "top_exchanges", "Exchanges using the most memory", txt, ops=ops,
                           numbers={"prog_ids": ex["prog_id"].astype(int).tolist(),
                                    "code_bytes": ex["code_bytes"].astype(int).tolist()}))
    return out


def _peak_findings(profile, pk: int, over: pd.DataFrame) -> list[Finding]:
    """Recomputation advice (activations held across the peak) or, when the peak is the running op's
    own temporaries, advice on that op's plan."""
    out: list[Finding] = []
    ls = stored_table(profile, "liveness_steps")
    peak_bytes = int(ls["total_bytes"].max())
    parts = split_live_at(profile, pk)
    held, own = parts["held"], parts["own"]
    held_b, own_b = int(held["bytes"].sum()), int(own["bytes"].sum())
    share = held_b / peak_bytes if peak_bytes else 0.0
    own_share = own_b / peak_bytes if peak_bytes else 0.0
    op = parts["op"]
    ops = stored_table(profile, "ops")
    op_names = dict(zip(ops["op_id"].tolist(), ops["name"].astype(str).tolist(), strict=True))
    op_name = op_names.get(op, "no op")
    name = str(ls.loc[ls["lstep"] == pk, "name"].iloc[0])
    nums: dict[str, Any] = {"peak_lstep": pk, "peak_bytes": peak_bytes, "peak_op": op,
                            "held_bytes": held_b, "held_share": share, "own_bytes": own_b}
    tiles: tuple[int, ...] = ()
    worst_txt = ""
    if len(over):
        t = int(over.index[0])
        tl, _ = tile_peak(profile, t)
        tparts = split_live_at(profile, tl)
        theld = bytes_on_tile(profile, t, tparts["held"]["var_id"])
        o = int(over.loc[t, "over"])
        verdict = "enough to fit" if theld >= o else f"not enough alone (still {fmt_bytes(o - theld)} over)"
        # the pipeline stash (format 3.2: a variable) holds the micro-batches in flight: without recomputation
        # their saved activations too, which recomputation drops (keeping each layer's input)
        from popvision_lite.analysis.liveness import live_variables

        stash = live_variables(profile, tl, tile=t)
        stash = stash[stash["name"].astype(str).str.contains(STASH_NAME, regex=False)]
        tstash = int(stash["bytes_on_tile"].sum()) if len(stash) else 0
        if tstash and not is_recompute_run(profile) and theld < o:
            verdict += (f"; the pipeline stash on this tile takes {fmt_bytes(tstash)} more (the saved activations of "
                        "the micro-batches in flight), which recomputation shrinks to each layer's input"
                        + (": together more than the excess (how much of the stash recomputation frees, a re-run "
                           "with recomputation measures)" if theld + tstash >= o else ""))
        worst_txt = (f"\nOn the worst tile, {_tile_name(profile, t)}, activations held across its peak "
                     f"(liveness step {tl}) take {fmt_bytes(theld)} against {fmt_bytes(o)} over capacity: "
                     f"{verdict}.")
        nums.update(worst_tile=t, worst_tile_lstep=tl, worst_tile_held_bytes=theld, worst_tile_over=o,
                    worst_tile_stash_bytes=tstash)
        tiles = (t,)
    head = (f"The not-always-live peak summed over all tiles is {fmt_bytes(peak_bytes)} at liveness step {pk} ({name}, op {op_name}). "
            f"Of it, {len(held):,} activations made earlier and used later (e.g. by the backward pass) are held "
            f"across it: {fmt_bytes(held_b)} ({format_percent(share)}); the running op's own outputs and temporaries take "
            f"{fmt_bytes(own_b)} ({format_percent(own_share)}).")
    if (held_b > 0 or nums.get("worst_tile_stash_bytes")) and (share >= ACTIVATION_SHARE_RECOMPUTE or len(over)):
        sev = "warning" if len(over) else "info"
        text = (head + f" Recomputing held activations in the backward pass instead of keeping them can save up "
                f"to {fmt_bytes(held_b)} at the peak (less the checkpoints kept), at the cost of running their "
                f"forward ops again." + worst_txt)
        out.append(Finding(sev, "recompute", "Try recomputation", text, tiles=tiles,
                           ops=tuple(sorted({int(o) for o in held["op_id"]}))[:_MAX_IDS],
                           variables=tuple(int(v) for v in held.sort_values("bytes", ascending=False)
                                           ["var_id"].head(20)),
                           numbers=nums))
    if own_share >= ACTIVATION_SHARE_RECOMPUTE and op >= 0:
        plan = str(ops.loc[ops["op_id"] == op, "plan"].iloc[0]) if (ops["op_id"] == op).any() else ""
        big = own.sort_values("bytes", ascending=False).head(3)
        text = (f"At the not-always-live peak summed over all tiles ({fmt_bytes(peak_bytes)}, liveness step {pk}: "
                f"{name}) the running "
                f"op {op_name} holds {fmt_bytes(own_b)} of its own outputs and temporaries ({format_percent(own_share)}). "
                f"Recomputation cannot lower this peak; {op_name}"
                + (f" (plan: {plan})" if plan else "") + " needs a plan with less temporary memory "
                "(e.g. more serial passes or a smaller split). Largest:"
                + _bullets(f"{r['name']}: {fmt_bytes(r['bytes'])}" for _, r in big.iterrows()))
        out.append(Finding("warning" if len(over) else "info", "peak_temporaries",
                           "Peak is one op's temporaries", text, ops=(op,),
                           variables=tuple(int(v) for v in big["var_id"]), numbers=dict(nums)))
    return out


def _oom_findings(profile, bt: pd.DataFrame, spec) -> list[Finding]:
    out: list[Finding] = []
    over = bt[bt["over"] > 0].sort_values("over", ascending=False, kind="stable")
    n_tiles = len(bt)
    if len(over):
        worst = over.head(5)
        lines = [f"{_tile_name(profile, int(t))} needs {fmt_bytes(r.total)} but has {fmt_bytes(r.capacity)} "
                 f"(over by {fmt_bytes(r.over)})" for t, r in worst.iterrows()]
        text = (f"{len(over):,} of {n_tiles:,} tiles need more memory than they have; "
                f"{fmt_bytes(over['over'].sum())} over capacity in total. Worst:" + _bullets(lines))
        t0 = int(over.index[0])
        r0 = bt.loc[t0]
        cats = r0[list(profile.memory.categories)].astype(np.int64).sort_values(ascending=False)
        cats = cats[cats > 0].head(3)
        tn = _tile_name(profile, t0)
        text += (f"\n{tn[0].upper() + tn[1:]} holds {fmt_bytes(r0['always_live'])} always live and "
                 f"{fmt_bytes(r0['not_always_live'])} at its not-always-live peak; largest categories: "
                 + ", ".join(f"{c} {fmt_bytes(b)}" for c, b in cats.items()) + ".")
        out.append(Finding("error", "oom", "Out of memory", text, tiles=tuple(int(t) for t in over.index),
                           numbers={"tiles_over": len(over), "worst_tiles": [int(t) for t in worst.index],
                                    "worst_bytes": worst["total"].astype(int).tolist(),
                                    "worst_capacity": worst["capacity"].astype(int).tolist(),
                                    "worst_over": worst["over"].astype(int).tolist(),
                                    "total_over": int(over["over"].sum())}))

    # recomputation: activations held across the not-always-live peak
    pk = peak_lstep(profile)
    if pk is not None and not is_recompute_run(profile):
        out += _peak_findings(profile, pk, over)

    # why it does not fit, per IPU and per tile (analysis/fit_constraint.py), and the search for what does
    if len(over):
        out += fit_findings(profile)
    return out


def fit_command(profile) -> str | None:
    """The command that searches for a configuration of ``profile``'s run that fits (sweep/fit.py), or None when
    the advisor cannot search it (an imported ONNX model, a profile that records no run config)."""
    cfg = (profile.run or {}).get("config")
    if not isinstance(cfg, dict) or not cfg.get("model") or cfg.get("onnx"):
        return None
    return f"popvision-lite fit {profile.path}" if getattr(profile, "path", None) else "popvision-lite fit"


def fit_findings(profile) -> list[Finding]:
    """For a run that does not fit: what binds (the IPU, the tiles, the cause, the category and the tensors:
    :func:`fit_constraint.binding_constraint`), and the fit advisor's search offered (it emulates candidates, so it
    is a command to run, not a finding computed here)."""
    from popvision_lite.analysis.fit_constraint import binding_constraint

    b = binding_constraint(profile)
    c = b.binding
    if c is None or b.fits:
        return []
    tensors = c.tensors
    found = [Finding("error", "binding", "Why it does not fit", b.text(),
                     tiles=tuple(int(t) for t in c.over_tiles[:_MAX_IDS]),
                     variables=tuple(int(v) for v in tensors["var_id"]) if len(tensors) else (),
                     numbers=b.numbers())]
    cmd = fit_command(profile)
    if cmd is None:
        return found
    found.append(Finding("warning", "fit_search", "Find a configuration that fits",
                         f"The fit advisor searches tensor parallelism, pipeline splits (uneven ones too), replicas, "
                         f"micro-batch, recomputation, the matmul memory proportion, optimizer state off chip and "
                         f"streamed weights, emulating the candidates on a local Dask cluster, and names the cheapest "
                         f"configuration that fits (or shows that none does up to a pod, and why): run\n{cmd}\n"
                         f"(in the desktop app: Run > Find a configuration that fits…).",
                         numbers={"command": cmd, "cause": b.cause}))
    return found


def _time_findings(profile, bt: pd.DataFrame) -> list[Finding]:
    import pandas as pd

    from popvision_lite.analysis.execution import own_tiles_mean

    out: list[Finding] = []
    rt = run_totals(profile)
    total = rt.ipu_time_cycles
    if total <= 0:
        return out
    kc = rt.kind_cycles
    ex = rt.part_cycles["exchange"]
    share = rt.part_share["exchange"]
    ops = stored_table(profile, "ops")
    if share >= EXCHANGE_SHARE_WARN:
        exc = rt.op_part_cycles[:, STEP_PARTS.index("exchange")] if len(ops) else np.zeros(0)
        order = [i for i in np.argsort(-exc, kind="stable")[:3] if exc[i] > 0]
        top = ops.iloc[order]
        names = "; ".join(f"{r['name']} ({int(round(exc[i])):,} cycles)" for i, (_, r) in zip(order, top.iterrows(),
                                                                                             strict=True))
        out.append(Finding("warning", "exchange", "Exchange takes a large share of the run",
                           f"Exchange takes {ex:,} of {total:,} cycles of {rt.ipu_time_name} per step "
                           f"({format_percent(share)}); "
                           f"global (IPU-Link) {kc.get('exchange_global', 0):,}. Most exchange: {names}. "
                           f"Consider a layout that keeps operands on the tiles that use them.",
                           ops=tuple(int(o) for o in top["op_id"]),
                           numbers={"exchange_cycles": ex, "run_cycles": total, "share": share}))
    host = rt.part_share.get("host", 0.0)
    if host >= HOST_SHARE_NOTE:
        # the host part is its own (not sync): say how big, where it comes from, and what it is per sample
        per_sample = rt.host_seconds / rt.samples_per_step if rt.samples_per_step else float("nan")
        out.append(Finding("info", "host", "The IPUs wait for the host most of the step",
                           f"The host's per-step work ({rt.host_text}) takes {rt.part_cycles['host']:,} of "
                           f"{total:,} cycles of {rt.ipu_time_name} ({format_percent(host)}): every IPU waits "
                           f"meanwhile. It is fixed per step, {format_seconds(per_sample)} per sample at "
                           f"{rt.samples_per_step:g} samples per step; more samples per step (gradient accumulation, "
                           f"device iterations) spread it over more samples.",
                           numbers={"host_cycles": rt.part_cycles["host"], "share": host,
                                    "host_seconds": rt.host_seconds}))
    st = stored_table(profile, "steps")
    comp = st[st["kind"].to_numpy() == STEP_KIND_CODE["compute"]]
    if len(comp):
        bmax = comp["busy_max"].to_numpy(np.float64)
        # over the tiles each step runs on (its IPU's 1,472, not the replica's): execution.own_tiles_mean
        bmean = own_tiles_mean(comp["busy_mean"].to_numpy(np.float64), comp["ipu"].to_numpy(np.int64),
                               int(profile.target.num_ipus))
        idle = 1.0 - float(bmean.sum()) / float(bmax.sum()) if bmax.sum() > 0 else 0.0
        if idle >= COMPUTE_IDLE_WARN:
            waste = pd.Series(bmax - bmean, index=comp["op_id"].to_numpy()).groupby(level=0).sum()
            waste = waste[waste.index >= 0].sort_values(ascending=False).head(3)
            names = dict(zip(ops["op_id"], ops["name"], strict=True))
            lst = "; ".join(f"{names.get(int(o), o)}" for o in waste.index)
            out.append(Finding("warning", "compute_imbalance", "Tiles wait for the slowest tile",
                               f"In compute steps tiles are idle {format_percent(idle)} of the time (mean busy "
                               f"{bmean.sum():,.0f} vs max {bmax.sum():,.0f} cycles summed over steps, over the "
                               f"tiles each step runs on): "
                               f"work is spread unevenly or over few tiles. Worst ops: {lst}.",
                               ops=tuple(int(o) for o in waste.index),
                               numbers={"idle_share": idle}))
    tot = bt["total"].to_numpy(np.float64)
    if len(tot) and tot.mean() > 0:
        ratio = float(tot.max() / tot.mean())
        if ratio >= MEMORY_IMBALANCE_WARN:
            t = int(bt.index[int(np.argmax(tot))])
            out.append(Finding("warning", "memory_imbalance", "Memory is unevenly spread over tiles",
                               f"The fullest tile, {_tile_name(profile, t)}, holds {fmt_bytes(tot.max())}, "
                               f"{ratio:.1f}x the mean tile ({fmt_bytes(tot.mean())}). Spreading its variables "
                               f"over more tiles lowers the peak.",
                               tiles=(t,), numbers={"ratio": ratio, "tile": t}))
    return out


def insights(profile, spec=None) -> Insights:
    """All findings for one profile, most severe first.  ``spec``: DeviceSpec (looked up if None)."""
    if spec is None:
        spec = device_spec(profile)
    bt = memory_table(profile)
    found: list[Finding] = []
    if is_recompute_run(profile):
        ops = stored_table(profile, "ops")
        is_rec = ops["name"].astype(str).str.contains(r"(?:^|/)recompute(?:/|$)").to_numpy(bool)
        rec = ops[is_rec]
        rt = run_totals(profile)
        rc_cyc = int(round(float(rt.op_cycles[is_rec].sum()))) if len(ops) else 0
        total = rt.ipu_time_cycles
        txt = ("This run was made with recomputation on (run config 'recompute'): activations are recomputed "
               "in the backward pass rather than kept, trading cycles for memory.")
        if len(rec):
            txt += (f" {len(rec):,} recomputation ops take {rc_cyc:,} cycles"
                    + (f" ({format_percent(rc_cyc / total)} of {rt.ipu_time_name})." if total else "."))
        found.append(Finding("info", "recompute_on", "Recomputation is on", txt,
                             ops=tuple(int(o) for o in rec.sort_values("cycles", ascending=False)["op_id"].head(_MAX_IDS)),
                             numbers={"recompute": True, "recompute_ops": len(rec), "recompute_cycles": rc_cyc}))
    found += _oom_findings(profile, bt, spec)
    found += _time_findings(profile, bt)
    found += _top_findings(profile, bt)
    found += training_state_findings(profile, spec)
    order = {s: i for i, s in enumerate(SEVERITIES)}
    return Insights(sorted(found, key=lambda f: order.get(f.severity, 9)))


def placed_text(layers: float) -> str:
    """What an IPU of a training-state record holds: 'the whole graph' (layers -1), '4.5 layers', '1 layer'."""
    if layers < 0:
        return "the whole graph"
    return f"{layers:g} layer{'' if layers == 1 else 's'}"


def code_bytes_per_ipu(profile) -> np.ndarray:
    """Bytes of every memory category that is not a variable (code, exchange code, vertex state, stack ...) per
    IPU of the replica, from the memory array: the one figure of an IPU's code (a whole-graph run's training
    state records none)."""
    from popvision_lite.profile import schema

    arr = profile.memory.array()
    keep = [i for i, c in enumerate(schema.MEMORY_CATEGORIES) if c not in ("variable", "constant")]
    per_tile = arr[:, keep, :].sum(axis=(1, 2))
    tpi = int(profile.target.tiles_per_ipu)
    return np.bincount(np.arange(len(per_tile)) // max(tpi, 1), weights=per_tile,
                       minlength=int(profile.target.num_ipus))


def training_state_findings(profile, spec=None) -> list[Finding]:
    """Optimizer state, master weights and code per IPU of a composed (pipelined / replicated) run,
    with one numeric advice line on where the optimizer state lives (run['training_state'])."""
    rec = record_of(profile)
    ts, sch = rec.training_state, rec.schedule
    if not ts:
        return []
    MiB = 2 ** 20
    tiles = int(profile.target.tiles_per_ipu)
    code = code_bytes_per_ipu(profile)
    R = sch.replicas
    shard = R if sch.rts else 1

    def off_chip(t) -> str:  # with RTS each replica's IPU streams its 1/R of the state: the figure per IPU is that
        full = t.mib.optimizer_state_offchip
        if shard > 1 and full > 0:
            return f"{full / shard:.1f} MiB per IPU ({full:.1f} MiB sharded over the {shard} replicas, RTS)"
        return f"{full:.1f} MiB"

    rows = [f"IPU {t.ipu}: {placed_text(t.layers)}; optimizer state on chip {t.mib.optimizer_state_onchip:.1f} MiB "
            f"({t.max_tile_bytes.optimizer_state_onchip / 1024:.1f} KiB on the fullest tile), off chip "
            f"{off_chip(t)}; master weights {t.mib.master_weights:.1f} MiB; "
            f"grad accumulators {t.mib.grad_accum:.1f} MiB; code {code[t.ipu] / MiB if t.ipu < len(code) else 0:.1f} MiB"
            for t in ts]
    worst = max(ts, key=lambda t: t.mib.optimizer_moments + t.mib.master_weights)
    state = (worst.mib.optimizer_moments + worst.mib.master_weights) * MiB / shard
    bw = ddr_bandwidth(spec) if spec is not None else None
    per_tile = state / tiles
    # where the state IS (the record's on-chip bytes), not where the config asked for it: a phased run (PopXL
    # GPT-3) keeps it off chip whatever optimizer_state says, and advice to move it off chip then contradicts
    # the per-IPU lines below
    on_chip = max(t.mib.optimizer_state_onchip for t in ts) > 0
    if bw and state > 0:
        ms = 2 * state / bw * 1e3
        if on_chip:
            advice = (f"Optimizer state off-chip would free {state / MiB:.0f} MiB per IPU ({per_tile / 1024:.1f} KiB/tile) "
                      f"and cost {ms:.1f} ms per step streaming it in and out at {bw / 1e9:.1f} GB/s (DDR share per IPU).")
        else:
            advice = (f"Optimizer state is off chip (0 MiB on any IPU, below): that frees {state / MiB:.0f} MiB per IPU ({per_tile / 1024:.1f} KiB/tile) and "
                      f"costs {ms:.1f} ms per step ({100 * ms / 1e3 / max(sch.step_seconds if 'step_seconds' in sch else 1, 1e-12):.1f}% "
                      f"of the step) at {bw / 1e9:.1f} GB/s (DDR share per IPU).")
    else:
        advice = "No optimizer state to place (plain SGD, no master weights)."
    text = advice + _bullets(rows)
    return [Finding("info", "training_state", "Training state per IPU", text,
                    numbers={"state_bytes_per_ipu": state, "state_bytes_per_tile": per_tile,
                             "stream_ms_per_step": (2 * state / bw * 1e3) if bw else None,
                             "ddr_bytes_per_s": bw})]


# ---------------------------------------------------------------- recomputation pair

def recompute_savings(a, b) -> Finding:
    """What recomputation saved between two runs of one model (order-free: the recompute run is found
    from run config 'recompute'; if neither or both say so, ``b`` is taken as the variant)."""
    base, rec = a, b
    if is_recompute_run(a) and not is_recompute_run(b):
        base, rec = b, a

    def stats(p):
        ls = stored_table(p, "liveness_steps")
        bt = memory_table(p)
        return {
            "peak_bytes": int(ls["total_bytes"].max()) if len(ls) else 0,
            "peak_tile_bytes": int(ls["max_tile_bytes"].max()) if len(ls) else 0,
            "max_tile_total": int(bt["total"].max()) if len(bt) else 0,
            "tiles_over": int((bt["over"] > 0).sum()),
            "cycles": run_totals(p).step_cycles,
        }

    s0, s1 = stats(base), stats(rec)
    saved = s0["peak_bytes"] - s1["peak_bytes"]
    saved_tile = s0["max_tile_total"] - s1["max_tile_total"]
    dcyc = s1["cycles"] - s0["cycles"]
    cyc_txt = (f"{dcyc:,} more cycles ({format_percent(dcyc / s0['cycles'])} slower)" if dcyc > 0 and s0["cycles"]
               else f"{-dcyc:,} fewer cycles" if dcyc < 0 else "no change in cycles")
    lines = [
        f"Not-always-live peak: {fmt_bytes(s0['peak_bytes'])} without recomputation, "
        f"{fmt_bytes(s1['peak_bytes'])} with it: "
        + (f"saved {fmt_bytes(saved)} ({format_percent(saved / s0['peak_bytes'])})" if saved > 0 and s0["peak_bytes"]
           else f"no saving ({fmt_bytes(-saved)} more)" if saved < 0 else "no saving"),
        f"Fullest tile: {fmt_bytes(s0['max_tile_total'])} -> {fmt_bytes(s1['max_tile_total'])}"
        f" ({'saved ' + fmt_bytes(saved_tile) if saved_tile >= 0 else fmt_bytes(-saved_tile) + ' more'})",
        f"Tiles over capacity: {s0['tiles_over']:,} -> {s1['tiles_over']:,}",
        f"Cost: {cyc_txt}",
    ]
    text = _bullets(lines, first=False)
    if saved > 0 and saved_tile <= 0:
        text += ("\nIt lowered the total peak but not the fullest tile, which decides whether the model fits: "
                 "per tile the peak is set by other data (e.g. an op's temporaries or the recomputed ops' own).")
    elif s0["tiles_over"] and not s1["tiles_over"]:
        text += "\nWith recomputation the model fits."
    sev = "info"
    return Finding(sev, "recompute_saved", "What recomputation saved", text,
                   numbers={"base": s0, "recompute": s1, "saved_peak_bytes": saved,
                            "saved_max_tile_bytes": saved_tile, "extra_cycles": dcyc})
