"""Chrome Trace Event JSON export of a run (opens in Perfetto / chrome://tracing) without loss.

Layout of the trace: one process "Training step" (pid 0) whose threads are the lanes (Perfetto labels a lane
"<thread name> <tid>" and orders a process's lanes by tid, the main thread tid = pid first; it orders processes
by slice count and ignores ``process_sort_index`` (v52), so IPUs in processes of their own came out of order,
labelled "IPU 1 2"):

* thread "IPU" with tid i, one per IPU i, without ``tiles``: every step the IPU takes part in (a step on every
  IPU, ``ipu`` -1, is on each lane); args step, op, cycles, busiest tile.  Perfetto shows "IPU 0", "IPU 1",
  ... in numeric order (IPU 0 is tid 0 = pid 0, the main thread).  The steps of one IPU never overlap in time
  (a pipeline's IPUs do, so they are never on one lane); a producer whose steps of one IPU overlap gets them
  on an extra thread "IPU i overlapping steps" rather than dropped by Perfetto;
* thread "tile" with tid = the global tile id, one per listed tile, with ``tiles``: its busy time per step
  (compute / exchange / stream copy) and its sync waits ("tile 1472"; ``args["tile"]`` holds the id too);
* thread "phases" (tid :data:`PHASES_TID`, after the lanes): one slice per phase of the step
  (``profile.stored_table("phases")``: fill, "steady state x184", drain, all-reduce, optimizer, streams ...), at
  its wall-time position, spanning all of its runs; args: ``runs_per_step``, ``cycles_per_run``,
  ``first_step`` / ``last_step`` (the stored steps that represent it) and ``stored_runs``.  The folded steady
  state is ONE slice carrying its count: the profile stores one representative pipeline cycle of it (drawn on
  the IPU lanes at its real time), not the others.

``thread_sort_index`` / ``process_sort_index`` say the same order to viewers that read them (chrome://tracing).

Times: ``ts``/``dur`` are microseconds with 3 decimals (whole ns, the unit Perfetto stores), converted from
cycles with the target clock and rebased so the first exported step starts at 0 (JavaScript doubles lose
precision on big numbers).  Edges are rounded to the ns, not lengths; a step shorter than 1 ns after rounding
(a 1-cycle step at 1.325 GHz is 0.75 ns; a 0-cycle step) is drawn 1 ns long and the steps after it on its lane
start at least where it ends, so no slice has zero duration and none overlaps.  Raw cycles stay in ``args``.
Perfetto in a browser runs out of memory near 2 GB of JSON, so big runs should be exported by step window
(``step_range``) and tile subset (``tiles``); ``max_events`` guards against accidental huge exports.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from popvision_lite.atomic_io import atomic_text
from popvision_lite.errors import ConfigError
from popvision_lite.profile import schema

STEPS_PID = 0  # the one process: the training step, its phases and every lane of it
PHASES_TID = 1_000_000  # the phases lane (after every IPU / tile lane in Perfetto, which sorts lanes by tid)
OVERFLOW_TID_BASE = 90_000  # extra thread k of IPU i's overlapping steps: OVERFLOW_TID_BASE + i * MAX_LANE_THREADS + k
DEFAULT_MAX_EVENTS = 5_000_000  # ~1 GB of JSON
# threads of one lane for overlapping steps (a pipeline overlaps a few; a file whose steps all overlap would
# otherwise make one thread per step and a scan over all of them per step)
MAX_LANE_THREADS = 64
_READ_BATCH = 2048  # steps per step-tile read


def _encoder():
    """Compact JSON encoder for one event: orjson when installed (several times faster), else json.  An event
    orjson refuses (text it cannot encode as UTF-8, a number past 64 bits) goes through Python's encoder with
    every non-ASCII character escaped, so the export never stops on a value from the file."""
    slow = json.JSONEncoder(separators=(",", ":"), ensure_ascii=True).encode
    try:
        import orjson
    except ImportError:
        return slow

    def encode(ev):
        try:
            return orjson.dumps(ev).decode()
        except (orjson.JSONEncodeError, TypeError, ValueError):
            return slow(ev)

    return encode


def _ipu_tid(ipu: int, sub: int = 0) -> int:
    """IPU ``ipu``'s lane (``sub`` 0) or its ``sub``-th overflow thread."""
    return int(ipu) if sub == 0 else OVERFLOW_TID_BASE + int(ipu) * MAX_LANE_THREADS + sub


def _tile_tid(tile) -> int:
    return int(tile)


