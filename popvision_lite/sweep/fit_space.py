"""The fit advisor's search space (docs/fit-advisor.md, decision 0290): how each run-config field takes part in
the search, declared once per field (:data:`FIT_ROLES`, keyed by ``run_config.FIELDS``), the candidates it may
try (:class:`Candidate`: a placement plus memory-saving settings) and the cheap lower bound that rules a
candidate out before any emulation (:meth:`Space.lower_bound`).

Roles:

* ``placement`` - where the model runs: tensor-parallel degree, pipeline stages and the layers per stage,
  replicas, micro-batch.  Enumerated by the search itself (``sweep/fit.py``): each has its own rules (divisors
  of the heads, 2S - 1 micro-batches to fill a pipeline, the global batch kept).
* ``derived`` - follows from the placement (IPUs = replicas x stages x tensor parallel; gradient accumulation =
  global batch / (replicas x micro-batch)).
* ``saver`` - a setting with a *lean* value that needs less tile memory, usually at some cost in time, and a
  ladder of values from leanest to most relaxed.  The search starts every placement from the lean values and
  relaxes them one step at a time.  A new saver joins the search by its declaration here, nothing else.
* ``kept`` - what the run computes (the model, its numerics, its training), or where results go: never changed.

A field of ``FIELDS`` with no role here is an error (a test checks every field is declared), so a new
run-config field cannot silently stay out of the search.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from popvision_lite.emulator.models.config import GPT_PRESETS, TRANSFORMERS, ModelConfig
from popvision_lite.emulator.run_config import FIELDS, RunConfig, model_family, unused_settings
from popvision_lite.emulator.schedule import DTYPE_BYTES, state_bytes_per_param
from popvision_lite.errors import ConfigError


@dataclass(frozen=True)
class Role:
    kind: str                 # placement | derived | saver | kept
    why: str
    lean: object = None       # saver: the value that needs least tile memory
    ladder: tuple = ()        # saver: values from the leanest to the most relaxed
    rank: int = 0             # saver: the order the search turns savers on in, cheapest in time first
    # saver: whether the lean value needs no more memory than any other, whatever the placement.  False: the
    # search keeps the base run's value in its frontiers and tries the ladder's other values around its answers
    monotone: bool = True


def _saver(why: str, lean, ladder: tuple, rank: int, monotone: bool = True) -> Role:
    return Role("saver", why, lean, ladder, rank, monotone)


_MODEL = "what the run computes: the model itself"
_NUMERICS = "what the run computes: its numerics"
_TRAINING = "what the run computes: its training step"
FIT_ROLES: dict[str, Role] = {
    # placements (enumerated by sweep/fit.py)
    "tensor_parallel": Role("placement", "IPUs each layer is sharded over: a divisor of the heads and the FFN width"),
    "tensor_parallel_2": Role("placement", "2-D tensor parallelism's second axis (PopXL GPT-3): a divisor of the "
                                           "hidden size - 1, the run's, and the largest up to 8 (the 175B POD256 "
                                           "configuration's 8 x 8)"),
    "pipeline_stages": Role("placement", "pipeline stages a replica's layers are split over"),
    "layer_split": Role("placement", "layers per stage: even, or fewer on the stage that does not fit (the head's "
                                     "or the embedding's)"),
    "replicas": Role("placement", "data-parallel replicas: more samples/s at about the same cost per sample"),
    "batch": Role("placement", "micro-batch: a divisor of the global batch, at most the one given"),
    # derived from the placement
    "ipus": Role("derived", "replicas x pipeline stages x tensor parallel"),
    "grad_accum": Role("derived", "the global batch / (replicas x micro-batch), kept as given"),
    # memory savers: lean value first in the ladder; rank: the order they are turned on in (expected cost in time:
    # outlining and RTS cost next to nothing, a smaller matmul proportion a few more serial passes, recomputation
    # a second forward pass, off-chip state a DDR round trip per step, streamed weights one per phase)
    "outline": _saver("outlining: one copy of the code of identical layers", True, (True,), 0),
    # the LM / MLM head's matmul one vocabulary slice at a time (optimum-graphcore's embedding_serialization_factor):
    # a one-layer GPT with Adam on one IPU, 115 % -> 80 % at 4 slices; not monotone: GPT-3-13B phased over 40 IPUs,
    # 117 % at 1, 102 % at 4, 104 % at 16 (docs/decisions/0290)
    "embedding_serialization": _saver("vocabulary slices of the embedding and the LM head, run one at a time", 4,
                                      (16, 4, 1), 1, monotone=False),
    "rts": _saver("replicated tensor sharding of the optimizer state over the replicas", True, (True, False), 1),
    # not monotone: a smaller proportion changes the matmul plans, and the op library lays a weight out for its
    # first matmul's plan - GPT-3-13B phased over 40 IPUs, Adam, GA 128: 117 % at 0.6, 265 % at 0.1, the layer's
    # weights and their gradient accumulators on fewer tiles (docs/decisions/0290)
    "available_memory_proportion": _saver("share of tile memory for matmul temporaries (Poplar "
                                          "availableMemoryProportion)", 0.1, (0.1, 0.3, 0.6), 2, monotone=False),
    # the attention scores in N blocks of query rows, one block's live at a time (PopXL GPT-3's
    # attention_serialisation; must divide the sequence).  Not monotone: measured on GPT-2-medium, seq 1024, one IPU,
    # timing only - 2 layers, micro-batch 4: 494 / 479 / 472 / 468 % at 1 / 2 / 4 / 8 blocks; 1 layer phased with
    # recomputation and Adam, micro-batch 2: 1,986,824 / 1,985,826 / 1,986,966 B at 1 / 4 / 16 (each block's code)
    "attention_serialisation": _saver("attention scores in sequential blocks of query rows, one block's live at a "
                                      "time", 8, (8, 4, 1), 2, monotone=False),
    "recompute": _saver("recomputation: only each layer's input is kept for the backward pass", True, (True, False),
                        3),
    "optimizer_state": _saver("optimizer state in streaming memory, streamed once per step", "offchip",
                              ("offchip", "onchip"), 4),
    "streaming_weights": _saver("weights in streaming memory (DDR), loaded per phase", True, (True, False), 5),
    # kept as given
    "model": Role("kept", _MODEL), "seq": Role("kept", _MODEL), "layers": Role("kept", _MODEL),
    "hidden": Role("kept", _MODEL), "heads": Role("kept", _MODEL), "head_dim": Role("kept", _MODEL),
    "ffn": Role("kept", _MODEL), "vocab": Role("kept", _MODEL), "image": Role("kept", _MODEL),
    "nodes": Role("kept", _MODEL), "edges": Role("kept", _MODEL), "packing": Role("kept", _MODEL),
    "mask_tokens": Role("kept", _MODEL),
    "precision": Role("kept", _NUMERICS), "partials_type": Role("kept", _NUMERICS), "seed": Role("kept", _NUMERICS),
    "conv_lowering": Role("kept", _NUMERICS),
    "training": Role("kept", _TRAINING), "lr": Role("kept", _TRAINING), "optimizer": Role("kept", _TRAINING),
    "optimizer_state_dtype": Role("kept", _TRAINING), "master_weights": Role("kept", _TRAINING),
    "device": Role("kept", "the chip asked about"),
    "host_framework": Role("kept", "the host framework's step loop, not a placement"),
    "pipeline_placement": Role("placement", "wrap: the embedding and the tied head on IPU 0 (MLPerf's BERT, "
                                            "optimum-graphcore's GPT-2), tried when the head's or the embedding's stage "
                                            "is what does not fit"),
    "io_tiles": Role("kept", "tiles reserved for streaming: a speed setting of phased execution (the streams overlap "
                             "compute), not a memory saver (the ops get fewer tiles); kept where the weights stream, "
                             "none where they do not (nothing streams)"),
    "device_iterations": Role("kept", "optimizer steps per host call: the host loop, not the placement"),
    "task_head": Role("kept", _MODEL),
    "output": Role("kept", "where results go"), "timing_only": Role("kept", "the search emulates timing only"),
}
SEARCHED = tuple(k for k, r in FIT_ROLES.items() if r.kind in ("placement", "derived", "saver"))


def undeclared_fields() -> list[str]:
    """Run-config fields with no role in the search (must be empty: every field is declared)."""
    return sorted(set(FIELDS) - set(FIT_ROLES))


# ------------------------------------------------------------------------------------------------ candidates
@dataclass(frozen=True)
class Place:
    """A placement: tensor-parallel degree, pipeline stages (and layers per stage: None = even), replicas,
    micro-batch; ``wrap``: the embedding and the tied head on IPU 0 (then ``split`` has stages + 1 entries: IPU 0,
    IPU 1, ..., IPU S-1, IPU 0 again); ``tp2``: 2-D tensor parallelism's second axis (the hidden dimension)."""

    tp: int = 1
    stages: int = 1
    replicas: int = 1
    batch: int = 1
    split: tuple | None = None
    wrap: bool = False
    tp2: int = 1

    @property
    def chips(self) -> int:
        return self.tp * self.tp2 * self.stages * self.replicas

    def text(self) -> str:
        parts = [f"{self.replicas} replica{'s' if self.replicas > 1 else ''}",
                 f"{self.stages} stage{'s' if self.stages > 1 else ''}"
                 + (f" (layers {', '.join(f'{x:g}' for x in self.split)})" if self.split else "")
                 + (", embedding and tied head on IPU 0" if self.wrap else "")]
        if self.tp > 1 or self.tp2 > 1:
            parts.append(f"tensor parallel {self.tp}" + (f" x {self.tp2}" if self.tp2 > 1 else ""))
        return " x ".join(parts) + f" = {self.chips} IPU{'s' if self.chips > 1 else ''}, micro-batch {self.batch}"


