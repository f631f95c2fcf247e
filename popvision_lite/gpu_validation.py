"""The GPU estimate against measured MLPerf Training runs (``resources/validation/mlperf_training_gpu.csv``; part of
``popvision-lite validate``).

Each row is predicted the way the verdict predicts a GPU run, from the emulator's own op list of the model:

* the model emulated timing-only once per benchmark (BERT-Large at NVIDIA's unpadded mean length, ResNet-50 at
  the IPU micro-batch, GPT-3-175B as one IPU of a 32-way tensor-parallel group), turned into the whole model's
  kernels of one micro-batch (``analysis.model_pass``, ``analysis.tensor_parallel``);
* lowered as the run's software ran it (``model_pass.gpu_lowering``): apex's fused multi-head attention for
  NVIDIA's BERT (``--pad_fmha`` / ``--unpad_fmha``), fused attention for NeMo's GPT-3, GEMM epilogues for both
  transformers (NVIDIA's BERT ``--fused_gemm_gelu``; Transformer Engine in NeMo), cuDNN's implicit-GEMM
  convolutions and fused batch norm + ReLU for ResNet-50;
* laid out with the run's own placement, micro-batch, global batch and precision (``analysis.gpu_parallel``);
  BERT's measured figure includes its evaluations, so the prediction does too (10,000 sequences forward-only
  every ceil(150,000 / GBS) x GBS trained: mlcommons/training ``language_model/tensorflow/bert/README.md``).

No constant is fitted on any of these rows.
"""

from __future__ import annotations

import csv
import io
import math
import time
from dataclasses import dataclass, field

from popvision_lite import input_files
from popvision_lite.errors import ConfigError

GPU_CSV = "mlperf_training_gpu.csv"
BERT_EVAL_SAMPLES = 10_000          # "The evaluation will be on the 10,000 samples in the evaluation set"
BERT_EVAL_INTERVAL = 150_000        # EVAL_ITER_SAMPLES in NVIDIA's configs
BERT_SEQ = 256                      # 512 / 2.0 sequences per pack: the unpadded mean length (docs/gpu-estimate.md)
BENCHMARKS = ("BERT", "ResNet-50", "GPT-3-175B")
# the GPU software of each benchmark's measured runs, for the error band's families
FRAMEWORK = {"BERT": "pytorch", "ResNet-50": "mxnet", "GPT-3-175B": "nemo"}
MODEL = {"BERT": "bert", "ResNet-50": "resnet", "GPT-3-175B": "gpt"}


@dataclass
class GpuRow:
    """One measured GPU run."""

    id: str
    round: str
    benchmark: str
    gpu: str
    n_gpus: int
    gbs: int
    micro_batch: int
    tp: int
    pp: int
    vp: int
    dp: int
    precision: str
    optimizer: str
    measured: float          # samples/s (sequences, images)
    kind: str                # what the measured figure includes
    system: str = ""


@dataclass
class GpuResult:
    row: GpuRow
    predicted: float | None = None
    placement: str = ""
    fits: bool | None = None
    error: str = ""
    notes: list = field(default_factory=list)
    wall_s: float = 0.0

    @property
    def ratio(self) -> float | None:
        return None if self.predicted is None or not self.row.measured else self.predicted / self.row.measured


def _int(r: dict, k: str, default: int = 1) -> int:
    v = str(r.get(k, "")).strip()
    try:
        return int(float(v)) if v else default
    except ValueError:
        raise ConfigError(f"{GPU_CSV}: row {r.get('id')}: {k} = {v!r} is not a whole number") from None


