"""A copy's pieces and its exchange code: the copy cut into pieces at tile and mapping-interval boundaries
(:func:`copy_pieces`), bytes per tile, the exchange-code patterns of the pieces (:func:`code_patterns`), and the
exchange code they cost on each tile (:func:`charge_exchange_code`, for every way a copy is compiled)."""

from __future__ import annotations

import numpy as np

from popvision_lite.emulator import cost_model as cm
from popvision_lite.emulator.compile.compiled import (
    Compiled,
    CopyPlan,
    ProgInfo,
)
from popvision_lite.emulator.compile.copy_sorts import _lexsort3, _sorted_unique
from popvision_lite.emulator.compile.copy_sorts import (
    stable_argsort as stable_argsort,  # (re-exported: its old home)
)
from popvision_lite.emulator.graph import Field, _ranges_index
from popvision_lite.emulator.mapping import interval_index


def _bounds(ep, known: dict | None) -> tuple[np.ndarray, np.ndarray]:
    """A field endpoint's run bounds, as the copy's structure key read them where it did (``known``, by endpoint
    id: copies._copy_structure_key)."""
    hit = known.get(id(ep)) if known else None
    return (hit[1], hit[2]) if hit is not None and hit[0] == "bounds" else ep.run_bounds()


def _runs(ep, known: dict | None) -> tuple[np.ndarray, np.ndarray]:
    """An endpoint's runs (``ep.runs()``), from what the structure key read where it did: a field's runs are its
    run bounds flattened (graph.Field.runs)."""
    hit = known.get(id(ep)) if known else None
    if hit is None:
        return ep.runs()
    if hit[0] == "runs":
        return hit[1], hit[2]
    s, e = hit[1], hit[2]
    return s.ravel(), (e - s).ravel()


def _runs_and_mapping(ep, known: dict | None = None):
    starts, lens = _runs(ep, known)
    keep = lens > 0
    if keep.all():
        return starts, lens, ep.tensor.mapping
    return starts[keep], lens[keep], ep.tensor.mapping


