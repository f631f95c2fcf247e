"""Import measured GPU kernel timings from a PyTorch profiler Chrome-trace JSON (pure, no Qt).

What is read (``torch.profiler`` / Kineto ``export_chrome_trace`` output)::

    {"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 10, "dur": 40,
         "args": {"External id": 7, "Input Dims": [[512, 1024], [1024, 4096]],
                  "Input type": ["c10::Half", "c10::Half"]}},              # record_shapes=True
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "args": {"External id": 7, "correlation": 99}},
        {"ph": "X", "cat": "kernel", "name": "sm80_xmma_gemm...", "ts": 20, "dur": 31.5,
         "args": {"External id": 7, "correlation": 99}},
        ...]}

* Plain or gzip-compressed JSON (``.json.gz``); a bare event array is accepted too.
* GPU points: events with ``cat`` ``kernel`` or ``gpu_op`` and ``ph`` ``X``; ``dur`` is in microseconds.
* **Kernel -> aten op**: the kernel's ``External id``, else its ``correlation`` -> the runtime launch event's
  ``External id``; that id names the ``cpu_op`` that launched it.
* **FLOPs and bytes**: the kernel's own ``args.flops`` / ``args.bytes`` when a tool recorded them; else the op's
  ``flops`` (``with_flops=True`` writes none in torch 2.13's Chrome export, so usually absent); else derived from
  the op's ``Input Dims`` and ``Input type`` for mm, addmm, bmm, baddbmm, linear, matmul, convolution,
  scaled-dot-product attention, elementwise ops and the optimizers' ops over lists of tensors (``_foreach_*``,
  ``_fused_adam_``, ``_fused_adamw_``, ``_fused_sgd_``: their nested shapes; :data:`FOREACH_FLOPS`,
  :data:`ADAM_FLOPS`, :data:`SGD_FLOPS` say where each count comes from) (:func:`op_cost`).  An op's FLOPs and bytes are shared
  between its kernels in proportion to their duration.
* Every kernel read is accounted for: ``df.attrs["report"]`` holds ``read``, ``plotted`` (finite FLOP/s and
  intensity), ``flops_only`` (FLOP/s, unknown intensity), ``dropped`` and ``dropped_why`` (reason -> count);
  :func:`report_text` words it as "N kernels read, M plotted, K dropped (why)".
* A trace with operators but no GPU kernels (recorded on a CPU) is refused with a message that says how to
  record a GPU trace.

Anything malformed raises :class:`TraceImportError` naming the file and the event.
"""

from __future__ import annotations

import ast
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from popvision_lite import input_files
from popvision_lite.errors import PopvisionError

GPU_CATS = ("kernel", "gpu_op")
OP_CATS = ("cpu_op", "operator", "user_annotation_op")
COLUMNS = ("name", "cat", "ts_us", "dur_s", "flops", "bytes", "achieved_flops", "intensity", "flops_from")
EXTRA_COLUMNS = ("op", "bytes_from", "drop_reason")

HOW_TO_RECORD = ("record a GPU trace with torch.profiler.profile(activities=[ProfilerActivity.CPU, "
                 "ProfilerActivity.CUDA], record_shapes=True) on a machine with a CUDA GPU, run the model inside "
                 "it, then prof.export_chrome_trace('trace.json'); record_shapes=True is what lets FLOPs and bytes "
                 "be derived")

DTYPE_BYTES = {"float": 4, "c10::half": 2, "half": 2, "c10::bfloat16": 2, "bfloat16": 2, "double": 8,
               "long int": 8, "long": 8, "int": 4, "short int": 2, "signed char": 1, "unsigned char": 1,
               "bool": 1, "c10::float8_e4m3fn": 1, "c10::float8_e5m2": 1, "float16": 2, "float32": 4}

ELEMENTWISE = {"add", "add_", "sub", "sub_", "mul", "mul_", "div", "div_", "relu", "relu_", "gelu", "silu",
               "sigmoid", "tanh", "exp", "log", "neg", "pow", "sqrt", "rsqrt", "threshold_backward",
               "gelu_backward", "silu_backward", "sigmoid_backward", "tanh_backward", "where", "clamp", "clamp_",
               "addcmul_", "addcdiv_", "lerp_", "fill_", "copy_", "to", "_to_copy", "native_dropout", "dropout",
               "softmax", "_softmax", "log_softmax", "_log_softmax", "_softmax_backward_data",
               "native_layer_norm", "layer_norm", "native_layer_norm_backward", "native_batch_norm",
               "cudnn_batch_norm", "sum", "mean",
               # memory-bound kernels of training steps (one FLOP per output element: their bytes decide)
               "native_batch_norm_backward", "cudnn_batch_norm_backward", "native_dropout_backward",
               "max_pool2d_with_indices", "max_pool2d_with_indices_backward", "_adaptive_avg_pool2d",
               "_adaptive_avg_pool2d_backward", "avg_pool2d", "avg_pool2d_backward", "nll_loss_forward",
               "nll_loss_backward", "zero_", "clamp_min", "clamp_max", "hardtanh",
               "_log_softmax_backward_data",
               # scatter-add of the gradient rows: one add per gradient element (the largest input)
               "embedding_dense_backward", "embedding_backward"}
