"""One definition of every headline number of a run (pure: numpy / pandas over a Profile, no Qt).

Every view, CLI command and export that shows a step time, a share, a bottleneck, an op's share, the peak
tile memory, an IPU count or a throughput reads it from :func:`run_totals`, so they cannot disagree.

**Weighting.** A profile stores a few representative steps of a training step (``profile.phases``): each
stored step stands for ``cycles x runs_per_step / covered`` of its phase (``profile/phases.py``), e.g. the
one stored steady-state pipeline cycle of a POD16 BERT run stands for 184 of them.  Every cycle total below
is these weighted cycles: what one training step (one replica) spends.

**Two kinds of time, named differently.**

* *wall time* (``step_cycles``): one training step from start to end; the replicas run in parallel, so this
  is also the system's step.  ``total_cycles`` is the profiled run = one step.
* *IPU time summed over the S IPUs of one replica* (``ipu_time_cycles`` = S x wall time): what the parts
  compute / exchange / sync / stream / host divide, so they add up to it exactly.  An IPU that waits for the
  slowest IPU of a pipeline cycle (or for a phase it takes no part in) is waiting at a sync: that time is
  ``waiting_cycles``, counted in sync.

Step kinds map to parts by :data:`PART_OF_KIND`; a step on every IPU (``ipu`` -1) counts once per IPU.
**Host** is a part of its own, not a step kind: the per-step host / runtime terms of the schedule (the
framework's host step loop, host-link input, multi-host synchronisation: the "term" phases), during which every
IPU waits for the host; ``host_text`` names where that time comes from ("host step 167 ms (calibrated,
PopART)").  Counting it as sync made a BERT-tiny step read "sync 99.9 %" (issue 46).

**numpy, pandas on request.**  The totals are computed from the tables' columns as numpy arrays, whether the
profile holds DataFrames (an open file) or typed columns (``profile.columns.Columns``: the emulator's
``ProfileData``, which ``emulate``'s end-of-run lines read), so a process that never asks for a DataFrame never
imports pandas (decision 0471).  ``RunTotals.phase_columns`` is the phases table with the totals' columns as
numpy; ``RunTotals.phases`` the same as a DataFrame, built (and pandas imported) on first access;
:func:`totals_frame` a DataFrame too.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from popvision_lite.profile import schema
from popvision_lite.profile.phases import phase_columns, step_runs
from popvision_lite.profile.run_record import RunRecord, record_of
from popvision_lite.profile.schema import stored_table

if TYPE_CHECKING:
    import pandas as pd

PART_OF_KIND = {
    "compute": "compute",
    "exchange_internal": "exchange",
    "exchange_global": "exchange",
    "sync": "sync",
    "stream_copy": "stream",
}
STEP_PARTS = ("compute", "exchange", "sync", "stream")  # the parts BSP steps (and so ops) divide
PARTS = (*STEP_PARTS, "host")  # ... and the host's per-step terms (phases of kind "term"), every IPU waiting
# the one name of each memory figure, shown wherever it is shown
PEAK_TILE_NAME = "peak tile memory (fullest tile, always-live + not-always-live peak)"
PEAK_NAL_NAME = "peak not-always-live memory (fullest tile, liveness)"
WALL_NAME = "wall time of one step"
# the columns run_totals adds to each phase (after the phases table's own), then "share_of_step"
PHASE_TOTAL_COLUMNS = ("wall_cycles", "ipu_time_cycles", "waiting_cycles", *(f"kind_{k}" for k in schema.STEP_KINDS),
                       "kind_host", *PARTS)


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def _numpy_columns(table, names=None) -> dict[str, np.ndarray]:
    """Columns ``names`` (every column when None) that ``table`` has (a DataFrame, or typed columns
    ``profile.columns.Columns``), each as a 1-D numpy array (a DataFrame's ``to_numpy()``: no copy where none is
    needed); none of a table that is None."""
    if table is None:
        return {}
    have = table.columns
    out = {}
    for c in (list(have) if names is None else [c for c in names if c in have]):
        v = table[c]
        out[c] = v.to_numpy() if hasattr(v, "to_numpy") else np.asarray(v)
    return out


class PhaseColumns:
    """The phases table with the columns :func:`run_totals` adds (:data:`PHASE_TOTAL_COLUMNS`, then
    ``share_of_step``), as numpy columns: ``pc[col]`` a 1-D array, ``col in pc``, ``pc.columns``, ``len(pc)`` its
    rows.  Equal to another when they hold the same columns in the same order with the same values.
    :meth:`frame` is the table as a DataFrame (``RunTotals.phases``), built on first use (pandas imported then):
    the profile's phases frame (copied) when it held one, else a frame of its columns, joined to the added
    columns, as run_totals built it before the columns (decision 0471)."""

    __slots__ = ("data", "_rows", "_source", "_step_cycles", "_frame")

    def __init__(self, data: dict[str, np.ndarray], rows: int, source, step_cycles: int):
        self.data = data                  # every column, the table's own first
        self._rows = rows
        self._source = source             # the profile's phases DataFrame (a copy), or None (they were columns)
        self._step_cycles = step_cycles
        self._frame = None

    def __len__(self) -> int:
        return self._rows

    def __getitem__(self, col: str) -> np.ndarray:
        return self.data[col]

    def __contains__(self, col) -> bool:
        return col in self.data

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(self.data)

    def __eq__(self, other) -> bool:
        if not isinstance(other, PhaseColumns):
            return NotImplemented
        return (self.columns == other.columns and len(self) == len(other)
                and all(np.array_equal(self.data[c], other.data[c]) for c in self.data))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"PhaseColumns({len(self)} phases, columns {list(self.data)})"

    def frame(self) -> pd.DataFrame:
        if self._frame is None:
            import pandas as pd

            own = [c for c in self.data if c not in PHASE_TOTAL_COLUMNS and c != "share_of_step"]
            ph = self._source if self._source is not None else pd.DataFrame({c: self.data[c] for c in own}).copy()
            cols = list(PHASE_TOTAL_COLUMNS)
            extra = (pd.DataFrame({c: self.data[c] for c in cols}, index=ph.index) if self._rows else
                     pd.DataFrame(columns=cols, index=ph.index))
            ph = pd.concat([ph, extra], axis=1)
            step_cycles = self._step_cycles
            ph["share_of_step"] = ph["wall_cycles"] / step_cycles if step_cycles else 0.0
            self._frame = ph
        return self._frame


@dataclass
class RunTotals:
    clock_hz: float
    step_cycles: int                      # wall cycles of one training step (the profiled run)
    total_cycles: int                     # wall cycles of the profiled run (= one step)
    replicas: int
    stages: int                           # IPUs of one replica drawn (one per pipeline stage)
    pipelined: bool
    ipu_time_cycles: int                  # IPU time summed over the S IPUs of one replica (= S x step, or more)
    part_cycles: dict[str, int]           # part -> weighted IPU cycles; sums to ipu_time_cycles
    kind_cycles: dict[str, int]           # step kind -> weighted IPU cycles (waiting at syncs in "sync"), and
    #                                       "host": the host terms (not a step kind); sums to ipu_time_cycles
    waiting_cycles: int                   # IPU cycles waiting at a sync (in part_cycles["sync"])
    phase_columns: PhaseColumns           # the phases table + wall, ipu_time and part columns, share_of_step
    step_weight: np.ndarray               # per stored step: how many times it runs per training step
    op_cycles: np.ndarray                 # per ops row: cycles per training step (one replica): the pipelined
    #                                       ops table's own per-step totals, else its stored steps weighted
    op_share: np.ndarray                  # op_cycles / ipu_time_cycles
    op_part_cycles: np.ndarray            # (ops, STEP_PARTS) weighted cycles per part; rows sum to op_cycles
    program_cycles: np.ndarray            # per programs row: weighted cycles of its steps, children included
    op_names: list[str]
    peak_tile_bytes: int
    peak_tile: int
    peak_not_always_live_bytes: int
    peak_not_always_live_lstep: int
    capacity_bytes: int
    samples_per_step: float
    samples_per_second: float
    throughput_basis: str
    notes: list[str] = field(default_factory=list)
    tensor_parallel: int = 1              # IPUs each stage's layers are sharded over (one of them drawn)
    host_text: str = ""                   # where the host part comes from: host_step_text(schedule)
    host_short: str = ""                  # the same in a few words: "host step 167 ms (calibrated, PopART)"
    unphased_kind_cycles: np.ndarray | None = None  # per step kind: IPU cycles of stored steps in no phase

    # ---- derived, so there is one formula each
    @property
    def phases(self) -> pd.DataFrame:
        """:attr:`phase_columns` as a DataFrame (built on first access; pandas is imported then)."""
        return self.phase_columns.frame()

    @property
    def num_ipus(self) -> int:
        return self.replicas * self.stages * self.tensor_parallel

    @property
    def step_seconds(self) -> float:
        return self.step_cycles / self.clock_hz if self.clock_hz else math.nan

    @property
    def total_seconds(self) -> float:
        return self.total_cycles / self.clock_hz if self.clock_hz else math.nan

    @property
    def ipu_time_seconds(self) -> float:
        return self.ipu_time_cycles / self.clock_hz if self.clock_hz else math.nan

    @property
    def part_share(self) -> dict[str, float]:
        t = self.ipu_time_cycles
        return {k: (v / t if t else 0.0) for k, v in self.part_cycles.items()}

    @property
    def host_seconds(self) -> float:
        """Wall time of the step's host terms (the IPUs wait for the host meanwhile)."""
        S = max(self.stages, 1)
        return self.part_cycles.get("host", 0) / S / self.clock_hz if self.clock_hz else math.nan

    @property
    def bottleneck(self) -> str:
        """The part (compute / exchange / sync / stream / host) with the most IPU time."""
        sh = self.part_share
        return max(PARTS, key=lambda k: sh.get(k, 0.0)) if self.ipu_time_cycles else "n/a"

    @property
    def dominant_phase(self) -> str:
        """Name of the phase with the most wall time of the step."""
        ph = self.phase_columns
        return str(ph["name"][int(np.argmax(ph["wall_cycles"]))]) if len(ph) else "n/a"

    @property
    def bottleneck_text(self) -> str:
        """E.g. 'steady-state compute (72% of IPU time)': the bottleneck part, in the phase holding most of it."""
        if not self.ipu_time_cycles:
            return "n/a"
        b = self.bottleneck
        ph = self.phase_columns
        what = b
        if b == "sync" and self.waiting_cycles >= 0.5 * self.part_cycles["sync"]:
            what = "sync: IPUs waiting for each other"
        if b == "host":
            what = f"host: IPUs waiting for the {self.host_short or 'host'}"
        pct = f"{100 * self.part_share[b]:.0f}% of IPU time"
        if len(ph) > 1 and b in ph:
            i = int(np.argmax(ph[b]))
            if ph[b][i] > 0.5 * self.part_cycles[b]:  # most of it in one phase: say which
                name = str(ph["name"][i]).replace("_", " ")
                if b == "host":  # the host part is its terms: no phase to name beside them
                    return f"{what} ({pct})"
                if name == "steady state":
                    return f"steady-state {what} ({pct})"
                return f"{what} ({pct}, mostly in the {name})"
        return f"{what} ({pct})"

    @property
    def ipu_count_text(self) -> str:
        """'4 replicas x 4 stages = 16 IPUs' (pipelined) or '1 replica x 1 IPU = 1 IPU'."""
        unit = "stage" if self.pipelined else "IPU"
        tp = f" x {self.tensor_parallel} tensor-parallel IPUs" if self.tensor_parallel > 1 else ""
        return (f"{_plural(self.replicas, 'replica')} x {_plural(self.stages, unit)}{tp} = "
                f"{_plural(self.num_ipus, 'IPU')}")

    @property
    def drawn_text(self) -> str:
        return (f"one replica (replica 1 of {self.replicas}) drawn; the others run the same"
                if self.replicas > 1 else "the only replica drawn")

    @property
    def ipu_time_name(self) -> str:
        return f"IPU time summed over {_plural(self.stages, 'IPU')}" + (" of one replica" if self.replicas > 1 else "")

    @property
    def top_op(self) -> tuple[str, float]:
        if not len(self.op_cycles):
            return "", 0.0
        i = int(np.argmax(self.op_cycles))
        return self.op_names[i], float(self.op_share[i])

    def headline(self) -> dict[str, Any]:
        """Every headline number as plain values: what the consistency test compares across consumers."""
        name, share = self.top_op
        return {
            "step_cycles": self.step_cycles, "step_seconds": self.step_seconds, "total_cycles": self.total_cycles,
            "ipu_time_cycles": self.ipu_time_cycles, "ipu_time_name": self.ipu_time_name,
            "part_cycles": dict(self.part_cycles), "part_share": self.part_share, "bottleneck": self.bottleneck,
            "bottleneck_text": self.bottleneck_text, "dominant_phase": self.dominant_phase,
            "top_op": name, "top_op_share": share, "peak_tile_bytes": self.peak_tile_bytes,
            "peak_tile": self.peak_tile, "peak_not_always_live_bytes": self.peak_not_always_live_bytes,
            "replicas": self.replicas, "stages": self.stages, "num_ipus": self.num_ipus,
            "ipu_count_text": self.ipu_count_text, "samples_per_step": self.samples_per_step,
            "samples_per_second": self.samples_per_second,
        }


