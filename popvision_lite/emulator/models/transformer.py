"""The transformer workloads, BERT encoders and GPT decoders, written once against the backend op vocabulary
(``backend.py``): the encoder layer (attention + FFN, forward and backward) both share, ``build_bert`` (the
whole model on one graph, layers placed as pipeline stages) and ``build_bert_stage`` (one pipeline stage's
distinct program, a GPT decoder with ``cfg.model == "gpt"``: causal attention and a language-model head).

Recomputation: with ``cfg.recompute`` only each layer's input is kept from the forward pass; the
backward pass re-runs the layer's forward (ops named ``layerN/recompute/...``) before its gradient.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from .building import Built, _Values, stage_of
from .config import ModelConfig


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
        for a in (self.split, self.split_t, self.merge):
            while isinstance(a, np.ndarray):  # shared by the graphs built with them (_heads); the arrays that
                a.flags.writeable = False  # hold their memory too, so what is counted of them is kept
                a = a.base  # (ops/common.unit_steps)


@functools.lru_cache(maxsize=1)
def _heads(B, S, A, d) -> _Heads:
    """The head layouts of the last shape asked for: a pipelined run's stage graphs take the same index arrays
    (built once; an op replayed from another stage graph (backends/op_memo.py) finds its view's index the
    same object, not an equal one to compare)."""
    return _Heads(B, S, A, d)


def _block_rows(hd: _Heads, rows: int) -> np.ndarray:
    """Flat indices into one attention block's (B*A, rows, d) tensor of a (B*A, S, d) tensor whose S rows are the
    serial blocks' rows in turn: row r of every head reads row r % rows of the block."""
    return (np.arange(hd.B * hd.A, dtype=np.int64)[:, None, None] * rows * hd.d
            + (np.arange(hd.S, dtype=np.int64) % rows)[None, :, None] * hd.d
            + np.arange(hd.d, dtype=np.int64)[None, None, :])


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


def _bert_layer_fwd(be, p, x, hd: _Heads, causal: bool = False, mark=None, serial: int = 1):
    """x: (B*S, H).  Returns (out, cache).  ``causal``: GPT-style masked attention.  ``mark(name)`` is
    called before the attention half and before the FFN half (the two blocks PopART places on IPUs
    separately, e.g. MLPerf's attention / FFN placement).  ``serial`` > 1: the attention core (scores, softmax,
    context) as ONE block of S / serial query rows between marks ``attcore`` and ``attpost``, which the
    composition runs ``serial`` times (PopXL's attention_serialisation calls one block subgraph that often); the
    output projection reads the blocks' context rows, each block laid out as the one emulated."""
    if mark:
        mark("att")
    c = {"x": x}
    c["q"] = be.matmul(x, p["wq"], "attention/q_matmul")
    c["k"] = be.matmul(x, p["wk"], "attention/k_matmul")
    c["v"] = be.matmul(x, p["wv"], "attention/v_matmul")
    rows = hd.S // serial  # query rows of one block
    if serial > 1 and mark:
        mark("attcore")
    q = be.take(c["q"], hd.split if serial == 1 else hd.split[:, :rows, :])
    scores = be.matmul(q, be.take(c["k"], hd.split_t), "attention/qk_matmul")
    s = be.scale(scores, 1.0 / math.sqrt(hd.d), "attention/scale")
    if causal:
        # select(score, -inf) above the diagonal: one elementwise pass over the scores (the mask is
        # generated from indices, not stored)
        s = be.scale(s, 1.0, "attention/causal_mask")
    c["p"] = be.softmax(s, "attention/softmax")
    c["ctx"] = be.matmul(c["p"], be.take(c["v"], hd.split), "attention/pv_matmul")  # (B*A, S / serial, d)
    if serial > 1:
        if mark:
            mark("attpost")
        merged = be.take(be.take(c["ctx"], _block_rows(hd, rows)), hd.merge)  # every block's rows, laid out alike
    else:
        merged = be.take(c["ctx"], hd.merge)
    attn = be.matmul(merged, p["wo"], "attention/out_matmul")
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


