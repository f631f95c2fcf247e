"""IPU or GPU? A verdict per profile: the emulated IPU run next to an estimated GPU run (pure, no Qt).

For a profile, side by side: samples/s, time for N samples, USD per 1 M samples (price per chip-hour x chips x
wall time), chips used, fits or not, what bounds each side; plus the same-chip-count and same-dollars views.

* **IPU side**: ``run["samples_per_second"]`` and ``run["schedule"]`` when the profile has them (multi-IPU
  execution writes them); otherwise samples per step = the run config's batch (x replicas) over the whole
  emulated time, labelled as such.  Cost = price x ALL chips x wall time (the chips are rented while any of them
  works; summing op times x chips double-counts pipelined stages).
* **GPU side**: :func:`gpu_estimate.estimate_training` on the profile's op list, taken as one forward + backward
  pass of one micro-batch of one replica; the GPUs run the same global batch per step, data parallel.
  Activations for the memory fit: the IPU run's not-always-live bytes at the same micro-batch.
* The roofline **bound** of the same GPU step is reported on its own line, never as the verdict.
* Prices: from ``resources/devices`` (``[price]``); a chip without one says so and its cost is n/a (an IPU
  without a price is priced at the first IPU spec that has one, and the note says which).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

from popvision_lite import devices
from popvision_lite.analysis import error_band as eb
from popvision_lite.analysis import gpu_estimate as ge
from popvision_lite.analysis import gpu_parallel as gp
from popvision_lite.analysis import model_pass as wl
from popvision_lite.errors import ConfigError
from popvision_lite.profile.run_record import ConfigRecord, record_of
from popvision_lite.profile.schema import stored_table
from popvision_lite.units import format_number, format_seconds, format_usd

DEFAULT_GPU = "a100-80gb"
DEFAULT_SAMPLES = 1_000_000
PRICE_DATE_NOTE = devices.PRICE_DATE_NOTE


@dataclass
class Side:
    label: str
    kind: str                      # "ipu" | "gpu"
    chips: int
    samples_per_second: float
    basis: str                     # how samples/s was obtained
    fits: bool
    bound_by: str
    usd_per_chip_hour: float       # nan when unknown
    price_source: str

    @property
    def usd_per_hour(self) -> float:
        return self.usd_per_chip_hour * self.chips

    def seconds_for(self, samples: float) -> float:
        return samples / self.samples_per_second if self.samples_per_second > 0 else math.inf

    def usd_per_million(self) -> float:
        return self.usd_per_hour * self.seconds_for(1e6) / 3600.0

    def samples_per_dollar(self) -> float:
        c = self.usd_per_million()
        return 1e6 / c if c and math.isfinite(c) else math.nan


@dataclass(repr=False)
class Verdict:
    model: str
    samples: int
    ipu: Side
    gpu: Side
    gpu_same_chips: Side           # the GPU estimate with as many GPUs as the IPU run has IPUs
    gpu_bound_samples_per_second: float   # roofline bound of the GPU step (upper bound, not an estimate)
    gpu_estimate: ge.TrainingEstimate
    notes: list = field(default_factory=list)
    missing_prices: list = field(default_factory=list)   # names of the devices with no price at all
    # (device name, the device whose price it was given, USD per chip-hour) of each device priced at another's rate
    borrowed_prices: list = field(default_factory=list)
    ipu_micro_batch: float = math.nan     # samples of one replica's micro-batch
    ipu_count_text: str = ""              # "4 replicas x 4 stages = 16 IPUs" (run_totals.ipu_count_text)
    ipu_fit_advice: str = ""              # when the IPU run does not fit: what it would take to fit
    gpu_precision: str = ""               # the precision the GPU side trains in
    ipu_band: eb.Band | None = None       # error band of the IPU prediction (analysis/error_band.py)
    gpu_band: eb.Band | None = None       # error band of the GPU estimate

    def band_text(self, side: str) -> str:
        b = self.ipu_band if side == "ipu" else self.gpu_band
        return b.text() if b is not None else "not computed"

    def speedup_range(self) -> tuple[float, float]:
        """(lowest, highest) GPU / IPU ratio the two bands allow (NaN where a side has no band)."""
        r = self.speedup
        i, g = self.ipu_band, self.gpu_band
        if not math.isfinite(r) or i is None or g is None or i.outside or g.outside:
            return (math.nan, math.nan)
        return r * (1 + g.low) / (1 + i.high), r * (1 + g.high) / (1 + i.low)

    @property
    def speedup(self) -> float:
        """GPU samples/s over IPU samples/s (> 1: the GPU side is faster); NaN when the IPU run does not fit in
        tile memory (it cannot execute, so it has no speed to compare)."""
        if not self.ipu.fits:
            return math.nan
        return self.gpu.samples_per_second / self.ipu.samples_per_second

    def headline(self) -> str:
        if not self.ipu.fits:
            return (f"{self.ipu.label} does NOT fit in tile memory: no speed or cost claim. "
                    + (self.ipu_fit_advice or "It needs less memory per tile to run at all."))
        r = self.speedup
        faster = (f"{self.gpu.label} {r:.2f}x faster than {self.ipu.label}" if r >= 1
                  else f"{self.ipu.label} {1 / r:.2f}x faster than {self.gpu.label}")
        ci, cg = self.ipu.usd_per_million(), self.gpu.usd_per_million()
        if math.isfinite(ci) and math.isfinite(cg) and min(ci, cg) > 0:
            cheaper = ("GPU" if cg < ci else "IPU") + f" {max(ci, cg) / min(ci, cg):.2f}x cheaper per sample"
        elif math.isfinite(ci) and math.isfinite(cg):  # a side costing nothing (a price of 0): no ratio to state
            cheaper = "cost ratio n/a (a side costs " + format_usd(min(ci, cg)) + " per 1 M samples)"
        else:
            cheaper = "cost n/a (no price for " + " or ".join(self.missing_prices) + ")"
        fit = "".join(f"; {side.label} does NOT fit in memory" for side in (self.ipu, self.gpu) if not side.fits)
        lo, hi = self.speedup_range()
        rng = (f" (the error bands put GPU / IPU at {lo:.2f}x .. {hi:.2f}x)" if math.isfinite(lo) else
               " (no error band for " + " or ".join(s for s, b in (("the IPU", self.ipu_band), ("the GPU", self.gpu_band))
                                                     if b is None or b.outside) + ")"
               if (self.ipu_band is not None or self.gpu_band is not None) else "")
        return f"{faster}{rng}; {cheaper}{fit}"

    def price_notes(self) -> list[str]:
        """How each side was priced, in plain words, where it was not at its own published price: a device
        costed at another device's rate (the IPU Mk2 has no price of its own), and a device with no price."""
        out = [f"{name} has no published price of its own: costed at the {other}'s {format_usd(usd)} per chip-hour."
               for name, other, usd in self.borrowed_prices]
        out += [f"{name} has no published price: no cost is given for it." for name in self.missing_prices]
        return out

    def rows(self) -> list[tuple[str, str, str]]:
        """(metric, IPU, GPU) rows, formatted, for tables and text."""
        i, g, n = self.ipu, self.gpu, self.samples
        if not i.fits:  # a run that cannot execute has no throughput, time or cost
            na = "n/a (does not fit)"
            return [
                ("system", i.label, g.label),
                ("chips", self.ipu_count_text or f"{i.chips}", f"{g.chips}"),
                ("samples/s", na, format_number(g.samples_per_second)),
                ("error band", "n/a", self.band_text("gpu")),
                ("basis", i.basis, g.basis),
                (f"time for {n:,} samples", na, format_seconds(g.seconds_for(n))),
                ("USD per chip-hour", format_usd(i.usd_per_chip_hour), format_usd(g.usd_per_chip_hour)),
                ("USD per 1 M samples", na, format_usd(g.usd_per_million())),
                ("placement", self.ipu_count_text or f"{i.chips} IPUs", self.placement_text()),
                ("precision", "", self.gpu_precision),
                ("fits in memory", "NO (what it takes to fit: above)", _gpu_fit_text(self.gpu_estimate)),
                ("bound by", "memory (does not fit)", g.bound_by),
            ]
        return [
            ("system", i.label, g.label),
            ("chips", self.ipu_count_text or f"{i.chips}", f"{g.chips}"),
            ("samples/s", f"{i.samples_per_second:,.1f}", f"{g.samples_per_second:,.1f}"),
            ("error band", self.band_text("ipu"), self.band_text("gpu")),
            ("basis", i.basis, g.basis),
            (f"time for {n:,} samples", format_seconds(i.seconds_for(n)), format_seconds(g.seconds_for(n))),
            ("USD per chip-hour", format_usd(i.usd_per_chip_hour), format_usd(g.usd_per_chip_hour)),
            ("USD per 1 M samples", format_usd(i.usd_per_million()), format_usd(g.usd_per_million())),
            ("micro-batch (samples per pass)", f"{self.ipu_micro_batch:g}",
             f"{self.gpu_estimate.micro_batch:g} ({self.gpu_estimate.passes_per_step:g} per step)"),
            ("placement", self.ipu_count_text or f"{i.chips} IPUs", self.placement_text()),
            ("precision", "", self.gpu_precision),
            ("fits in memory", "yes" if i.fits else "NO", _gpu_fit_text(self.gpu_estimate)),
            ("bound by", i.bound_by, g.bound_by),
            (f"same chip count ({self.gpu_same_chips.chips})", f"{i.samples_per_second:,.1f} samples/s",
             f"{self.gpu_same_chips.samples_per_second:,.1f} samples/s"),
            ("same dollars: samples per USD", f"{i.samples_per_dollar():,.0f}", f"{g.samples_per_dollar():,.0f}"),
            ("GPU roofline BOUND (not an estimate)", "", f"{self.gpu_bound_samples_per_second:,.1f} samples/s"),
        ]

    def placement_text(self) -> str:
        pl = self.gpu_estimate.placement
        return pl.text() if pl is not None else f"{self.gpu.chips} GPUs, data parallel"

    def text(self) -> str:
        rows = self.rows()
        w0 = max(len(r[0]) for r in rows)
        w1 = max(len(r[1]) for r in rows)
        lines = [f"Verdict for {self.model}: {self.headline()}", ""]
        lines += [f"{a:<{w0}}  {b:<{w1}}  {c}" for a, b, c in rows]
        lines += ["", "Prices:"] + [f"- {n}" for n in self.price_notes()] if self.price_notes() else []
        lines += ["", "Notes:"] + [f"- {n}" for n in self.notes]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<Verdict {self.model}: {self.headline()}>"

    def _repr_html_(self) -> str:
        """The verdict table for notebooks (every text escaped)."""
        import html

        import pandas as pd

        rows = pd.DataFrame(self.rows(), columns=["", "IPU", "GPU"])
        notes = "".join(f"<li>{html.escape(n)}</li>" for n in self.notes)
        return (f"<p><b>Verdict for {html.escape(self.model)}</b>: {html.escape(self.headline())}</p>"
                + rows.to_html(index=False, escape=True) + (f"<ul>{notes}</ul>" if notes else ""))

    def to_dict(self) -> dict:
        out = {"model": self.model, "samples": self.samples, "headline": self.headline(),
               "ipu_fit_advice": self.ipu_fit_advice,
               "gpu_over_ipu": self.speedup, "gpu_bound_samples_per_second": self.gpu_bound_samples_per_second,
               "notes": list(self.notes), "missing_prices": list(self.missing_prices),
               "borrowed_prices": [list(b) for b in self.borrowed_prices], "price_notes": self.price_notes()}
        for key, side in (("ipu", self.ipu), ("gpu", self.gpu), ("gpu_same_chips", self.gpu_same_chips)):
            d = asdict(side)
            d.update(seconds_for_samples=side.seconds_for(self.samples), usd_per_million=side.usd_per_million())
            out[key] = d
        out["ipu_micro_batch"] = self.ipu_micro_batch
        out["ipu_count_text"] = self.ipu_count_text
        out["gpu_micro_batch"] = self.gpu_estimate.micro_batch
        out["gpu_passes_per_step"] = self.gpu_estimate.passes_per_step
        out["gpu_memory"] = dict(self.gpu_estimate.memory)
        out["gpu_time_by_bound_s"] = dict(self.gpu_estimate.time_by_bound)
        pl = self.gpu_estimate.placement
        out["gpu_placement"] = None if pl is None else dict(tp=pl.tp, pp=pl.pp, dp=pl.dp, vp=pl.vp,
                                                           micro_batch=pl.micro_batch, framework=pl.framework,
                                                           text=pl.text())
        out["gpu_comm_s"] = dict(self.gpu_estimate.comm_s)
        out["gpu_bubble_s"] = self.gpu_estimate.bubble_s
        out["gpu_precision"] = self.gpu_precision
        out["ipu_band"] = None if self.ipu_band is None else self.ipu_band.to_dict()
        out["gpu_band"] = None if self.gpu_band is None else self.gpu_band.to_dict()
        lo, hi = self.speedup_range()
        out["gpu_over_ipu_range"] = [lo, hi]
        return out


