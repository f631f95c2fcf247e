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

from popvision_lite.emulator.estimators import elementwise as EW
from popvision_lite.emulator.estimators import popops
from popvision_lite.emulator.estimators.microbench import sram_reader_cycles
from popvision_lite.emulator.estimators.poplin import amp_worker_cycles
from popvision_lite.emulator.estimators.popops import strided_reduce_cycles
from popvision_lite.emulator.graph import DTYPES, Blocks, Regions, VertexGroup, Windows, to_dtype
from popvision_lite.errors import EmulatorError


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

    def cycles(self, group: VertexGroup, target) -> np.ndarray:
        raise NotImplementedError

    def flops(self, group: VertexGroup) -> int:
        return 0

    def sram_bytes(self, group: VertexGroup) -> int:
        """Bytes the group reads and writes from tile SRAM (inout fields count twice)."""
        total = 0
        for fname, f in group.fields.items():
            b = int(f.elems().sum()) * f.tensor.itemsize
            total += 2 * b if self.fields[fname] == "inout" else b
        return total

    def compute(self, group: VertexGroup, data: dict) -> None:
        for v in range(group.n):
            self.compute_vertex(group, data, v)

    def compute_vertex(self, group: VertexGroup, data: dict, v: int) -> None:
        raise NotImplementedError(f"codelet '{self.name}' has no numerics")

    def __repr__(self) -> str:
        return f"<codelet {self.name}>"


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
            elif not np.array_equal(sizes, f.sizes):
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
        n = np.asarray(out.sizes, dtype=np.int64)
        if self.model is None:
            return popops.fallback_worker_cycles(n, out.tensor.itemsize, self.cycles_per_vector)
        src = group.fields[self.inputs[0]].tensor.itemsize if self.inputs else out.tensor.itemsize
        on_tile = np.bincount(group.tiles)[group.tiles] if group.n else np.zeros(0, np.int64)
        return EW.piece_cycles(self.model, n, out.tensor.itemsize, src, on_tile, int(target.threads_per_tile))

    # pieces beyond the tile's workers are regions of 2D worker vertices, not vertices of their own:
    # the supervisor launches at most ``threads`` of them (cost_model.compute_tile_cycles)
    multi_region = True

    def flops(self, group):
        if group.fields["out"].tensor.dtype == "int32":
            return 0
        return int(self.flops_per_element * group.fields["out"].sizes.sum())

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


# Binary ops: popops BinaryOp1D (see estimators.popops.binary_op_worker_cycles).
ADD = binary("Add", np.add, model=("binary", "add"))
SUB = binary("Sub", np.subtract, model=("binary", "sub"))
MUL = binary("Mul", np.multiply, model=("binary", "mul"))
MAX = binary("Max", np.maximum, model=("binary", "max"))
# out += in (inout 'out', in 'in'): popops BinaryOp1DInPlace ADD (getBinaryOp1DInPlaceEstimate)
ADD_INPLACE = Elementwise("AddInPlace", np.add, inputs=("in",), inplace=True,
                          model=("binary_inplace", "add"))
# Unary ops: popops UnaryOp1D (see estimators.popops.unary_op_worker_cycles).
RELU = unary("Relu", lambda x: np.maximum(x, 0), model=("unary", "relu"))
NEG = unary("Neg", np.negative, model=("unary", "neg"))
# A copy of a region on its tile: the same-size cast path (64-bit load/store per vector).
COPY = unary("Copy", lambda x: x, flops_per_element=0, model=("cast",))
CAST = unary("Cast", lambda x: x, flops_per_element=0, model=("cast",))
EXP = unary("Exp", np.exp, flops_per_element=4, model=("unary", "exp"))
# x * scalar: popops BinaryOp1D MULTIPLY with a broadcast scalar operand (same inner loop)
SCALE = unary("Scale", lambda x, scale: x * scale, params=("scale",), model=("binary", "mul"))
FILL = Elementwise("Fill", lambda value: value, inputs=(), flops_per_element=0,
                   params=("value",), code_bytes=128, model=("fill",))


