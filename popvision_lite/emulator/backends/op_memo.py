"""Ops built once per run and replayed into the run's other stage graphs (issue 49).

Every distinct stage graph of a pipelined BERT / GPT run builds the same encoder layer body again
(``transformer.build_bert_stage`` places it the same in every stage graph).  An op's construction (its plan,
tensors, mappings, vertex groups, copies) is a function of what it reads: its arguments (shapes, dtypes, kinds,
names, the view indices and the mappings of its operand tensors, whether an operand was used before), and the op
library's state (IPU, rotating start tile, partials type, the counters its unique names take, and the available
memory proportion where the op read it: a matmul's or convolution's plan).  :class:`OpMemo` records what an op
added to the graph as a template, keyed by those reads; a later
call in another graph of the run that reads the same is replayed from the template - the same tensors, mappings,
compute sets, vertex groups and programs, in the same order, with fresh ids - instead of being built again.  The
graph is the one building it gives (tests/emulator/test_op_memo.py compares them whole).

What a replay does not know how to reproduce makes the op unmemoizable (built every time): a program that
refers to a tensor or compute set that is neither an operand nor new, a host buffer, programs taken away.
Only graphs built without values (timing-only stage graphs) use it.
"""

from __future__ import annotations

import copy

import numpy as np

from popvision_lite.emulator import programs as P
from popvision_lite.emulator.graph import Concat, Field, Tensor, TensorView, VertexGroup
from popvision_lite.emulator.ops.context import View


class _Unmemoizable(Exception):
    """The op did something a template cannot reproduce."""


class _Slot:
    """Operand ``i`` of an op, in a template."""

    __slots__ = ("i",)

    def __init__(self, i: int):
        self.i = i


class _ReadTensor(Tensor):
    """An operand tensor while an op is recorded (its class swapped for the op's duration, then back): notes the
    op's reads of its mapping in the recorder of its graph (the mapping is compared before a replay only where
    the op read it: a matmul reads its A operand's shape, never its layout)."""

    @property
    def mapping(self):
        m = self.__dict__["mapping"]
        self.graph.recorder.read_mapping(self, m)
        return m

    @mapping.setter
    def mapping(self, m) -> None:
        self.__dict__["mapping"] = m


class Recorder:
    """What an op reads from and does to the op library's state beyond its graph additions (set on the op
    context and the graph while one op is recorded)."""

    def __init__(self, n_tensors: int):
        self.n_tensors = n_tensors
        self.names: dict[str, int] = {}  # unique() names -> their count before the op
        self.used_reads: list = []  # (tensor, is_used) of tensors that existed before
        self.marked: list = []  # tensors mark_used was called with
        self.remapped: list = []  # tensors that existed before, given a mapping
        self.op_names: list[str] = []  # graph.add_op names, in first-call order
        self.mapping_reads: dict[int, tuple] = {}  # (tensor, its mapping) of the tensors that existed before
        self.amp_read = False  # whether the op read the available memory proportion (OpContext notes it)
        self.bad = False

    def unique(self, name: str, count: int) -> None:
        self.names.setdefault(name, count)

    def is_used(self, tensor, result: bool) -> None:
        if tensor.id < self.n_tensors:
            self.used_reads.append((tensor, result))

    def read_mapping(self, tensor, mapping) -> None:
        """A read of the mapping the op was given (not one it gave the tensor itself)."""
        if all(t is not tensor for t in self.remapped):
            self.mapping_reads.setdefault(id(tensor), (tensor, mapping))

    def set_mapping(self, tensor) -> None:
        if tensor.id < self.n_tensors:
            self.remapped.append(tensor)

    def add_op(self, name: str) -> None:
        if name not in self.op_names:
            self.op_names.append(name)


def _tensor_key(t, operands: list) -> tuple:
    """An operand tensor's shape, dtype and kind, and its place among the op's distinct operands (``operands``):
    not its name or mapping, which the entry compares only where the op read them."""
    for i, o in enumerate(operands):
        if o is t:
            return ("T", i, t.shape, t.dtype, t.kind)
    operands.append(t)
    return ("T", len(operands) - 1, t.shape, t.dtype, t.kind)


def _arg_key(x, operands: list, arrays: list):
    """The hashable part of an argument's reads; operand tensors go to ``operands`` and arrays whose contents
    count to ``arrays`` (compared, not hashed)."""
    if isinstance(x, Tensor):
        return _tensor_key(x, operands)
    if isinstance(x, View):
        base = _tensor_key(x.base, operands)
        if x._index is None:  # a lazy transpose or repeat
            return ("V", base, x.axes, x.reps)
        arrays.append(x.index)
        return ("V", base, x.index.shape)
    if isinstance(x, np.ndarray):
        arrays.append(x)
        return ("A", x.shape, x.dtype.str)
    if isinstance(x, tuple | list):
        return (type(x).__name__, tuple(_arg_key(v, operands, arrays) for v in x))
    if x is None or isinstance(x, str | int | float | bool | np.generic):
        return ("S", type(x).__name__, repr(x))
    raise _Unmemoizable(type(x).__name__)


