"""The BSP step templates of a copy (:func:`compile_copy`): pieces, exchange cycles and code, replayed from
a memo where an earlier copy had the same structure."""

from __future__ import annotations

import numpy as np

from popvision_lite.emulator import cost_model as cm
from popvision_lite.emulator.compile import copy_broadcasts as CB
from popvision_lite.emulator.compile import copy_gathers as CG
from popvision_lite.emulator.compile import copy_windows as CW
from popvision_lite.emulator.compile.compiled import (
    K_COMPUTE,
    K_SYNC,
    K_XG,
    K_XI,
    Compiled,
    CopyPlan,
    ProgInfo,
    cached_digest,
    digest,
    distinct_tiles,
)
from popvision_lite.emulator.compile.copy_memo import CopySignature, plan_signature
from popvision_lite.emulator.compile.copy_plans import (
    _pattern_order,
    _pattern_units,
    _per_tile_patterns,
    bytes_per_tile,
    charge_exchange_code,
    code_patterns,
    copy_pieces,
    exchange_code_counts,
)
from popvision_lite.emulator.compile.copy_sorts import stable_argsort
from popvision_lite.emulator.compile.memory import tile_addr
from popvision_lite.emulator.graph import Field, Regions
from popvision_lite.errors import EmulatorError


def compile_copy(c: Compiled, info: ProgInfo) -> None:
    prog = info.prog
    if prog.src.tensor.dtype != prog.dst.tensor.dtype:
        raise EmulatorError(
            f"Copy '{prog.name}': src '{prog.src.name}' is {prog.src.tensor.dtype} but dst '{prog.dst.name}' is "
            f"{prog.dst.tensor.dtype}; fix: cast with a codelets.popops.CAST compute set"
        )
    key, shift = _copy_structure_key(c, prog)
    memo = c.caches.copy_memo
    used = c.caches.copy_keys_used
    if used is not None:
        used.add(key)
    if key in memo:
        # an exchange of the same structure earlier in this graph or an earlier graph of the run (the same op
        # in another layer or stage, possibly placed on tiles rotated by an even count): same pieces and
        # per-tile bytes and code, moved to this copy's tiles, so replay its effects instead of recomputing them
        sig, effects, code_bytes, shift0 = memo[key]
        d = shift - shift0
        T = c.num_tiles
        if sig is not None:  # (outlining: the pieces' signature, moved with them)
            c.copy_plans[info.prog_id] = sig.shifted(d, T)
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
        c.caches.copy_runs = {}
    # outlining reads the copy's signature, not its pieces (per-piece arrays, the bulk of a copy's memory): the
    # plan is let go now; a plain whole-graph compile frees it after its copy (compile_graph)
    sig = None
    if c.outline:
        sig = c.copy_plans[info.prog_id] = plan_signature(c, c.copy_plans[info.prog_id], prog.src.tensor.itemsize)
    memo[key] = (sig, effects, info.code_bytes - before, shift)


def _copy_structure_key(c: Compiled, prog) -> tuple[bytes, int]:
    """Everything a copy's compiled effects depend on: each endpoint's element runs (per vertex for a
    field, whose vertices can be whole pieces), its tensor's tile mapping, and the element size.
    On one IPU the tiles enter relative to an even shift (the first source interval's tile, rounded
    down to even): the cost model is the same on tiles rotated by an even count (the shared exchange
    bus pairs tiles 2k, 2k + 1; syncs are not part of the key).  Returns (key, shift); the endpoints' run bounds
    or runs it read are left in ``c.caches.copy_runs`` for the copy's fresh compile (copy_plans.copy_pieces)."""
    src_tiles = prog.src.tensor.mapping.tile
    shift = int(src_tiles[0]) & ~1 if c.target.num_ipus == 1 and len(src_tiles) else 0
    parts = [str(prog.src.tensor.itemsize).encode()]
    known = c.caches.copy_runs = {}
    for ep in (prog.src, prog.dst):
        if isinstance(ep, Regions):  # its starts and sizes are its runs (hashed as stored, once per compile)
            parts.append(b"G" + cached_digest(c, ep.starts) + cached_digest(c, ep.sizes))
        elif isinstance(ep, Field):
            s, e = ep.run_bounds()
            known[id(ep)] = ("bounds", s, e)
            parts.append(b"F" + digest(s, e))
        else:
            st, ln = ep.runs()
            known[id(ep)] = ("runs", st, ln)
            parts.append(b"R" + digest(st, ln))
        mp = ep.tensor.mapping
        parts += [cached_digest(c, mp.tile, shift), cached_digest(c, mp.start), cached_digest(c, mp.stop)]
    return b"".join(parts), shift


