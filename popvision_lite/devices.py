"""Device specs: load and validate ``resources/devices/*.toml`` into :class:`DeviceSpec`.

Every number in a spec is a *quantity*: an inline table
``{ value = 1.325e9, unit = "Hz", basis = "vendor", source = "...", note = "..." }``
(``unit`` and ``note`` optional).  ``basis`` says how much to trust the number:

* ``vendor``   - a manufacturer claim (datasheet, whitepaper, vendor software constant)
* ``measured`` - a published measurement (paper, benchmark)
* ``derived``  - arithmetic on other numbers (the note shows the sum)
* ``assumed``  - no public figure found; a stated modelling assumption (emulator constants only)
* ``calibrated`` - no public figure found; fitted on measured runs that the ``source`` names, and judged
  on the others (leave-one-out, docs/emulator-fidelity.md)

Keys are addressed with dotted paths: ``"compute.clock_hz"``, ``"memory.sram.bandwidth_bytes_per_s"``,
``"emulator.exchange_bytes_per_cycle"``, ``"price.usd_per_hour"``, ``"floorplan.columns"``.
All bandwidths and capacities are per chip (one IPU / one GPU).  See ``docs/devices.md``.
"""

from __future__ import annotations

import functools
import os
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from popvision_lite.errors import DeviceSpecError
from popvision_lite.resources_path import resource_dir

SCHEMA_VERSION = 1
BASES = ("vendor", "measured", "derived", "assumed", "calibrated")
KINDS = ("ipu", "gpu")

# key -> (python type the value must have, required for ipu, required for gpu)
# "int" keys must be integers; "float" keys accept int or float.  A key absent from a
# table's schema is an unknown key.
_COMPUTE = {
    "clock_hz": ("float", True, False),
    "tiles": ("int", True, False),
    "sram_bytes_per_tile": ("int", True, False),
    "threads_per_tile": ("int", True, False),
    "sms": ("int", False, False),
    "peak_fp16_flops": ("float", True, True),
    "peak_fp32_flops": ("float", True, True),
    "peak_fp8_flops": ("float", False, False),
}
_MEMORY_LEVEL_KEYS = {
    "bandwidth_bytes_per_s": ("float", True, True),
    "capacity_bytes": ("float", False, False),
}
# level name -> (allowed for kind, required for kind)
IPU_LEVELS = ("sram", "exchange", "ipu_link", "ddr")
GPU_LEVELS = ("l2", "hbm")
_REQUIRED_LEVELS = {"ipu": IPU_LEVELS, "gpu": ("hbm",)}
# bandwidth optional for GPU L2 (rarely published)
_BW_OPTIONAL = {("gpu", "l2")}