def _same_mapping(a, b) -> bool:
    if a is b:
        return True
    if a is None or b is None or len(a) != len(b):
        return False
    return bool(np.array_equal(a.tile, b.tile) and np.array_equal(a.start, b.start) and np.array_equal(a.stop, b.stop))


class _Clone:
    """Copies of an op's graph additions with every tensor and compute set exchanged through ``tmap`` /
    ``csmap`` (by identity); objects met twice are copied once (a field shared by a copy and a vertex group stays
    shared)."""

    def __init__(self, tmap: dict, csmap: dict):
        self.tmap, self.csmap, self.seen = tmap, csmap, {}

    def tensor(self, t):
        try:
            return self.tmap[id(t)]
        except KeyError:
            raise _Unmemoizable(f"tensor {t!r}") from None

    def obj(self, x):
        """A field, view, Concat, View, tensor or program."""
        hit = self.seen.get(id(x))
        if hit is not None:
            return hit
        if isinstance(x, Tensor | _Slot):
            out = self.tensor(x)
        elif isinstance(x, Field | TensorView):
            out = copy.copy(x)
            out.tensor = self.tensor(x.tensor)
        elif isinstance(x, Concat):
            out = copy.copy(x)
            out.parts = [self.obj(p) for p in x.parts]
            out.tensor = self.tensor(x.tensor)
        elif isinstance(x, View):
            out = View(self.tensor(x.base), x._index, *((x.axes, x.reps) if x._index is None else (None, None)))
        elif isinstance(x, P.Program):
            out = self.program(x)
        elif isinstance(x, tuple | list):
            out = type(x)(self.obj(v) for v in x)
        elif x is None or isinstance(x, str | int | float | bool | np.ndarray | np.generic):
            return x
        else:
            raise _Unmemoizable(type(x).__name__)
        self.seen[id(x)] = out
        return out

    def program(self, p):
        out = copy.copy(p)
        if isinstance(p, P.Copy):
            out.src, out.dst = self.obj(p.src), self.obj(p.dst)
        elif isinstance(p, P.Execute):
            cs = self.csmap.get(id(p.cs))
            if cs is None:
                raise _Unmemoizable(f"compute set {p.cs!r}")
            out.cs = cs
        elif isinstance(p, P.Sequence):
            out.programs = [self.obj(c) for c in p.programs]
            out.call_args = tuple(self.obj(a) for a in p.call_args)
        elif isinstance(p, P.Repeat):
            out.body = self.obj(p.body)
        elif not isinstance(p, P.Sync):
            raise _Unmemoizable(p.kind)
        return out

    def group(self, g, gid: int, cs):
        out = VertexGroup(gid, cs, g.codelet, g.tiles, {k: self.obj(f) for k, f in g.fields.items()}, g.params)
        out._cycles = g._cycles
        return out


def _copy_cs(cs, cid: int, clone: _Clone, first_gid: int, graph=None):
    """A copy of compute set ``cs`` (id ``cid``) and its groups (ids from ``first_gid``), put in ``graph``."""
    out = copy.copy(cs)
    out.id = cid
    out.groups = []
    clone.csmap[id(cs)] = out
    for g in cs.groups:
        ng = clone.group(g, first_gid + len(out.groups), out)
        out.groups.append(ng)
        if graph is not None:
            graph.groups.append(ng)
    return out


def _names_read(e: _Entry, operands: list) -> list:
    """(operand, name) of the operands whose name is part of a name the op gave (a program, compute set,
    tensor or op record): those names are compared before a replay, the others' are not read."""
    given = [t.name for t in e.tensors] + [cs.name for cs in e.cs] + [r["name"] for r in e.records]
    stack = list(e.programs)
    while stack:
        p = stack.pop()
        given.append(p.name)
        stack.extend(p.children())
    return [(i, t.name) for i, t in enumerate(operands) if any(t.name in s for s in given)]


class _Entry:
    """One recorded op: its reads (``operands`` with their mappings, ``arrays``, the state) and its template."""

    __slots__ = ("mapping_reads", "name_reads", "arrays", "names", "used_reads", "rot_after", "counts_after",
                 "tensors", "cs", "programs", "records", "op_info", "remapped", "marked", "result", "amp")