def _compile_copy_fresh(c: Compiled, info: ProgInfo) -> None:
    prog = info.prog
    t = getattr(prog, "transpose", None)  # (a kernel transpose its op described: per class of tiles, decision 0490)
    if t is not None and CW.compile_transpose(c, info, t, _on_tile_step):
        return
    g = getattr(prog, "gather", None)  # (a gather its op described: costed per block class, decision 0480)
    if g is not None and CG.usable(c, prog, g) and CG.compile_gather(c, info, g):
        return
    if getattr(prog, "broadcast", False) and c.target.num_ipus == 1:
        # (``units``: the op's destination units and blocks, where it set them: ops/conv.py, decision 0479)
        bp = CB.broadcast_plan(prog.src, prog.dst, c.num_tiles, c.caches.copy_runs, getattr(prog, "units", None))
        if bp is not None and _compile_broadcast(c, info, bp):
            return
    if _compile_same_layout(c, info):
        return
    plan = copy_pieces(prog.src, prog.dst, c.caches.copy_runs)
    c.copy_plans[info.prog_id] = plan
    if len(plan.length) == 0:
        return
    T = c.num_tiles
    isz = prog.src.tensor.itemsize
    nbytes = plan.length * isz
    cross = plan.src_tile != plan.dst_tile
    lmin, lmax = int(plan.length.min()), int(plan.length.max())  # (read once for the steps below)
    all_cross, sent, groups = _distinct_sends(plan, cross, lmax + 1)
    bout, bin_, local = _tile_bytes(plan, cross, sent, all_cross, isz, T, lmax + 1)
    # receive time: a piece multicast to both tiles of a shared exchange bus counts half on each (only multicast
    # pieces can have a bus partner: with none, every piece counts whole, the bytes received: the same integers
    # as the cost model's sums of whole pieces)
    bin_time = bin_ if groups is None else cm.shared_bus_receive_bytes(c.target, plan, cross, nbytes, groups=groups)
    # exchange / copy-descriptor memory on each participating tile
    if c.target.num_ipus == 1:
        ipu_s = ipu_d = None
        glob = np.zeros(len(cross), bool)
    else:
        ipu_s, ipu_d = c.target.ipu_of(plan.src_tile), c.target.ipu_of(plan.dst_tile)
        glob = ipu_s != ipu_d
    src_addr = tile_addr(c, prog.src.tensor.mapping, plan.src_elem, plan.src_k)
    if prog.dst.tensor.mapping is prog.src.tensor.mapping and np.array_equal(plan.dst_elem, plan.src_elem):
        # the same elements of one layout (a call's arguments and results copied between tensors that share a
        # mapping): the same tile positions, not looked up again; the exchange-code counts then compare one
        # side's strides (exchange_code_counts: the same counts, the two sides' strides being equal)
        dst_addr = src_addr
    else:
        dst_addr = tile_addr(c, prog.dst.tensor.mapping, plan.dst_elem, plan.dst_k)
    _exchange_code(c, info, plan, cross, glob, ipu_s is not None, sent, src_addr, dst_addr, lmin == lmax)
    if glob.any():
        c.add_mem("globalExchangePacketHeader", plan.dst_tile[glob], cm.GLOBAL_PACKET_HEADER_BYTES)
    if not all_cross:  # on-tile copy descriptors: per pattern of the on-tile pieces, a loop costing more
        _copy_descriptors(c, plan, ~cross, src_addr, dst_addr, lmin == lmax)
    busy = cm.exchange_tile_cycles(c.target, bout, bin_time, local)
    bytes_cross, bytes_local = int(bin_.sum()), int(local.sum())
    if not cross.any():
        _on_tile_step(c, info, plan, busy, bytes_local)
        return
    if glob.any():
        _global_exchange(c, info, plan, cross, glob, ipu_s, ipu_d, nbytes, busy, bin_, bout)
    else:
        # the tiles with pieces: every piece's source tile sends it (bout, local) or holds the first of its
        # multicast's pieces, every destination tile receives (bin_, local); with no empty piece, the same
        # tiles as every piece's source and destination tile
        if lmin > 0:
            part = np.nonzero(bout + bin_ + local)[0]
        else:
            part = distinct_tiles(np.concatenate([plan.src_tile, plan.dst_tile]), c.num_tiles)
        ipu = c.ipu_of_tiles(part)
        c.add_template(info, K_SYNC, cm.internal_sync_cycles(c.target), ipu=c.all_ipus(), shared="internal_sync")
        c.add_template(info, K_XI, busy, bin_, bout, ipu=ipu, bytes_exchange=bytes_cross,
                       bytes_sram=2 * bytes_local)
    c.add_mem("controlCode", np.arange(T), cm.CONTROL_CODE_SYNC)
    info.code_bytes += T * cm.CONTROL_CODE_SYNC


