"""Compilation: validate the graph and program, place tensors, account memory per tile and
category, compute liveness, and build the BSP step templates (cycles never depend on data, so
every step's per-tile cost is known at compile time; Repeat bodies are costed once).

One job per module: :mod:`.check` (graph checks), :mod:`.compute_sets` (a compute set's step),
:mod:`.copies` (a copy's steps), :mod:`.copy_plans` (a copy's pieces and exchange-code patterns),
:mod:`.copy_memo` (compiled copies shared between compiles), :mod:`.steps` (stream copies, syncs and the
executed step sequence), :mod:`.memory` (memory per tile and category outside the steps), :mod:`.liveness`
(live tensors per step); :mod:`.compiled` holds what they produce.  :func:`compile_graph` runs them
in order.
"""

from __future__ import annotations

import time

import numpy as np

from popvision_lite.emulator import cost_model as cm
from popvision_lite.emulator import programs as P
from popvision_lite.emulator.compile.check import check_graph, check_program_graph
from popvision_lite.emulator.compile.compiled import (
    K_COMPUTE,
    K_STREAM,
    K_SYNC,
    K_XG,
    K_XI,
    CompileCaches,
    Compiled,
    CopyPlan,
    ProgInfo,
    StepTemplate,
)
from popvision_lite.emulator.compile.compute_sets import compile_execute
from popvision_lite.emulator.compile.copies import compile_copy, copy_signature
from popvision_lite.emulator.compile.copy_memo import CarriedCopies, CopyMemo
from popvision_lite.emulator.compile.copy_plans import copy_pieces
from popvision_lite.emulator.compile.liveness import accesses, compute_liveness
from popvision_lite.emulator.compile.memory import vertex_memory
from popvision_lite.emulator.compile.steps import compile_stream, compile_sync, expand
from popvision_lite.emulator.graph import Graph
from popvision_lite.emulator.host_alloc import reuse_freed_memory
from popvision_lite.errors import EmulatorError
from popvision_lite.profile.schema import CATEGORY_CODE

__all__ = ["K_COMPUTE", "K_STREAM", "K_SYNC", "K_XG", "K_XI", "CarriedCopies", "CompileCaches", "Compiled", "CopyMemo", "CopyPlan",
           "ProgInfo",
           "StepTemplate", "accesses", "compile_graph", "copy_pieces"]

_OUTLINED_CATS = [CATEGORY_CODE[k] for k in ("internalExchangeCode", "globalExchangeCode", "copyDescriptor",
                                              "globalExchangePacketHeader")]


def _walk(c: Compiled, prog: P.Program, parent: int, op: str | None, stack: set) -> None:
    if id(prog) in stack:
        raise EmulatorError(
            f"program '{prog.name}' ({prog.kind}) contains itself; fix: programs must form a tree without cycles"
        )
    if not isinstance(prog, P.Program):
        raise EmulatorError(f"program tree: {prog!r} is not a program")
    op = prog.op if prog.op is not None else op
    info = ProgInfo(prog=prog, prog_id=len(c.progs), parent_id=parent, op=op)
    c.progs.append(info)
    c.op_id(op)
    children = prog.children()
    if isinstance(prog, P.Sequence | P.Repeat):
        stack.add(id(prog))
        first_leaf = len(c.leaves)
        for ch in children:
            _walk(c, ch, info.prog_id, op, stack)
        stack.discard(id(prog))
        if isinstance(prog, P.Repeat) and len(c.leaves) > first_leaf:
            c.repeat_ranges.append((first_leaf, len(c.leaves) - 1))
        if getattr(prog, "call_args", ()) and len(c.leaves) > first_leaf:
            c.call_writes.append((first_leaf, tuple(t.id for t in prog.call_args)))
    else:
        info.lstep = len(c.leaves)
        c.leaves.append(info.prog_id)


class _Ticker:
    """``progress(fraction)`` of a compile, at most every PROGRESS_EVERY_S: 0.1 after the graph check, the share
    of leaf programs compiled up to 0.85 (the leaves hold most of a compile: two thirds of the POD16 BERT-Large
    stage graphs' compile time is their copies), then 0.9 for the memory and liveness that follow."""

    PROGRESS_EVERY_S = 0.2

    def __init__(self, progress, n: int):
        self.progress, self.n, self.i = progress, max(n, 1), 0
        self.last = time.perf_counter()
        if progress is not None:
            progress(0.1)

    def __call__(self) -> None:
        self.i += 1
        if self.progress is not None and time.perf_counter() - self.last >= self.PROGRESS_EVERY_S:
            self.last = time.perf_counter()
            self.progress(0.1 + 0.75 * self.i / self.n)

    def done_leaves(self) -> None:
        if self.progress is not None:
            self.progress(0.9)


