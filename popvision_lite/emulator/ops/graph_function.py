"""Graph functions: one body of programs for every call of an op with the same signature.

Graphcore's TensorFlow builds each convolution and each norm whose operands have the same shapes and
types once, as a ``poputil::graphfn`` function, and calls it wherever the model uses that op again
(graphcore/tensorflow, ``driver/ops/conv_graph_caching.cc``, ``norm_graph_caching``: the cache key is the
operands' signatures, not their layouts).  Every call copies its arguments into the function's parameters,
clones of the first call's arguments, and copies its results out to new tensors (poplibs,
``lib/poputil/GraphFunction.cpp``, ``VoidFunction::operator()``); the body's code, vertices and exchange
code exist once.

Here the first call adds its argument copies, the body and its result copies in place; a later call is one
Sequence of its argument copies, the first call's body programs (the same program objects, so the compile
charges their code once) and its result copies, with ``call_args`` = the parameters, which liveness treats as
written when the call starts."""

from __future__ import annotations

from popvision_lite.emulator import programs as P
from popvision_lite.emulator.ops.common import materialize


def signature(t) -> tuple:
    """What a graph function's cache key holds of an operand: its shape and element type."""
    return tuple(int(s) for s in t.shape), str(t.dtype)


def call(ctx, cache: dict, key, body, args: list, name: str) -> tuple:
    """Run ``body(*params)`` as a call of the graph function ``key``: built on the first call (its programs
    added in place), called again after that.  Returns the call's results (new tensors)."""
    op = ctx.begin_op(f"{name}/call", "call", plan="graph function call: arguments copied in, results "
                      "copied out (poputil::graphfn)")
    args = [materialize(ctx, a, f"arg{i}", op) for i, a in enumerate(args)]
    entry = cache.get(key)
    if entry is None:
        params = [ctx.variable(f"{name}/param{i}", a.shape, a.dtype, mapping=a.mapping, op=op)
                  for i, a in enumerate(args)]
    else:
        params, outs, programs = entry
    # an argument nothing has used yet (a weight) is allocated with the layout the body gives its parameter, as
    # TensorFlow's allocation finder lets the consuming op allocate it (poplin::createWeights for a kernel): on the
    # first call the body is built before the argument copies are added, so its parameters are still unused
    fresh = [not ctx.is_used(a) for a in args]
    if entry is None:
        ctx.mark_used(*(p for p, unused in zip(params, fresh, strict=True) if not unused))  # clones keep it
        start = len(ctx.programs)
        outs = body(*params)
        outs = outs if isinstance(outs, tuple) else (outs,)
        body_programs = ctx.programs[start:]
        del ctx.programs[start:]
    for a, p, unused in zip(args, params, fresh, strict=True):
        if unused:
            ctx.graph.set_mapping(a, p.mapping)
    copies = [P.Copy(a.whole(), p.whole(), name=f"{op}/copy_arg{i}", op=op)
              for i, (a, p) in enumerate(zip(args, params, strict=True))]
    if entry is None:
        for c in copies:
            ctx.add(c)
        ctx.programs.extend(body_programs)  # (noted when the body added them)
        cache[key] = (params, outs, list(body_programs))
    results = [ctx.variable(f"{name}/result{i}", o.shape, o.dtype, mapping=o.mapping, op=op) for i, o in enumerate(outs)]
    out_copies = [P.Copy(o.whole(), r.whole(), name=f"{op}/copy_result{i}", op=op)
                  for i, (o, r) in enumerate(zip(outs, results, strict=True))]
    if entry is None:
        for c in out_copies:
            ctx.add(c)
    else:
        # the whole call is one replay (named so: the programs table counts the body's ops once more per call,
        # analysis/model_pass.py); its parameters are written as it starts
        ctx.add(P.Sequence([*copies, *programs, *out_copies], name=f"{op}/replay", call_args=params))
    return tuple(results)


def backend_call(be, key: tuple, body, args: list, name: str) -> tuple:
    """``body(*args)`` as a call of the graph function ``key`` (extended with the backend's IPU and the
    arguments' signatures) on a backend that builds them (its ``function_cache``, a dict), or directly on one
    that does not (None, or none at all: the numpy reference, plans).  Returns the results as a tuple."""
    if hasattr(be, "_sync"):
        be._sync()
    cache = getattr(be, "function_cache", None)
    if cache is None:
        out = body(*args)
        return out if isinstance(out, tuple) else (out,)
    key = (*key, be.ipu, *(signature(a) for a in args))
    return call(be.ctx, cache, key, body, list(args), be.qual(name))
