"""Reusable checks of user-given numbers, ranges and small input files.

Every command-line option and config field goes through one of these, so a bad value is a
:class:`ConfigError` (exit 2) with a one-line message naming the option or field, never a traceback,
a hang or a memory blow-up:

* :func:`check_number` - type (no bool, int where an integer is meant), finite, within ``lo..hi``;
* :func:`arg_number` - the same as an ``argparse`` ``type=`` (argparse names the option, exit 2);
* :func:`parse_int_ranges` - ``"0-15,100"`` with bounds and a total count checked *before* expansion;
* :func:`read_small_text` - a config file: a regular file (a FIFO or ``/dev/zero`` would block or stream
  for ever), at most ``max_bytes``, UTF-8;
* :func:`check_depth` - nesting depth of parsed TOML/JSON;
* :func:`read_toml` - the two above and the TOML parser together: the one way every command reads a
  TOML file (run configs, ONNX run configs, sweep files);
* :data:`MODEL_LIMITS` and :func:`check_model_config` - workload sizes within documented bounds and,
  for runs that compute real numbers, an estimate of host memory checked against this machine's.

A run config's fields are defined in ``emulator/run_config.py`` (``FIELDS``: kind, allowed values, which
models read them), whose checks call :func:`check_number` with the bounds in :data:`MODEL_LIMITS`; a new
numeric field gets its bounds here and its definition there.  Other sub-commands (verdict, validate, export)
call :func:`check_number` / :func:`arg_number` with their own bounds.
"""

from __future__ import annotations

import argparse
import math
import os
import tomllib

from popvision_lite import input_files
from popvision_lite.errors import ConfigError

MAX_CONFIG_BYTES = 1 << 20  # a run config is a few hundred bytes
MAX_DEPTH = 8  # TOML nesting (run configs use 2)

LIST_FIELDS = ("available_memory_proportion",)  # fields that may also be one value per IPU

# field -> (lowest, highest) accepted; integers unless the bounds are floats.  The highs are far above
# any real model (BERT-Large: hidden 1024, 24 layers, seq 512; GPT-3: hidden 12288, 96 layers) but keep a
# typo (an extra zero or three) from turning into an allocation of the whole machine.
MODEL_LIMITS: dict[str, tuple] = {
    "batch": (1, 1 << 16), "seq": (1, 1 << 16), "layers": (1, 1024), "hidden": (1, 1 << 16),
    "heads": (1, 1024), "head_dim": (0, 1 << 12), "ffn": (0, 1 << 18), "vocab": (1, 1 << 21), "image": (1, 8192),
    "nodes": (1, 1 << 24), "edges": (1, 1 << 27), "ipus": (1, 1024), "seed": (0, 2 ** 32 - 1),
    "lr": (1e-12, 1e3),
    # scale's fields, checked when present
    "replicas": (1, 1024), "pipeline_stages": (0, 1024), "grad_accum": (1, 1 << 16), "tensor_parallel": (1, 1024),
    "available_memory_proportion": (0.01, 1.0), "packing": (1.0, 64.0), "mask_tokens": (0, 1 << 16),
    "embedding_serialization": (1, 1 << 12), "device_iterations": (1, 1 << 16),
}


def _fail(name: str, problem: str, where: str = "") -> ConfigError:
    return ConfigError(f"{where + ': ' if where else ''}{name}: {problem}")


