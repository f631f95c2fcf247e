"""Roofline analysis: the emulated IPU against GPU rooflines on the same workload (pure, no Qt).

Model (see docs/decisions/*-roofline-model.md):

* **Ceilings** come from ``resources/devices`` via :mod:`popvision_lite.devices`, **per chip** on both sides
  (one IPU, one GPU); compute, tile-SRAM and exchange (aggregates over tiles) are scaled by
  ``tiles_per_ipu / spec.tiles`` when the profile emulated a cut-down chip.  The IPU-Links roof is drawn only
  for a run on more than one IPU (replicas x IPUs per replica).  Attainable(I) = min(peak, bandwidth x I);
  ridge = peak / bandwidth.  An op is held to its chips' roofs (``op_chips``: 1, or every IPU of the target
  for an op spread over all of them) and plotted at FLOP/s per chip (``chip_flops``).
* **IPU point per op**: achieved = flops / (cycles / clock).  The op's *bounding level* is the memory level
  with the largest ideal time bytes_level / bandwidth_level (the one whose roof is lowest at the op's
  intensities); its intensity is flops / bytes_at_that_level.  ``roof_bound`` says ``compute`` if
  flops / peak exceeds that memory time (the roof it sits under); ``bound`` is what bounds the op in the
  emulated run: the part of its own time (compute / exchange / sync / stream) that dominates, as the Summary
  splits the run (``bottleneck_relation`` relates them to the run's bottleneck).  Point size = op cycles / run
  cycles.
* **GPU bound per op** (``{gpu}_time_s``, not a measurement, not an estimate): time = max(flops / peak(precision),
  min_bytes / HBM bandwidth), with FP16 ops on the tensor-core FP16 peak and everything else on the FP32 peak,
  one GPU.  An upper bound on GPU speed that no GPU reaches.
* **GPU estimate per op** (``{gpu}_est_time_s``): :mod:`gpu_estimate` (measured achievable fractions of peak and
  HBM bandwidth, kernel launch overhead), one GPU; speed-ups and GPU costs use the estimate.
* **Cost per run** = wall time x chips x price per chip-hour.  IPU: the run's wall time x num_ipus x the spec
  price (the Mk2 has no published price, so the first IPU spec that has one, the Bow, is used and the note
  says so); each op gets the share of it that its time is of the summed op times (pipelined stages overlap,
  so op times x chips would count the same wall time twice).  GPU: estimated time x one GPU x its price.
* **What-if** (SRAM scaled by ``capacity_scale``; 1.0 = the real chip): an op *spills* when its data cannot
  stay on chip, i.e. (a) it has vertices on a tile whose bytes (always-live + peak not-always-live, from the
  memory table) exceed that tile's scaled capacity, or (b) its compulsory bytes (``min_bytes``) exceed the
  scaled SRAM left after the run's always-live bytes.  A spilling op would stream its data from Streaming
  Memory: its time becomes max(emulated time, min_bytes / DDR bandwidth) and its point falls to the DDR roof.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from popvision_lite import devices
from popvision_lite.analysis import gpu_estimate as ge
from popvision_lite.analysis import model_pass as wl
from popvision_lite.analysis.run_totals import STEP_PARTS
from popvision_lite.devices import DeviceSpec
from popvision_lite.errors import ArgumentTypeError, ArgumentValueError, ConfigError, DeviceSpecError
from popvision_lite.profile.schema import stored_table
from popvision_lite.units import format_bandwidth, format_flops

DEFAULT_GPUS = ("a100-80gb", "h100-sxm", "h200", "v100")
BYTES_COLUMN = {"sram": "bytes_sram", "exchange": "bytes_exchange", "ipu_link": "bytes_ipu_link", "ddr": "bytes_ddr"}
PER_TILE_LEVELS = ("sram", "exchange")  # aggregates over tiles: scale with the number of tiles emulated


@dataclass(frozen=True)
class Ceiling:
    kind: str          # "compute" | "bandwidth"
    key: str           # "fp16" / "fp32" for compute, memory level for bandwidth
    label: str         # e.g. "FP16 peak", "tile SRAM"
    value: float       # FLOP/s or B/s (for the whole target)
    source: str
    basis: str

    def text(self) -> str:
        """'FP16 peak 250 TFLOP/s', 'tile SRAM 190 TB/s' (units.format_flops / format_bandwidth)."""
        if self.kind == "compute":
            return f"{self.label} {format_flops(self.value)}"
        return f"{self.label} {format_bandwidth(self.value)}"


@dataclass
class Roofline:
    device_id: str
    name: str              # legend name, e.g. "IPU Mk2 (GC200) x2"
    kind: str              # "ipu" | "gpu"
    compute: list[Ceiling]
    bandwidth: list[Ceiling]
    chips: int = 1
    note: str = ""

    def peak(self, precision: str) -> float:
        want = "fp16" if precision == "fp16" else "fp32"
        for c in self.compute:
            if c.key == want:
                return c.value
        return max(c.value for c in self.compute)

    def bw(self, level: str) -> float:
        for c in self.bandwidth:
            if c.key == level:
                return c.value
        raise KeyError(f"{self.device_id} has no bandwidth roof for '{level}'")

    def has(self, level: str) -> bool:
        return any(c.key == level for c in self.bandwidth)

    def ridge(self, precision: str, level: str) -> float:
        """Operational intensity (FLOP/byte) where the bandwidth roof meets the compute peak."""
        return self.peak(precision) / self.bw(level)

    def ridges(self) -> list[tuple[Ceiling, Ceiling, float, float]]:
        """(compute ceiling, bandwidth ceiling, x = ridge intensity, y = peak) for every pair."""
        return [(c, b, c.value / b.value, c.value) for c in self.compute for b in self.bandwidth]

    def attainable(self, intensity, precision: str = "fp16", level: str | None = None):
        """min(peak, bw x I) for one level, or under every roof when ``level`` is None."""
        i = np.asarray(intensity, dtype=float)
        levels = [level] if level else [c.key for c in self.bandwidth]
        roof = np.full(i.shape, self.peak(precision))
        for lv in levels:
            roof = np.minimum(roof, self.bw(lv) * i)
        return roof


def _q(spec: DeviceSpec, key: str):
    return spec.quantity(key)


def ipu_roofline(spec: DeviceSpec | str, num_ipus: int = 1, tiles_per_ipu: int | None = None,
                 links: bool = True) -> Roofline:
    """Ceilings of ``num_ipus`` IPUs together (1: one chip, what :func:`analyze` draws).  ``links``: include the
    IPU-Links roof (a run on one IPU moves nothing over them)."""
    spec = devices.load_device(spec) if isinstance(spec, str) else spec
    frac = 1.0 if tiles_per_ipu is None else tiles_per_ipu / spec.tiles
    n = max(int(num_ipus), 1)
    comp = []
    for prec, key in (("fp16", "compute.peak_fp16_flops"), ("fp32", "compute.peak_fp32_flops")):
        q = _q(spec, key)
        comp.append(Ceiling("compute", prec, f"{prec.upper()} peak", float(q.value) * n * frac, q.source, q.basis))
    bws = []
    for m in spec.memory_levels:
        if m.bandwidth is None or (m.level == "ipu_link" and not links):
            continue
        scale = n * (frac if m.level in PER_TILE_LEVELS else 1.0)
        bws.append(Ceiling("bandwidth", m.level, m.label, float(m.bandwidth.value) * scale, m.bandwidth.source,
                           m.bandwidth.basis))
    name = spec.name + (f" x{n}" if n > 1 else "") + ("" if frac == 1.0 else f" ({tiles_per_ipu}/{spec.tiles} tiles)")
    note = "" if frac == 1.0 else f"compute, SRAM and exchange roofs scaled to {tiles_per_ipu} of {spec.tiles} tiles per IPU"
    return Roofline(spec.id, name, "ipu", comp, bws, chips=n, note=note)


def gpu_roofline(spec: DeviceSpec | str) -> Roofline:
    spec = devices.load_device(spec) if isinstance(spec, str) else spec
    comp = []
    for prec, key, label in (("fp16", "compute.peak_fp16_flops", "FP16 tensor peak"),
                             ("fp32", "compute.peak_fp32_flops", "FP32 peak")):
        q = _q(spec, key)
        comp.append(Ceiling("compute", prec, label, float(q.value), q.source, q.basis))
    bws = [Ceiling("bandwidth", m.level, m.label, float(m.bandwidth.value), m.bandwidth.source, m.bandwidth.basis)
           for m in spec.memory_levels if m.bandwidth is not None]
    bws.sort(key=lambda c: -c.value)
    return Roofline(spec.id, spec.name, "gpu", comp, bws, chips=1)


# --------------------------------------------------------------------------------- helpers
def _target_of(profile):
    return profile.target


def _run_chips(profile) -> int:
    """IPUs of the whole run (replicas x IPUs per replica); the target's IPUs for an object without a run."""
    if getattr(profile, "run", None) is None:
        return int(profile.target.num_ipus)
    return int(wl.chips(profile)[0])


