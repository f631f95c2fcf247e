"""Chrome Trace Event JSON export of the BSP steps (opens in Perfetto / chrome://tracing).

Layout of the trace:

* process 0 "BSP steps": one lane with every step (name "kind op", full step duration);
* process 1 + i "IPU i": without ``tiles``, one lane per IPU with each step the IPU takes part in,
  args carrying that IPU's busiest tile; with ``tiles``, one lane per listed tile with its busy time
  per step (compute / exchange / stream copy) and its sync waits.  A tile lane's tid is
  ``TILE_TID_BASE + global tile id`` (``args["tile"]`` holds the tile id): Perfetto reads tid 0 as
  "the process's main thread" (tid = pid), which merged tile 0 into another lane, and a tid equal to
  a pid marks that lane "main thread"; the base keeps every tile tid clear of both.

Times: ``ts``/``dur`` are microseconds converted from cycles with the target clock, rebased so
the first exported step starts at 0 (JavaScript doubles lose precision on big numbers).  Raw
cycles are kept in ``args``.  Perfetto in a browser runs out of memory near 2 GB of JSON, so
big runs should be exported by step window (``step_range``) and tile subset (``tiles``);
``max_events`` guards against accidental huge exports.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from popvision_lite.atomic_io import atomic_text
from popvision_lite.errors import ConfigError
from popvision_lite.profile import schema

STEPS_PID = 0
TILE_TID_BASE = 100_000  # tile lane tid = TILE_TID_BASE + global tile id (never 0, never a pid)
DEFAULT_MAX_EVENTS = 5_000_000  # ~1 GB of JSON
_READ_BATCH = 2048  # steps per step-tile read


def _encoder():
    """Compact JSON encoder for one event: orjson when installed (several times faster), else json."""
    try:
        import orjson

        return lambda ev: orjson.dumps(ev).decode()
    except ImportError:
        return json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def _ipu_pid(ipu: int) -> int:
    return 1 + int(ipu)


def _tile_tid(tile) -> int:
    return TILE_TID_BASE + int(tile)


def estimate_events(profile, step_range=None, tiles=None) -> int:
    """Upper bound of X events an export with these options writes."""
    a, b = _range(profile, step_range)
    n = b - a
    lanes = profile.target.num_ipus if tiles is None else len(np.unique(np.asarray(tiles)))
    return n * (1 + lanes)


def _range(profile, step_range):
    n = len(profile.steps)
    if step_range is None:
        return 0, n
    a, b = step_range
    a = 0 if a is None else int(a)
    b = n if b is None else int(b)
    if not (0 <= a <= b <= n):
        raise ConfigError(f"step range {a}:{b} is outside the profile's steps 0:{n} ({profile.path})")
    return a, b


def export_chrome_trace(profile, path, step_range=None, tiles=None, *, max_events: int | None = DEFAULT_MAX_EVENTS,
                        progress=None) -> dict:
    """Write the trace to ``path`` atomically; returns counts {events, steps, lanes, bytes}.

    ``step_range=(start, stop)`` exports steps start..stop-1; ``tiles`` (global tile ids) switches
    the IPU processes to one lane per tile.  Raises ConfigError for bad options or when the export
    would exceed ``max_events`` (None = no limit).
    """
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
    clock = float(t.clock_hz)
    if not clock > 0:
        raise ConfigError(f"target clock_hz {clock} of {profile.path} is not positive; cannot convert to us")
    us_per_cycle = 1e6 / clock

    steps = profile.steps.iloc[a:b]
    ops = profile.ops
    op_names = dict(zip(ops["op_id"].to_numpy().tolist(), ops["name"].tolist(), strict=False))
    kinds = steps["kind"].to_numpy()
    start = steps["start_cycle"].to_numpy(np.int64)
    end = steps["end_cycle"].to_numpy(np.int64)
    base = int(start[0]) if len(start) else 0
    # round the edges, not the lengths, so consecutive steps never overlap after rounding
    ts = np.round((start - base) * us_per_cycle, 3)
    dur = np.round(np.round((end - base) * us_per_cycle, 3) - ts, 3)
    ts, dur = ts.tolist(), dur.tolist()
    step_ids = steps["step"].to_numpy(np.int64)
    op_ids = steps["op_id"].to_numpy(np.int64)
    step_ipu = steps["ipu"].to_numpy(np.int64)
    names = [f"{schema.STEP_KINDS[k]} {op_names.get(int(o), '')}".rstrip() for k, o in zip(kinds, op_ids, strict=True)]

    counts = dict(events=0, steps=int(b - a), lanes=0)
    path = Path(path)
    with atomic_text(path) as fh:
        # no "displayTimeUnit": current Perfetto ignores it (ts/dur are us either way) and notes it as an
        # import stat, but Perfetto builds before late 2021 read "ns" as the unit of ts/dur (1000x off)
        fh.write('{"otherData": ')
        fh.write(json.dumps({"profile": str(profile.path), "device": t.device, "clock_hz": clock,
                             "first_step": a, "cycle_base": base, "time_unit": "us"}))
        fh.write(', "traceEvents": [\n')
        first = [True]

        encode = _encoder()

        def emit(ev):
            fh.write(("" if first[0] else ",\n") + encode(ev))
            first[0] = False

        # metadata: process and thread names, sort order
        emit({"ph": "M", "pid": STEPS_PID, "tid": 0, "name": "process_name", "args": {"name": "BSP steps"}})
        emit({"ph": "M", "pid": STEPS_PID, "tid": 0, "name": "process_sort_index", "args": {"sort_index": 0}})
        emit({"ph": "M", "pid": STEPS_PID, "tid": 0, "name": "thread_name", "args": {"name": "steps"}})
        counts["lanes"] += 1
        ipus = range(t.num_ipus) if tiles is None else sorted({int(x) // t.tiles_per_ipu for x in tiles})
        for ipu in ipus:
            pid = _ipu_pid(ipu)
            emit({"ph": "M", "pid": pid, "tid": 0, "name": "process_name", "args": {"name": f"IPU {ipu}"}})
            emit({"ph": "M", "pid": pid, "tid": 0, "name": "process_sort_index", "args": {"sort_index": pid}})
            if tiles is None:
                emit({"ph": "M", "pid": pid, "tid": 0, "name": "thread_name", "args": {"name": f"IPU {ipu}"}})
                counts["lanes"] += 1
        if tiles is not None:
            for tile in tiles:
                ipu, tin = divmod(int(tile), t.tiles_per_ipu)
                emit({"ph": "M", "pid": _ipu_pid(ipu), "tid": _tile_tid(tile), "name": "thread_name",
                      "args": {"name": f"tile {tile} (IPU {ipu} tile {tin})"}})
                emit({"ph": "M", "pid": _ipu_pid(ipu), "tid": _tile_tid(tile), "name": "thread_sort_index",
                      "args": {"sort_index": int(tile)}})
                counts["lanes"] += 1

        sync_code = schema.STEP_KIND_CODE["sync"]
        for i in range(len(steps)):
            emit({"ph": "X", "pid": STEPS_PID, "tid": 0, "name": names[i], "cat": schema.STEP_KINDS[kinds[i]],
                  "ts": ts[i], "dur": dur[i],
                  "args": {"step": int(step_ids[i]), "op_id": int(op_ids[i]), "op": op_names.get(int(op_ids[i]), ""),
                           "start_cycle": int(start[i]), "end_cycle": int(end[i]),
                           "cycles": int(end[i] - start[i])}})
            counts["events"] += 1

        tpi = t.tiles_per_ipu
        tile_list = [] if tiles is None else tiles.tolist()
        for lo in range(a, b, _READ_BATCH):
            hi = min(b, lo + _READ_BATCH)
            if tiles is None:  # per-IPU lanes need only cycles, reduced per IPU in one go
                cyc = profile.step_tiles.cycles(lo, hi).reshape(hi - lo, t.num_ipus, tpi)
                ipu_max = cyc.max(axis=2).tolist()
                ipu_arg = cyc.argmax(axis=2).tolist()
                ipu_active = np.count_nonzero(cyc, axis=2).tolist()
            else:
                w = profile.step_tiles.window(lo, hi, tiles=tiles)
                w_cyc, w_in, w_out = w.cycles.tolist(), w.bytes_in.tolist(), w.bytes_out.tolist()
            for r in range(hi - lo):
                i = lo - a + r
                kind = int(kinds[i])
                if tiles is None:
                    for ipu in range(t.num_ipus):
                        if step_ipu[i] not in (-1, ipu):
                            continue
                        emit({"ph": "X", "pid": _ipu_pid(ipu), "tid": 0, "name": names[i],
                              "cat": schema.STEP_KINDS[kind], "ts": ts[i], "dur": dur[i],
                              "args": {"step": int(step_ids[i]), "busy_max_cycles": ipu_max[r][ipu],
                                       "busiest_tile": ipu * tpi + ipu_arg[r][ipu],
                                       "tiles_active": ipu_active[r][ipu],
                                       "cycles": int(end[i] - start[i])}})
                        counts["events"] += 1
                else:
                    for c, tile in enumerate(tile_list):
                        ipu = tile // tpi
                        if step_ipu[i] not in (-1, ipu):
                            continue
                        busy = w_cyc[r][c]
                        if busy > 0:
                            emit({"ph": "X", "pid": _ipu_pid(ipu), "tid": TILE_TID_BASE + tile, "name": names[i],
                                  "cat": schema.STEP_KINDS[kind], "ts": ts[i],
                                  "dur": min(round(busy * us_per_cycle, 3), float(dur[i])),
                                  "args": {"step": int(step_ids[i]), "tile": tile, "cycles": busy,
                                           "bytes_in": w_in[r][c], "bytes_out": w_out[r][c]}})
                            counts["events"] += 1
                        elif kind == sync_code:
                            emit({"ph": "X", "pid": _ipu_pid(ipu), "tid": TILE_TID_BASE + tile, "name": "sync",
                                  "cat": "sync", "ts": ts[i], "dur": dur[i],
                                  "args": {"step": int(step_ids[i]), "tile": tile,
                                           "cycles": int(end[i] - start[i])}})
                            counts["events"] += 1
            if progress is not None:
                progress(hi - a, b - a)
        fh.write("\n]}\n")
    counts["bytes"] = path.stat().st_size
    return counts
