"""``popvision-lite info run.pvl``: print a short summary of a profile (no Qt)."""

from __future__ import annotations

import json
import math
import os
import sys

from popvision_lite.cli.args import count
from popvision_lite.errors import PopvisionError
from popvision_lite.terminal import terminal_text
from popvision_lite.units import format_bytes, format_hz, format_seconds


def add_arguments(parser) -> None:
    parser.add_argument("profile", help="profile file (.pvl)")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument("--top", type=count, default=5, help="how many ops to list by cycles (default 5)")


def info_numbers(p, top: int = 5) -> dict:
    """The summary ``info`` prints, as a dict of plain Python values (numbers from analysis/run_totals.py)."""
    from popvision_lite.analysis import error_band as eb
    from popvision_lite.analysis.run_totals import PEAK_TILE_NAME, host_step_text, run_totals
    from popvision_lite.analysis.summary import top_ops
    from popvision_lite.profile import schema

    t = p.target
    steps = p.stored_table("steps")
    rt = run_totals(p)
    kinds = {}
    codes = steps["kind"].to_numpy()
    for code, name in enumerate(schema.STEP_KINDS):
        n_k = int((codes == code).sum())
        if n_k or rt.kind_cycles.get(name):
            kinds[name] = {"steps": n_k, "cycles": int(rt.kind_cycles.get(name, 0))}
    by_tile = p.stored_table("memory_by_tile")
    total = by_tile["total"].to_numpy()
    name, share = rt.top_op
    return {
        "file": str(p.path),
        "format_version": f"{p.format_version}.{p.format_minor}",
        "target": {"device": t.device, "name": t.name, "num_ipus": t.num_ipus, "tiles_per_ipu": t.tiles_per_ipu,
                   "num_tiles": t.num_tiles, "sram_bytes_per_tile": t.sram_bytes_per_tile, "clock_hz": t.clock_hz},
        "ipus": {"replicas": rt.replicas, "per_replica": rt.stages, "total": rt.num_ipus, "text": rt.ipu_count_text,
                 "drawn": rt.drawn_text},
        "run": {k: p.record[k] for k in ("model", "emulator_version", "fits", "timing_only") if k in p.record},
        "steps": len(steps),
        "step_cycles": rt.step_cycles,
        "step_time_s": rt.step_seconds,
        "total_cycles": rt.total_cycles,
        "total_time_s": rt.total_seconds,
        "samples_per_second": rt.samples_per_second,
        "samples_per_step": rt.samples_per_step,
        "error_band": eb.run_band(p.record, rt.num_ipus).to_dict(),
        "host": host_step_text(p.record.schedule),
        "ipu_time": {"name": rt.ipu_time_name, "cycles": rt.ipu_time_cycles, "waiting_cycles": rt.waiting_cycles,
                     "parts": dict(rt.part_cycles), "shares": rt.part_share, "host": rt.host_short},
        "bottleneck": rt.bottleneck,
        "bottleneck_text": rt.bottleneck_text,
        "phases": [{"name": r.name, "cycles": int(r.cycles), "runs_per_step": int(r.runs_per_step),
                    "share_of_step": float(r.share_of_step)} for r in rt.phases.itertuples()],
        "step_kinds": kinds,
        "ops": len(p.stored_table("ops")),
        "programs": len(p.stored_table("programs")),
        "variables": len(p.stored_table("variables")),
        "liveness_steps": p.liveness.num_lsteps,
        "memory": {
            "total_bytes": int(total.sum()),
            "peak_name": PEAK_TILE_NAME,
            "max_tile": rt.peak_tile,
            "max_tile_bytes": rt.peak_tile_bytes,
            "peak_not_always_live_bytes": rt.peak_not_always_live_bytes,
            "capacity_bytes": int(t.sram_bytes_per_tile),
            "tiles_over_capacity": int(by_tile["over_capacity"].sum()),
        },
        "fit": _fit(p),
        "top_op": {"name": name, "share": share},
        "top_ops": [{"name": r.name, "type": r.type, "cycles": int(r.cycles), "share": float(r.share),
                     "flops": int(r.flops)} for r in top_ops(p, max(0, top)).itertuples()] if top else [],
        "summary_levels": [list(x) for x in p.step_tiles.levels],
    }


def _fit(p) -> dict | None:
    """For a run that does not fit: what binds it (analysis/fit_constraint.py) and the fit advisor's command."""
    from popvision_lite.analysis.fit_constraint import binding_constraint

    b = binding_constraint(p)
    if b.fits:
        return None
    from popvision_lite.analysis.insights import fit_command  # (a run that fits needs none of the insights)

    return {"why": b.headline(), "cause": b.cause, "command": fit_command(p)}


def time_split_line(rt, training: bool = True) -> str:
    """One line of where one step's IPU time goes: the parts (compute / exchange / sync / stream / host) of
    ``rt`` (a ``run_totals.RunTotals``), the same cycles and shares ``info`` prints, e.g.
    ``time split of one optimizer step (IPU time summed over 2 IPUs of one replica): compute 6,375,875 cycles
    (18.7%), ...``; ``training`` False: an inference run's pipelined step.  ``emulate`` prints it for the profile
    it wrote."""
    share = rt.part_share
    parts = []
    for part, c in rt.part_cycles.items():
        wait = (f"; waiting for other IPUs {rt.waiting_cycles:,}" if part == "sync" and rt.waiting_cycles else
                f"; {rt.host_short}" if part == "host" and c else "")
        parts.append(f"{part} {c:,} cycles ({100 * share[part]:.1f}%{wait})")
    step = ("one optimizer step" if training else "one inference step") if rt.pipelined else "one step"
    return f"time split of {step} ({rt.ipu_time_name}): " + ", ".join(parts)