def _run_cycles(profile, ops: pd.DataFrame) -> int:
    steps = stored_table(profile, "steps")
    if steps is not None and len(steps):
        return int(steps["end_cycle"].max() - steps["start_cycle"].min())
    return int(ops["cycles"].sum())


def _always_live_bytes(profile) -> int:
    mem = getattr(profile, "memory", None)
    if mem is None:
        return 0
    arr = mem.array() if hasattr(mem, "array") else np.asarray(mem)
    if arr.ndim != 3 or arr.size == 0:
        return 0
    return int(arr[:, :, 0].sum())


def _ops_on_full_tiles(profile, capacity_per_tile: float) -> set[int]:
    """op_ids with a vertex on a tile whose bytes exceed ``capacity_per_tile`` (empty when unknown)."""
    mem = getattr(profile, "memory", None)
    if mem is None:
        return set()
    arr = mem.array() if hasattr(mem, "array") else np.asarray(mem)
    if arr.ndim != 3 or arr.size == 0:
        return set()
    full = arr.sum(axis=(1, 2)) > capacity_per_tile
    if not full.any():
        return set()  # the common case: no need to read the (large) vertices table
    try:
        verts, css = stored_table(profile, "vertices"), stored_table(profile, "compute_sets")
    except AttributeError:
        return set()
    if verts is None or css is None or not len(verts):
        return set()
    vt = verts["tile"].to_numpy()
    inside = vt < len(full)
    hit = np.zeros(len(vt), dtype=bool)
    hit[inside] = full[vt[inside]]
    vcs = verts["cs_id"].to_numpy()
    ccs = css["cs_id"].to_numpy()
    size = int(max(vcs.max(initial=0), ccs.max(initial=0))) + 1
    cs_hit = np.zeros(size, dtype=bool)
    cs_hit[vcs[hit]] = True  # dense ids: a scatter instead of a hash-based unique
    op_of_cs = css["op_id"].to_numpy()[cs_hit[ccs]]
    return {int(o) for o in op_of_cs if o >= 0}


