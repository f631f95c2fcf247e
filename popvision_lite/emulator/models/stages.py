"""One distinct stage program of a pipelined BERT / GPT run, built and compiled once for ONE micro-batch
(``transformer.build_bert_stage``) and reduced to what the step composition (pipeline.py) and the profile
composition (pipeline_profile.py) read: each phase's cycles and steps, the per-tile weight and activation
bytes, and the stage graph's own profile tables (not built for a run that composes no profile)."""

from __future__ import annotations

import numpy as np

from popvision_lite.emulator import programs as P
from popvision_lite.emulator.backends.emulator_backend import EmulatorBackend
from popvision_lite.emulator.backends.op_memo import OpMemo
from popvision_lite.emulator.compile import CopyMemo, compile_graph
from popvision_lite.emulator.profile_builder import build_profile
from popvision_lite.emulator.target import Target

from .transformer import build_bert_stage

PHASES = ("emb_fwd", "layer_fwd_att", "layer_fwd_attcore", "layer_fwd_attpost", "layer_fwd_ffn", "head",
          "layer_recompute_att", "layer_recompute_attcore", "layer_recompute_attpost", "layer_recompute_ffn",
          "layer_bwd_ffn", "layer_bwd_att", "layer_bwd_attcore", "layer_bwd_attpre")
# the phases of one attention half with a serialised attention core (cfg.attention_serialisation): the core
# phase runs once per block; without serialisation only the first of each exists
ATT_PARTS = {"fwd": ("att", "attcore", "attpost"), "recompute": ("att", "attcore", "attpost"),
             "bwd": ("att", "attcore", "attpre")}
# the marks a stage program's build sets (transformer.build_bert_stage: its phases and their two ends), at most;
# the building progress is the share of them set so far.  Without a serialised attention core the six core / post /
# pre marks are not set
PHASE_MARKS = len(PHASES) + 2
SERIAL_MARKS = 6
ATT_PARAMS = ("wq", "wk", "wv", "wo", "ln1_g", "ln1_b")  # the attention half of a layer; the rest is FFN


def build_stage(cfg, target: Target, stage: int, nstages: int, amp: float | None = None, body: bool = True,
                progress=None, op_memo: OpMemo | None = None) -> tuple:
    """One stage program built (not compiled): (backend, the builder's handles, the phase programs in the order
    their marks were set).  ``StageGraph`` compiles it; ``pipeline.op_profile`` reads its ops alone."""
    be = EmulatorBackend(target, cfg.precision, needs_values=False,
                         available_memory_proportion=cfg.amp_of(0) if amp is None else amp,
                         partials_type=cfg.partials_type)
    be.ctx.io_tiles = int(getattr(cfg, "io_tiles", 0))  # tiles reserved for streaming: no op maps there
    be.op_memo = op_memo  # the ops another stage graph of the run built with the same reads are replayed
    if progress is not None:
        marks = PHASE_MARKS - (0 if int(getattr(cfg, "attention_serialisation", 1)) > 1 else SERIAL_MARKS)
        be.on_mark = lambda n: progress("building", min(n / marks, 1.0))
    handles = build_bert_stage(be, cfg, stage, nstages, body=body)
    be.op_memo = None
    be.built()
    be.on_mark = None  # built: a graph kept for later runs (stage_cache.py) holds no run's progress line
    phases = []
    for name, _ in be.marks:
        if name in PHASES:
            phases.append(P.Sequence(list(be.phase_programs(name)), name=name))
    return be, handles, phases


def stage_params(handles: dict, T: int) -> dict:
    """The parameter counts a stage's composition reads of its builder's handles: per tile of one attention /
    FFN block (``half_param_elems``), of a whole layer and of the rest (``layer_param_elems``,
    ``extra_param_elems``), and in all (``half_params``, ``layer_params``, ``extra_params``)."""

    def per_tile(tensors):
        tot = np.zeros(T, np.int64)
        for t in tensors:
            tot += t.mapping.elements_per_tile(T)
        return tot

    lp = handles["layer_params"]
    half = {"att": [t for n, t in lp.items() if n in ATT_PARAMS], "ffn": [t for n, t in lp.items() if n not in ATT_PARAMS]}
    return dict(half_param_elems={k: per_tile(v) for k, v in half.items()},  # per tile, one attention / FFN block
                half_params={k: int(sum(t.size for t in v)) for k, v in half.items()},
                layer_param_elems=per_tile(lp.values()), extra_param_elems=per_tile(handles["extra_params"]),
                layer_params=int(sum(t.size for t in lp.values())),
                extra_params=int(sum(t.size for t in handles["extra_params"])))


class StageGraph:
    """One distinct stage program, compiled (timing only)."""

    def __init__(self, cfg, target: Target, stage: int, nstages: int, label: int | None = None,
                 amp: float | None = None, copy_memo: CopyMemo | None = None, body: bool = True, progress=None,
                 op_memo: OpMemo | None = None, tables: bool = True):
        """``copy_memo``: compiled copies shared with the run's other stage graphs (their layers' exchanges
        are the same); ``body`` False: the IPU holds no layer (only the embedding and / or the heads).
        ``tables`` False: no profile tables (``base`` None; only the profile composition reads them, and a run
        without its profile, ``pipeline.run_pipelined(profile=False)``, composes none).
        ``progress(what, fraction)``: building ("building", the share of the stage program's phases built,
        ``PHASE_MARKS``), then compiling ("compiling", ``compile_graph``'s fraction; 1 once the stage graph's
        profile tables are built)."""
        be, self.handles, phases = build_stage(cfg, target, stage, nstages, amp=amp, body=body, progress=progress,
                                               op_memo=op_memo)
        self.be = be
        self.phase_names = [p.name for p in phases]
        self.program = P.Sequence(phases, name=f"stage{stage if label is None else label}")
        self.c = compile_graph(be.graph, self.program, outline=cfg.outline, copy_memo=copy_memo,
                               progress=None if progress is None else (lambda f: progress("compiling", 0.95 * f)))
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

        h = self.handles
        for k, v in stage_params(h, T).items():
            setattr(self, k, v)
        x = h["x"]
        self.x_tile_bytes = x.mapping.elements_per_tile(T) * x.itemsize
        lf = self.lsteps.get("layer_fwd_ffn")
        ltb = c.liveness_tile_bytes
        self.fwd_saved_tile_bytes = (ltb[lf[1]].astype(np.int64) if (lf and len(ltb)) else np.zeros(T, np.int64))
        # the profile tables of this stage graph (where a profile is composed); then let the graph (vertex and
        # field arrays) go, so peak memory is one stage graph, not all of them
        self.base = build_profile(c, "timing", cfg.model, {}) if tables else None
        if progress is not None:
            progress("compiling", 1.0)
        self.num_vertices = sum(g.n for g in be.graph.groups)
        self.num_ops = len(be.ctx.records)
        self.outlined = {"copies": int(c.outlined_copies), "compute_sets": int(c.outlined_cs)}
        self.x_size = int(x.size)
        self.handles = None
        self.be = None
        self.program = None
        c.graph = None
        c.program = None  # (its copies' endpoints hold the graph's tensors, and through them the graph)
        c.progs = None
        c.copy_plans = None
        c.tensor_tiles = None