def _gpu_fit_text(est: ge.TrainingEstimate) -> str:
    m = est.memory
    cap = m.get("capacity_bytes")
    used = f"{m['total_bytes'] / 1e9:,.2f} GB"
    if cap is None:
        return f"{used} (capacity unknown)"
    return ("yes" if m["fits"] else "NO") + f", {used} of {cap / 1e9:,.0f} GB"


def _price(spec, missing: list, borrowed: list) -> tuple[float, str]:
    """(USD per chip-hour, source text) of ``spec`` (:func:`devices.chip_price`); a device with no price is added
    to ``missing`` (its name), one priced at another device's rate to ``borrowed`` (name, other, USD)."""
    p = devices.chip_price(spec)
    if not p.known:
        missing.append(spec.name)
    elif p.borrowed:
        borrowed.append((spec.name, p.borrowed_from, p.usd_per_chip_hour))
    return p.usd_per_chip_hour, p.source


def ipu_throughput(profile) -> tuple[float, float, float, str]:
    """(samples/s, samples per step, samples per op-list pass, basis) of the emulated IPU run."""
    rec = record_of(profile)
    cfg, sched = rec.config, rec.schedule
    rt = _totals(profile)
    per_replica_steps = sched.replicas * sched.grad_accum  # bounded by the record: an exact product
    if rt is not None and rt.samples_per_second > 0 and "schedule" in rec:
        per_step = float(rt.samples_per_step)
        return float(rt.samples_per_second), per_step, per_step / per_replica_steps, \
            f"emulated schedule ({rt.throughput_basis})"
    sps = rec.samples_per_second
    if sps > 0 and "schedule" in rec:
        per_step = sched.samples_per_step
        per_pass = per_step / per_replica_steps if per_step else float(cfg.batch or 1)
        return sps, per_step or per_pass, per_pass, "emulated schedule (run samples_per_second)"
    if sps > 0:
        b = float(cfg.batch or 1)
        return sps, b, b, "emulated (run samples_per_second)"
    if not cfg.batch:
        raise ConfigError(f"{getattr(profile, 'path', 'profile')}: run config has no batch and the run no "
                          "samples_per_second; cannot say how many samples a step processes")
    per_pass = float(cfg.batch) * float(cfg.packing or 1.0)
    per_step = per_pass * float(cfg.replicas or 1) * float(cfg.grad_accum or 1)
    secs = rec.seconds
    if secs <= 0:
        secs = rec.total_cycles / float(profile.target.clock_hz)
    if secs <= 0:
        raise ConfigError(f"{getattr(profile, 'path', 'profile')}: run has no emulated time")
    return per_step / secs, per_step, per_pass, "derived: config batch per step / total emulated time (old profile: " \
        "no samples_per_second recorded)"