def _price(spec: DeviceSpec) -> tuple[float, str]:
    """(USD per chip-hour, source): :func:`devices.chip_price`, the one price of every view."""
    p = devices.chip_price(spec)
    return p.usd_per_chip_hour, p.source


@dataclass
class RooflineAnalysis:
    ipu: Roofline
    gpus: list[Roofline]
    ops: pd.DataFrame            # one row per op, all numbers (see module doc); index = op_id
    totals: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    capacity_bytes: float = math.nan       # SRAM left for op data after always-live bytes (what-if)

    @property
    def points(self) -> pd.DataFrame:
        """Ops that can be drawn on log axes (flops > 0 and a finite intensity)."""
        o = self.ops
        return o[(o["flops"] > 0) & np.isfinite(o["intensity"]) & (o["intensity"] > 0)]

    def table(self) -> pd.DataFrame:
        """Per-op side table with a final TOTAL row (what the view shows)."""
        cols = ["name", "type", "precision", "bound", "roof_bound", "level", "intensity", "achieved_flops", "ipu_time_s",
                "share"]
        for g in self.gpus:
            cols += [f"{g.device_id}_est_time_s", f"{g.device_id}_est_speedup", f"{g.device_id}_time_s",
                     f"{g.device_id}_speedup"]
        cols += ["ipu_cost_usd"] + [f"{g.device_id}_cost_usd" for g in self.gpus] + ["spills", "whatif_time_s"]
        t = self.ops[cols].copy()
        tot = {c: math.nan for c in cols}
        tot.update(name="TOTAL (ops)", type="", precision="", bound="", roof_bound="", level="",
                   spills=bool(t["spills"].any()))
        for c in cols:
            if c.endswith("_time_s") or c.endswith("_cost_usd") or c == "share":
                tot[c] = float(t[c].sum(min_count=1))
        tot["ipu_cost_usd"] = self.totals.get("ipu_cost_usd", tot["ipu_cost_usd"])
        tot["achieved_flops"] = float(self.ops["flops"].sum()) / tot["ipu_time_s"] if tot["ipu_time_s"] else math.nan
        t.loc[-1] = tot
        return t