def _same_layout(c: Compiled, prog):
    """The mapping of a copy from a whole tensor to a whole tensor laid out alike (a graph function's results
    and its arguments of the parameters' layout: ops/graph_function.py), else None.  Alike: one mapping object,
    or mappings of equal arrays (held once: shared_arrays); whole: each endpoint one run of every element (as
    the structure key read it, ``c.caches.copy_runs``; the graph check has found the mapping's intervals to cover
    them end to end, Mapping.check)."""
    sm, dm = prog.src.tensor.mapping, prog.dst.tensor.mapping
    if dm is not sm and not (len(dm) == len(sm) and all(
            a is b or np.array_equal(a, b) for a, b in ((sm.tile, dm.tile), (sm.start, dm.start),
                                                        (sm.stop, dm.stop)))):
        return None
    n = len(sm)
    if n < 2:
        return None
    size = int(sm.stop[-1])
    for ep in (prog.src, prog.dst):
        hit = c.caches.copy_runs.get(id(ep))
        if hit is None or hit[0] != "runs" or len(hit[1]) != 1 or int(hit[1][0]) != 0 or int(hit[2][0]) != size:
            return None
    return sm


def _compile_same_layout(c: Compiled, info: ProgInfo) -> bool:
    """_compile_copy_fresh's effects for a copy between two tensors laid out alike, whole (:func:`_same_layout`),
    from the mapping alone; False, with nothing done, for any other copy.  Its pieces are the mapping's
    intervals (cut at the same boundaries on both sides), each on its tile: no exchange, the bytes copied on each
    tile, and the on-tile copy descriptors of _copy_descriptors without tile addresses or a sort.  Those count
    patterns among the pieces in (tile, tile position) order; a tile's intervals are adjacent in its memory in
    flat order (memory.tile_offsets), so that order is (tile, first element), and each piece's source and
    destination stride is the length of the piece before it on its tile: a pattern is a run of pieces of one
    tile and one length in that order (the stride rule of copy_plans._starts_of adds no start).  The packed
    counts are per tile; where the general path's packed key would not fit, it adds the same sums per pattern
    (code_patterns)."""
    prog = info.prog
    mp = _same_layout(c, prog)
    if mp is None:
        return False
    T = c.num_tiles
    n = len(mp)
    tile = mp.tile
    length = mp.stop - mp.start
    isz = prog.src.tensor.itemsize
    local = bytes_per_tile(tile, length, isz, T, int(length.max()) + 1)
    k = np.arange(n, dtype=np.int64)
    plan = c.copy_plans[info.prog_id] = CopyPlan(mp.start, mp.start, length, tile, tile, k, k)
    if not bool(np.all(tile[1:] >= tile[:-1])):  # by tile, stable: each tile's intervals in flat order
        o = np.argsort(tile.astype(np.uint16) if T <= 2**16 else tile, kind="stable")
        t, ln = tile[o], length[o]
    else:
        t, ln = tile, length
    new = np.empty(n, bool)
    new[0] = True
    np.not_equal(t[1:], t[:-1], out=new[1:])
    new[1:] |= ln[1:] != ln[:-1]
    n_pat, n_loop = _per_tile_patterns(t, new, 0, 0, T, dst=True)
    ut = np.nonzero(n_pat)[0]
    c.add_mem("copyDescriptor", ut, n_pat[ut] * cm.COPY_DESCRIPTOR_PER_PIECE + n_loop[ut] * cm.EXCHANGE_CODE_PER_LOOP)
    z = np.zeros(T, np.int64)
    _on_tile_step(c, info, plan, cm.exchange_tile_cycles(c.target, z, z.copy(), local), int(local.sum()))
    return True


