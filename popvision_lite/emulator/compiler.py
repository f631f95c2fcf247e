"""Compilation: validate the graph and program, place tensors, account memory per tile and
category, compute liveness, and build the BSP step templates (cycles never depend on data, so
every step's per-tile cost is known at compile time; Repeat bodies are costed once).

``compile_graph`` runs the jobs of the ``emulator/compile`` package in order: checks
(``compile.check``), step templates (``compile.steps``), memory (``compile.memory``), liveness
(``compile.liveness``), then unrolls the executed step sequence.
"""

from __future__ import annotations

import numpy as np

from popvision_lite.emulator import cost_model as cm
from popvision_lite.emulator import programs as P
from popvision_lite.emulator.compile.check import check_graph, check_program_graph
from popvision_lite.emulator.compile.compiled import (  # noqa: F401 - the compile API under this name
    K_COMPUTE,
    K_STREAM,
    K_SYNC,
    K_XG,
    K_XI,
    Compiled,
    CopyPlan,
    ProgInfo,
    StepTemplate,
    digest,
    distinct_tiles,
)
from popvision_lite.emulator.compile.liveness import compute_liveness
from popvision_lite.emulator.compile.memory import tile_addr, vertex_memory
from popvision_lite.emulator.compile.steps import (  # noqa: F401 - the compile API under this name
    code_patterns,
    compile_execute,
    compile_stream,
    compile_sync,
    copy_pieces,
    copy_signature,
    expand,
)
from popvision_lite.emulator.graph import Graph
from popvision_lite.errors import EmulatorError
from popvision_lite.profile.schema import CATEGORY_CODE

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
    else:
        info.lstep = len(c.leaves)
        c.leaves.append(info.prog_id)


def _compile_copy(c: Compiled, info: ProgInfo) -> None:
    prog = info.prog
    if prog.src.tensor.dtype != prog.dst.tensor.dtype:
        raise EmulatorError(
            f"Copy '{prog.name}': src '{prog.src.name}' is {prog.src.tensor.dtype} but dst '{prog.dst.name}' is "
            f"{prog.dst.tensor.dtype}; fix: cast with a codelets.CAST compute set"
        )
    key, shift = _copy_structure_key(c, prog)
    memo = c.__dict__.setdefault("_copy_memo", {})
    if key in memo:
        # an exchange of the same structure earlier in this graph (the same op in another layer,
        # possibly placed on tiles rotated by an even count): same pieces and per-tile bytes and
        # code, moved to this copy's tiles, so replay its effects instead of recomputing them
        plan, effects, code_bytes, shift0 = memo[key]
        d = shift - shift0
        T = c.num_tiles
        if plan is not None:
            c.copy_plans[info.prog_id] = plan if d == 0 else CopyPlan(
                plan.src_elem, plan.dst_elem, plan.length, (plan.src_tile + d) % T, (plan.dst_tile + d) % T,
                plan.src_k, plan.dst_k)
        for fn, args, kw in effects:
            if fn == "mem":
                cat, tiles, nbytes = args
                c.add_mem(cat, (np.asarray(tiles) + d) % T if d else tiles, nbytes, **kw)
            elif d and kw.get("shared") is None:  # dense per-tile rows (sync rows are the target's own)
                c.add_template(info, args[0], *(None if a is None else np.roll(a, d) for a in args[1:]), **kw)
            else:
                c.add_template(info, *args, **kw)
        info.code_bytes += code_bytes
        return
    effects: list = []
    before = info.code_bytes
    c.recording = effects
    try:
        _compile_copy_fresh(c, info)
    finally:
        c.recording = None
    # the plan (per-piece arrays, the bulk of a copy's memory) is kept only where the outlining
    # signature needs it; a plain whole-graph compile frees each plan after its copy, as before
    memo[key] = (c.copy_plans[info.prog_id] if c.outline else None, effects, info.code_bytes - before, shift)


def _copy_structure_key(c: Compiled, prog) -> tuple[bytes, int]:
    """Everything a copy's compiled effects depend on: each endpoint's element runs (per vertex for a
    field, whose vertices can be whole pieces), its tensor's tile mapping, and the element size.
    On one IPU the tiles enter relative to an even shift (the first source interval's tile, rounded
    down to even): the cost model is the same on tiles rotated by an even count (the shared exchange
    bus pairs tiles 2k, 2k + 1; syncs are not part of the key).  Returns (key, shift)."""
    from popvision_lite.emulator.graph import Field

    T = c.num_tiles
    src_tiles = prog.src.tensor.mapping.tile
    shift = int(src_tiles[0]) & ~1 if c.target.num_ipus == 1 and len(src_tiles) else 0
    parts = [str(prog.src.tensor.itemsize).encode()]
    for ep in (prog.src, prog.dst):
        if isinstance(ep, Field):
            s, e = ep.run_bounds()
            parts.append(b"F" + digest(s, e))
        else:
            st, ln = ep.runs()
            parts.append(b"R" + digest(st, ln))
        mp = ep.tensor.mapping
        parts.append(digest((mp.tile - shift) % T if shift else mp.tile, mp.start, mp.stop))
    return b"".join(parts), shift