# gathers: no FLOPs, only bytes (listed as dropped from the log-log roofline with that reason)
GATHERS = {"index_select", "embedding"}

# Optimizer kernels that take lists of tensors (``torch.optim``'s foreach and fused paths; on CUDA AdamW runs
# foreach by default).  The profiler records a TensorList argument's shapes as a list of shapes and its type as
# "TensorList", without the element type: these formulas count 4 bytes an element (fp32, the parameters and
# optimizer state of torch.optim; AMP keeps fp32 parameters) and say so.
# _foreach_<op>: FLOPs per element of the first list.  addcmul / addcdiv: self + value * t1 (* or /) t2;
# lerp: self + weight * (end - self); norm: a square and an add per element (the per-tensor sqrt not counted).
FOREACH_FLOPS = {"add": 1, "sub": 1, "mul": 1, "div": 1, "sqrt": 1, "rsqrt": 1, "neg": 1, "exp": 1, "log": 1,
                 "reciprocal": 1, "abs": 1, "sign": 1, "maximum": 1, "minimum": 1, "clamp_min": 1, "clamp_max": 1,
                 "pow": 1, "addcmul": 3, "addcdiv": 3, "lerp": 3, "norm": 2, "copy": 0, "zero": 0}
TENSOR_LIST_ELEMENT_BYTES = 4
# Fused optimizers: FLOPs per parameter element as the CUDA kernels compute them, counted from PyTorch's source
# (pytorch/pytorch aten/src/ATen/native/cuda/fused_adam_utils.cuh, adam_math; FusedSgdKernel.cu, sgd_math):
# Adam / AdamW: weight decay 2 (Adam: grad += param * wd; AdamW: param -= lr * wd * param, lr * wd a scalar),
# exp_avg = beta1 * exp_avg + (1 - beta1) * grad 3, exp_avg_sq = beta2 * exp_avg_sq + (1 - beta2) * grad * grad 4,
# denom = sqrt(exp_avg_sq) / bias_correction2_sqrt + eps 3, param -= step_size * exp_avg / denom 3 (13 without
# weight decay, 15 with it), + 1 with a grad scale (grad /= scale), + 1 with amsgrad (max); the bias corrections
# are per-step scalars, not counted.  SGD: weight decay 2 (g += wd * p), momentum 3 (buf = m * buf +
# (1 - dampening) * g; 0 on the first step), nesterov 2 (g + m * buf), update 2 (p -= lr * g), grad scale 1.
ADAM_FLOPS = {"moments": 3 + 4, "denom": 3, "update": 3, "weight_decay": 2}
SGD_FLOPS = {"weight_decay": 2, "momentum": 3, "nesterov": 2, "update": 2}


class TraceImportError(PopvisionError):
    """A PyTorch profiler trace is missing, not JSON, or has malformed events."""

    def __init__(self, path, problem: str):
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")


def _num(v, path, where):
    if isinstance(v, bool) or not isinstance(v, int | float | str):
        raise TraceImportError(path, f"{where}: expected a number, got {v!r}")
    try:
        x = float(v)
    except (ValueError, OverflowError):
        raise TraceImportError(path, f"{where}: expected a number, got {str(v)[:40]!r}") from None
    if not math.isfinite(x) or x < 0:
        raise TraceImportError(path, f"{where}: must be a finite number >= 0, got {v!r}")
    return x


def _prod(shape) -> float:
    return float(np.prod([float(d) for d in shape])) if shape else 1.0


def _dims(args) -> list:
    d = args.get("Input Dims")
    if not isinstance(d, list):
        return []
    return [x if isinstance(x, list) and all(isinstance(v, int | float) and not isinstance(v, bool)
                                             for v in x) else [] for x in d]


def _esize(args, i: int) -> int:
    types = args.get("Input type")
    if isinstance(types, list) and i < len(types) and isinstance(types[i], str):
        return DTYPE_BYTES.get(types[i].strip().lower(), 4)
    return 4


def _is_0d_tensor(args, i: int) -> bool:
    """Input ``i`` is recorded with shape [] and a tensor dtype: a 0-d tensor (a non-tensor argument, e.g.
    gelu's approximate string or a Python scalar, has an empty or non-dtype type)."""
    types = args.get("Input type")
    return (isinstance(types, list) and i < len(types) and isinstance(types[i], str)
            and types[i].strip().lower() in DTYPE_BYTES)


