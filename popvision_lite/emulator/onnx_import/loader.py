"""Reading an .onnx file: parse, check, resolve symbolic dims, run shape inference, list dtype casts.

Every problem is an :class:`OnnxImportError` (a ``ConfigError``: the command line exits 2) whose
message names the file and the node / input / dim and says what to do.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from popvision_lite import input_files
from popvision_lite.errors import ConfigError


class OnnxImportError(ConfigError):
    """The ONNX file cannot be imported (names the file and what is wrong)."""


# dim names that --batch / --seq set (exporters' usual names; anything else: --dim name=value)
BATCH_NAMES = ("batch", "batch_size", "batchsize", "n", "b", "bs", "unk__0", "N")
SEQ_NAMES = ("seq", "seq_len", "sequence", "sequence_length", "seqlen", "s", "tokens", "num_tokens")

ELEM = None  # filled lazily: onnx TensorProto element type -> (numpy dtype, IPU dtype or None, note)


def _onnx():
    try:
        import onnx
    except ImportError as e:  # pragma: no cover - onnx is a runtime dependency
        raise OnnxImportError("the 'onnx' package is not installed; pip install onnx") from e
    return onnx


def dtype_info(elem_type: int):
    """(numpy dtype, cast note or '') for an ONNX element type; None when the IPU cannot hold it."""
    onnx = _onnx()
    T = onnx.TensorProto
    table = {
        T.FLOAT: (np.float32, ""), T.FLOAT16: (np.float16, ""), T.INT32: (np.int32, ""),
        T.DOUBLE: (np.float64, "float64 -> float32 (the IPU has no 64-bit floats)"),
        T.INT64: (np.int64, "int64 -> int32 (the IPU has no 64-bit integers)"),
        T.BOOL: (np.bool_, "bool -> int32 (0 / 1)"),
        T.INT8: (np.int8, "int8 -> int32"), T.UINT8: (np.uint8, "uint8 -> int32"),
        T.INT16: (np.int16, "int16 -> int32"), T.UINT16: (np.uint16, "uint16 -> int32"),
        T.UINT32: (np.uint32, "uint32 -> int32"),
        T.BFLOAT16: (np.float32, "bfloat16 -> float32 (emulated in the run's precision)"),
    }
    return table.get(int(elem_type))


def elem_name(elem_type: int) -> str:
    onnx = _onnx()
    try:
        return onnx.TensorProto.DataType.Name(int(elem_type)).lower()
    except ValueError:
        return f"type {elem_type}"


@dataclass
class LoadedModel:
    path: str
    model: object                      # onnx.ModelProto (dims fixed, shapes inferred)
    inputs: dict                       # graph input name -> (shape tuple, onnx elem type)
    outputs: list                      # graph output names
    initializers: dict                 # name -> numpy array (as stored)
    dims: dict                         # symbolic dim name -> value used
    casts: list = field(default_factory=list)  # human-readable dtype casts
    opset: int = 0
    # large initializers held only in ``initializers`` (numpy): ``model`` has them as graph inputs, so ONNX
    # Runtime's reference is fed the same arrays instead of holding its own copy (and the file's bytes are freed)
    fed: list = field(default_factory=list)


def dim_limits(name: str) -> tuple[str, tuple[int, int]]:
    """(bundled-model field, (lowest, highest)) that bounds a symbolic dim: a batch-like name as ``batch``,
    a sequence-like one as ``seq``, any other as ``hidden`` (``value_checks.MODEL_LIMITS``: the same bounds
    the bundled models' sizes have, so a typo cannot turn into an allocation of the whole machine)."""
    from popvision_lite.value_checks import MODEL_LIMITS

    low = str(name).lower()
    field = ("batch" if low in BATCH_NAMES or "batch" in low else
             "seq" if low in SEQ_NAMES or "seq" in low or "token" in low else "hidden")
    return field, MODEL_LIMITS[field]


def check_dim(name: str, value, what: str) -> int:
    """``value`` of symbolic dim ``name`` within its bounds (:func:`dim_limits`), else OnnxImportError
    naming ``what`` (the option or config field)."""
    field, (lo, hi) = dim_limits(name)
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        shown = value if not isinstance(value, int) or abs(value) < 1e15 else f"{float(value):.3g}"
        raise OnnxImportError(f"{what}: {name}={shown} is outside {lo} .. {hi} (the bounds of a bundled model's "
                              f"{field})")
    return value


def parse_dims(items, what: str = "argument --dim") -> dict:
    """``["name=value", ...]`` -> {name: int}; a malformed item or a value outside the bounds
    (:func:`dim_limits`) is an error naming it and ``what`` gave it (the option, or the app's dialog field)."""
    out = {}
    for it in items or ():
        m = re.fullmatch(r"\s*([^=\s]+)\s*=\s*(\d{1,15})\s*", str(it)[:200])
        if not m:
            raise OnnxImportError(f"{what}: {str(it)[:60]!r}: expected NAME=VALUE with a positive integer "
                                  "value, e.g. --dim sequence_length=128")
        out[m.group(1)] = check_dim(m.group(1), int(m.group(2)), what)
    return out


def check_model_path(path, what: str = "ONNX model", suffix: str = ".onnx") -> Path:
    """``path`` names an existing file (not a folder): the first check :func:`read_model` makes, also made by the
    app's run dialog before it closes (and for an inputs ``.npz``)."""
    p = Path(path)
    if not p.exists():
        raise OnnxImportError(f"{path}: no such file")
    if p.is_dir():
        raise OnnxImportError(f"{path}: is a directory, expected {'an' if suffix == '.onnx' else 'a'} {suffix} file "
                              f"({what})")
    return p


def read_model(path):
    """Parse ``path`` as an ONNX ModelProto; clear errors for a missing / non-ONNX / truncated file."""
    onnx = _onnx()
    p = check_model_path(path)
    data = input_files.read_bytes(p, "onnx", "ONNX model", error=lambda problem: OnnxImportError(f"{path}: {problem}"))
    if not data:
        raise OnnxImportError(f"{path}: empty file, expected an ONNX model")
    try:
        model = onnx.ModelProto()
        model.ParseFromString(data)
    except Exception as e:  # protobuf DecodeError (truncated or not protobuf at all)
        raise OnnxImportError(f"{path}: not a readable ONNX model (protobuf parse failed: {e}); "
                              "is the file complete and an .onnx export?") from None
    if not model.HasField("graph") or len(model.graph.node) == 0 or not model.opset_import:
        raise OnnxImportError(f"{path}: not an ONNX model (no graph nodes or no opset); "
                              "expected a file written by torch.onnx.export / onnx.save")
    check_graph_size(model, path)
    if any(t.data_location == onnx.TensorProto.EXTERNAL for t in model.graph.initializer):
        try:
            onnx.load_external_data_for_model(model, str(p.parent))
        except Exception as e:
            raise OnnxImportError(f"{path}: its weights are in external data files that cannot be read ({e}); "
                                  "keep the .onnx.data file next to the model") from None
    return model


# Bounds checked before the checker and shape inference, whose time grows with the graph (10,000 nodes:
# ~50 s) and with nested local functions (each call is expanded: 30 functions calling the next twice
# expand to 2^30 nodes).  The largest model of the zoo (docs/onnx.md) has a few thousand nodes.
MAX_NODES = 20_000             # nodes after expanding every local-function call
MAX_FUNCTION_DEPTH = 16        # local functions calling local functions
MAX_INPUT_RANK = 8             # ONNX models of the zoo have rank <= 5
MAX_INPUT_ELEMENTS = 1 << 28   # elements of one graph input (1 GiB of float32)


def check_graph_size(model, path) -> None:
    """OnnxImportError naming the limit when the graph, expanded through its local functions, has more
    than MAX_NODES nodes, its functions nest deeper than MAX_FUNCTION_DEPTH or call themselves."""
    funcs = {(f.domain, f.name): f for f in model.functions}
    expanded: dict = {}
    depth: dict = {}
    for key in funcs:
        # iterative post-order over the call graph: (function, state) with state 0 = enter, 1 = leave
        stack = [(key, 0)]
        on_path: list = []
        while stack:
            k, state = stack.pop()
            if state == 1:
                on_path.pop()
                n, d = 0, 0
                for node in funcs[k].node:
                    callee = (node.domain, node.op_type)
                    if callee in funcs:
                        n += expanded[callee]
                        d = max(d, depth[callee])
                    else:
                        n += 1
                expanded[k], depth[k] = min(n, MAX_NODES + 1), d + 1
                continue
            if k in expanded:
                continue
            if k in on_path:
                raise OnnxImportError(f"{path}: local function {k[1]!r} calls itself (recursion is not allowed)")
            if len(on_path) >= MAX_FUNCTION_DEPTH:
                raise OnnxImportError(f"{path}: local functions nest more than {MAX_FUNCTION_DEPTH} levels deep "
                                      f"(limit MAX_FUNCTION_DEPTH)")
            on_path.append(k)
            stack.append((k, 1))
            stack.extend(((node.domain, node.op_type), 0) for node in funcs[k].node
                         if (node.domain, node.op_type) in funcs)
    for k, d in depth.items():
        if d > MAX_FUNCTION_DEPTH:
            raise OnnxImportError(f"{path}: local function {k[1]!r} nests {d} levels deep, more than the "
                                  f"{MAX_FUNCTION_DEPTH} allowed (limit MAX_FUNCTION_DEPTH)")
    total, graphs = 0, [model.graph]
    while graphs and total <= MAX_NODES:  # the main graph and every subgraph (If / Loop / Scan bodies)
        g = graphs.pop()
        for n in g.node:
            total += expanded.get((n.domain, n.op_type), 1)
            for a in n.attribute:
                if a.HasField("g"):
                    graphs.append(a.g)
                graphs.extend(a.graphs)
    if total > MAX_NODES:
        raise OnnxImportError(f"{path}: the graph has more than {MAX_NODES:,} nodes once its local functions "
                              f"are expanded ({min(total, 10**12):,}+); limit MAX_NODES (shape inference of such "
                              "a graph takes minutes)")


def _check_input_shape(path, name, shape) -> None:
    if len(shape) > MAX_INPUT_RANK:
        raise OnnxImportError(f"{path}: input '{name}' has {len(shape)} dimensions, more than the "
                              f"{MAX_INPUT_RANK} allowed (limit MAX_INPUT_RANK)")
    n = 1
    for v in shape:
        n *= int(v)
    if n > MAX_INPUT_ELEMENTS:
        raise OnnxImportError(f"{path}: input '{name}' of shape {tuple(shape)} has {n:,} elements, more than the "
                              f"{MAX_INPUT_ELEMENTS:,} allowed (limit MAX_INPUT_ELEMENTS); check --batch/--seq/--dim")


def _dim_value(d, name_of_input, index, dims, batch, seq, used, given=None):
    if d.HasField("dim_value") and d.dim_value > 0:
        return int(d.dim_value)
    sym = d.dim_param if d.HasField("dim_param") else ""
    if sym and sym in dims:
        used[sym] = dims[sym]
        return dims[sym]
    low = sym.lower()
    if batch is not None and (low in BATCH_NAMES or "batch" in low or (not sym and index == 0)):
        used[sym or "batch"] = batch
        return batch
    if seq is not None and (low in SEQ_NAMES or "seq" in low or "token" in low):
        used[sym] = seq
        return seq
    if given is not None and index < len(given):  # the shape of the array the user gave for this input
        v = check_dim(sym or f"{name_of_input}[{index}]", int(given[index]), f"inputs: '{name_of_input}'")
        if sym:
            dims[sym] = used[sym] = v  # the same symbol on another input takes the same value
        return v
    label = f"'{sym}'" if sym else "(unnamed)"
    flag = ("--batch N" if (low in BATCH_NAMES or "batch" in low or index == 0) else
            "--seq N" if (low in SEQ_NAMES or "seq" in low or "token" in low) else "")
    how = (f"set it with {flag} or --dim {sym}=N" if flag and sym else f"set it with {flag}" if flag
           else f"set it with --dim {sym}=N" if sym else "the model needs a fixed size here")
    raise OnnxImportError(f"input '{name_of_input}' dimension {index} {label} is dynamic; {how} "
                          "(or [dims] in a TOML run config)")


def _light_copy(model):
    """The model with its large initializers turned into graph inputs of the same type and shape: what
    the checker and shape inference need, without serialising hundreds of MB of weights (they
    serialise the model they are given).  Small initializers (shape constants) stay for data
    propagation."""
    onnx = _onnx()
    from onnx import helper

    g = model.graph
    small, big = [], []
    for t in g.initializer:
        (small if int(np.prod(t.dims)) <= 4096 else big).append(t)
    if not big:
        return model
    ins = list(g.input)
    have = {i.name for i in ins}
    ins += [helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)) for t in big if t.name not in have]
    graph = helper.make_graph(list(g.node), g.name, ins, list(g.output), initializer=small)
    light = helper.make_model(graph, opset_imports=list(model.opset_import))
    light.ir_version = max(model.ir_version, 4)
    light.functions.extend(model.functions)
    _ = onnx
    return light


