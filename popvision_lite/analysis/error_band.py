"""The error band of a prediction: how far the measured runs of its family were from what was predicted for them
(pure; reads one committed table).

ONE definition for every surface (``emulate``, ``info``, ``verdict``, ``validate``, the Summary and the verdict
panel, reports, ``pvl.verdict``): :func:`band` looks up the run's *family* in ``resources/validation/residuals.csv``,
which ``popvision-lite validate`` regenerates (``mlperf_validation.residual_rows``), and returns the spread of
``measured / predicted - 1`` over that family's rows, each predicted **leave-one-out**: with every calibrated
constant fitted without the row's own pair (a row no constant was fitted on is its plain prediction).  A
constant that rests on one pair therefore brings its whole leave-one-out error into the band.

A family is (side, model, framework, scale): side ``ipu`` or ``gpu``; model ``bert``, ``resnet``, ``gpt``;
framework the IPU run's host framework (popart, tensorflow, ...) or the GPU software the measured run used;
scale ``pod16`` (up to 16 chips), ``pod64`` (up to 64), ``pod128+`` (past one IPU host / one 64-chip domain) on
the IPU, ``node`` (up to 8 GPUs) or ``cluster`` on the GPU.  The narrowest family with at least
:data:`MIN_ROWS` rows is used (exact, then without the scale, then without the framework); a run outside every
validated family says so and has no band.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from popvision_lite import input_files
from popvision_lite.errors import ConfigError

TABLE_NAME = "residuals.csv"
COLUMNS = ("id", "side", "model", "framework", "scale", "device", "role", "measured", "predicted", "ratio",
           "predicted_loo", "ratio_loo", "settings")
MIN_ROWS = 3
SIDES = ("ipu", "gpu")


def scale_of(side: str, chips: int) -> str:
    """The scale bucket of a run of ``chips`` chips."""
    chips = int(chips or 1)
    if side == "gpu":
        return "node" if chips <= 8 else "cluster"
    return "pod16" if chips <= 16 else "pod64" if chips <= 64 else "pod128+"


def model_family(model: str) -> str:
    """bert / resnet / gpt / the model name itself for anything else."""
    m = str(model or "").lower()
    for fam in ("bert", "resnet", "gpt"):
        if m.startswith(fam):
            return fam
    return m or "?"


@dataclass(frozen=True)
class Band:
    """The error band of one prediction: the measured value lay between ``low`` and ``high`` (fractions:
    -0.09 / +0.11) of the prediction for the family's ``n`` measured runs."""

    low: float
    high: float
    n: int
    family: str                 # "BERT on IPU, PopART" (what matched)
    outside: bool = False       # no validated family: no band
    reason: str = ""            # why there is no band, or how the family was widened

    def text(self) -> str:
        """'-9 % / +11 % from 19 measured runs (BERT on IPU, PopART)', or the reason there is none."""
        if self.outside or self.n == 0:
            return self.reason or "no error band: outside every validated family"
        runs = f"{self.n} measured run{'s' if self.n != 1 else ''}"
        return f"{_pct(self.low)} / {_pct(self.high)} from {runs} ({self.family})" + \
            (f"; {self.reason}" if self.reason else "")

    def range_of(self, value: float) -> tuple[float, float]:
        """(lowest, highest) the measured value would be, given the prediction ``value``."""
        if self.outside or self.n == 0:
            return (math.nan, math.nan)
        return value * (1 + self.low), value * (1 + self.high)

    def to_dict(self) -> dict:
        return {"low": None if self.outside else self.low, "high": None if self.outside else self.high,
                "n": self.n, "family": self.family, "outside": self.outside, "text": self.text()}


def _pct(x: float) -> str:
    return f"{'+' if x >= 0 else '-'}{abs(100 * x):.0f} %"


def table_path() -> Path:
    from popvision_lite.resources_path import resource_dir

    return resource_dir("validation", TABLE_NAME)


@lru_cache(maxsize=4)
def _load(path: str) -> tuple[dict, ...]:
    p = Path(path)
    if not p.exists():
        return ()
    text = input_files.read_text(p, "csv", "residual table")
    rows = list(csv.DictReader(io.StringIO(text, newline="")))
    out = []
    for i, r in enumerate(rows):
        missing = [c for c in COLUMNS if c not in r]
        if missing:
            raise ConfigError(f"{p}: row {i + 1}: missing column(s) {', '.join(missing)}")
        try:
            meas, pred_loo = float(r["measured"]), float(r["predicted_loo"])
        except ValueError:
            raise ConfigError(f"{p}: row {i + 1} ({r['id']}): measured / predicted_loo are not numbers") from None
        if not (meas > 0 and pred_loo > 0 and math.isfinite(meas) and math.isfinite(pred_loo)):
            continue  # a row that failed to predict carries no residual
        out.append(dict(r, err=meas / pred_loo - 1.0))
    return tuple(out)


def rows(path: Path | None = None) -> list[dict]:
    """The residual rows (``err`` = measured / leave-one-out prediction - 1 added)."""
    return list(_load(str(path or table_path())))


def _label(side: str, model: str, framework: str | None, scale: str | None) -> str:
    m = {"bert": "BERT", "resnet": "ResNet", "gpt": "GPT"}.get(model, model)
    parts = [f"{m} on {side.upper()}"]
    if framework:
        parts.append(framework)
    if scale:
        parts.append(scale)
    return ", ".join(parts)


