"""Sweep grids: a base run config plus ``{field: [values]}``, expanded into independent points.

The fields a grid may vary are read at run time from the run-config definitions
(``RunConfig``'s top-level keys and every ``ModelConfig`` field), never from a list kept here, so a
field added to ``ModelConfig`` (replicas, grad_accum, optimizer ...) can be swept as soon as it exists.
Values are type-checked with the same checks as ``emulate --config`` (``run_config.check_model_args``);
whether a *combination* is valid (e.g. heads not dividing hidden) is decided when the point runs, and an
invalid one becomes a failed row with the reason, not the end of the sweep.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path

from popvision_lite.emulator.models.workloads import MODEL_NAMES, ModelConfig
from popvision_lite.emulator.run_config import RunConfig, check_model_args, normalise_device
from popvision_lite.errors import ConfigError
from popvision_lite.validators import MAX_DEPTH, MAX_NUMBER_CHARS, check_depth, check_toml_numbers, read_toml

MAX_POINTS = 10_000  # more than this needs --yes
# run-config keys that describe where results go, not what is emulated: not sweepable
_NOT_SWEEPABLE = {"output", "model_args"}


def grid_fields() -> list[str]:
    """Every field a grid may vary: the run config's own keys (model, device, timing_only) and every
    ``ModelConfig`` field, as defined *now* (read from the dataclasses)."""
    top = {f.name for f in fields(RunConfig)} - _NOT_SWEEPABLE
    return sorted(top | ModelConfig.field_names())


@dataclass
class Base:
    """The base run config every point starts from."""
    model: str | None = None
    device: str = "ipu-mk2"
    timing_only: bool = True  # sweeps are timing-only unless the config says otherwise
    model_args: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Point:
    """One emulation of a sweep: ``spec`` is {model, device, timing_only, args}; ``values`` are the
    grid values that made it (for the table and the file name)."""
    index: int
    spec: dict
    values: dict
    config_hash: str

    @property
    def key(self) -> str:
        return self.config_hash[:16]


def config_hash(spec: dict) -> str:
    """Hash of what a point emulates (model, device, timing_only, every model argument given)."""
    canon = json.dumps(spec, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canon.encode()).hexdigest()


def check_value(name: str, value, where: str):
    """``value`` checked (and normalised) for grid field ``name``; ConfigError naming the field."""
    known = grid_fields()
    if name not in known:
        raise ConfigError(f"{where}: field '{name}': not a run-config field, cannot be swept; "
                          f"known: {', '.join(known)}")
    if name == "model":
        if not isinstance(value, str) or value not in MODEL_NAMES:
            raise ConfigError(f"{where}: field 'model': unknown model {value!r}; choose one of "
                              f"{', '.join(MODEL_NAMES)}")
        return value
    if name == "device":
        return normalise_device(value, f"{where}: field 'device'")
    if name == "timing_only":
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: field 'timing_only': expected true or false, got {value!r}")
        return value
    return check_model_args({name: value}, where)[name]


def check_grid(grid: dict, where: str) -> dict:
    """``{field: [values]}`` checked: known fields, non-empty lists, values of the right type."""
    if not isinstance(grid, dict) or not grid:
        raise ConfigError(f"{where}: the grid is empty; give at least one field with values, "
                          f"e.g. [grid] batch = [8, 16] or --grid batch=8,16")
    out = {}
    for name, values in grid.items():
        if not isinstance(values, list):
            values = [values]
        if not values:
            raise ConfigError(f"{where}: field '{name}': empty list of values")
        checked = [check_value(name, v, where) for v in values]
        seen = []
        for v in checked:  # duplicates would run the same point twice
            if v not in seen:
                seen.append(v)
        out[name] = seen
    return out


def _parse_scalar(text: str):
    """A command-line value as TOML would read it (8 -> int, 0.5 -> float, true -> bool, [1,2] -> list);
    anything else is a string (ipu-mk2, adam)."""
    text = text.strip()
    try:
        v = tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text
    except (ValueError, RecursionError):  # thousands of digits; [[[[... deeper than the parser follows
        raise ConfigError(f"argument --grid: {text[:40]!r}...: not a value (a number of at most "
                          f"{MAX_NUMBER_CHARS} characters, a word, or a short list)") from None
    check_toml_numbers({"value": v}, "argument --grid")
    check_depth(v, "argument --grid", MAX_DEPTH)
    return v


def _split_top(text: str) -> list[str]:
    """Split on commas outside brackets: 'a,[1,2],b' -> ['a', '[1,2]', 'b']."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return parts


def parse_grid_args(items: list[str]) -> dict:
    """``['batch=8,16', 'device=ipu-mk2,ipu-bow']`` -> {'batch': [8, 16], 'device': [...]}."""
    grid: dict[str, list] = {}
    for item in items or []:
        name, sep, values = item.partition("=")
        name = name.strip().replace("-", "_")
        if not sep or not name:
            raise ConfigError(f"argument --grid: expected FIELD=V1,V2,..., got {item!r}")
        vals = [_parse_scalar(v) for v in _split_top(values) if v.strip()]
        if not vals:
            raise ConfigError(f"argument --grid: field '{name}': no values given")
        grid.setdefault(name, []).extend(vals)
    return grid


def load_sweep_toml(path) -> tuple[Base, dict, str | None]:
    """(base, grid, output folder or None) from a sweep TOML: a run config plus a ``[grid]`` table."""
    path = Path(path)
    raw = read_toml(path, "config file")  # regular file, size-limited, nesting bounded
    grid = raw.pop("grid", {})
    if not isinstance(grid, dict):
        raise ConfigError(f"{path}: field 'grid': expected a table such as [grid] batch = [8, 16]")
    base, output = base_from_dict(raw, str(path))
    return base, grid, output


def base_from_dict(raw: dict, where: str) -> tuple[Base, str | None]:
    """A base run config from a parsed run-config TOML (the same keys ``emulate --config`` reads)."""
    base = Base()
    output = None
    args = {}
    for k, v in raw.items():
        if k == "output":
            if not isinstance(v, str) or not v:
                raise ConfigError(f"{where}: field 'output': expected a folder name, got {v!r}")
            output = v
        elif k == "model_args":
            if not isinstance(v, dict):
                raise ConfigError(f"{where}: field 'model_args': expected a table")
            args.update(check_model_args(v, f"{where}: [model_args]"))
        elif k in ("model", "device", "timing_only"):
            setattr(base, k, check_value(k, v, where))
        else:
            args.update(check_model_args({k: v}, where))
    base.model_args = args
    return base, output


def count_points(grid: dict) -> int:
    n = 1
    for v in grid.values():
        n *= len(v)
    return n


def expand(base: Base, grid: dict) -> list[Point]:
    """Every combination of the grid (Cartesian product, fields in the order given) on top of ``base``."""
    names = list(grid)
    points = []
    for i, combo in enumerate(itertools.product(*(grid[n] for n in names))):
        values = dict(zip(names, combo, strict=True))
        args = dict(base.model_args)
        spec = {"model": base.model, "device": base.device, "timing_only": base.timing_only}
        for k, v in values.items():
            if k in spec:
                spec[k] = v
            else:
                args[k] = v
        if spec["model"] is None:
            raise ConfigError("field 'model': required (give --model, 'model' in the config, or a 'model' grid)")
        spec["args"] = dict(sorted(args.items()))
        points.append(Point(index=i, spec=spec, values=values, config_hash=config_hash(spec)))
    return points
