"""The small bundled workloads, written once against the backend op vocabulary (``backend.py``): an MLP,
a ResNet-style 3x3 conv block and GNN message passing.

Each ``build_*`` function creates its seeded inputs and weights on the backend, runs the forward
pass and (when ``cfg.training``) the backward pass and an SGD update, and returns the named result
handles (loss gradient, outputs, updated weights) that full-numerics runs compare against the numpy
reference.  Multi-IPU: layers are placed on IPUs as pipeline stages (layer l on IPU
``l * ipus // layers``); activations crossing a stage boundary become inter-IPU copies in the emulator.
"""

from __future__ import annotations

import numpy as np

from .building import Built, _Values, stage_of
from .config import ModelConfig

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