def estimate_events(profile, step_range=None, tiles=None) -> int:
    """Upper bound of X events an export with these options writes."""
    a, b = _range(profile, step_range)
    n = b - a
    lanes = profile.target.num_ipus if tiles is None else len(np.unique(np.asarray(tiles)))
    return n * lanes + len(profile.stored_table("phases"))


def _range(profile, step_range):
    n = len(profile.stored_table("steps"))
    if step_range is None:
        return 0, n
    a, b = step_range
    a = 0 if a is None else int(a)
    b = n if b is None else int(b)
    if not (0 <= a <= b <= n):
        raise ConfigError(f"step range {a}:{b} is outside the profile's steps 0:{n} ({profile.path})")
    return a, b


MAX_NS = 2 ** 62  # trace times in ns must stay int64 (Perfetto reads them as such); a step ends far below it


def _ns(cycles, base: int, ns_per_cycle: float) -> np.ndarray:
    """Nanoseconds from ``base`` of ``cycles`` (checked: computed in floating point, refused past MAX_NS, so no
    product of bounded columns wraps or overflows a C long)."""
    ns = np.rint((np.asarray(cycles, dtype=np.float64) - float(base)) * ns_per_cycle)
    if ns.size and not (np.isfinite(ns).all() and np.abs(ns).max() <= MAX_NS):
        raise ConfigError(f"trace times past {MAX_NS:,} ns (cycles {np.asarray(cycles).max()!r} at {ns_per_cycle:g} ns "
                          "per cycle): beyond any step; the profile's cycle counts are not a run's")
    return ns.astype(np.int64)


def lane_times(start_ns: np.ndarray, end_ns: np.ndarray, order: np.ndarray) -> tuple[list, list, list]:
    """Per-lane slice edges for the steps ``order`` (indices, in time order) of one lane: (index, ts, dur, sub)
    lists where ``sub`` is 0 on the lane itself and k > 0 on its k-th overflow thread.  Every slice lasts at
    least 1 ns; a slice that starts inside the previous one by rounding (< 2 ns) is moved to its end; one that
    really overlaps goes to an overflow thread."""
    ends: list[int] = []  # end of the last slice on the lane and on each overflow thread
    out_i, out_ts, out_dur, out_sub = [], [], [], []
    for i in order.tolist():
        ts, te = int(start_ns[i]), int(end_ns[i])
        sub = next((k for k, e in enumerate(ends) if ts >= e - 1), None)
        if sub is None and len(ends) < MAX_LANE_THREADS:
            sub = len(ends)
            ends.append(ts)
        elif sub is None:  # more steps overlap than threads are drawn: on the thread free first, overlapping
            sub = min(range(len(ends)), key=ends.__getitem__)
            ends[sub] = ts
        ts = max(ts, ends[sub])
        te = max(te, ts + 1)
        ends[sub] = te
        out_i.append(i)
        out_ts.append(ts)
        out_dur.append(te - ts)
        out_sub.append(sub)
    return out_i, out_ts, out_dur, out_sub


@dataclass
class _Trace:
    """What the export writes, prepared from the profile: the exported steps (arrays of the step window, time
    order and lanes), their names, the phases and the time base."""

    profile: object
    a: int
    b: int
    tiles: np.ndarray | None
    clock: float
    base: int
    ns_per_cycle: float
    start: np.ndarray
    end: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    kinds: np.ndarray
    step_ids: np.ndarray
    op_ids: np.ndarray
    step_ipu: np.ndarray
    op_names: dict
    names: list
    phases: object
    lanes_ipu: list
    lane: dict
    lo_c: int
    hi_c: int

    def ns(self, cycles) -> np.ndarray:
        return _ns(cycles, self.base, self.ns_per_cycle)


class _Writer:
    """Writes events to the open trace file, one per line, counting them."""

    def __init__(self, fh):
        self.fh, self.first, self.encode = fh, True, _encoder()
        self.counts = dict(events=0, steps=0, lanes=0)

    def emit(self, ev) -> None:
        self.fh.write(("" if self.first else ",\n") + self.encode(ev))
        self.first = False

    def slice(self, ev) -> None:
        self.emit(ev)
        self.counts["events"] += 1

    @staticmethod
    def us(ns: int) -> float:
        return round(ns / 1000.0, 3)