def _concrete(args, i: int):
    """The recorded value of scalar / list argument ``i`` ("[2, 2]", "True", "[True, True, False]"), or None."""
    c = args.get("Concrete Inputs")
    if isinstance(c, list) and i < len(c) and isinstance(c[i], str) and c[i] and len(c[i]) <= 200:
        try:
            return json.loads(c[i])
        except ValueError:
            pass
        try:
            return ast.literal_eval(c[i])  # Python literals: True / False, tuples
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return None
    return None


# convolution ops: (stride, padding, dilation, transposed) positions of their Concrete Inputs (None: absent).
# aten::convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups);
# conv1d/2d/3d(input, weight, bias, stride, padding, dilation, groups); cudnn_convolution(self, weight, padding,
# stride, dilation, groups, ...) has no bias; mkldnn / miopen (input, weight, bias, padding, stride, dilation, ...)
CONV_ARGS = {"convolution": (3, 4, 5, 6), "_convolution": (3, 4, 5, 6), "convolution_overrideable": (3, 4, 5, 6),
             "conv1d": (3, 4, 5, None), "conv2d": (3, 4, 5, None), "conv3d": (3, 4, 5, None),
             "cudnn_convolution": (3, 2, 4, None), "mkldnn_convolution": (4, 3, 5, None),
             "miopen_convolution": (4, 3, 5, None)}
# scaled-dot-product attention: ops with (batch, heads, seq, dim) tensors and those with (batch, seq, heads, dim)
SDPA_BHSD = ("scaled_dot_product_attention", "_scaled_dot_product_flash_attention",
             "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention",
             "_scaled_dot_product_flash_attention_for_cpu")
SDPA_BSHD = ("_flash_attention_forward", "_efficient_attention_forward")


def _ints(v, n) -> list | None:
    if isinstance(v, int) and not isinstance(v, bool):
        return [v] * n
    if isinstance(v, list | tuple) and v and all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        return list(v) * n if len(v) == 1 else list(v)
    return None


def _attention(q, k, v, layout: str) -> tuple[float, float, float, float, float]:
    """(batch, query heads, query length, key length, (dq, dv)) of attention tensors in either layout."""
    if layout == "bhsd":
        (b, h, sq, dq), (_, _, sk, _), (_, _, _, dv) = q, k, v
    else:
        (b, sq, h, dq), (_, sk, _, _), (_, _, _, dv) = q, k, v
    return b, h, sq, sk, (dq, dv)


def _gemm(b, m, k, n, es, extra=0.0):
    """(FLOPs, bytes) of ``b`` products of (m x k) by (k x n) in elements of ``es`` bytes, plus ``extra`` bytes."""
    return 2.0 * b * m * k * n, es * b * (m * k + k * n + m * n) + extra


def _matmul_cost(name: str, op: str, d: list, args: dict, e0: int) -> tuple[float, float, str] | None:
    """mm, addmm, bmm, baddbmm, linear, matmul: 2 M K N per product."""
    if op == "mm" and len(d) >= 2 and len(d[0]) == 2 and len(d[1]) == 2:
        (m, k), (_, n) = d[0], d[1]
        f, by = _gemm(1, m, k, n, e0)
        return f, by, "mm 2MKN"
    if op == "addmm" and len(d) >= 3 and len(d[1]) == 2 and len(d[2]) == 2:
        (m, k), (_, n) = d[1], d[2]
        f, by = _gemm(1, m, k, n, _esize(args, 1), _esize(args, 0) * _prod(d[0]))
        return f + m * n, by, "addmm 2MKN + MN"
    if op == "bmm" and len(d) >= 2 and len(d[0]) == 3 and len(d[1]) == 3:
        (b, m, k), (_, _, n) = d[0], d[1]
        f, by = _gemm(b, m, k, n, e0)
        return f, by, "bmm 2BMKN"
    if op == "baddbmm" and len(d) >= 3 and len(d[1]) == 3 and len(d[2]) == 3:
        (b, m, k), (_, _, n) = d[1], d[2]
        f, by = _gemm(b, m, k, n, _esize(args, 1), _esize(args, 0) * _prod(d[0]))
        return f + b * m * n, by, "baddbmm 2BMKN + BMN"
    if op == "linear" and len(d) >= 2 and len(d[0]) >= 1 and len(d[1]) == 2:
        rows = _prod(d[0][:-1])
        k = d[0][-1]
        n = d[1][0]
        bias = _prod(d[2]) if len(d) > 2 and d[2] else 0.0
        f, by = _gemm(1, rows, k, n, e0, e0 * bias)
        return f + (rows * n if bias else 0.0), by, "linear 2 rows K N"
    if op == "matmul" and len(d) >= 2 and d[0] and d[1]:
        a, b = list(d[0]), list(d[1])
        if len(a) == 1:
            a = [1] + a
        if len(b) == 1:
            b = b + [1]
        m, k, n = a[-2], a[-1], b[-1]
        batch = max(_prod(a[:-2]), _prod(b[:-2]))
        f = 2.0 * batch * m * k * n
        by = e0 * (_prod(a) + _prod(b) + batch * m * n)
        return f, by, "matmul 2 batch MKN"
    return None