def _compile_copy_fresh(c: Compiled, info: ProgInfo) -> None:
    prog = info.prog
    plan = copy_pieces(prog.src, prog.dst)
    c.copy_plans[info.prog_id] = plan
    if len(plan.length) == 0:
        return
    T = c.num_tiles
    isz = prog.src.tensor.itemsize
    nbytes = plan.length * isz
    cross = plan.src_tile != plan.dst_tile
    # a source piece sent to several tiles goes out once (the exchange multicasts)
    xi = np.nonzero(cross)[0]
    if len(xi):
        key = plan.src_elem[xi] * (int(plan.length.max()) + 1) + plan.length[xi]
        if np.all(key[1:] > key[:-1]):
            xs = xi  # already distinct (no broadcast)
        else:
            order = np.argsort(key, kind="stable")
            ks = key[order]
            xs = xi[order[np.concatenate([[True], ks[1:] != ks[:-1]])]]
    else:
        xs = xi
    bout = np.bincount(plan.src_tile[xs], weights=nbytes[xs], minlength=T).astype(np.int64)
    bin_ = np.bincount(plan.dst_tile[cross], weights=nbytes[cross], minlength=T).astype(np.int64)
    # receive time: a piece multicast to both tiles of a shared exchange bus counts half on each
    bin_time = cm.shared_bus_receive_bytes(c.target, plan, cross, nbytes)
    local = np.bincount(plan.src_tile[~cross], weights=nbytes[~cross], minlength=T).astype(np.int64)
    # exchange / copy-descriptor memory on each participating tile
    ipu_s, ipu_d = c.target.ipu_of(plan.src_tile), c.target.ipu_of(plan.dst_tile)
    glob = ipu_s != ipu_d
    src_addr = tile_addr(c, prog.src.tensor.mapping, plan.src_elem, plan.src_k)
    dst_addr = tile_addr(c, prog.dst.tensor.mapping, plan.dst_elem, plan.dst_k)
    sent_once = np.zeros(len(cross), bool)
    sent_once[xs] = True  # one send per distinct source piece: a multicast is sent once
    for mask, cat in ((cross & ~glob, "internalExchangeCode"), (glob, "globalExchangeCode")):
        if mask.any():
            # receive side: patterns per (source tile, destination tile), charged to the receiver
            _ps, pd_, cnt = code_patterns(plan, mask, src_addr, dst_addr)
            per_r = cm.EXCHANGE_CODE_PER_PIECE + np.where(cnt > 1, cm.EXCHANGE_CODE_PER_LOOP, 0)
            # send side: patterns of the distinct source pieces, charged to the sender
            ps_, _pd, cnt_s = code_patterns(plan, mask & sent_once, src_addr, src_addr)
            per_s = cm.EXCHANGE_CODE_PER_PIECE + np.where(cnt_s > 1, cm.EXCHANGE_CODE_PER_LOOP, 0)
            c.add_mem(cat, pd_, per_r)
            c.add_mem(cat, ps_, per_s)
            both = np.concatenate([ps_, pd_])
            ut = distinct_tiles(both, c.num_tiles)
            c.add_mem(cat, ut, cm.EXCHANGE_CODE_BASE)
            info.code_bytes += int(per_r.sum() + per_s.sum()) + len(ut) * cm.EXCHANGE_CODE_BASE
    if glob.any():
        c.add_mem("globalExchangePacketHeader", plan.dst_tile[glob], cm.GLOBAL_PACKET_HEADER_BYTES)
    if (~cross).any():
        ps_, _pd, cnt = code_patterns(plan, ~cross, src_addr, dst_addr)
        c.add_mem("copyDescriptor", ps_, cm.COPY_DESCRIPTOR_PER_PIECE + np.where(cnt > 1, cm.EXCHANGE_CODE_PER_LOOP, 0))
    busy = cm.exchange_tile_cycles(c.target, bout, bin_time, local)
    if not cross.any():
        # purely on-tile: the tiles copy with memcpy, a compute-like step
        ut = distinct_tiles(plan.src_tile, c.num_tiles)
        c.add_template(info, K_COMPUTE, busy, ipu=c.ipu_of_tiles(ut), bytes_sram=int(2 * nbytes.sum()))
        c.add_mem("controlCode", ut, cm.CONTROL_CODE_EXECUTE)
        info.code_bytes += len(ut) * cm.CONTROL_CODE_EXECUTE
        return
    all_t = np.arange(T)
    if glob.any():
        c.add_template(info, K_SYNC, cm.global_sync_cycles(c.target), ipu=-1, shared="global_sync")
        nI = c.target.num_ipus
        # a multicast piece crosses the links once per destination IPU (not once per destination tile)
        gi = np.nonzero(glob)[0]
        gkey = (plan.src_elem[gi] * (int(plan.length.max()) + 1) + plan.length[gi]) * nI + ipu_d[gi]
        gorder = np.argsort(gkey, kind="stable")
        gk = gkey[gorder]
        gu = gi[gorder[np.concatenate([[True], gk[1:] != gk[:-1]])]]
        leave = np.bincount(ipu_s[gu], weights=nbytes[gu], minlength=nI)
        enter = np.bincount(ipu_d[gu], weights=nbytes[gu], minlength=nI)
        link = cm.ipu_link_cycles(c.target, leave, enter, ipu_s[gu], ipu_d[gu], nbytes[gu])
        dur = max(int(busy.max()), link)
        c.add_template(info, K_XG, busy, bin_, bout, duration=dur, ipu=-1,
                       bytes_exchange=int(nbytes[cross & ~glob].sum()), bytes_ipu_link=int(nbytes[gu].sum()),
                       bytes_sram=int(2 * nbytes[~cross].sum()))
    else:
        part = distinct_tiles(np.concatenate([plan.src_tile, plan.dst_tile]), c.num_tiles)
        ipu = c.ipu_of_tiles(part)
        c.add_template(info, K_SYNC, cm.internal_sync_cycles(c.target), ipu=c.all_ipus(), shared="internal_sync")
        c.add_template(info, K_XI, busy, bin_, bout, ipu=ipu, bytes_exchange=int(nbytes[cross].sum()),
                       bytes_sram=int(2 * nbytes[~cross].sum()))
    c.add_mem("controlCode", all_t, cm.CONTROL_CODE_SYNC)
    info.code_bytes += T * cm.CONTROL_CODE_SYNC