def _totals(profile):
    """The run's headline numbers (analysis/run_totals.py), None for a stand-in without steps and phases."""
    from popvision_lite.analysis.run_totals import run_totals

    try:
        return run_totals(profile)
    except (AttributeError, KeyError, TypeError):  # a stand-in with .run/.ops/.target only
        return None


def _ipu_bound_by(profile, summary=None) -> str:
    rt = summary.totals if summary is not None and getattr(summary, "totals", None) is not None \
        else _totals(profile)
    return rt.bottleneck_text if rt is not None else "n/a"


def transformer_activation_bytes_per_sample(cfg: ConfigRecord) -> float | None:
    """Bytes of activations a GPU framework keeps per sequence on one GPU holding the whole layer, score matrices
    included (:func:`gpu_parallel.activation_bytes_per_sample`, Korthikanti et al. 2022); ``cfg``: the run's
    checked config (``run_record.ConfigRecord``)."""
    return gp.activation_bytes_per_sample(cfg)


def _activation_bytes(profile, counts) -> tuple[float, str]:
    """Activation bytes one micro-batch of the model keeps for its backward pass, from the IPU run.

    Whole-graph profile: the not-always-live bytes of the run summed over tiles (its peak per tile).  Pipelined
    profile: each stage program holds ONE layer body, so its peak not-always-live bytes (liveness table, rows on
    that IPU's tiles) is one layer's activations and working set; the model keeps that for every layer on the
    IPU: sum over IPUs of layers x peak."""
    if counts.pipelined:
        ls = stored_table(profile, "liveness_steps")
        sched = record_of(profile).schedule
        # layers per IPU: (attention + FFN blocks) / 2 where the schedule lists blocks per IPU (half-layer
        # placements: layer_split then lists pipeline stages, not IPUs), else whole layers per IPU
        blocks = sched.blocks_per_ipu
        if blocks and all(len(b) == 2 for b in blocks):
            layers = [max((float(a) + float(f)) / 2.0, 1.0) for a, f in blocks]
        else:
            layers = [max(float(k), 1.0) for k in sched.layer_split]
        T = int(profile.target.tiles_per_ipu)
        if ls is not None and len(ls) and layers:
            ipu = ls["max_tile"].to_numpy(np.int64) // max(T, 1)
            tot = ls["total_bytes"].to_numpy(dtype=float)
            acts = 0.0
            for s, k in enumerate(layers):
                sel = tot[ipu == s]
                if len(sel):
                    acts += k * float(sel.max())
            return acts, ("per micro-batch: sum over the pipeline's IPUs of layers x the stage program's peak "
                          "not-always-live bytes (one layer body)")
    mem = getattr(profile, "memory", None)
    if mem is None:
        return 0.0, "none (the profile has no memory table)"
    arr = mem.array() if hasattr(mem, "array") else np.asarray(mem)
    if arr.ndim != 3 or arr.size == 0 or arr.shape[2] < 2:
        return 0.0, "none (the profile has no memory table)"
    note = "the IPU run's not-always-live bytes per micro-batch"
    if counts.recompute_runs.any():
        note += " (with recomputation on the IPU: fewer than a GPU keeps without it)"
    return float(arr[:, :, 1].sum()), note