EMULATOR_KEYS = {
    "exchange_bytes_per_cycle": ("float", True, False),
    "memcpy_bytes_per_cycle": ("float", True, False),
    "sram_load_bytes_per_cycle": ("float", True, False),
    "fp16_flops_per_cycle_per_tile": ("float", True, False),
    "fp32_flops_per_cycle_per_tile": ("float", True, False),
    "vertex_launch_cycles": ("int", True, False),
    "min_ipu_sync_delay_cycles": ("int", True, False),
    "max_ipu_sync_delay_cycles": ("int", True, False),
    "global_sync_cycles": ("int", True, False),
    "ipu_link_bytes_per_cycle": ("float", True, False),
    "ipu_link_latency_cycles": ("int", True, False),
    # per-pair IPU-Link bandwidth (optional; without them the aggregate ipu_link_bytes_per_cycle is used)
    "ipus_per_box": ("int", False, False),
    "tiles_per_shared_exchange_bus": ("int", False, False),
    "ipu_link_pair_bytes_per_cycle": ("float", False, False),
    "ipu_link_pair_bytes_per_cycle_across_boxes": ("float", False, False),
    "ddr_bytes_per_cycle": ("float", True, False),
    "stream_copy_latency_cycles": ("int", True, False),
    # per-step terms outside the IPU clock domain (emulator/schedule.py per_step_terms; optional)
    "ipu_link_domain_ipus": ("int", False, False),
    "gw_link_bytes_per_s_per_ipu": ("float", False, False),
    "host_link_bytes_per_s_per_ipu": ("float", False, False),
    "host_step_seconds_popart": ("float", False, False),
    "host_step_seconds_tensorflow": ("float", False, False),
    "ipus_per_host": ("int", False, False),
    "multi_host_step_seconds": ("float", False, False),
}
_PRICE = {"usd_per_hour": ("float", True, True)}
# [estimator] (GPU only, optional): achievable fractions and overheads for analysis/gpu_estimate.py.
# (type, required for ipu, required for gpu): the table is optional, its keys are optional too;
# gpu_estimate says which defaults it fell back to.
GPU_ESTIMATOR_KEYS = {
    "gemm_fraction": ("float", False, False),
    "gemm_fraction_fp8": ("float", False, False),
    "gemm_tile_elements": ("int", False, False),
    "hbm_fraction": ("float", False, False),
    "launch_overhead_s": ("float", False, False),
    "nvlink_bytes_per_s": ("float", False, False),
    "allreduce_bus_bytes_per_s": ("float", False, False),
    "gpus_per_node": ("int", False, False),
    "network_bytes_per_s": ("float", False, False),
    "network_bus_bytes_per_s": ("float", False, False),
    "sfu_ops_per_s": ("float", False, False),
    "softmax_warp_max_columns": ("int", False, False),
    "softmax_hbm_reads": ("int", False, False),
    "row_onchip_bytes": ("int", False, False),
    "wide_row_hbm_fraction": ("float", False, False),
}
_FLOORPLAN = {
    "columns": ("int", True, False),
    "tiles_per_column": ("int", True, False),
}
_FLOORPLAN_STR = {"order": ("column-major", "row-major"), "basis_note": None}
_TOP = {"schema_version", "id", "name", "kind", "notes", "compute", "memory", "emulator", "price", "floorplan",
        "estimator"}
_QUANTITY_KEYS = {"value", "unit", "basis", "source", "note"}


@dataclass(frozen=True)
class Quantity:
    """One number with its provenance."""

    value: float | int
    source: str
    basis: str
    unit: str = ""
    note: str = ""


@dataclass(frozen=True)
class MemoryLevel:
    level: str                     # "sram" | "exchange" | "ipu_link" | "ddr" | "l2" | "hbm"
    label: str                     # human name, e.g. "tile SRAM"
    bandwidth: Quantity | None     # bytes/s per chip (None only for a GPU L2 without a published figure)
    capacity: Quantity | None      # bytes per chip, when meaningful
    note: str = ""

    @property
    def bandwidth_bytes_per_s(self) -> float | None:
        return None if self.bandwidth is None else float(self.bandwidth.value)

    @property
    def capacity_bytes(self) -> float | None:
        return None if self.capacity is None else float(self.capacity.value)


