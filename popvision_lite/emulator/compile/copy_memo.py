"""Compiled copies shared between compiles, with their owners' lifetimes: :class:`CopyMemo` (a run's stage
graphs), :class:`CarriedCopies` (whole graphs one after another), keyed by :func:`copy_cost_key`; and the
outlining signature of a compiled copy (:class:`CopySignature`)."""

from __future__ import annotations

import numpy as np

from popvision_lite.emulator.compile.compiled import (
    Compiled,
    CopyPlan,
    digest,
    rotated_tiles,
)
from popvision_lite.emulator.graph import _ranges_index


class CopyMemo:
    """Compiled copies by structure key (:func:`.copies.compile_copy`: each copy's recorded effects and outlining
    signature, never its pieces), kept across the graphs compiled for one :func:`copy_cost_key` with one
    outline setting (the distinct stage graphs of a pipelined run repeat the same layer's exchanges, and so do
    the stage graphs of the next run of that model); a copy of the same structure replays its effects, on the
    same tiles or rotated ones, as within a graph.  :meth:`keep_used` bounds it to the entries of the graphs
    compiled since the last call.  It also holds the graph check's
    answers by field content (``checked``, :func:`check.check_graph`): the layer's fields are the same too;
    and, for the graphs of one target object until :meth:`keep_used`, the compiled compute sets by content
    (``executes``, :func:`.compute_sets.compile_execute`)."""

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
        memo kept for later graphs holds one run's copies, not every run's.  A run that compiled nothing (every
        stage graph taken from the stage-graph cache) keeps the entries as they are, for the next run."""
        if not self.used and not self.checked_used:
            self.executes.clear()
            self.exec_target = None
            return
        _keep(self.copies, self.used)
        self.used = set()
        for k in set(self.checked) - self.checked_used:
            del self.checked[k]
        self.checked_used = set()
        self.executes.clear()  # (their arrays are large; the next run has another target object)
        self.exec_target = None


def _keep(copies: dict, used: set, narrow: bool = True) -> None:
    """``copies`` reduced to the keys in ``used``, the effect arrays narrowed (:func:`_narrow`) unless ``narrow``
    is False (:func:`_narrow_all` later)."""
    kept = {}
    for k in used:
        if k in copies:
            kept[k] = copies[k]
    copies.clear()
    copies.update(kept)
    if narrow:
        _narrow_all(copies)


def _narrow_all(copies: dict) -> None:
    """Every entry's effect arrays narrowed (:func:`_narrow`), in place."""
    for k, (plan, effects, code_bytes, shift) in copies.items():
        copies[k] = (plan, [(fn, tuple(_narrow(a) for a in args), kw) for fn, args, kw in effects], code_bytes,
                     shift)


# The target's emulator constants a copy's compiled effects read (cost_model: exchange and on-tile copy
# rates, the shared exchange bus, internal syncs; on more than one IPU also global syncs and the IPU-Links).
# tests/emulator/compile/test_copy_memo.py checks that compiling copies reads no other.
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
    effects as a graph replays its own repeated copies (:func:`.copies.compile_copy`).  Bounded: after a compile
    only the entries that compile used are kept (one graph's: 1,000 entries for a ResNet-50 replica graph, 57 MB
    once its arrays are narrowed to int32, ~100 MB before).  The arrays are narrowed when a compile for the same
    cost key attaches (the compile that replays them), not after the compile that made them: a process that
    compiles one graph (the ResNet-50 replica row, a sweep point) does not narrow ~9.5 M values it never reads
    again (decision 0503)."""

    def __init__(self) -> None:
        self.key: tuple | None = None
        self.copies: dict = {}
        self.wide = False  # entries kept as recorded, not yet narrowed (_narrow_all)

    def attach(self, c: Compiled) -> None:
        key = copy_cost_key(c.target)
        if key != self.key:
            self.key, self.copies = key, {}
        elif self.wide:
            _narrow_all(self.copies)
        self.wide = False
        c.caches.copy_memo = self.copies
        c.caches.copy_keys_used = set()

    def compiled(self, c: Compiled) -> None:
        """After ``c``'s compile: keep the entries it used (when it compiled any copy); their arrays are narrowed
        when the next compile for this cost key attaches."""
        used = c.caches.copy_keys_used
        if used:
            _keep(self.copies, used, narrow=False)
            self.wide = True

    def clear(self) -> None:
        self.key, self.copies, self.wide = None, {}, False


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
    to the first piece of each side, and the element size.  A broadcast in compact form is signed in its compact
    form (:func:`broadcast_signature`), never expanded."""
    if len(plan.length) == 0:
        return CopySignature(None)
    if not isinstance(plan, CopyPlan):
        return broadcast_signature(c, plan, itemsize)
    T = c.num_tiles
    base = int(plan.src_tile[0]) & ~1 if c.target.num_ipus == 1 else 0
    st, dt = (plan.src_tile, plan.dst_tile) if base == 0 else (rotated_tiles(plan.src_tile, base, T),
                                                               rotated_tiles(plan.dst_tile, base, T))
    return CopySignature(digest(st, dt, plan.length, plan.src_elem - plan.src_elem.min(),
                                plan.dst_elem - plan.dst_elem.min(), np.array([itemsize])), base)


