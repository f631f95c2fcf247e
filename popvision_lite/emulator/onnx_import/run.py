"""``emulate_onnx``: import an ONNX model, emulate it, check it against ONNX Runtime, write the profile."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from popvision_lite import input_files
from popvision_lite.emulator.backends.backend import NP_DTYPE
from popvision_lite.emulator.models.emulated import CARRIED_COPIES, tolerance
from popvision_lite.emulator.ops.context import View
from popvision_lite.emulator.progress import within
from popvision_lite.emulator.reference import numeric_check
from popvision_lite.emulator.run_result import RunResult
from popvision_lite.emulator.target import Target

from .host_memory import check_host_memory
from .loader import LoadedModel, OnnxImportError, dtype_info, load
from .lowering import Act, Lowerer
from .lowering.quantized import QUANT_REL_TOL
from .numerics import REL_TOL, act_value, intermediate_candidates, judge, judge_intermediates, run_onnxruntime
from .ops import OnnxEmulatorBackend, OnnxNumpyBackend

__all__ = ["REL_TOL", "build", "emulate_onnx", "judge", "make_inputs", "read_handles", "reference_numpy",
           "run_onnxruntime"]

def _gather_rows_of(lm: LoadedModel) -> dict:
    """Integer graph inputs used as Gather indices -> number of rows of the gathered table."""
    out = {}
    for n in lm.model.graph.node:
        if n.op_type == "Gather" and len(n.input) > 1 and n.input[1] in lm.inputs and n.input[0] in lm.initializers:
            ax = 0
            for a in n.attribute:
                if a.name == "axis":
                    ax = a.i
            out[n.input[1]] = int(lm.initializers[n.input[0]].shape[ax])
    return out


def read_inputs(user) -> dict:
    """{name: array} of the user's inputs: an .npz path or a dict ({} for None)."""
    if user is None:
        return {}
    if isinstance(user, str | Path):
        return input_files.read_npz(user, "inputs file (an .npz of arrays named after the model's inputs)",
                                    error=lambda problem: OnnxImportError(f"{user}: {problem}"))
    return dict(user)


def make_inputs(lm: LoadedModel, seed: int, precision: str, user=None, needs_values=True) -> dict:
    """Values of every graph input in the ONNX dtype: the user's (an .npz path or a dict) or seeded:
    floats ~ N(0, 1) rounded to the run's precision, integer Gather indices uniform over the table's
    rows, other integers (attention masks) ones, booleans True."""
    given = read_inputs(user)
    if user is not None:
        extra = sorted(set(given) - set(lm.inputs))
        if extra:
            raise OnnxImportError(f"inputs: {', '.join(extra)}: the model has no such input "
                                  f"(inputs: {', '.join(lm.inputs)})")
    rng = np.random.default_rng(seed)
    rows = _gather_rows_of(lm)
    vals = {}
    for name, (shape, et) in lm.inputs.items():
        npdt = dtype_info(et)[0]
        if name in given:
            v = np.asarray(given[name])
            if tuple(v.shape) != tuple(shape):
                raise OnnxImportError(f"inputs: '{name}' has shape {tuple(v.shape)}, the model expects {shape}")
            vals[name] = v.astype(npdt)
        elif np.issubdtype(npdt, np.floating):
            if needs_values:
                v = rng.standard_normal(shape).astype(NP_DTYPE[precision]).astype(np.float32)
            else:
                v = np.broadcast_to(np.float32(0), shape)
            vals[name] = v.astype(npdt) if npdt != np.float32 else v
        elif name in rows:
            vals[name] = np.random.default_rng(seed + 7).integers(0, rows[name], size=shape).astype(npdt)
        else:
            vals[name] = np.ones(shape, dtype=npdt)
    return vals