def _check_options(profile, step_range, tiles, max_events):
    """(a, b, tiles): the step window and the sorted tile subset, checked against the profile and the limit."""
    t = profile.target
    a, b = _range(profile, step_range)
    if tiles is not None:
        tiles = np.unique(np.asarray(tiles, dtype=np.int64))
        if tiles.size == 0:
            raise ConfigError("tile subset is empty; give at least one tile or no subset")
        if tiles.min() < 0 or tiles.max() >= t.num_tiles:
            raise ConfigError(f"tile ids must be in 0..{t.num_tiles - 1} for {profile.path}; "
                              f"got {tiles.min()}..{tiles.max()}")
    est = estimate_events(profile, (a, b), tiles)
    if max_events is not None and est > max_events:
        raise ConfigError(
            f"exporting steps {a}:{b} of {profile.path} with {'all IPUs' if tiles is None else f'{tiles.size} tiles'} "
            f"would write up to {est:,} events (limit {max_events:,}); Perfetto runs out of memory near 2 GB, "
            f"so export a step window (step_range) or fewer tiles")
    if not float(t.clock_hz) > 0:
        raise ConfigError(f"target clock_hz {float(t.clock_hz)} of {profile.path} is not positive; cannot convert to us")
    return a, b, tiles


def _step_names(kinds, op_ids, op_names, phases, a: int, b: int) -> list:
    """Each step's slice name: its kind and op; a step of no op is named after its phase when that phase is not
    pipeline work (e.g. "exchange_global [all-reduce]")."""
    phase_of = np.full(len(kinds), "", dtype=object)
    for r in phases.itertuples():
        if r.first_step >= 0 and r.kind not in ("fill", "steady", "drain", "whole"):
            lo, hi = max(int(r.first_step), a) - a, min(int(r.last_step) + 1, b) - a
            if hi > lo:
                phase_of[lo:hi] = f" [{r.name}]"
    return [f"{schema.STEP_KINDS[k]} {op_names.get(int(o), '')}".rstrip() + (ph if o < 0 else "")
            for k, o, ph in zip(kinds, op_ids, phase_of, strict=True)]


