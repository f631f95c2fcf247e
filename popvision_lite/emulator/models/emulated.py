"""``run_model``: build a model with the EmulatorBackend (emulator_backend.py), compile, run and compare with
the numpy reference, or compose a pipelined / replicated run (pipeline.py); ``write_run`` writes the profile
(called by the command line, which owns the output file)."""

from __future__ import annotations

import gc
import logging
import time
import weakref

import numpy as np

from popvision_lite.emulator import schedule as sch
from popvision_lite.emulator.backends.backend import NumpyBackend
from popvision_lite.emulator.backends.emulator_backend import EmulatorBackend
from popvision_lite.emulator.compile import CarriedCopies
from popvision_lite.emulator.engine import Engine
from popvision_lite.emulator.host_alloc import return_freed_memory, reuse_freed_memory
from popvision_lite.emulator.ops.context import View
from popvision_lite.emulator.progress import within
from popvision_lite.emulator.reference import numeric_check
from popvision_lite.emulator.run_result import RunResult
from popvision_lite.emulator.target import Target
from popvision_lite.profile.assemble import VariableRow, append_variables
from popvision_lite.profile.columns import Columns

from .catalog import build
from .config import COMPOSITION_FIELDS, ModelConfig
from .host_memory import check_built_graph
from .pipeline import release_stage_graphs, run_pipelined
from .whole_graph import compose_whole_graph

log = logging.getLogger(__name__)

# Where writing the profile starts on a run's progress line (to 1.0, following the writer's batches of steps):
# writing took 5.4 s of the POD16 BERT-Large run's 24 s (pipeline.STAGE_GRAPHS_END says how the rest is shared).
WRITE_STARTS = 0.78
# The whole-graph path: building the graph up to COMPILE_STARTS, its compile up to COMPILE_ENDS (the share of its
# programs compiled), running it (full numerics), then the numeric checks from NUMERICS_STARTS.
COMPILE_STARTS = 0.3
COMPILE_ENDS = 0.6
NUMERICS_STARTS = 0.7

# ==================================================================== running a model


def tolerance(precision: str) -> tuple[float, float]:
    """(rtol, atol) of numeric checks: fp16 storage rounds every op's output to 11 bits."""
    return (2e-2, 2e-2) if precision == "fp16" else (1e-4, 1e-4)


def build_model(cfg: ModelConfig, device: str = "ipu-mk2", needs_values: bool = True):
    """Build ``cfg`` on ``device`` (one replica).  ``be.target_reads``: what the build read of its target
    (:class:`TargetReads`), so that another device that agrees on all of it can take the same graph."""
    target = Target.from_device(device, num_ipus=cfg.stages)  # one replica
    with TargetReads.recording(target) as reads:
        be = EmulatorBackend(target, cfg.precision, needs_values=needs_values,
                             available_memory_proportion=cfg.amp_of(0), partials_type=cfg.partials_type)
        built = build(be, cfg)
        be.built()
    be.target_reads = reads
    return be, built


_ALL = object()  # an em read that saw every key (iteration, a copy)


class _RecordedEm(dict):
    """A target's ``em`` dict that notes each key read (all of them when iterated or copied)."""

    def __init__(self, em: dict, seen: set):
        super().__init__(em)
        self._seen = seen

    def __getitem__(self, k):
        self._seen.add(k)
        return super().__getitem__(k)

    def get(self, k, default=None):
        self._seen.add(k)
        return super().get(k, default)

    def __contains__(self, k):
        self._seen.add(k)
        return super().__contains__(k)

    def _all(self, name):
        self._seen.add(_ALL)
        return getattr(super(), name)

    def __iter__(self):
        return self._all("__iter__")()

    def keys(self):
        return self._all("keys")()

    def values(self):
        return self._all("values")()

    def items(self):
        return self._all("items")()

    def copy(self):
        return dict(self._all("items")())

    def __reduce__(self):
        return dict, (dict(self._all("items")()),)


class _RecordedTarget(Target):
    """A :class:`Target` that notes each attribute read (its class while a build records it)."""

    def __getattribute__(self, name):
        object.__getattribute__(self, "_attr_reads").add(name)
        return object.__getattribute__(self, name)