FALLBACK_IPU = "ipu-mk2"  # the roofs used for a profile whose target device has no bundled spec


def _op_part_cycles(ops: pd.DataFrame, rt) -> np.ndarray:
    """(ops, STEP_PARTS) cycles of each op's own time by part: run_totals' (the one split every view shows), or
    the ops table's columns for a stand-in without steps."""
    if rt is not None and rt.op_part_cycles.shape == (len(ops), len(STEP_PARTS)):
        return np.asarray(rt.op_part_cycles, np.float64)
    cols = [f"{p}_cycles" for p in STEP_PARTS]
    if all(c in ops.columns for c in cols):
        return ops[cols].to_numpy(np.float64)
    return np.zeros((len(ops), len(STEP_PARTS)))


def bottleneck_relation(a: RooflineAnalysis, bottleneck: str) -> str:
    """How the points' bounds relate to the run's bottleneck (run_totals.bottleneck), in one short line: the
    share of the ops' time in ops bound by each part, e.g. "Ops' time by own bound: compute 79%, exchange 21%;
    run bottleneck compute (Summary): the same"."""
    pts = a.points
    if not len(pts):
        return ""
    t = pts.groupby("bound")["ipu_time_s"].sum().sort_values(ascending=False)
    tot = float(t.sum())
    if tot <= 0:
        return ""
    parts = ", ".join(f"{b} {100 * v / tot:.0f}%" for b, v in t.items() if v >= 0.005 * tot) or "none"
    top = str(t.index[0])
    if bottleneck in ("sync", "host"):  # IPUs waiting for each other or for the host: no op's own time
        rel = "time no op owns"
    elif top == bottleneck:
        rel = "the same"
    else:
        rel = f"summed over the whole step, time outside these ops ({top} leads them)"
    return f"Ops' time by own bound: {parts}; run bottleneck {bottleneck} (Summary): {rel}."


def gpu_list(gpus, name: str = "gpus") -> tuple:
    """``gpus`` checked: one GPU or several, each a bundled GPU id, a device spec file or a ``DeviceSpec``; a str
    is ONE id.  TypeError / ValueError naming ``name``."""
    if isinstance(gpus, DeviceSpec):
        return (gpus,)
    items = (gpus,) if isinstance(gpus, str) else gpus
    if isinstance(items, bytes | dict) or not hasattr(items, "__iter__"):
        raise ArgumentTypeError(f"{name} must be a GPU id or a list of them (e.g. 'a100-80gb'), got "
                        f"{type(gpus).__name__} {gpus!r}"[:120])
    items = tuple(items)
    known = devices.list_devices("gpu")
    for g in items:
        if isinstance(g, DeviceSpec):
            continue
        if not isinstance(g, str):
            raise ArgumentTypeError(f"{name} must hold GPU ids (str) or DeviceSpecs, got {type(g).__name__} {g!r}"[:120])
        if g not in known and not g.endswith(".toml"):
            raise ArgumentValueError(f"{name}: unknown GPU {g!r}; bundled GPUs are {', '.join(known)} (or a device spec "
                             ".toml file)")
    return items


