"""The numerics check of an imported model against ONNX Runtime: every graph output, the intermediate tensors
both sides produce, and a flag on references that prove nothing (all zeros, constant).

* **Outputs** (:func:`judge`): the tolerance is a fraction of the output's largest magnitude, per run precision
  (``REL_TOL``; ``docs/decisions/0035-onnx-zoo-numerics.md``).  A reference that is all zeros or constant fails
  with a ``problem`` saying so: a model whose output does not depend on its input (random weights that zero it)
  would pass any lowering.
* **Intermediates** (:func:`check_intermediates`): ONNX Runtime's session is asked for the float tensors between
  the nodes (added to its graph's outputs), and each one the lowering also holds on the device is judged the same
  way (its own max magnitude, the run precision's tolerance; elements the run's type cannot hold - mask fills
  near the float range, beyond fp16's 65504 - left out).  An error inside a block that the layers after it
  damp below the output's tolerance (a zeroed weight, a wrong mask) fails there.  One record,
  ``intermediates``, holds the count, the worst tensor and the failing ones.
* **Seeded nodes** (``lowering/seeded.py``): ONNX Runtime runs the model with the values the run drew (Dropout
  masks, random ops), so the reference is as deterministic as the run.
"""

from __future__ import annotations

import numpy as np

from popvision_lite.emulator.ops.context import View

from .loader import LoadedModel, OnnxImportError

# Tolerance of an imported model's outputs, as a fraction of the output's largest magnitude (max |reference|),
# per run precision.  A whole network's output error is a sum of per-op rounding errors, each bounded by the
# unit roundoff times the size of the values the op handles, so it scales with the output's range, not with
# each element: an elementwise rtol judges near-zero elements by their own tiny size and fails correct runs.
# fp32: 2^-10 of the max, ~8,000 fp32 roundoffs (2^-23): room for the different summation orders and
# transcendental approximations of two correct implementations over tens of layers, four orders of magnitude
# below a lowering mistake (a wrong epsilon, a dropped bias, a wrong axis give errors of 1e-2 .. 1 of the max).
# fp16: 2^-5 of the max, 64 fp16 roundoffs (2^-11).  Beside it, when ONNX Runtime's own run of the model converted
# to fp16 is given, the record compares the two runs' RMS errors (``rms_err_vs_reference_fp16``): a measure, not a
# pass / fail bar, because the IPU rounds to fp16 at op boundaries ONNX Runtime fuses away (a matmul's or conv's
# output before its bias add, a scale before a mask add): docs/onnx.md "Numerics" has the measured ratios.
REL_TOL = {"fp32": 2.0 ** -10, "fp16": 2.0 ** -5}
# magnitudes the run's type holds: larger reference elements (the -inf / finfo.min fills of attention masks,
# which the run holds as its type's largest finite value) are left out of an intermediate's comparison
HOLDS = {"fp32": 1e30, "fp16": float(np.finfo(np.float16).max)}
# and the smallest normal magnitude it holds: an intermediate's error is judged against at least this (a tensor
# whose values all lie below it - activations decaying through random weights - is subnormal or zero in the run)
TINY = {"fp32": float(np.finfo(np.float32).tiny), "fp16": float(np.finfo(np.float16).tiny)}
# at most this many elements of intermediates are compared (the reference's and the run's float32 copies:
# 2 x 128 MB); past it, an evenly spaced subset of the tensors in graph order
INTERMEDIATE_ELEMENTS = 1 << 25


def degenerate(want) -> str | None:
    """'all zeros' / 'constant (V)' when the reference ``want`` cannot tell a right result from a wrong one."""
    if want.size == 0:
        return None
    if not np.any(want):
        return "all zeros"
    lo, hi = float(np.min(want)), float(np.max(want))
    if lo == hi and want.size > 1:
        return f"constant ({lo:g})"
    return None


def judge(name, got, want, precision: str, want16=None, rel=None) -> dict:
    """The numeric check of one output (``run["numeric_checks"][name]``): ``got`` against the fp32 reference
    ``want``, with the tolerance ``REL_TOL[precision]`` x max |want| on every element; in fp16, with ``want16``
    (the reference runtime's fp16 run), also the ratio of the two runs' RMS errors against ``want``.

    Reports max abs error, max abs error relative to the output's max (``max_rel_err``), the share of elements
    outside the tolerance and the RMS error; ``atol`` is the tolerance in absolute terms (``rtol`` 0: it is not
    elementwise).  A reference that is all zeros or constant fails (``problem``): it proves nothing."""
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    what = precision if rel is None else f"{precision}, 8-bit quantized model"
    rel = REL_TOL[precision] if rel is None else max(rel, REL_TOL[precision])
    base = dict(name=name, precision=precision, tolerance=f"{rel:.3g} x max |reference| ({what})", rtol=0.0)
    if got.shape != want.shape:
        return dict(base, passed=False, problem=f"shape {got.shape} != reference {want.shape}", atol=0.0,
                    max_abs_err=float("inf"), max_rel_err=float("inf"), outside_share=1.0)
    scale = float(np.abs(want).max()) if want.size else 0.0
    tol = rel * (scale if scale > 0 else 1.0)
    err = np.abs(got - want)
    finite = bool(np.all(np.isfinite(got)))
    max_abs = float(err.max()) if err.size else 0.0
    rms = float(np.sqrt(np.mean(err * err))) if err.size else 0.0
    outside = float(np.mean(~(err <= tol))) if err.size else 0.0
    rec = dict(base, atol=tol, scale=scale, max_abs_err=max_abs, max_rel_err=max_abs / (scale if scale > 0 else 1.0),
               rms_err=rms, outside_share=outside, elements=int(got.size), finite=finite)
    passed = finite and outside == 0.0
    flat = degenerate(want)
    if flat:
        rec["problem"] = (f"the reference is {flat}: a match proves nothing (does the output depend on the input? "
                          "random weights can zero it); give inputs or weights that vary it")
        passed = False
    if precision == "fp16" and want16 is not None:
        e16 = np.abs(np.asarray(want16, np.float64) - want)
        rms16 = float(np.sqrt(np.mean(e16 * e16))) if e16.size else 0.0
        rec.update(reference_fp16_rms_err=rms16, reference_fp16_max_abs_err=float(e16.max()) if e16.size else 0.0,
                   rms_err_vs_reference_fp16=rms / rms16 if rms16 > 0 else (1.0 if rms == 0 else float("inf")))
    rec["passed"] = bool(passed)
    return rec


