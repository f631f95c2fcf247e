"""EmulatorBackend: builds a model (written against ``backend.Backend``) into an emulator graph,
and ``run_model`` - build, compile, run, compare with the numpy reference; ``write_run`` writes the
profile (called by the command line, which owns the output file)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from popvision_lite.emulator import programs as P
from popvision_lite.emulator.engine import Engine
from popvision_lite.emulator.graph import Graph
from popvision_lite.emulator.ops import basic as ops
from popvision_lite.emulator.ops.context import OpContext, View
from popvision_lite.emulator.ops.norm_pool import EmulatorNormPool
from popvision_lite.emulator.ops.reference import numeric_check
from popvision_lite.emulator.target import Target

from .backend import NP_DTYPE, Backend, NumpyBackend
from .workloads import ModelConfig, build


class EmulatorBackend(EmulatorNormPool, Backend):
    def __init__(self, target: Target, precision="fp16", needs_values: bool = True,
                 available_memory_proportion: float | None = None):
        super().__init__(precision, target.num_ipus)
        self.needs_values = needs_values  # False in timing-only mode: no data is generated or kept
        self.graph = Graph(target)
        self.ctx = OpContext(self.graph, precision)
        # Poplar's availableMemoryProportion: the share of tile memory an op's temporaries may use
        # (planners read ctx.available_memory_proportion; None keeps the op library's default)
        if available_memory_proportion is not None:
            self.ctx.available_memory_proportion = float(available_memory_proportion)
        self.inputs: dict[str, np.ndarray] = {}
        self.host_loads: dict[str, tuple] = {}  # streamed weights: name -> (host buffer, tensor)
        self.marks: list[tuple[str, int]] = []  # (phase name, index into ctx.programs)
        self.weights: list = []  # trained parameters (training state is sized from them)
        # outlined timing runs (models/resnet.py): weight tensor id -> blocks sharing it, and the saved
        # inputs of the blocks that reuse another's tensors (their memory is added per tile)
        self.multiplicity: dict[int, int] = {}
        self.saved_copies: list = []

    def mark(self, name):
        self.marks.append((name, len(self.ctx.programs)))

    def phase_programs(self, name) -> list:
        """Programs added between mark ``name`` and the next mark."""
        for i, (n, start) in enumerate(self.marks):
            if n == name:
                end = self.marks[i + 1][1] if i + 1 < len(self.marks) else len(self.ctx.programs)
                return self.ctx.programs[start:end]
        return []

    def replay(self, phase):
        self.ctx.add(P.Sequence(list(self.phase_programs(phase)), name=f"{phase}/replay"))

    # the op context follows the backend's IPU
    def _sync(self):
        self.ctx.ipu = self.ipu

    def _name(self, name):
        self._sync()
        return self.qual(name)

    # ------------------------------------------------------------ tensors
    def input(self, name, values, dtype=None):
        q = self._name(name)
        arr = np.asarray(values)
        dt = dtype or self.dtype
        t = self.graph.add_variable(self.ctx.unique(q), arr.shape, dt, mapping=self.ctx.linear_mapping(arr.size))
        if self.needs_values:
            self.inputs[t.name] = arr.astype(NP_DTYPE[dt])
        return t

    def weight(self, name, values, dtype=None, streamed=False):
        t = self.input(name, values, dtype)
        self.weights.append(t)
        if streamed:
            # the weight's home is streaming memory: load it onto the tiles before it is used
            buf = self.graph.add_host_buffer(t.name + "@ddr", t.shape, t.dtype, kind="streaming")
            if t.name in self.inputs:
                self.inputs[buf.name] = self.inputs.pop(t.name)
            op = self.ctx.begin_op(t.name + "/load", "stream_copy", plan="weight streamed from DDR",
                                   min_bytes=t.nbytes)
            self.ctx.add(P.StreamCopy(buf, t, name=f"{t.name}/load", op=op))
            self.host_loads[t.name] = (buf, t)
        return t

    def constant(self, name, values, dtype=None):
        q = self._name(name)
        arr = np.asarray(values).astype(NP_DTYPE[dtype or self.dtype])
        return self.graph.add_constant(self.ctx.unique(q), arr, mapping=self.ctx.linear_mapping(arr.size))

    def _op(self, fn, *args):
        self._sync()
        return fn(self.ctx, *args)

    def copy(self, x, name):
        return self._op(ops.copy, x, self.qual(name))

    def gather_rows(self, table, ids, name):
        return self._op(ops.gather_rows, table, ids, self.qual(name))

    def matmul(self, a, b, name):
        return self._op(ops.matmul, a, b, self.qual(name))

    def block_sparse_matmul(self, a, b, mask, block, name):
        return self._op(ops.block_sparse_matmul, a, b, mask, block, self.qual(name))

    def add(self, a, b, name):
        return self._op(ops.add, a, b, self.qual(name))

    def mul(self, a, b, name):
        return self._op(ops.mul, a, b, self.qual(name))

    def add_bias(self, x, bias, name):
        return self._op(ops.add_bias, x, bias, self.qual(name))

    def scale(self, x, s, name):
        return self._op(ops.scale, x, s, self.qual(name))

    def relu(self, x, name):
        return self._op(ops.relu, x, self.qual(name))

    def relu_bwd(self, x, dy, name):
        return self._op(ops.relu_bwd, x, dy, self.qual(name))

    def gelu(self, x, name):
        return self._op(ops.gelu, x, self.qual(name))

    def gelu_bwd(self, x, dy, name):
        return self._op(ops.gelu_bwd, x, dy, self.qual(name))

    def cast(self, x, dtype, name):
        return self._op(ops.cast, x, dtype, self.qual(name))

    def softmax(self, x, name):
        return self._op(ops.softmax, x, self.qual(name))

    def softmax_bwd(self, y, dy, name):
        return self._op(ops.softmax_bwd, y, dy, self.qual(name))

    def layer_norm(self, x, gamma, beta, name):
        return self._op(ops.layer_norm, x, gamma, beta, self.qual(name))

    def layer_norm_bwd(self, x, gamma, dy, name):
        return self._op(ops.layer_norm_bwd, x, gamma, dy, self.qual(name))

    def reduce_rows(self, x, name):
        return self._op(ops.reduce_rows, x, self.qual(name))

    def sgd(self, w, g, lr, name):
        out = self._op(ops.sgd, w, g, lr, self.qual(name))
        if w.name in self.host_loads:  # a streamed weight goes back to streaming memory once updated
            buf, _ = self.host_loads[w.name]
            op = self.ctx.begin_op(w.name + "/store", "stream_copy", plan="updated weight back to DDR",
                                   min_bytes=w.nbytes)
            self.ctx.add(P.StreamCopy(w, buf, name=f"{w.name}/store", op=op))
        return out

    def pad_hw(self, x, nhwc, p, name):
        return self._op(ops.pad_hw, x, nhwc, p, self.qual(name))

    def mse_grad(self, y, target, name):
        return self._op(ops.mse_grad, y, target, self.qual(name))

    def program(self):
        return self.ctx.sequence("main")


# ==================================================================== running a model


@dataclass
class ModelRun:
    cfg: ModelConfig
    fits: bool
    total_cycles: int
    seconds: float
    profile_data: object
    numeric_checks: dict = field(default_factory=dict)
    oom_report: list = field(default_factory=list)
    wall: dict = field(default_factory=dict)
    num_vertices: int = 0
    num_ops: int = 0
    samples_per_second: float = 0.0  # whole system (all replicas); BERT: sequences (packs x packing)
    schedule: dict = field(default_factory=dict)  # see CONTRACT / docs/emulator.md "Schedule model"


def tolerance(precision: str) -> tuple[float, float]:
    """(rtol, atol) of numeric checks: fp16 storage rounds every op's output to 11 bits."""
    return (2e-2, 2e-2) if precision == "fp16" else (1e-4, 1e-4)


