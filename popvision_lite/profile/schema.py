"""The profile contract: what the emulator writes and every reader may rely on.

This module is the single source of truth for table names, column names, codes and
categories.  ``docs/profile-format.md`` documents the on-disk layout built from it.

Identifiers
-----------
* A *global tile* index is ``ipu * tiles_per_ipu + tile_in_ipu`` (0 .. num_tiles-1).
* A *step* is one BSP step of the executed run (Repeat bodies are unrolled), in time order.
* A *liveness step* (``lstep``) is one leaf program in compile-time program order
  (Repeat bodies counted once), as in Poplar's liveness report.
* ``op_id`` / ``prog_id`` / ``cs_id`` / ``var_id`` are dense ints from 0; -1 means "none".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

FORMAT_NAME = "popvision-lite-profile"
FORMAT_VERSION = 4  # bump on any incompatible change; readers refuse newer major versions
# v4: a stored row of a step x tile array spans ONE IPU's tiles (tiles_per_ipu columns): each array stores a row per
# (step, IPU) whose tiles hold a non-zero value, in (step, IPU) order, and "arrays/<array>.rows" (stored rows x 2,
# int64: step, IPU) says which; the reader expands them to the replica's tiles.  A step of every IPU (ipu -1) stores
# one row per IPU holding data, like any other.  "step_tile_stored" is gone.  Files of versions 1-3 still open
# (decision 0400).
# v3: each step x tile array stores only its rows (steps) holding a non-zero value, in step order; column k of
# the bool array "arrays/step_tile_stored" (steps x 3) marks the stored steps of the k-th of step_tile_cycles,
# step_tile_bytes_in, step_tile_bytes_out; the rows left out are all zeros.  Files of versions 1-2 store every row
# and still open.  (decision 0120)
# v2: steps of different IPUs may overlap in time (per-IPU lanes of a pipeline); the run dict
# gains "schedule", "samples_per_second" and, for composed runs, "training_state" and "profile_note".
# v1 files (one global timeline) still open: their steps simply never overlap.
# v2.1 (minor, writer.FORMAT_MINOR): pipelined runs add run["op_counts"] (runs_per_step,
# calls_per_microbatch, runs_per_call per op); 2.0 files without it are read by the rule their writer used.
# v2.2 (minor): the "phases" table (the training step's fill / steady state / drain / all-reduce / optimizer /
# streams and which stored steps represent each, profile/phases.py); older files get it rebuilt from
# run["schedule"] by the same function, and run["replicas"] / run["stages"] are read from the schedule.

# BSP step kinds, stored as int8 codes (index into this tuple).
STEP_KINDS: tuple[str, ...] = (
    "compute",            # OnTileExecute of a compute set
    "sync",               # internal or external (global) sync
    "exchange_internal",  # DoExchange between tiles of one IPU
    "exchange_global",    # exchange between IPUs over IPU-Links
    "stream_copy",        # StreamCopy host/streaming memory (DDR) <-> tiles
)
STEP_KIND_CODE = {k: i for i, k in enumerate(STEP_KINDS)}

# Poplar's memory category names, in PopVision's order.
MEMORY_CATEGORIES: tuple[str, ...] = (
    "variable",
    "constant",
    "vertexCode",
    "vertexInstanceState",
    "vertexFieldData",
    "vectorListDescriptor",
    "controlCode",
    "controlId",
    "controlTable",
    "copyDescriptor",
    "internalExchangeCode",
    "globalExchangeCode",
    "hostExchangeCode",
    "hostExchangePacketHeader",
    "globalExchangePacketHeader",
    "instrumentationResults",
    "stack",
)
CATEGORY_CODE = {c: i for i, c in enumerate(MEMORY_CATEGORIES)}
LIVENESS_CLASSES: tuple[str, ...] = ("always_live", "not_always_live")

PROGRAM_KINDS: tuple[str, ...] = ("Sequence", "Repeat", "Execute", "Copy", "Sync", "StreamCopy")

# Column lists of every table (order is the stored order).  dtype hints in comments.
TABLE_COLUMNS: dict[str, tuple[str, ...]] = {
    # one row per BSP step; per-step aggregates let views avoid the step x tile matrix
    "steps": (
        "step",          # int64, 0..n_steps-1
        "kind",          # int8 code into STEP_KINDS
        "op_id",         # int32, -1 for none (e.g. a bare sync)
        "prog_id",       # int32, leaf program that issued the step
        "ipu",           # int16, -1 = all IPUs take part
        "start_cycle",   # int64, cycles since run start
        "end_cycle",     # int64
        "busy_max",      # int64, max over tiles of busy cycles in this step
        "busy_mean",     # float64, mean over all tiles
        "tiles_active",  # int32, tiles with busy > 0
        "bytes_in",      # int64, total over tiles
        "bytes_out",     # int64
    ),
    # one row per model operation (a matmul, a layer norm ...); feeds the roofline
    "ops": (
        "op_id", "name", "type",    # str name like "layer3/attention/qk_matmul", type like "matmul"
        "ipu",                      # int16, -1 = several
        "precision",                # "fp16" | "fp32" | "int32"
        "flops",                    # int64 floating-point operations
        "bytes_sram",               # int64 bytes read+written from tile SRAM by vertices
        "bytes_exchange",           # int64 bytes moved tile-to-tile on one IPU
        "bytes_ipu_link",           # int64 bytes moved between IPUs
        "bytes_ddr",                # int64 bytes moved to/from streaming memory
        "min_bytes",                # int64 compulsory bytes (inputs + outputs once): the GPU HBM bound
        "cycles",                   # int64 cycles of steps owned by the op (sum of step durations)
        "compute_cycles", "exchange_cycles", "sync_cycles", "stream_cycles",  # int64 split of cycles
        "tiles_used",               # int32
        "plan",                     # str, planner's choice, e.g. "M=4 N=46 K=8 split"
    ),
    # program tree (compile-time), parent before child
    "programs": (
        "prog_id", "parent_id", "kind", "name", "op_id",
        "repeat",        # int64 repeat count (1 unless Repeat)
        "cs_id",         # int32 compute set for Execute, else -1
        "first_step",    # int64 first BSP step it issued (-1 if none)
        "last_step",     # int64 last BSP step it issued, inclusive (-1 if none)
        "code_bytes",    # int64 control code attributed to this program
        "cycles",        # int64 total cycles of its steps (children included)
        "lstep",         # int64 liveness step for leaves, -1 for containers
    ),
    "compute_sets": ("cs_id", "name", "op_id", "num_vertices", "num_tiles"),
    # vertices aggregated per (compute set, codelet, tile)
    "vertices": ("cs_id", "codelet", "tile", "count", "cycles", "state_bytes", "code_bytes"),
    "variables": (
        "var_id", "name",
        "kind",            # "variable" | "constant"
        "dtype", "shape",  # str, e.g. "float16", "(128, 768)"
        "bytes",           # int64 total over tiles
        "always_live",     # bool
        "first_lstep",     # int64 first liveness step where live (-1 when always live)
        "last_lstep",      # int64 last liveness step where live, inclusive
        "op_id",           # int32 producing op (-1 for inputs / weights)
    ),
    "variable_tiles": ("var_id", "tile", "bytes"),
    # the live intervals of a variable that is live more than once: a program run again (recomputation, a
    # replayed block) writes it anew, so it is dead between its last read and that write.  A variable with
    # no row here is live over its first_lstep..last_lstep; one with rows only inside them (inclusive)
    "variable_intervals": ("var_id", "first_lstep", "last_lstep"),
    "liveness_steps": (
        "lstep", "prog_id", "name",
        "total_bytes",     # int64 not-always-live bytes summed over tiles
        "max_tile_bytes",  # int64 not-always-live bytes on the fullest tile
        "max_tile",        # int32 that tile
    ),
    # the training step's phases (profile/phases.py): which stored steps stand for which part of the step and
    # how often that part runs per training step; every total weights a stored step by these runs
    "phases": (
        "phase_id",        # int32, 0..n-1 in time order
        "name",            # str shown on screen: "fill", "steady state", "drain", "all-reduce", ...
        "kind",            # str, one of phases.PHASE_KINDS
        "ipu",             # int16, -1 = every IPU of the replica
        "start_cycle",     # int64 cycles from the step's start to the phase's first run (wall time)
        "cycles",          # int64 duration of ONE run (wall time)
        "runs_per_step",   # int64 runs per training step, back to back
        "first_step",      # int64 first stored step representing the phase (-1 none stored)
        "last_step",       # int64 last one, inclusive (-1 none)
        "stored_runs",     # int64 runs the stored steps hold (each stored step runs runs_per_step / stored_runs)
        "time_kind",       # str: a step kind (STEP_KINDS) the phase's time counts as when none stored, else ""
        # int64 busy IPU cycles of ONE run per step kind, summed over the IPUs (a step on every IPU once per
        # IPU), as the producer composed them from every pipeline cycle, drawn or not; -1 = not recorded
        # (the totals then weight the stored steps)
        "ipu_compute", "ipu_sync", "ipu_exchange_internal", "ipu_exchange_global", "ipu_stream_copy",
    ),
}
# Keys: the id column of each table (dense 0..n-1, in row order), the columns that refer to a row of another
# table ((table, column) -> (table referred to, -1 allowed)), the tree link of the programs (-1 or an earlier
# program) and the columns holding a global tile index.  profile/consistency.py checks a file by this map and
# profile/assemble.py concatenates profile parts by it (each part's ids shifted past the parts before it).
ID_COLUMNS: dict[str, str] = {"steps": "step", "ops": "op_id", "programs": "prog_id", "compute_sets": "cs_id",
                              "variables": "var_id", "liveness_steps": "lstep", "phases": "phase_id"}
REFERENCES: dict[tuple[str, str], tuple[str, bool]] = {
    ("steps", "op_id"): ("ops", True), ("steps", "prog_id"): ("programs", True),
    ("ops", "op_id"): ("ops", False),
    ("programs", "op_id"): ("ops", True), ("programs", "cs_id"): ("compute_sets", True),
    ("programs", "first_step"): ("steps", True), ("programs", "last_step"): ("steps", True),
    ("programs", "lstep"): ("liveness_steps", True),
    ("compute_sets", "op_id"): ("ops", True),
    ("vertices", "cs_id"): ("compute_sets", False),
    ("variables", "op_id"): ("ops", True),
    ("variables", "first_lstep"): ("liveness_steps", True), ("variables", "last_lstep"): ("liveness_steps", True),
    ("variable_tiles", "var_id"): ("variables", False),
    ("variable_intervals", "var_id"): ("variables", False),
    ("variable_intervals", "first_lstep"): ("liveness_steps", False),
    ("variable_intervals", "last_lstep"): ("liveness_steps", False),
    ("liveness_steps", "prog_id"): ("programs", True),
    ("phases", "first_step"): ("steps", True), ("phases", "last_step"): ("steps", True),
}
PARENT_COLUMNS: dict[str, str] = {"programs": "parent_id"}
TILE_COLUMNS: dict[str, tuple[str, ...]] = {"vertices": ("tile",), "variable_tiles": ("tile",),
                                            "liveness_steps": ("max_tile",)}

# Tables a file of an older minor version may lack; the reader rebuilds them (phases: from run["schedule"];
# variable_intervals: empty, its writer recorded one interval per variable).
OPTIONAL_TABLES: tuple[str, ...] = ("phases", "variable_intervals")

# Columns the reader adds to a stored table, after the stored ones (never written): the notebook API and
# the CSV export show the same thing.  steps: kind_name (categorical of STEP_KINDS), cycles (end - start)
# and seconds (cycles / the target's clock).
DERIVED_COLUMNS: dict[str, tuple[str, ...]] = {"steps": ("kind_name", "cycles", "seconds")}

# Tables the reader builds from the stored arrays; every name of TABLES works for Profile.table(),
# export_csv() and `popvision-lite export`.  tiles: tile, ipu, tile_in_ipu, capacity_bytes;
# memory_by_tile: tile, bytes per memory category, always_live, not_always_live, total, capacity,
# over_capacity.
DERIVED_TABLES: tuple[str, ...] = ("tiles", "memory_by_tile")
TABLES: tuple[str, ...] = tuple(TABLE_COLUMNS) + DERIVED_TABLES

# Stored dtype of every column ("str" = text, stored dictionary-encoded).  The writer casts to these
# (refusing values that do not fit) and the reader returns them, whatever the producer used.
_I8, _I16, _I32, _I64, _F64, _B, _S = "int8", "int16", "int32", "int64", "float64", "bool", "str"
COLUMN_DTYPES: dict[str, dict[str, str]] = {
    "steps": dict(step=_I64, kind=_I8, op_id=_I32, prog_id=_I32, ipu=_I16, start_cycle=_I64, end_cycle=_I64,
                  busy_max=_I64, busy_mean=_F64, tiles_active=_I32, bytes_in=_I64, bytes_out=_I64),
    "ops": dict(op_id=_I32, name=_S, type=_S, ipu=_I16, precision=_S, flops=_I64, bytes_sram=_I64,
                bytes_exchange=_I64, bytes_ipu_link=_I64, bytes_ddr=_I64, min_bytes=_I64, cycles=_I64,
                compute_cycles=_I64, exchange_cycles=_I64, sync_cycles=_I64, stream_cycles=_I64,
                tiles_used=_I32, plan=_S),
    "programs": dict(prog_id=_I32, parent_id=_I32, kind=_S, name=_S, op_id=_I32, repeat=_I64, cs_id=_I32,
                     first_step=_I64, last_step=_I64, code_bytes=_I64, cycles=_I64, lstep=_I64),
    "compute_sets": dict(cs_id=_I32, name=_S, op_id=_I32, num_vertices=_I64, num_tiles=_I32),
    "vertices": dict(cs_id=_I32, codelet=_S, tile=_I32, count=_I64, cycles=_I64, state_bytes=_I64,
                     code_bytes=_I64),
    "variables": dict(var_id=_I32, name=_S, kind=_S, dtype=_S, shape=_S, bytes=_I64, always_live=_B,
                      first_lstep=_I64, last_lstep=_I64, op_id=_I32),
    "variable_tiles": dict(var_id=_I32, tile=_I32, bytes=_I64),
    "variable_intervals": dict(var_id=_I32, first_lstep=_I64, last_lstep=_I64),
    "liveness_steps": dict(lstep=_I64, prog_id=_I32, name=_S, total_bytes=_I64, max_tile_bytes=_I64,
                           max_tile=_I32),
    "phases": dict(phase_id=_I32, name=_S, kind=_S, ipu=_I16, start_cycle=_I64, cycles=_I64, runs_per_step=_I64,
                   first_step=_I64, last_step=_I64, stored_runs=_I64, time_kind=_S, ipu_compute=_I64,
                   ipu_sync=_I64, ipu_exchange_internal=_I64, ipu_exchange_global=_I64, ipu_stream_copy=_I64),
}

# format 3: which steps each step x tile array stores (bool, steps x 3, in the order of the three arrays below)
STORED_ROWS = "step_tile_stored"
# format 4: the (step, IPU) of each stored row of step x tile array ``name``: "arrays/" + rows_of(name), (rows, 2)
# int64, strictly increasing in (step, IPU)
ROWS_SUFFIX = ".rows"


def rows_of(name: str) -> str:
    """The array (format 4) naming the (step, IPU) of each stored row of step x tile array ``name``."""
    return name + ROWS_SUFFIX


# Dense arrays: name -> (dims, dtype)
ARRAYS: dict[str, tuple[tuple[str, ...], str]] = {
    # bytes per tile per category, split [always_live, not_always_live(peak)]
    "memory": (("tile", "category", "liveness"), "int64"),
    "liveness_tile_bytes": (("lstep", "tile"), "uint32"),  # not-always-live bytes per liveness step
    # (format 4: stored as (step, IPU) rows of one IPU's tiles, rows_of(name); the reader gives (step, tile))
    "step_tile_cycles": (("step", "tile"), "uint32"),      # busy cycles of each tile in each step
    "step_tile_bytes_in": (("step", "tile"), "uint32"),
    "step_tile_bytes_out": (("step", "tile"), "uint32"),
}


@dataclass
class TargetInfo:
    """The machine a profile was made for (copied from the device spec at run time)."""

    device: str                # spec id, e.g. "ipu-mk2"
    name: str                  # human name, e.g. "IPU Mk2 (GC200)"
    num_ipus: int
    tiles_per_ipu: int
    sram_bytes_per_tile: int
    clock_hz: float
    threads_per_tile: int

    @property
    def num_tiles(self) -> int:
        return self.num_ipus * self.tiles_per_ipu

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class ProfileData:
    """Everything a profile holds, in memory; the emulator fills it and ``write_profile`` stores it.

    Step-tile arrays may be numpy arrays or any array-like supporting ``a[i:j]`` slicing
    and ``.shape`` (e.g. np.memmap) so huge synthetic runs can be written in chunks.

    Each table (``steps``, ``ops``, ...) is given as a pandas DataFrame or as typed numpy columns
    (``profile.columns.Columns``: what the emulator builds, no pandas).  Reading the attribute gives a DataFrame:
    one built from the columns on first access replaces them (pandas is imported then), so a caller that changes
    it in place changes what is written.  :meth:`table` gives the table as held, which the writer writes without
    pandas while it is columns.  ``phases`` None: the writer builds it from run["schedule"] (profile/phases.py);
    ``variable_intervals`` None: every variable is live in one interval.  The instance's ``__dict__`` holds the
    constructor's arguments by name.
    """

    def __init__(self, target: TargetInfo, run: dict[str, Any], memory: np.ndarray, steps, step_tile_cycles: Any,
                 step_tile_bytes_in: Any, step_tile_bytes_out: Any, ops, programs, compute_sets, vertices, variables,
                 variable_tiles, liveness_steps, liveness_tile_bytes: np.ndarray,
                 extra: dict[str, Any] | None = None, phases=None, variable_intervals=None):
        self.target = target
        self.run = run  # model, config, emulator_version, created, fits, timing_only, numeric_checks{}
        self.memory = memory
        self.steps = steps
        self.step_tile_cycles = step_tile_cycles
        self.step_tile_bytes_in = step_tile_bytes_in
        self.step_tile_bytes_out = step_tile_bytes_out
        self.ops = ops
        self.programs = programs
        self.compute_sets = compute_sets
        self.vertices = vertices
        self.variables = variables
        self.variable_tiles = variable_tiles
        self.liveness_steps = liveness_steps
        self.liveness_tile_bytes = liveness_tile_bytes
        self.extra = {} if extra is None else extra  # free-form JSON-able notes
        self.phases = phases
        self.variable_intervals = variable_intervals

    def table(self, name: str):
        """Table ``name`` as held: ``Columns`` until a DataFrame of it is given or handed out, then that DataFrame;
        None for an optional table left to the writer."""
        if name not in TABLE_COLUMNS:
            raise KeyError(f"ProfileData has no table {name!r}")
        return self.__dict__.get(name)

    def num_rows(self, name: str) -> int:
        """Rows of table ``name`` (0 for a table left to the writer), without building a DataFrame."""
        t = self.table(name)
        return 0 if t is None else len(t)

    def stored_table(self, name: str):
        """Table ``name`` as the analyses read it (``Profile.stored_table``): the producer's frame (None for an
        optional table the producer left to the writer)."""
        if name not in TABLE_COLUMNS:
            raise KeyError(f"ProfileData has no table {name!r}")
        return getattr(self, name)


def _table_property(name: str) -> property:
    def get(self):
        value = self.__dict__.get(name)
        if value is not None and callable(getattr(value, "frame", None)):  # Columns: a DataFrame from now on
            value = self.__dict__[name] = value.frame()
        return value

    def put(self, value) -> None:
        self.__dict__[name] = value

    return property(get, put, doc=f"The {name} table as a DataFrame (see ProfileData).")


for _name in TABLE_COLUMNS:
    setattr(ProfileData, _name, _table_property(_name))
del _name


def empty_table(name: str):
    """Table ``name`` with no rows (a DataFrame), its columns in the stored order and dtypes."""
    import pandas as pd

    return pd.DataFrame({c: pd.Series(dtype=object if dt == "str" else dt) for c, dt in COLUMN_DTYPES[name].items()})


def stored_table(profile, name: str):
    """Table ``name`` in the stored form the analyses and views read, of an open ``Profile``, a ``ProfileData``
    or a stand-in that only has the attribute (tests); None when it has none."""
    fn = getattr(profile, "stored_table", None)
    if callable(fn):
        return fn(name)
    return getattr(profile, name, None)