def _whole_vertex(ep, known: dict | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """For a field endpoint: per vertex (first element, element count, tile, all-runs-on-that-tile,
    mapping interval of the first element)."""
    return _vertex_intervals(ep, known, False)[:5]


def _vertex_intervals(ep, known: dict | None = None, with_runs: bool = True):
    """_whole_vertex's five arrays, then the endpoint's runs with their first elements' intervals where each vertex
    is one run of at least one element and every run's first element is mapped: (starts, lengths, intervals,
    each run inside its interval), the source side of _copy_pieces_runs' paired runs (its ``ss``, ``sl``, ``ks``
    and ``ok_s``: the same arrays), else None.  One run a vertex (a region, a window row): the tile comparison
    across runs is empty, and the interval search is the runs' own."""
    s, e = _bounds(ep, known)
    mp = ep.tensor.mapping
    k1 = interval_index(mp.start, s)
    if s.shape[1] == 1 and len(mp) and len(s):
        k = k1[:, 0]
        lo = int(k.min())
        kc = k if lo >= 0 else np.clip(k, 0, len(mp) - 1)
        s0, e0 = s[:, 0], e[:, 0]
        inside = e0 <= mp.stop[kc]
        ok = inside if lo >= 0 else inside & (k >= 0)
        n_el = ep.elems()
        runs = None
        if with_runs and lo >= 0:
            ln = e0 - s0
            if int(ln.min()) > 0:
                runs = (s0, ln, k, inside)
        return s0, n_el, mp.tile[kc], ok, kc, runs
    kc = np.clip(k1, 0, max(len(mp) - 1, 0))
    tiles = mp.tile[kc]
    ok = np.all((e <= mp.stop[kc]) & (k1 >= 0) & (tiles == tiles[:, :1]), axis=1)
    return s[:, 0], ep.elems(), tiles[:, 0], ok, kc[:, 0], None


def copy_pieces(src, dst, known: dict | None = None) -> CopyPlan:
    """Split a copy into pieces at every tile boundary of source and destination (vectorised).

    Field endpoints (blocks/regions, element order = vertex order) whose every vertex lies inside
    one mapping interval on both sides are costed per vertex; the rest per contiguous run.  ``known``: the
    endpoints' run bounds or runs where already read (copies._copy_structure_key), by endpoint id."""
    if isinstance(src, Field) and isinstance(dst, Field) and src.n == dst.n:
        # the source side first: where one of its vertices spans two intervals (the stem's im2col windows) the
        # destination's is not looked up (its mapping searches: ~0.15 s of that copy's 1 s)
        s0, sn, st, sok, sk, src_runs = _vertex_intervals(src, known)
        if sok.all() and np.array_equal(sn, dst.elems()):
            d0, dn, dt, dok, dk = _whole_vertex(dst, known)
            if dok.all():
                return CopyPlan(s0, d0, sn, st, dt, sk, dk)
        # (the source's runs and their intervals, as found: not read and searched again)
        return _copy_pieces_runs(src, dst, known, src_runs)
    return _copy_pieces_runs(src, dst, known)


def _copy_pieces_runs(src, dst, known: dict | None = None, src_runs: tuple | None = None) -> CopyPlan:
    """copy_pieces by runs.  ``src_runs``: the source's runs of positive lengths, their first elements' intervals
    and whether each run lies inside its interval (_vertex_intervals), where already found."""
    if src_runs is None:
        ss, sl, sm = _runs_and_mapping(src, known)
    else:
        ss, sl, sm = src_runs[0], src_runs[1], src.tensor.mapping
    ds, dl, dm = _runs_and_mapping(dst, known)
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
    elif len(ss) > len(ds) > 1:  # the destination's runs joins of the source's (a B block to a tile's operand)
        qd = _nested_runs(sl, ds, dl)
        if qd is not None:
            qdl = sl
        else:
            qd = ds
    elif len(ds) > len(ss) > 1:
        qs = _nested_runs(dl, ss, sl)
        if qs is not None:
            ql = dl
        else:
            qs = ss
    if len(qs) == len(qd) and np.array_equal(ql, qdl):
        if src_runs is not None and qs is ss:
            ks, ok_s = src_runs[2], src_runs[3]
        else:
            ks = interval_index(sm.start, qs)
            ok_s = qs + ql <= sm.stop[ks]
        kd = interval_index(dm.start, qd)
        ok_d = qd + ql <= dm.stop[kd]
        ok = ok_s & ok_d
        if ok.all():
            return CopyPlan(qs, qd, ql, sm.tile[ks], dm.tile[kd], ks, kd)
        if (ok_s | ok_d).all():  # no run crosses an interval boundary on both sides
            return _cut_one_side(qs, qd, ql, ks, kd, ok_s, ok_d, sm, dm)
        counts = _coinciding_cuts(qs, qd, ql, ks, kd, ok_s, ok_d, sm, dm)
        if counts is not None:  # the runs that cross on both sides cross at the same offsets (alike layouts)
            return _cut_one_side(qs, qd, ql, ks, kd, ok_s, ok_d, sm, dm, counts)
        if not ok.any():  # every run crosses (a whole-tensor copy: one run): cut them all, nothing to place
            if len(qs) == 1:
                return _cut_one_run(int(qs[0]), int(qd[0]), int(ql[0]), sm, dm)
            return _cut_runs(qs, ql, sm, qd, ql, dm)[0]
        # the runs that cross an interval boundary are cut like any copy, the others are whole
        # pieces; each run's pieces stay in place, in copy order (as cutting all runs at once would)
        bad = np.nonzero(~ok)[0]
        lb = ql[bad]  # (one array for both sides: _cut_runs then cuts them as paired runs)
        sub, sub_run = _cut_runs(qs[bad], lb, sm, qd[bad], lb, dm)
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


def _nested_runs(fine_l: np.ndarray, cs: np.ndarray, cl: np.ndarray) -> np.ndarray | None:
    """Where every run of one side (``cs``, ``cl``: the coarse side, fewer runs) is a join of consecutive runs of
    the other (lengths ``fine_l``; positive lengths, as _runs_and_mapping keeps them), the coarse side cut to the
    fine side's runs: each fine run's first element on the coarse side (its lengths are ``fine_l``); else None.
    The copy is then cut at the same positions as cutting both sides' runs (_cut_runs: the coarse side's run
    offsets are among the fine side's), so the paired runs' path applies, as for one contiguous side."""
    f_off = np.cumsum(fine_l) - fine_l
    c_off = np.cumsum(cl) - cl
    j = np.searchsorted(f_off, c_off)
    if int(j[-1]) >= len(f_off) or not np.array_equal(f_off[j], c_off):
        return None
    step = np.zeros(len(f_off), np.int64)
    step[j] = 1
    r = np.cumsum(step)
    r -= 1  # the coarse run of each fine run (j[0] is 0: both sides start at offset 0)
    out = f_off - c_off[r]
    out += cs[r]
    return out


def bytes_per_tile(tiles: np.ndarray, length: np.ndarray, isz: int, T: int, L1: int) -> np.ndarray:
    """``np.bincount(tiles, weights=length * isz, minlength=T)`` as int64 (the sums are whole, exact in float64),
    ``L1`` above every length: when tiles x lengths is a small table, by counting each (tile, length) and
    weighting the counts per tile (a weighted bincount converts and adds a float per piece, ~2.5x slower)."""
    n = len(tiles)
    if T * L1 <= max(4 * n, 1 << 16):
        counts = np.bincount(tiles * L1 + length, minlength=T * L1).reshape(T, L1)
        return (counts @ np.arange(L1, dtype=np.int64)) * isz
    return np.bincount(tiles, weights=length * isz, minlength=T).astype(np.int64)


def _side_cuts(qs, ql, ks, ok, mp) -> np.ndarray:
    """Per paired run (source or destination side: first elements ``qs``, lengths ``ql``, the first elements'
    mapping intervals ``ks``, ``ok``: the run lies in one interval), how many interval boundaries lie inside it."""
    c = np.zeros(len(qs), np.int64)
    b = np.nonzero(~ok)[0]
    if len(b):
        c[b] = interval_index(mp.start, qs[b] + ql[b] - 1) - ks[b]
    return c


def _coinciding_cuts(qs, qd, ql, ks, kd, ok_s, ok_d, sm, dm) -> tuple[np.ndarray, np.ndarray] | None:
    """For paired runs some of which cross interval boundaries on both sides: (per run, the boundaries inside it
    on the source side, on the destination side) when every such run crosses them at the same offsets from its
    start on both sides (a copy between two tensors laid out alike), else None.  Such a run's pieces are its
    intervals on either side, so :func:`_cut_one_side` cuts it with no merge of the two sides' cut positions."""
    cs = _side_cuts(qs, ql, ks, ok_s, sm)
    cd = _side_cuts(qd, ql, kd, ok_d, dm)
    two = np.nonzero(~(ok_s | ok_d))[0]
    c = cs[two]
    if not np.array_equal(c, cd[two]):
        return None
    at_s = sm.start[_ranges_index(ks[two] + 1, c)] - np.repeat(qs[two], c)
    at_d = dm.start[_ranges_index(kd[two] + 1, c)] - np.repeat(qd[two], c)
    return (cs, cd) if np.array_equal(at_s, at_d) else None


def _cut_one_side(qs, qd, ql, ks, kd, ok_s, ok_d, sm, dm, counts: tuple | None = None) -> CopyPlan:
    """_cut_runs for paired runs (source ``qs``, destination ``qd``, length ``ql``; their first elements'
    mapping intervals ``ks``, ``kd``) none of which crosses an interval boundary on both sides (``ok_s`` /
    ``ok_d``: the run lies in one interval on that side), or that cross them at the same offsets on both sides
    (``counts``: the boundaries inside each run per side, :func:`_coinciding_cuts`): a run is cut at the
    boundaries of its crossing side, so its pieces are the intervals ks..ks_end (or kd..kd_end) it spans, found
    from the interval of its last element, with no sort of the cut positions and no search per piece.  The same
    pieces, in copy order, as cutting every run (:func:`_cut_runs`)."""
    # the runs cut: those crossing a boundary on some side (a run that crosses one holds at least one boundary:
    # every copied element is mapped; one holding none would come back from the cut whole, one piece, as placed)
    cut = np.nonzero(~(ok_s & ok_d) if counts is None else counts[0] | counts[1])[0]
    if 0 < 8 * len(cut) <= len(qs):
        sub_counts = (_side_cuts(qs[cut], ql[cut], ks[cut], ok_s[cut], sm),
                      _side_cuts(qd[cut], ql[cut], kd[cut], ok_d[cut], dm)) if counts is None else \
            (counts[0][cut], counts[1][cut])
        return _splice_cut_runs(qs, qd, ql, ks, kd, cut, np.maximum(*sub_counts) + 1,
                                _cut_one_side(qs[cut], qd[cut], ql[cut], ks[cut], kd[cut], ok_s[cut], ok_d[cut], sm,
                                              dm, sub_counts), sm, dm)
    cs, cd = counts if counts is not None else (_side_cuts(qs, ql, ks, ok_s, sm), _side_cuts(qd, ql, kd, ok_d, dm))
    cnt = np.maximum(cs, cd) + 1  # pieces per run (cs, cd or both, where both sides cut alike)
    n = int(cnt.sum())
    first = np.cumsum(cnt) - cnt
    qs_r = np.repeat(qs, cnt)
    qd_r = np.repeat(qd, cnt)
    # piece j of a run lies in the run's first interval plus j on a side that cuts the run, plus 0 on the other
    # side: ks + j is arange(n) + (ks - first) repeated (a run of one piece reads the same either way)
    ksp, kdp = (_piece_intervals(k, first, cnt, n, c, other) for k, c, other in ((ks, cs, cd), (kd, cd, cs)))
    # a piece starts at its interval's start, or at its run's start for the run's first piece (a side that cuts
    # no run adds nothing: its interval starts at or below each run's start)
    o = sm.start[ksp] - qs_r if cs.any() else None
    if cd.any():
        od = dm.start[kdp] - qd_r
        o = od if o is None else np.maximum(o, od, out=o)
    if o is None:  # (no run holds a boundary on either side: each is its one piece)
        o = np.zeros(n, np.int64)
    np.maximum(o, 0, out=o)
    ln = np.empty(n, np.int64)
    ln[:-1] = o[1:]
    ln[first + cnt - 1] = ql  # (a run's last piece ends with it)
    ln -= o
    return CopyPlan(qs_r + o, qd_r + o, ln, sm.tile[ksp], dm.tile[kdp], ksp, kdp)


def _splice_cut_runs(qs, qd, ql, ks, kd, cut, cnt_cut, sub: CopyPlan, sm, dm) -> CopyPlan:
    """_cut_one_side's pieces where few runs are cut (``cut``: those of more than one piece, ``cnt_cut`` pieces
    each, ``sub``: their pieces, cut on their own): each run's first piece is the whole run (its first elements,
    length and intervals), written in one masked pass over the places of every run's first piece, and the cut
    runs' pieces written over their places (the stem's im2col windows: 1 % of 1.74 M runs cut).  The same
    pieces, in copy order, as cutting every run; no per-run repeat (a repeat by counts costs several times a
    masked write)."""
    extra = cnt_cut - 1
    first_cut = np.cumsum(extra)
    first_cut -= extra
    first_cut += cut  # each cut run's first piece: its run index plus the pieces of the cut runs before it
    n = len(qs) + int(extra.sum())
    at = _ranges_index(first_cut, cnt_cut)
    place = np.ones(n, bool)  # the first piece of every run, in run order
    place[at] = False
    place[first_cut] = True
    out = []
    for whole_v, sub_v in ((qs, sub.src_elem), (qd, sub.dst_elem), (ql, sub.length), (ks, sub.src_k),
                           (kd, sub.dst_k)):
        a = np.empty(n, np.int64)
        a[place] = whole_v
        a[at] = sub_v
        out.append(a)
    se, de, ln, pks, pkd = out
    return CopyPlan(se, de, ln, sm.tile[pks], dm.tile[pkd], pks, pkd)


def _piece_intervals(k, first, cnt, n: int, c, other) -> np.ndarray:
    """Per piece of runs cut per run (_cut_one_side), its mapping interval on one side: the run's first interval
    ``k`` plus the piece's place in its run where this side cuts the run (``c`` > 0, or a run of one piece), else
    the run's first interval (``other`` > 0: only the other side cuts it)."""
    if not c.any():  # this side cuts no run
        return np.repeat(k, cnt)
    advance = (c > 0) | (other == 0)
    if advance.all():  # no run cut by the other side alone
        return np.arange(n, dtype=np.int64) + np.repeat(k - first, cnt)
    out = np.repeat(k - first * advance, cnt)
    out += np.arange(n, dtype=np.int64) * np.repeat(advance, cnt)
    return out


def _cut_one_run(a: int, b: int, n: int, sm, dm) -> CopyPlan:
    """_cut_runs(...)[0] of one source run [a, a + n) and one destination run [b, b + n) (a whole-tensor copy
    between two layouts: the call arguments and results, the residual and ReLU gradients' operands): the pieces
    start at 0 and at each side's interval starts inside its run, which are ascending already; a piece's
    interval on each side is its run's first interval plus the side's starts at or below it.  Where one side's
    starts are among the other's (the commonest case: a fine layout copied to a coarse one), the pieces are the
    finer side's intervals and the coarser side's interval advances at its own starts, with no merge; otherwise
    the two lists are merged by one stable sort (two ascending runs, one merge pass), each start tagged with its
    side.  The same pieces, intervals and int64 arrays as :func:`_cut_runs`."""
    sides = []
    for x, mp in ((a, sm), (b, dm)):
        st = mp.start
        lo = int(np.searchsorted(st, x, side="right"))
        hi = int(np.searchsorted(st, x + n, side="left"))
        sides.append((lo - 1, np.asarray(st[lo:max(hi, lo)], np.int64) - x))  # (first interval, starts inside)
    (k0s, cs), (k0d, cd) = sides
    if len(cs) <= len(cd):
        small, large, k0_small, k0_large, small_is_src = cs, cd, k0s, k0d, True
    else:
        small, large, k0_small, k0_large, small_is_src = cd, cs, k0d, k0s, False
    m = len(large) + 1
    j = np.searchsorted(large, small)
    if len(small) == 0 or (int(j[-1]) < len(large) and np.array_equal(large[j], small)):
        # the smaller side's starts are among the larger side's: the pieces are the larger side's intervals
        pos = np.empty(m, np.int64)
        pos[0] = 0
        pos[1:] = large
        k_large = np.arange(k0_large, k0_large + m, dtype=np.int64)
        step = np.zeros(m, np.int64)
        step[0] = k0_small
        step[j + 1] = 1
        k_small = np.cumsum(step)
        ks, kd = (k_small, k_large) if small_is_src else (k_large, k_small)
    else:
        enc = np.concatenate([cs << 1, (cd << 1) | 1])
        enc.sort(kind="stable")  # (two ascending runs: one merge)
        v = enc >> 1
        last = np.empty(len(v), bool)  # each position's last tagged value
        last[-1] = True
        np.not_equal(v[1:], v[:-1], out=last[:-1])
        tag = enc & 1
        pos = np.empty(int(np.count_nonzero(last)) + 1, np.int64)
        pos[0] = 0
        pos[1:] = v[last]
        ks = np.empty(len(pos), np.int64)
        kd = np.empty(len(pos), np.int64)
        ks[0], kd[0] = k0s, k0d
        cd_upto = np.cumsum(tag)[last]  # destination starts at or below each position
        ks[1:] = k0s + np.arange(1, len(v) + 1, dtype=np.int64)[last] - cd_upto
        kd[1:] = k0d + cd_upto
    length = np.empty(len(pos), np.int64)
    length[:-1] = pos[1:] - pos[:-1]
    length[-1] = n - pos[-1]
    return CopyPlan(pos + a, pos + b, length, sm.tile[ks], dm.tile[kd], ks, kd)


def _cut_runs(ss, sl, sm, ds, dl, dm) -> tuple[CopyPlan, np.ndarray]:
    """Cut a copy of source runs (ss, sl) to destination runs (ds, dl) at every run and mapping
    interval boundary of both sides: the pieces in copy order, and each piece's source run.  ``dl is sl``: the
    runs are paired one to one (the matmul's rearranged operands), so both sides' run offsets are one list, merged
    and searched once (each piece's destination run is its source run)."""
    total = int(sl.sum())
    paired = dl is sl
    soff = np.cumsum(sl) - sl
    doff = soff if paired else np.cumsum(dl) - dl
    cuts = [soff] if paired else [soff, doff]
    n_runs = len(cuts)  # (the run offset lists; the sides' boundaries inside runs follow)
    sides = []
    for starts, lens, off, mp in ((ss, sl, soff, sm), (ds, dl, doff, dm)):
        b = mp.start
        lo = np.searchsorted(b, starts, side="right")
        hi = np.searchsorted(b, starts + lens, side="left")
        cnt = np.maximum(hi - lo, 0)
        if cnt.sum():
            # each boundary's offset in the copy: its run's offset less the run's first element, plus the boundary
            side_cuts = np.repeat(off - starts, cnt)
            side_cuts += b[_ranges_index(lo, cnt)]
            cuts.append(side_cuts)
        else:
            side_cuts = np.zeros(0, np.int64)
        sides.append((lo, side_cuts, np.cumsum(cnt) - cnt))
    if len(cuts) == n_runs:  # no interval boundary inside any run
        pos = _sorted_unique(np.concatenate(cuts))
        upto = None
    else:
        pos, upto = _cut_positions(cuts, n_runs)
    if len(pos) and (pos[0] < 0 or pos[-1] >= total):  # (not for runs of positive lengths)
        inside = (pos >= 0) & (pos < total)
        pos = pos[inside]
        upto = None if upto is None else [u[inside] for u in upto]
    length = np.diff(np.append(pos, total))
    rs = interval_index(soff, pos)
    rd = rs if paired else interval_index(doff, pos)
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


def _cut_positions(cuts: list, n_runs: int = 2) -> tuple[np.ndarray, list]:
    """The sorted distinct positions of ``cuts`` (run offsets of both sides, ``n_runs`` lists (one where the runs
    are paired), then one or two sides' interval boundaries inside runs, each strictly ascending), and for each
    boundary list after the run offsets: per
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
    for i in range(n_runs, tags):
        cnt = np.cumsum(tag == i)
        k = cnt[last]
        k -= 1
        upto.append(k)
    return pos, upto


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
    every = len(idx) == len(plan.length)  # every piece (idx is 0..n-1)
    if every:
        st, dt, se, ln = plan.src_tile, plan.dst_tile, se_all, plan.length
    else:
        st, dt, se, ln = plan.src_tile[idx], plan.dst_tile[idx], se_all[idx], plan.length[idx]
    packed = _packed_order(se, st, dt, num_tiles)
    if packed is not None:
        order, fields = packed
        if order is None:
            return st, dt, se, ln, idx
        return (*fields, ln[order], order if every else idx[order])
    order = _lexsort3(se, st, dt, num_tiles)
    if order is None:
        return st, dt, se, ln, idx
    return st[order], dt[order], se[order], ln[order], order if every else idx[order]


def _packed_order(se: np.ndarray, st: np.ndarray, dt: np.ndarray, num_tiles: int | None):
    """_lexsort3(se, st, dt) with the three fields packed into the sort key at power-of-two widths, above the
    piece index (the order is the same: the same fields compared in the same order, ties by index): the sorted
    key gives back the sorted fields with shifts and masks instead of a gather each (a gather through a
    permutation costs ~6 ns an element, a shift ~1).  Returns (order or None when in order already, (src tile,
    dst tile, src position) in that order), or None when the key does not fit int64 (then _lexsort3)."""
    n = len(se)
    if n < 2:
        return None
    if num_tiles is None:
        lo = min(int(st.min()), int(dt.min()))
        tb = max(int(st.max()), int(dt.max()), 1).bit_length()
    else:
        lo, tb = 0, max(num_tiles - 1, 1).bit_length()
    lo = min(lo, int(se.min()))
    ab = max(int(se.max()), 1).bit_length()
    ib = (n - 1).bit_length()
    if lo < 0 or 2 * tb + ab + ib > 62:
        return None
    key = np.left_shift(dt, tb + ab, dtype=np.int64)
    key |= np.left_shift(st, ab, dtype=np.int64)
    key |= se
    if np.all(key[1:] >= key[:-1]):
        return None, None
    key <<= ib
    key |= np.arange(n, dtype=np.int64)
    key.sort(kind="stable")  # (distinct values: the stable order; numpy's stable sort merges the ascending runs)
    order = key & ((1 << ib) - 1)
    key >>= ib
    amask, tmask = (1 << ab) - 1, (1 << tb) - 1
    return order, ((key >> ab) & tmask, key >> (tb + ab), key & amask)


def _pattern_units(st, dt, se, de, ln, send_too: bool = False):
    """code_patterns on pieces already in _pattern_order, ``de`` their destination positions (``de is se``: only
    the source stride counts, the send side's patterns).  ``send_too``: also the send side's patterns of the same
    pieces, from the same pairs and source strides: (receive units, send units)."""
    n = len(st)
    if n == 0:
        z = np.zeros(0, np.int64)
        return ((z, z, z), (z, z, z)) if send_too else (z, z, z)
    same = st[1:] == st[:-1]  # pair j-1 -> j: same tiles and length
    same &= dt[1:] == dt[:-1]
    same &= ln[1:] == ln[:-1]
    new, new_s = _starts_of(same, se, de, send_too)
    units = _units(st, dt, new)
    if send_too:
        return units, (units if new_s is None else _units(st, dt, new_s))
    return units


def _units(st, dt, new: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(src tile, dst tile, pieces) of the patterns starting where ``new`` is set."""
    starts = np.nonzero(new)[0]
    counts = np.diff(np.append(starts, len(new)))
    return st[starts], dt[starts], counts


def exchange_code_counts(plan: CopyPlan, mask: np.ndarray, send: np.ndarray | None, src_addr: np.ndarray,
                         dst_addr: np.ndarray, num_tiles: int, one_length: bool | None = None
                         ) -> tuple[np.ndarray, np.ndarray] | None:
    """Per tile, the exchange-code patterns of the pieces ``mask`` selects and how many of them are loops (more
    than one piece): each receive-side pattern counted on its destination tile, each send-side pattern (of the
    pieces in ``send``, a subset of ``mask``: one per distinct source piece) on its source tile.  The same counts
    as :func:`_pattern_order` then :func:`_pattern_units` on both sides (copies._exchange_code's fallback), in
    fewer passes: the (destination tile, source tile, source position) key of the order is packed once and read
    back where needed; tile pairs are compared as one packed field, and the tiles are unpacked only at the
    patterns' first pieces.  ``send`` None: the receive side's only (:func:`code_patterns`' patterns, counted per
    tile).  ``one_length``: whether every piece of the plan has one length, where the caller knows.  None when
    the packed key does not fit 62 bits (then the two-step path)."""
    T = num_tiles
    n = len(mask)
    every = bool(mask.all())
    tb = max(T - 1, 1).bit_length()
    idx = None if every else np.nonzero(mask)[0]
    m = n if every else len(idx)
    # most pieces selected: the key of every piece, then the selected ones' (one gather, not one per field)
    whole = every or 4 * m >= 3 * n
    st, dt, se_all = (plan.src_tile, plan.dst_tile, src_addr) if whole else \
        (plan.src_tile[idx], plan.dst_tile[idx], src_addr[idx])
    if m < 2:
        return None if m else (np.zeros(T, np.int64), np.zeros(T, np.int64))
    # the positions' bits in one pass: their or is negative where one is, and has the largest one's highest bit
    bits = int(np.bitwise_or.reduce(se_all))
    if bits < 0:
        return None
    ab = max(bits, 1).bit_length()
    ib = (m - 1).bit_length()
    if 2 * tb + ab + ib > 62:
        return None
    key = np.left_shift(dt, tb, dtype=np.int64)  # (dt << tb | st) << ab | se, in place: no temporary
    key |= st
    key <<= ab
    key |= se_all
    if whole and not every:
        key = key[idx]
    order = None
    if not np.all(key[1:] >= key[:-1]):
        key <<= ib
        key |= np.arange(m, dtype=np.int64)
        key.sort(kind="stable")  # (distinct values: the stable order; the sort merges the ascending runs)
        order = key & ((1 << ib) - 1)
        key >>= ib
    ii = (order if idx is None else idx[order]) if order is not None else idx
    L = plan.length
    # one length for every piece (a transpose's elements, equal rows): no gather, no comparison (None)
    if one_length is None:
        one_length = int(L.min()) == int(L.max())
    ln = None if one_length else (L if ii is None else L[ii])
    # the packed key stands for the source positions in the stride rule (_starts_of): a stride is compared only
    # between pieces of one tile pair, where the key's differences are the positions' (pair_shift: the pair's
    # place in it); the destination positions where they are not the source's
    de = key if dst_addr is src_addr else dst_addr if ii is None else dst_addr[ii]
    if send is None:  # the receive side only
        new = _pattern_starts(key, ln, key, de, False, ab)[0]
        return _per_tile_patterns(key, new, tb, 0, T, dst=True, pair_shift=ab)
    both = send is mask
    pieces = None if both else (send if ii is None else send[ii])
    both = both or bool(pieces.all())
    new, new_s = _pattern_starts(key, ln, key, de, both, ab)
    tmask = (1 << tb) - 1
    n_r, l_r = _per_tile_patterns(key, new, tb, tmask, T, dst=True, pair_shift=ab)
    if not both:  # the send side: the distinct source pieces only, source strides only
        key, ln = key[pieces], None if ln is None else ln[pieces]
        new_s = _pattern_starts(key, ln, key, key, False, ab)[0] if len(key) else np.zeros(0, bool)
    n_s, l_s = _per_tile_patterns(key, new_s, tb, tmask, T, dst=False, pair_shift=ab)
    return n_r + n_s, l_r + l_s


def _pattern_starts(pair, ln, se, de, send_too: bool, pair_shift: int = 0):
    """_pattern_units' pattern starts of pieces in pattern order, their tile pairs packed in ``pair`` (above its
    low ``pair_shift`` bits): (receive side starts (strides of ``se`` and ``de``), and with ``send_too`` the send
    side's (strides of ``se``), else None).  ``ln`` None: every piece has one length."""
    if pair_shift:
        same = pair[1:] ^ pair[:-1]
        same = same < (1 << pair_shift)  # (equal above the low bits)
    else:
        same = pair[1:] == pair[:-1]
    if ln is not None:
        same &= ln[1:] == ln[:-1]
    return _starts_of(same, se, de, send_too)


def _starts_of(same, se, de, send_too: bool):
    """Where patterns start among pieces in pattern order, ``same[j]``: pieces j and j + 1 have the same tiles and
    length.  Piece j also starts a new pattern when its stride differs from the stride that led to j - 1
    (conservative: never merges pieces with different strides), on the source side and, unless ``de is se``,
    the destination side.  (receive side starts, send side starts (source strides only) or None)."""
    m = len(same) + 1
    new = np.ones(m, bool)
    np.logical_not(same, out=new[1:])
    new_s = new.copy() if send_too else None
    if m > 2:
        ds = np.diff(se)
        step = ds[1:] != ds[:-1]
        if send_too:
            new_s[2:] |= same[:-1] & step
        if de is not se:
            dd = np.diff(de)
            step |= dd[1:] != dd[:-1]
        step &= same[:-1]
        new[2:] |= step
    return new, new_s


def _per_tile_patterns(pair, new, tb: int, tmask: int, T: int, dst: bool, pair_shift: int = 0):
    """(patterns, loops) per tile of the patterns starting where ``new`` is set, counted on each one's destination
    tile (``dst``) or source tile (``pair``: the pieces' tile pairs, above its low ``pair_shift`` bits); a loop is
    a pattern of more than one piece."""
    starts = np.nonzero(new)[0]
    if len(starts) == 0:
        return np.zeros(T, np.int64), np.zeros(T, np.int64)
    tile = pair[starts]
    if pair_shift:
        tile >>= pair_shift
    if dst:
        tile >>= tb
    else:
        tile &= tmask
    loop = np.empty(len(starts), np.int64)
    loop[:-1] = starts[1:] - starts[:-1] > 1
    loop[-1] = len(new) - starts[-1] > 1
    tile <<= 1
    tile |= loop
    b = np.bincount(tile, minlength=2 * T).reshape(T, 2)
    return b[:, 0] + b[:, 1], b[:, 1]


def charge_exchange_code(c: Compiled, info: ProgInfo, cat: str, n_pat: np.ndarray, n_loop: np.ndarray) -> None:
    """Exchange code per tile: EXCHANGE_CODE_PER_PIECE per pattern, EXCHANGE_CODE_PER_LOOP more per loop (several
    pieces), and EXCHANGE_CODE_BASE on every tile with a pattern (``info.code_bytes`` grows by their sum)."""
    per_tile = n_pat * cm.EXCHANGE_CODE_PER_PIECE + n_loop * cm.EXCHANGE_CODE_PER_LOOP
    ut = np.nonzero(n_pat)[0]
    c.add_mem(cat, ut, per_tile[ut])
    c.add_mem(cat, ut, cm.EXCHANGE_CODE_BASE)
    info.code_bytes += int(per_tile.sum()) + len(ut) * cm.EXCHANGE_CODE_BASE