def act_value(a, value_of) -> np.ndarray:
    """The logical (ONNX-shaped, row-major) float32 value of a lowered tensor ``a`` (an ``Act``) after the run;
    ``value_of(tensor)`` -> its flat array."""
    h = a.h
    if isinstance(h, View):
        flat = np.asarray(value_of(h.base)).reshape(-1)[h.index.reshape(-1)]
    else:
        flat = np.asarray(value_of(h)).reshape(-1)
    p = a.phys()
    if p is not None:
        flat = flat[p]
    return flat.astype(np.float32).reshape(a.shape)


def intermediate_candidates(low, lm: LoadedModel) -> list[str]:
    """Names of the node outputs the lowering holds on the device (float, not a graph output), in graph order,
    at most INTERMEDIATE_ELEMENTS elements in all (an evenly spaced subset past it)."""
    from .lowering import Act

    outs = set(lm.outputs)
    floats = {vi.name for vi in lm.model.graph.value_info
              if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type in (1, 10, 11, 16)}
    # a training step updates the weights in place: views of a weight read after the run hold the new values
    updated = {id(h) for k, h in low.handles.items() if k in low.params} if low.training else set()
    names, sizes = [], []
    for n in lm.model.graph.node:
        for o in n.output:
            v = low.vals.get(o) if o else None
            if isinstance(v, Act) and (id(v.h.base if isinstance(v.h, View) else v.h) in updated
                                       or id(v) in getattr(low, "incomparable", ())):
                continue
            if isinstance(v, Act) and o not in outs and o in floats and v.size:
                names.append(o)
                sizes.append(v.size)
    total = sum(sizes)
    if total > INTERMEDIATE_ELEMENTS:
        step = -(-total // INTERMEDIATE_ELEMENTS)
        names = names[::step]
    return names


def run_onnxruntime(lm: LoadedModel, feeds: dict, seeded=None, extra_outputs=()) -> dict:
    """ONNX Runtime's (CPU) values of the graph outputs and ``extra_outputs`` (intermediate tensors, added to the
    session's graph outputs) on ``feeds``; ``seeded``: the run's drawn values (``lowering/seeded.py``)."""
    try:
        import onnxruntime as ort
    except ImportError as e:
        raise OnnxImportError("the numerics check needs onnxruntime (pip install onnxruntime), or run with "
                              "--timing-only") from e
    from .lowering.seeded import reference_model

    model = reference_model(lm.model, seeded or {})
    g = model.graph
    info = {vi.name: vi for vi in g.value_info}
    have = {o.name for o in g.output}
    added = [info[n] for n in extra_outputs if n in info and n not in have]
    g.output.extend(added)
    try:
        data = model.SerializeToString()
    finally:
        if added:
            del g.output[len(g.output) - len(added):]
    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])
    del data
    names = [o.name for o in sess.get_outputs()]
    res = sess.run(names, {**feeds, **{k: lm.initializers[k] for k in lm.fed}})  # the weights: the same arrays
    return dict(zip(names, res, strict=True))


def judge_intermediates(low, got_of, ref: dict, names, precision: str, rel=None) -> dict:
    """One record over the intermediate tensors ``names`` both sides hold: each judged against ONNX Runtime's
    (``ref``) with ``REL_TOL[precision]`` x its own max |reference| (at least the run type's smallest normal,
    ``TINY``), leaving out reference elements the run's type cannot hold (``HOLDS``); constant references are
    counted, not judged.  ``got_of(name)`` -> the run's
    value."""
    rel = REL_TOL[precision] if rel is None else max(rel, REL_TOL[precision])
    big = HOLDS[precision]
    compared, constant, failed = 0, 0, []
    worst = (0.0, "", 0.0)
    for n in names:
        if n not in ref:
            continue
        want = np.asarray(ref[n], np.float64)
        got = np.asarray(got_of(n), np.float64)
        if got.shape != want.shape:
            failed.append((n, float("inf")))
            continue
        ok = np.isfinite(want) & (np.abs(want) < big)
        w, gt = want[ok], got[ok]
        if degenerate(w) or not w.size:
            constant += 1
            continue
        compared += 1
        scale = float(np.abs(w).max())
        abs_err = float(np.abs(gt - w).max()) if np.all(np.isfinite(gt)) else float("inf")
        err = abs_err / scale
        if err > worst[0] or not worst[1]:
            worst = (err, n, abs_err)
        if not abs_err <= max(rel * scale, TINY[precision]):
            failed.append((n, err))
    failed.sort(key=lambda t: -t[1])
    return dict(name="intermediates", precision=precision, passed=not failed,
                tolerance=f"{rel:.3g} x max |reference| of each tensor ({precision})", compared=compared,
                constant_references=constant, max_rel_err=worst[0], max_abs_err=worst[2], worst=worst[1],
                failed=[dict(name=n, max_rel_err=e) for n, e in failed[:20]], failed_count=len(failed),
                reference="onnxruntime (CPU): the node outputs the lowering also holds on the device")
