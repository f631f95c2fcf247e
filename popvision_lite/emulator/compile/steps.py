"""Step costing: the BSP step templates of compute sets, copies (cut into pieces at tile
boundaries), stream copies and syncs, and the unrolled executed step sequence."""

from __future__ import annotations

import numpy as np

from popvision_lite.emulator import cost_model as cm
from popvision_lite.emulator import programs as P
from popvision_lite.emulator.compile.compiled import (
    K_COMPUTE,
    K_STREAM,
    K_SYNC,
    K_XG,
    K_XI,
    Compiled,
    CopyPlan,
    ProgInfo,
    cached_digest,
    digest,
    distinct_tiles,
    field_content,
)
from popvision_lite.emulator.compile.memory import tile_addr
from popvision_lite.emulator.graph import Field, Regions, _ranges_index
from popvision_lite.emulator.mapping import interval_index
from popvision_lite.errors import EmulatorError


def _runs_and_mapping(ep):
    starts, lens = ep.runs()
    keep = lens > 0
    if keep.all():
        return starts, lens, ep.tensor.mapping
    return starts[keep], lens[keep], ep.tensor.mapping


def _sorted_unique(a: np.ndarray) -> np.ndarray:
    """np.unique for int arrays via one sort (numpy's hash-based unique is slow on large int arrays)."""
    if len(a) == 0:
        return a
    if np.all(a[1:] > a[:-1]):
        return a
    # stable: the same values, and numpy's stable sort runs through the few ascending runs these arrays are
    # made of (the cut positions of each side) ~7x faster than its quicksort (3 runs of 0.7 M: 0.018 s)
    a = np.sort(a, kind="stable")
    return a[np.concatenate([[True], a[1:] != a[:-1]])]


def _whole_vertex(ep) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """For a field endpoint: per vertex (first element, element count, tile, all-runs-on-that-tile,
    mapping interval of the first element)."""
    s, e = ep.run_bounds()
    mp = ep.tensor.mapping
    k1 = interval_index(mp.start, s)
    kc = np.clip(k1, 0, max(len(mp) - 1, 0))
    tiles = mp.tile[kc]
    ok = np.all((e <= mp.stop[kc]) & (k1 >= 0) & (tiles == tiles[:, :1]), axis=1)
    return s[:, 0], ep.elems(), tiles[:, 0], ok, kc[:, 0]


def copy_pieces(src, dst) -> CopyPlan:
    """Split a copy into pieces at every tile boundary of source and destination (vectorised).

    Field endpoints (blocks/regions, element order = vertex order) whose every vertex lies inside
    one mapping interval on both sides are costed per vertex; the rest per contiguous run."""
    if isinstance(src, Field) and isinstance(dst, Field) and src.n == dst.n:
        s0, sn, st, sok, sk = _whole_vertex(src)
        d0, dn, dt, dok, dk = _whole_vertex(dst)
        if np.array_equal(sn, dn) and np.all(sok & dok):
            return CopyPlan(s0, d0, sn, st, dt, sk, dk)
    return _copy_pieces_runs(src, dst)


def _copy_pieces_runs(src, dst) -> CopyPlan:
    ss, sl, sm = _runs_and_mapping(src)
    ds, dl, dm = _runs_and_mapping(dst)
    total = int(sl.sum())
    if total == 0:
        z = np.zeros(0, np.int64)
        return CopyPlan(z, z, z, z, z)
    # fast path: pair the runs one to one (a single contiguous side is cut to the other's runs);
    # when every run lies inside one mapping interval on both sides, the runs are the pieces
    qs, ql, qd, qdl = ss, sl, ds, dl
    if len(ds) == 1 and len(ss) > 1:
        qd, qdl = ds[0] + np.cumsum(sl) - sl, sl
    elif len(ss) == 1 and len(ds) > 1:
        qs, ql = ss[0] + np.cumsum(dl) - dl, dl
    if len(qs) == len(qd) and np.array_equal(ql, qdl):
        ks = interval_index(sm.start, qs)
        kd = interval_index(dm.start, qd)
        ok_s = qs + ql <= sm.stop[ks]
        ok_d = qd + ql <= dm.stop[kd]
        ok = ok_s & ok_d
        if ok.all():
            return CopyPlan(qs, qd, ql, sm.tile[ks], dm.tile[kd], ks, kd)
        if (ok_s | ok_d).all():  # no run crosses an interval boundary on both sides
            return _cut_one_side(qs, qd, ql, ks, kd, ok_s, ok_d, sm, dm)
        if not ok.any():  # every run crosses (a whole-tensor copy: one run): cut them all, nothing to place
            return _cut_runs(qs, ql, sm, qd, ql, dm)[0]
        # the runs that cross an interval boundary are cut like any copy, the others are whole
        # pieces; each run's pieces stay in place, in copy order (as cutting all runs at once would)
        bad = np.nonzero(~ok)[0]
        sub, sub_run = _cut_runs(qs[bad], ql[bad], sm, qd[bad], ql[bad], dm)
        per_run = np.ones(len(qs), np.int64)
        per_run[bad] = np.bincount(sub_run, minlength=len(bad))
        first = np.cumsum(per_run) - per_run
        n = int(per_run.sum())
        whole = np.nonzero(ok)[0]
        at_whole = first[whole]
        sub_first = np.cumsum(per_run[bad]) - per_run[bad]
        at_sub = first[bad][sub_run] + np.arange(len(sub_run)) - sub_first[sub_run]
        out = []
        for whole_v, sub_v in ((qs, sub.src_elem), (qd, sub.dst_elem), (ql, sub.length),
                               (ks, sub.src_k), (kd, sub.dst_k)):
            a = np.empty(n, np.int64)
            a[at_whole] = whole_v[whole]
            a[at_sub] = sub_v
            out.append(a)
        se, de, ln, pks, pkd = out
        return CopyPlan(se, de, ln, sm.tile[pks], dm.tile[pkd], pks, pkd)
    return _cut_runs(ss, sl, sm, ds, dl, dm)[0]


