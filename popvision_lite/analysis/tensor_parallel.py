"""A transformer's ops under Megatron-LM tensor parallelism (pure: pandas / numpy, no Qt): which dimension each op
splits, the whole model from one tensor-parallel shard, and one device's share of the whole model.

The ONE definition both sides use: the IPU side (a profile of a tensor-parallel run stores the stage program of
ONE IPU of each t-IPU group, ``ModelConfig.shard``: heads / t, FFN / t, vocabulary / t) is scaled back to the
whole model here (:func:`whole_model`, called by ``model_pass``), and the GPU side cuts the whole model to its own
tensor-parallel degree here (:func:`device_share`, called by ``gpu_parallel``).

The split is Megatron-LM's 1-D one (Shoeybi et al. 2019, "Megatron-LM", section 3), as the emulator shards a layer:

* ``"n"``: a GEMM whose weight is split along its non-hidden side n (attention heads x head size for the Q, K,
  V and output projections, the FFN width for the two FFN GEMMs, the vocabulary for the LM / MLM decoder), each
  with its data- and weight-gradient GEMMs.  Of its three operands one is a (rows x hidden) activation, which
  every device of the group holds whole; the weight (hidden x n) and the other activation (rows x n) are split.
  FLOPs = 2 rows hidden n, compulsory bytes = element bytes x (rows hidden + hidden n + rows n).
* ``"all"``: an op every operand of which is split (the attention score ops, per head; the FFN's GELU; the
  decoder's softmax and loss gradient over the vocabulary; a fused attention kernel): FLOPs and bytes / t.
* everything else (layer norms, residual adds, the embedding gather, the NSP / pooler heads, the MLM transform):
  replicated, the whole op on every device of the group; with Megatron's sequence parallelism (Korthikanti et
  al. 2022, section 4.2.2) these are split along the sequence instead, / t as well.

``n`` of a shard's GEMM is the config's width (heads x head size, FFN, padded vocabulary, / t) and its ``rows``
follow from its compulsory bytes, so each whole-model GEMM also gets its M, N, K; its FLOPs scale with n (the
emulator's own count, reductions of split K included, kept).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from popvision_lite.errors import ConfigError

# (parent scope, leaf) -> split of the op (the emulator's transformer names, emulator/models/transformer.py)
_GEMM_N = {"q_matmul": "heads", "k_matmul": "heads", "v_matmul": "heads", "out_matmul": "heads",
           "matmul1": "ffn", "matmul2": "ffn", "decoder_matmul": "vocab"}
# GEMMs whose weight is (n x hidden) (row-parallel in Megatron's terms): output projection and FFN down-projection
_ROW_PARALLEL = ("out_matmul", "matmul2")
_ALL_SPLIT = {
    "attention": ("qk_matmul", "scale", "causal_mask", "softmax", "pv_matmul", "pv_matmul_dp", "pv_matmul_dv",
                  "softmax_bwd", "scale_bwd", "qk_matmul_dq", "qk_matmul_dk", "fused_attention",
                  "fused_attention_bwd"),
    "ffn": ("gelu", "gelu_bwd"),
    "lm": ("softmax", "loss_grad"),
    "mlm": ("softmax", "loss_grad"),
}
SPLIT_COLUMNS = ("tp_split", "tp_rows", "tp_hidden", "tp_n")


def _parts(name: str) -> tuple[str, str]:
    bits = str(name).split("/")
    return (bits[-2] if len(bits) > 1 else ""), bits[-1]


def split_of(name: str) -> tuple[str, str]:
    """(split, what n is) of an op by its name: ``("n", "heads" | "ffn" | "vocab")`` for a GEMM split along its
    weight's non-hidden side, ``("all", "")`` for an op split whole, ``("", "")`` for a replicated op."""
    parent, leaf = _parts(name)
    base = leaf[:-3] if leaf.endswith(("_dx", "_dw")) else leaf
    if base in _GEMM_N and (base != "decoder_matmul" or parent in ("lm", "mlm")):
        return "n", _GEMM_N[base]
    if leaf in _ALL_SPLIT.get(parent, ()):
        return "all", ""
    return "", ""


