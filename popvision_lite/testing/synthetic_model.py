"""The synthetic model behind :func:`popvision_lite.testing.synthetic.make_synthetic`: its ops (stream in, layers
of matmuls, softmax, add and layer norm, stream out) and their BSP leaves with per-tile templates, compute sets
and vertices.  synthetic.py derives every table of the profile from them."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from popvision_lite.profile import schema
from popvision_lite.profile.schema import STEP_KIND_CODE as K

COMPUTE, SYNC, EXCH, GEXCH, STREAM = (K["compute"], K["sync"], K["exchange_internal"],
                                      K["exchange_global"], K["stream_copy"])

# Shape of the synthetic model (not device facts: exchange, IPU-Link and streaming-memory rates and
# sync cycles come from the device spec's [emulator] table).
DISTINCT_LAYERS = 8                # layers after this repeat the parameters of earlier ones


def _model_constants(device: str) -> dict[str, float]:
    """Cost-model constants of the device's [emulator] table, with synthetic fallbacks."""
    # fallbacks = the Mk2 spec's values; a real spec's [emulator] table overrides them
    consts = dict(exchange_bytes_per_cycle=4, global_sync_cycles=600, max_ipu_sync_delay_cycles=150,
                  ddr_bytes_per_cycle=7.245, ipu_link_bytes_per_cycle=241.5)
    try:
        from popvision_lite.devices import load_device

        consts.update({k: v for k, v in load_device(device).emulator.items() if k in consts})
    except Exception:  # e.g. a GPU spec or a hand-made target: keep the synthetic constants
        pass
    return consts


@dataclass
class _Op:
    op_id: int
    name: str
    type: str
    precision: str
    frac_tiles: float
    grains: int
    cycles_per_grain: int
    flops_per_cycle: float
    intensity: float  # flops per SRAM byte
    jitter: bool
    hot_tiles: int
    act_bytes: int    # output activation bytes per used tile
    weight_bytes: int  # weight bytes per used tile (0 = none)
    leaves: list = field(default_factory=list)
    tmpl_src: int = -1  # op whose per-tile templates this op shares (itself unless a repeated layer)

    def __post_init__(self):
        if self.tmpl_src < 0:
            self.tmpl_src = self.op_id


_OP_KINDS = {
    # type: (precision, step pattern, flops/cycle/tile, flop per SRAM byte)
    "matmul": ("fp16", [EXCH, SYNC, COMPUTE, SYNC, EXCH, SYNC, COMPUTE, SYNC], 32.0, 8.0),
    "layernorm": ("fp32", [EXCH, SYNC, COMPUTE, SYNC], 2.0, 0.5),
    "softmax": ("fp32", [COMPUTE, SYNC], 2.0, 0.5),
    "add": ("fp16", [COMPUTE, SYNC], 1.0, 0.17),
}
_CODELETS = {
    "matmul": ("poplin::ConvPartial1x1Out<half,float>", "popops::ReduceAdd<float,half>"),
    "layernorm": ("popnn::LayerNormStats<float>",),
    "softmax": ("popnn::NonLinearity<float,SOFTMAX>",),
    "add": ("popops::ScaledAddSupervisor<half>",),
}