def throughput(rec: RunRecord, step_cycles: int, clock_hz: float) -> tuple[float, float, str]:
    """(samples per step, samples/s, basis): all replicas' samples per step over the step's wall time (``rec``: the
    checked run record, ``run_record.record_of``)."""
    sch, cfg = rec.schedule, rec.config
    secs = step_cycles / clock_hz if clock_hz and step_cycles > 0 else 0.0
    if sch.samples_per_step > 0:
        per, basis = sch.samples_per_step, "schedule samples_per_step / step wall time"
    elif cfg.batch:
        per = float(cfg.batch) * float(cfg.packing or 1.0) * (cfg.replicas or 1) * (cfg.grad_accum or 1)
        basis = "config batch x packing x replicas x grad_accum / step wall time (no schedule recorded)"
    elif rec.samples_per_second > 0 and secs > 0:
        return rec.samples_per_second * secs, rec.samples_per_second, "run samples_per_second"
    else:
        return math.nan, math.nan, "unknown (no batch size recorded)"
    return per, (per / secs if secs > 0 else math.nan), basis


def run_totals(profile) -> RunTotals:
    """The headline numbers of ``profile`` (a Profile; see the module docstring).  Cached per open profile."""
    cached = getattr(profile, "_run_totals_cache", None)
    if cached is not None:
        return cached
    rt = _compute(profile)
    try:
        profile._run_totals_cache = rt
    except AttributeError:  # a read-only stand-in: compute every time
        pass
    return rt


