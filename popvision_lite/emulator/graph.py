"""The emulator's graph: tensors with tile mappings, constants, host buffers, compute sets and
columnar vertex groups.  See docs/emulator.md.

Over 600 lines on purpose: this is the one data model the builder, the compile package and the engine
share - the tensor, the three field kinds (Regions, Blocks, Windows) with their gather / scatter, and the
vertex group that holds them - and its classes refer to each other's internals (a field's index built
from its tensor's mapping, a group's fields checked against its graph's tensors).  Split by job, the
field kinds would be a module whose every function needs the tensor and graph of this one."""

from __future__ import annotations

import numpy as np

from popvision_lite.emulator import mapping as _mapping
from popvision_lite.emulator.dtypes import DTYPES, check_dtype, to_dtype  # noqa: F401 - re-exported
from popvision_lite.emulator.mapping import Mapping
from popvision_lite.emulator.shared_arrays import int_array, share_int32
from popvision_lite.emulator.target import Target
from popvision_lite.errors import EmulatorError


def _ranges_index(starts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Concatenation of arange(s, s+n) for every (s, n), vectorised."""
    total = int(sizes.sum())
    if total == 0:
        return np.zeros(0, np.int64)
    offs = np.cumsum(sizes) - sizes
    return np.arange(total, dtype=np.int64) + np.repeat(starts - offs, sizes)


class Tensor:
    """A tensor of the graph (variable or constant)."""

    def __init__(self, graph: Graph, tid: int, name: str, shape, dtype: str, kind: str, op: str | None):
        self.graph = graph
        self.id = tid
        self.name = name
        self.shape = tuple(int(s) for s in shape)
        self.dtype = dtype
        self.kind = kind
        self.op = op
        self.size = int(np.prod(self.shape)) if self.shape else 1
        self.itemsize = np.dtype(DTYPES[dtype]).itemsize
        self.nbytes = self.size * self.itemsize
        self.mapping: Mapping | None = None
        self.value: np.ndarray | None = None

    def __repr__(self) -> str:
        return f"Tensor({self.name!r}, {self.shape}, {self.dtype}, {self.kind})"

    # -- vertex field connections --------------------------------------------------------
    def regions(self, starts, sizes) -> Regions:
        return Regions(self, starts, sizes)

    def blocks(self, block_shape, index) -> Blocks:
        return Blocks(self, block_shape, index)

    def windows(self, block_shape, origins) -> Windows:
        return Windows(self, block_shape, origins)

    # -- views for Copy / StreamCopy ---------------------------------------------------
    def __getitem__(self, index) -> TensorView:
        flat = np.arange(self.size, dtype=np.int64).reshape(self.shape)[index]
        return TensorView(self, np.asarray(flat).ravel(), tuple(np.shape(flat)))

    def flat_slice(self, start: int, stop: int) -> TensorView:
        start, stop = int(start), int(stop)
        if not 0 <= start <= stop <= self.size:
            raise EmulatorError(f"tensor '{self.name}': flat_slice({start}, {stop}) outside 0..{self.size}")
        return TensorView(self, None, (stop - start,), contiguous=(start, stop))

    def whole(self) -> TensorView:
        return TensorView(self, None, self.shape, contiguous=(0, self.size))


class TensorView:
    """Flat elements of a tensor, in order (``index`` None means the contiguous range)."""

    def __init__(self, tensor: Tensor, index, shape, contiguous: tuple[int, int] | None = None):
        self.tensor = tensor
        self.shape = tuple(shape)
        self.contiguous = contiguous
        if index is not None:
            index = np.asarray(index, np.int64)
            if len(index) and np.all(np.diff(index) == 1):
                self.contiguous = (int(index[0]), int(index[-1]) + 1)
                index = None
            elif len(index) == 0:
                self.contiguous = (0, 0)
                index = None
        self._index = index
        self.size = (self.contiguous[1] - self.contiguous[0]) if self.contiguous else len(index)

    @property
    def name(self) -> str:
        return self.tensor.name

    def index(self) -> np.ndarray:
        if self._index is None:
            return np.arange(self.contiguous[0], self.contiguous[1], dtype=np.int64)
        return self._index

    def runs(self) -> tuple[np.ndarray, np.ndarray]:
        """(start, length) of the contiguous runs of flat elements, in view order."""
        if self._index is None:
            return (np.array([self.contiguous[0]], np.int64),
                    np.array([self.contiguous[1] - self.contiguous[0]], np.int64))
        idx = self._index
        brk = np.nonzero(np.diff(idx) != 1)[0] + 1
        first = np.concatenate([[0], brk])
        lengths = np.diff(np.concatenate([first, [len(idx)]]))
        return idx[first], lengths

    def read(self, data: dict) -> np.ndarray:
        flat = data[self.tensor.id]
        if self._index is None:
            return flat[self.contiguous[0]:self.contiguous[1]]
        return flat[self._index]

    def write(self, data: dict, values: np.ndarray) -> None:
        flat = data[self.tensor.id]
        if self._index is None:
            flat[self.contiguous[0]:self.contiguous[1]] = values
        else:
            flat[self._index] = values


class Concat:
    """A copy endpoint: the elements of several fields / views of ONE tensor, one after the other
    (e.g. the windows of an uneven matmul split, one Windows field per block shape, moved by ONE
    exchange)."""

    def __init__(self, parts):
        parts = [as_view(p, "Concat part") for p in parts]
        if not parts:
            raise EmulatorError("Concat: no parts")
        self.tensor = parts[0].tensor
        if any(p.tensor is not self.tensor for p in parts):
            raise EmulatorError(f"Concat: parts belong to different tensors (first '{self.tensor.name}')")
        self.parts = parts
        self.sizes = np.array([p.size for p in parts], np.int64)
        self.size = int(self.sizes.sum())
        self.shape = (self.size,)

    @property
    def name(self) -> str:
        return self.tensor.name

    def runs(self) -> tuple[np.ndarray, np.ndarray]:
        rs = [p.runs() for p in self.parts]
        return np.concatenate([r[0] for r in rs]), np.concatenate([r[1] for r in rs])

    def read(self, data: dict) -> np.ndarray:
        return np.concatenate([np.asarray(p.read(data)).reshape(-1) for p in self.parts])

    def write(self, data: dict, values) -> None:
        v = np.asarray(values).reshape(-1)
        off = 0
        for p, n in zip(self.parts, self.sizes, strict=True):
            p.write(data, v[off:off + n])
            off += int(n)


def as_view(x, what: str):
    """A copy endpoint: TensorView, a Regions/Blocks/Windows field (element order = vertex order) or a
    Concat of them."""
    if isinstance(x, TensorView | Field | Concat):
        return x
    if isinstance(x, Tensor):
        return x.whole()
    raise EmulatorError(f"{what}: expected a Tensor or TensorView, got {type(x).__name__}")


class Field:
    """Base of the per-vertex connections of one codelet field (columnar)."""

    tensor: Tensor
    n: int

    def elems(self) -> np.ndarray:
        """Elements per vertex (int64 array)."""
        raise NotImplementedError

    def regions_per_vertex(self) -> int:
        return 1

    # -- as a Copy endpoint (elements in vertex order) ------------------------------------
    @property
    def name(self) -> str:
        return self.tensor.name

    @property
    def size(self) -> int:
        return int(self.elems().sum())

    def read(self, data: dict) -> np.ndarray:
        return np.asarray(self.gather(data)).reshape(-1)

    def write(self, data: dict, values) -> None:
        self.scatter(data, np.asarray(values).reshape(self.gather_shape()))

    def gather_shape(self) -> tuple:
        return (self.size,)

    def runs(self) -> tuple[np.ndarray, np.ndarray]:
        """(start, length) of contiguous runs, in vertex order."""
        s, e = self.run_bounds()
        return s.ravel(), (e - s).ravel()


class Regions(Field):
    """Vertex v sees flat elements [starts[v], starts[v] + sizes[v]) of ``tensor``."""

    def __init__(self, tensor: Tensor, starts, sizes):
        self.tensor = tensor
        starts, sizes = int_array(starts).ravel(), int_array(sizes)
        self.n = n = len(starts)
        self.regular = sizes.ndim == 0
        sizes = sizes if self.regular else sizes.ravel()
        if not self.regular and len(sizes) != n:
            raise EmulatorError(f"field on tensor '{tensor.name}': {n} starts but {len(sizes)} sizes")
        one = self.regular or (n > 0 and sizes.strides[0] == 0)  # one size for every vertex
        if n:
            # max(starts) + max(sizes) bounds every end: the ends (a full-size sum) only when it passes the end
            lo, shi, smin = int(starts.min()), int(starts.max()), int(sizes.flat[0] if one else sizes.min())
            smax = smin if one else int(sizes.max())
            end = shi + smax
            self._hi = hi = end if one or end <= tensor.size else int(np.add(starts, sizes, dtype=np.int64).max())
            if lo < 0 or hi > tensor.size or smin < 0:
                raise EmulatorError(
                    f"field on tensor '{tensor.name}': a region lies outside its {tensor.size} elements; "
                    f"fix: starts and sizes must stay inside the tensor"
                )
        if tensor.size < 2**31:
            # held as int32 (the per-vertex arrays of a ResNet-50 replica graph's fields and copies are ~1 GB at
            # int64); every value lies inside the tensor.  elems() and run_bounds(), which the compile does
            # arithmetic on, hand out int64.  Both are read-only and held once with equal arrays (shared_arrays).
            # A read-only int32 array (another field's) is held as it is.
            self.starts = share_int32(starts)
            self.sizes = (np.broadcast_to(np.int32(smin), (n,)) if n and smin == smax  # one size for all: no array
                          else share_int32(np.zeros(0, np.int64) if self.regular else sizes))
        else:
            self.starts = starts.astype(np.int64, copy=False)
            self.sizes = (np.full(n, int(sizes), np.int64) if self.regular else sizes.astype(np.int64, copy=False))
        self._idx = None
        self._whole = None

    def elems(self) -> np.ndarray:
        return self.sizes.astype(np.int64)

    @property
    def size(self) -> int:
        """Elements of all vertices (a Copy endpoint's length): the int32 sizes summed as int64, not converted."""
        z = self.sizes
        return int(z[0]) * self.n if self.n and z.strides[0] == 0 else int(z.sum(dtype=np.int64))

    def _access(self):
        """How to gather: ("slice", a, b) one contiguous run in order (a view); ("window", size)
        equal-sized regions (one strided fancy index, no index array); ("index",) otherwise."""
        if self._whole is None:
            s, z = self.starts, self.sizes
            if self.n == 0:
                self._whole = ("slice", 0, 0)
            elif np.array_equal(s[1:], (s + z)[:-1]):
                self._whole = ("slice", int(s[0]), int(s[-1] + z[-1]))
            elif z.min() == z.max() and z[0] > 0:
                self._whole = ("window", int(z[0]))
            else:
                self._whole = ("index",)
        return self._whole

    def index(self) -> np.ndarray:
        if self._idx is None:
            self._idx = _ranges_index(self.starts, self.sizes)
        return self._idx

    def gather(self, data: dict) -> np.ndarray:
        """All vertices' elements concatenated (1-D)."""
        flat = data[self.tensor.id]
        acc = self._access()
        if acc[0] == "slice":
            return flat[acc[1]:acc[2]]
        if acc[0] == "window":
            return np.lib.stride_tricks.sliding_window_view(flat, acc[1])[self.starts].reshape(-1)
        return flat[self.index()]

    def scatter(self, data: dict, values) -> None:
        flat = data[self.tensor.id]
        acc = self._access()
        if acc[0] == "slice":
            flat[acc[1]:acc[2]] = values
        elif acc[0] == "window":
            win = np.lib.stride_tricks.sliding_window_view(flat, acc[1], writeable=True)
            win[self.starts] = np.broadcast_to(values, (self.size,)).reshape(self.n, acc[1])
        else:
            flat[self.index()] = values

    def vertex_view(self, data: dict, v: int) -> np.ndarray:
        s = int(self.starts[v])
        return data[self.tensor.id][s:s + int(self.sizes[v])]

    def run_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """(start, stop) of every contiguous run, shape (n, 1)."""
        s = self.starts.astype(np.int64)
        return s[:, None], (s + self.sizes)[:, None]


class Blocks(Field):
    """Vertex v sees block ``index[v]`` (block coordinates) of shape ``block_shape`` of ``tensor``."""

    def __init__(self, tensor: Tensor, block_shape, index):
        self.tensor = tensor
        self.block_shape = tuple(int(b) for b in block_shape)
        nd = len(tensor.shape)
        if len(self.block_shape) != nd or any(
            b <= 0 or s % b for s, b in zip(tensor.shape, self.block_shape, strict=True)
        ):
            raise EmulatorError(
                f"field on tensor '{tensor.name}': block shape {self.block_shape} does not divide shape "
                f"{tensor.shape}; fix: use a dividing block shape or Regions"
            )
        self.index = np.asarray(index, np.int64).reshape(-1, nd)
        self.n = len(self.index)
        self.grid = tuple(s // b for s, b in zip(tensor.shape, self.block_shape, strict=True))
        if self.n and (self.index.min() < 0 or np.any(self.index.max(axis=0) >= np.array(self.grid))):
            raise EmulatorError(
                f"field on tensor '{tensor.name}': block index outside the block grid {self.grid}"
            )
        self.block_elems = int(np.prod(self.block_shape))

    def elems(self) -> np.ndarray:
        return np.full(self.n, self.block_elems, np.int64)

    @property
    def size(self) -> int:
        return self.n * self.block_elems

    def regions_per_vertex(self) -> int:
        return _mapping.runs_per_block(self.tensor.shape, self.block_shape)

    def _blocked(self, flat: np.ndarray) -> np.ndarray:
        nd = len(self.block_shape)
        split = []
        for g, b in zip(self.grid, self.block_shape, strict=True):
            split += [g, b]
        v = flat.reshape(split)
        return v.transpose([2 * i for i in range(nd)] + [2 * i + 1 for i in range(nd)])

    def is_identity(self) -> bool:
        """Vertex v sees block v of the grid in row-major order (gather can be a reshape)."""
        if not hasattr(self, "_identity"):
            ok = self.n == int(np.prod(self.grid))
            if ok:
                strides = np.cumprod((self.grid[1:] + (1,))[::-1])[::-1]
                ok = bool(np.array_equal(self.index @ strides, np.arange(self.n)))
            self._identity = ok
        return self._identity

    def gather(self, data: dict) -> np.ndarray:
        """Array (n_vertices, *block_shape)."""
        blocked = self._blocked(data[self.tensor.id])
        if self.is_identity():
            return blocked.reshape((self.n, *self.block_shape))
        return blocked[tuple(self.index.T)]

    def scatter(self, data: dict, values) -> None:
        flat = data[self.tensor.id]
        blocked = self._blocked(flat)
        if self.is_identity():
            v = blocked.reshape((self.n, *self.block_shape))
            if np.shares_memory(v, flat):
                v[...] = values
                return
        blocked[tuple(self.index.T)] = values

    def vertex_view(self, data: dict, v: int) -> np.ndarray:
        return self._blocked(data[self.tensor.id])[tuple(self.index[v])]

    def run_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """(start, stop) of every contiguous run, shape (n, runs_per_block)."""
        return _mapping.block_intervals(self.tensor.shape, self.block_shape, self.index)

    def gather_shape(self) -> tuple:
        return (self.n, *self.block_shape)


class Windows(Field):
    """Vertex v sees the block of shape ``block_shape`` whose first element is at element coordinates
    ``origins[v]`` of ``tensor``.  Unlike :class:`Blocks` the blocks need not tile the tensor on a grid:
    an uneven split (Poplar's planners cut a dimension of M elements into p parts of ceil(M/p) and
    floor(M/p) elements) is a few Windows fields, one per block shape."""

    def __init__(self, tensor: Tensor, block_shape, origins):
        self.tensor = tensor
        self.block_shape = tuple(int(b) for b in block_shape)
        nd = len(tensor.shape)
        if len(self.block_shape) != nd or any(b <= 0 for b in self.block_shape):
            raise EmulatorError(f"field on tensor '{tensor.name}': window shape {self.block_shape} does not match "
                                f"its {nd} dimensions")
        self.origins = np.asarray(origins, np.int64).reshape(-1, nd)
        self.n = len(self.origins)
        shp = np.array(tensor.shape, np.int64)
        if self.n and (self.origins.min() < 0 or np.any(self.origins.max(axis=0) + np.array(self.block_shape) > shp)):
            raise EmulatorError(f"field on tensor '{tensor.name}': a window of shape {self.block_shape} reaches "
                                f"outside {tensor.shape}")
        self.block_elems = int(np.prod(self.block_shape))
        self.strides = np.array([int(np.prod(tensor.shape[i + 1:])) for i in range(nd)], np.int64)

    def elems(self) -> np.ndarray:
        return np.full(self.n, self.block_elems, np.int64)

    @property
    def size(self) -> int:
        return self.n * self.block_elems

    def regions_per_vertex(self) -> int:
        return _mapping.runs_per_block(self.tensor.shape, self.block_shape)

    def start_offsets(self) -> np.ndarray:
        """Flat element offset of every window's origin."""
        return self.origins @ self.strides

    def run_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """(start, stop) of every contiguous run, shape (n, runs_per_block)."""
        return _mapping.window_intervals(self.tensor.shape, self.block_shape, self.origins)

    def _nd(self, flat: np.ndarray) -> np.ndarray:
        return flat.reshape(self.tensor.shape)

    def gather(self, data: dict) -> np.ndarray:
        """Array (n_vertices, *block_shape)."""
        win = np.lib.stride_tricks.sliding_window_view(self._nd(data[self.tensor.id]), self.block_shape)
        return win[tuple(self.origins.T)].reshape((self.n, *self.block_shape))

    def scatter(self, data: dict, values) -> None:
        win = np.lib.stride_tricks.sliding_window_view(self._nd(data[self.tensor.id]), self.block_shape,
                                                       writeable=True)
        win[tuple(self.origins.T)] = np.asarray(values).reshape((self.n, *self.block_shape))

    def vertex_view(self, data: dict, v: int) -> np.ndarray:
        o = self.origins[v]
        sl = tuple(slice(int(a), int(a) + b) for a, b in zip(o, self.block_shape, strict=True))
        return self._nd(data[self.tensor.id])[sl]

    def gather_shape(self) -> tuple:
        return (self.n, *self.block_shape)


class HostBuffer:
    """A buffer in host memory (``kind="host"``) or streaming memory (``kind="streaming"``, DDR)."""

    def __init__(self, bid: int, name: str, shape, dtype: str, kind: str):
        if kind not in ("host", "streaming"):
            raise EmulatorError(f"host buffer '{name}': kind must be 'host' or 'streaming', got {kind!r}")
        self.id = bid
        self.name = name
        self.shape = tuple(int(s) for s in shape)
        self.dtype = dtype
        self.kind = kind
        self.size = int(np.prod(self.shape)) if self.shape else 1
        self.itemsize = np.dtype(DTYPES[dtype]).itemsize
        self.nbytes = self.size * self.itemsize

    def __repr__(self) -> str:
        return f"HostBuffer({self.name!r}, {self.shape}, {self.dtype}, {self.kind})"


class ComputeSet:
    def __init__(self, cid: int, name: str, op: str | None):
        self.id = cid
        self.name = name
        self.op = op
        self.groups: list[VertexGroup] = []

    @property
    def num_vertices(self) -> int:
        return sum(g.n for g in self.groups)

    def __repr__(self) -> str:
        return f"ComputeSet({self.name!r}, {len(self.groups)} groups, {self.num_vertices} vertices)"


class VertexGroup:
    """``n`` vertices of one codelet in one compute set, stored as arrays."""

    def __init__(self, gid: int, cs: ComputeSet, codelet, tiles: np.ndarray, fields: dict, params: dict):
        self.id = gid
        self.cs = cs
        self.codelet = codelet
        self.tiles = tiles
        self.n = len(tiles)
        self.fields = fields
        self.params = params
        self._cycles = None
        self.tile_counts = None  # (vertices per tile Elementwise.cycles counted, till compile_execute reads it)

    def __repr__(self) -> str:
        return f"VertexGroup({self.codelet.name!r} x {self.n} in {self.cs.name!r})"

    def param(self, name: str, default=None):
        """Per-vertex parameter array (or scalar) named ``name``."""
        return self.params.get(name, default)

    def cycles(self, target: Target) -> np.ndarray:
        if self._cycles is None:
            c = self.codelet.cycles(self, target)
            held = getattr(type(self.codelet).cycles, "held_as_is", False) and getattr(c, "dtype", None) == np.int32
            if not held and (c := np.asarray(c, dtype=np.int64)).ndim == 0:
                c = np.broadcast_to(c, (self.n,))  # read-only, no memory per vertex
            elif not held and len(c) and 0 <= int(c.min()) and int(c.max()) <= np.iinfo(np.int32).max:
                c = c.astype(np.int32)  # kept for the profile; 21 M vertices in a ResNet-50 replica graph
            self._cycles = c
            if self._cycles.shape != (self.n,):
                raise EmulatorError(f"codelet '{self.codelet.name}': cycles() returned shape {self._cycles.shape}, "
                                    f"expected ({self.n},)")
        return self._cycles


class Graph:
    """Tensors, host buffers and compute sets over a :class:`Target`."""

    def __init__(self, target: Target):
        self.target = target
        self.tensors: list[Tensor] = []
        self.host_buffers: list[HostBuffer] = []
        self.compute_sets: list[ComputeSet] = []
        self.groups: list[VertexGroup] = []
        self.op_info: dict[str, dict] = {}
        self._names: dict[str, object] = {}
        self.recorder = None  # while an op is recorded for replay (backends/op_memo.Recorder)

    def _name(self, name: str, obj) -> None:
        if not isinstance(name, str) or not name:
            raise EmulatorError(f"graph: a name must be a non-empty string, got {name!r}")
        if name in self._names:
            raise EmulatorError(f"graph: name '{name}' is already used by {self._names[name]!r}; fix: pick a unique name")
        self._names[name] = obj

    def get(self, name: str):
        try:
            return self._names[name]
        except KeyError:
            raise EmulatorError(f"graph: no tensor or host buffer named '{name}'") from None

    # -- tensors ------------------------------------------------------------------------
    def add_variable(self, name: str, shape, dtype, mapping: Mapping | None = None, op: str | None = None) -> Tensor:
        dt = check_dtype(dtype, f"tensor '{name}'")
        try:
            shape = tuple(int(s) for s in shape)
        except TypeError:
            raise EmulatorError(f"tensor '{name}': shape must be a tuple of ints, got {shape!r}") from None
        if any(s < 0 for s in shape):
            raise EmulatorError(f"tensor '{name}': negative dimension in shape {shape}")
        t = Tensor(self, len(self.tensors), name, shape, dt, "variable", op)
        self._name(name, t)
        self.tensors.append(t)
        if mapping is not None:
            self.set_mapping(t, mapping)
        return t

    def add_constant(self, name: str, values, dtype=None, mapping: Mapping | None = None, op: str | None = None) -> Tensor:
        arr = np.asarray(values)
        dt = check_dtype(dtype if dtype is not None else arr.dtype, f"constant '{name}'")
        t = self.add_variable(name, arr.shape, dt, mapping=None, op=op)
        t.kind = "constant"
        t.value = np.ascontiguousarray(arr, dtype=DTYPES[dt]).ravel().copy()
        if mapping is not None:
            self.set_mapping(t, mapping)
        return t

    def set_mapping(self, tensor: Tensor, mapping: Mapping) -> None:
        if not isinstance(mapping, Mapping):
            raise EmulatorError(f"tensor '{tensor.name}': mapping must be a mapping.Mapping, got {type(mapping).__name__}")
        mapping.check(tensor.name, tensor.size, self.target.num_tiles)
        tensor.mapping = _mapping._merge(mapping)
        if self.recorder is not None:
            self.recorder.set_mapping(tensor)

    def add_host_buffer(self, name: str, shape, dtype, kind: str = "host") -> HostBuffer:
        dt = check_dtype(dtype, f"host buffer '{name}'")
        b = HostBuffer(len(self.host_buffers), name, shape, dt, kind)
        self._name(name, b)
        self.host_buffers.append(b)
        return b

    def add_op(self, name: str, type: str | None = None, precision: str | None = None,  # noqa: A002
               plan: str | None = None, min_bytes: int | None = None, flops: int | None = None) -> str:
        """Record a model op for the profile's ``ops`` table (idempotent per name; later calls
        update the given fields).  Unset fields are computed by the emulator: ``type`` from the
        name, ``precision`` from its tensors, ``min_bytes`` from the tensors it reads from / writes
        for other ops, ``flops`` from its codelets.  Returns ``name`` (pass it as ``op=``)."""
        if not isinstance(name, str) or not name:
            raise EmulatorError(f"graph.add_op: op name must be a non-empty string, got {name!r}")
        if precision is not None and precision not in ("fp16", "fp32", "int32"):
            raise EmulatorError(f"op '{name}': precision must be fp16, fp32 or int32, got {precision!r}")
        info = self.op_info.setdefault(name, {})
        if self.recorder is not None:
            self.recorder.add_op(name)
        for k, v in (("type", type), ("precision", precision), ("plan", plan),
                     ("min_bytes", min_bytes), ("flops", flops)):
            if v is not None:
                info[k] = v
        return name

    # -- compute ------------------------------------------------------------------------
    def add_compute_set(self, name: str, op: str | None = None) -> ComputeSet:
        cs = ComputeSet(len(self.compute_sets), name, op)
        self.compute_sets.append(cs)
        return cs

    def add_vertices(self, cs: ComputeSet, codelet, tiles, fields: dict | None = None,
                     params: dict | None = None) -> VertexGroup:
        fields = dict(fields or {})
        params = dict(params or {})
        if not isinstance(cs, ComputeSet) or cs not in self.compute_sets:
            raise EmulatorError(f"add_vertices: {cs!r} is not a compute set of this graph")
        what = f"vertices of '{codelet.name}' in compute set '{cs.name}'"
        tiles = int_array(tiles)
        tiles = tiles if tiles.ndim == 1 else tiles.ravel()  # (the caller's array itself: a held one stays held)
        n = len(tiles)
        nt = self.target.num_tiles
        if n and (tiles.min() < 0 or tiles.max() >= nt):
            bad = int(tiles[(tiles < 0) | (tiles >= nt)][0])
            raise EmulatorError(f"{what}: tile index {bad} out of range 0..{nt - 1}; fix: use tiles of the target")
        missing = set(codelet.fields) - set(fields)
        extra = set(fields) - set(codelet.fields)
        if missing or extra:
            raise EmulatorError(
                f"{what}: fields {sorted(fields)} do not match the codelet's {sorted(codelet.fields)}"
                + (f" (missing {sorted(missing)})" if missing else "") + (f" (unknown {sorted(extra)})" if extra else "")
            )
        for fname, f in fields.items():
            if not isinstance(f, Field):
                raise EmulatorError(f"{what}: field '{fname}' must be tensor.regions(...) or tensor.blocks(...)")
            if f.tensor.graph is not self:
                raise EmulatorError(f"{what}: field '{fname}' connects tensor '{f.tensor.name}' of another graph")
            if f.n != n:
                raise EmulatorError(
                    f"{what}: field '{fname}' has {f.n} connections for {n} vertices; fix: one per vertex"
                )
            if codelet.fields[fname] != "in" and f.tensor.kind == "constant":
                raise EmulatorError(f"{what}: field '{fname}' writes constant '{f.tensor.name}'; fix: use a variable")
        for pname, p in list(params.items()):
            arr = np.asarray(p)
            if arr.ndim > 0 and len(arr) != n:
                raise EmulatorError(f"{what}: param '{pname}' has {len(arr)} values for {n} vertices")
            params[pname] = arr
        # int32: a tile index per vertex (21 M vertices in a ResNet-50 replica graph); concatenations and the
        # cost model's per-(tile, worker) keys stay far inside int32 (num_tiles x threads)
        g = VertexGroup(len(self.groups), cs, codelet, share_int32(tiles), fields, params)
        codelet.check(g)
        cs.groups.append(g)
        self.groups.append(g)
        return g