@dataclass(frozen=True)
class DeviceSpec:
    id: str
    name: str
    kind: str                       # "ipu" | "gpu"
    path: Path
    quantities: dict[str, Quantity]  # dotted key -> Quantity (memory levels as memory.<level>.<key>)
    memory_levels: tuple[MemoryLevel, ...]
    notes: tuple[str, ...] = ()
    floorplan_order: str = "column-major"
    extra: dict[str, Any] = field(default_factory=dict)

    # -- generic access ---------------------------------------------------------------
    def has(self, key: str) -> bool:
        return key in self.quantities

    def quantity(self, key: str) -> Quantity:
        try:
            return self.quantities[key]
        except KeyError:
            raise DeviceSpecError(self.path, key, f"device '{self.id}' has no value for this key") from None

    def value(self, key: str) -> float | int:
        return self.quantity(key).value

    def source(self, key: str) -> str:
        return self.quantity(key).source

    def basis(self, key: str) -> str:
        return self.quantity(key).basis

    def get(self, key: str, default=None):
        q = self.quantities.get(key)
        return default if q is None else q.value

    def items(self) -> Iterator[tuple[str, Quantity]]:
        return iter(self.quantities.items())

    # -- typed accessors ----------------------------------------------------------------
    @property
    def is_ipu(self) -> bool:
        return self.kind == "ipu"

    @property
    def clock_hz(self) -> float | None:
        v = self.get("compute.clock_hz")
        return None if v is None else float(v)

    @property
    def tiles(self) -> int:
        return int(self.value("compute.tiles"))

    @property
    def sram_bytes_per_tile(self) -> int:
        return int(self.value("compute.sram_bytes_per_tile"))

    @property
    def threads_per_tile(self) -> int:
        return int(self.value("compute.threads_per_tile"))

    @property
    def peak_fp16_flops(self) -> float:
        return float(self.value("compute.peak_fp16_flops"))

    @property
    def peak_fp32_flops(self) -> float:
        return float(self.value("compute.peak_fp32_flops"))

    def peak_flops(self, precision: str) -> float:
        """Peak FLOP/s for "fp16" or "fp32" (anything else -> FP32 peak)."""
        return self.peak_fp16_flops if precision == "fp16" else self.peak_fp32_flops

    def memory(self, level: str) -> MemoryLevel:
        for m in self.memory_levels:
            if m.level == level:
                return m
        raise DeviceSpecError(self.path, f"memory.{level}", f"device '{self.id}' has no memory level '{level}'")

    def has_memory(self, level: str) -> bool:
        return any(m.level == level for m in self.memory_levels)

    @property
    def emulator(self) -> dict[str, float | int]:
        """The [emulator] cost-model constants (IPU only) as plain numbers."""
        p = "emulator."
        return {k[len(p):]: q.value for k, q in self.quantities.items() if k.startswith(p)}

    @property
    def usd_per_hour(self) -> float | None:
        """Published price per chip-hour, or None when no price is recorded."""
        v = self.get("price.usd_per_hour")
        return None if v is None else float(v)

    def tile_position(self, tile_in_ipu):
        """(column, row) of a tile on the schematic floor plan (numpy arrays accepted)."""
        rows = int(self.value("floorplan.tiles_per_column"))
        cols = int(self.value("floorplan.columns"))
        if self.floorplan_order == "column-major":
            return tile_in_ipu // rows, tile_in_ipu % rows
        return tile_in_ipu % cols, tile_in_ipu // cols


# ------------------------------------------------------------------------------------------ prices
PRICE_DATE_NOTE = "list price as quoted in the project brief (Paperspace); the quote's date is not recorded"


@dataclass(frozen=True)
class ChipPrice:
    """What one chip-hour of a device costs, and where that figure comes from: the one price every view, the
    verdict, the roofline and the sweep use.  ``borrowed``: the device has no published price of its own and is
    priced at another device of its kind (an IPU without a price at the Bow rate); ``usd_per_chip_hour`` is NaN
    when no price can be given (``source`` then says why)."""

    usd_per_chip_hour: float
    source: str
    borrowed: bool = False
    borrowed_from: str = ""   # the name of the device whose price a borrowed price is

    @property
    def known(self) -> bool:
        return self.usd_per_chip_hour == self.usd_per_chip_hour  # not NaN

    @property
    def label(self) -> str:
        """Short text for tables and tooltips: '$1.67/chip-h', '$1.67/chip-h (Bow IPU rate)', 'no price'."""
        if not self.known:
            return "no price"
        text = f"${self.usd_per_chip_hour:,.2f}/chip-h"
        return text + f" ({self.source.split(' rate')[0].split('priced at the ')[-1]} rate)" if self.borrowed else text


def chip_price(spec: DeviceSpec | str) -> ChipPrice:
    """The price of one chip-hour of ``spec`` (a spec or a bundled id) with its source."""
    spec = spec if isinstance(spec, DeviceSpec) else load_bundled_device(spec)
    if spec.usd_per_hour is not None:
        return ChipPrice(float(spec.usd_per_hour), f"{spec.source('price.usd_per_hour')}; {PRICE_DATE_NOTE}")
    if spec.is_ipu:
        for other in list_devices("ipu"):
            o = load_device(other)
            if o.usd_per_hour is not None:
                return ChipPrice(float(o.usd_per_hour),
                                 f"{spec.name} has no published price; priced at the {o.name} rate "
                                 f"({o.source('price.usd_per_hour')}; {PRICE_DATE_NOTE})", borrowed=True,
                                 borrowed_from=o.name)
    return ChipPrice(float("nan"), f"{spec.name}: no published price in resources/devices/{spec.id}.toml")