def _phase_parts(ph: dict[str, np.ndarray], rows: int, phase_w, kind: np.ndarray, dur: np.ndarray,
                 lanes: np.ndarray, S: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Each phase's wall time, IPU time, waiting and cycles by step kind and by part (the columns
    :data:`PHASE_TOTAL_COLUMNS`, one value per phase) from ``ph`` (the phases table's numpy columns, ``rows``
    phases); and which stored steps some phase claims."""
    n = len(kind)
    nk = len(schema.STEP_KINDS)
    part_idx = np.array([PARTS.index(PART_OF_KIND[k]) for k in schema.STEP_KINDS])
    HOST = PARTS.index("host")
    out = []
    in_phase = np.zeros(n, bool)
    # each phase's values as Python scalars, as a DataFrame's rows give them
    cyc, runs, first, last, pkind, pipu, tkind = (ph[c].tolist() if rows else [] for c in (
        "cycles", "runs_per_step", "first_step", "last_step", "kind", "ipu", "time_kind"))
    known_all = [ph[f"ipu_{k}"].tolist() for k in schema.STEP_KINDS]
    for i in range(rows):
        wall = int(cyc[i]) * int(runs[i])
        kinds = np.zeros(nk)
        host = 0.0
        known = np.array([col[i] for col in known_all], np.float64)
        if first[i] >= 0:
            a, b = int(first[i]), int(last[i]) + 1
            w = phase_w[i]
            in_phase[a:b] = True
        if (known >= 0).all():
            kinds += known * int(runs[i])
        elif first[i] >= 0:
            kinds += np.bincount(kind[a:b], weights=dur[a:b] * lanes[a:b] * w, minlength=nk)
        elif pkind[i] == "term":  # a host / runtime term (files before issue 46 stored time_kind "sync"): host
            host = float(wall * (S if pipu[i] < 0 else 1))
        elif tkind[i]:
            kinds[schema.STEP_KIND_CODE[tkind[i]]] += wall * (S if pipu[i] < 0 else 1)
        busy = float(kinds.sum()) + host
        lanes_ph = S if pipu[i] < 0 else 1
        wait = max(wall * lanes_ph - busy, 0.0)
        parts = np.zeros(len(PARTS))
        np.add.at(parts, part_idx, kinds)
        parts[PARTS.index("sync")] += wait
        parts[HOST] += host
        out.append((wall, busy + wait, wait, *kinds, host, *parts))
    cols = {c: np.array([r[j] for r in out], np.int64 if c == "wall_cycles" else np.float64)
            for j, c in enumerate(PHASE_TOTAL_COLUMNS)}
    return cols, in_phase


def _op_cycles(profile, steps: dict[str, np.ndarray], n: int, sch, weighted: np.ndarray, kind: np.ndarray,
               ipu_time: int) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray]:
    """(op names, each op's cycles, its cycles by part, its share of the IPU time): the weighted cycles of the
    stored steps each op owns (every IPU of a step on all IPUs), or the pipelined ops table's own."""
    part_idx = np.array([PARTS.index(PART_OF_KIND[k]) for k in schema.STEP_KINDS])
    ops_table = stored_table(profile, "ops")
    n_ops = len(ops_table)
    pipelined = "pipeline_cycles" in sch and n_ops
    ops = _numpy_columns(ops_table, ("name", *(("cycles", "compute_cycles", "exchange_cycles", "sync_cycles",
                                                 "stream_cycles") if pipelined else ())))
    op_id = steps["op_id"].astype(np.int64, copy=False) if "op_id" in steps else np.full(n, -1, np.int64)
    ok = op_id >= 0
    op_cycles = np.bincount(op_id[ok], weights=weighted[ok], minlength=n_ops)[:n_ops] \
        if n_ops else np.zeros(0)
    op_part = np.zeros((n_ops, len(STEP_PARTS)))
    if n_ops and ok.any():
        np.add.at(op_part, (op_id[ok], part_idx[kind[ok]]), weighted[ok])
    if pipelined:
        # a pipelined ops table holds each op's cycles per training step of one replica, composed by the
        # emulator from every micro-batch (analysis/model_pass.py); the timeline draws only some pipeline cycles
        op_cycles = ops["cycles"].astype(np.float64)
        op_part = np.stack([ops[c].astype(np.float64) for c in
                            ("compute_cycles", "exchange_cycles", "sync_cycles", "stream_cycles")], axis=1)
    op_share = op_cycles / ipu_time if ipu_time else np.zeros(len(op_cycles))
    names = [str(v) for v in ops["name"].tolist()] if n_ops else []
    return names, op_cycles, op_part, op_share


def _program_cycles(profile, steps: dict[str, np.ndarray], n: int, weighted: np.ndarray) -> np.ndarray:
    """Each program's weighted cycles, its children's included (children come after their parent)."""
    progs = stored_table(profile, "programs")
    n_progs = 0 if progs is None else len(progs)
    parent = (_numpy_columns(progs, ("parent_id",))["parent_id"].astype(np.int64, copy=False) if n_progs
              else np.zeros(0, np.int64))
    pid = steps["prog_id"].astype(np.int64, copy=False) if "prog_id" in steps else np.full(n, -1, np.int64)
    okp = pid >= 0
    prog_cycles = np.bincount(pid[okp], weights=weighted[okp], minlength=n_progs)[:n_progs] \
        if n_progs else np.zeros(0)
    for q in range(n_progs - 1, -1, -1):  # children come after their parent
        if parent[q] >= 0:
            prog_cycles[parent[q]] += prog_cycles[q]
    return prog_cycles


def _memory_peaks(profile) -> tuple[int, int, int, int]:
    """(peak tile bytes, peak tile, peak not-always-live bytes, its liveness step)."""
    per_tile = profile.memory.array().sum(axis=(1, 2))
    peak_tile = int(np.argmax(per_tile)) if per_tile.size else -1
    ls_table = stored_table(profile, "liveness_steps")
    if len(ls_table):
        ls = _numpy_columns(ls_table, ("max_tile_bytes", "lstep"))
        i = int(np.argmax(ls["max_tile_bytes"]))
        nal, nal_l = int(ls["max_tile_bytes"][i]), int(ls["lstep"][i])
    else:
        nal, nal_l = 0, -1
    return (int(per_tile[peak_tile]) if per_tile.size else 0), peak_tile, nal, nal_l


def _phase_source(table):
    """The phases table's own columns as numpy (copies) and, when it is a DataFrame, a copy of it for
    ``PhaseColumns.frame``."""
    if table is not None and not callable(getattr(table, "frame", None)) and hasattr(table, "copy"):  # a DataFrame
        src = table.copy()
        return _numpy_columns(src), src
    return {c: np.array(v, copy=True) for c, v in _numpy_columns(table).items()}, None


def _compute(profile) -> RunTotals:
    t = profile.target
    rec = record_of(profile)
    sch = rec.schedule
    S = int(t.num_ipus)
    R = rec.replicas_of_run
    steps_table = stored_table(profile, "steps")
    n = len(steps_table)
    steps = _numpy_columns(steps_table, ("start_cycle", "end_cycle", "kind", "ipu", "op_id", "prog_id"))
    phases = stored_table(profile, "phases")  # a stand-in without the table gets it built from its schedule,
    if phases is None:  # as the writer builds it
        phases = phase_columns(sch, steps_table, float(t.clock_hz))
    own, source = _phase_source(phases)
    rows = len(phases)
    starts = steps["start_cycle"].astype(np.int64, copy=False)
    ends = steps["end_cycle"].astype(np.int64, copy=False)
    dur = ends - starts
    kind = steps["kind"].astype(np.int64, copy=False)
    ipu = steps["ipu"].astype(np.int64, copy=False) if "ipu" in steps else np.full(n, -1, np.int64)
    lanes = np.where(ipu < 0, S, 1).astype(np.float64)  # a step on every IPU counts on each of them
    # how often each stored step runs per training step: the one weighting (profile/phases.py)
    weight, phase_w = step_runs(own, steps, S)
    nk = len(schema.STEP_KINDS)
    extra, in_phase = _phase_parts(own, rows, phase_w, kind, dur, lanes, S)
    notes = []
    if n and not in_phase.all():  # stored steps no phase claims (a producer's extra steps): counted once
        m = ~in_phase
        notes.append(f"{int(m.sum())} stored steps lie in no phase; counted once")
        k_extra = np.bincount(kind[m], weights=dur[m] * lanes[m], minlength=nk)
    else:
        k_extra = np.zeros(nk)
    step_cycles = int((own["start_cycle"] + extra["wall_cycles"]).max()) if rows else 0
    # (each a contiguous column's sum: the sums a DataFrame's columns gave)
    kind_tot = np.array([extra[f"kind_{k}"].sum() for k in schema.STEP_KINDS]) + k_extra if rows else k_extra
    host_tot = float(np.nansum(extra["kind_host"])) if rows else 0.0
    part_tot = {p: float(np.nansum(extra[p])) if rows else 0.0 for p in PARTS}
    for i, k in enumerate(schema.STEP_KINDS):
        part_tot[PART_OF_KIND[k]] += float(k_extra[i])
    waiting = int(round(float(np.nansum(extra["waiting_cycles"])))) if rows else 0
    part_cycles = {p: int(round(v)) for p, v in part_tot.items()}
    ipu_time = int(round(sum(part_tot.values())))
    part_cycles["sync"] += ipu_time - sum(part_cycles.values())  # rounding: the parts add up to the total
    share = extra["wall_cycles"] / step_cycles if step_cycles else np.zeros(rows)
    phase_cols = PhaseColumns({**own, **extra, "share_of_step": share}, rows, source, step_cycles)

    weighted = dur * lanes * weight
    op_names, op_cycles, op_part, op_share = _op_cycles(profile, steps, n, sch, weighted, kind, ipu_time)
    prog_cycles = _program_cycles(profile, steps, n, weighted)
    peak_bytes, peak_tile, nal, nal_l = _memory_peaks(profile)
    per_step, sps, basis = throughput(rec, step_cycles, float(t.clock_hz))
    return RunTotals(
        clock_hz=float(t.clock_hz), step_cycles=step_cycles, total_cycles=step_cycles, replicas=R, stages=S,
        pipelined="pipeline_cycles" in sch, ipu_time_cycles=ipu_time, part_cycles=part_cycles,
        kind_cycles={**{k: int(round(float(kind_tot[i]) + (waiting if k == "sync" else 0)))
                        for i, k in enumerate(schema.STEP_KINDS)}, "host": int(round(host_tot))},
        waiting_cycles=waiting, phase_columns=phase_cols, step_weight=weight, op_cycles=op_cycles,
        op_share=op_share, op_part_cycles=op_part, program_cycles=prog_cycles,
        op_names=op_names, peak_tile_bytes=peak_bytes,
        peak_tile=peak_tile, peak_not_always_live_bytes=nal, peak_not_always_live_lstep=nal_l,
        capacity_bytes=int(t.sram_bytes_per_tile), samples_per_step=per_step, samples_per_second=sps,
        throughput_basis=basis, notes=notes, tensor_parallel=sch.tensor_parallel,
        host_text=host_step_text(sch), host_short=host_step_short(sch), unphased_kind_cycles=k_extra)


NO_PHASE = "(in no phase)"


def totals_frame(profile) -> pd.DataFrame:
    """:func:`run_totals` of ``profile`` as a table (``Profile.totals``): one row per (phase, step kind) with
    IPU time, plus one per phase for its IPUs waiting at syncs, plus the stored steps no phase claims
    (``NO_PHASE``).  Columns ``phase``, ``phase_id`` (Int32, ``<NA>`` for ``NO_PHASE``), ``kind_name`` and
    ``part`` (categoricals; waiting is ``sync``; a host term's rows are kind and part ``host``), ``waiting``, ``ipu_cycles`` (float64: weighted), ``ipu_seconds``,
    ``share`` (of the step's IPU time).  Grouped by ``part`` or ``kind_name`` the rows add up to
    ``part_cycles`` / ``kind_cycles`` (before their rounding to whole cycles), the Summary's and ``info``'s."""
    import pandas as pd

    rt = run_totals(profile)
    ph = rt.phases
    rows = []
    for i, r in enumerate(ph.itertuples(index=False)):
        pid = int(ph["phase_id"].iat[i]) if "phase_id" in ph.columns else i
        for k in schema.STEP_KINDS:
            v = float(getattr(r, f"kind_{k}"))
            if v > 0:
                rows.append((str(r.name), pid, k, False, v))
        if float(r.waiting_cycles) > 0:
            rows.append((str(r.name), pid, "sync", True, float(r.waiting_cycles)))
        if float(r.kind_host) > 0:  # a host term: every IPU waiting for the host, the part "host" (kind_cycles' "host")
            rows.append((str(r.name), pid, "host", False, float(r.kind_host)))
    extra = rt.unphased_kind_cycles if rt.unphased_kind_cycles is not None else np.zeros(len(schema.STEP_KINDS))
    for k, v in zip(schema.STEP_KINDS, extra, strict=True):
        if v > 0:
            rows.append((NO_PHASE, -1, k, False, float(v)))
    df = pd.DataFrame(rows, columns=["phase", "phase_id", "kind_name", "waiting", "ipu_cycles"])
    pid = df["phase_id"].to_numpy(np.int64)
    df["phase_id"] = pd.array(pid, dtype="Int32")
    df.loc[pid < 0, "phase_id"] = pd.NA
    df["phase"] = df["phase"].astype("str")
    df["kind_name"] = pd.Categorical(df["kind_name"], categories=[*schema.STEP_KINDS, "host"])
    df.insert(3, "part", pd.Categorical([PART_OF_KIND.get(k, k) for k in df["kind_name"].astype(str)],
                                        categories=list(PARTS)))
    df["waiting"] = df["waiting"].astype(bool)
    df["ipu_cycles"] = df["ipu_cycles"].astype(np.float64)
    df["ipu_seconds"] = df["ipu_cycles"] / rt.clock_hz if rt.clock_hz else np.nan
    tot = float(df["ipu_cycles"].sum())
    df["share"] = df["ipu_cycles"] / tot if tot > 0 else 0.0
    return df


HOST_FRAMEWORK_LABEL = {"popart": "PopART", "tensorflow": "TensorFlow", "poptorch": "PopTorch", "none": "none",
                        "unknown": "unknown"}


def host_step_short(schedule: Mapping) -> str:
    """:func:`host_step_text` in a few words, for a chart's label: 'host step 167 ms (calibrated, PopART)',
    'no host step (framework unknown)', 'IPUs alone'."""
    schedule = schedule if isinstance(schedule, Mapping) else {}
    fw = str(schedule.get("host_framework") or "none")
    if fw == "none":
        return "IPUs alone"
    if fw == "unknown":
        return "no host step (framework unknown)"
    terms = schedule.get("per_step_terms") if isinstance(schedule.get("per_step_terms"), Mapping) else {}
    try:
        secs = sum(float(v) for v in terms.values() if math.isfinite(float(v)))
    except (TypeError, ValueError):
        secs = 0.0
    name = "host step" if len([v for v in terms.values() if v]) <= 1 else "host terms"
    return f"{name} {1e3 * secs:,.{0 if secs >= 0.01 else 1}f} ms (calibrated, {HOST_FRAMEWORK_LABEL.get(fw, fw)})"


def host_step_text(schedule: Mapping) -> str:
    """What a run's throughput includes of the host, in words, from its schedule (emulator/schedule.py's
    ``per_step_terms`` and ``resolve_host_framework``): 'host step 167 ms (calibrated, PopART, inferred from the
    model: ...)', 'host framework UNKNOWN: ...', or 'IPUs alone'.  A schedule that records no framework (a
    profile written before the host terms) is the IPUs alone.  ``schedule``: a profile's checked
    ``record.schedule`` (or the emulator's plain dict)."""
    schedule = schedule if isinstance(schedule, Mapping) else {}
    fw = str(schedule.get("host_framework") or "none")
    basis = str(schedule.get("host_framework_basis") or "")
    terms = schedule.get("per_step_terms") if isinstance(schedule.get("per_step_terms"), Mapping) else {}
    def sec(v):
        try:
            v = float(v)
        except (TypeError, ValueError):
            return 0.0
        return v if math.isfinite(v) else 0.0
    host = sec(terms.get("host_step", 0.0))
    extra = [f"{str(k).replace('_', ' ')} {1e3 * sec(v):,.1f} ms" for k, v in terms.items()
             if k != "host_step" and sec(v) > 0]
    more = ("; " + ", ".join(extra)) if extra else ""
    if fw == "none":
        return "IPUs alone (host framework none: no host step, input or multi-host terms)"
    if fw == "unknown":
        return f"host framework UNKNOWN: no host step loop in this throughput ({basis}){more}"
    return f"host step {1e3 * host:,.0f} ms (calibrated, {HOST_FRAMEWORK_LABEL.get(fw, fw)}, {basis or 'stated'}){more}"
