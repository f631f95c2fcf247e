"""The training step's phases as a timeline draws them (pure, no Qt): where each phase lies in wall time, which
part of it the stored steps show and which part is folded, and the bytes and links of the phases that move data.

Reads the ``phases`` table (``profile.phases``, built by ``profile/phases.py``) and ``run["schedule"]``; the
numbers of the phases (durations, runs per step) are that table's, never recomputed here.

* ``start`` / ``end``: wall cycles of all the phase's runs (``start_cycle`` .. ``start_cycle + cycles x runs``).
* ``hidden``: the stretches of the phase that no stored step covers (a gap of at least
  :data:`HIDDEN_MIN_FRACTION` of the phase): a phase whose stored runs are fewer than its runs per step is
  *folded* (the drawn run stands for ``folded_runs`` more), and a large profile leaves some fill / drain
  pipeline cycles out (its size limit); the totals count both from the phases table, the timeline marks them.
* ``traffic``: what an all-reduce, optimizer or stream phase moves, per IPU, and over which links, from the
  schedule the emulator recorded (``allreduce_bytes_per_ipu``, ``stream_bytes_per_ipu``, ``allreduce_links``);
  a profile written before those were recorded says so.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from popvision_lite.analysis.run_totals import host_step_short
from popvision_lite.profile.run_record import Schedule, record_of
from popvision_lite.profile.schema import stored_table
from popvision_lite.units import format_bytes

DATA_KINDS = ("allreduce", "optimizer", "stream")
HIDDEN_MIN_FRACTION = 0.05  # an uncovered stretch this share of its phase or longer is marked (smaller: BSP idle)


@dataclass(frozen=True)
class PhaseSpan:
    phase_id: int
    name: str
    kind: str
    label: str            # as the phase band names it: "steady state x184"
    start: int            # wall cycles of the step
    end: int
    one_run: int          # cycles of one run
    runs: int             # runs per training step
    stored_runs: int
    first_step: int       # stored steps (-1: none)
    last_step: int
    traffic: str          # bytes and links (all-reduce / optimizer / stream), else ""
    hidden: tuple = ()    # ((start, end), ...) wall cycles of the phase that no stored step covers
    why: str = ""         # why a phase without stored steps has none (a host term, pipeline cycles left out)

    @property
    def folded(self) -> bool:
        """Runs of the phase are not stored: the drawn run stands for them."""
        return self.first_step >= 0 and self.stored_runs < self.runs and bool(self.hidden)

    @property
    def folded_runs(self) -> int:
        return self.runs - self.stored_runs if self.folded else 0

    @property
    def hidden_cycles(self) -> int:
        return int(sum(b - a for a, b in self.hidden))

    def hidden_text(self) -> str:
        """What a hidden stretch of this phase stands for."""
        name = self.name.replace("_", " ")  # "host step" (a term is named as the schedule's key, host_step)
        if self.why:
            return f"{name}: {self.why}"
        if self.folded:
            return f"{name}: {self.folded_runs:,} more runs of the one drawn, folded here"
        return (f"{name}: pipeline cycles the profile does not store (its size limit); every total counts "
                "them from the recorded busy cycles")


def traffic_text(sch: Schedule, kind: str, name: str = "") -> str:
    """What a phase of ``kind`` moves, per IPU, and over which links ('' for phases that move nothing); ``sch``:
    the run's checked schedule (``run_record.Schedule``)."""
    R = sch.replicas
    if kind == "allreduce":
        per = sch.allreduce_bytes_per_ipu
        links = sch.allreduce_links
        if not per:
            return (f"gradient all-reduce across {R} replicas; its bytes are not recorded in this profile "
                    "(written before the emulator recorded them)")
        sent = 2 * (R - 1) / R * max(per)
        return (f"ring all-reduce of the gradients across {R} replicas: {format_bytes(max(per))} per IPU (largest "
                f"stage), each IPU sends and receives {format_bytes(sent)} (2 (R-1)/R x) over {links or 'IPU-Links'}")
    if kind == "stream":
        per = sch.stream_bytes_per_ipu
        way = "from" if "in" in name.split() else "to" if "out" in name.split() else "to / from"
        if not per:
            return "optimizer state streamed over the DDR link; its bytes are not recorded in this profile"
        rts = f" (replicated tensor sharding: 1/{R} of it per replica)" if sch.rts and R > 1 else ""
        return (f"optimizer state {way} Streaming Memory (DDR) over the IPU's DDR link: {format_bytes(max(per))} "
                f"per IPU (largest stage){rts}")
    if kind == "optimizer":
        return f"{sch.optimizer or 'optimizer'} update on the tiles: no link traffic"
    return ""


