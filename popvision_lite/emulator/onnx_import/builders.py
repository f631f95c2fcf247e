"""Small ONNX models built in code with ``onnx.helper`` (tests, bench, examples: nothing downloaded).

Each builder returns an ``onnx.ModelProto`` with symbolic ``batch`` (and ``seq``) input dims, laid
out the way PyTorch's exporter lays such models out (MatMul + Add for linear layers, Shape / Gather /
Concat feeding Reshape, the Erf GELU, ...).  Weights are seeded random float32.
"""

from __future__ import annotations

import math

import numpy as np


def _h():
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    return onnx, TensorProto, helper, numpy_helper


class _G:
    """Tiny graph-building helper: unique names, initializers, nodes."""

    def __init__(self, seed=0, wdtype=np.float32):
        self.onnx, self.TP, self.helper, self.nh = _h()
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits = [], []
        self.n = 0
        self.wdtype = wdtype

    def init(self, name, arr):
        self.inits.append(self.nh.from_array(np.asarray(arr), name))
        return name

    def weight(self, name, shape, fan_in=None, value=None):
        if value is not None:
            return self.init(name, np.full(shape, value, np.float32).astype(self.wdtype))
        w = self.rng.standard_normal(shape) / math.sqrt(fan_in or shape[0])
        return self.init(name, w.astype(self.wdtype))

    def const(self, arr, name=None):
        self.n += 1
        return self.init(name or f"c{self.n}", np.asarray(arr))

    def op(self, typ, ins, name, n_out=1, **attrs):
        outs = [f"{name}_out{j}" if n_out > 1 else f"{name}_out" for j in range(n_out)]
        self.nodes.append(self.helper.make_node(typ, list(ins), outs, name=name, **attrs))
        return outs if n_out > 1 else outs[0]

    def model(self, inputs, outputs, opset=17, name="model"):
        g = self.helper.make_graph(self.nodes, name, inputs, outputs, initializer=self.inits)
        m = self.helper.make_model(g, opset_imports=[self.helper.make_opsetid("", opset)], producer_name="popvision-lite")
        m.ir_version = 8
        return m

    def tin(self, name, dims, et=None):
        return self.helper.make_tensor_value_info(name, et or self.TP.FLOAT, dims)


def mlp(hidden=16, seed=0):
    """Gemm / MatMul + Add, Relu, Sigmoid, Tanh, Concat, Div, Sqrt, Reciprocal, Sub, Pow, Slice, Squeeze."""
    g = _G(seed)
    H = hidden
    x = "x"
    h = g.op("Gemm", [x, g.weight("fc1.weight", (H, H), H), g.weight("fc1.bias", (H,), value=0.1)], "/fc1/Gemm",
             transB=1)
    h = g.op("Relu", [h], "/act1/Relu")
    s = g.op("Sigmoid", [h], "/gate/Sigmoid")
    t = g.op("Add", [g.op("MatMul", [h, g.weight("fc2.weight", (H, H), H)], "/fc2/MatMul"),
                     g.weight("fc2.bias", (H,), value=-0.05)], "/fc2/Add")
    t = g.op("Tanh", [t], "/act2/Tanh")
    c = g.op("Concat", [s, t], "/cat/Concat", axis=1)  # (B, 2H)
    sq = g.op("Pow", [c, g.const(np.float32(2.0))], "/norm/Pow")
    den = g.op("Sqrt", [g.op("Add", [sq, g.const(np.float32(1.0))], "/norm/Add")], "/norm/Sqrt")
    d = g.op("Div", [c, den], "/norm/Div")
    r = g.op("Reciprocal", [g.op("Add", [g.op("Mul", [d, d], "/sq/Mul"), g.const(np.float32(2.0))], "/sq/Add")],
             "/inv/Reciprocal")
    e = g.op("Sub", [r, g.op("Mul", [d, g.const(np.float32(0.5))], "/half/Mul")], "/diff/Sub")
    left = g.op("Slice", [e, g.const(np.array([0], np.int64)), g.const(np.array([H], np.int64)),
                          g.const(np.array([1], np.int64))], "/left/Slice")
    y = g.op("MatMul", [left, g.weight("head.weight", (H, 4), H)], "/head/MatMul")
    u = g.op("Unsqueeze", [y, g.const(np.array([1], np.int64))], "/head/Unsqueeze")
    y = g.op("Squeeze", [u, g.const(np.array([1], np.int64))], "/head/Squeeze")
    return g.model([g.tin("x", ["batch", H])], [g.tin(y, ["batch", 4])], name="mlp")