def expected_widths(cfg: dict, t: int) -> dict[str, float]:
    """Width n of each split kind in ONE shard of a t-way split of the config's model: heads x head size / t,
    FFN / t, and the vocabulary padded to a multiple of 128 t, / t (Megatron-LM's ``--make-vocab-size-divisible-by``
    128, as ``ModelConfig.shard`` pads it); 0 where the config does not say."""
    def num(k, default=0.0):
        try:
            return float(cfg.get(k) or default)
        except (TypeError, ValueError):
            return default
    h = num("hidden")
    heads = num("heads", 1.0) or 1.0
    d = num("head_dim") or (h / heads if heads else 0.0)
    ffn = num("ffn") or 4 * h
    vocab = num("vocab")
    v = (math.ceil(vocab / (128 * t)) * 128) if t > 1 and vocab else vocab / max(t, 1)
    return {"heads": heads * d / t, "ffn": ffn / t, "vocab": v}


def _elem_bytes(precision) -> float:
    return 4.0 if str(precision).lower() in ("fp32", "float32") else 2.0


def annotate(kernels: pd.DataFrame, cfg: dict, t: int = 1) -> pd.DataFrame:
    """``kernels`` (one pass of a shard of a t-way split, or of the whole model when t = 1) with the split of each
    op (:data:`SPLIT_COLUMNS`): ``tp_split`` ("n", "all" or ""), and for an "n" GEMM its ``tp_rows``, ``tp_hidden``
    and ``tp_n`` (the shard's width), solved from its FLOPs and bytes.  A GEMM whose sides do not solve (not a
    GEMM of this shape) is left unshaped and scaled as "all"."""
    out = kernels.copy()
    n = len(out)
    split = np.full(n, "", dtype=object)
    rows = np.full(n, np.nan)
    hid = np.full(n, np.nan)
    width = np.full(n, np.nan)
    if not n:
        for c, v in zip(SPLIT_COLUMNS, (split, rows, hid, width), strict=True):
            out[c] = v
        return out
    try:
        h = float(cfg.get("hidden") or 0)
    except (TypeError, ValueError):
        h = 0.0
    exp = expected_widths(cfg, t)
    names = out["name"].astype(str).to_numpy()
    flops = out["flops"].to_numpy(dtype=float)
    nbytes = out["min_bytes"].to_numpy(dtype=float)
    prec = out["precision"].to_numpy() if "precision" in out.columns else np.full(n, "fp16")
    for i, nm in enumerate(names):
        s, what = split_of(nm)
        if s != "n":
            split[i] = s
            continue
        eb = _elem_bytes(prec[i])
        want = exp.get(what) or 0.0
        rr = nn = 0.0
        if h > 0 and want > 0:
            # the width the config gives; the rows from the compulsory bytes (exact: A, B and C once each)
            nn = want
            rr = (nbytes[i] / eb - h * nn) / (h + nn)
        elif h > 0:
            # no width in the config: both sides from FLOPs and bytes (rows x n and rows + n), the larger root n
            p = flops[i] / (2 * h)
            sm = (nbytes[i] / eb - p) / h
            disc = sm * sm - 4 * p
            if p > 0 and sm > 0 and disc >= -0.01 * sm * sm:
                root = math.sqrt(max(disc, 0.0))
                nn, rr = (sm + root) / 2, (sm - root) / 2
        if not (rr > 0 and nn > 0):
            split[i] = "all"                             # not a (rows x hidden) . (hidden x n) GEMM: split whole
            continue
        split[i], rows[i], hid[i], width[i] = "n", rr, h, nn
    out["tp_split"], out["tp_rows"], out["tp_hidden"], out["tp_n"] = split, rows, hid, width
    return out


def _gemm_shape(name: str, rows: np.ndarray, h: np.ndarray, n: np.ndarray) -> tuple:
    """(M, N, K) of an "n" GEMM by its role: forward, data gradient (``_dx``) or weight gradient (``_dw``) of a
    column-parallel weight (hidden x n) or a row-parallel one (n x hidden)."""
    _, leaf = _parts(name)
    base = leaf[:-3] if leaf.endswith(("_dx", "_dw")) else leaf
    row = base in _ROW_PARALLEL
    if leaf.endswith("_dw"):
        return (n, h, rows) if row else (h, n, rows)
    if leaf.endswith("_dx"):
        return (rows, n, h) if row else (rows, h, n)
    return (rows, h, n) if row else (rows, n, h)


