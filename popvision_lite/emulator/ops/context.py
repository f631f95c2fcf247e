"""OpContext: what every op function needs - the graph, where programs go, the current IPU and
precision, unique names, and the op records for the profile's ops table."""

from __future__ import annotations

import numpy as np

from popvision_lite.emulator import mapping as M
from popvision_lite.emulator import programs as P
from popvision_lite.emulator.ops.planners import PlanTarget


class View:
    """Operand made of ``base`` (a graph Tensor) elements at flat positions ``index``.  A transpose of the whole
    base (``axes``, no ``index``) builds its index only when something reads it: a matmul takes such an
    operand as its base with swapped axes and never does (the index of a ResNet weight-gradient operand is
    36 M int64).  So does the whole base repeated ``reps`` times along its first axis (GPT-3's position table
    for every sequence of a batch: 25 M int64 for one; a copy from it is a few ranges, ``common._copy_src``)."""

    __slots__ = ("base", "_index", "axes", "reps")

    def __init__(self, base, index=None, axes=None, reps=None):
        if (index is not None) + (axes is not None) + (reps is not None) != 1:
            raise ValueError("View: give exactly one of index, axes and reps")
        self.base = base
        self.axes = None if axes is None else tuple(int(a) for a in axes)
        self.reps = None if reps is None else int(reps)
        self._index = None if index is None else np.asarray(index, dtype=np.int64)

    @property
    def index(self) -> np.ndarray:
        if self._index is None:
            sh = tuple(self.base.shape)
            whole = np.arange(int(np.prod(sh)), dtype=np.int64)
            self._index = (whole.reshape(sh).transpose(self.axes) if self.reps is None
                           else np.tile(whole, self.reps).reshape(self.shape))
        return self._index

    @property
    def shape(self):
        if self._index is None:
            sh = tuple(self.base.shape)
            return tuple(sh[a] for a in self.axes) if self.reps is None else (self.reps * sh[0],) + sh[1:]
        return self._index.shape

    @property
    def dtype(self):
        return self.base.dtype


# Poplar's "availableMemoryProportion" default: the share of a tile's memory that a matmul /
# convolution's temporaries (operand blocks, partials) may take (Poplar matmul/convolution option
# availableMemoryProportion, default 0.6, poplibs lib/poplin/ConvOptions / MatMul.cpp option
# docs).  The rest is left for code, exchange buffers and the other live tensors.
DEFAULT_AVAILABLE_MEMORY_PROPORTION = 0.6


def plan_target_of(target, usable_fraction: float = DEFAULT_AVAILABLE_MEMORY_PROPORTION,
                   partials_bytes: int = 4, io_tiles: int = 0) -> PlanTarget:
    """Planner numbers from an emulator Target (spec [emulator] section); ``io_tiles`` of each IPU reserved for
    streaming are not the ops' to use."""
    em = target.em
    return PlanTarget(
        tiles=target.tiles_per_ipu - int(io_tiles),
        sram_bytes_per_tile=target.sram_bytes_per_tile,
        flops_per_cycle_fp16=float(em["fp16_flops_per_cycle_per_tile"]),
        flops_per_cycle_fp32=float(em["fp32_flops_per_cycle_per_tile"]),
        exchange_bytes_per_cycle=float(em["exchange_bytes_per_cycle"]),
        usable_fraction=usable_fraction,
        threads=int(target.threads_per_tile),
        memcpy_bytes_per_cycle=float(em["memcpy_bytes_per_cycle"]),
        sync_cycles=int(em["max_ipu_sync_delay_cycles"]),
        launch_cycles=int(em["vertex_launch_cycles"]),
        shared_bus_tiles=int(em.get("tiles_per_shared_exchange_bus", 1)),
        partials_bytes=int(partials_bytes),
    )


