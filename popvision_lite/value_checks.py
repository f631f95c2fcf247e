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
* :data:`MODEL_LIMITS` and :func:`check_limits` - workload sizes within documented bounds;
* :func:`host_memory_bytes` - this machine's memory (the emulator's host-memory pre-check,
  ``emulator/models/host_memory.py``, compares its estimate of a run with half of it).

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
    "embedding_serialization": (1, 1 << 12), "device_iterations": (1, 1 << 16), "tensor_parallel_2": (1, 1024),
    "attention_serialisation": (1, 1 << 12), "io_tiles": (0, 736),
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


def toml_value(v) -> str:
    """``v`` (bool, number, text, list) as a TOML value: how every run-config file this package writes spells it
    (read back by :func:`read_toml`)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, list | tuple):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'


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


def check_limits(obj, where: str = "") -> None:
    """Every numeric field of ``obj`` named in :data:`MODEL_LIMITS` (a run's config) within its bounds, each of a
    per-IPU list too; ConfigError naming the field (and ``where``).  Fields ``obj`` lacks or leaves None are skipped."""
    for name, (lo, hi) in MODEL_LIMITS.items():
        if not hasattr(obj, name):
            continue
        v = getattr(obj, name)
        if v is None:
            continue
        for x in (v if isinstance(v, list | tuple) and name in LIST_FIELDS else [v]):  # per-IPU lists
            check_number(name, x, lo, hi, integer=isinstance(lo, int) and isinstance(hi, int), where=where)
