"""The training step's phases as a table: one function over the schedule dict (pure numpy / pandas).

A profile stores a few representative BSP steps of a training step (the pipeline's fill, ONE steady-state
pipeline cycle, the drain, then the all-reduce / optimizer / DDR stream steps); the step itself runs the
steady state many times.  The ``phases`` table says which stored steps stand for which part of the step and
how often that part runs, so every total (``analysis/run_totals.py``) weights each stored step by its runs.

:func:`phases_from_schedule` is the only builder: the pipeline writer calls it on the schedule it composed,
and the reader calls it on ``run["schedule"]`` of a file written before the table existed (format < 2.2), so
old and new files get the same table.  Columns (``schema.TABLE_COLUMNS["phases"]``):

* ``phase_id``, ``name`` (shown on screen: "fill", "steady state", "drain", "all-reduce", ...), ``kind``
  (one of :data:`PHASE_KINDS`);
* ``ipu``: -1 = every IPU of the replica takes part (the phases of a training step all do);
* ``start_cycle``: cycles from the start of the step to the phase's first run (wall time);
* ``cycles``: duration of ONE run (wall time);  ``runs_per_step``: runs per training step, back to back;
* ``first_step`` / ``last_step``: the stored steps that represent the phase (inclusive; -1 = none stored);
* ``stored_runs``: how many runs those stored steps hold (1, or the steady-state cycles drawn).  A stored step
  of the phase stands for ``cycles x runs_per_step / covered`` of its kind, ``covered`` being the wall cycles
  the phase's stored steps cover (union of their intervals): ``runs_per_step / stored_runs`` when every run
  drawn is complete; more when the emulator left some fill / drain pipeline cycles out of a large profile
  (its size limit), the drawn cycles then standing for the phase in proportion of wall time;
* ``time_kind``: for a phase without stored steps, the step kind its time counts as (``STEP_KINDS``), else "" (a
  host term: the part "host", no step kind; 3.1 files store "sync" for it);
* ``ipu_<kind>`` (one column per step kind): busy IPU cycles of one run of the phase of that kind, summed over
  the IPUs, when the producer composed them from every pipeline cycle (``schedule["phase_ipu_cycles"]``,
  since format 2.2); -1 = not recorded, the totals then weight the stored steps.

The rule for a pipelined schedule (``schedule["pipeline_cycles"]`` present; ``emulator/schedule.py``):
with ``D`` pipeline stages (``pipeline_depth``) and ``G`` micro-batches a step has ``G + 2D - 2`` pipeline
cycles; the first ``2D - 2`` are the fill (stage s starts its backward pass in cycle ``2D - 2 - s``), the
last ``2D - 2`` the drain, and the ``G - 2D + 2`` between run every stage forward and backward and last
``steady_cycles_per_microbatch`` each.  The fill's and drain's durations are ``fill_cycles`` /
``drain_cycles`` of the schedule (written since format 2.2); for an older file the fill ends where the
``(2D - 2)``-th inter-IPU copy step (``exchange_global`` on every IPU, closing each pipeline cycle) ends,
and the drain is the rest of ``pipeline_total_cycles`` (an older file that left pipeline cycles out of its
timeline, ``profile_pipeline_cycles_elided`` > 0, may lack fill cycles: its fill and drain share the rest
evenly, which is marked as not recorded).  After the pipeline: DDR stream in (half of
``stream_cycles``), gradient all-reduce, optimizer, DDR stream out, as the timeline draws them, each lasting
the slowest IPU's time.  A whole-graph schedule (no pipeline) is one micro-batch (the stored steps) run
``grad_accum`` times, the gradient accumulation pass (``steady_cycles_per_microbatch`` minus the stored
micro-batch) and the same post-pipeline phases without stored steps.  ``schedule["per_step_terms"]``
({name: seconds}, host / runtime terms of a step) become one phase each, after the others.  A run without
a schedule, or a one-micro-batch whole-graph run with nothing after it, is one phase: the whole run.
"""

