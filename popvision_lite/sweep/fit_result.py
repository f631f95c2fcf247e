"""What the fit advisor answers (sweep/fit.py searches): each candidate tried (:class:`Trial`), the fitting
options it offers (:class:`Option`) and the whole answer (:class:`FitAdvice`: ``.best``, ``.options``,
``.text()``, ``.to_frame()``), with the run config of an option as TOML (:func:`config_toml`)."""

from __future__ import annotations

import contextlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from popvision_lite.emulator.run_config_file import config_toml
from popvision_lite.sweep import results as res
from popvision_lite.sweep.fit_space import (
    FIT_ROLES,
    Candidate,
    Space,
    saver_text,
)
from popvision_lite.units import format_seconds, format_usd

BEST_TOML = "best.toml"
REPORT = "fit.txt"
SUMMARY = "fit.json"
# statuses of a trial
FITS, OVER, FAILED, INVALID, BOUND, DOMINATED, HOST, IMPLIED = ("fits", "over", "failed", "invalid", "bound",
                                                                 "dominated", "host", "implied")


@dataclass
class Trial:
    """One candidate the search considered: emulated (fits / over / failed) or settled before (invalid: the run's
    own checks; bound: the lower bound; dominated: no leaner than one that did not fit; implied: leaner than one
    that fits, so it fits and is not faster; host: too large to emulate on this machine)."""

    cand: Candidate
    phase: str
    status: str
    reason: str = ""
    row: dict | None = None
    binding: object = None          # analysis.fit_constraint.BindingConstraint of an emulated candidate that is over
    point: int = -1

    @property
    def emulated(self) -> bool:
        return self.status in (FITS, OVER, FAILED)

    @property
    def fits(self) -> bool:
        return self.status == FITS

    def metric(self, name: str) -> float:
        v = (self.row or {}).get(name)
        try:
            return float(v)
        except (TypeError, ValueError):
            return math.nan

    @property
    def samples_per_second(self) -> float:
        return self.metric("samples_per_second")

    @property
    def cost_per_million(self) -> float:
        return self.metric("cost_per_1m_samples_usd")

    @property
    def chips(self) -> int:
        return self.cand.place.chips

    def sort_key(self) -> tuple:
        """Cheapest first: USD per 1 M samples, else chip-seconds per sample (no price known)."""
        c = self.cost_per_million
        sps = self.samples_per_second
        chip_s = self.chips / sps if sps > 0 else math.inf
        return (c if math.isfinite(c) else math.inf, chip_s, self.chips)


@dataclass
class Option:
    """A fitting configuration: its run config, throughput, time per sample and cost, and where its emulation is."""

    text: str                       # the placement and settings in words
    placement: str                  # the placement alone ("1 replica x 2 stages x tensor parallel 8 = 16 IPUs, ...")
    settings: str                   # the memory settings alone
    run_config: dict                # model, device, timing_only and the model arguments (a run-config TOML's keys)
    chips: int
    samples_per_second: float
    seconds_per_sample: float
    cost_per_million_usd: float
    cost_note: str
    peak_tile_memory_pct: float
    profile: str                    # the emulation's profile (absolute path)
    changes: dict                   # the model arguments that differ from the base run

    def toml(self) -> str:
        return config_toml(self.run_config)


