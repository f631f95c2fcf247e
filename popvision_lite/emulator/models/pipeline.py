"""Pipelined, replicated BERT training at scale: emulate each DISTINCT stage program once and
compose the step (``schedule.py``), the training state and the per-IPU memory.

For each distinct stage (first / middle / last of the pipeline; one graph when S = 1) the stage's
program for ONE micro-batch is built on a one-IPU graph with ONE encoder layer body
(``transformer.build_bert_stage``).  Outlining: the stage's k identical layers share that body's
compute sets, vertex code, vertex state and exchange programs (as PopART outlines them into one
Poplar function called k times), so code is charged once per IPU; every call pays an on-tile copy
of its activations into and out of the body; weights are passed to the body in place.  Recomputation
re-runs the same forward programs (the compiler charges a program object's code once).

Cost of emulation grows with the distinct work (at most 3 stage graphs, one layer each), never with
layers, grad_accum or replicas.
"""

from __future__ import annotations

import math
import time

import numpy as np
import pandas as pd

from popvision_lite.emulator import codelets as C
from popvision_lite.emulator import cost_model as cm
from popvision_lite.emulator import mapping as M
from popvision_lite.emulator import programs as P
from popvision_lite.emulator import schedule as sch
from popvision_lite.emulator.compiler import K_COMPUTE, K_STREAM, K_XG, StepTemplate, compile_graph
from popvision_lite.emulator.graph import Graph
from popvision_lite.emulator.profile_builder import StepTileArray, build_profile
from popvision_lite.emulator.target import Target
from popvision_lite.profile import schema

from .emulator_backend import EmulatorBackend
from .transformer import build_bert_stage

PHASES = ("emb_fwd", "layer_fwd_att", "layer_fwd_ffn", "head", "layer_recompute_att", "layer_recompute_ffn",
          "layer_bwd_ffn", "layer_bwd_att")
ATT_PARAMS = ("wq", "wk", "wv", "wo", "ln1_g", "ln1_b")  # the attention half of a layer; the rest is FFN
# step x tile cells of the profile timeline (= 60,000 steps of one 1472-tile IPU); pipeline cycles beyond
# that budget are elided, so the written profile stays tens of MB whatever S, G and R
MAX_PROFILE_CELLS = 60_000 * 1472
MiB = 1024 * 1024


class StageGraph:
    """One distinct stage program, compiled (timing only)."""

    def __init__(self, cfg, target: Target, stage: int, nstages: int, label: int | None = None,
                 amp: float | None = None):
        be = EmulatorBackend(target, cfg.precision, needs_values=False,
                             available_memory_proportion=cfg.amp_of(0) if amp is None else amp)
        self.handles = build_bert_stage(be, cfg, stage, nstages)
        self.be = be
        phases = []
        for name, _ in be.marks:
            if name in PHASES:
                phases.append(P.Sequence(list(be.phase_programs(name)), name=name))
        self.phase_names = [p.name for p in phases]
        self.program = P.Sequence(phases, name=f"stage{stage if label is None else label}")
        self.c = compile_graph(be.graph, self.program, outline=cfg.outline)
        c = self.c
        T = target.tiles_per_ipu
        self.T = T
        self.cycles = {}
        self.steps = {}
        self.lsteps = {}
        top = {id(p): i for i, p in enumerate(phases)}
        for info in c.progs:
            if id(info.prog) in top and info.parent_id == 0:
                nm = info.prog.name
                self.cycles[nm] = int(c.prog_cycles[info.prog_id])
                f, last = int(c.prog_first[info.prog_id]), int(c.prog_last[info.prog_id])
                self.steps[nm] = c.seq[f:last + 1] if f >= 0 else np.zeros(0, np.int64)
        # liveness step range of each phase (leaves are in program order)
        parent = {info.prog_id: info.parent_id for info in c.progs}
        pid_phase = {info.prog_id: info.prog.name for info in c.progs if info.parent_id == 0}
        for ls, pid in enumerate(c.leaves):
            q = pid
            while q in parent and parent[q] not in (0, -1):
                q = parent[q]
            nm = pid_phase.get(q)
            if nm is not None:
                lo, hi = self.lsteps.get(nm, (ls, ls))
                self.lsteps[nm] = (min(lo, ls), max(hi, ls))

        def per_tile(tensors):
            tot = np.zeros(T, np.int64)
            for t in tensors:
                tot += t.mapping.elements_per_tile(T)
            return tot

        h = self.handles
        lp = h["layer_params"]
        half = {"att": [t for n, t in lp.items() if n in ATT_PARAMS], "ffn": [t for n, t in lp.items() if n not in ATT_PARAMS]}
        self.half_param_elems = {k: per_tile(v) for k, v in half.items()}  # per tile, one attention / FFN block
        self.half_params = {k: int(sum(t.size for t in v)) for k, v in half.items()}
        self.layer_param_elems = per_tile(lp.values())
        self.extra_param_elems = per_tile(h["extra_params"])
        self.layer_params = int(sum(t.size for t in lp.values()))
        self.extra_params = int(sum(t.size for t in h["extra_params"]))
        x = h["x"]
        self.x_tile_bytes = x.mapping.elements_per_tile(T) * x.itemsize
        lf = self.lsteps.get("layer_fwd_ffn")
        ltb = c.liveness_tile_bytes
        self.fwd_saved_tile_bytes = (ltb[lf[1]].astype(np.int64) if (lf and len(ltb)) else np.zeros(T, np.int64))
        # the profile tables of this stage graph; then let the graph (vertex and field arrays) go, so
        # peak memory is one stage graph, not all of them
        self.base = build_profile(c, "timing", cfg.model, {})
        self.num_vertices = sum(g.n for g in be.graph.groups)
        self.num_ops = len(be.ctx.records)
        self.outlined = {"copies": int(c.outlined_copies), "compute_sets": int(c.outlined_cs)}
        self.x_size = int(x.size)
        self.handles = None
        self.be = None
        self.program = None
        c.graph = None
        c.progs = None
        c.copy_plans = None
        c.tensor_tiles = None


_PASS_CACHE: dict = {}