def load(path, batch=None, seq=None, dims=None, input_shapes=None) -> LoadedModel:
    """Read, fix symbolic input dims, run shape inference, collect initializers and dtype casts.
    ``input_shapes`` ({input name: shape} of arrays the user gave) fix the dims that ``batch`` / ``seq`` /
    ``dims`` leave open."""
    onnx = _onnx()
    from onnx import numpy_helper, shape_inference

    dims = {k: check_dim(k, v, "dims") for k, v in dict(dims or {}).items()}
    batch = None if batch is None else check_dim("batch", batch, "batch")
    seq = None if seq is None else check_dim("seq", seq, "seq")
    model = read_model(path)
    g = model.graph
    init_names = {t.name for t in g.initializer}
    used: dict = {}
    inputs = {}
    casts = []
    known = sorted({d.dim_param for vi in g.input for d in vi.type.tensor_type.shape.dim if d.dim_param})
    unknown = sorted(set(dims) - set(known))
    if unknown:
        raise OnnxImportError(f"argument --dim: {', '.join(unknown)}: no input of {path} has such a dimension"
                              + (f" (symbolic dims: {', '.join(known)})" if known else " (it has no symbolic dims)"))
    for vi in g.input:
        if vi.name in init_names:
            continue
        tt = vi.type.tensor_type
        if not vi.type.HasField("tensor_type"):
            raise OnnxImportError(f"{path}: input '{vi.name}' is not a tensor (sequences and maps are not supported)")
        info = dtype_info(tt.elem_type)
        if info is None:
            raise OnnxImportError(f"{path}: input '{vi.name}' has data type {elem_name(tt.elem_type)}, which the "
                                  "IPU emulator cannot hold (supported: float32, float16, int32, int64, bool, "
                                  "float64 and small ints are cast)")
        if info[1]:
            casts.append(f"input '{vi.name}': {info[1]}")
        if len(tt.shape.dim) > MAX_INPUT_RANK:
            _check_input_shape(path, vi.name, [1] * len(tt.shape.dim))
        shape = []
        for i, d in enumerate(tt.shape.dim):
            v = _dim_value(d, vi.name, i, dims, batch, seq, used, (input_shapes or {}).get(vi.name))
            d.Clear()
            d.dim_value = v
            shape.append(v)
        _check_input_shape(path, vi.name, shape)
        inputs[vi.name] = (tuple(shape), int(tt.elem_type))
    initializers = {}
    for t in g.initializer:
        info = dtype_info(t.data_type)
        if info is None:
            raise OnnxImportError(f"{path}: initializer '{t.name}' has data type {elem_name(t.data_type)}, which "
                                  "the IPU emulator cannot hold")
        try:
            initializers[t.name] = numpy_helper.to_array(t)
        except Exception as e:
            raise OnnxImportError(f"{path}: initializer '{t.name}' cannot be read ({e}); is the file truncated?") \
                from None
        if info[1] and t.data_type == onnx.TensorProto.DOUBLE:
            casts.append(f"initializer '{t.name}': {info[1]}")
    light = _light_copy(model)
    try:
        onnx.checker.check_model(light)
    except Exception as e:
        raise OnnxImportError(f"{path}: the ONNX checker rejects the model: {str(e).strip().splitlines()[0]}") \
            from None
    try:
        inferred = shape_inference.infer_shapes(light, data_prop=True)
    except Exception as e:
        raise OnnxImportError(f"{path}: ONNX shape inference failed: {str(e).strip().splitlines()[0]}") from None
    fed = [t.name for t in g.initializer if light is not model and t.name not in {x.name for x in light.graph.initializer}]
    if fed:  # the weights live once, in ``initializers``: the model keeps their names, types and shapes only
        light.metadata_props.extend(model.metadata_props)
        model = light
    del model.graph.value_info[:]
    model.graph.value_info.extend(inferred.graph.value_info)
    opset = max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), default=0)
    return LoadedModel(path=str(path), model=model, inputs=inputs, outputs=[o.name for o in model.graph.output],
                       initializers=initializers, dims={k: v for k, v in used.items() if k}, casts=casts,
                       opset=opset, fed=fed)