@dataclass(repr=False)
class FitAdvice:
    model: str
    device: str
    max_ipus: int
    global_batch: int
    base_fits: bool | None
    base_binding: object            # BindingConstraint of the run it starts from (None when unknown)
    best: Option | None
    options: list[Option]
    trials: list[Trial]
    leanest: list[tuple[str, object]] = field(default_factory=list)   # (candidate text, BindingConstraint)
    ruled_out: list[tuple[str, str]] = field(default_factory=list)    # (candidate text, the lower bound's reason)
    folder: str = ""
    emulations: int = 0
    resumed: int = 0                # emulations found in the folder from an earlier search (not run again)
    wall_seconds: float = 0.0
    cpu_seconds: float = 0.0        # the points' CPU seconds (workers), as their rows report them
    cancelled: bool = False
    budget_reached: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def fits(self) -> bool:
        return self.best is not None

    def headline(self) -> str:
        if self.base_fits:
            return f"{self.model} already fits as given."
        if self.best is not None:
            b = self.best
            return (f"Fits on {b.chips} IPU{'s' if b.chips > 1 else ''}: {b.text}; {b.samples_per_second:,.4g} "
                    f"samples/s, {format_seconds(b.seconds_per_sample)} per sample, "
                    f"{format_usd(b.cost_per_million_usd)} per 1 M samples.")
        if self.cancelled:
            return "Cancelled before a configuration that fits was found."
        why = "within the search budget" if self.budget_reached else f"up to {self.max_ipus} IPUs"
        return f"Nothing fits {why} (global batch {self.global_batch})."

    def text(self) -> str:
        lines = [self.headline()]
        if self.base_binding is not None and not self.base_fits:
            lines += ["", "As given: " + self.base_binding.headline()]
        base = next((t for t in self.trials if t.phase == "as given"), None)
        if self.base_binding is None and base is not None and not base.emulated:
            lines += ["", f"As given: not emulated here ({base.reason})"]
        if self.best is not None:
            lines += ["", "Cheapest configuration that fits (emulated):", _option_text(self.best, 1)]
            if self.options[1:]:
                lines += ["", "Next options:"] + [_option_text(o, i + 2) for i, o in enumerate(self.options[1:])]
            lines += ["", f"Run it: popvision-lite emulate --config {Path(self.folder) / BEST_TOML} -o best.pvl"
                      if self.folder else "Run it with its run config (Option.toml())."]
        else:
            if self.leanest:
                lines += ["", "Why not: the placements emulated that came closest, and what binds them:"]
                for text, b in self.leanest:
                    lines += [f"* {text}:", "  " + b.headline()]
            if self.ruled_out:
                lines += ["", "Ruled out before emulation by the lower bound (the largest of each tensor-parallel "
                          "degree):"]
                lines += [f"* {text}: {why}" for text, why in self.ruled_out]
        n = {s: sum(1 for t in self.trials if t.status == s) for s in (FITS, OVER, FAILED, INVALID, BOUND, DOMINATED,
                                                                        HOST, IMPLIED)}
        lines += ["", f"Searched {len(self.trials)} candidates: {self.emulations} emulated ({n[FITS]} fit, {n[OVER]} "
                  f"over, {n[FAILED]} failed); not emulated: {n[BOUND]} ruled out by the lower bound, {n[DOMINATED]} "
                  f"by a leaner one that did not fit, {n[IMPLIED]} leaner than one that fits, {n[INVALID]} invalid, "
                  f"{n[HOST]} too large to emulate here"
                  + (f"; {self.resumed} emulations resumed from the folder" if self.resumed else "") + "; "
                  f"{self.cpu_seconds:,.0f} s CPU in the points, {self.wall_seconds:,.0f} s wall."]
        lines += [f"Note: {x}" for x in self.notes]
        return "\n".join(lines)

    def to_frame(self) -> pd.DataFrame:
        """Every candidate considered: placement, settings, phase, status, reason and the emulated numbers."""
        rows = []
        for t in self.trials:
            p = t.cand.place
            rows.append({"point": t.point, "phase": t.phase, "status": t.status, "chips": p.chips, "tensor_parallel": p.tp,
                         "tensor_parallel_2": p.tp2,
                         "pipeline_stages": p.stages, "layer_split": list(p.split) if p.split else None,
                         "replicas": p.replicas, "micro_batch": p.batch, **dict(t.cand.savers),
                         "samples_per_second": t.samples_per_second, "cost_per_1m_samples_usd": t.cost_per_million,
                         "peak_tile_memory_pct": t.metric("peak_tile_memory_pct"), "reason": t.reason})
        return pd.DataFrame(rows)

    def numbers(self) -> dict:
        def opt(o: Option | None):
            return None if o is None else {k: getattr(o, k) for k in (
                "text", "placement", "settings", "run_config", "chips", "samples_per_second", "seconds_per_sample", "cost_per_million_usd",
                "cost_note", "peak_tile_memory_pct", "profile", "changes")}

        return {"model": self.model, "device": self.device, "max_ipus": self.max_ipus,
                "global_batch": self.global_batch, "base_fits": self.base_fits, "fits": self.fits,
                "best": opt(self.best), "options": [opt(o) for o in self.options],
                "base_binding": self.base_binding.numbers() if self.base_binding is not None else None,
                "leanest": [{"candidate": t, "binding": b.numbers(), "headline": b.headline()} for t, b in self.leanest],
                "ruled_out": [{"candidate": t, "reason": r} for t, r in self.ruled_out],
                "emulations": self.emulations, "candidates": len(self.trials), "wall_seconds": self.wall_seconds,
                "cpu_seconds": self.cpu_seconds, "cancelled": self.cancelled, "budget_reached": self.budget_reached,
                "notes": list(self.notes), "folder": self.folder}

    def __repr__(self) -> str:
        return f"<FitAdvice: {self.headline()}>"

    def _repr_html_(self) -> str:
        import html

        return "<pre>" + html.escape(self.text()) + "</pre>"