def _on_tile_step(c: Compiled, info: ProgInfo, plan: CopyPlan, busy, bytes_local: int) -> None:
    """A purely on-tile copy's step: the tiles copy with memcpy, a compute-like step, and its control code."""
    ut = distinct_tiles(plan.src_tile, c.num_tiles)
    c.add_template(info, K_COMPUTE, busy, ipu=c.ipu_of_tiles(ut), bytes_sram=2 * bytes_local)
    c.add_mem("controlCode", ut, cm.CONTROL_CODE_EXECUTE)
    info.code_bytes += len(ut) * cm.CONTROL_CODE_EXECUTE


def _compile_broadcast(c: Compiled, info: ProgInfo, bp: CB.BroadcastPlan) -> bool:
    """_compile_copy_fresh's effects for a broadcast copy on one IPU, from its compact form (decision 0440): the
    same bytes per tile, shared-bus receive bytes, exchange code and copy descriptors as its expanded pieces give
    (copy_broadcasts.py says how each is found).  Blocks may share pieces (decision 0445: the convolution's halo
    rows), each then sent once.  False, with nothing done, where the compact form cannot say it: a block holding
    one (source element, length) twice, blocks sharing pieces where a bus pair takes two blocks, or no piece
    that crosses tiles."""
    prog = info.prog
    T = c.num_tiles
    isz = prog.src.tensor.itemsize
    shared = CB.shared_pieces(bp)
    if shared is False:
        return False
    # (the source's tile positions first: the pieces' one sort by (block, source tile, position) groups them for
    # the receivers' sums and the exchange-code counts alike)
    src_addr = tile_addr(c, prog.src.tensor.mapping, bp.se, bp.sk)
    groups = CB.piece_groups(bp, src_addr, T)
    r = CB.receivers(bp, T, True, groups)
    block_elems = np.add.reduceat(bp.ln, bp.first) if len(bp.first) else bp.ln[:0]
    got = block_elems[bp.rep] - r.local
    if not got.any():
        return False
    partner_v = r.tile_vertex[bp.dt ^ 1]
    partner = (partner_v >= 0) & (bp.rep[np.maximum(partner_v, 0)] == bp.rep)
    if shared is not None and not np.array_equal(partner, partner_v >= 0):
        return False  # (blocks share pieces and a bus pair takes two blocks: the halved bytes are not per block)
    send = None
    if shared is None:  # (a piece sends where its (block, source tile) group does: per group)
        bout = CB.send_bytes(bp, r, groups, T, isz) if groups is not None else np.bincount(
            bp.st, weights=np.where(CB.piece_receivers(bp, r) > 0, bp.ln, 0) * isz, minlength=T).astype(np.int64)
    else:  # each distinct piece sent once, where some vertex of some block receives it
        send, (dp, sent) = CB.shared_send_counts(bp, r, src_addr, T, shared)
        bout = np.bincount(bp.st[dp], weights=np.where(sent, bp.ln[dp], 0) * isz, minlength=T).astype(np.int64)
    c.copy_plans[info.prog_id] = bp
    bin_ = np.bincount(bp.dt, weights=got * isz, minlength=T).astype(np.int64)
    local = np.bincount(bp.dt, weights=r.local * isz, minlength=T).astype(np.int64)
    bin_time = cm.broadcast_bus_receive_bytes(c.target, block_elems[bp.rep], r.local, r.partner_local, partner,
                                              bp.dt, isz)
    (n_pat, n_loop), (l_pat, l_loop) = CB.code_counts(bp, r, src_addr, T, send, groups)
    charge_exchange_code(c, info, "internalExchangeCode", n_pat, n_loop)
    if l_pat.any():  # on-tile copy descriptors (copies._copy_descriptors)
        ut = np.nonzero(l_pat)[0]
        c.add_mem("copyDescriptor", ut, l_pat[ut] * cm.COPY_DESCRIPTOR_PER_PIECE + l_loop[ut] * cm.EXCHANGE_CODE_PER_LOOP)
    busy = cm.exchange_tile_cycles(c.target, bout, bin_time, local)
    part = np.nonzero(bout + bin_ + local)[0]
    c.add_template(info, K_SYNC, cm.internal_sync_cycles(c.target), ipu=c.all_ipus(), shared="internal_sync")
    c.add_template(info, K_XI, busy, bin_, bout, ipu=c.ipu_of_tiles(part), bytes_exchange=int(bin_.sum()),
                   bytes_sram=2 * int(local.sum()))
    c.add_mem("controlCode", np.arange(T), cm.CONTROL_CODE_SYNC)
    info.code_bytes += T * cm.CONTROL_CODE_SYNC
    return True


