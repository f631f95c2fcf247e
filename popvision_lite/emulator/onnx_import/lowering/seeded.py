"""Dropout and the random ops: ONNX's semantics, never a fresh random draw.

* ``Dropout`` is the identity (its mask output all true) unless training mode is requested: its
  ``training_mode`` input is true, or the run is ``--training`` (PopART trains with dropout active).  Active, it
  multiplies by a mask scaled by 1 / (1 - ratio) - a mask drawn once from the run's seed, never folded with a
  fresh random mask (``onnx.reference`` draws a new one on every call: a constant came back with a different
  share of zeros on every run).
* ``RandomUniform(Like)``, ``RandomNormal(Like)``, ``Bernoulli`` and ``Multinomial`` (on values known when the
  graph is built) are drawn once from the run's seed and the node's output name, and named in the run's notes;
  ``Bernoulli`` / ``Multinomial`` of values computed on the device are refused with the node's name.

Each seeded node is recorded in ``lowerer.seeded`` (node index -> outputs) so the numerics check runs ONNX
Runtime on the same values (:func:`reference_model`): the reference is then as deterministic as the run.
"""

from __future__ import annotations

import zlib

import numpy as np

from ..loader import OnnxImportError
from .values import Act, attrs

RANDOM_OPS = ("Bernoulli", "Multinomial", "RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike")
SEEDED_OPS = ("Dropout", *RANDOM_OPS)


def _rng(low, node):
    """The generator of one node: the run's seed and the node's first output name (stable across runs and
    processes, different per node)."""
    return np.random.default_rng([int(low.seed) & 0xFFFFFFFF, zlib.crc32(node.output[0].encode())])


def _np_dtype(elem, default=np.float32):
    from onnx import helper

    if elem is None:
        return np.dtype(default)
    return np.dtype(helper.tensor_dtype_to_np_dtype(int(elem)))


def _shape(v):
    return v.shape if isinstance(v, Act) else np.shape(v)


def _note(low, name, op, what):
    low.notes.append(f"node '{name}': {op} {what}; seeded from the run's seed ({low.seed}), the same values fed to "
                     "ONNX Runtime's reference")


def lower_random(low, i, node, ins, name):
    """A random op's outputs as constants drawn from the run's seed (:func:`_rng`)."""
    op = node.op_type
    at = attrs(node)
    rng = _rng(low, node)
    if op in ("Bernoulli", "Multinomial") and isinstance(ins[0], Act):
        raise OnnxImportError(
            f"{low.lm.path}: node '{name}': {op} samples from values computed on the device, which the emulator "
            "does not draw (it would give different values from ONNX Runtime on every run); export the model in "
            "eval mode (model.eval()) without sampling, or feed the samples as a graph input")
    if op in ("RandomUniform", "RandomNormal"):
        shape, dtype = tuple(int(s) for s in at["shape"]), _np_dtype(at.get("dtype", 1))
    elif op in ("RandomUniformLike", "RandomNormalLike"):
        shape = tuple(_shape(ins[0]))
        dtype = _np_dtype(at.get("dtype"), np.float32 if isinstance(ins[0], Act) else np.asarray(ins[0]).dtype)
    else:
        shape = tuple(np.shape(ins[0]))
    if op.startswith("RandomUniform"):
        lo, hi = float(at.get("low", 0.0)), float(at.get("high", 1.0))
        val = (lo + (hi - lo) * rng.random(shape)).astype(dtype)
        what = f"U({lo:g}, {hi:g}) of shape {shape}"
    elif op.startswith("RandomNormal"):
        mean, scale = float(at.get("mean", 0.0)), float(at.get("scale", 1.0))
        val = (mean + scale * rng.standard_normal(shape)).astype(dtype)
        what = f"N({mean:g}, {scale:g}^2) of shape {shape}"
    elif op == "Bernoulli":
        p = np.asarray(ins[0], np.float64)
        dtype = _np_dtype(at.get("dtype"), np.asarray(ins[0]).dtype)
        val = (rng.random(shape) < p).astype(dtype)
        what = f"of shape {shape}"
    else:  # Multinomial: per batch row, sample_size draws from softmax(row) (the input is log-probabilities)
        logits = np.asarray(ins[0], np.float64)
        p = np.exp(logits - logits.max(axis=-1, keepdims=True))
        p /= p.sum(axis=-1, keepdims=True)
        k = int(at.get("sample_size", 1))
        val = np.stack([rng.choice(p.shape[-1], size=k, p=row) for row in p]).astype(_np_dtype(at.get("dtype", 6)))
        what = f"{k} sample(s) per row of {shape}"
    low.vals[node.output[0]] = val
    low.seeded[i] = {"const": {node.output[0]: val}}
    _note(low, name, op, f"drawn once: {what}")


