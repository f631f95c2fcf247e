"""Schedule arithmetic of pipelined, replicated training (pure functions, no graphs).

The emulator emulates each DISTINCT stage program once, for one micro-batch (``pipeline.py``);
this module composes those per-stage cycle counts into an optimizer step the way PopART runs a
pipelined model (PopART user guide, "Pipelining"; Graphcore "Memory and performance optimisation
on the IPU", sections on pipelining, replication and replicated tensor sharding):

* One pipeline *cycle* = every IPU runs its stage's work for the micro-batches in flight, then all
  IPUs sync and exchange the stage boundaries' activations (forward) and gradients (backward) over
  the IPU-Links.  The cycle lasts as long as its slowest IPU plus that exchange.
* IPU ``s`` of ``S`` runs the forward of micro-batch ``m`` in cycle ``m + s`` and its backward in
  cycle ``m + 2S - 2 - s`` (the last stage runs forward, loss and backward in one cycle), so a step
  of ``G`` micro-batches takes ``G + 2S - 2`` cycles (fill, steady state, drain) and stage ``s``
  holds ``2(S - s) - 1`` micro-batches in flight (its stash).
* After the last cycle: gradient all-reduce across replicas (ring: reduce-scatter + all-gather;
  with replicated tensor sharding the update runs on the 1/R shard between the two), the optimizer
  update, and the streaming of off-chip optimizer state from/to DDR.

* Per-step terms outside the IPU clock domain (:func:`per_step_terms`, in seconds, not IPU cycles): the
  framework's step loop on the host (engine run, host-IPU sync, weight-update and stream callbacks), the
  host-link transfer of the step's input samples (prefetched by the data streams, so only the part that
  outlasts the IPU's step is exposed) and the synchronisation of the host servers of a run past one host.
  They do not scale with the IPU clock.

Every rate comes from the device spec (``[emulator]``: the IPU-Link domain, GW-Link and host-link rates,
and the calibrated host step constants, each with its source and basis).
"""

from __future__ import annotations

import math

# IPU-POD fabric defaults for a spec without the fields (values and sources: resources/devices/ipu-mk2.toml
# emulator.ipu_link_domain_ipus, emulator.gw_link_bytes_per_s_per_ipu).
GW_LINK_BYTES_PER_S_PER_IPU = 2 * 100e9 / 8 / 4
IPU_LINK_DOMAIN_IPUS = 64

# Elementwise passes over the parameters per optimizer step (derived from the update rules):
#   sgd      w -= lr g                                                     1
#   momentum v = mu v + g; w -= lr v                                       2
#   adam     m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; u = m/(sqrt v+e); w -= lr u     4
#   lamb     adam's 3 + ||w||, ||u|| (two reductions) + w -= lr (||w||/||u||) u          6
#   lars     ||w||, ||g|| (two reductions); v = mu v + lr (||w||/||g||) (g + wd w); w -= v  4
# (You et al. 2020, "Large batch optimization for deep learning: training BERT in 76 minutes";
#  You et al. 2017, "Large batch training of convolutional networks" for LARS).
# fp32 master weights add one pass (the fp16 copy of the updated master).
OPTIMIZER_PASSES = {"sgd": 1, "momentum": 2, "adam": 4, "lamb": 6, "lars": 4}
OPTIMIZER_STATES = {"sgd": 0, "momentum": 1, "adam": 2, "lamb": 2, "lars": 1}
DTYPE_BYTES = {"fp16": 2, "fp32": 4, "float16": 2, "float32": 4}
# the tensor dtype (as graph tensors and the profile's variables name it) of a config dtype
TENSOR_DTYPE = {"fp16": "float16", "fp32": "float32"}


def stash_depth(stage: int, stages: int) -> int:
    """Micro-batches stage ``stage`` holds between its forward and its backward: 2(S - s) - 1."""
    return 2 * (stages - stage) - 1