def _copy_descriptors(c: Compiled, plan: CopyPlan, local: np.ndarray, src_addr, dst_addr,
                      one_length: bool | None = None) -> None:
    """The on-tile copy descriptors of the ``local`` pieces: COPY_DESCRIPTOR_PER_PIECE per pattern
    (code_patterns), EXCHANGE_CODE_PER_LOOP more for a loop, summed per tile (the pieces' one tile).
    ``one_length``: whether the plan's pieces have one length, where known."""
    T = c.num_tiles
    counts = exchange_code_counts(plan, local, None, src_addr, dst_addr, T, one_length)
    if counts is None:  # (the packed key does not fit: per pattern, as found by sorting)
        ps_, _pd, cnt = code_patterns(plan, local, src_addr, dst_addr, T)
        c.add_mem("copyDescriptor", ps_, cm.COPY_DESCRIPTOR_PER_PIECE + np.where(cnt > 1, cm.EXCHANGE_CODE_PER_LOOP, 0))
        return
    n_pat, n_loop = counts
    ut = np.nonzero(n_pat)[0]
    c.add_mem("copyDescriptor", ut, n_pat[ut] * cm.COPY_DESCRIPTOR_PER_PIECE + n_loop[ut] * cm.EXCHANGE_CODE_PER_LOOP)


def _distinct_sends(plan: CopyPlan, cross: np.ndarray, L1: int | None = None) -> tuple[bool, np.ndarray, tuple | None]:
    """(whether every piece crosses, a mask of the pieces that send (one per distinct source piece among the
    crossing ones: ``cross`` itself where each is its own), and where some source piece goes to more than one tile
    the crossing pieces grouped by source piece, else None): a source piece sent to several tiles goes out once
    (the exchange multicasts).  The groups are the plan indices of the crossing pieces in
    (source element, length) order and where each group starts, as the shared-bus receive bytes read them
    (cost_model.shared_bus_receive_bytes).  ``L1``: the pieces' largest length plus one, where known."""
    n = len(cross)
    all_cross = bool(cross.all())  # (most copies: then the crossing pieces' arrays are the plan's, not gathered)
    xi = None if all_cross else np.nonzero(cross)[0]
    if xi is not None and len(xi) < 2:
        return all_cross, cross, None
    if L1 is None:
        L1 = int(plan.length.max()) + 1
    key = plan.src_elem * L1
    key += plan.length
    if xi is not None:
        key = key[xi]
    if np.all(key[1:] > key[:-1]):
        return all_cross, cross, None  # already distinct (no broadcast)
    if _distinct_elems(*((plan.src_elem, plan.length) if xi is None else (plan.src_elem[xi], plan.length[xi]))):
        return all_cross, cross, None  # no source element starts two pieces: distinct too (a gather), no sort
    ks, order = stable_argsort(key, values=True)
    first = np.empty(len(ks), bool)
    first[0] = True
    np.not_equal(ks[1:], ks[:-1], out=first[1:])
    xs = order[first]
    if len(xs) == len(ks):
        return all_cross, cross, None
    sent = np.zeros(n, bool)
    sent[xs if all_cross else xi[xs]] = True
    return all_cross, sent, (order if all_cross else xi[order], first)