def _ipu_spec(target, ipu_spec: DeviceSpec | None, notes: list[str]) -> DeviceSpec:
    """The IPU spec the roofs are drawn for: ``ipu_spec``, the profile's bundled device, or (a device this build
    has no spec for) the fallback IPU, said in ``notes``."""
    try:
        return ipu_spec or devices.load_bundled_device(target.device)  # an id from a file, never a path
    except DeviceSpecError:
        # a profile naming a device this build has no spec for: draw against a known IPU and say so
        spec = devices.load_bundled_device(FALLBACK_IPU)
        notes.append(f"target device {str(target.device)[:60]!r} is unknown to this build; roofs drawn for the "
                     f"{spec.name} ({FALLBACK_IPU}) scaled to the profile's tiles, so treat the bounds as rough")
        return spec


def _op_counts(profile, notes: list[str]):
    """The ops' run counts (model_pass.op_counts), or None (each row one run, said in ``notes``)."""
    try:
        return wl.op_counts(profile)
    except ConfigError as e:
        notes.append(f"op run counts unreadable ({e}); every row taken as one run")
        return None


def _run_totals_or_none(profile):
    """The step and the ops' shares of the IPU time, as every view shows them (analysis/run_totals.py); None
    for a stand-in with .ops and .target only."""
    try:
        from popvision_lite.analysis.run_totals import run_totals

        return run_totals(profile)
    except (AttributeError, KeyError, TypeError):  # a stand-in with .ops and .target only
        return None


def _step_cycles(profile, ops: pd.DataFrame, counts, rt) -> int:
    """Cycles of the run's wall time that costs and shares are taken of."""
    if rt is not None and rt.step_cycles > 0:
        # the one wall time of a step (the per-step host terms included), as the Summary and `info` give it
        return int(rt.step_cycles)
    run_cycles = _run_cycles(profile, ops)
    if counts is not None and counts.pipelined:
        # the rows total one training step of one replica; the drawn timeline elides most of it
        step = getattr(profile, "run", {}).get("total_cycles")
        if isinstance(step, int | float) and not isinstance(step, bool) and step > 0:
            run_cycles = int(step)
    return run_cycles


