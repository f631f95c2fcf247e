"""Cycle formulas of the BSP cost model (vectorised; nothing loops over cycles or vertices).

Every device number comes from the target's spec (``target.em`` = the TOML ``[emulator]``
section, each value with its source there).  The few constants defined here are properties of
the *software* (Poplar code and control-program sizes, stack size) that have no public figure;
they are modelling assumptions, listed in docs/emulator-fidelity.md.

Compute (Poplar IPU model / Graphcore IPU Programmer's Guide, "Tile architecture"):
  A tile runs ``threads_per_tile`` (6) worker contexts on a barrel scheduler: each context owns
  one issue slot in every 6 tile cycles, whether the other contexts are busy or not.  A vertex of
  ``c`` worker (thread) cycles therefore takes ``6 c`` tile cycles of wall time, and six workers
  together retire one instruction per tile cycle.  The supervisor hands the compute set's vertices
  out to the workers in order (vertex i of the tile -> worker i mod 6, which is what the
  supervisor's "next free worker" loop does for equal-cost vertices), so

      tile_cycles = max( 6 * max_w sum_{v on worker w} c_v ,  n_v * vertex_launch_cycles )
                    + vertex_launch_cycles                     (supervisor entry/exit)

  ``vertex_launch_cycles`` (spec) bounds how fast the supervisor can start vertices.
Sync: internal sync of tile t costs min_ipu_sync_delay + (max - min) * t / (tiles_per_ipu - 1)
  (the Poplar IPU model's per-tile relative sync delay, spread linearly between the spec's min and
  max); the step lasts until the slowest tile is through.  Global (inter-IPU / host) sync costs
  ``global_sync_cycles``.
Exchange: tile t is busy ceil(max(bytes_out_t, bytes_in_t) / exchange_bytes_per_cycle) cycles
  (send and receive paths are separate; no per-piece term, as Poplar's planners' exchange
  estimators); bytes staying on a tile are copied by the tile at ``memcpy_bytes_per_cycle``
  (``exchange_cycles``, shared with the op library's planners).  Bytes crossing IPUs additionally
  queue on the IPU-Links (``ipu_link_cycles``): a multicast piece counts once per destination
  IPU; per IPU all links together (``ipu_link_bytes_per_cycle``), per IPU pair the links joining
  that pair (``ipu_link_pair_bytes_per_cycle``); plus ``ipu_link_latency_cycles``.
StreamCopy: tiles receive/send at the exchange rate; the IPU's share of streaming memory
  serves ``ddr_bytes_per_cycle``; plus ``stream_copy_latency_cycles``.
"""

from __future__ import annotations

import math

import numpy as np

# --- software modelling assumptions (no public figure; see docs/emulator-fidelity.md) -------
STACK_BYTES_PER_WORKER = 256       # Poplar worker stack, per worker context
STACK_BYTES_SUPERVISOR = 512       # supervisor stack
CONTROL_CODE_EXECUTE = 16          # bytes of control code per Execute on a tile with vertices
CONTROL_CODE_SYNC = 8              # bytes per sync instruction sequence, every tile
CONTROL_CODE_REPEAT = 24           # loop set-up and branch, every tile
CONTROL_CODE_EXCHANGE = 8          # control to enter an exchange, on participating tiles
CONTROL_ID_BYTES = 4               # per program per tile (program/compute-set id)
EXCHANGE_CODE_BASE = 16            # exchange program prologue on a participating tile
# one exchange instruction per contiguous piece (or per pattern) on each side: 4 bytes, the figure
# poplibs' own planner uses for exchange code (popops/DynamicSlice.cpp, plan estimates:
# exchangeCodeBytes = 4 x exchange instructions per tile)
EXCHANGE_CODE_PER_PIECE = 4
EXCHANGE_CODE_PER_LOOP = 8         # loop set-up of a pattern of equal pieces with constant strides
COPY_DESCRIPTOR_PER_PIECE = 8      # on-tile copy descriptor (src, dst, length)
HOST_PACKET_BYTES = 1024           # host exchange packet payload; one header per packet
HOST_PACKET_HEADER_BYTES = 8
GLOBAL_PACKET_HEADER_BYTES = 8     # per inter-IPU piece
FIELD_POINTER_BYTES = 4            # vertex state: one pointer per field
FIELD_SIZE_BYTES = 2               # vertex field data: size of a variable-length region
LIST_DESCRIPTOR_BYTES = 4          # vector-list descriptor per list field of a vertex
LIST_ENTRY_BYTES = 6               # per region of a list field: pointer + size