def build_model(cfg: ModelConfig, device: str = "ipu-mk2", needs_values: bool = True):
    target = Target.from_device(device, num_ipus=cfg.stages)  # one replica
    be = EmulatorBackend(target, cfg.precision, needs_values=needs_values,
                         available_memory_proportion=cfg.amp_of(0))
    built = build(be, cfg)
    return be, built


def run_model(cfg: ModelConfig, device: str = "ipu-mk2", timing_only: bool = False, profile_path=None,
              progress=None) -> ModelRun:
    """Build, compile and run ``cfg`` on the emulator; full numerics are compared with the numpy
    reference (``run['numeric_checks']``).  Returns the :class:`ModelRun`, whose ``profile_data`` is the
    profile; the command line writes it (``popvision-lite emulate``).  ``profile_path`` (library
    convenience) writes it here too, also when the graph does not fit (then numerics are skipped).
    ``progress(stage, fraction)`` ends with ``("done", 1.0)``."""
    if cfg.model == "gpt" or (cfg.model == "bert" and (timing_only or cfg.scaled)):
        run = _run_composed(cfg, device, timing_only, progress)
    else:
        run = _run_whole_graph(cfg, device, timing_only, progress)
    if profile_path is not None:
        if progress:
            progress("writing profile", 0.9)
        write_run(run, profile_path)
    if progress:
        progress("done", 1.0)
    return run