def pipeline_cycles(fwd, bwd, copy_cycles: int, grad_accum: int, ipu_of=None) -> dict:
    """Compose one optimizer step's pipeline part from per-stage cycles of one micro-batch.

    ``fwd[s]``, ``bwd[s]``: cycles of stage s's forward / backward (recomputation included) for one
    micro-batch; ``copy_cycles``: the inter-IPU exchange closing every pipeline cycle (ignored when
    S == 1).  ``ipu_of[s]``: the IPU running stage s (default: stage s on IPU s); an IPU that holds
    several stages (MLPerf BERT's IPU 0 runs the embedding first and the last layers and heads at the
    end) runs all of its stages' work of a pipeline cycle one after another.  Returns durations of
    every pipeline cycle, who runs what (per stage), the work per IPU, and the totals."""
    import numpy as np  # (here: a run config's checks import this module and need no numpy)

    F = np.asarray(fwd, np.int64)
    B = np.asarray(bwd, np.int64)
    S, G = len(F), int(grad_accum)
    ipu = np.arange(S) if ipu_of is None else np.asarray(ipu_of, np.int64)
    nipu = int(ipu.max()) + 1 if S else 0
    onehot = np.zeros((S, nipu), np.int64)
    onehot[np.arange(S), ipu] = 1
    inference = not B.any()
    n = G + S - 1 if inference else G + 2 * S - 2  # inference: forward only, no backward wave
    t = np.arange(n)[:, None]
    s = np.arange(S)[None, :]
    mf = t - s                       # micro-batch whose forward stage s runs in cycle t
    mb = t - (2 * S - 2 - s)         # ... and whose backward
    f_on = (mf >= 0) & (mf < G)
    b_on = (mb >= 0) & (mb < G) & (not inference)
    work = f_on * F[None, :] + b_on * B[None, :]
    ipu_work = work @ onehot  # (cycles, IPUs)
    xc = int(copy_cycles) if nipu > 1 else 0
    dur = ipu_work.max(axis=1) + xc
    per_ipu = (F + B) @ onehot
    steady = int(per_ipu.max()) + xc
    total = int(dur.sum())
    return dict(stages=S, grad_accum=G, cycles=n, durations=dur, work=work, ipu_work=ipu_work, fwd_on=f_on,
                bwd_on=b_on, fwd_mb=mf, bwd_mb=mb, steady_cycles_per_microbatch=steady, copy_cycles=xc,
                pipeline_total_cycles=total, fill_drain_cycles=total - G * steady, ipu_of=ipu,
                slowest_stage=int(np.argmax(per_ipu)))


