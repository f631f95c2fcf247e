"""Turn a compiled (and run) graph into :class:`popvision_lite.profile.schema.ProfileData`."""

from __future__ import annotations

import re
import time

import numpy as np

from popvision_lite.emulator import cost_model as cm
from popvision_lite.emulator import programs as P
from popvision_lite.emulator.compile.compiled import K_COMPUTE, K_STREAM, K_SYNC, K_XG, K_XI, Compiled
from popvision_lite.emulator.compile.liveness import accesses
from popvision_lite.profile import schema
from popvision_lite.profile.columns import Columns

EMULATOR_VERSION = "popvision-lite-emulator 0.1"
U32 = np.iinfo(np.uint32).max


class _LazyRows:
    """A lazy (rows, tiles) uint32 array: ``a[rows]`` and ``a[rows, tiles]`` form only the rows asked for
    (``_select``), ``np.asarray(a)`` all of them."""

    shape: tuple[int, int]

    def __len__(self) -> int:
        return self.shape[0]

    def _select(self, key) -> np.ndarray:
        raise NotImplementedError

    def __getitem__(self, key):
        if isinstance(key, tuple):
            first, rest = key[0], key[1:]
            rows = self[first]
            return rows[(slice(None), *rest)] if rows.ndim == 2 else rows[rest]
        return self._select(key)

    def __array__(self, dtype=None, copy=None):
        a = self._select(slice(None))
        return a if dtype is None else a.astype(dtype)