def compute_tile_cycles(tiles: np.ndarray, vcycles: np.ndarray, num_tiles: int, threads: int,
                        launch_cycles: int, supervisor: np.ndarray | None = None,
                        regions: np.ndarray | None = None, known: np.ndarray | None = None
                        ) -> tuple[np.ndarray, np.ndarray]:
    """Busy tile cycles of one compute set on every tile, and vertices per tile (see module doc).

    ``supervisor`` marks supervisor vertices (e.g. the AMP matmul): each occupies all workers of
    its tile, so they run one after another; their ``vcycles`` are in worker-slot units (poplibs
    tile estimate / threads) and add ``threads x vcycles`` to the tile.  ``known``: the vertices per tile
    (``np.bincount(tiles, minlength=num_tiles)``) where the caller has counted them already."""
    if len(tiles) == 0:
        z = np.zeros(num_tiles, np.int64)
        return z, z
    if known is not None and len(known) != num_tiles:
        known = None
    # vertices of multi-region codelets beyond ``threads`` on a tile are regions of 2D worker
    # vertices: at most ``threads`` of them are launched
    extra_regions = np.zeros(num_tiles, np.int64)
    count = None
    if regions is not None and np.any(regions):
        every = bool(regions.all())  # (most such compute sets: no gather, and the count per tile is the same)
        nreg = known if every and known is not None else \
            np.bincount(tiles if every else tiles[regions], minlength=num_tiles)
        extra_regions = np.maximum(nreg - threads, 0)
        count = nreg if every else None
    sup_busy = np.zeros(num_tiles, np.int64)
    count_sup = np.zeros(num_tiles, np.int64)
    if supervisor is not None and np.any(supervisor):
        every_sup = bool(supervisor.all())  # (a compute set of supervisor vertices alone: no masked copies)
        st, sc = (tiles, vcycles) if every_sup else (tiles[supervisor], vcycles[supervisor])
        sup_busy = threads * np.bincount(st, weights=sc, minlength=num_tiles)
        count_sup = np.bincount(st, minlength=num_tiles)
        keep = ~supervisor
        tiles, vcycles = (tiles[:0], vcycles[:0]) if every_sup else (tiles[keep], vcycles[keep])
        count = known = None
    if count is None:
        count = known if known is not None else np.bincount(tiles, minlength=num_tiles)
    if not len(tiles):
        load = np.zeros(num_tiles)  # (what _load_by_place counts from no vertices)
    elif _rows_on_one_tile(tiles, threads):
        load = _load_by_rows(tiles, vcycles, num_tiles, threads, one_row=int(count.max()) <= threads)
    else:
        load = _load_by_place(tiles, vcycles, count, num_tiles, threads)
    busy = np.maximum(threads * load, (count - extra_regions) * launch_cycles) + sup_busy
    count = count + count_sup
    busy = busy + np.where(count > 0, launch_cycles, 0)
    return busy.astype(np.int64), count


def tile_counts(tiles: np.ndarray, num_tiles: int, threads: int) -> np.ndarray:
    """``np.bincount(tiles, minlength=num_tiles)``: where the vertices come in rows of ``threads`` of one tile
    (:func:`_rows_on_one_tile`: a large elementwise op's worker pieces) the rows' first vertices counted and
    multiplied by ``threads`` (a sixth of the elements, from a contiguous copy: a count casts its input, and
    casting the whole int32 array cost more than the check)."""
    if len(tiles) >= 1024 and _rows_on_one_tile(tiles, threads):
        return threads * np.bincount(tiles[::threads].astype(np.intp), minlength=num_tiles)
    return np.bincount(tiles, minlength=num_tiles)