def build(lm: LoadedModel, be, input_values: dict, ipus: int = 1, progress=None, training=False, loss_output=None,
          lr=0.01, ipu_split=None, recompute=False, outline=False, seed=0):
    """Lower ``lm`` onto backend ``be``; returns (lowerer, {output name: (handle, shape)}); with
    ``training`` also the backward pass and SGD step, the updated weights as ``weight:NAME`` entries;
    ``outline``: repeated blocks emulated as calls of one body (timing-only inference, ``lowering/outline.py``)."""
    low = Lowerer(be, lm, input_values, ipus=ipus, training=training, ipu_split=ipu_split, recompute=recompute,
                  outline=outline, seed=seed)
    if recompute and training and not low.blocks:
        raise OnnxImportError(f"{lm.path}: --recompute: no repeated blocks found (node names or torch.export scopes "
                              "ending in a layer number, e.g. '/encoder/layer.0/...'); run without --recompute")
    outs = low.run(progress)
    updated = {}
    if training:
        with be.on_ipu(int(low.ipu_of[-1]) if len(low.ipu_of) else 0):
            updated = low.backward(outs, loss_output=loss_output, lr=lr)
    handles = {}
    for name, v in outs.items():
        if not isinstance(v, Act):
            continue  # a constant output (folded): nothing runs on the device
        a = low.plain(v)
        h = a.h
        if isinstance(h, View) or tuple(h.shape) != tuple(a.shape) and h.size != a.size:
            with be.on_ipu(int(low.ipu_of[-1]) if len(low.ipu_of) else 0):
                h = be.copy(h, f"{name}/output")
        handles[name] = (h, a.shape, None)
    for name, h in updated.items():
        orig, post = _original_weight(name, lm)
        handles[f"weight:{orig}"] = (h, tuple(np.shape(h)), post)
    return low, handles


def _original_weight(name, lm):
    """(initializer name, fn: updated array -> the initializer's layout) of a lowered weight: Gemm's
    transB weights are stored transposed (``/T``), biases and norm scales flattened (``/vec``, ``/flat``)."""
    if "/conv_transpose/" in name:
        return _conv_transpose_weight(name, lm)
    for sfx in ("/T", "/vec", "/flat", "/hwio"):
        if name.endswith(sfx) and name[: -len(sfx)] in lm.initializers:
            orig = name[: -len(sfx)]
            shape = lm.initializers[orig].shape
            if sfx == "/T":
                return orig, lambda v, shape=shape: v.reshape(shape[::-1]).T
            if sfx == "/hwio":  # conv weights (Co, C, kh, kw) / (Co, C, k) stored as (kh * kw * C, Co) for im2col
                co, c, kh, kw = shape if len(shape) == 4 else (shape[0], shape[1], 1, shape[2])
                return orig, lambda v, s=(kh, kw, c, co), shape=shape: v.reshape(s).transpose(3, 2, 0, 1).reshape(shape)
            return orig, lambda v, shape=shape: v.reshape(shape)
    orig = name
    while orig not in lm.initializers and any(orig.endswith(x) for x in ("/vec", "/flat", "/nchw")):
        orig = orig.rsplit("/", 1)[0]  # reshaped copies (biases broadcast over channels, flattened scales)
    if orig in lm.initializers:
        shape = lm.initializers[orig].shape
        return orig, lambda v, shape=shape: v.reshape(shape)
    return name, None