class TargetReads:
    """What a graph's build read of its target: attribute names and ``em`` keys.  Two targets that agree on all
    of them give the same build (the build reads nothing else of them), so a whole graph built for one device
    serves another that differs only in what its compile reads (the Bow IPU's clock, streaming-memory and
    IPU-Link constants against the Mk2's: decision 0468)."""

    def __init__(self, attrs: set, em_keys: set):
        self.attrs, self.em_keys = frozenset(attrs), frozenset(em_keys)

    @classmethod
    def recording(cls, target: Target):
        import contextlib

        @contextlib.contextmanager
        def rec():
            attrs: set = set()
            keys: set = set()
            reads = cls(set(), {_ALL})   # a target of another class is not recorded: it shares no build
            if type(target) is not Target:
                yield reads
                return
            em = target.em
            target.em = _RecordedEm(em, keys)
            target._attr_reads = attrs
            target.__class__ = _RecordedTarget
            try:
                yield reads
            finally:
                target.__class__ = Target
                del target._attr_reads
                target.em = em
                reads.attrs, reads.em_keys = frozenset(attrs - {"em", "_attr_reads"}), frozenset(keys)

        return rec()

    def same_build(self, a: Target, b: Target) -> bool:
        """Whether a build that read this of ``a`` reads the same of ``b``."""
        if _ALL in self.em_keys:
            return False
        for name in self.attrs:
            va, vb = getattr(a, name, None), getattr(b, name, None)
            if callable(va) and callable(vb) and getattr(va, "__func__", None) is getattr(vb, "__func__", 0):
                continue  # a method of both: what it reads is read through the attributes above
            try:
                if not bool(va == vb):
                    return False
            except Exception:  # noqa: BLE001 - values that do not compare are not the same
                return False
        return all(k in a.em and k in b.em and a.em[k] == b.em[k] or (k not in a.em and k not in b.em)
                   for k in self.em_keys)


def run_model(cfg: ModelConfig, device: str = "ipu-mk2", timing_only: bool = False, profile_path=None,
              progress=None, profile: bool = True) -> RunResult:
    """Build, compile and run ``cfg`` on the emulator; full numerics are compared with the numpy
    reference (``run['numeric_checks']``).  Returns the :class:`RunResult`, whose ``profile_data`` is the
    profile; the command line writes it (``popvision-lite emulate``).  ``profile_path`` (library
    convenience) writes it here too, also when the graph does not fit (then numerics are skipped).
    ``progress(stage, fraction)`` ends with ``("done", 1.0)``.  ``profile`` False (and no ``profile_path``): a
    caller that reads the run's numbers, its fit and its memory per tile, not its profile (the validation
    report): a stage-graph composition then composes no profile (``pipeline.MemoryOnly`` in its place)."""
    reuse_freed_memory()
    if cfg.model == "gpt" or (cfg.model == "bert" and (timing_only or cfg.scaled)):
        run = _run_composed(cfg, device, timing_only, progress, profile or profile_path is not None)
    else:
        run = _run_whole_graph(cfg, device, timing_only, progress, profile or profile_path is not None)
    if profile_path is not None:
        write_run(run, profile_path, progress=within(progress, "writing profile", WRITE_STARTS, 1.0))
    log.info("emulated %s on %s (%s): %s cycles, %s; wall time by stage: %s", cfg.model, device,
             "timing only" if timing_only else "full numerics", f"{int(run.total_cycles):,}",
             "fits" if run.fits else "does not fit",
             ", ".join(f"{k} {v:.2f} s" for k, v in run.wall.items() if isinstance(v, float)) or "n/a")
    if progress:
        progress("done", 1.0)
    return run


class OpProfile:
    """What a profile holds of a model's ops as its build alone fixes them (:func:`op_profile`): the ``ops`` and
    ``programs`` tables' build-side columns (``engine.op_tables``), the ``run`` dict's ``model``, ``config`` and
    ``schedule`` (one micro-batch of one replica; a stage-graph composition's counts, with its ``op_counts`` and
    ``training_state`` parameters: ``pipeline.op_profile``) and the ``target``.  No step costs, memory or
    liveness."""

    def __init__(self, ops, programs, run: dict, target):
        self.ops, self.programs, self.run, self.target = ops, programs, run, target