def bytes_per_tile(tiles: np.ndarray, length: np.ndarray, isz: int, T: int, L1: int) -> np.ndarray:
    """``np.bincount(tiles, weights=length * isz, minlength=T)`` as int64 (the sums are whole, exact in float64),
    ``L1`` above every length: when tiles x lengths is a small table, by counting each (tile, length) and
    weighting the counts per tile (a weighted bincount converts and adds a float per piece, ~2.5x slower)."""
    n = len(tiles)
    if T * L1 <= max(4 * n, 1 << 16):
        counts = np.bincount(tiles * L1 + length, minlength=T * L1).reshape(T, L1)
        return (counts @ np.arange(L1, dtype=np.int64)) * isz
    return np.bincount(tiles, weights=length * isz, minlength=T).astype(np.int64)


def _cut_one_side(qs, qd, ql, ks, kd, ok_s, ok_d, sm, dm) -> CopyPlan:
    """_cut_runs for paired runs (source ``qs``, destination ``qd``, length ``ql``; their first elements'
    mapping intervals ``ks``, ``kd``) none of which crosses an interval boundary on both sides (``ok_s`` /
    ``ok_d``: the run lies in one interval on that side): a run is cut at the boundaries of its one crossing
    side, so its pieces are the intervals ks..ks_end (or kd..kd_end) it spans, found from the interval of its
    last element, with no sort of the cut positions and no search per piece.  The same pieces, in copy
    order, as cutting every run (:func:`_cut_runs`)."""
    R = len(qs)
    cs = np.zeros(R, np.int64)
    cd = np.zeros(R, np.int64)
    b = np.nonzero(~ok_s)[0]
    if len(b):
        cs[b] = interval_index(sm.start, qs[b] + ql[b] - 1) - ks[b]
    b = np.nonzero(~ok_d)[0]
    if len(b):
        cd[b] = interval_index(dm.start, qd[b] + ql[b] - 1) - kd[b]
    cnt = cs + cd + 1  # pieces per run (one of the two terms is 0)
    n = int(cnt.sum())
    first = np.cumsum(cnt) - cnt
    j = np.arange(n, dtype=np.int64) - np.repeat(first, cnt)  # piece j of its run
    qs_r = np.repeat(qs, cnt)
    qd_r = np.repeat(qd, cnt)
    ksp = np.repeat(ks, cnt) + (np.minimum(j, np.repeat(cs, cnt)) if cd.any() else j)
    kdp = np.repeat(kd, cnt) + (np.minimum(j, np.repeat(cd, cnt)) if cs.any() else j)
    # a piece starts at its interval's start, or at its run's start for the run's first piece
    o = sm.start[ksp] - qs_r
    np.maximum(o, dm.start[kdp] - qd_r, out=o)
    np.maximum(o, 0, out=o)
    ln = np.empty(n, np.int64)
    ln[:-1] = o[1:]
    ln[first + cnt - 1] = ql  # (a run's last piece ends with it)
    ln -= o
    return CopyPlan(qs_r + o, qd_r + o, ln, sm.tile[ksp], dm.tile[kdp], ksp, kdp)


