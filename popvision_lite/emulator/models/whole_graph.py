"""Replication, gradient accumulation and training state of a model on the whole-graph path (mlp / conv / gnn,
any builder without stage programs, an imported ONNX model): one emulated micro-batch of one replica composed
into the training step."""

from __future__ import annotations

import math

import numpy as np

from popvision_lite.emulator import schedule as sch
from popvision_lite.profile import schema
from popvision_lite.profile.assemble import VariableRow, append_variables

from .step_terms import MiB, elementwise_pass_cycles, even_bytes


def compose_whole_graph(cfg, be, res, pd_) -> tuple[dict, bool, list]:
    """Replication, gradient accumulation and training state for a model on the whole-graph path
    (mlp / conv / gnn, or any builder without stage programs): the graph is one micro-batch of one
    replica; the step runs it ``grad_accum`` times back to back (no pipelining across its IPUs),
    then the same all-reduce / optimizer / DDR-stream arithmetic as the BERT composition.  Training
    state (accumulators, optimizer state) is added to the profile's memory per tile from the
    weights' tile layout.  Returns (schedule, fits, oom_report) and updates ``pd_`` in place."""
    target = be.graph.target
    em = target.em
    T, nI = target.tiles_per_ipu, target.num_ipus
    R, G = cfg.replicas, cfg.grad_accum
    wdt = "fp16" if cfg.precision == "fp16" else "fp32"
    wbytes = sch.DTYPE_BYTES[wdt]
    per_param = sch.state_bytes_per_param(cfg.optimizer, cfg.master_weights, cfg.optimizer_state_dtype, wdt)
    sbpe = per_param["optimizer_state"]
    elems = np.zeros(target.num_tiles, np.int64)
    mult = getattr(be, "multiplicity", {})
    for w in be.weights:  # an outlined block's weights stand for every block of its kind
        elems += w.mapping.elements_per_tile(target.num_tiles) * mult.get(w.id, 1)
    per_ipu = elems.reshape(nI, T).sum(axis=1)
    acc = elems * ((4 if cfg.master_weights else wbytes) if G > 1 else 0)
    if cfg.optimizer_state == "onchip":
        state = (np.concatenate([even_bytes(math.ceil(int(n) * sbpe / R), T) for n in per_ipu]) if cfg.rts
                 else elems * sbpe)
        streamed = 0.0
    else:
        state = np.zeros(target.num_tiles, np.int64)
        streamed = float(per_ipu.max(initial=0)) * sbpe / (R if cfg.rts else 1)
    mem = np.asarray(pd_.memory).copy()
    var = schema.CATEGORY_CODE["variable"]
    mem[:, var, 0] += acc + state
    pd_.memory = mem
    sdt = cfg.optimizer_state_dtype
    acc_dt = "fp32" if cfg.master_weights else wdt
    append_variables(pd_, [VariableRow(f"gradient accumulators ({G} micro-batches, one per weight)",
                                       sch.TENSOR_DTYPE[acc_dt], "(weights)", acc),
                           VariableRow(f"optimizer state ({cfg.optimizer}: {sbpe:g} B per weight, {sdt})",
                                       sch.TENSOR_DTYPE[sdt], "(weights)", state)])
    need = mem.sum(axis=(1, 2))
    cap = target.sram_bytes_per_tile
    fits = bool((need <= cap).all())
    over = np.nonzero(need > cap)[0]
    oom = [(int(t), int(t // T), int(need[t]), int(cap)) for t in over[np.argsort(-need[over], kind="stable")]]
    n_max = int(per_ipu.max(initial=0))
    passes = sch.OPTIMIZER_PASSES[cfg.optimizer] + (1 if per_param["master_weights"] else 0)
    opt = passes * elementwise_pass_cycles(target, int(math.ceil(n_max / (R if cfg.rts else 1))),
                                            "float32" if sbpe >= 8 else "float16") if n_max else 0
    accp = elementwise_pass_cycles(target, n_max, "float16" if wbytes == 2 else "float32") if (G > 1 and n_max) else 0
    ar = sch.allreduce_for(em, n_max * wbytes, R, cfg.ipus, target.clock_hz)
    st = sch.state_stream_cycles(streamed, float(em["ddr_bytes_per_cycle"]), int(em["stream_copy_latency_cycles"])) \
        if streamed else 0
    micro = int(res.total_cycles) + accp
    step = G * micro + ar + opt + st
    samples = R * G * cfg.batch * (cfg.packing if cfg.model == "bert" else 1)
    in_bytes = R * G * cfg.batch * sch.input_bytes_per_sample(cfg.model, seq=getattr(cfg, "seq", 0), image=getattr(cfg, "image", 0))
    di = int(getattr(cfg, "device_iterations", 1) or 1)
    host_fw, host_basis = sch.resolve_host_framework(getattr(cfg, "host_framework", "auto"), cfg.model)
    terms = sch.per_step_terms(em, host_fw, cfg.ipus, in_bytes, step / target.clock_hz, device_iterations=di)
    step_seconds = step / target.clock_hz + sum(terms.values())
    schedule = dict(stages=nI, replicas=R, grad_accum=G, micro_batch=cfg.batch, samples_per_step=float(samples),
                    step_seconds=step_seconds, ipu_step_seconds=step / target.clock_hz, per_step_terms=terms,
                    host_framework=host_fw, host_framework_basis=host_basis,
                    step_cycles=int(step), steady_cycles_per_microbatch=int(micro),
                    stage_cycles=[int(micro)], optimizer_cycles=int(opt), allreduce_cycles=int(ar),
                    stream_cycles=int(st), fill_drain_cycles=0, optimizer=cfg.optimizer,
                    optimizer_state=cfg.optimizer_state, rts=bool(cfg.rts), master_weights=bool(cfg.master_weights),
                    optimizer_state_dtype=cfg.optimizer_state_dtype,
                    note=("whole-graph path: one micro-batch emulated (its own update ops included), repeated "
                          "grad_accum times, then all-reduce / optimizer / DDR stream"))
    if di > 1:  # optimizer steps per host call (absent: 1)
        schedule["device_iterations"] = di
    pd_.run.update(fits=fits, oom_tiles=[list(x) for x in oom[:16]], total_cycles=int(step),
                   seconds=step / target.clock_hz,
                   profile_note=f"timeline: one micro-batch of one replica; the step runs it {G} times")
    pd_.run["training_state"] = [dict(
        ipu=i, layers=-1, params=int(per_ipu[i]), fits=bool((need[i * T:(i + 1) * T] <= cap).all()),
        mib={"weights": per_ipu[i] * wbytes / MiB, "grad_accum": acc[i * T:(i + 1) * T].sum() / MiB,
             "optimizer_state_onchip": state[i * T:(i + 1) * T].sum() / MiB,
             "optimizer_state_offchip": (per_ipu[i] * sbpe / MiB) if cfg.optimizer_state == "offchip" else 0.0,
             "master_weights": per_ipu[i] * per_param["master_weights"] / MiB,
             "optimizer_moments": per_ipu[i] * per_param["optimizer_moments"] / MiB, "stash": 0.0,
             "stream_buffer": 0.0, "code": 0.0},
        max_tile_bytes={"need": int(need[i * T:(i + 1) * T].max()), "code": 0,
                        "optimizer_state_onchip": int(state[i * T:(i + 1) * T].max(initial=0)), "stash": 0,
                        "grad_accum": int(acc[i * T:(i + 1) * T].max(initial=0))}) for i in range(nI)]
    return schedule, fits, oom