def vocab_slices(cfg: ModelConfig) -> tuple[int, int]:
    """(slices, rows per slice) of the embedding table: ``cfg.embedding_serialization`` slices of the vocabulary
    padded up to a multiple of them, as optimum-graphcore's ``resize_token_embeddings`` pads it before serialising
    (50257 in 5 slices: 50260 rows, 10052 per slice)."""
    f = max(1, int(cfg.embedding_serialization))
    return f, -(-cfg.vocab // f)


def build_bert_stage(be, cfg: ModelConfig, stage: int, nstages: int, body: bool = True) -> dict:
    """The DISTINCT program of one pipeline stage for ONE micro-batch, with ONE outlined encoder
    layer body (emulator/models/pipeline.py repeats its cost for the stage's layers; ``body`` False: an IPU that
    holds no layer, only the embedding and / or the heads).  Phases are marked with ``be.mark``: ``emb_fwd``,
    ``layer_fwd_att`` / ``layer_fwd_ffn`` (the attention and FFN halves of the body), ``head`` (the task head's
    forward, loss and backward: ``cfg.task_head``; with ``pipeline_placement = "wrap"`` on the first stage the MLM
    decoder / GPT LM head is the embedding table, tied as in BERT, GPT-2 and MLPerf's placement),
    ``layer_recompute_att`` / ``_ffn`` (re-run the SAME forward programs: recomputation reuses the forward code),
    ``layer_bwd_ffn`` / ``layer_bwd_att``.  Returns handles: ``x`` (stage input), ``y`` (body output), ``grads``
    (layer body), ``layer_params`` / ``extra_params`` (weight handles)."""
    rv = _Values(be, cfg.seed)
    B, S, H, A = cfg.batch, cfg.seq, cfg.hidden, cfg.heads
    hd = _heads(B, S, A, cfg.d_head)
    first, last = stage == 0, stage == nstages - 1
    gpt = cfg.model == "gpt"
    extra = []
    out: dict = {}
    tables = []
    if first:
        with be.scope("embedding"):
            x, tables = _embedding(be, rv, cfg, extra)
    else:
        with be.scope("pipeline"):
            x = be.input("stage_input", rv.normal((B * S, H)))  # received from the previous IPU
    # The layer body is placed the same in every stage graph: its ops take their tiles from the op library's
    # rotating start tile (OpContext.tiles_array), which the embedding (first stage) or the LM / MLM head
    # (last stage) would otherwise have advanced first.  Poplibs maps each op by its own rules, with no
    # counter carried from the ops before it, and PopART outlines one layer body; so the body starts at
    # rotation 0 (where a stage that begins with its input puts it) and its backward where its forward
    # ended, as if no head ran.  The stage graphs then share the layer's compiled exchanges (CopyMemo).
    rot = getattr(getattr(be, "ctx", None), "rotation", None)
    if rot is not None:
        be.ctx.rotation = 0
    p, c = {}, None
    y = x
    if body:
        with be.scope("layer"):
            p = _bert_layer_params(be, rv, cfg, False)
            y, c = _bert_layer_fwd(be, p, x, hd, causal=gpt, mark=lambda h: be.mark(f"layer_fwd_{h}"),
                                   serial=cfg.attention_serialisation)
    if rot is not None:
        rot = be.ctx.rotation  # where the layer forward ended
    out.update(x=x, y=y, layer_params=p)
    if not cfg.training:
        be.mark("end")
        out.update(dx=None, grads={}, extra_params=extra)
        return out
    if last:
        tied = tables if (first and cfg.pipeline_placement == "wrap") else None  # the decoder IS the table
        with be.scope("heads"):
            if cfg.task_head == "question_answering":
                d = _qa_head(be, rv, cfg, y, extra)
            elif cfg.task_head == "sequence_classification":
                d = _classification_head(be, rv, cfg, y, extra)
            elif gpt:
                d = _lm_head(be, rv, cfg, y, tied, extra)
            else:
                d = _mlm_nsp_head(be, rv, cfg, y, tied[0] if tied else None, extra)
    else:
        with be.scope("pipeline"):
            d = be.input("stage_grad_input", rv.normal((B * S, H), 0.01))  # from the next IPU
    if rot is not None:
        be.ctx.rotation = rot  # the layer backward starts where its forward ended (see above)
    dx, grads = d, {}
    if body:
        with be.scope("layer"):
            if cfg.recompute:  # the same programs again: recomputation shares the forward code
                for h in (("att", "attcore", "attpost", "ffn") if cfg.attention_serialisation > 1
                          else ("att", "ffn")):
                    be.mark(f"layer_recompute_{h}")
                    be.replay(f"layer_fwd_{h}")
            dx, grads = _bert_layer_bwd(be, p, c, d, hd, mark=lambda h: be.mark(f"layer_bwd_{h}"),
                                        serial=cfg.attention_serialisation)
    be.mark("end")
    out.update(dx=dx, grads=grads, extra_params=extra)
    return out


def _embedding(be, rv, cfg: ModelConfig, extra: list):
    """The embedding lookup of the first stage: (its output, the table's slices).  One table and one gather when
    ``cfg.embedding_serialization`` is 1.  Serialised (optimum-graphcore's SerializedEmbedding for bert models):
    the table as that many slices, each looked up for every token with the ids outside it masked, the lookups
    summed.  A gpt model's LM head is serialised over the same slices, but its token embedding is one plain lookup
    (optimum-graphcore's PipelinedGPT2LMHeadModel serialises only the head): costed as one gather of every token's
    row from the first slice (a gather's cost is the rows it moves, wherever they lie)."""
    B, S, H = cfg.batch, cfg.seq, cfg.hidden
    F, rows = vocab_slices(cfg)
    if F == 1:
        tables = [be.weight("table", rv.normal((cfg.vocab, H), 0.5))]
    else:
        tables = [be.weight(f"table_{i}", rv.normal((rows, H), 0.5)) for i in range(F)]
    pos = be.weight("position", rv.normal((S, H), 0.5))
    g, b = be.weight("ln_g", rv.const(H, 1.0)), be.weight("ln_b", rv.const(H, 0.0))
    extra += [*tables, pos, g, b]
    be.mark("emb_fwd")
    ids = np.random.default_rng(cfg.seed + 7).integers(0, cfg.vocab, size=B * S)
    if F == 1 or cfg.model == "gpt":
        e = be.gather_rows(tables[0], ids % (cfg.vocab if F == 1 else rows), "gather")
    else:
        e = None
        for i, t in enumerate(tables):
            part = be.gather_rows(t, np.clip(ids - i * rows, 0, rows - 1), f"gather_{i}")
            e = part if e is None else be.add(e, part, f"gather_sum_{i}")
    e = be.add(e, be.repeat(pos, B), "position_add")  # the (S, H) positions for each of the B sequences
    return be.layer_norm(e, g, b, "layer_norm"), tables


def _lm_head(be, rv, cfg: ModelConfig, y, tied, extra: list):
    """GPT's language-model head over every token: forward, loss and backward; returns the gradient into the
    body's output.  Untied (its own decoder) unless ``tied`` (the embedding table's slices: the wrap placement).
    Serialised over the vocabulary slices as poptorch.serializedMatMul with MatMulSerializationMode.OutputChannels
    runs it (optimum-graphcore's SerializedLinear): one (tokens x hidden) x (hidden x slice) matmul per slice for
    the logits, per slice again for the weight gradient, and the input gradient summed over the slices.  When the
    vocabulary was padded to a multiple of the slices, the padded logits are masked before the loss (one multiply
    and one add over the logits, as optimum-graphcore's PipelinedGPT2LMHeadModel.forward does).  The softmax is
    costed slice by slice (the rows' max and sum combined across slices are a token's worth of values each)."""
    B, S, H = cfg.batch, cfg.seq, cfg.hidden
    T = B * S
    F, rows = vocab_slices(cfg)
    if tied is None:
        if F == 1:
            decs = [be.weight("lm_decoder_w", rv.init((H, cfg.vocab), H))]
        else:
            decs = [be.weight(f"lm_decoder_w_{i}", rv.init((H, rows), H)) for i in range(F)]
        extra += decs
    be.mark("head")
    sfx = (lambda i: "") if F == 1 else (lambda i: f"_{i}")
    dx = None
    for i in range(F):
        w = be.t(tied[i]) if tied is not None else decs[i]
        logits = be.matmul(y, w, f"lm/decoder_matmul{sfx(i)}")
        if F * rows > cfg.vocab:  # padded vocabulary: masked before the loss
            logits = be.scale(logits, 1.0, f"lm/padding_mask_mul{sfx(i)}")
            logits = be.scale(logits, 1.0, f"lm/padding_mask_add{sfx(i)}")
        prob = be.softmax(logits, f"lm/softmax{sfx(i)}")
        dlog = be.scale(prob, 1.0 / T, f"lm/loss_grad{sfx(i)}")
        if tied is not None:  # the gradient accumulates into the table's (vocab, hidden) layout
            be.matmul(be.t(dlog), y, f"lm/decoder_matmul_dw{sfx(i)}")
            part = be.matmul(dlog, tied[i], f"lm/decoder_matmul_dx{sfx(i)}")
        else:
            be.matmul(be.t(y), dlog, f"lm/decoder_matmul_dw{sfx(i)}")
            part = be.matmul(dlog, be.t(decs[i]), f"lm/decoder_matmul_dx{sfx(i)}")
        dx = part if dx is None else be.add(dx, part, f"lm/decoder_dx_sum{sfx(i)}")
    return dx


def _mlm_nsp_head(be, rv, cfg: ModelConfig, y, table, extra: list):
    """BERT's pretraining heads: MLM over the masked positions (the decoder tied to ``table`` when given) and NSP
    on the first token of each pack; forward, loss and backward.  Returns the gradient into the encoder output."""
    B, S, H = cfg.batch, cfg.seq, cfg.hidden
    T = B * cfg.mlm_tokens
    hp = {"mlm_w": be.weight("mlm_transform_w", rv.init((H, H), H)),
          "mlm_b": be.weight("mlm_transform_b", rv.const(H, 0.0)),
          "ln_g": be.weight("mlm_ln_g", rv.const(H, 1.0)), "ln_b": be.weight("mlm_ln_b", rv.const(H, 0.0)),
          "pool": be.weight("nsp_pooler_w", rv.init((H, H), H)),
          "cls": be.weight("nsp_classifier_w", rv.init((H, 2), H))}
    extra += list(hp.values())
    tied = table is not None
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
    return be.scale(y, 0.0, "encoder_output_grad")


def _qa_head(be, rv, cfg: ModelConfig, y, extra: list):
    """The question-answering span head (Hugging Face's *ForQuestionAnswering: ``qa_outputs``, a hidden x 2
    projection of every token with bias): the start and end logits of each sequence through a softmax
    cross-entropy over its tokens, then the backward.  Returns the gradient into the encoder output."""
    B, S, H = cfg.batch, cfg.seq, cfg.hidden
    w = be.weight("qa_outputs_w", rv.init((H, 2), H))
    bias = be.weight("qa_outputs_b", rv.const(2, 0.0))
    extra += [w, bias]
    be.mark("head")
    logits = be.add_bias(be.matmul(y, w, "qa/outputs_matmul"), bias, "qa/outputs_bias")  # (tokens, 2)
    # start and end: each sequence's S logits of one column are a row of the softmax (2 x batch rows of S)
    rows = be.take(logits, (np.arange(2)[:, None, None] + 2 * (np.arange(B)[None, :, None] * S
                                                                + np.arange(S)[None, None, :])).reshape(2 * B, S))
    prob = be.softmax(rows, "qa/softmax")
    dlog = be.scale(prob, 0.5 / B, "qa/loss_grad")  # (start + end) / 2, mean over the batch
    dl = be.take(dlog, (np.arange(2)[None, :] * B * S + np.arange(B * S)[:, None]).reshape(B * S, 2))
    be.matmul(be.t(y), dl, "qa/outputs_matmul_dw")
    return be.matmul(dl, be.t(w), "qa/outputs_matmul_dx")


def _classification_head(be, rv, cfg: ModelConfig, y, extra: list, classes: int = 2):
    """The sequence-classification head (Hugging Face's *ForSequenceClassification: BERT's pooler + classifier,
    RoBERTa's classification head: the first token through a hidden x hidden dense layer and tanh, then hidden x
    ``classes``), softmax cross-entropy and backward; the gradient into the encoder output is the first rows
    scattered into zeros (one pass).  tanh is costed as the op library's gelu (one elementwise pass each way)."""
    B, S, H = cfg.batch, cfg.seq, cfg.hidden
    dense = be.weight("cls_dense_w", rv.init((H, H), H))
    outw = be.weight("cls_out_w", rv.init((H, classes), H))
    extra += [dense, outw]
    be.mark("head")
    xc = be.take(y, (np.arange(B) * S)[:, None] * H + np.arange(H)[None, :])
    h1 = be.matmul(xc, dense, "cls/dense_matmul")
    h2 = be.gelu(h1, "cls/tanh")
    logits = be.matmul(h2, outw, "cls/out_matmul")
    dlog = be.scale(be.softmax(logits, "cls/softmax"), 1.0 / B, "cls/loss_grad")
    be.matmul(be.t(h2), dlog, "cls/out_matmul_dw")
    dh1 = be.gelu_bwd(h1, be.matmul(dlog, be.t(outw), "cls/out_matmul_dx"), "cls/tanh_bwd")
    be.matmul(be.t(xc), dh1, "cls/dense_matmul_dw")
    be.matmul(dh1, be.t(dense), "cls/dense_matmul_dx")
    return be.scale(y, 0.0, "encoder_output_grad")


def _bert_layer_bwd(be, p, c, dout, hd: _Heads, mark=None, serial: int = 1):
    """Returns (dx, grads dict).  ``mark(name)`` before the FFN half and before the attention half; with
    ``serial`` > 1 also before the attention core's backward (``attcore``: one block of S / serial query rows, its
    key and value gradients accumulated over the blocks) and before the q / k / v projections' (``attpre``)."""
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
    rows = hd.S // serial
    if serial > 1:
        ctx_m = be.take(be.take(c["ctx"], _block_rows(hd, rows)), hd.merge)
    else:
        ctx_m = be.take(c["ctx"], hd.merge)
    g["wo"] = be.matmul(be.t(ctx_m), dr1, "attention/out_matmul_dw")
    dctx = be.matmul(dr1, be.t(p["wo"]), "attention/out_matmul_dx")  # (B*S, H)
    if serial > 1 and mark:
        mark("attcore")
    dctx_h = be.take(dctx, hd.split if serial == 1 else hd.split[:, :rows, :])
    dp = be.matmul(dctx_h, be.take(c["v"], hd.split_t), "attention/pv_matmul_dp")
    dvh = be.matmul(be.t(c["p"]), dctx_h, "attention/pv_matmul_dv")
    ds = be.softmax_bwd(c["p"], dp, "attention/softmax_bwd")
    dsc = be.scale(ds, 1.0 / math.sqrt(hd.d), "attention/scale_bwd")
    dqh = be.matmul(dsc, be.take(c["k"], hd.split), "attention/qk_matmul_dq")
    qh = be.take(c["q"], hd.split if serial == 1 else hd.split[:, :rows, :])
    dkh = be.matmul(be.t(dsc), qh, "attention/qk_matmul_dk")
    if serial > 1:  # each block adds its key and value gradients to the accumulated ones
        dkh = be.add(dkh, dkh, "attention/dk_accumulate")
        dvh = be.add(dvh, dvh, "attention/dv_accumulate")
        if mark:
            mark("attpre")
        dqh = be.take(dqh, _block_rows(hd, rows))  # the blocks' query-gradient rows, laid out as this one's
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
    hd = _heads(B, S, A, cfg.d_head)
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