# ------------------------------------------------------------------------------------------
def devices_dir() -> Path:
    return resource_dir("devices")


def list_devices(kind: str | None = None) -> list[str]:
    """Ids of the bundled device specs (optionally only "ipu" or "gpu"), sorted."""
    ids = sorted(p.stem for p in devices_dir().glob("*.toml"))
    if kind is None:
        return ids
    return [i for i in ids if load_device(i).kind == kind]


# id -> spec of the spec files this process registered (register_device): tests' small device
_REGISTERED: dict[str, DeviceSpec] = {}


def register_device(path: str | os.PathLike) -> DeviceSpec:
    """Load the spec file at ``path`` and make its id known to this process, as a bundled id is: ``load_device``,
    ``load_bundled_device`` and so every ``device=`` argument of the library and every profile naming the id
    resolve it.  For a device that is not a product (the tests' device with fewer tiles): the command line's
    ``--device`` still takes only the bundled ids and ``list_devices`` lists only them.  An id a bundled spec
    has is refused; registering the same file again is a no-op.  Undo with :func:`unregister_device`."""
    spec = load_device(Path(path))
    if spec.id in list_devices():
        raise DeviceSpecError(spec.path, "id", f"'{spec.id}' is a bundled device's id; a registered spec needs its own")
    _REGISTERED[spec.id] = spec
    return spec


def unregister_device(device_id: str) -> None:
    """Forget a spec :func:`register_device` made known (no error when it is not registered)."""
    _REGISTERED.pop(device_id, None)


def load_device(id_or_path: str | os.PathLike) -> DeviceSpec:
    """Load a bundled spec by id ("ipu-mk2"), a registered one by id (:func:`register_device`) or any spec
    file by path; validates everything."""
    s = str(id_or_path)
    is_path = isinstance(id_or_path, os.PathLike) or s.endswith(".toml") or os.sep in s or "/" in s
    if not is_path and s in _REGISTERED:
        return _REGISTERED[s]
    if is_path:
        path = Path(s)
        if not path.is_file():
            raise DeviceSpecError(path, "<file>", "no such device spec file")
        expected_id = None
    else:
        path = devices_dir() / f"{s}.toml"
        if not path.is_file():
            known = ", ".join(list_devices()) or "none"
            raise DeviceSpecError(devices_dir(), "id", f"unknown device '{s}' (known: {known})")
        expected_id = s
    st = path.stat()
    return _load_cached(str(path.resolve()), st.st_mtime_ns, st.st_size, expected_id)


def load_bundled_device(device_id) -> DeviceSpec:
    """Load a bundled spec by id only: for ids read from files (a profile's ``target.device``), which
    must never be used as a path (a shared profile naming '/etc/passwd' or '../x.toml' would make the
    viewer open that file).  An id this process registered (:func:`register_device`) resolves too.  Unknown
    ids raise DeviceSpecError."""
    s = device_id if isinstance(device_id, str) else ""
    if s in _REGISTERED:
        return _REGISTERED[s]
    if s not in list_devices():
        shown = repr(s[:80]) if s else repr(device_id)[:80]
        raise DeviceSpecError(devices_dir(), "id", f"unknown device {shown}; bundled devices: "
                                                   f"{', '.join(list_devices())}")
    return load_device(s)


@functools.lru_cache(maxsize=64)
def _load_cached(path: str, _mtime: int, _size: int, expected_id: str | None) -> DeviceSpec:
    return _parse(Path(path), expected_id)


# ------------------------------------------------------------------------------------------
def _err(path, fieldname, problem):
    return DeviceSpecError(path, fieldname, problem)