PRECISIONS = ("fp32", "fp16", "bf16", "fp8")


def verdict(profile, gpu: str = DEFAULT_GPU, gpus: int | None = None, samples: int = DEFAULT_SAMPLES,
            summary=None, gpu_micro_batch: int | None = None, gpu_precision: str | None = None,
            precision: str | None = None, gpu_tp: int | None = None, gpu_pp: int | None = None,
            gpu_vp: int | None = None, band: bool = True) -> Verdict:
    """The verdict for ``profile`` (a Profile or anything with ``.run``, ``.ops``, ``.target``) against
    ``gpus`` x ``gpu`` (default: as many GPUs as the run uses IPUs, all replicas and tensor-parallel groups).
    ``summary``: the profile's :func:`analysis.summary.summarize` result when the caller has it (saves reading the
    steps again).  ``precision`` (``gpu_precision`` is its older name): the precision the GPU trains in,
    fp32 | fp16 | bf16 | fp8 (default the run's); ``"fp8"`` runs its GEMMs at the GPU's FP8 tensor rate
    (Transformer Engine, as NVIDIA's H100 BERT and GPT-3 runs did).  The GPUs get their own placement
    (:func:`gpu_parallel.search`): tensor x pipeline x data parallel for a transformer, data parallel otherwise;
    ``gpu_tp``, ``gpu_pp``, ``gpu_vp`` (interleaving) and ``gpu_micro_batch`` (samples per GPU pass, a whole
    number) state parts of it instead.  ``band``: attach the error band of the GPU estimate's family
    (analysis/error_band.py)."""
    precision = _checked_options(samples, gpu_micro_batch, precision, gpu_precision)
    rec = record_of(profile)
    cfg = rec.config
    rt = _totals(profile)
    n_ipus, chips_basis = wl.chips(profile)
    if rt is not None:
        n_ipus = int(rt.num_ipus)
    n_gpus = int(gpus) if gpus is not None else n_ipus
    if n_gpus < 1:
        raise ConfigError(f"--gpus {n_gpus}: must be at least 1")
    notes: list[str] = []
    missing: list[str] = []
    borrowed: list[tuple] = []
    ipu, per_step, per_pass = _ipu_side(profile, rt, n_ipus, chips_basis, summary, notes, missing, borrowed)

    gm = ge.gpu_model(gpu)
    gprice, gsrc = _price(gm.spec, missing, borrowed)
    notes.append(f"GPU price: {gsrc}")
    opt = _gpu_optimizer(cfg, notes)
    prec = _gpu_precision(cfg, gm, precision, notes)
    mp = wl.model_pass(profile)
    job = _gpu_job(profile, cfg, mp, gm, opt, prec, per_step, per_pass,
                   dict(tp=gpu_tp, pp=gpu_pp, vp=gpu_vp, micro_batch=gpu_micro_batch))
    e, e_same = _estimates(job, n_gpus, n_ipus, per_pass, gpu_micro_batch, notes)
    runs = e.ops["runs"].to_numpy(dtype=float) if "runs" in e.ops.columns else np.ones(len(e.ops))
    launches = int(round(float((e.ops["kernels"].to_numpy(dtype=float) * runs).sum()))) \
        if "kernels" in e.ops.columns else int(runs.sum())
    pl = e.placement
    gbasis = (f"estimated: {launches} kernels per pass, {e.passes_per_step:g} micro-batches of {e.micro_batch:g} "
              f"samples per step on each of {pl.dp} data-parallel replica(s); placement {pl.text()}")
    gpu_side = Side(label=f"{gm.name} x{n_gpus} (estimated)", kind="gpu", chips=n_gpus,
                    samples_per_second=e.samples_per_second, basis=gbasis, fits=e.fits,
                    bound_by=_gpu_bound_text(e), usd_per_chip_hour=gprice, price_source=gsrc)
    same = Side(label=f"{gm.name} x{n_ipus} (estimated)", kind="gpu", chips=n_ipus,
                samples_per_second=e_same.samples_per_second, basis=gbasis, fits=e_same.fits,
                bound_by=_gpu_bound_text(e_same), usd_per_chip_hour=gprice, price_source=gsrc)
    notes += _gpu_notes(e, gm, prec, mp, job, runs, launches, per_pass)
    advice = "" if ipu.fits else fit_advice(profile)
    v = Verdict(model=rec.model or cfg.model or "?", samples=int(samples), ipu=ipu, gpu=gpu_side,
                gpu_same_chips=same, gpu_bound_samples_per_second=e.bound_samples_per_second, gpu_estimate=e,
                notes=notes, missing_prices=missing, borrowed_prices=borrowed, ipu_micro_batch=per_pass,
                ipu_fit_advice=advice, ipu_count_text=rt.ipu_count_text if rt is not None else "",
                gpu_precision=prec)
    if band:
        _attach_bands(v, profile, cfg, gm, prec)
    return v