def _option_text(o: Option, i: int) -> str:
    return (f"{i}. {o.text}\n   {o.samples_per_second:,.4g} samples/s, {format_seconds(o.seconds_per_sample)} per "
            f"sample, {format_usd(o.cost_per_million_usd)} per 1 M samples; fullest tile "
            f"{o.peak_tile_memory_pct:.0f}%; changes: "
            + (", ".join(f"{k} = {_value_text(v)}" for k, v in o.changes.items()) or "none"))


def _value_text(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_value_text(x) for x in v) + "]"
    return f"{v:g}" if isinstance(v, float) else str(v)


def profile_path(out: Path, t: Trial) -> str:
    rel = str((t.row or {}).get("profile", ""))
    return str((out / rel).resolve()) if rel else ""


def option_of(space: Space, t: Trial, out: Path) -> Option:
    """The fitting candidate ``t`` as an option of the answer: its run config, what it changes, its cost."""
    args = space.args(t.cand)
    changes = {k: v for k, v in args.items() if FIT_ROLES.get(k) is not None and FIT_ROLES[k].kind != "kept"
               and differs(getattr(space.cfg0, k, None), v)}
    if t.cand.place.stages == space.cfg0.stages and not t.cand.place.split:
        changes.pop("pipeline_stages", None)  # the stages the run had (0 in its config: one per IPU)
    rc = {"model": space.base.model, "device": space.base.device, "timing_only": True, **dict(sorted(args.items()))}
    sps = t.samples_per_second
    return Option(text=t.cand.text(), placement=t.cand.place.text(), settings=saver_text(dict(t.cand.savers)),
                  run_config=rc, chips=t.chips, samples_per_second=sps,
                  seconds_per_sample=1.0 / sps if sps > 0 else math.inf, cost_per_million_usd=t.cost_per_million,
                  cost_note=str((t.row or {}).get("cost_note", "")), peak_tile_memory_pct=t.metric("peak_tile_memory_pct"),
                  profile=profile_path(out, t), changes=changes)


def differs(a, b) -> bool:
    if isinstance(a, list | tuple) or isinstance(b, list | tuple):
        return list(a or []) != list(b or [])
    return a != b


def leanest(trials: list[Trial]) -> list[tuple[str, object]]:
    """The placements emulated that came closest to fitting (the least over), with what binds them: at most three
    distinct placements."""
    over = [t for t in trials if t.status == OVER and t.binding is not None]
    over.sort(key=lambda t: (t.metric("peak_tile_memory_pct"), -t.chips))
    out, seen = [], set()
    for t in over:
        if t.cand.place in seen:
            continue
        seen.add(t.cand.place)
        out.append((t.cand.text(), t.binding))
        if len(out) == 3:
            break
    return out


def ruled_out(trials: list[Trial]) -> list[tuple[str, str]]:
    """The largest placements the lower bound ruled out, one per tensor-parallel degree (at most three, the most
    chips first): what no emulation was needed to refuse."""
    best: dict[tuple[int, int], Trial] = {}
    for t in trials:
        k = (t.cand.place.tp, t.cand.place.tp2)
        if t.status == BOUND and (k not in best or t.chips > best[k].chips):
            best[k] = t
    top = sorted(best.values(), key=lambda t: -t.chips)[:3]
    return [(t.cand.text(), t.reason) for t in top]


def write_folder(adv: FitAdvice, trials: list[Trial], grid_names: list[str], out: Path) -> None:
    """The search folder: every emulated row as one sweep table (sweep.csv), the report, its numbers and the
    best configuration's run config (best.toml), each written atomically."""
    from popvision_lite.atomic_io import atomic_text

    rows = []
    for t in trials:
        if t.row is not None:
            rows.append(dict(t.row) | {"point": t.point})
    res.write_results(out, rows, grid_names)
    grid = {}  # the fields the search varied, with the values it tried (the sweep view's axes)
    for name in grid_names:
        vals = []
        for r in rows:
            v = r.get(name)
            if v is not None and v not in vals:
                vals.append(v)
        if len(vals) > 1:
            grid[name] = vals
    res.write_meta(out, {"fit": {"model": adv.model, "max_ipus": adv.max_ipus, "global_batch": adv.global_batch},
                         "grid": grid, "points": len(rows)})
    with atomic_text(out / REPORT) as fh:
        fh.write(adv.text() + "\n")
    with atomic_text(out / SUMMARY) as fh:
        json.dump(adv.numbers(), fh, indent=1, default=_json_default)
    best = out / BEST_TOML
    if adv.best is not None:
        with atomic_text(best) as fh:
            fh.write(f"# popvision-lite fit: the cheapest configuration that fits ({adv.best.text})\n"
                     + adv.best.toml())
    else:
        with contextlib.suppress(OSError):
            best.unlink()


def _json_default(o):
    if hasattr(o, "item"):
        return o.item()
    if isinstance(o, float) and not math.isfinite(o):
        return None
    return str(o)
