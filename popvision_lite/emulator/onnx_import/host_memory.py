"""Host memory of emulating an imported ONNX model, estimated from the loaded model (its initializers and the value
shapes shape inference gave) before the graph is built, and the pre-check of ``emulate --onnx`` against half of
this machine's memory (the bundled models' check, emulator/models/host_memory.py, with its own terms).

Terms (counts of the loaded model): ``weights``, the initializers' elements (held as arrays, and lowered onto
tiles); ``activations``, the elements of every value the graph computes (a repeated layer body is lowered once
and called, so this over-counts a deep model by its depth: the coefficient is fitted on such models);
``backward``, the same again for a training step.  Coefficients to be *calibrated* as the bundled models' are
(bench/host_memory.py, its ONNX rows); not fitted yet (see COEFFICIENTS).
"""

from __future__ import annotations

import math

from popvision_lite.emulator.models.host_memory import Estimate, refuse_past_half

from .loader import LoadedModel, OnnxImportError

# bytes per unit of each term (``base``: the interpreter, its libraries, onnx and the import).  NOT fitted: two
# named rows for four unknowns (bench/host_memory.py --fit), and the activations count does not follow the peaks
# (a sequence 3.75x longer: 3.75x the count, 1.3x the peak); first guesses, 0.39-14x the peaks (docs/performance.md)
COEFFICIENTS = {"base": 0.25e9, "weights": 4.0, "activations": 6.0, "backward": 6.0}


def terms(lm: LoadedModel, training: bool) -> dict[str, float]:
    """The counts of the estimate (see the module's text)."""
    weights = float(sum(a.size for a in lm.initializers.values()))
    acts = 0.0
    for vi in list(lm.model.graph.value_info) + list(lm.model.graph.output):
        dims = vi.type.tensor_type.shape.dim
        if dims and all(d.HasField("dim_value") for d in dims):
            acts += math.prod(d.dim_value for d in dims)
    acts += sum(math.prod(shape) for shape, _ in lm.inputs.values())
    return {"weights": weights, "activations": acts, "backward": acts if training else 0.0}


def estimate(lm: LoadedModel, training: bool, timing_only: bool) -> Estimate:
    """The estimated peak host memory of emulating the loaded model (``timing_only`` is accepted for symmetry with
    the bundled models' estimate; the imported path's values are small beside its graph)."""
    counts = terms(lm, training)
    est = {k: (v, COEFFICIENTS[k] * v) for k, v in counts.items()}
    total = COEFFICIENTS["base"] + sum(b for _, b in est.values())
    field = "batch" if max(est, key=lambda k: est[k][1]) != "weights" else "onnx"
    return Estimate(int(total), "onnx", est, field)


def check_host_memory(lm: LoadedModel, training: bool, timing_only: bool) -> None:
    """OnnxImportError when emulating the loaded model needs more than half of this machine's memory."""
    refuse_past_half(estimate(lm, training, timing_only), "use a smaller batch or sequence (--batch, --seq, --dim)",
                     error=OnnxImportError)