def _prepare(profile, a: int, b: int, tiles, step_range) -> _Trace:
    t = profile.target
    clock = float(t.clock_hz)
    steps = profile.stored_table("steps").iloc[a:b]
    ops = profile.stored_table("ops")
    op_names = dict(zip(ops["op_id"].to_numpy().tolist(), ops["name"].tolist(), strict=False))
    kinds = steps["kind"].to_numpy()
    start = steps["start_cycle"].to_numpy(np.int64)
    end = steps["end_cycle"].to_numpy(np.int64)
    base = int(start.min()) if len(start) else 0
    ns_per_cycle = 1e9 / clock
    start_ns, end_ns = _ns(start, base, ns_per_cycle), _ns(end, base, ns_per_cycle)
    step_ids = steps["step"].to_numpy(np.int64)
    op_ids = steps["op_id"].to_numpy(np.int64)
    step_ipu = steps["ipu"].to_numpy(np.int64)
    phases = profile.stored_table("phases")
    names = _step_names(kinds, op_ids, op_names, phases, a, b)
    order = np.lexsort((step_ids, start))  # time order (a v2 file need not store its steps in it)
    lanes_ipu = list(range(t.num_ipus)) if tiles is None else sorted({int(x) // t.tiles_per_ipu for x in tiles})
    lane = {ipu: lane_times(start_ns, end_ns, order[np.isin(step_ipu[order], (-1, ipu))]) for ipu in lanes_ipu}
    # the exported span in cycles: the steps, and for the whole run every phase (also those after the steps)
    lo_c, hi_c = base, int(end.max()) if len(end) else base
    if step_range is None and len(phases):
        hi_c = max(hi_c, int((phases["start_cycle"] + phases["cycles"] * phases["runs_per_step"]).max()))
    return _Trace(profile, a, b, tiles, clock, base, ns_per_cycle, start, end, start_ns, end_ns, kinds, step_ids,
                  op_ids, step_ipu, op_names, names, phases, lanes_ipu, lane, lo_c, hi_c)


def _emit_metadata(w: _Writer, d: _Trace) -> None:
    """Process and thread names and their sort order.  Perfetto (v52, its ProcessThreadGroups plugin) labels a
    lane "<thread name> <tid>", orders the lanes of a process by tid (the main thread, tid = pid, first) and
    orders processes by slice count, not by ``process_sort_index``: IPU i's lane is the thread "IPU" with tid
    i of the one process, so it reads "IPU i", IPU 0 (tid 0 = pid 0, the main thread) first and the rest in
    numeric order; a tile lane is "tile" with its global tile id.  The sort indices say the same to viewers
    that read them (chrome://tracing)."""
    w.emit({"ph": "M", "pid": STEPS_PID, "tid": 0, "name": "process_name", "args": {"name": "Training step"}})
    w.emit({"ph": "M", "pid": STEPS_PID, "tid": 0, "name": "process_sort_index", "args": {"sort_index": 0}})
    w.emit({"ph": "M", "pid": STEPS_PID, "tid": PHASES_TID, "name": "thread_name", "args": {"name": "phases"}})
    w.emit({"ph": "M", "pid": STEPS_PID, "tid": PHASES_TID, "name": "thread_sort_index", "args": {"sort_index": -1}})
    w.counts["lanes"] += 1

    def lane(tid: int, name: str, order: int) -> None:
        w.emit({"ph": "M", "pid": STEPS_PID, "tid": tid, "name": "thread_name", "args": {"name": name}})
        w.emit({"ph": "M", "pid": STEPS_PID, "tid": tid, "name": "thread_sort_index", "args": {"sort_index": order}})
        w.counts["lanes"] += 1

    if d.tiles is None:
        for ipu in d.lanes_ipu:
            lane(_ipu_tid(ipu), "IPU", ipu)
            for sub in range(1, max(d.lane[ipu][3], default=0) + 1):
                lane(_ipu_tid(ipu, sub), f"IPU {ipu} overlapping steps", _ipu_tid(ipu, sub))
    else:
        for tile in d.tiles.tolist():
            lane(_tile_tid(tile), "tile", tile)


def _emit_phases(w: _Writer, d: _Trace) -> None:
    """The phases of the step that overlap the exported steps, clipped to them."""
    if d.b <= d.a:
        return
    prev = 0
    for r in d.phases.itertuples():
        p0, p1 = int(r.start_cycle), int(r.start_cycle) + int(r.cycles) * int(r.runs_per_step)
        c0, c1 = max(p0, d.lo_c), min(p1, d.hi_c)
        if c1 <= c0:
            continue
        ts0 = max(int(d.ns(c0)), prev)
        te = max(int(d.ns(c1)), ts0 + 1)
        prev = te
        runs = int(r.runs_per_step)
        w.slice({"ph": "X", "pid": STEPS_PID, "tid": PHASES_TID, "name": r.name + (f" x{runs:,}" if runs > 1 else ""),
                 "cat": "phase", "ts": w.us(ts0), "dur": w.us(te - ts0),
                 "args": {"phase": r.name, "kind": r.kind, "runs_per_step": runs,
                          "cycles_per_run": int(r.cycles), "start_cycle": p0, "end_cycle": p1,
                          "first_step": int(r.first_step), "last_step": int(r.last_step),
                          "stored_runs": int(r.stored_runs),
                          "drawn": (f"{int(r.stored_runs)} of {runs} runs stored (steps {int(r.first_step)}-"
                                    f"{int(r.last_step)})" if r.first_step >= 0 else "no steps stored")}})


def _emit_ipu_lanes(w: _Writer, d: _Trace, progress) -> None:
    """One lane per IPU: every step it takes part in, with its busiest tile."""
    tpi = d.profile.target.tiles_per_ipu
    for ipu in d.lanes_ipu:
        idx, tss, durs, subs = d.lane[ipu]
        for lo in range(0, len(idx), _READ_BATCH):
            sel = np.asarray(idx[lo:lo + _READ_BATCH], np.int64)
            if not len(sel):
                continue
            # rows of this lane's steps, read in contiguous runs (chunks are one IPU's tiles)
            r0, r1 = int(sel.min()), int(sel.max()) + 1
            cyc = d.profile.step_tiles.cycles(d.a + r0, d.a + r1, tiles=np.arange(ipu * tpi, (ipu + 1) * tpi))
            cyc = cyc[sel - r0]
            bmax = cyc.max(axis=1).tolist()
            barg = cyc.argmax(axis=1).tolist()
            bact = np.count_nonzero(cyc, axis=1).tolist()
            for j, i in enumerate(sel.tolist()):
                k = lo + j
                w.slice({"ph": "X", "pid": STEPS_PID, "tid": _ipu_tid(ipu, subs[k]),
                         "name": d.names[i], "cat": schema.STEP_KINDS[int(d.kinds[i])], "ts": w.us(tss[k]),
                         "dur": w.us(durs[k]),
                         "args": {"step": int(d.step_ids[i]), "op_id": int(d.op_ids[i]),
                                  "op": d.op_names.get(int(d.op_ids[i]), ""), "start_cycle": int(d.start[i]),
                                  "end_cycle": int(d.end[i]), "cycles": int(d.end[i] - d.start[i]),
                                  "busy_max_cycles": bmax[j], "busiest_tile": ipu * tpi + barg[j],
                                  "tiles_active": bact[j]}})
            if progress is not None:
                progress(min(d.b - d.a, lo + len(sel)), d.b - d.a)


def _emit_tile_lanes(w: _Writer, d: _Trace, progress) -> None:
    """One lane per tile of the subset: its busy time in each step it is busy, its waits in each sync step."""
    tpi = d.profile.target.tiles_per_ipu
    a, b = d.a, d.b
    sync_code = schema.STEP_KIND_CODE["sync"]
    tile_list = d.tiles.tolist()
    pos = {ipu: {i: (ts_, d_) for i, ts_, d_ in zip(d.lane[ipu][0], d.lane[ipu][1], d.lane[ipu][2], strict=True)}
           for ipu in d.lanes_ipu}
    for lo in range(a, b, _READ_BATCH):
        hi = min(b, lo + _READ_BATCH)
        win = d.profile.step_tiles.window(lo, hi, tiles=d.tiles)
        w_cyc, w_in, w_out = win.cycles.tolist(), win.bytes_in.tolist(), win.bytes_out.tolist()
        for r in range(hi - lo):
            i = lo - a + r
            kind = int(d.kinds[i])
            for c, tile in enumerate(tile_list):
                ipu = tile // tpi
                if d.step_ipu[i] not in (-1, ipu) or i not in pos[ipu]:
                    continue
                ts_, d_ = pos[ipu][i]
                busy = w_cyc[r][c]
                if busy > 0:
                    w.slice({"ph": "X", "pid": STEPS_PID, "tid": _tile_tid(tile), "name": d.names[i],
                             "cat": schema.STEP_KINDS[kind], "ts": w.us(ts_),
                             "dur": w.us(min(max(int(round(busy * d.ns_per_cycle)), 1), d_)),
                             "args": {"step": int(d.step_ids[i]), "tile": tile, "cycles": busy,
                                      "bytes_in": w_in[r][c], "bytes_out": w_out[r][c]}})
                elif kind == sync_code:
                    w.slice({"ph": "X", "pid": STEPS_PID, "tid": _tile_tid(tile), "name": "sync",
                             "cat": "sync", "ts": w.us(ts_), "dur": w.us(d_),
                             "args": {"step": int(d.step_ids[i]), "tile": tile,
                                      "cycles": int(d.end[i] - d.start[i])}})
        if progress is not None:
            progress(hi - a, b - a)


def export_chrome_trace(profile, path, step_range=None, tiles=None, *, max_events: int | None = DEFAULT_MAX_EVENTS,
                        progress=None) -> dict:
    """Write the trace to ``path`` atomically (gzip-compressed when it ends in ``.gz``: Perfetto and
    chrome://tracing open ``.json.gz`` as they are); returns counts {events, steps, lanes, bytes}.

    ``step_range=(start, stop)`` exports steps start..stop-1; ``tiles`` (global tile ids) switches
    the IPU processes to one lane per tile.  Raises ConfigError for bad options or when the export
    would exceed ``max_events`` (None = no limit).
    """
    a, b, tiles = _check_options(profile, step_range, tiles, max_events)
    d = _prepare(profile, a, b, tiles, step_range)
    t = profile.target
    path = Path(path)
    with atomic_text(path, gzip=str(path).lower().endswith(".gz")) as fh:
        # no "displayTimeUnit": current Perfetto ignores it (ts/dur are us either way) and notes it as an
        # import stat, but Perfetto builds before late 2021 read "ns" as the unit of ts/dur (1000x off)
        fh.write('{"otherData": ')
        fh.write(json.dumps({"profile": str(profile.path), "device": t.device, "clock_hz": d.clock,
                             "first_step": a, "cycle_base": d.base, "cycle_end": d.hi_c, "time_unit": "us"}))
        fh.write(', "traceEvents": [\n')
        w = _Writer(fh)
        w.counts["steps"] = int(b - a)
        _emit_metadata(w, d)
        _emit_phases(w, d)
        if tiles is None:
            _emit_ipu_lanes(w, d, progress)
        else:
            _emit_tile_lanes(w, d, progress)
        fh.write("\n]}\n")
    counts = w.counts
    counts["bytes"] = path.stat().st_size
    return counts
