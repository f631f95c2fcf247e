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
from functools import partial
from types import SimpleNamespace

import numpy as np

from popvision_lite.emulator import cost_model as cm
from popvision_lite.emulator import programs as P
from popvision_lite.emulator import schedule as sch
from popvision_lite.emulator.backends.op_memo import OpMemo
from popvision_lite.emulator.compile import CopyMemo
from popvision_lite.emulator.profile_builder import EMULATOR_VERSION
from popvision_lite.emulator.progress import within
from popvision_lite.emulator.target import Target
from popvision_lite.profile import schema
from popvision_lite.profile.columns import Columns

from .pipeline_profile import PART_TABLES, _ipu_parts, compose_profile
from .stage_cache import StageGraphCache
from .stages import ATT_PARTS, PHASES, StageGraph, build_stage, stage_params
from .step_terms import MiB, elementwise_pass_cycles, even_bytes


def _link_copy_cycles(target: Target, nbytes: int) -> int:
    """Inter-stage exchange closing a pipeline cycle: global sync + activations forward and
    gradients backward (opposite directions, concurrently) over the IPU-Links."""
    em = target.em
    b = np.array([float(nbytes)])
    return int(em["global_sync_cycles"]) + cm.ipu_link_cycles(target, b, b)


# Share of a composed run's progress line that building and compiling the stage graphs take (the rest: the
# schedule, the profile, then writing it from emulated.WRITE_STARTS): on the POD16 BERT-Large config they took
# 17.5 s of 24 s, writing the profile 5.4 s (cProfile, this machine); each distinct stage graph gets an equal share,
# a third of it for building the graph and the rest for its compile (2.7 s and 5.5 s there), which reports the
# share of its programs compiled.
STAGE_GRAPHS_START = 0.02
STAGE_GRAPHS_END = 0.72
STAGE_BUILD_SHARE = 1 / 3


class MemoryOnly:
    """What a composed run without its profile (``run_pipelined(profile=False)``) holds in place of one: the
    memory per tile and category of every IPU of one replica, the target and the run dict (no tables, no
    timeline)."""

    def __init__(self, memory: np.ndarray, target, run: dict):
        self.memory, self.target, self.run = memory, target, run


def run_pipelined(cfg, device: str = "ipu-mk2", progress=None, profile: bool = True):
    """Compose the step of ``cfg`` (a bert config) from its distinct stage programs.  Returns
    (profile_data, info dict) - see ``emulated.run_model``.  ``profile`` False: no profile is composed (its
    tables and timeline, 0.1-0.2 s a run of the validation report's, which reads only the schedule, the fit and
    the memory per tile): ``profile_data`` is a :class:`MemoryOnly`."""

    def tick(stage, frac):
        if progress:
            progress(stage, frac)

    t0 = time.perf_counter()
    wall = {}
    target1 = Target.from_device(device, num_ipus=1)
    p = _plan(cfg, target1)
    graphs, reused = _build_stage_graphs(cfg, target1, p.kinds, tick, device, tables=profile)
    wall["build_compile"] = time.perf_counter() - t0
    if reused:
        wall["reused"] = True
    tick("composing the schedule", STAGE_GRAPHS_END)
    stages = [_ipu_stage(cfg, target1, p, graphs[p.kinds[s]], s) for s in range(p.S)]
    pipe, schedule = _schedule(cfg, target1, p, stages, graphs)
    training_state = [dict(ipu=a["stage"], layers=a["layers"], blocks=list(a["blocks"]), params=a["params"],
                           fits=a["fits"],
                           mib={k: v / MiB for k, v in a["bytes"].items()},
                           max_tile_bytes=a["max_tile"]) for a in stages]
    fits = all(st_["fits"] for st_ in stages)
    sps = schedule["samples_per_step"] / schedule["step_seconds"] if schedule["step_seconds"] > 0 else 0.0
    tick("building the profile", STAGE_GRAPHS_END + 0.02)
    t1 = time.perf_counter()
    if profile:
        pd_ = compose_profile(cfg, target1, graphs, p.kinds, stages, pipe, schedule, fits, p.split, p.blocks)
    else:
        pd_ = MemoryOnly(np.concatenate([a["mem"] for a in stages], axis=0), Target(target1.spec, p.S).info(),
                         {"model": cfg.model, "fits": bool(fits), "timing_only": True})
    pd_.run["schedule"] = schedule
    pd_.run["samples_per_second"] = float(sps)
    pd_.run["training_state"] = training_state
    pd_.run["emulator_version"] = EMULATOR_VERSION
    wall["profile"] = time.perf_counter() - t1
    T, cap = target1.tiles_per_ipu, target1.sram_bytes_per_tile
    oom = []
    for a in stages:
        over = np.nonzero(a["need"] > cap)[0]
        for t in over[np.argsort(-a["need"][over], kind="stable")]:  # every tile over (the profile keeps 16)
            oom.append((int(a["stage"] * T + t), int(a["stage"]), int(a["need"][t]), int(cap)))
    oom.sort(key=lambda x: -x[2])
    pd_.run["oom_tiles"] = [list(x) for x in oom[:16]]
    nverts = sum(sg.num_vertices for sg in graphs.values())
    nops = sum(sg.num_ops for sg in graphs.values())
    return pd_, dict(fits=fits, total_cycles=int(schedule["step_cycles"]), seconds=schedule["step_seconds"],
                     samples_per_second=float(sps), schedule=schedule, oom_report=oom, wall=wall,
                     num_vertices=nverts, num_ops=nops, training_state=training_state)