def compile_graph(graph: Graph, program: P.Program, outline: bool = False,
                  copy_memo: CopyMemo | CarriedCopies | None = None, progress=None) -> Compiled:
    """``outline``: share the code of structurally identical ops, as PopART's outliner does
    (``SessionOptions.enableOutlining``, on by default): an exchange program whose pieces (tile pairs,
    lengths, relative offsets) match an earlier one, and a compute set whose vertices match an
    earlier one, are charged code / vertex state once.  Used by the pipeline composition (PopART-like
    runs); plain Poplar graphs (the graph API) are not outlined.  ``copy_memo``: compiled copies shared
    with the other graphs compiled with it: a :class:`~.copy_memo.CopyMemo` (a run's stage graphs: same target and
    outline setting) or a :class:`~.copy_memo.CarriedCopies` (whole graphs compiled one after another, e.g. a
    model's graph on the Bow IPU after the Mk2).  Without one, the compile keeps nothing beyond itself: every
    cache it uses is in ``Compiled.caches``, dropped before it returns.
    ``progress(fraction)``: called as the compile goes (:class:`_Ticker`)."""
    if not isinstance(program, P.Program):
        raise EmulatorError(f"engine: {program!r} is not a program (use programs.Sequence(...) etc.)")
    reuse_freed_memory()  # the compile's large temporaries reused from the heap (host_alloc)
    c = Compiled(graph, program)
    c.outline = bool(outline)
    _walk(c, program, -1, None, set())
    if copy_memo is not None:
        copy_memo.attach(c)
    used_cs = {c.progs[pid].prog.cs.id for pid in c.leaves if isinstance(c.progs[pid].prog, P.Execute)}
    check_program_graph(c)
    # the tensors whose tile bases a copy reads: the graph check keeps them for the copies (memory._tile_base)
    c.caches.copy_mappings = frozenset(id(ep.tensor.mapping) for pid in c.leaves
                                       if isinstance(p := c.progs[pid].prog, P.Copy) for ep in (p.src, p.dst))
    check_graph(c, used_cs, c.caches.check_memo)
    tick = _Ticker(progress, len(c.leaves))
    c.caches.tile_base_last = None  # (memory._tile_base: the check's last tensor)
    first_use: dict[int, ProgInfo] = {}
    copy_sigs: set = set()
    for pid in c.leaves:
        tick()
        info = c.progs[pid]
        p = info.prog
        prev = first_use.setdefault(id(p), info)
        if prev is not info:
            # the same program object again (a shared / outlined subgraph, e.g. recomputation
            # re-running the forward programs): its code, vertex state and exchange code exist
            # once; the call re-issues the same steps
            info.templates = list(prev.templates)
            continue
        if isinstance(p, P.Execute):
            compile_execute(c, info)
        elif isinstance(p, P.Copy):
            if c.outline:
                snap = c.memory[:, _OUTLINED_CATS, :].copy()
                before = info.code_bytes
                compile_copy(c, info)
                sig = copy_signature(c, p, c.copy_plans.pop(info.prog_id, None))
                if sig is not None and sig in copy_sigs:
                    c.memory[:, _OUTLINED_CATS, :] = snap  # same exchange code as an earlier op's
                    info.code_bytes = before
                    c.outlined_copies += 1
                elif sig is not None:
                    copy_sigs.add(sig)
            else:
                compile_copy(c, info)
                c.copy_plans.pop(info.prog_id, None)
        elif isinstance(p, P.StreamCopy):
            compile_stream(c, info)
        elif isinstance(p, P.Sync):
            compile_sync(c, info)
        elif isinstance(p, P.Sequence):
            pass  # empty sequence
        else:
            raise EmulatorError(f"program '{p.name}': unsupported program kind {type(p).__name__}")
    if copy_memo is not None:
        copy_memo.compiled(c)
    c.caches.drop_step_caches()  # (they hold the copies' arrays)
    for info in c.progs:
        if isinstance(info.prog, P.Repeat):
            c.add_mem("controlCode", np.arange(c.num_tiles), cm.CONTROL_CODE_REPEAT)
            info.code_bytes += c.num_tiles * cm.CONTROL_CODE_REPEAT
    tick.done_leaves()
    vertex_memory(c, used_cs)
    # the last reader of the tensors' tile offsets (memory.tile_offsets: one int32 per mapping interval of
    # every tensor a copy or a field touched, ~75 MB on a ResNet-50 graph) is done with them
    c.caches.drop_layout()  # and the graph check's answers for vertex_memory
    c.add_mem("stack", np.arange(c.num_tiles), cm.stack_bytes(c.target.threads_per_tile))
    compute_liveness(c)
    # memory check: always-live of every category + peak not-always-live
    need = c.memory[:, :, 0].sum(axis=1) + c.memory[:, :, 1].sum(axis=1)
    cap = c.target.sram_bytes_per_tile
    over = np.nonzero(need > cap)[0]
    order = over[np.argsort(-need[over], kind="stable")]
    c.tile_need = need
    c.oom_report = [(int(t), int(c.target.ipu_of(t)), int(need[t]), int(cap)) for t in order]
    c.fits = len(over) == 0
    expand(c)
    return c