@dataclass(frozen=True)
class Candidate:
    place: Place
    savers: tuple = ()        # ((field, value), ...) sorted by field

    def saver(self, name: str, default=None):
        return dict(self.savers).get(name, default)

    def with_savers(self, **changes) -> Candidate:
        d = dict(self.savers) | changes
        return Candidate(self.place, tuple(sorted(d.items())))

    def with_place(self, **changes) -> Candidate:
        from dataclasses import replace

        return Candidate(replace(self.place, **changes), self.savers)

    def text(self) -> str:
        return self.place.text() + "; " + saver_text(dict(self.savers))


def saver_text(savers: dict) -> str:
    words = []
    for k, v in savers.items():
        if isinstance(v, bool):
            words.append(k.replace("_", " ") + (" on" if v else " off"))
        else:
            words.append(f"{k.replace('_', ' ')} {v}")
    return ", ".join(words) if words else "as given"


def divisors(n: int) -> list[int]:
    return [d for d in range(1, int(n) + 1) if n % d == 0]


def _step_down(ladder: tuple, value) -> object | None:
    """The next value of ``ladder`` before ``value`` (leaner), or None at the lean end; a value between two rungs
    moves to the rung below it."""
    if value in ladder:
        i = ladder.index(value)
        return ladder[i - 1] if i > 0 else None
    if isinstance(value, int | float) and not isinstance(value, bool):
        below = [x for x in ladder if isinstance(x, int | float) and x < value]
        return below[-1] if below else None
    return None