def _ipu_columns(new: dict[str, Any], ops: pd.DataFrame, ipu: Roofline, rt, run_cycles: int, t_ipu: np.ndarray,
                 chip_frac: np.ndarray, n_ipus: int, notes: list[str]) -> None:
    """The IPU point of every op into ``new``: time, share, achieved FLOP/s, bounding level and intensity, the
    roof it sits under, what bounds it, efficiency, and whether it is above a roof (flagged in ``notes``)."""
    flops = ops["flops"].to_numpy(dtype=float)
    cycles = ops["cycles"].to_numpy(dtype=float)
    new["ipu_time_s"] = t_ipu
    new["share"] = cycles / run_cycles if run_cycles > 0 else 0.0
    if rt is not None and len(rt.op_share) == len(ops):
        new["share"] = rt.op_share
    with np.errstate(divide="ignore", invalid="ignore"):
        new["achieved_flops"] = np.where(t_ipu > 0, flops / t_ipu, 0.0)
    new["chip_flops"] = new["achieved_flops"] / np.where(ops["ipu"].to_numpy() < 0, n_ipus, 1)
    new["op_chips"] = chip_frac
    prec = ops["precision"].astype(str).to_numpy()
    peak = np.where(prec == "fp16", ipu.peak("fp16"), ipu.peak("fp32")) * chip_frac

    # bounding level = the level with the largest ideal time bytes / bw
    levels = [lv for lv in BYTES_COLUMN if ipu.has(lv)]
    level_bytes = np.stack([ops[BYTES_COLUMN[lv]].to_numpy(dtype=float) for lv in levels], axis=1)
    times = level_bytes / (np.array([ipu.bw(lv) for lv in levels])[None, :] * chip_frac[:, None])
    worst = times.argmax(axis=1)
    level = np.array(levels, dtype=object)[worst]
    mem_time = times.max(axis=1)
    comp_time = flops / peak
    bound_bytes = np.take_along_axis(level_bytes, worst[:, None], axis=1)[:, 0]
    with np.errstate(divide="ignore", invalid="ignore"):
        intensity = np.where(bound_bytes > 0, flops / bound_bytes, np.inf)
    new["level"] = level
    new["intensity"] = intensity
    # the roof the op sits under in the roofline model (ideal compute time vs the slowest level's ideal time) ...
    new["roof_bound"] = np.where(comp_time >= mem_time, "compute", level)
    # ... and what bounds it: the part of its OWN emulated time that dominates (compute / exchange / sync /
    # stream, run_totals.op_part_cycles, as the Summary splits the run), so an op whose time is mostly compute is
    # never "bound by exchange" because its ideal exchange time outruns its ideal compute time (issue 46)
    part = _op_part_cycles(ops, rt)
    new["compute_share"] = np.where(part.sum(axis=1) > 0, part[:, 0] / np.maximum(part.sum(axis=1), 1e-300), 0.0)
    new["bound"] = np.where(part.sum(axis=1) > 0, np.array(STEP_PARTS, dtype=object)[part.argmax(axis=1)],
                            new["roof_bound"])
    new["roof_time_s"] = np.maximum(comp_time, mem_time)
    with np.errstate(divide="ignore", invalid="ignore"):
        roof_flops = np.where(new["roof_time_s"] > 0, flops / new["roof_time_s"], np.inf)
        new["roof_flops"] = roof_flops
        new["efficiency"] = np.where(roof_flops > 0, new["achieved_flops"] / roof_flops, math.nan)
    # Above a roof = the emulated op computed or moved data faster than the spec allows at some level
    # (a cost-model inconsistency, flagged rather than hidden).  Equivalent to achieved > roof_flops
    # for ops with FLOPs, and also catches zero-FLOP copies.
    tol = 1 + 1e-9
    with np.errstate(divide="ignore", invalid="ignore"):
        over = (flops > 0) & (comp_time > t_ipu * tol)
        over |= (times > t_ipu[:, None] * tol).any(axis=1)
    new["above_roof"] = over
    if over.any():
        bad = ops.loc[over, "name"].tolist()
        notes.append(f"{len(bad)} op(s) faster than their IPU roofs allow (cost model exceeds the spec): "
                     + ", ".join(bad[:5]) + (" ..." if len(bad) > 5 else ""))


def _gpu_columns(new: dict[str, Any], ops: pd.DataFrame, gpu_lines: list[Roofline], run_ops: pd.DataFrame,
                 runs: np.ndarray, t_ipu: np.ndarray) -> None:
    """Each GPU's roofline bound and estimate of every op into ``new`` (``{gpu}_time_s``, ``{gpu}_est_time_s``,
    speed-ups ...), for as many runs of the op as its row totals."""
    flops = ops["flops"].to_numpy(dtype=float)
    prec = ops["precision"].astype(str).to_numpy()
    min_bytes = ops["min_bytes"].to_numpy(dtype=float) * runs  # all the runs the row totals
    for g in gpu_lines:
        gp = np.where(prec == "fp16", g.peak("fp16"), g.peak("fp32"))
        hbm = g.bw("hbm")
        tc, tm = flops / gp, min_bytes / hbm
        tg = np.maximum(tc, tm)
        gid = g.device_id
        new[f"{gid}_time_s"] = tg
        with np.errstate(divide="ignore", invalid="ignore"):
            new[f"{gid}_intensity"] = np.where(min_bytes > 0, flops / min_bytes, np.inf)
            new[f"{gid}_flops"] = np.where(tg > 0, flops / tg, 0.0)
            new[f"{gid}_speedup"] = np.where(tg > 0, t_ipu / tg, math.nan)
        new[f"{gid}_bound"] = np.where(tc >= tm, "compute", "hbm")
        est = ge.estimate_ops(run_ops, g.device_id)
        te = est["est_time_s"].to_numpy() * runs
        new[f"{gid}_est_time_s"] = te
        new[f"{gid}_est_bound"] = est["est_bound"].to_numpy()
        with np.errstate(divide="ignore", invalid="ignore"):
            new[f"{gid}_est_speedup"] = np.where(te > 0, t_ipu / te, math.nan)
            new[f"{gid}_est_flops"] = np.where(te > 0, flops / te, 0.0)