class OpContext:
    """Shared state of ops building one program."""

    def __init__(self, graph, precision: str = "fp16"):
        self.graph = graph
        self.target = graph.target
        self.precision = precision
        self.dtype = "float16" if precision == "fp16" else "float32"
        self.ipu = 0
        self.programs: list = []
        # bounds matmul temporaries per tile (Poplar availableMemoryProportion); models may set it
        self._amp = DEFAULT_AVAILABLE_MEMORY_PROPORTION
        # dtype of matmul / convolution K partials and serial-pass accumulators (poplin's partialsType:
        # float by default; models may set float16 for fp16 runs that ask for half partials)
        self.partials_dtype = "float32"
        self._plan_targets: dict[tuple, PlanTarget] = {}
        self._used: set[int] = set()  # tensors some program or vertex of this context touches
        self._counts: dict[str, int] = {}
        self.records: list[dict] = []  # op records in program order (also given to graph.add_op)
        self._rot = 0  # rotating start tile, so small ops do not all pile onto tile 0
        # the last io_tiles tiles of each IPU are reserved for streaming (PopXL's io_tiles): no op maps there
        self.io_tiles = 0
        # while an op is recorded for replay (backends/op_memo.Recorder): its unique names and is_used reads
        self.recorder = None
        # mapping.by_windows' layouts of this graph's windows on tile positions (the same matmul windows recur
        # with other tiles: q / k / v / out and their gradients rotate their start tile)
        self.window_layouts: dict = {}

    @property
    def available_memory_proportion(self) -> float:
        """The share of a tile an op's temporaries may take; a read while an op is recorded for replay is noted
        (backends/op_memo.py: the memo compares the proportion only for an op that read it, here or through
        :attr:`plan_target`)."""
        if self.recorder is not None:
            self.recorder.amp_read = True
        return self._amp

    @available_memory_proportion.setter
    def available_memory_proportion(self, value) -> None:
        self._amp = value

    @property
    def plan_target(self) -> PlanTarget:
        amp = float(self.available_memory_proportion)
        if not 0.0 < amp <= 1.0:
            raise ValueError(f"available_memory_proportion must be in (0, 1], got {amp}")
        pb = 2 if self.partials_dtype == "float16" else 4
        pt = self._plan_targets.get((amp, pb, self.io_tiles))
        if pt is None:
            pt = self._plan_targets[(amp, pb, self.io_tiles)] = plan_target_of(self.target, amp, pb, self.io_tiles)
        return pt

    @property
    def n_tiles(self) -> int:
        """Tiles of an IPU the ops may use (all but the IO tiles)."""
        return self.target.tiles_per_ipu - self.io_tiles

    # ------------------------------------------------------------------ layout bookkeeping
    def mark_used(self, *tensors) -> None:
        for t in tensors:
            self._used.add(t.id)
        if self.recorder is not None:
            self.recorder.marked.extend(tensors)

    def is_used(self, tensor) -> bool:
        """Has a program or vertex added through this context touched ``tensor``?  (An unused
        weight may still be given the layout its first consumer prefers.)"""
        used = tensor.id in self._used
        if self.recorder is not None:
            self.recorder.is_used(tensor, used)
        return used

    def _note(self, prog) -> None:
        if isinstance(prog, P.Copy):
            self._used.update((prog.src.tensor.id, prog.dst.tensor.id))
        elif isinstance(prog, P.StreamCopy):
            self._used.add(prog.view.tensor.id)
        elif isinstance(prog, P.Execute):
            for g in prog.cs.groups:
                self._used.update(f.tensor.id for f in g.fields.values())
        elif isinstance(prog, (P.Sequence,)):
            for p in prog.programs:
                self._note(p)
        elif isinstance(prog, P.Repeat):
            self._note(prog.body)

    # ------------------------------------------------------------------ naming
    def unique(self, name: str) -> str:
        n = self._counts.get(name, 0)
        self._counts[name] = n + 1
        if self.recorder is not None:
            self.recorder.unique(name, n)
        return name if n == 0 else f"{name}#{n}"

    def tiles(self) -> range:
        r = self.target.tiles_of_ipu(self.ipu)
        return range(r.start, r.stop - self.io_tiles)

    @property
    def rotation(self) -> int:
        """The rotating start-tile counter of :meth:`tiles_array` (an outlined call advances it by what the
        block it stands for would have, so the ops after it are placed as without outlining)."""
        return self._rot

    @rotation.setter
    def rotation(self, value: int) -> None:
        self._rot = int(value)

    def tiles_array(self, rotate: int = 0) -> np.ndarray:
        """The IPU's tiles; with ``rotate`` > 0 starting at a rotating offset that advances by ``rotate``
        (so that consecutive small ops use different tiles)."""
        r = self.tiles()
        arr = np.arange(r.start, r.stop, dtype=np.int64)
        if rotate:
            off = (self._rot % len(arr)) & ~1  # even: keeps tile pairs (shared exchange bus) aligned
            self._rot += int(rotate)
            arr = np.roll(arr, -off)
        return arr

    # ------------------------------------------------------------------ ops and programs
    def begin_op(self, name: str, type_: str, plan: str = "", min_bytes: int = 0, precision=None) -> str:
        op = self.unique(name)
        rec = dict(name=op, type=type_, plan=plan, min_bytes=int(min_bytes), precision=precision or self.precision,
                   ipu=self.ipu)
        self.records.append(rec)
        self.graph.add_op(op, type=type_, precision=rec["precision"], plan=plan or None, min_bytes=int(min_bytes))
        return op

    def add(self, prog) -> None:
        self._note(prog)
        self.programs.append(prog)

    def sequence(self, name: str = "main"):
        return P.Sequence(self.programs, name=name)

    # ------------------------------------------------------------------ tensors
    def variable(self, name, shape, dtype=None, mapping=None, op=None):
        return self.graph.add_variable(self.unique(name), shape, dtype or self.dtype, mapping=mapping, op=op)

    def linear_mapping(self, size: int, grain: int = 1):
        n = self.n_tiles
        used = max(1, min(n, -(-size // max(grain, 1))))
        # keep at least a few vectors per tile: spread thinly only when there is enough data
        used = max(1, min(used, max(1, size // 64)))
        tiles = np.sort(self.tiles_array(rotate=used if used < n else 0)[:used])
        return M.linear(size, tiles, grain=grain)

    def row_mapping(self, rows: int, row_len: int):
        n = self.n_tiles
        used = max(1, min(n, rows))
        tiles = np.sort(self.tiles_array(rotate=used if used < n else 0)[:used])
        return M.linear(rows * row_len, tiles, grain=row_len)