def _cut_runs(ss, sl, sm, ds, dl, dm) -> tuple[CopyPlan, np.ndarray]:
    """Cut a copy of source runs (ss, sl) to destination runs (ds, dl) at every run and mapping
    interval boundary of both sides: the pieces in copy order, and each piece's source run."""
    total = int(sl.sum())
    soff = np.cumsum(sl) - sl
    doff = np.cumsum(dl) - dl
    cuts = [soff, doff]
    sides = []
    for starts, lens, off, mp in ((ss, sl, soff, sm), (ds, dl, doff, dm)):
        b = mp.start
        lo = np.searchsorted(b, starts, side="right")
        hi = np.searchsorted(b, starts + lens, side="left")
        cnt = np.maximum(hi - lo, 0)
        if cnt.sum():
            idx = _ranges_index(lo, cnt)
            run = np.repeat(np.arange(len(starts)), cnt)
            side_cuts = off[run] + b[idx] - starts[run]
            cuts.append(side_cuts)
        else:
            side_cuts = np.zeros(0, np.int64)
        sides.append((lo, side_cuts, np.cumsum(cnt) - cnt))
    if len(cuts) == 2:  # no interval boundary inside any run
        pos = _sorted_unique(np.concatenate(cuts))
        upto = None
    else:
        pos, upto = _cut_positions(cuts)
    if len(pos) and (pos[0] < 0 or pos[-1] >= total):  # (not for runs of positive lengths)
        inside = (pos >= 0) & (pos < total)
        pos = pos[inside]
        upto = None if upto is None else [u[inside] for u in upto]
    length = np.diff(np.append(pos, total))
    rs = interval_index(soff, pos)
    rd = interval_index(doff, pos)
    src_elem = ss[rs] + pos - soff[rs]
    dst_elem = ds[rd] + pos - doff[rd]
    # every copied element is mapped (check_graph), so each lies in interval k: the interval of its
    # run's first element (lo - 1) plus the side's interval boundaries inside the run up to it: the
    # boundaries (side_cuts, ascending in copy order) at or below each position, counted while the cut
    # positions were merged (_cut_positions), or searched (random queries into a large mapping were the
    # costliest part of cutting pieces)
    found = iter(upto or ())
    ks, kd = (lo[r] + (next(found) if len(side_cuts) and upto is not None else interval_index(side_cuts, pos))
              - first[r] for (lo, side_cuts, first), r in zip(sides, (rs, rd), strict=True))
    return CopyPlan(src_elem, dst_elem, length, sm.tile[ks], dm.tile[kd], ks, kd), rs


def _cut_positions(cuts: list) -> tuple[np.ndarray, list]:
    """The sorted distinct positions of ``cuts`` (run offsets of both sides, then one or two sides' interval
    boundaries inside runs, each strictly ascending), and for each boundary list after the first two: per
    position, how many of its boundaries lie at or below it, less one (interval_index(side_cuts, pos)).  One
    merge of the lists, each value tagged with its list in the low bits, instead of a search per position."""
    tags = len(cuts)
    bits = (tags - 1).bit_length()
    enc = np.concatenate([(np.asarray(a, np.int64) << bits) | i for i, a in enumerate(cuts)])
    enc.sort(kind="stable")  # (ascending runs: one merge pass each)
    v = enc >> bits
    new = np.empty(len(v), bool)
    new[:1] = True
    np.not_equal(v[1:], v[:-1], out=new[1:])
    pos = v[new]
    last = np.append(np.nonzero(new)[0][1:], len(v)) - 1  # each position's last tagged value
    tag = enc & ((1 << bits) - 1)
    upto = []
    for i in range(2, tags):
        cnt = np.cumsum(tag == i)
        k = cnt[last]
        k -= 1
        upto.append(k)
    return pos, upto


def compile_execute(c: Compiled, info: ProgInfo) -> None:
    cs = info.prog.cs
    em = c.target.em
    if not cs.groups or cs.num_vertices == 0:
        return
    memo = c.caches.exec_memo
    key = _execute_key(c, cs) if memo is not None else None
    hit = memo.get(key) if key is not None else None
    if hit is not None and all(g.codelet is k for g, k in zip(cs.groups, hit[0], strict=True)):
        # a compute set of the same vertices (codelets, tiles, fields, parameters) in a graph compiled before
        # for this target (the same layer in another stage graph): its costs and its groups' vertex cycles
        _codelets, group_cycles, busy, flops, sram, utiles = hit
        for g, cy in zip(cs.groups, group_cycles, strict=True):
            g._cycles = cy  # VertexGroup.cycles' cache (read-only arrays, shared)
    else:
        tiles = np.concatenate([g.tiles for g in cs.groups])
        cyc = np.concatenate([g.cycles(c.target) for g in cs.groups])
        sup = np.concatenate([np.full(g.n, bool(getattr(g.codelet, "supervisor", False))) for g in cs.groups])
        reg = np.concatenate([np.full(g.n, bool(getattr(g.codelet, "multi_region", False))) for g in cs.groups])
        busy, _count = cm.compute_tile_cycles(tiles, cyc, c.num_tiles, c.target.threads_per_tile,
                                              int(em["vertex_launch_cycles"]), supervisor=sup, regions=reg)
        flops = sum(g.codelet.flops(g) for g in cs.groups)
        sram = sum(g.codelet.sram_bytes(g) for g in cs.groups)
        utiles = distinct_tiles(tiles, c.num_tiles)
        if key is not None:
            group_cycles = []
            for g in cs.groups:
                cy = g.cycles(c.target)
                cy.setflags(write=False)
                group_cycles.append(cy)
            busy.setflags(write=False)
            utiles.setflags(write=False)
            memo[key] = (tuple(g.codelet for g in cs.groups), group_cycles, busy, flops, sram, utiles)
    c.add_template(info, K_COMPUTE, busy, ipu=c.ipu_of_tiles(utiles), flops=int(flops), bytes_sram=int(sram))
    # control code: call of the compute set on every tile with vertices
    c.add_mem("controlCode", utiles, cm.CONTROL_CODE_EXECUTE)
    c.add_mem("controlId", utiles, cm.CONTROL_ID_BYTES)
    info.code_bytes += len(utiles) * cm.CONTROL_CODE_EXECUTE


