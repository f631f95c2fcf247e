"""A profile file's header and structure checked as it opens (profile/reader.py): the format and its version,
the target, the run and extra fields, and every group, table and array present with the shapes and dtypes the
target and the tables' row counts give.  Each check raises through ``err`` (a ProfileError naming the file)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from popvision_lite.errors import ProfileError, ProfileVersionError
from popvision_lite.profile import consistency, schema
from popvision_lite.profile.step_tiles import STEP_TILE_ARRAYS

Err = Callable[[str], ProfileError]


@dataclass(frozen=True)
class Header:
    format_version: int
    format_minor: int
    target: schema.TargetInfo
    run: dict
    extra: dict


def as_str(v: Any) -> str | None:
    """A header attribute as text (HDF5 gives bytes or str)."""
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if v is None:
        return None
    return str(v)


def read_header(attrs: dict, path, err: Err) -> Header:
    """The header's fields, each checked: a readable format this build reads, a complete file, a plausible
    target, and run / extra JSON objects."""
    version, minor = _format_version(attrs, path, err)
    if not bool(attrs.get("complete", False)):
        raise err("profile is incomplete (the writer did not finish)")
    target = _target(attrs, err)
    run, extra = (_json_object(attrs, key, err) for key in ("run", "extra"))
    return Header(version, minor, target, run, extra)


def _format_version(attrs: dict, path, err: Err) -> tuple[int, int]:
    """(format version, minor) of a popvision-lite profile this build reads."""
    fmt = as_str(attrs.get("format"))
    if fmt != schema.FORMAT_NAME:
        raise err(f"not a popvision-lite profile (format attribute is {fmt!r}, expected {schema.FORMAT_NAME!r})")
    try:
        version = int(attrs["format_version"])
    except Exception as e:
        raise err("header lacks a valid 'format_version'") from e
    if version > schema.FORMAT_VERSION:
        raise ProfileVersionError(
            path,
            f"written by format version {version}, but this popvision-lite reads versions up to "
            f"{schema.FORMAT_VERSION}; upgrade popvision-lite to open it")
    if version < 1:
        raise err(f"format version {version} is not a valid version")
    try:
        minor = int(attrs.get("format_minor", 0))
    except (TypeError, ValueError) as e:
        raise err(f"header field 'format_minor' is not an integer: {attrs.get('format_minor')!r}") from e
    return version, minor


def _target(attrs: dict, err: Err) -> schema.TargetInfo:
    """The header's target, its counts positive integers, its clock a positive number, its names text."""
    try:
        tgt = json.loads(as_str(attrs["target"]))
        target = schema.TargetInfo(**tgt)
    except KeyError as e:
        raise err("header lacks 'target'") from e
    except Exception as e:
        raise err(f"header field 'target' is invalid: {e}") from e
    for key in ("num_ipus", "tiles_per_ipu", "sram_bytes_per_tile"):
        v = getattr(target, key)
        if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
            raise err(f"header field 'target.{key}' must be a positive integer, got {v!r}")
    if target.num_tiles > 1 << 24:
        raise err(f"header field 'target' gives {target.num_tiles} tiles; not a plausible target")
    v = target.threads_per_tile
    if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
        raise err(f"header field 'target.threads_per_tile' must be a positive integer, got {v!r}")
    v = target.clock_hz
    if isinstance(v, bool) or not isinstance(v, int | float) or not np.isfinite(v) or v <= 0:
        raise err(f"header field 'target.clock_hz' must be a positive number, got {v!r}")
    for key in ("device", "name"):
        if not isinstance(getattr(target, key), str):
            raise err(f"header field 'target.{key}' must be text, got {getattr(target, key)!r}")
    consistency.check_target(target, err)
    return target


def _json_object(attrs: dict, key: str, err: Err) -> dict:
    try:
        val = json.loads(as_str(attrs.get(key, "{}")))
    except Exception as e:
        raise err(f"header field '{key}' is not valid JSON: {e}") from e
    if not isinstance(val, dict):
        raise err(f"header field '{key}' must be a JSON object, got {type(val).__name__}")
    return val


