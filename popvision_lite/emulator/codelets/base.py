"""Codelets (vertex types): numerics as vectorised numpy over a whole vertex group, plus a
vectorised cycle-cost function, code size and state size.

Cycle unit: **worker-thread cycles** = instructions a worker context issues.  A tile's barrel
scheduler gives each of its ``threads_per_tile`` workers one issue slot in turn, so a vertex of
``c`` thread cycles occupies ``c * threads_per_tile`` tile cycles of wall time, and a tile whose
workers are all busy retires one worker instruction per tile cycle (see cost_model.py).

The cycle formulas are Poplar's own codelet cycle estimators (graphcore/poplibs), one module per
library in ``emulator/estimators`` (tests/emulator/estimators/test_codelet_costs.py pins them,
docs/emulator-fidelity.md tabulates ours against poplibs'); a codelet here says which estimator
costs it (an elementwise codelet's ``model``, see estimators/elementwise.py) and keeps the vertex
behaviour.  A codelet may also be a *supervisor* vertex (``supervisor = True``, e.g. the AMP
matmul): one vertex per tile that uses all six workers; its ``cycles`` are the poplibs tile estimate
divided by the number of workers (worker-slot units), so the engine's ``6 x cycles +
vertex_launch_cycles`` gives the poplibs tile cycles.  Device rates come from the target's device
spec ``[emulator]`` section.
"""

from __future__ import annotations

import numpy as np

from popvision_lite.emulator.cost_model import tile_counts
from popvision_lite.emulator.estimators import elementwise as EW
from popvision_lite.emulator.estimators import popops
from popvision_lite.emulator.graph import Blocks, Regions, VertexGroup, Windows, to_dtype
from popvision_lite.errors import EmulatorError


def _f32(x):
    """``x`` as float32 for a vertex's compute: ``graph.to_dtype`` (the bits of ``astype``, without numpy's
    slow path for fp16 subnormals) for arrays."""
    return to_dtype(x, "float32") if isinstance(x, np.ndarray) else np.asarray(x, dtype=np.float32)


class Codelet:
    """Base class.  Subclasses set ``name``, ``fields`` ({name: "in"|"out"|"inout"}), ``code_bytes``
    (per tile, once per codelet), ``state_bytes`` (per vertex) and override ``cycles`` / ``flops`` /
    ``compute`` (vectorised over a group) or ``compute_vertex`` (slow path)."""

    name = "Codelet"
    fields: dict[str, str] = {}
    code_bytes = 256
    state_bytes = 4
    # attributes a group's numerics cache on the group (index arrays, plans): only worth keeping while the
    # group may run again; a one-shot run drops them after the group's last run (Engine.run with ``keep``)
    group_caches: tuple[str, ...] = ()

    def drop_caches(self, group: VertexGroup) -> None:
        """Forget what ``compute`` / ``gemm_plan`` cached on ``group`` (rebuilt if it runs again)."""
        for name in self.group_caches:
            group.__dict__.pop(name, None)

    def check(self, group: VertexGroup) -> None:
        """Raise EmulatorError when the group's field shapes do not suit this codelet."""

    def scalar_param(self, group: VertexGroup, name: str) -> int:
        """The group's scalar parameter ``name`` as an int; EmulatorError naming the codelet and compute set when
        it is missing or not a scalar."""
        value = group.param(name)
        if value is None or np.ndim(value) != 0:
            raise EmulatorError(f"codelet '{self.name}' in '{group.cs.name}': needs scalar param '{name}'")
        return int(value)

    def cycles(self, group: VertexGroup, target) -> np.ndarray:
        raise NotImplementedError

    def flops(self, group: VertexGroup) -> int:
        return 0

    def sram_bytes(self, group: VertexGroup) -> int:
        """Bytes the group reads and writes from tile SRAM (inout fields count twice)."""
        total = 0
        sums: dict = {}  # (an elementwise op's fields share one sizes array: summed once)
        for fname, f in group.fields.items():
            b = _elems_total(f, sums) * f.tensor.itemsize
            total += 2 * b if self.fields[fname] == "inout" else b
        return total

    def compute(self, group: VertexGroup, data: dict) -> None:
        for v in range(group.n):
            self.compute_vertex(group, data, v)

    def compute_vertex(self, group: VertexGroup, data: dict, v: int) -> None:
        raise NotImplementedError(f"codelet '{self.name}' has no numerics")

    def __repr__(self) -> str:
        return f"<codelet {self.name}>"


def _elems_total(f, sums: dict) -> int:
    """``int(f.elems().sum())`` of a field: a Blocks or Windows field's vertices see one block each (its count
    times the block's elements), a Regions field's sizes are summed once per sizes array (kept in ``sums`` by the
    array's id while its fields live)."""
    if isinstance(f, Blocks | Windows):
        return int(f.n) * int(f.block_elems)
    if isinstance(f, Regions):
        hit = sums.get(id(f.sizes))
        if hit is None:
            hit = sums[id(f.sizes)] = size_sum(f.sizes)
        return hit
    return int(f.elems().sum())