def _distinct_elems(se: np.ndarray, ln: np.ndarray) -> bool:
    """True when no two of the pieces starting at ``se`` (two or more) with lengths ``ln`` start at one source
    element, found without a sort: each piece's first element divided by the least length (at least 1) marked in
    a mask over their range, where that range is at most 32 slots a piece.  Pieces at least L long that do not
    overlap start at least L apart, so a gather's pieces fall in distinct slots; distinct slots give distinct
    first elements, so distinct (element, length) pieces, and True is _distinct_sends' sorted answer (every piece
    its own send).  False (the caller sorts) when two pieces share a slot or the range is wider."""
    lo, hi = int(se.min()), int(se.max())
    L = max(int(ln.min()), 1)
    if (hi - lo) // L >= 32 * len(se):
        return False
    slot = se - lo
    if L > 1:
        slot //= L
    mark = np.zeros((hi - lo) // L + 1, bool)
    mark[slot] = True
    return int(np.count_nonzero(mark)) == len(se)


def _tile_bytes(plan: CopyPlan, cross, sent, all_cross: bool, isz: int, T: int, L1: int | None = None):
    """Per tile: (bytes sent over the exchange (by the pieces in ``sent``), bytes received, bytes copied on the
    tile).  The bytes received and copied on the tile are one count over twice the tiles (the on-tile pieces on
    tiles T..2T-1, ``np.where``), not two counts of pieces gathered out (a gather per array).  ``L1``: the
    pieces' largest length plus one, where known."""
    if L1 is None:
        L1 = int(plan.length.max()) + 1
    if sent is cross and not all_cross and not cross.any():  # every piece on its tile (a transpose): one count
        z = np.zeros(T, np.int64)
        return z, z.copy(), bytes_per_tile(plan.src_tile, plan.length, isz, T, L1)
    if sent is cross and all_cross:
        bout = bytes_per_tile(plan.src_tile, plan.length, isz, T, L1)
    elif sent is cross:  # most pieces: the others on a spare tile
        bout = bytes_per_tile(np.where(cross, plan.src_tile, T), plan.length, isz, T + 1, L1)[:T]
    else:  # one piece per multicast (a few of the pieces): gathered
        bout = bytes_per_tile(plan.src_tile[sent], plan.length[sent], isz, T, L1)
    if all_cross:
        bin_ = bytes_per_tile(plan.dst_tile, plan.length, isz, T, L1)
        local = np.zeros(T, np.int64)
    else:
        both = bytes_per_tile(np.where(cross, plan.dst_tile, plan.src_tile + T), plan.length, isz, 2 * T, L1)
        bin_, local = both[:T], both[T:]
    return bout, bin_, local


def _exchange_code(c: Compiled, info: ProgInfo, plan: CopyPlan, cross, glob, multi_ipu: bool, sent_once, src_addr,
                   dst_addr, one_length: bool | None = None) -> None:
    """The exchange code of the crossing pieces, within an IPU and between IPUs: per tile, charged to the
    receiver's and the sender's tile (``info.code_bytes`` grows by their sum).  ``sent_once``: the pieces that
    send, one per distinct source piece (a multicast is sent once); ``one_length``: whether the plan's pieces have
    one length, where known."""
    T = c.num_tiles
    for mask, cat in ((cross & ~glob if multi_ipu else cross, "internalExchangeCode"),
                      (glob, "globalExchangeCode")):
        if mask.any():
            send = mask & sent_once
            if np.array_equal(send, mask):
                send = mask  # (no multicast among these pieces: the send side's pieces are the same)
            counts = exchange_code_counts(plan, mask, send, src_addr, dst_addr, T, one_length)
            if counts is None:  # (the packed key does not fit: the pieces sorted, then their patterns)
                counts = _code_counts_two_step(plan, mask, send, src_addr, dst_addr, T)
            # per pattern on the receiver's tile and on the sender's: summed per tile (the same sums as per pattern)
            charge_exchange_code(c, info, cat, *counts)


def _code_counts_two_step(plan: CopyPlan, mask, send, src_addr, dst_addr, T: int) -> tuple[np.ndarray, np.ndarray]:
    """copy_plans.exchange_code_counts by sorting the pieces (_pattern_order) and then finding their patterns
    (_pattern_units): per tile, the patterns (receive side on the receiver's tile, send side on the sender's) and
    the loops among them.  ``send is mask``: no multicast among the pieces."""
    # receive side: patterns per (source tile, destination tile), charged to the receiver
    idx = np.nonzero(mask)[0]
    st, dt, se, ln, ii = _pattern_order(plan, idx, src_addr, T)
    de = dst_addr if ii is idx and len(idx) == len(mask) else dst_addr[ii]  # (in order already: no gather)
    # send side: patterns of the distinct source pieces, charged to the sender.  They are sorted by
    # the same key (stable), so their order is the receive side's with the other pieces left out
    # (code_patterns(plan, send, src_addr, src_addr) without a second sort)
    if send is mask:  # no multicast among these pieces: the same pieces
        (_ps, pd_, cnt), (ps_, _pd, cnt_s) = _pattern_units(st, dt, se, de, ln, send_too=True)
    else:
        _ps, pd_, cnt = _pattern_units(st, dt, se, de, ln)
        k = send[ii]
        sek = se[k]
        ps_, _pd, cnt_s = _pattern_units(st[k], dt[k], sek, sek, ln[k])
    n_pat = np.bincount(pd_, minlength=T) + np.bincount(ps_, minlength=T)
    return n_pat, np.bincount(pd_[cnt > 1], minlength=T) + np.bincount(ps_[cnt_s > 1], minlength=T)


def _global_exchange(c: Compiled, info: ProgInfo, plan: CopyPlan, cross, glob, ipu_s, ipu_d, nbytes, busy, bin_,
                     bout) -> None:
    """The global sync and the exchange step of a copy with pieces between IPUs."""
    c.add_template(info, K_SYNC, cm.global_sync_cycles(c.target), ipu=-1, shared="global_sync")
    nI = c.target.num_ipus
    # a multicast piece crosses the links once per destination IPU (not once per destination tile)
    gi = np.nonzero(glob)[0]
    gkey = (plan.src_elem[gi] * (int(plan.length.max()) + 1) + plan.length[gi]) * nI + ipu_d[gi]
    gorder = stable_argsort(gkey)
    gk = gkey[gorder]
    gu = gi[gorder[np.concatenate([[True], gk[1:] != gk[:-1]])]]
    leave = np.bincount(ipu_s[gu], weights=nbytes[gu], minlength=nI)
    enter = np.bincount(ipu_d[gu], weights=nbytes[gu], minlength=nI)
    link = cm.ipu_link_cycles(c.target, leave, enter, ipu_s[gu], ipu_d[gu], nbytes[gu])
    dur = max(int(busy.max()), link)
    c.add_template(info, K_XG, busy, bin_, bout, duration=dur, ipu=-1,
                   bytes_exchange=int(nbytes[cross & ~glob].sum()), bytes_ipu_link=int(nbytes[gu].sum()),
                   bytes_sram=int(2 * nbytes[~cross].sum()))


def copy_signature(c: Compiled, prog, plan: CopyPlan | CopySignature | None):
    """Structure of an exchange program: pieces (tile pairs, lengths, offsets relative to the first
    piece of each side) and the element size (:class:`CopySignature`'s key; equal for equal pieces).
    Identical structure = identical exchange code once the op is outlined into a subgraph with its own
    operand buffers."""
    if plan is None:
        return None
    if not isinstance(plan, CopySignature):
        plan = plan_signature(c, plan, prog.src.tensor.itemsize)
    return plan.key
