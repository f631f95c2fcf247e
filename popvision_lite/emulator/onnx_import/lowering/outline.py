"""Outlining of an imported graph's repeated blocks (timing-only runs), as PopART outlines repeated subgraphs
into one function called from each position (``SessionOptions.enableOutlining``) and as the bundled models
emulate one body per block kind (``models/resnet.py: outlined``, ``docs/decisions/0019``).

The blocks are the repeated layers ``blocks.find_blocks`` finds (node names or torch.export scopes ending in a
layer number).  Two blocks are the same body when their nodes are the same op sequence with the same
attributes, the same wiring, the same initializer shapes (and the same values for initializers that are not
weights: scalars, integer tables) and the same inputs from outside the block: shapes, dtypes, layouts (row-major
or rows of channels, a view's index) and constant values.  The first block of each body is lowered; every later
one is a call of that block's programs (``EmulatorBackend.replay``), its outputs bound to the body's.  Cycles of
the emulator's ops do not depend on data, so a call costs what a separate copy would, up to the tile rotation of
the block it stands for (its operands sit on other tiles; measured: docs/onnx.md "Outlining"); the code, vertex state
and exchange code of the body exist once (the compiler compiles a program object once).  The op library picks
tiles from a rotating start (``OpContext.tiles_array``), and a block advances the rotation by the same count as
the block before it, so each call makes the called block's own weights, named after its initializers, laid out as
the body's: a layout taken from a rotated tile list is shifted by the offset that list would have had at the
call, one from the plain tile list is the same (:func:`_layouts`): the tiles they would have without outlining
(read by no program, they are always live, as weights are).  The rotation counter then advances as the
block's ops would have advanced it, so the ops after a call are placed as without outlining.

Full numerics need every block's own weights and training needs every block's own backward pass, so only
timing-only inference runs on one IPU per replica are outlined."""

from __future__ import annotations

import hashlib
from contextlib import contextmanager

import numpy as np

from popvision_lite.emulator.mapping import intervals
from popvision_lite.emulator.ops.context import View

from .blocks import find_blocks
from .values import Act


def _digest(arr) -> str:
    a = np.ascontiguousarray(np.asarray(arr))
    return f"{a.dtype.str}{a.shape}" + hashlib.sha1(a.tobytes()).hexdigest()


def _attr_signature(node) -> tuple:
    from onnx import AttributeProto, helper, numpy_helper

    out = []
    for a in node.attribute:
        v = helper.get_attribute_value(a)
        if a.type == AttributeProto.TENSOR:
            v = _digest(numpy_helper.to_array(v))
        elif a.type in (AttributeProto.GRAPH, AttributeProto.GRAPHS, AttributeProto.TENSORS,
                        AttributeProto.SPARSE_TENSOR, AttributeProto.SPARSE_TENSORS, AttributeProto.TYPE_PROTO,
                        AttributeProto.TYPE_PROTOS):
            v = hashlib.sha1(a.SerializeToString()).hexdigest()
        elif isinstance(v, list):
            v = tuple(v)
        out.append((a.name, int(a.type), v))
    return tuple(sorted(out))


def _offset(rotation, n) -> int:
    """First tile of ``OpContext.tiles_array`` at counter ``rotation`` over ``n`` tiles (an even offset)."""
    return (rotation % n) & ~1


@contextmanager
def _layouts(ctx):
    """While lowering a body: {tensor id: (the rotation counter of the rotated tile list its last layout was
    taken from, or None when from the plain list; how many layouts it was given)}.

    The op library lays a tensor out from a tile list taken (``tiles_array``) just before (a weight when made)
    or earlier in the same op (by its first matmul's plan): the latest rotated list since the op began whose
    first ``rotate`` tiles hold every tile of the layout, else the plain list (a layout over every tile).  The
    context's and graph's methods are wrapped on the instances for the body's lowering only."""
    graph = ctx.graph
    n = len(ctx.tiles())
    how: dict = {}
    taken: list = []  # (rotation counter, rotate) of each tile list taken since the op began, latest last
    tiles_array, set_mapping, begin_op = ctx.tiles_array, graph.set_mapping, ctx.begin_op

    def tiles_logged(rotate=0):
        taken.append((ctx.rotation, int(rotate)))
        return tiles_array(rotate)

    def set_logged(tensor, mapping):
        set_mapping(tensor, mapping)
        used = np.unique(np.asarray(mapping.tile) % n)
        rot = next((rot for rot, k in reversed(taken) if 0 < k < n and len(used) <= k
                    and np.isin(used, (_offset(rot, n) + np.arange(k)) % n).all()), None)
        how[tensor.id] = (rot, how.get(tensor.id, (None, 0))[1] + 1)

    def begin_logged(*args, **kw):
        del taken[:-1]  # a weight made just before the op may be laid out from the list taken last
        return begin_op(*args, **kw)

    ctx.tiles_array, graph.set_mapping, ctx.begin_op = tiles_logged, set_logged, begin_logged
    try:
        yield how
    finally:
        del ctx.tiles_array, graph.set_mapping, ctx.begin_op  # the class methods again