def mlp_relu(hidden=16, out=4, seed=0):
    """Gemm + Relu, MatMul + Add + Tanh, MatMul + Sigmoid: every op with a backward pass."""
    g = _G(seed)
    H = hidden
    h = g.op("Gemm", ["x", g.weight("fc1.weight", (H, H), H), g.weight("fc1.bias", (H,), value=0.1)], "/fc1/Gemm",
             transB=1)
    h = g.op("Relu", [h], "/relu/Relu")
    h = g.op("Add", [g.op("MatMul", [h, g.weight("fc2.weight", (H, H), H)], "/fc2/MatMul"),
                     g.init("fc2.bias", (0.1 * g.rng.standard_normal(H)).astype(np.float32))], "/fc2/Add")
    h = g.op("Tanh", [h], "/tanh/Tanh")
    y = g.op("Sigmoid", [g.op("MatMul", [h, g.weight("head.weight", (H, out), H)], "/head/MatMul")], "/out/Sigmoid")
    return g.model([g.tin("x", ["batch", H])], [g.tin(y, ["batch", out])], name="mlp_relu")


def _layer_norm(g, x, H, name, decomposed):
    gam = g.weight(f"{name}.weight", (H,), value=1.0)
    bet = g.weight(f"{name}.bias", (H,), value=0.0)
    g.inits[-2] = g.nh.from_array((1.0 + 0.1 * g.rng.standard_normal(H)).astype(np.float32), gam)
    if not decomposed:
        return g.op("LayerNormalization", [x, gam, bet], f"/{name}/LayerNormalization", axis=-1, epsilon=1e-5)
    m = g.op("ReduceMean", [x], f"/{name}/ReduceMean", axes=[-1])
    d = g.op("Sub", [x, m], f"/{name}/Sub")
    p = g.op("Pow", [d, g.const(np.float32(2.0))], f"/{name}/Pow")
    v = g.op("ReduceMean", [p], f"/{name}/ReduceMean_1", axes=[-1])
    s = g.op("Sqrt", [g.op("Add", [v, g.const(np.float32(1e-5))], f"/{name}/Add")], f"/{name}/Sqrt")
    n = g.op("Div", [d, s], f"/{name}/Div")
    return g.op("Add", [g.op("Mul", [n, gam], f"/{name}/Mul"), bet], f"/{name}/Add_1")


def _gelu_erf(g, x, name, order="torchscript"):
    """The Erf GELU as PyTorch's TorchScript exporter writes it (``(x * (1 + erf(x / sqrt 2))) * 0.5``) or
    as its torch.export-based exporter does (``x * (0.5 * (1 + erf(x / sqrt 2)))``)."""
    d = g.op("Div", [x, g.const(np.float32(math.sqrt(2.0)))], f"{name}/Div")
    e = g.op("Erf", [d], f"{name}/Erf")
    a = g.op("Add", [e, g.const(np.float32(1.0))], f"{name}/Add")
    if order == "dynamo":
        h = g.op("Mul", [g.const(np.float32(0.5)), a], f"{name}/Mul")
        return g.op("Mul", [x, h], f"{name}/Mul_1")
    m = g.op("Mul", [x, a], f"{name}/Mul")
    return g.op("Mul", [m, g.const(np.float32(0.5))], f"{name}/Mul_1")


def _linear(g, x, k, n, name, bias=True):
    y = g.op("MatMul", [x, g.weight(f"{name}.weight", (k, n), k)], f"/{name}/MatMul")
    if bias:
        b = g.init(f"{name}.bias", (0.02 * g.rng.standard_normal(n)).astype(g.wdtype))
        y = g.op("Add", [y, b], f"/{name}/Add")
    return y