def _checked_options(samples, gpu_micro_batch, precision, gpu_precision) -> str | None:
    """The caller's options checked (a ConfigError naming the option); returns the GPU precision asked for."""
    if samples is None or samples <= 0:
        raise ConfigError(f"--samples {samples}: must be a positive number of samples")
    if gpu_micro_batch is not None and not (isinstance(gpu_micro_batch, int | float)
                                            and not isinstance(gpu_micro_batch, bool) and gpu_micro_batch >= 1
                                            and math.isfinite(gpu_micro_batch)
                                            and float(gpu_micro_batch).is_integer()):
        raise ConfigError(f"--gpu-micro-batch {gpu_micro_batch!r}: must be a whole number of samples (1 or more)")
    if precision is not None and gpu_precision is not None and precision != gpu_precision:
        raise ConfigError(f"precision {precision!r} and gpu_precision {gpu_precision!r} disagree: give one")
    return precision if precision is not None else gpu_precision


def _ipu_side(profile, rt, n_ipus: int, chips_basis: str, summary, notes: list, missing: list,
              borrowed: list) -> tuple[Side, float, float]:
    """(the IPU side, samples per step, samples per op-list pass) of the emulated run; adds its notes."""
    ipu_spec = devices.load_bundled_device(profile.target.device)  # an id from a file, never a path
    ipu_sps, per_step, per_pass, basis = ipu_throughput(profile)
    ipu_price, ipu_src = _price(ipu_spec, missing, borrowed)
    notes.append(f"IPU chips: {rt.ipu_count_text if rt is not None else chips_basis}")
    notes.append(f"IPU price: {ipu_src}")
    ipu = Side(label=f"{ipu_spec.name} x{n_ipus} (emulated)", kind="ipu", chips=n_ipus, samples_per_second=ipu_sps,
               basis=basis, fits=record_of(profile).fits, bound_by=_ipu_bound_by(profile, summary),
               usd_per_chip_hour=ipu_price, price_source=ipu_src)
    return ipu, per_step, per_pass