def _fill_compute(group, data):
    out = group.fields["out"]
    vals = np.broadcast_to(_expand(group.params["value"], out.sizes), (int(out.sizes.sum()),))
    out.scatter(data, vals.astype(DTYPES[out.tensor.dtype]))


FILL.compute = _fill_compute


def _block2(f, fname: str, codelet: str) -> tuple[int, int]:
    if not isinstance(f, Blocks | Windows):
        raise EmulatorError(f"codelet '{codelet}': field '{fname}' must be tensor.blocks(...) or tensor.windows(...)")
    bs = f.block_shape
    if len(bs) < 2 or any(b != 1 for b in bs[:-2]):
        raise EmulatorError(
            f"codelet '{codelet}': field '{fname}' block shape {bs} must be 2-D (leading block dims of 1)"
        )
    return bs[-2], bs[-1]


class BlockMatMul(Codelet):
    """AMP block matmul: out (bm, bn) [+]= a (bm, bk) @ b (bk, bn); fp32 accumulation."""

    code_bytes = 1536
    state_bytes = 8
    group_caches = ("_gemm_plans", "_whole_plans")

    def __init__(self, accumulate: bool = False):
        self.accumulate = accumulate
        self.name = "BlockMatMulAcc" if accumulate else "BlockMatMul"
        self.fields = {"a": "in", "b": "in", "out": "inout" if accumulate else "out"}

    def dims(self, group) -> tuple[int, int, int]:
        bm, bk = _block2(group.fields["a"], "a", self.name)
        bk2, bn = _block2(group.fields["b"], "b", self.name)
        om, on = _block2(group.fields["out"], "out", self.name)
        if bk != bk2 or (om, on) != (bm, bn):
            raise EmulatorError(
                f"codelet '{self.name}' in '{group.cs.name}': block shapes a ({bm},{bk}) @ b ({bk2},{bn}) -> "
                f"out ({om},{on}) do not chain; fix: a (m,k), b (k,n), out (m,n)"
            )
        return bm, bk, bn

    def check(self, group):
        self.dims(group)

    def _fp16(self, group) -> bool:
        return group.fields["a"].tensor.dtype == "float16" and group.fields["b"].tensor.dtype == "float16"

    def cycles(self, group, target):
        bm, bk, bn = self.dims(group)
        # A worker vertex of bm rows: its share of poplin's AMP supervisor estimate when six such
        # vertices share the tile (amp_worker_cycles; the AMP loop runs at the spec's
        # fp16/fp32_flops_per_cycle_per_tile when all six workers are busy).
        return np.full(group.n, int(amp_worker_cycles(bm, bk, bn, self._fp16(group), target)), np.int64)

    def flops(self, group):
        bm, bk, bn = self.dims(group)
        return int(2 * bm * bk * bn * group.n + (bm * bn * group.n if self.accumulate else 0))

    def _shared_b(self, group):
        """r > 1 when consecutive runs of r vertices share one b block (a row-split of one block
        product): the group is then U products of (r*bm, bk) @ (bk, bn), fewer and larger GEMMs."""
        if not hasattr(group, "_mm_shared"):
            idx = group.fields["b"].index
            r = 1
            if group.n > 1:
                change = np.nonzero(np.any(idx[1:] != idx[:-1], axis=1))[0]
                starts = np.concatenate([[0], change + 1])
                runs = np.diff(np.append(starts, group.n))
                if len(runs) and runs.min() == runs.max() and runs[0] > 1:
                    r = int(runs[0])
            group._mm_shared = (r, None)
        return group._mm_shared[0]

    # -- whole-GEMM fast path ---------------------------------------------------------------
    @staticmethod
    def _resolve(f, aliases):
        """(tensor, block_shape (2,), index (n, 2)) of a field over a 2-D tensor, looking through a
        pending broadcast copy (engine lazy copies: staging block t = source block src.index[t])."""
        if not isinstance(f, Blocks):
            return None
        al = aliases.get(f.tensor.id) if aliases else None
        if al is not None:
            src, _dst = al
            if not isinstance(src, Blocks):
                return None
            sb = src.block_shape
            r, c = f.block_shape[-2:]
            if len(f.block_shape) != 3 or f.block_shape[0] != 1 or sb[0] % r or sb[1] % c:
                return None
            t, u, w = f.index[:, 0], f.index[:, 1], f.index[:, 2]
            idx = np.stack([src.index[t, 0] * (sb[0] // r) + u, src.index[t, 1] * (sb[1] // c) + w], 1)
            return src.tensor, (r, c), idx
        if len(f.tensor.shape) != 2:
            return None
        return f.tensor, f.block_shape, f.index

    def gemm_plan(self, group, aliases):
        """When the group is one block-outer-product - every out block (i, j) of C exactly once,
        = A block (i, k0) @ B block (k0, j) for one k0 - return (A, B, C, k-slice): the group is
        then exactly C[:, :] (+)= A[:, k-slice] @ B[k-slice, :], one large GEMM.  Else None."""
        key = tuple(sorted((tid, id(al[0])) for tid, al in (aliases or {}).items()
                           if tid in (group.fields["a"].tensor.id, group.fields["b"].tensor.id)))
        cache = group.__dict__.setdefault("_gemm_plans", {})
        if key in cache:
            return cache[key]
        plan = None
        ra = self._resolve(group.fields["a"], aliases)
        rb = self._resolve(group.fields["b"], aliases)
        ro = self._resolve(group.fields["out"], None)
        if ra and rb and ro:
            (TA, (am, ak), ia), (TB, (bk_, bn_), ib), (TC, (om, on), io) = ra, rb, ro
            n = group.n
            ok = (ak == bk_ and am == om and bn_ == on and TA.shape[0] == TC.shape[0] and TB.shape[1] == TC.shape[1]
                  and n == (TC.shape[0] // om) * (TC.shape[1] // on) and TA.shape[1] == TB.shape[0])
            if ok:
                k0 = int(ia[0, 1])
                ok = (np.all(ia[:, 1] == k0) and np.all(ib[:, 0] == k0) and np.array_equal(io[:, 0], ia[:, 0])
                      and np.array_equal(io[:, 1], ib[:, 1]))
                if ok:
                    lin = io[:, 0] * (TC.shape[1] // on) + io[:, 1]
                    ok = len(np.unique(lin)) == n
                if ok:
                    plan = (TA, TB, TC, slice(k0 * ak, (k0 + 1) * ak))
        cache[key] = plan
        return plan

    def compute_gemm(self, group, data, plan) -> None:
        TA, TB, TC, ks = plan
        a = data[TA.id].reshape(TA.shape)[:, ks].astype(np.float32)
        b = data[TB.id].reshape(TB.shape)[ks, :].astype(np.float32)
        c = data[TC.id].reshape(TC.shape)
        if self.accumulate and c.dtype == np.float32:
            c += a @ b
        elif self.accumulate:
            c[...] = (c.astype(np.float32) + a @ b).astype(c.dtype)
        else:
            np.matmul(a, b, out=c) if c.dtype == np.float32 else c.__setitem__(Ellipsis, a @ b)

    def compute(self, group, data):
        aliases = getattr(data, "aliases", None)
        plan = self.gemm_plan(group, aliases)
        if plan is not None:
            self.compute_gemm(group, data, plan)
            return
        bm, bk, bn = self.dims(group)
        n = group.n
        out = group.fields["out"]
        a = group.fields["a"].gather(data).reshape(n, bm, bk).astype(np.float32, copy=False)
        r = self._shared_b(group)
        if r > 1:
            fb = group.fields["b"]
            bu = fb._blocked(data[fb.tensor.id])[tuple(fb.index[::r].T)]
            bu = bu.reshape(n // r, bk, bn).astype(np.float32, copy=False)
            res = np.matmul(a.reshape(n // r, r * bm, bk), bu).reshape(n, bm, bn)
        else:
            b = group.fields["b"].gather(data).reshape(n, bk, bn).astype(np.float32, copy=False)
            res = np.matmul(a, b)
        if self.accumulate:
            res += out.gather(data).reshape(group.n, bm, bn)
        out.scatter(data, res.reshape((group.n, *out.block_shape)).astype(DTYPES[out.tensor.dtype], copy=False))


BLOCK_MATMUL = BlockMatMul(False)
BLOCK_MATMUL_ACC = BlockMatMul(True)


class ReduceAdd(Codelet):
    """out = sum over the first block axis of ``in`` (partials (k, ...) -> (...)); fp32 accumulation."""

    name = "ReduceAdd"
    fields = {"in": "in", "out": "out"}
    code_bytes = 512
    state_bytes = 8

    def _shape(self, group):
        fi, fo = group.fields["in"], group.fields["out"]
        if not isinstance(fi, Blocks) or not isinstance(fo, Blocks):
            raise EmulatorError(f"codelet '{self.name}' in '{group.cs.name}': fields must be tensor.blocks(...)")
        k = fi.block_shape[0]
        if fi.block_elems != k * fo.block_elems:
            raise EmulatorError(
                f"codelet '{self.name}' in '{group.cs.name}': 'in' block {fi.block_shape} is not k x 'out' block "
                f"{fo.block_shape}; fix: in block (k, *out block)"
            )
        return k, fo.block_elems

    def check(self, group):
        self._shape(group)

    def cycles(self, group, target):
        k, m = self._shape(group)
        # popops strided reduce (getCyclesEstimateForStridedReduce): k partials of m outputs
        c = strided_reduce_cycles(k, m, group.fields["in"].tensor.itemsize, group.fields["out"].tensor.itemsize)
        return np.full(group.n, int(c), np.int64)

    def flops(self, group):
        k, m = self._shape(group)
        return int((k - 1) * m * group.n)

    def compute(self, group, data):
        k, m = self._shape(group)
        x = group.fields["in"].gather(data).reshape(group.n, k, m)
        res = x.sum(axis=1, dtype=np.float32)
        out = group.fields["out"]
        out.scatter(data, res.reshape((group.n, *out.block_shape)).astype(DTYPES[out.tensor.dtype], copy=False))


REDUCE_ADD = ReduceAdd()


class ReadSum(Codelet):
    """Microbenchmark SRAM reader: out[v] = sum of region ``in`` of vertex v.

    ``assembly=True`` models Jia et al.'s hand-written loop (one 128-bit load per instruction,
    spec ``sram_load_bytes_per_cycle``); ``False`` models a compiled C++ loop (a 64-bit load,
    spec ``memcpy_bytes_per_cycle``, plus one add per load: 2 instructions per 64 bits).
    """

    fields = {"in": "in", "out": "out"}
    code_bytes = 192
    state_bytes = 8

    def __init__(self, assembly: bool):
        self.assembly = assembly
        self.name = "ReadSumAsm" if assembly else "ReadSum"

    def check(self, group):
        for fname in ("in", "out"):
            if not isinstance(group.fields[fname], Regions):
                raise EmulatorError(f"codelet '{self.name}': field '{fname}' must be tensor.regions(...)")
        if np.any(group.fields["out"].sizes != 1):
            raise EmulatorError(f"codelet '{self.name}' in '{group.cs.name}': 'out' must be 1 element per vertex")

    def cycles(self, group, target):
        nbytes = group.fields["in"].sizes * group.fields["in"].tensor.itemsize
        per = target.em["sram_load_bytes_per_cycle" if self.assembly else "memcpy_bytes_per_cycle"]
        return sram_reader_cycles(nbytes, per, self.assembly)

    def flops(self, group):
        return int(group.fields["in"].sizes.sum())

    def compute(self, group, data):
        fi = group.fields["in"]
        x = fi.gather(data).astype(np.float32)
        offs = np.cumsum(fi.sizes) - fi.sizes
        sums = np.add.reduceat(x, offs) if len(x) else np.zeros(group.n, np.float32)
        sums = np.where(fi.sizes > 0, sums, 0)
        group.fields["out"].scatter(data, sums.astype(DTYPES[group.fields["out"].tensor.dtype]))


READ_SUM = ReadSum(False)
READ_SUM_ASM = ReadSum(True)