def load_gpu_rows(path=None) -> list[GpuRow]:
    """The measured GPU rows (``resources/validation/mlperf_training_gpu.csv`` unless ``path``)."""
    from popvision_lite.resources_path import resource_dir

    p = path or resource_dir("validation", GPU_CSV)
    text = input_files.read_text(p, "csv", "GPU validation data")
    out = []
    for r in csv.DictReader(io.StringIO(text, newline="")):
        if r.get("benchmark") not in BENCHMARKS:
            raise ConfigError(f"{p}: row {r.get('id')}: benchmark {r.get('benchmark')!r} is not one of "
                              f"{', '.join(BENCHMARKS)}")
        try:
            measured = float(r["sps_median"])
        except (KeyError, ValueError):
            raise ConfigError(f"{p}: row {r.get('id')}: sps_median is not a number") from None
        out.append(GpuRow(id=r["id"], round=r.get("round", ""), benchmark=r["benchmark"], gpu=r["gpu"],
                          n_gpus=_int(r, "n_accel"), gbs=_int(r, "gbs"), micro_batch=_int(r, "micro_batch"),
                          tp=_int(r, "tensor_parallel"), pp=_int(r, "pipeline_parallel"),
                          vp=_int(r, "virtual_pipeline"), dp=_int(r, "data_parallel"),
                          precision=r.get("precision", "fp16"), optimizer=r.get("optimizer", "adam"),
                          measured=measured, kind=r.get("sps_kind", ""), system=r.get("system", "")))
    return out


@dataclass
class OpList:
    """The whole model's kernels of one micro-batch of a benchmark, lowered as its measured runs ran it."""

    kernels: object          # DataFrame
    samples_per_pass: float
    cfg: dict
    params: float
    scores_kept: bool        # the attention kernel keeps its probabilities for the backward (apex fmha)
    notes: list
    # what every row's placement search of these kernels shares (gpu_parallel.search's memo: the distinct kernels,
    # the per-micro-batch layouts), computed by the first row that needs it
    memo: dict = field(default_factory=dict)


def _emulate(model: str, **cfg):
    """The profile of ``model``'s timing-only run as the op list reads it (ops, programs, run, target): from the
    build alone where that gives every column the op list reads (``emulated.op_profile``: ResNet-50's whole graph,
    BERT's and GPT-3's stage programs composed without their compile), else the emulated run's."""
    from popvision_lite.emulator.models.config import make_config
    from popvision_lite.emulator.models.emulated import op_profile, release_graphs, run_model

    try:
        c = make_config(model, **cfg)
        built = op_profile(c, "ipu-mk2")
        if built is not None:
            return built
        return run_model(c, "ipu-mk2", timing_only=True).profile_data
    finally:
        release_graphs()


class _Data:
    """ProfileData as the analysis reads a profile (ops, target, run, programs)."""

    def __init__(self, d):
        self.ops, self.target, self.run, self.programs = d.ops, d.target, dict(d.run), d.programs


def op_list(benchmark: str, emulate=_emulate) -> OpList:
    """Emulate ``benchmark``'s model and lower its pass as the measured runs ran it."""
    from popvision_lite.analysis import model_pass as wl
    from popvision_lite.profile.run_record import record_of

    if benchmark == "BERT":
        data = _Data(emulate("bert-large", batch=8, seq=BERT_SEQ, vocab=30522, mask_tokens=int(0.15 * BERT_SEQ)))
        attention, epilogues, scores = "fmha", True, True
    elif benchmark == "ResNet-50":
        data = _Data(emulate("resnet50", batch=20))
        attention, epilogues, scores = None, False, False
    elif benchmark == "GPT-3-175B":
        data = _Data(emulate("gpt3-175b", batch=1, tensor_parallel=32, ipus=32))
        attention, epilogues, scores = "flash", True, False
    else:
        raise ConfigError(f"GPU validation: no op list for benchmark {benchmark!r}")
    mp = wl.model_pass(data)
    kernels, notes = wl.gpu_lowering(mp.ops, fused_attention=attention, fused_epilogues=epilogues)
    cfg = dict(record_of(data).config)
    params, _ = wl.params(data, mp)
    per_pass = float(cfg.get("batch", 1)) * float(cfg.get("packing", 1.0) or 1.0)
    return OpList(kernels=kernels, samples_per_pass=per_pass, cfg=cfg, params=params, scores_kept=scores,
                  notes=mp.notes + notes)


