"""The bundled workloads, written once against the backend op vocabulary (``backend.py``).

Each ``build_*`` function creates its seeded inputs and weights on the backend, runs the forward
pass and (when ``cfg.training``) the backward pass and an SGD update, and returns a dict of
named result handles (loss gradient, outputs, updated weights) that full-numerics runs compare
against the numpy reference.

Multi-IPU: layers are placed on IPUs as pipeline stages (layer l on IPU ``l * ipus // layers``);
activations crossing a stage boundary become inter-IPU copies in the emulator.
Recomputation: with ``cfg.recompute`` only each layer's input is kept from the forward pass; the
backward pass re-runs the layer's forward (ops named ``layerN/recompute/...``) before its gradient.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields, replace

import numpy as np

from popvision_lite.errors import ConfigError

from .building import Built, _Values, stage_of, stage_of_split  # noqa: F401  (names the builders use)
from .resnet import RESNET_DEFAULTS, RESNET_PRESETS, build_resnet, validate_resnet

BERT_PRESETS = {
    # name: (layers, hidden, heads)  (Turc et al. 2019 "Well-read students" sizes; Devlin et al. 2018)
    "bert-tiny": (2, 128, 2),
    "bert-mini": (4, 256, 4),
    "bert-small": (4, 512, 8),
    "bert-medium": (8, 512, 8),
    "bert-base": (12, 768, 12),
    "bert-large": (24, 1024, 16),
}

MODEL_DEFAULTS = {
    "mlp": dict(batch=64, layers=3, hidden=256),
    "bert": dict(batch=2, seq=64, layers=2, hidden=128, heads=2),
    "conv": dict(batch=2, layers=1, hidden=16, image=16),
    "gnn": dict(batch=1, layers=2, hidden=64, nodes=256, edges=1024),
    "resnet": RESNET_DEFAULTS,  # ResNet: layers = depth, hidden = first-stage width, vocab = classes
}
# GPT-style decoders: (layers, d_model, heads, d_head, seq).  GPT-2: Radford et al. 2019 (1024 tokens,
# vocab 50257; d_head 64 throughout).  GPT-3: Brown et al. 2020, Table 2.1 (n_layers, d_model, n_heads,
# d_head; 2048 tokens).  There heads x d_head is not always d_model: XL has 24 heads of 128 on d_model
# 2048, so attention projects d_model -> heads x d_head -> d_model.  Table 2.1 lists 13B's d_model as 5140
# (40 heads of 128 = 5120); 5140 is kept as published.
GPT_PRESETS = {
    "gpt2-small": (12, 768, 12, 64, 1024), "gpt2-medium": (24, 1024, 16, 64, 1024),
    "gpt2-large": (36, 1280, 20, 64, 1024), "gpt2-xl": (48, 1600, 25, 64, 1024),
    "gpt3-small": (12, 768, 12, 64, 2048), "gpt3-medium": (24, 1024, 16, 64, 2048),
    "gpt3-large": (24, 1536, 16, 96, 2048), "gpt3-xl": (24, 2048, 24, 128, 2048),
    "gpt3-2.7b": (32, 2560, 32, 80, 2048), "gpt3-6.7b": (32, 4096, 32, 128, 2048),
    "gpt3-13b": (40, 5140, 40, 128, 2048), "gpt3-175b": (96, 12288, 96, 128, 2048),
}
TRANSFORMERS = ("bert", "gpt")  # model families built as pipeline stages (emulator/models/pipeline.py)
MODEL_NAMES = tuple(sorted(set(MODEL_DEFAULTS) | set(BERT_PRESETS) | set(GPT_PRESETS) | set(RESNET_PRESETS)))


@dataclass
class ModelConfig:
    model: str = "bert"
    batch: int = 2
    seq: int = 64
    layers: int = 2
    hidden: int = 128
    heads: int = 2
    head_dim: int = 0  # width of one attention head; 0 = hidden // heads (GPT-3 XL: 24 x 128 on hidden 2048)
    ffn: int = 0  # 0 = 4 * hidden
    vocab: int = 1024
    image: int = 16
    nodes: int = 256
    edges: int = 1024
    precision: str = "fp16"
    recompute: bool = False
    training: bool = True
    ipus: int = 1
    lr: float = 0.01
    seed: int = 0
    streaming_weights: bool = False
    # ---- training at scale (emulator/models/pipeline.py; see docs/emulator.md "Schedule model") ----
    replicas: int = 1                  # data-parallel replicas; ipus = replicas x pipeline stages x tensor_parallel
    # IPUs each layer is sharded over (Megatron-style tensor parallelism: attention heads, FFN columns and the
    # vocabulary split; Graphcore's GPT-3 on IPU-PODs); 1 = no sharding
    tensor_parallel: int = 1
    pipeline_stages: int = 0           # 0 = one stage per IPU of a replica (ipus // replicas)
    layer_split: list | None = None    # layers per stage (PopART-style); None = even split
    grad_accum: int = 1                # micro-batches per optimizer step (per replica)
    optimizer: str = "sgd"             # sgd | momentum | adam | lamb | lars
    optimizer_state: str = "onchip"    # onchip | offchip (streamed from DDR once per optimizer step)
    master_weights: bool = False       # fp32 master copy of fp16 weights
    optimizer_state_dtype: str = "fp32"  # dtype of momentum / Adam / LAMB moments: fp16 | fp32
    rts: bool = False                  # replicated tensor sharding of the optimizer state
    # host step loop whose per-step cost is added (schedule.per_step_terms): none | popart | tensorflow
    host_framework: str = "none"
    available_memory_proportion: float = 0.6  # Poplar's default share of tile memory for matmul temporaries
    packing: float = 1.0               # average sequences per pack (samples = packs x packing)
    mask_tokens: int = 0               # MLM positions per pack; 0 = 15 % of seq (76 for seq 512, as MLPerf)
    outline: bool = True               # share code of structurally identical ops in a stage (PopART outlining)
    # "sequential": embedding on the first IPU, MLM/NSP heads on the last; "wrap" (Graphcore's MLPerf
    # BERT): embedding and heads on IPU 0, the MLM decoder tied to the embedding table; S IPUs run S + 1
    # pipeline stages: IPU 0 (embedding + layers), IPU 1, ..., IPU S-1, IPU 0 again (layers + heads), and
    # layer_split has S + 1 entries in that order (IPU 0's two may be 0)
    pipeline_placement: str = "sequential"

    @property
    def ffn_size(self) -> int:
        return self.ffn or 4 * self.hidden

    @property
    def d_head(self) -> int:
        """Width of one attention head."""
        return self.head_dim or self.hidden // self.heads

    @property
    def attn_width(self) -> int:
        """Width the attention projects to: heads x d_head (q, k, v are (tokens, attn_width))."""
        return self.heads * self.d_head

    @property
    def stages(self) -> int:
        """Pipeline stages of one replica."""
        if self.layer_split:
            return len(self.layer_split) - (1 if self.pipeline_placement == "wrap" else 0)
        return self.pipeline_stages or max(1, self.ipus // max(1, self.replicas * self.tensor_parallel))

    def shard(self) -> ModelConfig:
        """The part of every layer one IPU of a tensor-parallel group holds (Shoeybi et al. 2019, Megatron-LM,
        section 3): heads / t of the attention heads (q, k, v column-split, the output projection row-split),
        ffn / t of the FFN (w1 column-split, w2 row-split), vocab / t of the embedding and LM head
        (vocabulary-parallel); layer norms and residuals are replicated.  The vocabulary is padded to a multiple
        of 128 x t first, as Megatron-LM pads it (``--make-vocab-size-divisible-by`` 128, times the
        tensor-parallel size: 50257 -> 51200 at t = 8), so each IPU's slice is a multiple of 128.  The config
        itself when t = 1."""
        t = self.tensor_parallel
        if t <= 1:
            return self
        return replace(self, heads=self.heads // t, head_dim=self.d_head, ffn=self.ffn_size // t,
                       vocab=-(-self.vocab // (128 * t)) * 128, tensor_parallel=1,
                       ipus=max(1, self.ipus // t), pipeline_stages=self.stages)

    def split(self) -> list:
        """Layers per pipeline stage (even split, remainder to the first stages, unless given); halves
        (x.5) where ``layer_split`` gives them.  With the wrap placement there is one more stage than
        IPUs: IPU 0 first (none of the layers in an even split), IPUs 1 .. S-1, IPU 0 again."""
        if self.layer_split:
            return [int(v) if float(v) == int(v) else float(v) for v in self.layer_split]
        S, L = self.stages, self.layers
        even = [L // S + (1 if s < L % S else 0) for s in range(S)]
        if self.pipeline_placement == "wrap" and S > 1:
            return [0] + even[1:] + [even[0]]
        return even

    def blocks(self) -> list[tuple[int, int]]:
        """(attention blocks, FFN blocks) per encoder stage: the layers' halves alternate attention,
        FFN, and stage i holds the halves from 2 x (layers before it) on, so a stage of 6.5 layers
        that starts on a layer boundary holds 7 attention and 6 FFN blocks (PopART's MLPerf placement
        [[1,[7,6]],[2,[6,7]],[3,[7,6]],[0,[4,5]]] is layer_split = [0, 6.5, 6.5, 6.5, 4.5], wrap)."""
        out, pos = [], 0
        for k in self.split():
            n = int(round(2 * k))
            att = len(range(pos + (pos % 2), pos + n, 2))
            out.append((att, n - att))
            pos += n
        return out

    def amp_of(self, ipu: int) -> float:
        """availableMemoryProportion of an IPU of the replica (one value, or one per IPU)."""
        a = self.available_memory_proportion
        return float(a[ipu] if isinstance(a, list | tuple) else a)

    @property
    def pipeline_depth(self) -> int:
        """Pipeline stages a micro-batch passes through: the IPUs of a replica, plus one when the
        placement wraps back to IPU 0 (embedding first, last layers and heads at the end)."""
        return len(self.split())

    @property
    def mlm_tokens(self) -> int:
        return self.mask_tokens or max(1, int(0.15 * self.seq))

    @property
    def scaled(self) -> bool:
        """True when the run needs the pipelined / replicated / training-state composition."""
        return (self.ipus > 1 or self.replicas > 1 or self.grad_accum > 1 or self.optimizer != "sgd"
                or self.master_weights or self.optimizer_state != "onchip" or self.rts or self.packing != 1.0
                or bool(self.layer_split) or self.pipeline_stages > 1 or self.tensor_parallel > 1)

    def to_dict(self) -> dict:
        d = asdict(self)
        if not d["head_dim"]:  # the default (hidden / heads): left out, so configs and profiles that do
            d.pop("head_dim")  # not set it read as before
        if d.get("tensor_parallel", 1) == 1:  # the default (no sharding): left out the same way
            d.pop("tensor_parallel", None)
        if d.get("host_framework", "none") == "none":  # the default (the IPUs alone): left out the same way
            d.pop("host_framework", None)
        return d

    @classmethod
    def field_names(cls) -> set[str]:
        return {f.name for f in fields(cls)}


def make_config(model: str, **overrides) -> ModelConfig:
    """Defaults of ``model`` (a preset like bert-base sets layers/hidden/heads) + overrides (None = unset)."""
    if model not in MODEL_NAMES:
        raise ConfigError(f"model: unknown model {model!r}; choose one of {', '.join(MODEL_NAMES)}")
    base = dict(model="bert" if model in BERT_PRESETS else "gpt" if model in GPT_PRESETS
                else "resnet" if model in RESNET_PRESETS else model)
    if model in RESNET_PRESETS:
        base.update(RESNET_PRESETS[model])
    elif model in GPT_PRESETS:
        base.update(MODEL_DEFAULTS["bert"])
        base["layers"], base["hidden"], base["heads"], base["head_dim"], base["seq"] = GPT_PRESETS[model]
        base["batch"], base["vocab"] = 1, 50257
    elif model in BERT_PRESETS:
        base.update(MODEL_DEFAULTS["bert"])
        base["layers"], base["hidden"], base["heads"] = BERT_PRESETS[model]
        base["batch"], base["seq"] = 8, 128
        base["vocab"] = 30522  # BERT's WordPiece vocabulary (Devlin et al. 2018); MLPerf used 30912
    else:
        base.update(MODEL_DEFAULTS[model])
    for k, v in overrides.items():
        if v is None:
            continue
        if k not in ModelConfig.field_names():
            raise ConfigError(f"{k}: unknown setting; known: {', '.join(sorted(ModelConfig.field_names()))}")
        base[k] = list(v) if k == "layer_split" else v
    if overrides.get("ipus") is None and ("replicas" in base or "pipeline_stages" in base or "layer_split" in base
                                          or "tensor_parallel" in base):
        # ipus not given: replicas x stages
        stages = (len(base["layer_split"]) - (1 if base.get("pipeline_placement") == "wrap" else 0)
                  if base.get("layer_split") else base.get("pipeline_stages", 0) or 1)
        tp = base.get("tensor_parallel", 1)  # a bad value is refused by validate(), naming the field
        base["ipus"] = int(base.get("replicas", 1)) * int(stages) * (tp if isinstance(tp, int) and tp >= 1 else 1)
    cfg = ModelConfig(**base)
    if overrides.get("grad_accum") is None and cfg.model in TRANSFORMERS and cfg.stages > 1:
        # PopART needs at least 2S - 1 micro-batches per step to fill an S-stage pipeline
        cfg.grad_accum = 2 * cfg.pipeline_depth - 1
    validate(cfg)
    return cfg


def validate(cfg: ModelConfig) -> None:
    for name in ("batch", "seq", "layers", "hidden", "heads", "vocab", "image", "nodes", "edges", "ipus"):
        v = getattr(cfg, name)
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ConfigError(f"{name}: must be a positive integer, got {v!r}")
    if not isinstance(cfg.seed, int) or isinstance(cfg.seed, bool) or cfg.seed < 0:
        raise ConfigError(f"seed: must be a non-negative integer, got {cfg.seed!r}")
    if cfg.precision not in ("fp16", "fp32"):
        raise ConfigError(f"precision: must be fp16 or fp32, got {cfg.precision!r}")
    if not isinstance(cfg.head_dim, int) or isinstance(cfg.head_dim, bool) or cfg.head_dim < 0:
        raise ConfigError(f"head_dim: must be a non-negative integer (0 = hidden / heads), got {cfg.head_dim!r}")
    if cfg.model in TRANSFORMERS and not cfg.head_dim and cfg.hidden % cfg.heads:
        raise ConfigError(f"heads: hidden size {cfg.hidden} is not divisible by {cfg.heads} heads; give head_dim "
                          f"(the width of one head) when heads x head_dim is not the hidden size")
    if not (isinstance(cfg.lr, int | float) and cfg.lr > 0):
        raise ConfigError(f"lr: must be a positive number, got {cfg.lr!r}")
    if cfg.model == "resnet":
        validate_resnet(cfg)
    validate_scale(cfg)
    from popvision_lite.value_checks import check_model_config

    check_model_config(cfg)  # every numeric field finite and within its bounds (issue 19)


def validate_scale(cfg: ModelConfig) -> None:
    """Checks of the pipeline / replication / training-state fields; errors name the field."""
    for name in ("replicas", "grad_accum", "mask_tokens", "pipeline_stages", "tensor_parallel"):
        v = getattr(cfg, name)
        lo = 0 if name in ("mask_tokens", "pipeline_stages") else 1
        if not isinstance(v, int) or isinstance(v, bool) or v < lo:
            raise ConfigError(f"{name}: must be {'a non-negative' if lo == 0 else 'a positive'} integer, got {v!r}")
    choices = {"optimizer": ("sgd", "momentum", "adam", "lamb", "lars"), "optimizer_state": ("onchip", "offchip"),
               "optimizer_state_dtype": ("fp16", "fp32"), "host_framework": ("none", "popart", "tensorflow")}
    for name, ok in choices.items():
        if getattr(cfg, name) not in ok:
            raise ConfigError(f"{name}: must be one of {', '.join(ok)}, got {getattr(cfg, name)!r}")
    if cfg.pipeline_placement not in ("sequential", "wrap"):
        raise ConfigError(f"pipeline_placement: must be sequential or wrap, got {cfg.pipeline_placement!r}")
    if cfg.pipeline_placement == "wrap" and (cfg.model != "bert" or cfg.stages < 2):
        raise ConfigError("pipeline_placement: 'wrap' (embedding, heads and the last layers on IPU 0) needs a bert "
                          f"model pipelined over at least 2 IPUs (model {cfg.model!r}, {cfg.stages} stage(s))")
    for name in ("master_weights", "rts", "outline"):
        if not isinstance(getattr(cfg, name), bool):
            raise ConfigError(f"{name}: must be true or false, got {getattr(cfg, name)!r}")
    amp = cfg.available_memory_proportion
    amps = list(amp) if isinstance(amp, list | tuple) else [amp]
    if not amps or any(isinstance(a, bool) or not isinstance(a, int | float) or not 0 < a <= 1 for a in amps):
        raise ConfigError(f"available_memory_proportion: must be a number in (0, 1] (or one per IPU of a "
                          f"pipelined bert run), got {amp!r}")
    if isinstance(amp, list | tuple):
        if cfg.model not in TRANSFORMERS or len(amps) != cfg.stages:
            raise ConfigError(f"available_memory_proportion: a list needs one value per IPU of a pipelined bert "
                              f"/ gpt replica ({cfg.stages} for this run), got {len(amps)} for model {cfg.model!r}")
    pk = cfg.packing
    if isinstance(pk, bool) or not isinstance(pk, int | float) or pk < 1:
        raise ConfigError(f"packing: must be a number >= 1 (average sequences per pack), got {pk!r}")
    if cfg.layer_split is not None:
        sp = cfg.layer_split
        wrap = cfg.pipeline_placement == "wrap"
        ok = isinstance(sp, list | tuple) and len(sp) > (1 if wrap else 0) and all(
            isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v >= 0
            and (2 * v) % 1 == 0 for v in sp)
        inner = sp[1:-1] if (ok and wrap) else sp
        if not ok or not all(v >= 0.5 for v in inner):
            raise ConfigError("layer_split: must be a list of positive layer counts in steps of 0.5 (a half = the "
                              "attention or FFN block of a layer), one per stage"
                              + (" - with pipeline_placement 'wrap' one more entry than IPUs, IPU 0 first and last "
                                 "(those two may be 0)" if wrap else "") + f", got {sp!r}")
        if sum(sp) != cfg.layers:
            raise ConfigError(f"layer_split: {list(sp)} covers {sum(sp)} layers but the model has {cfg.layers}")
        if cfg.pipeline_stages and cfg.pipeline_stages != cfg.stages:
            raise ConfigError(f"pipeline_stages: {cfg.pipeline_stages} but layer_split has {cfg.stages} IPUs' stages")
    tp = cfg.tensor_parallel
    if tp > 1:
        if cfg.model not in TRANSFORMERS:
            raise ConfigError(f"tensor_parallel: only the bert / gpt models shard their layers over IPUs; model "
                              f"'{cfg.model}' does not read it")
        if cfg.heads % tp or cfg.ffn_size % tp:
            raise ConfigError(f"tensor_parallel: {tp} IPUs must divide the attention heads ({cfg.heads}) and the FFN "
                              f"width ({cfg.ffn_size}); choose a divisor of both")
        if cfg.pipeline_placement == "wrap":
            raise ConfigError("tensor_parallel: the 'wrap' pipeline placement is not modelled with tensor parallelism; "
                              "use pipeline_placement 'sequential'")
    if cfg.ipus % (cfg.replicas * tp):
        raise ConfigError(f"replicas: {cfg.replicas} replicas x tensor_parallel {tp} do not divide {cfg.ipus} IPUs")
    S = cfg.stages
    if cfg.replicas * S * tp != cfg.ipus:
        raise ConfigError(f"ipus: replicas ({cfg.replicas}) x pipeline_stages ({S}) x tensor_parallel ({tp}) = "
                          f"{cfg.replicas * S * tp} but ipus is {cfg.ipus}")
    D = cfg.pipeline_depth
    if cfg.model in TRANSFORMERS and S > 1 and cfg.grad_accum < 2 * D - 1:
        raise ConfigError(f"grad_accum: {cfg.grad_accum} micro-batches cannot fill a {D}-stage pipeline; PopART "
                          f"needs at least 2 x stages - 1 = {2 * D - 1}")
    if cfg.layers < S:
        raise ConfigError(f"layers: {cfg.layers} layer(s) cannot fill {S} pipeline stages (layers < stages; "
                          f"lower --ipus / --pipeline-stages or add layers)")
    if cfg.model not in TRANSFORMERS:
        dflt = ModelConfig()
        # replication, accumulation and training state also compose on the whole-graph path
        for name in ("packing", "layer_split", "mask_tokens", "outline", "pipeline_placement"):
            if name == "outline" and cfg.model == "resnet":
                continue  # resnet outlines identical blocks in timing-only runs (models/resnet.py)
            if getattr(cfg, name) != getattr(dflt, name):
                raise ConfigError(f"{name}: only the bert models run the pipelined / replicated training "
                                  f"composition; model '{cfg.model}' does not read it")


# ============================================================================ MLP


def build_mlp(be, cfg: ModelConfig) -> Built:
    rv = _Values(be, cfg.seed)
    H, B, L = cfg.hidden, cfg.batch, cfg.layers
    out = Built()
    x = be.input("input", rv.normal((B, H)))
    target = be.input("target", rv.normal((B, H)))
    params = []
    for i in range(L):
        with be.on_ipu(stage_of(i, L, cfg.stages)), be.scope(f"layer{i}"):
            params.append((be.weight("w", rv.init((H, H), H), streamed=cfg.streaming_weights),
                           be.weight("b", rv.const(H, 0.0), streamed=cfg.streaming_weights)))
    acts = []  # (input, pre-activation)
    h = x
    for i, (w, b) in enumerate(params):
        with be.on_ipu(stage_of(i, L, cfg.stages)), be.scope(f"layer{i}"):
            z = be.add_bias(be.matmul(h, w, "matmul"), b, "bias_add")
            acts.append((h, z))
            h = be.relu(z, "relu") if i < L - 1 else z
    out.results["output"] = h
    if not cfg.training:
        return out
    with be.on_ipu(stage_of(L - 1, L, cfg.stages)), be.scope("loss"):
        dh = be.mse_grad(h, target, "mse_grad")
    out.results["loss_grad"] = dh
    for i in reversed(range(L)):
        w, b = params[i]
        hin, z = acts[i]
        with be.on_ipu(stage_of(i, L, cfg.stages)), be.scope(f"layer{i}/bwd"):
            dz = be.relu_bwd(z, dh, "relu_bwd") if i < L - 1 else dh
            dw = be.matmul(be.t(hin), dz, "dw_matmul")
            db = be.reduce_rows(dz, "db_reduce")
            if i > 0:
                dh = be.matmul(dz, be.t(w), "dx_matmul")
            out.results[f"layer{i}/dw"] = dw
            out.results[f"layer{i}/w_new"] = be.sgd(w, dw, cfg.lr, "w_sgd")
            out.results[f"layer{i}/b_new"] = be.sgd(b, db, cfg.lr, "b_sgd")
    return out


# ============================================================================ BERT encoder


class _Heads:
    """Flat index helpers for (B*S, H) <-> (B*A, S, d) head layouts."""

    def __init__(self, B, S, A, d):
        self.B, self.S, self.A, self.d = B, S, A, d
        idx = np.arange(B * S * A * d, dtype=np.int64).reshape(B, S, A, d)
        self.split = idx.transpose(0, 2, 1, 3).reshape(B * A, S, d)  # view of (B*S,H) as heads
        self.split_t = idx.transpose(0, 2, 3, 1).reshape(B * A, d, S)  # heads, transposed
        inv = np.empty(B * S * A * d, dtype=np.int64)
        inv[self.split.reshape(-1)] = np.arange(inv.size, dtype=np.int64)
        self.merge = inv.reshape(B * S, A * d)  # view of (B*A,S,d) as (B*S,H)


def _bert_layer_params(be, rv, cfg, streamed):
    H, F, W = cfg.hidden, cfg.ffn_size, cfg.attn_width
    p = {}
    for n in ("wq", "wk", "wv"):
        p[n] = be.weight(n, rv.init((H, W), H), streamed=streamed)
    p["wo"] = be.weight("wo", rv.init((W, H), W), streamed=streamed)
    p["w1"] = be.weight("w1", rv.init((H, F), H), streamed=streamed)
    p["w2"] = be.weight("w2", rv.init((F, H), F), streamed=streamed)
    for n in ("ln1", "ln2"):
        p[n + "_g"] = be.weight(n + "_g", rv.const(H, 1.0), streamed=streamed)
        p[n + "_b"] = be.weight(n + "_b", rv.const(H, 0.0), streamed=streamed)
    return p


def _bert_layer_fwd(be, p, x, hd: _Heads, causal: bool = False, mark=None):
    """x: (B*S, H).  Returns (out, cache).  ``causal``: GPT-style masked attention.  ``mark(name)`` is
    called before the attention half and before the FFN half (the two blocks PopART places on IPUs
    separately, e.g. MLPerf's attention / FFN placement)."""
    if mark:
        mark("att")
    c = {"x": x}
    c["q"] = be.matmul(x, p["wq"], "attention/q_matmul")
    c["k"] = be.matmul(x, p["wk"], "attention/k_matmul")
    c["v"] = be.matmul(x, p["wv"], "attention/v_matmul")
    scores = be.matmul(be.take(c["q"], hd.split), be.take(c["k"], hd.split_t), "attention/qk_matmul")
    s = be.scale(scores, 1.0 / math.sqrt(hd.d), "attention/scale")
    if causal:
        # select(score, -inf) above the diagonal: one elementwise pass over the scores (the mask is
        # generated from indices, not stored)
        s = be.scale(s, 1.0, "attention/causal_mask")
    c["p"] = be.softmax(s, "attention/softmax")
    c["ctx"] = be.matmul(c["p"], be.take(c["v"], hd.split), "attention/pv_matmul")  # (B*A, S, d)
    attn = be.matmul(be.take(c["ctx"], hd.merge), p["wo"], "attention/out_matmul")
    c["r1"] = be.add(x, attn, "attention/residual")
    c["h1"] = be.layer_norm(c["r1"], p["ln1_g"], p["ln1_b"], "attention/layer_norm")
    if mark:
        mark("ffn")
    c["f1"] = be.matmul(c["h1"], p["w1"], "ffn/matmul1")
    c["a"] = be.gelu(c["f1"], "ffn/gelu")
    f2 = be.matmul(c["a"], p["w2"], "ffn/matmul2")
    c["r2"] = be.add(c["h1"], f2, "ffn/residual")
    out = be.layer_norm(c["r2"], p["ln2_g"], p["ln2_b"], "ffn/layer_norm")
    return out, c


def build_bert_stage(be, cfg: ModelConfig, stage: int, nstages: int) -> dict:
    """The DISTINCT program of one pipeline stage for ONE micro-batch, with ONE outlined encoder
    layer body (emulator/models/pipeline.py repeats its cost for the stage's layers).  Phases are marked
    with ``be.mark``: ``emb_fwd``, ``layer_fwd_att`` / ``layer_fwd_ffn`` (the attention and FFN halves
    of the body), ``head`` (MLM + NSP forward, loss, backward; with ``pipeline_placement = "wrap"`` on
    the first stage the MLM decoder is the embedding table, tied as in BERT and MLPerf's placement),
    ``layer_recompute_att`` / ``_ffn`` (re-run the SAME forward programs: recomputation reuses the
    forward code), ``layer_bwd_ffn`` / ``layer_bwd_att``.  Returns handles: ``x`` (stage input), ``y`` (body output), ``grads`` (layer body),
    ``layer_params`` / ``extra_params`` (weight handles)."""
    rv = _Values(be, cfg.seed)
    B, S, H, A = cfg.batch, cfg.seq, cfg.hidden, cfg.heads
    hd = _Heads(B, S, A, cfg.d_head)
    first, last = stage == 0, stage == nstages - 1
    gpt = cfg.model == "gpt"
    extra = []
    out: dict = {}
    if first:
        with be.scope("embedding"):
            table = be.weight("table", rv.normal((cfg.vocab, H), 0.5))
            pos = be.weight("position", rv.normal((S, H), 0.5))
            g, b = be.weight("ln_g", rv.const(H, 1.0)), be.weight("ln_b", rv.const(H, 0.0))
            extra += [table, pos, g, b]
            be.mark("emb_fwd")
            ids = np.random.default_rng(cfg.seed + 7).integers(0, cfg.vocab, size=B * S)
            e = be.gather_rows(table, ids, "gather")
            e = be.add(e, be.take(pos, np.tile(np.arange(S * H, dtype=np.int64), B).reshape(B * S, H)),
                       "position_add")
            x = be.layer_norm(e, g, b, "layer_norm")
    else:
        with be.scope("pipeline"):
            x = be.input("stage_input", rv.normal((B * S, H)))  # received from the previous IPU
    with be.scope("layer"):
        p = _bert_layer_params(be, rv, cfg, False)
        y, c = _bert_layer_fwd(be, p, x, hd, causal=gpt, mark=lambda h: be.mark(f"layer_fwd_{h}"))
    out.update(x=x, y=y, layer_params=p)
    if not cfg.training:
        be.mark("end")
        out.update(dx=None, grads={}, extra_params=extra)
        return out
    if last and gpt:
        with be.scope("heads"):
            dec = be.weight("lm_decoder_w", rv.init((H, cfg.vocab), H))
            extra.append(dec)
            be.mark("head")
            # language-model head over every token (decoder untied here; GPT-2/3 tie it to the embedding)
            logits = be.matmul(y, dec, "lm/decoder_matmul")
            prob = be.softmax(logits, "lm/softmax")
            dlog = be.scale(prob, 1.0 / (B * S), "lm/loss_grad")
            be.matmul(be.t(y), dlog, "lm/decoder_matmul_dw")
            d = be.matmul(dlog, be.t(dec), "lm/decoder_matmul_dx")
    elif last:
        tied = first and cfg.pipeline_placement == "wrap"  # the decoder IS the embedding table (MLPerf)
        with be.scope("heads"):
            T = B * cfg.mlm_tokens
            hp = {"mlm_w": be.weight("mlm_transform_w", rv.init((H, H), H)),
                  "mlm_b": be.weight("mlm_transform_b", rv.const(H, 0.0)),
                  "ln_g": be.weight("mlm_ln_g", rv.const(H, 1.0)), "ln_b": be.weight("mlm_ln_b", rv.const(H, 0.0)),
                  "pool": be.weight("nsp_pooler_w", rv.init((H, H), H)),
                  "cls": be.weight("nsp_classifier_w", rv.init((H, 2), H))}
            extra += list(hp.values())
            hp["dec"] = be.t(table) if tied else be.weight("mlm_decoder_w", rv.init((H, cfg.vocab), H))
            if not tied:
                extra.append(hp["dec"])
            be.mark("head")
            # MLM: only the masked positions go through the head (MLPerf: 76 per 512 tokens)
            rows = np.random.default_rng(cfg.seed + 9).choice(B * S, size=min(T, B * S), replace=False)
            xm = be.take(y, (rows[:, None] * H + np.arange(H)[None, :]))
            t1 = be.add_bias(be.matmul(xm, hp["mlm_w"], "mlm/transform_matmul"), hp["mlm_b"], "mlm/transform_bias")
            t2 = be.gelu(t1, "mlm/gelu")
            t3 = be.layer_norm(t2, hp["ln_g"], hp["ln_b"], "mlm/layer_norm")
            logits = be.matmul(t3, hp["dec"], "mlm/decoder_matmul")
            prob = be.softmax(logits, "mlm/softmax")
            # softmax cross-entropy gradient p - onehot(label): one elementwise pass over p (the labels are
            # T integers; no dense target tensor)
            dlog = be.scale(prob, 1.0 / T, "mlm/loss_grad")
            if tied:  # the decoder gradient accumulates into the table's (vocab, hidden) layout
                be.matmul(be.t(dlog), t3, "mlm/decoder_matmul_dw")
                dt3 = be.matmul(dlog, table, "mlm/decoder_matmul_dx")
            else:
                be.matmul(be.t(t3), dlog, "mlm/decoder_matmul_dw")
                dt3 = be.matmul(dlog, be.t(hp["dec"]), "mlm/decoder_matmul_dx")
            dt2, _, _ = be.layer_norm_bwd(t2, hp["ln_g"], dt3, "mlm/layer_norm_bwd")
            dt1 = be.gelu_bwd(t1, dt2, "mlm/gelu_bwd")
            be.matmul(be.t(xm), dt1, "mlm/transform_matmul_dw")
            be.matmul(dt1, be.t(hp["mlm_w"]), "mlm/transform_matmul_dx")
            # NSP on the first token of each pack: pooler + classifier (forward and backward)
            cls_rows = np.arange(B) * S
            xc = be.take(y, cls_rows[:, None] * H + np.arange(H)[None, :])
            pooled = be.matmul(xc, hp["pool"], "nsp/pooler_matmul")
            nsp = be.matmul(pooled, hp["cls"], "nsp/classifier_matmul")
            dn = be.mse_grad(nsp, be.input("nsp_target", rv.normal((B, 2), 0.01)), "nsp/loss_grad")
            be.matmul(be.t(pooled), dn, "nsp/classifier_matmul_dw")
            be.matmul(be.t(xc), be.matmul(dn, be.t(hp["cls"]), "nsp/classifier_matmul_dx"), "nsp/pooler_matmul_dw")
            # gradient into the encoder output: the masked rows scattered into zeros (one pass)
            d = be.scale(y, 0.0, "encoder_output_grad")
    else:
        with be.scope("pipeline"):
            d = be.input("stage_grad_input", rv.normal((B * S, H), 0.01))  # from the next IPU
    with be.scope("layer"):
        if cfg.recompute:  # the same programs again: recomputation shares the forward code
            for h in ("att", "ffn"):
                be.mark(f"layer_recompute_{h}")
                be.replay(f"layer_fwd_{h}")
        dx, grads = _bert_layer_bwd(be, p, c, d, hd, mark=lambda h: be.mark(f"layer_bwd_{h}"))
    be.mark("end")
    out.update(dx=dx, grads=grads, extra_params=extra)
    return out


def _bert_layer_bwd(be, p, c, dout, hd: _Heads, mark=None):
    """Returns (dx, grads dict).  ``mark(name)`` before the FFN half and before the attention half."""
    if mark:
        mark("ffn")
    g = {}
    dr2, g["ln2_g"], g["ln2_b"] = be.layer_norm_bwd(c["r2"], p["ln2_g"], dout, "ffn/layer_norm_bwd")
    g["w2"] = be.matmul(be.t(c["a"]), dr2, "ffn/matmul2_dw")
    da = be.matmul(dr2, be.t(p["w2"]), "ffn/matmul2_dx")
    df1 = be.gelu_bwd(c["f1"], da, "ffn/gelu_bwd")
    g["w1"] = be.matmul(be.t(c["h1"]), df1, "ffn/matmul1_dw")
    dh1 = be.add(dr2, be.matmul(df1, be.t(p["w1"]), "ffn/matmul1_dx"), "ffn/residual_bwd")
    if mark:
        mark("att")
    dr1, g["ln1_g"], g["ln1_b"] = be.layer_norm_bwd(c["r1"], p["ln1_g"], dh1, "attention/layer_norm_bwd")
    ctx_m = be.take(c["ctx"], hd.merge)
    g["wo"] = be.matmul(be.t(ctx_m), dr1, "attention/out_matmul_dw")
    dctx = be.matmul(dr1, be.t(p["wo"]), "attention/out_matmul_dx")  # (B*S, H)
    dctx_h = be.take(dctx, hd.split)
    dp = be.matmul(dctx_h, be.take(c["v"], hd.split_t), "attention/pv_matmul_dp")
    dvh = be.matmul(be.t(c["p"]), dctx_h, "attention/pv_matmul_dv")
    ds = be.softmax_bwd(c["p"], dp, "attention/softmax_bwd")
    dsc = be.scale(ds, 1.0 / math.sqrt(hd.d), "attention/scale_bwd")
    dqh = be.matmul(dsc, be.take(c["k"], hd.split), "attention/qk_matmul_dq")
    dkh = be.matmul(be.t(dsc), be.take(c["q"], hd.split), "attention/qk_matmul_dk")
    x_t = be.t(c["x"])
    dq, dk, dv = (be.take(t, hd.merge) for t in (dqh, dkh, dvh))
    g["wq"] = be.matmul(x_t, dq, "attention/q_matmul_dw")
    g["wk"] = be.matmul(x_t, dk, "attention/k_matmul_dw")
    g["wv"] = be.matmul(x_t, dv, "attention/v_matmul_dw")
    dx = be.add(dr1, be.matmul(dq, be.t(p["wq"]), "attention/q_matmul_dx"), "attention/dx_add_q")
    dx = be.add(dx, be.matmul(dk, be.t(p["wk"]), "attention/k_matmul_dx"), "attention/dx_add_k")
    dx = be.add(dx, be.matmul(dv, be.t(p["wv"]), "attention/v_matmul_dx"), "attention/dx_add_v")
    return dx, g


def build_bert(be, cfg: ModelConfig) -> Built:
    rv = _Values(be, cfg.seed)
    B, S, H, A, L = cfg.batch, cfg.seq, cfg.hidden, cfg.heads, cfg.layers
    hd = _Heads(B, S, A, cfg.d_head)
    out = Built()
    with be.on_ipu(0), be.scope("embedding"):
        table = be.weight("table", rv.normal((cfg.vocab, H), 0.5))
        ids = np.random.default_rng(cfg.seed + 7).integers(0, cfg.vocab, size=B * S)
        x = be.gather_rows(table, ids, "gather")
    with be.on_ipu(stage_of(L - 1, L, cfg.stages)), be.scope("loss"):
        target = be.input("target", rv.normal((B * S, H)))
    params = []
    for i in range(L):
        with be.on_ipu(stage_of(i, L, cfg.stages)), be.scope(f"layer{i}"):
            params.append(_bert_layer_params(be, rv, cfg, cfg.streaming_weights))
    inputs, caches = [], []
    for i in range(L):
        with be.on_ipu(stage_of(i, L, cfg.stages)), be.scope(f"layer{i}"):
            inputs.append(x)
            x, c = _bert_layer_fwd(be, params[i], x, hd)
            caches.append(None if (cfg.recompute and cfg.training) else c)
    out.results["output"] = x
    if not cfg.training:
        return out
    with be.on_ipu(stage_of(L - 1, L, cfg.stages)), be.scope("loss"):
        d = be.mse_grad(x, target, "mse_grad")
    out.results["loss_grad"] = d
    for i in reversed(range(L)):
        with be.on_ipu(stage_of(i, L, cfg.stages)), be.scope(f"layer{i}"):
            c = caches[i]
            if c is None:
                with be.scope("recompute"):
                    _, c = _bert_layer_fwd(be, params[i], inputs[i], hd)
            with be.scope("bwd"):
                d, grads = _bert_layer_bwd(be, params[i], c, d, hd)
                for n, gr in grads.items():
                    out.results[f"layer{i}/d{n}"] = gr
                    out.results[f"layer{i}/{n}_new"] = be.sgd(params[i][n], gr, cfg.lr, f"{n}_sgd")
    out.results["dx"] = d
    return out


# ============================================================================ ResNet-style conv block


def _im2col_index(n, h, w, c, k, stride=1):
    """Flat indices into an (n, h, w, c) tensor of its k x k patches: (n*oh*ow, k*k*c)."""
    oh, ow = (h - k) // stride + 1, (w - k) // stride + 1
    base = np.arange(n * h * w * c, dtype=np.int64).reshape(n, h, w, c)
    s = base.strides
    patches = np.lib.stride_tricks.as_strided(
        base, (n, oh, ow, k, k, c), (s[0], s[1] * stride, s[2] * stride, s[1], s[2], s[3]), writeable=False)
    return np.ascontiguousarray(patches.reshape(n * oh * ow, k * k * c))


def conv3x3(be, x, w, nhwc, name):
    """Same-padded 3x3 stride-1 conv as pad + implicit GEMM; x (N*H*W, C), w (3,3,C,Co) -> (N*H*W, Co)."""
    n, h, wd, c = nhwc
    xp = be.pad_hw(x, nhwc, 1, name + "/pad")
    cols = be.take(xp, _im2col_index(n, h + 2, wd + 2, c, 3))
    return be.matmul(cols, be.reshaped(w, (9 * c, w.shape[-1])), name + "/matmul"), cols


def conv3x3_bwd(be, cols, w, dy, nhwc, name):
    """(dx, dw) of conv3x3: dw = cols^T dy; dx = conv3x3(dy, w flipped and transposed)."""
    c, co = w.shape[2], w.shape[3]
    dw = be.matmul(be.t(cols), dy, name + "/dw_matmul")
    flip = np.arange(9 * c * co, dtype=np.int64).reshape(3, 3, c, co)[::-1, ::-1].transpose(0, 1, 3, 2)
    wf = be.take(w, flip.reshape(9 * co, c))
    n, h, wd, _ = nhwc
    dyp = be.pad_hw(dy, (n, h, wd, co), 1, name + "/dx_pad")
    dcols = be.take(dyp, _im2col_index(n, h + 2, wd + 2, co, 3))
    dx = be.matmul(dcols, wf, name + "/dx_matmul")
    return dx, dw


def build_conv(be, cfg: ModelConfig) -> Built:
    rv = _Values(be, cfg.seed)
    n, hw, c = cfg.batch, cfg.image, cfg.hidden
    nhwc = (n, hw, hw, c)
    out = Built()
    x = be.input("input", rv.normal((n * hw * hw, c)))
    target = be.input("target", rv.normal((n * hw * hw, c)))
    blocks = []
    for i in range(cfg.layers):
        with be.on_ipu(stage_of(i, cfg.layers, cfg.stages)), be.scope(f"block{i}"):
            blocks.append((be.weight("conv1_w", rv.init((3, 3, c, c), 9 * c)),
                           be.weight("conv2_w", rv.init((3, 3, c, c), 9 * c))))
    caches = []
    h = x
    for i, (w1, w2) in enumerate(blocks):
        with be.on_ipu(stage_of(i, cfg.layers, cfg.stages)), be.scope(f"block{i}"):
            z1, cols1 = conv3x3(be, h, w1, nhwc, "conv1")
            a1 = be.relu(z1, "relu1")
            z2, cols2 = conv3x3(be, a1, w2, nhwc, "conv2")
            r = be.add(z2, h, "residual")
            caches.append((cols1, z1, cols2, r))
            h = be.relu(r, "relu2")
    out.results["output"] = h
    if not cfg.training:
        return out
    with be.scope("loss"):
        d = be.mse_grad(h, target, "mse_grad")
    for i in reversed(range(cfg.layers)):
        w1, w2 = blocks[i]
        cols1, z1, cols2, r = caches[i]
        with be.on_ipu(stage_of(i, cfg.layers, cfg.stages)), be.scope(f"block{i}/bwd"):
            dr = be.relu_bwd(r, d, "relu2_bwd")
            da1, dw2 = conv3x3_bwd(be, cols2, w2, dr, nhwc, "conv2")
            dz1 = be.relu_bwd(z1, da1, "relu1_bwd")
            dx, dw1 = conv3x3_bwd(be, cols1, w1, dz1, nhwc, "conv1")
            d = be.add(dx, dr, "residual_bwd")
            out.results[f"block{i}/dconv1_w"] = dw1
            out.results[f"block{i}/dconv2_w"] = dw2
    out.results["dx"] = d
    return out


# ============================================================================ GNN message passing


def make_graph(nodes: int, edges: int, seed: int):
    """Seeded random directed graph: (src, dst) int arrays of length ``edges``, every node has an in-edge."""
    rng = np.random.default_rng(seed + 1)
    dst = np.concatenate([np.arange(min(nodes, edges)), rng.integers(0, nodes, max(0, edges - nodes))])
    src = rng.integers(0, nodes, edges)
    return src.astype(np.int64), dst[:edges].astype(np.int64)


def build_gnn(be, cfg: ModelConfig) -> Built:
    """h' = relu(A h W) with messages gathered along edges (gather) and summed at the destination
    (scatter-add as a matmul with the constant incidence matrix)."""
    rv = _Values(be, cfg.seed)
    N, E, F = cfg.nodes, cfg.edges, cfg.hidden
    src, dst = make_graph(N, E, cfg.seed)
    out = Built()
    h = be.input("features", rv.normal((N, F)))
    target = be.input("target", rv.normal((N, F)))
    inc = np.zeros((N, E), np.float32)
    inc[dst, np.arange(E)] = 1.0
    incidence = be.constant("incidence", inc)
    ws = []
    for i in range(cfg.layers):
        with be.on_ipu(stage_of(i, cfg.layers, cfg.stages)), be.scope(f"mp{i}"):
            ws.append(be.weight("w", rv.init((F, F), F)))
    caches = []
    for i, w in enumerate(ws):
        with be.on_ipu(stage_of(i, cfg.layers, cfg.stages)), be.scope(f"mp{i}"):
            msg = be.gather_rows(h, src, "gather_messages")
            agg = be.matmul(incidence, msg, "scatter_add")
            z = be.matmul(agg, w, "update_matmul")
            caches.append((agg, z))
            h = be.relu(z, "relu")
    out.results["output"] = h
    if not cfg.training:
        return out
    with be.scope("loss"):
        d = be.mse_grad(h, target, "mse_grad")
    for i in reversed(range(cfg.layers)):
        agg, z = caches[i]
        with be.on_ipu(stage_of(i, cfg.layers, cfg.stages)), be.scope(f"mp{i}/bwd"):
            dz = be.relu_bwd(z, d, "relu_bwd")
            dw = be.matmul(be.t(agg), dz, "update_dw")
            out.results[f"mp{i}/dw"] = dw
            if i > 0:
                dagg = be.matmul(dz, be.t(ws[i]), "update_dx")
                dmsg = be.matmul(be.t(incidence), dagg, "scatter_add_bwd")
                d = _gather_bwd(be, dmsg, src, N, E)
            out.results[f"mp{i}/w_new"] = be.sgd(ws[i], dw, cfg.lr, "w_sgd")
    return out


def _gather_bwd(be, dmsg, src, N, E):
    """d h = S^T dmsg with S the (E, N) one-hot gather matrix, as a matmul with a constant."""
    s_t = np.zeros((N, E), np.float32)
    s_t[src, np.arange(E)] = 1.0
    return be.matmul(be.constant("gather_t", s_t), dmsg, "gather_bwd")


BUILDERS = {"mlp": build_mlp, "bert": build_bert, "conv": build_conv, "gnn": build_gnn, "resnet": build_resnet}


def build(be, cfg: ModelConfig) -> Built:
    return BUILDERS[cfg.model](be, cfg)
