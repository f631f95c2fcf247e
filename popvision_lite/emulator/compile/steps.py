"""Step costing of stream copies and syncs, and the unrolled executed step sequence (:func:`expand`); copies
and compute sets have their own modules (:mod:`.copies`, :mod:`.compute_sets`)."""

from __future__ import annotations

import numpy as np

from popvision_lite.emulator import cost_model as cm
from popvision_lite.emulator import programs as P
from popvision_lite.emulator.compile.compiled import (
    K_STREAM,
    K_SYNC,
    Compiled,
    ProgInfo,
    distinct_tiles,
)
from popvision_lite.emulator.compile.copy_plans import copy_pieces
from popvision_lite.errors import EmulatorError


def compile_stream(c: Compiled, info: ProgInfo) -> None:
    prog = info.prog
    if prog.buffer.dtype != prog.view.tensor.dtype:
        raise EmulatorError(
            f"StreamCopy '{prog.name}': buffer '{prog.buffer.name}' is {prog.buffer.dtype} but tensor "
            f"'{prog.view.name}' is {prog.view.tensor.dtype}; fix: equal dtypes"
        )
    starts, lens = prog.view.runs()
    # pieces: split the tensor side at its tile boundaries (a copy onto itself gives exactly that)
    plan = copy_pieces(prog.view, prog.view)
    c.copy_plans[info.prog_id] = plan
    T = c.num_tiles
    nbytes = plan.length * prog.view.tensor.itemsize
    tb = np.bincount(plan.src_tile, weights=nbytes, minlength=T).astype(np.int64)
    busy, dur = cm.stream_cycles(c.target, tb)
    z = np.zeros(T, np.int64)
    bin_, bout = (tb, z) if prog.to_device else (z, tb)
    ut = distinct_tiles(plan.src_tile, c.num_tiles)
    c.add_template(info, K_SYNC, cm.global_sync_cycles(c.target), ipu=-1, shared="global_sync")
    c.add_template(info, K_STREAM, busy, bin_, bout, duration=dur, ipu=c.ipu_of_tiles(ut),
                   bytes_ddr=int(nbytes.sum()))
    c.add_mem("hostExchangeCode", plan.src_tile, cm.EXCHANGE_CODE_PER_PIECE)
    c.add_mem("hostExchangeCode", ut, cm.EXCHANGE_CODE_BASE)
    packets = np.ceil(tb[ut] / cm.HOST_PACKET_BYTES).astype(np.int64)
    c.add_mem("hostExchangePacketHeader", ut, packets * cm.HOST_PACKET_HEADER_BYTES)
    c.add_mem("controlCode", np.arange(T), cm.CONTROL_CODE_SYNC)
    info.code_bytes += len(plan.src_tile) * cm.EXCHANGE_CODE_PER_PIECE + len(ut) * cm.EXCHANGE_CODE_BASE + T * cm.CONTROL_CODE_SYNC


def compile_sync(c: Compiled, info: ProgInfo) -> None:
    if info.prog.sync_kind == "global":
        c.add_template(info, K_SYNC, cm.global_sync_cycles(c.target), ipu=-1, shared="global_sync")
    else:
        c.add_template(info, K_SYNC, cm.internal_sync_cycles(c.target), ipu=c.all_ipus(), shared="internal_sync")
    c.add_mem("controlCode", np.arange(c.num_tiles), cm.CONTROL_CODE_SYNC)
    info.code_bytes += c.num_tiles * cm.CONTROL_CODE_SYNC