def broadcast_signature(c: Compiled, bp, itemsize: int) -> CopySignature:
    """The outlining signature of a broadcast copy in compact form (``copy_broadcasts.BroadcastPlan``), from the
    compact form in a canonical normalisation, equal for two compact copies exactly when their expanded pieces
    are: the expanded plan is, vertex by vertex, its block's pieces moved to the vertex's first destination
    element and tile, and the vertices are its runs of one destination tile (no two vertices share a tile), so
    the expanded pieces give back each vertex's piece sequence, first destination element and tile.  Canonical:
    the blocks numbered in order of first use, identical blocks (the same pieces) one block, the source
    elements and the vertices' first destination elements less their least (the expanded plan's least source
    and destination elements), the tiles relative to ``base`` (the first expanded piece's source tile rounded
    down to even, on one IPU, as :func:`plan_signature`).  Decision 0441: a compact copy and an expanded one
    with the same pieces get different signatures (none in the measured models)."""
    T = c.num_tiles
    nb = len(bp.count)
    # blocks in order of first use; a block whose pieces equal an earlier block's is that block
    _, first_use = np.unique(bp.rep, return_index=True)
    order = np.argsort(first_use, kind="stable")
    first, count = bp.first[order], bp.count[order]
    label = np.empty(nb, np.int64)
    label[order] = np.arange(nb, dtype=np.int64)
    idx = _ranges_index(first, count)
    st, ln, se, off = bp.st[idx], bp.ln[idx], bp.se[idx], bp.off[idx]
    if nb > 1:
        same = _same_blocks(count, st, ln, se, off)
        if same is not None:  # (rare: two blocks of one copy with the same pieces)
            lab, keep = same
            label = lab[label]
            kept = np.repeat(keep, count)
            st, ln, se, off, count = st[kept], ln[kept], se[kept], off[kept], count[keep]
    rep = label[bp.rep]
    base = int(st[0]) & ~1 if c.target.num_ipus == 1 else 0
    dt = bp.dt
    if base:
        st, dt = rotated_tiles(st, base, T), rotated_tiles(dt, base, T)
    return CopySignature(digest(np.array([itemsize, len(count)]), count, st, ln, se - se.min(), off, rep,
                                bp.d0 - bp.d0.min(), dt), base)


def _same_blocks(count, st, ln, se, off):
    """For blocks whose pieces are concatenated in block order: (per block the number of the first block with
    the same pieces, among the first blocks numbered 0, 1, ... in order; per block whether it is such a first
    block), or None when no two blocks have the same pieces (then no two have the same piece count and first
    source element, which is checked first)."""
    nb = len(count)
    firsts = np.cumsum(count) - count
    se0 = se[firsts]
    o = np.lexsort((se0, count))
    tie = (count[o][1:] == count[o][:-1]) & (se0[o][1:] == se0[o][:-1])
    if not tie.any():
        return None
    cand = np.zeros(nb, bool)
    cand[o[1:][tie]] = True
    cand[o[:-1][tie]] = True
    lab = np.arange(nb, dtype=np.int64)
    seen: dict = {}
    for b in np.nonzero(cand)[0]:
        s = slice(int(firsts[b]), int(firsts[b] + count[b]))
        lab[b] = seen.setdefault(digest(st[s], ln[s], se[s], off[s]), int(b))
    keep = lab == np.arange(nb)
    if keep.all():
        return None
    return (np.cumsum(keep) - 1)[lab], keep
