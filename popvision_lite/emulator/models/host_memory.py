"""Host memory of emulating a bundled model, estimated from its config before anything is built, and the pre-check
that refuses a run this machine cannot hold (``emulate``, run configs, sweeps, the desktop app's what-if dialogs:
all through ``RunConfig.model_config``).

Where the memory goes (measured, docs/performance.md "Host memory of an emulation"): the interpreter and its
libraries; then, on the composed path (every GPT run, BERT timing-only or at scale), the graph of each distinct
stage program while it is built and compiled - its vertices above all, which the attention scores multiply
(the op library runs their scale, mask and softmax passes at a few elements per vertex) - and what each compiled
stage graph keeps for the profile; then the profile of one replica's IPUs, which grows with the stages.  On the
whole-graph path (ResNet, MLP, conv, GNN; BERT with numerics) the one graph, its activations' mappings and, with
numerics, the values (weights, activations, gradients, the numpy reference).

The estimate is a sum of those terms, each a count of the config times a coefficient in bytes.  The counts are
exact functions of the config (:func:`composed_terms`, :func:`whole_terms`); the coefficients have no public
figure and are *calibrated* (the composed path's, and the whole-graph path's after its build, see BUILT): least
squares on the named rows of ``bench/host_memory.py`` (:data:`FIT_ROWS`), judged on its other rows and by
leave-one-out on the fitted ones (docs/performance.md).  A run whose estimate is over half of this machine's
memory is refused with exit 2 before anything is allocated, naming the field that grows it most.  On the
whole-graph path that first estimate is only a lower bound, and the estimate proper comes right after the graph
is built, from its vertex count, before the compile and the run (:func:`check_built_graph`, decision 0390).
"""

from __future__ import annotations

from dataclasses import dataclass

from popvision_lite import value_checks
from popvision_lite.errors import ConfigError

from .config import ModelConfig
from .resnet import stage_blocks

GIB = 2**30

# Bytes per unit of each term, per path; ``base`` is the interpreter, its libraries and what every run of the path
# holds.  COMPOSED is *calibrated*: bench/host_memory.py --fit (least squares on its eight composed FIT_ROWS, aiming
# estimate / peak at the middle of the 0.8-1.5 band; a term whose coefficient comes out negative is dropped:
# ``graphs`` and ``attention``), judged on the 14 other composed rows and by leave-one-out, docs/performance.md
# "Host memory of an emulation" (refit 2026-12-06 17:40 UTC on that day's peaks).
COMPOSED = {"base": 379.3e6, "graphs": 0.0, "attention": 0.0, "tokens": 8.822, "vocab": 0.6549, "profile": 45.31e6}

# The whole-graph path is checked in two stages (decision 0390).  Its peaks follow the BUILT graph's vertex count,
# which depends on every tensor's tile mapping, known only once the graph is built (a count from the planners
# alone was 0.45-10x the real one).  Before the build, WHOLE_FLOOR: a lower bound, not an estimate, so it never
# refuses a run that fits: the interpreter with the emulator imported (76 MB, measured) and, with numerics, each
# weight and activation element held once in float32 (4 B; :func:`whole_terms`' ``values``); 0.08-0.41 of the
# measured peaks (docs/performance.md).  Right after the build, before the compile and the run, BUILT: the
# estimate from the built graph's counts (:func:`built_terms`), *calibrated* like COMPOSED on the whole-graph
# FIT_ROWS of bench/host_memory.py (--fit).
WHOLE_FLOOR = {"base": 76e6, "activations": 0.0, "weights": 0.0, "values": 4.0}
BUILT = {"base": 193.3e6, "vertices": 75.04, "value_vertices": 558.4}

# A floor under the composed estimate, not fitted: the emulator holds an int64 index (8 B) per element of the
# attention scores of one block of query rows (batch x local heads x seq x seq / attention serialisation), even
# timing-only.  The fitted terms leave attention out (its coefficient came out negative over the fit rows, whose
# sequences are at most 2,048), so without the floor a run at sequence 65,536 passed the check and was killed for
# memory.  Only the scores: a GPT head's logits are not indexed so (GPT-2 medium, batch 4 on 8 IPUs: 2.06e8 logit
# elements would floor it at 1.65 GB + base; its measured peak is 1.01 GiB, docs/performance.md).
INDEX_BYTES = 8