from __future__ import annotations

import numpy as np

from popvision_lite.profile.columns import Columns
from popvision_lite.profile.run_record import STEP_LIMIT, Schedule
from popvision_lite.profile.schema import STEP_KIND_CODE, STEP_KINDS

PHASE_KINDS: tuple[str, ...] = ("whole", "fill", "steady", "drain", "accumulate", "stream", "allreduce",
                                "optimizer", "term")
# the step kind a phase's time counts as when the profile stores no steps for it; a host term ("term") is no step
# kind: the IPUs wait for the host, counted as the part "host" (analysis/run_totals.py); its time_kind is "" (format
# 3.2; 3.1 files store "sync" for it, which the totals do not read)
TIME_KIND = {"accumulate": "compute", "stream": "stream_copy", "allreduce": "exchange_global",
             "optimizer": "compute"}
_K_XG = STEP_KIND_CODE["exchange_global"]  # the copy step closing a pipeline cycle
# phases of one training step: a pipeline has 7 (fill, steady state, drain, stream in, all-reduce, optimizer,
# stream out) plus one per host term (run_record.MAX_PHASE_TERMS); a table claiming more is refused before it is
# read (reader) - 10^6 rows of them kept `info` busy for minutes
MAX_PHASES = 256
# phases tile the step: the last ends at the schedule's step (step_seconds x clock) within one cycle per phase
# (each host term is rounded to whole cycles) plus 1e-9 of the step (float seconds)
STEP_TOLERANCE_RELATIVE = 1e-9


def _step_range(starts: np.ndarray, lo: int, hi: int) -> tuple[int, int]:
    """First and last stored step (rows of ``starts``, sorted) starting in [lo, hi); (-1, -1) when none."""
    a = int(np.searchsorted(starts, lo, side="left"))
    b = int(np.searchsorted(starts, hi, side="left"))
    return (a, b - 1) if b > a else (-1, -1)