def band(side: str, model: str, framework: str | None = None, chips: int = 1, path: Path | None = None) -> Band:
    """The band of a ``side`` ("ipu" / "gpu") prediction of ``model`` run by ``framework`` on ``chips`` chips."""
    if side not in SIDES:
        raise ConfigError(f"error band: side {side!r} is not one of {', '.join(SIDES)}")
    fam = model_family(model)
    fw = (framework or "").lower() or None
    sc = scale_of(side, chips)
    table = rows(path)
    if not table:
        return Band(0.0, 0.0, 0, "", outside=True,
                    reason="no error band: the residual table is missing (run `popvision-lite validate`)")
    tried = ((fw, sc), (fw, None), (None, None)) if fw else ((None, sc), (None, None))
    for f, s in tried:
        sel = [r for r in table if r["side"] == side and r["model"] == fam and (f is None or r["framework"] == f)
               and (s is None or r["scale"] == s)]
        if len(sel) >= MIN_ROWS:
            errs = [r["err"] for r in sel]
            widened = []
            if fw and f is None:
                widened.append(f"no {MIN_ROWS} measured {fw} runs: every framework's")
            if s is None:
                widened.append(f"all scales (fewer than {MIN_ROWS} at {sc})")
            return Band(min(errs), max(errs), len(sel), _label(side, fam, f, s),
                        reason="; ".join(widened))
    any_model = [r for r in table if r["side"] == side and r["model"] == fam]
    if any_model:
        errs = [r["err"] for r in any_model]
        w = max(abs(min(errs)), abs(max(errs)))
        return Band(-w, w, len(any_model), _label(side, fam, None, None),
                    reason=f"only {len(any_model)} measured run(s): the band is their largest error, both ways")
    known = sorted({r["model"] for r in table if r["side"] == side})
    return Band(0.0, 0.0, 0, "", outside=True,
                reason=f"outside every validated family: no measured {fam} run on the {side.upper()} "
                       f"(validated: {', '.join(known) or 'none'}); no error band")


def ipu_band(model: str, host_framework: str | None, ipus: int, path: Path | None = None) -> Band:
    """The band of an emulated IPU run's throughput: its family by model, the host framework its step was costed
    with (the schedule's) and its IPU count.  A run without a host step (framework "none" or "unknown") is
    outside every validated family: the measured runs' predictions all include one."""
    fw = str(host_framework or "none").lower()
    if fw in ("none", "unknown"):
        what = ("is the IPUs' alone (host framework none)" if fw == "none"
                else "has no host step (host framework unknown)")
        return Band(0.0, 0.0, 0, "", outside=True,
                    reason=f"no error band: this throughput {what}, and every validated prediction includes its "
                           "framework's host step")
    return band("ipu", model, fw, ipus, path)


def run_band(record, ipus: int, path: Path | None = None) -> Band:
    """The band of a profile's IPU throughput (``record``: the profile's checked run record,
    ``profile.record`` / ``record_of(profile)``): its model, the host framework its schedule was costed with (else
    its config's), its IPUs.  ONE reading of the run for every surface (info, Summary, reports, verdict)."""
    sched, cfg = record.schedule, record.config
    model = cfg.model or record.model or ""
    fw = sched.host_framework if "host_framework" in sched else cfg.host_framework
    return ipu_band(model, fw or None, ipus, path)


def families(table: list[dict]) -> list[tuple[str, Band]]:
    """Every family the table holds a row of, narrowest first, with its band as :func:`band` would give it."""
    seen = []
    for r in table:
        for key in ((r["side"], r["model"], r["framework"], r["scale"]), (r["side"], r["model"], r["framework"], None),
                    (r["side"], r["model"], None, None)):
            if key not in seen:
                seen.append(key)
    out = []
    for side, model, fw, scale in seen:
        sel = [r for r in table if r["side"] == side and r["model"] == model and (fw is None or r["framework"] == fw)
               and (scale is None or r["scale"] == scale)]
        errs = [r["err"] for r in sel]
        out.append((_label(side, model, fw, scale), Band(min(errs), max(errs), len(sel), _label(side, model, fw, scale))))
    return out


def format_families(table: list[dict]) -> str:
    """Markdown: each family's band and how many measured runs it rests on (the lookup needs MIN_ROWS)."""
    lines = ["| family | measured runs | band (measured / leave-one-out prediction - 1) | used by a lookup |",
             "|---|---|---|---|"]
    for label, b in families(table):
        lines.append(f"| {label} | {b.n} | {_pct(b.low)} / {_pct(b.high)} | "
                     f"{'yes' if b.n >= MIN_ROWS else f'no (fewer than {MIN_ROWS})'} |")
    return "\n".join(lines)


def rows_from_dicts(dicts: list[dict]) -> list[dict]:
    """Residual rows as :func:`rows` reads them (``err`` added), from the dicts a validate run made."""
    out = []
    for r in dicts:
        meas, pred = float(r["measured"]), float(r["predicted_loo"])
        if meas > 0 and pred > 0:
            out.append(dict(r, err=meas / pred - 1.0))
    return out


def write_table(dicts: list[dict], path: Path | None = None) -> Path:
    """Write the residual table (temp file + rename) and forget the cached one."""
    from popvision_lite.atomic_io import atomic_text

    p = Path(path or table_path())
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    w.writeheader()
    for r in dicts:
        w.writerow({k: r.get(k, "") for k in COLUMNS})
    with atomic_text(p, newline="") as fh:
        fh.write(buf.getvalue())
    clear_cache()
    return p


def clear_cache() -> None:
    """Forget the loaded table (after ``validate`` rewrites it)."""
    _load.cache_clear()
