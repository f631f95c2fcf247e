"""Estimated time of a workload's ops on a GPU (pure: pandas/numpy, no Qt).

Unlike the roofline *bound* (``roofline.py``: max(FLOPs / peak, bytes / HBM), an upper bound on speed that no
GPU reaches), this is an *estimate* built from published measurements; every constant is read from the GPU's
device TOML (``[estimator]`` table, each with its source) and the model is:

* **per kernel** (one kernel per op, as a framework launches one per operator): ``t = max(compute, memory) +
  launch``, costed by the op's kind (``op_kind``; details in :func:`estimate_ops`):
  - GEMM-class ops (matmul, conv, bmm): output tiles of ``gemm_tile_elements`` in waves over the SMs (wave
    quantisation), each at ``gemm_fraction`` (the best measured matmul throughput over peak, MAMF) of the SM's
    tensor peak, plus the C-tile epilogue per wave when the output spills past the L2.  The output size comes
    from the op's ``m, n, k, batch`` columns when it has them (imported traces), else from an equivalent shape
    solved from FLOPs and compulsory bytes (square output, ``2 MNK = FLOPs``, ``MK + KN + MN = elements``; the
    larger root, i.e. the optimistic one, as cuBLAS splits K for tall-skinny outputs).  With an explicit ``k``,
    a GEMM whose output fills fewer SMs than the GPU has is split along K (split-K, as cuBLAS and CUTLASS do for
    small outputs with long reductions) into slices of at least ``SPLIT_K_MIN`` = 128 (assumed), as many as
    fill one wave.
  - softmax and LayerNorm: the passes PyTorch's kernels make over a row (one warp or one block per row), the
    softmax's exponentials on the SFUs; the constants without a public figure are labelled calibrated in the
    TOML, with the rows they were fitted on (``bench/gpu_ops.py`` judges them on the others).
  - Other ops (elementwise, reductions, optimizer updates, gathers) run on the plain FP32 peak with no
    fraction applied to the arithmetic; they are almost always bound by their bytes.
  - FP16 ops use the dense tensor-core FP16 peak, everything else the plain FP32 peak (as the roofline); a run
    trained in FP8 (``precision="fp8"``) runs its 16-bit GEMMs at the FP8 tensor peak where the GPU has one.
* **training step on N GPUs (data parallel)**: every GPU runs the forward/backward op list for its share of the
  samples, then the gradient ring all-reduce, ``2 (N-1)/N x gradient bytes / bus bandwidth`` (the all-reduce bus
  bandwidth measured by nccl-tests, which is exactly the bandwidth this formula needs), then the optimizer
  update once.  No overlap of all-reduce and backward is assumed (conservative; stated in the notes).
* **memory fit**: weights + gradients + optimizer state (bytes per parameter by optimizer, mixed precision as in
  ZeRO, Rajbhandari et al. 2020: Adam 2 + 2 + 12 = 16 B) + activations at the batch, against HBM capacity.

The roofline bound of the same ops is returned beside the estimate (``bound_time_s``), never instead of it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from popvision_lite import devices
from popvision_lite.devices import DeviceSpec
from popvision_lite.errors import ConfigError

GEMM_TYPES = ("matmul", "conv", "convolution", "linear", "mm", "bmm", "addmm", "baddbmm", "gemm", "attention")
OPTIMIZER_TYPES = ("sgd_update", "momentum_update", "adam_update", "lamb_update", "optimizer")
BYTES_PER_ELEMENT = {"fp16": 2, "bf16": 2, "fp32": 4, "fp8": 1}

# Mixed-precision bytes per parameter held on the GPU: weights, gradients, optimizer state (fp32 master
# weights + moments).  ZeRO (Rajbhandari et al., SC 2020, sec. 3.1): mixed-precision Adam keeps 2 + 2 + 12 B.
STATE_BYTES_PER_PARAM = {"sgd": 4, "momentum": 12, "adam": 16, "lamb": 16}
# Bytes one optimizer update moves per parameter (derived: reads and writes of the tensors above).
# sgd: read w, g (fp16), write w = 6.  momentum: read w32 g m, write w32 m w16 = 4+2+4 +4+4+2 = 20.
# adam: read w32 g m v, write w32 m v w16 = 4+2+4+4 +4+4+4+2 = 28.  lamb: adam + a second pass that
# re-reads the update and the fp32 weights for the per-layer trust ratio (+4+4) = 36.
UPDATE_BYTES_PER_PARAM = {"sgd": 6, "momentum": 20, "adam": 28, "lamb": 36}

# split-K slices are at least this long along K (assumed: 4 k-blocks of 32, CUTLASS's usual k-block for FP16)
SPLIT_K_MIN = 128

# defaults when a GPU spec has no [estimator] value (each use is reported as an assumption)
_FALLBACK = {
    "gemm_fraction": (0.859, "A100 SXM measured MAMF (267.9 of 312 TFLOP/s, ml-engineering table)"),
    "gemm_tile_elements": (128 * 128, "128x128 output tile (NVIDIA Matrix Multiplication Background guide)"),
    "hbm_fraction": (0.88, "A100 80GB measured read bandwidth 1.80 of 2.04 TB/s"),
    "launch_overhead_s": (3e-6, "~3 us null-kernel launch overhead"),
    "softmax_warp_max_columns": (1024, "PyTorch's one-warp-per-row softmax serves rows of up to 1024 columns"),
    "softmax_hbm_reads": (2, "A100 calibrated value (2 of the 3 passes' reads of a row reach HBM)"),
    "row_onchip_bytes": (16384, "A100 calibrated value (a LayerNorm row of up to 16 KB is re-read on chip)"),
    "wide_row_hbm_fraction": (0.594, "A100 calibrated value for rows re-read from HBM"),
}
# Without a published SFU rate the exponential's cost is left out (reported as an assumption).
_INT_KEYS = ("gemm_tile_elements", "softmax_warp_max_columns", "softmax_hbm_reads", "row_onchip_bytes")


@dataclass(frozen=True)
class GpuModel:
    """The constants of the estimate for one GPU, with where each came from."""

    spec: DeviceSpec
    gemm_fraction: float
    gemm_tile_elements: int
    hbm_fraction: float
    launch_s: float
    sms: int
    allreduce_bytes_per_s: float | None     # measured all-reduce bus bandwidth (per GPU), None if unknown
    softmax_warp_max_columns: int = 1024
    softmax_hbm_reads: int = 2
    row_onchip_bytes: int = 16384
    wide_row_hbm_fraction: float = 0.594
    sfu_ops_per_s: float | None = None      # exponentials per second on the special-function units
    l2_bytes: float | None = None
    gemm_fraction_fp8: float | None = None  # measured best FP8 matmul / FP8 peak (None: gemm_fraction, assumed)
    gpus_per_node: int | None = None        # GPUs one NVLink domain joins
    network_bus_bytes_per_s: float | None = None   # NCCL bus bandwidth of a collective across nodes, per GPU
    sources: dict = field(default_factory=dict)     # key -> "basis: source"
    assumed: tuple = ()                             # keys taken from _FALLBACK (not in the spec)

    @property
    def id(self) -> str:
        return self.spec.id

    @property
    def name(self) -> str:
        return self.spec.name

    def peak(self, precision: str) -> float:
        if precision == "fp8" and self.spec.has("compute.peak_fp8_flops"):
            return float(self.spec.value("compute.peak_fp8_flops"))
        return self.spec.peak_fp16_flops if precision in ("fp16", "bf16", "fp8") else self.spec.peak_fp32_flops

    @property
    def fp8_peak(self) -> float | None:
        return float(self.spec.value("compute.peak_fp8_flops")) if self.spec.has("compute.peak_fp8_flops") else None

    @property
    def hbm_bytes_per_s(self) -> float:
        return float(self.spec.memory("hbm").bandwidth_bytes_per_s)

    @property
    def hbm_capacity(self) -> float | None:
        return self.spec.memory("hbm").capacity_bytes


def gpu_model(spec: DeviceSpec | str) -> GpuModel:
    spec = devices.load_device(spec) if isinstance(spec, str) else spec
    if spec.kind != "gpu":
        raise ConfigError(f"{spec.id}: not a GPU spec (kind {spec.kind!r}); choose one of "
                          f"{', '.join(devices.list_devices('gpu'))}")
    vals, sources, assumed = {}, {}, []
    for key, (fallback, why) in _FALLBACK.items():
        full = f"estimator.{key}"
        if spec.has(full):
            vals[key] = spec.value(full)
            sources[key] = f"{spec.basis(full)}: {spec.source(full)}"
        else:
            vals[key] = fallback
            sources[key] = f"assumed (not in {spec.id}.toml): {why}"
            assumed.append(key)
    for key in _INT_KEYS:
        vals[key] = int(vals[key])
    for key in ("gemm_fraction", "hbm_fraction", "wide_row_hbm_fraction"):
        if not 0 < vals[key] <= 1:
            raise ConfigError(f"{spec.path}: estimator.{key} = {vals[key]} must lie in (0, 1]")
    ar = spec.value("estimator.allreduce_bus_bytes_per_s") if spec.has("estimator.allreduce_bus_bytes_per_s") else None
    if ar is not None:
        sources["allreduce_bus_bytes_per_s"] = (f"{spec.basis('estimator.allreduce_bus_bytes_per_s')}: "
                                                f"{spec.source('estimator.allreduce_bus_bytes_per_s')}")
    sms = int(spec.value("compute.sms")) if spec.has("compute.sms") else 108
    if not spec.has("compute.sms"):
        assumed.append("sms")
    sfu = float(spec.value("estimator.sfu_ops_per_s")) if spec.has("estimator.sfu_ops_per_s") else None
    if sfu is None:
        assumed.append("sfu_ops_per_s")
    else:
        sources["sfu_ops_per_s"] = f"{spec.basis('estimator.sfu_ops_per_s')}: {spec.source('estimator.sfu_ops_per_s')}"
    l2 = spec.memory("l2").capacity_bytes if spec.has_memory("l2") else None
    extra = {}
    for key, cast in (("gemm_fraction_fp8", float), ("gpus_per_node", int), ("network_bus_bytes_per_s", float)):
        full = f"estimator.{key}"
        if spec.has(full):
            extra[key] = cast(spec.value(full))
            sources[key] = f"{spec.basis(full)}: {spec.source(full)}"
    if extra.get("gemm_fraction_fp8") is not None and not 0 < extra["gemm_fraction_fp8"] <= 1:
        raise ConfigError(f"{spec.path}: estimator.gemm_fraction_fp8 = {extra['gemm_fraction_fp8']} must lie in (0, 1]")
    return GpuModel(**extra, spec=spec, gemm_fraction=float(vals["gemm_fraction"]),
                    gemm_tile_elements=int(vals["gemm_tile_elements"]), hbm_fraction=float(vals["hbm_fraction"]),
                    launch_s=float(vals["launch_overhead_s"]), sms=sms,
                    allreduce_bytes_per_s=None if ar is None else float(ar),
                    softmax_warp_max_columns=vals["softmax_warp_max_columns"],
                    softmax_hbm_reads=vals["softmax_hbm_reads"], row_onchip_bytes=vals["row_onchip_bytes"],
                    wide_row_hbm_fraction=float(vals["wide_row_hbm_fraction"]), sfu_ops_per_s=sfu,
                    l2_bytes=None if l2 is None else float(l2), sources=sources, assumed=tuple(assumed))


def op_class(op_type) -> str:
    t = str(op_type).lower()
    if any(t == g or t.startswith(g + "_") or t.endswith("_" + g) for g in GEMM_TYPES) or "conv" in t:
        return "gemm"
    if t in OPTIMIZER_TYPES or t.endswith("_update"):
        return "optimizer"
    return "memory"


def _equivalent_output(flops: np.ndarray, elements: np.ndarray) -> np.ndarray:
    """Output elements M*N of a GEMM with 2MNK = flops and MK + KN + MN = elements, taking M = N.

    E = F/M + M^2 (with K = F / 2M^2); the larger root of M^3 - E M + F = 0 (optimistic: more output tiles).
    Falls back to E/3 when there is no real root (bytes are not a GEMM's)."""
    flops, elements = np.asarray(flops, dtype=float), np.asarray(elements, dtype=float)
    out = np.full(len(flops), np.nan)
    ok = (flops > 0) & (elements > 0)
    if not ok.any():
        return out
    # one root finding per distinct (flops, elements): a model pass repeats each op's row once per call (a
    # layer body x layers x micro-batches), and np.roots costs ~1 ms
    pairs, inverse = np.unique(np.stack([flops[ok], elements[ok]], axis=1), axis=0, return_inverse=True)
    vals = np.empty(len(pairs))
    for j, (f, e) in enumerate(pairs):
        roots = np.roots([1.0, 0.0, -e, f])
        real = roots[np.isreal(roots)].real
        real = real[real > 0]
        vals[j] = (real.max() ** 2) if len(real) else e / 3.0
    out[ok] = vals[np.asarray(inverse).reshape(-1)]
    return out


def op_kind(op_type) -> str:
    """The kernel family an op runs as: ``gemm``, ``optimizer``, ``softmax`` and ``layernorm`` (row reductions
    costed by their passes) or ``elementwise`` (everything else memory-bound: one read, one write)."""
    cls = op_class(op_type)
    t = str(op_type).lower()
    if t == "attention":
        return "attention"   # a fused attention kernel (model_pass.gpu_lowering): a GEMM, kept in 16-bit
    if cls != "memory":
        return cls
    if t.endswith(("_bwd", "_grad", "_backward")):
        return "elementwise"
    if "softmax" in t:
        return "softmax"
    if "layer_norm" in t or "layernorm" in t:
        return "layernorm"
    return "elementwise"


def _per_type(ops: pd.DataFrame, fn) -> np.ndarray:
    """``fn(type)`` of every row of ``ops``, computed once per distinct type (a model pass repeats each op)."""
    if not len(ops):
        return np.zeros(0, dtype=object)
    codes, uniques = pd.factorize(ops["type"].astype(str), sort=False)
    return np.array([fn(t) for t in uniques], dtype=object)[codes]


def _column(ops: pd.DataFrame, name: str, n: int) -> np.ndarray:
    return ops[name].to_numpy(dtype=float) if name in ops.columns else np.full(n, np.nan)


def _gemm_occupancy(ops: pd.DataFrame, g: GpuModel, is_gemm: np.ndarray, flops: np.ndarray, nbytes: np.ndarray,
                    elem_bytes: np.ndarray, m_col: np.ndarray, n_col: np.ndarray, hbm: float,
                    wave_quantization: bool) -> tuple[np.ndarray, np.ndarray]:
    """(occupancy, epilogue seconds) of each GEMM from its output tiles (1 and 0 for other ops): tiles in waves
    over the SMs, split-K, and the epilogue of an output larger than the L2."""
    n = len(ops)
    occ = np.ones(n)
    epilogue = np.zeros(n)
    if is_gemm.any():
        b = _column(ops, "batch", n)
        b = np.where(np.isfinite(b) & (b > 0), b, 1.0)
        side = math.sqrt(g.gemm_tile_elements)
        out_tiles = b * np.ceil(m_col / side) * np.ceil(n_col / side)
        out_elems = b * m_col * n_col
        tiles = out_tiles.copy()
        if "k" in ops.columns:
            # split-K: a small output with a long reduction is cut along K into slices run on more SMs
            # (cuBLAS / CUTLASS 'split-K'); slices of at least SPLIT_K_MIN (assumed) keep each worth a launch
            kk = ops["k"].to_numpy(dtype=float)
            split = np.where(np.isfinite(kk), np.maximum(1.0, np.floor(kk / SPLIT_K_MIN)), 1.0)
            # as many slices as fit the SMs in one wave (a split that spills into a second wave gains nothing)
            tiles = tiles * np.minimum(split, np.maximum(1.0, np.floor(g.sms / np.maximum(tiles, 1.0))))
        shaped = np.isfinite(tiles) & (tiles > 0)
        need = is_gemm & ~shaped
        if need.any():
            mn = _equivalent_output(flops[need], (nbytes / elem_bytes)[need])
            tiles[need] = np.ceil(mn / g.gemm_tile_elements)
            out_tiles[need] = tiles[need]
            out_elems[need] = mn
        t = np.nan_to_num(tiles, nan=g.sms)
        t = np.maximum(t, 1.0)
        if wave_quantization:  # the last wave of tiles leaves SMs idle (NVIDIA GEMM guide, 'wave quantization')
            occ = np.where(is_gemm, t / (np.ceil(t / g.sms) * g.sms), 1.0)
        else:
            occ = np.where(is_gemm, np.minimum(1.0, t / g.sms), 1.0)
        occ = np.clip(occ, 1e-3, 1.0)
        # epilogue: a tile writes its C block after its main loop; an output larger than the L2 goes to HBM at
        # the SM's share of the bandwidth, once per wave of output tiles
        spill = is_gemm & np.isfinite(out_elems) & (g.l2_bytes is not None) & \
            (np.nan_to_num(out_elems) * elem_bytes > (g.l2_bytes or np.inf))
        waves_out = np.ceil(np.nan_to_num(out_tiles, nan=g.sms) / g.sms)
        epilogue = np.where(spill, waves_out * g.gemm_tile_elements * elem_bytes / (hbm / g.sms), 0.0)
    return occ, epilogue


def _row_passes(g: GpuModel, kind: np.ndarray, m_col: np.ndarray, n_col: np.ndarray, nbytes: np.ndarray,
                elem_bytes: np.ndarray, hbm: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(HBM passes over the compulsory bytes, bandwidth, SFU seconds) of each op: the row-reduction kernels'
    passes (softmax, LayerNorm); one pass at ``hbm`` for the others."""
    n = len(kind)
    passes = np.ones(n)
    bw = np.full(n, hbm)
    exp_s = np.zeros(n)
    is_sm, is_ln = kind == "softmax", kind == "layernorm"
    if is_sm.any():
        block = ~(np.isfinite(n_col) & (n_col <= g.softmax_warp_max_columns))
        passes = np.where(is_sm & block, (g.softmax_hbm_reads + 1) / 2.0, passes)
        if g.sfu_ops_per_s:
            elements = np.where(np.isfinite(m_col * n_col), m_col * n_col, nbytes / (2 * elem_bytes))
            exp_s = np.where(is_sm, elements / g.sfu_ops_per_s, 0.0)
    if is_ln.any():
        # the normalise pass finds row_onchip_bytes of each row on chip, re-reads the rest from HBM
        row = np.where(np.isfinite(n_col), n_col * elem_bytes, 0.0)
        wide = row > g.row_onchip_bytes
        miss = np.where(wide, 1.0 - g.row_onchip_bytes / np.where(wide, row, 1.0), 0.0)
        passes = np.where(is_ln & wide, 1.0 + miss / 2.0, passes)
        bw = np.where(is_ln & wide, g.hbm_bytes_per_s * g.wide_row_hbm_fraction, bw)
    return passes, bw, exp_s


def estimate_ops(ops: pd.DataFrame, gpu: GpuModel | DeviceSpec | str, wave_quantization: bool = True,
                 gemm_precision: str | None = None) -> pd.DataFrame:
    """Per-op GPU estimate.  ``ops`` needs ``type``, ``precision``, ``flops``, ``min_bytes`` (the ops table of a
    profile); optional ``m``, ``n``, ``k``, ``batch`` (GEMM shape; for softmax / LayerNorm ``m`` rows of ``n``
    columns), ``kernels`` (launches, default 1).

    Per op kind (``op_kind``):

    * ``gemm``: output tiles of ``gemm_tile_elements`` run in waves over the SMs (wave quantisation: the last
      wave leaves SMs idle), each tile at ``gemm_fraction`` of the SM's tensor peak; when the output is larger
      than the L2 each wave also pays its tiles' epilogue (the C tile written at the SM's share of HBM
      bandwidth, after its main loop); the op is bound by the larger of that and its compulsory bytes.
    * ``softmax``: the passes PyTorch's kernels make over a row.  Rows of up to ``softmax_warp_max_columns``:
      one warp per row, the row held in registers: one read, one write.  Wider rows: one block per row and
      three passes (max, exp-sum, normalise) of which ``softmax_hbm_reads`` reach HBM (calibrated), plus the
      exponentials of the exp-sum pass on the SFUs (the block waits for that sum before it normalises; the
      normalise pass's exponentials overlap its own traffic).
    * ``layernorm``: statistics pass + normalise pass.  A row of up to ``row_onchip_bytes`` is re-read on chip
      (compulsory bytes); of a wider row the normalise pass re-reads the part past ``row_onchip_bytes`` from HBM,
      and the kernel streams at ``wide_row_hbm_fraction`` (both calibrated).
    * ``elementwise`` / ``optimizer``: compulsory bytes at ``hbm_fraction``; arithmetic at the plain peak.

    Returns a frame (same index) with: ``op_class``, ``op_kind``, ``occupancy``, ``compute_s``, ``memory_s``,
    ``launch_s``, ``est_time_s`` (the estimate), ``est_bound`` (compute / hbm / launch), ``achievable`` (the
    fraction of the kind's roof the estimate reaches) and ``bound_time_s`` (the roofline bound
    max(FLOPs / peak, bytes / HBM), for comparison only).  ``wave_quantization=False`` is a sensitivity (occupancy
    of a partly filled last wave counted as full).  ``gemm_precision="fp8"``: 16-bit GEMMs run at the GPU's FP8
    tensor peak (Transformer Engine casts their inputs to FP8; the other kernels stay 16-bit), at the GPU's measured
    FP8 matmul fraction ``gemm_fraction_fp8`` (MAMF FP8; ``gemm_fraction`` where the spec has none, said in the
    notes) and with their 16-bit bytes (the casts' own traffic is not added); a GPU without an FP8 rate keeps its
    FP16 peak."""
    g = gpu if isinstance(gpu, GpuModel) else gpu_model(gpu)
    n = len(ops)
    flops = ops["flops"].to_numpy(dtype=float) if n else np.zeros(0)
    nbytes = ops["min_bytes"].to_numpy(dtype=float) if n else np.zeros(0)
    prec = ops["precision"].astype(str).str.lower().to_numpy() if n else np.zeros(0, dtype=object)
    cls = _per_type(ops, op_class)
    kind = _per_type(ops, op_kind)
    elem_bytes = np.array([BYTES_PER_ELEMENT.get(p, 2) for p in prec], dtype=float)
    is_gemm = cls == "gemm"
    peak = np.array([g.peak(p) if p in ("fp16", "bf16", "fp8") else g.peak("fp32") for p in prec], dtype=float)
    fp8_gemm = np.zeros(n, dtype=bool)
    if gemm_precision == "fp8" and g.fp8_peak:
        # a fused attention kernel stays 16-bit (FlashAttention: fp16 / bf16 only)
        fp8_gemm = is_gemm & (kind != "attention") & np.isin(prec, ("fp16", "bf16", "fp8"))
        peak = np.where(fp8_gemm, g.fp8_peak, peak)
    m_col, n_col = _column(ops, "m", n), _column(ops, "n", n)
    hbm = g.hbm_bytes_per_s * g.hbm_fraction
    occ, epilogue = _gemm_occupancy(ops, g, is_gemm, flops, nbytes, elem_bytes, m_col, n_col, hbm,
                                   wave_quantization)
    # the best measured matmul fraction of the peak the GEMM runs at: FP8's own where the GPU has one (MAMF FP8)
    gemm_frac = np.where(fp8_gemm, g.gemm_fraction_fp8 or g.gemm_fraction, g.gemm_fraction)
    frac = np.where(is_gemm, gemm_frac * occ, 1.0)
    compute = np.where(flops > 0, flops / (peak * frac), 0.0) + epilogue
    # HBM traffic: compulsory bytes, times the passes of the row-reduction kernels
    passes, bw, exp_s = _row_passes(g, kind, m_col, n_col, nbytes, elem_bytes, hbm)
    memory = nbytes * passes / bw + exp_s
    kernels = ops["kernels"].to_numpy(dtype=float) if "kernels" in ops.columns else np.ones(n)
    launch = kernels * g.launch_s
    work = np.maximum(compute, memory)
    est = work + launch
    bound = np.where(launch > work, "launch", np.where(compute >= memory, "compute", "hbm"))
    bound_t = np.maximum(np.where(flops > 0, flops / peak, 0.0), nbytes / g.hbm_bytes_per_s)
    # fraction of the kind's roof reached: of the tensor peak (GEMMs), of the HBM bandwidth on compulsory bytes
    with np.errstate(divide="ignore", invalid="ignore"):
        achievable = np.where(is_gemm, np.where(work > 0, flops / peak / work, np.nan),
                              np.where(memory > 0, nbytes / g.hbm_bytes_per_s / memory, np.nan))
    return pd.DataFrame({"op_class": cls, "op_kind": kind, "occupancy": occ, "compute_s": compute,
                         "memory_s": memory, "launch_s": launch, "est_time_s": est, "est_bound": bound,
                         "achievable": achievable, "bound_time_s": bound_t}, index=ops.index)


KIND_ROOF = {"gemm": "of the tensor peak", "attention": "of the tensor peak", "softmax": "of HBM bandwidth on compulsory bytes",
             "layernorm": "of HBM bandwidth on compulsory bytes", "elementwise": "of HBM bandwidth",
             "optimizer": "of HBM bandwidth"}


def achievable_by_kind(est: pd.DataFrame, weights=None) -> list[dict]:
    """Per op kind of an ``estimate_ops`` frame: its share of the estimated time, and the fraction of its roof
    the estimate reached (time-weighted: FLOPs / peak / time for GEMMs, compulsory bytes / HBM / time for the
    others).  ``weights``: runs of each row (default 1).  Sorted by share of time."""
    if not len(est):
        return []
    w = np.ones(len(est)) if weights is None else np.asarray(weights, dtype=float)
    t = est["est_time_s"].to_numpy(dtype=float) * w
    total = t.sum() or 1.0
    out = []
    for kind in pd.unique(est["op_kind"]):
        sel = (est["op_kind"] == kind).to_numpy()
        tk = t[sel].sum()
        work = (np.maximum(est["compute_s"], est["memory_s"]).to_numpy(dtype=float) * w)[sel]
        ach = est["achievable"].to_numpy(dtype=float)[sel]
        ok = np.isfinite(ach) & (work > 0)
        frac = float((ach[ok] * work[ok]).sum() / work[ok].sum()) if ok.any() else math.nan
        out.append(dict(kind=str(kind), share=float(tk / total), achievable=frac, roof=KIND_ROOF.get(str(kind), ""),
                        kernels=int(sel.sum())))
    return sorted(out, key=lambda d: -d["share"])


def describe_achievable(est: pd.DataFrame, weights=None) -> str:
    """One line for the notes: the fraction of each op kind's roof the estimate used."""
    parts = [f"{d['kind']} {100 * d['share']:.0f}% of the pass at {d['achievable']:.2f} {d['roof']}"
             for d in achievable_by_kind(est, weights) if math.isfinite(d["achievable"])]
    return "GPU achievable fraction per op kind: " + "; ".join(parts) if parts else ""


def fp8_note(g: GpuModel) -> str:
    """What an FP8 run's GEMMs are costed at, in words."""
    if not g.fp8_peak:
        return f"FP8 asked for, but {g.name} has no FP8 rate: GEMMs at its FP16 peak"
    frac = (f"{g.gemm_fraction_fp8:.3f} of it (measured best FP8 matmul, {g.sources.get('gemm_fraction_fp8', '')})"
            if g.gemm_fraction_fp8 else f"{g.gemm_fraction:.3f} of it (the 16-bit matmul fraction: no FP8 measurement "
                                        "in the spec, assumed)")
    return (f"FP8 GEMMs (Transformer Engine): {g.name} FP8 tensor peak {g.fp8_peak / 1e12:,.0f} TFLOP/s at {frac}; "
            "attention and every other kernel in 16-bit")


def allreduce_seconds(gradient_bytes: float, n_gpus: int, gpu: GpuModel) -> tuple[float, str]:
    """Ring all-reduce time 2 (N-1)/N x bytes / bus bandwidth (0 on one GPU) and where the bandwidth came from."""
    if n_gpus <= 1 or gradient_bytes <= 0:
        return 0.0, ""
    if gpu.allreduce_bytes_per_s is None:
        raise ConfigError(f"{gpu.id}: no estimator.allreduce_bus_bytes_per_s in its device spec; "
                          "cannot estimate the gradient all-reduce across GPUs")
    return 2 * (n_gpus - 1) / n_gpus * gradient_bytes / gpu.allreduce_bytes_per_s, gpu.sources["allreduce_bus_bytes_per_s"]


@dataclass
class TrainingEstimate:
    """One data-parallel training step of ``samples_per_step`` samples on ``n_gpus`` GPUs."""

    gpu: GpuModel
    n_gpus: int
    samples_per_step: float
    samples_per_gpu: float
    passes_per_step: float           # op-list passes (micro-batches) each GPU runs per step
    micro_batch: float               # samples of one pass on one GPU
    pass_time_s: float               # forward + backward op list once (estimate)
    optimizer_time_s: float
    allreduce_time_s: float
    step_time_s: float
    samples_per_second: float
    bound_samples_per_second: float  # the roofline bound of the same step (upper bound, not an estimate)
    bound_by: str                    # what limits the estimated step most (compute / hbm / launch / all-reduce)
    time_by_bound: dict
    memory: dict                     # weights, gradients, optimizer, activations, total, capacity, fits
    ops: pd.DataFrame
    notes: list = field(default_factory=list)
    placement: object = None         # gpu_parallel.Placement of a tensor / pipeline / data-parallel step
    comm_s: dict = field(default_factory=dict)   # seconds per step each kind of communication adds (exposed)
    bubble_s: float = 0.0            # pipeline fill and drain per step

    @property
    def fits(self) -> bool:
        return bool(self.memory.get("fits", True))


def params_from_ops(ops: pd.DataFrame) -> float:
    """Trainable parameters = elements of the optimizer-update ops (an update reads w, g and writes w:
    three tensors of the parameter's size, in min_bytes)."""
    if not len(ops):
        return 0.0
    upd = ops[[op_class(t) == "optimizer" for t in ops["type"]]]
    if not len(upd):
        return 0.0
    per = np.array([BYTES_PER_ELEMENT.get(str(p).lower(), 2) for p in upd["precision"]])
    return float((upd["min_bytes"].to_numpy(dtype=float) / (3 * per)).sum())


def state_bytes(params: float, optimizer: str, training: bool = True, precision: str = "fp16") -> float:
    """Bytes of weights + gradients + optimizer state one data-parallel GPU holds (ZeRO's mixed-precision count)."""
    return params * (STATE_BYTES_PER_PARAM[optimizer] if training else BYTES_PER_ELEMENT.get(precision, 2))


def fitting_micro_batch(samples_per_pass: float, samples_per_gpu: float, *, params: float, optimizer: str,
                        activation_bytes_per_sample: float, gpu, training: bool = True,
                        precision: str = "fp16") -> float:
    """The micro-batch a GPU runs its share of a step in: the largest whole multiple ``f x samples_per_pass``
    such that ``f`` divides the GPU's passes per step (``samples_per_gpu / samples_per_pass``, so the step keeps
    its global batch) and weights + gradients + optimizer state + ``f`` passes' activations fit in HBM.
    ``samples_per_pass`` when nothing larger fits, when the share is not a whole number of passes or the
    capacity is unknown; the share itself when it is smaller than one pass."""
    g = gpu if isinstance(gpu, GpuModel) else gpu_model(gpu)
    if samples_per_gpu <= samples_per_pass:
        return float(max(1, math.floor(samples_per_gpu)))
    passes = samples_per_gpu / samples_per_pass
    cap = g.hbm_capacity
    if cap is None or abs(passes - round(passes)) > 1e-9:
        return float(samples_per_pass)
    if passes > MAX_PASSES:  # beyond any real step (a file's 1e308 replicas): no multiple is searched for
        return float(samples_per_pass)
    passes = int(round(passes))
    state = state_bytes(params, optimizer, training, precision)
    for f in divisors(passes)[::-1]:
        if state + activation_bytes_per_sample * samples_per_pass * f <= cap:
            return float(samples_per_pass * f)
    return float(samples_per_pass)


# passes of one GPU per step searched for a fitting micro-batch: MLPerf's largest runs have ~2^17 (64 replicas x
# 2,048 micro-batches); past 2^32 the op list's own micro-batch is used, so the divisor search below takes at most
# 2^16 trial divisions (30 ms)
MAX_PASSES = 2 ** 32


def divisors(n: int) -> list[int]:
    """The divisors of ``n`` (1 <= n <= MAX_PASSES) in increasing order, found in sqrt(n) trial divisions (the
    search one by one up to ``n`` froze the app on a file claiming 1e308 replicas)."""
    if not 1 <= n <= MAX_PASSES:
        raise ValueError(f"divisors of {n}: outside 1..{MAX_PASSES}")
    small, large = [], []
    d = 1
    while d * d <= n:
        if n % d == 0:
            small.append(d)
            if d * d != n:
                large.append(n // d)
        d += 1
    return small + large[::-1]


def scale_ops(ops: pd.DataFrame, scale: float) -> pd.DataFrame:
    """The same kernels on ``scale`` x the samples: FLOPs and bytes in proportion (weight bytes too), the samples'
    dimension of a shaped op (``batch``; the rows of a split GEMM, ``m`` where it is the rows) likewise; the
    optimizer-update ops unchanged."""
    if scale == 1.0:
        return ops
    ops = ops.copy()
    upd = np.array([op_class(t) == "optimizer" for t in ops["type"]], dtype=bool)
    for col in ("flops", "min_bytes"):
        v = ops[col].to_numpy(dtype=float)
        ops[col] = np.where(upd, v, v * scale)
    if "tp_rows" in ops.columns:
        # a split GEMM (analysis/tensor_parallel.py): its rows are the samples' tokens; M, N or K holds them
        rows = ops["tp_rows"].to_numpy(dtype=float)
        shaped = np.isfinite(rows)
        for c in ("m", "n", "k"):
            if c in ops.columns:
                v = ops[c].to_numpy(dtype=float)
                hit = shaped & np.isclose(v, rows)
                ops[c] = np.where(hit, v * scale, v)
        ops["tp_rows"] = np.where(shaped, rows * scale, rows)
    if "batch" in ops.columns:
        # a shaped op's batch dimension holds the samples (fused attention: batch x heads)
        v = ops["batch"].to_numpy(dtype=float)
        keep = upd | ~np.isfinite(v)
        if "tp_rows" in ops.columns:
            keep |= np.isfinite(ops["tp_rows"].to_numpy(dtype=float))   # a split GEMM's batch is 1
        ops["batch"] = np.where(keep, v, v * scale)
    return ops


def estimate_training(ops: pd.DataFrame, gpu, n_gpus: int = 1, *, samples_per_pass: float,
                      samples_per_step: float | None = None, params: float | None = None,
                      optimizer: str = "sgd", activation_bytes_per_sample: float = 0.0,
                      training: bool = True, precision: str = "fp16",
                      wave_quantization: bool = True, micro_batch: float | None = None) -> TrainingEstimate:
    """Estimated data-parallel training throughput of the op list ``ops`` (one pass = forward + backward of
    ``samples_per_pass`` samples; optimizer-update ops in it are taken out and replaced by one update of
    ``params`` parameters per step with ``optimizer``'s bytes).  ``samples_per_step`` (global batch) defaults
    to ``samples_per_pass x n_gpus``.  ``micro_batch``: the samples each GPU runs per pass (default
    ``samples_per_pass``, or its share of the step when that is smaller); the op list is scaled to it (FLOPs and
    bytes in proportion, the same kernels; weight bytes are scaled with the activations: a small error for
    compute-bound GEMMs, said in the notes)."""
    g = gpu if isinstance(gpu, GpuModel) else gpu_model(gpu)
    n_gpus = int(n_gpus)
    if n_gpus < 1:
        raise ConfigError(f"--gpus {n_gpus}: must be at least 1")
    if samples_per_pass <= 0:
        raise ConfigError(f"samples per pass must be positive, got {samples_per_pass}")
    if micro_batch is not None and not (isinstance(micro_batch, int | float) and not isinstance(micro_batch, bool)
                                        and math.isfinite(micro_batch) and micro_batch >= 1
                                        and float(micro_batch).is_integer()):
        raise ConfigError(f"GPU micro-batch must be a whole number of samples (1 or more), got {micro_batch!r}")
    optimizer = (optimizer or "sgd").lower()
    if optimizer not in STATE_BYTES_PER_PARAM:
        raise ConfigError(f"optimizer {optimizer!r}: choose one of {', '.join(STATE_BYTES_PER_PARAM)}")
    notes = []
    if params is None:
        params = params_from_ops(ops)
    params = float(params)
    sps = float(samples_per_step) if samples_per_step else samples_per_pass * n_gpus
    per_gpu = sps / n_gpus
    mb = float(micro_batch) if micro_batch else float(samples_per_pass)
    if mb > per_gpu:
        mb = per_gpu
    if not mb.is_integer():
        # a GPU runs whole samples: the largest whole micro-batch (at least 1); the passes per step average the
        # uneven share (said in the notes)
        whole = float(max(1, math.floor(mb)))
        notes.append(f"micro-batch {mb:g} samples is not a whole number: {whole:g} used, "
                     f"{per_gpu / whole:.3g} passes per step on average")
        mb = whole
    scale = mb / samples_per_pass
    if scale != 1.0:
        ops = scale_ops(ops, scale)
        if scale < 1:
            notes.append(f"each GPU runs {per_gpu:g} samples per step, fewer than the op list's "
                         f"{samples_per_pass:g}: its FLOPs and bytes scaled by {scale:.3g}, same number of kernels")
        else:
            notes.append(f"GPU micro-batch {mb:g} samples ({scale:g} x the op list's {samples_per_pass:g}): FLOPs "
                         f"and bytes of every kernel scaled by {scale:g} (weight bytes too: an overestimate of "
                         "memory-bound weight reads), same number of kernels per pass")
        samples_per_pass = mb
    passes = per_gpu / samples_per_pass
    stored = "fp16" if precision == "fp8" else precision   # FP8 training keeps 16-bit weights and gradients
    est = estimate_ops(ops, g, wave_quantization=wave_quantization,
                       gemm_precision="fp8" if precision == "fp8" else None)
    if precision == "fp8":
        notes.append(fp8_note(g))
    is_opt = (est["op_class"] == "optimizer").to_numpy()
    pass_ops = est[~is_opt]
    pass_t = float(pass_ops["est_time_s"].sum())
    pass_bound = float(pass_ops["bound_time_s"].sum())
    if training and params > 0:
        upd_bytes = params * UPDATE_BYTES_PER_PARAM[optimizer]
        opt_t = upd_bytes / (g.hbm_bytes_per_s * g.hbm_fraction) + g.launch_s
        opt_bound = upd_bytes / g.hbm_bytes_per_s
        grad_bytes = params * BYTES_PER_ELEMENT.get(stored, 2)
        ar_t, ar_src = allreduce_seconds(grad_bytes, n_gpus, g)
        if ar_t:
            notes.append(f"gradient all-reduce {grad_bytes / 1e6:,.0f} MB over {n_gpus} GPUs: "
                         f"2(N-1)/N x bytes / bus bandwidth ({ar_src}); not overlapped with the backward pass")
    else:
        opt_t = opt_bound = ar_t = 0.0
    step = passes * pass_t + opt_t + ar_t
    bound_step = passes * pass_bound + opt_bound + ar_t
    by = {b: passes * float(pass_ops.loc[pass_ops["est_bound"] == b, "est_time_s"].sum())
          for b in ("compute", "hbm", "launch")}
    by["hbm"] += opt_t
    by["all-reduce"] = ar_t
    bound_by = max(by, key=by.get) if step > 0 else "n/a"
    # memory on one GPU
    state = state_bytes(params, optimizer, training, stored)
    wbytes = params * BYTES_PER_ELEMENT.get(stored, 2)
    acts = activation_bytes_per_sample * samples_per_pass  # one pass is live at a time (grad accumulation)
    cap = g.hbm_capacity
    total = state + acts
    memory = {"weights_bytes": wbytes, "gradients_bytes": wbytes if training else 0.0,
              "optimizer_bytes": max(state - 2 * wbytes, 0.0) if training else 0.0, "activation_bytes": acts,
              "total_bytes": total, "capacity_bytes": cap, "fits": (cap is None) or total <= cap,
              "optimizer": optimizer, "params": params}
    if g.assumed:
        notes.append(f"{g.id}: no published figure in its spec for {', '.join(g.assumed)}; defaults used (assumed)")
    return TrainingEstimate(gpu=g, n_gpus=n_gpus, samples_per_step=sps, samples_per_gpu=per_gpu, passes_per_step=passes,
                            micro_batch=samples_per_pass,
                            pass_time_s=pass_t, optimizer_time_s=opt_t, allreduce_time_s=ar_t, step_time_s=step,
                            samples_per_second=sps / step if step > 0 else math.inf,
                            bound_samples_per_second=sps / bound_step if bound_step > 0 else math.inf,
                            bound_by=bound_by, time_by_bound=by, memory=memory,
                            ops=pd.concat([ops, est], axis=1), notes=notes)