def _rows_on_one_tile(tiles: np.ndarray, threads: int) -> bool:
    """Whether the vertices, cut in rows of ``threads`` in their given order, have one tile per row: then every run
    of one tile's vertices is a whole number of rows (an elementwise op's worker pieces: ``threads`` per mapping
    interval), so each tile's vertices before a vertex are a multiple of ``threads`` plus its place in its row, and
    its worker is its column."""
    if len(tiles) % threads:
        return False
    rows = tiles.reshape(-1, threads)
    # column by column against the first (np.array_equal: no table of comparisons, and it stops at the first column
    # that differs), ~5x the speed of comparing the whole table at once
    first = rows[:, 0]
    return all(np.array_equal(first, rows[:, k]) for k in range(1, threads))


def _load_by_rows(tiles: np.ndarray, vcycles: np.ndarray, num_tiles: int, threads: int,
                  one_row: bool = False) -> np.ndarray:
    """Each tile's most loaded worker (:func:`_load_by_place`'s) where the vertices come in rows of one tile
    (:func:`_rows_on_one_tile`): worker k of a tile runs column k of its rows, so its load is one count per column
    over the rows' tiles (the same vertices' cycles added in the same order as one count over every vertex).
    ``one_row``: no tile has more than one row (at most ``threads`` vertices a tile): each worker runs one vertex,
    so a tile's load is its row's largest cycles (as float64, as the counts' one-term sums are)."""
    row_tile = tiles[::threads].astype(np.intp)  # (contiguous, once: each count below would cast the strided view)
    cyc = vcycles.reshape(-1, threads)
    if one_row:
        load = np.zeros(num_tiles)
        load[row_tile] = cyc.max(axis=1)
        return load
    load = np.bincount(row_tile, weights=cyc[:, 0], minlength=num_tiles)
    for k in range(1, threads):
        np.maximum(load, np.bincount(row_tile, weights=cyc[:, k], minlength=num_tiles), out=load)
    return load


def _load_by_place(tiles: np.ndarray, vcycles: np.ndarray, count: np.ndarray, num_tiles: int,
                   threads: int) -> np.ndarray:
    """Each tile's most loaded worker: a vertex runs on worker (its place among its tile's vertices, in their
    given order) modulo ``threads``, and a worker's load is the cycles of its vertices."""
    first = np.cumsum(count) - count          # index of each tile's first vertex in tile order
    # each vertex's worker: its place among its tile's vertices, in their given order, modulo threads
    if np.any(tiles[1:] < tiles[:-1]):
        # the same workers as the place found in tile order, and each (tile, worker) sum below adds the same cycles
        # in the same order
        worker = _place_on_tile(tiles, first)
    else:
        worker = np.arange(len(tiles)) - first[tiles]
    worker %= threads
    worker += np.multiply(tiles, threads, dtype=np.int64)
    load = np.bincount(worker, weights=vcycles, minlength=num_tiles * threads)
    return load.reshape(num_tiles, threads).max(axis=1)


def _place_on_tile(tiles: np.ndarray, first: np.ndarray) -> np.ndarray:
    """Each vertex's place among its tile's vertices in their given order (the vertices of its tile before it),
    for tiles not in ascending order; ``first``: each tile's first vertex in tile order (the vertices of lower
    tiles).  The place is the rank of a stable sort by tile less ``first``; where the vertices come in runs of
    one tile (an elementwise op's worker pieces: several per mapping interval), it is the vertices of its tile in
    earlier runs plus its place in its run, and only the runs are sorted."""
    n = len(tiles)
    cut = np.flatnonzero(tiles[1:] != tiles[:-1])
    if 4 * len(cut) > n:
        # a stable sort of the vertices by tile (16-bit tiles take numpy's radix sort, ~4x the int64 argsort), its
        # rank scattered back to the given order rather than the vertices gathered into tile order
        order = np.argsort(tiles.astype(np.uint16) if int(tiles.max()) < 2**16 else tiles, kind="stable")
        place = np.empty(n, np.int64)
        place[order] = np.arange(n)
        place -= first[tiles]
        return place
    rs = np.empty(len(cut) + 1, np.int64)  # each run's first vertex
    rs[0] = 0
    np.add(cut, 1, out=rs[1:])
    rl = np.diff(rs, append=n)  # run lengths
    rt = tiles[rs]
    ro = np.argsort(rt.astype(np.uint16) if int(rt.max()) < 2**16 else rt, kind="stable")
    # the runs in tile order: the vertices before each run there are those of lower tiles (``first``) and those of
    # its tile's earlier runs
    before = np.cumsum(rl[ro]) - rl[ro]
    prior = np.empty(len(rs), np.int64)
    prior[ro] = before - first[rt[ro]]
    L = n // len(rs)
    if L * len(rs) == n and bool(np.all(rl == L)):  # runs of one length: (runs, L), no per-vertex run index
        return (prior[:, None] + np.arange(L, dtype=np.int64)).reshape(n)
    place = np.arange(n, dtype=np.int64)
    place -= np.repeat(rs - prior, rl)
    return place