def _conv_cost(name: str, op: str, d: list, args: dict, e0: int) -> tuple[float, float, str] | None:
    """A forward convolution (transposed or not): 2 N O out_spatial (C/g) kernel."""
    if op in CONV_ARGS and len(d) >= 2 and len(d[0]) >= 3 and len(d[1]) == len(d[0]):
        x, w = d[0], d[1]
        n, spatial = x[0], x[2:]
        o, cin_g, kernel = w[0], w[1], w[2:]
        si, pi, di, ti = CONV_ARGS[op]
        if ti is not None and _concrete(args, ti) is True:   # transposed: each INPUT point meets the filter
            f = 2.0 * n * _prod(spatial) * _prod(w)
            return f, e0 * (_prod(x) + _prod(w) + f / (2.0 * _prod(kernel) * cin_g)), "transposed conv 2 N in_sp W"
        nd = len(spatial)
        stride, pad, dil = _ints(_concrete(args, si), nd), _ints(_concrete(args, pi), nd), \
            _ints(_concrete(args, di), nd)
        if stride and pad and len(stride) == len(pad) == nd:
            dil = dil if dil and len(dil) == nd else [1] * nd
            out_sp = [(sz + 2 * pad[i] - dil[i] * (kernel[i] - 1) - 1) // stride[i] + 1
                      for i, sz in enumerate(spatial)]
            how = f"conv ({op}) 2 N O out_spatial (C/g) kernel"
        else:
            out_sp = list(spatial)  # stride / padding not recorded: 'same' convolution assumed
            how = f"conv ({op}) 2 N O spatial (C/g) kernel; stride 1 'same' padding assumed"
        out = n * o * _prod(out_sp)
        f = 2.0 * out * cin_g * _prod(kernel)
        by = e0 * (_prod(x) + _prod(w) + out)
        return f, by, how
    return None


def _conv_backward_cost(name: str, op: str, d: list, args: dict, e0: int) -> tuple[float, float, str] | None:
    """convolution_backward: the forward's multiply-adds per requested gradient."""
    if op == "convolution_backward" and len(d) >= 3 and len(d[0]) >= 3 and len(d[0]) == len(d[1]) == len(d[2]):
        # (grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed, output_padding,
        # groups, output_mask): data gradient and weight gradient each cost the forward's multiply-adds
        go, x, w = d[0], d[1], d[2]
        if _concrete(args, 7) is True:
            return math.nan, math.nan, f"{name}: transposed convolution backward has no FLOP formula here"
        mask = _concrete(args, 10)
        mask = list(mask) if isinstance(mask, list | tuple) and len(mask) >= 2 else [True, True, False]
        per = 2.0 * _prod(go) * w[1] * _prod(w[2:])       # 2 N O out_spatial (C/g) kernel
        f = per * (bool(mask[0]) + bool(mask[1]))
        by = e0 * ((_prod(go) + _prod(w) + _prod(x)) * bool(mask[0]) + (_prod(go) + _prod(x) + _prod(w))
                   * bool(mask[1]) + (_prod(go) + go[1]) * bool(mask[2] if len(mask) > 2 else False))
        return f, by, "conv backward: 2 N O out_spatial (C/g) kernel per requested gradient"
    return None


def _attention_cost(name: str, op: str, d: list, args: dict, e0: int) -> tuple[float, float, str] | None:
    """Scaled dot-product attention, forward or backward."""
    layout = "bhsd" if op in SDPA_BHSD or (op.endswith("_backward") and op[:-9] in SDPA_BHSD) else \
        "bshd" if op in SDPA_BSHD or op in ("_flash_attention_backward", "_efficient_attention_backward") else ""
    if layout:
        bwd = op.endswith("_backward")
        t = d[1:4] if bwd else d[0:3]      # backward: (grad_out, query, key, value, out, ...)
        if len(t) == 3 and all(len(x) == 4 for x in t):
            b, h, sq, sk, (dq, dv) = _attention(*t, layout)
            if bwd:  # recompute QK^T, then dV, dP, dQ, dK: five products (torch.utils.flop_counter's count)
                f = 2.0 * b * h * sq * sk * (3 * dq + 2 * dv)
                by = e0 * (_prod(d[0]) + 2 * sum(_prod(x) for x in t) + (_prod(d[4]) if len(d) > 4 else 0))
                return f, by, "attention backward 2BH Sq Sk (3 Dq + 2 Dv)"
            f = 2.0 * b * h * sq * sk * (dq + dv)
            by = e0 * (sum(_prod(x) for x in t) + b * h * sq * dv)
            return f, by, "attention 2BH Sq Sk (Dq + Dv)"
    return None