def _quantity(path, key: str, raw: Any, typ: str) -> Quantity:
    if not isinstance(raw, dict):
        raise _err(path, key, "must be a table { value = ..., source = \"...\", basis = \"vendor|measured|derived|assumed\" }"
                   f", got {type(raw).__name__} {raw!r}")
    unknown = set(raw) - _QUANTITY_KEYS
    if unknown:
        raise _err(path, f"{key}.{sorted(unknown)[0]}", f"unknown key (allowed: {', '.join(sorted(_QUANTITY_KEYS))})")
    for req in ("value", "source", "basis"):
        if req not in raw:
            raise _err(path, f"{key}.{req}", "missing field")
    v = raw["value"]
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise _err(path, f"{key}.value", f"must be a number, got {type(v).__name__} {v!r}")
    if typ == "int" and not isinstance(v, int):
        raise _err(path, f"{key}.value", f"must be an integer, got {v!r}")
    if not v > 0 or v != v or v == float("inf"):
        raise _err(path, f"{key}.value", f"must be a positive finite number, got {v!r}")
    for sk in ("source", "basis", "unit", "note"):
        if sk in raw and not isinstance(raw[sk], str):
            raise _err(path, f"{key}.{sk}", f"must be a string, got {type(raw[sk]).__name__}")
    if not raw["source"].strip():
        raise _err(path, f"{key}.source", "must not be empty: every number needs a source")
    if raw["basis"] not in BASES:
        raise _err(path, f"{key}.basis", f"must be one of {', '.join(BASES)}, got {raw['basis']!r}")
    return Quantity(value=v, source=raw["source"], basis=raw["basis"], unit=raw.get("unit", ""),
                    note=raw.get("note", ""))


def _table(path, name: str, raw: Any, schema: dict, kind: str, out: dict, extra_str: dict | None = None) -> None:
    if not isinstance(raw, dict):
        raise _err(path, name, f"must be a table, got {type(raw).__name__}")
    extra_str = extra_str or {}
    for k in raw:
        if k not in schema and k not in extra_str:
            raise _err(path, f"{name}.{k}", f"unknown key (allowed: {', '.join(sorted([*schema, *extra_str]))})")
    for k, (typ, req_ipu, req_gpu) in schema.items():
        required = req_ipu if kind == "ipu" else req_gpu
        if k not in raw:
            if required:
                raise _err(path, f"{name}.{k}", "missing field")
            continue
        out[f"{name}.{k}"] = _quantity(path, f"{name}.{k}", raw[k], typ)