def _cost_columns(new: dict[str, Any], spec: DeviceSpec, gpu_lines: list[Roofline], wall_s: float, n_ipus: int,
                  t_ipu: np.ndarray, notes: list[str]) -> float:
    """Cost per run into ``new`` (IPU: the run's cost shared over ops by time; GPU: estimated time x price); the
    IPU run's cost returned."""
    price, pnote = _price(spec)
    notes.append(f"IPU price: {pnote}")
    ipu_run_cost = wall_s * n_ipus * price / 3600.0
    t_sum = float(t_ipu.sum())
    new["ipu_cost_usd"] = ipu_run_cost * t_ipu / t_sum if t_sum > 0 else np.zeros(len(t_ipu))
    for g in gpu_lines:
        gprice, gnote = _price(devices.load_device(g.device_id))
        if math.isnan(gprice):
            notes.append(f"{g.name}: no published price, cost shown as n/a")
        new[f"{g.device_id}_cost_usd"] = new[f"{g.device_id}_est_time_s"] * gprice / 3600.0
    notes.append(f"IPU cost = wall time x {n_ipus} IPU(s) x price, shared over ops by time; GPU cost = estimated "
                 "time x one GPU x price")
    return ipu_run_cost


def _whatif_columns(new: dict[str, Any], profile, ops: pd.DataFrame, spec: DeviceSpec, ipu: Roofline, target,
                    capacity_scale: float, runs: np.ndarray, t_ipu: np.ndarray, chip_frac: np.ndarray,
                    notes: list[str]) -> tuple[float, np.ndarray]:
    """The what-if into ``new``: compulsory bytes vs the (scaled) SRAM left after always-live data; the
    capacity and which ops spill returned."""
    flops = ops["flops"].to_numpy(dtype=float)
    working_set = ops["min_bytes"].to_numpy(dtype=float)       # one run
    min_bytes = working_set * runs                              # all the runs the row totals
    n_ipus = int(target.num_ipus)
    sram_cap = float(spec.memory("sram").capacity_bytes or spec.tiles * spec.sram_bytes_per_tile)
    sram_cap *= target.tiles_per_ipu / spec.tiles
    always = _always_live_bytes(profile)
    capacity = sram_cap * n_ipus * capacity_scale - always
    cap_op = capacity * chip_frac
    spills = (working_set > cap_op) & (working_set > 0)
    over_ops = _ops_on_full_tiles(profile, target.sram_bytes_per_tile * capacity_scale)
    new["on_full_tiles"] = ops["op_id"].isin(over_ops).to_numpy()
    spills |= new["on_full_tiles"]
    if over_ops:
        notes.append(f"what-if at {100 * capacity_scale:.0f}% SRAM: {len(over_ops)} op(s) run on tiles whose data "
                     "does not fit")
    ddr = ipu.bw("ddr") * chip_frac if ipu.has("ddr") else np.full(len(ops), math.nan)
    new["working_set_bytes"] = working_set
    new["spills"] = spills
    new["whatif_time_s"] = np.where(spills, np.maximum(t_ipu, min_bytes / ddr), t_ipu)
    with np.errstate(divide="ignore", invalid="ignore"):
        new["whatif_intensity"] = np.where(min_bytes > 0, flops / min_bytes, np.inf)
        new["whatif_flops"] = np.where(new["whatif_time_s"] > 0, flops / new["whatif_time_s"], 0.0)
    return capacity, spills


def _totals(new: dict[str, Any], gpu_lines: list[Roofline], flops: np.ndarray, t_ipu: np.ndarray, wall_s: float,
            ipu_run_cost: float, spills: np.ndarray, n_ipus: int, run_chips: int) -> dict[str, Any]:
    """The run's totals: its time, cost and FLOP/s, each GPU's summed bound, estimate and cost."""
    totals: dict[str, Any] = {
        "run_time_s": wall_s,
        "ops_ipu_time_s": float(t_ipu.sum()),
        "ipu_cost_usd": float(ipu_run_cost),
        "flops": float(flops.sum()),
        "ipu_achieved_flops": float(flops.sum() / wall_s) if wall_s else 0.0,
        "spilling_ops": int(spills.sum()),
        "num_ipus": n_ipus,
        "run_chips": run_chips,
    }
    for g in gpu_lines:
        gid = g.device_id
        tg = float(new[f"{gid}_time_s"].sum())
        totals[f"{gid}_time_s"] = tg
        te = float(new[f"{gid}_est_time_s"].sum())
        totals[f"{gid}_est_time_s"] = te
        cost = new[f"{gid}_cost_usd"]
        totals[f"{gid}_cost_usd"] = float(np.nansum(cost)) if np.isfinite(cost).any() else math.nan
    return totals