def bert_layer_nodes(g, x, H, A, F, p, decomposed=False, mask=None, bias=True, gelu="erf", residual_first=False):
    """One BERT encoder layer on x (B, S, H); returns the output name.  ``mask``: additive (B,1,1,S).
    Residual adds as Hugging Face's BERT exports them (``sublayer + residual``), or with the residual
    first (``residual_first``: the bundled workload's operand order)."""
    d = H // A
    q = _linear(g, x, H, H, f"{p}.attention.self.query", bias)
    k = _linear(g, x, H, H, f"{p}.attention.self.key", bias)
    v = _linear(g, x, H, H, f"{p}.attention.self.value", bias)
    # the exporter's dynamic reshape target: Concat(Shape(x)[0], Shape(x)[1], A, d)
    shp = g.op("Shape", [x], f"/{p}/attention/Shape")
    b0 = g.op("Unsqueeze", [g.op("Gather", [shp, g.const(np.array(0, np.int64))], f"/{p}/attention/Gather", axis=0),
                            g.const(np.array([0], np.int64))], f"/{p}/attention/Unsqueeze")
    s0 = g.op("Unsqueeze", [g.op("Gather", [shp, g.const(np.array(1, np.int64))], f"/{p}/attention/Gather_1",
                                 axis=0), g.const(np.array([0], np.int64))], f"/{p}/attention/Unsqueeze_1")
    tgt = g.op("Concat", [b0, s0, g.const(np.array([A, d], np.int64))], f"/{p}/attention/Concat", axis=0)
    heads = {}
    for nm, t, perm in (("q", q, [0, 2, 1, 3]), ("k", k, [0, 2, 3, 1]), ("v", v, [0, 2, 1, 3])):
        r = g.op("Reshape", [t, tgt], f"/{p}/attention/{nm}/Reshape")
        heads[nm] = g.op("Transpose", [r], f"/{p}/attention/{nm}/Transpose", perm=perm)
    sc = g.op("MatMul", [heads["q"], heads["k"]], f"/{p}/attention/MatMul")
    sc = g.op("Div", [sc, g.const(np.float32(math.sqrt(d)))], f"/{p}/attention/Div")
    if mask is not None:
        sc = g.op("Add", [sc, mask], f"/{p}/attention/Add")
    pr = g.op("Softmax", [sc], f"/{p}/attention/Softmax", axis=-1)
    ctx = g.op("MatMul", [pr, heads["v"]], f"/{p}/attention/MatMul_1")
    ctx = g.op("Transpose", [ctx], f"/{p}/attention/Transpose_ctx", perm=[0, 2, 1, 3])
    ctx = g.op("Reshape", [ctx, g.const(np.array([0, 0, H], np.int64))], f"/{p}/attention/Reshape_ctx")
    o = _linear(g, ctx, H, H, f"{p}.attention.output.dense", bias)
    r1 = g.op("Add", [x, o] if residual_first else [o, x], f"/{p}/attention/output/Add")
    h1 = _layer_norm(g, r1, H, f"{p}.attention.output.LayerNorm", decomposed)
    f1 = _linear(g, h1, H, F, f"{p}.intermediate.dense", bias)
    a = (_gelu_erf(g, f1, f"/{p}/intermediate/gelu", order="dynamo" if decomposed else "torchscript")
         if gelu == "erf" else g.op("Gelu", [f1], f"/{p}/gelu"))
    f2 = _linear(g, a, F, H, f"{p}.output.dense", bias)
    r2 = g.op("Add", [h1, f2] if residual_first else [f2, h1], f"/{p}/output/Add")
    return _layer_norm(g, r2, H, f"{p}.output.LayerNorm", decomposed)


def bert_layer(hidden=32, heads=2, ffn=None, decomposed=False, seed=0):
    """One BERT encoder layer with an integer attention mask (fused or decomposed layer norm)."""
    g = _G(seed)
    H, A, F = hidden, heads, ffn or 4 * hidden
    m = g.op("Unsqueeze", ["attention_mask", g.const(np.array([1, 2], np.int64))], "/mask/Unsqueeze")
    m = g.op("Cast", [m], "/mask/Cast", to=g.TP.FLOAT)
    m = g.op("Sub", [g.const(np.float32(1.0)), m], "/mask/Sub")
    m = g.op("Mul", [m, g.const(np.float32(-10000.0))], "/mask/Mul")
    y = bert_layer_nodes(g, "hidden_states", H, A, F, "encoder.layer.0", decomposed, mask=m)
    return g.model([g.tin("hidden_states", ["batch", "seq", H]),
                    g.tin("attention_mask", ["batch", "seq"], g.TP.INT64)],
                   [g.tin(y, ["batch", "seq", H])], name="bert_layer")