def stored_tables(names, err: Err) -> list[str]:
    """The tables the file stores, after checking every group, required table and array is there."""
    for grp in ("tables", "arrays", "summaries"):
        if grp not in names:
            raise err(f"missing group '/{grp}'")
    stored = [n for n in schema.TABLE_COLUMNS if f"tables/{n}" in names]
    for name in schema.TABLE_COLUMNS:
        if f"tables/{name}" not in names and name not in schema.OPTIONAL_TABLES:
            raise err(f"missing table '{name}'")
    for name in schema.ARRAYS:
        if f"arrays/{name}" not in names:
            raise err(f"missing array '{name}'")
    return stored


def array_shapes(nt: int, n_steps: int, n_lsteps: int) -> dict[str, tuple[int, ...]]:
    """The shape each array has for ``nt`` target tiles, ``n_steps`` steps and ``n_lsteps`` liveness steps."""
    return {
        "memory": (nt, len(schema.MEMORY_CATEGORIES), len(schema.LIVENESS_CLASSES)),
        "liveness_tile_bytes": (n_lsteps, nt),
        "step_tile_cycles": (n_steps, nt),
        "step_tile_bytes_in": (n_steps, nt),
        "step_tile_bytes_out": (n_steps, nt),
    }


def check_stored_rows(names, safe, n_steps: int, err: Err) -> None:
    """Format 3: the marks of which steps each step x tile array stores, one row per step."""
    mpath = f"arrays/{schema.STORED_ROWS}"
    if mpath not in names:
        raise err(f"missing array '{schema.STORED_ROWS}' (which steps each step x tile array stores)")
    mshape = safe.shape(mpath)
    if mshape is None or tuple(mshape) != (n_steps, len(STEP_TILE_ARRAYS)):
        raise err(f"array '{schema.STORED_ROWS}' has shape {mshape}, expected "
                  f"{(n_steps, len(STEP_TILE_ARRAYS))} (steps rows x 3)")


def check_ipu_rows(names, safe, name: str, shape: tuple[int, ...], err: Err) -> None:
    """Format 4: the (step, IPU) pairs naming each stored row of step x tile array ``name`` (stored ``shape``); their
    values are checked when first read (``step_tiles.check_ipu_keys``)."""
    stored = shape[0]
    rname = schema.rows_of(name)
    if f"arrays/{rname}" not in names:
        raise err(f"missing array '{rname}' (the step and IPU of each stored row of '{name}')")
    ds = safe.stored(f"arrays/{rname}")
    got = None if ds.shape is None else tuple(ds.shape)
    if got != (stored, 2):
        raise err(f"array '{name}' stores {stored} rows {tuple(shape)} but '{rname}' has shape {got}, expected "
                  f"{(stored, 2)} (one (step, IPU) per stored row)")
    if ds.dtype.kind not in "iu":
        raise err(f"array '{rname}' has dtype {ds.dtype}, expected int64")


def check_array(name: str, ds, shape: tuple[int, ...], version: int, nt: int, err: Err, tpi: int = 0) -> None:
    """Array ``name`` has ``shape`` (format 3: a step x tile array at most one row per step; format 4: rows of
    ``tpi`` tiles, one IPU's) and its dtype."""
    ok = tuple(ds.shape) == shape
    if version >= 4 and name in STEP_TILE_ARRAYS:
        if len(ds.shape) != 2 or ds.shape[1] != tpi:
            raise err(f"array '{name}' has shape {tuple(ds.shape)}, expected rows of {tpi} tiles (format 4: one "
                      f"IPU's tiles per stored row)")
        ok = True
    elif version >= 3 and name in STEP_TILE_ARRAYS:  # at most one row per step
        ok = len(ds.shape) == 2 and ds.shape[0] <= shape[0] and ds.shape[1] == nt
    if not ok:
        what = {"memory": "target tiles x categories x 2",
                "liveness_tile_bytes": "liveness_steps rows x target tiles"}.get(name, "steps rows x target tiles")
        raise err(f"array '{name}' has shape {tuple(ds.shape)}, expected {shape} ({what})")
    want = np.dtype(schema.ARRAYS[name][1])
    if ds.dtype != want:
        raise err(f"array '{name}' has dtype {ds.dtype}, expected {want}")