def op_profile(cfg: ModelConfig, device: str = "ipu-mk2") -> OpProfile | None:
    """``cfg``'s ops and programs on ``device`` from its build alone, for a reader of the op list only (the GPU
    estimate, ``gpu_validation.op_list``): every column it gives is the one a timing-only :func:`run_model` of
    ``cfg`` writes, at the cost of the build (no compile, no run); for the stage-graph composition (GPT; BERT
    timing-only) the stage programs' builds composed (``pipeline.op_profile``).  None where that run's tables are
    not a build's: a whole graph the training composition changes (``whole_graph.compose_whole_graph``: replicas,
    accumulation, an optimizer other than SGD ...), or an op whose builder recorded no type, precision or
    compulsory bytes (``engine.op_tables``)."""
    from popvision_lite.emulator.engine import op_tables

    if cfg.model in ("gpt", "bert"):  # the timing-only run composes stage graphs: their builds composed alone
        from .pipeline import op_profile as composed_op_profile

        got = composed_op_profile(cfg, device)
        return None if got is None else OpProfile(*got)
    if cfg.replicas > 1 or cfg.grad_accum > 1 or cfg.optimizer != "sgd" \
            or cfg.master_weights or cfg.rts or cfg.optimizer_state != "onchip":
        return None
    be, _built = build_model(cfg, device, needs_values=False)
    check_built_graph(be.graph, cfg, True)  # as the run would (the host-memory check's second stage)
    tables = op_tables(be.graph, be.program())
    if tables is None:
        return None
    config = cfg.to_dict() | {"device": device, "timing_only": True}
    run = {"model": cfg.model, "config": config,
           "schedule": dict(stages=cfg.stages, replicas=1, grad_accum=1, micro_batch=cfg.batch)}
    return OpProfile(tables[0], tables[1], run, be.graph.target)


def write_run(run: RunResult, path, progress=None) -> None:
    """Write ``run``'s profile to ``path`` (atomically; ``run.wall['write']`` = the seconds it took);
    ``progress(fraction)``: the share of its steps written."""
    from popvision_lite.profile.writer import write_profile

    t0 = time.perf_counter()
    if progress is not None:
        progress(0.0)
    write_profile(path, run.profile_data,
                  progress=None if progress is None else (lambda done, total: progress(done / max(total, 1))))
    run.wall["write"] = time.perf_counter() - t0