def _execute_key(c: Compiled, cs) -> tuple | None:
    """Everything compile_execute reads of compute set ``cs``, by value: per group its codelet (by identity:
    a codelet object may carry its own settings), the vertices' tiles, per field its kind, tensor dtype and
    shape, the field's arrays and which of the compute set's tensors it is on (two fields on one tensor stay
    apart from two on two), and the parameters.  None when a field or parameter is of a kind not covered
    (not memoised)."""
    tensor_no: dict = {}
    parts = []
    for g in cs.groups:
        desc: list = [g.codelet.name, id(g.codelet)]
        arrays = [g.tiles]  # (hashed by cached_digest: the graph check hashed most of them already)
        for name in sorted(g.fields):
            f = g.fields[name]
            t = f.tensor
            content = field_content(c, f)
            if content is None:
                return None
            desc.append((name, tensor_no.setdefault(t.id, len(tensor_no)), str(t.dtype), tuple(t.shape)) + content)
        for k in sorted(g.params):
            v = np.asarray(g.params[k])
            if v.dtype == object:
                return None
            desc.append(("param", k))
            arrays.append(v)
        parts.append((tuple(desc),) + tuple(cached_digest(c, a) for a in arrays))
    return tuple(parts)


def stable_argsort(key: np.ndarray) -> np.ndarray:
    """np.argsort(key, kind="stable") of an int64 array: when key x 2^k + index (2^k >= n) fits int64, a stable sort
    of those values (all distinct, so any sort gives the stable order) and the indices read back.  A
    value sort moves no index array: 2 M keys, random 0.17 against 0.22 s, sorted blocks 0.10 against
    0.14 s; a quicksort would lose on the mostly ordered keys of a copy's pieces (0.14 against 0.005 s on
    sorted keys), so it is numpy's stable (merge / run-aware) sort too."""
    n = len(key)
    if n < 2:
        return np.arange(n, dtype=np.int64)
    lo, hi = int(key.min()), int(key.max())
    shift = (n - 1).bit_length()  # the index in the low bits: a mask reads it back (4x cheaper than % n)
    if lo < 0 or (hi + 1) << shift >= 2**63:
        return np.argsort(key, kind="stable")
    v = (key << shift) | np.arange(n, dtype=np.int64)
    v.sort(kind="stable")
    return v & ((1 << shift) - 1)


def _lexsort3(a: np.ndarray, b: np.ndarray, c: np.ndarray, bc_bound: int | None = None) -> np.ndarray | None:
    """np.lexsort((a, b, c)) for non-negative ints: one stable argsort of a combined int64 key when
    it fits (the same order: lexsort is stable too), which is several times faster.  None when the
    pieces are in that order already (the order is the identity).  ``bc_bound``: ``b`` and ``c`` are known to
    lie in [0, bc_bound) (tiles), not searched for their least and greatest values."""
    if len(a) == 0:
        return np.zeros(0, np.int64)
    am = int(a.max()) + 1
    if bc_bound is None:
        bm, cm_ = int(b.max()) + 1, int(c.max()) + 1
        low = min(int(a.min()), int(b.min()), int(c.min()))
    else:
        bm = cm_ = bc_bound
        low = int(a.min())
    if low < 0 or am * bm * cm_ >= 2**62:
        order = np.lexsort((a, b, c))
        return None if np.array_equal(order, np.arange(len(a))) else order
    key = np.multiply(c, bm, dtype=np.int64)
    key += b
    key *= am
    key += a
    if np.all(key[1:] >= key[:-1]):
        return None
    return stable_argsort(key)