def _gather_cost(name: str, op: str, d: list, args: dict, e0: int) -> tuple[float, float, str] | None:
    """index_select / embedding: a gather, bytes only."""
    if op in GATHERS and len(d) >= 2 and d[0]:
        # index_select(self, dim, index) / embedding(weight, indices): rows of d[0] picked by an index tensor
        src, idx = d[0], (d[2] if op == "index_select" and len(d) > 2 else d[1])
        dim = _concrete(args, 1) if op == "index_select" else 0
        dim = dim if isinstance(dim, int) and not isinstance(dim, bool) and -len(src) <= dim < len(src) else 0
        row = _prod(src) / max(float(src[dim]), 1.0)
        picked = _prod(idx) * row
        by = e0 * 2.0 * picked + _esize(args, 2 if op == "index_select" else 1) * _prod(idx)
        return 0.0, by, f"{op}: a gather, no FLOPs (bytes: picked rows read and written, indices read)"
    return None


def _elementwise_cost(name: str, op: str, d: list, args: dict, e0: int) -> tuple[float, float, str] | None:
    """An elementwise op: one FLOP per output element."""
    base = op.rstrip("_") if op not in ELEMENTWISE else op
    if op in ELEMENTWISE or base in ELEMENTWISE:
        tensors = [i for i, x in enumerate(d) if x or _is_0d_tensor(args, i)]
        if not tensors:
            return math.nan, math.nan, f"{name}: no tensor among its inputs"
        out = max(_prod(d[i]) for i in tensors)  # 0-d tensors only: one element
        by = sum(_esize(args, i) * _prod(d[i]) for i in tensors) + e0 * out
        return out, by, "elementwise: one FLOP per output element"
    return None


_OP_FAMILIES = (_matmul_cost, _conv_cost, _conv_backward_cost, _attention_cost, _gather_cost, _elementwise_cost)


def op_cost(name: str, args: dict) -> tuple[float, float, str]:
    """(FLOPs, bytes, formula) of an aten op from its recorded input shapes and types; (nan, nan, why-not)
    when the op has no formula or no shapes.  Bytes are compulsory: inputs read once, output written once."""
    op = name.split("::", 1)[-1] if "::" in name else name
    if op.startswith(("_foreach_", "_fused_")):
        try:
            return _tensor_list_cost(name, op, args)
        except (TypeError, ValueError, IndexError):
            return math.nan, math.nan, f"{name}: unexpected Input Dims {args.get('Input Dims')!r}"[:200]
    d = _dims(args)
    if not d:  # no shapes recorded; an op of 0-d tensors (AdamW's step add_, item) records [[], [], []]
        return math.nan, math.nan, f"{name}: no Input Dims (record_shapes=True)"
    e0 = _esize(args, 0)
    try:
        for family in _OP_FAMILIES:
            cost = family(name, op, d, args, e0)
            if cost is not None:
                return cost
    except (TypeError, ValueError, IndexError):
        return math.nan, math.nan, f"{name}: unexpected Input Dims {d!r}"
    return math.nan, math.nan, f"{name}: no FLOP formula for this op"


def _tensor_lists(args) -> dict[int, list]:
    """{argument index: [shape, ...]} of the TensorList arguments of an op (recorded as a list of shapes)."""
    dims = args.get("Input Dims")
    types = args.get("Input type")
    out: dict[int, list] = {}
    if not isinstance(dims, list):
        return out
    for i, x in enumerate(dims):
        listed = isinstance(types, list) and i < len(types) and types[i] == "TensorList"
        nested = isinstance(x, list) and bool(x) and all(isinstance(s, list) for s in x)
        if (listed or nested) and isinstance(x, list):
            shapes = [s for s in x if isinstance(s, list) and all(isinstance(v, int | float) and not isinstance(v, bool)
                                                                  and v >= 0 for v in s)]
            if len(shapes) != len(x):
                raise ValueError("a TensorList shape that is not a list of sizes")
            out[i] = shapes
    return out


def _scalar(args, i: int, default):
    """The recorded value of scalar argument ``i`` (a number or bool), else ``default``."""
    v = _concrete(args, i)
    return v if isinstance(v, int | float) else default