class StepTileArray(_LazyRows):
    """Lazy (steps, tiles) uint32 array: step i is the row of step template ``seq[i]`` (rows are
    stored sparse per template, so neither a Repeat of n iterations nor a 16-IPU target costs
    memory per step).  Supports ``a[i:j]``, ``a[i:j, tiles]``, ``.shape``, ``np.asarray(a)``."""

    def __init__(self, templates: list, seq: np.ndarray, field: str, num_tiles: int, shared: dict | None = None):
        self.templates = templates
        self.seq = np.asarray(seq, np.int64)
        self.field = field
        self.shape = (len(self.seq), int(num_tiles))
        self.dtype = np.dtype(np.uint32)
        self.ndim = 2
        # what depends only on the templates' tiles (their layouts), shared by the arrays of one run's templates
        self._shared = {} if shared is None else shared

    def _rows(self, tids: np.ndarray) -> np.ndarray:
        out = np.zeros((len(tids), self.shape[1]), np.uint32)
        if len(tids) == 0:
            return out
        order = np.argsort(tids, kind="stable")
        st = tids[order]
        bounds = np.concatenate([[0], np.flatnonzero(st[1:] != st[:-1]) + 1, [len(st)]])
        layouts = self._layouts()
        for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
            k = int(st[a])
            mode, lo, hi = layouts[k]
            if mode == _EMPTY:
                continue
            vals = getattr(self.templates[k], self.field)
            grp = order[a] if b - a == 1 else order[a:b]  # (one row: plain indexing, no fancy-index gather)
            if mode == _RUN:
                # one run of tiles (a stage graph's step on its IPU of a pipelined run): a slice of each row
                out[grp, lo:hi] = vals
            elif mode == _ALL:
                out[grp] = vals
            elif mode == _ROW:
                # the template's whole row once, then copied to its steps' rows (several times faster than
                # scattering the tiles of every row when the template covers more than a few tiles)
                row = np.zeros(self.shape[1], np.uint32)
                row[self.templates[k].tiles] = vals
                out[grp] = row
            else:
                out[np.ix_(np.atleast_1d(grp), self.templates[k].tiles)] = vals
        return out

    def _layouts(self) -> list[tuple[int, int, int]]:
        """Per template, how its row is placed (computed once): (_ALL, 0, 0) every tile, (_RUN, first, end) one run
        of tiles, (_ROW, 0, 0) scattered over more than a sixteenth of the row, (_SCATTER, 0, 0) a few tiles,
        (_EMPTY, 0, 0) no tile."""
        lay = self._shared.get("layouts")
        if lay is None:
            lay = self._shared["layouts"] = [_layout(t.tiles, self.shape[1]) for t in self.templates]
        return lay

    def _has_data(self) -> np.ndarray:
        """Per template: whether its row has a non-zero value (computed once)."""
        nz = self.__dict__.get("_nz")
        if nz is None:
            by_array: dict[int, bool] = {}  # (a pipelined run's IPUs share their stage graph's rows: looked at once)

            def has(a) -> bool:
                if not isinstance(a, np.ndarray):
                    return bool(np.any(a))
                hit = by_array.get(id(a))  # (the templates hold their arrays: an id is one array's here)
                if hit is None:
                    hit = by_array[id(a)] = bool(a.any())
                return hit
            nz = self._nz = np.fromiter((has(getattr(t, self.field)) for t in self.templates), bool,
                                        len(self.templates))
        return nz

    def ipu_rows(self, i: int, j: int, tiles_per_ipu: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(steps, IPUs, rows of ``tiles_per_ipu`` tiles) of every (step, IPU) of steps i..j whose tiles hold a
        non-zero value, in (step, IPU) order: what the profile writer stores (format 4), without forming a step's
        row over the replica's tiles."""
        tpi = int(tiles_per_ipu)
        flat, start, counts, key, info = self._ipu_plan(tpi)
        tids = self.seq[i:j]
        cnt = counts[tids]
        first = np.concatenate([[0], np.cumsum(cnt)])
        n = int(first[-1])
        steps = np.repeat(np.arange(i, i + len(tids), dtype=np.int64), cnt)
        out = np.zeros((n, tpi), np.uint32)
        if n == 0:
            return steps, np.zeros(0, np.int64), out
        live = np.flatnonzero(cnt)
        c = cnt[live]
        ipus = flat[np.repeat(start[tids[live]] - first[live], c) + np.arange(n)]  # each step's IPUs, in order
        kt = key[tids[live]]
        order = np.argsort(kt, kind="stable")
        sk = kt[order]
        bounds = np.concatenate([[0], np.flatnonzero(sk[1:] != sk[:-1]) + 1, [len(sk)]])
        for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
            k, c0, c1 = info[int(sk[a])]
            rows = first[live[order[a:b]]]
            if c0 >= 0:  # a run of tiles on one IPU, the same values in the same columns for every step here
                out[rows, c0:c1] = getattr(self.templates[k], self.field)
                continue
            m = int(counts[k])
            blk = self._full_row(k).reshape(-1, tpi)[flat[start[k]:start[k] + m]]
            out[(rows[:, None] + np.arange(m)).ravel()] = np.tile(blk, (b - a, 1))
        return steps, ipus, out

    def _ipu_plan(self, tpi: int):
        """Per template (computed once per ``tpi``): the IPUs whose tiles its row holds a non-zero value on (``flat``
        from ``start``, ``counts`` of them) and a key shared by the templates whose IPU rows are the same (one run
        of tiles on one IPU with the same values array in the same columns: a pipelined run's stage step on each of
        its IPUs); per key (template, first column, end column), the columns -1 where the rows are formed from
        the template's row."""
        cache = self.__dict__.setdefault("_ipu_plans", {})
        got = cache.get(tpi)
        if got is not None:
            return got
        has, lay = self._has_data(), self._layouts()
        n = len(self.templates)
        parts, keys, info = [], {}, []
        counts = np.zeros(n, np.int64)
        key = np.full(n, -1, np.int64)
        for k, t in enumerate(self.templates):
            mode, lo, hi = lay[k]
            if not has[k] or mode == _EMPTY:
                continue
            vals = getattr(t, self.field)
            if mode == _RUN and lo // tpi == (hi - 1) // tpi:  # on one IPU (a pipelined run's stage step)
                ipu = lo // tpi
                parts.append(ipu)
                counts[k] = 1
                # (the templates hold their arrays: an id is one array's while they live)
                kk = ("run", id(vals), lo - ipu * tpi, hi - ipu * tpi) if isinstance(vals, np.ndarray) else k
                cols = (lo - ipu * tpi, hi - ipu * tpi)
            else:
                on = np.flatnonzero(self._full_row(k).reshape(-1, tpi).any(axis=1))
                parts.extend(on.tolist())
                counts[k] = len(on)
                kk, cols = k, (-1, -1)
            g = keys.get(kk)
            if g is None:
                g = keys[kk] = len(info)
                info.append((k, *cols))
            key[k] = g
        flat = np.asarray(parts, np.int64)
        start = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64) if n else np.zeros(0, np.int64)
        got = cache[tpi] = (flat, start, counts, key, info)
        return got

    def _full_row(self, k: int) -> np.ndarray:
        """Template ``k``'s row over every tile."""
        row = np.zeros(self.shape[1], np.uint32)
        t = self.templates[k]
        if t.tiles is None:
            row[:] = getattr(t, self.field)
        else:
            row[t.tiles] = getattr(t, self.field)
        return row

    def tile_block_rows(self, i: int, j: int, edges: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each step's minimum, sum (float64) and maximum over the tile blocks starting at ``edges``, steps i..j
        (the profile writer's summaries), from the templates of those steps, without forming their rows."""
        mn, sm, mx = self._template_blocks(np.asarray(edges, np.int64))
        tids = self.seq[i:j]
        return mn[tids], sm[tids], mx[tids]

    def _template_blocks(self, edges: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per template: (min, sum, max) of its row over the tile blocks starting at ``edges`` (templates x blocks;
        computed once per ``edges``, every template at once).  A block with a tile the template leaves out (zero
        there) has minimum 0.  A template whose values are another's (the same array) on the same tiles moved by
        ``d``, where the blocks those tiles touch are the same blocks moved by ``d`` (a pipelined run's stage graph
        placed on each of its IPUs: blocks restart at every IPU), has that template's figures in the moved blocks:
        they are copied, not summed again (``_same_blocks``).  Blocks that are unions of blocks already computed
        (the writer's coarser summary levels: every coarse edge is a fine edge) are reduced from those
        (``_coarser_blocks``)."""
        cache = self.__dict__.setdefault("_blocks", {})
        key = edges.tobytes()
        if key in cache:
            return cache[key]
        out = _coarser_blocks(cache, edges)
        if out is not None:
            cache[key] = out
            return out
        T, B, n = self.shape[1], len(edges), len(self.templates)
        sizes = np.diff(np.append(edges, T))
        ends = edges + sizes
        parts = []  # (template ids, tiles, values) of every template's listed tiles, in template and tile order
        seen: dict[int, list] = {}  # id(values) -> [(template id, tiles[0], tiles - tiles[0], first, last block)]
        copies = []  # (template id, its first block, the template it copies, that one's first block, blocks)
        for k, t in enumerate(self.templates):
            raw = getattr(t, self.field)
            vals = np.asarray(raw)
            if len(vals):
                tiles = np.arange(T, dtype=np.int64) if t.tiles is None else np.asarray(t.tiles, np.int64)
                if len(tiles) > 1 and not (tiles[1:] > tiles[:-1]).all():  # (templates list their tiles in order)
                    order = np.argsort(tiles, kind="stable")
                    tiles, vals = tiles[order], vals[order]
                elif vals is raw:  # (an array the template holds: its id is its own while the templates live)
                    hit = _same_blocks(seen.setdefault(id(raw), []), tiles, edges, ends)
                    if hit is not None:
                        copies.append((k, *hit))
                        continue
                    seen[id(raw)].append((k, int(tiles[0]), tiles - tiles[0], *_block_span(tiles, edges)))
                parts.append((np.full(len(tiles), k, np.int64), tiles, vals))
        mn = np.zeros(n * B, np.uint32)
        sm = np.zeros(n * B, np.float64)
        mx = np.zeros(n * B, np.uint32)
        if parts:
            tid = np.concatenate([p[0] for p in parts])
            seg = tid * B + np.searchsorted(edges, np.concatenate([p[1] for p in parts]), side="right") - 1
            vals = np.concatenate([p[2] for p in parts])
            del parts, tid
            starts = np.flatnonzero(np.r_[True, seg[1:] != seg[:-1]])
            cell = seg[starts]
            mx[cell] = np.maximum.reduceat(vals, starts)
            sm[cell] = np.add.reduceat(vals, starts, dtype=np.float64)
            full = np.diff(np.append(starts, len(seg))) == sizes[cell % B]  # every tile of the block listed
            mn[cell[full]] = np.minimum.reduceat(vals, starts)[full]
        mn, sm, mx = mn.reshape(n, B), sm.reshape(n, B), mx.reshape(n, B)
        for k, b0, j, c0, w in copies:
            mn[k, b0:b0 + w] = mn[j, c0:c0 + w]
            sm[k, b0:b0 + w] = sm[j, c0:c0 + w]
            mx[k, b0:b0 + w] = mx[j, c0:c0 + w]
        out = cache[key] = (mn, sm, mx)
        return out

    def _select(self, key) -> np.ndarray:
        if isinstance(key, int | np.integer):
            return self._rows(self.seq[[int(key)]])[0]
        return self._rows(self.seq[key])


_ALL, _RUN, _ROW, _SCATTER, _EMPTY = range(5)


class BlockRows(_LazyRows):
    """Lazy (rows, tiles) uint32 array that is zero but for blocks: ``blocks`` lists (first row, first tile, a
    (rows, tiles) uint32 array) that do not overlap (a pipelined run's liveness: each IPU's rows on its own tiles,
    so that a replica of S IPUs holds its stage graphs' rows once, not S x S times their size).  Supports
    ``a[i:j]``, ``a[i:j, tiles]``, ``.shape``, ``np.asarray(a)``: what the profile writer streams."""

    def __init__(self, shape: tuple[int, int], blocks: list[tuple[int, int, np.ndarray]]):
        self.shape = (int(shape[0]), int(shape[1]))
        self.dtype = np.dtype(np.uint32)
        self.ndim = 2
        self.blocks = blocks

    def _rows(self, i: int, j: int) -> np.ndarray:
        out = np.zeros((max(j - i, 0), self.shape[1]), np.uint32)
        for r, a, blk in self.blocks:
            lo, hi = max(i, r), min(j, r + len(blk))
            if lo < hi:
                out[lo - i:hi - i, a:a + blk.shape[1]] = blk[lo - r:hi - r]
        return out

    def _select(self, key) -> np.ndarray:
        if isinstance(key, int | np.integer):
            k = int(key) + (self.shape[0] if key < 0 else 0)
            if not 0 <= k < self.shape[0]:
                raise IndexError(f"row {key} out of range for {self.shape[0]} rows")
            return self._rows(k, k + 1)[0]
        if isinstance(key, slice) and key.step in (None, 1):
            i, j, _ = key.indices(self.shape[0])
            return self._rows(i, j)
        return self._rows(0, self.shape[0])[key]


def _layout(tiles, num_tiles: int) -> tuple[int, int, int]:
    """How a template's row is placed on the tiles (see ``StepTileArray._layouts``)."""
    if tiles is None:
        return _ALL, 0, 0
    if not len(tiles):
        return _EMPTY, 0, 0
    lo, hi = int(tiles[0]), int(tiles[-1]) + 1
    if hi - lo == len(tiles) and bool((np.diff(tiles) == 1).all()):
        return _RUN, lo, hi
    return (_ROW if len(tiles) * 16 >= num_tiles else _SCATTER), 0, 0


def step_tile_arrays(templates: list, seq: np.ndarray, num_tiles: int) -> dict[str, StepTileArray]:
    """The three step x tile arrays of a run whose step i is template ``seq[i]`` (ProfileData's
    ``step_tile_cycles``, ``step_tile_bytes_in``, ``step_tile_bytes_out``), sharing the templates' layouts."""
    shared: dict = {}
    return {f"step_tile_{f}": StepTileArray(templates, seq, f, num_tiles, shared)
            for f in ("cycles", "bytes_in", "bytes_out")}


def _coarser_blocks(cache: dict, edges: np.ndarray):
    """(min, sum, max) per template over the blocks starting at ``edges`` from a finer set of blocks in ``cache``
    (``StepTileArray._template_blocks``' figures, keyed by their edges' bytes) whose edges include every one of
    ``edges`` and start at the same first tile, or None.  Each coarse block is then a run of fine blocks: its
    minimum is the least of theirs (0 where a fine block leaves out a tile), its maximum the largest, and its sum
    theirs summed (integers below 2**53 in float64: exact in any order)."""
    for fkey, (fmn, fsm, fmx) in cache.items():
        fine = np.frombuffer(fkey, np.int64)
        if len(fine) <= len(edges) or fine[0] != edges[0]:
            continue
        at = np.searchsorted(fine, edges)
        if (at < len(fine)).all() and np.array_equal(fine[np.minimum(at, len(fine) - 1)], edges):
            return (np.minimum.reduceat(fmn, at, axis=1), np.add.reduceat(fsm, at, axis=1),
                    np.maximum.reduceat(fmx, at, axis=1))
    return None


def _block_span(tiles: np.ndarray, edges: np.ndarray) -> tuple[int, int]:
    """(first, last) tile block that the sorted ``tiles`` touch."""
    lo, hi = np.searchsorted(edges, [tiles[0], tiles[-1]], side="right") - 1
    return int(lo), int(hi)


def _same_blocks(seen: list, tiles: np.ndarray, edges: np.ndarray, ends: np.ndarray):
    """For a template with the values of the templates in ``seen`` (the same array) on the sorted ``tiles``: (its
    first block, the template it can copy, that one's first block, number of blocks), or None.  It can copy one
    whose tiles are these moved by d = tiles[0] - theirs[0] when the blocks its tiles touch are that one's blocks
    moved by d (the same starts and ends): then each block holds the same values of the same tiles, in the same
    order, so the same minimum, sum and maximum."""
    if not seen:
        return None
    lo, hi = _block_span(tiles, edges)
    for j, t0, rel, c_lo, c_hi in seen[-8:]:
        if hi - lo != c_hi - c_lo or len(rel) != len(tiles):
            continue
        d = int(tiles[0]) - t0
        if (np.array_equal(edges[lo:hi + 1] - d, edges[c_lo:c_hi + 1])
                and np.array_equal(ends[lo:hi + 1] - d, ends[c_lo:c_hi + 1]) and np.array_equal(tiles - tiles[0], rel)):
            return lo, j, c_lo, hi - lo + 1
    return None


def steps_table(templates: list, seq: np.ndarray, start: np.ndarray, end: np.ndarray, num_tiles: int) -> Columns:
    """The steps table of a run whose step i is template ``seq[i]``, from ``start[i]`` to ``end[i]``
    (``busy_mean``: over all ``num_tiles`` tiles)."""
    seq = np.asarray(seq, np.int64)

    def col(attr, dtype):
        return np.array([getattr(t, attr) for t in templates], dtype)[seq]

    return Columns.typed("steps", {
        "step": np.arange(len(seq), dtype=np.int64), "kind": col("kind", np.int8), "op_id": col("op_id", np.int32),
        "prog_id": col("prog_id", np.int32), "ipu": col("ipu", np.int16),
        "start_cycle": np.asarray(start, np.int64), "end_cycle": np.asarray(end, np.int64),
        "busy_max": col("busy_max", np.int64), "busy_mean": col("busy_sum", np.float64) / max(num_tiles, 1),
        "tiles_active": col("tiles_active", np.int32), "bytes_in": col("in_sum", np.int64),
        "bytes_out": col("out_sum", np.int64)})


def _clip_u32(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a)
    if a.dtype == np.uint32:
        return a
    if a.dtype.itemsize <= 4 and a.dtype.kind in "iu":
        # the largest with 0 written straight into the uint32 result (one pass; every value is in range)
        return np.maximum(a, 0, out=np.empty(a.shape, np.uint32), casting="unsafe")
    return np.clip(a, 0, U32).astype(np.uint32)


def _op_type(name: str) -> str:
    leaf = name.rsplit("/", 1)[-1]
    return re.sub(r"[_\d]+$", "", leaf) or leaf


def _extra(c: Compiled, extra: dict | None) -> dict:
    """Cost-model constants the run used (device spec values and software assumptions)."""
    soft = {k: getattr(cm, k) for k in dir(cm) if k.isupper() and isinstance(getattr(cm, k), int)}
    out = {"emulator_constants": {k: float(v) for k, v in c.target.em.items()},
           "emulator_software_assumptions": soft}
    out.update(extra or {})
    return out


# the tables a profile built without its tables (``build_profile(tables=False)``) still holds: what a caller that
# reads the run's numbers, its fit and its memory per tile reads besides the memory (the outlined blocks' saved
# inputs placed on the liveness steps: emulated._saved_on_liveness)
BARE_TABLES = ("programs", "liveness_steps", "liveness_tile_bytes")


def build_profile(c: Compiled, mode: str, model: str = "", config: dict | None = None,
                  numeric_checks: dict | None = None, extra: dict | None = None,
                  tables: bool = True) -> schema.ProfileData:
    """The profile of compiled (and run) graph ``c``: one table per part of the compiled program.  ``tables``
    False: the target, run dict, memory per tile and :data:`BARE_TABLES` as the full profile has them, every
    other table empty (no steps, ops, vertices or variables: a caller that reads no table, the validation
    report; the graph caches say which a kept result holds, models/emulated.py)."""
    T = c.num_tiles
    tpl = c.templates
    seq = c.seq
    if tables:
        steps = steps_table(tpl, seq, c.step_start, c.step_end, T)
        compute_sets, vertices = _compute_set_tables(c)
        variables, variable_tiles = _variable_tables(c)
    run = {
        "model": model, "config": dict(config or {}), "emulator_version": EMULATOR_VERSION,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "fits": bool(c.fits),
        "timing_only": mode == "timing", "numeric_checks": dict(numeric_checks or {}),
        "mode": mode, "total_cycles": int(c.total_cycles),
        "seconds": c.total_cycles / c.target.clock_hz,
        "oom_tiles": [list(x) for x in c.oom_report[:16]],
    }
    if not tables:
        empty = {name: Columns.empty(name) for name in ("steps", "ops", "compute_sets", "vertices", "variables",
                                                        "variable_tiles", "variable_intervals")}
        none = np.zeros((0, T), np.uint32)
        return schema.ProfileData(
            target=c.target.info(), run=run, memory=c.memory.copy(), step_tile_cycles=none, step_tile_bytes_in=none,
            step_tile_bytes_out=none, programs=_programs_table(c), liveness_steps=_liveness_steps_table(c),
            liveness_tile_bytes=_clip_u32(c.liveness_tile_bytes), extra=_extra(c, extra), **empty)
    return schema.ProfileData(
        target=c.target.info(), run=run, memory=c.memory.copy(), steps=steps,
        **step_tile_arrays(tpl, seq, T), ops=_ops_table(c), programs=_programs_table(c),
        compute_sets=compute_sets, vertices=vertices, variables=variables, variable_tiles=variable_tiles,
        liveness_steps=_liveness_steps_table(c), liveness_tile_bytes=_clip_u32(c.liveness_tile_bytes),
        extra=_extra(c, extra), variable_intervals=_variable_intervals_table(c),
    )


def _variable_intervals_table(c: Compiled) -> Columns:
    """One row per live interval of every variable live in more than one (compile.liveness)."""
    spans = getattr(c, "live_intervals", {})
    rows = [(tid, a, z) for tid in sorted(spans) for a, z in spans[tid]]
    return Columns.typed("variable_intervals", rows)


def _ops_table(c: Compiled) -> Columns:
    """One row per op: the totals of its steps, its tiles and IPU, its precision and compulsory bytes."""
    g = c.graph
    tpl = c.templates
    nt = len(tpl)
    t_kind = np.array([t.kind for t in tpl], np.int8)
    t_op = np.array([t.op_id for t in tpl], np.int32)
    nops = len(c.ops)
    cnt = c.template_count.astype(np.int64)
    dur = np.array([t.duration for t in tpl], np.int64)

    def per_op(values, mask=None) -> np.ndarray:
        if not nt or nops == 0:
            return np.zeros(nops, np.int64)
        v = np.asarray(values, np.float64) * cnt
        if mask is not None:
            v = np.where(mask, v, 0)
        keep = t_op >= 0
        return np.bincount(t_op[keep], weights=v[keep], minlength=nops).astype(np.int64)

    flops = per_op([t.flops for t in tpl])
    b_sram = per_op([t.bytes_sram for t in tpl])
    b_x = per_op([t.bytes_exchange for t in tpl])
    b_link = per_op([t.bytes_ipu_link for t in tpl])
    b_ddr = per_op([t.bytes_ddr for t in tpl])
    cycles = per_op(dur)
    comp_c = per_op(dur, t_kind == K_COMPUTE)
    x_c = per_op(dur, (t_kind == K_XI) | (t_kind == K_XG))
    sync_c = per_op(dur, t_kind == K_SYNC)
    stream_c = per_op(dur, t_kind == K_STREAM)
    reads, writes, dtypes, readers = _op_accesses(c, nops)
    tiles_used, op_ipu = _op_tiles(c, nops, t_kind, t_op)
    op_rows = []
    for i, name in enumerate(c.ops):
        info = g.op_info.get(name, {})
        r, w = reads[i], writes[i]
        inputs = r - w
        outputs = {t for t in w if (readers.get(t, set()) - {i}) or t not in readers}
        min_bytes = sum(g.tensors[t].nbytes for t in inputs | outputs)
        dt = dtypes[i]
        prec = "fp16" if "float16" in dt else "fp32" if "float32" in dt else "int32" if dt else "fp32"
        op_rows.append({
            "op_id": i, "name": name, "type": info.get("type", _op_type(name)),
            "ipu": int(op_ipu[i]), "precision": info.get("precision", prec),
            "flops": int(info.get("flops", flops[i])), "bytes_sram": int(b_sram[i]),
            "bytes_exchange": int(b_x[i]), "bytes_ipu_link": int(b_link[i]), "bytes_ddr": int(b_ddr[i]),
            "min_bytes": int(info.get("min_bytes", min_bytes)), "cycles": int(cycles[i]),
            "compute_cycles": int(comp_c[i]), "exchange_cycles": int(x_c[i]), "sync_cycles": int(sync_c[i]),
            "stream_cycles": int(stream_c[i]), "tiles_used": int(tiles_used[i]), "plan": str(info.get("plan", "")),
        })
    return Columns.typed("ops", op_rows)


def _op_accesses(c: Compiled, nops: int) -> tuple[dict, dict, dict, dict]:
    """Per op: the tensors its leaves read and write and the dtypes it handles; per tensor: the ops reading it."""
    g = c.graph
    reads: dict[int, set] = {i: set() for i in range(nops)}
    writes: dict[int, set] = {i: set() for i in range(nops)}
    dtypes: dict[int, set] = {i: set() for i in range(nops)}
    readers: dict[int, set] = {}
    for pid in c.leaves:
        info = c.progs[pid]
        oid = c.op_index.get(info.op, -1) if info.op is not None else -1
        r, w = accesses(c, info)
        for t in r:
            readers.setdefault(t, set()).add(oid)
        if oid < 0:
            continue
        reads[oid] |= r
        writes[oid] |= w
        if isinstance(info.prog, P.Execute):
            for grp in info.prog.cs.groups:
                for f in grp.fields.values():
                    dtypes[oid].add(f.tensor.dtype)
        if not isinstance(info.prog, P.Execute | P.Sync):
            dtypes[oid] |= {g.tensors[t].dtype for t in r | w}
    return reads, writes, dtypes, readers


def _op_tiles(c: Compiled, nops: int, t_kind: np.ndarray, t_op: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per op: the tiles busy in its steps (syncs aside) and its IPU (-1: several or none)."""
    T = c.num_tiles
    tpl = c.templates
    t_ipu = np.array([t.ipu for t in tpl], np.int16)
    tiles_used = np.zeros(nops, np.int32)
    op_ipu = np.full(nops, -2, np.int16)
    for i in range(nops):
        sel = np.nonzero(t_op == i)[0]
        work = sel[t_kind[sel] != K_SYNC]
        if len(work):
            used = np.zeros(T, bool)
            for k in work:
                t = tpl[k]
                if t.tiles is None:
                    used |= t.cycles > 0
                else:
                    used[t.tiles[t.cycles > 0]] = True
            tiles_used[i] = int(used.sum())
        if len(sel):
            ip = set(t_ipu[sel].tolist())
            op_ipu[i] = ip.pop() if len(ip) == 1 else -1
        else:
            op_ipu[i] = -1
    return tiles_used, op_ipu


def _programs_table(c: Compiled) -> Columns:
    return Columns.typed("programs", {
        "prog_id": np.arange(len(c.progs), dtype=np.int32),
        "parent_id": np.array([p.parent_id for p in c.progs], np.int32),
        "kind": [p.prog.kind for p in c.progs],
        "name": [p.prog.name for p in c.progs],
        "op_id": np.array([c.op_index.get(p.op, -1) if p.op is not None else -1 for p in c.progs], np.int32),
        "repeat": c.prog_repeat.astype(np.int64),
        "cs_id": np.array([p.prog.cs.id if isinstance(p.prog, P.Execute) else -1 for p in c.progs], np.int32),
        "first_step": c.prog_first, "last_step": c.prog_last,
        "code_bytes": np.array([p.code_bytes for p in c.progs], np.int64),
        "cycles": c.prog_cycles.astype(np.int64),
        "lstep": np.array([p.lstep for p in c.progs], np.int64),
    })


def _compute_set_tables(c: Compiled) -> tuple[Columns, Columns]:
    """The compute sets, and their vertices aggregated per (compute set, codelet, tile): each group's vertices
    counted per tile once (the count, the instances' state, the compute set's tiles), and the vertices table's
    columns gathered as arrays, one frame at the end (not one per compute set and codelet)."""
    g = c.graph
    T = c.num_tiles
    threads = c.target.threads_per_tile
    cs_rows = []
    cols: dict[str, list] = {k: [] for k in schema.TABLE_COLUMNS["vertices"] if k != "codelet"}
    names: list[str] = []  # the codelet of each (compute set, codelet) block of rows, and its row count
    name_rows: list[int] = []
    for cs in g.compute_sets:
        on_cs = np.zeros(T, np.int64)
        by_codelet: dict[str, list] = {}
        for grp in cs.groups:
            by_codelet.setdefault(grp.codelet.name, []).append(grp)
        for name, grps in by_codelet.items():
            cnt_t = np.zeros(T, np.int64)
            cyc_t = np.zeros(T, np.float64)
            st_t = np.zeros(T, np.int64)  # state of the vertex instances (cost_model.vertex_instances)
            for x in grps:
                cnt, cyc = _tile_sums(x.tiles, x.cycles(c.target), T, threads)
                xt, inst = cm.vertex_instances(x, T, threads, counts=cnt)
                st_t[xt] += inst * cm.vertex_state_bytes(x)
                cnt_t += cnt
                cyc_t += cyc
            on_cs += cnt_t
            ut = np.nonzero(cnt_t)[0]
            cols["cs_id"].append(np.full(len(ut), cs.id, np.int32))
            names.append(name)
            name_rows.append(len(ut))
            cols["tile"].append(ut.astype(np.int32))
            cols["count"].append(cnt_t[ut])
            cols["cycles"].append(cyc_t[ut].astype(np.int64))
            cols["state_bytes"].append(st_t[ut])
            cols["code_bytes"].append(np.full(len(ut), int(grps[0].codelet.code_bytes), np.int64))
        cs_rows.append({"cs_id": cs.id, "name": cs.name,
                        "op_id": c.op_index.get(cs.op, -1) if cs.op is not None else -1,
                        "num_vertices": int(sum(len(grp.tiles) for grp in cs.groups)),
                        "num_tiles": int(np.count_nonzero(on_cs))})
    compute_sets = Columns.typed("compute_sets", cs_rows)
    if not names:
        return compute_sets, Columns.empty("vertices")
    data = {k: np.concatenate(v) for k, v in cols.items()}
    data["codelet"] = np.repeat(np.array(names, dtype=object), name_rows)
    return compute_sets, Columns.typed("vertices", data)


def _tile_sums(tiles: np.ndarray, cycles: np.ndarray, T: int, threads: int) -> tuple[np.ndarray, np.ndarray]:
    """A vertex group's vertices and cycles per tile: ``np.bincount(tiles)`` and the integer cycles summed per tile
    in float64 (exact below 2**53, in any order).  Where the vertices come in rows of ``threads`` of one tile
    (cost_model._rows_on_one_tile: an elementwise op's worker pieces) and the cycles are int32, from the rows:
    each row's cycles summed in float64 (below 2**34: exact), its tile counted once (a sixth of the elements; the
    same integer sums)."""
    if 1024 <= len(tiles) < 2**22 and cycles.dtype in (np.int32, np.uint16, np.int16) \
            and cm._rows_on_one_tile(tiles, threads):
        rt = tiles[::threads].astype(np.intp)
        cols = cycles.reshape(-1, threads)
        rows = cols[:, 0].astype(np.float64)  # (column by column: a sum along the rows of six costs ~5x)
        for k in range(1, threads):
            rows += cols[:, k]
        return threads * np.bincount(rt, minlength=T), np.bincount(rt, weights=rows, minlength=T)
    t = np.asarray(tiles, np.int64)
    return np.bincount(t, minlength=T), np.bincount(t, weights=cycles, minlength=T)


def _variable_tables(c: Compiled) -> tuple[Columns, Columns]:
    """The variables (live ranges, producing op) and their bytes per tile."""
    g = c.graph
    producer = {}
    for pid in c.leaves:
        info = c.progs[pid]
        _, w = accesses(c, info)
        for t in w:
            producer.setdefault(t, c.op_index.get(info.op, -1) if info.op is not None else -1)
    var_rows = []
    vt_frames = []
    for t in g.tensors:
        tiles, b = c.tensor_tiles[t.id]
        al = bool(c.always_live[t.id])
        var_rows.append({
            "var_id": t.id, "name": t.name, "kind": t.kind, "dtype": t.dtype, "shape": str(t.shape),
            "bytes": int(b.sum()), "always_live": al,
            "first_lstep": -1 if al else int(c.first_lstep[t.id]),
            "last_lstep": -1 if al else int(c.last_lstep[t.id]),
            "op_id": int(producer.get(t.id, -1)),
        })
        vt_frames.append((np.full(len(tiles), t.id, np.int32), tiles.astype(np.int32), b.astype(np.int64)))
    variables = Columns.typed("variables", var_rows)
    if vt_frames:
        variable_tiles = Columns.typed("variable_tiles", {"var_id": np.concatenate([f[0] for f in vt_frames]),
                                                          "tile": np.concatenate([f[1] for f in vt_frames]),
                                                          "bytes": np.concatenate([f[2] for f in vt_frames])})
    else:
        variable_tiles = Columns.empty("variable_tiles")
    return variables, variable_tiles


def _liveness_steps_table(c: Compiled) -> Columns:
    ltb = c.liveness_tile_bytes
    L = len(c.leaves)
    return Columns.typed("liveness_steps", {
        "lstep": np.arange(L, dtype=np.int64),
        "prog_id": np.array(c.leaves, np.int32),
        "name": [c.progs[p].prog.name for p in c.leaves],
        "total_bytes": ltb.sum(axis=1, dtype=np.int64) if L else np.zeros(0, np.int64),
        "max_tile_bytes": ltb.max(axis=1).astype(np.int64) if L else np.zeros(0, np.int64),
        "max_tile": ltb.argmax(axis=1).astype(np.int32) if L else np.zeros(0, np.int32),
    })