def _steps_of(c: Compiled, children: dict[int, list[int]], pid: int, at: int, out: list,
              subtree_end: np.ndarray) -> int:
    """Append the steps of one execution of ``pid`` (template ids, in arrays) to ``out`` and record each program of
    its subtree's first and last step (``c.prog_first`` / ``prog_last``, absolute: the subtree starts at step
    ``at``); returns the subtree's step count.  A Repeat's body is walked once and tiled; its descendants' last
    steps move to the last iteration, one slice update over the subtree's ids (``c.progs`` is in pre-order, so a
    subtree is the ids ``[pid, subtree_end[pid])``), not a list of records rebuilt at every level.  A module
    function, not a closure in :func:`expand`: a recursive closure refers to itself, a cycle that kept the
    compiled graph alive until the next full collection (decision 0470)."""
    info = c.progs[pid]
    p = info.prog
    if isinstance(p, P.Sequence | P.Repeat):
        i0, n = len(out), 0
        for ch in children.get(pid, ()):
            n += _steps_of(c, children, ch, at + n, out, subtree_end)
        if isinstance(p, P.Repeat):
            k = p.count
            c.prog_repeat[pid] = k
            inner = slice(pid + 1, int(subtree_end[pid]))
            if not k:  # never runs: no steps, and none of its programs has a first or last step
                del out[i0:]
                n = 0
                c.prog_first[inner] = -1
                c.prog_last[inner] = -1
            elif k > 1 and n:
                last = c.prog_last[inner]
                last[last >= 0] += (k - 1) * n  # (a view: the last iteration's steps)
                body = out[i0] if len(out) == i0 + 1 else np.concatenate(out[i0:])
                del out[i0:]
                out.append(np.tile(body, k))
                n *= k
    else:
        n = len(info.templates)
        if n:
            out.append(np.asarray(info.templates, np.int64))
    if n:
        c.prog_first[pid], c.prog_last[pid] = at, at + n - 1
    return n


def program_executions(c: Compiled) -> np.ndarray:
    """How many times each program runs in one execution of the whole program: its parent's count times the
    parent's repeat count (``c.progs`` is in pre-order from one root, parents before their children).  One
    definition for the compile (:func:`expand`) and the build-only op tables (``engine.op_tables``)."""
    execs = np.ones(len(c.progs), np.int64)
    for info in c.progs:
        q = info.parent_id
        if q >= 0:
            parent = c.progs[q].prog
            execs[info.prog_id] = execs[q] * (parent.count if isinstance(parent, P.Repeat) else 1)
    return execs


def expand(c: Compiled) -> None:
    """Unroll the program into the executed step sequence (template ids), with per-program
    first/last step and total cycles; Repeat bodies are tiled, not recompiled."""
    dur = np.array([t.duration for t in c.templates], np.int64)
    n = len(c.progs)
    c.prog_first = np.full(n, -1, np.int64)
    c.prog_last = np.full(n, -1, np.int64)
    c.prog_cycles = np.zeros(n, np.int64)
    c.prog_repeat = np.ones(n, np.int64)
    children: dict[int, list[int]] = {}
    for info in c.progs:
        if info.parent_id >= 0:
            children.setdefault(info.parent_id, []).append(info.prog_id)

    subtree_end = np.arange(1, n + 1, dtype=np.int64)  # one past each program's last descendant (pre-order)
    for info in reversed(c.progs):
        if info.parent_id >= 0 and subtree_end[info.prog_id] > subtree_end[info.parent_id]:
            subtree_end[info.parent_id] = subtree_end[info.prog_id]
    out: list = []
    if n:
        _steps_of(c, children, 0, 0, out, subtree_end)
    seq = c.seq = np.concatenate(out) if len(out) > 1 else out[0] if out else np.zeros(0, np.int64)
    c.step_duration = dur[seq] if len(seq) else np.zeros(0, np.int64)
    ends = np.cumsum(c.step_duration)
    c.step_end = ends
    c.step_start = ends - c.step_duration
    c.total_cycles = int(ends[-1]) if len(ends) else 0
    c.template_count = np.bincount(seq, minlength=len(c.templates)) if len(c.templates) else np.zeros(0, np.int64)
    # cycles per program = sum of durations of steps in [first, last] that it issued:
    # leaves: own templates x executions; containers: sum of children
    execs = program_executions(c)
    leaf_cycles = np.zeros(n, np.int64)
    for info in c.progs:
        if info.templates:
            leaf_cycles[info.prog_id] = int(dur[info.templates].sum()) * execs[info.prog_id]
    tot = leaf_cycles.copy()
    for info in reversed(c.progs):  # children come after parents in pre-order
        if info.parent_id >= 0:
            tot[info.parent_id] += tot[info.prog_id]
    c.prog_cycles = tot
    c.prog_execs = execs