def predict_row(row: GpuRow, ops: OpList) -> GpuResult:
    """The prediction of one measured row from its benchmark's op list (never raises: the error is kept)."""
    from popvision_lite.analysis import gpu_parallel as gp

    t0 = time.perf_counter()
    cfg = ops.cfg
    transformer = row.benchmark != "ResNet-50"

    def acts(tp, sp):
        a = gp.activation_bytes_per_sample(cfg, tp, sp, scores_kept=ops.scores_kept)
        return a if a is not None else 0.0

    opt = "momentum" if row.optimizer in ("lars", "momentum") else row.optimizer
    setting = gp.Setting(samples_per_step=row.gbs, samples_per_pass=ops.samples_per_pass, params=ops.params,
                         optimizer=opt, precision=row.precision,
                         layers=int(cfg.get("layers") or 1) if transformer else 1, activation_bytes=acts)
    try:
        e, _ = gp.search(ops.kernels, row.gpu, row.n_gpus, cfg, setting, tp=row.tp, pp=row.pp,
                         vp=row.vp if row.pp > 1 else None, micro_batch=row.micro_batch, memo=ops.memo)
    except ConfigError as err:
        return GpuResult(row, error=str(err), wall_s=time.perf_counter() - t0)
    sps = e.samples_per_second
    notes = list(e.notes)
    if row.benchmark == "BERT":
        interval = math.ceil(BERT_EVAL_INTERVAL / row.gbs) * row.gbs
        sps = sps * interval / (interval + BERT_EVAL_SAMPLES / 3.0)
        notes.append(f"evaluation included as measured: {BERT_EVAL_SAMPLES:,} sequences forward-only (1/3 of a "
                     f"training sample's work) every {interval:,} trained")
    return GpuResult(row, predicted=sps, placement=e.placement.text(), fits=e.fits, notes=notes,
                     wall_s=time.perf_counter() - t0)


def run_gpu_rows(rows: list[GpuRow], report=None, emulate=_emulate) -> list[GpuResult]:
    """Predict every row (one emulation per benchmark); ``report(row, result)`` as they arrive."""
    out = []
    lists: dict[str, OpList | str] = {}
    for row in rows:
        if row.benchmark not in lists:
            try:
                lists[row.benchmark] = op_list(row.benchmark, emulate)
            except Exception as e:  # noqa: BLE001 - one benchmark's emulation must not stop the others
                lists[row.benchmark] = f"{type(e).__name__}: {e}"
        ops = lists[row.benchmark]
        res = predict_row(row, ops) if isinstance(ops, OpList) else GpuResult(row, error=ops)
        out.append(res)
        if report:
            report(row, res)
    return out


def format_gpu_table(results: list[GpuResult]) -> str:
    """Markdown: one line per measured GPU row."""
    lines = ["| run | GPUs | placement (as run) | precision | measured samples/s | predicted | ratio | fits |",
             "|---|---|---|---|---|---|---|---|"]
    for r in results:
        w = r.row
        pred = f"error: {r.error}" if r.error else f"{r.predicted:,.1f}"
        ratio = "-" if r.ratio is None else f"{r.ratio:.3f}"
        fits = "-" if r.fits is None else ("yes" if r.fits else "NO")
        lines.append(f"| {w.id} ({w.benchmark}, {w.system}) | {w.n_gpus} x {w.gpu} | {r.placement or '-'} | "
                     f"{w.precision} | {w.measured:,.1f} ({w.kind}) | {pred} | {ratio} | {fits} |")
    return "\n".join(lines)


def pipeline_slots(row: GpuRow) -> float:
    """Stage times per step of a pipelined row: m + (p - 1) / v for m micro-batches per pipeline (1F1B with
    interleaving; Narayanan et al. 2021, eq. 2)."""
    m = row.gbs / row.dp / row.micro_batch
    return m + (row.pp - 1) / row.vp if row.pp > 1 else m


