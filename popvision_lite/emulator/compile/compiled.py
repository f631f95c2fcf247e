"""What compiling a graph produces: the program tree, BSP step templates, copy plans and memory
per tile and category (:class:`Compiled`), the step kinds, and helpers the compile modules share."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import xxhash

from popvision_lite.emulator import programs as P
from popvision_lite.emulator.graph import Blocks, Graph, Regions, Windows
from popvision_lite.profile.schema import CATEGORY_CODE, MEMORY_CATEGORIES, STEP_KIND_CODE

K_COMPUTE = STEP_KIND_CODE["compute"]
K_SYNC = STEP_KIND_CODE["sync"]
K_XI = STEP_KIND_CODE["exchange_internal"]
K_XG = STEP_KIND_CODE["exchange_global"]
K_STREAM = STEP_KIND_CODE["stream_copy"]
_U32_MAX = int(np.iinfo(np.uint32).max)
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


@dataclass
class CompileCaches:
    """What a compile keeps while it runs, each cache by name with its lifetime (nothing is kept on a
    :class:`Compiled` under a private attribute).  A compile starts with empty ones; a
    :class:`~.copy_memo.CopyMemo` or :class:`~.copy_memo.CarriedCopies` given to :func:`~.compile_graph` attaches
    its shared dicts instead (the copies and checks of other graphs).  :func:`~.compile_graph` drops the step
    caches when the steps are compiled (:meth:`drop_step_caches`: they hold the copies' arrays) and the
    layout caches when vertex memory is done (:meth:`drop_layout`)."""

    # -- until the steps are compiled (copies.compile_copy, compute_sets.compile_execute, check.check_graph)
    copy_memo: dict = field(default_factory=dict)   # copy structure key -> recorded effects (compile_copy)
    copy_keys_used: set | None = None               # the keys this compile used (a shared memo keeps those)
    check_memo: dict | None = None                  # field content -> the graph check's answer (shared only)
    check_keys_used: set = field(default_factory=set)
    exec_memo: dict | None = None                   # compute-set content -> its costs (shared only)
    array_digests: dict = field(default_factory=dict)  # (id(array), shift) -> (array, digest): cached_digest
    copy_runs: dict = field(default_factory=dict)  # id(endpoint) -> the run bounds / runs the copy's key read
    # ids of the mappings of the copies' endpoint tensors: the graph check keeps their tile bases (memory._tile_base)
    copy_mappings: frozenset = frozenset()
    # -- until vertex memory is done (memory.py)
    tile_offsets: dict = field(default_factory=dict)   # id(mapping) -> (mapping, tile base per interval)
    tile_base_last: tuple | None = None                # the graph check's last one-off tile base (not kept)
    rows_adjacent: dict = field(default_factory=dict)  # id(field) -> (field, rows adjacent in tile memory)

    def drop_step_caches(self) -> None:
        self.copy_memo, self.copy_keys_used, self.check_memo = {}, None, None
        self.check_keys_used, self.exec_memo, self.array_digests, self.copy_runs = set(), None, {}, {}
        self.copy_mappings = frozenset()

    def drop_layout(self) -> None:
        self.tile_offsets, self.tile_base_last, self.rows_adjacent = {}, None, {}


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
        # (tiles, categories, always-live / not): each (category, live) row of tiles contiguous (a transposed view),
        # so that add_mem's adds, one row at a time, read and write one contiguous row
        self.memory = np.zeros((len(MEMORY_CATEGORIES), 2, T), np.int64).transpose(2, 0, 1)
        self.repeat_ranges: list[tuple[int, int]] = []  # lstep ranges of Repeat bodies
        self.call_writes: list[tuple[int, tuple]] = []  # (first lstep, argument tensor ids) of each call
        self.outline = False
        self.outlined_copies = 0  # exchange programs sharing an earlier one's code (outline=True)
        self.outlined_cs = 0      # compute sets sharing an earlier one's vertices (outline=True)
        self._shared_rows: dict[str, dict] = {}
        self.recording: list | None = None  # when a list: add_mem / add_template calls are logged to it
        self.caches = CompileCaches()

    # -- helpers ---------------------------------------------------------------------------
    def op_id(self, op: str | None) -> int:
        if op is None:
            return -1
        if op not in self.op_index:
            self.op_index[op] = len(self.ops)
            self.ops.append(op)
        return self.op_index[op]

    def add_mem(self, category: str, tiles, nbytes, live: int = 0) -> None:
        """Add ``nbytes`` (one size, or one per entry) on ``tiles`` to ``category``'s always-live (``live`` 0) or
        not-always-live (1) bytes.  Many entries are summed per tile once (np.bincount), and that sum is both what
        is added and, for a recording compile (a copy's effects kept for a replay), what is logged where the entries
        outnumber the tiles; one size for every entry is counted per tile and multiplied (the same integers as the
        per-entry sums, without an array of the sizes or float weights)."""
        c = CATEGORY_CODE[category]
        T = self.num_tiles
        tiles = np.asarray(tiles, np.int64).ravel()
        nbytes = np.asarray(nbytes, np.int64)
        n = len(tiles)
        # each entry's size as a flat array (None: one size for every entry); one per entry already: as it is
        each = None if nbytes.ndim == 0 else nbytes if nbytes.ndim == 1 and len(nbytes) == n else \
            np.broadcast_to(nbytes, tiles.shape).ravel()
        per_tile = None  # the bytes per tile, where many entries are summed (O(num_tiles) instead of O(len))
        if n * 8 >= T:
            if each is None:
                per_tile = np.bincount(tiles, minlength=T) * int(nbytes)
            else:
                per_tile = np.bincount(tiles, weights=each, minlength=T).astype(np.int64)
        if self.recording is not None:
            if n > T:  # per piece: kept per tile (the same sums, O(tiles) memory)
                rt = np.nonzero(per_tile)[0]
                rb = per_tile[rt]
            else:
                rt, rb = tiles, np.broadcast_to(nbytes, tiles.shape).ravel() if each is None else each
            self.recording.append(("mem", (category, rt, rb), {"live": live}))
        row = self.memory[:, c, live]  # (contiguous: see __init__)
        if per_tile is None:  # few tiles
            np.add.at(row, tiles, nbytes if each is None else each)
        else:
            row += per_tile

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
                    np.minimum(a[sel], _U32_MAX).astype(np.uint32)

            cy, bin_, bout = u32(cycles), u32(bi), u32(bo)
            rows = dict(tiles=None if dense else tiles, cycles=cy, bytes_in=bin_, bytes_out=bout,
                        busy_max=int(cy.max(initial=0)), busy_sum=int(cy.sum(dtype=np.int64)),
                        tiles_active=int(np.count_nonzero(cy)), in_sum=0 if bi is None else int(bin_.sum(dtype=np.int64)),
                        out_sum=0 if bo is None else int(bout.sum(dtype=np.int64)))  # (None: rows of zeros)
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


def distinct_tiles(tiles: np.ndarray, num_tiles: int) -> np.ndarray:
    """Sorted distinct tiles (bincount: O(n + tiles), faster than np.unique)."""
    if len(tiles) == 0:
        return np.zeros(0, np.int64)
    return np.nonzero(np.bincount(tiles, minlength=num_tiles))[0]


_HEADS: dict = {}  # (dtype, shape) -> the bytes digest() hashes before an array's (bounded: _HEADS_MAX entries)
_HEADS_MAX = 1 << 16


def digest(*arrays) -> bytes:
    """A 16-byte key of the arrays' dtypes, shapes and values (equal iff they are, barring a hash collision):
    XXH3-128 of each array's dtype and shape, then its bytes.  Hashing keys the exchange programs, compute sets
    and graph checks of a compile; XXH3 hashes 6-8x the bytes per second of the SHA-256 used before (which
    also narrowed int arrays to int16 / int32 first to hash fewer bytes; with XXH3 the narrowing's min / max /
    cast cost more than the hashing), decision 0360.  The keys live in one process's memos only: nothing
    stores them, so changing the hash changes no output."""
    h = xxhash.xxh3_128()
    for a in arrays:
        a = np.ascontiguousarray(a)
        d = a.dtype
        # the dtype by its array-protocol string ('<i8': kind, byte order and size; a fifth of the cost of
        # str(dtype), which was most of a small array's digest), or in full where it has fields or a subarray;
        # with the shape, made once per (dtype, shape) in the process (formatting it cost ~6x the look-up)
        key = (d, a.shape)
        head = _HEADS.get(key)
        if head is None:
            if len(_HEADS) >= _HEADS_MAX:
                _HEADS.clear()
            head = _HEADS[key] = f"{d.str if d.fields is None and d.subdtype is None else d}{a.shape}".encode()
        h.update(head)
        # the array's bytes, without copying them out (tobytes) where they are plain data
        h.update(a.tobytes() if a.dtype.hasobject else a.reshape(-1).view(np.uint8))
    return h.digest()


def rotated_tiles(tiles: np.ndarray, shift: int, num_tiles: int) -> np.ndarray:
    """``(tiles - shift) % num_tiles`` for tiles in [0, num_tiles) and 0 <= shift < num_tiles (a compiled graph's
    tiles, a shift of one of them): a subtraction and ``num_tiles`` added where it went below 0, the same integers
    without an integer division per element (several times the cost of an add here); the plain division for an
    unsigned array."""
    r = tiles - shift  # (the dtype the division's result had: the digests of equal tiles stay equal)
    if r.dtype.kind != "i":
        return r % num_tiles
    np.add(r, num_tiles, out=r, where=r < 0)
    return r


def cached_digest(c, a, shift: int = 0) -> bytes:
    """:func:`digest` of one array of the graph being compiled (a field's or a mapping's; with ``shift`` a tile
    array taken relative to that even shift, ``(a - shift) % tiles``), kept for the compile by array object:
    the graph check, the compute-set memo and the copies' structure keys hash the same arrays, which the
    compile does not change.  The array is kept alive beside its digest, so its id stays its own."""
    cache = c.caches.array_digests
    key = (id(a), shift)
    hit = cache.get(key)
    if hit is None or hit[0] is not a:
        hit = cache[key] = (a, digest(rotated_tiles(a, shift, c.num_tiles) if shift else a))
    return hit[1]


def field_content(c, f) -> tuple | None:
    """A field's connections by value, for the memo keys of the graph check and the compute sets: its kind (with
    its block shape) and the digests (:func:`cached_digest`) of the arrays that say which elements each vertex
    reads.  None for a kind of field these keys do not cover."""
    if isinstance(f, Regions):
        return ("R", None, cached_digest(c, f.starts), cached_digest(c, f.sizes))
    if isinstance(f, Windows):
        return ("W", f.block_shape, cached_digest(c, f.origins))
    if isinstance(f, Blocks):
        return ("B", f.block_shape, cached_digest(c, f.index))
    return None