def rescale(kernels: pd.DataFrame, factor: float, sequence_parallel: bool = False) -> pd.DataFrame:
    """Every split op of an annotated list widened by ``factor`` (> 1: the whole model from a shard; < 1: a
    device's share of the whole model); replicated ops stay whole, or are split too when ``sequence_parallel``.
    "n" GEMMs get their bytes recomputed from the new width and their M, N, K."""
    if "tp_split" not in kernels.columns:
        raise ConfigError("tensor_parallel.rescale needs an annotated kernel list (tensor_parallel.annotate)")
    out = kernels.copy()
    s = out["tp_split"].astype(str).to_numpy()
    flops = out["flops"].to_numpy(dtype=float).copy()
    nbytes = out["min_bytes"].to_numpy(dtype=float).copy()
    is_all = s == "all"
    is_n = s == "n"
    is_rep = ~(is_all | is_n)
    scale_all = is_all | (is_rep if sequence_parallel else np.zeros(len(s), bool))
    flops[scale_all] *= factor
    nbytes[scale_all] *= factor
    for c in ("batch",):
        if c in out.columns:
            v = out[c].to_numpy(dtype=float).copy()
            ok = scale_all & np.isfinite(v)
            v[ok] = v[ok] * factor
            out[c] = v
    if is_n.any():
        rows = out["tp_rows"].to_numpy(dtype=float)
        h = out["tp_hidden"].to_numpy(dtype=float)
        n = out["tp_n"].to_numpy(dtype=float).copy()
        n[is_n] = n[is_n] * factor
        eb = np.array([_elem_bytes(p) for p in out["precision"]]) if "precision" in out.columns else np.full(len(s), 2.0)
        flops[is_n] = flops[is_n] * factor
        nbytes[is_n] = eb[is_n] * (rows[is_n] * h[is_n] + (h[is_n] + rows[is_n]) * n[is_n])
        out["tp_n"] = n
        for c in ("m", "n", "k", "batch"):
            if c not in out.columns:
                out[c] = np.nan
        m_, n_, k_ = (out[c].to_numpy(dtype=float).copy() for c in ("m", "n", "k"))
        bt = out["batch"].to_numpy(dtype=float).copy()
        names = out["name"].astype(str).to_numpy()
        for i in np.flatnonzero(is_n):
            m_[i], n_[i], k_[i] = _gemm_shape(names[i], rows[i], h[i], n[i])
            bt[i] = 1.0
        out["m"], out["n"], out["k"], out["batch"] = m_, n_, k_, bt
    out["flops"], out["min_bytes"] = flops, nbytes
    return out


def whole_model(kernels: pd.DataFrame, cfg: dict, t: int) -> tuple[pd.DataFrame, list[str]]:
    """The whole model's kernels from one shard of a t-way tensor-parallel run (annotated, with M, N, K for the
    split GEMMs); the kernels themselves, annotated, when t = 1."""
    ann = annotate(kernels, cfg, t)
    if t <= 1:
        return rescale(ann, 1.0), []
    whole = rescale(ann, float(t))
    s = ann["tp_split"].astype(str)
    note = (f"tensor parallel {t}: the profile holds ONE IPU's shard of each layer (heads, FFN and vocabulary / {t}); "
            f"the GPU side costs the whole model: {int((s == 'n').sum())} split GEMMs and {int((s == 'all').sum())} "
            f"split ops x {t}, {int((s == '').sum())} replicated ops (layer norms, residual adds, embedding) once "
            "(analysis/tensor_parallel.py)")
    return whole, [note]


def device_share(kernels: pd.DataFrame, t: int, sequence_parallel: bool = True) -> pd.DataFrame:
    """One device's share of the whole model's (annotated) kernels under t-way tensor parallelism."""
    if t <= 1:
        return kernels
    return rescale(kernels, 1.0 / t, sequence_parallel=sequence_parallel)


def split_weight_params(kernels: pd.DataFrame, cfg: dict, t: int) -> float:
    """Parameters of the split weights in an annotated pass of one shard: hidden x n of each forward "n" GEMM (each
    weight has one forward kernel per layer call; its gradient GEMMs are not counted again), and the token
    embedding's vocabulary / t rows (vocabulary-parallel, a weight of its own beside the LM / MLM decoder's)."""
    if "tp_split" not in kernels.columns or not len(kernels):
        return 0.0
    names = kernels["name"].astype(str)
    fwd = (kernels["tp_split"].astype(str) == "n").to_numpy() & ~names.str.endswith(("_dx", "_dw")).to_numpy()
    out = float((kernels["tp_hidden"].to_numpy(dtype=float)[fwd] * kernels["tp_n"].to_numpy(dtype=float)[fwd]).sum())
    if names.str.endswith("embedding/gather").any():
        try:
            out += expected_widths(cfg, t)["vocab"] * float(cfg.get("hidden") or 0)
        except (TypeError, ValueError):
            pass
    return out
