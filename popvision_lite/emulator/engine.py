"""Engine: compile a graph + program, run it (BSP, numerics optional), return a profile.

Costs never depend on data, so every cycle, byte and memory figure is fixed by
:func:`compiler.compile_graph`; ``mode="full"`` additionally runs each compute set's vertex groups
as vectorised numpy (and each Copy / StreamCopy as one fancy-index), while ``mode="timing"``
does no data work at all.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from popvision_lite.emulator import programs as P
from popvision_lite.emulator.compile import CarriedCopies, Compiled, compile_graph
from popvision_lite.emulator.graph import DTYPES, Graph, HostBuffer, Tensor
from popvision_lite.emulator.profile_builder import build_profile
from popvision_lite.emulator.run_result import RunResult
from popvision_lite.errors import EmulatorError, OutOfMemoryError
from popvision_lite.profile.schema import ProfileData

MODES = ("full", "timing")


class CompiledGraph:
    """Result of :meth:`Engine.compile`: memory, liveness and step costs (no numerics needed)."""

    def __init__(self, compiled: Compiled, mode: str, model: str, config: dict):
        self._c = compiled
        self.mode = mode
        self.model = model
        self.config = config

    @property
    def fits(self) -> bool:
        return self._c.fits

    @property
    def oom_report(self) -> list[tuple[int, int, int, int]]:
        """[(global_tile, ipu, bytes_needed, capacity)], worst first; empty when it fits."""
        return list(self._c.oom_report)

    @property
    def memory(self) -> np.ndarray:
        return self._c.memory

    @property
    def total_cycles(self) -> int:
        return self._c.total_cycles

    @property
    def num_steps(self) -> int:
        return len(self._c.seq)

    def profile_data(self, numeric_checks: dict | None = None, extra: dict | None = None,
                     tables: bool = True) -> ProfileData:
        """The profile (``tables`` False: without its tables, ``profile_builder.build_profile``)."""
        return build_profile(self._c, self.mode, self.model, self.config, numeric_checks, extra, tables=tables)

    def oom_message(self) -> str:
        rep = self._c.oom_report
        worst = ", ".join(f"tile {t} (IPU {i}): {b:,} B of {cap:,} B" for t, i, b, cap in rep[:5])
        return (f"out of memory: {len(rep)} tile(s) exceed their {rep[0][3]:,} B of SRAM; worst: {worst}. "
                f"Fix: spread tensors over more tiles, use smaller blocks/tiles per op, or more IPUs.")


class Outputs(Mapping):
    """Every tensor's and host buffer's value by name after a full-numerics run (a host buffer wins a
    name both have).  A tensor that deferred work still has to fill - typically a staging tensor of
    broadcast operand blocks that the codelets read through, never themselves - is made current when
    it is first looked up, so what nobody asks for is never copied."""

    def __init__(self, graph: Graph, data: _Data, hosts: dict):
        self._data = data
        self._tensors = {t.name: t for t in graph.tensors if t.id not in data.released}
        self._hosts = {b.name: hosts[b.id].reshape(b.shape) for b in graph.host_buffers}
        self._names = list(dict.fromkeys([*self._tensors, *self._hosts]))

    def __getitem__(self, name: str) -> np.ndarray:
        if name in self._hosts:
            return self._hosts[name]
        t = self._tensors[name]
        self._data.materialize(t.id)
        return self._data[t.id].reshape(t.shape)

    def __iter__(self):
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


class _Aliases(dict):
    """Deferred copies: destination tensor id -> (src, dst), with the destinations of each source
    (``by_src``) so a write to a source finds its pending copies without a scan."""

    def __init__(self):
        super().__init__()
        self.by_src: dict[int, set] = {}

    def __setitem__(self, tid: int, copy: tuple) -> None:
        self.pop(tid, None)
        super().__setitem__(tid, copy)
        self.by_src.setdefault(copy[0].tensor.id, set()).add(tid)

    def pop(self, tid: int, *default):
        if tid not in self:
            return default[0] if default else super().pop(tid)
        copy = super().pop(tid)
        self.by_src[copy[0].tensor.id].discard(tid)
        return copy

    def __delitem__(self, tid: int) -> None:
        self.pop(tid)


class _Data(dict):
    """Tensor id -> flat array, plus deferred work (lazy numerics, full mode only).

    * Pending broadcast copies: a Copy of source blocks into a whole staging tensor (block t of the
      staging tensor <- source block ``src.index[t]``) is recorded instead of done.  Codelets that
      can read through it (the block matmul's whole-GEMM path) use the source directly.
    * Pending GEMMs: a whole-GEMM matmul group ``C (+)= A[:, k] @ B[k, :]`` is recorded; the next
      accumulating group on the same C, A, B with the following K chunk extends it, so a K-streamed
      matmul becomes one GEMM.
    Anything else that touches a staging tensor, reads C, or writes a source materialises the
    deferred work first, so results are always those of running every program eagerly."""

    def __init__(self, base: dict, zeros: dict | None = None):
        super().__init__(base)
        self._zeros = zeros or {}  # tensor id -> (size, dtype): made (zero-filled) when first used
        self.aliases = _Aliases()
        self.gemms: dict[int, list] = {}  # C id -> [A, B, C, k-slice, codelet of the first group]
        self.released: set[int] = set()  # tensors dropped after their last reader (release)
        self._held: set[int] = set()  # released while a deferred copy still reads them: dropped with it

    def __missing__(self, tid: int) -> np.ndarray:
        if tid in self.released:
            raise EmulatorError(f"engine: tensor {tid} is used after its last reader, where its data was freed "
                                "(an engine fault: report it)")
        size, dtype = self._zeros[tid]
        arr = self[tid] = np.zeros(size, dtype)
        return arr

    # -- GEMMs ---------------------------------------------------------------------------
    def defer_gemm(self, codelet, plan) -> None:
        TA, TB, TC, ks = plan
        p = self.gemms.get(TC.id)
        # merge only into an fp32 C: a narrower C is rounded after every chunk when run eagerly
        if (p is not None and codelet.accumulate and TC.dtype == "float32" and p[0] is TA and p[1] is TB
                and p[3].stop == ks.start):
            p[3] = slice(p[3].start, ks.stop)
            return
        self.flush_gemm(TC.id)
        self.gemms[TC.id] = [TA, TB, TC, ks, codelet]

    def flush_gemm(self, cid: int) -> None:
        p = self.gemms.pop(cid, None)
        if p is not None:
            p[4].compute_gemm(None, self, (p[0], p[1], p[2], p[3]))

    def flush_gemms_reading(self, tid: int) -> None:
        for cid in [c for c, p in self.gemms.items() if tid in (p[0].id, p[1].id)]:
            self.flush_gemm(cid)

    # -- copies --------------------------------------------------------------------------
    def materialize(self, tid: int) -> None:
        """``tid`` is about to be read or written by eager code: make its data current."""
        self.flush_gemm(tid)
        al = self.aliases.pop(tid, None)
        if al is not None:
            src, dst = al
            self.materialize(src.tensor.id)
            move(self, src, dst)
            self._copied_from(src.tensor.id)

    def finish_readers_of(self, tid: int) -> None:
        """Do the deferred work that reads ``tid`` (it is about to change)."""
        self.flush_gemms_reading(tid)
        for d in list(self.aliases.by_src.get(tid, ())):
            self.materialize(d)

    def before_write(self, tid: int) -> None:
        self.finish_readers_of(tid)
        self.materialize(tid)

    # -- freeing ------------------------------------------------------------------------
    def release(self, tid: int) -> None:
        """No program reads or writes ``tid`` any more: do the deferred GEMMs that read it, drop a deferred
        copy into it and a deferred GEMM into it (nobody reads their result), then its data.  A tensor a
        deferred copy still reads (the source of a staging tensor read through) is dropped with that copy."""
        if self.aliases.by_src.get(tid):
            self._held.add(tid)
            return
        self.flush_gemms_reading(tid)
        self.gemms.pop(tid, None)
        al = self.aliases.pop(tid, None)
        self.pop(tid, None)
        self.released.add(tid)
        if al is not None:
            self._copied_from(al[0].tensor.id)

    def _copied_from(self, src: int) -> None:
        if src in self._held and not self.aliases.by_src.get(src):
            self._held.discard(src)
            self.release(src)

    def materialize_all(self) -> None:
        for c in list(self.gemms):
            self.flush_gemm(c)
        for d in list(self.aliases):
            self.materialize(d)


def move(data: dict, src, dst) -> None:
    """``dst`` <- ``src`` (two different tensors).  Regions into a contiguous run of a tensor of the same
    dtype (an operand or the partials gathered into a staging tensor) is one gather straight into the
    destination; anything else gathers, then scatters."""
    from popvision_lite.emulator.graph import Regions, TensorView

    if (isinstance(src, Regions) and isinstance(dst, TensorView) and dst._index is None
            and src.tensor.dtype == dst.tensor.dtype and src._access()[0] == "index"):
        a, b = dst.contiguous
        np.take(data[src.tensor.id], src.index(), out=data[dst.tensor.id][a:b])
        return
    dst.write(data, src.read(data))


def _num_leaves(prog: P.Program) -> int:
    """How many liveness steps ``prog`` spans (its leaf programs, a Repeat body once)."""
    if isinstance(prog, P.Sequence | P.Repeat):
        return sum(_num_leaves(p) for p in prog.children())
    return 1


def _aliasable(src, dst) -> bool:
    from popvision_lite.emulator.graph import Blocks, Concat, Regions, TensorView, Windows

    whole = isinstance(dst, TensorView) and src.tensor is not dst.tensor and dst.contiguous == (0, dst.tensor.size)
    if whole and (isinstance(src, Windows) or (isinstance(src, Concat)
                                               and all(isinstance(p, Windows) for p in src.parts))):
        # the windows of an uneven matmul split into a whole staging tensor: read through as well
        return src.size > 0
    if isinstance(src, Regions) and isinstance(dst, TensorView):
        # source regions into a whole staging tensor (the op library's operand broadcast; blocks of
        # an uneven split differ in size): codelets with ``reads_through_copies`` read the source
        # directly
        return (src.tensor is not dst.tensor and src.n > 0 and dst.contiguous == (0, dst.tensor.size)
                and src.sizes.min() > 0)
    return (isinstance(src, Blocks) and isinstance(dst, Blocks) and src.tensor is not dst.tensor
            and len(src.block_shape) == 2 and len(src.tensor.shape) == 2
            and dst.block_shape == (1, *src.block_shape) and dst.is_identity())


class _Release:
    """When a one-shot full-numerics run drops what it no longer needs: each tensor's data after the liveness
    step of its last reader or writer (compile.liveness: ``last_access``), each compute set's group caches
    after its last run; inside a Repeat body, once the outermost Repeat is done.  ``keep``: tensor ids the
    caller reads after the run (never dropped)."""

    def __init__(self, c: Compiled, keep: set):
        outer = np.arange(len(c.leaves))  # what is used last at step s goes after step outer[s]: inside a
        for a, b in c.repeat_ranges:      # Repeat body, the outermost Repeat's start (done after that Repeat)
            outer[a:b + 1] = np.minimum(outer[a:b + 1], a)
        self.depth = 0  # Repeats being run
        self.after: dict[int, list] = {}  # step -> [tensor ids]
        for tid in np.flatnonzero(c.last_access >= 0):
            if int(tid) not in keep:
                self.after.setdefault(int(outer[c.last_access[tid]]), []).append(int(tid))
        self.caches: dict[int, list] = {}  # step -> [compute sets whose group caches go]
        last_cs = {}
        for s, pid in enumerate(c.leaves):
            p = c.progs[pid].prog
            if isinstance(p, P.Execute):
                last_cs[id(p.cs)] = (int(outer[s]), p.cs)
        for s, cs in last_cs.values():
            self.caches.setdefault(s, []).append(cs)

    def done(self, step: int, data: _Data) -> None:
        """Everything used last at liveness step ``step`` (a leaf's, or the start of an outermost Repeat) is done."""
        for tid in self.after.pop(step, ()):
            data.release(tid)
        for cs in self.caches.pop(step, ()):
            for grp in cs.groups:
                grp.codelet.drop_caches(grp)


class Engine:
    def __init__(self, graph: Graph, program: P.Program, mode: str = "full", model: str = "",
                 config: dict | None = None, carried_copies: CarriedCopies | None = None):
        """``carried_copies``: compiled copies the caller carries from one whole graph's compile to the next
        (compile.CarriedCopies; the bundled models and ONNX imports share one per process, models/emulated.py);
        None: the compile keeps nothing beyond itself."""
        if mode not in MODES:
            raise EmulatorError(f"engine: mode must be one of {', '.join(MODES)}, got {mode!r}")
        if not isinstance(graph, Graph):
            raise EmulatorError(f"engine: {graph!r} is not an emulator Graph")
        self.graph = graph
        self.program = program
        self.mode = mode
        self.model = model
        self.config = dict(config or {})
        self._compiled: CompiledGraph | None = None
        self.lazy_copies = True  # full mode: defer whole-tensor broadcast copies (see _Data)
        self.carried_copies = carried_copies
        self.compile_reads = None  # what the compile read of the target, where the caller recorded it

    def adopt(self, other: Engine, target) -> None:
        """Take ``other``'s compiled graph (the same graph and program, compiled for a target whose every value
        the compile read ``target`` has too: ``compile_reads``) as this engine's, for ``target``: its profile,
        seconds and run are ``target``'s, every cycle, byte and step the compile gave."""
        import copy

        c = copy.copy(other.compile()._c)
        c.target = target
        self._compiled = CompiledGraph(c, self.mode, self.model, self.config)
        self.compile_reads = other.compile_reads

    def compile(self, progress=None) -> CompiledGraph:
        """The compiled graph (compiled on the first call; ``progress(fraction)`` follows that compile)."""
        if self._compiled is None:
            self._compiled = CompiledGraph(compile_graph(self.graph, self.program, copy_memo=self.carried_copies,
                                                         progress=progress), self.mode, self.model, self.config)
        return self._compiled

    # ------------------------------------------------------------------------------------
    def _initial_data(self, inputs: dict) -> tuple[_Data, dict]:
        """Tensor data (variables start at zero; one is allocated when first used, so a staging tensor the
        codelets only read through costs nothing) and host buffers, with ``inputs`` written in."""
        g = self.graph
        data = _Data({t.id: t.value.copy() for t in g.tensors if t.kind == "constant"},
                     {t.id: (t.size, DTYPES[t.dtype]) for t in g.tensors if t.kind != "constant"})
        hosts = {b.id: np.zeros(b.size, DTYPES[b.dtype]) for b in g.host_buffers}
        for key, val in (inputs or {}).items():
            obj = g.get(key) if isinstance(key, str) else key
            if isinstance(obj, Tensor):
                if obj.kind == "constant":
                    raise EmulatorError(f"engine inputs: '{obj.name}' is a constant; its value is fixed")
                dest = data[obj.id]
            elif isinstance(obj, HostBuffer):
                dest = hosts[obj.id]
            else:
                raise EmulatorError(f"engine inputs: {key!r} is not a tensor or host buffer of this graph")
            arr = np.asarray(val)
            if arr.size != dest.size:
                raise EmulatorError(
                    f"engine inputs: '{obj.name}' needs {dest.size} elements {obj.shape}, got array of shape {arr.shape}"
                )
            dest[...] = arr.reshape(-1).astype(dest.dtype, copy=False)
        return data, hosts

    def _tensor_ids(self, names) -> set:
        """Ids of the tensors named ``names`` (host buffers' names: nothing to keep, they are never freed)."""
        wanted = set(names)
        ids = {t.id for t in self.graph.tensors if t.name in wanted}
        unknown = wanted - {t.name for t in self.graph.tensors} - {b.name for b in self.graph.host_buffers}
        if unknown:
            raise EmulatorError(f"engine run: keep names no tensor or host buffer of this graph: "
                                f"{', '.join(sorted(unknown)[:5])}")
        return ids

    def _execute(self, prog: P.Program, data: dict, hosts: dict, finish: bool = True,
                 release: _Release | None = None) -> _Data:
        """Run ``prog`` on ``data``; with ``finish`` do every deferred copy and GEMM now, else leave them
        to :meth:`outputs` (a staging tensor nothing read is then filled only if asked for).  ``release``
        (``prog`` the whole program): drop data after its last use as it says."""
        if not isinstance(data, _Data):
            data = _Data(data)
        self._exec(prog, data, hosts, release, [0])
        if finish:
            data.materialize_all()
        return data

    def outputs(self, data: _Data, hosts: dict) -> Outputs:
        """The values of every tensor and host buffer after :meth:`_execute`, by name."""
        return Outputs(self.graph, data, hosts)

    def _exec(self, prog: P.Program, data: _Data, hosts: dict, release: _Release | None = None,
              at: list | None = None) -> None:
        """Run ``prog``.  With ``release`` (``prog`` is the whole program), ``at`` = [liveness step] follows
        the leaves as compile._walk numbered them, and what is used last at a step is dropped after it."""
        if release is None:
            self._run_tree(prog, data, hosts)
            return
        if isinstance(prog, P.Sequence):
            for p in prog.programs:
                self._exec(p, data, hosts, release, at)
        elif isinstance(prog, P.Repeat):
            start = at[0]
            release.depth += 1
            for _ in range(prog.count):
                at[0] = start
                self._exec(prog.body, data, hosts, release, at)
            release.depth -= 1
            at[0] = start + _num_leaves(prog.body)
            if release.depth == 0 and at[0] > start:
                release.done(start, data)
        else:
            self._leaf(prog, data, hosts)
            if release.depth == 0:
                release.done(at[0], data)
            at[0] += 1

    def _run_tree(self, prog: P.Program, data: _Data, hosts: dict) -> None:
        if isinstance(prog, P.Sequence):
            for p in prog.programs:
                self._run_tree(p, data, hosts)
        elif isinstance(prog, P.Repeat):
            for _ in range(prog.count):
                self._run_tree(prog.body, data, hosts)
        else:
            self._leaf(prog, data, hosts)

    def _leaf(self, prog: P.Program, data: _Data, hosts: dict) -> None:
        if isinstance(prog, P.Execute):
            for grp in prog.cs.groups:
                if not grp.n:
                    continue
                touched = {f.tensor.id for f in grp.fields.values()}
                written = {f.tensor.id for fn, f in grp.fields.items() if grp.codelet.fields[fn] != "in"}
                plan = None
                if self.lazy_copies and hasattr(grp.codelet, "gemm_plan"):
                    plan = grp.codelet.gemm_plan(grp, data.aliases)
                if plan is not None:
                    TA, TB, TC, _ = plan
                    data.finish_readers_of(TC.id)
                    for t in (TA.id, TB.id):
                        data.flush_gemm(t)  # inputs produced by a pending GEMM
                        if t in data.aliases and t != TC.id:
                            data.materialize(t)
                    if TC.id in data.aliases:  # C itself awaits a copy: do it (keeps a pending GEMM on C)
                        src, dst = data.aliases.pop(TC.id)
                        data.materialize(src.tensor.id)
                        move(data, src, dst)
                    data.defer_gemm(grp.codelet, plan)
                    continue
                for t in written:
                    data.before_write(t)
                through = set()
                if self.lazy_copies and getattr(grp.codelet, "reads_through_copies", False):
                    # inputs awaiting a deferred copy stay deferred: the codelet reads their source
                    through = {f.tensor.id for fn, f in grp.fields.items()
                               if grp.codelet.fields[fn] == "in" and f.tensor.id in data.aliases} - written
                for t in touched - through:
                    data.materialize(t)
                for t in through:
                    data.materialize(data.aliases[t][0].tensor.id)
                grp.codelet.compute(grp, data)
        elif isinstance(prog, P.Copy):
            src, dst = prog.src, prog.dst
            data.materialize(src.tensor.id)
            if self.lazy_copies and _aliasable(src, dst):
                data.finish_readers_of(dst.tensor.id)
                data.aliases[dst.tensor.id] = (src, dst)  # replaces a pending copy: dst is overwritten whole
                return
            data.before_write(dst.tensor.id)
            data.materialize(dst.tensor.id)
            if src.tensor is dst.tensor:
                dst.write(data, src.read(data).copy())
            else:
                move(data, src, dst)
        elif isinstance(prog, P.StreamCopy):
            tid = prog.view.tensor.id
            data.materialize(tid)
            buf = hosts[prog.buffer.id]
            if prog.to_device:
                data.before_write(tid)
                prog.view.write(data, buf)
            else:
                buf[...] = prog.view.read(data)
        # Sync: no data effect

    def run(self, inputs: dict | None = None, profile_path=None, allow_out_of_memory: bool = False,
            numeric_checks: dict | None = None, compile_progress=None, keep=None, tables: bool = True) -> RunResult:
        """Compile and (``mode="full"``) run the program.  ``keep``: None - every tensor's value stays readable
        in ``outputs``; else the names of the tensors the caller reads after the run (a one-shot run): every
        other tensor's data is freed after its last use, so the run's peak memory is what is live, not
        everything it made (the same results, cycles and bytes).  ``tables`` False (no ``profile_path``): the
        result's profile without its tables (:meth:`CompiledGraph.profile_data`)."""
        t0 = time.perf_counter()
        cg = self.compile(compile_progress)
        t1 = time.perf_counter()
        outputs: Mapping[str, np.ndarray] = {}
        if cg.fits and self.mode == "full":
            release = None if keep is None else _Release(cg._c, self._tensor_ids(keep))
            data, hosts = self._initial_data(inputs or {})
            outputs = self.outputs(self._execute(self.program, data, hosts, finish=False, release=release), hosts)
        elif inputs:
            self._initial_data(inputs)  # still validate the inputs
        t2 = time.perf_counter()
        pd_ = cg.profile_data(numeric_checks, tables=tables or profile_path is not None)
        path = None
        if profile_path is not None:
            from popvision_lite.profile.writer import write_profile

            write_profile(profile_path, pd_)
            path = str(Path(profile_path))
        t3 = time.perf_counter()
        if not cg.fits and not allow_out_of_memory:
            err = OutOfMemoryError(cg.oom_message() + (f" Profile written to {path}." if path else ""),
                                   worst_tiles=[(t, b, cap) for t, _i, b, cap in cg.oom_report], profile_path=path)
            err.profile_data = pd_
            err.oom_report = cg.oom_report
            raise err
        return RunResult(outputs=outputs, profile_data=pd_, total_cycles=cg.total_cycles,
                         seconds=cg.total_cycles / self.graph.target.clock_hz, fits=cg.fits, profile_path=path,
                         oom_report=list(cg.oom_report),
                         wall={"compile": t1 - t0, "execute": t2 - t1, "profile": t3 - t2})


def op_tables(graph: Graph, program: P.Program):
    """The ops and programs tables of ``program`` on ``graph`` as far as the build alone fixes them, without
    compiling (no step costs, no copies, no memory): per op ``op_id``, ``name``, ``type``, ``precision``,
    ``flops``, ``min_bytes`` and ``plan``; per program ``prog_id``, ``parent_id``, ``kind``, ``name``, ``op_id``,
    ``repeat`` and ``cs_id``.  Each value is the one the compiled profile holds (``profile_builder._ops_table``,
    ``_programs_table``): the programs are walked as the compile walks them (``compile._walk``: the same ids), an
    op's flops are its compute sets' vertex flops (``compute_sets.compile_execute``) times the runs of each in the
    executed sequence, summed as the profile builder sums them, a program object met again counting under its
    first use's op as its shared step template does.  None when an op's builder recorded no ``type``,
    ``precision`` or ``min_bytes`` (the compiled accesses would decide them): the caller compiles instead.
    What reads these tables: the GPU estimate's op lists (gpu_validation.op_list, analysis.model_pass)."""
    import pandas as pd

    from popvision_lite.emulator.compile import _walk
    from popvision_lite.emulator.compile.steps import program_executions
    from popvision_lite.profile import schema

    c = Compiled(graph, program)
    _walk(c, program, -1, None, set())
    n = len(c.progs)
    mult = program_executions(c)  # executions of each program in the unrolled sequence (as the compile counts them)
    first: dict[int, int] = {}    # id(program object) -> its template (compute sets with vertices only)
    t_flops, t_op, t_count = [], [], []
    for pid in c.leaves:
        info = c.progs[pid]
        p = info.prog
        k = first.get(id(p))
        if k is None:
            if not isinstance(p, P.Execute) or not p.cs.groups or p.cs.num_vertices == 0:
                first[id(p)] = -1   # no step with flops (compile_execute adds no template for an empty one)
                continue
            k = first[id(p)] = len(t_flops)
            t_flops.append(int(sum(g.codelet.flops(g) for g in p.cs.groups)))
            t_op.append(c.op_id(info.op))
            t_count.append(0)
        if k >= 0:
            t_count[k] += int(mult[pid])
    nops = len(c.ops)
    if t_flops:
        v = np.asarray(t_flops, np.float64) * np.asarray(t_count, np.int64)
        op = np.asarray(t_op, np.int32)
        keep = op >= 0
        flops = np.bincount(op[keep], weights=v[keep], minlength=nops).astype(np.int64)
    else:
        flops = np.zeros(nops, np.int64)
    rows = []
    for i, name in enumerate(c.ops):
        info = graph.op_info.get(name, {})
        if not all(k in info for k in ("type", "precision", "min_bytes")):
            return None
        rows.append({"op_id": i, "name": name, "type": info["type"], "precision": info["precision"],
                     "flops": int(info.get("flops", flops[i])), "min_bytes": int(info["min_bytes"]),
                     "plan": str(info.get("plan", ""))})

    def typed(table, data):   # the stored dtypes of the columns given (profile.assemble.typed_table, in part)
        df = pd.DataFrame(data)
        return df.astype({k: dt for k, dt in schema.COLUMN_DTYPES[table].items() if k in df.columns and dt != "str"})

    cols = ("op_id", "name", "type", "precision", "flops", "min_bytes", "plan")
    ops = typed("ops", {k: [r[k] for r in rows] for k in cols})
    programs = typed("programs", {
        "prog_id": np.arange(n, dtype=np.int32),
        "parent_id": np.array([p.parent_id for p in c.progs], np.int32),
        "kind": [p.prog.kind for p in c.progs],
        "name": [p.prog.name for p in c.progs],
        "op_id": np.array([c.op_index.get(p.op, -1) if p.op is not None else -1 for p in c.progs], np.int32),
        "repeat": np.array([p.prog.count if isinstance(p.prog, P.Repeat) else 1 for p in c.progs], np.int64),
        "cs_id": np.array([p.prog.cs.id if isinstance(p.prog, P.Execute) else -1 for p in c.progs], np.int32),
    })
    return ops, programs