def write_run(run: ModelRun, path) -> None:
    """Write ``run``'s profile to ``path`` (atomically; ``run.wall['write']`` = the seconds it took)."""
    from popvision_lite.profile.writer import write_profile

    t0 = time.perf_counter()
    write_profile(path, run.profile_data)
    run.wall["write"] = time.perf_counter() - t0


def _run_whole_graph(cfg: ModelConfig, device: str, timing_only: bool, progress) -> ModelRun:
    """One graph over all IPUs, one batch (numerics optional); see :func:`run_model`."""

    def tick(stage, frac):
        if progress:
            progress(stage, frac)

    wall = {}
    t0 = time.perf_counter()
    mode = "timing" if timing_only else "full"
    config = cfg.to_dict() | {"device": device, "timing_only": timing_only}
    key = _graph_key(cfg, device) if timing_only else None
    hit = _GRAPH_CACHE.get(key) if key is not None else None
    if hit is not None:  # the same replica graph (another replica count, accumulation or optimizer)
        be, built, eng, res = hit
        res = _fresh_result(res, config)
        wall["reused"] = True
    else:
        _GRAPH_CACHE.clear()  # free the previous graph before building the next (peak memory: one graph)
        tick("planning and building graph", 0.0)
        be, built = build_model(cfg, device, needs_values=not timing_only)
        wall["build"] = time.perf_counter() - t0
        tick("compiling", 0.3)
        eng = Engine(be.graph, be.program(), mode=mode, model=cfg.model, config=config)
        res = eng.run(inputs=None if timing_only else be.inputs, profile_path=None, allow_out_of_memory=True)
        wall.update({k: v for k, v in res.wall_seconds.items()})
        if key is not None:
            _GRAPH_CACHE[key] = (be, built, eng, res)  # one graph kept: sweeps and the validation report reuse it
            res = _fresh_result(res, config)
    tick("checking numerics", 0.8)
    checks = {}
    if res.fits and not timing_only:
        t2 = time.perf_counter()
        ref = NumpyBackend(cfg.precision, cfg.stages)
        ref_built = build(ref, cfg)
        rtol, atol = tolerance(cfg.precision)
        for key, handle in built.results.items():
            if isinstance(handle, View):
                continue
            got = res.outputs[handle.name]
            want = np.asarray(ref_built.results[key])
            checks[key] = numeric_check(key, got.reshape(want.shape).astype(np.float32), want, rtol, atol)
        wall["reference"] = time.perf_counter() - t2
    pd_ = res.profile_data
    fits_outlined = _add_outlined_memory(be, pd_)
    if fits_outlined is not None:
        res.fits = fits_outlined
    pd_.run["numeric_checks"] = checks
    pd_.run["model"] = cfg.model
    pd_.run.setdefault("config", config)
    cg = eng.compile()
    samples = cfg.batch * (cfg.packing if cfg.model == "bert" else 1)
    sps = samples / res.seconds if res.seconds > 0 else 0.0
    schedule = dict(stages=cfg.stages, replicas=1, grad_accum=1, micro_batch=cfg.batch, samples_per_step=float(samples),
                    step_seconds=float(res.seconds), steady_cycles_per_microbatch=int(res.total_cycles),
                    stage_cycles=[int(res.total_cycles)], optimizer_cycles=0, allreduce_cycles=0, stream_cycles=0,
                    fill_drain_cycles=0, step_cycles=int(res.total_cycles),
                    note="one graph over all IPUs, one batch, no pipelining (whole-graph path)")
    oom = ([tuple(x) for x in pd_.run["oom_tiles"]] if fits_outlined is not None else cg.oom_report)
    fits, total, seconds = res.fits, res.total_cycles, res.seconds
    if cfg.replicas > 1 or cfg.grad_accum > 1 or cfg.optimizer != "sgd" or cfg.master_weights or cfg.rts \
            or cfg.optimizer_state != "onchip":
        from popvision_lite.emulator.pipeline import compose_whole_graph

        schedule, fits, oom = compose_whole_graph(cfg, be, res, pd_)
        total, seconds = schedule["step_cycles"], schedule["step_seconds"]
        sps = schedule["samples_per_step"] / seconds if seconds > 0 else 0.0
    pd_.run["schedule"] = schedule
    pd_.run["samples_per_second"] = float(sps)
    return ModelRun(cfg=cfg, fits=fits, total_cycles=total, seconds=seconds, profile_data=pd_,
                    numeric_checks=checks, oom_report=oom, wall=wall,
                    num_vertices=sum(g.n for g in be.graph.groups), num_ops=len(be.ctx.records),
                    samples_per_second=float(sps), schedule=schedule)