def step_split(results: list[GpuResult], round_: str) -> dict | None:
    """Split the steps of one software release's pipelined rows (same model, placement shape and micro-batch: the
    same work per stage time) into a per-stage-time part x and a per-step part c, ``step = slots x + c`` by least
    squares (:func:`pipeline_slots`), for the measured steps and the predicted ones alike (one model, GPU,
    micro-batch, tensor and pipeline parallel degree: the same work per stage time).  A diagnostic of where
    the prediction's error lies, written next to the table; nothing is fitted into the prediction.  None when the
    release's rows do not hold at least three rows over at least two distinct slot counts with one work per slot."""
    import numpy as np

    rows = [r for r in results if r.row.round == round_ and r.row.pp > 1 and r.predicted]
    work = {(r.row.benchmark, r.row.gpu, r.row.micro_batch, r.row.tp, r.row.pp) for r in rows}
    slots = np.array([pipeline_slots(r.row) for r in rows], dtype=float)
    if len(rows) < 3 or len(set(slots.round(9))) < 2 or len(work) != 1:
        return None
    a = np.stack([slots, np.ones_like(slots)], axis=1)
    out = {"round": round_, "rows": len(rows), "slots": sorted(set(slots.round(3)))}
    for key, sps in (("measured", [r.row.measured for r in rows]), ("predicted", [r.predicted for r in rows])):
        step = np.array([r.row.gbs for r in rows], dtype=float) / np.array(sps, dtype=float)
        (x, c), *_ = np.linalg.lstsq(a, step, rcond=None)
        fit = a @ np.array([x, c])
        out[key] = {"x_s": float(x), "c_s": float(c), "worst_rel": float(np.max(np.abs(fit / step - 1)))}
    return out


def format_step_split(split: dict) -> str:
    """One paragraph: the measured and predicted per-stage-time and per-step parts of a release's steps."""
    m, p = split["measured"], split["predicted"]
    return (f"**Where the error lies ({split['round']}, {split['rows']} pipelined rows, {', '.join(f'{s:g}' for s in split['slots'])} "
            f"stage times per step):** step = stage times x *x* + *c*, least squares. Measured: *x* = "
            f"{m['x_s'] * 1e3:,.1f} ms, *c* = {m['c_s'] * 1e3:,.0f} ms (every row within {m['worst_rel']:.1%}); "
            f"predicted: *x* = {p['x_s'] * 1e3:,.1f} ms, *c* = {p['c_s'] * 1e3:,.0f} ms (within {p['worst_rel']:.1%}). "
            f"The stage time (per-GPU work of one micro-batch) is predicted {m['x_s'] / p['x_s']:.2f}x too fast; the "
            f"per-step part (exposed data-parallel communication, optimizer) is {p['c_s'] / m['c_s']:.2f}x the "
            "measured one. A diagnostic of the rows, not a term of the prediction.")


BEGIN = "<!-- gpu-validation:begin (generated by `popvision-lite validate --write-doc`; do not edit) -->"
END = "<!-- gpu-validation:end -->"


def residual_rows(results: list[GpuResult]) -> list[dict]:
    """The residual table's rows (``analysis/error_band.COLUMNS``) of the GPU results: no constant is fitted on
    any GPU row, so the leave-one-out prediction is the prediction."""
    from popvision_lite.analysis import error_band as eb

    out = []
    for r in results:
        if r.ratio is None:
            continue
        w = r.row
        out.append(dict(id=w.id, side="gpu", model=MODEL[w.benchmark], framework=FRAMEWORK[w.benchmark],
                        scale=eb.scale_of("gpu", w.n_gpus), device=w.gpu, role="check", measured=f"{w.measured:.6g}",
                        predicted=f"{r.predicted:.6g}", ratio=f"{r.ratio:.6f}", predicted_loo=f"{r.predicted:.6g}",
                        ratio_loo=f"{r.ratio:.6f}", settings=f"placement as run: {r.placement}"))
    return out


def render_section(results: list[GpuResult], meta: str = "") -> str:
    """The generated section of docs/gpu-estimate.md: every measured GPU row, and the bands they give."""
    from popvision_lite.analysis import error_band as eb

    out = [BEGIN, "", "## The GPU estimate against measured MLPerf runs (generated)", ""]
    if meta:
        out += [meta, ""]
    out += ["Every row of `resources/validation/mlperf_training_gpu.csv` predicted as the verdict predicts a GPU "
            "run, from the emulator's own op list of the model, with the run's own placement, micro-batch, global "
            "batch and precision (`popvision_lite/gpu_validation.py`). No constant is fitted on any row.", "",
            format_gpu_table(results), ""]
    for rnd in sorted({r.row.round for r in results}):
        split = step_split(results, rnd)
        if split:
            out += [format_step_split(split), ""]
    out += ["**Error bands** these rows give the GPU side of a verdict "
            "(`analysis/error_band.py`; measured / predicted - 1):", "",
            eb.format_families(eb.rows_from_dicts(residual_rows(results))), "", END]
    return "\n".join(out)