# the size a field has in a usual run: the field furthest above it is the one a refusal names
_USUAL = dict(batch=8, seq=128, layers=12, hidden=768, heads=12, vocab=30522, image=224, nodes=256, edges=1024,
              pipeline_stages=4, ipus=4)


@dataclass(frozen=True)
class Estimate:
    """Estimated peak host memory of a run (``bytes``), its terms (count and bytes each, by name), the path
    (``composed`` or ``whole``) and the config field that grows the largest term most (``field``)."""

    bytes: int
    path: str
    terms: dict[str, tuple[float, float]]
    field: str

    @property
    def gib(self) -> float:
        return self.bytes / GIB


def runs_composed(cfg: ModelConfig, timing_only: bool) -> bool:
    """Whether ``cfg`` runs on the composed path (emulated.run_model): every GPT run, and BERT timing-only or at
    scale."""
    return cfg.model == "gpt" or (cfg.model == "bert" and (bool(timing_only) or cfg.scaled))


def runs_numerics(cfg: ModelConfig, timing_only: bool) -> bool:
    """Whether a run of ``cfg`` computes real values: not timing-only and not composed (always timing-only)."""
    return not timing_only and not runs_composed(cfg, timing_only)


def composed_terms(cfg: ModelConfig) -> dict[str, float]:
    """The counts of a composed run, on the shard one IPU of a tensor-parallel group holds: ``graphs``, its distinct
    stage graphs (ModelConfig.stage_kinds: each kept for the profile while the next is built); ``attention``, the
    attention-score elements of the layer body (batch x local heads x seq^2; the body is the same in every graph
    that has one, and one graph is built at a time); ``tokens``, the body's token activations (tokens x (hidden +
    attention width + FFN width)); ``vocab``, the embedding table where it is and the LM / MLM head where it is
    (decoder weight and logits), summed over the graphs; ``profile``, the IPUs of a replica's profile."""
    s = cfg.shard()
    kinds = list(dict.fromkeys(cfg.stage_kinds()))
    N = s.batch * s.seq
    head_tokens = N if s.model == "gpt" else s.batch * min(s.mlm_tokens, s.seq)
    body = any(k[3] for k in kinds)
    t = {"graphs": float(len(kinds)), "attention": float(s.batch * s.heads * s.seq ** 2) if body else 0.0,
         "tokens": float(N * (s.hidden + s.attn_width + s.ffn_size)) if body else 0.0, "vocab": 0.0,
         "profile": float(cfg.stages)}
    for emb, head, _amp, _body in kinds:
        if emb:
            t["vocab"] += s.vocab * s.hidden
        if head and s.training:
            t["vocab"] += head_tokens * s.vocab + s.hidden * s.vocab
    return t


def _resnet_sizes(cfg: ModelConfig) -> tuple[float, float]:
    """(activation elements, weight elements) of a ResNet: bottleneck stages of widths hidden x 1, 2, 4, 8 (x 4 out)
    at image / 4 .. image / 32 after the stem's 7 x 7 windows of the RGB input at image / 2."""
    w, px = cfg.hidden, cfg.image ** 2
    blocks = stage_blocks(cfg.layers)
    weights = sum(n * 17 * (w << s) ** 2 for s, n in enumerate(blocks)) + 8 * w * cfg.vocab + 147 * w
    acts = cfg.batch * (3 * px + px // 4 * (147 + w) + sum(n * 15 * (w << s) * px // (16 << (2 * s))
                                                         for s, n in enumerate(blocks)))
    return float(acts), float(weights)


def whole_terms(cfg: ModelConfig, timing_only: bool) -> dict[str, float]:
    """The counts of a whole-graph run: ``activations`` and ``weights`` (elements of the model's tensors, forward),
    and ``values``, the same again when the run computes values (timing-only runs hold none)."""
    H, B, L = cfg.hidden, cfg.batch, cfg.layers
    if cfg.model in ("bert", "gpt"):
        F, W = cfg.ffn_size, cfg.attn_width
        weights = L * (3 * H * W + W * H + 2 * H * F) + 2 * cfg.vocab * H
        acts = L * B * cfg.seq * (4 * H + 3 * W + F + 2 * cfg.heads * cfg.seq) + B * cfg.seq * cfg.vocab
    elif cfg.model == "resnet":
        acts, weights = _resnet_sizes(cfg)
    elif cfg.model == "conv":
        weights = L * 9 * H * H
        acts = L * B * cfg.image ** 2 * H * 4
    elif cfg.model == "gnn":
        weights = L * H * H
        acts = L * B * (cfg.nodes + cfg.edges) * H * 2
    else:  # mlp
        weights = L * H * H
        acts = L * B * H * 3
    values = 0.0 if timing_only else float(acts + weights)
    return {"activations": float(acts), "weights": float(weights), "values": values}