def _tensor_list_cost(name: str, op: str, args: dict) -> tuple[float, float, str]:
    """(FLOPs, bytes, formula) of a foreach or fused optimizer op over its TensorList arguments (see
    FOREACH_FLOPS, ADAM_FLOPS, SGD_FLOPS for where each count comes from)."""
    lists = _tensor_lists(args)
    if not lists:
        return math.nan, math.nan, f"{name}: no TensorList shapes in Input Dims (record_shapes=True)"
    es = TENSOR_LIST_ELEMENT_BYTES
    first = lists[min(lists)]
    n = float(sum(_prod(s) for s in first))
    tensors = len(first)
    note = f"; TensorList element types are not recorded: {es} bytes each assumed"
    if op in ("_fused_adam_", "_fused_adamw_"):
        # (params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, lr, beta1, beta2, weight_decay,
        # eps, amsgrad, maximize, grad_scale, found_inf)
        wd = _scalar(args, 9, 0.01 if op == "_fused_adamw_" else 0.0)
        amsgrad = _concrete(args, 11) is True
        scaled = _is_0d_tensor(args, 13) or bool(_dims(args)[13:14] and _dims(args)[13])  # a grad_scale tensor
        per = ADAM_FLOPS["moments"] + ADAM_FLOPS["denom"] + ADAM_FLOPS["update"] + \
            (ADAM_FLOPS["weight_decay"] if wd else 0) + (1 if amsgrad else 0) + (1 if scaled else 0)
        streams_read = 4 + (1 if amsgrad else 0)            # param, grad, exp_avg, exp_avg_sq (+ max)
        streams_written = 3 + (1 if amsgrad else 0) + (1 if scaled else 0)
        by = es * n * (streams_read + streams_written) + 4.0 * tensors  # + one fp32 step count per tensor
        kind = "AdamW" if op == "_fused_adamw_" else "Adam"
        return per * n, by, (f"fused {kind}: {per} FLOPs per parameter (PyTorch fused_adam_utils.cuh adam_math"
                             f"{', weight decay' if wd else ''}{', amsgrad' if amsgrad else ''}"
                             f"{', grad scale' if scaled else ''}){note}")
    if op == "_fused_sgd_":
        # (params, grads, momentum_buffer_list, weight_decay, momentum, lr, dampening, nesterov, maximize,
        # is_first_step, grad_scale, found_inf)
        wd = _scalar(args, 3, 0.0)
        momentum = _scalar(args, 4, 0.0)
        nesterov = _concrete(args, 7) is True
        first_step = _concrete(args, 9) is True
        scaled = _is_0d_tensor(args, 10) or bool(_dims(args)[10:11] and _dims(args)[10])  # a grad_scale tensor
        has_buf = bool(momentum) and bool(lists.get(2))
        per = SGD_FLOPS["update"] + (SGD_FLOPS["weight_decay"] if wd else 0) + \
            (SGD_FLOPS["momentum"] if has_buf and not first_step else 0) + \
            (SGD_FLOPS["nesterov"] if has_buf and nesterov else 0) + (1 if scaled else 0)
        # read param and grad, write param; read and write the momentum buffer; write the unscaled grad
        by = es * n * (3 + (2 if has_buf else 0) + (1 if scaled else 0))
        return per * n, by, (f"fused SGD: {per} FLOPs per parameter (PyTorch FusedSgdKernel.cu sgd_math"
                             f"{', weight decay' if wd else ''}{', momentum' if has_buf else ''}"
                             f"{', nesterov' if has_buf and nesterov else ''}{', grad scale' if scaled else ''}){note}")
    if op.startswith("_foreach_"):
        base = op[len("_foreach_"):].rstrip("_")
        in_place = op.endswith("_")
        if base not in FOREACH_FLOPS:
            return math.nan, math.nan, f"{name}: no FLOP formula for this op"
        per = FOREACH_FLOPS[base]
        same = [i for i, sh in lists.items() if len(sh) == tensors]
        if base in ("add", "sub") and len(same) > 1 and _scalar(args, 2, 1) != 1:
            per += 1  # self + alpha * other
        if base in ("addcmul", "addcdiv") and _scalar(args, 3, None) == 1:
            per -= 1  # value 1: no multiply
        reads = sum(float(sum(_prod(s) for s in lists[i])) for i in same)
        if base in ("copy", "zero"):
            reads = 0.0 if base == "zero" else float(sum(_prod(s) for s in lists[same[-1]]))
        written = float(tensors) if base == "norm" else n
        by = es * (reads + written)
        return per * n, by, (f"{op}: {per} FLOP(s) per element of its {tensors} tensors, "
                             f"{'in place' if in_place else 'a new list'}{note}")
    return math.nan, math.nan, f"{name}: no FLOP formula for this op"


def _read_events(path: Path) -> list:
    # regular file, size and gzip-expansion bounds, JSON depth: popvision_lite.input_files
    data = input_files.read_json(path, "torch_trace", "trace", error=lambda problem: TraceImportError(path, problem))
    if isinstance(data, dict):
        if "traceEvents" not in data:
            raise TraceImportError(path, "no 'traceEvents' key: not a Chrome trace")
        events = data["traceEvents"]
    elif isinstance(data, list):
        events = data
    else:
        raise TraceImportError(path, f"top level must be an object or array, got {type(data).__name__}")
    if not isinstance(events, list):
        raise TraceImportError(path, "'traceEvents' must be an array")
    return events