def internal_sync_cycles(target) -> np.ndarray:
    """Per-tile cycles of an internal (one IPU) sync."""
    lo = float(target.em["min_ipu_sync_delay_cycles"])
    hi = float(target.em["max_ipu_sync_delay_cycles"])
    t = target.tile_in_ipu(np.arange(target.num_tiles))
    span = max(target.tiles_per_ipu - 1, 1)
    return np.rint(lo + (hi - lo) * t / span).astype(np.int64)


def global_sync_cycles(target) -> np.ndarray:
    return np.full(target.num_tiles, int(target.em["global_sync_cycles"]), np.int64)


def exchange_cycles(bytes_out, bytes_in, bytes_local, exchange_bytes_per_cycle: float,
                    memcpy_bytes_per_cycle: float):
    """THE exchange cost of a tile, used by the engine (exchange_tile_cycles) and by the planners
    (ops/planners.py), so that plans are chosen for the cost that is charged.

    Following Poplar's planners' exchange estimators (poplin/ExchangeEstimator.hpp getCycles,
    popops/ExchangeEstimator.cpp): cycles = ceil(bytes / exchangeBytesPerCycle), with no per-message
    term; send and receive paths are separate, so a tile is busy for the larger of the two.  Bytes
    that stay on the tile are copied by the tile at memcpyBytesPerCycle."""
    return (np.ceil(np.maximum(bytes_out, bytes_in) / float(exchange_bytes_per_cycle))
            + np.ceil(np.asarray(bytes_local) / float(memcpy_bytes_per_cycle))).astype(np.int64)


def exchange_cycles_scalar(bytes_out: int, bytes_in: int, bytes_local: int, exchange_bytes_per_cycle: float,
                           memcpy_bytes_per_cycle: float) -> int:
    """:func:`exchange_cycles` of one tile with plain Python numbers (the planners cost hundreds of
    thousands of candidate splits; tests/emulator/estimators/test_codelet_costs.py checks both agree)."""
    return int(math.ceil(max(bytes_out, bytes_in) / float(exchange_bytes_per_cycle))
               + math.ceil(bytes_local / float(memcpy_bytes_per_cycle)))


