"""Sweep grids: a base run config plus ``{field: [values]}``, expanded into independent points.

The fields a grid may vary are the run config's fields (``run_config.FIELDS``), never a list kept here.
Values are checked by those fields' definitions, as ``emulate`` checks its flags and ``--config`` files
(``run_config.check_field``: same problem text);
whether a *combination* is valid (e.g. heads not dividing hidden) is decided when the point runs, and an
invalid one becomes a failed row with the reason, not the end of the sweep.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from popvision_lite.emulator.run_config import FIELDS, RunConfig, check_field
from popvision_lite.errors import ConfigError
from popvision_lite.value_checks import (
    MAX_DEPTH,
    MAX_NUMBER_CHARS,
    check_depth,
    check_toml_numbers,
    read_toml,
)

MAX_POINTS = 10_000  # more than this needs --yes
# run-config keys that describe where results go, not what is emulated: not sweepable
_NOT_SWEEPABLE = {"output", "model_args"}


def grid_fields() -> list[str]:
    """Every field a grid may vary: the run config's fields but where results go."""
    return sorted(set(FIELDS) - _NOT_SWEEPABLE)


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
    return check_field(name, value, where)


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
    """A base run config from a parsed run-config TOML (the same keys and checks as ``emulate --config``;
    ``output`` here is the sweep's folder)."""
    raw = dict(raw)
    output = raw.pop("output", None)
    if output is not None and (not isinstance(output, str) or not output):
        raise ConfigError(f"{where}: field 'output': expected a folder name, got {output!r}")
    rc = RunConfig.from_mapping(raw, where)
    base = Base(model=rc.model, device=rc.device, model_args=dict(rc.model_args))
    if "timing_only" in rc.origins:
        base.timing_only = rc.timing_only
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
