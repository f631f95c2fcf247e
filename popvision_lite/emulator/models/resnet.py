"""ResNet (bottleneck v1.5, He et al. 2016; the MLPerf ResNet-50 graph) written against the backend
op vocabulary, forward and training step.

Layout: NHWC activations stored as rows of channels, ``(N*H*W, C)``.  A convolution is an implicit
GEMM: its input windows are gathered by exchange (``gather_windows``, zero padding) into an
``(N*OH*OW, k*k*C)`` operand and multiplied by the ``(k*k*C, Co)`` kernel; a 1x1 stride-1
convolution is a plain matmul.  Backward: ``dW = cols^T dY``; ``dX = col2im(dY W^T)``.  With
``conv_lowering = "halo"`` (config; the default) the k x k forward convolutions and the stride-1 dX run
as ``ops/conv.py``'s convolution instead: each tile receives its input rows with halo once and reads the
windows in place (:func:`halo_conv` says which), and so does the stride-1 dX; the stride-1 dW runs as
``ops/conv_wu.py``'s weight-update convolution (each tile's input rows with halo and dY rows once, partial
dW reduced over the tiles; :func:`halo_weight_update`); the strided dW and dX keep the im2col path.

Config fields (``ModelConfig``): ``layers`` = network depth (14, 26, 50, 101, 152: bottleneck
blocks per stage from :data:`STAGE_BLOCKS`), ``hidden`` = width of the first stage (64 for
ResNet-50), ``image`` = input height = width, ``vocab`` = number of classes, ``batch`` = images per
micro-batch.  Stages after the first halve the image with a stride-2 3x3 convolution (v1.5).
Loss: softmax cross-entropy gradient ``(softmax(z) - onehot) / N``.  Weights are updated by SGD
(the optimizer of the real run is the scale helper's ``optimizer`` field).

Recomputation (``cfg.recompute``, the MLPerf layout): the blocks form recomputation segments
(:func:`recompute_segments`); only each segment's input is kept from the forward pass, and the backward
pass re-runs the segment's forward (the stem's with the first segment) before the backward of its
blocks, last first.  ResNet-50's segments are the MLPerf submissions' pipeline stages
(:data:`RECOMPUTE_SPLITS`); other depths recompute block by block.
Multi-IPU: blocks are placed as pipeline stages like BERT's layers (``stage_of``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .building import Built, _Values, stage_of

if TYPE_CHECKING:
    import numpy as np

# bottleneck blocks per stage for a network depth (depth = 3 * blocks + 2)
STAGE_BLOCKS = {14: (1, 1, 1, 1), 26: (2, 2, 2, 2), 50: (3, 4, 6, 3), 101: (3, 4, 23, 3), 152: (3, 8, 36, 3)}

# name: (depth, first-stage width, image, classes, micro-batch)
RESNET_PRESETS = {
    "resnet50": dict(layers=50, hidden=64, image=224, vocab=1000, batch=20),  # MLPerf: 20 images per IPU
    # tiny: same graph; fp32 because an fp16 step with batch norm over few rows diverges from the fp16
    # reference as far as that reference diverges from fp32 (tests/emulator/models/test_resnet.py), so checks would fail
    "resnet-tiny": dict(layers=14, hidden=4, image=32, vocab=10, batch=8, precision="fp32"),
}
RESNET_DEFAULTS = dict(RESNET_PRESETS["resnet-tiny"])
EXPANSION = 4

# Graphcore's MLPerf ResNet-50 (TensorFlow, mlcommons training_results_v1.0 / v1.1 / v2.0,
# Graphcore/benchmarks/resnet/implementations/tensorflow/configs.yml, every mk2_resnet50_mlperf_*_bs20 /
# *_lars entry): pipeline_splits [b1/0/relu, b1/2/relu, b2/0/relu, b2/2/relu, b3/0/relu, b3/3/relu] with
# shards 1, pipeline_schedule Sequential and enable_recomputation: seven pipeline stages on one IPU, and
# TensorFlow's pipelined recomputation keeps each stage's input and re-runs the stage's forward in the
# backward pass.  bS/i is block i of stage S (1-based stages, 0-based blocks): the splits follow these
# blocks, counted over the whole network.
RECOMPUTE_SPLITS = {50: (0, 2, 3, 5, 7, 10)}
# Graphcore's TensorFlow builds every batch norm (training and gradient) and every convolution (forward, weight
# update, backward input) whose operands have the same shapes once, as a graph function, and calls it wherever
# the network has that op again (graphcore/tensorflow driver/ops norm_graph_caching, conv_graph_caching.cc;
# ops/graph_function.py): their code once per signature, their arguments copied in and results out on every
# call (docs/decisions/0175).
GRAPH_FUNCTIONS = True


def stage_blocks(depth: int) -> tuple[int, ...]:
    if depth not in STAGE_BLOCKS:
        from popvision_lite.errors import ConfigError

        raise ConfigError(f"layers: ResNet depth must be one of {', '.join(map(str, STAGE_BLOCKS))}, got {depth}")
    return STAGE_BLOCKS[depth]


def validate_resnet(cfg) -> None:
    from popvision_lite.errors import ConfigError

    stage_blocks(cfg.layers)
    if cfg.image < 32 or cfg.image % 32:
        raise ConfigError(f"image: ResNet needs a multiple of 32 pixels (5 halvings), got {cfg.image}")


def pipeline_stages(cfg) -> int:
    """IPUs of one replica that the blocks are spread over.  Contract (CONTRACT.md, model-config fields):
    ``ipus`` = replicas x pipeline_stages, ``pipeline_stages`` 0 = one stage per IPU of a replica; a
    ModelConfig without those fields (before the scale merge) has one replica on ``ipus`` IPUs."""
    stages = int(getattr(cfg, "pipeline_stages", 0) or 0)
    return stages or max(1, cfg.ipus // max(1, int(getattr(cfg, "replicas", 1) or 1)))


class _Geom:
    """(n, h, w) of an activation; caches window indices per (k, stride, pad)."""

    _cache: dict = {}

    def __init__(self, n, h, w):
        self.n, self.h, self.w = n, h, w

    @property
    def rows(self):
        return self.n * self.h * self.w

    def windows(self, k, stride, pad):
        key = (self.n, self.h, self.w, k, stride, pad)
        if key not in _Geom._cache:
            from popvision_lite.emulator.ops.pooling import conv_windows  # (not for a run config's checks)

            idx, og = conv_windows(self.n, self.h, self.w, k, stride, pad)
            idx.setflags(write=False)  # shared by the ops that gather it (ops/pooling.py scans it once)
            _Geom._cache[key] = idx, og
        idx, (oh, ow) = _Geom._cache[key]
        return idx, _Geom(self.n, oh, ow)


def halo_conv(be, k: int, stride: int, cin: int) -> bool:
    """Does this convolution run as ops/conv.py's halo convolution?  With ``conv_lowering = "halo"`` on a
    backend that has it, the k x k convolutions (k > 1) whose input channels are whole AMP groups of 16.
    A 1x1 convolution reads no window: stride 1 is a plain matmul (poplin runs it as ConvPartial1x1Out
    over the flattened field, the matmul's own vertex), and a strided one is the gather of the input
    elements it reads (each once) and that matmul, as poplin's expandSpatialDim subsamples the input by the stride
    (lib/poplin/ConvTransforms.cpp expandSpatialDimMultiStageImpl, ``slice.subSample(stride, ...)``).
    The stem's 3 input channels: poplin expands the kernel into the input channels there (the same
    transform, an im2col of its own)."""
    return (getattr(be, "conv_lowering", "im2col") == "halo" and hasattr(be, "conv2d")
            and k > 1 and cin % 16 == 0)


def halo_weight_update(be, k: int, stride: int, cin: int) -> bool:
    """Does this convolution's dW run as ops/conv_wu.py's weight-update convolution?  The stride-1
    convolutions of :func:`halo_conv` on a backend that has it.  Strided ones keep dW = cols^T dY: the
    vertex's in-place read of each kernel position's shifted pixels (docs/decisions/0155) holds for
    stride 1 only (a strided window steps over the input by the stride)."""
    return halo_conv(be, k, stride, cin) and stride == 1 and hasattr(be, "conv2d_weight_update")


def _graph_function(be, key, body, args, name):
    """``body(*args)``'s one result, as a call of the graph function ``key`` on a backend that builds them
    (ops/graph_function.py; :data:`GRAPH_FUNCTIONS`), directly on the others (the numpy reference, plans)."""
    from popvision_lite.emulator.ops import graph_function as GF

    return GF.backend_call(be, key, body, args, name)[0]


def conv(be, x, w, geom: _Geom, k, stride, name):
    """x (rows, C) @ kernel w (k*k*C, Co), same padding (k // 2); returns (y, cache, out geometry).  One graph
    function per convolution signature (Graphcore's TensorFlow, ``conv_graph_caching.cc``)."""
    if k == 1 and stride == 1:
        idx, og = None, geom
    else:
        idx, og = geom.windows(k, stride, k // 2)
    key = ("conv", geom.n, geom.h, geom.w, k, stride)
    y = _graph_function(be, key, lambda xp, wp: _conv_fwd(be, xp, wp, idx, geom, k, stride, name), [x, w], name)
    return y, (x, idx, geom, k, stride), og


def _conv_fwd(be, x, w, idx, geom: _Geom, k, stride, name):
    if idx is None:
        return be.matmul(x, w, name + "/matmul")
    cin = x.shape[-1]
    if halo_conv(be, k, stride, cin):
        from popvision_lite.emulator.codelets.poplin_conv import ConvShape

        s = ConvShape(geom.n, geom.h, geom.w, cin, w.shape[-1], k, stride, k // 2)
        return be.conv2d(x, w, s, name + "/conv")
    cols = be.gather_windows(x, idx, name + "/im2col")
    # the backward pass keeps the activation, not its windows: the weight-update convolution reads the
    # forward input (poplin::calculateWeightDeltas(graph, zDeltas, activations, ...)); windows are k*k times
    # the activation and are gathered again where dw needs them
    return be.matmul(cols, w, name + "/matmul")


def flipped_kernel_index(k: int, cin: int, cout: int) -> np.ndarray:
    """ops/conv.py's flipped_kernel_index (flat indices of a kernel's flipped transpose)."""
    from popvision_lite.emulator.ops.conv import flipped_kernel_index as index

    return index(k, cin, cout)


def conv_bwd(be, cache, w, dy, name, need_dx=True):
    """(dx, dw).  dw: on the halo path at stride 1 (:func:`halo_weight_update`) the weight-update
    convolution of ops/conv_wu.py, otherwise cols^T dy.  dx: stride 1 with same padding: dx = im2col(dy) @ flipped kernel (the windows of a
    stride-1 same-padded conv are symmetric), on the halo path (:func:`halo_conv`) dy convolved with the
    flipped kernel by ops/conv.py; otherwise dx = col2im(dy @ W^T).  ops/conv.py also computes the strided
    dx (dy dilated by the stride: ``transposed_shape``), but its estimate is no cheaper than col2im's on
    ResNet-50 and its tiles hold more (docs/decisions/0145), so the strided dx stays on col2im.  Each is a
    graph function per signature (Graphcore's TensorFlow caches the weight-update and backward-input
    convolutions as it does the forward ones)."""
    x, idx, geom, k, stride = cache
    key = (geom.n, geom.h, geom.w, k, stride)
    dw = _graph_function(be, ("conv_wu", *key), lambda xp, dyp: _conv_wu(be, xp, dyp, idx, geom, k, stride, name),
                         [x, dy], name + "/wu")
    if not need_dx:
        return None, dw
    dx = _graph_function(be, ("conv_dx", *key), lambda dyp, wp: _conv_dx(be, dyp, wp, idx, geom, k, stride, name),
                         [dy, w], name + "/dx")
    return dx, dw


def _conv_wu(be, x, dy, idx, geom: _Geom, k, stride, name):
    cin, cout = x.shape[-1], dy.shape[-1]
    if idx is not None and halo_weight_update(be, k, stride, cin):
        from popvision_lite.emulator.codelets.poplin_conv import ConvShape

        s = ConvShape(geom.n, geom.h, geom.w, cin, cout, k, stride, k // 2)
        return be.conv2d_weight_update(x, dy, s, name + "/dw_conv")
    cols = x if idx is None else be.gather_windows(x, idx, name + "/wu_im2col")
    return be.matmul(be.t(cols), dy, name + "/dw_matmul")


def _conv_dx(be, dy, w, idx, geom: _Geom, k, stride, name):
    cin, cout = w.shape[0] // (k * k), w.shape[1]
    if idx is not None and stride == 1 and halo_conv(be, k, stride, cout):
        from popvision_lite.emulator.ops.conv import transposed_shape

        s = transposed_shape(geom.n, geom.h, geom.w, cin, cout, k, stride, k // 2)
        wt = (be.flip_transpose_kernel(w, k, cin, cout, name + "/w_flip") if hasattr(be, "flip_transpose_kernel")
              else be.take(w, flipped_kernel_index(k, cin, cout)))
        return be.conv2d(dy, wt, s, name + "/dx_conv")
    if idx is not None and stride == 1:
        dcols = be.gather_windows(dy, idx, name + "/dx_im2col")
        return be.matmul(dcols, be.take(w, flipped_kernel_index(k, cin, cout)), name + "/dx_matmul")
    dcols = be.matmul(dy, be.t(w), name + "/dx_matmul")
    return dcols if idx is None else be.col2im(dcols, idx, geom.rows, name + "/col2im")


def recompute_segments(cfg) -> list[tuple[int, int]]:
    """The recomputation segments, first and last block each: the stages between the MLPerf pipeline
    splits for the depths in RECOMPUTE_SPLITS, one block per segment otherwise."""
    n = sum(stage_blocks(cfg.layers))
    ends = [b for b in RECOMPUTE_SPLITS.get(cfg.layers, range(n)) if b < n - 1] + [n - 1]
    starts = [0] + [e + 1 for e in ends[:-1]]
    return list(zip(starts, ends, strict=True))


def _cache_tensors(c) -> list:
    """The graph tensors a block's cache holds (its saved activations), each once."""
    out, seen = [], set()

    def walk(v):
        if isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, tuple | list):
            for x in v:
                walk(x)
        elif hasattr(v, "mapping") and hasattr(v, "itemsize") and getattr(v, "mapping", None) is not None:
            if v.id not in seen:
                seen.add(v.id)
                out.append(v)

    walk(c)
    return out


def block_kinds(cfg) -> list[tuple]:
    """Per bottleneck block its structure (input channels, width, stride, downsample): blocks of the
    same kind compute the same programs on tensors of the same shapes and layouts."""
    blocks = stage_blocks(cfg.layers)
    out, cin = [], cfg.hidden
    for s, nb in enumerate(blocks):
        width = cfg.hidden * 2 ** s
        for i in range(nb):
            out.append((cin, width, 2 if (s > 0 and i == 0) else 1, i == 0))
            cin = EXPANSION * width
    return out


def outlined(be, cfg) -> bool:
    """Timing-only emulation shares one program per block kind (outlining: the blocks of a ResNet stage
    after its first are identical subgraphs, compiled once and called once per block, as Poplar
    programs share code through functions).  Cycles are data-independent, so the calls cost what
    separate copies would; the weights, gradients, optimizer state and saved inputs of the other blocks
    of a kind are added to the memory per tile from the representative's layout (``be.multiplicity``).
    Full numerics need every block's own weights, so those runs are never outlined."""
    return (getattr(be, "needs_values", True) is False and hasattr(be, "multiplicity")
            and bool(getattr(cfg, "outline", True)))


def _params(be, rv, cfg, reps=None):
    """All weights: {'stem': {...}, 'blockI': {...}, 'fc': {...}} and the block specs.  ``reps``: per
    block the index of the block whose weights it shares (outlined timing runs; default itself)."""
    blocks = stage_blocks(cfg.layers)
    P = {}
    specs = []  # (name, cin, width, stride, has_downsample)
    cin = cfg.hidden

    def convw(name, k, ci, co):
        return be.weight(name, rv.init((k * k * ci, co), k * k * ci))

    def bn(name, c):
        return be.weight(name + "_gamma", rv.const(c, 1.0)), be.weight(name + "_beta", rv.const(c, 0.0))

    nblocks = sum(blocks)
    with be.on_ipu(0), be.scope("stem"):
        P["stem"] = {"conv": convw("conv_w", 7, 3, cfg.hidden), "bn": bn("bn", cfg.hidden)}
    b = 0
    for s, nb in enumerate(blocks):
        width = cfg.hidden * 2 ** s
        for i in range(nb):
            name = f"block{b}"
            stride = 2 if (s > 0 and i == 0) else 1
            down = i == 0
            if reps is not None and reps[b] != b:  # an outlined block: the representative's weights
                P[name] = P[f"block{reps[b]}"]
                specs.append((name, stride, down))
                cin = EXPANSION * width
                b += 1
                continue
            with be.on_ipu(stage_of(b, nblocks, pipeline_stages(cfg))), be.scope(name):
                p = {"conv1": convw("conv1_w", 1, cin, width), "bn1": bn("bn1", width),
                     "conv2": convw("conv2_w", 3, width, width), "bn2": bn("bn2", width),
                     "conv3": convw("conv3_w", 1, width, EXPANSION * width), "bn3": bn("bn3", EXPANSION * width)}
                if down:
                    p["down"] = convw("down_w", 1, cin, EXPANSION * width)
                    p["bn_down"] = bn("bn_down", EXPANSION * width)
            P[name] = p
            specs.append((name, stride, down))
            cin = EXPANSION * width
            b += 1
    with be.on_ipu(stage_of(nblocks - 1, nblocks, pipeline_stages(cfg))), be.scope("fc"):
        P["fc"] = {"w": be.weight("w", rv.init((cin, cfg.vocab), cin)), "b": be.weight("b", rv.const(cfg.vocab, 0.0))}
    return P, specs


def _bn_relu(be, x, gb, name, relu=True):
    """Batch norm (+ ReLU); the cache keeps what the backward pass reads: the norm's input and statistics,
    and the ReLU's output (its gradient mask, as TensorFlow's ReluGrad takes; it is the next
    convolution's input, kept anyway), not the normalised values."""
    y, mean, invstd = be.batch_norm(x, gb[0], gb[1], name)
    a = be.relu(y, name + "_relu") if relu else y
    return a, (x, a if relu else None, mean, invstd)


def _bn_relu_bwd(be, c, gb, da, name, relu=True):
    x, a, mean, invstd = c
    dy = be.relu_bwd(a, da, name + "_relu_bwd") if relu else da
    return be.batch_norm_bwd(x, dy, mean, invstd, gb[0], name + "_bwd")


def _stem_fwd(be, p, x, geom):
    z, cc, g1 = conv(be, x, p["conv"], geom, 7, 2, "conv")
    a, cb = _bn_relu(be, z, p["bn"], "bn")
    idx, g2 = g1.windows(3, 2, 1)
    out = be.max_pool(a, idx, "max_pool")
    return out, {"conv": cc, "bn": cb, "a": a, "pool": out, "pool_idx": idx}, g2


def _stem_bwd(be, p, c, dout):
    g = {}
    da = be.max_pool_bwd(c["a"], c["pool"], dout, c["pool_idx"], "max_pool_bwd")
    dz, g["bn_gamma"], g["bn_beta"] = _bn_relu_bwd(be, c["bn"], p["bn"], da, "bn")
    _, g["conv_w"] = conv_bwd(be, c["conv"], p["conv"], dz, "conv", need_dx=False)  # the image needs no gradient
    return g


def _block_fwd(be, p, x, geom, stride, down):
    c = {}
    z1, c["conv1"], _ = conv(be, x, p["conv1"], geom, 1, 1, "conv1")
    a1, c["bn1"] = _bn_relu(be, z1, p["bn1"], "bn1")
    z2, c["conv2"], og = conv(be, a1, p["conv2"], geom, 3, stride, "conv2")
    a2, c["bn2"] = _bn_relu(be, z2, p["bn2"], "bn2")
    z3, c["conv3"], _ = conv(be, a2, p["conv3"], og, 1, 1, "conv3")
    y3, c["bn3"] = _bn_relu(be, z3, p["bn3"], "bn3", relu=False)
    if down:
        zd, c["down"], _ = conv(be, x, p["down"], geom, 1, stride, "down")
        sc, c["bn_down"] = _bn_relu(be, zd, p["bn_down"], "bn_down", relu=False)
    else:
        sc = x
    out = be.relu(be.add(y3, sc, "residual"), "relu")
    c["out"] = out  # the ReLU's gradient mask (its output, as ReluGrad takes): the next block's input
    return out, c, og


def _block_bwd(be, p, c, dout, down):
    g = {}
    dr = be.relu_bwd(c["out"], dout, "relu_bwd")
    dz3, g["bn3_gamma"], g["bn3_beta"] = _bn_relu_bwd(be, c["bn3"], p["bn3"], dr, "bn3", relu=False)
    da2, g["conv3_w"] = conv_bwd(be, c["conv3"], p["conv3"], dz3, "conv3")
    dz2, g["bn2_gamma"], g["bn2_beta"] = _bn_relu_bwd(be, c["bn2"], p["bn2"], da2, "bn2")
    da1, g["conv2_w"] = conv_bwd(be, c["conv2"], p["conv2"], dz2, "conv2")
    dz1, g["bn1_gamma"], g["bn1_beta"] = _bn_relu_bwd(be, c["bn1"], p["bn1"], da1, "bn1")
    dx, g["conv1_w"] = conv_bwd(be, c["conv1"], p["conv1"], dz1, "conv1")
    if down:
        dzd, g["bn_down_gamma"], g["bn_down_beta"] = _bn_relu_bwd(be, c["bn_down"], p["bn_down"], dr, "bn_down",
                                                                  relu=False)
        dxs, g["down_w"] = conv_bwd(be, c["down"], p["down"], dzd, "down")
    else:
        dxs = dr
    return be.add(dx, dxs, "residual_bwd"), g


def _flat_weights(p) -> list:
    out = []
    for v in p.values():
        out += list(v) if isinstance(v, tuple) else [v]
    return out


def _weight(p, gname):
    """The weight handle of gradient name ``gname`` in a block's / the stem's param dict."""
    if gname.endswith("_w"):
        return p[gname[:-2] if gname[:-2] in p else "conv"]
    base, which = gname.rsplit("_", 1)
    return p[base][0 if which == "gamma" else 1]


def build_resnet(be, cfg):
    validate_resnet(cfg)
    # window indices are shared by the convolutions of one graph only (the stem's alone is 98 MB at
    # micro-batch 20): nothing of them is kept once the graph is built
    _Geom._cache.clear()
    try:
        return _build_resnet(be, cfg)
    finally:
        _Geom._cache.clear()


def _share_weights(be, P: dict, reps: list[int], share: bool) -> dict[int, int]:
    """How many blocks each representative stands for; with outlining, the other blocks of a kind get their
    weights (and training state) sized like the representative's."""
    copies = {r: reps.count(r) for r in set(reps)}
    if share:
        for r, cnt in copies.items():
            if cnt > 1:
                for t in _flat_weights(P[f"block{r}"]):
                    be.multiplicity[t.id] = cnt
    return copies


def _neg_onehot(be, seed: int, n: int, ncls: int):
    """The loss's constant: minus the one-hot of ``n`` random labels of ``ncls`` classes."""
    import numpy as np  # (here: config.py imports this module for a run config's checks)

    labels = np.random.default_rng(seed + 3).integers(0, ncls, size=n)
    onehot = np.zeros((n, ncls), np.float32)
    onehot[np.arange(n), labels] = -1.0
    return be.constant("neg_onehot", onehot)


def _update(be, name: str, params: dict, grads: dict, lr: float, out: Built) -> None:
    """Each gradient of ``name`` and its SGD-updated weight into the results."""
    for gname, gr in grads.items():
        out.results[f"{name}/d{gname}"] = gr
        out.results[f"{name}/{gname}_new"] = be.sgd(_weight(params, gname), gr, lr, f"{gname}_sgd")


def _head_bwd(be, fc: dict, pooled, dlogits, gidx, geom, lr: float, out: Built):
    """The classifier's backward and update, then the global average pool's: the gradient into the last block."""
    dw_fc = be.matmul(be.t(pooled), dlogits, "fc/dw_matmul")
    db_fc = be.reduce_rows(dlogits, "fc/db_reduce")
    dpooled = be.matmul(dlogits, be.t(fc["w"]), "fc/dx_matmul")
    d = be.avg_pool_bwd(dpooled, gidx, geom.rows, "global_avg_pool_bwd")
    out.results["fc/dw"] = dw_fc
    out.results["fc/w_new"] = be.sgd(fc["w"], dw_fc, lr, "w_sgd")
    out.results["fc/b_new"] = be.sgd(fc["b"], db_fc, lr, "b_sgd")
    return d


def _build_resnet(be, cfg):
    rv = _Values(be, cfg.seed)
    n, hw, ncls = cfg.batch, cfg.image, cfg.vocab
    out = Built()
    kinds = block_kinds(cfg)
    share = outlined(be, cfg)
    if GRAPH_FUNCTIONS and hasattr(be, "function_cache"):
        be.function_cache = {}
    reps = [kinds.index(k) if share else b for b, k in enumerate(kinds)]
    P, specs = _params(be, rv, cfg, reps)
    nblocks = len(specs)
    copies = _share_weights(be, P, reps, share)
    fwd_done: dict[int, tuple] = {}  # representative -> (output, cache, geometry) of its forward
    nst = pipeline_stages(cfg)
    last = stage_of(nblocks - 1, nblocks, nst)
    with be.on_ipu(0), be.scope("stem"):
        image = be.input("image", rv.normal((n * hw * hw, 3)))
    with be.on_ipu(last), be.scope("loss"):
        neg_onehot = _neg_onehot(be, cfg.seed, n, ncls)
    keep = not (cfg.recompute and cfg.training)
    be.conv_lowering = getattr(cfg, "conv_lowering", "im2col")
    seg_of = {b: seg for seg in recompute_segments(cfg) for b in range(seg[0], seg[1] + 1)}
    geom = _Geom(n, hw, hw)
    with be.on_ipu(0), be.scope("stem"):
        x, stem_cache, geom = _stem_fwd(be, P["stem"], image, geom)
    inputs, caches, geoms = [], [], []
    stem_box = [None]  # the stem's cache from its recomputation (with the first segment)
    spans: list = []
    bwd_end: dict[int, int] = {}  # block -> index in the main sequence of its backward's last program
    for b, (name, stride, down) in enumerate(specs):
        with be.on_ipu(stage_of(b, nblocks, nst)), be.scope(name):
            inputs.append(x)
            geoms.append(geom)
            r = reps[b]
            if r in fwd_done:  # an outlined block: call its kind's forward program again
                if not keep and seg_of[b][0] == b:  # a segment's input is kept for its recomputation
                    be.saved_copies.append(x)
                    spans.append([len(be.ctx.programs), ("bwd", b)])
                be.replay(f"block_fwd/{r}")
                x, c, geom = fwd_done[r]
            else:
                be.mark(f"block_fwd/{b}")
                x, c, geom = _block_fwd(be, P[name], x, geom, stride, down)
                be.mark(f"block_fwd_end/{b}")
                fwd_done[b] = (x, c, geom)
            caches.append(c if keep else None)
    with be.on_ipu(last), be.scope("head"):
        from popvision_lite.emulator.ops.pooling import global_windows

        gidx = global_windows(n, geom.h * geom.w)
        pooled = be.avg_pool(x, gidx, "global_avg_pool")
        logits = be.add_bias(be.matmul(pooled, P["fc"]["w"], "fc/matmul"), P["fc"]["b"], "fc/bias_add")
    out.results["output"] = logits
    if not cfg.training:
        return out
    with be.on_ipu(last), be.scope("loss"):
        prob = be.softmax(logits, "softmax")
        dlogits = be.scale(be.add(prob, neg_onehot, "minus_onehot"), 1.0 / n, "mean_grad")
    out.results["loss_grad"] = dlogits
    with be.on_ipu(last), be.scope("head/bwd"):
        d = _head_bwd(be, P["fc"], pooled, dlogits, gidx, geom, cfg.lr, out)
    bwd_done: dict[int, object] = {}  # representative -> its backward's output gradient
    bwd_in: dict[int, object] = {}  # representative -> the gradient its backward reads
    for b in reversed(range(nblocks)):
        name, stride, down = specs[b]
        r = reps[b]
        if caches[b] is None and b == seg_of[b][1]:
            _recompute_segment(be, cfg, P, image, seg_of[b], reps, fwd_done, spans, stem_box)
        with be.on_ipu(stage_of(b, nblocks, nst)), be.scope(name):
            c = caches[b]
            if c is None:
                c = fwd_done[r][1]
            if r in bwd_done:
                be.replay(f"block_bwd/{r}", args=_bwd_call_args(c, bwd_in[r]) if not keep else ())
                d = bwd_done[r]
                if share:
                    bwd_end[b] = len(be.ctx.programs) - 1
                continue
            with be.scope("bwd"):
                be.mark(f"block_bwd/{r}")
                bwd_in[r] = d
                d, grads = _block_bwd(be, P[name], c, d, down)
                _update(be, name, P[name], grads, cfg.lr, out)
                be.mark(f"block_bwd_end/{r}")
                if copies[r] > 1:
                    bwd_done[r] = d
        if share:
            bwd_end[b] = len(be.ctx.programs) - 1
    if hasattr(be, "saved_spans"):
        be.saved_spans[:] = [(a, bwd_end[z[1]] if isinstance(z, tuple) else z) for a, z in spans]
    with be.on_ipu(0), be.scope("stem"):
        if not keep and stem_box[0] is None:  # depths without MLPerf segments: the stem is its own
            with be.scope("recompute"):
                stem_box[0] = _stem_fwd(be, P["stem"], image, _Geom(n, hw, hw))[1]
        if not keep:
            stem_cache = stem_box[0]
        with be.scope("bwd"):
            _update(be, "stem", P["stem"], _stem_bwd(be, P["stem"], stem_cache, d), cfg.lr, out)
    return out


def _bwd_call_args(cache, dout) -> list:
    """The tensors an outlined block's backward takes as this call's arguments: its output gradient and
    its cache, this block's values where the previous call read the later block's.  In the exact build
    they are other tensors: the later block's die at its backward's last read, this block's are live
    from its recomputation (held by saved copies until the later block's backward is done, then by these
    tensors).  The block's input is not one of them: it is the segment's input, kept throughout."""
    x_in = cache["conv1"][0]
    return [dout, *(t for t in _cache_tensors(cache) if t is not x_in)]


def _recompute_segment(be, cfg, P, image, seg, reps, fwd_done, spans, stem_box) -> None:
    """Re-run the forward programs of a recomputation segment's blocks in order (the stem's first, for
    the first MLPerf segment) before the backward of its last block.

    Outlined blocks of one kind share their tensors, so what the segment holds beyond one copy per kind
    is added as saved copies (``spans``: main-sequence program indices, ("bwd", block) for the end of a
    block's backward): a block whose kind recurs later in the segment has its cache overwritten by the
    later recomputation, so its cache is added from its recomputation until that later block's backward
    is done (the graph keeps one copy from there); a block inside the segment that is not its kind's
    representative reads the representative's input, so its own input (the previous block's recomputed
    output) is added from the previous block's recomputation through its backward."""
    s0, s1 = seg
    if s0 == 0 and cfg.layers in RECOMPUTE_SPLITS:  # the first pipeline stage holds the stem
        with be.on_ipu(0), be.scope("stem"), be.scope("recompute"):
            _, stem_box[0], _ = _stem_fwd(be, P["stem"], image, _Geom(cfg.batch, cfg.image, cfg.image))
    at = {}
    for j in range(s0, s1 + 1):
        with be.on_ipu(stage_of(j, len(reps), pipeline_stages(cfg))), be.scope(f"block{j}"):
            at[j] = len(be.ctx.programs) if hasattr(be, "ctx") else 0
            be.replay(f"block_fwd/{reps[j]}")
    for j in range(s0, s1 + 1):
        cache = fwd_done[reps[j]][1]
        x_in = cache["conv1"][0]  # the block's input (its 1x1 conv's operand)
        later = [k for k in range(j + 1, s1 + 1) if reps[k] == reps[j]]
        if later:
            for t in _cache_tensors(cache):
                if t is not x_in and t is not cache["out"]:  # the output is the next block's input, added there
                    be.saved_copies.append(t)
                    spans.append([at[j], ("bwd", later[0])])
        if j > s0 and reps[j] != j:
            be.saved_copies.append(x_in)
            spans.append([at[j - 1], ("bwd", j)])


def flops_per_image(cfg) -> float:
    """Multiply-add FLOPs of one forward pass (convolutions and fc), for reports: 2 * MACs."""
    blocks = stage_blocks(cfg.layers)
    h = cfg.image // 2
    total = 2 * h * h * 49 * 3 * cfg.hidden
    h //= 2
    cin = cfg.hidden
    for s, nb in enumerate(blocks):
        width = cfg.hidden * 2 ** s
        for i in range(nb):
            stride = 2 if (s > 0 and i == 0) else 1
            ho = h // stride
            total += 2 * (h * h * cin * width + ho * ho * 9 * width * width + ho * ho * width * EXPANSION * width)
            if i == 0:
                total += 2 * ho * ho * cin * EXPANSION * width
            cin, h = EXPANSION * width, ho
    return float(total + 2 * cin * cfg.vocab)