def op_profile(cfg, device: str = "ipu-mk2"):
    """The ops and programs tables, the run dict and the target that a timing-only :func:`run_pipelined` of
    ``cfg`` gives a reader of its op list (``emulated.op_profile``: the GPU estimate), from the stage programs'
    builds alone: no compile, no schedule.  Each distinct stage program is built as :class:`StageGraph` builds
    it, its ops and programs tabled as its compile would table them (``engine.op_tables``), and the IPUs' tables
    composed by the composition's own code (``pipeline_profile._ipu_parts``: the ``ipu<s>/`` names, the op totals
    per step, ``run["op_counts"]``), each op's runs per call counted from the phases whose compiled steps it
    would have (:func:`_phase_ops`).  The run dict holds what the op list reads: the config, the schedule's
    counts (stages, replicas, accumulation, tensor parallelism, layer split, blocks per IPU), ``op_counts`` and
    the trained parameters per IPU (``training_state``).  None when an op's builder recorded no type, precision
    or compulsory bytes (``engine.op_tables``): the caller emulates the run."""

    from popvision_lite.emulator.engine import op_tables

    target1 = Target.from_device(device, num_ipus=1)
    p = _plan(cfg, target1)
    T = target1.tiles_per_ipu
    shard = cfg.shard()
    distinct = list(dict.fromkeys(p.kinds))
    op_memo = OpMemo() if len(distinct) > 1 else None
    built = {}
    for k in distinct:
        stage, nstages = _ROLE[k[:2]]
        be, handles, phases = build_stage(shard, target1, stage, nstages, amp=k[2], body=k[3], op_memo=op_memo)
        program = P.Sequence(phases, name=f"stage{stage}")
        tables = op_tables(be.graph, program)
        if tables is None:
            return None
        ops, programs = tables
        cols = list(ops.columns)
        # (_ipu_parts scales every per-step total; the build fixes only the flops: the others are dropped again)
        # (_ipu_parts reads a stage graph's tables as typed columns of every stored column: the columns the build
        # does not give are zeros / "", and the tables it does not make are empty)
        base = {n: Columns.empty(n) for n in PART_TABLES} | {"ops": _stored_columns("ops", ops),
                                                             "programs": _stored_columns("programs", programs)}
        tpl_op, steps = _phase_ops(be.graph, program)
        built[k] = SimpleNamespace(base=_Tables(base), c=SimpleNamespace(templates=tpl_op), steps=steps,
                                   **stage_params(handles, T))
    stages = []
    for s in range(p.S):
        mine = [v for v in range(p.V) if p.v_ipu[v] == s]
        stages.append({"blocks": (sum(p.blocks[v][0] for v in mine), sum(p.blocks[v][1] for v in mine))})
    parts, op_counts = _ipu_parts(cfg, built, p.kinds, stages, T)
    from popvision_lite.profile.assemble import Part, concat_parts

    # (only the tables built here: the empty stand-ins have no id columns to shift)
    tables, _ = concat_parts([Part({n: pt.tables[n] for n in ("ops", "programs")}, first_tile=pt.first_tile)
                              for pt in parts])
    ops = _frame(tables["ops"])[cols + ["ipu"]]
    training_state = []
    for s, a in enumerate(stages):
        sg = built[p.kinds[s]]
        n_att, n_ffn = a["blocks"]
        training_state.append(dict(ipu=s, params=int(n_att * sg.half_params["att"] + n_ffn * sg.half_params["ffn"]
                                                      + sg.extra_params)))
    schedule = dict(stages=p.S, replicas=p.R, grad_accum=p.G, micro_batch=cfg.batch, packing=float(cfg.packing),
                    layer_split=list(p.split), blocks_per_ipu=[list(a["blocks"]) for a in stages],
                    tensor_parallel=p.tp, ipus=int(cfg.ipus),
                    **({"tensor_parallel_2": int(cfg.tensor_parallel_2)} if cfg.tensor_parallel_2 > 1 else {}))
    run = {"model": cfg.model, "config": cfg.to_dict() | {"device": device, "timing_only": True},
           "schedule": schedule, "training_state": training_state,
           "op_counts": dict(op_counts, table="totals per step of one replica; min_bytes per run")}
    return ops, _frame(tables["programs"]), run, Target(target1.spec, p.S).info()