def check_number(name: str, value, lo=None, hi=None, *, integer: bool = False, where: str = ""):
    """``value`` if it is a finite number (an int when ``integer``) within ``lo..hi``; else ConfigError
    naming ``name`` (and ``where``, e.g. the config file)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _fail(name, f"expected {'an integer' if integer else 'a number'}, got {value!r}", where)
    if integer and not isinstance(value, int):
        if not (math.isfinite(value) and value == int(value)):
            raise _fail(name, f"expected an integer, got {value!r}", where)
        value = int(value)
    if isinstance(value, float) and not math.isfinite(value):
        raise _fail(name, f"must be a finite number, got {value!r}", where)
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        shown = value if abs(value) < 1e15 else f"{float(value):.3g}"
        raise _fail(name, f"{shown} is outside {lo if lo is not None else '-inf'} .. "
                          f"{hi if hi is not None else 'inf'}", where)
    return value


MAX_NUMBER_CHARS = 40  # "-1.7976931348623157e+308" is 24; nothing a person types needs more


def parse_number(text, name: str, lo=None, hi=None, *, integer: bool = False, where: str = ""):
    """The one parser of a number given as text (command line, CSV cell, ``--dim``, ``--grid``): at most
    :data:`MAX_NUMBER_CHARS` characters (a 5,000-digit integer never reaches ``int``), then
    :func:`check_number` (finite, an integer when ``integer``, within ``lo..hi``); ConfigError naming
    ``name`` otherwise."""
    s = str(text).strip()
    kind = "an integer" if integer else "a number"
    if len(s) > MAX_NUMBER_CHARS:
        raise _fail(name, f"expected {kind}, got {len(s):,} characters ({s[:20]}...)", where)
    try:
        v = int(s) if integer else float(s)
    except ValueError:
        if integer:  # 1e6 or 16.0 for a count
            try:
                v = float(s)
            except ValueError:
                raise _fail(name, f"expected {kind}, got {s!r}", where) from None
        else:
            raise _fail(name, f"expected {kind}, got {s!r}", where) from None
    return check_number(name, v, lo, hi, integer=integer, where=where)


def arg_number(lo=None, hi=None, *, integer: bool = False, unit: str = ""):
    """An argparse ``type=``: parses the text and applies :func:`check_number` (argparse names the option
    and exits 2); ``unit`` ends the message ("pixels")."""
    def parse(text: str):
        try:
            return parse_number(text, "value", lo, hi, integer=integer)
        except ConfigError as e:
            raise argparse.ArgumentTypeError(str(e).split(": ", 1)[1] + (f" {unit}" if unit else "")) from None
    parse.__name__ = "integer" if integer else "number"
    return parse


def parse_int_ranges(text: str, name: str, lo: int = 0, hi: int | None = None,
                     max_count: int = 1 << 22, expand: bool = True) -> list[int] | list[tuple[int, int]]:
    """``"0-15,100,200-203"`` -> the ids, refusing ids outside ``lo..hi`` and more than ``max_count`` ids
    in total *before* any range is expanded (``0-99999999`` never builds a list).  ``expand=False``
    returns the checked (first, last) pairs instead."""
    parts: list[tuple[int, int]] = []
    total = 0
    for part in str(text).split(","):
        part = part.strip()
        if not part:
            continue
        try:
            if "-" in part[1:]:
                a, b = part.split("-", 1) if not part.startswith("-") else (part, "")
                a, b = int(a), int(b)
            else:
                a = b = int(part)
        except ValueError:
            raise _fail(name, f"{part!r} is not an id or a range like 0-15") from None
        if b < a:
            raise _fail(name, f"range {part} goes backwards")
        if a < lo or (hi is not None and b > hi):
            raise _fail(name, f"{part} is outside {lo}..{hi}")
        total += b - a + 1
        if total > max_count:
            raise _fail(name, f"{text[:60]!r} names more than {max_count} ids")
        parts.append((a, b))
    if not parts:
        raise _fail(name, f"{text!r}: none given")
    if not expand:
        return parts
    out: list[int] = []
    for a, b in parts:
        out.extend(range(a, b + 1))
    return out


def read_small_text(path, what: str = "config file", max_bytes: int = MAX_CONFIG_BYTES) -> str:
    """Text of a small regular file; ConfigError naming the file when it is missing, not a regular file
    (FIFO, device, socket: refused before anything blocks), too large or not UTF-8."""
    return input_files.read_text(path, "config", what, max_bytes=max_bytes)


def check_depth(obj, name: str, max_depth: int = MAX_DEPTH) -> None:
    """ConfigError when dicts/lists in ``obj`` nest deeper than ``max_depth`` (iterative: no recursion)."""
    input_files.check_depth(obj, name, max_depth, ConfigError)


def read_toml(path, what: str = "config file") -> dict:
    """A small TOML file parsed: :func:`read_small_text` (regular file, size-limited, UTF-8), then the
    parser, whose errors and recursion limit (a file of ``[[[[...`` nests until Python gives up) are a
    ConfigError naming the file, then :func:`check_depth`."""
    text = read_small_text(path, what)
    p = os.fspath(path)
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{p}: not valid TOML: {e}") from None
    except RecursionError:
        raise ConfigError(f"{p}: nested more than {MAX_DEPTH} levels deep (more than the TOML parser can "
                          f"follow); not a {what}") from None
    except ValueError as e:  # an integer of thousands of digits: Python's int parsing limit
        import re

        for n, line in enumerate(text.splitlines(), 1):
            m = re.match(rf"\s*([^=\s]+)\s*=.*?(\d{{{MAX_NUMBER_CHARS + 1},}})", line)
            if m:
                raise ConfigError(f"{p}: line {n}: {m.group(1)}: a number of {len(m.group(2)):,} digits; "
                                  "not a value any field can take") from None
        raise ConfigError(f"{p}: not valid TOML: {str(e).splitlines()[0]}") from None
    check_depth(raw, p)
    check_toml_numbers(raw, p)
    return raw


MAX_TOML_INT = 2 ** 63 - 1


def check_toml_numbers(obj, where: str) -> None:
    """ConfigError for a number no config field can mean: an integer beyond 64 bits, a NaN or an
    infinity (TOML has literals for both), wherever it is; the fields' own bounds come after."""
    stack = [("", obj)]
    while stack:
        key, o = stack.pop()
        if isinstance(o, dict):
            stack.extend((f"{key}.{k}" if key else str(k), v) for k, v in o.items())
        elif isinstance(o, list):
            stack.extend((f"{key}[{i}]", v) for i, v in enumerate(o))
        elif isinstance(o, bool):
            continue
        elif isinstance(o, int) and abs(o) > MAX_TOML_INT:
            raise _fail(key, f"integer of {len(str(abs(o)))} digits is out of range", where)
        elif isinstance(o, float) and not math.isfinite(o):
            raise _fail(key, f"must be a finite number, got {o!r}", where)


def host_memory_bytes() -> int | None:
    """Physical memory of this machine, or None where unknown."""
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):
        return None


_USUAL = dict(batch=8, seq=128, layers=12, hidden=768, heads=12, vocab=30522, image=224, nodes=256, edges=1024)


def _resnet_blocks(layers: int) -> int:
    """Bottleneck blocks of a ResNet of depth ``layers``: 3 convolutions per block plus the stem and the
    classifier (depth = 3 x blocks + 2: 50 -> 16, 101 -> 33, 152 -> 50, as emulator/models/resnet.py's table)."""
    return max(1, (int(layers) - 2) // 3)


def largest_array(cfg) -> tuple[int, str]:
    """(elements, dominant field) of the largest array the emulator builds for ``cfg`` *even in a timing-only
    run*: the per-element index arrays of the biggest tensor's mapping and exchanges (int64), e.g. the
    attention scores of a transformer (batch x heads x seq^2), a ResNet's stem windows
    (batch x (image/2)^2 x 7 x 7 x 3), an mlp's weight (hidden^2)."""
    g = {k: int(getattr(cfg, k, 0) or 0) for k in ("batch", "seq", "layers", "hidden", "heads", "vocab", "image",
                                                      "nodes", "edges")}
    ffn = int(getattr(cfg, "ffn", 0) or 0) or 4 * g["hidden"]
    model = str(getattr(cfg, "model", ""))
    B, S, H, A, V, img = g["batch"], g["seq"], g["hidden"], g["heads"], g["vocab"], g["image"]
    # candidates: (elements, the fields they grow with)
    if model in ("bert", "gpt"):
        cand = [(B * A * S * S, ("batch", "seq", "heads")), (B * S * ffn, ("batch", "seq", "hidden")),
                (H * ffn, ("hidden",)), (V * H, ("vocab", "hidden"))]
        if model == "gpt":  # the LM head's logits over every position
            cand.append((B * S * V, ("batch", "seq", "vocab")))
    elif model == "resnet":
        cand = [(B * (img // 2) ** 2 * 49 * 3, ("batch", "image")), (9 * (8 * H) ** 2, ("hidden",)),
                (8 * H * V, ("hidden", "vocab"))]
    elif model == "conv":
        cand = [(B * img * img * 9 * H, ("batch", "image", "hidden"))]
    elif model == "gnn":
        cand = [(B * g["edges"] * H, ("batch", "edges", "hidden")), (B * g["nodes"] * H, ("batch", "nodes", "hidden")),
                (H * H, ("hidden",))]
    else:  # mlp
        cand = [(B * H, ("batch", "hidden")), (H * H, ("hidden",))]
    elems, names = max(cand, key=lambda c: c[0])
    # the field furthest above a usual size is the one to name
    field = max(names, key=lambda k: g.get(k, 1) / _USUAL.get(k, 1))
    return int(elems), field


# bytes per element of the largest array that a run may need at once (an int64 index array and a copy of it)
INDEX_BYTES = 16


def runs_numerics(cfg, timing_only: bool) -> bool:
    """Whether a run of ``cfg`` computes real values: not timing-only, and not a run the emulator composes
    from stage programs (every GPT run; BERT at scale: models/emulated.py run_model), which is timing-only
    whatever was asked."""
    if timing_only:
        return False
    model = str(getattr(cfg, "model", ""))
    return not (model == "gpt" or (model == "bert" and bool(getattr(cfg, "scaled", False))))


def numeric_run_bytes(cfg) -> tuple[int, str]:
    """(bytes, dominant field) a full-numerics run of ``cfg`` needs on the host, roughly: weights and
    activations in fp32, times 4 (gradients, reference copies, temporaries).  Timing-only runs hold no
    values (zeros broadcast), so this is the figure that can exhaust a machine."""
    g = {k: getattr(cfg, k, 0) for k in ("batch", "seq", "layers", "hidden", "heads", "vocab", "image", "nodes",
                                         "edges")}
    ffn = getattr(cfg, "ffn", 0) or 4 * g["hidden"]
    model = str(getattr(cfg, "model", ""))
    if model in ("bert", "gpt"):
        weights = g["layers"] * (4 * g["hidden"] ** 2 + 2 * g["hidden"] * ffn) + g["vocab"] * g["hidden"]
        acts = g["layers"] * g["batch"] * g["seq"] * (8 * g["hidden"] + ffn + 2 * g["heads"] * g["seq"])
        terms = {"batch": acts, "seq": acts, "layers": weights + acts, "hidden": weights + acts,
                 "heads": acts, "vocab": weights}
    elif model == "resnet":
        # bottleneck blocks of widths hidden x 1, 2, 4, 8 (x 4 out) at image/4 .. image/32; the stem's 7x7
        # windows of the RGB input at image/2 and the windows of each 3x3 convolution (im2col) dominate
        blocks = _resnet_blocks(g["layers"])
        w = g["hidden"]
        weights = blocks // 4 * sum(17 * (w << s) ** 2 for s in range(4)) + 8 * w * g["vocab"]
        px = g["image"] ** 2
        acts = g["batch"] * (3 * px + px // 4 * (147 + w)
                             + blocks // 4 * sum(15 * (w << s) * px // (16 << (2 * s)) for s in range(4)))
        terms = {"batch": acts, "image": acts, "hidden": weights + acts, "layers": weights + acts, "vocab": weights}
    elif model == "conv":
        weights = g["layers"] * 9 * g["hidden"] ** 2
        acts = g["layers"] * g["batch"] * g["image"] ** 2 * g["hidden"] * 4
        terms = {"batch": acts, "image": acts, "hidden": weights + acts, "layers": weights + acts}
    elif model == "gnn":
        weights = g["layers"] * g["hidden"] ** 2
        acts = g["layers"] * g["batch"] * (g["nodes"] + g["edges"]) * g["hidden"] * 2
        terms = {"nodes": acts, "edges": acts, "hidden": weights + acts, "batch": acts, "layers": weights + acts}
    else:  # mlp
        weights = g["layers"] * g["hidden"] ** 2
        acts = g["layers"] * g["batch"] * g["hidden"] * 3
        terms = {"batch": acts, "hidden": weights + acts, "layers": weights + acts}
    total = 4 * 4 * (weights + acts)
    # the field furthest above a usual size is the one to name
    field = max(terms, key=lambda k: g.get(k, 1) / _USUAL.get(k, 1))
    return int(total), field


def runs_composed(cfg, timing_only: bool) -> bool:
    """Whether ``cfg`` runs on the composed path (emulator/models/emulated.py run_model): every GPT run, and BERT
    timing-only or at scale; one distinct stage graph at a time is built there."""
    model = str(getattr(cfg, "model", ""))
    return model == "gpt" or (model == "bert" and (bool(timing_only) or bool(getattr(cfg, "scaled", False))))


# Host memory of a composed run (calibrated): the process's baseline (interpreter, numpy, pandas, h5py
# imported) plus, for every distinct stage graph (the composition keeps each one's compiled step templates and
# tables for the profile, so they add up), bytes per element of two groups of its tensors
# (composed_graph_elements): the layer body's activations (tokens x hidden-sized tensors forward, recompute and
# backward, with the per-element index arrays of their transposed and head-split views and the vertices over
# them) and the LM / MLM head's (logits forward and backward, decoder weight and its gradient).  Weights, the
# embedding and the attention scores are left out: the fit gives them no weight (13B middle stage graphs with
# 10 and 5 heads per IPU measured 1.91 and 2.00 GB).  Least squares on the ratios of three measured runs of
# bench/gpt_scale.py (gpt3_13b_pod64, gpt3_13b_pod64_tp4, gpt2_xl_64_phased), judged on its other rows
# (docs/performance.md, "GPT-3-class runs on IPU-PODs").
COMPOSED_BASE_BYTES = 0.3e9
COMPOSED_BYTES_PER_ACTIVATION = 9.28
COMPOSED_BYTES_PER_HEAD_ELEMENT = 5.24


def composed_graph_elements(cfg) -> dict[str, int]:
    """Elements of the tensors the host-memory estimate counts, summed over the distinct stage graphs of a
    composed bert / gpt run (per IPU of a tensor-parallel group): ``activations`` (per graph one layer body:
    tokens x (12 hidden + 8 attention width + 4 FFN width)) and ``head`` (the graph holding the LM / MLM head:
    3 x tokens x vocab / t logits + 2 x hidden x vocab / t decoder).  Neither grows with the layer count."""
    g = {k: int(getattr(cfg, k, 0) or 0) for k in ("batch", "seq", "hidden", "heads", "vocab")}
    tp = max(1, int(getattr(cfg, "tensor_parallel", 1) or 1))
    H, S, heads = g["hidden"], g["seq"], max(1, g["heads"])
    d = int(getattr(cfg, "head_dim", 0) or 0) or H // heads
    W = max(1, heads // tp) * d
    F = (int(getattr(cfg, "ffn", 0) or 0) or 4 * H) // tp
    V = -(-g["vocab"] // (128 * tp)) * 128 if tp > 1 else g["vocab"]  # padded as ModelConfig.shard() pads it
    N = g["batch"] * S
    gpt = str(getattr(cfg, "model", "")) == "gpt"
    T = N if gpt else g["batch"] * (int(getattr(cfg, "mask_tokens", 0) or 0) or max(1, int(0.15 * S)))
    # the distinct stage graphs, as emulator/models/pipeline.py keys them: (embedding here, heads here, AMP)
    stages = max(1, int(getattr(cfg, "stages", 1) or 1))
    wrap = getattr(cfg, "pipeline_placement", "sequential") == "wrap" and stages > 1
    amp = getattr(cfg, "amp_of", None)
    kinds = {((i == 0, i == 0) if wrap else (i == 0, i == stages - 1)) + ((amp(i) if amp else 0.0),)
             for i in range(stages)}
    act = N * (12 * H + 8 * W + 4 * F)
    head = 3 * T * V + 2 * H * V
    return {"activations": int(len(kinds) * act), "head": int(head)}


def composed_host_bytes(cfg) -> int:
    """Estimated peak host memory (bytes) of a composed run of ``cfg`` (calibrated; see COMPOSED_BASE_BYTES)."""
    e = composed_graph_elements(cfg)
    return int(COMPOSED_BASE_BYTES + COMPOSED_BYTES_PER_ACTIVATION * e["activations"]
               + COMPOSED_BYTES_PER_HEAD_ELEMENT * e["head"])


def check_model_config(cfg, timing_only: bool | None = None, where: str = "") -> None:
    """Every numeric field of a ModelConfig within :data:`MODEL_LIMITS`; with ``timing_only`` False, the
    numeric run's host-memory estimate under half of this machine's memory.  ConfigError names the field."""
    for name, (lo, hi) in MODEL_LIMITS.items():
        if not hasattr(cfg, name):
            continue
        v = getattr(cfg, name)
        if v is None:
            continue
        for x in (v if isinstance(v, list | tuple) and name in LIST_FIELDS else [v]):  # per-IPU lists
            check_number(name, x, lo, hi, integer=isinstance(lo, int) and isinstance(hi, int), where=where)
    mt, seq = getattr(cfg, "mask_tokens", 0), getattr(cfg, "seq", 0)
    if str(getattr(cfg, "model", "")) == "bert" and isinstance(mt, int) and isinstance(seq, int) and mt > seq:
        raise _fail("mask_tokens", f"{mt} MLM positions per pack, but a pack has only seq = {seq} tokens", where)
    if timing_only is None:
        return
    have = host_memory_bytes()
    if not have:
        return
    if runs_numerics(cfg, timing_only):
        need, field = numeric_run_bytes(cfg)
        if need > have // 2:
            raise _fail(field, f"a run with real numerics at these sizes needs about {need / 2 ** 30:.1f} GiB of "
                               f"host memory, more than half of this machine's {have / 2 ** 30:.1f} GiB; use "
                               f"--timing-only (same cycles and memory) or smaller sizes", where)
    if runs_composed(cfg, timing_only):
        # at least the per-element index arrays of the largest tensor of one IPU's shard (outside the fitted
        # range, e.g. a whole GPT-3 layer on one IPU, those are what exhausts the machine)
        shard = cfg.shard() if callable(getattr(cfg, "shard", None)) else cfg
        need = max(composed_host_bytes(cfg), largest_array(shard)[0] * INDEX_BYTES)
        if need > have // 2:
            tp = int(getattr(cfg, "tensor_parallel", 1) or 1)
            raise _fail("tensor_parallel" if tp > 1 or str(getattr(cfg, "model", "")) == "gpt" else "seq",
                        f"emulating one stage graph of this run needs about {need / 2 ** 30:.1f} GiB of host memory "
                        f"(estimate), more than half of this machine's {have / 2 ** 30:.1f} GiB; shard each layer "
                        f"over more IPUs (--tensor-parallel, now {tp}) or use fewer tokens (--seq, --batch)", where)
        return
    elems, field = largest_array(cfg)
    if elems * INDEX_BYTES > have // 2:
        raise _fail(field, f"even a timing-only run builds per-element index arrays of its largest tensor "
                           f"({elems:,} elements, about {elems * INDEX_BYTES / 2 ** 30:.1f} GiB), more than half of "
                           f"this machine's {have / 2 ** 30:.1f} GiB of memory; use smaller sizes", where)