def _conv_transpose_weight(name, lm):
    """(initializer name, fn) of a ConvTranspose weight (Ci, Co / g, k...), lowered as the equivalent Conv's
    (``lowering/resample.py``: per group in / out swapped, the kernel flipped; named ``W/conv_transpose/gG``)
    in the Conv's stored layout: ``/hwio`` (kh * kw * Ci, Co) for one group, ``/groups`` (g, kh * kw * Ci / g,
    Co / g) for more."""
    orig, rest = name.split("/conv_transpose/")
    g = int(rest.split("/")[0][1:])
    shape = lm.initializers[orig].shape
    cin, cog, k = shape[0], shape[1], shape[2:]
    kh, kw = (1, k[0]) if len(k) == 1 else k

    def post(v):
        if g > 1:
            wc = v.reshape(g, kh, kw, cin // g, cog).transpose(0, 4, 3, 1, 2).reshape(g * cog, cin // g, kh, kw)
        else:
            wc = v.reshape(kh, kw, cin, cog).transpose(3, 2, 0, 1)
        w = wc[..., ::-1, ::-1].reshape(g, cog, cin // g, kh, kw).swapaxes(1, 2)
        return np.ascontiguousarray(w).reshape(shape)
    return orig, post


def _read_after(handles, low, lm: LoadedModel, reference: bool) -> set:
    """Names of the tensors read after the run: the outputs (``handles``) and, with ``reference``, the
    intermediate tensors the numerics check compares (:func:`check_numerics`); the run frees the others' data
    after their last use."""
    def base(h):
        return h.base if isinstance(h, View) else h
    names = {base(h).name for h, _shape, _post in handles.values()}
    if reference:
        names |= {base(low.vals[n].h).name for n in intermediate_candidates(low, lm)}
    return names


def read_handles(handles, value_of) -> dict:
    """{name: float32 array in the ONNX layout} of build()'s handles; ``value_of(handle)`` -> array."""
    out = {}
    for k, (h, shape, post) in handles.items():
        v = np.asarray(value_of(h)).reshape(shape).astype(np.float32)
        out[k] = post(v) if post is not None else v
    return out


# training at scale (the multi-IPU emulator's options) that apply to an imported model: it runs on the
# whole-graph path (pipeline.compose_whole_graph), as the bundled mlp / conv / gnn do.  Pipelined schedules
# (pipeline_stages, layer_split) and BERT's packing / mask_tokens need the bundled stage programs.
SCALE_DEFAULTS = dict(replicas=1, grad_accum=1, optimizer="sgd", optimizer_state="onchip", optimizer_state_dtype="fp32",
                      master_weights=False, rts=False)
TRAINING_STATE = ("grad_accum", "optimizer", "optimizer_state", "optimizer_state_dtype", "master_weights", "rts")
_CHOICES = {"optimizer": ("sgd", "momentum", "adam", "lamb", "lars"), "optimizer_state": ("onchip", "offchip"),
            "optimizer_state_dtype": ("fp16", "fp32")}


def check_scale(ipus, scale: dict, training: bool, available_memory_proportion=None) -> int:
    """Check the at-scale settings of an ONNX run (OnnxImportError naming the field); returns the IPUs
    of one replica."""
    from popvision_lite.errors import ConfigError
    from popvision_lite.value_checks import MODEL_LIMITS, check_number

    try:
        for name in ("replicas", "grad_accum"):
            check_number(name, scale[name], *MODEL_LIMITS[name], integer=True)
            if not isinstance(scale[name], int):
                raise ConfigError(f"{name}: expected an integer, got {scale[name]!r}")
        if available_memory_proportion is not None:
            check_number("available_memory_proportion", available_memory_proportion,
                         *MODEL_LIMITS["available_memory_proportion"])
    except ConfigError as e:
        raise OnnxImportError(str(e)) from None
    for name, ok in _CHOICES.items():
        if scale[name] not in ok:
            raise OnnxImportError(f"{name}: must be one of {', '.join(ok)}, got {scale[name]!r}")
    for name in ("master_weights", "rts"):
        if not isinstance(scale[name], bool):
            raise OnnxImportError(f"{name}: must be true or false, got {scale[name]!r}")
    if not training:
        for name in TRAINING_STATE:
            if scale[name] != SCALE_DEFAULTS[name]:
                raise OnnxImportError(f"{name}: only with training (--training): an inference run has no "
                                      "gradients to accumulate and no optimizer step")
    R = scale["replicas"]
    if ipus % R:
        raise OnnxImportError(f"replicas: {R} replicas do not divide {ipus} IPUs (ipus = replicas x IPUs per "
                              "replica)")
    return ipus // R


def samples_per_micro_batch(lm: LoadedModel, batch) -> int:
    """Samples one run of the graph processes: the --batch value, else the first graph input's first
    dimension (1 for a scalar input)."""
    if batch is not None:
        return int(batch)
    for shape, _ in lm.inputs.values():
        return int(shape[0]) if len(shape) else 1
    return 1


def emulate_onnx(path, output=None, *, batch=None, seq=None, dims=None, device="ipu-mk2", precision="fp16",
                 timing_only=False, ipus=None, seed=0, inputs=None, progress=None, reference=True, training=False,
                 loss_output=None, lr=0.01, ipu_split=None, replicas=1, grad_accum=1, optimizer="sgd",
                 optimizer_state="onchip", optimizer_state_dtype="fp32", master_weights=False, rts=False,
                 available_memory_proportion=None, reference_fp16=None, recompute=False, outline=True) -> RunResult:
    """Import the ONNX model at ``path`` and emulate one inference step on ``device``.

    ``batch`` / ``seq`` / ``dims`` ({name: value}) fix symbolic input dims; ``inputs`` is an .npz path
    or a dict of arrays (default: seeded random); in full numerics (``timing_only=False``) every graph
    output is compared with ONNX Runtime (CPU) on the same inputs (``run.numeric_checks``, :func:`judge`: a
    tolerance scaled by the output's max magnitude, ``REL_TOL`` per precision; ``reference_fp16`` ({output:
    array}, ONNX Runtime's run of the model converted to fp16) adds the ratio of the two fp16 runs' errors).  ``training``: also the backward pass of loss = mean of
    ``loss_output`` (default: the sum of the means of all outputs) and an SGD step (``lr``) on every
    float initializer that gets a gradient; the updated weights are checked against the same lowering
    run on the numpy reference backend (ONNX Runtime does not train).  Writes the profile to ``output``
    when given (also when the model does not fit: then numerics are skipped).

    At scale (the bundled models' options, on the whole-graph path as for mlp / conv / gnn): ``ipus`` is the
    total (default ``replicas``): ``replicas`` data-parallel copies of ``ipus / replicas`` IPUs each (nodes placed
    over those); with ``training``, ``grad_accum`` micro-batches per step, ``optimizer`` (sgd, momentum, adam,
    lamb, lars), ``optimizer_state`` on- or off-chip, ``optimizer_state_dtype``, ``master_weights``, ``rts``: step
    time, all-reduce, optimizer and training state in tile memory come from ``pipeline.compose_whole_graph``.
    ``available_memory_proportion``: Poplar's share of tile memory for matmul temporaries (default 0.6).
    ``run.samples_per_second`` and ``run.schedule`` as for the bundled models.  ``recompute`` (with ``training``):
    each repeated block (``lowering.find_blocks``: the layers) is lowered again in the backward pass from its
    inputs, so its forward activations are not kept (activation checkpointing).  ``outline`` (timing-only inference
    on one IPU per replica): each distinct repeated block is emulated once and the others are calls of it
    (``lowering/outline.py``); the same cycles and memory, a fraction of the CPU."""
    from popvision_lite.emulator.engine import Engine

    def tick(stage, frac):
        if progress:
            progress(stage, frac)

    scale = dict(replicas=replicas, grad_accum=grad_accum, optimizer=optimizer, optimizer_state=optimizer_state,
                 optimizer_state_dtype=optimizer_state_dtype, master_weights=master_weights, rts=rts)
    ipus, per_replica = _check_settings(precision, training, recompute, ipus, scale, available_memory_proportion)
    wall = {}
    t0 = time.perf_counter()
    tick("reading ONNX model", 0.0)
    given = read_inputs(inputs)
    lm = load(path, batch=batch, seq=seq, dims=dims, input_shapes={k: np.shape(v) for k, v in given.items()})
    check_host_memory(lm, training, timing_only, per_replica, outline)  # before the graph is built
    wall["import"] = time.perf_counter() - t0
    values = make_inputs(lm, seed, precision, given if inputs is not None else None, needs_values=not timing_only)
    tick("building graph", 0.05)
    t1 = time.perf_counter()
    target = _target(device, per_replica)
    be = OnnxEmulatorBackend(target, precision, needs_values=not timing_only,
                             available_memory_proportion=available_memory_proportion)
    low, handles = build(lm, be, values, ipus=per_replica, progress=lambda f: tick("building graph", 0.05 + 0.25 * f),
                         training=training, loss_output=loss_output, lr=lr, ipu_split=ipu_split, recompute=recompute,
                         outline=outline, seed=seed)
    be.built()
    wall["build"] = time.perf_counter() - t1
    tick("compiling and running", 0.3)
    model_name = "onnx:" + Path(path).name
    config = {"onnx": str(path), "dims": lm.dims, "device": device, "precision": precision, "ipus": int(ipus),
              "seed": int(seed), "timing_only": bool(timing_only), "training": bool(training),
              "loss_output": loss_output, "lr": float(lr), "ipu_split": list(ipu_split or []),
              "dtype_casts": list(lm.casts), "batch": batch, "seq": seq, **scale,
              "available_memory_proportion": available_memory_proportion, "recompute": bool(recompute),
              **({} if outline else {"outline": False})}  # written only when not the default (older configs)
    eng = Engine(be.graph, be.program(), mode="timing" if timing_only else "full", model=model_name, config=config,
                 carried_copies=CARRIED_COPIES)
    res = eng.run(inputs=None if timing_only else be.inputs, profile_path=None, allow_out_of_memory=True,
                  compile_progress=within(tick, "compiling and running", 0.3, 0.75),
                  keep=None if timing_only else _read_after(handles, low, lm, reference))
    be.inputs.clear()  # written into the run's tensors: one copy of each weight per dtype from here on
    wall.update(res.wall)
    checks, got, ref = {}, {}, {}
    if res.fits and not timing_only:
        tick("checking numerics against ONNX Runtime", 0.8)
        got = read_handles(handles, lambda h: res.outputs[h.name])
        if reference:
            t2 = time.perf_counter()
            ref, checks = check_numerics(lm, values, got, precision, training=training, loss_output=loss_output,
                                         lr=lr, reference_fp16=reference_fp16, low=low,
                                         value_of=lambda t: res.outputs[t.name], seed=seed)
            wall["reference"] = time.perf_counter() - t2
    pd_ = res.profile_data
    _record_run(pd_, model_name, checks, low, config)
    fits, total, seconds, oom = res.fits, int(res.total_cycles), float(res.seconds), eng.compile().oom_report
    schedule, sps, composed = _schedule(lm, batch, ipus, scale, training, precision, be, res, pd_)
    if composed:  # the training state joined the memory; the step is the composed one
        fits, total, seconds = composed
        oom = _oom_from_memory(pd_, target) if not fits else []
    pd_.run["schedule"] = schedule
    pd_.run["samples_per_second"] = float(sps)
    if output:
        tick("writing profile", 0.9)
        wall["write"] = _write(output, pd_)
    tick("done", 1.0)
    return RunResult(path=str(path), fits=fits, total_cycles=total, seconds=seconds,
                     profile_data=pd_, numeric_checks=checks, oom_report=oom, wall=wall,
                     num_vertices=sum(g.n for g in be.graph.groups), num_ops=len(be.ctx.records), dims=lm.dims,
                     casts=list(lm.casts), notes=list(low.notes), outputs=got, reference=ref,
                     profile_path=str(output) if output else None, config=config,
                     weight_bytes_per_ipu=list(low.weight_bytes_per_ipu), samples_per_second=float(sps),
                     schedule=schedule)


def _check_settings(precision, training, recompute, ipus, scale, available_memory_proportion) -> tuple[int, int]:
    """(total IPUs, IPUs per replica) of a run's settings, checked (OnnxImportError naming the field); ``ipus``
    None: one IPU per replica."""
    if recompute and not training:
        raise OnnxImportError("recompute: only with training (--training): inference keeps no activations for a "
                              "backward pass")
    if precision not in ("fp16", "fp32"):
        raise OnnxImportError(f"precision: must be fp16 or fp32, got {precision!r}")
    if ipus is None:
        r = scale["replicas"]
        ipus = r if isinstance(r, int) and not isinstance(r, bool) and r > 0 else 1
    return ipus, check_scale(ipus, scale, training, available_memory_proportion)


def _target(device, ipus_per_replica) -> Target:
    """The device of one replica (OnnxImportError naming ``device`` when it is not known)."""
    try:
        return Target.from_device(device, num_ipus=ipus_per_replica)
    except Exception as e:
        raise OnnxImportError(f"device: {e}") from None


def check_numerics(lm: LoadedModel, values: dict, got: dict, precision: str, *, training=False, loss_output=None,
                   lr=0.01, reference_fp16=None, low=None, value_of=None, seed=0) -> tuple[dict, dict]:
    """(ONNX Runtime's outputs, {name: numeric check}) of an emulated run's outputs ``got``: every graph output
    against ONNX Runtime on the same inputs (:func:`numerics.judge`); with the run's lowerer ``low`` and
    ``value_of(tensor)`` (its values after the run), the intermediate tensors both hold (one ``intermediates``
    record, :func:`numerics.judge_intermediates`) and the run's seeded values fed to ONNX Runtime; with
    ``training`` every updated weight (``weight:NAME``) against the same lowering run on the numpy reference
    backend (elementwise tolerance)."""
    checks = {}
    quant = QUANT_REL_TOL if getattr(low, "quantized", False) else None  # run in float: 8-bit rounding allowed
    names = intermediate_candidates(low, lm) if low is not None and value_of is not None else []
    ref = run_onnxruntime(lm, values, seeded=getattr(low, "seeded", None), extra_outputs=names)
    if training:
        rtol, atol = tolerance(precision)  # the updated weights: same lowering, elementwise
        nb = OnnxNumpyBackend(precision)
        _, nh = build(lm, nb, values, training=True, loss_output=loss_output, lr=lr, seed=seed)
        ref_w = read_handles(nh, nb._val)
        for name in got:
            if name.startswith("weight:"):
                c = numeric_check(name, got[name], ref_w[name], rtol, atol)
                c["reference"] = "numpy reference backend (same lowering)"
                checks[name] = c
    for name in got:
        if name.startswith("weight:"):
            continue
        want = np.asarray(ref[name], dtype=np.float32)
        c = judge(name, got[name], want, precision, (reference_fp16 or {}).get(name), rel=quant)
        c["reference"] = "onnxruntime (CPU)" + (", and its fp16 run" if "reference_fp16_rms_err" in c else "")
        checks[name] = c
    if names:
        checks["intermediates"] = judge_intermediates(low, lambda n: act_value(low.vals[n], value_of), ref, names,
                                                      precision, rel=quant)
    for n in names:
        ref.pop(n, None)
    return ref, checks


def _record_run(pd_, model_name, checks, low, config):
    """The run record's numeric checks, model name, outlined blocks and config."""
    pd_.run["numeric_checks"] = checks
    pd_.run["model"] = model_name
    if low.notes:  # what the run did that a user must know (seeded random values, casts, emulated-as notes)
        pd_.run["notes"] = list(low.notes)
    if low.outliner is not None and low.outliner.calls:
        pd_.run["outlined_blocks"] = dict(blocks=len(low.outliner.blocks), calls=int(low.outliner.calls),
                                          lowered=len(low.outliner.made))
    config["weight_bytes_per_ipu"] = list(low.weight_bytes_per_ipu)
    pd_.run.setdefault("config", config)


def _write(output, pd_) -> float:
    """Write the profile to ``output``; returns the seconds it took."""
    from popvision_lite.profile.writer import write_profile

    t = time.perf_counter()
    write_profile(output, pd_)
    return time.perf_counter() - t


def _oom_from_memory(pd_, target) -> list:
    """(tile, ipu, bytes, capacity) of every tile over capacity in the profile's memory, fullest first."""
    need = np.asarray(pd_.memory).sum(axis=(1, 2))
    cap = target.sram_bytes_per_tile
    over = np.nonzero(need > cap)[0]
    T = target.tiles_per_ipu
    return [(int(t), int(t // T), int(need[t]), int(cap)) for t in over[np.argsort(-need[over], kind="stable")]]


def _schedule(lm, batch, ipus, scale, training, precision, be, res, pd_):
    """(schedule, samples per second, None or (fits, step cycles, step seconds)) of an ONNX run, shaped as
    a bundled model's.  Training with replicas, accumulation or training-state options composes the step with
    ``whole_graph.compose_whole_graph`` (the bundled mlp / conv / gnn path: the emulated graph is one micro-batch
    of one replica, its SGD update included; the training state is added to the profile's memory);
    otherwise one run of the graph is the step, on each of ``replicas`` data-parallel copies."""
    from types import SimpleNamespace

    mb = samples_per_micro_batch(lm, batch)
    R = scale["replicas"]
    if training and any(scale[k] != SCALE_DEFAULTS[k] for k in SCALE_DEFAULTS):
        from popvision_lite.emulator.models.whole_graph import compose_whole_graph

        cfg = SimpleNamespace(model="onnx", batch=mb, ipus=int(ipus), precision=precision, packing=1.0, **scale)
        schedule, fits, _ = compose_whole_graph(cfg, be, res, pd_)
        sec = float(schedule["step_seconds"])
        sps = schedule["samples_per_step"] / sec if sec > 0 else 0.0
        return schedule, sps, (bool(fits), int(schedule["step_cycles"]), sec)
    sec = float(res.seconds)
    samples = float(R * mb)
    note = "one graph over the IPUs of a replica, one batch, no pipelining"
    if R > 1:
        note += f"; {R} data-parallel replicas run it side by side" + ("" if training else " (inference: no all-reduce)")
    schedule = dict(stages=be.graph.target.num_ipus, replicas=R, grad_accum=1, micro_batch=mb, samples_per_step=samples,
                    step_seconds=sec, steady_cycles_per_microbatch=int(res.total_cycles),
                    stage_cycles=[int(res.total_cycles)], optimizer_cycles=0, allreduce_cycles=0, stream_cycles=0,
                    fill_drain_cycles=0, step_cycles=int(res.total_cycles), note=note)
    return schedule, (samples / sec if sec > 0 else 0.0), None


def reference_numpy(path, *, batch=None, seq=None, dims=None, precision="fp16", seed=0, inputs=None,
                    training=False, loss_output=None, lr=0.01) -> dict:
    """The same lowering executed eagerly with the numpy reference backend (for tests: lowering errors
    show against ONNX Runtime, emulator errors against this)."""
    given = read_inputs(inputs)
    lm = load(path, batch=batch, seq=seq, dims=dims, input_shapes={k: np.shape(v) for k, v in given.items()})
    values = make_inputs(lm, seed, precision, given if inputs is not None else None)
    be = OnnxNumpyBackend(precision)
    _, handles = build(lm, be, values, training=training, loss_output=loss_output, lr=lr)
    return read_handles(handles, be._val)