def bert_encoder(layers=12, hidden=768, heads=12, ffn=None, vocab=1024, bias=False, seed=0, wdtype=np.float16,
                 residual_first=True):
    """Embedding gather + ``layers`` BERT layers, shaped like the bundled ``bert`` workload (no
    biases by default, fused layer norm): for the bench's side-by-side with ``bert-base``."""
    g = _G(seed, wdtype)
    H, F = hidden, ffn or 4 * hidden
    table = g.init("embeddings.word_embeddings.weight", (0.5 * g.rng.standard_normal((vocab, H))).astype(wdtype))
    x = g.op("Gather", [table, "input_ids"], "/embeddings/word_embeddings/Gather", axis=0)
    for i in range(layers):
        x = bert_layer_nodes(g, x, H, heads, F, f"encoder.layer.{i}", bias=bias, residual_first=residual_first)
    et = g.TP.FLOAT16 if wdtype == np.float16 else g.TP.FLOAT
    return g.model([g.tin("input_ids", ["batch", "seq"], g.TP.INT64)], [g.tin(x, ["batch", "seq", H], et)],
                   name="bert_encoder")


def gpt_block(hidden=32, heads=2, max_pos=64, seed=0):
    """Pre-norm GPT-2 style decoder block: fused QKV projection + Split, causal mask sliced from a
    bool buffer by the sequence length and applied with Where, tanh GELU, Gemm in the MLP."""
    g = _G(seed)
    H, A = hidden, heads
    d = H // A
    x = "x"
    h = _layer_norm(g, x, H, "h.0.ln_1", False)
    qkv = _linear(g, h, H, 3 * H, "h.0.attn.c_attn")
    q, k, v = g.op("Split", [qkv, g.const(np.array([H, H, H], np.int64))], "/h.0/attn/Split", n_out=3, axis=2)
    shp = g.op("Shape", [x], "/h.0/attn/Shape")
    seq = g.op("Slice", [shp, g.const(np.array([1], np.int64)), g.const(np.array([2], np.int64))],
               "/h.0/attn/Slice_seq")
    tgt = g.op("Concat", [g.const(np.array([0], np.int64)), seq, g.const(np.array([A, d], np.int64))],
               "/h.0/attn/Concat", axis=0)
    hs = {}
    for nm, t, perm in (("q", q, [0, 2, 1, 3]), ("k", k, [0, 2, 3, 1]), ("v", v, [0, 2, 1, 3])):
        hs[nm] = g.op("Transpose", [g.op("Reshape", [t, tgt], f"/h.0/attn/{nm}/Reshape")],
                      f"/h.0/attn/{nm}/Transpose", perm=perm)
    sc = g.op("MatMul", [hs["q"], hs["k"]], "/h.0/attn/MatMul")
    sc = g.op("Mul", [sc, g.const(np.float32(1 / math.sqrt(d)))], "/h.0/attn/Mul")
    bias = g.init("h.0.attn.bias", np.tril(np.ones((max_pos, max_pos), bool))[None, None])
    z = g.const(np.array([0], np.int64))
    ax = g.const(np.array([2], np.int64))
    ax3 = g.const(np.array([3], np.int64))
    causal = g.op("Slice", [bias, z, seq, ax], "/h.0/attn/Slice")
    causal = g.op("Slice", [causal, z, seq, ax3], "/h.0/attn/Slice_1")
    neg = g.const(np.float32(-np.inf))
    sc = g.op("Where", [causal, sc, neg], "/h.0/attn/Where")
    pr = g.op("Softmax", [sc], "/h.0/attn/Softmax", axis=-1)
    ctx = g.op("Transpose", [g.op("MatMul", [pr, hs["v"]], "/h.0/attn/MatMul_1")], "/h.0/attn/Transpose",
               perm=[0, 2, 1, 3])
    ctx = g.op("Reshape", [ctx, g.const(np.array([0, 0, H], np.int64))], "/h.0/attn/Reshape")
    r1 = g.op("Add", [x, _linear(g, ctx, H, H, "h.0.attn.c_proj")], "/h.0/Add")
    h2 = _layer_norm(g, r1, H, "h.0.ln_2", False)
    flat = g.op("Reshape", [h2, g.const(np.array([-1, H], np.int64))], "/h.0/mlp/Reshape")
    f = g.op("Gemm", [flat, g.weight("h.0.mlp.c_fc.weight", (4 * H, H), H), g.weight("h.0.mlp.c_fc.bias", (4 * H,),
                                                                                    value=0.01)],
             "/h.0/mlp/c_fc/Gemm", transB=1)
    # GPT-2 "gelu_new": 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
    c3 = g.op("Mul", [g.op("Pow", [f, g.const(np.float32(3.0))], "/h.0/mlp/act/Pow"), g.const(np.float32(0.044715))],
              "/h.0/mlp/act/Mul")
    inner = g.op("Mul", [g.op("Add", [f, c3], "/h.0/mlp/act/Add"), g.const(np.float32(math.sqrt(2 / math.pi)))],
                 "/h.0/mlp/act/Mul_1")
    t = g.op("Add", [g.const(np.float32(1.0)), g.op("Tanh", [inner], "/h.0/mlp/act/Tanh")], "/h.0/mlp/act/Add_1")
    a = g.op("Mul", [g.op("Mul", [f, g.const(np.float32(0.5))], "/h.0/mlp/act/Mul_2"), t], "/h.0/mlp/act/Mul_3")
    o = g.op("Gemm", [a, g.weight("h.0.mlp.c_proj.weight", (4 * H, H), 4 * H)], "/h.0/mlp/c_proj/Gemm")
    o = g.op("Reshape", [o, shp], "/h.0/mlp/Reshape_1")
    y = g.op("Add", [r1, o], "/h.0/Add_1")
    return g.model([g.tin("x", ["batch", "seq", H])], [g.tin(y, ["batch", "seq", H])], name="gpt_block")


