"""A training step on N GPUs with their own placement: tensor x pipeline x data parallelism as Megatron-LM lays a
transformer out, searched or stated (pure: pandas / numpy, no Qt).

The GPUs do not inherit the IPU run's placement: the estimate takes the whole model's kernels of one micro-batch
(``model_pass``, a tensor-parallel IPU shard scaled back by ``tensor_parallel``), lays them out on the GPUs and
composes the step (Narayanan et al., SC 2021, "Efficient Large-Scale Language Model Training on GPU Clusters
Using Megatron-LM"; Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models"):

* **tensor parallel t** (transformers only, within one NVLink domain, t dividing the heads and the FFN): each GPU
  runs its share of the layer (``tensor_parallel.device_share``; with sequence parallelism the norms and residual
  adds are split along the sequence too).  Per layer and micro-batch the group exchanges the (tokens x hidden)
  activation A eight times (sequence parallel: an all-gather before and a reduce-scatter after each of the two
  GEMM pairs, forward and backward; without it four all-reduces, the same volume): 8 (t-1)/t A / NCCL bus
  bandwidth over NVLink; overlapped with the layer's GEMMs where the framework overlaps it (Transformer Engine's
  userbuffers, NeMo's ``ub_tp_comm_overlap``): only what outlasts them is exposed.
* **pipeline parallel p** (transformers only, p dividing the layers, interleaved in v virtual stages each):
  ceil(L / p) layers per GPU, the embedding on the first stage and the heads on the last; the step is
  (m + (p - 1) / v) stage times for m micro-batches per pipeline (1F1B; the bubble (p - 1) / v stage times,
  Narayanan et al. eq. 2); each boundary sends A / t forward and back per virtual stage (over the network when
  a node holds less than a whole pipeline stage group), overlapped with compute (NeMo ``overlap_p2p_comm``).
* **data parallel d**: the gradients of the GPU's parameters (P / (t p)) reduced over d GPUs: ring all-reduce,
  2 (d-1)/d x bytes / bus bandwidth; with a distributed optimizer (ZeRO stage 1, Rajbhandari et al. 2020; Megatron's
  ``--use-distributed-optimizer``, NeMo's ``distributed_fused_adam``) a reduce-scatter of the gradients and an
  all-gather of the parameters, the same volume.  NVLink bus bandwidth within a node, the network's across
  nodes.  A framework that overlaps it (NeMo ``overlap_grad_sync`` / ``overlap_param_sync``) hides it behind one
  micro-batch's stage time; otherwise it is added whole (conservative).
* **memory per GPU**: the parameters P / (t p) x bytes per parameter (mixed precision, ZeRO's count: 2 + 2 + the
  optimizer's fp32 state, that state / d with a distributed optimizer) + the activations the first pipeline
  stage keeps: its in-flight micro-batches (min(m, p), x (1 + (p - 1) / (p v)) interleaved; Korthikanti et al.
  sec. 4.2.3) x ceil(L / p) layers x the per-layer activations of a micro-batch (``activation_bytes_per_sample``).

:func:`search` tries every placement the constraints allow (bounded: t in the powers of two up to a node, p among
the divisors of the layers, a few micro-batches and interleavings) and keeps the fastest that fits; a stated
placement (``tp``, ``pp``, ``vp``, ``micro_batch``) narrows the search to it.  Models that are not transformers
run data parallel only (t = p = 1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from popvision_lite.analysis import gpu_estimate as ge
from popvision_lite.analysis import tensor_parallel as tp_mod
from popvision_lite.errors import ConfigError

# GPU software as it trains a model: what each framework does that the step and the memory depend on
FRAMEWORKS = {
    "megatron": dict(distributed_optimizer=True, sequence_parallel=True, tp_overlap=True, dp_overlap=True,
                     short="Megatron-LM / NeMo", label="Megatron-LM / NeMo (distributed optimizer, sequence parallel, tensor-parallel and "
                           "gradient communication overlapped)",
                     source="NeMo MLPerf GPT-3 configs (training_results_v3.1 NVIDIA/benchmarks/gpt3/implementations/"
                            "pytorch: USE_DIST_OPTIMIZER=True, SEQ_PARALLEL True, TP_COMM_OVERLAP=True, "
                            "distributed_fused_adam.yaml overlap_grad_sync / overlap_param_sync True)"),
    "ddp": dict(distributed_optimizer=False, sequence_parallel=False, tp_overlap=False, dp_overlap=False,
                short="PyTorch DDP", label="PyTorch DistributedDataParallel (data parallel only, every GPU keeps the whole optimizer "
                      "state; the gradient all-reduce not overlapped: conservative)",
                source="torch.nn.parallel.DistributedDataParallel"),
}
# search bounds: placements tried per verdict stay in the low thousands (each composition is arithmetic; kernel
# estimates are made once per (t, micro-batch))
MAX_TP = 8
MAX_MICRO_BATCHES = 6
MAX_VIRTUAL = 12
# Korthikanti et al. 2022 sec. 4.1: a transformer layer in 16-bit training keeps s*b*h*(34 + 5*a*s/h) bytes for its
# backward pass (no recomputation): 34 s b h of linear-layer inputs, norms, GELU and dropout masks, 5 a s^2 b of
# attention scores, softmax and its dropout (a fused attention kernel that keeps no scores, FlashAttention, drops
# them); with t-way tensor and sequence parallelism every term / t (sec. 4.2.2).
KORTHIKANTI_LINEAR_BYTES = 34
KORTHIKANTI_ATTENTION_BYTES = 5


def activation_bytes_per_sample(cfg: dict, tp: int = 1, sequence_parallel: bool = False,
                                scores_kept: bool = True) -> float | None:
    """Bytes of activations a GPU framework keeps per sequence for the backward pass of a transformer run, on one
    GPU of a t-way tensor-parallel group (Korthikanti et al. 2022), or None when the config does not describe a
    transformer.  A packed run's samples are sequences of ``seq / packing`` tokens (each sequence attends to
    itself, as the GPU's unpadded kernels run it); ``scores_kept`` False: the attention kernel keeps no score
    matrix (FlashAttention); the embeddings' and heads' activations are not counted (small beside the layers)."""
    try:
        h, a, s, n = (float(cfg[k]) for k in ("hidden", "heads", "seq", "layers"))
    except (KeyError, TypeError, ValueError):
        return None
    if not str(cfg.get("model", "")).lower().startswith(("bert", "gpt")) or min(h, a, s, n) <= 0:
        return None
    tokens = s / max(float(cfg.get("packing", 1.0) or 1.0), 1.0)
    t = max(int(tp), 1)
    linear = KORTHIKANTI_LINEAR_BYTES * tokens * h
    if t > 1:
        # without sequence parallelism the norms' and dropouts' 10 s b h stay whole on every GPU (sec. 4.2.1)
        linear = linear / t if sequence_parallel else (24 * tokens * h / t + 10 * tokens * h)
    scores = KORTHIKANTI_ATTENTION_BYTES * a * tokens * tokens / t if scores_kept else 0.0
    return n * (linear + scores)


@dataclass(frozen=True)
class Placement:
    """How a step's GPUs split the model: tensor x pipeline x data parallel, the micro-batch, the interleaving,
    and what the framework does (``FRAMEWORKS``)."""

    tp: int = 1
    pp: int = 1
    dp: int = 1
    vp: int = 1
    micro_batch: int = 1
    framework: str = "ddp"

    @property
    def gpus(self) -> int:
        return self.tp * self.pp * self.dp

    @property
    def flags(self) -> dict:
        return FRAMEWORKS[self.framework]

    def text(self) -> str:
        """'TP 4 x PP 8 (interleaved 12) x DP 16 = 512 GPUs, micro-batch 1, Megatron-LM / NeMo'."""
        pp = f"PP {self.pp}" + (f" (interleaved {self.vp})" if self.vp > 1 else "")
        return (f"TP {self.tp} x {pp} x DP {self.dp} = {self.gpus} GPU{'s' if self.gpus != 1 else ''}, "
                f"micro-batch {self.micro_batch}, {self.flags['short']}")


@dataclass
class Layout:
    """The per-micro-batch pieces of one GPU's pass at a (t, micro-batch): estimated kernels, and their time by
    part of the model."""

    est: pd.DataFrame          # kernels + gpu_estimate.estimate_ops columns
    layer_s: float             # all L layers of one micro-batch on one GPU of the group
    first_s: float             # embedding (first pipeline stage)
    last_s: float              # heads, loss (last pipeline stage)
    layer_gemm_s: float        # of layer_s: the GEMM kernels (what tensor-parallel communication overlaps with)
    rows: float                # tokens of one micro-batch (the activation A = rows x hidden)
    hidden: float
    by_bound: dict             # time of the whole pass by what bounds each kernel (compute / hbm / launch)
    bound_s: float             # the roofline bound of the whole pass


def layer_mask(kernels: pd.DataFrame) -> np.ndarray:
    """Kernels of the repeated layer body: ``.../layer/...`` (pipelined profiles) or ``layer<i>/...`` (one graph)."""
    names = kernels["name"].astype(str)
    return (names.str.contains("/layer/", regex=False) | names.str.match(r"^(ipu\d+/)?layer\d*/")).to_numpy()


def _first_mask(kernels: pd.DataFrame) -> np.ndarray:
    names = kernels["name"].astype(str)
    return names.str.contains("embedding", regex=False).to_numpy()


def is_transformer(cfg: dict, kernels: pd.DataFrame) -> bool:
    """A run whose GPU side can be split Megatron-style: a bert / gpt config with layers, and annotated kernels
    with split GEMMs."""
    if not str(cfg.get("model", "")).lower().startswith(("bert", "gpt")):
        return False
    try:
        if int(cfg.get("layers") or 0) < 1:
            return False
    except (TypeError, ValueError):
        return False
    return "tp_split" in kernels.columns and bool((kernels["tp_split"].astype(str) == "n").any())


def _unique(kernels: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray]:
    """The distinct kernels of a list (a layer body repeats L times) and how often each runs."""
    key = pd.util.hash_pandas_object(kernels.astype(str), index=False) if len(kernels) else \
        pd.Series([], dtype="uint64")
    codes, uniq = pd.factorize(key, sort=False)
    first = np.full(len(uniq), -1)
    first[codes[::-1]] = np.arange(len(codes))[::-1]
    counts = np.bincount(codes, minlength=len(uniq)).astype(float)
    return kernels.iloc[first].reset_index(drop=True), counts


def layout(kernels: pd.DataFrame, gpu: ge.GpuModel, tp: int, micro_batch: int, samples_per_pass: float,
           precision: str, framework: str, unique: tuple | None = None) -> Layout:
    """Estimate one GPU's kernels of one micro-batch at tensor parallel ``tp`` (each distinct kernel once, weighted
    by how often it runs: ``unique`` = :func:`_unique` of ``kernels`` when the caller has it)."""
    k, counts = unique if unique is not None else _unique(kernels)
    k = tp_mod.device_share(k, tp, sequence_parallel=FRAMEWORKS[framework]["sequence_parallel"]) if tp > 1 else k
    k = ge.scale_ops(k, micro_batch / samples_per_pass)
    est = ge.estimate_ops(k, gpu, gemm_precision="fp8" if precision == "fp8" else None)
    est = pd.concat([k, est], axis=1)
    est["runs"] = counts
    est = est[(est["op_class"] != "optimizer").to_numpy()].reset_index(drop=True)
    w = est["runs"].to_numpy(dtype=float)
    t = est["est_time_s"].to_numpy(dtype=float) * w
    lm = layer_mask(est)
    fm = _first_mask(est) & ~lm
    gemm = (est["op_class"] == "gemm").to_numpy()
    rows = hidden = math.nan
    if "tp_rows" in est.columns:
        r = est["tp_rows"].to_numpy(dtype=float)
        ok = np.isfinite(r) & lm
        if ok.any():
            rows = float(np.median(r[ok]))
            hidden = float(np.median(est["tp_hidden"].to_numpy(dtype=float)[ok]))
    bound = est["est_bound"].to_numpy()
    return Layout(est=est, layer_s=float(t[lm].sum()), first_s=float(t[fm].sum()), last_s=float(t[~lm & ~fm].sum()),
                  layer_gemm_s=float(t[lm & gemm].sum()), rows=rows, hidden=hidden,
                  by_bound={b: float(t[bound == b].sum()) for b in ("compute", "hbm", "launch")},
                  bound_s=float((est["bound_time_s"].to_numpy(dtype=float) * w).sum()))


def _divisors(n: int, cap: int | None = None) -> list[int]:
    out = [d for d in range(1, int(math.isqrt(n)) + 1) if n % d == 0]
    out = sorted(set(out + [n // d for d in out]))
    return [d for d in out if cap is None or d <= cap]


def _spread(values: list[int], keep: int) -> list[int]:
    """At most ``keep`` of the sorted ``values``, spread evenly, the largest always kept."""
    if len(values) <= keep:
        return values
    idx = np.unique(np.round(np.linspace(0, len(values) - 1, keep)).astype(int))
    return [values[i] for i in idx]


def bus_bandwidth(gpu: ge.GpuModel, group_span_gpus: int, ranks_per_node: int = 1) -> tuple[float, str]:
    """(NCCL bus bandwidth, where from) of a collective over GPUs spanning ``group_span_gpus`` consecutive ranks:
    NVLink within one node, the network across nodes.  Across nodes every GPU has its own NIC (the device file's
    ``network_bus_bytes_per_s`` is per GPU: DGX A100 / H100 / H200, one ConnectX per GPU) and NCCL runs one ring
    per NIC, so a group with ``ranks_per_node`` of its ranks in each node crosses the node boundary through that
    many NICs: ranks_per_node x the per-NIC bus bandwidth (NVIDIA/nccl-tests #119, NCCL maintainer: "24GB/s is
    the peak performance per 200G NIC ... 96GB/s is the target" for 4 NICs per node), never more than NVLink's.
    A point-to-point send (``ranks_per_node`` 1) has one NIC."""
    node = gpu.gpus_per_node or 8
    if group_span_gpus <= node or gpu.network_bus_bytes_per_s is None:
        if gpu.allreduce_bytes_per_s is None:
            raise ConfigError(f"{gpu.id}: no estimator.allreduce_bus_bytes_per_s in its device spec; cannot estimate "
                              "communication between GPUs")
        return gpu.allreduce_bytes_per_s, "NVLink"
    nics = max(1, min(int(ranks_per_node), node))
    bw = gpu.network_bus_bytes_per_s * nics
    if gpu.allreduce_bytes_per_s is not None:
        bw = min(bw, gpu.allreduce_bytes_per_s)
    return bw, "network" if nics == 1 else f"network ({nics} NICs per node)"


@dataclass
class Setting:
    """What a step is asked to run: the step's samples, the model's size and the optimizer."""

    samples_per_step: float
    samples_per_pass: float
    params: float
    optimizer: str
    precision: str
    layers: int = 1
    activation_bytes: object = None   # callable(tp, sequence_parallel) -> bytes per sample, or a float
    training: bool = True


def _activation(setting: Setting, tp: int, sp: bool) -> float:
    a = setting.activation_bytes
    return float(a(tp, sp)) if callable(a) else float(a or 0.0)


def _gpu_memory(setting: Setting, pl: Placement, gpu: ge.GpuModel, gpu_params: float, stored: str, m: float,
                stage_layers: int, L: int) -> dict:
    """Memory per GPU: weights, gradients, optimizer state (sharded by a distributed optimizer) and the
    activations of the micro-batches in flight on the GPU's ``stage_layers`` of the ``L`` layers."""
    flags = pl.flags
    state_pp = ge.STATE_BYTES_PER_PARAM[setting.optimizer] if setting.training else ge.BYTES_PER_ELEMENT.get(stored, 2)
    if setting.training and flags["distributed_optimizer"]:
        state_pp = 4 + (state_pp - 4) / pl.dp           # 16-bit weights and gradients whole, the fp32 state / d
    state = gpu_params * state_pp
    per_sample = _activation(setting, pl.tp, flags["sequence_parallel"])
    in_flight = min(m, pl.pp) * (1 + (pl.pp - 1) / (pl.pp * pl.vp) if pl.vp > 1 else 1.0)
    acts = per_sample * pl.micro_batch * in_flight * stage_layers / L
    cap = gpu.hbm_capacity
    total = state + acts
    wbytes = gpu_params * ge.BYTES_PER_ELEMENT.get(stored, 2)
    memory = {"weights_bytes": wbytes, "gradients_bytes": wbytes if setting.training else 0.0,
              "optimizer_bytes": max(state - 2 * wbytes, 0.0) if setting.training else 0.0, "activation_bytes": acts,
              "total_bytes": total, "capacity_bytes": cap, "fits": (cap is None) or total <= cap,
              "optimizer": setting.optimizer, "params": setting.params, "params_per_gpu": gpu_params}
    return memory


def compose(lay: Layout, gpu: ge.GpuModel, pl: Placement, setting: Setting) -> ge.TrainingEstimate:
    """The step of ``pl`` from the per-micro-batch layout ``lay`` (made at ``pl.tp``, ``pl.micro_batch``)."""
    flags = pl.flags
    L = max(int(setting.layers), 1)
    per_pipe = setting.samples_per_step / pl.dp                # samples each pipeline runs per step
    m = per_pipe / pl.micro_batch                              # micro-batches per pipeline per step
    stage_layers = math.ceil(L / pl.pp)
    layer1 = lay.layer_s / L
    if pl.pp == 1:
        stage = lay.layer_s + lay.first_s + lay.last_s
    else:
        stage = stage_layers * layer1 + max(lay.first_s, lay.last_s)
    comm: dict[str, float] = {}
    notes = []
    node = gpu.gpus_per_node or 8
    act = lay.rows * lay.hidden * 2 if math.isfinite(lay.rows) and math.isfinite(lay.hidden) else 0.0
    # tensor parallel: 8 (t-1)/t A per layer and micro-batch over NVLink (the group lies in one node)
    tp_exposed = 0.0
    if pl.tp > 1 and act > 0:
        bw, _ = bus_bandwidth(gpu, pl.tp)
        per_layer = 8 * (pl.tp - 1) / pl.tp * act / bw
        gemm1 = lay.layer_gemm_s / L
        tp_exposed = max(0.0, per_layer - gemm1) if flags["tp_overlap"] else per_layer
        comm["tensor parallel"] = m * stage_layers * tp_exposed
        notes.append(f"tensor parallel {pl.tp}: {8 * (pl.tp - 1) / pl.tp * act / 1e6:,.1f} MB per layer and "
                     f"micro-batch over NVLink ({per_layer * 1e3:,.2f} ms; "
                     + ("overlapped with the layer's GEMMs, " if flags["tp_overlap"] else "not overlapped, ")
                     + f"{tp_exposed * 1e3:,.2f} ms exposed)")
    stage_t = stage + stage_layers * tp_exposed
    # pipeline: bubble and the boundary sends (overlapped with compute).  Megatron orders ranks tensor, data,
    # pipeline (the tensor-parallel group fastest): consecutive stages lie t x d ranks apart, on another node
    # once t x d fills one
    bubble = (pl.pp - 1) / pl.vp * stage_t if pl.pp > 1 else 0.0
    if pl.pp > 1 and act > 0:
        bw, where = bus_bandwidth(gpu, pl.tp * pl.dp + 1 if pl.tp * pl.dp >= node else 1)
        p2p = 2 * pl.vp * (act / pl.tp) / bw
        exposed = max(0.0, p2p - stage_t)
        comm["pipeline sends"] = m * exposed
        notes.append(f"pipeline {pl.pp} stages x {pl.vp} virtual: bubble (p-1)/v = {(pl.pp - 1) / pl.vp:g} stage "
                     f"times ({bubble * 1e3:,.1f} ms per step); boundary sends {2 * pl.vp * act / pl.tp / 1e6:,.1f} MB "
                     f"per micro-batch over the {where} ({p2p * 1e3:,.2f} ms, overlapped with compute)")
    pipe = m * stage + bubble          # the exposed tensor-parallel time is in comm
    # data parallel: the GPU's gradients, reduced over d GPUs
    gpu_params = setting.params / (pl.tp * pl.pp)
    stored = "fp16" if setting.precision == "fp8" else setting.precision
    grad_bytes = gpu_params * ge.BYTES_PER_ELEMENT.get(stored, 2)
    dp_t = 0.0
    if pl.dp > 1 and setting.training and grad_bytes > 0:
        # the group's ranks in one node: d ranks t apart (Megatron's order: tensor fastest, then data)
        per_node = max(1, min(pl.dp, node // pl.tp)) if pl.tp <= node else 1
        bw, where = bus_bandwidth(gpu, pl.tp * pl.dp, per_node)
        dp_full = 2 * (pl.dp - 1) / pl.dp * grad_bytes / bw
        dp_t = max(0.0, dp_full - stage_t) if flags["dp_overlap"] else dp_full
        comm["data parallel"] = dp_t
        how = ("reduce-scatter of the gradients + all-gather of the parameters (distributed optimizer)"
               if flags["distributed_optimizer"] else "ring all-reduce of the gradients")
        notes.append(f"data parallel {pl.dp}: {how}, {grad_bytes / 1e6:,.0f} MB per GPU over the {where} "
                     f"({dp_full * 1e3:,.1f} ms; " + ("overlapped with one micro-batch, " if flags["dp_overlap"]
                                                     else "not overlapped, ")
                     + f"{dp_t * 1e3:,.1f} ms exposed)")
    # optimizer update of the GPU's (shard of the) parameters
    opt_params = gpu_params / (pl.dp if flags["distributed_optimizer"] else 1)
    if setting.training and opt_params > 0:
        upd_bytes = opt_params * ge.UPDATE_BYTES_PER_PARAM[setting.optimizer]
        opt = upd_bytes / (gpu.hbm_bytes_per_s * gpu.hbm_fraction) + gpu.launch_s
        opt_bound = upd_bytes / gpu.hbm_bytes_per_s
    else:
        opt = opt_bound = 0.0
    step = pipe + sum(comm.values()) + opt
    sps = setting.samples_per_step / step if step > 0 else math.inf
    memory = _gpu_memory(setting, pl, gpu, gpu_params, stored, m, stage_layers, L)
    full = max(lay.layer_s + lay.first_s + lay.last_s, 1e-30)   # the stage's share of the whole pass's bounds
    by = {b: m * v * stage / full for b, v in lay.by_bound.items()}
    by["hbm"] += opt
    by["communication"] = sum(comm.values())
    by["pipeline bubble"] = bubble
    bound_by = max(by, key=by.get) if step > 0 else "n/a"
    # the roofline bound of the same step: the kernels' bounds, the optimizer's bytes at the full bandwidth, the
    # same communication (an upper limit on speed, not an estimate)
    bound_step = m * lay.bound_s * stage / full + opt_bound + sum(comm.values())
    return ge.TrainingEstimate(
        gpu=gpu, n_gpus=pl.gpus, samples_per_step=setting.samples_per_step, samples_per_gpu=per_pipe,
        passes_per_step=m, micro_batch=float(pl.micro_batch), pass_time_s=stage_t, optimizer_time_s=opt,
        allreduce_time_s=comm.get("data parallel", 0.0), step_time_s=step, samples_per_second=sps,
        bound_samples_per_second=setting.samples_per_step / bound_step if bound_step > 0 else math.inf,
        bound_by=bound_by, time_by_bound=by, memory=memory, ops=lay.est, notes=notes, placement=pl, comm_s=comm,
        bubble_s=bubble)


def candidates(n_gpus: int, cfg: dict, setting: Setting, transformer: bool, node: int, framework: str,
               tp: int | None = None, pp: int | None = None, vp: int | None = None,
               micro_batch: int | None = None) -> list[Placement]:
    """Every placement of ``n_gpus`` GPUs the constraints allow (bounded, see the module docstring); the stated
    parts fixed."""
    L = max(int(setting.layers), 1)
    heads = int(cfg.get("heads") or 1) if transformer else 1
    ffn = int(cfg.get("ffn") or 4 * int(cfg.get("hidden") or 1)) if transformer else 1
    tps = [tp] if tp else ([t for t in (1, 2, 4, 8, 16) if t <= min(MAX_TP, node) and heads % t == 0 and ffn % t == 0]
                           if transformer else [1])
    pps = [pp] if pp else (_divisors(L) if transformer else [1])
    out = []
    gbs = setting.samples_per_step
    for t in tps:
        for p in pps:
            if t * p > n_gpus or n_gpus % (t * p):
                continue
            d = n_gpus // (t * p)
            share = gbs / d
            if micro_batch:
                mbs = [micro_batch]
            elif 1 <= share <= ge.MAX_PASSES and float(share).is_integer():
                # at most 2^16 trial divisions; a file's 2^53 samples per step took 10^8 (~50 s per search)
                divs = ge.divisors(int(share))
                # whole multiples of the IPU's micro-batch first (the op list's own batch), then any divisor
                ipu = setting.samples_per_pass
                mult = [x for x in divs if float(ipu).is_integer() and x % int(ipu) == 0]
                mbs = _spread(mult or divs, MAX_MICRO_BATCHES)
            else:
                mbs = [max(1, math.floor(share))]
            for mb in mbs:
                m = share / mb
                vps = [vp] if vp else [1]
                if not vp and p > 1 and float(m).is_integer() and int(m) % p == 0:
                    vps = [v for v in _divisors(L // p, MAX_VIRTUAL) if (L // p) % v == 0] if L % p == 0 else [1]
                for v in vps:
                    out.append(Placement(tp=t, pp=p, dp=d, vp=v, micro_batch=int(mb), framework=framework))
    return out


def search(kernels: pd.DataFrame, gpu, n_gpus: int, cfg: dict, setting: Setting, *, framework: str | None = None,
           tp: int | None = None, pp: int | None = None, vp: int | None = None,
           micro_batch: int | None = None, memo: dict | None = None) -> tuple[ge.TrainingEstimate, dict]:
    """The fastest placement of ``n_gpus`` GPUs that fits (or the one needing the least memory when none fits),
    with what the search tried: ``{"tried": n, "fitting": k, "framework": ..., "stated": {...}}``.

    ``memo``: a dict the caller keeps for one ``kernels`` list (same object, unchanged) over several searches (the
    validation report's measured rows of one benchmark): the distinct kernels (:func:`_unique`) and each
    per-micro-batch :class:`Layout` are computed once in it, not once per search; each is a function of the
    kernels and of what its key holds, so every search gives what it gives without one."""
    g = gpu if isinstance(gpu, ge.GpuModel) else ge.gpu_model(gpu)
    n_gpus = int(n_gpus)
    if n_gpus < 1:
        raise ConfigError(f"--gpus {n_gpus}: must be at least 1")
    transformer = is_transformer(cfg, kernels)
    fw = framework or ("megatron" if transformer else "ddp")
    if fw not in FRAMEWORKS:
        raise ConfigError(f"GPU framework {fw!r}: choose one of {', '.join(FRAMEWORKS)}")
    if not transformer and ((tp or 1) > 1 or (pp or 1) > 1):
        raise ConfigError("--gpu-tp / --gpu-pp: only a transformer (bert / gpt) profile can be split over GPUs by "
                          "tensor or pipeline parallelism; this one runs data parallel")
    for name, v in (("--gpu-tp", tp), ("--gpu-pp", pp), ("--gpu-vp", vp), ("--gpu-micro-batch", micro_batch)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int | float) or v < 1 or v != int(v)):
            raise ConfigError(f"{name} {v!r}: must be a whole number (1 or more)")
    if tp and n_gpus % tp:
        raise ConfigError(f"--gpu-tp {tp}: must divide --gpus {n_gpus}")
    if tp and transformer:
        heads = int(cfg.get("heads") or 1)
        if heads % tp:
            raise ConfigError(f"--gpu-tp {tp}: must divide the model's {heads} attention heads")
    if pp and (setting.layers % pp or n_gpus % (pp * (tp or 1))):
        raise ConfigError(f"--gpu-pp {pp}: must divide the model's {setting.layers} layers and --gpus {n_gpus} / TP")
    node = g.gpus_per_node or 8
    cands = candidates(n_gpus, cfg, setting, transformer, node, fw, tp, pp, vp, micro_batch)
    if not cands:
        raise ConfigError(f"no placement of {n_gpus} GPUs with the stated parts (TP {tp}, PP {pp}, interleaving "
                          f"{vp}, micro-batch {micro_batch}) divides the model and its {setting.samples_per_step:g} "
                          "samples per step")
    lays: dict[tuple, tuple] = {} if memo is None else memo.setdefault("layouts", {})  # key -> (GPU, Layout)
    if memo is None or "unique" not in memo:
        uniq = _unique(kernels)
        if memo is not None:
            memo["unique"] = uniq
    else:
        uniq = memo["unique"]
    best = best_fit = None
    fitting = 0
    for pl in cands:
        key = (g.name, pl.tp, pl.micro_batch, setting.samples_per_pass, setting.precision, fw)
        if key not in lays or lays[key][0] != g:  # (a GPU model of that name with other constants: its own)
            lays[key] = (g, layout(kernels, g, pl.tp, pl.micro_batch, setting.samples_per_pass, setting.precision, fw,
                                   unique=uniq))
        e = compose(lays[key][1], g, pl, setting)
        if e.fits:
            fitting += 1
            if best_fit is None or e.samples_per_second > best_fit.samples_per_second:
                best_fit = e
        if best is None or e.memory["total_bytes"] < best.memory["total_bytes"]:
            best = e
    chosen = best_fit or best
    info = {"tried": len(cands), "fitting": fitting, "framework": fw,
            "stated": {k: v for k, v in (("tp", tp), ("pp", pp), ("vp", vp), ("micro_batch", micro_batch)) if v}}
    if len(cands) > 1:
        how = (f"searched {len(cands)} placements, {fitting} fit; the fastest that fits" if best_fit else
               f"searched {len(cands)} placements and NONE fits in {g.name}'s memory; the one needing the least")
    else:
        how = "as stated"
    chosen.notes.insert(0, f"GPU placement {chosen.placement.text()}: {how}")
    chosen.notes.append(f"GPU framework: {FRAMEWORKS[fw]['label']} ({FRAMEWORKS[fw]['source']})")
    return chosen, info