def shared_bus_receive_bytes(target, plan, cross: np.ndarray, nbytes: np.ndarray,
                             multicast: bool | np.ndarray = True, groups: tuple | None = None) -> np.ndarray:
    """Per-tile receive bytes that set the exchange time: Poplar's planners credit two consecutive
    tiles (2k, 2k + 1: a shared exchange bus, spec ``tiles_per_shared_exchange_bus``) that receive
    the same data with twice the bandwidth (poplibs popops/ExchangeEstimator.cpp getCycles,
    poplin/ExchangeEstimator.hpp), so such a piece counts half on each of the two tiles.
    ``nbytes``: each piece's length times the element size.  ``multicast``: per crossing piece (in
    ``cross`` order), whether its source piece (element, length) is received by more than one tile, as
    the caller found it (True: any may be; False: none is): only those can have a bus partner, so the
    search for partners is limited to them (a piece sent to one tile counts whole).  ``groups``: the crossing
    pieces grouped by source piece as the caller sorted them (:func:`_bus_bytes_of_groups`), so that the
    partners are found without sorting the pieces by source again."""
    T = target.num_tiles
    share = int(target.em.get("tiles_per_shared_exchange_bus", 1))
    sel = np.nonzero(cross)[0] if share == 2 and T % 2 == 0 and np.any(multicast) else ()
    if len(sel) > 1 and groups is not None:
        return _bus_bytes_of_groups(T, plan.dst_tile, nbytes, *groups)
    if len(sel) > 1:
        rest = None
        if multicast is not True:
            m = np.asarray(multicast, bool)
            if not m.all():
                one = sel[~m]
                rest = (plan.dst_tile[one], nbytes[one].astype(np.float64))  # pieces sent to one tile: whole
                sel = sel[m]
        if len(sel) == len(cross):  # every piece: the plan's own arrays
            dt, se, ln = plan.dst_tile, plan.src_elem, plan.length
        else:
            dt, se, ln = plan.dst_tile[sel], plan.src_elem[sel], plan.length[sel]
        # one sorted int64 key per received piece: (bus, source piece, length, which tile of the bus), bus =
        # destination tile // 2.  key ^ 1 is the same piece received by the bus partner (dst ^ 1): for an even
        # key the next distinct key, for an odd one the previous, so one pass over the sorted keys finds the
        # partners (a search per piece cost several times more).  The destination and the bytes come back out
        # of the key, so no per-piece gather is needed; the sums are of multiples of 0.5, exact in float64 in
        # any order (so also in two parts).  With the bus outermost, a broadcast's pieces (its source in order,
        # once per destination tile, the tiles ascending) are ascending runs that overlap only within a bus:
        # numpy's stable sort (a run-merging sort) then merges each bus's two runs and gallops past the rest,
        # where with the source outermost every run overlaps every other (log2(runs) merge passes)
        dt, se, ln = (a.astype(np.int64, copy=False) for a in (dt, se, ln))
        lb = int(ln.max()).bit_length()
        eb = max(int(se.max()), 0).bit_length()
        if int(se.min()) >= 0 and 1 + lb + eb + (T // 2 - 1).bit_length() <= 63:
            v = dt >> 1
            v <<= eb
            v |= se
            v <<= lb
            v |= ln
            v <<= 1
            v |= dt & 1
            v.sort(kind="stable")
        else:  # (the same order of the same pieces, with multiplied fields)
            L1 = int(ln.max()) + 1
            SE = int(se.max()) + 1
            v = np.sort((((dt >> 1) * SE + se) * L1 + ln) * 2 + (dt & 1), kind="stable")
            lb = eb = -1
        isz = int(nbytes[0]) // max(int(plan.length[0]), 1) if len(nbytes) else 1
        hit = _partner_hits(v)
        if lb >= 0:
            w = (((v >> 1) & ((1 << lb) - 1)) * isz).astype(np.float64)
            dst = ((v >> (1 + lb + eb)) << 1) | (v & 1)
        else:
            w = ((v >> 1) % L1 * isz).astype(np.float64)
            dst = ((v >> 1) // (L1 * SE)) * 2 + (v & 1)
        w[hit] /= 2
        if rest is not None:
            return np.ceil(np.bincount(dst, weights=w, minlength=T)
                           + np.bincount(rest[0], weights=rest[1], minlength=T)).astype(np.int64)
        return np.ceil(np.bincount(dst, weights=w, minlength=T)).astype(np.int64)
    return np.ceil(np.bincount(plan.dst_tile[cross], weights=nbytes[cross].astype(np.float64),
                               minlength=T)).astype(np.int64)


def broadcast_bus_receive_bytes(target, block_elems: np.ndarray, local: np.ndarray, partner_local: np.ndarray,
                                partner: np.ndarray, dst_tile: np.ndarray, isz: int) -> np.ndarray:
    """shared_bus_receive_bytes of a broadcast copy in compact form (compile/copy_broadcasts.py: one vertex per
    destination tile, each receiving one block): per vertex, its block's ``block_elems`` less the ``local`` ones
    (source tile = its tile) are received; where the vertex's bus partner (tile ^ 1, ``partner``) takes the same
    block, the pieces it also receives (all but those whose source tile is the partner's, ``partner_local``)
    count half.  The same multiples of 0.5 summed per tile as the expanded pieces', so the same integers."""
    T = target.num_tiles
    got = (block_elems - local) * isz
    w = got.astype(np.float64)
    share = int(target.em.get("tiles_per_shared_exchange_bus", 1))
    if share == 2 and T % 2 == 0:
        w -= np.where(partner, (got - partner_local * isz) / 2, 0.0)
    return np.ceil(np.bincount(dst_tile, weights=w, minlength=T)).astype(np.int64)


def _partner_hits(v: np.ndarray) -> np.ndarray:
    """Per key of the sorted keys ``v``, whose lowest bit is the destination tile's within its bus (key ^ 1: the
    same source piece received by the bus partner), whether its partner's key is among them: for an even key the
    next distinct key, for an odd one the previous, so one pass over the sorted keys finds the partners."""
    first = np.empty(len(v), bool)
    first[:1] = True
    np.not_equal(v[1:], v[:-1], out=first[1:])
    u = v if first.all() else v[first]  # distinct keys
    has_next = np.zeros(len(u), bool)
    has_next[:-1] = u[1:] == u[:-1] + 1
    has_prev = np.zeros(len(u), bool)
    has_prev[1:] = has_next[:-1]
    hit = np.where(u & 1, has_prev, has_next)
    return hit if u is v else hit[np.cumsum(first) - 1]


def _bus_bytes_of_groups(T: int, dst_tile: np.ndarray, nbytes: np.ndarray, pieces: np.ndarray,
                         first: np.ndarray) -> np.ndarray:
    """shared_bus_receive_bytes of the crossing ``pieces`` (plan indices, every crossing piece once) in groups of
    one source piece each (element, length), in ascending source order, a group starting where ``first`` is set.
    The key (group, destination tile) then needs no source fields (a group's pieces share one length, so one
    byte count): it ascends already where each group lists its destinations in tile order (a broadcast), and is
    otherwise a few short unsorted runs; its partner key is key ^ 1, as in the sorted search.  The same sums
    (multiples of 0.5, exact in float64 in any order)."""
    grp = np.cumsum(first)
    grp -= 1
    gbytes = nbytes[pieces[first]].astype(np.float64)
    tb = max(T - 1, 1).bit_length()
    v = grp << tb
    v |= dst_tile[pieces]
    if not np.all(v[1:] >= v[:-1]):
        v.sort(kind="stable")
    hit = _partner_hits(v)
    w = gbytes[v >> tb]
    w[hit] /= 2
    return np.ceil(np.bincount(v & ((1 << tb) - 1), weights=w, minlength=T)).astype(np.int64)


def exchange_tile_cycles(target, bytes_out: np.ndarray, bytes_in: np.ndarray, bytes_local: np.ndarray) -> np.ndarray:
    return exchange_cycles(bytes_out, bytes_in, bytes_local, float(target.em["exchange_bytes_per_cycle"]),
                           float(target.em["memcpy_bytes_per_cycle"]))


def ipu_link_pair_bytes_per_cycle(target, src_ipu, dst_ipu) -> np.ndarray:
    """IPU-Link bandwidth between two IPUs (spec [emulator] ipu_link_pair_bytes_per_cycle within a
    box of ``ipus_per_box`` IPUs, ..._across_boxes between boxes); the aggregate rate of all an
    IPU's links when the spec gives no per-pair figure."""
    em = target.em
    agg = float(em["ipu_link_bytes_per_cycle"])
    src_ipu, dst_ipu = np.asarray(src_ipu), np.asarray(dst_ipu)
    if "ipu_link_pair_bytes_per_cycle" not in em:
        return np.full(src_ipu.shape, agg)
    per_box = int(em.get("ipus_per_box", 4))
    inside = float(em["ipu_link_pair_bytes_per_cycle"])
    across = float(em.get("ipu_link_pair_bytes_per_cycle_across_boxes", inside))
    return np.where(src_ipu // per_box == dst_ipu // per_box, inside, across)


def ipu_link_cycles(target, bytes_leaving: np.ndarray, bytes_entering: np.ndarray, pair_src=None, pair_dst=None,
                    pair_bytes=None) -> int:
    """Cycles the IPU-Links need for a global exchange, 0 when nothing crosses: the slowest of
    (a) every IPU's bytes leaving / entering over all its links (aggregate ipu_link_bytes_per_cycle)
    and (b) every (source IPU, destination IPU) pair's bytes over the links joining that pair
    (ipu_link_pair_bytes_per_cycle); plus ipu_link_latency_cycles.  Callers count a multicast
    piece once per destination IPU (the links carry it once; the receiving IPU's exchange fans it
    out to its tiles)."""
    worst = float(max(np.max(bytes_leaving, initial=0), np.max(bytes_entering, initial=0)))
    if worst <= 0:
        return 0
    cyc = worst / float(target.em["ipu_link_bytes_per_cycle"])
    if pair_bytes is not None and len(pair_bytes):
        nI = int(target.num_ipus)
        key = np.asarray(pair_src, np.int64) * nI + np.asarray(pair_dst, np.int64)
        per_pair = np.bincount(key, weights=pair_bytes, minlength=nI * nI)
        idx = np.nonzero(per_pair)[0]
        bw = ipu_link_pair_bytes_per_cycle(target, idx // nI, idx % nI)
        cyc = max(cyc, float(np.max(per_pair[idx] / bw)))
    return int(np.ceil(cyc) + int(target.em["ipu_link_latency_cycles"]))


def stream_cycles(target, tile_bytes: np.ndarray) -> tuple[np.ndarray, int]:
    """(per-tile busy cycles, step duration) of a StreamCopy moving ``tile_bytes`` per tile."""
    xb = float(target.em["exchange_bytes_per_cycle"])
    tile = np.ceil(tile_bytes / xb).astype(np.int64)
    per_ipu = tile_bytes.reshape(target.num_ipus, target.tiles_per_ipu).sum(axis=1)
    ddr = np.ceil(per_ipu.max(initial=0) / float(target.em["ddr_bytes_per_cycle"]))
    dur = int(max(tile.max(initial=0), ddr)) + int(target.em["stream_copy_latency_cycles"])
    return tile, dur


def vertex_state_bytes(group) -> int:
    """vertexInstanceState bytes of one vertex of ``group``: codelet state + a pointer per field +
    4 bytes per per-vertex parameter."""
    nparams = sum(1 for p in group.params.values() if np.ndim(p) > 0)
    return int(group.codelet.state_bytes) + FIELD_POINTER_BYTES * len(group.fields) + 4 * nparams


def vertex_instances(group, num_tiles: int, threads: int, counts: np.ndarray | None = None
                     ) -> tuple[np.ndarray, np.ndarray]:
    """The vertices of ``group`` as Poplar instantiates them: (tiles holding any, instances on each).
    A graph vertex is one instance, except for two kinds of codelet whose graph vertices are regions:
    ``multi_region`` (beyond ``threads`` pieces on a tile the pieces are regions of 2D worker vertices,
    popops BinaryOp2D etc.: at most ``threads`` instances a tile) and ``one_vertex_per_tile`` (every
    region on a tile belongs to ONE vertex, e.g. poplin's ReduceAdd, lib/poplin/ConvReduce.cpp reduce():
    one addVertex per tile over the concatenation of its output regions).  The one definition of
    vertex state, field data and the vertices table's state bytes.  ``counts``: the group's vertices per tile
    where the caller has counted them already."""
    if counts is None:
        t = np.asarray(group.tiles)
        # (int32 tiles counted as they are, or from their rows of one tile: tile_counts)
        cnt = tile_counts(t if t.dtype.kind == "i" else t.astype(np.int64), num_tiles, threads)
    else:
        cnt = counts
    ut = np.nonzero(cnt)[0]
    if getattr(group.codelet, "one_vertex_per_tile", False):
        return ut, np.ones(len(ut), np.int64)
    if getattr(group.codelet, "multi_region", False):
        return ut, np.minimum(cnt[ut], threads).astype(np.int64)
    return ut, cnt[ut].astype(np.int64)


def stack_bytes(threads: int) -> int:
    return threads * STACK_BYTES_PER_WORKER + STACK_BYTES_SUPERVISOR