def _gpu_optimizer(cfg: ConfigRecord, notes: list) -> str:
    """The optimizer the GPU side updates with (the run's where the GPU model costs it; adds a note where not)."""
    opt = (cfg.optimizer or "sgd").lower()
    if opt == "lars":
        notes.append("optimizer LARS: its update is costed with momentum SGD's bytes (the trust-ratio norms read "
                     "the weights and gradients once more: not modelled)")
        opt = "momentum"
    if opt not in ge.STATE_BYTES_PER_PARAM:
        notes.append(f"optimizer {opt!r} not modelled on the GPU; SGD assumed")
        opt = "sgd"
    return opt


def _gpu_precision(cfg: ConfigRecord, gm, precision: str | None, notes: list) -> str:
    """The precision the GPU side trains in: ``precision`` when asked (checked against ``gm``), else the run's."""
    prec = cfg.precision
    if precision is not None:
        if precision not in PRECISIONS:
            raise ConfigError(f"GPU precision {precision!r}: choose {', '.join(PRECISIONS)}")
        if precision == "fp8" and gm.fp8_peak is None:
            raise ConfigError(f"GPU precision fp8: {gm.id} has no FP8 rate in its device spec")
        prec = precision
    notes.append(f"GPU precision: {prec}" + (" (as asked)" if precision is not None else " (the IPU run's)"))
    return prec