class _Tables:
    """A build's tables as ``pipeline_profile._ipu_parts`` reads a compiled stage graph's profile data: by name."""

    def __init__(self, tables: dict):
        self._tables = tables

    def table(self, name: str) -> Columns:
        return self._tables[name]


def _stored_columns(name: str, df) -> Columns:
    """A build's partial table (``engine.op_tables``) as typed columns of every stored column of ``name``: the
    columns it lacks are zeros, or "" for text."""
    missing = {c: ("" if dt == "str" else 0) for c, dt in schema.COLUMN_DTYPES[name].items() if c not in df.columns}
    return Columns.typed(name, df.assign(**missing))


def _frame(t):
    """A table the composition joined, as a DataFrame (``Columns.frame``), or the DataFrame it already is."""
    return t.frame() if isinstance(t, Columns) else t


def _phase_ops(graph, program) -> tuple[list, dict]:
    """Stand-ins for a compiled stage graph's step templates as ``pipeline_profile._ipu_parts`` reads them: one
    per leaf program the compile gives a step (a compute set with vertices, a copy that moves elements, a stream
    copy, a sync), with its op id, and each top-level phase's indices into them (its steps, as their op ids)."""
    from popvision_lite.emulator.compile import Compiled, _walk

    c = Compiled(graph, program)
    _walk(c, program, -1, None, set())
    tpl = []
    steps: dict[str, list] = {}
    phase_of = {}
    for info in c.progs:
        if info.parent_id == 0 and info.prog.name in PHASES:
            phase_of[info.prog_id] = info.prog.name
    parent = {info.prog_id: info.parent_id for info in c.progs}
    for pid in c.leaves:
        info = c.progs[pid]
        q = pid
        while q in parent and parent[q] not in (0, -1):
            q = parent[q]
        nm = phase_of.get(q)
        if nm is None or not _has_step(info.prog):
            continue
        steps.setdefault(nm, []).append(len(tpl))
        tpl.append(SimpleNamespace(op_id=c.op_id(info.op)))
    return tpl, {nm: np.asarray(v, np.int64) for nm, v in steps.items()}


def _has_step(prog) -> bool:
    """Whether the compile gives leaf program ``prog`` a step (compile_graph: compute_sets.compile_execute,
    copies.compile_copy, steps.compile_stream / compile_sync; an empty Sequence none)."""
    if isinstance(prog, P.Execute):
        return bool(prog.cs.groups) and prog.cs.num_vertices > 0
    if isinstance(prog, P.Copy):
        return int(prog.src.size) > 0
    return isinstance(prog, P.StreamCopy | P.Sync)