class Outliner:
    """Lowers a graph block by block, each distinct body once (see the module docstring)."""

    def __init__(self, low):
        self.low = low
        self.nodes = low.graph.node
        self.blocks = find_blocks(self.nodes)
        self.producer = {o: i for i, n in enumerate(self.nodes) for o in n.output if o}
        bodies: dict = {}
        self.body = []      # per block: the index of its static body (op sequence, wiring, attributes)
        self.external = []  # per block: the names it reads from outside itself, in order of first use
        self.inits = []     # per block: the initializers it reads, in order of first use
        for s, e in self.blocks:
            sig, ext = self._static_signature(s, e)
            self.body.append(bodies.setdefault(sig, len(bodies)))
            self.external.append(ext)
            self.inits.append(list(dict.fromkeys(
                src for j in range(s, e) for x in self.nodes[j].input if x and (src := self._initializer(x)))))
        self.reps: dict = {}     # (body, inputs signature) -> the block lowered for it
        self.made: dict = {}     # lowered block -> (rotation at its start and end, weights it made, ops)
        self.calls = 0           # blocks emulated as calls of another block's programs
        self.weight_names: set = set()  # weights the calls made

    def _initializer_names(self, rep, b) -> dict:
        """{initializer read by block ``rep``: the one block ``b`` reads in its place}."""
        (rs, rend), (s, _) = self.blocks[rep], self.blocks[b]
        out = {}
        for j in range(rend - rs):
            for x, y in zip(self.nodes[rs + j].input, self.nodes[s + j].input, strict=True):
                if x and self._initializer(x) is not None:
                    out.setdefault(x, y)
        return out

    @staticmethod
    def _rename(name, names, b) -> str:
        """A lowered weight's name (an initializer's, or one with suffixes: ``/T``, ``/hwio``, ...) for the
        called block ``b``."""
        base = name
        while base not in names and "/" in base:
            base = base.rsplit("/", 1)[0]
        return names[base] + name[len(base):] if base in names else f"{name}@block{b}"

    @classmethod
    def applies(cls, low) -> bool:
        """Outlining is for timing-only inference on one IPU per replica, on the emulator backend."""
        be = low.be
        return (not low.training and low.ipus == 1 and getattr(be, "needs_values", True) is False
                and hasattr(be, "replay") and hasattr(getattr(be, "ctx", None), "rotation"))

    def _static_signature(self, s, e):
        low = self.low
        produced: dict = {}
        ext: dict = {}
        sig = []
        for j in range(s, e):
            n = self.nodes[j]
            ins = []
            for x in n.input:
                if not x:
                    ins.append(None)
                elif x in produced:
                    ins.append(("in", *produced[x]))
                elif (src := self._initializer(x)) is not None:
                    arr = low.lm.initializers[src]
                    ins.append(("init", arr.shape, arr.dtype.str, None if src in low.params else _digest(arr)))
                else:
                    ins.append(("ext", ext.setdefault(x, len(ext))))
            spec = low.fused.get(j)
            fused = None if spec is None else (spec[0], spec[4] if spec[0] == "layer_norm" else None)
            sig.append((n.op_type, n.domain, tuple(ins), len(n.output), _attr_signature(n), j in low.skip, fused))
            for k, o in enumerate(n.output):
                if o:
                    produced[o] = (j - s, k)
        return tuple(sig), list(ext)

    def _initializer(self, x):
        """The initializer ``x`` is, directly or through Identity nodes (exporters give equal initializers one
        tensor and each user an Identity of it), or None."""
        inits = self.low.lm.initializers
        for _ in range(len(self.nodes)):
            if x in inits:
                return x
            i = self.producer.get(x)
            if i is None or self.nodes[i].op_type != "Identity":
                return None
            x = self.nodes[i].input[0]
        return None

    def _inputs_signature(self, b) -> tuple:
        """What the block reads from outside, as the lowering sees it: device tensors by shape, dtype and
        layout (row-major or rows of channels, a view's index), constants by value, and which of its
        initializers an earlier block made already (an exporter gives equal initializers one tensor: the
        block that reads one second makes no tensor for it)."""
        low = self.low
        made = [x in low.handles or any(k.startswith(x + "/") for k in low.handles) for x in self.inits[b]]
        out = [tuple(made)]
        for x in self.external[b]:
            v = low.vals.get(x)
            if isinstance(v, Act):
                h = v.h
                out.append(("act", v.shape, v.nhwc, tuple(h.shape), str(getattr(h, "dtype", "")),
                            _digest(h.index) if isinstance(h, View) else None))
            elif v is None:
                out.append(None)
            else:
                out.append(("const", _digest(v)))
        return tuple(out)

    def run(self, progress=None):
        low, be = self.low, self.low.be
        pos = 0
        for b, (s, e) in enumerate(self.blocks):
            low.lower_range(pos, s, progress)
            key = (self.body[b], self._inputs_signature(b))
            rep = self.reps.get(key)
            if rep is None:
                self.reps[key] = b
                rot0, ops0, w0 = be.ctx.rotation, low.op_count, len(be.weights)
                be.mark(f"onnx_block/{b}")
                with _layouts(be.ctx) as how:
                    low.lower_range(s, e, progress)
                be.mark(f"onnx_block_end/{b}")
                weights = [(t, how.get(t.id, (None, 1))) for t in be.weights[w0:]]
                self.made[b] = (rot0, be.ctx.rotation, weights, low.op_count - ops0)
            else:
                self._call(rep, b)
            pos = e
        low.lower_range(pos, len(self.nodes), progress)
        if self.calls:
            low.notes.append(f"outlined: {self.calls} of {len(self.blocks)} repeated blocks emulated as calls of "
                             f"{len(self.made)} lowered block(s) (timing-only)")

    def _call(self, rep, b):
        """Block ``b`` as a call of block ``rep``'s programs: its outputs are the body's."""
        low, be = self.low, self.low.be
        be.replay(f"onnx_block/{rep}")
        (rs, _), (s, e) = self.blocks[rep], self.blocks[b]
        for j in range(e - s):
            for o, ro in zip(self.nodes[s + j].output, self.nodes[rs + j].output, strict=True):
                if o and ro in low.vals:
                    low.vals[o] = low.vals[ro]
        rot0, rot1, weights, ops = self.made[rep]
        here = be.ctx.rotation
        names = self._initializer_names(rep, b)
        T = be.graph.target.tiles_per_ipu
        for t, (rot, layouts) in weights:  # this block's own weights, on the tiles its lowering would have used
            name = self._rename(t.name, names, b)
            if name in low.handles or name in self.weight_names:
                continue  # an initializer the body reads too (exporters share equal ones): one tensor
            self.weight_names.add(name)
            m = t.mapping
            if layouts == 1:  # the layout it was made with (linear over a tile list): made again there
                be.ctx.rotation = here + ((rot if rot is not None else rot0) - rot0)
                mapping = be.ctx.linear_mapping(t.size)
            else:  # laid out again by its first matmul's plan: the plan's tiles, shifted as its list would be
                shift = 0 if rot is None else _offset(rot + here - rot0, T) - _offset(rot, T)
                mapping = intervals((m.tile // T) * T + (m.tile % T + shift) % T, m.start, m.stop)
            w = be.graph.add_variable(be.ctx.unique(name), t.shape, t.dtype, mapping=mapping)
            be.weights.append(w)
        be.ctx.rotation = here + (rot1 - rot0)
        low.op_count += ops
        self.calls += 1