@dataclass
class _GpuJob:
    """What the GPU side estimates: the lowered kernels of one pass, the step's setting and the stated placement."""

    gm: object
    cfg: ConfigRecord
    ops: object                    # gpu_lowering's kernels
    lowering_notes: list
    setting: gp.Setting
    params: float
    params_source: str
    optimizer: str
    acts_note: str
    stated: dict                   # tp, pp, vp, micro_batch as the caller stated them (None: searched)

    def estimate(self, n: int, mb: int | None = None, stated: bool = True) -> ge.TrainingEstimate:
        if not stated:
            return gp.search(self.ops, self.gm, n, self.cfg, self.setting)[0]
        s = self.stated
        e, _ = gp.search(self.ops, self.gm, n, self.cfg, self.setting, tp=s["tp"], pp=s["pp"], vp=s["vp"],
                         micro_batch=mb or (int(s["micro_batch"]) if s["micro_batch"] else None))
        return e


def _gpu_job(profile, cfg: ConfigRecord, mp, gm, opt: str, prec: str, per_step: float, per_pass: float,
             stated: dict) -> _GpuJob:
    """The GPU side's kernels (``mp`` lowered for ``prec``), parameters and activation bytes per sample."""
    # a 16-bit (or FP8) GPU run's attention is one fused kernel each way (PyTorch's scaled_dot_product_attention
    # dispatches 16-bit attention to FlashAttention): the score matrix stays on chip
    fused = "flash" if prec in wl.FUSED_ATTENTION_PRECISIONS else None
    # a transformer trains on GPUs with Megatron-LM / Transformer Engine, which run its GELU and Q/K/V gradient
    # sums inside the GEMMs (model_pass._fuse_epilogues)
    transformer = (cfg.model or "").lower().startswith(("bert", "gpt"))
    gpu_ops, lowering_notes = wl.gpu_lowering(mp.ops, fused_attention=fused, fused_epilogues=transformer)
    params, psrc = wl.params(profile, mp)
    layers = (cfg.layers or 1) if gp.is_transformer(cfg, gpu_ops) else 1
    per_seq = gp.activation_bytes_per_sample(cfg, scores_kept=fused is None)
    if per_seq is not None:
        def acts(t, sp):
            return gp.activation_bytes_per_sample(cfg, t, sp, scores_kept=fused is None)
        acts_note = (f"{per_seq / 1e6:,.0f} MB per sequence on a GPU holding whole layers, as a GPU framework keeps "
                     "them for the backward pass (Korthikanti et al. 2022: s*b*h*(34 + 5*a*s/h) bytes per layer, "
                     "16-bit, no recomputation; / t with t-way tensor and sequence parallelism"
                     + ("; no score matrices with fused attention" if fused else "") + ")")
    else:
        a_bytes, acts_note = _activation_bytes(profile, mp.counts)
        acts = a_bytes / per_pass if per_pass > 0 else 0.0
    setting = gp.Setting(samples_per_step=per_step, samples_per_pass=per_pass, params=params, optimizer=opt,
                         precision=prec, layers=layers, activation_bytes=acts, training=cfg.training)
    return _GpuJob(gm=gm, cfg=cfg, ops=gpu_ops, lowering_notes=lowering_notes, setting=setting, params=params,
                   params_source=psrc, optimizer=opt, acts_note=acts_note, stated=stated)


