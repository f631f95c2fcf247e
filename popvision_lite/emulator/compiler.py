"""Compilation: validate the graph and program, place tensors, account memory per tile and
category, compute liveness, and build the BSP step templates (cycles never depend on data, so
every step's per-tile cost is known at compile time; Repeat bodies are costed once).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

from popvision_lite.emulator import cost_model as cm
from popvision_lite.emulator import programs as P
from popvision_lite.emulator.graph import Blocks, Graph, Regions, Windows, _ranges_index
from popvision_lite.errors import EmulatorError
from popvision_lite.profile.schema import CATEGORY_CODE, MEMORY_CATEGORIES, STEP_KIND_CODE

K_COMPUTE = STEP_KIND_CODE["compute"]
K_SYNC = STEP_KIND_CODE["sync"]
K_XI = STEP_KIND_CODE["exchange_internal"]
K_XG = STEP_KIND_CODE["exchange_global"]
K_STREAM = STEP_KIND_CODE["stream_copy"]
_OUTLINED_CATS = [CATEGORY_CODE[k] for k in ("internalExchangeCode", "globalExchangeCode", "copyDescriptor",
                                              "globalExchangePacketHeader")]


@dataclass
class StepTemplate:
    """One BSP step as compiled (a Repeat body's steps are shared by all its iterations)."""

    kind: int
    prog_id: int
    op_id: int
    ipu: int
    duration: int
    # per-tile rows, sparse: values at ``tiles`` (None = dense over all tiles), uint32
    tiles: np.ndarray | None
    cycles: np.ndarray
    bytes_in: np.ndarray
    bytes_out: np.ndarray
    busy_max: int = 0
    busy_sum: int = 0
    tiles_active: int = 0
    in_sum: int = 0
    out_sum: int = 0
    flops: int = 0
    bytes_sram: int = 0
    bytes_exchange: int = 0
    bytes_ipu_link: int = 0
    bytes_ddr: int = 0


@dataclass
class ProgInfo:
    prog: P.Program
    prog_id: int
    parent_id: int
    op: str | None
    lstep: int = -1
    templates: list[int] = field(default_factory=list)
    code_bytes: int = 0


@dataclass
class CopyPlan:
    """Pieces of a Copy/StreamCopy: contiguous element runs with one source and one destination tile."""

    src_elem: np.ndarray
    dst_elem: np.ndarray
    length: np.ndarray
    src_tile: np.ndarray
    dst_tile: np.ndarray
    # index of each piece's mapping interval on each side (None: not known, look it up)
    src_k: np.ndarray | None = None
    dst_k: np.ndarray | None = None


def _runs_and_mapping(ep):
    starts, lens = ep.runs()
    keep = lens > 0
    return starts[keep], lens[keep], ep.tensor.mapping


def _sorted_unique(a: np.ndarray) -> np.ndarray:
    """np.unique for int arrays via one sort (numpy's hash-based unique is slow on large int arrays)."""
    if len(a) == 0:
        return a
    if np.all(a[1:] > a[:-1]):
        return a
    a = np.sort(a)
    return a[np.concatenate([[True], a[1:] != a[:-1]])]


def _utiles(tiles: np.ndarray, num_tiles: int) -> np.ndarray:
    """Sorted distinct tiles (bincount: O(n + tiles), faster than np.unique)."""
    if len(tiles) == 0:
        return np.zeros(0, np.int64)
    return np.nonzero(np.bincount(tiles, minlength=num_tiles))[0]


def _whole_vertex(ep) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """For a field endpoint: per vertex (first element, element count, tile, all-runs-on-that-tile,
    mapping interval of the first element)."""
    s, e = ep.run_bounds()
    mp = ep.tensor.mapping
    k1 = np.searchsorted(mp.start, s, side="right") - 1
    kc = np.clip(k1, 0, max(len(mp) - 1, 0))
    tiles = mp.tile[kc]
    ok = np.all((e <= mp.stop[kc]) & (k1 >= 0) & (tiles == tiles[:, :1]), axis=1)
    return s[:, 0], ep.elems(), tiles[:, 0], ok, kc[:, 0]


def copy_pieces(src, dst) -> CopyPlan:
    """Split a copy into pieces at every tile boundary of source and destination (vectorised).

    Field endpoints (blocks/regions, element order = vertex order) whose every vertex lies inside
    one mapping interval on both sides are costed per vertex; the rest per contiguous run."""
    from popvision_lite.emulator.graph import Field

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
    soff = np.cumsum(sl) - sl
    doff = np.cumsum(dl) - dl
    # fast path: pair the runs one to one (a single contiguous side is cut to the other's runs);
    # when every run lies inside one mapping interval on both sides, the runs are the pieces
    qs, ql, qd, qdl = ss, sl, ds, dl
    if len(ds) == 1 and len(ss) > 1:
        qd, qdl = ds[0] + soff, sl
    elif len(ss) == 1 and len(ds) > 1:
        qs, ql = ss[0] + doff, dl
    if len(qs) == len(qd) and np.array_equal(ql, qdl):
        ks = np.searchsorted(sm.start, qs, side="right") - 1
        kd = np.searchsorted(dm.start, qd, side="right") - 1
        if np.all(qs + ql <= sm.stop[ks]) and np.all(qd + ql <= dm.stop[kd]):
            return CopyPlan(qs, qd, ql, sm.tile[ks], dm.tile[kd], ks, kd)
    cuts = [soff, doff]
    for starts, lens, off, mp in ((ss, sl, soff, sm), (ds, dl, doff, dm)):
        b = mp.start
        lo = np.searchsorted(b, starts, side="right")
        hi = np.searchsorted(b, starts + lens, side="left")
        cnt = np.maximum(hi - lo, 0)
        if cnt.sum():
            idx = _ranges_index(lo, cnt)
            run = np.repeat(np.arange(len(starts)), cnt)
            cuts.append(off[run] + b[idx] - starts[run])
    pos = _sorted_unique(np.concatenate(cuts))
    pos = pos[(pos >= 0) & (pos < total)]
    length = np.diff(np.append(pos, total))
    rs = np.searchsorted(soff, pos, side="right") - 1
    rd = np.searchsorted(doff, pos, side="right") - 1
    src_elem = ss[rs] + pos - soff[rs]
    dst_elem = ds[rd] + pos - doff[rd]
    # every copied element is mapped (_check_graph), so each lies in interval k
    ks = np.searchsorted(sm.start, src_elem, side="right") - 1
    kd = np.searchsorted(dm.start, dst_elem, side="right") - 1
    return CopyPlan(src_elem, dst_elem, length, sm.tile[ks], dm.tile[kd], ks, kd)


class Compiled:
    """Everything the engine and the profile builder need; produced by :func:`compile_graph`."""

    def __init__(self, graph: Graph, program: P.Program):
        self.graph = graph
        self.program = program
        self.target = graph.target
        T = self.target.num_tiles
        self.num_tiles = T
        self.progs: list[ProgInfo] = []
        self.leaves: list[int] = []          # prog ids in liveness-step order
        self.templates: list[StepTemplate] = []
        self.copy_plans: dict[int, CopyPlan] = {}
        self.ops: list[str] = []
        self.op_index: dict[str, int] = {}
        self.memory = np.zeros((T, len(MEMORY_CATEGORIES), 2), np.int64)
        self.repeat_ranges: list[tuple[int, int]] = []  # lstep ranges of Repeat bodies
        self.outline = False
        self.outlined_copies = 0  # exchange programs sharing an earlier one's code (outline=True)
        self.outlined_cs = 0      # compute sets sharing an earlier one's vertices (outline=True)
        self._shared_rows: dict[str, dict] = {}
        self.recording: list | None = None  # when a list: add_mem / add_template calls are logged to it

    # -- helpers ---------------------------------------------------------------------------
    def op_id(self, op: str | None) -> int:
        if op is None:
            return -1
        if op not in self.op_index:
            self.op_index[op] = len(self.ops)
            self.ops.append(op)
        return self.op_index[op]

    def add_mem(self, category: str, tiles, nbytes, live: int = 0) -> None:
        c = CATEGORY_CODE[category]
        tiles = np.asarray(tiles, np.int64).ravel()
        nbytes = np.broadcast_to(np.asarray(nbytes, np.int64), tiles.shape).ravel()
        if self.recording is not None:
            rt, rb = tiles, nbytes
            if len(rt) > self.num_tiles:  # per piece: keep per tile (the same sums, O(tiles) memory)
                agg = np.bincount(rt, weights=rb, minlength=self.num_tiles).astype(np.int64)
                rt = np.nonzero(agg)[0]
                rb = agg[rt]
            self.recording.append(("mem", (category, rt, rb), {"live": live}))
        if len(tiles) * 8 < self.num_tiles:  # few tiles: O(len) instead of O(num_tiles)
            np.add.at(self.memory[:, c, live], tiles, nbytes)
        else:
            self.memory[:, c, live] += np.bincount(tiles, weights=nbytes, minlength=self.num_tiles).astype(np.int64)

    def add_template(self, info: ProgInfo, kind: int, cycles, bytes_in=None, bytes_out=None,
                     duration=None, ipu=-1, shared: str | None = None, **kw) -> None:
        """Add a step; per-tile rows are stored sparse (only tiles with work or bytes) as uint32.
        ``shared`` names rows identical for every step of that name (syncs): stored once."""
        if self.recording is not None:
            self.recording.append(("tmpl", (kind, cycles, bytes_in, bytes_out),
                                   dict(duration=duration, ipu=ipu, shared=shared, **kw)))
        if shared is not None and shared in self._shared_rows:
            rows = self._shared_rows[shared]
        else:
            cycles = np.asarray(cycles, np.int64)
            z = None
            bi = z if bytes_in is None else np.asarray(bytes_in, np.int64)
            bo = z if bytes_out is None else np.asarray(bytes_out, np.int64)
            active = cycles > 0
            if bi is not None:
                active |= bi > 0
            if bo is not None:
                active |= bo > 0
            tiles = np.nonzero(active)[0]
            dense = len(tiles) * 2 > self.num_tiles
            sel = slice(None) if dense else tiles

            def u32(a):
                return np.zeros(self.num_tiles if dense else len(tiles), np.uint32) if a is None else \
                    np.minimum(a[sel], np.iinfo(np.uint32).max).astype(np.uint32)

            cy, bin_, bout = u32(cycles), u32(bi), u32(bo)
            rows = dict(tiles=None if dense else tiles, cycles=cy, bytes_in=bin_, bytes_out=bout,
                        busy_max=int(cy.max(initial=0)), busy_sum=int(cy.sum(dtype=np.int64)),
                        tiles_active=int(np.count_nonzero(cy)), in_sum=int(bin_.sum(dtype=np.int64)),
                        out_sum=int(bout.sum(dtype=np.int64)))
            if shared is not None:
                self._shared_rows[shared] = rows
        dur = rows["busy_max"] if duration is None else int(duration)
        self.templates.append(StepTemplate(kind=kind, prog_id=info.prog_id, op_id=self.op_id(info.op), ipu=ipu,
                                           duration=dur, **rows, **kw))
        info.templates.append(len(self.templates) - 1)

    def ipu_of_tiles(self, tiles: np.ndarray) -> int:
        if len(tiles) == 0:
            return -1
        ipus = self.target.ipu_of(tiles)
        lo, hi = int(ipus.min()), int(ipus.max())
        return lo if lo == hi else -1

    def all_ipus(self) -> int:
        return 0 if self.target.num_ipus == 1 else -1


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


# ------------------------------------------------------------------------------------------
def _check_graph(c: Compiled, used_cs: set) -> None:
    g = c.graph
    for t in g.tensors:
        if t.mapping is None:
            raise EmulatorError(
                f"tensor '{t.name}' {t.shape} is not mapped to any tile; fix: g.set_mapping(tensor, "
                f"mapping.linear(tensor.size, tiles=...)) or pass mapping= when adding it"
            )
        t.mapping.check(t.name, t.size, c.num_tiles)
    digests = {}
    done: dict = {}
    for cs in g.compute_sets:
        if cs.id not in used_cs:
            continue
        for grp in cs.groups:
            for fname, f in grp.fields.items():
                mp = f.tensor.mapping
                if f.tensor.id not in digests:
                    digests[f.tensor.id] = hash((mp.tile.tobytes(), mp.start.tobytes()))
                # the same connections (arrays) on an identically mapped tensor were checked already
                key = (digests[f.tensor.id], id(grp.tiles)) + (
                    (id(f.starts), id(f.sizes)) if isinstance(f, Regions) else
                    (id(f.origins), f.block_shape) if isinstance(f, Windows) else (id(f.index), f.block_shape))
                if key in done:
                    continue
                _check_local(grp, fname, f)
                done[key] = (grp.tiles, f)  # keep the arrays alive so ids stay unique


def _check_local(grp, fname: str, f) -> None:
    """Poplar rule: a vertex only touches memory of its own tile."""
    s, e = f.run_bounds()
    mp = f.tensor.mapping
    nonempty = e > s
    if not nonempty.any():
        return
    # the mapping covers [0, size) contiguously from 0, so ks >= 0 and "same interval" ==
    # "the run ends before that interval stops"
    ks = np.searchsorted(mp.start, s, side="right") - 1
    ok = (e <= mp.stop[ks]) & (mp.tile[ks] == grp.tiles[:, None])
    bad = nonempty & ~ok
    if bad.any():
        v, r = (int(x[0]) for x in np.nonzero(bad))
        elem = int(s[v, r])
        where = int(mp.tile_of(np.array([elem]))[0])
        raise EmulatorError(
            f"vertex {v} of '{grp.codelet.name}' in compute set '{grp.cs.name}' (tile {int(grp.tiles[v])}): "
            f"field '{fname}' touches element {elem} of tensor '{f.tensor.name}' which lives on tile {where}; "
            f"fix: map that data to the vertex's tile, or Copy it there first"
        )


# ------------------------------------------------------------------------------------------
def _compile_execute(c: Compiled, info: ProgInfo) -> None:
    cs = info.prog.cs
    em = c.target.em
    if not cs.groups or cs.num_vertices == 0:
        return
    tiles = np.concatenate([g.tiles for g in cs.groups])
    cyc = np.concatenate([g.cycles(c.target) for g in cs.groups])
    sup = np.concatenate([np.full(g.n, bool(getattr(g.codelet, "supervisor", False))) for g in cs.groups])
    reg = np.concatenate([np.full(g.n, bool(getattr(g.codelet, "multi_region", False))) for g in cs.groups])
    busy, _count = cm.compute_tile_cycles(tiles, cyc, c.num_tiles, c.target.threads_per_tile,
                                          int(em["vertex_launch_cycles"]), supervisor=sup, regions=reg)
    flops = sum(g.codelet.flops(g) for g in cs.groups)
    sram = sum(g.codelet.sram_bytes(g) for g in cs.groups)
    utiles = _utiles(tiles, c.num_tiles)
    c.add_template(info, K_COMPUTE, busy, ipu=c.ipu_of_tiles(utiles), flops=int(flops), bytes_sram=int(sram))
    # control code: call of the compute set on every tile with vertices
    c.add_mem("controlCode", utiles, cm.CONTROL_CODE_EXECUTE)
    c.add_mem("controlId", utiles, cm.CONTROL_ID_BYTES)
    info.code_bytes += len(utiles) * cm.CONTROL_CODE_EXECUTE


def _tile_offsets(c, mapping) -> np.ndarray:
    """Per mapping interval: its offset among the same tensor's elements on its tile.  Poplar keeps a
    variable's elements on one tile together in that tile's memory (in flat-index order), so
    intervals of a tensor that are apart in the flat index (the rows of a block) can be adjacent in
    tile memory."""
    cache = c.__dict__.setdefault("_tile_offsets", {})
    key = id(mapping)
    if key not in cache:
        sizes = mapping.stop - mapping.start
        o = np.lexsort((mapping.start, mapping.tile))
        cs = np.cumsum(sizes[o]) - sizes[o]
        t = mapping.tile[o]
        first = np.concatenate([[True], t[1:] != t[:-1]]) if len(t) else np.zeros(0, bool)
        base = np.maximum.accumulate(np.where(first, cs, 0)) if len(t) else cs
        offs = np.empty_like(cs)
        offs[o] = cs - base
        cache[key] = (mapping, offs)  # keep the mapping alive while its id is a key
    return cache[key][1]


def _tile_addr(c, mapping, elems: np.ndarray, k: np.ndarray | None = None) -> np.ndarray:
    """Position of flat elements in their tile's memory block of the tensor (see _tile_offsets);
    ``k``: each element's mapping interval where already known."""
    if k is None:
        k = np.searchsorted(mapping.start, elems, side="right") - 1
    return _tile_offsets(c, mapping)[k] + (elems - mapping.start[k])


def _lexsort3(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """np.lexsort((a, b, c)) for non-negative ints: one stable argsort of a combined int64 key when
    it fits (the same order: lexsort is stable too), which is several times faster."""
    if len(a) == 0:
        return np.zeros(0, np.int64)
    am, bm, cm_ = int(a.max()) + 1, int(b.max()) + 1, int(c.max()) + 1
    if min(int(a.min()), int(b.min()), int(c.min())) < 0 or am * bm * cm_ >= 2**62:
        return np.lexsort((a, b, c))
    return np.argsort((c * bm + b) * am + a, kind="stable")


def _code_patterns(plan: CopyPlan, mask: np.ndarray, src_addr=None, dst_addr=None
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Exchange-code units of the pieces selected by ``mask``: pieces between the same two tiles
    that repeat with one length and constant strides on both sides (rows of a block, a partial's
    slice of every row) form one pattern - exchange code is a loop over them, as it is for Poplar's
    regular copies (whose grouped tensor layouts make such blocks contiguous in the first place).
    With ``src_addr`` / ``dst_addr`` (positions in tile memory, _tile_addr) pieces that are adjacent
    in both tiles' memory are one contiguous transfer (a pattern of stride = length).
    Returns (src tile, dst tile, pieces) per pattern."""
    idx = np.nonzero(mask)[0]
    if len(idx) == 0:
        z = np.zeros(0, np.int64)
        return z, z, z
    se_all = plan.src_elem if src_addr is None else src_addr
    de_all = plan.dst_elem if dst_addr is None else dst_addr
    st, dt, se, de, ln = (plan.src_tile[idx], plan.dst_tile[idx], se_all[idx], de_all[idx], plan.length[idx])
    order = _lexsort3(se, dt, st)
    st, dt, se, de, ln = st[order], dt[order], se[order], de[order], ln[order]
    n = len(st)
    new = np.ones(n, bool)
    if n > 1:
        same = (st[1:] == st[:-1]) & (dt[1:] == dt[:-1]) & (ln[1:] == ln[:-1])  # pair j-1 -> j
        ds, dd = np.diff(se), np.diff(de)
        new[1:] = ~same
        # piece j also starts a new pattern when its stride differs from the stride that led to j-1
        # (conservative: never merges pieces with different strides)
        if n > 2:
            new[2:] |= same[:-1] & ((ds[1:] != ds[:-1]) | (dd[1:] != dd[:-1]))
    starts = np.nonzero(new)[0]
    counts = np.diff(np.append(starts, n))
    return st[starts], dt[starts], counts


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
            parts.append(b"F" + _digest(s, e))
        else:
            st, ln = ep.runs()
            parts.append(b"R" + _digest(st, ln))
        mp = ep.tensor.mapping
        parts.append(_digest((mp.tile - shift) % T if shift else mp.tile, mp.start, mp.stop))
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
    src_addr = _tile_addr(c, prog.src.tensor.mapping, plan.src_elem, plan.src_k)
    dst_addr = _tile_addr(c, prog.dst.tensor.mapping, plan.dst_elem, plan.dst_k)
    sent_once = np.zeros(len(cross), bool)
    sent_once[xs] = True  # one send per distinct source piece: a multicast is sent once
    for mask, cat in ((cross & ~glob, "internalExchangeCode"), (glob, "globalExchangeCode")):
        if mask.any():
            # receive side: patterns per (source tile, destination tile), charged to the receiver
            _ps, pd_, cnt = _code_patterns(plan, mask, src_addr, dst_addr)
            per_r = cm.EXCHANGE_CODE_PER_PIECE + np.where(cnt > 1, cm.EXCHANGE_CODE_PER_LOOP, 0)
            # send side: patterns of the distinct source pieces, charged to the sender
            ps_, _pd, cnt_s = _code_patterns(plan, mask & sent_once, src_addr, src_addr)
            per_s = cm.EXCHANGE_CODE_PER_PIECE + np.where(cnt_s > 1, cm.EXCHANGE_CODE_PER_LOOP, 0)
            c.add_mem(cat, pd_, per_r)
            c.add_mem(cat, ps_, per_s)
            both = np.concatenate([ps_, pd_])
            ut = _utiles(both, c.num_tiles)
            c.add_mem(cat, ut, cm.EXCHANGE_CODE_BASE)
            info.code_bytes += int(per_r.sum() + per_s.sum()) + len(ut) * cm.EXCHANGE_CODE_BASE
    if glob.any():
        c.add_mem("globalExchangePacketHeader", plan.dst_tile[glob], cm.GLOBAL_PACKET_HEADER_BYTES)
    if (~cross).any():
        ps_, _pd, cnt = _code_patterns(plan, ~cross, src_addr, dst_addr)
        c.add_mem("copyDescriptor", ps_, cm.COPY_DESCRIPTOR_PER_PIECE + np.where(cnt > 1, cm.EXCHANGE_CODE_PER_LOOP, 0))
    busy = cm.exchange_tile_cycles(c.target, bout, bin_time, local)
    if not cross.any():
        # purely on-tile: the tiles copy with memcpy, a compute-like step
        ut = _utiles(plan.src_tile, c.num_tiles)
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
        part = _utiles(np.concatenate([plan.src_tile, plan.dst_tile]), c.num_tiles)
        ipu = c.ipu_of_tiles(part)
        c.add_template(info, K_SYNC, cm.internal_sync_cycles(c.target), ipu=c.all_ipus(), shared="internal_sync")
        c.add_template(info, K_XI, busy, bin_, bout, ipu=ipu, bytes_exchange=int(nbytes[cross].sum()),
                       bytes_sram=int(2 * nbytes[~cross].sum()))
    c.add_mem("controlCode", all_t, cm.CONTROL_CODE_SYNC)
    info.code_bytes += T * cm.CONTROL_CODE_SYNC


def _compile_stream(c: Compiled, info: ProgInfo) -> None:
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
    ut = _utiles(plan.src_tile, c.num_tiles)
    c.add_template(info, K_SYNC, cm.global_sync_cycles(c.target), ipu=-1, shared="global_sync")
    c.add_template(info, K_STREAM, busy, bin_, bout, duration=dur, ipu=c.ipu_of_tiles(ut),
                   bytes_ddr=int(nbytes.sum()))
    c.add_mem("hostExchangeCode", plan.src_tile, cm.EXCHANGE_CODE_PER_PIECE)
    c.add_mem("hostExchangeCode", ut, cm.EXCHANGE_CODE_BASE)
    packets = np.ceil(tb[ut] / cm.HOST_PACKET_BYTES).astype(np.int64)
    c.add_mem("hostExchangePacketHeader", ut, packets * cm.HOST_PACKET_HEADER_BYTES)
    c.add_mem("controlCode", np.arange(T), cm.CONTROL_CODE_SYNC)
    info.code_bytes += len(plan.src_tile) * cm.EXCHANGE_CODE_PER_PIECE + len(ut) * cm.EXCHANGE_CODE_BASE + T * cm.CONTROL_CODE_SYNC


def _compile_sync(c: Compiled, info: ProgInfo) -> None:
    if info.prog.sync_kind == "global":
        c.add_template(info, K_SYNC, cm.global_sync_cycles(c.target), ipu=-1, shared="global_sync")
    else:
        c.add_template(info, K_SYNC, cm.internal_sync_cycles(c.target), ipu=c.all_ipus(), shared="internal_sync")
    c.add_mem("controlCode", np.arange(c.num_tiles), cm.CONTROL_CODE_SYNC)
    info.code_bytes += c.num_tiles * cm.CONTROL_CODE_SYNC


# ------------------------------------------------------------------------------------------
def _digest(*arrays) -> bytes:
    h = hashlib.blake2b(digest_size=16)
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(str(a.dtype).encode() + str(a.shape).encode())
        h.update(a.tobytes())
    return h.digest()


def _copy_signature(c: Compiled, prog, plan: CopyPlan | None):
    """Structure of an exchange program: pieces (tile pairs, lengths, offsets relative to the first
    piece of each side) and the element size.  Identical structure = identical exchange code once
    the op is outlined into a subgraph with its own operand buffers."""
    if plan is None or len(plan.length) == 0:
        return None
    return _digest(plan.src_tile, plan.dst_tile, plan.length, plan.src_elem - plan.src_elem.min(),
                   plan.dst_elem - plan.dst_elem.min(), np.array([prog.src.tensor.itemsize]))


def _cs_signature(cs):
    """Structure of a compute set: per group the codelet, tiles, per-vertex field sizes and params."""
    parts = []
    for g in cs.groups:
        fs = []
        for name in sorted(g.fields):
            f = g.fields[name]
            fs.append(f.sizes if isinstance(f, Regions) else np.array(f.block_shape + (f.n,)))
        ps = [np.asarray(g.params[k]) for k in sorted(g.params)]
        parts.append(g.codelet.name.encode() + _digest(g.tiles, *fs, *ps))
    return b"".join(parts)
def _block_rows_adjacent(c: Compiled, f) -> bool:
    """True when every vertex's block rows are adjacent in its tile's memory (_tile_offsets): the
    field is then one contiguous region (as in Poplar's grouped layouts), not a list of rows."""
    try:
        s, e = f.run_bounds()
    except Exception:  # noqa: BLE001 - a field without run bounds: keep the row-list cost
        return False
    if s.ndim != 2 or s.shape[1] < 2:
        return True
    addr = _tile_addr(c, f.tensor.mapping, s.ravel()).reshape(s.shape)
    return bool(np.all(addr[:, 1:] == addr[:, :-1] + (e - s)[:, :-1]))


def _vertex_memory(c: Compiled, used_cs: set) -> None:
    code_tiles: dict[str, tuple[object, np.ndarray]] = {}
    seen_cs: set = set()
    for cs in c.graph.compute_sets:
        if cs.id not in used_cs:
            continue
        if c.outline:
            sig = _cs_signature(cs)
            if sig in seen_cs:
                c.outlined_cs += 1
                continue  # an outlined op: its vertices (state, field data) exist once
            seen_cs.add(sig)
        for g in cs.groups:
            if g.n == 0:
                continue
            state = cm.vertex_state_bytes(g)
            multi = bool(getattr(g.codelet, "multi_region", False))
            if multi:
                # beyond ``threads`` pieces on a tile, a multi-region codelet's pieces are regions of
                # 2D worker vertices: one vertex state per worker, a list entry per extra region/field
                cnt = np.bincount(g.tiles, minlength=c.num_tiles)
                ut = np.nonzero(cnt)[0]
                full = np.minimum(cnt[ut], c.target.threads_per_tile)
                c.add_mem("vertexInstanceState", ut, full * state)
                # the pieces of a tensor on one tile are adjacent in tile memory (_tile_offsets):
                # a worker's regions merge into one, so extra pieces add no list entries
            else:
                c.add_mem("vertexInstanceState", g.tiles, state)
            fdata = 0
            vlist = 0
            for f in g.fields.values():
                rpv = f.regions_per_vertex()
                if isinstance(f, Blocks | Windows) and rpv > 1 and not _block_rows_adjacent(c, f):
                    vlist += cm.LIST_DESCRIPTOR_BYTES
                    fdata += cm.LIST_ENTRY_BYTES * rpv
                elif isinstance(f, Regions) and not f.regular:
                    fdata += cm.FIELD_SIZE_BYTES
            if fdata and multi:
                c.add_mem("vertexFieldData", ut, full * fdata)
            elif fdata:
                c.add_mem("vertexFieldData", g.tiles, fdata)
            if vlist:
                c.add_mem("vectorListDescriptor", g.tiles, vlist)
            name = g.codelet.name
            prev = code_tiles.get(name)
            mask = np.zeros(c.num_tiles, bool) if prev is None else prev[1]
            mask[g.tiles] = True
            code_tiles[name] = (g.codelet, mask)
    for codelet, mask in code_tiles.values():
        c.add_mem("vertexCode", np.nonzero(mask)[0], int(codelet.code_bytes))


def _accesses(c: Compiled, info: ProgInfo) -> tuple[set, set]:
    """(read tensor ids, written tensor ids) of a leaf program."""
    p = info.prog
    reads, writes = set(), set()
    if isinstance(p, P.Execute):
        for g in p.cs.groups:
            for fname, f in g.fields.items():
                d = g.codelet.fields[fname]
                if d in ("in", "inout"):
                    reads.add(f.tensor.id)
                if d in ("out", "inout"):
                    writes.add(f.tensor.id)
    elif isinstance(p, P.Copy):
        reads.add(p.src.tensor.id)
        writes.add(p.dst.tensor.id)
    elif isinstance(p, P.StreamCopy):
        (writes if p.to_device else reads).add(p.view.tensor.id)
    return reads, writes


def _liveness(c: Compiled) -> None:
    g = c.graph
    L = len(c.leaves)
    nT = len(g.tensors)
    first_w = np.full(nT, -1, np.int64)
    first_r = np.full(nT, -1, np.int64)
    last_acc = np.full(nT, -1, np.int64)
    last_r = np.full(nT, -1, np.int64)
    reads_at: list[set] = []
    seen_prog: set = set()
    rewrites: dict[int, list[int]] = {}  # tensor -> liveness steps where a re-run program writes it again
    read_steps: dict[int, list[int]] = {}
    for ls, pid in enumerate(c.leaves):
        r, w = _accesses(c, c.progs[pid])
        reads_at.append(r)
        again = id(c.progs[pid].prog) in seen_prog
        seen_prog.add(id(c.progs[pid].prog))
        if again:
            for t in w - r:
                rewrites.setdefault(t, []).append(ls)
        for t in r:
            read_steps.setdefault(t, []).append(ls)
        for t in r:
            if first_r[t] < 0:
                first_r[t] = ls
            last_r[t] = ls
            last_acc[t] = ls
        for t in w:
            if first_w[t] < 0:
                first_w[t] = ls
            last_acc[t] = ls
    c.first_lstep = np.full(nT, -1, np.int64)
    c.last_lstep = np.full(nT, max(L - 1, 0), np.int64)
    c.always_live = np.ones(nT, bool)
    for t in g.tensors:
        i = t.id
        if t.kind == "constant" or first_w[i] < 0:
            continue  # constants, inputs/weights the host sets, unused tensors: always live
        if first_r[i] >= 0 and first_r[i] <= first_w[i]:
            continue  # read before (or as) it is first written: carries a value in, always live
        w = int(first_w[i])
        r = int(last_r[i]) if last_r[i] > w else L - 1  # never read after: the host reads it at the end
        r = max(r, int(last_acc[i]))
        for a, b in c.repeat_ranges:
            if w < a <= r <= b:
                r = b  # live into a loop and read in it: read again by later iterations
            if a <= w <= b and any(i in reads_at[k] for k in range(a, w + 1)):
                w, r = a, max(r, b)  # loop-carried: read in the body before this iteration writes it
        c.always_live[i] = False
        c.first_lstep[i], c.last_lstep[i] = w, r
    # per-tile bytes of every tensor
    T = c.num_tiles
    c.tensor_tiles: list[tuple[np.ndarray, np.ndarray]] = []
    # int32: per-tile bytes stay far below 2 GiB even for graphs that do not fit; halves memory
    delta = np.zeros((L + 1, T), np.int32) if L else np.zeros((1, T), np.int32)
    for t in g.tensors:
        ept = t.mapping.elements_per_tile(T) * t.itemsize
        tiles = np.nonzero(ept)[0]
        b = ept[tiles]
        c.tensor_tiles.append((tiles, b))
        cat = "constant" if t.kind == "constant" else "variable"
        if c.always_live[t.id] or L == 0:
            c.add_mem(cat, tiles, b, 0)
        else:
            for a, z in _intervals(int(c.first_lstep[t.id]), int(c.last_lstep[t.id]), rewrites.get(t.id),
                                   read_steps.get(t.id)):
                delta[a, tiles] += b
                delta[z + 1, tiles] -= b
    nal = np.cumsum(delta[:max(L, 1)], axis=0, dtype=np.int32) if L else np.zeros((0, T), np.int32)
    c.liveness_tile_bytes = nal
    if L:
        c.memory[:, CATEGORY_CODE["variable"], 1] = nal.max(axis=0)


def _intervals(w: int, r: int, rewrites, reads) -> list[tuple[int, int]]:
    """Live intervals of a tensor live over [w, r]: a program run again (recomputation) that
    rewrites the whole tensor ends the previous interval at its last read before the rewrite, so
    the tensor is not live in between (it is recomputed, not kept)."""
    if not rewrites:
        return [(w, r)]
    out = []
    start = w
    reads = sorted(reads or [])
    for x in sorted(set(rewrites)):
        if x <= start or x > r:
            continue
        before = [q for q in reads if start <= q < x]
        out.append((start, before[-1] if before else start))
        start = x
    out.append((start, r))
    return out


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
    for pid in c.leaves:
        p = c.progs[pid].prog
        if isinstance(p, P.Execute) and p.cs not in graph.compute_sets:
            raise EmulatorError(f"Execute '{p.name}': compute set '{p.cs.name}' belongs to another graph")
        for ep in ((p.src, p.dst) if isinstance(p, P.Copy) else (p.view,) if isinstance(p, P.StreamCopy) else ()):
            if ep.tensor.graph is not graph:
                raise EmulatorError(f"{p.kind} '{p.name}': tensor '{ep.name}' belongs to another graph")
    _check_graph(c, used_cs)
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
            _compile_execute(c, info)
        elif isinstance(p, P.Copy):
            if c.outline:
                snap = c.memory[:, _OUTLINED_CATS, :].copy()
                before = info.code_bytes
                _compile_copy(c, info)
                sig = _copy_signature(c, p, c.copy_plans.pop(info.prog_id, None))
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
            _compile_stream(c, info)
        elif isinstance(p, P.Sync):
            _compile_sync(c, info)
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
    _vertex_memory(c, used_cs)
    c.add_mem("stack", np.arange(c.num_tiles), cm.stack_bytes(c.target.threads_per_tile))
    _liveness(c)
    # memory check: always-live of every category + peak not-always-live
    need = c.memory[:, :, 0].sum(axis=1) + c.memory[:, :, 1].sum(axis=1)
    cap = c.target.sram_bytes_per_tile
    over = np.nonzero(need > cap)[0]
    order = over[np.argsort(-need[over], kind="stable")]
    c.tile_need = need
    c.oom_report = [(int(t), int(c.target.ipu_of(t)), int(need[t]), int(cap)) for t in order]
    c.fits = len(over) == 0
    _expand(c)
    return c


def _expand(c: Compiled) -> None:
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