def profile_totals(path):
    """The ``run_totals`` of the profile file ``path`` (ProfileError when it cannot be read)."""
    from popvision_lite.analysis.run_totals import run_totals
    from popvision_lite.profile.reader import open_profile

    with open_profile(path) as p:
        return run_totals(p)


class _Written:
    """A ``ProfileData`` as ``run_totals`` reads the profile ``write_profile`` writes from it: the run record with
    the keys the writer adds (``replicas``, ``stages``), the producer's tables (a phases table the producer left
    to the writer is built from the schedule, as the writer builds it) and the memory array in its stored dtype.
    The tables as the ``ProfileData`` holds them (``ProfileData.table``): no DataFrame is built from its columns."""

    path = "profile"

    class _Memory:
        def __init__(self, arr):
            self._arr = arr

        def array(self):
            return self._arr

    def __init__(self, data):
        import numpy as np

        from popvision_lite.profile.writer import run_header

        self.target = data.target
        self.run = run_header(data.run, data.target)
        self.memory = self._Memory(np.asarray(data.memory, dtype=np.int64))
        self._data = data

    def stored_table(self, name: str):
        # the table as held (typed columns while no one asked for a DataFrame: run_totals reads either, so
        # emulate's end-of-run lines import no pandas; decision 0471)
        return self._data.table(name)


def written_totals(data):
    """The ``run_totals`` of the profile written from ``data`` (a ProfileData), from ``data`` itself: the numbers
    ``profile_totals`` reads back from the file, without reading its tables back (``emulate``'s time split line,
    as its out-of-memory advice, comes from the run in memory; tests/cli/test_written_totals.py compares the
    two)."""
    from popvision_lite.analysis.run_totals import run_totals

    return run_totals(_Written(data))


def format_info(s: dict) -> str:
    t = s["target"]
    m = s["memory"]
    it = s["ipu_time"]
    lines = [
        f"{s['file']}  (popvision-lite profile v{s['format_version']})",
        f"target   {t['name']} [{t['device']}], {s['ipus']['text']}, {t['tiles_per_ipu']} tiles per IPU, "
        f"{format_bytes(t['sram_bytes_per_tile'])} SRAM/tile, {format_hz(t['clock_hz'])} ({s['ipus']['drawn']})",
        "run      " + ", ".join(f"{k}={v}" for k, v in s["run"].items()),
        f"step     {s['step_cycles']:,} cycles = {format_seconds(s['step_time_s'])} wall time"
        + (f"; {s['samples_per_second']:,.1f} samples/s ({s['samples_per_step']:g} samples per step)"
           if math.isfinite(s["samples_per_second"]) else ""),
        f"band     {s['error_band']['text']}",
        f"host     {s['host']}",
        "phases   " + "; ".join(f"{ph['name']} {ph['cycles']:,} x {ph['runs_per_step']:,} "
                                 f"({100 * ph['share_of_step']:.1f}%)" for ph in s["phases"]),
        f"time     {it['name']}: {it['cycles']:,} cycles ({s['steps']:,} BSP steps stored, weighted by their runs "
        "per step)",
    ]
    for part, c in it["parts"].items():
        extra = f" (waiting for other IPUs {it['waiting_cycles']:,})" if part == "sync" and it["waiting_cycles"] else ""
        extra = f" ({it['host']})" if part == "host" and it.get("host") else extra
        lines.append(f"         {part:10s} {c:>16,} cycles {100 * it['shares'][part]:5.1f}%{extra}")
    lines.append(f"bound by {s['bottleneck_text']}")
    lines += [
        f"tables   {s['ops']:,} ops, {s['programs']:,} programs, {s['variables']:,} variables, "
        f"{s['liveness_steps']:,} liveness steps",
        f"memory   {format_bytes(m['total_bytes'])} in total; {m['peak_name']}: {format_bytes(m['max_tile_bytes'])} "
        f"on tile {m['max_tile']} of {format_bytes(m['capacity_bytes'])}; "
        f"{m['tiles_over_capacity']} tile(s) over capacity",
    ]
    if s.get("fit"):
        lines.append(f"why      {s['fit']['why']}")
        if s["fit"]["command"]:
            lines.append(f"fit      to find a configuration that fits: {s['fit']['command']}")
    if s["top_ops"]:
        lines.append(f"top ops by cycles per step (share of {it['name']}):")
        for o in s["top_ops"]:
            lines.append(f"         {o['cycles']:>14,} cycles {100 * o['share']:5.1f}%  {o['flops']:>16,} FLOPs  "
                         f"{o['type']:12s} {o['name']}")
    return "\n".join(lines)


def run(args) -> int:
    from popvision_lite.profile.reader import open_profile

    try:
        with open_profile(args.profile) as p:
            s = info_numbers(p, top=args.top)
    except PopvisionError as e:
        print(terminal_text(f"popvision-lite info: error: {e}"), file=sys.stderr)
        return 2
    try:
        print(json.dumps(s, indent=2) if args.json else terminal_text(format_info(s)))
        sys.stdout.flush()
    except BrokenPipeError:  # e.g. piped into `head`: not an error
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return 0