def analyze(profile, gpus=DEFAULT_GPUS, capacity_scale: float = 1.0,
            ipu_spec: DeviceSpec | None = None) -> RooflineAnalysis:
    """Roofline numbers for every op of ``profile`` (a Profile, ProfileData, or anything with
    ``.ops`` and ``.target``; ``.steps`` and ``.memory`` are used when present).  ``gpus``: GPU device ids to
    draw beside it (one id, or a list; ``devices.list_devices("gpu")``)."""
    gpus = gpu_list(gpus)
    target = _target_of(profile)
    notes: list[str] = []
    spec = _ipu_spec(target, ipu_spec, notes)
    ops = stored_table(profile, "ops").reset_index(drop=True)
    new: dict[str, Any] = {}  # computed columns, joined once at the end (column inserts are slow)
    n_ipus = int(target.num_ipus)
    run_chips = _run_chips(profile)
    ipu = ipu_roofline(spec, 1, int(target.tiles_per_ipu), links=run_chips > 1)
    if run_chips > 1:
        ipu.name += ", per chip"
    gpu_lines = [gpu_roofline(g) for g in gpus]
    clock = float(target.clock_hz)
    if ipu.note:
        notes.append(ipu.note)

    flops = ops["flops"].to_numpy(dtype=float)
    t_ipu = ops["cycles"].to_numpy(dtype=float) / clock
    counts = _op_counts(profile, notes)
    rt = _run_totals_or_none(profile)
    run_cycles = _step_cycles(profile, ops, counts, rt)
    # chips each op ran on: its own IPU, or all of them (-1); its roofs are those chips' together
    chip_frac = np.where(ops["ipu"].to_numpy() < 0, n_ipus, 1).astype(float)
    _ipu_columns(new, ops, ipu, rt, run_cycles, t_ipu, chip_frac, n_ipus, notes)

    # GPU roofline bounds.  A pipelined profile's rows total several runs of an op (layers x micro-batches
    # of a step) while min_bytes is one run's: the GPU side runs each op as often as the IPU did
    runs = counts.table_runs.astype(float) if counts is not None else np.ones(len(ops))
    if counts is not None and counts.pipelined:
        what = "pipelined run" if n_ipus > 1 else "composed run (layers x micro-batches)"
        notes.append(f"{what}: each row totals its op's runs of one training step of one replica "
                     f"({counts.basis}); GPU times are for as many runs")
    run_ops = wl.per_run(ops, counts) if counts is not None else ops
    _gpu_columns(new, ops, gpu_lines, run_ops, runs, t_ipu)

    wall_s = run_cycles / clock
    ipu_run_cost = _cost_columns(new, spec, gpu_lines, wall_s, n_ipus, t_ipu, notes)
    capacity, spills = _whatif_columns(new, profile, ops, spec, ipu, target, capacity_scale, runs, t_ipu, chip_frac,
                                       notes)

    ops = pd.concat([ops, pd.DataFrame(new, index=ops.index)], axis=1).set_index("op_id", drop=False)
    totals = _totals(new, gpu_lines, flops, t_ipu, wall_s, ipu_run_cost, spills, n_ipus, run_chips)
    notes.append("GPU 'bound' = roofline bound (max of FLOPs/peak and min_bytes/HBM): an upper limit, not a "
                 "measurement; GPU 'est.' = estimate from measured achievable fractions and launch overhead "
                 "(analysis/gpu_estimate.py)")
    return RooflineAnalysis(ipu=ipu, gpus=gpu_lines, ops=ops, totals=totals, notes=notes, capacity_bytes=capacity)
