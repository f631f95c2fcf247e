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
    if not isinstance(plan, CopyPlan):  # a broadcast in compact form: its expanded pieces (the same digest)
        from popvision_lite.emulator.compile.copy_broadcasts import expand

        plan = expand(plan)
    T = c.num_tiles
    base = int(plan.src_tile[0]) & ~1 if c.target.num_ipus == 1 else 0
    st, dt = (plan.src_tile, plan.dst_tile) if base == 0 else (rotated_tiles(plan.src_tile, base, T),
                                                               rotated_tiles(plan.dst_tile, base, T))
    return CopySignature(digest(st, dt, plan.length, plan.src_elem - plan.src_elem.min(),
                                plan.dst_elem - plan.dst_elem.min(), np.array([itemsize])), base)