def load_torch_trace(path) -> pd.DataFrame:
    """GPU kernels of a PyTorch profiler trace as a DataFrame with :data:`COLUMNS` (+ ``op``, ``bytes_from``,
    ``drop_reason``); ``df.attrs["report"]`` counts what was read, plotted and dropped (why).

    ``achieved_flops`` = flops / dur (NaN when FLOPs are unknown); ``intensity`` = flops / bytes (NaN when
    bytes are unknown).  Zero-duration kernels stay in the frame with ``achieved_flops`` NaN and
    ``drop_reason`` "zero duration" (they cannot be placed on a log axis)."""
    path = Path(path)
    try:
        return _load(path)
    except (TypeError, ValueError, ArithmeticError, RecursionError, KeyError, IndexError) as e:
        # hostile values the event checks above do not name (an id that is a list, a shape of huge dims)
        raise TraceImportError(path, f"malformed trace: {type(e).__name__}: {str(e)[:200]}") from None


def _scan_events(path: Path, events: list) -> tuple[dict, dict, list, int]:
    """(ops by External id: (name, flops, bytes, flops_from, bytes_from, why no FLOPs), correlation -> External
    id, kernel rows, number of CPU operators) of the trace's events; TraceImportError naming a malformed one."""
    ops: dict = {}          # External id -> (name, flops, bytes, flops_from, bytes_from, why no FLOPs)
    corr_ext: dict = {}     # correlation -> External id (runtime launch events)
    kernels = []
    n_ops = 0
    for i, ev in enumerate(events):
        if not isinstance(ev, dict):
            raise TraceImportError(path, f"traceEvents[{i}] is not an object")
        cat = ev.get("cat")
        args = ev.get("args") or {}
        if not isinstance(args, dict):
            raise TraceImportError(path, f"traceEvents[{i}] ({ev.get('name', '?')}): 'args' must be an object")
        ext = args.get("External id")
        if cat in OP_CATS:
            n_ops += 1
            if ext is not None:
                name = str(ev.get("name", "?"))
                fl, by, how = op_cost(name, args)
                src = "derived: " + how if math.isfinite(fl) else ""
                if "flops" in args:
                    fl, src = _num(args["flops"], path, f"traceEvents[{i}].args.flops"), "cpu_op"
                bsrc = ("derived: " + how) if math.isfinite(by) else ""
                ops[ext] = (name, fl, by, src, bsrc, "" if math.isfinite(fl) else how)
        elif cat in ("cuda_runtime", "cuda_driver", "runtime") and "correlation" in args and ext is not None:
            corr_ext[args["correlation"]] = ext
        if cat in GPU_CATS and ev.get("ph", "X") == "X":
            name = ev.get("name")
            if not isinstance(name, str):
                raise TraceImportError(path, f"traceEvents[{i}]: kernel event without a 'name'")
            if "dur" not in ev:
                raise TraceImportError(path, f"traceEvents[{i}] ({name}): kernel event without 'dur'")
            dur = _num(ev["dur"], path, f"traceEvents[{i}].dur")
            ts = _num(ev.get("ts", 0), path, f"traceEvents[{i}].ts")
            fl = _num(args["flops"], path, f"traceEvents[{i}].args.flops") if "flops" in args else math.nan
            by = math.nan
            for bk in ("bytes", "dram_bytes"):
                if bk in args:
                    by = _num(args[bk], path, f"traceEvents[{i}].args.{bk}")
                    break
            kernels.append((name, cat, ts, dur, fl, by, ext, args.get("correlation")))
    return ops, corr_ext, kernels, n_ops


def _share_op_costs(df: pd.DataFrame, ops: dict) -> None:
    """Kernels without their own FLOPs / bytes get their launching op's, shared between its kernels by duration."""
    linked = df["ext"].notna()
    if not linked.any():
        return
    sub = df[linked]
    tot = sub.groupby("ext")["dur_us"].transform("sum")
    cnt = sub.groupby("ext")["dur_us"].transform("count")
    share = np.where(tot > 0, sub["dur_us"] / tot.where(tot > 0, 1), 1.0 / cnt)
    op_f = sub["ext"].map(lambda e: ops[e][1]).to_numpy(dtype=float)
    op_b = sub["ext"].map(lambda e: ops[e][2]).to_numpy(dtype=float)
    need_f = sub["flops"].isna().to_numpy() & np.isfinite(op_f)
    need_b = sub["bytes"].isna().to_numpy() & np.isfinite(op_b)
    idx = sub.index.to_numpy()
    df.loc[idx[need_f], "flops"] = (op_f * share)[need_f]
    df.loc[idx[need_f], "flops_from"] = sub["ext"].map(lambda e: ops[e][3]).to_numpy()[need_f]
    df.loc[idx[need_b], "bytes"] = (op_b * share)[need_b]
    df.loc[idx[need_b], "bytes_from"] = sub["ext"].map(lambda e: ops[e][4]).to_numpy()[need_b]