class OpMemo:
    """Recorded ops of one run, replayed where another graph of the run calls an op with the same reads."""

    def __init__(self):
        self._entries: dict[tuple, list[_Entry]] = {}
        self.hits = self.misses = 0

    def call(self, ctx, fn, args: tuple):
        """``fn(ctx, *args)``, replayed from a template where one was recorded with the same reads."""
        operands, arrays = [], []
        try:
            akey = tuple(_arg_key(a, operands, arrays) for a in args)
        except _Unmemoizable:
            return fn(ctx, *args)
        # the available memory proportion is not in the key: an entry compares it only where its op read it
        key = (fn, akey, ctx.ipu, ctx.rotation, ctx.io_tiles, ctx.partials_dtype, ctx.precision, ctx.dtype,
               id(ctx.target))
        for e in self._entries.get(key, ()):
            if (e.amp is None or e.amp == float(ctx._amp)) and self._matches(e, ctx, operands, arrays):
                self.hits += 1
                return self._replay(e, ctx, operands)
        self.misses += 1
        return self._record(key, ctx, fn, args, operands, arrays)

    @staticmethod
    def _matches(e: _Entry, ctx, operands: list, arrays: list) -> bool:
        if any(not _same_mapping(m, operands[i].mapping) for i, m in e.mapping_reads):
            return False
        if any(operands[i].name != n for i, n in e.name_reads):
            return False
        if any(a is not b and not np.array_equal(a, b) for a, b in zip(e.arrays, arrays, strict=True)):
            return False
        if any(ctx._counts.get(n, 0) != c for n, c in e.names.items()):
            return False
        return all(ctx.is_used(operands[i]) == r for i, r in e.used_reads)

    def _record(self, key, ctx, fn, args, operands, arrays):
        g = ctx.graph
        n_t, n_cs, n_g, n_p, n_r, n_hb = (len(g.tensors), len(g.compute_sets), len(g.groups), len(ctx.programs),
                                          len(ctx.records), len(g.host_buffers))
        last_prog = ctx.programs[-1] if n_p else None
        rec = Recorder(n_t)
        ctx.recorder = g.recorder = rec
        for t in operands:
            t.__class__ = _ReadTensor
        try:
            result = fn(ctx, *args)
        finally:
            ctx.recorder = g.recorder = None
            for t in operands:
                t.__class__ = Tensor
        if (rec.bad or len(g.host_buffers) != n_hb or len(ctx.programs) < n_p
                or (n_p and ctx.programs[n_p - 1] is not last_prog)
                or len(g.groups) - n_g != sum(len(cs.groups) for cs in g.compute_sets[n_cs:])):
            return result
        try:
            e = self._template(ctx, rec, operands, result, n_t, n_cs, n_p, n_r)
        except _Unmemoizable:
            return result
        e.arrays, e.names = list(arrays), dict(rec.names)
        e.amp = float(ctx._amp) if rec.amp_read else None
        self._entries.setdefault(key, []).append(e)
        return result

    @staticmethod
    def _template(ctx, rec: Recorder, operands, result, n_t, n_cs, n_p, n_r) -> _Entry:
        g = ctx.graph
        e = _Entry()
        tmap = {id(t): _Slot(i) for i, t in enumerate(operands)}
        e.tensors = []
        for t in g.tensors[n_t:]:
            tt = copy.copy(t)
            tt.graph = None
            tmap[id(t)] = tt
            e.tensors.append(tt)
        clone = _Clone(tmap, {})
        e.cs = [_copy_cs(cs, -1, clone, -1) for cs in g.compute_sets[n_cs:]]
        e.programs = [clone.obj(p) for p in ctx.programs[n_p:]]
        e.result = clone.obj(result)
        e.used_reads = [(clone.tensor(t).i, r) for t, r in rec.used_reads]  # operands only (existed before)
        e.mapping_reads = [(clone.tensor(t).i, m) for t, m in rec.mapping_reads.values()]
        e.remapped = [(clone.tensor(t).i, t.mapping) for t in rec.remapped]
        e.marked = [clone.tensor(t) for t in rec.marked]
        e.rot_after = ctx.rotation
        e.counts_after = {n: ctx._counts[n] for n in rec.names}
        e.records = [dict(r) for r in ctx.records[n_r:]]
        e.op_info = [(n, dict(g.op_info[n])) for n in rec.op_names]
        e.name_reads = _names_read(e, operands)
        return e

    @staticmethod
    def _replay(e: _Entry, ctx, operands):
        g = ctx.graph
        slots = dict(enumerate(operands))
        tmap = {}
        clone = _Clone(tmap, {})
        clone.tensor = lambda t: slots[t.i] if isinstance(t, _Slot) else tmap[id(t)]  # noqa: E731
        for tt in e.tensors:
            nt = copy.copy(tt)
            nt.graph = g
            nt.id = len(g.tensors)
            g._name(nt.name, nt)
            g.tensors.append(nt)
            tmap[id(tt)] = nt
        for cs in e.cs:
            g.compute_sets.append(_copy_cs(cs, len(g.compute_sets), clone, len(g.groups), g))
        for i, m in e.remapped:
            slots[i].mapping = m
        for t in e.marked:
            ctx.mark_used(clone.tensor(t))
        for p in e.programs:
            ctx.add(clone.obj(p))
        for name, info in e.op_info:
            g.op_info.setdefault(name, {}).update(info)
        ctx.records.extend(dict(r) for r in e.records)
        ctx._counts.update(e.counts_after)
        ctx.rotation = e.rot_after
        return clone.obj(e.result)
