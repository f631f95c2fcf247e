"""Synthetic, internally consistent profiles of any size (tests, benchmarks, demos).

How the data is made (so it compresses like a real profile, not like white noise):

* A model of ``num_layers`` layers, each a few ops (matmuls, layer norm, softmax, add).
  Each op issues a fixed pattern of BSP steps (exchange, sync, compute ...); with several
  IPUs each layer ends with a global sync + an IPU-Link exchange.  One training iteration
  is: stream in, all layers, stream out.  Iterations repeat until ``num_steps`` steps
  (the last one may be cut short), like a Repeat program unrolled.
* Per-tile cycles of a compute step follow how Poplar splits work: the op uses the first
  k tiles of each IPU; each tile gets q or q+1 work grains (so most tiles share one of two
  values), a few "reduction" tiles per IPU do extra work (imbalance), and some ops add a
  small fixed per-tile jitter (vertex overheads).  Exchange steps move bytes in two sizes;
  busy cycles = bytes / the device's exchange bytes per cycle + overhead.  Sync steps have no
  busy cycles; their length is the device's sync delay (global sync cycles between IPUs).
* Layers after the first ``DISTINCT_LAYERS`` (8) repeat an earlier layer's shapes, as transformer
  layers do, so the per-tile templates (and memory) stay bounded for models with many layers.
* ``noise`` (e.g. 0.02) adds a deterministic +-2 % per-(step, tile) variation of busy cycles, like
  run-to-run variation on hardware; without it, iterations repeat exactly as in the emulator.
* Every table is derived from the same steps: per-op cycles are sums of step durations,
  FLOPs are derived from compute busy cycles, memory from the variables' tile mappings,
  liveness from the variables' live ranges, program first/last step from the steps (profile/assemble.py).

``make_synthetic`` returns a :class:`ProfileData`; for large runs the step x tile arrays
are lazy (rows are generated on slicing), so ``write_synthetic`` streams them to disk.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from popvision_lite.profile import schema
from popvision_lite.profile.assemble import program_step_spans, typed_table

from .synthetic_model import COMPUTE, EXCH, GEXCH, STREAM, SYNC, SyntheticModel

LAZY_THRESHOLD = 50_000_000        # tile-steps above which arrays are generated lazily


def default_target(device: str = "ipu-mk2", num_ipus: int = 1, tiles_per_ipu: int | None = None):
    """TargetInfo from the device spec in resources/devices (tiles_per_ipu may be overridden)."""
    from popvision_lite.devices import load_device

    spec = load_device(device)
    return schema.TargetInfo(
        device=spec.id, name=spec.name, num_ipus=int(num_ipus),
        tiles_per_ipu=int(tiles_per_ipu or spec.tiles),
        sram_bytes_per_tile=spec.sram_bytes_per_tile, clock_hz=float(spec.clock_hz),
        threads_per_tile=spec.threads_per_tile)


class LazyStepTileArray:
    """(steps, tiles) uint32 rows generated from per-leaf templates: rows[i] = templates[leaf[i]]."""

    dtype = np.dtype(np.uint32)

    def __init__(self, templates: np.ndarray, leaf_of_step: np.ndarray, noise: float = 0.0):
        self.templates = templates
        self.leaf_of_step = leaf_of_step
        self.noise = noise
        self.shape = (len(leaf_of_step), templates.shape[1])
        self.ndim = 2

    def __len__(self):
        return self.shape[0]

    def __getitem__(self, key):
        if isinstance(key, tuple):
            rows, cols = key[0], key[1:]
            return self[rows][(slice(None), *cols)]
        rows = self.templates[self.leaf_of_step[key]]
        if self.noise:
            step_idx = np.arange(len(self.leaf_of_step))[key]
            rows = _add_noise(rows, np.atleast_1d(step_idx), self.noise)
        return rows

    def __array__(self, dtype=None, copy=None):
        a = self[:]
        return a if dtype is None else a.astype(dtype)


def _add_noise(rows: np.ndarray, step_idx: np.ndarray, noise: float) -> np.ndarray:
    """Deterministic per-(step, tile) variation of +-noise on non-zero cycles (hash, not RNG state).

    Works through 64 rows at a time so the 64-bit hash temporaries stay small."""
    rows = np.atleast_2d(rows)
    out = np.empty(rows.shape, dtype=np.uint32)
    tiles = np.arange(rows.shape[1], dtype=np.uint64) * np.uint64(0x85EBCA77)
    for a in range(0, rows.shape[0], 64):
        r = rows[a:a + 64]
        h = step_idx[a:a + 64].astype(np.uint64)[:, None] * np.uint64(0x9E3779B1) + tiles[None, :]
        h ^= h >> np.uint64(15)
        h *= np.uint64(0x2C1B3C6D)
        u = ((h >> np.uint64(20)) & np.uint64(1023)).astype(np.float32) / np.float32(511.5) - np.float32(1.0)
        v = r.astype(np.float32) * (np.float32(1.0) + np.float32(noise) * u)
        out[a:a + 64] = np.where(r > 0, np.maximum(v, 1), 0)
    return out


def make_synthetic(num_ipus: int = 1, tiles_per_ipu: int = 1472, num_steps: int = 200, seed: int = 0,
                   *, num_layers: int = 4, over_capacity_tiles: int = 0, device: str = "ipu-mk2",
                   target: schema.TargetInfo | None = None, lazy: bool | None = None,
                   noise: float = 0.0) -> schema.ProfileData:
    """Build a synthetic profile; see the module docstring for how the data is made.

    ``noise`` (e.g. 0.02) adds a deterministic per-(step, tile) +-2% variation to busy cycles of
    active tiles, as run-to-run variation on hardware would; 0 gives the emulator's exact repeats.
    Step durations and aggregates are computed without the noise, so keep it small.

    One builder per table, in dependency order: the model's ops, their BSP leaves (per-tile templates,
    compute sets, vertices), steps, programs, the ops table, variables + liveness, memory.
    """
    if num_ipus < 1 or tiles_per_ipu < 1 or num_steps < 0 or num_layers < 1:
        raise ValueError("num_ipus, tiles_per_ipu, num_layers must be >= 1 and num_steps >= 0")
    if target is None:
        target = default_target(device, num_ipus, tiles_per_ipu)
    r = _Run(target, seed)
    r.build_ops(num_layers)
    r.build_leaves()
    steps, step_tmpl = r.steps_table(num_steps, noise)
    programs = r.programs_table(steps)
    ops_df = r.ops_table()
    r.build_variables()
    live = r.liveness()
    mem = r.memory(live)
    if over_capacity_tiles:
        r.add_oversized(mem, over_capacity_tiles)
    vars_df, var_tiles = r.variables_tables()
    arrs = r.step_tile_arrays(steps, step_tmpl, num_steps, noise, lazy)
    t = r.target
    fits = bool((mem.sum(axis=(1, 2)) <= t.sram_bytes_per_tile).all())
    run = dict(model="synthetic", config=dict(num_ipus=t.num_ipus, tiles_per_ipu=t.tiles_per_ipu,
                                              num_steps=num_steps, seed=seed, num_layers=num_layers,
                                              over_capacity_tiles=over_capacity_tiles),
               emulator_version="synthetic", fits=fits, timing_only=True, numeric_checks={},
               iterations=r.iterations)
    return schema.ProfileData(
        target=t, run=run, memory=mem, steps=steps,
        step_tile_cycles=arrs[0], step_tile_bytes_in=arrs[1], step_tile_bytes_out=arrs[2],
        ops=ops_df, programs=programs, compute_sets=r.compute_sets_table(), vertices=r.vertices_table(),
        variables=vars_df, variable_tiles=var_tiles, liveness_steps=r.liveness_steps_table(live),
        liveness_tile_bytes=live, extra={"synthetic": True})

class _Run(SyntheticModel):
    """The per-table builders of :func:`make_synthetic`, over the synthetic model's ops and leaves."""

    # ---------------------------------------------------------------- steps
    def steps_table(self, num_steps: int, noise: float):
        """The steps table (the leaves repeated until ``num_steps``) and each step's template row."""
        # with noise a tile may run up to (1 + noise) x the template's busy cycles
        self.leaf_dur = np.ceil(self.leaf_busy * (1.0 + noise)).astype(np.int64) + self.overhead
        n_leaves = self.n_leaves
        self.step_leaf = step_leaf = (np.arange(num_steps) % n_leaves).astype(np.int64)
        self.iterations = -(-num_steps // n_leaves) if num_steps else 0
        dur = self.leaf_dur[step_leaf]
        end = np.cumsum(dur)
        start = end - dur
        self._programs_skeleton()
        steps = pd.DataFrame({
            "step": np.arange(num_steps, dtype=np.int64),
            "kind": self.leaf_kind[step_leaf],
            "op_id": self.leaf_op[step_leaf],
            "prog_id": self.leaf_prog[step_leaf].astype(np.int32),
            "ipu": np.full(num_steps, self.op_ipu, dtype=np.int16),
            "start_cycle": start.astype(np.int64),
            "end_cycle": end.astype(np.int64),
        })
        # per-step aggregates straight from the templates (the writer also fills them if missing)
        steps["busy_max"] = self.leaf_busy[step_leaf]
        step_tmpl = self.leaf_tmpl[step_leaf]
        steps["busy_mean"] = self.cyc_t.mean(axis=1)[step_tmpl]
        steps["tiles_active"] = np.count_nonzero(self.cyc_t, axis=1).astype(np.int32)[step_tmpl]
        steps["bytes_in"] = self.leaf_bin[step_leaf]
        steps["bytes_out"] = self.leaf_bout[step_leaf]
        return steps, step_tmpl

    # ---------------------------------------------------------------- programs
    def _programs_skeleton(self) -> None:
        """0 main Sequence, 1 Repeat, per-layer Sequence, per-op Sequence, leaves (leaf_prog per leaf)."""
        rows = self._prog_rows = []

        def add(parent, kind, name, op_id=-1, repeat=1, cs_id=-1, lstep=-1, code=32):
            rows.append(dict(prog_id=len(rows), parent_id=parent, kind=kind, name=name,
                             op_id=op_id, repeat=repeat, cs_id=cs_id, lstep=lstep, code_bytes=code))
            return len(rows) - 1

        self.leaf_prog = np.zeros(self.n_leaves, dtype=np.int32)
        kind_prog = {COMPUTE: "Execute", SYNC: "Sync", EXCH: "Copy", GEXCH: "Copy", STREAM: "StreamCopy"}
        root = add(-1, "Sequence", "main")
        loop = add(root, "Repeat", "training_loop", repeat=self.iterations)

        def add_op_progs(parent, o):
            seq = add(parent, "Sequence", o.name, op_id=o.op_id)
            for li in o.leaves:
                lf = self.leaves[li]
                self.leaf_prog[li] = add(seq, kind_prog[lf["kind"]], lf["name"], op_id=o.op_id, cs_id=lf["cs"],
                                         lstep=li, code=64 + 32 * (lf["kind"] == COMPUTE))

        add_op_progs(loop, self.stream_in)
        for layer, lo in enumerate(self.layer_ops):
            lseq = add(loop, "Sequence", f"layer{layer}")
            for o in lo:
                add_op_progs(lseq, o)
        add_op_progs(loop, self.stream_out)

    def programs_table(self, steps: pd.DataFrame) -> pd.DataFrame:
        """Programs with their first / last step (the assembler's rule) and cycles (children included)."""
        programs = pd.DataFrame(self._prog_rows)
        n_leaves = self.n_leaves
        self.executed = executed = np.bincount(self.step_leaf, minlength=n_leaves)
        leaf_cycles = executed * self.leaf_dur
        parent = programs["parent_id"].to_numpy()
        cycles = np.zeros(len(programs), dtype=np.int64)
        for li in range(n_leaves):
            p = int(self.leaf_prog[li])
            while p >= 0:
                cycles[p] += leaf_cycles[li]
                p = int(parent[p])
        programs["first_step"], programs["last_step"] = program_step_spans(parent, steps["prog_id"].to_numpy())
        programs["cycles"] = cycles
        return typed_table("programs", programs)

    # ---------------------------------------------------------------- ops table
    def ops_table(self) -> pd.DataFrame:
        """Per-op FLOPs (from compute busy cycles), bytes per memory level and the split of its cycles."""
        busy_sum_leaf = self.cyc_t.sum(axis=1, dtype=np.int64)[self.leaf_tmpl]
        leaf_kind, executed = self.leaf_kind, self.executed
        rows = []
        for o in self.ops:
            li = np.array(o.leaves, dtype=np.int64)
            ex = executed[li]
            kinds = leaf_kind[li]
            dur_ex = ex * self.leaf_dur[li]

            def cyc_by(mask, dur_ex=dur_ex):
                return int((dur_ex * mask).sum())

            comp_busy = int((ex * busy_sum_leaf[li] * (kinds == COMPUTE)).sum())
            flops = int(comp_busy * o.flops_per_cycle)
            bytes_ex = int((ex * self.leaf_bin[li] * (kinds == EXCH)).sum())
            bytes_link = int((ex * self.leaf_bin[li] * (kinds == GEXCH)).sum())
            bytes_ddr = int((ex * (self.leaf_bin[li] + self.leaf_bout[li]) * (kinds == STREAM)).sum())
            used = int(self.used_mask(o.frac_tiles).sum())
            n_iter = int(ex.max()) if ex.size else 0
            min_b = n_iter * used * (o.act_bytes * 2 + o.weight_bytes)
            rows.append(dict(
                op_id=o.op_id, name=o.name, type=o.type, ipu=self.op_ipu, precision=o.precision, flops=flops,
                bytes_sram=int(flops / o.intensity) if o.intensity else 0, bytes_exchange=bytes_ex,
                bytes_ipu_link=bytes_link, bytes_ddr=bytes_ddr, min_bytes=int(min_b),
                cycles=cyc_by(1), compute_cycles=cyc_by(kinds == COMPUTE),
                exchange_cycles=cyc_by((kinds == EXCH) | (kinds == GEXCH)), sync_cycles=cyc_by(kinds == SYNC),
                stream_cycles=cyc_by(kinds == STREAM), tiles_used=used,
                plan=(f"tiles={used} grains={o.grains} split" if o.grains else "")))
        return typed_table("ops", rows)

    # ---------------------------------------------------------------- variables, liveness
    def _add_var(self, name, kind, dtype, per_tile, always, first_l, last_l, op_id):
        per_tile = np.asarray(per_tile, dtype=np.int64)
        idx = np.flatnonzero(per_tile)
        var_id = len(self.var_rows)
        total = int(per_tile.sum())
        elems = total // (2 if dtype == "float16" else 4)
        self.var_rows.append(dict(var_id=var_id, name=name, kind=kind, dtype=dtype, shape=f"({elems},)",
                                  bytes=total, always_live=always, first_lstep=-1 if always else first_l,
                                  last_lstep=(self.n_leaves - 1) if always else last_l, op_id=op_id))
        self.vt_parts.append((np.full(idx.size, var_id, dtype=np.int32), idx.astype(np.int32), per_tile[idx]))
        return var_id

    def build_variables(self) -> None:
        """Weights, constants and each op's output (live from its first leaf to the next op's last); a
        liveness step is a leaf index (compile order, the Repeat body counted once)."""
        self.var_rows, self.vt_parts = [], []
        tin, all_ops = self.tin, self.all_ops
        for i, o in enumerate(all_ops):
            used = self.used_mask(o.frac_tiles)
            if o.weight_bytes:
                self._add_var(f"{o.name}/weights", "variable", "float16", used * o.weight_bytes, True, -1, -1, -1)
            if o.type == "layernorm":
                self._add_var(f"{o.name}/epsilon", "constant", "float32", (tin == 0) * 4, True, -1, -1, -1)
                self._add_var(f"{o.name}/gamma", "variable", "float32", used * 512, True, -1, -1, -1)
            if o.act_bytes and o.leaves:
                first_l = o.leaves[0]
                nxt = all_ops[i + 1] if i + 1 < len(all_ops) else None
                last_l = nxt.leaves[-1] if nxt is not None and nxt.leaves else o.leaves[-1]
                self._add_var(f"{o.name}/output", "variable", "float16", used * o.act_bytes, False, first_l, last_l,
                              -1 if o.type == "stream_copy" else o.op_id)

    def _var_tile_bytes(self):
        parts = self.vt_parts
        vid = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, np.int32)
        vtile = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0, np.int32)
        vbytes = np.concatenate([p[2] for p in parts]) if parts else np.zeros(0, np.int64)
        return vid, vtile, vbytes

    def liveness(self) -> np.ndarray:
        """(lsteps, tiles) not-always-live bytes, from difference arrays over each variable's live range."""
        n_lsteps, nt = self.n_leaves, self.nt
        vid, vtile, vbytes = self._var_tile_bytes()
        vars_df = pd.DataFrame(self.var_rows)
        always = vars_df["always_live"].to_numpy(bool)
        # int32 and in place: the (lsteps, tiles) matrix is the big one for models with many layers
        delta = np.zeros((n_lsteps + 1, nt), dtype=np.int32)
        nal = ~always[vid]
        fl = vars_df["first_lstep"].to_numpy()[vid[nal]]
        ll = vars_df["last_lstep"].to_numpy()[vid[nal]]
        # each variable maps to a tile at most once, so a plain fancy-index add per variable is exact
        starts = np.flatnonzero(np.diff(np.concatenate([[-1], vid[nal]])))
        ends = np.append(starts[1:], nal.sum())
        vt_nal, vb_nal = vtile[nal], vbytes[nal].astype(np.int32)
        for a, b in zip(starts, ends, strict=True):
            delta[fl[a], vt_nal[a:b]] += vb_nal[a:b]
            delta[ll[a] + 1, vt_nal[a:b]] -= vb_nal[a:b]
        return np.cumsum(delta[:-1], axis=0, out=delta[:-1]).view(np.uint32)

    def liveness_steps_table(self, live: np.ndarray) -> pd.DataFrame:
        n_lsteps, nt = self.n_leaves, self.nt
        max_tile = live.argmax(axis=1) if nt else np.zeros(n_lsteps, dtype=np.int64)
        return typed_table("liveness_steps", {
            "lstep": np.arange(n_lsteps, dtype=np.int64),
            "prog_id": self.leaf_prog.astype(np.int32),
            "name": [lf["name"] for lf in self.leaves],
            "total_bytes": live.sum(axis=1, dtype=np.int64),
            "max_tile_bytes": live.max(axis=1).astype(np.int64) if nt else np.zeros(n_lsteps, np.int64),
            "max_tile": max_tile.astype(np.int32),
        })

    def variables_tables(self):
        """The variables and variable_tiles tables (after any oversized variable was added)."""
        vid, vtile, vbytes = self._var_tile_bytes()
        vars_df = typed_table("variables", self.var_rows)
        return vars_df, pd.DataFrame({"var_id": vid, "tile": vtile, "bytes": vbytes.astype(np.int64)})

    # ---------------------------------------------------------------- compute sets, vertices, memory
    def compute_sets_table(self) -> pd.DataFrame:
        return typed_table("compute_sets", self.compute_sets)

    def vertices_table(self) -> pd.DataFrame:
        if not hasattr(self, "_vertices"):
            if self.vertex_rows:
                vcols = [np.concatenate(c) for c in zip(*self.vertex_rows, strict=True)]
            else:
                vcols = [np.zeros(0, dt) for dt in (np.int32, np.int16, np.int32, np.int64, np.int64, np.int64,
                                                    np.int64)]
            # codelet names as a categorical column: compact for millions of rows, stored dictionary-encoded
            vcols[1] = pd.Categorical.from_codes(vcols[1], categories=list(self.codelet_code) or ["-"])
            vert = pd.DataFrame(dict(zip(schema.TABLE_COLUMNS["vertices"], vcols, strict=True)))
            self._vertices = vert[list(schema.TABLE_COLUMNS["vertices"])]
        return self._vertices

    def memory(self, live: np.ndarray) -> np.ndarray:
        """(tiles, categories, [always_live, not_always_live]) bytes: variables from their tile mappings and
        the liveness peak, vertex state and code from the vertices, control and exchange code per leaf."""
        nt, tin, n_leaves, leaf_kind = self.nt, self.tin, self.n_leaves, self.leaf_kind
        vid, vtile, vbytes = self._var_tile_bytes()
        vars_df = pd.DataFrame(self.var_rows)
        always = vars_df["always_live"].to_numpy(bool)
        kind_const = (vars_df["kind"] == "constant").to_numpy()
        peak_nal = live.max(axis=0).astype(np.int64) if n_leaves else np.zeros(nt, dtype=np.int64)
        mem = np.zeros((nt, len(schema.MEMORY_CATEGORIES), 2), dtype=np.int64)
        C = schema.CATEGORY_CODE
        own = always[vid] & ~kind_const[vid]
        mem[:, C["variable"], 0] = np.bincount(vtile[own], vbytes[own], minlength=nt)
        mem[:, C["variable"], 1] = peak_nal
        mem[:, C["constant"], 0] = np.bincount(vtile[kind_const[vid]], vbytes[kind_const[vid]], minlength=nt)
        vert = self.vertices_table()
        vt = vert["tile"].to_numpy()
        mem[:, C["vertexInstanceState"], 0] = np.bincount(vt, vert["state_bytes"].to_numpy(), minlength=nt)
        n_codelets = np.bincount(vt, minlength=nt)
        mem[:, C["vertexCode"], 0] = 2048 + 450 * np.minimum(n_codelets, 12)
        mem[:, C["vertexFieldData"], 0] = np.bincount(vt, vert["count"].to_numpy() * 24, minlength=nt)
        mem[:, C["vectorListDescriptor"], 0] = np.bincount(vt, vert["count"].to_numpy() * 4, minlength=nt)
        mem[:, C["controlCode"], 0] = 6000 + 96 * n_leaves + (self.jitter_pattern * 8)
        mem[:, C["controlId"], 0] = 4 * n_leaves
        mem[:, C["controlTable"], 0] = 512
        mem[:, C["copyDescriptor"], 0] = 256 + 16 * (tin % 4)
        mem[:, C["internalExchangeCode"], 0] = 900 * int((leaf_kind == EXCH).sum()) + 4 * (tin % 64)
        if self.multi:
            mem[:, C["globalExchangeCode"], 0] = 1200 * int((leaf_kind == GEXCH).sum())
            mem[:, C["globalExchangePacketHeader"], 0] = 64
        host = tin < self.stream_in.frac_tiles * self.tpi
        mem[:, C["hostExchangeCode"], 0] = np.where(host, 1600, 0)
        mem[:, C["hostExchangePacketHeader"], 0] = np.where(host, 32, 0)
        mem[:, C["stack"], 0] = 7 * 1152
        return mem

    def add_oversized(self, mem: np.ndarray, over_capacity_tiles: int) -> None:
        """An always-live buffer that puts ``over_capacity_tiles`` tiles (spread evenly) over capacity."""
        cap, nt = self.target.sram_bytes_per_tile, self.nt
        k = min(int(over_capacity_tiles), nt)
        chosen = np.linspace(0, nt - 1, k).astype(np.int64)
        total = mem.sum(axis=(1, 2))
        need = np.zeros(nt, dtype=np.int64)
        need[chosen] = np.maximum(cap - total[chosen], 0) + cap // 10 + 4096 * (np.arange(k) % 5)
        self._add_var("oversized/attention_scores_buffer", "variable", "float32", need, True, -1, -1, -1)
        mem[:, schema.CATEGORY_CODE["variable"], 0] += need

    # ---------------------------------------------------------------- step x tile arrays
    def step_tile_arrays(self, steps: pd.DataFrame, step_tmpl, num_steps: int, noise: float, lazy):
        """cycles, bytes in, bytes out: lazy (rows generated on slicing) above LAZY_THRESHOLD tile-steps."""
        if lazy is None:
            lazy = num_steps * self.nt > LAZY_THRESHOLD
        arrs = [LazyStepTileArray(self.cyc_t, step_tmpl, noise), LazyStepTileArray(self.bin_t, step_tmpl),
                LazyStepTileArray(self.bout_t, step_tmpl)]
        if noise:  # busy may exceed the template's: keep step durations >= busy
            steps["busy_max"] = np.nan  # the writer recomputes aggregates from the stored rows
            steps["busy_mean"] = np.nan
        if not lazy:
            arrs = [np.asarray(a) for a in arrs]
            if noise:
                c = arrs[0]
                steps["busy_max"] = c.max(axis=1).astype(np.int64)
                steps["busy_mean"] = c.mean(axis=1)
        return arrs


def write_synthetic(path, num_ipus: int = 1, tiles_per_ipu: int = 1472, num_steps: int = 200, seed: int = 0,
                    progress=None, **kwargs) -> Path:
    """Make a synthetic profile and write it, streaming step x tile rows in batches."""
    from popvision_lite.profile.writer import write_profile

    kwargs.setdefault("lazy", True)
    data = make_synthetic(num_ipus, tiles_per_ipu, num_steps, seed, **kwargs)
    return write_profile(path, data, progress=progress)