def _drop_reasons(df: pd.DataFrame, ops: dict) -> None:
    """Each kernel's time, achieved FLOP/s and intensity, and why it cannot be plotted (``drop_reason``)."""
    reason = np.full(len(df), "", dtype=object)
    no_f = df["flops"].isna().to_numpy()
    for j in np.nonzero(no_f)[0]:
        e = df["ext"].iat[j]
        if e is None or (isinstance(e, float) and math.isnan(e)):
            reason[j] = "no launching operator (no External id / correlation)"
        else:
            why = ops[e][5]
            reason[j] = "no FLOP formula for " + ops[e][0] if "no FLOP formula" in why else (
                "operator without Input Dims (record_shapes=False)" if "Input Dims" in why else why)
    zero = (df["dur_us"] <= 0).to_numpy()
    reason[zero] = "zero duration"
    df["drop_reason"] = reason
    df["dur_s"] = df["dur_us"] * 1e-6
    df["achieved_flops"] = (df["flops"] / df["dur_s"]).where(~zero)
    df["intensity"] = df["flops"] / df["bytes"]
    df.loc[~np.isfinite(df["intensity"]) | (df["intensity"] <= 0), "intensity"] = math.nan
    no_int = df["flops"].notna() & (df["flops"] > 0) & df["intensity"].isna()
    df.loc[no_int & (df["drop_reason"] == ""), "drop_reason"] = "FLOPs known, bytes unknown (plotted at the edge)"
    zero_f = df["flops"].notna() & (df["flops"] <= 0)
    df.loc[zero_f & (df["drop_reason"] == ""), "drop_reason"] = "zero FLOPs (copy / memset / gather)"


def _load(path: Path) -> pd.DataFrame:
    events = _read_events(path)
    ops, corr_ext, kernels, n_ops = _scan_events(path, events)
    if not kernels:
        if n_ops:
            raise TraceImportError(path, f"no GPU kernel events in {len(events)} events ({n_ops} CPU operators): a "
                                         f"CPU-only trace has no GPU time to plot; {HOW_TO_RECORD}")
        raise TraceImportError(path, f"no GPU kernel events (cat {' / '.join(GPU_CATS)}) in {len(events)} events")
    df = pd.DataFrame(kernels, columns=["name", "cat", "ts_us", "dur_us", "flops", "bytes", "ext", "corr"])
    # kernel -> launching op: External id, else correlation -> runtime event's External id
    ext = df["ext"].where(df["ext"].notna(), df["corr"].map(corr_ext))
    ext = ext.where(ext.isin(list(ops)), None)
    df["ext"] = ext
    df["op"] = [ops[e][0] if e is not None and e in ops else "" for e in ext]
    df["flops_from"] = np.where(df["flops"].notna(), "kernel", "")
    df["bytes_from"] = np.where(df["bytes"].notna(), "kernel", "")
    _share_op_costs(df, ops)
    _drop_reasons(df, ops)
    out = df.reset_index(drop=True)[list(COLUMNS) + list(EXTRA_COLUMNS)]
    known, unknown = plottable(out)
    why = out.loc[~out.index.isin(known.index) & ~out.index.isin(unknown.index), "drop_reason"].value_counts()
    why = {str(k): int(v) for k, v in why.items()}
    out.attrs["report"] = {"read": len(kernels), "plotted": int(len(known)), "flops_only": int(len(unknown)),
                           "dropped": int(len(kernels) - len(known) - len(unknown)), "dropped_why": why,
                           "operators": n_ops}
    return out


def report_text(df: pd.DataFrame) -> str:
    """'N kernels read, M plotted, K dropped (why)' for a frame from :func:`load_torch_trace`."""
    r = df.attrs.get("report")
    if not r:
        known, unknown = plottable(df)
        return f"{len(df)} kernels read, {len(known)} plotted"
    text = f"{r['read']:,} kernels read, {r['plotted']:,} plotted"
    if r["flops_only"]:
        text += f" (+{r['flops_only']:,} with FLOP/s only, intensity unknown)"
    text += f", {r['dropped']:,} dropped"
    if r["dropped"]:
        text += " (" + "; ".join(f"{n}: {why}" for why, n in sorted(r["dropped_why"].items(), key=lambda x: -x[1])) + ")"
    return text


def kernel_table(df: pd.DataFrame) -> pd.DataFrame:
    """Every kernel of a frame from :func:`load_torch_trace`, each with ``plotted``: "point" (known FLOP/s and
    intensity), "edge" (FLOP/s only, drawn at the plot's edge) or "no" (its ``drop_reason`` says why): the one
    list the roofline view, its PNG / SVG and its CSV all account for."""
    known, unknown = plottable(df)
    out = df.copy()
    out["plotted"] = "no"
    out.loc[known.index, "plotted"] = "point"
    out.loc[unknown.index, "plotted"] = "edge"
    return out


def plottable(df: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(points with a known intensity, points with known FLOP/s but unknown intensity)."""
    has_f = df["achieved_flops"].notna() & (df["achieved_flops"] > 0)
    return df[has_f & df["intensity"].notna()], df[has_f & df["intensity"].isna()]