def _run_whole_graph(cfg: ModelConfig, device: str, timing_only: bool, progress, profile: bool = True) -> RunResult:
    """One graph over all IPUs, one batch (numerics optional); see :func:`run_model` (``profile`` False: the
    outlined blocks' memory is added to the memory per tile and the fit, not to the profile's variable and
    liveness tables)."""

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
        be, built, eng, res, has_tables = hit
        if profile and not has_tables:  # kept without its tables (a run that read none): they are built now
            res.profile_data = eng.compile().profile_data()
            _GRAPH_CACHE[key] = (be, built, eng, res, True)
        res = _fresh_result(res, config)
        wall["reused"] = True
    else:
        # the kept graph of the same configuration built for another device whose build read the same of its
        # target (the Bow ResNet-50 rows after the Mk2 ones): compiled again for this device, not built again
        shared = _shared_build(key, cfg, device) if key is not None else None
        if shared is not None:  # its graph lives on in this run: only the old run's compile and result go
            _GRAPH_CACHE.clear()
            gc.collect()
        # free the previous graph before building the next (peak memory: one graph), now, not whenever the
        # collector's thresholds next trip, which a graph's millions of objects push far ahead
        elif _drop_kept_graph():
            gc.collect()
        tick("planning and building graph", 0.0)
        be, built, kept = shared if shared is not None else \
            build_model(cfg, device, needs_values=not timing_only) + (None,)
        wall["build"] = time.perf_counter() - t0
        check_built_graph(be.graph, cfg, timing_only)  # the host-memory check's second stage (decision 0390)
        tick("compiling", COMPILE_STARTS)
        eng, res = _compile_and_run(be, cfg, mode, config, kept, key is not None, progress, profile)
        wall.update(res.wall)
        if key is not None:
            # one graph kept: sweeps and the validation report reuse it; with whether its result holds the
            # profile's tables (a run without them builds none: a later run that needs them builds them then)
            _GRAPH_CACHE[key] = (be, built, eng, res, profile)
            res = _fresh_result(res, config)
    tick("checking numerics", NUMERICS_STARTS)
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
    fits_outlined = _add_outlined_memory(be, pd_, tables=profile)
    if fits_outlined is not None:
        res.fits = fits_outlined
    pd_.run["numeric_checks"] = checks
    pd_.run["model"] = cfg.model
    pd_.run.setdefault("config", config)
    cg = eng.compile()
    samples = cfg.batch * (cfg.packing if cfg.model == "bert" else 1)
    # the host's per-step terms (schedule.per_step_terms) of the framework stated or inferred from the model
    host_fw, host_basis = sch.resolve_host_framework(getattr(cfg, "host_framework", "auto"), cfg.model)
    in_bytes = cfg.batch * sch.input_bytes_per_sample(cfg.model, seq=getattr(cfg, "seq", 0),
                                                      image=getattr(cfg, "image", 0))
    terms = sch.per_step_terms(be.graph.target.em, host_fw, cfg.ipus, in_bytes, float(res.seconds),
                               device_iterations=int(getattr(cfg, "device_iterations", 1) or 1))
    step_s = float(res.seconds) + sum(terms.values())
    sps = samples / step_s if step_s > 0 else 0.0
    schedule = dict(stages=cfg.stages, replicas=1, grad_accum=1, micro_batch=cfg.batch, samples_per_step=float(samples),
                    step_seconds=step_s, ipu_step_seconds=float(res.seconds), per_step_terms=terms,
                    host_framework=host_fw, host_framework_basis=host_basis,
                    steady_cycles_per_microbatch=int(res.total_cycles),
                    stage_cycles=[int(res.total_cycles)], optimizer_cycles=0, allreduce_cycles=0, stream_cycles=0,
                    fill_drain_cycles=0, step_cycles=int(res.total_cycles),
                    note="one graph over all IPUs, one batch, no pipelining (whole-graph path)")
    oom = ([tuple(x) for x in pd_.run["oom_tiles"]] if fits_outlined is not None else cg.oom_report)
    fits, total, seconds = res.fits, res.total_cycles, step_s
    if cfg.replicas > 1 or cfg.grad_accum > 1 or cfg.optimizer != "sgd" or cfg.master_weights or cfg.rts \
            or cfg.optimizer_state != "onchip":
        schedule, fits, oom = compose_whole_graph(cfg, be, res, pd_)
        total, seconds = schedule["step_cycles"], schedule["step_seconds"]
        sps = schedule["samples_per_step"] / seconds if seconds > 0 else 0.0
    pd_.run["schedule"] = schedule
    pd_.run["samples_per_second"] = float(sps)
    return RunResult(cfg=cfg, config=pd_.run["config"], fits=fits, total_cycles=total, seconds=seconds,
                     profile_data=pd_, numeric_checks=checks, oom_report=oom, wall=wall,
                     num_vertices=sum(g.n for g in be.graph.groups), num_ops=len(be.ctx.records),
                     samples_per_second=float(sps), schedule=schedule)


def _compile_and_run(be, cfg: ModelConfig, mode: str, config: dict, kept, record: bool, progress, profile: bool):
    """(engine, run result) of ``be``'s graph: ``kept`` (an engine whose compile read nothing of its target that
    differs on this one, :func:`_shared_build`) gives its compiled graph; else it is compiled, with what the compile
    reads of the target recorded where ``record`` (a graph the cache keeps, which another device may take)."""
    eng = Engine(be.graph, be.program(), mode=mode, model=cfg.model, config=config, carried_copies=CARRIED_COPIES)
    compiling = within(progress, "compiling", COMPILE_STARTS, COMPILE_ENDS)
    if kept is not None:
        eng.adopt(kept, be.graph.target)
    elif record:
        with TargetReads.recording(be.graph.target) as eng.compile_reads:
            eng.compile(compiling)
    res = eng.run(inputs=None if mode == "timing" else be.inputs, profile_path=None, allow_out_of_memory=True,
                  compile_progress=compiling, tables=profile)
    return eng, res


