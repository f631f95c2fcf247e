"""The headline numbers of a run (pure: numpy/pandas over a Profile, no Qt).

``summarize(profile)`` -> :class:`Summary`: target, model and config, fits or not, total
cycles and time at the clock, the share of compute / exchange / sync / stream-copy cycles,
peak tile memory and where it is, the top ops by cycles and the numeric check results.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from popvision_lite.analysis import error_band as eb
from popvision_lite.analysis.run_totals import (
    PART_OF_KIND,
    PARTS,
    PEAK_NAL_NAME,
    PEAK_TILE_NAME,
    RunTotals,
    host_step_text,
    run_totals,
)
from popvision_lite.profile import schema
from popvision_lite.profile.run_record import RunRecord, Schedule, record_of
from popvision_lite.profile.schema import stored_table
from popvision_lite.units import format_bytes, format_seconds  # noqa: F401 (re-exported for views)

if TYPE_CHECKING:  # (imported by the functions that build a DataFrame: emulate's end-of-run lines read
    import pandas as pd  # schedule_lines without pandas; decision 0471)

# How step kinds are grouped into the parts PopVision shows (one definition: analysis/run_totals.py).
PHASE_OF_KIND = PART_OF_KIND
PHASES = PARTS


@dataclass
class PeakMemory:
    bytes: int            # total bytes on the fullest tile
    tile: int             # its global id
    ipu: int
    tile_in_ipu: int
    capacity: int         # bytes of SRAM on one tile
    over_capacity_tiles: int  # tiles whose total exceeds capacity
    total_bytes: int      # all tiles together
    always_live_bytes: int
    not_always_live_bytes: int

    @property
    def fraction(self) -> float:
        return self.bytes / self.capacity if self.capacity else float("nan")


@dataclass
class Summary:
    target: schema.TargetInfo
    model: str
    config: dict[str, Any]
    fits: bool
    timing_only: bool
    total_cycles: int                 # wall cycles of one training step (run_totals.step_cycles)
    clock_hz: float
    phase_cycles: dict[str, int]      # part (PHASES) -> IPU cycles of one step, summed over the replica's IPUs
    kind_cycles: dict[str, int]       # step kind -> IPU cycles (waiting at syncs in "sync")
    num_steps: int
    peak: PeakMemory
    top_ops: pd.DataFrame             # name, type, cycles, share, flops, tiles_used (descending cycles per step)
    numeric_checks: dict[str, Any]
    peak_not_always_live: int         # max over liveness steps of the fullest tile's not-always-live bytes
    peak_not_always_live_lstep: int   # -1 when there are no liveness steps
    run: dict[str, Any] = field(default_factory=dict)
    totals: RunTotals | None = None   # every headline number (analysis/run_totals.py)
    record: RunRecord = field(default_factory=RunRecord)  # the run record, typed (profile/run_record.py)

    @property
    def fit_text(self) -> str:
        """'FITS in tile memory' or 'DOES NOT FIT: 5,254 tiles over capacity': every view says it so."""
        return "FITS in tile memory" if self.fits else \
            f"DOES NOT FIT: {self.peak.over_capacity_tiles:,} tiles over capacity"

    @property
    def total_seconds(self) -> float:
        return self.total_cycles / self.clock_hz if self.clock_hz else float("nan")

    @property
    def phase_share(self) -> dict[str, float]:
        tot = sum(self.phase_cycles.values())
        return {k: (v / tot if tot else 0.0) for k, v in self.phase_cycles.items()}

    def numeric_checks_passed(self) -> bool | None:
        """True/False when every check reports a pass flag, None when there are none."""
        flags = [_check_passed(v) for v in self.numeric_checks.values()]
        flags = [f for f in flags if f is not None]
        if not flags:
            return None
        return all(flags)


def _check_passed(v) -> bool | None:
    if isinstance(v, bool | np.bool_):
        return bool(v)
    if isinstance(v, dict):
        for k in ("passed", "ok", "pass"):
            if k in v:
                return bool(v[k])
    return None


def phase_cycles(steps: pd.DataFrame) -> tuple[dict[str, int], dict[str, int]]:
    """Cycles per part and per step kind of the STORED steps, each counted once (end - start); the run's
    totals weight each step by its runs per training step: :func:`run_totals.run_totals`."""
    dur = (steps["end_cycle"].to_numpy(np.int64) - steps["start_cycle"].to_numpy(np.int64))
    kinds = steps["kind"].to_numpy(np.int64)
    per_kind = np.bincount(kinds, weights=dur, minlength=len(schema.STEP_KINDS)) if len(kinds) else \
        np.zeros(len(schema.STEP_KINDS))
    kind_cycles = {k: int(per_kind[i]) for i, k in enumerate(schema.STEP_KINDS)}
    phases = dict.fromkeys(PHASES, 0)
    for k, v in kind_cycles.items():
        phases[PHASE_OF_KIND[k]] += v
    return phases, kind_cycles


def peak_memory(profile) -> PeakMemory:
    arr = profile.memory.array()
    t = profile.target
    per_tile = arr.sum(axis=(1, 2))
    cap = int(t.sram_bytes_per_tile)
    if len(per_tile) == 0:
        return PeakMemory(0, -1, -1, -1, cap, 0, 0, 0, 0)
    tile = int(np.argmax(per_tile))
    return PeakMemory(
        bytes=int(per_tile[tile]), tile=tile, ipu=tile // t.tiles_per_ipu, tile_in_ipu=tile % t.tiles_per_ipu,
        capacity=cap, over_capacity_tiles=int((per_tile > cap).sum()), total_bytes=int(per_tile.sum()),
        always_live_bytes=int(arr[:, :, 0].sum()), not_always_live_bytes=int(arr[:, :, 1].sum()),
    )


def top_ops(profile, n: int = 10) -> pd.DataFrame:
    """The ``n`` ops with the most cycles per training step (run_totals.op_cycles) and their share of the IPU
    time (run_totals.op_share)."""
    import pandas as pd

    ops = stored_table(profile, "ops")
    cols = ["op_id", "name", "type", "cycles", "share", "flops", "tiles_used"]
    if len(ops) == 0:
        return pd.DataFrame(columns=cols)
    rt = run_totals(profile)
    df = ops[["op_id", "name", "type", "flops", "tiles_used"]].copy()
    df.insert(3, "cycles", np.rint(rt.op_cycles).astype(np.int64))
    df.insert(4, "share", rt.op_share)
    df = df.iloc[np.argsort(-rt.op_cycles, kind="stable")[:n]]
    return df[cols].reset_index(drop=True)


def summarize(profile, n_top_ops: int = 10) -> Summary:
    t = profile.target
    run = dict(profile.run or {})
    rec = record_of(profile)
    rt = run_totals(profile)
    peak = peak_memory(profile)
    fits = rec.fits if "fits" in rec else peak.over_capacity_tiles == 0
    config = run.get("config") or {}  # shown as text, key by key (the keys analysis reads: rec.config)
    if not isinstance(config, dict):
        config = {"config": config}
    checks = run.get("numeric_checks") or {}
    if not isinstance(checks, dict):
        checks = {"result": checks}
    return Summary(
        target=t, model=rec.model or "?", config=config, fits=fits,
        timing_only=rec.timing_only, total_cycles=rt.step_cycles, clock_hz=float(t.clock_hz),
        phase_cycles=dict(rt.part_cycles), kind_cycles=dict(rt.kind_cycles), num_steps=profile.num_steps
        if hasattr(profile, "num_steps") else len(stored_table(profile, "steps")), peak=peak,
        top_ops=top_ops(profile, n_top_ops), numeric_checks=checks,
        peak_not_always_live=rt.peak_not_always_live_bytes, peak_not_always_live_lstep=rt.peak_not_always_live_lstep,
        run=run, totals=rt, record=rec,
    )


def schedule_lines(sch: Schedule, clock_hz: float) -> list[str]:
    """The training step's composition in words: the one text of ``emulate``, ``emulate --onnx`` and the Summary
    view ([] for a run with no training schedule).  A pipelined schedule (it has ``layer_split``) names replicas x
    stages, micro-batches, the steady state and each term after the pipeline; a composed whole-graph one (replicas,
    accumulation or an optimizer) its micro-batch and the terms after it."""
    ms = 1e3 / float(clock_hz) if clock_hz else 0.0
    if "layer_split" in sch:
        return [
            f"schedule: {sch.replicas} replica(s) x {sch.stages} pipeline stage(s) (layers [{', '.join(f'{k:g}' for k in sch.layer_split)}])"
            + (f" x tensor parallel {sch.tensor_parallel}" if sch.tensor_parallel > 1 else "")
            + (f" ({sch.tensor_parallel // sch.tensor_parallel_2} x {sch.tensor_parallel_2}, 2-D)"
               if sch.tensor_parallel_2 > 1 else "") + ", "
            f"{sch.grad_accum} micro-batches of {sch.micro_batch} per step"
            + (f" x packing {sch.packing:g}" if sch.packing != 1 else "") + f" = {sch.samples_per_step:g} samples/step",
            f"  steady state {sch.steady_cycles_per_microbatch:,} cycles/micro-batch (slowest stage "
            f"{sch.slowest_stage}, inter-IPU copy {sch.inter_ipu_copy_cycles:,}); fill+drain "
            f"{sch.fill_drain_cycles:,}; all-reduce {sch.allreduce_cycles:,}; optimizer {sch.optimizer_cycles:,}; "
            f"DDR stream {sch.stream_cycles:,} (= {sch.stream_cycles * ms:.2f} ms); step {sch.step_seconds * 1e3:.1f} ms"
            + (f"; timeline shows {sch.profile_pipeline_cycles_shown} of {sch.pipeline_cycles} pipeline cycles"
               if sch.profile_pipeline_cycles_elided else "")]
    if sch.replicas > 1 or sch.grad_accum > 1 or "optimizer" in sch:
        opt = (f"; optimizer {sch.optimizer} (state {sch.optimizer_state}" + (", RTS" if sch.rts else "") + ")"
               if "optimizer" in sch else "")
        return [f"schedule: {sch.replicas} replica(s) x {sch.stages} IPU(s), {sch.grad_accum} micro-batch(es) of "
                f"{sch.micro_batch} per step = {sch.samples_per_step:g} samples/step{opt}",
                f"  micro-batch {sch.steady_cycles_per_microbatch:,} cycles; all-reduce {sch.allreduce_cycles:,}; "
                f"optimizer {sch.optimizer_cycles:,}; DDR stream {sch.stream_cycles:,} (= {sch.stream_cycles * ms:.2f} "
                f"ms); step {sch.step_seconds * 1e3:.3f} ms"]
    return []


def summary_table(profile) -> pd.DataFrame:
    """The Summary as (metric, value) rows: what ``popvision-lite export --view summary -o x.csv`` writes."""
    import pandas as pd

    s = summarize(profile)
    rt = s.totals
    name, share = rt.top_op
    rows = [("device", s.target.name), ("ipus", rt.num_ipus), ("ipu_count", rt.ipu_count_text),
            ("replicas", rt.replicas), ("ipus_per_replica", rt.stages), ("tiles_per_replica", s.target.num_tiles),
            ("clock_hz", s.clock_hz), ("model", s.model), ("fits", s.fits),
            ("step_cycles", rt.step_cycles), ("step_time_s", rt.step_seconds),
            ("total_cycles", rt.total_cycles), ("total_time_s", rt.total_seconds),
            ("ipu_time_cycles", rt.ipu_time_cycles), ("ipu_time_name", rt.ipu_time_name),
            ("num_steps_stored", s.num_steps)]
    rows += [(f"{k}_cycles", v) for k, v in rt.part_cycles.items()]
    rows += [(f"{k}_share", v) for k, v in rt.part_share.items()]
    rows += [("waiting_cycles", rt.waiting_cycles), ("bottleneck", rt.bottleneck),
             ("bottleneck_text", rt.bottleneck_text), ("dominant_phase", rt.dominant_phase),
             ("top_op", name), ("top_op_share", share),
             ("peak_tile_bytes", rt.peak_tile_bytes), ("peak_tile", rt.peak_tile),
             ("peak_not_always_live_bytes", rt.peak_not_always_live_bytes),
             ("always_live_bytes", s.peak.always_live_bytes), ("not_always_live_bytes", s.peak.not_always_live_bytes),
             ("over_capacity_tiles", s.peak.over_capacity_tiles),
             ("samples_per_step", rt.samples_per_step), ("samples_per_second", rt.samples_per_second)]
    for r in rt.phases.itertuples():
        rows.append((f"phase {r.phase_id} {r.name}", f"{int(r.cycles):,} cycles x {int(r.runs_per_step):,} = "
                     f"{100 * r.share_of_step:.1f}% of the step"))
    return pd.DataFrame(rows, columns=["metric", "value"])


def summary_markdown(profile) -> str:
    """The report's ``summary.md``: the Summary's numbers and the verdict, as Markdown."""
    from pathlib import Path

    s = summarize(profile)
    rt = s.totals
    t = s.target
    lines = [f"# Profile report: {Path(str(profile.path)).name}", "",
             f"* target: {t.name}, {rt.ipu_count_text}, {t.tiles_per_ipu} tiles per IPU, {t.clock_hz / 1e9:.3f} GHz"
             f" ({rt.drawn_text})",
             f"* model: {s.model} {s.config}",
             f"* fits: {'yes' if s.fits else 'NO - ' + str(s.peak.over_capacity_tiles) + ' tiles over capacity'}",
             *_fit_lines(profile, s.fits),
             f"* step (wall time): {rt.step_cycles:,} cycles = {format_seconds(rt.step_seconds)}; "
             f"{s.num_steps:,} BSP steps stored",
             f"* samples/s: {rt.samples_per_second:,.1f} ({rt.samples_per_step:g} samples per step); error band: "
             f"{eb.run_band(record_of(profile), rt.num_ipus).text()}",
             f"* host: {host_step_text(record_of(profile).schedule)}",
             f"* {rt.ipu_time_name}: {rt.ipu_time_cycles:,} cycles: "
             + ", ".join(f"{k} {v:,} ({100 * rt.part_share[k]:.1f}%)" for k, v in rt.part_cycles.items()),
             f"* bottleneck: {rt.bottleneck_text}",
             "* phases of the step: " + "; ".join(
                 f"{r.name} {int(r.cycles):,} cycles x {int(r.runs_per_step):,} ({100 * r.share_of_step:.1f}%)"
                 for r in rt.phases.itertuples()),
             f"* {PEAK_TILE_NAME}: {format_bytes(rt.peak_tile_bytes)} on tile {s.peak.tile_in_ipu} of IPU {s.peak.ipu} "
             f"({100 * s.peak.fraction:.1f}% of {format_bytes(s.peak.capacity)})",
             f"* {PEAK_NAL_NAME}: {format_bytes(rt.peak_not_always_live_bytes)} "
             f"(liveness step {rt.peak_not_always_live_lstep})", "", "## Top ops by cycles per step", "",
             f"| op | type | cycles | share of {rt.ipu_time_name} |", "|---|---|---|---|"]
    for r in s.top_ops.itertuples(index=False):
        lines.append(f"| {r.name} | {r.type} | {int(r.cycles):,} | {100 * r.share:.1f}% |")
    lines += _verdict_markdown(profile)
    return "\n".join(lines) + "\n"


def _fit_lines(profile, fits: bool) -> list[str]:
    """For a run that does not fit: what binds it and the fit advisor's command (analysis/fit_constraint.py)."""
    if fits:
        return []
    from popvision_lite.analysis.fit_constraint import binding_constraint
    from popvision_lite.analysis.insights import fit_command

    cmd = fit_command(profile)
    return [f"* why: {binding_constraint(profile).headline()}"] + (
        [f"* find a configuration that fits: `{cmd}`"] if cmd else [])


def _verdict_markdown(profile) -> list[str]:
    """The IPU-or-GPU verdict section of the report (empty, with the reason, when it cannot be made)."""
    from popvision_lite.analysis.verdict import verdict
    from popvision_lite.errors import PopvisionError

    try:
        v = verdict(profile)
    except PopvisionError as e:
        return ["", "## Verdict: IPU or GPU?", "", f"n/a: {e}"]
    out = ["", "## Verdict: IPU or GPU?", "", f"**{v.headline()}**", "", "| | IPU | GPU |", "|---|---|---|"]
    out += [f"| {a} | {b} | {c} |" for a, b, c in v.rows()]
    return out + [""] + [f"* {n}" for n in v.notes]