def _estimates(job: _GpuJob, n_gpus: int, n_ipus: int, per_pass: float, gpu_micro_batch, notes: list):
    """(the estimate on ``n_gpus`` GPUs, the one on as many GPUs as the run has IPUs); adds their notes."""
    e = job.estimate(n_gpus)
    e_same = e
    if n_gpus != n_ipus:
        try:
            e_same = job.estimate(n_ipus)
        except ConfigError as err:
            # a placement stated for --gpus need not divide the IPU count: the same-chip line searches its own
            e_same = job.estimate(n_ipus, stated=False)
            notes.append(f"same chip count ({n_ipus} GPUs): the stated GPU placement cannot run on them ({err}); "
                         f"that line uses {e_same.placement.text()}")
    if e.micro_batch != per_pass and float(per_pass).is_integer() and gpu_micro_batch is None:
        try:
            at_ipu = job.estimate(n_gpus, int(per_pass))
            notes.append(f"GPU micro-batch {e.micro_batch:g} samples (the fastest placement that fits); at the IPU's "
                         f"micro-batch ({at_ipu.micro_batch:g}) the GPUs would run {at_ipu.samples_per_second:,.1f} "
                         "samples/s")
        except ConfigError:
            pass
    return e, e_same


def _gpu_notes(e: ge.TrainingEstimate, gm, prec: str, mp, job: _GpuJob, runs, launches: int,
               per_pass: float) -> list[str]:
    """The notes on how the GPU side was estimated, in the verdict's order."""
    notes = list(e.notes)
    if prec == "fp8":
        notes.append(ge.fp8_note(gm))
    if gm.assumed:
        notes.append(f"{gm.id}: no published figure in its spec for {', '.join(gm.assumed)}; defaults used (assumed)")
    notes += mp.notes
    notes += job.lowering_notes
    notes.append(f"GPU pass: one forward + backward pass of one micro-batch ({per_pass:g} samples) of the whole "
                 f"model, {launches} kernels (one per op run, fused only as noted); the optimizer ({job.optimizer}) "
                 f"once per step over {job.params / 1e6:,.1f} M parameters ({job.params_source})")
    notes.append(f"activations for the GPU memory fit: {job.acts_note}")
    line = ge.describe_achievable(e.ops[e.ops["op_class"] != "optimizer"],
                                  weights=runs[(e.ops["op_class"] != "optimizer").to_numpy()])
    if line:
        notes.append(line + " (analysis/gpu_estimate.py: GEMM tiles in waves, softmax / LayerNorm passes)")
    notes.append(f"the GPU roofline BOUND ({e.bound_samples_per_second:,.1f} samples/s) is an upper limit that no GPU "
                 "reaches (no launch overhead, 100% of peak); the verdict uses the estimate")
    return notes


def _attach_bands(v: Verdict, profile, cfg: ConfigRecord, gm, prec: str) -> None:
    """Each side's error band (analysis/error_band.py): the IPU prediction's by the run's model, host framework
    and IPU count; the GPU estimate's by the model and GPU count."""
    rec = record_of(profile)
    model = cfg.model or rec.model
    v.ipu_band = eb.run_band(rec, v.ipu.chips)
    v.gpu_band = eb.band("gpu", model, None, v.gpu.chips)


def fit_advice(profile) -> str:
    """What binds a run that does not fit (``fit_constraint.binding_constraint``: the IPU, its tiles over, the
    cause - total bytes or an uneven layout - the category and the tensors; a drawn IPU stands for its replicas and
    its tensor-parallel group, run_totals' one count) and the fit advisor's search that finds what would fit
    (``popvision-lite fit``)."""
    from popvision_lite.analysis.fit_constraint import binding_constraint
    from popvision_lite.analysis.insights import fit_command

    b = binding_constraint(profile)
    drawn = f" (Each drawn IPU stands for {b.drawn}; the run has {b.num_ipus:,} IPUs.)" if b.drawn else ""
    cmd = fit_command(profile)
    return f"{b.headline()}{drawn}" + (f" To find a configuration that fits: {cmd}" if cmd else "")


def _gpu_bound_text(e: ge.TrainingEstimate) -> str:
    tot = sum(e.time_by_bound.values()) or 1.0
    b = e.bound_by
    return f"{'kernel launches' if b == 'launch' else b} ({100 * e.time_by_bound.get(b, 0) / tot:.0f}% of step)"
