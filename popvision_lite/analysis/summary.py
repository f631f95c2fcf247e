"""The headline numbers of a run (pure: numpy/pandas over a Profile, no Qt).

``summarize(profile)`` -> :class:`Summary`: target, model and config, fits or not, total
cycles and time at the clock, the share of compute / exchange / sync / stream-copy cycles,
peak tile memory and where it is, the top ops by cycles and the numeric check results.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from popvision_lite.profile import schema
from popvision_lite.units import format_bytes, format_seconds  # noqa: F401 (re-exported for views)

# How step kinds are grouped into the phases PopVision shows.
PHASE_OF_KIND = {
    "compute": "compute",
    "exchange_internal": "exchange",
    "exchange_global": "exchange",
    "sync": "sync",
    "stream_copy": "stream",
}
PHASES = ("compute", "exchange", "sync", "stream")


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
    total_cycles: int
    clock_hz: float
    phase_cycles: dict[str, int]      # phase -> cycles summed over steps (see PHASES)
    kind_cycles: dict[str, int]       # step kind -> cycles
    num_steps: int
    peak: PeakMemory
    top_ops: pd.DataFrame             # name, type, cycles, share, flops, tiles_used (descending cycles)
    numeric_checks: dict[str, Any]
    peak_not_always_live: int         # max over liveness steps of the fullest tile's not-always-live bytes
    peak_not_always_live_lstep: int   # -1 when there are no liveness steps
    run: dict[str, Any] = field(default_factory=dict)

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
    """Cycles per phase and per step kind, summed over steps (end - start)."""
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
    ops = profile.ops
    cols = ["op_id", "name", "type", "cycles", "share", "flops", "tiles_used"]
    if len(ops) == 0:
        return pd.DataFrame(columns=cols)
    total = float(ops["cycles"].sum())
    df = ops.nlargest(n, "cycles")[["op_id", "name", "type", "cycles", "flops", "tiles_used"]].copy()
    df.insert(4, "share", df["cycles"] / total if total else 0.0)
    return df[cols].reset_index(drop=True)


def summarize(profile, n_top_ops: int = 10) -> Summary:
    t = profile.target
    run = dict(profile.run or {})
    steps = profile.steps
    phases, kinds = phase_cycles(steps)
    if len(steps):
        total = int(steps["end_cycle"].max())  # cycles since run start
    else:
        total = 0
    ls = profile.liveness_steps
    if len(ls):
        i = int(np.argmax(ls["max_tile_bytes"].to_numpy()))
        nal_peak, nal_lstep = int(ls["max_tile_bytes"].iloc[i]), int(ls["lstep"].iloc[i])
    else:
        nal_peak, nal_lstep = 0, -1
    peak = peak_memory(profile)
    fits = run.get("fits")
    fits = (peak.over_capacity_tiles == 0) if fits is None else bool(fits)
    config = run.get("config") or {}
    if not isinstance(config, dict):
        config = {"config": config}
    checks = run.get("numeric_checks") or {}
    if not isinstance(checks, dict):
        checks = {"result": checks}
    return Summary(
        target=t, model=str(run.get("model", "?")), config=config, fits=fits,
        timing_only=bool(run.get("timing_only", False)), total_cycles=total, clock_hz=float(t.clock_hz),
        phase_cycles=phases, kind_cycles=kinds, num_steps=len(steps), peak=peak,
        top_ops=top_ops(profile, n_top_ops), numeric_checks=checks,
        peak_not_always_live=nal_peak, peak_not_always_live_lstep=nal_lstep, run=run,
    )