def _stored_cycles(starts: np.ndarray, a: int, b: int, lo: int, period: int) -> int:
    """Distinct pipeline cycles of length ``period`` from ``lo`` that stored steps a..b start in."""
    if a < 0 or period <= 0:
        return 0
    return int(len(np.unique((starts[a:b + 1] - lo) // period)))


# the columns of the phases table after phase_id, in the stored order
_ROW_COLUMNS = ("name", "kind", "ipu", "start_cycle", "cycles", "runs_per_step", "first_step", "last_step",
                "stored_runs", "time_kind", *(f"ipu_{k}" for k in STEP_KINDS))


def phases_from_schedule(schedule: Schedule | None, steps, clock_hz: float):
    """The phases table of a run with ``schedule`` (the checked ``run["schedule"]``, ``run_record.Schedule``; None
    or empty: no schedule) whose stored steps are ``steps`` (the steps table, a DataFrame or ``Columns``: ``kind``,
    ``ipu``, ``start_cycle``, ``end_cycle``; time-ordered by start as every writer stores them), as a DataFrame.
    See the module docstring for the rule.  ValueError when a phase or the step would last more than
    ``run_record.STEP_LIMIT``."""
    import pandas as pd

    df = pd.DataFrame(_phase_rows(schedule, steps, clock_hz), columns=list(_ROW_COLUMNS))
    df.insert(0, "phase_id", np.arange(len(df), dtype=np.int32))
    return df


def phase_columns(schedule: Schedule | None, steps, clock_hz: float) -> Columns:
    """:func:`phases_from_schedule` as typed columns (``profile.columns.Columns``): what the writer stores."""
    rows = _phase_rows(schedule, steps, clock_hz)
    data = {c: [r[c] for r in rows] for c in _ROW_COLUMNS}
    data["phase_id"] = np.arange(len(rows), dtype=np.int32)
    return Columns.typed("phases", data)


def _phase_rows(schedule: Schedule | None, steps, clock_hz: float) -> list[dict]:
    """The rows of :func:`phases_from_schedule` (without phase_id)."""
    sch = schedule if schedule is not None else Schedule()
    n_steps = 0 if steps is None else len(steps)
    if n_steps:
        starts = np.asarray(steps["start_cycle"], np.int64)
        ends = np.asarray(steps["end_cycle"], np.int64)
        t_end = int(ends.max())
    else:
        starts = ends = np.zeros(0, np.int64)
        t_end = 0
    rows: list[dict] = []
    busy = sch.phase_ipu_cycles

    def add(name, kind, start, cycles, runs=1, rng=(-1, -1), stored=0, ipu=-1):
        if cycles <= 0 or runs <= 0:
            return start
        end = int(start) + int(cycles) * int(runs)  # Python integers: no wrap-around before the bound
        if end > STEP_LIMIT:
            raise ValueError(f"phase '{name}' ({int(cycles):,} cycles x {int(runs):,} runs from cycle {int(start):,}) "
                             f"ends past {STEP_LIMIT:,} cycles, beyond any training step")
        known = busy.get(kind) or {}
        rows.append(dict(name=name, kind=kind, ipu=ipu, start_cycle=int(start), cycles=int(cycles),
                         runs_per_step=int(runs), first_step=int(rng[0]), last_step=int(rng[1]),
                         stored_runs=int(stored if rng[0] >= 0 else 0),
                         time_kind="" if rng[0] >= 0 else TIME_KIND.get(kind, ""),
                         **{f"ipu_{k}": int(known[k]) if k in known else -1 for k in STEP_KINDS}))
        return end

    G = sch.grad_accum
    post = [("stream in", "stream", sch.stream_cycles // 2),
            ("all-reduce", "allreduce", sch.allreduce_cycles),
            ("optimizer", "optimizer", sch.optimizer_cycles),
            ("stream out", "stream", sch.stream_cycles - sch.stream_cycles // 2)]
    if sch.pipelined:
        if (np.diff(starts) < 0).any():  # a producer that did not sort its steps: the phases need time order
            raise ValueError("steps are not ordered by start_cycle; a pipeline's phases need the stored time order")
        D = sch.pipeline_depth if "pipeline_depth" in sch else sch.stages
        n = sch.pipeline_cycles
        total = sch.pipeline_total_cycles
        steady = sch.steady_cycles_per_microbatch
        nf = min(2 * D - 2, n)
        nd = min(2 * D - 2, n - nf)
        ns = max(n - nf - nd, 0)
        if "fill_cycles" in sch and "drain_cycles" in sch:
            fill, drain = sch.fill_cycles, sch.drain_cycles
        else:  # written before format 2.2: the fill ends with the nf-th inter-IPU copy step
            copies = np.flatnonzero((np.asarray(steps["kind"], np.int64) == _K_XG)
                                    & (np.asarray(steps["ipu"], np.int64) == -1)) \
                if n_steps else np.zeros(0, np.int64)
            rest = max(total - ns * steady, 0)
            if sch.profile_pipeline_cycles_elided > 0:
                fill = rest // 2  # some fill cycles may be missing from the file: their split is not recorded
            else:
                fill = int(ends[copies[nf - 1]]) if 0 < nf <= len(copies) else 0
            drain = max(rest - fill, 0)
        t = add("fill", "fill", 0, fill, 1, _step_range(starts, 0, fill), 1)
        lo = t
        rng = _step_range(starts, lo, lo + ns * steady)
        t = add("steady state", "steady", lo, steady, ns, rng, _stored_cycles(starts, *rng, lo, steady))
        t = add("drain", "drain", t, drain, 1, _step_range(starts, t, t + drain), 1)
        for name, kind, d in post:
            t = add(name, kind, t, d, 1, _step_range(starts, t, t + d), 1)
    else:
        micro = sch.steady_cycles_per_microbatch if "steady_cycles_per_microbatch" in sch else t_end
        composed = G > 1 or any(d > 0 for _, _, d in post)
        if not composed:
            t = add("whole run", "whole", 0, max(t_end, 1) if n_steps else 0, 1, (0, n_steps - 1) if n_steps else
                    (-1, -1), 1)
        else:
            t = add("micro-batch", "steady", 0, t_end, G, (0, n_steps - 1) if n_steps else (-1, -1), 1)
            if micro > t_end:  # the accumulation pass the whole-graph composition adds to every micro-batch
                t = add("gradient accumulation", "accumulate", t, micro - t_end, G)
            for name, kind, d in post:
                t = add(name, kind, t, d)
    for name, secs in sch.per_step_terms.items():
        t = add(str(name), "term", t, int(round(secs * float(clock_hz))))  # named as the term: "host_step"
    return rows


def covered_cycles(starts: np.ndarray, ends: np.ndarray) -> int:
    """Length of the union of the intervals [start, end)."""
    if not len(starts):
        return 0
    o = np.argsort(starts, kind="stable")
    s, e = starts[o], np.maximum.accumulate(ends[o])
    prev_end = np.concatenate([[s[0]], e[:-1]])
    return int((e - np.maximum(s, prev_end)).clip(min=0).sum())


def step_runs(phases, steps, num_ipus: int) -> tuple[np.ndarray, np.ndarray]:
    """How many times each stored step runs per training step, and the same weight per phase (0 for a phase
    without stored steps): ``(runs per stored step, runs per phase)``.

    The one definition of the weighting every total reads (``analysis/run_totals.py``, the ``runs`` column of
    the notebook's ``Profile.steps``): a stored step of a phase stands for ``cycles x runs_per_step / covered``
    of it (``covered`` = the wall cycles its stored steps cover), or, when the producer recorded the phase's
    busy IPU cycles (every ``ipu_<kind>`` >= 0), for ``sum(ipu_<kind>) x runs_per_step / busy IPU cycles of the
    stored steps``; a step of every IPU (``ipu`` -1) is busy on each of the ``num_ipus``.  A stored step no
    phase claims runs once.  Both tables in their stored form (-1 for none), each a DataFrame, typed columns
    (``profile.columns.Columns``) or a dict of numpy columns: read by column name only."""
    starts = np.asarray(steps["start_cycle"], np.int64)
    n = len(starts)
    nph = len(phases["cycles"])
    weight = np.ones(n, np.float64)
    per_phase = np.zeros(nph, np.float64)
    if not n or not nph:
        return weight, per_phase
    ends = np.asarray(steps["end_cycle"], np.int64)
    dur = ends - starts
    kind = np.asarray(steps["kind"], np.int64)
    ipu = np.asarray(steps["ipu"], np.int64) if "ipu" in steps else np.full(n, -1, np.int64)
    lanes = np.where(ipu < 0, int(num_ipus), 1).astype(np.float64)
    known_all = np.stack([np.asarray(phases[f"ipu_{k}"], np.float64) for k in STEP_KINDS], axis=1)
    first = np.asarray(phases["first_step"], np.int64)
    last = np.asarray(phases["last_step"], np.int64)
    runs = np.asarray(phases["runs_per_step"], np.int64)
    wall = np.asarray(phases["cycles"], np.int64) * runs
    for i in range(nph):
        if first[i] < 0:
            continue
        a, b = int(first[i]), int(last[i]) + 1
        cov = covered_cycles(starts[a:b], ends[a:b])
        w = int(wall[i]) / cov if cov > 0 else 0.0
        stored = np.bincount(kind[a:b], weights=dur[a:b] * lanes[a:b], minlength=len(STEP_KINDS))
        if (known_all[i] >= 0).all() and stored.sum() > 0:
            # the producer's busy cycles of every run (drawn or not): the stored steps stand for them
            w = float(known_all[i].sum()) * int(runs[i]) / float(stored.sum())
        weight[a:b] = w
        per_phase[i] = w
    return weight, per_phase
