"""The configuration of a bundled workload: ``ModelConfig`` (model size, precision, training at scale), the
BERT / GPT / ResNet presets and per-family defaults, ``make_config`` (defaults + overrides) and the checks of
every field (``validate``, ``validate_scale``); errors name the field.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields, replace

from popvision_lite.emulator.schedule import HOST_FRAMEWORK_CHOICES
from popvision_lite.errors import ConfigError
from popvision_lite.value_checks import check_limits

from .resnet import RESNET_DEFAULTS, RESNET_PRESETS, validate_resnet

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
# Fields that change how one replica's graph is run and composed into a step, not the graph itself
# (pipeline.py and whole_graph.py apply them): a timing-only run that differs from the previous one only in
# these reuses its emulated graphs (emulated.py, pipeline.py).
COMPOSITION_FIELDS = frozenset({"replicas", "grad_accum", "ipus", "optimizer", "optimizer_state",
                                "optimizer_state_dtype", "master_weights", "rts", "lr", "host_framework",
                                "device_iterations"})
# the heads a transformer can end in (``task_head``): "pretraining" (bert: MLM + NSP; gpt: the causal-LM head),
# "question_answering" (a span head: one hidden x 2 projection of every token, start / end cross-entropy; Hugging
# Face's *ForQuestionAnswering) and "sequence_classification" (the first token through a hidden x hidden dense
# layer with tanh, then hidden x 2: *ForSequenceClassification, BERT's pooler / RoBERTa's classification head)
TASK_HEADS = ("pretraining", "question_answering", "sequence_classification")


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
    # 2-D tensor parallelism (Graphcore's PopXL GPT-3: tensor_parallel_1 x tensor_parallel_2): the second axis splits
    # the hidden dimension of the activations and of every weight's hidden side (graphcore/examples
    # nlp/gpt3_175B/popxl modelling/*TP2D); tensor_parallel is the first axis (heads, FFN columns, vocabulary)
    tensor_parallel_2: int = 1
    # the attention scores computed in this many sequential blocks of query rows, one outlined block called that
    # many times (PopXL GPT-3's attention_serialisation: one block's scores live at a time)
    attention_serialisation: int = 1
    # tiles of each IPU reserved for streaming (PopXL io_tiles): the ops run on the others, and the phases' remote
    # buffer loads and stores overlap with compute
    io_tiles: int = 0
    pipeline_stages: int = 0           # 0 = one stage per IPU of a replica (ipus // replicas)
    layer_split: list | None = None    # layers per stage (PopART-style); None = even split
    grad_accum: int = 1                # micro-batches per optimizer step (per replica)
    optimizer: str = "sgd"             # sgd | momentum | adam | lamb | lars
    optimizer_state: str = "onchip"    # onchip | offchip (streamed from DDR once per optimizer step)
    master_weights: bool = False       # fp32 master copy of fp16 weights
    optimizer_state_dtype: str = "fp32"  # dtype of momentum / Adam / LAMB moments: fp16 | fp32
    rts: bool = False                  # replicated tensor sharding of the optimizer state
    # host step loop whose per-step cost is added (schedule.per_step_terms): auto (inferred from the model,
    # schedule.resolve_host_framework) | none (the IPUs alone) | a framework of schedule.HOST_FRAMEWORKS
    host_framework: str = "auto"
    available_memory_proportion: float = 0.6  # Poplar's default share of tile memory for matmul temporaries
    # matmul / convolution partials: poplin's partialsType option, "float" (its default) or "half" (fp16 runs only;
    # Graphcore's MLPerf ResNet-50 ran "FP16.16 + half partials")
    partials_type: str = "float"
    packing: float = 1.0               # average sequences per pack (samples = packs x packing)
    mask_tokens: int = 0               # MLM positions per pack; 0 = 15 % of seq (76 for seq 512, as MLPerf)
    outline: bool = True               # share code of structurally identical ops in a stage (PopART outlining)
    # "sequential": embedding on the first IPU, the heads on the last; "wrap" (Graphcore's MLPerf BERT,
    # optimum-graphcore's GPT-2): embedding and heads on IPU 0, the MLM decoder / LM head tied to the embedding
    # table; S IPUs run S + 1 pipeline stages: IPU 0 (embedding + layers), IPU 1, ..., IPU S-1, IPU 0 again
    # (layers + heads), and layer_split has S + 1 entries in that order.  Any stage may hold 0 layers
    # (optimum-graphcore's layers_per_ipu [0 3 3 3 3 4 4 4]: IPU 0 holds the embedding and the LM head only)
    pipeline_placement: str = "sequential"
    # optimum-graphcore's embedding_serialization_factor: the vocabulary (padded to a multiple of it, as its
    # resize_token_embeddings pads it) split into this many slices; the tied LM head's matmul runs serialised over
    # them (poptorch.serializedMatMul, MatMulSerializationMode.OutputChannels: one slice of the logits at a time)
    # and a bert model's word embedding is looked up slice by slice (its SerializedEmbedding); 1 = whole
    embedding_serialization: int = 1
    # optimizer steps per host call (poptorch deviceIterations / PopART batches_per_step): the host's step loop
    # runs once per call, so its per-step cost is shared by this many optimizer steps; optimum-graphcore's "total
    # batch" is micro-batch x replicas x grad_accum x device_iterations
    device_iterations: int = 1
    task_head: str = "pretraining"     # TASK_HEADS
    # resnet: how a k x k convolution moves its input: "im2col" (windows gathered by exchange into an
    # implicit-GEMM operand) or "halo" (each tile's input rows with halo exchanged once, read in place by
    # ConvPartialnx1 vertices, as poplin's convolution moves its input: emulator/ops/conv.py; decision 0145)
    conv_lowering: str = "halo"

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
        return self.pipeline_stages or max(1, self.ipus // max(1, self.replicas * self.tp_group))

    @property
    def tp_group(self) -> int:
        """IPUs each layer is sharded over: tensor_parallel x tensor_parallel_2."""
        return self.tensor_parallel * self.tensor_parallel_2

    def shard(self) -> ModelConfig:
        """The part of every layer one IPU of a tensor-parallel group holds (Shoeybi et al. 2019, Megatron-LM,
        section 3): heads / t of the attention heads (q, k, v column-split, the output projection row-split),
        ffn / t of the FFN (w1 column-split, w2 row-split), vocab / t of the embedding and LM head
        (vocabulary-parallel); layer norms and residuals are replicated.  The vocabulary is padded to a multiple
        of 128 x t first, as Megatron-LM pads it (``--make-vocab-size-divisible-by`` 128, times the
        tensor-parallel size: 50257 -> 51200 at t = 8), so each IPU's slice is a multiple of 128.  The config
        itself when t = 1.  With 2-D tensor parallelism (``tensor_parallel_2`` = t2 > 1, Graphcore's PopXL GPT-3)
        every IPU also holds 1 / t2 of the hidden dimension: the activations (t, hidden / t2), each weight's hidden
        side (q / k / v and FFN-in take hidden / t2 rows, the output projections give hidden / t2 columns), the
        layer norms and the embedding's columns; the attention core of its heads / t heads runs on each of the t2
        IPUs alike (graphcore/examples nlp/gpt3_175B/popxl, GPTAttentionHeadsTP2D: "computation: sharded tp1,
        identical tp2")."""
        t, t2 = self.tensor_parallel, self.tensor_parallel_2
        if t <= 1 and t2 <= 1:
            return self
        return replace(self, heads=self.heads // t, head_dim=self.d_head, ffn=self.ffn_size // t,
                       hidden=self.hidden // t2,
                       vocab=-(-self.vocab // (128 * t)) * 128 if t > 1 else self.vocab, tensor_parallel=1,
                       tensor_parallel_2=1, ipus=max(1, self.ipus // (t * t2)), pipeline_stages=self.stages)

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

    def stage_kinds(self) -> list[tuple]:
        """The stage graph each IPU of a replica runs (pipeline.py): (embedding here, heads here,
        availableMemoryProportion, layers here); IPUs of equal kinds run one stage graph, built and compiled once."""
        split, S = self.split(), self.stages
        wrap = self.pipeline_placement == "wrap" and S > 1
        v_ipu = [0] + list(range(1, S)) + [0] if wrap else list(range(S))  # the IPU of each pipeline stage
        return [((i == 0, i == 0) if wrap else (i == 0, i == S - 1))
                + (self.amp_of(i), any(split[v] > 0 for v in range(len(split)) if v_ipu[v] == i)) for i in range(S)]

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
                or bool(self.layer_split) or self.pipeline_stages > 1 or self.tp_group > 1)

    def to_dict(self) -> dict:
        d = asdict(self)
        if not d["head_dim"]:  # the default (hidden / heads): left out, so configs and profiles that do
            d.pop("head_dim")  # not set it read as before
        if d.get("tensor_parallel", 1) == 1:  # the default (no sharding): left out the same way
            d.pop("tensor_parallel", None)
        if d.get("host_framework", "auto") == "auto":  # the default (inferred; the schedule records what was used)
            d.pop("host_framework", None)
        if self.model != "resnet":  # read by the ResNet builder only: left out of other models' configs
            d.pop("conv_lowering", None)
        if d.get("partials_type", "float") == "float":  # poplin's default: left out the same way
            d.pop("partials_type", None)
        for name, dflt in (("embedding_serialization", 1), ("device_iterations", 1), ("task_head", "pretraining"),
                           ("tensor_parallel_2", 1), ("attention_serialisation", 1), ("io_tiles", 0)):
            if d.get(name, dflt) == dflt:  # defaults left out: configs, stage keys and profiles read as before
                d.pop(name, None)
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
                                          or "tensor_parallel" in base or "tensor_parallel_2" in base):
        # ipus not given: replicas x stages
        stages = (len(base["layer_split"]) - (1 if base.get("pipeline_placement") == "wrap" else 0)
                  if base.get("layer_split") else base.get("pipeline_stages", 0) or 1)
        tp = base.get("tensor_parallel", 1)  # a bad value is refused by validate(), naming the field
        tp2 = base.get("tensor_parallel_2", 1)
        base["ipus"] = (int(base.get("replicas", 1)) * int(stages) * (tp if isinstance(tp, int) and tp >= 1 else 1)
                        * (tp2 if isinstance(tp2, int) and tp2 >= 1 else 1))
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
    check_limits(cfg)  # every numeric field finite and within its bounds (issue 19)
    if cfg.model == "bert" and cfg.mask_tokens > cfg.seq:
        raise ConfigError(f"mask_tokens: {cfg.mask_tokens} MLM positions per pack, but a pack has only seq = "
                          f"{cfg.seq} tokens")


def _check_kinds(cfg: ModelConfig) -> None:
    """The integer fields' bounds and the fields with a fixed set of choices."""
    for name in ("replicas", "grad_accum", "mask_tokens", "pipeline_stages", "tensor_parallel",
                 "embedding_serialization", "device_iterations", "tensor_parallel_2", "attention_serialisation",
                 "io_tiles"):
        v = getattr(cfg, name)
        lo = 0 if name in ("mask_tokens", "pipeline_stages", "io_tiles") else 1
        if not isinstance(v, int) or isinstance(v, bool) or v < lo:
            raise ConfigError(f"{name}: must be {'a non-negative' if lo == 0 else 'a positive'} integer, got {v!r}")
    choices = {"optimizer": ("sgd", "momentum", "adam", "lamb", "lars"), "optimizer_state": ("onchip", "offchip"),
               "optimizer_state_dtype": ("fp16", "fp32"), "host_framework": HOST_FRAMEWORK_CHOICES,
               "conv_lowering": ("im2col", "halo"), "partials_type": ("float", "half"), "task_head": TASK_HEADS}
    for name, ok in choices.items():
        if getattr(cfg, name) not in ok:
            raise ConfigError(f"{name}: must be one of {', '.join(ok)}, got {getattr(cfg, name)!r}")


def _check_model_options(cfg: ModelConfig) -> None:
    """Options that only some models or precisions read, and the true / false fields."""
    if cfg.partials_type == "half" and cfg.precision != "fp16":
        raise ConfigError("partials_type: 'half' needs precision fp16 (poplin accumulates fp32 inputs in float "
                          f"partials), got precision {cfg.precision!r}")
    if cfg.pipeline_placement not in ("sequential", "wrap"):
        raise ConfigError(f"pipeline_placement: must be sequential or wrap, got {cfg.pipeline_placement!r}")
    if cfg.pipeline_placement == "wrap" and (cfg.model not in TRANSFORMERS or cfg.stages < 2):
        raise ConfigError("pipeline_placement: 'wrap' (embedding, heads and the last layers on IPU 0) needs a bert "
                          f"or gpt model pipelined over at least 2 IPUs (model {cfg.model!r}, {cfg.stages} stage(s))")
    if cfg.model in TRANSFORMERS and cfg.embedding_serialization > cfg.vocab:
        raise ConfigError(f"embedding_serialization: {cfg.embedding_serialization} slices of a vocabulary of "
                          f"{cfg.vocab}; at most one slice per token")
    if cfg.model not in TRANSFORMERS and cfg.task_head != "pretraining":
        raise ConfigError(f"task_head: only the bert / gpt models end in a task head; model '{cfg.model}' does not "
                          "read it")
    for name in ("master_weights", "rts", "outline"):
        if not isinstance(getattr(cfg, name), bool):
            raise ConfigError(f"{name}: must be true or false, got {getattr(cfg, name)!r}")


def _check_memory_and_packing(cfg: ModelConfig) -> None:
    """available_memory_proportion (one value, or one per IPU of a pipelined transformer) and packing."""
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


def _check_layer_split(cfg: ModelConfig) -> None:
    """A given layer_split: one count per stage (in halves of a layer), summing to the layers."""
    if cfg.layer_split is not None:
        sp = cfg.layer_split
        wrap = cfg.pipeline_placement == "wrap"
        ok = isinstance(sp, list | tuple) and len(sp) > (1 if wrap else 0) and all(
            isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v >= 0
            and (2 * v) % 1 == 0 for v in sp)
        if not ok or not any(v > 0 for v in sp):
            raise ConfigError("layer_split: must be a list of layer counts (0 or more, in steps of 0.5: a half = the "
                              "attention or FFN block of a layer), one per stage, some of them above 0"
                              + (" - with pipeline_placement 'wrap' one more entry than IPUs, IPU 0 first and last"
                                 if wrap else "") + f", got {sp!r}")
        if sum(sp) != cfg.layers:
            raise ConfigError(f"layer_split: {list(sp)} covers {sum(sp)} layers but the model has {cfg.layers}")
        if cfg.pipeline_stages and cfg.pipeline_stages != cfg.stages:
            raise ConfigError(f"pipeline_stages: {cfg.pipeline_stages} but layer_split has {cfg.stages} IPUs' stages")


def _check_tensor_parallel(cfg: ModelConfig) -> None:
    """Tensor parallelism (both dimensions), attention serialisation and I/O tiles."""
    tp, tp2 = cfg.tensor_parallel, cfg.tensor_parallel_2
    for name in ("tensor_parallel_2", "attention_serialisation", "io_tiles"):
        if getattr(cfg, name) != getattr(ModelConfig, name) and cfg.model not in TRANSFORMERS:
            raise ConfigError(f"{name}: only the bert / gpt models read it; model '{cfg.model}' does not")
    if tp2 > 1:
        if cfg.hidden % tp2:
            raise ConfigError(f"tensor_parallel_2: {tp2} IPUs must divide the hidden size ({cfg.hidden})")
        if cfg.pipeline_placement == "wrap":
            raise ConfigError("tensor_parallel_2: the 'wrap' pipeline placement is not modelled with tensor "
                              "parallelism; use pipeline_placement 'sequential'")
    if cfg.seq % cfg.attention_serialisation:
        raise ConfigError(f"attention_serialisation: {cfg.attention_serialisation} blocks must divide the sequence "
                          f"length ({cfg.seq})")
    if cfg.model in TRANSFORMERS and cfg.io_tiles > 0:
        from popvision_lite.devices import load_device

        if not cfg.streaming_weights:
            raise ConfigError("io_tiles: tiles reserved for streaming need phased execution (streaming_weights); "
                              "without it nothing streams")
        tiles = load_device("ipu-mk2").tiles  # every IPU spec has 1472 (Mk2, Bow) or 1216 (Mk1) tiles
        if cfg.io_tiles >= tiles // 2:
            raise ConfigError(f"io_tiles: {cfg.io_tiles} of {tiles} tiles leaves too few for compute; reserve under "
                              "half")
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


def _check_ipu_counts(cfg: ModelConfig) -> None:
    """replicas x stages x tensor-parallel IPUs = ipus; enough micro-batches and layers for the stages."""
    tp, tp2 = cfg.tensor_parallel, cfg.tensor_parallel_2
    tpg = tp * tp2
    tpn = f"tensor_parallel {tp}" + (f" x tensor_parallel_2 {tp2}" if tp2 > 1 else "")
    if cfg.ipus % (cfg.replicas * tpg):
        raise ConfigError(f"replicas: {cfg.replicas} replicas x {tpn} do not divide {cfg.ipus} IPUs")
    S = cfg.stages
    if cfg.replicas * S * tpg != cfg.ipus:
        parts = f"tensor_parallel ({tp})" + (f" x tensor_parallel_2 ({tp2})" if tp2 > 1 else "")
        raise ConfigError(f"ipus: replicas ({cfg.replicas}) x pipeline_stages ({S}) x {parts} = "
                          f"{cfg.replicas * S * tpg} but ipus is {cfg.ipus}")
    D = cfg.pipeline_depth
    if cfg.model in TRANSFORMERS and S > 1 and cfg.grad_accum < 2 * D - 1:
        raise ConfigError(f"grad_accum: {cfg.grad_accum} micro-batches cannot fill a {D}-stage pipeline; PopART "
                          f"needs at least 2 x stages - 1 = {2 * D - 1}")
    if cfg.layers < S and not cfg.layer_split:  # an even split; a given layer_split may leave IPUs without layers
        raise ConfigError(f"layers: {cfg.layers} layer(s) cannot fill {S} pipeline stages (layers < stages; "
                          f"lower --ipus / --pipeline-stages, add layers, or give --layer-split with 0 for the "
                          f"IPUs that hold no layer)")


def _check_whole_graph(cfg: ModelConfig) -> None:
    """The non-transformer models: the transformer-only composition fields left at their defaults."""
    if cfg.model not in TRANSFORMERS:
        dflt = ModelConfig()
        # replication, accumulation and training state also compose on the whole-graph path
        for name in ("packing", "layer_split", "mask_tokens", "outline", "pipeline_placement",
                     "embedding_serialization"):
            if name == "outline" and cfg.model == "resnet":
                continue  # resnet outlines identical blocks in timing-only runs (models/resnet.py)
            if getattr(cfg, name) != getattr(dflt, name):
                raise ConfigError(f"{name}: only the bert models run the pipelined / replicated training "
                                  f"composition; model '{cfg.model}' does not read it")


def validate_scale(cfg: ModelConfig) -> None:
    """Checks of the pipeline / replication / training-state fields; errors name the field."""
    _check_kinds(cfg)
    _check_model_options(cfg)
    _check_memory_and_packing(cfg)
    _check_layer_split(cfg)
    _check_tensor_parallel(cfg)
    _check_ipu_counts(cfg)
    _check_whole_graph(cfg)