def phase_spans(profile) -> list[PhaseSpan]:
    """The phases of ``profile``'s training step in time order (empty for a profile without a phases table)."""
    ph = stored_table(profile, "phases")
    if ph is None or not len(ph):
        return []
    sch = record_of(profile).schedule
    steps = stored_table(profile, "steps")
    st_start = steps["start_cycle"].to_numpy(np.int64)
    st_end = steps["end_cycle"].to_numpy(np.int64)
    out = []
    for r in ph.itertuples():
        one, runs = int(r.cycles), max(int(r.runs_per_step), 1)
        start = int(r.start_cycle)
        end = start + one * runs
        first, last = int(r.first_step), int(r.last_step)
        stored = int(r.stored_runs) if first >= 0 else 0
        hidden, why = (), ""
        name = str(r.name)
        if first >= 0 and last < len(st_start):
            hidden = _gaps(st_start[first:last + 1], st_end[first:last + 1], start, end,
                           HIDDEN_MIN_FRACTION * (end - start))
        elif end > start:  # no stored step at all: the whole phase is not drawn, and says why
            hidden = ((start, end),)
            why = (f"the IPUs wait for the host ({host_step_short(sch)}); no BSP step runs" if str(r.kind) == "term"
                   else "pipeline cycles the profile does not store (its size limit); every total counts them from "
                   "the recorded busy cycles" if str(r.kind) in ("fill", "steady", "drain")
                   else "no stored steps; its time is counted from the schedule")
        shown = name.replace("_", " ")  # the band's label: "host step" for the term host_step
        label = f"{shown} x{runs:,}" if runs > 1 else shown
        out.append(PhaseSpan(int(r.phase_id), name, str(r.kind), label, start, end, one, runs, stored, first, last,
                             traffic_text(sch, str(r.kind), name) if str(r.kind) in DATA_KINDS else "", hidden, why))
    return out


def _gaps(starts: np.ndarray, ends: np.ndarray, lo: int, hi: int, min_len: float) -> tuple:
    """Stretches of [lo, hi) that no [start, end) interval covers, at least ``min_len`` long."""
    o = np.argsort(starts, kind="stable")
    out, t = [], lo
    for a, b in zip(starts[o], ends[o], strict=True):
        if a - t >= min_len and a > t:
            out.append((int(t), int(min(a, hi))))
        t = max(t, int(b))
    if hi - t >= min_len and hi > t:
        out.append((int(t), int(hi)))
    return tuple((a, b) for a, b in out if b > a)


def phase_of_step(spans: list[PhaseSpan], step: int) -> PhaseSpan | None:
    """The phase whose stored steps hold ``step`` (None: no phase claims it)."""
    for s in spans:
        if s.first_step >= 0 and s.first_step <= step <= s.last_step:
            return s
    return None


def run_end(spans: list[PhaseSpan], steps_end: int) -> int:
    """Where the run ends in wall time: its last phase's end, or the stored steps' end when later."""
    return int(max([steps_end] + [s.end for s in spans]))


def lanes_text(rt, spans: list[PhaseSpan]) -> str:
    """What the Execution lanes of a run show (``rt``: its :class:`~popvision_lite.analysis.run_totals.RunTotals`):
    which replica, of how many IPUs, what one lane stands for in a tensor-parallel run, and what the hatched
    (not stored) spans of ``spans`` are.  The Execution view and compare's Execution page say the same."""
    t = int(getattr(rt, "tensor_parallel", 1) or 1)
    if t > 1:
        lane = (f"one lane per stage: each is ONE IPU of the stage's {t}-IPU tensor-parallel group (the profile "
                f"stores one shard; the group's {t} IPUs run the same steps on their 1/{t} of the layer at once)")
    else:
        lane = "one lane per IPU of the replica"
    text = f"Lanes: {rt.drawn_text}; {rt.ipu_count_text}, {lane}."
    hidden = [s for s in spans if s.hidden]
    if hidden:
        what = []
        for s in hidden:
            if s.folded:
                what.append(f"{s.name} x{s.runs:,}: {s.stored_runs:,} drawn, {s.folded_runs:,} folded")
            elif s.kind == "term":  # the host's per-step terms: no BSP step runs, every IPU waits for the host
                what.append(f"{s.label}: the IPUs wait for the host")
            else:  # pipeline fill / drain the profile leaves out (its size limit), counted from the schedule
                what.append(f"{s.label}: not stored, {100 * s.hidden_cycles / max(rt.step_cycles, 1):.1f} % of "
                            "the step")
        text += (" Hatched: parts of the step the profile does not store (" + "; ".join(what)
                 + "); click one for what it stands for.")
    return text


def hidden_at(spans: list[PhaseSpan], x: float) -> PhaseSpan | None:
    """The phase whose hidden stretch holds wall cycle ``x``."""
    for s in spans:
        if any(a <= x < b for a, b in s.hidden):
            return s
    return None


__all__ = ["DATA_KINDS", "HIDDEN_MIN_FRACTION", "PhaseSpan", "hidden_at", "lanes_text", "phase_of_step", "phase_spans", "run_end", "traffic_text"]