def _elementwise_pass_cycles(target: Target, elements: int, dtype: str) -> int:
    """Cycles of one elementwise pass (out = a op b) over ``elements`` spread over the IPU's tiles,
    costed by the emulator's own elementwise codelet (so it follows the cost model)."""
    elements = int(elements)
    _cache = _PASS_CACHE
    key = (target.device, elements, dtype)
    if key in _cache:
        return _cache[key]
    if elements <= 0:
        return 0
    t1 = Target(target.spec, 1)
    g = Graph(t1)
    mp = M.linear(elements, range(t1.tiles_per_ipu))
    a = g.add_variable("acc", (elements,), dtype, mapping=mp)
    b = g.add_variable("grad", (elements,), dtype, mapping=mp)
    cs = g.add_compute_set("pass")
    tiles, starts, sizes = M.worker_split(a, workers=t1.threads_per_tile)
    g.add_vertices(cs, C.ADD, tiles=tiles, fields={"a": a.regions(starts, sizes), "b": b.regions(starts, sizes),
                                                   "out": a.regions(starts, sizes)})
    c = compile_graph(g, P.Sequence([P.Execute(cs)]))
    _cache[key] = int(c.total_cycles)
    return _cache[key]


def _even(total: int, tiles: int) -> np.ndarray:
    """``total`` bytes spread evenly over ``tiles`` (a sharded, flattened tensor: Poplar maps RTS
    shards linearly over the IPU's tiles)."""
    out = np.full(tiles, int(total) // tiles, np.int64)
    out[: int(total) % tiles] += 1
    return out


def _link_copy_cycles(target: Target, nbytes: int) -> int:
    """Inter-stage exchange closing a pipeline cycle: global sync + activations forward and
    gradients backward (opposite directions, concurrently) over the IPU-Links."""
    em = target.em
    b = np.array([float(nbytes)])
    return int(em["global_sync_cycles"]) + cm.ipu_link_cycles(target, b, b)


def run_pipelined(cfg, device: str = "ipu-mk2", progress=None):
    """Compose the step of ``cfg`` (a bert config) from its distinct stage programs.  Returns
    (profile_data, info dict) - see ``emulated.run_model``."""
    from popvision_lite.emulator.profile_builder import EMULATOR_VERSION

    def tick(stage, frac):
        if progress:
            progress(stage, frac)

    t0 = time.perf_counter()
    wall = {}
    target1 = Target.from_device(device, num_ipus=1)
    split = cfg.split()    # layers per pipeline stage
    blocks = cfg.blocks()  # (attention, FFN) blocks per pipeline stage
    R, G = cfg.replicas, cfg.grad_accum
    S = cfg.stages         # IPUs of a replica
    V = len(split)         # pipeline stages a micro-batch passes through
    wrap = cfg.pipeline_placement == "wrap" and S > 1
    # the IPU of each pipeline stage; wrap: IPU 0, IPU 1 .. S-1, IPU 0 again
    v_ipu = [0] + list(range(1, S)) + [0] if wrap else list(range(S))
    T = target1.tiles_per_ipu
    clock = target1.clock_hz
    em = target1.em
    # the distinct stage graph of each IPU: (embedding here, heads here, availableMemoryProportion)
    kinds = [((i == 0, i == 0) if wrap else (i == 0, i == S - 1)) + (cfg.amp_of(i),) for i in range(S)]
    graphs: dict[tuple, StageGraph] = {}
    distinct = list(dict.fromkeys(kinds))
    for i, k in enumerate(distinct):
        tick(f"building and compiling stage program {i + 1}", 0.05 + 0.5 * i / max(len(distinct), 3))
        stage, nstages = {(True, True): (0, 1), (True, False): (0, 3), (False, True): (2, 3),
                          (False, False): (1, 3)}[k[:2]]
        # with tensor parallelism every IPU of a stage's group runs the same shard of it (cfg.shard())
        graphs[k] = StageGraph(cfg.shard(), target1, stage, nstages, label=kinds.index(k), amp=k[2])
    wall["build_compile"] = time.perf_counter() - t0
    tick("composing the schedule", 0.6)
    wdt = "fp16" if cfg.precision == "fp16" else "fp32"
    wbytes = sch.DTYPE_BYTES[wdt]
    per_param = sch.state_bytes_per_param(cfg.optimizer, cfg.master_weights, cfg.optimizer_state_dtype, wdt)
    sbpe = per_param["optimizer_state"]
    train = bool(cfg.training)
    acc_bytes = (4 if cfg.master_weights else wbytes) if (G > 1 and train) else 0
    if not train:  # inference: no gradients, no optimizer state, no update
        per_param = {"master_weights": 0, "optimizer_moments": 0, "optimizer_state": 0}
        sbpe = 0
    act_bytes = cfg.batch * cfg.seq * cfg.hidden * wbytes
    xcopy = _link_copy_cycles(target1, act_bytes)
    memcpy = float(em["memcpy_bytes_per_cycle"])
    cap = target1.sram_bytes_per_tile
    var = schema.CATEGORY_CODE["variable"]
    ddr_bpc = float(em["ddr_bytes_per_cycle"])
    phased = bool(cfg.streaming_weights)
    # phased execution without a pipeline (one stage per replica) is batch-serialised, as Graphcore's GPT-3 on
    # IPU-PODs runs it (graphcore/examples nlp/gpt3_175B/popxl README, "Phased Execution and RTS"): each layer's
    # weights are loaded once per step for all G micro-batches (forward phase, then again for recompute +
    # backward), its gradient accumulates on chip and is written out once; each layer's input of every
    # micro-batch goes to streaming memory in the forward and comes back for the backward
    bser = phased and V == 1 and train
    # tensor parallelism (Megatron-LM, Shoeybi et al. 2019): each layer half ends its forward with an all-reduce
    # of the (tokens, hidden) activation over the group's IPUs, and its backward with one of the input
    # gradient; recomputation repeats the forward's; the vocabulary-parallel embedding adds one in the forward,
    # the vocabulary-parallel LM head two small ones (softmax max and sum, fp32 per token) and one of its input
    # gradient.  Ring all-reduce over the group's IPU-Links (schedule.allreduce_for)
    tp = int(cfg.tensor_parallel)
    tp_ar = sch.allreduce_for(em, act_bytes, tp, tp, clock) if tp > 1 else 0
    tp_phase = {}
    # all-gather of a (tokens, hidden) activation over the group: half a ring all-reduce's traffic and steps
    tp_ag = tp_ar / 2
    if tp > 1:
        for nm in ("layer_fwd_att", "layer_fwd_ffn", "layer_recompute_att", "layer_recompute_ffn", "layer_bwd_att",
                   "layer_bwd_ffn", "emb_fwd"):
            tp_phase[nm] = tp_ar
        tp_phase["head"] = tp_ar + 2 * sch.allreduce_for(em, cfg.batch * cfg.seq * 4, tp, tp, clock)

    stages = []
    for s in range(S):  # per IPU
        sg = graphs[kinds[s]]
        mine = [v for v in range(V) if v_ipu[v] == s]
        n_att = sum(blocks[v][0] for v in mine)
        n_ffn = sum(blocks[v][1] for v in mine)
        k = sum(split[v] for v in mine)
        cy = {nm: c_ + (tp_phase.get(nm, 0) if c_ else 0) for nm, c_ in sg.cycles.items()}
        call = 2 * int(math.ceil(int(sg.x_tile_bytes.max(initial=0)) / memcpy))  # copy in + out of the body
        hp = sg.half_params
        params_s = n_att * hp["att"] + n_ffn * hp["ffn"] + sg.extra_params
        acc_pass = _elementwise_pass_cycles(target1, params_s, "float16" if wbytes == 2 else "float32") if G > 1 else 0
        layer_wb = sg.layer_params * wbytes
        # phased execution: each layer's weights are loaded from streaming memory before its forward
        # and again before its recompute + backward; its gradient accumulator is read and written
        # back (G > 1) or its gradient written out (G = 1); transfers are not overlapped with compute
        acc_traffic = (2 * sg.layer_params * acc_bytes if G > 1 else layer_wb) if phased else 0
        if phased:
            acc_pass = 0  # the accumulation pass is counted as the read-modify-write traffic
        vst, ddr_mb, stash_units, step_io = [], 0.0, 0, 0.0
        for v in mine:  # (pipeline stage, forward, backward) of each stage this IPU runs
            a_, f_ = blocks[v]
            k_eff = (a_ + f_) / 2  # layer calls of the outlined body (a half-layer = half a call)
            body_f = a_ * cy.get("layer_fwd_att", 0) + f_ * cy.get("layer_fwd_ffn", 0)
            body_b = (a_ * (cy.get("layer_recompute_att", 0) + cy.get("layer_bwd_att", 0))
                      + f_ * (cy.get("layer_recompute_ffn", 0) + cy.get("layer_bwd_ffn", 0)))
            if bser:  # per micro-batch: each layer's input out to DDR and back; the weights once per step
                # a tensor-parallel group holds the input replicated, so each IPU stores its 1/t slice and the
                # group all-gathers it on the way back (Graphcore's 2D tensor parallelism splits x along hidden)
                io_f = int(math.ceil(k_eff * act_bytes / tp / ddr_bpc))
                io_b = io_f + int(math.ceil(k_eff * tp_ag))
                ddr_mb += k_eff * 2 * act_bytes / tp
                step_io += k_eff * (2 * layer_wb + sg.layer_params * (acc_bytes or wbytes))
            else:
                io_f = int(math.ceil(k_eff * layer_wb / ddr_bpc)) if phased else 0
                io_b = int(math.ceil(k_eff * (layer_wb + acc_traffic) / ddr_bpc)) if phased else 0
                ddr_mb += k_eff * (2 * layer_wb + acc_traffic) if phased else 0
            fwd = body_f + k_eff * call + io_f + (cy.get("emb_fwd", 0) if v == 0 else 0)
            bwd = body_b + k_eff * call + io_b + (cy.get("head", 0) if v == V - 1 else 0)
            if v == mine[-1]:
                bwd += acc_pass
            vst.append((v, int(fwd), int(bwd) if train else 0))
            D = sch.stash_depth(v, V) if train else 0
            if not bser:  # batch-serialised: the layers' inputs wait in streaming memory
                stash_units += max(D * int(math.ceil(k_eff)) - 1, 0) if k_eff else 0
        k_mem = int(math.ceil((n_att + n_ffn) / 2))
        # ---- memory of this IPU ----
        mem = sg.c.memory.copy()
        hpe = sg.half_param_elems
        elems = n_att * hpe["att"] + n_ffn * hpe["ffn"] + sg.extra_param_elems
        # the outlined body (in the stage graph) holds one attention and one FFN block's weights
        extra_w = ((0 if phased else max(n_att - 1, 0)) * hpe["att"]
                   + (0 if phased else max(n_ffn - 1, 0)) * hpe["ffn"]) * wbytes
        accum = (sg.extra_param_elems if phased else elems) * acc_bytes
        if bser and G > 1:  # the layer in its phase accumulates its gradient on chip over the G micro-batches
            accum = accum + sg.layer_param_elems * acc_bytes
        state_total = int(elems.sum()) * sbpe
        if cfg.optimizer_state == "onchip" and not phased:
            onchip_state = _even(math.ceil(state_total / R), T) if cfg.rts else elems * sbpe
            stream_buf = np.zeros(T, np.int64)
            streamed = 0
        else:
            onchip_state = np.zeros(T, np.int64)
            per_layer = sg.layer_param_elems * sbpe
            stream_buf = _even(math.ceil(int(per_layer.sum()) / R), T) if cfg.rts else per_layer
            streamed = state_total / (R if cfg.rts else 1)
        D = sch.stash_depth(mine[0], V) if train else 0
        saved = sg.x_tile_bytes if cfg.recompute else sg.fwd_saved_tile_bytes + sg.x_tile_bytes
        stash = stash_units * saved
        mem[:, var, 0] += extra_w + accum + onchip_state
        mem[:, var, 1] = np.maximum(mem[:, var, 1] + stash, stream_buf)
        need = mem.sum(axis=(1, 2))
        code_cats = [schema.CATEGORY_CODE[n] for n in schema.MEMORY_CATEGORIES if n not in ("variable", "constant")]
        n_opt = params_s / (R if cfg.rts else 1)
        passes = sch.OPTIMIZER_PASSES[cfg.optimizer] + (1 if per_param["master_weights"] else 0)
        opt = passes * _elementwise_pass_cycles(target1, int(math.ceil(n_opt)), "float32" if sbpe >= 4 * 2 else "float16")
        ar = sch.allreduce_for(em, params_s * wbytes, R, cfg.ipus, clock)
        if not train:
            opt = ar = 0
        st = sch.stream_cycles(streamed, float(em["ddr_bytes_per_cycle"]), int(em["stream_copy_latency_cycles"]),
                               transfers=k_mem + 1) if streamed else 0
        if step_io:  # batch-serialised weight loads and gradient stores (not overlapped with compute)
            st += int(math.ceil(step_io / ddr_bpc)) + 3 * k_mem * int(em["stream_copy_latency_cycles"])
        stages.append(dict(
            stage=s, layers=k, blocks=(n_att, n_ffn), graph=kinds[s], vstages=vst,
            fwd_cycles=int(sum(f for _, f, _ in vst)), bwd_cycles=int(sum(b for _, _, b in vst)), params=int(params_s),
            ddr_bytes_per_step=int(G * ddr_mb + 2 * streamed + step_io),
            mem=mem, need=need, fits=bool((need <= cap).all()), stash_depth=D,
            optimizer_cycles=int(opt), allreduce_cycles=int(ar), stream_cycles=int(st),
            # bytes behind those times: the gradients the all-reduce reduces (per IPU), the optimizer state
            # streamed in and again out
            allreduce_bytes=int(params_s * wbytes) if (train and R > 1) else 0, stream_bytes=int(streamed),
            bytes={"weights": int((elems * wbytes).sum()), "grad_accum": int(accum.sum()),
                   "optimizer_state_onchip": int(onchip_state.sum()),
                   "optimizer_state_offchip": int(state_total - onchip_state.sum()) if (
                       cfg.optimizer_state == "offchip" or phased) else 0,
                   "master_weights": int(elems.sum()) * per_param["master_weights"],
                   "optimizer_moments": int(elems.sum()) * per_param["optimizer_moments"],
                   "stash": int(stash.sum()), "stream_buffer": int(stream_buf.sum()),
                   "code": int(mem[:, code_cats, :].sum())},
            max_tile={"need": int(need.max()), "code": int(mem[:, code_cats, :].sum(axis=(1, 2)).max()),
                      "optimizer_state_onchip": int(onchip_state.max(initial=0)), "stash": int(stash.max(initial=0)),
                      "grad_accum": int(accum.max(initial=0))},
        ))
    vF, vB, vI = np.zeros(V, np.int64), np.zeros(V, np.int64), np.asarray(v_ipu, np.int64)
    for a_ in stages:
        for v, f, b_ in a_["vstages"]:
            vF[v], vB[v] = f, b_
    pipe = sch.pipeline_cycles(vF, vB, xcopy, G, ipu_of=vI)
    post = [st_["allreduce_cycles"] + st_["optimizer_cycles"] + st_["stream_cycles"] for st_ in stages]
    worst = int(np.argmax(post))
    step_cycles = pipe["pipeline_total_cycles"] + post[worst]
    samples_per_step = R * G * cfg.batch * cfg.packing
    terms = sch.per_step_terms(em, cfg.host_framework, cfg.ipus, R * G * cfg.batch * sch.input_bytes_per_sample(
        "bert", seq=cfg.seq), step_cycles / clock)
    step_seconds = step_cycles / clock + sum(terms.values())
    sps = samples_per_step / step_seconds if step_seconds > 0 else 0.0
    fits = all(st_["fits"] for st_ in stages)
    schedule = dict(
        stages=S, replicas=R, grad_accum=G, micro_batch=cfg.batch, packing=float(cfg.packing),
        samples_per_step=float(samples_per_step), step_seconds=step_seconds, step_cycles=int(step_cycles),
        ipu_step_seconds=step_cycles / clock, per_step_terms=terms, host_framework=getattr(cfg, "host_framework", "none"),
        steady_cycles_per_microbatch=int(pipe["steady_cycles_per_microbatch"]),
        stage_cycles=[int(a["fwd_cycles"] + a["bwd_cycles"]) for a in stages],
        stage_fwd_cycles=[a["fwd_cycles"] for a in stages], stage_bwd_cycles=[a["bwd_cycles"] for a in stages],
        layer_split=list(split), pipeline_placement=cfg.pipeline_placement if wrap else "sequential",
        stage_ipus=list(v_ipu), pipeline_depth=int(V),
        blocks_per_ipu=[list(a["blocks"]) for a in stages], inter_ipu_copy_cycles=int(pipe["copy_cycles"]),
        pipeline_cycles=int(pipe["cycles"]), pipeline_total_cycles=int(pipe["pipeline_total_cycles"]),
        fill_drain_cycles=int(pipe["fill_drain_cycles"]), slowest_stage=int(pipe["slowest_stage"]),
        optimizer_cycles=stages[worst]["optimizer_cycles"], allreduce_cycles=stages[worst]["allreduce_cycles"],
        stream_cycles=stages[worst]["stream_cycles"], stash_depth=[a["stash_depth"] for a in stages],
        optimizer=cfg.optimizer, optimizer_state=cfg.optimizer_state, rts=bool(cfg.rts),
        master_weights=bool(cfg.master_weights), optimizer_state_dtype=cfg.optimizer_state_dtype,
        available_memory_proportion=(list(cfg.available_memory_proportion)
                                     if isinstance(cfg.available_memory_proportion, list | tuple)
                                     else float(cfg.available_memory_proportion)),
        distinct_stage_programs=len(graphs),
        outlined_ops={str(i): sg.outlined for i, sg in enumerate(graphs.values())},
        phased_execution=bool(cfg.streaming_weights), batch_serialised=bool(bser),
        tensor_parallel=tp, ipus=int(cfg.ipus),
        tensor_parallel_allreduce_cycles={nm: int(c_) for nm, c_ in tp_phase.items()},
        tensor_parallel_allreduce_bytes=int(act_bytes) if tp > 1 else 0,
        ddr_bytes_per_step_per_ipu=[a["ddr_bytes_per_step"] for a in stages],
        allreduce_bytes_per_ipu=[a["allreduce_bytes"] for a in stages],
        stream_bytes_per_ipu=[a["stream_bytes"] for a in stages],
        allreduce_links=sch.allreduce_links_text(em, R, cfg.ipus),
        ddr_gb_per_s_needed=max(a["ddr_bytes_per_step"] for a in stages) / step_seconds / 1e9 if step_seconds else 0.0,
    )
    training_state = [dict(ipu=a["stage"], layers=a["layers"], blocks=list(a["blocks"]), params=a["params"],
                           fits=a["fits"],
                           mib={k: v / MiB for k, v in a["bytes"].items()},
                           max_tile_bytes=a["max_tile"]) for a in stages]
    tick("building the profile", 0.8)
    t1 = time.perf_counter()
    pd_ = _profile(cfg, device, target1, graphs, kinds, stages, pipe, schedule, fits, split, blocks)
    pd_.run["schedule"] = schedule
    pd_.run["samples_per_second"] = float(sps)
    pd_.run["training_state"] = training_state
    pd_.run["emulator_version"] = EMULATOR_VERSION
    wall["profile"] = time.perf_counter() - t1
    oom = []
    for a in stages:
        over = np.nonzero(a["need"] > cap)[0]
        for t in over[np.argsort(-a["need"][over], kind="stable")]:  # every tile over (the profile keeps 16)
            oom.append((int(a["stage"] * T + t), int(a["stage"]), int(a["need"][t]), int(cap)))
    oom.sort(key=lambda x: -x[2])
    pd_.run["oom_tiles"] = [list(x) for x in oom[:16]]
    nverts = sum(sg.num_vertices for sg in graphs.values())
    nops = sum(sg.num_ops for sg in graphs.values())
    return pd_, dict(fits=fits, total_cycles=int(step_cycles), seconds=step_seconds, samples_per_second=float(sps),
                     schedule=schedule, oom_report=oom, wall=wall, num_vertices=nverts, num_ops=nops,
                     training_state=training_state)


def _shift_template(t: StepTemplate, s: int, T: int, op_off: int, prog_off: int) -> StepTemplate:
    tiles = (np.arange(T, dtype=np.int64) if t.tiles is None else np.asarray(t.tiles, np.int64)) + s * T
    return StepTemplate(kind=t.kind, prog_id=t.prog_id + prog_off if t.prog_id >= 0 else -1,
                        op_id=t.op_id + op_off if t.op_id >= 0 else -1, ipu=s, duration=t.duration, tiles=tiles,
                        cycles=t.cycles, bytes_in=t.bytes_in, bytes_out=t.bytes_out, busy_max=t.busy_max,
                        busy_sum=t.busy_sum, tiles_active=t.tiles_active, in_sum=t.in_sum, out_sum=t.out_sum)


def _synthetic(kind: int, ipu: int, dur: int, T: int, nbytes: int = 0, nbytes_out: int | None = None) -> StepTemplate:
    """A step the schedule adds (inter-IPU copy, all-reduce, optimizer, DDR stream): every tile of
    the IPU busy for the whole step (``ipu`` -1: all IPUs of the replica; tiles left empty).  ``nbytes`` /
    ``nbytes_out``: bytes the IPU's tiles receive / send in it (spread evenly; out = in unless given)."""
    n_out = nbytes if nbytes_out is None else nbytes_out
    if ipu < 0:
        z = np.zeros(0, np.uint32)
        return StepTemplate(kind=kind, prog_id=-1, op_id=-1, ipu=-1, duration=int(dur), tiles=np.zeros(0, np.int64),
                            cycles=z, bytes_in=z, bytes_out=z, busy_max=int(dur), in_sum=nbytes, out_sum=n_out)
    tiles = np.arange(T, dtype=np.int64) + ipu * T
    cyc = np.full(T, min(int(dur), 2**32 - 1), np.uint32)
    b_in = np.full(T, min(nbytes // max(T, 1), 2**32 - 1), np.uint32)
    b_out = np.full(T, min(n_out // max(T, 1), 2**32 - 1), np.uint32)
    return StepTemplate(kind=kind, prog_id=-1, op_id=-1, ipu=ipu, duration=int(dur), tiles=tiles, cycles=cyc,
                        bytes_in=b_in, bytes_out=b_out, busy_max=int(dur), busy_sum=int(dur) * T, tiles_active=T,
                        in_sum=int(b_in.sum()), out_sum=int(b_out.sum()))


def _halves(n_att: int, n_ffn: int, start_att: bool) -> list[str]:
    """The order of a stage's layer halves: alternating attention / FFN from the stage's start."""
    out, a, f, nxt = [], n_att, n_ffn, "att" if start_att else "ffn"
    while a or f:
        if (nxt == "att" and a) or not f:
            out.append("att")
            a -= 1
            nxt = "ffn"
        else:
            out.append("ffn")
            f -= 1
            nxt = "att"
    return out


def _profile(cfg, device, target1, graphs, kinds, stages, pipe, schedule, fits, split, blocks):
    """One replica's pipeline: per-IPU lanes overlapping in time (fill, steady, drain; middle
    pipeline cycles elided when the timeline would exceed MAX_PROFILE_CELLS), then all-reduce,
    optimizer and DDR stream steps."""
    S = len(stages)  # IPUs of the replica
    T = target1.tiles_per_ipu
    # per-distinct-graph profile tables (ops, programs, ...), concatenated per IPU with offsets
    base = {k: sg.base for k, sg in graphs.items()}
    templates: list[StepTemplate] = []
    tables = {n: [] for n in ("ops", "programs", "compute_sets", "vertices", "variables", "variable_tiles",
                              "liveness_steps")}
    phase_tpl = []  # per IPU: phase -> template ids (global)
    op_counts = {"calls_per_microbatch": [], "runs_per_call": [], "runs_per_step": []}
    op_off = prog_off = cs_off = var_off = l_off = 0
    for s in range(S):
        sg = graphs[kinds[s]]
        bp = base[kinds[s]]
        n_att, n_ffn = stages[s]["blocks"]
        t_off = len(templates)
        templates += [_shift_template(t, s, T, op_off, prog_off) for t in sg.c.templates]
        phase_tpl.append({nm: sg.steps.get(nm, np.zeros(0, np.int64)) + t_off for nm in PHASES})
        tp = int(schedule.get("tensor_parallel", 1))
        for nm, d in (schedule.get("tensor_parallel_allreduce_cycles") or {}).items():
            if d and len(phase_tpl[-1][nm]):  # the phase's all-reduce over the tensor-parallel group, at its end
                ring = int(2 * (tp - 1) / tp * schedule["tensor_parallel_allreduce_bytes"])
                templates.append(_synthetic(K_XG, s, d, T, ring, ring))
                phase_tpl[-1][nm] = np.concatenate([phase_tpl[-1][nm], [len(templates) - 1]])
        ops = bp.ops.copy()
        ops["op_id"] += op_off
        ops["name"] = f"ipu{s}/" + ops["name"]
        ops["ipu"] = s
        # an op of the layer body runs once per attention / FFN block of the IPU per micro-batch, every op
        # G times per step
        att = ops["name"].str.startswith(f"ipu{s}/layer/attention/")
        ffn = ops["name"].str.startswith(f"ipu{s}/layer/") & ~att
        mult = np.where(att, n_att, np.where(ffn, n_ffn, 1)) * cfg.grad_accum
        for col in ("flops", "bytes_sram", "bytes_exchange", "bytes_ipu_link", "bytes_ddr", "cycles", "compute_cycles",
                    "exchange_cycles", "sync_cycles", "stream_cycles"):
            ops[col] = (ops[col].to_numpy() * mult).astype(np.int64)
        # runs of each op per call of its phase program: the phases whose steps contain it (2 when
        # recomputation replays a forward op before its gradient); run["op_counts"] records the counts
        tpl_op = np.array([t.op_id for t in sg.c.templates], np.int64)
        rpc = np.zeros(len(ops), np.int64)
        for nm in PHASES:
            ids = np.unique(tpl_op[sg.steps.get(nm, np.zeros(0, np.int64))])
            rpc[ids[(ids >= 0) & (ids < len(ops))]] += 1
        rpc = np.maximum(rpc, 1)
        calls = np.where(att, n_att, np.where(ffn, n_ffn, 1)).astype(np.int64)
        for key, v in (("calls_per_microbatch", calls), ("runs_per_call", rpc),
                       ("runs_per_step", calls * rpc * cfg.grad_accum)):
            op_counts[key] += [int(x) for x in v]
        tables["ops"].append(ops)
        pr = bp.programs.copy()
        pr["prog_id"] += prog_off
        pr["parent_id"] = np.where(pr["parent_id"] >= 0, pr["parent_id"] + prog_off, -1)
        pr["op_id"] = np.where(pr["op_id"] >= 0, pr["op_id"] + op_off, -1)
        pr["cs_id"] = np.where(pr["cs_id"] >= 0, pr["cs_id"] + cs_off, -1)
        pr["lstep"] = np.where(pr["lstep"] >= 0, pr["lstep"] + l_off, -1)
        pr["first_step"] = -1
        pr["last_step"] = -1
        pr["name"] = pr["name"].where(pr["parent_id"] >= 0, f"ipu{s}/" + pr["name"])
        tables["programs"].append(pr)
        csd = bp.compute_sets.copy()
        csd["cs_id"] += cs_off
        csd["op_id"] = np.where(csd["op_id"] >= 0, csd["op_id"] + op_off, -1)
        tables["compute_sets"].append(csd)
        vx = bp.vertices.copy()
        vx["cs_id"] += cs_off
        vx["tile"] += s * T
        tables["vertices"].append(vx)
        vr = bp.variables.copy()
        vr["var_id"] += var_off
        vr["op_id"] = np.where(vr["op_id"] >= 0, vr["op_id"] + op_off, -1)
        vr["first_lstep"] = np.where(vr["first_lstep"] >= 0, vr["first_lstep"] + l_off, -1)
        vr["last_lstep"] = np.where(vr["last_lstep"] >= 0, vr["last_lstep"] + l_off, -1)
        vr["name"] = f"ipu{s}/" + vr["name"]
        tables["variables"].append(vr)
        vt = bp.variable_tiles.copy()
        vt["var_id"] += var_off
        vt["tile"] += s * T
        tables["variable_tiles"].append(vt)
        ls = bp.liveness_steps.copy()
        ls["lstep"] += l_off
        ls["prog_id"] += prog_off
        ls["max_tile"] += s * T
        tables["liveness_steps"].append(ls)
        op_off += len(ops)
        prog_off += len(pr)
        cs_off += len(csd)
        var_off += len(vr)
        l_off += len(ls)
    # ---- timeline ----
    n = pipe["cycles"]
    durs = pipe["durations"]
    starts = np.concatenate([[0], np.cumsum(durs)[:-1]]).astype(np.int64)
    xc_t = len(templates)
    templates.append(_synthetic(K_XG, -1, pipe["copy_cycles"], T,
                                cfg.batch * cfg.seq * cfg.hidden * (2 if cfg.precision == "fp16" else 4)))
    dur_all = np.array([t.duration for t in templates], np.int64)

    # per IPU: (pipeline stage, forward template ids, backward template ids) of each stage it runs
    work = []
    pos = np.concatenate([[0], np.cumsum([2 * float(x) for x in split])]).astype(np.int64)
    V = len(split)
    for s in range(S):
        pt = phase_tpl[s]
        mine = []
        for v, _f, _b in stages[s]["vstages"]:
            halves = _halves(*blocks[v], start_att=pos[v] % 2 == 0)
            fw = ([pt["emb_fwd"]] if v == 0 else []) + [pt[f"layer_fwd_{h}"] for h in halves]
            bw = ([pt["head"]] if v == V - 1 else []) + [
                np.concatenate([pt[f"layer_recompute_{h}"], pt[f"layer_bwd_{h}"]]) for h in reversed(halves)]
            mine.append((v, fw, bw))
        work.append(mine)

    def cycle_steps(t):
        parts = []
        for s in range(S):
            seq = []
            for v, fw, bw in work[s]:
                if pipe["fwd_on"][t, v]:
                    seq += fw
                if pipe["bwd_on"][t, v]:
                    seq += bw
            ids = np.concatenate(seq) if seq else np.zeros(0, np.int64)
            if len(ids):
                st = starts[t] + np.concatenate([[0], np.cumsum(dur_all[ids])[:-1]])
                parts.append((ids, st, np.full(len(ids), s)))
        if pipe["copy_cycles"]:
            parts.append((np.array([xc_t]), np.array([starts[t] + durs[t] - pipe["copy_cycles"]]), np.array([-1])))
        return parts

    per_cycle = np.zeros(n, np.int64)
    for s in range(S):
        for v, fw, bw in work[s]:
            per_cycle += pipe["fwd_on"][:, v] * sum(len(x) for x in fw) + pipe["bwd_on"][:, v] * sum(len(x) for x in bw)
    # keep one steady-state cycle (it stands for all of them: profile/phases.py), then the fill and the drain,
    # within the step budget
    keep = np.zeros(n, bool)
    budget = max(1, MAX_PROFILE_CELLS // (S * T))
    order = list(range(n))
    Dp = int(pipe["stages"])  # pipeline stages (IPUs, plus one when the placement wraps)
    head, tail = order[: 2 * Dp - 1], order[max(2 * Dp - 1, n - (2 * Dp - 2)):]
    for t in head[-1:] + head[:-1] + tail[::-1]:
        if per_cycle[t] <= budget or not keep.any():
            keep[t] = True
            budget -= per_cycle[t]
    shown = np.nonzero(keep)[0]
    ids_l, st_l, ipu_l = [], [], []
    for t in shown:
        for ids, st, ip in cycle_steps(int(t)):
            ids_l.append(ids)
            st_l.append(st)
            ipu_l.append(ip)
    # after the pipeline: all-reduce, optimizer, stream (per IPU, overlapping lanes)
    t_end = int(starts[-1] + durs[-1]) if n else 0
    R = max(int(cfg.replicas), 1)
    wbytes = 2 if cfg.precision == "fp16" else 4
    for s, a in enumerate(stages):
        off = t_end
        # bytes each IPU moves: its off-chip optimizer state (its 1/R shard with RTS) in and out over DDR, and its
        # gradients in the ring all-reduce over the IPU-Links (2 (R-1)/R x the gradient bytes each way)
        streamed = int(a["bytes"]["optimizer_state_offchip"] / (R if cfg.rts else 1))
        ring = int(2 * (R - 1) / R * a["params"] * wbytes)
        for kind, d, b_in, b_out in ((K_STREAM, a["stream_cycles"] // 2, streamed, 0),
                                     (K_XG, a["allreduce_cycles"], ring, ring), (K_COMPUTE, a["optimizer_cycles"], 0, 0),
                                     (K_STREAM, a["stream_cycles"] - a["stream_cycles"] // 2, 0, streamed)):
            if d <= 0:
                continue
            templates.append(_synthetic(kind, s, d, T, b_in, b_out))
            ids_l.append(np.array([len(templates) - 1]))
            st_l.append(np.array([off]))
            ipu_l.append(np.array([s]))
            off += d
    seq = np.concatenate(ids_l) if ids_l else np.zeros(0, np.int64)
    start = np.concatenate(st_l).astype(np.int64) if st_l else np.zeros(0, np.int64)
    order = np.argsort(start, kind="stable")
    seq, start = seq[order], start[order]
    dur = np.array([t.duration for t in templates], np.int64)[seq] if len(seq) else np.zeros(0, np.int64)
    tpl = templates
    steps = pd.DataFrame({
        "step": np.arange(len(seq), dtype=np.int64),
        "kind": np.array([tpl[i].kind for i in seq], np.int8) if len(seq) else np.zeros(0, np.int8),
        "op_id": np.array([tpl[i].op_id for i in seq], np.int32) if len(seq) else np.zeros(0, np.int32),
        "prog_id": np.array([tpl[i].prog_id for i in seq], np.int32) if len(seq) else np.zeros(0, np.int32),
        "ipu": np.array([tpl[i].ipu for i in seq], np.int16) if len(seq) else np.zeros(0, np.int16),
        "start_cycle": start, "end_cycle": start + dur,
        "busy_max": np.array([tpl[i].busy_max for i in seq], np.int64) if len(seq) else np.zeros(0, np.int64),
        "busy_mean": (np.array([tpl[i].busy_sum for i in seq], np.float64) / max(S * T, 1)) if len(seq) else np.zeros(0),
        "tiles_active": np.array([tpl[i].tiles_active for i in seq], np.int32) if len(seq) else np.zeros(0, np.int32),
        "bytes_in": np.array([tpl[i].in_sum for i in seq], np.int64) if len(seq) else np.zeros(0, np.int64),
        "bytes_out": np.array([tpl[i].out_sum for i in seq], np.int64) if len(seq) else np.zeros(0, np.int64),
    }, columns=list(schema.TABLE_COLUMNS["steps"]))
    elided = int(n - len(shown))
    # wall cycles of the fill and the drain (the first and last 2D - 2 pipeline cycles): profile/phases.py
    nfd = min(2 * Dp - 2, n)
    schedule["fill_cycles"] = int(durs[:nfd].sum())
    schedule["drain_cycles"] = int(durs[max(nfd, n - nfd):].sum()) if n > nfd else 0
    # busy IPU cycles per step kind of each pipeline phase (one run; a step on every IPU counts once per IPU),
    # from every pipeline cycle, drawn or not: the totals need them where the timeline leaves cycles out
    kind_of = np.array([tp.kind for tp in templates], np.int64)
    busy = {ph: np.zeros(len(schema.STEP_KINDS), np.int64) for ph in ("fill", "steady", "drain")}
    for t in [*range(nfd), *([nfd] if n > 2 * nfd else []), *range(max(nfd, n - nfd), n)]:
        ph = "fill" if t < nfd else "drain" if t >= max(nfd, n - nfd) else "steady"
        for ids, _st, ip in cycle_steps(t):
            np.add.at(busy[ph], kind_of[ids], dur_all[ids] * np.where(np.asarray(ip) < 0, S, 1))
    schedule["phase_ipu_cycles"] = {ph: {k: int(v[i]) for i, k in enumerate(schema.STEP_KINDS)}
                                    for ph, v in busy.items()}
    schedule["profile_pipeline_cycles_shown"] = int(len(shown))
    schedule["profile_pipeline_cycles_elided"] = elided
    # micro-batches whose steady-state cycles are not drawn (each elided cycle = one micro-batch slot)
    schedule["elided_microbatches"] = elided
    cat = {n_: pd.concat(v, ignore_index=True) for n_, v in tables.items()}
    # first / last timeline step of every program (leaves from the steps, containers from children)
    pr = cat["programs"]
    npg = len(pr)
    first = np.full(npg, np.iinfo(np.int64).max, np.int64)
    last = np.full(npg, -1, np.int64)
    sp = steps["prog_id"].to_numpy(np.int64)
    ok = sp >= 0
    if ok.any():
        np.minimum.at(first, sp[ok], np.nonzero(ok)[0])
        np.maximum.at(last, sp[ok], np.nonzero(ok)[0])
    parent = pr["parent_id"].to_numpy(np.int64)
    for q in range(npg - 1, -1, -1):  # children come after their parent
        p_ = parent[q]
        if p_ >= 0 and last[q] >= 0:
            first[p_] = min(first[p_], first[q])
            last[p_] = max(last[p_], last[q])
    pr["first_step"] = np.where(last >= 0, first, -1)
    pr["last_step"] = last
    mem = np.concatenate([a["mem"] for a in stages], axis=0)
    # liveness: block-diagonal per IPU (each stage graph's rows on its own tiles)
    L = sum(len(base[kinds[s]].liveness_steps) for s in range(S))
    ltb = np.zeros((L, S * T), np.uint32)
    r = 0
    for s in range(S):
        a = np.asarray(base[kinds[s]].liveness_tile_bytes)
        ltb[r:r + len(a), s * T:(s + 1) * T] = a
        r += len(a)
    info = Target(target1.spec, S).info()
    total = int(schedule["step_cycles"])
    run = {"model": cfg.model, "config": {}, "fits": bool(fits), "timing_only": True, "numeric_checks": {},
           "mode": "timing", "total_cycles": total, "seconds": total / target1.clock_hz,
           "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "oom_tiles": [],
           "profile_note": (f"one replica of {cfg.replicas}" + (
               f" (one IPU of each stage's {cfg.tensor_parallel}-IPU tensor-parallel group drawn; the others run "
               f"the same shard)" if cfg.tensor_parallel > 1 else "")
               + (f"; {elided} of {n} pipeline cycles elided from the timeline" if elided else "")),
           # the ops table holds per-step totals of one replica (flops, bytes_* but min_bytes, cycles):
           # an op runs runs_per_step = calls_per_microbatch x runs_per_call x grad_accum times a step
           "op_counts": dict(op_counts, table="totals per step of one replica; min_bytes per run")}
    return schema.ProfileData(
        target=info, run=run, memory=mem, steps=steps,
        step_tile_cycles=StepTileArray(tpl, seq, "cycles", S * T),
        step_tile_bytes_in=StepTileArray(tpl, seq, "bytes_in", S * T),
        step_tile_bytes_out=StepTileArray(tpl, seq, "bytes_out", S * T),
        ops=cat["ops"], programs=cat["programs"], compute_sets=cat["compute_sets"], vertices=cat["vertices"],
        variables=cat["variables"], variable_tiles=cat["variable_tiles"], liveness_steps=cat["liveness_steps"],
        liveness_tile_bytes=ltb, extra=dict(base[kinds[0]].extra))


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
        state = (np.concatenate([_even(math.ceil(int(n) * sbpe / R), T) for n in per_ipu]) if cfg.rts
                 else elems * sbpe)
        streamed = 0.0
    else:
        state = np.zeros(target.num_tiles, np.int64)
        streamed = float(per_ipu.max(initial=0)) * sbpe / (R if cfg.rts else 1)
    mem = np.asarray(pd_.memory).copy()
    var = schema.CATEGORY_CODE["variable"]
    mem[:, var, 0] += acc + state
    pd_.memory = mem
    need = mem.sum(axis=(1, 2))
    cap = target.sram_bytes_per_tile
    fits = bool((need <= cap).all())
    over = np.nonzero(need > cap)[0]
    oom = [(int(t), int(t // T), int(need[t]), int(cap)) for t in over[np.argsort(-need[over], kind="stable")]]
    n_max = int(per_ipu.max(initial=0))
    passes = sch.OPTIMIZER_PASSES[cfg.optimizer] + (1 if per_param["master_weights"] else 0)
    opt = passes * _elementwise_pass_cycles(target, int(math.ceil(n_max / (R if cfg.rts else 1))),
                                            "float32" if sbpe >= 8 else "float16") if n_max else 0
    accp = _elementwise_pass_cycles(target, n_max, "float16" if wbytes == 2 else "float32") if (G > 1 and n_max) else 0
    ar = sch.allreduce_for(em, n_max * wbytes, R, cfg.ipus, target.clock_hz)
    st = sch.stream_cycles(streamed, float(em["ddr_bytes_per_cycle"]), int(em["stream_copy_latency_cycles"])) \
        if streamed else 0
    micro = int(res.total_cycles) + accp
    step = G * micro + ar + opt + st
    samples = R * G * cfg.batch * (cfg.packing if cfg.model == "bert" else 1)
    in_bytes = R * G * cfg.batch * sch.input_bytes_per_sample(cfg.model, seq=getattr(cfg, "seq", 0), image=getattr(cfg, "image", 0))
    terms = sch.per_step_terms(em, getattr(cfg, "host_framework", "none"), cfg.ipus, in_bytes, step / target.clock_hz)
    step_seconds = step / target.clock_hz + sum(terms.values())
    schedule = dict(stages=nI, replicas=R, grad_accum=G, micro_batch=cfg.batch, samples_per_step=float(samples),
                    step_seconds=step_seconds, ipu_step_seconds=step / target.clock_hz, per_step_terms=terms,
                    host_framework=getattr(cfg, "host_framework", "none"),
                    step_cycles=int(step), steady_cycles_per_microbatch=int(micro),
                    stage_cycles=[int(micro)], optimizer_cycles=int(opt), allreduce_cycles=int(ar),
                    stream_cycles=int(st), fill_drain_cycles=0, optimizer=cfg.optimizer,
                    optimizer_state=cfg.optimizer_state, rts=bool(cfg.rts), master_weights=bool(cfg.master_weights),
                    optimizer_state_dtype=cfg.optimizer_state_dtype,
                    note=("whole-graph path: one micro-batch emulated (its own update ops included), repeated "
                          "grad_accum times, then all-reduce / optimizer / DDR stream"))
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