def _differs_value(a, b) -> bool:
    if isinstance(a, list | tuple) or isinstance(b, list | tuple):
        return list(a if isinstance(a, list | tuple) else [a]) != list(b if isinstance(b, list | tuple) else [b])
    return a != b


def _step_up(ladder: tuple, value) -> object | None:
    """The next value of ``ladder`` after ``value`` (more relaxed), or None at the relaxed end."""
    if value in ladder:
        i = ladder.index(value)
        return ladder[i + 1] if i + 1 < len(ladder) else None
    if isinstance(value, int | float) and not isinstance(value, bool):
        above = [x for x in ladder if isinstance(x, int | float) and x > value]
        return above[0] if above else None
    return None


def _leaner_or_equal(role: Role, a, b) -> bool:
    """Whether value ``a`` of a saver needs no more memory than ``b`` (ladder order; numbers by their order along
    a numeric ladder)."""
    if a == b:
        return True
    lad = role.ladder
    if a in lad and b in lad:
        return lad.index(a) <= lad.index(b)
    if isinstance(a, int | float) and isinstance(b, int | float) and not isinstance(a, bool):
        increasing = len(lad) < 2 or lad[0] <= lad[-1]
        return a <= b if increasing else a >= b
    return False


# ------------------------------------------------------------------------------------------------ the space
@dataclass
class Space:
    """The candidates of one search: the base run (what is kept), the global batch and the IPU limit."""

    base: RunConfig
    max_ipus: int
    global_batch: int
    cfg0: ModelConfig = field(init=False)
    family: str = field(init=False)

    def __post_init__(self):
        self.cfg0 = self.base.model_config(host_check=False)
        self.family = model_family(self.base.model)

    # ---- what applies to this model
    def reads(self, name: str) -> bool:
        return not unused_settings(self.base.model, [name])

    @property
    def transformer(self) -> bool:
        return self.cfg0.model in TRANSFORMERS

    def savers(self) -> dict[str, Role]:
        """The saver fields this model reads (``rts`` and ``optimizer_state`` need an optimizer with state), in the
        order they are turned on (``Role.rank``)."""
        out = {}
        for k, r in sorted(FIT_ROLES.items(), key=lambda kv: kv[1].rank):
            if r.kind != "saver" or not self.reads(k):
                continue
            if k in ("optimizer_state", "rts") and not self.has_optimizer_state():
                continue
            out[k] = r
        return out

    def has_optimizer_state(self) -> bool:
        c = self.cfg0
        return bool(c.training) and state_bytes_per_param(c.optimizer, c.master_weights, c.optimizer_state_dtype,
                                                          c.precision)["optimizer_state"] > 0

    def base_saver(self, name: str):
        """The base run's value of a saver (a per-IPU list of proportions: its smallest)."""
        v = getattr(self.cfg0, name)
        return min(v) if isinstance(v, list | tuple) else v

    def tensor_parallel_degrees(self) -> list[int]:
        """Tensor-parallel degrees this model allows within the IPU limit (divisors of heads and FFN width)."""
        if not (self.transformer and self.reads("tensor_parallel")):
            return [1]
        c = self.cfg0
        return [t for t in divisors(math.gcd(c.heads, c.ffn_size)) if t <= self.max_ipus]

    def second_axis_degrees(self) -> list[int]:
        """2-D tensor parallelism's second axis searched: 1, the run's, and the largest divisor of the hidden size
        up to 8 and the IPU limit (Graphcore's GPT-3 175B on an IPU-POD256 runs 8 x 8: graphcore/examples nlp/gpt3_175B/popxl,
        config ``gpt3_175B_pod256``), within the IPU limit; [1] for a model that does not read it."""
        if not (self.transformer and self.reads("tensor_parallel_2")):
            return [1]
        c = self.cfg0
        top = max(d for d in divisors(c.hidden) if d <= min(8, self.max_ipus))
        return sorted(t for t in {1, int(c.tensor_parallel_2), top} if t <= self.max_ipus)

    def max_stages(self, tp: int, replicas: int = 1, batch: int = 1, tp2: int = 1) -> int:
        """Most pipeline stages: layers, the IPU limit, and (transformers) 2S - 1 <= micro-batches per replica."""
        s = min(self.cfg0.layers, self.max_ipus // max(1, tp * tp2 * replicas))
        if self.transformer:
            g = self.global_batch // max(1, replicas * batch)
            s = min(s, (g + 1) // 2)
        return max(1, s)

    def micro_batches(self, replicas: int = 1) -> list[int]:
        """Micro-batch sizes: divisors of the global batch per replica, at most the base's (smallest first)."""
        per = self.global_batch // replicas if self.global_batch % replicas == 0 else 0
        return [b for b in divisors(per) if b <= self.cfg0.batch] if per else []

    def lean(self, place: Place, streaming: bool | None = None) -> Candidate:
        """``place`` with every monotone saver at its lean value and the others as the base run has them
        (``streaming`` overrides the weights' place); savers that change nothing for this placement (RTS on one
        replica) keep the base value."""
        sv = {k: r.lean if r.monotone else self.base_saver(k) for k, r in self.savers().items()}
        if streaming is not None and "streaming_weights" in sv:
            sv["streaming_weights"] = streaming
        return self.canonical(Candidate(place, tuple(sorted(sv.items()))))

    def canonical(self, cand: Candidate) -> Candidate:
        """One spelling per distinct run: RTS off on one replica (it shards nothing); with streamed weights a
        transformer's optimizer state as the base run has it (the composition streams it with the weights either
        way: emulator/models/pipeline.py, ``phased``)."""
        if cand.place.replicas == 1 and cand.saver("rts"):
            cand = cand.with_savers(rts=False)
        if self.transformer and cand.saver("streaming_weights") and "optimizer_state" in self.savers() \
                and cand.saver("optimizer_state") != self.base_saver("optimizer_state"):
            cand = cand.with_savers(optimizer_state=self.base_saver("optimizer_state"))
        return cand

    def as_given(self, place: Place, streaming: bool | None = None) -> Candidate:
        """``place`` with every saver at the base run's value (``streaming`` overrides the weights' place)."""
        sv = {k: self.base_saver(k) for k in self.savers()}
        if streaming is not None and "streaming_weights" in sv:
            sv["streaming_weights"] = streaming
        return self.canonical(Candidate(place, tuple(sorted(sv.items()))))

    def levels(self, place: Place, streaming: bool | None = None) -> list[Candidate]:
        """``place`` from the base run's savers to the lean ones, turning them on one step at a time in their rank
        order (a ladder, such as the matmul memory proportion, one rung at a time): tile memory falls along the
        list, time (by the ranks' expectation) rises.  ``streaming`` fixes the weights' place throughout."""
        cur = {k: self.base_saver(k) for k in self.savers()}
        if streaming is not None and "streaming_weights" in cur:
            cur["streaming_weights"] = streaming
        out = [self.canonical(Candidate(place, tuple(sorted(cur.items()))))]
        for k, r in self.savers().items():
            if (k == "streaming_weights" and streaming is not None) or not r.monotone:
                continue
            while not _leaner_or_equal(r, cur[k], r.lean):
                nxt = _step_down(r.ladder, cur[k])
                if nxt is None:
                    break
                cur[k] = nxt
                c = self.canonical(Candidate(place, tuple(sorted(cur.items()))))
                if c != out[-1]:
                    out.append(c)
        return out

    def variants(self, cand: Candidate, relaxed_only: bool = False) -> list[Candidate]:
        """``cand`` with each non-monotone saver one rung of its ladder either way (one saver at a time; with
        ``relaxed_only``, only toward the relaxed end: what a candidate that fits may gain time by)."""
        out = []
        for k, r in self.savers().items():
            if r.monotone:
                continue
            v = cand.saver(k)
            for nxt in ((None if relaxed_only else _step_down(r.ladder, v)), _step_up(r.ladder, v)):
                if nxt is not None and _differs_value(nxt, v):
                    out.append(self.canonical(cand.with_savers(**{k: nxt})))
        return out

    def leaner_rung(self, name: str, value):
        """Saver ``name``'s next value toward its lean end after ``value`` (None at that end)."""
        return _step_down(FIT_ROLES[name].ladder, value)

    def reverted(self, cand: Candidate, name: str) -> Candidate:
        """``cand`` with saver ``name`` back at the base run's value."""
        return self.canonical(cand.with_savers(**{name: self.base_saver(name)}))

    def no_leaner(self, heavy: Candidate, light: Candidate) -> bool:
        """Whether ``heavy`` needs at least the tile memory of ``light`` by the search's monotonicity assumption
        (decision 0290): the same placement but for a micro-batch at least as large, and every saver at most as
        lean."""
        a, b = heavy.place, light.place
        if (a.tp, a.tp2, a.stages, a.split, a.wrap, a.replicas) != (b.tp, b.tp2, b.stages, b.split, b.wrap, b.replicas) \
                or a.batch < b.batch:
            return False
        return all(_leaner_or_equal(r, self.effective(light, k), self.effective(heavy, k)) if r.monotone
                   else not _differs_value(light.saver(k), heavy.saver(k)) for k, r in self.savers().items())

    def effective(self, cand: Candidate, name: str):
        """The value of saver ``name`` as the run sees it: a transformer's optimizer state is streamed with streamed
        weights whatever the setting (``canonical``)."""
        r = FIT_ROLES[name]
        if name == "optimizer_state" and self.transformer and cand.saver("streaming_weights"):
            return r.lean
        return cand.saver(name, r.lean)

    # ---- a candidate as a run
    def args(self, cand: Candidate) -> dict:
        """The model arguments of ``cand``: the base's kept fields, its placement and its savers."""
        p = cand.place
        args = {k: v for k, v in self.base.model_args.items() if FIT_ROLES.get(k, Role("kept", "")).kind == "kept"}
        g = self.global_batch // (p.replicas * p.batch)
        args.update(batch=p.batch, replicas=p.replicas, grad_accum=g, ipus=p.chips)
        if self.reads("tensor_parallel") and (p.tp > 1 or "tensor_parallel" in self.base.model_args):
            args["tensor_parallel"] = p.tp
        if self.reads("tensor_parallel_2") and (p.tp2 > 1 or "tensor_parallel_2" in self.base.model_args):
            args["tensor_parallel_2"] = p.tp2
        if p.split:
            args["layer_split"] = list(p.split)
        else:
            args["pipeline_stages"] = p.stages
        if self.reads("pipeline_placement") and (p.wrap or "pipeline_placement" in self.base.model_args):
            args["pipeline_placement"] = "wrap" if p.wrap else "sequential"
        for k, v in cand.savers:
            args[k] = v
        if args.get("io_tiles") and not args.get("streaming_weights"):
            args.pop("io_tiles")  # IO tiles serve phased execution's streams: none without them (run_config refuses)
        return args

    def spec(self, cand: Candidate) -> dict:
        """The sweep point of ``cand`` (sweep/grid.py's spec: model, device, timing_only, args)."""
        return {"model": self.base.model, "device": self.base.device, "timing_only": True,
                "args": dict(sorted(self.args(cand).items()))}

    def run_config(self, cand: Candidate) -> RunConfig:
        return RunConfig.from_mapping({"model": self.base.model, "device": self.base.device, "timing_only": True,
                                       **self.args(cand)}, "fit candidate")

    def check(self, cand: Candidate) -> ModelConfig:
        """``cand``'s ModelConfig, checked as ``emulate`` checks it (the combination, and the host memory a
        timing-only run needs here); ConfigError naming the problem otherwise."""
        return self.run_config(cand).model_config(host_check=True)

    # ---- lower bounds
    def layer_matmul_params(self, tp: int) -> int:
        """Parameters of one layer's matmul weights on one IPU of a tensor-parallel group of ``tp`` IPUs (both axes
        of a 2-D group: ``ModelConfig.shard``) (q, k, v, output projection, the FFN's two): a lower bound of a
        layer's parameters there (biases, norms, the embedding and the head left out)."""
        c = self.cfg0
        h, w, f = c.hidden, c.attn_width, c.ffn_size
        return (4 * h * w + 2 * h * f) // max(1, tp)

    def lower_bound(self, cand: Candidate, cfg: ModelConfig | None = None) -> dict | None:
        """A lower bound of the bytes the fullest IPU of ``cand`` holds, against one IPU's SRAM: per pipeline stage,
        its layers' matmul weights, their gradient accumulators and on-chip optimizer state, and the activations it
        stashes between a micro-batch's forward and backward (each layer's input, ``stash_depth`` micro-batches
        deep), as the composition keeps them (emulator/models/pipeline.py: ``_ipu_stage``, ``_ipu_timing``); no
        code, no other activations, no embedding or head.  ``None`` for models the bound does not cover (not a
        transformer)."""
        if not self.transformer:
            return None
        cfg = cfg or self.run_config(cand).model_config(host_check=False)
        from popvision_lite.devices import load_device

        spec = load_device(self.base.device)
        sram = int(spec.tiles) * int(spec.sram_bytes_per_tile)
        split = cfg.split() or [cfg.layers]
        V = len(split)
        phased = bool(cfg.streaming_weights)
        bser = phased and V == 1 and bool(cfg.training)   # batch-serialised: no stash, one layer's accumulator
        per_layer = self.layer_matmul_params(cfg.tp_group)  # 2-D: each weight also split over the hidden side
        wdt = "fp16" if cfg.precision == "fp16" else "fp32"
        wbytes = DTYPE_BYTES[wdt]
        acc = (4 if cfg.master_weights else wbytes) if (cfg.training and cfg.grad_accum > 1) else 0
        sbpe = state_bytes_per_param(cfg.optimizer, cfg.master_weights, cfg.optimizer_state_dtype,
                                     wdt)["optimizer_state"] if cfg.training else 0
        # a layer's input, whole on every IPU of a 1-D group; 1 / tensor_parallel_2 of its hidden side in 2-D
        x_bytes = cfg.batch * cfg.seq * (cfg.hidden // max(1, cfg.tensor_parallel_2)) * wbytes
        best = None
        for st, layers in enumerate(split):
            k = math.ceil(layers)
            on_chip = 1 if phased else k                      # streamed: the outlined body's one layer
            weights = on_chip * per_layer * wbytes
            accum = (per_layer if bser else 0 if phased else k * per_layer) * acc
            state = 0
            if cfg.optimizer_state == "onchip" and not phased:
                state = k * per_layer * sbpe // (cfg.replicas if cfg.rts else 1)
            units = max((2 * (V - st) - 1) * k - 1, 0) if (cfg.training and not bser and k) else 0
            stash = units * x_bytes
            need = weights + accum + state + stash
            if best is None or need > best["bytes"]:
                best = {"bytes": int(need), "stage": st, "weights": int(weights), "accum": int(accum),
                        "state": int(state), "stash": int(stash), "layers_on_ipu": on_chip}
        best.update(sram=sram, fits=best["bytes"] <= sram)
        return best

    def bound_text(self, lb: dict) -> str:
        """Why a candidate is ruled out by its lower bound, in words."""
        parts = [(n, lb[k]) for n, k in (("weights", "weights"), ("gradient accumulators", "accum"),
                                          ("optimizer state", "state"), ("stashed layer inputs", "stash")) if lb[k]]
        return (f"pipeline stage {lb['stage']} alone needs {lb['bytes'] / 2**20:,.0f} MiB for its layers ("
                + ", ".join(f"{n} {b / 2**20:,.0f} MiB" for n, b in parts)
                + f") of one IPU's {lb['sram'] / 2**20:,.0f} MiB")


def global_batch_of(cfg: ModelConfig) -> int:
    """Samples per optimizer step before packing: replicas x gradient accumulation x micro-batch."""
    return int(cfg.replicas) * int(cfg.grad_accum) * int(cfg.batch)


def run_config_from_profile(profile, source: str | None = None) -> RunConfig:
    """The run config a profile was emulated with (``run["config"]``), as a RunConfig: the bundled model's name
    (a GPT profile records its family, 'gpt': a preset is named and every shape field set from the config)."""
    run = dict(profile.run or {})
    cfg = dict(run.get("config") or {})
    where = source or str(getattr(profile, "path", "profile"))
    if not cfg:
        raise ConfigError(f"{where}: the profile records no run config (run['config']); the fit advisor needs "
                          "the model it was emulated with")
    if cfg.get("onnx") or str(run.get("model", "")).endswith(".onnx"):
        raise ConfigError(f"{where}: an imported ONNX model; the fit advisor searches the bundled models' "
                          "placements (tensor parallelism, pipelines) only")
    model = cfg.get("model", run.get("model"))
    raw = {k: v for k, v in cfg.items() if k in FIELDS and v is not None and k not in ("model", "output")}
    if model == "gpt":  # the family: a preset's name, with every shape of the recorded config
        model = next(iter(GPT_PRESETS))
        raw.setdefault("head_dim", int(cfg.get("hidden", 1)) // max(1, int(cfg.get("heads", 1))))
    raw["model"] = model
    raw["device"] = cfg.get("device", profile.target.device)
    raw["timing_only"] = True
    if not raw.get("pipeline_stages"):
        raw.pop("pipeline_stages", None)
    return RunConfig.from_mapping(raw, where)