class SyntheticModel:
    """The model's ops and leaves (target, tile indices, the device's cost-model constants, the random
    generator, the ops, leaves and templates), shared by the per-table builders of synthetic.py."""

    def __init__(self, target: schema.TargetInfo, seed: int):
        self.target = target
        self.rng = np.random.default_rng(seed)
        self.tpi = tpi = target.tiles_per_ipu
        self.num_ipus = target.num_ipus
        self.nt = nt = self.num_ipus * tpi
        self.tile = np.arange(nt)
        self.tin = self.tile % tpi
        self.multi = self.num_ipus > 1
        mc = _model_constants(target.device)
        self.xbpc = int(mc["exchange_bytes_per_cycle"])
        self.sync_internal = int(mc["max_ipu_sync_delay_cycles"])
        self.sync_global = int(mc["global_sync_cycles"])
        self.ddr_bpc = float(mc["ddr_bytes_per_cycle"])
        self.link_bpc = float(mc["ipu_link_bytes_per_cycle"])
        self.zeros = np.zeros(nt, dtype=np.uint32)
        self.jitter_pattern = ((self.tile * 2654435761) >> 7) % 23  # fixed per-tile vertex overhead jitter
        self.op_ipu = np.int16(-1 if self.multi else 0)

    def used_mask(self, frac):
        return self.tin < max(1, int(round(frac * self.tpi)))

    # ---------------------------------------------------------------- ops of the model
    def _add_op(self, name, typ, like=None):
        ops, rng, tpi = self.ops, self.rng, self.tpi
        prec, _, fpc, inten = _OP_KINDS[typ]
        if like is not None:  # a repeated layer: same shapes, same per-tile pattern
            o = _Op(**{**like.__dict__, "op_id": len(ops), "name": name, "leaves": []})
            ops.append(o)
            return o
        o = _Op(op_id=len(ops), name=name, type=typ, precision=prec,
                frac_tiles=float(rng.choice([0.55, 0.75, 0.9, 1.0])),
                grains=int(rng.integers(2, 40) * tpi // 7 + 1),
                cycles_per_grain=int(rng.integers(60, 900)),
                flops_per_cycle=fpc, intensity=inten, jitter=bool(rng.random() < 0.5),
                hot_tiles=int(rng.choice([0, 2, 4, 8])),
                act_bytes=int(rng.integers(1, 9)) * 1024,
                weight_bytes=(int(rng.integers(8, 40)) * 1024 if typ == "matmul" else 0))
        ops.append(o)
        return o

    def build_ops(self, num_layers: int) -> None:
        """stream in, ``num_layers`` layers of six ops (plus an IPU-Link exchange on several IPUs), stream out."""
        self.ops: list[_Op] = []
        ops = self.ops
        self.stream_in = _Op(len(ops), "host_io/stream_in", "stream_copy", "fp16", 0.25, 0, 0, 0, 0, False, 0, 2048, 0)
        ops.append(self.stream_in)
        self.layer_ops = layer_ops = []
        layer_kinds = (("attention/qkv_matmul", "matmul"), ("attention/softmax", "softmax"),
                       ("attention/out_matmul", "matmul"), ("residual_add", "add"), ("layernorm", "layernorm"),
                       ("ffn/matmul", "matmul"))
        for layer in range(num_layers):
            # layers beyond DISTINCT_LAYERS repeat earlier ones (as a transformer's layers do), which keeps
            # the per-tile templates, and so memory, bounded for models with many layers
            src = layer_ops[layer % DISTINCT_LAYERS] if layer >= DISTINCT_LAYERS else None
            lo = [self._add_op(f"layer{layer}/{n}", t, like=None if src is None else src[i])
                  for i, (n, t) in enumerate(layer_kinds)]
            if self.multi:
                o = _Op(len(ops), f"layer{layer}/ipu_exchange", "ipu_exchange", "fp16", 0.5, 0, 0, 0, 0,
                        False, 0, 0, 0)
                ops.append(o)
                lo.append(o)
            layer_ops.append(lo)
        self.stream_out = _Op(len(ops), "host_io/stream_out", "stream_copy", "fp16", 0.25, 0, 0, 0, 0, False, 0,
                              0, 0)
        ops.append(self.stream_out)
        self.all_ops = [self.stream_in] + [x for lo in layer_ops for x in lo] + [self.stream_out]

    # ---------------------------------------------------------------- leaves (one BSP step each per iteration)
    def _add_leaf(self, kind, op, name, cyc, bi, bo, cs=-1):
        # identical per-tile rows (all syncs; repeated layers) share one template
        key = ("sync",) if kind == SYNC else (op.tmpl_src, name.rsplit("/", 1)[-1])
        if key not in self._tmpl_index:
            self._tmpl_index[key] = len(self._cyc)
            self._cyc.append(np.asarray(cyc, dtype=np.uint32))
            self._bin.append(np.asarray(bi, dtype=np.uint32))
            self._bout.append(np.asarray(bo, dtype=np.uint32))
        self.leaves.append(dict(kind=kind, op=op, name=name, cs=cs, tmpl=self._tmpl_index[key]))
        op.leaves.append(len(self.leaves) - 1)

    def _compute_template(self, op, stage):
        tin = self.tin
        used = self.used_mask(op.frac_tiles)
        n_used_per_ipu = int(used[:self.tpi].sum())
        grains = op.grains if stage == 0 else max(1, op.grains // 8)
        q, r = divmod(grains, n_used_per_ipu)
        g_per_tile = np.where(tin < r, q + 1, q) * used
        has_work = g_per_tile > 0  # a used tile may get no grain when grains < tiles
        cyc = g_per_tile * op.cycles_per_grain + 40 * has_work
        if op.hot_tiles:
            hot = has_work & (tin < op.hot_tiles)
            cyc = np.where(hot, cyc * 2 + op.cycles_per_grain * 3, cyc)
        if op.jitter:
            cyc = cyc + self.jitter_pattern * has_work
        return cyc.astype(np.int64), g_per_tile, has_work

    def _exchange_template(self, op, scale):
        tin = self.tin
        used = self.used_mask(op.frac_tiles)
        n_used = int(used[:self.tpi].sum())
        big = op.act_bytes * scale
        bi = np.where(tin < n_used // 3, big + 64, big) * used
        bo = np.where(tin < n_used // 2, big, big + 128) * used
        cyc = (np.maximum(bi, bo) + self.xbpc - 1) // self.xbpc + 30 * used
        return cyc, bi, bo

    def _shared_busy(self, used, nbytes, bytes_per_cycle, overhead):
        """Streaming memory and IPU-Links are shared by an IPU's tiles: every used tile waits for its IPU's
        total."""
        ipu_of = self.tile // self.tpi
        ipu_bytes = np.bincount(ipu_of, weights=nbytes, minlength=self.num_ipus)[ipu_of]
        return np.ceil(ipu_bytes / bytes_per_cycle).astype(np.int64) * used + overhead * used

    def build_leaves(self) -> None:
        """Every op's leaves with their per-tile templates; compute sets and vertex rows of compute leaves."""
        self.leaves = []  # dicts: kind, op, name, cs, tmpl
        self._cyc, self._bin, self._bout = [], [], []
        self._tmpl_index: dict = {}
        self.compute_sets = []
        self.vertex_rows = []
        self.codelet_code: dict[str, int] = {}
        zeros = self.zeros
        for o in self.all_ops:
            if o.type == "stream_copy":
                used = self.used_mask(o.frac_tiles)
                b = (used * (128 if o is self.stream_in else 64)).astype(np.int64)
                bi, bo = (b, zeros) if o is self.stream_in else (zeros, b)
                busy = self._shared_busy(used, b, self.ddr_bpc, 20)
                self._add_leaf(STREAM, o, f"{o.name}/StreamCopy", busy, bi, bo)
                self._add_leaf(SYNC, o, f"{o.name}/Sync", zeros, zeros, zeros)
                continue
            if o.type == "ipu_exchange":
                used = self.used_mask(o.frac_tiles)
                b = (used * 1536).astype(np.int64)
                busy = self._shared_busy(used, b, self.link_bpc, 50)
                self._add_leaf(SYNC, o, f"{o.name}/GlobalSync", zeros, zeros, zeros)
                self._add_leaf(GEXCH, o, f"{o.name}/GlobalExchange", busy, b, b)
                self._add_leaf(SYNC, o, f"{o.name}/Sync", zeros, zeros, zeros)
                continue
            stage = 0
            for kind in _OP_KINDS[o.type][1]:
                if kind == COMPUTE:
                    self._compute_leaf(o, stage)
                    stage += 1
                elif kind == EXCH:
                    cyc, bi, bo = self._exchange_template(o, 1 + stage)
                    self._add_leaf(EXCH, o, f"{o.name}/Exchange{stage}", cyc, bi, bo)
                else:
                    self._add_leaf(SYNC, o, f"{o.name}/Sync{len(o.leaves)}", zeros, zeros, zeros)
        self._finish_leaves()

    def _compute_leaf(self, o, stage) -> None:
        cyc, g, used = self._compute_template(o, stage)
        codelet = _CODELETS[o.type][min(stage, len(_CODELETS[o.type]) - 1)]
        cs_id = len(self.compute_sets)
        self.compute_sets.append(dict(cs_id=cs_id, name=f"{o.name}/cs{stage}", op_id=o.op_id,
                                      num_vertices=int(g.sum()), num_tiles=int(used.sum())))
        idx = np.flatnonzero(used)  # tiles with vertices
        code = self.codelet_code.setdefault(codelet, len(self.codelet_code))
        self.vertex_rows.append((np.full(idx.size, cs_id, dtype=np.int32), np.full(idx.size, code, np.int16),
                                 idx.astype(np.int32), g[idx].astype(np.int64), cyc[idx].astype(np.int64),
                                 (g[idx] * 16 + 8).astype(np.int64),
                                 np.full(idx.size, 900 + 300 * stage, dtype=np.int64)))
        self._add_leaf(COMPUTE, o, f"{o.name}/Execute{stage}", cyc, self.zeros, self.zeros, cs=cs_id)

    def _finish_leaves(self) -> None:
        """Templates stacked; per-leaf kind, op, busy cycles, bytes and duration."""
        leaves = self.leaves
        self.n_leaves = len(leaves)
        self.cyc_t, self.bin_t, self.bout_t = np.stack(self._cyc), np.stack(self._bin), np.stack(self._bout)
        self.leaf_tmpl = np.array([lf["tmpl"] for lf in leaves], dtype=np.int64)
        self.leaf_kind = kind = np.array([lf["kind"] for lf in leaves], dtype=np.int8)
        self.leaf_op = np.array([lf["op"].op_id for lf in leaves], dtype=np.int32)
        self.leaf_busy = self.cyc_t.max(axis=1).astype(np.int64)[self.leaf_tmpl]
        self.leaf_bin = self.bin_t.sum(axis=1, dtype=np.int64)[self.leaf_tmpl]
        self.leaf_bout = self.bout_t.sum(axis=1, dtype=np.int64)[self.leaf_tmpl]
        overhead = np.select([kind == COMPUTE, kind == SYNC, kind == GEXCH],
                             [20, self.sync_internal, 80], 40).astype(np.int64)
        # a sync that follows a global exchange op's first leaf is a global sync
        for i, lf in enumerate(leaves):
            if lf["kind"] == SYNC and lf["name"].endswith("GlobalSync"):
                overhead[i] = self.sync_global
        self.overhead = overhead