def code_patterns(plan: CopyPlan, mask: np.ndarray, src_addr=None, dst_addr=None, num_tiles: int | None = None
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Exchange-code units of the pieces selected by ``mask``: pieces between the same two tiles
    that repeat with one length and constant strides on both sides (rows of a block, a partial's
    slice of every row) form one pattern - exchange code is a loop over them, as it is for Poplar's
    regular copies (whose grouped tensor layouts make such blocks contiguous in the first place).
    With ``src_addr`` / ``dst_addr`` (positions in tile memory, tile_addr) pieces that are adjacent
    in both tiles' memory are one contiguous transfer (a pattern of stride = length).
    ``num_tiles``: the tiles' bound, where known.  Returns (src tile, dst tile, pieces) per pattern."""
    idx = np.nonzero(mask)[0]
    se_all = plan.src_elem if src_addr is None else src_addr
    de_all = plan.dst_elem if dst_addr is None else dst_addr
    st, dt, se, ln, ii = _pattern_order(plan, idx, se_all, num_tiles)
    return _pattern_units(st, dt, se, se if de_all is se_all else de_all[ii], ln)


def _pattern_order(plan: CopyPlan, idx: np.ndarray, se_all: np.ndarray, num_tiles: int | None = None):
    """The pieces ``idx`` grouped by (destination tile, source tile), each group sorted by source position,
    stable: (src tile, dst tile, src position, length, piece index) in that order.

    Patterns form within a group, so the groups' order does not change them (every consumer sums per tile):
    the destination tile is outermost because a copy's pieces come in destination order, and a copy whose
    every destination tile receives its source tiles' pieces in ascending order (an operand exchange) is
    then in this order already: no sort and no gathers.  ``num_tiles``: the tiles' bound, where known."""
    if len(idx) == len(plan.length):  # every piece (idx is 0..n-1)
        st, dt, se, ln = plan.src_tile, plan.dst_tile, se_all, plan.length
    else:
        st, dt, se, ln = plan.src_tile[idx], plan.dst_tile[idx], se_all[idx], plan.length[idx]
    order = _lexsort3(se, st, dt, num_tiles)
    if order is None:
        return st, dt, se, ln, idx
    return st[order], dt[order], se[order], ln[order], idx[order]


def _pattern_units(st, dt, se, de, ln, send_too: bool = False):
    """code_patterns on pieces already in _pattern_order, ``de`` their destination positions (``de is se``: only
    the source stride counts, the send side's patterns).  ``send_too``: also the send side's patterns of the same
    pieces, from the same pairs and source strides: (receive units, send units)."""
    n = len(st)
    if n == 0:
        z = np.zeros(0, np.int64)
        return ((z, z, z), (z, z, z)) if send_too else (z, z, z)
    new = np.ones(n, bool)
    new_s = None
    if n > 1:
        same = st[1:] == st[:-1]  # pair j-1 -> j: same tiles and length
        same &= dt[1:] == dt[:-1]
        same &= ln[1:] == ln[:-1]
        np.logical_not(same, out=new[1:])
        if send_too:
            new_s = new.copy()
        # piece j also starts a new pattern when its stride differs from the stride that led to j-1
        # (conservative: never merges pieces with different strides)
        if n > 2:
            ds = np.diff(se)
            step = ds[1:] != ds[:-1]
            if send_too:
                new_s[2:] |= same[:-1] & step
            if de is not se:
                dd = np.diff(de)
                step |= dd[1:] != dd[:-1]
            new[2:] |= same[:-1] & step
    units = _units(st, dt, new)
    if send_too:
        return units, (units if new_s is None else _units(st, dt, new_s))
    return units


def _units(st, dt, new: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(src tile, dst tile, pieces) of the patterns starting where ``new`` is set."""
    starts = np.nonzero(new)[0]
    counts = np.diff(np.append(starts, len(new)))
    return st[starts], dt[starts], counts


class CopyMemo:
    """Compiled copies by structure key (:func:`compile_copy`: each copy's recorded effects and outlining
    signature, never its pieces), kept across the graphs compiled for one :func:`copy_cost_key` with one
    outline setting (the distinct stage graphs of a pipelined run repeat the same layer's exchanges, and so do
    the stage graphs of the next run of that model); a copy of the same structure replays its effects, on the
    same tiles or rotated ones, as within a graph.  :meth:`keep_used` bounds it to the entries of the graphs
    compiled since the last call.  It also holds the graph check's
    answers by field content (``checked``, :func:`check.check_graph`): the layer's fields are the same too;
    and, for the graphs of one target object until :meth:`keep_used`, the compiled compute sets by content
    (``executes``, :func:`compile_execute`)."""

    def __init__(self) -> None:
        self.key: tuple | None = None
        self.outline: bool | None = None
        self.copies: dict = {}
        self.used: set = set()
        # the graph check's answers by field content (check.check_graph), and the keys used since keep_used
        self.checked: dict = {}
        self.checked_used: set = set()
        # compiled compute sets by content (compile_execute) for one target object (the compute costs read
        # all of the target's constants), dropped by keep_used: shared by one run's stage graphs only
        self.executes: dict = {}
        self.exec_target = None

    def start(self, target, outline: bool) -> None:
        """Before compiling graphs for ``target`` with ``outline``: the entries of another cost key or outline
        setting are dropped (they could not be replayed)."""
        key = copy_cost_key(target)
        if (key, bool(outline)) != (self.key, self.outline):
            self.key, self.outline = key, bool(outline)
            self.copies.clear()
            self.used = set()
            self.checked.clear()
            self.checked_used = set()

    def attach(self, c: Compiled) -> None:
        """Use this memo for ``c`` if it is for c's copy cost key and outline setting (the first graph sets
        them); otherwise ``c`` keeps its own."""
        if self.key is None:
            self.start(c.target, c.outline)
        if self.key == copy_cost_key(c.target) and self.outline == c.outline:
            c.caches.copy_memo = self.copies
            c.caches.copy_keys_used = self.used
            c.caches.check_memo = self.checked
            c.caches.check_keys_used = self.checked_used
        if c.target is not self.exec_target:
            self.exec_target = c.target
            self.executes.clear()
        c.caches.exec_memo = self.executes

    def compiled(self, c: Compiled) -> None:
        """After ``c``'s compile: nothing (a run's graphs share the memo; :meth:`keep_used` bounds it after the
        run)."""

    def keep_used(self) -> None:
        """Keep only the entries the graphs compiled since the last call used (their arrays narrowed), so a
        memo kept for later graphs holds one run's copies, not every run's."""
        _keep(self.copies, self.used)
        self.used = set()
        for k in set(self.checked) - self.checked_used:
            del self.checked[k]
        self.checked_used = set()
        self.executes.clear()  # (their arrays are large; the next run has another target object)
        self.exec_target = None


def _keep(copies: dict, used: set) -> None:
    """``copies`` reduced to the keys in ``used``, the effect arrays narrowed (:func:`_narrow`)."""
    kept = {}
    for k in used:
        if k in copies:
            plan, effects, code_bytes, shift = copies[k]
            kept[k] = (plan, [(fn, tuple(_narrow(a) for a in args), kw) for fn, args, kw in effects], code_bytes,
                       shift)
    copies.clear()
    copies.update(kept)


# The target's emulator constants a copy's compiled effects read (cost_model: exchange and on-tile copy
# rates, the shared exchange bus, internal syncs; on more than one IPU also global syncs and the IPU-Links).
# tests/emulator/test_compile_memo.py checks that compiling copies reads no other.
COPY_EM_KEYS = ("exchange_bytes_per_cycle", "memcpy_bytes_per_cycle", "tiles_per_shared_exchange_bus",
                "min_ipu_sync_delay_cycles", "max_ipu_sync_delay_cycles")
COPY_EM_KEYS_MULTI_IPU = ("global_sync_cycles", "ipu_link_bytes_per_cycle", "ipus_per_box",
                          "ipu_link_pair_bytes_per_cycle", "ipu_link_pair_bytes_per_cycle_across_boxes",
                          "ipu_link_latency_cycles")


def copy_cost_key(target) -> tuple:
    """Everything of ``target`` a compiled copy's effects depend on besides its structure key: tile and IPU
    counts and the emulator constants the copy cost model reads.  Two devices that differ only in other
    constants (the Bow IPU and the Mk2: clock, DDR, and on one IPU the IPU-Links) compile a copy alike."""
    keys = COPY_EM_KEYS + (COPY_EM_KEYS_MULTI_IPU if target.num_ipus > 1 else ())
    return (target.num_tiles, target.num_ipus, target.tiles_per_ipu) + tuple((k, target.em.get(k)) for k in keys)


def _narrow(a):
    """An int64 effect array kept between graphs as int32 when its values fit (add_mem / add_template
    widen what they are given to int64 again); anything else as it is."""
    if isinstance(a, np.ndarray) and a.dtype == np.int64 and a.size and \
            -(2**31) <= int(a.min()) and int(a.max()) < 2**31:
        return a.astype(np.int32)
    return a


class CarriedCopies:
    """Compiled copies carried from one whole-graph compile (outline off) to the next: the copies of
    the last graph that compiled any, by structure key, for one :func:`copy_cost_key`.  Replica graphs
    of one model that differ in a few ops (another availableMemoryProportion) or not at all (the same
    configuration on the Bow IPU and the Mk2) share most of their exchanges; a later graph replays those
    effects as a graph replays its own repeated copies (:func:`compile_copy`).  Bounded: after a compile
    only the entries that compile used are kept (one graph's: 1,000 entries, 57 MB for a ResNet-50
    replica graph, its arrays narrowed to int32)."""

    def __init__(self) -> None:
        self.key: tuple | None = None
        self.copies: dict = {}

    def attach(self, c: Compiled) -> None:
        key = copy_cost_key(c.target)
        if key != self.key:
            self.key, self.copies = key, {}
        c.caches.copy_memo = self.copies
        c.caches.copy_keys_used = set()

    def compiled(self, c: Compiled) -> None:
        """After ``c``'s compile: keep the entries it used (when it compiled any copy), their arrays narrowed."""
        used = c.caches.copy_keys_used
        if used:
            _keep(self.copies, used)

    def clear(self) -> None:
        self.key, self.copies = None, {}