# A timing-only run that differs from the previous one only in COMPOSITION_FIELDS (config.py: what
# whole_graph.compose_whole_graph applies) reuses the emulated graph of the previous run (``_GRAPH_CACHE``: key ->
# (backend, built, engine, run result, whether that result's profile holds its tables)).
_GRAPH_CACHE: dict = {}
# The compiled copies carried from one whole graph's compile to the next in this process (compile.CarriedCopies:
# replica graphs of one model on another device or availableMemoryProportion share most exchanges; the
# validation report runs such rows one after another).  Bounded to one graph's entries; release_graphs keeps it
# (the next group's graph is the one it is for).
CARRIED_COPIES = CarriedCopies()


def release_graphs() -> None:
    """Free the graphs kept for the next run (``_GRAPH_CACHE``, the pipeline's stage graphs) and collect what
    the runs left in reference cycles now: a caller that knows no later run shares them (the validation report,
    between its groups of rows) keeps its peak memory at one graph's.  The graphs themselves go by reference
    counting (the stage graphs hold no reference cycle; the whole graph's are broken by :func:`_drop_kept_graph`),
    but the composed runs leave other garbage in cycles that holds compiled arrays: without this collection
    validate's peak rose 1.40 -> 1.55 GB (decision 0470)."""
    had = bool(_GRAPH_CACHE)
    _drop_kept_graph()
    if release_stage_graphs() or had:
        gc.collect()
        return_freed_memory()


def _drop_kept_graph() -> bool:
    """Empty ``_GRAPH_CACHE`` and free its graph by reference counting; whether a graph is still alive afterwards
    (the caller collects for it).  A graph's objects refer to each other in two kinds of cycle,
    each tensor to its graph (``Tensor.graph``) and each vertex group to its compute set (``VertexGroup.cs``,
    whose ``groups`` list holds it): the cache is the only holder of its entries, so those two back references
    are dropped and reference counting frees the rest (tests/emulator/models/test_graph_release.py).  A graph
    still alive is held by something else in a cycle, one this does not know of (``compile.steps.expand``'s
    recursive closures were one, until they became module functions), so the caller collects (decision 0470)."""
    graphs = [weakref.ref(_break_cycles(entry[0].graph)) for entry in _GRAPH_CACHE.values()]
    _GRAPH_CACHE.clear()
    return any(g() is not None for g in graphs)


def _break_cycles(graph):
    for t in graph.tensors:
        t.graph = None
    for g in graph.groups:
        g.cs = None
    return graph


def _shared_build(key: tuple, cfg: ModelConfig, device: str):
    """(be, built, engine) of the kept graph whose key is ``key`` but for the device, when its build read nothing of
    its target that differs on ``device`` (:class:`TargetReads`); its graph then holds ``device``'s target, for the
    compile and the composition.  ``engine``: the kept run's engine when its compile read nothing of its target
    that differs on ``device`` either (``Engine.compile_reads``: the compiled graph is this device's, only what
    reads the target after the compile, the clock and the links, differs), else None (compiled again).  None
    where no kept graph serves."""
    for k, (be, built, eng, *_kept) in _GRAPH_CACHE.items():
        reads = getattr(be, "target_reads", None)
        if k[0] == device or k[1:] != key[1:] or reads is None:
            continue
        target = Target.from_device(device, num_ipus=cfg.stages)
        if reads.same_build(be.graph.target, target):
            compiled = getattr(eng, "compile_reads", None)
            same_compile = compiled is not None and compiled.same_build(be.graph.target, target)
            be.graph.target = target
            # each vertex group keeps the cycles its codelet gave on the target it was first compiled for
            # (graph.VertexGroup.cycles): costed again on this one
            for cs in be.graph.compute_sets:
                for g in cs.groups:
                    g._cycles = None
            return be, built, eng if same_compile else None
    return None


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


