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

Every rate comes from the device spec; the two fabric figures the spec schema has no field for are
constants below with their sources.
"""

from __future__ import annotations

import math

import numpy as np

# IPU-POD fabric (vendor, Graphcore IPU-M2000 / Bow-2000 datasheets: "GW-Links 2 x 100 Gbps"
# between IPU-PODs; an IPU-M2000 holds 4 IPUs, an IPU-POD16 16).  Per IPU: 2 x 100e9 / 8 / 4.
GW_LINK_BYTES_PER_S_PER_IPU = 2 * 100e9 / 8 / 4
IPUS_PER_POD = 16  # IPU-Link domain of an IPU-POD16; larger pods reach other POD16s over GW-Links (assumption)

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
                          link_latency_cycles: int) -> int:
    """Cycles of a ring all-reduce (= reduce-scatter + all-gather, also the RTS pattern) of ``nbytes``
    per IPU across ``replicas``: each IPU sends and receives 2 (R-1)/R x nbytes over its IPU-Links, in
    2 (R-1) latency-bound steps.  Runs that span more than one IPU-POD16 reduce hierarchically: inside
    each POD16 over IPU-Links, across PODs over the GW-Links (rate above)."""
    R = int(replicas)
    if R <= 1 or nbytes <= 0:
        return 0
    pods = max(1, math.ceil(ipus / IPUS_PER_POD))
    pods = min(pods, R)
    r_in = max(1, R // pods)
    cyc = 0.0
    if r_in > 1:
        cyc += 2 * (r_in - 1) / r_in * nbytes / link_bytes_per_cycle + 2 * (r_in - 1) * link_latency_cycles
    if pods > 1:
        gw_bpc = GW_LINK_BYTES_PER_S_PER_IPU / clock_hz
        cyc += 2 * (pods - 1) / pods * (nbytes / r_in) / gw_bpc + 2 * (pods - 1) * link_latency_cycles
    return int(math.ceil(cyc))


def state_bytes_per_param(optimizer: str, master_weights: bool, state_dtype: str, weight_dtype: str) -> dict:
    """Bytes per parameter of each piece of training state besides the weight itself."""
    master = 4 if (master_weights and DTYPE_BYTES[weight_dtype] < 4) else 0
    moments = OPTIMIZER_STATES[optimizer] * DTYPE_BYTES[state_dtype]
    return {"master_weights": master, "optimizer_moments": moments, "optimizer_state": master + moments}


def optimizer_state_bytes(params: int, optimizer: str, master_weights: bool = False, state_dtype: str = "fp32",
                          weight_dtype: str = "fp16") -> int:
    """params x bytes per element x states (+ fp32 master weights)."""
    return int(params) * state_bytes_per_param(optimizer, master_weights, state_dtype, weight_dtype)["optimizer_state"]


def stream_cycles(state_bytes: float, ddr_bytes_per_cycle: float, latency_cycles: int, transfers: int = 1) -> int:
    """Cycles to load optimizer state from streaming memory and store it back (2 x bytes)."""
    if state_bytes <= 0:
        return 0
    return int(math.ceil(2 * state_bytes / ddr_bytes_per_cycle)) + 2 * transfers * int(latency_cycles)
