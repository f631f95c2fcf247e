"""``popvision-lite info run.pvl``: print a short summary of a profile (no Qt)."""

from __future__ import annotations

import json
import os
import sys

import numpy as np

from popvision_lite.cli.args import count, terminal_text
from popvision_lite.errors import PopvisionError
from popvision_lite.profile import schema
from popvision_lite.units import format_bytes, format_hz, format_seconds


def add_arguments(parser) -> None:
    parser.add_argument("profile", help="profile file (.pvl)")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument("--top", type=count, default=5, help="how many ops to list by cycles (default 5)")


def summarize(p, top: int = 5) -> dict:
    """The summary ``info`` prints, as a dict of plain Python values."""
    t = p.target
    steps = p.steps
    n = len(steps)
    total_cycles = int(steps["end_cycle"].iloc[-1] - steps["start_cycle"].iloc[0]) if n else 0
    dur = (steps["end_cycle"] - steps["start_cycle"]).to_numpy()
    kinds = {}
    for code, name in enumerate(schema.STEP_KINDS):
        m = steps["kind"].to_numpy() == code
        if m.any():
            kinds[name] = {"steps": int(m.sum()), "cycles": int(dur[m].sum())}
    by_tile = p.memory.by_tile()
    total = by_tile["total"].to_numpy()
    ops = p.ops.sort_values("cycles", ascending=False).head(max(0, top))
    return {
        "file": str(p.path),
        "format_version": f"{p.format_version}.{p.format_minor}",
        "target": {"device": t.device, "name": t.name, "num_ipus": t.num_ipus, "tiles_per_ipu": t.tiles_per_ipu,
                   "num_tiles": t.num_tiles, "sram_bytes_per_tile": t.sram_bytes_per_tile, "clock_hz": t.clock_hz},
        "run": {k: p.run.get(k) for k in ("model", "emulator_version", "fits", "timing_only") if k in p.run},
        "steps": n,
        "total_cycles": total_cycles,
        "total_time_s": total_cycles / float(t.clock_hz) if t.clock_hz else None,
        "step_kinds": kinds,
        "ops": len(p.ops),
        "programs": len(p.programs),
        "variables": len(p.variables),
        "liveness_steps": p.liveness.num_lsteps,
        "memory": {
            "total_bytes": int(total.sum()),
            "max_tile": int(np.argmax(total)) if total.size else -1,
            "max_tile_bytes": int(total.max()) if total.size else 0,
            "capacity_bytes": int(t.sram_bytes_per_tile),
            "tiles_over_capacity": int(by_tile["over_capacity"].sum()),
        },
        "top_ops": [{"name": r.name, "type": r.type, "cycles": int(r.cycles), "flops": int(r.flops)}
                    for r in ops.itertuples()],
        "summary_levels": [list(x) for x in p.step_tiles.levels],
    }


def format_summary(s: dict) -> str:
    t = s["target"]
    m = s["memory"]
    lines = [
        f"{s['file']}  (popvision-lite profile v{s['format_version']})",
        f"target   {t['name']} [{t['device']}] x {t['num_ipus']} IPU(s), {t['tiles_per_ipu']} tiles each "
        f"({t['num_tiles']} tiles), {format_bytes(t['sram_bytes_per_tile'])} SRAM/tile, {format_hz(t['clock_hz'])}",
        "run      " + ", ".join(f"{k}={v}" for k, v in s["run"].items()),
        f"steps    {s['steps']:,} BSP steps, {s['total_cycles']:,} cycles"
        + (f" = {format_seconds(s['total_time_s'])}" if s["total_time_s"] is not None else ""),
    ]
    tot = max(1, sum(k["cycles"] for k in s["step_kinds"].values()))
    for name, k in s["step_kinds"].items():
        lines.append(f"         {name:18s} {k['steps']:>8,} steps {k['cycles']:>14,} cycles {100 * k['cycles'] / tot:5.1f}%")
    lines += [
        f"tables   {s['ops']:,} ops, {s['programs']:,} programs, {s['variables']:,} variables, "
        f"{s['liveness_steps']:,} liveness steps",
        f"memory   {format_bytes(m['total_bytes'])} in total; fullest tile {m['max_tile']} holds "
        f"{format_bytes(m['max_tile_bytes'])} of {format_bytes(m['capacity_bytes'])}; "
        f"{m['tiles_over_capacity']} tile(s) over capacity",
    ]
    if s["top_ops"]:
        lines.append("top ops by cycles:")
        for o in s["top_ops"]:
            lines.append(f"         {o['cycles']:>14,} cycles  {o['flops']:>16,} FLOPs  {o['type']:12s} {o['name']}")
    return "\n".join(lines)


def run(args) -> int:
    from popvision_lite.profile.reader import open_profile

    try:
        with open_profile(args.profile) as p:
            s = summarize(p, top=args.top)
    except PopvisionError as e:
        print(terminal_text(f"popvision-lite info: error: {e}"), file=sys.stderr)
        return 2
    try:
        print(json.dumps(s, indent=2) if args.json else terminal_text(format_summary(s)))
        sys.stdout.flush()
    except BrokenPipeError:  # e.g. piped into `head`: not an error
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return 0