class CopySignature:
    """A compiled copy's outlining signature (:func:`copy_signature`), kept instead of its per-piece plan: the
    digest of its pieces with their tiles relative to ``base`` (the first piece's source tile rounded down to
    even, on one IPU; 0 on several), and ``base``.  The pair is equal for two copies exactly when their pieces
    are (``base`` follows from the pieces, and with it the relative tiles give back the tiles), so outlining
    compares pairs as it compared the pieces.  A copy replayed on tiles rotated by an even ``d`` has the same
    pieces moved by ``d``: the same digest, ``base`` moved by ``d`` (:meth:`shifted`).  So no copy's pieces
    need to stay alive after its compile (they were kept for rotated replays: ~67 bytes a piece, most of the
    host memory of a stage graph's compile)."""

    __slots__ = ("sig", "base")

    def __init__(self, sig: bytes | None, base: int = 0) -> None:
        self.sig = sig
        self.base = base

    def shifted(self, d: int, num_tiles: int) -> CopySignature:
        """The signature of this copy's pieces on tiles rotated by ``d``."""
        return self if d == 0 or self.sig is None else CopySignature(self.sig, (self.base + d) % num_tiles)

    @property
    def key(self) -> tuple | None:
        return None if self.sig is None else (self.sig, self.base)


def plan_signature(c: Compiled, plan: CopyPlan, itemsize: int) -> CopySignature:
    """The outlining signature of a copy's pieces (:class:`CopySignature`): tile pairs, lengths, offsets relative
    to the first piece of each side, and the element size."""
    if len(plan.length) == 0:
        return CopySignature(None)
    T = c.num_tiles
    base = int(plan.src_tile[0]) & ~1 if c.target.num_ipus == 1 else 0
    st, dt = (plan.src_tile, plan.dst_tile) if base == 0 else ((plan.src_tile - base) % T, (plan.dst_tile - base) % T)
    return CopySignature(digest(st, dt, plan.length, plan.src_elem - plan.src_elem.min(),
                                plan.dst_elem - plan.dst_elem.min(), np.array([itemsize])), base)


