"""The transformer workloads, BERT encoders and GPT decoders, written once against the backend op vocabulary
(``backend.py``): the encoder layer (attention + FFN, forward and backward) both share, ``build_bert`` (the
whole model on one graph, layers placed as pipeline stages) and ``build_bert_stage`` (one pipeline stage's
distinct program, a GPT decoder with ``cfg.model == "gpt"``: causal attention and a language-model head).

Recomputation: with ``cfg.recompute`` only each layer's input is kept from the forward pass; the
backward pass re-runs the layer's forward (ops named ``layerN/recompute/...``) before its gradient.
"""

from __future__ import annotations

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
    # The layer body is placed the same in every stage graph: its ops take their tiles from the op library's
    # rotating start tile (OpContext.tiles_array), which the embedding (first stage) or the LM / MLM head
    # (last stage) would otherwise have advanced first.  Poplibs maps each op by its own rules, with no
    # counter carried from the ops before it, and PopART outlines one layer body; so the body starts at
    # rotation 0 (where a stage that begins with its input puts it) and its backward where its forward
    # ended, as if no head ran.  The stage graphs then share the layer's compiled exchanges (CopyMemo).
    rot = getattr(getattr(be, "ctx", None), "rotation", None)
    if rot is not None:
        be.ctx.rotation = 0
    with be.scope("layer"):
        p = _bert_layer_params(be, rv, cfg, False)
        y, c = _bert_layer_fwd(be, p, x, hd, causal=gpt, mark=lambda h: be.mark(f"layer_fwd_{h}"))
    if rot is not None:
        rot = be.ctx.rotation  # where the layer forward ended
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
    if rot is not None:
        be.ctx.rotation = rot  # the layer backward starts where its forward ended (see above)
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