def size_sum(sizes) -> int:
    """``int(np.asarray(sizes).sum(dtype=np.int64))`` of an array of sizes: one size times the count where the
    array is one value broadcast (a Regions field of equal pieces), and int32 sizes summed as int32 in chunks whose
    sums cannot pass 2**31 - 1 where none is negative (a sum to int64 casts every element, ~15x the cost of the
    int32 sum, the least and the largest here)."""
    a = np.asarray(sizes)
    n = a.size
    if n == 0:
        return 0
    if a.ndim == 1 and a.strides[0] == 0:
        return n * int(a[0])
    if a.dtype == np.int32 and a.ndim == 1 and int(a.min()) >= 0:
        chunk = (2**31 - 1) // max(int(a.max()), 1)  # (every partial sum of a chunk lies in 0..2**31 - 1)
        return sum(int(a[i:i + chunk].sum(dtype=np.int32)) for i in range(0, n, chunk))
    return int(a.sum(dtype=np.int64))


# _table_cycles: a table of every size up to the largest when that is at most this share of the pieces
_TABLE_SHARE = 8


def _table_cycles(model, sizes, tiles, per_tile, itemsize: int, src: int, threads: int,
                  narrow: bool = True) -> np.ndarray | None:
    """EW.piece_cycles(model, sizes, itemsize, src, per_tile[tiles], threads), converted as VertexGroup.cycles
    converts it (int64, then int32 where every value lies in 0..2**31 - 1), from tables: the estimators are
    functions of a piece's size alone, and a fragment's 2D prologue share a function of its tile's piece count, so
    a piece's cycles is a table entry by its size (1D worker or 2D region) plus, for a fragment, its tile's entry.
    The tables are read with the pieces' sizes and tiles as held (int32: no int64 copy of either, no per-piece tile
    count).  None where the sizes span more than 1/_TABLE_SHARE of the pieces or a table is not whole numbers
    (the caller's per-piece path).  ``narrow`` False: int64 always."""
    lo, hi = int(sizes.min()), int(sizes.max())
    if len(sizes) < 64 or lo < 0 or (hi + 1) * _TABLE_SHARE > len(sizes):
        return None
    span = np.arange(lo, hi + 1, dtype=np.int64)
    frag_t = per_tile > threads
    frag_any = bool(frag_t.any())
    tables = []
    if not frag_any or not frag_t[per_tile > 0].all():  # some piece is a 1D worker
        tables.append(("one", np.asarray(EW.model_worker_cycles(model, span, itemsize, src))))
    if frag_any:
        reg = np.asarray(EW.model_region_cycles(model, span, itemsize, src)[0])
        pro = EW.model_region_cycles(model, span[:1], itemsize, src)[1]
        share = -(-pro * threads // np.maximum(np.arange(int(per_tile.max()) + 1), 1))
        tables.append(("reg", reg))
    full = {}
    for name, t in tables:
        if t.shape != span.shape or t.dtype.kind not in "iu":
            return None
        f = np.zeros(hi + 1, np.int64)  # (sizes below the least are never read)
        f[lo:] = t
        full[name] = f
    top = np.iinfo(np.int32).max
    if not frag_any:
        out = full["one"]
        if narrow and int(out[lo:].min()) >= 0 and int(out.max()) <= top:
            out = out.astype(np.int32)  # (VertexGroup.cycles holds such values as int32)
        return np.take(out, sizes)  # (np.take: the same gather as out[sizes], ~1.7x as fast here)
    share_t = np.asarray(share, np.int64)[per_tile]  # each tile's prologue share, by its piece count
    lows = [int(f[lo:].min()) for f in full.values()]
    highs = [int(f.max()) for f in full.values()]
    if narrow and min(lows) >= 0 and int(share_t.min()) >= 0 and max(highs) + int(share_t.max()) <= top:
        # every sum read lies in 0..2**31 - 1: added as int32, the same integers VertexGroup.cycles would hold
        full = {k: f.astype(np.int32) for k, f in full.items()}
        share_t = share_t.astype(np.int32)
    c = np.take(full["reg"], sizes)
    c += np.take(share_t, tiles)
    if "one" in full:
        np.copyto(c, np.take(full["one"], sizes), where=~np.take(frag_t, tiles))
    return c


def _expand(param, sizes: np.ndarray):
    """Per-vertex parameter -> per-element array (scalars pass through)."""
    p = np.asarray(param)
    return p if p.ndim == 0 else np.repeat(p, sizes)


class Elementwise(Codelet):
    """out = fn(inputs...) elementwise over Regions fields of equal size per vertex."""

    def __init__(self, name, fn, inputs=("a", "b"), cycles_per_vector=popops.FALLBACK_UNARY_VECTOR_CYCLES,
                 flops_per_element=1,
                 params=(), inplace=False, code_bytes=320, model=None):
        # model: which poplibs estimator gives the worker cycles of a piece: ("binary", op),
        # ("unary", op), ("nonlinearity", kind, grad), ("cast",), ("fill",), ("scaled_add",),
        # ("composite", [models...]) for fused ops (sum of the parts), or None (fallback formula).
        self.model = model
        self.name = name
        self.fn = fn
        self.inputs = tuple(inputs)
        self.inplace = inplace
        self.fields = {i: "in" for i in self.inputs}
        self.fields["out"] = "inout" if inplace else "out"
        self.cycles_per_vector = cycles_per_vector
        self.flops_per_element = flops_per_element
        self.param_names = tuple(params)
        self.code_bytes = code_bytes
        self.state_bytes = 4 + 4 * len(self.param_names)

    def check(self, group):
        sizes = None
        for fname, f in group.fields.items():
            if not isinstance(f, Regions):
                raise EmulatorError(f"codelet '{self.name}' in '{group.cs.name}': field '{fname}' must be tensor.regions(...)")
            if sizes is None:
                sizes = f.sizes
            elif f.sizes is not sizes and not np.array_equal(sizes, f.sizes):  # (a group's fields share one)
                v = int(np.nonzero(sizes != f.sizes)[0][0])
                raise EmulatorError(
                    f"codelet '{self.name}' in '{group.cs.name}': vertex {v}: field '{fname}' has {int(f.sizes[v])} "
                    f"elements but another field has {int(sizes[v])}; fix: connect equal-sized regions"
                )
        for p in self.param_names:
            if p not in group.params:
                raise EmulatorError(f"codelet '{self.name}' in '{group.cs.name}': missing param '{p}'")

    def cycles(self, group, target):
        out = group.fields["out"]
        if self.model is None:
            return popops.fallback_worker_cycles(np.asarray(out.sizes, dtype=np.int64), out.tensor.itemsize,
                                                 self.cycles_per_vector)
        src = group.fields[self.inputs[0]].tensor.itemsize if self.inputs else out.tensor.itemsize
        threads = int(target.threads_per_tile)
        if not group.n:
            return EW.piece_cycles(self.model, np.zeros(0, np.int64), out.tensor.itemsize, src,
                                   np.zeros(0, np.int64), threads)
        # pieces per tile, kept for the compute set's tile cycles (compute_sets.compile_execute reads and drops it:
        # the same count of the same tiles)
        per_tile = group.tile_counts = tile_counts(group.tiles, target.num_tiles, threads)
        # int32 where every value fits, as VertexGroup.cycles holds them, only when it calls this method itself (a
        # subclass that overrides cycles adds to what it returns here: int64, as ever)
        narrow = type(self).cycles is Elementwise.cycles
        got = _table_cycles(self.model, out.sizes, group.tiles, per_tile, out.tensor.itemsize, src, threads, narrow)
        if got is not None:
            return got
        n = np.asarray(out.sizes, dtype=np.int64)
        most = int(per_tile.max())
        # no tile holds more pieces than it has workers (most ops): piece_cycles reads only that no piece is a
        # fragment (on_tile > threads nowhere), which the largest count says as well as each piece's count
        on_tile = np.int64(most) if most <= threads else per_tile[group.tiles]
        return EW.piece_cycles(self.model, n, out.tensor.itemsize, src, on_tile, threads)

    cycles.held_as_is = True  # (VertexGroup.cycles: an int32 array this method returns is new and not negative)

    # pieces beyond the tile's workers are regions of 2D worker vertices, not vertices of their own:
    # the supervisor launches at most ``threads`` of them (cost_model.compute_tile_cycles)
    multi_region = True

    def flops(self, group):
        if group.fields["out"].tensor.dtype == "int32":
            return 0
        return int(self.flops_per_element * np.int64(size_sum(group.fields["out"].sizes)))

    def compute(self, group, data):
        out = group.fields["out"]
        args = [group.fields[i].gather(data) for i in self.inputs]
        if self.inplace:
            args = [out.gather(data), *args]
        kw = {p: _expand(group.params[p], out.sizes) for p in self.param_names}
        res = self.fn(*args, **kw)
        out.scatter(data, to_dtype(res, out.tensor.dtype))


def unary(name, fn, cycles_per_vector=popops.FALLBACK_UNARY_VECTOR_CYCLES, flops_per_element=1, params=(),
          code_bytes=256, model=None) -> Elementwise:
    return Elementwise(name, fn, ("in",), cycles_per_vector, flops_per_element, params, code_bytes=code_bytes,
                       model=model)


def binary(name, fn, cycles_per_vector=popops.FALLBACK_BINARY_VECTOR_CYCLES, flops_per_element=1, params=(),
           code_bytes=320, model=None) -> Elementwise:
    return Elementwise(name, fn, ("a", "b"), cycles_per_vector, flops_per_element, params, code_bytes=code_bytes,
                       model=model)