def compile_graph(graph: Graph, program: P.Program, outline: bool = False) -> Compiled:
    """``outline``: share the code of structurally identical ops, as PopART's outliner does
    (``SessionOptions.enableOutlining``, on by default): an exchange program whose pieces (tile pairs,
    lengths, relative offsets) match an earlier one, and a compute set whose vertices match an
    earlier one, are charged code / vertex state once.  Used by the pipeline composition (PopART-like
    runs); plain Poplar graphs (the graph API) are not outlined."""
    if not isinstance(program, P.Program):
        raise EmulatorError(f"engine: {program!r} is not a program (use programs.Sequence(...) etc.)")
    c = Compiled(graph, program)
    c.outline = bool(outline)
    _walk(c, program, -1, None, set())
    used_cs = {c.progs[pid].prog.cs.id for pid in c.leaves if isinstance(c.progs[pid].prog, P.Execute)}
    check_program_graph(c)
    check_graph(c, used_cs)
    first_use: dict[int, ProgInfo] = {}
    copy_sigs: set = set()
    for pid in c.leaves:
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
                _compile_copy(c, info)
                sig = copy_signature(c, p, c.copy_plans.pop(info.prog_id, None))
                if sig is not None and sig in copy_sigs:
                    c.memory[:, _OUTLINED_CATS, :] = snap  # same exchange code as an earlier op's
                    info.code_bytes = before
                    c.outlined_copies += 1
                elif sig is not None:
                    copy_sigs.add(sig)
            else:
                _compile_copy(c, info)
                c.copy_plans.pop(info.prog_id, None)
        elif isinstance(p, P.StreamCopy):
            compile_stream(c, info)
        elif isinstance(p, P.Sync):
            compile_sync(c, info)
        elif isinstance(p, P.Sequence):
            pass  # empty sequence
        else:
            raise EmulatorError(f"program '{p.name}': unsupported program kind {type(p).__name__}")
    for k in ("_copy_memo",):
        c.__dict__.pop(k, None)  # compile-time caches (they hold the copies' arrays)
    for info in c.progs:
        if isinstance(info.prog, P.Repeat):
            c.add_mem("controlCode", np.arange(c.num_tiles), cm.CONTROL_CODE_REPEAT)
            info.code_bytes += c.num_tiles * cm.CONTROL_CODE_REPEAT
    vertex_memory(c, used_cs)
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