def resnet_block(channels=8, classes=10, seed=0):
    """ResNet stem pooling + basic block: Conv-BN-Relu-Conv-BN + identity, Relu, MaxPool 3x3/2 pad 1,
    AveragePool 3x3/1 pad 1 (count_include_pad 0), GlobalAveragePool, Flatten, Gemm."""
    g = _G(seed)
    C = channels

    def bn(x, name):
        ins = [g.init(f"{name}.weight", (1 + 0.1 * g.rng.standard_normal(C)).astype(np.float32)),
               g.init(f"{name}.bias", (0.1 * g.rng.standard_normal(C)).astype(np.float32)),
               g.init(f"{name}.running_mean", (0.1 * g.rng.standard_normal(C)).astype(np.float32)),
               g.init(f"{name}.running_var", (1 + 0.1 * np.abs(g.rng.standard_normal(C))).astype(np.float32))]
        return g.op("BatchNormalization", [x, *ins], f"/{name}/BatchNormalization", epsilon=1e-5)

    x = "x"
    h = g.op("Conv", [x, g.weight("conv1.weight", (C, C, 3, 3), 9 * C)], "/layer1/conv1/Conv", kernel_shape=[3, 3],
             pads=[1, 1, 1, 1], strides=[1, 1])
    h = g.op("Relu", [bn(h, "layer1.bn1")], "/layer1/relu/Relu")
    h = g.op("Conv", [h, g.weight("conv2.weight", (C, C, 3, 3), 9 * C)], "/layer1/conv2/Conv", kernel_shape=[3, 3],
             pads=[1, 1, 1, 1], strides=[1, 1])
    h = g.op("Add", [bn(h, "layer1.bn2"), x], "/layer1/Add")
    h = g.op("Relu", [h], "/layer1/relu_1/Relu")
    h = g.op("MaxPool", [h], "/maxpool/MaxPool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    h = g.op("AveragePool", [h], "/avgpool/AveragePool", kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1])
    h = g.op("Conv", [h, g.weight("proj.weight", (2 * C, C, 1, 1), C), g.weight("proj.bias", (2 * C,), value=0.1)],
             "/proj/Conv", kernel_shape=[1, 1])
    h = g.op("GlobalAveragePool", [h], "/gap/GlobalAveragePool")
    h = g.op("Flatten", [h], "/flatten/Flatten", axis=1)
    y = g.op("Gemm", [h, g.weight("fc.weight", (classes, 2 * C), 2 * C), g.weight("fc.bias", (classes,), value=0.0)],
             "/fc/Gemm", transB=1)
    return g.model([g.tin("x", ["batch", C, 8, 8])], [g.tin(y, ["batch", classes])], name="resnet_block")