# the config fields each term grows with (the refusal names the one furthest above its usual size)
_TERM_FIELDS = {"graphs": ("pipeline_stages",), "attention": ("seq", "batch", "heads"),
                "largest_tensor": ("seq", "batch", "heads"),
                "largest_whole_tensor": ("batch", "image", "seq", "hidden", "nodes", "edges"),
                "tokens": ("batch", "seq", "hidden"), "vocab": ("vocab", "hidden"), "profile": ("pipeline_stages", "ipus"),
                "activations": ("batch", "image", "seq", "hidden", "nodes", "edges"), "weights": ("hidden", "layers"),
                "values": ("batch", "hidden", "layers"),
                "vertices": ("batch", "image", "seq", "hidden", "nodes", "edges"),
                "value_vertices": ("batch", "image", "seq", "hidden", "nodes", "edges")}


def largest_tensor(cfg: ModelConfig) -> float:
    """Elements of the attention scores of one block of query rows on one IPU's shard (:data:`INDEX_BYTES`)."""
    s = cfg.shard()
    ser = max(1, int(getattr(s, "attention_serialisation", 1) or 1))
    return float(s.batch * s.heads * s.seq * -(-s.seq // ser))


def largest_whole_tensor(cfg: ModelConfig) -> float:
    """Elements of the largest single tensor a whole-graph run builds (:data:`INDEX_BYTES` each, even timing-only,
    as on the composed path): a ResNet's stem windows (batch x 7 x 7 x 3 RGB values at each of image / 2 squared
    positions) or its widest activation; a conv net's layer output; a transformer's attention scores; a GNN's
    node + edge features; an MLP's layer.  The index floor of the whole-graph path: ResNet timing-only at image
    512 / 1,024 / 2,048 peaked at 15.0 / 13.4 / 13.0 B per element of its stem windows (2026-12-06), so 8 B is below
    every one of them, and a run whose index alone is past half the machine (image 8,192: 158 GB) is refused
    before it is built, not when the build runs out of memory."""
    B, H = cfg.batch, cfg.hidden
    if cfg.model == "resnet":
        px = cfg.image ** 2
        return float(B * max(147 * px // 4, H * px // 4, 4 * H * px // 16))
    if cfg.model == "conv":
        return float(B * H * cfg.image ** 2)
    if cfg.model in ("bert", "gpt"):
        return largest_tensor(cfg)
    if cfg.model == "gnn":
        return float(B * (cfg.nodes + cfg.edges) * H)
    return float(B * H)


def fitted_counts(cfg: ModelConfig, timing_only: bool) -> dict[str, float]:
    """The counts of the fitted terms of the path the run takes (what bench/host_memory.py --fit fits on, the
    floor aside)."""
    return composed_terms(cfg) if runs_composed(cfg, timing_only) else whole_terms(cfg, timing_only)


def estimate(cfg: ModelConfig, timing_only: bool) -> Estimate:
    """The estimated peak host memory of emulating ``cfg`` before anything is built: on the composed path the
    calibrated estimate (see the module's text), at least the index floor of its largest tensor
    (:data:`INDEX_BYTES`); on the whole-graph path its lower bound (:data:`WHOLE_FLOOR`, at least the index floor
    of :func:`largest_whole_tensor`; the estimate proper comes once the graph is built, :func:`built_estimate`)."""
    composed = runs_composed(cfg, timing_only)
    counts, coef = fitted_counts(cfg, timing_only), COMPOSED if composed else WHOLE_FLOOR
    terms = {k: (v, coef[k] * v) for k, v in counts.items()}
    total = coef["base"] + sum(b for _, b in terms.values())
    name, n = ("largest_tensor", largest_tensor(cfg)) if composed else ("largest_whole_tensor",
                                                                        largest_whole_tensor(cfg))
    if coef["base"] + INDEX_BYTES * n > total:
        terms = {name: (n, INDEX_BYTES * n)}
        total = coef["base"] + INDEX_BYTES * n
    return Estimate(int(total), "composed" if composed else "whole", terms, _field(cfg, composed, terms))


def built_terms(graph, numerics: bool) -> dict[str, float]:
    """The counts of a built whole graph (an emulator ``Graph``) the :data:`BUILT` estimate weighs:
    ``vertices``, its vertices (every codelet, every compute set), and ``value_vertices``, the same again when
    the run computes values (the values gathered per vertex field, the numpy reference and the comparisons).
    One sum over the graph's vertex groups: about 1 ms for ResNet-50's 18 M vertices in 600 groups."""
    n = float(sum(g.n for g in graph.groups))
    return {"vertices": n, "value_vertices": n if numerics else 0.0}


def built_estimate(graph, cfg: ModelConfig, timing_only: bool) -> Estimate:
    """The estimated peak host memory of a whole-graph run of ``cfg`` whose graph is built (*calibrated*,
    :data:`BUILT`): the second stage of its check, before the compile and the run hold most of it."""
    counts = built_terms(graph, runs_numerics(cfg, timing_only))
    terms = {k: (v, BUILT[k] * v) for k, v in counts.items()}
    total = BUILT["base"] + sum(b for _, b in terms.values())
    return Estimate(int(total), "built", terms, _field(cfg, False, terms))


def check_built_graph(graph, cfg: ModelConfig, timing_only: bool) -> None:
    """ConfigError (naming the field that grows the estimate most) when the built whole graph of ``cfg`` needs
    more than half of this machine's memory to compile and run (:func:`built_estimate`)."""
    hint = ("use --timing-only (same cycles and memory) or smaller sizes" if runs_numerics(cfg, timing_only)
            else "use smaller sizes")
    e = built_estimate(graph, cfg, timing_only)
    refuse_past_half(e, hint, basis=f"estimate from its built graph's {e.terms['vertices'][0]:,.0f} vertices")


def _field(cfg: ModelConfig, composed: bool, terms: dict) -> str:
    """The field a refusal names: on the composed path of a GPT or tensor-parallel run ``tensor_parallel`` (one
    IPU's shard of a layer is what has to fit: shard it more); otherwise, of the fields the largest term grows
    with, the one furthest above its usual size."""
    if composed and (cfg.model == "gpt" or cfg.tensor_parallel > 1):
        return "tensor_parallel"
    top = max(terms, key=lambda k: terms[k][1])
    sizes = {"batch": cfg.batch, "seq": cfg.seq, "heads": cfg.heads, "hidden": cfg.hidden, "vocab": cfg.vocab,
             "image": cfg.image, "nodes": cfg.nodes, "edges": cfg.edges, "layers": cfg.layers,
             "pipeline_stages": cfg.stages, "ipus": cfg.ipus}
    return max(_TERM_FIELDS[top], key=lambda k: sizes[k] / _USUAL[k])


def refuse_past_half(e: Estimate, hint: str, where: str = "", error=ConfigError, basis: str = "estimate") -> None:
    """``error`` (naming ``e.field``) when the estimate ``e`` is more than half of this machine's memory
    (value_checks.host_memory_bytes); nothing where that is unknown.  Half: the rest of the machine (other
    processes, the page cache) and the estimate's own error need room too."""
    have = value_checks.host_memory_bytes()
    if have and e.bytes > have // 2:
        raise error(f"{where + ': ' if where else ''}{e.field}: emulating this run needs about {e.gib:.1f} GiB of "
                    f"host memory ({basis}), more than half of this machine's {have / GIB:.1f} GiB; {hint}")


def check_host_memory(cfg: ModelConfig, timing_only: bool, where: str = "") -> None:
    """ConfigError (naming the field that grows the estimate most) when emulating ``cfg`` needs more than half of
    this machine's memory."""
    e = estimate(cfg, timing_only)
    if e.path == "composed":
        hint = (f"shard each layer over more IPUs (--tensor-parallel, now {cfg.tensor_parallel}) or use fewer "
                f"tokens (--seq, --batch)")
    elif runs_numerics(cfg, timing_only):
        hint = "use --timing-only (same cycles and memory) or smaller sizes"
    else:
        hint = "use smaller sizes"
    refuse_past_half(e, hint, where)