def _dropout_params(low, node, ins, name):
    """(ratio, training_mode requested) of a Dropout node; refused when either is computed on the device."""
    at = attrs(node)
    if low.opset < 12:
        ratio, mode = at.get("ratio", 0.5), None
    else:
        ratio = ins[1] if len(ins) > 1 and ins[1] is not None else 0.5
        mode = ins[2] if len(ins) > 2 and ins[2] is not None else None
    if isinstance(ratio, Act) or isinstance(mode, Act):
        raise OnnxImportError(f"{low.lm.path}: node '{name}': Dropout with a ratio or training_mode computed on the "
                              "device is not supported (they must be known when the graph is built)")
    ratio = float(np.asarray(ratio).ravel()[0])
    if not 0.0 <= ratio < 1.0:
        raise OnnxImportError(f"{low.lm.path}: node '{name}': Dropout ratio {ratio:g} is outside [0, 1)")
    return ratio, mode is not None and bool(np.asarray(mode).ravel()[0])


def lower_dropout(low, i, node, ins, name):
    """Dropout: the identity unless training mode is requested; active, ``x * mask / (1 - ratio)`` with a mask
    drawn from the run's seed (a constant, an elementwise mul on the device)."""
    from .elementwise import binary_op

    x = ins[0]
    ratio, mode = _dropout_params(low, node, ins, name)
    active = (mode or low.training) and ratio > 0.0
    shape = tuple(_shape(x))
    mask_out = node.output[1] if len(node.output) > 1 and node.output[1] else None
    if not active:
        low.vals[node.output[0]] = x
        if mask_out:
            low.vals[mask_out] = np.ones(shape, np.bool_)
        return
    keep = _rng(low, node).random(shape) >= ratio
    scaled = keep.astype(np.float32) / np.float32(1.0 - ratio)
    why = "training_mode true in the model" if mode else "active in a --training run"
    rec = {"const": {mask_out: keep} if mask_out else {}}
    if isinstance(x, Act):
        cn = f"{name}/mask"
        low.vals[cn] = scaled
        low.vals[node.output[0]] = binary_op(low, "mul", node, x, scaled, name, node.input[0], cn)
        rec["mul"] = (node.input[0], cn, scaled, node.output[0])
    else:
        v = (np.asarray(x) * scaled).astype(np.asarray(x).dtype)
        low.vals[node.output[0]] = v
        rec["const"][node.output[0]] = v
    if mask_out:
        low.vals[mask_out] = keep
    low.seeded[i] = rec
    _note(low, name, "Dropout", f"{why}: ratio {ratio:g}, mask of shape {shape} drawn once "
                                f"({int((~keep).sum()):,} of {keep.size:,} elements dropped)")


def lower_seeded(low, i, node, ins, name):
    if node.op_type == "Dropout":
        lower_dropout(low, i, node, ins, name)
    else:
        lower_random(low, i, node, ins, name)


def reference_model(model, seeded: dict):
    """A copy of ``model`` whose seeded nodes (``lowerer.seeded``) give the run's values: a random op's outputs
    become Constant nodes, an active Dropout a Mul by its scaled mask.  ``model`` itself when nothing was
    seeded."""
    if not seeded:
        return model
    import onnx
    from onnx import helper, numpy_helper

    m = onnx.ModelProto()
    m.CopyFrom(model)
    types = {vi.name: vi.type.tensor_type.elem_type for vi in (*m.graph.value_info, *m.graph.input,
                                                               *m.graph.output)}
    nodes = []
    for i, n in enumerate(m.graph.node):
        rec = seeded.get(i)
        if rec is None:
            nodes.append(n)
            continue
        for o, v in rec["const"].items():
            arr = np.asarray(v)
            if o in types and types[o]:
                arr = arr.astype(_np_dtype(types[o]))
            nodes.append(helper.make_node("Constant", [], [o], name=f"{n.name}/seeded/{o}",
                                          value=numpy_helper.from_array(arr, f"{o}/seeded")))
        if "mul" in rec:
            x, cn, scaled, out = rec["mul"]
            m.graph.initializer.append(numpy_helper.from_array(scaled.astype(_np_dtype(types.get(x) or 1)), cn))
            nodes.append(helper.make_node("Mul", [x, cn], [out], name=f"{n.name}/seeded"))
    del m.graph.node[:]
    m.graph.node.extend(nodes)
    return m