def _plan(cfg, target1: Target) -> SimpleNamespace:
    """The replica's layout (pipeline stages, their IPUs, the distinct stage graph of each IPU) and the
    per-step constants every IPU's composition reads (bytes per weight and state, phased execution, tensor
    parallelism's all-reduces)."""
    split = cfg.split()    # layers per pipeline stage
    blocks = cfg.blocks()  # (attention, FFN) blocks per pipeline stage
    S = cfg.stages         # IPUs of a replica
    V = len(split)         # pipeline stages a micro-batch passes through
    wrap = cfg.pipeline_placement == "wrap" and S > 1
    # the IPU of each pipeline stage; wrap: IPU 0, IPU 1 .. S-1, IPU 0 again
    v_ipu = [0] + list(range(1, S)) + [0] if wrap else list(range(S))
    G = cfg.grad_accum
    clock = target1.clock_hz
    em = target1.em
    kinds = cfg.stage_kinds()
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
    tp, tp2 = int(cfg.tensor_parallel), int(cfg.tensor_parallel_2)
    tpg = tp * tp2  # IPUs of a stage's tensor-parallel group
    tp_phase = {}
    if tp2 > 1:
        # 2-D tensor parallelism as Graphcore's PopXL GPT-3 runs it (graphcore/examples nlp/gpt3_175B/popxl,
        # modelling/attention.py GPTSelfAttentionTP2D / GPTAttentionHeadsTP2D, feed_forward.py GPTFeedForwardTP2D):
        # per IPU the activations are (tokens, hidden / t2); the attention half's forward all-reduces the q/k/v
        # partial sums (tokens, 3 x attention width / t1) over the t2 IPUs and the output projection's
        # (tokens, hidden / t2) over the t1 IPUs, the FFN half likewise (tokens, ffn / t1) over t2 and
        # (tokens, hidden / t2) over t1 - 4 all-reduces a layer forward; the backward has the 4 of the
        # identical-input operators (the ln outputs' gradients over t1, the attention context's (tokens, attention
        # width / t1) and the FFN activation's gradient over t2) - "8 all-reduce operations ... for the forwards
        # and backwards pass" (README, 2D Tensor Model Parallel); recomputation repeats the forward's.  The
        # vocabulary x hidden-split embedding all-reduces its (tokens, hidden / t2) output over t1, the LM head its
        # (tokens, vocab / t1) logits over t2 and the sharded loss its softmax max and sum over t1
        T_, Hs, Ws, Fs = cfg.batch * cfg.seq, cfg.hidden // tp2, cfg.attn_width // tp, cfg.ffn_size // tp

        def ar(nbytes, n):
            return sch.allreduce_for(em, nbytes, n, n, clock) if n > 1 else 0

        fwd_att = ar(T_ * 3 * Ws * wbytes, tp2) + ar(T_ * Hs * wbytes, tp)
        fwd_ffn = ar(T_ * Fs * wbytes, tp2) + ar(T_ * Hs * wbytes, tp)
        tp_phase.update(layer_fwd_att=fwd_att, layer_fwd_ffn=fwd_ffn, layer_recompute_att=fwd_att,
                        layer_recompute_ffn=fwd_ffn,
                        layer_bwd_att=ar(T_ * Hs * wbytes, tp) + ar(T_ * Ws * wbytes, tp2),
                        layer_bwd_ffn=ar(T_ * Hs * wbytes, tp) + ar(T_ * Fs * wbytes, tp2),
                        emb_fwd=ar(T_ * Hs * wbytes, tp),
                        head=ar(T_ * (-(-cfg.vocab // (128 * tp)) * 128) * wbytes, tp2) + 2 * ar(T_ * 4, tp)
                        + ar(T_ * Hs * wbytes, tp))
        # all-gather of a stored (tokens, hidden / t2) layer input over the t1 IPUs that hold it alike
        tp_ag = ar(T_ * Hs * wbytes, tp) / 2
    else:
        tp_ar = sch.allreduce_for(em, act_bytes, tp, tp, clock) if tp > 1 else 0
        # all-gather of a (tokens, hidden) activation over the group: half a ring all-reduce's traffic and steps
        tp_ag = tp_ar / 2
        if tp > 1:
            for nm in ("layer_fwd_att", "layer_fwd_ffn", "layer_recompute_att", "layer_recompute_ffn",
                       "layer_bwd_att", "layer_bwd_ffn", "emb_fwd"):
                tp_phase[nm] = tp_ar
            tp_phase["head"] = tp_ar + 2 * sch.allreduce_for(em, cfg.batch * cfg.seq * 4, tp, tp, clock)
    return SimpleNamespace(split=split, blocks=blocks, R=cfg.replicas, G=G, S=S, V=V, wrap=wrap, v_ipu=v_ipu,
                           kinds=kinds, wbytes=wbytes, per_param=per_param, sbpe=sbpe, train=train,
                           acc_bytes=acc_bytes, act_bytes=act_bytes, xcopy=xcopy, memcpy=memcpy, cap=cap, var=var,
                           ddr_bpc=ddr_bpc, phased=phased, bser=bser, tp=tpg, tp_ag=tp_ag, tp_phase=tp_phase,
                           serial=int(cfg.attention_serialisation), io=int(cfg.io_tiles) > 0,
                           rts_w=bser and bool(cfg.rts) and cfg.replicas > 1, ipus=int(cfg.ipus), clock=clock, em=em)


# Compiled stage graphs kept by content for the later runs of this process (stage_cache.py): a run whose stage
# programs are built from the same reads of its config (another pipeline depth, replica count, accumulation,
# optimizer: what this module's composition applies) composes the kept graphs, within a run and across the
# points of a sweep or a search in one process.  Bounded by bytes.
_STAGE_GRAPHS = StageGraphCache()
# the compiled copies of the previous run's stage graphs (compile.copy_memo.CopyMemo, one run's entries): the
# next run of the model replays the exchanges its stage graphs share with them
_COPY_MEMO = CopyMemo()
# each stage-graph kind's (embedding here, heads here) as the (stage, of stages) its program is built for
_ROLE = {(True, True): (0, 1), (True, False): (0, 3), (False, True): (2, 3), (False, False): (1, 3)}


def release_stage_graphs() -> bool:
    """Drop the kept stage graphs (emulated.release_graphs); True when some were kept."""
    return _STAGE_GRAPHS.clear()


def _build_stage_graphs(cfg, target1: Target, kinds: list, tick, device: str | None = None,
                        tables: bool = True) -> tuple[dict, bool]:
    """Build and compile each distinct stage graph once (timing only), or take it from the graphs kept by content
    (``_STAGE_GRAPHS``; ``device`` None: neither taken nor kept).  ``tables`` False: the run composes no profile,
    so new stage graphs build no profile tables of their own (``StageGraph.base``), and a kept graph with or
    without them serves; True: a kept graph without them is built again.  Returns (kind -> stage graph, whether
    every one of them was kept from an earlier run)."""
    graphs: dict[tuple, StageGraph] = {}
    distinct = list(dict.fromkeys(kinds))
    shard = cfg.shard()  # with tensor parallelism every IPU of a stage's group runs the same shard of it
    # the stage graphs' layers share their exchanges' compiled effects, also with the previous run's
    copy_memo = _COPY_MEMO
    copy_memo.start(target1, cfg.outline)
    # the ops of the layer body every stage graph builds: built in the first, replayed in the others
    op_memo = OpMemo() if len(distinct) > 1 else None
    reused = 0
    try:
        span = (STAGE_GRAPHS_END - STAGE_GRAPHS_START) / max(len(distinct), 1)
        for i, k in enumerate(distinct):
            lo = STAGE_GRAPHS_START + i * span
            mid = lo + STAGE_BUILD_SHARE * span
            of = f"stage program {i + 1} of {len(distinct)}"
            parts = {"building": within(tick, f"building {of}", lo, mid),
                     "compiling": within(tick, f"compiling {of}", mid, lo + span)}
            parts["building"](0.0)
            args = _ROLE[k[:2]] + (k[2], k[3])  # (stage, of stages, AMP, layers here); named in the profile by IPU
            make = partial(_stage_graph, target1, args, copy_memo, op_memo=op_memo, tables=tables,
                           progress=lambda what, f, parts=parts: parts[what](f))
            if device is None:
                graphs[k] = make(shard)
                continue
            graphs[k], hit = _STAGE_GRAPHS.build((device, *args), shard, make,
                                                 serves=None if not tables else _has_tables)
            if hit:  # kept from an earlier run: nothing to build or compile
                parts["compiling"](1.0)
            reused += hit
    finally:
        copy_memo.keep_used()  # this run's copies (bounded: one run's, not every run's)
    return graphs, bool(distinct) and reused == len(distinct)


def _stage_graph(target1: Target, args: tuple, copy_memo: CopyMemo, cfg, progress=None,
                 op_memo: OpMemo | None = None, tables: bool = True) -> StageGraph:
    stage, nstages, amp, body = args
    return StageGraph(cfg, target1, stage, nstages, amp=amp, copy_memo=copy_memo, body=body, progress=progress,
                      op_memo=op_memo, tables=tables)


def _has_tables(sg: StageGraph) -> bool:
    return sg.base is not None


def _bytes_dtype(nbytes: int) -> str:
    """The float tensor dtype of ``nbytes`` bytes an element (profile variable rows)."""
    return "float16" if nbytes == 2 else "float32"


def _ipu_stage(cfg, target1: Target, p: SimpleNamespace, sg: StageGraph, s: int) -> dict:
    """IPU ``s`` of the replica: the forward and backward cycles of each pipeline stage it runs, its memory per
    tile with the training state, stash and stream buffers added, and its optimizer / all-reduce / stream
    cycles after the pipeline."""
    R, G, V, T = p.R, p.G, p.V, target1.tiles_per_ipu
    wbytes, per_param, sbpe, acc_bytes = p.wbytes, p.per_param, p.sbpe, p.acc_bytes
    phased, bser, train, var, cap = p.phased, p.bser, p.train, p.var, p.cap
    em, clock = target1.em, target1.clock_hz
    mine = [v for v in range(V) if p.v_ipu[v] == s]
    n_att = sum(p.blocks[v][0] for v in mine)
    n_ffn = sum(p.blocks[v][1] for v in mine)
    k = sum(p.split[v] for v in mine)
    vst, ddr_mb, stash_units, step_io, params_s, io_cycles = _ipu_timing(target1, p, sg, mine, n_att, n_ffn)
    kinds = p.kinds
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
        onchip_state = even_bytes(math.ceil(state_total / R), T) if cfg.rts else elems * sbpe
        stream_buf = np.zeros(T, np.int64)
        streamed = 0
    else:
        onchip_state = np.zeros(T, np.int64)
        per_layer = sg.layer_param_elems * sbpe
        stream_buf = even_bytes(math.ceil(int(per_layer.sum()) / R), T) if cfg.rts else per_layer
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
    opt = passes * elementwise_pass_cycles(target1, int(math.ceil(n_opt)), "float32" if sbpe >= 4 * 2 else "float16")
    # the data-parallel gradient all-reduce; with the layers' weights sharded over the replicas (batch-serialised
    # RTS) their gradients are reduce-scattered in their phases (_ipu_timing), only the rest is all-reduced here
    ar = sch.allreduce_for(em, (sg.extra_params if p.rts_w else params_s) * wbytes, R, cfg.ipus, clock)
    if not train:
        opt = ar = 0
    st = sch.state_stream_cycles(streamed, float(em["ddr_bytes_per_cycle"]), int(em["stream_copy_latency_cycles"]),
                           transfers=k_mem + 1) if streamed else 0
    if step_io:  # batch-serialised weight loads and gradient stores (overlapped only with IO tiles)
        st += io_cycles + (0 if p.io else 3 * k_mem * int(em["stream_copy_latency_cycles"]))
    return dict(
        stage=s, layers=k, blocks=(n_att, n_ffn), graph=kinds[s], vstages=vst,
        fwd_cycles=int(sum(f for _, f, _ in vst)), bwd_cycles=int(sum(b for _, _, b in vst)), params=int(params_s),
        ddr_bytes_per_step=int(G * ddr_mb + 2 * streamed + step_io),
        mem=mem, need=need, fits=bool((need <= cap).all()), stash_depth=D,
        # always-live bytes per tile added above without a tensor of the stage graph (profile variables)
        added_variables=[("weights of the IPU's other layers (outlined body)", _bytes_dtype(wbytes), extra_w),
                         ("gradient accumulators", _bytes_dtype(acc_bytes), accum),
                         (f"optimizer state ({cfg.optimizer})", sch.TENSOR_DTYPE[cfg.optimizer_state_dtype],
                          onchip_state)],
        # not-always-live bytes per tile added above beside the stage graph's liveness: the stash is held at
        # every liveness step of the stage program (the other micro-batches' activations wait in it), the
        # stream buffers only while the optimizer streams its state (after the pipeline, the stash empty)
        stash_variable=(f"pipeline stash ({stash_units:,} x one layer's "
                        + ("input" if cfg.recompute else "input and saved activations")
                        + f" of a micro-batch in flight; stash depth {D})", _bytes_dtype(wbytes), stash),
        stream_variable=("optimizer state stream buffer (one layer's state streamed from DDR)",
                         sch.TENSOR_DTYPE[cfg.optimizer_state_dtype], stream_buf),
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
    )


def _ipu_timing(target1: Target, p: SimpleNamespace, sg: StageGraph, mine: list, n_att: int, n_ffn: int):
    """(per stage: (stage, forward cycles, backward cycles)), DDR bytes per micro-batch, stashed activations,
    batch-serialised DDR bytes per step, parameters of the IPU's stages, and the cycles the phases' streaming
    adds to the step: not overlapped, all of it; with IO tiles (PopXL io_tiles), what each layer's phase IO takes
    beyond the G micro-batches' compute it overlaps with."""
    G, V, blocks, tp, tp_ag, tp_phase = p.G, p.V, p.blocks, p.tp, p.tp_ag, p.tp_phase
    wbytes, acc_bytes, act_bytes, phased, bser, train = p.wbytes, p.acc_bytes, p.act_bytes, p.phased, p.bser, p.train
    memcpy, ddr_bpc, serial = p.memcpy, p.ddr_bpc, p.serial
    cy = {nm: c_ + (tp_phase.get(nm, 0) if c_ else 0) for nm, c_ in sg.cycles.items()}
    # an attention half: its parts, the serialised core once per block (stages.ATT_PARTS)
    att = {kind: sum((serial if part == "attcore" else 1) * cy.get(f"layer_{kind}_{part}", 0)
                     for part in ATT_PARTS[kind]) for kind in ATT_PARTS}
    call = 2 * int(math.ceil(int(sg.x_tile_bytes.max(initial=0)) / memcpy))  # copy in + out of the body
    hp = sg.half_params
    params_s = n_att * hp["att"] + n_ffn * hp["ffn"] + sg.extra_params
    acc_pass = elementwise_pass_cycles(target1, params_s, "float16" if wbytes == 2 else "float32") if G > 1 else 0
    layer_wb = sg.layer_params * wbytes
    # phased execution: each layer's weights are loaded from streaming memory before its forward
    # and again before its recompute + backward; its gradient accumulator is read and written
    # back (G > 1) or its gradient written out (G = 1); transfers are not overlapped with compute
    acc_traffic = (2 * sg.layer_params * acc_bytes if G > 1 else layer_wb) if phased else 0
    if phased:
        acc_pass = 0  # the accumulation pass is counted as the read-modify-write traffic
    # batch-serialised with the weights sharded over the replicas (RTS: PopXL GPT-3's remote variables): each
    # replica loads its 1/R of a layer's weights and the replicas all-gather them (forward and backward phase),
    # the gradient is reduce-scattered and each replica stores its 1/R
    R = p.R if p.rts_w else 1
    coll = sch.allreduce_for(p.em, layer_wb, p.R, p.ipus, p.clock) / 2 if p.rts_w else 0.0
    vst, ddr_mb, stash_units, step_io, io_cycles = [], 0.0, 0, 0.0, 0.0
    for v in mine:  # (pipeline stage, forward, backward) of each stage this IPU runs
        a_, f_ = blocks[v]
        k_eff = (a_ + f_) / 2  # layer calls of the outlined body (a half-layer = half a call)
        body_f = a_ * att["fwd"] + f_ * cy.get("layer_fwd_ffn", 0)
        body_b = (a_ * (att["recompute"] + att["bwd"])
                  + f_ * (cy.get("layer_recompute_ffn", 0) + cy.get("layer_bwd_ffn", 0)))
        if bser:  # per micro-batch: each layer's input out to DDR and back; the weights once per step
            # a tensor-parallel group holds the input replicated, so each IPU stores its 1/t slice and the
            # group all-gathers it on the way back (Graphcore's 2D tensor parallelism splits x along hidden)
            act_io = int(math.ceil(k_eff * act_bytes / tp / ddr_bpc))
            io_f, io_b = (0, 0) if p.io else (act_io, act_io)
            io_b += int(math.ceil(k_eff * tp_ag))
            ddr_mb += k_eff * 2 * act_bytes / tp
            w_in, g_out = layer_wb / R, sg.layer_params * (acc_bytes or wbytes) / R
            step_io += k_eff * (2 * w_in + g_out)
            # each layer's two phases: weights in (all-gathered), the G micro-batches' inputs out / in, the
            # gradient out (reduce-scattered)
            ph_f = (w_in + G * act_bytes / tp) / ddr_bpc + coll
            ph_b = (w_in + g_out + G * act_bytes / tp) / ddr_bpc + 2 * coll
            if p.io:  # overlapped with the phase's compute (IO tiles): only the excess shows
                per_f, per_b = (body_f + k_eff * call) / k_eff, (body_b + k_eff * call + io_b) / k_eff
                io_cycles += k_eff * (max(0.0, ph_f - G * per_f) + max(0.0, ph_b - G * per_b))
            else:
                io_cycles += k_eff * ((w_in + w_in + g_out) / ddr_bpc + 3 * coll)
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
    return vst, ddr_mb, stash_units, step_io, params_s, int(math.ceil(io_cycles))



def _schedule(cfg, target1: Target, p: SimpleNamespace, stages: list, graphs: dict) -> tuple[dict, dict]:
    """The pipeline's cycles (sch.pipeline_cycles) and the step's schedule record (run["schedule"],
    docs/emulator.md "Schedule model")."""
    R, G, V, S, split, wrap, v_ipu = p.R, p.G, p.V, p.S, p.split, p.wrap, p.v_ipu
    tp, tp_phase, act_bytes, xcopy, bser = p.tp, p.tp_phase, p.act_bytes, p.xcopy, p.bser
    em, clock = target1.em, target1.clock_hz
    vF, vB, vI = np.zeros(V, np.int64), np.zeros(V, np.int64), np.asarray(v_ipu, np.int64)
    for a_ in stages:
        for v, f, b_ in a_["vstages"]:
            vF[v], vB[v] = f, b_
    pipe = sch.pipeline_cycles(vF, vB, xcopy, G, ipu_of=vI)
    post = [st_["allreduce_cycles"] + st_["optimizer_cycles"] + st_["stream_cycles"] for st_ in stages]
    worst = int(np.argmax(post))
    step_cycles = pipe["pipeline_total_cycles"] + post[worst]
    samples_per_step = R * G * cfg.batch * cfg.packing
    host_fw, host_basis = sch.resolve_host_framework(cfg.host_framework, cfg.model)
    terms = sch.per_step_terms(em, host_fw, cfg.ipus, R * G * cfg.batch * sch.input_bytes_per_sample(
        cfg.model, seq=cfg.seq), step_cycles / clock, device_iterations=cfg.device_iterations)
    step_seconds = step_cycles / clock + sum(terms.values())
    schedule = dict(
        stages=S, replicas=R, grad_accum=G, micro_batch=cfg.batch, packing=float(cfg.packing),
        samples_per_step=float(samples_per_step), step_seconds=step_seconds, step_cycles=int(step_cycles),
        ipu_step_seconds=step_cycles / clock, per_step_terms=terms, host_framework=host_fw,
        host_framework_basis=host_basis,
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
        **({"tensor_parallel_2": int(cfg.tensor_parallel_2)} if cfg.tensor_parallel_2 > 1 else {}),
        **({"attention_serialisation": int(cfg.attention_serialisation)} if cfg.attention_serialisation > 1 else {}),
        **({"io_tiles": int(cfg.io_tiles)} if cfg.io_tiles > 0 else {}),
        tensor_parallel_allreduce_cycles={nm: int(c_) for nm, c_ in tp_phase.items()},
        tensor_parallel_allreduce_bytes=int(act_bytes) if tp > 1 else 0,
        ddr_bytes_per_step_per_ipu=[a["ddr_bytes_per_step"] for a in stages],
        allreduce_bytes_per_ipu=[a["allreduce_bytes"] for a in stages],
        stream_bytes_per_ipu=[a["stream_bytes"] for a in stages],
        allreduce_links=sch.allreduce_links_text(em, R, cfg.ipus),
        ddr_gb_per_s_needed=max(a["ddr_bytes_per_step"] for a in stages) / step_seconds / 1e9 if step_seconds else 0.0,
    )
    if cfg.device_iterations > 1:  # optimizer steps per host call (absent: 1)
        schedule["device_iterations"] = int(cfg.device_iterations)
    return pipe, schedule