# Fields that change how one replica's graph is run and composed into a step, not the graph itself
# (pipeline.compose_whole_graph applies them): a timing-only run that differs only in these reuses the
# emulated graph of the previous run (``_GRAPH_CACHE``).
COMPOSITION_FIELDS = frozenset({"replicas", "grad_accum", "ipus", "optimizer", "optimizer_state",
                                "optimizer_state_dtype", "master_weights", "rts", "lr"})
_GRAPH_CACHE: dict = {}


def _graph_key(cfg, device) -> tuple:
    d = cfg.to_dict()
    return (device, cfg.stages) + tuple(sorted((k, repr(v)) for k, v in d.items() if k not in COMPOSITION_FIELDS))


def _fresh_result(res, config):
    """A copy of a cached run result whose profile data the composition may change (memory, run dict)."""
    import copy

    pd_ = copy.copy(res.profile_data)
    pd_.memory = np.asarray(res.profile_data.memory).copy()
    pd_.run = copy.deepcopy(res.profile_data.run)
    pd_.run["config"] = dict(config)
    out = copy.copy(res)
    out.profile_data = pd_
    return out


def _add_outlined_memory(be, pd_) -> bool | None:
    """Memory per tile of the blocks an outlined run did not build (see resnet.outlined): the other
    blocks' weights (always live, laid out as the representative's) and their saved inputs (not always
    live: every block's input is kept from its forward to its recomputation, so all are live at the
    start of the backward pass, where the peak is).  Returns the new fits, or None when nothing was
    outlined."""
    if not be.multiplicity and not be.saved_copies:
        return None
    from popvision_lite.profile import schema

    T = be.graph.target.num_tiles
    var = schema.CATEGORY_CODE["variable"]
    mem = np.asarray(pd_.memory).copy()
    for t in be.weights:
        extra = be.multiplicity.get(t.id, 1) - 1
        if extra > 0:
            mem[:, var, 0] += extra * t.mapping.elements_per_tile(T) * t.itemsize
    for t in be.saved_copies:
        mem[:, var, 1] += t.mapping.elements_per_tile(T) * t.itemsize
    pd_.memory = mem
    need = mem.sum(axis=(1, 2))
    cap = be.graph.target.sram_bytes_per_tile
    fits = bool((need <= cap).all())
    over = np.nonzero(need > cap)[0]
    pd_.run["fits"] = fits
    pd_.run["oom_tiles"] = [[int(t), int(t // be.graph.target.tiles_per_ipu), int(need[t]), int(cap)]
                            for t in over[np.argsort(-need[over], kind="stable")][:16]]
    return fits


def _run_composed(cfg, device, timing_only, progress) -> ModelRun:
    """BERT through the pipeline / replication / training-state composition (emulator/pipeline.py).
    Numerics are not run on this path (each stage program is emulated once, timing only)."""
    from popvision_lite.emulator.pipeline import run_pipelined

    t0 = time.perf_counter()
    pd_, info = run_pipelined(cfg, device, progress=progress)
    wall = dict(info["wall"])
    config = cfg.to_dict() | {"device": device, "timing_only": True}
    pd_.run["config"] = config
    if not timing_only:
        pd_.run["numeric_checks_skipped"] = ("pipelined / replicated composition: each distinct stage program is "
                                             "emulated once for timing and memory; numerics need the whole-graph "
                                             "path (one IPU, default training state)")
    wall["total"] = time.perf_counter() - t0
    return ModelRun(cfg=cfg, fits=info["fits"], total_cycles=info["total_cycles"], seconds=info["seconds"],
                    profile_data=pd_, numeric_checks={}, oom_report=info["oom_report"], wall=wall,
                    num_vertices=info["num_vertices"], num_ops=info["num_ops"],
                    samples_per_second=info["samples_per_second"], schedule=info["schedule"])


