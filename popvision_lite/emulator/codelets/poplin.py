"""poplin codelets: the AMP matmul vertices (BlockMatMul, the TileMatMul supervisor family).  The convolution
partials are in poplin_conv.py."""

from __future__ import annotations

import numpy as np

from popvision_lite.emulator.codelets.base import Codelet, _f32
from popvision_lite.emulator.estimators.poplin import (
    amp_supervisor_cycles,
    amp_worker_cycles,
)
from popvision_lite.emulator.graph import DTYPES, Blocks, Regions, Windows, to_dtype
from popvision_lite.errors import EmulatorError


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


class TileMatMul(BlockMatMul):
    """A tile's block matmul: out (m, n) [+]= op(a) @ op(b), FP32 accumulate.

    ``a`` and ``b`` are single contiguous Regions (m*k and k*n elements, stored transposed when
    ``ta`` / ``tb``), ``out`` is a 2-D Blocks field (or (1, m, n)).  A *supervisor* vertex (one per
    tile) that runs on all six workers: cost = poplin's ConvPartial1x1Out AMP estimate
    (estimators.poplin.amp_matmul_tile_cycles) in worker-slot units (tile cycles / threads)."""

    supervisor = True

    def cycles(self, group, target):
        bm, bk, bn = self.dims(group)
        return np.full(group.n, amp_supervisor_cycles(bm, bk, bn, self._fp16(group), target), np.int64)

    def __init__(self, ta: bool, tb: bool, accumulate: bool = False):
        super().__init__(accumulate)
        self.ta, self.tb = ta, tb
        self.name = f"TileMatMul{'T' if ta else 'N'}{'T' if tb else 'N'}" + ("Acc" if accumulate else "")
        self.state_bytes = 14  # + m, k, n

    def dims(self, group):

        om, on = _block2(group.fields["out"], "out", self.name)
        k = self.scalar_param(group, "k")
        fa, fb = group.fields["a"], group.fields["b"]
        for fname, f, want in (("a", fa, om * k), ("b", fb, k * on)):
            if not isinstance(f, Regions) or np.any(f.sizes != want):
                raise EmulatorError(f"codelet '{self.name}' in '{group.cs.name}': field '{fname}' must be regions of "
                                    f"{want} elements (out block {om}x{on}, k={k})")
        return om, k, on

    # Full-numerics speed: the op library broadcasts each operand block to every tile that needs it
    # (a Copy of equal-sized Regions into a whole staging tensor).  The engine defers such copies
    # for codelets that set ``reads_through_copies``; when the group then reads, through them, one
    # consistent source piece per output row block and per output column block and writes every
    # output block once, it is exactly C (+)= op(A) @ op(B) over the un-replicated source pieces:
    # one fp16->fp32 conversion per source element and one batched GEMM, instead of converting and
    # multiplying every replicated per-tile block.  Anything else takes the per-vertex path.
    reads_through_copies = True

    @staticmethod
    def _source(f, aliases):
        """(tensor, per-vertex start, block shape or None) of a Regions field, looking through a
        deferred broadcast copy; a copy of Blocks of a 2-D tensor (a weight laid out in plan order)
        gives per-vertex linear block numbers and the block shape."""
        from popvision_lite.emulator.graph import Blocks

        al = aliases.get(f.tensor.id) if aliases else None
        if al is None:
            return f.tensor, f.starts, None
        src, _dst = al
        wins = [src] if isinstance(src, Windows) else list(getattr(src, "parts", ()))
        if wins and all(isinstance(w, Windows) for w in wins):
            # windows of a 2-D tensor (an uneven split): per vertex the flat offset of its window
            sh = src.tensor.shape
            shapes = {w.block_shape for w in wins}
            if len(sh) != 2:
                return None
            sizes = np.concatenate([np.full(w.n, w.block_elems, np.int64) for w in wins])
            origin = np.concatenate([w.start_offsets() for w in wins])
            shape_of = np.concatenate([np.full(w.n, i, np.int64) for i, w in enumerate(wins)])
            off = np.cumsum(sizes) - sizes
            q = np.searchsorted(off, f.starts, side="right") - 1
            if np.any(f.starts != off[q]) or np.any(f.sizes != sizes[q]) or len(shapes) != len(wins) \
                    or len(np.unique(shape_of[q])) != 1:
                return None  # a vertex reads part of a window, or windows of several shapes
            return src.tensor, origin[q], ("win", wins[int(shape_of[q[0]])].block_shape)
        if isinstance(src, Blocks):
            r, c = src.block_shape
            q, o = np.divmod(f.starts, r * c)
            if np.any(o != 0) or np.any(f.sizes != r * c) or len(src.tensor.shape) != 2:
                return None
            nbc = src.tensor.shape[1] // c
            return src.tensor, src.index[q, 0] * nbc + src.index[q, 1], (r, c)
        if src.sizes.min() == src.sizes.max():
            L = int(src.sizes[0])
            q, o = np.divmod(f.starts, L)
            if np.any(o + f.sizes > L):  # a vertex's piece spans two source regions
                return None
            return src.tensor, src.starts[q] + o, None
        off = np.cumsum(src.sizes) - src.sizes  # where each source region lands in the staging tensor
        q = np.searchsorted(off, f.starts, side="right") - 1
        o = f.starts - off[q]
        if np.any(o + f.sizes > src.sizes[q]):
            return None
        return src.tensor, src.starts[q] + o, None

    def _whole_plan(self, group, aliases):
        """(TA, SA (G, nr), TB, SB (G, nc), G, nr, nc) or None; cached per alias sources."""
        fa, fb, fo = group.fields["a"], group.fields["b"], group.fields["out"]
        key = tuple(id(aliases[t][0]) if aliases and t in aliases else None for t in (fa.tensor.id, fb.tensor.id))
        cache = group.__dict__.setdefault("_whole_plans", {})
        if key in cache:
            return cache[key]
        plan = None
        ra, rb = self._source(fa, aliases), self._source(fb, aliases)
        shp, blk = fo.tensor.shape, fo.block_shape
        if ra is not None and rb is not None and len(shp) in (2, 3) and (len(shp) == 2 or blk[0] == 1):
            windows = not isinstance(fo, Blocks)  # a block shape of an uneven split: a sub-grid of C
            if windows:
                o = fo.origins
                g = o[:, 0] if len(shp) == 3 else np.zeros(group.n, np.int64)
                gs, g = np.unique(g, return_inverse=True)
                rows, r = np.unique(o[:, -2], return_inverse=True)
                cols, c = np.unique(o[:, -1], return_inverse=True)
                G, nr, nc = len(gs), len(rows), len(cols)
                g, r, c = g.ravel(), r.ravel(), c.ravel()
                bm_, bn_ = blk[-2], blk[-1]
                rect = None
                if (np.array_equal(gs, gs[0] + np.arange(G)) and np.array_equal(rows, rows[0] + bm_ * np.arange(nr))
                        and np.array_equal(cols, cols[0] + bn_ * np.arange(nc))):
                    rect = (int(gs[0]), int(rows[0]), int(cols[0]))
            else:
                idx = fo.index
                g = idx[:, 0] if len(shp) == 3 else np.zeros(group.n, np.int64)
                r, c = idx[:, -2], idx[:, -1]
                G = shp[0] if len(shp) == 3 else 1
                nr, nc = shp[-2] // blk[-2], shp[-1] // blk[-1]
            lin = (g * nr + r) * nc + c
            if group.n == G * nr * nc and len(np.unique(lin)) == group.n:
                SA = np.zeros((G, nr), np.int64)
                SB = np.zeros((G, nc), np.int64)
                SA[g, r] = ra[1]
                SB[g, c] = rb[1]
                if np.array_equal(SA[g, r], ra[1]) and np.array_equal(SB[g, c], rb[1]):
                    plan = (ra[0], SA, rb[0], SB, G, nr, nc, ra[2], rb[2], (g, r, c, rect) if windows else None)
        cache[key] = plan
        return plan

    def _compute_whole(self, group, data, plan):
        bm, bk, bn = self.dims(group)
        TA, SA, TB, SB, G, nr, nc, bsa, bsb, win_idx = plan
        win = np.lib.stride_tricks.sliding_window_view

        def fetch(T, S, bs, elems):
            if bs is None:
                return win(data[T.id], elems)[S.ravel()]
            if bs[0] == "win":  # windows (r, c) of a 2-D tensor at flat offsets S
                r, c = bs[1]
                rr, cc = np.divmod(S.ravel(), T.shape[1])
                return win(data[T.id].reshape(T.shape), (r, c))[rr, cc].reshape(-1, r * c)
            r, c = bs
            R, Cn = T.shape
            blocks = data[T.id].reshape(R // r, r, Cn // c, c).transpose(0, 2, 1, 3).reshape(-1, r * c)
            return blocks[S.ravel()]

        a = _f32(fetch(TA, SA, bsa, bm * bk))  # a fresh array (fetch gathers)
        b = _f32(fetch(TB, SB, bsb, bk * bn))
        a = a.reshape(G, nr, *((bk, bm) if self.ta else (bm, bk)))
        b = b.reshape(G, nc, *((bn, bk) if self.tb else (bk, bn)))
        if self.ta:
            a = a.swapaxes(-1, -2)
        if self.tb:
            b = b.swapaxes(-1, -2)
        a = a.reshape(G, nr * bm, bk)
        b = b.transpose(0, 2, 1, 3).reshape(G, bk, nc * bn)
        res = np.matmul(a, b)
        fo = group.fields["out"]
        if win_idx is not None:  # windows: vertex v's block is (g, r, c) of the sub-grid
            g, r, c, rect = win_idx
            if rect is not None:  # the sub-grid is one rectangle of C: write it in place
                g0, r0, c0 = rect
                shp = fo.tensor.shape
                sub = data[fo.tensor.id].reshape(shp if len(shp) == 3 else (1, *shp))[
                    g0:g0 + G, r0:r0 + nr * bm, c0:c0 + nc * bn]
                if self.accumulate:
                    res += sub
                sub[...] = to_dtype(res, fo.tensor.dtype)
                return
            vals = res.reshape(G, nr, bm, nc, bn).transpose(0, 1, 3, 2, 4)[g, r, c]
            if self.accumulate:
                vals += fo.gather(data).reshape(group.n, bm, bn)
            fo.scatter(data, to_dtype(vals, fo.tensor.dtype))
            return
        c = data[fo.tensor.id].reshape(G, nr * bm, nc * bn)
        if self.accumulate:
            res += c
        c[...] = res

    def compute(self, group, data):
        aliases = getattr(data, "aliases", None)
        plan = self._whole_plan(group, aliases)
        if plan is not None:
            self._compute_whole(group, data, plan)
            return
        if aliases:  # the engine left deferred inputs for us to read through: make them current
            for fname in ("a", "b"):
                if group.fields[fname].tensor.id in aliases:
                    data.materialize(group.fields[fname].tensor.id)
        bm, bk, bn = self.dims(group)
        n = group.n
        fb = group.fields["b"]
        # the workers of a tile share its B block: gather it once per tile and broadcast in matmul
        share = 1
        if n > 1:
            change = np.flatnonzero(np.diff(fb.starts) != 0)
            runs = np.diff(np.concatenate([[0], change + 1, [n]]))
            if len(runs) and np.all(runs == runs[0]) and runs[0] > 1:
                share = int(runs[0])
        u = n // share
        a = group.fields["a"].gather(data).reshape((u, share) + ((bk, bm) if self.ta else (bm, bk)))
        if share > 1:
            b = Regions(fb.tensor, fb.starts[::share], fb.sizes[::share]).gather(data)
        else:
            b = fb.gather(data)
        b = b.reshape((u, 1) + ((bn, bk) if self.tb else (bk, bn)))
        a = _f32(a)
        b = _f32(b)
        if self.ta:
            a = a.swapaxes(-1, -2)
        if self.tb:
            b = b.swapaxes(-1, -2)
        out = group.fields["out"]
        res = np.matmul(a, b).reshape(n, bm, bn)
        if self.accumulate:
            res += out.gather(data).reshape(n, bm, bn)
        out.scatter(data, to_dtype(res.reshape((n, *out.block_shape)), out.tensor.dtype))


TILE_MATMUL = {(ta, tb, acc): TileMatMul(ta, tb, acc) for ta in (False, True) for tb in (False, True)
               for acc in (False, True)}