def ring_allreduce_cycles(nbytes: float, replicas: int, ipus: int, clock_hz: float, link_bytes_per_cycle: float,
                          link_latency_cycles: int, domain_ipus: int = IPU_LINK_DOMAIN_IPUS,
                          gw_bytes_per_s_per_ipu: float = GW_LINK_BYTES_PER_S_PER_IPU) -> int:
    """Cycles of a ring all-reduce (= reduce-scatter + all-gather, also the RTS pattern) of ``nbytes``
    per IPU across ``replicas``: each IPU sends and receives 2 (R-1)/R x nbytes over its IPU-Links, in
    2 (R-1) latency-bound steps.  Runs that span more than one IPU-Link domain (an IPU-POD64: its 64 IPUs
    are one 2D torus of IPU-Links; IPU-POD128 / 256 join POD64s over GW-Links) reduce hierarchically:
    inside each domain over IPU-Links, across domains over the GW-Links (``gw_bytes_per_s_per_ipu``)."""
    R = int(replicas)
    if R <= 1 or nbytes <= 0:
        return 0
    pods = max(1, math.ceil(ipus / max(1, int(domain_ipus))))
    pods = min(pods, R)
    r_in = max(1, R // pods)
    cyc = 0.0
    if r_in > 1:
        cyc += 2 * (r_in - 1) / r_in * nbytes / link_bytes_per_cycle + 2 * (r_in - 1) * link_latency_cycles
    if pods > 1:
        gw_bpc = gw_bytes_per_s_per_ipu / clock_hz
        cyc += 2 * (pods - 1) / pods * (nbytes / r_in) / gw_bpc + 2 * (pods - 1) * link_latency_cycles
    return int(math.ceil(cyc))


def link_domains(em: dict, replicas: int, ipus: int) -> int:
    """How many IPU-Link domains (IPU-POD64s joined over GW-Links) a run of ``ipus`` IPUs in ``replicas``
    replicas spans: 1 = its all-reduce stays on IPU-Links."""
    domain = max(1, int(em.get("ipu_link_domain_ipus", IPU_LINK_DOMAIN_IPUS)))
    return min(max(1, math.ceil(ipus / domain)), max(1, int(replicas)))


def allreduce_links_text(em: dict, replicas: int, ipus: int) -> str:
    """The links the gradient all-reduce uses, in words (the Execution view's all-reduce steps say it)."""
    pods = link_domains(em, replicas, ipus)
    domain = max(1, int(em.get("ipu_link_domain_ipus", IPU_LINK_DOMAIN_IPUS)))
    if pods == 1:
        return "IPU-Links"
    return f"IPU-Links inside each {domain}-IPU IPU-Link domain, GW-Links between {pods} of them"


def allreduce_for(em: dict, nbytes: float, replicas: int, ipus: int, clock_hz: float) -> int:
    """:func:`ring_allreduce_cycles` with the fabric figures of a device spec's ``[emulator]`` table."""
    return ring_allreduce_cycles(nbytes, replicas, ipus, clock_hz, float(em["ipu_link_bytes_per_cycle"]),
                                 int(em["ipu_link_latency_cycles"]),
                                 int(em.get("ipu_link_domain_ipus", IPU_LINK_DOMAIN_IPUS)),
                                 float(em.get("gw_link_bytes_per_s_per_ipu", GW_LINK_BYTES_PER_S_PER_IPU)))


# Host frameworks whose step loop has a calibrated per-step cost in the device spec ("none": the IPUs alone, no
# host term at all; "auto": the framework inferred from the model, resolve_host_framework; "unknown": a run
# whose framework is neither stated nor inferable - its host step is left out and it says so); "poptorch":
# PopTorch's training loop as optimum-graphcore's IPUTrainer runs it (one call of the poptorch model per
# device_iterations optimizer steps).  The ONE table: the run-config field's choices are HOST_FRAMEWORK_CHOICES.
HOST_FRAMEWORKS = ("none", "popart", "tensorflow", "poptorch")
HOST_FRAMEWORK_CHOICES = ("auto", *HOST_FRAMEWORKS)
# The framework Graphcore's own published training runs of a model family used, for "auto" (each with its source);
# a family not listed has no inferable framework ("unknown").
HOST_FRAMEWORK_OF_MODEL = {
    "bert": ("popart", "Graphcore's MLPerf Training BERT (v1.0 - v2.0) ran the PopART application "
                       "(training_results_v1.1 Graphcore/benchmarks/bert/implementations/popart)"),
    "resnet": ("tensorflow", "Graphcore's MLPerf Training ResNet-50 (v1.0 - v2.0) ran TensorFlow 1.15 "
                             "(training_results_v1.1 Graphcore/benchmarks/resnet/implementations/tensorflow)"),
}
def resolve_host_framework(requested: str, model: str) -> tuple[str, str]:
    """(the framework a run's host terms are costed with, how it was chosen): a stated framework as stated;
    "auto" (the default) the framework Graphcore ran the model family with (``HOST_FRAMEWORK_OF_MODEL``), else
    "unknown" (no host step: the run's throughput says so)."""
    req = str(requested or "auto")
    if req != "auto":
        return req, "stated"
    fam = str(model or "").lower()
    for key, (fw, why) in HOST_FRAMEWORK_OF_MODEL.items():
        if fam.startswith(key):
            return fw, f"inferred from the model: {why}"
    return "unknown", (f"not stated, and no published training run of a {fam or 'this'} model on IPUs names one: "
                       "the host step loop is left out")


# IPUs one host server drives in the measured systems (value and source: resources/devices/ipu-mk2.toml
# emulator.ipus_per_host)
IPUS_PER_HOST = 64


def host_servers(em: dict, ipus: int) -> int:
    """Host servers a run of ``ipus`` IPUs spans (``emulator.ipus_per_host`` per server, at least 1)."""
    return max(1, math.ceil(max(1, int(ipus)) / max(1, int(em.get("ipus_per_host", IPUS_PER_HOST)))))


def multi_host_rounds(em: dict, ipus: int) -> int:
    """Synchronisation rounds between the host servers of a step: ceil(log2 hosts) (one per doubling, as a
    recursive-doubling barrier or all-reduce across the hosts' processes takes); 0 on one host."""
    return math.ceil(math.log2(host_servers(em, ipus)))


def input_bytes_per_sample(model: str, seq: int = 0, image: int = 0) -> int:
    """Bytes the host streams to the IPUs per sample.  BERT (packed, as Graphcore's MLPerf PopART data
    loader feeds it): input ids, segment ids, positions and the attention-mask index, uint32 per token
    (4 x 4 B x seq).  ResNet: the 8-bit RGB image the MLPerf runs stream (image^2 x 3 B; the IPU
    normalises it), the label ignored.  Other models: 0 (synthetic data)."""
    if model == "bert":
        return 16 * int(seq)
    if model == "gpt":  # input ids, attention mask and labels, int32 per token (poptorch streams int64 as int32)
        return 12 * int(seq)
    if model in ("resnet", "resnet50", "conv"):
        return 3 * int(image) ** 2
    return 0


def per_step_terms(em: dict, framework: str, ipus: int, input_bytes_per_step: float,
                   ipu_step_seconds: float, device_iterations: int = 1) -> dict[str, float]:
    """Seconds an optimizer step pays outside the IPU clock domain, by name (added to the step's
    ``ipu_step_seconds``; ``schedule["per_step_terms"]``):

    Framework "none" models the IPUs alone: every term is 0.  Framework "unknown" (not stated, not inferable:
    ``resolve_host_framework``) has no host step; the host-link input and the multi-host synchronisation, which no
    framework's loop contains, are kept.

    * ``host_step``: the framework's step loop (one ``engine.run`` / ``session.run`` / poptorch call per
      ``device_iterations`` optimizer steps: host-IPU sync, weight-update and stream callbacks); the device
      spec's calibrated ``host_step_seconds_<framework>`` per call (0 for framework "none"), shared by the
      call's ``device_iterations`` steps.
    * ``host_input``: the step's input bytes over the host links (``host_link_bytes_per_s_per_ipu`` x
      IPUs), minus the IPU step it overlaps with (the data streams prefetch): 0 unless the link is slower
      than the IPUs.
    * ``multi_host``: a run past one host server (``ipus_per_host``) synchronises its hosts' processes every
      step: the device spec's calibrated ``multi_host_step_seconds`` per round, ``multi_host_rounds`` rounds
      (0 on one host)."""
    if framework not in (*HOST_FRAMEWORKS, "unknown"):
        raise ValueError(f"host_framework must be one of {', '.join(HOST_FRAMEWORKS)}, got {framework!r}")
    if framework == "none":
        return {"host_step": 0.0, "host_input": 0.0, "multi_host": 0.0}
    host = (float(em.get(f"host_step_seconds_{framework}", 0.0)) / max(1, int(device_iterations))
            if framework != "unknown" else 0.0)
    link = float(em.get("host_link_bytes_per_s_per_ipu", 0.0)) * max(1, int(ipus))
    xfer = float(input_bytes_per_step) / link if link > 0 else 0.0
    multi = float(em.get("multi_host_step_seconds", 0.0)) * multi_host_rounds(em, ipus)
    return {"host_step": host, "host_input": max(0.0, xfer - float(ipu_step_seconds)), "multi_host": multi}


def state_bytes_per_param(optimizer: str, master_weights: bool, state_dtype: str, weight_dtype: str) -> dict:
    """Bytes per parameter of each piece of training state besides the weight itself."""
    master = 4 if (master_weights and DTYPE_BYTES[weight_dtype] < 4) else 0
    moments = OPTIMIZER_STATES[optimizer] * DTYPE_BYTES[state_dtype]
    return {"master_weights": master, "optimizer_moments": moments, "optimizer_state": master + moments}


def optimizer_state_bytes(params: int, optimizer: str, master_weights: bool = False, state_dtype: str = "fp32",
                          weight_dtype: str = "fp16") -> int:
    """params x bytes per element x states (+ fp32 master weights)."""
    return int(params) * state_bytes_per_param(optimizer, master_weights, state_dtype, weight_dtype)["optimizer_state"]


def state_stream_cycles(state_bytes: float, ddr_bytes_per_cycle: float, latency_cycles: int,
                        transfers: int = 1) -> int:
    """Cycles to load optimizer state from streaming memory and store it back (2 x bytes): the schedule's
    ``stream_cycles`` (not a StreamCopy step's duration, which is ``cost_model.stream_cycles``)."""
    if state_bytes <= 0:
        return 0
    return int(math.ceil(2 * state_bytes / ddr_bytes_per_cycle)) + 2 * transfers * int(latency_cycles)