def compile_copy(c: Compiled, info: ProgInfo) -> None:
    prog = info.prog
    if prog.src.tensor.dtype != prog.dst.tensor.dtype:
        raise EmulatorError(
            f"Copy '{prog.name}': src '{prog.src.name}' is {prog.src.tensor.dtype} but dst '{prog.dst.name}' is "
            f"{prog.dst.tensor.dtype}; fix: cast with a codelets.CAST compute set"
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
    bus pairs tiles 2k, 2k + 1; syncs are not part of the key).  Returns (key, shift)."""
    src_tiles = prog.src.tensor.mapping.tile
    shift = int(src_tiles[0]) & ~1 if c.target.num_ipus == 1 and len(src_tiles) else 0
    parts = [str(prog.src.tensor.itemsize).encode()]
    for ep in (prog.src, prog.dst):
        if isinstance(ep, Regions):  # its starts and sizes are its runs (hashed as stored, once per compile)
            parts.append(b"G" + cached_digest(c, ep.starts) + cached_digest(c, ep.sizes))
        elif isinstance(ep, Field):
            s, e = ep.run_bounds()
            parts.append(b"F" + digest(s, e))
        else:
            st, ln = ep.runs()
            parts.append(b"R" + digest(st, ln))
        mp = ep.tensor.mapping
        parts += [cached_digest(c, mp.tile, shift), cached_digest(c, mp.start), cached_digest(c, mp.stop)]
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
    n = len(cross)
    all_cross = len(xi) == n  # (most copies: then the crossing pieces' arrays are the plan's, not gathered)
    multi: bool | np.ndarray = False  # per crossing piece: its source piece goes to more than one tile
    L1 = int(plan.length.max()) + 1
    if len(xi):
        key = plan.src_elem * L1 + plan.length if all_cross else plan.src_elem[xi] * L1 + plan.length[xi]
        if np.all(key[1:] > key[:-1]):
            xs = xi  # already distinct (no broadcast)
        else:
            order = stable_argsort(key)
            ks = key[order]
            first = np.concatenate([[True], ks[1:] != ks[:-1]])
            xs = xi[order[first]]
            if len(xs) < len(xi):
                grp = np.cumsum(first) - 1
                multi = np.empty(len(xi), bool)
                multi[order] = np.bincount(grp)[grp] > 1
    else:
        xs = xi
    if xs is xi and all_cross:
        bout = bytes_per_tile(plan.src_tile, plan.length, isz, T, L1)
    else:
        bout = bytes_per_tile(plan.src_tile[xs], plan.length[xs], isz, T, L1)
    if all_cross:
        bin_ = bytes_per_tile(plan.dst_tile, plan.length, isz, T, L1)
        local = np.zeros(T, np.int64)
    else:
        bin_ = bytes_per_tile(plan.dst_tile[cross], plan.length[cross], isz, T, L1)
        local = bytes_per_tile(plan.src_tile[~cross], plan.length[~cross], isz, T, L1)
    bytes_cross, bytes_local = int(bin_.sum()), int(local.sum())
    # receive time: a piece multicast to both tiles of a shared exchange bus counts half on each
    # (only multicast pieces can have a bus partner)
    bin_time = cm.shared_bus_receive_bytes(c.target, plan, cross, nbytes, multicast=multi)
    # exchange / copy-descriptor memory on each participating tile
    if c.target.num_ipus == 1:
        ipu_s = ipu_d = None
        glob = np.zeros(len(cross), bool)
    else:
        ipu_s, ipu_d = c.target.ipu_of(plan.src_tile), c.target.ipu_of(plan.dst_tile)
        glob = ipu_s != ipu_d
    src_addr = tile_addr(c, prog.src.tensor.mapping, plan.src_elem, plan.src_k)
    dst_addr = tile_addr(c, prog.dst.tensor.mapping, plan.dst_elem, plan.dst_k)
    sent_once = np.zeros(len(cross), bool)
    sent_once[xs] = True  # one send per distinct source piece: a multicast is sent once
    for mask, cat in ((cross & ~glob if ipu_s is not None else cross, "internalExchangeCode"),
                      (glob, "globalExchangeCode")):
        if mask.any():
            send = mask & sent_once
            # receive side: patterns per (source tile, destination tile), charged to the receiver
            idx = np.nonzero(mask)[0]
            st, dt, se, ln, ii = _pattern_order(plan, idx, src_addr, T)
            de = dst_addr if ii is idx and len(idx) == n else dst_addr[ii]  # (in order already: no gather)
            # send side: patterns of the distinct source pieces, charged to the sender.  They are sorted by
            # the same key (stable), so their order is the receive side's with the other pieces left out
            # (code_patterns(plan, send, src_addr, src_addr) without a second sort)
            if np.array_equal(send, mask):  # no multicast among these pieces: the same pieces
                (_ps, pd_, cnt), (ps_, _pd, cnt_s) = _pattern_units(st, dt, se, de, ln, send_too=True)
            else:
                _ps, pd_, cnt = _pattern_units(st, dt, se, de, ln)
                k = send[ii]
                sek = se[k]
                ps_, _pd, cnt_s = _pattern_units(st[k], dt[k], sek, sek, ln[k])
            # per pattern EXCHANGE_CODE_PER_PIECE, and EXCHANGE_CODE_PER_LOOP more for a loop (several pieces), on
            # the receiver's tile and on the sender's: summed per tile (the same sums as per pattern)
            n_r, n_s = np.bincount(pd_, minlength=T), np.bincount(ps_, minlength=T)
            per_tile = (n_r + n_s) * cm.EXCHANGE_CODE_PER_PIECE
            per_tile += (np.bincount(pd_[cnt > 1], minlength=T)
                         + np.bincount(ps_[cnt_s > 1], minlength=T)) * cm.EXCHANGE_CODE_PER_LOOP
            ut = np.nonzero(n_r + n_s)[0]
            c.add_mem(cat, ut, per_tile[ut])
            c.add_mem(cat, ut, cm.EXCHANGE_CODE_BASE)
            info.code_bytes += int(per_tile.sum()) + len(ut) * cm.EXCHANGE_CODE_BASE
    if glob.any():
        c.add_mem("globalExchangePacketHeader", plan.dst_tile[glob], cm.GLOBAL_PACKET_HEADER_BYTES)
    if not all_cross:
        ps_, _pd, cnt = code_patterns(plan, ~cross, src_addr, dst_addr, T)
        c.add_mem("copyDescriptor", ps_, cm.COPY_DESCRIPTOR_PER_PIECE + np.where(cnt > 1, cm.EXCHANGE_CODE_PER_LOOP, 0))
    busy = cm.exchange_tile_cycles(c.target, bout, bin_time, local)
    if not cross.any():
        # purely on-tile: the tiles copy with memcpy, a compute-like step
        ut = distinct_tiles(plan.src_tile, c.num_tiles)
        c.add_template(info, K_COMPUTE, busy, ipu=c.ipu_of_tiles(ut), bytes_sram=2 * bytes_local)
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
    else:
        # the tiles with pieces: every piece's source tile sends it (bout, local) or holds the first of its
        # multicast's pieces, every destination tile receives (bin_, local); with no empty piece, the same
        # tiles as every piece's source and destination tile
        if int(plan.length.min()) > 0:
            part = np.nonzero(bout + bin_ + local)[0]
        else:
            part = distinct_tiles(np.concatenate([plan.src_tile, plan.dst_tile]), c.num_tiles)
        ipu = c.ipu_of_tiles(part)
        c.add_template(info, K_SYNC, cm.internal_sync_cycles(c.target), ipu=c.all_ipus(), shared="internal_sync")
        c.add_template(info, K_XI, busy, bin_, bout, ipu=ipu, bytes_exchange=bytes_cross,
                       bytes_sram=2 * bytes_local)
    c.add_mem("controlCode", all_t, cm.CONTROL_CODE_SYNC)
    info.code_bytes += T * cm.CONTROL_CODE_SYNC


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

    def rec(pid: int) -> tuple[np.ndarray, list[tuple[int, int, int]]]:
        """Steps of one execution of pid, and (prog, first, last) relative records of the subtree."""
        info = c.progs[pid]
        p = info.prog
        if isinstance(p, P.Sequence | P.Repeat):
            parts, recs, off = [], [], 0
            for ch in children.get(pid, []):
                s, r = rec(ch)
                recs += [(q, f + off if f >= 0 else -1, lst + off if lst >= 0 else -1) for q, f, lst in r]
                parts.append(s)
                off += len(s)
            body = np.concatenate(parts) if parts else np.zeros(0, np.int64)
            if isinstance(p, P.Repeat):
                k = p.count
                c.prog_repeat[pid] = k
                L = len(body)
                recs = [(q, f if k else -1, lst + (k - 1) * L if (k and lst >= 0) else -1) for q, f, lst in recs]
                body = np.tile(body, k)
            seq = body
        else:
            seq = np.asarray(info.templates, np.int64)
            recs = []
        recs.append((pid, 0 if len(seq) else -1, len(seq) - 1 if len(seq) else -1))
        return seq, recs

    seq, recs = rec(0)
    c.seq = seq
    for q, f, lst in recs:
        c.prog_first[q], c.prog_last[q] = f, lst
    c.step_duration = dur[seq] if len(seq) else np.zeros(0, np.int64)
    ends = np.cumsum(c.step_duration)
    c.step_end = ends
    c.step_start = ends - c.step_duration
    c.total_cycles = int(ends[-1]) if len(ends) else 0
    c.template_count = np.bincount(seq, minlength=len(c.templates)) if len(c.templates) else np.zeros(0, np.int64)
    # cycles per program = sum of durations of steps in [first, last] that it issued:
    # leaves: own templates x executions; containers: sum of children
    execs = np.zeros(n, np.int64)

    def count_execs(pid: int, mult: int) -> None:
        execs[pid] = mult
        p = c.progs[pid].prog
        inner = mult * (p.count if isinstance(p, P.Repeat) else 1)
        for ch in children.get(pid, []):
            count_execs(ch, inner)

    count_execs(0, 1)
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