def _parse(path: Path, expected_id: str | None) -> DeviceSpec:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as e:
        raise _err(path, "<toml>", f"not valid TOML: {e}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise _err(path, "<file>", f"cannot read: {e}") from None

    for k in data:
        if k not in _TOP:
            raise _err(path, k, f"unknown key (allowed: {', '.join(sorted(_TOP))})")
    for k in ("id", "name", "kind", "compute", "memory"):
        if k not in data:
            raise _err(path, k, "missing field")
    for k in ("id", "name", "kind"):
        if not isinstance(data[k], str) or not data[k].strip():
            raise _err(path, k, f"must be a non-empty string, got {data[k]!r}")
    if "schema_version" in data:
        sv = data["schema_version"]
        if isinstance(sv, bool) or not isinstance(sv, int):
            raise _err(path, "schema_version", f"must be an integer, got {sv!r}")
        if sv > SCHEMA_VERSION:
            raise _err(path, "schema_version", f"version {sv} is newer than this loader understands ({SCHEMA_VERSION})")
    kind = data["kind"]
    if kind not in KINDS:
        raise _err(path, "kind", f"must be one of {', '.join(KINDS)}, got {kind!r}")
    if expected_id is not None and data["id"] != expected_id:
        raise _err(path, "id", f"is {data['id']!r} but the file is named for {expected_id!r}")
    notes = data.get("notes", [])
    if not isinstance(notes, list) or not all(isinstance(n, str) for n in notes):
        raise _err(path, "notes", "must be a list of strings")

    q: dict[str, Quantity] = {}
    _table(path, "compute", data["compute"], _COMPUTE, kind, q)

    # memory levels
    mem = data["memory"]
    if not isinstance(mem, list) or not all(isinstance(m, dict) for m in mem):
        raise _err(path, "memory", "must be an array of tables ([[memory]] blocks)")
    allowed_levels = IPU_LEVELS if kind == "ipu" else GPU_LEVELS
    levels: list[MemoryLevel] = []
    seen = set()
    for i, m in enumerate(mem):
        lvl = m.get("level")
        if not isinstance(lvl, str):
            raise _err(path, f"memory[{i}].level", "missing field" if lvl is None else "must be a string")
        if lvl not in allowed_levels:
            raise _err(path, f"memory[{i}].level", f"unknown level {lvl!r} for a {kind} (allowed: {', '.join(allowed_levels)})")
        if lvl in seen:
            raise _err(path, f"memory[{i}].level", f"level {lvl!r} appears twice")
        seen.add(lvl)
        name = f"memory.{lvl}"
        for k in m:
            if k not in (*_MEMORY_LEVEL_KEYS, "level", "label", "note"):
                raise _err(path, f"{name}.{k}", "unknown key (allowed: level, label, note, bandwidth_bytes_per_s, capacity_bytes)")
        for sk in ("label", "note"):
            if sk in m and not isinstance(m[sk], str):
                raise _err(path, f"{name}.{sk}", "must be a string")
        sub: dict[str, Quantity] = {}
        schema = dict(_MEMORY_LEVEL_KEYS)
        if (kind, lvl) in _BW_OPTIONAL:
            schema["bandwidth_bytes_per_s"] = ("float", False, False)
        _table(path, name, {k: v for k, v in m.items() if k in _MEMORY_LEVEL_KEYS}, schema, kind, sub)
        q.update(sub)
        levels.append(MemoryLevel(level=lvl, label=m.get("label", lvl), bandwidth=sub.get(f"{name}.bandwidth_bytes_per_s"),
                                  capacity=sub.get(f"{name}.capacity_bytes"), note=m.get("note", "")))
    for lvl in _REQUIRED_LEVELS[kind]:
        if lvl not in seen:
            raise _err(path, f"memory.{lvl}", f"missing memory level (a {kind} needs {', '.join(_REQUIRED_LEVELS[kind])})")

    order = "column-major"
    if kind == "ipu":
        if "emulator" not in data:
            raise _err(path, "emulator", "missing field (an IPU spec needs the emulator cost-model constants)")
        _table(path, "emulator", data["emulator"], EMULATOR_KEYS, kind, q)
        if "floorplan" in data:
            fp = data["floorplan"]
            _table(path, "floorplan", fp, _FLOORPLAN, kind, q, _FLOORPLAN_STR)
            order = fp.get("order", "column-major")
            if order not in _FLOORPLAN_STR["order"]:
                raise _err(path, "floorplan.order", f"must be one of {', '.join(_FLOORPLAN_STR['order'])}, got {order!r}")
            if "basis_note" in fp and not isinstance(fp["basis_note"], str):
                raise _err(path, "floorplan.basis_note", "must be a string")
            cells = q["floorplan.columns"].value * q["floorplan.tiles_per_column"].value
            if cells != q["compute.tiles"].value:
                raise _err(path, "floorplan", f"columns x tiles_per_column = {cells} but compute.tiles = {q['compute.tiles'].value}")
    else:
        for k in ("emulator", "floorplan"):
            if k in data:
                raise _err(path, k, "only IPU specs have this table")
        if "estimator" in data:
            _table(path, "estimator", data["estimator"], GPU_ESTIMATOR_KEYS, kind, q)
    if kind == "ipu" and "estimator" in data:
        raise _err(path, "estimator", "only GPU specs have this table")
    if "price" in data:
        _table(path, "price", data["price"], _PRICE, kind, q)

    return DeviceSpec(id=data["id"], name=data["name"], kind=kind, path=path, quantities=q,
                      memory_levels=tuple(levels), notes=tuple(notes), floorplan_order=order)