def _add_outlined_memory(be, pd_, tables: bool = True) -> bool | None:
    """Memory per tile of the blocks an outlined run did not build (see resnet.outlined): the other
    blocks' weights (always live, laid out as the representative's) and their saved inputs (not always
    live: each is kept from its block's forward through its block's backward pass; placed on those
    liveness steps when the builder recorded its replays, ``be.saved_spans``, else counted as live at the
    liveness peak).  Returns the new fits, or None when nothing was outlined.  ``tables`` False: the memory per
    tile, the fit and the out-of-memory tiles only (the variable rows and the liveness tables are left as the
    compile gave them: a caller that reads no profile, the validation report)."""
    if not be.multiplicity and not be.saved_copies:
        return None
    from popvision_lite.profile import schema

    T = be.graph.target.num_tiles
    var = schema.CATEGORY_CODE["variable"]
    mem = np.asarray(pd_.memory).copy()
    rows = []  # the variables of the memory added below
    for t in be.weights:
        extra = be.multiplicity.get(t.id, 1) - 1
        if extra > 0:
            per_tile = extra * t.mapping.elements_per_tile(T) * t.itemsize
            mem[:, var, 0] += per_tile
            rows.append(VariableRow(f"{t.name} [x{extra} other blocks of its kind, outlined]", t.dtype, str(t.shape),
                                    per_tile))
    peak, spans = _saved_on_liveness(be, pd_, T, tables)
    if peak is not None:
        mem[:, var, 1] = peak
    else:
        for t in be.saved_copies:
            mem[:, var, 1] += t.mapping.elements_per_tile(T) * t.itemsize
    for t, sp in zip(be.saved_copies, spans or [None] * len(be.saved_copies), strict=True):
        if sp is not None:
            rows.append(VariableRow(f"{t.name} [saved for an outlined block]", t.dtype, str(t.shape),
                                    t.mapping.elements_per_tile(T) * t.itemsize, [sp]))
    if tables:
        append_variables(pd_, rows)
    pd_.memory = mem
    need = mem.sum(axis=(1, 2))
    cap = be.graph.target.sram_bytes_per_tile
    fits = bool((need <= cap).all())
    over = np.nonzero(need > cap)[0]
    pd_.run["fits"] = fits
    pd_.run["oom_tiles"] = [[int(t), int(t // be.graph.target.tiles_per_ipu), int(need[t]), int(cap)]
                            for t in over[np.argsort(-need[over], kind="stable")][:16]]
    return fits


def _saved_on_liveness(be, pd_, T, tables: bool = True):
    """The not-always-live bytes per (liveness step, tile) with the outlined blocks' saved copies added over
    the steps they are live (``be.saved_spans``: per copy (a, z), indices into the main sequence's programs:
    live from the step before program a's first liveness step through program z's last); the profile's
    liveness table and per-step bytes are updated to match.
    Returns (the peak of those bytes per tile over the steps, each copy's (first, last) liveness step or None);
    (None, None) when the spans are not known (then the caller counts every saved copy at the peak).
    ``tables`` False: the peak alone, the profile's tables left as they were (each stretch between two change
    steps gives its own column maxima, the saved bytes added to them: the same integers, without the (steps x
    tiles) table)."""
    spans = getattr(be, "saved_spans", None)
    ltb = getattr(pd_, "liveness_tile_bytes", None)
    if not spans or len(spans) != len(be.saved_copies) or ltb is None or any(z is None for _a, z in spans):
        return None, None
    # the programs table as held (typed columns from the builder, or a DataFrame): its columns read as numpy, so
    # a run that builds no DataFrame imports no pandas here (decision 0471)
    progs = pd_.table("programs") if hasattr(pd_, "table") else pd_.programs
    prog_id = np.asarray(progs["prog_id"])
    order = np.argsort(prog_id, kind="stable")
    ids = prog_id[order]
    parents = np.asarray(progs["parent_id"])[order]
    is_leaf = np.asarray(progs["lstep"])[order] >= 0
    # program ids are preorder and leaves take liveness steps in that order: a top-level program's subtree
    # is the id range up to the next one's, and its steps are the leaves counted before its bounds
    root = ids[parents < 0]
    if len(root) != 1:
        return None, None
    top = ids[parents == root[0]]
    if len(top) != len(be.ctx.programs):
        return None, None
    leaves_before = np.concatenate([[0], np.cumsum(is_leaf)])
    lo = leaves_before[np.searchsorted(ids, top)]
    hi = leaves_before[np.searchsorted(ids, np.append(top[1:], ids[-1] + 1))] - 1
    if any(max(a_, z_) >= len(top) for a_, z_ in spans):
        return None, None
    L = ltb.shape[0]
    change: dict[int, np.ndarray] = {}  # liveness step -> bytes per tile that start (+) or stop (-) being live there
    placed = []
    for t, (a_, z_) in zip(be.saved_copies, spans, strict=True):
        b = t.mapping.elements_per_tile(T) * t.itemsize
        start, end = max(int(lo[a_]) - 1, 0), min(int(hi[z_]), L - 1)
        if end < start:
            placed.append(None)
            continue
        placed.append((start, end))
        for step, d in ((start, b), (end + 1, -b)):
            if step < L:
                change[step] = change[step] + d if step in change else d.copy()
    steps_at = sorted(change)
    if not tables:
        peak = np.zeros(T, np.int64)
        extra = np.zeros(T, np.int64)
        bounds = [0, *steps_at, L]
        for i in range(len(bounds) - 1):
            if i:
                extra += change[bounds[i]]
            s0, s1 = bounds[i], bounds[i + 1]
            if s1 > s0:
                np.maximum(peak, np.asarray(ltb[s0:s1]).max(axis=0).astype(np.int64) + extra, out=peak)
        return peak, placed
    # the (steps x tiles) int64 tables are the largest arrays of a run's profile (a ResNet-50 graph: ~10 k steps x
    # 1472 tiles): the saved copies' bytes are constant between their few change steps, so each stretch gets its
    # bytes added once (one pass over the table, no cumulative sum down its columns), in place
    live = np.asarray(ltb).astype(np.int64)
    extra = np.zeros(T, np.int64)
    for i, step in enumerate(steps_at):
        extra += change[step]
        if extra.any():
            live[step:steps_at[i + 1] if i + 1 < len(steps_at) else L] += extra
    top = np.iinfo(np.uint32).max
    pd_.liveness_tile_bytes = (live if int(live.max(initial=0)) <= top else np.minimum(live, top)).astype(np.uint32)
    cols = dict(total_bytes=live.sum(axis=1), max_tile_bytes=live.max(axis=1, initial=0),
                max_tile=live.argmax(axis=1).astype(np.int32))
    steps = pd_.table("liveness_steps") if hasattr(pd_, "table") else pd_.liveness_steps
    if isinstance(steps, Columns):  # the builder's columns: replaced as columns (cast to the stored dtypes)
        pd_.liveness_steps = steps.replace(**cols)
    else:
        steps = steps.copy()
        for c, v in cols.items():
            steps[c] = v
        pd_.liveness_steps = steps
    return live.max(axis=0, initial=0), placed


def _run_composed(cfg, device, timing_only, progress, profile: bool = True) -> RunResult:
    """BERT through the pipeline / replication / training-state composition (emulator/models/pipeline.py).
    Numerics are not run on this path (each stage program is emulated once, timing only)."""
    t0 = time.perf_counter()
    pd_, info = run_pipelined(cfg, device, progress=progress, profile=profile)
    wall = dict(info["wall"])
    config = cfg.to_dict() | {"device": device, "timing_only": True}
    pd_.run["config"] = config
    if not timing_only:
        pd_.run["numeric_checks_skipped"] = ("pipelined / replicated composition: each distinct stage program is "
                                             "emulated once for timing and memory; numerics need the whole-graph "
                                             "path (one IPU, default training state)")
    wall["total"] = time.perf_counter() - t0
    return RunResult(cfg=cfg, config=config, fits=info["fits"], total_cycles=info["total_cycles"],
                     seconds=info["seconds"], profile_data=pd_, numeric_checks={}, oom_report=info["oom_report"],
                     wall=wall, num_vertices=info["num_vertices"], num_ops=info["num_ops"],
                     samples_per_second=info["samples_per_second"], schedule=info["schedule"])


