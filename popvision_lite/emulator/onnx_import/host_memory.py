"""Host memory of emulating an imported ONNX model, estimated from the loaded model (its nodes, initializers and the
value shapes shape inference gave) before the graph is built, and the pre-check of ``emulate --onnx`` against half
of this machine's memory (the bundled models' check, emulator/models/host_memory.py, with its own terms).

What the run holds (measured, docs/performance.md "Host memory of an emulation"): the interpreter, its libraries
and onnx; the weights, held as arrays and lowered; the values the lowered nodes compute (their tensors, mappings and
the vertices over them); the profile's per-step figures of every executed node; and in a training step the
gradients, update and training state of each trained weight.  Terms (counts of the loaded model, :func:`terms`):

* ``steps``: the nodes the run executes - every node (x 2 in training: each has a backward), outlined calls
  included: the profile holds each executed program step's per-tile figures, so a called block costs memory too.
* ``activations``: the elements of the values the lowered nodes compute (x 2 in training: each has a gradient).
  A timing-only inference on one IPU per replica is outlined (lowering/outline.py: each distinct repeated block
  lowered once, the others called), so a repeated block whose body an earlier block had is not counted again:
  without that, a 12-layer BERT-base counted 12 layers' activations and the estimate was 6-14x the peak.
* ``weights``: the initializers' elements.
* ``trained``: in a training step, the elements of the float initializers that get a dense gradient (all but
  the tables Gather reads rows of): their gradients, update and the training state's arrays.

Coefficients: *calibrated* (no public figure says how many bytes a vertex of this emulator takes), least squares
on the named ONNX rows of ``bench/host_memory.py`` (FIT_ROWS), judged on its other ONNX rows and by leave-one-out
(docs/performance.md, decision 0260).
"""

from __future__ import annotations

import math

from popvision_lite.emulator.models.host_memory import Estimate, refuse_past_half

from .loader import LoadedModel, OnnxImportError
from .lowering.blocks import find_blocks

# bytes per unit of each term (``base``: what every run of the path holds).  *Calibrated*: bench/host_memory.py
# --fit on its ONNX FIT_ROWS (docs/performance.md "Host memory of an emulation", 2026-12-06).
COEFFICIENTS = {"base": 256.2e6, "steps": 52.21e3, "activations": 0.9078, "weights": 2.591, "trained": 20.54}


def _static_elements(vi) -> int:
    dims = vi.type.tensor_type.shape.dim
    if dims and all(d.HasField("dim_value") for d in dims):
        return math.prod(d.dim_value for d in dims)
    return 0


def lowered_nodes(lm: LoadedModel, outlined: bool, size: dict) -> list[int]:
    """Indices of the nodes the lowering builds: every node, or, ``outlined``, every node outside a repeated
    block and the nodes of each block whose body (op types and output sizes, ``size``: elements by value name)
    no earlier block had (blocks.find_blocks; the outliner's own signature also compares wiring and attributes)."""
    nodes = lm.model.graph.node
    if not outlined:
        return list(range(len(nodes)))
    keep, seen, pos = [], set(), 0
    for s, e in find_blocks(nodes):
        keep += range(pos, s)
        body = tuple((n.op_type, n.domain, tuple(size.get(o, 0) for o in n.output)) for n in nodes[s:e])
        if body not in seen:
            seen.add(body)
            keep += range(s, e)
        pos = e
    return keep + list(range(pos, len(nodes)))


def terms(lm: LoadedModel, training: bool, outlined: bool = False) -> dict[str, float]:
    """The counts of the estimate (see the module's text); ``outlined``: the run outlines repeated blocks
    (timing-only inference on one IPU per replica)."""
    g = lm.model.graph
    size = {vi.name: _static_elements(vi) for vi in list(g.value_info) + list(g.output)}
    keep = lowered_nodes(lm, outlined and not training, size)
    acts = float(sum(size.get(o, 0) for i in keep for o in g.node[i].output if o))
    acts += sum(math.prod(shape) for shape, _ in lm.inputs.values())
    twice = 2.0 if training else 1.0
    tables = {n.input[0] for n in g.node if n.op_type == "Gather" and n.input}
    trained = sum(a.size for k, a in lm.initializers.items() if k not in tables and a.dtype.kind == "f") \
        if training else 0
    return {"steps": twice * len(g.node), "activations": twice * acts,
            "weights": float(sum(a.size for a in lm.initializers.values())), "trained": float(trained)}


def estimate(lm: LoadedModel, training: bool, timing_only: bool, ipus_per_replica: int = 1,
             outline: bool = True) -> Estimate:
    """The estimated peak host memory of emulating the loaded model (*calibrated*, see the module's text);
    ``outline``, ``ipus_per_replica``: as the run is asked (emulate_onnx), which decide whether it outlines."""
    counts = terms(lm, training, outlined=outline and timing_only and ipus_per_replica == 1)
    est = {k: (v, COEFFICIENTS[k] * v) for k, v in counts.items()}
    total = COEFFICIENTS["base"] + sum(b for _, b in est.values())
    field = "onnx" if max(est, key=lambda k: est[k][1]) in ("weights", "steps", "trained") else "batch"
    return Estimate(int(total), "onnx", est, field)


def check_host_memory(lm: LoadedModel, training: bool, timing_only: bool, ipus_per_replica: int = 1,
                      outline: bool = True) -> None:
    """OnnxImportError when emulating the loaded model needs more than half of this machine's memory."""
    refuse_past_half(estimate(lm, training, timing_only, ipus_per_replica, outline),
                     "use a smaller batch or sequence (--batch, --seq, --dim)", error=OnnxImportError)
