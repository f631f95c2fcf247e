"""The run record of a profile, typed and checked: the schedule, the op counts, the config and training state that
analysis reads from the header's ``run`` object (issue 45, decision 0211).

``run`` is a JSON object in the profile's header (``docs/profile-format.md``: "Run keys").  It used to be read as a
plain dict by some twenty modules, each with its own defaults and its own idea of a valid value, so a file saying
``replicas: "x"``, ``grad_accum: [1]`` or ``fill_cycles: 1e30`` ended in a TypeError, an OverflowError or a
divisor search that never ended.  Here each key that analysis reads is declared ONCE, as a :class:`Key` (name,
kind, unit, bounds, default, meaning), and a record type (:class:`Schedule`, :class:`OpCountsRecord`,
:class:`ConfigRecord`, :class:`TrainingStateIPU`, :class:`RunRecord`) checks a mapping against its keys:

* a key that is present must have its kind and lie within its bounds, or the whole record is refused with a
  ``ProfileError`` naming the file, the key (``run['schedule']['replicas']``) and the problem;
* an absent key reads as its declared default (``sch.replicas`` is 1 when a file has no schedule); whether a
  key was recorded at all is ``"key" in sch`` (a 2.0 file has no ``fill_cycles``, an old one no schedule);
* keys not declared here (a newer minor version's, free-form notes) are kept out of the typed record: nothing
  reads them.

Readers get a record through :func:`record_of` (``Profile.record``, checked once when first asked for, like a
table); the emulator builds its schedule through :meth:`Schedule.build` (``RunResult`` does, once, from what the
composition computed), so a value the emulator would write is checked by the same declarations a reader applies.

A new schedule key is one more :class:`Key` line in :data:`SCHEDULE_KEYS`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar

from popvision_lite.value_checks import MODEL_LIMITS

# ---- bounds (each with why)
STEP_LIMIT = 2 ** 50   # cycles of one training step: 7 days at 1.85 GHz; every cycle count of the record
MAX_STEP_SECONDS = 1e7      # seconds of one step or one host term (116 days)
MAX_IPUS = 1024             # largest IPU system built (consistency.MAX_IPUS)
MAX_BYTES = 2 ** 50         # bytes one IPU moves or holds per step (1 PiB)
MAX_SAMPLES = 2.0 ** 53     # samples of one step, all replicas
MAX_RATE = 1e15             # samples per second (or GB/s), far above any system
MAX_LIST = 1 << 20          # entries of a per-IPU / per-op list (an ops table row each at most)
MAX_MAP = 256               # entries of a {name: value} map (per-step terms, phases, tensor-parallel phases)
MAX_TEXT = 4096             # characters of one text value (consistency.MAX_STRING)
MAX_KEYS = 4096             # keys of one record object, declared or not
MAX_OP_CALLS = 1 << 16      # calls of one op per micro-batch (layers on an IPU x replays)
MAX_OP_RUNS = MAX_OP_CALLS * 8 * MODEL_LIMITS["grad_accum"][1]  # runs of one op per step (x grad_accum)
MAX_PARAMS = 1e15           # parameters of a model (GPT-3: 1.75e11)
MAX_BATCH = 1 << 28         # samples of one micro-batch: an ONNX graph input's elements at most (onnx_import's bound;
#                             the bundled models' batch is at most MODEL_LIMITS["batch"], 65,536)

INT, FLOAT, NUMBER, BOOL, TEXT = "int", "float", "number", "bool", "text"
INTS, FLOATS, FLOAT_OR_FLOATS, INT_PAIRS = "ints", "floats", "float_or_floats", "int_pairs"
FLOAT_MAP, INT_MAP, INT_MAP_MAP = "float_map", "int_map", "int_map_map"
RECORD, RECORDS = "record", "records"


@dataclass(frozen=True)
class Key:
    """One key of a run record: ``kind`` (INT, FLOAT, ... above), ``unit`` (cycles, s, bytes, samples ... or ""),
    accepted ``lo``..``hi`` (of each number, for list and map kinds), ``default`` (what an absent key reads as)
    and what it means.  ``record``: the record type of a RECORD / RECORDS key."""

    name: str
    kind: str
    unit: str = ""
    lo: float = 0
    hi: float = STEP_LIMIT
    default: Any = None
    doc: str = ""
    record: type | None = None

    def describe(self) -> str:
        bounds = f"{_num_text(self.lo)}..{_num_text(self.hi)}"
        what = {INT: "a whole number", INTS: "a list of whole numbers", INT_MAP: "an object of whole numbers",
                INT_MAP_MAP: "an object of objects of whole numbers", INT_PAIRS: "a list of lists of whole numbers",
                FLOAT: "a finite number", FLOATS: "a list of finite numbers", FLOAT_MAP: "an object of finite numbers",
                FLOAT_OR_FLOATS: "a finite number or a list of them", NUMBER: "a finite number"}.get(self.kind)
        if what:
            return f"{what} {bounds}"
        return {BOOL: "true or false", TEXT: f"text of at most {MAX_TEXT:,} characters",
                RECORD: "an object", RECORDS: "a list of objects"}.get(self.kind, self.kind)


def _num_text(v) -> str:
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e6:
        v = int(v)
    if isinstance(v, int) and v >= 1 << 20:
        e = v.bit_length() - 1
        return f"2^{e}" if v == 1 << e else f"{v:.3g}"
    return f"{v:g}" if isinstance(v, float) else str(v)


ErrorFactory = Callable[[str], Exception]


def _shown(v) -> str:
    s = repr(v)
    return s if len(s) <= 60 else s[:57] + "..."


class _Bad(Exception):
    """A value that is not what its key declares (the message says what it is and what it should be)."""


def _int(v, lo, hi):
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise _Bad(f"{_shown(v)} is not a whole number")
    if isinstance(v, float) and (not math.isfinite(v) or not v.is_integer()):
        raise _Bad(f"{_shown(v)} is not a whole number")
    if not lo <= v <= hi:
        raise _Bad(f"{_shown(v)} is outside {_num_text(lo)}..{_num_text(hi)}")
    return int(v)


def _float(v, lo, hi):
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise _Bad(f"{_shown(v)} is not a number")
    if isinstance(v, int) and abs(v) > 2 ** 1023:
        raise _Bad(f"{_shown(v)} is outside {_num_text(lo)}..{_num_text(hi)}")
    v = float(v)
    if not math.isfinite(v):
        raise _Bad(f"{_shown(v)} is not a finite number")
    if not lo <= v <= hi:
        raise _Bad(f"{_shown(v)} is outside {_num_text(lo)}..{_num_text(hi)}")
    return v


def _number(v, lo, hi):
    """A finite number within lo..hi as recorded: an int stays an int (a count), a float a float (a half layer)."""
    f = _float(v, lo, hi)
    return v if isinstance(v, int) else f


def _text(v):
    if not isinstance(v, str):
        raise _Bad(f"{_shown(v)} is not text")
    if len(v) > MAX_TEXT:
        raise _Bad(f"text of {len(v):,} characters (at most {MAX_TEXT:,})")
    return v


def _list(v, what: str, limit: int = MAX_LIST) -> list:
    if not isinstance(v, list | tuple):
        raise _Bad(f"{_shown(v)} is not a list of {what}")
    if len(v) > limit:
        raise _Bad(f"a list of {len(v):,} entries (at most {limit:,})")
    return list(v)


def _map(v, what: str) -> dict:
    if not isinstance(v, Mapping):
        raise _Bad(f"{_shown(v)} is not an object of {what}")
    if len(v) > MAX_MAP:
        raise _Bad(f"an object of {len(v):,} entries (at most {MAX_MAP})")
    for k in v:
        if not isinstance(k, str) or len(k) > 256:
            raise _Bad(f"entry name {_shown(k)} is not a name of at most 256 characters")
    return dict(v)


def _entries(items, check) -> Iterator:
    for i, x in items:
        try:
            yield i, check(x)
        except _Bad as e:
            raise _Bad(f"[{i!r}]: {e}") from None


def _checked(key: Key, v, where: str, err: ErrorFactory):
    lo, hi = key.lo, key.hi
    k = key.kind
    if k == INT:
        return _int(v, lo, hi)
    if k == FLOAT:
        return _float(v, lo, hi)
    if k == BOOL:
        if not isinstance(v, bool):
            raise _Bad(f"{_shown(v)} is not true or false")
        return v
    if k == TEXT:
        return _text(v)
    if k == INTS:
        return [x for _, x in _entries(enumerate(_list(v, "whole numbers")), lambda x: _int(x, lo, hi))]
    if k == FLOATS:  # whole numbers stay ints (layer_split [4, 6.5, 6.5]: the value as recorded)
        return [x for _, x in _entries(enumerate(_list(v, "numbers")), lambda x: _number(x, lo, hi))]
    if k == NUMBER:
        return _number(v, lo, hi)
    if k == FLOAT_OR_FLOATS:
        if isinstance(v, list | tuple):
            return [x for _, x in _entries(enumerate(_list(v, "numbers")), lambda x: _float(x, lo, hi))]
        return _float(v, lo, hi)
    if k == INT_PAIRS:
        def pair(x):
            return [y for _, y in _entries(enumerate(_list(x, "whole numbers", 8)), lambda y: _int(y, lo, hi))]
        return [x for _, x in _entries(enumerate(_list(v, "lists of whole numbers")), pair)]
    if k == FLOAT_MAP:
        return MappingProxyType(dict(_entries(_map(v, "numbers").items(), lambda x: _float(x, lo, hi))))
    if k == INT_MAP:
        return MappingProxyType(dict(_entries(_map(v, "whole numbers").items(), lambda x: _int(x, lo, hi))))
    if k == INT_MAP_MAP:
        def inner(x):
            return MappingProxyType(dict(_entries(_map(x, "whole numbers").items(), lambda y: _int(y, lo, hi))))
        return MappingProxyType(dict(_entries(_map(v, "objects").items(), inner)))
    if k == RECORD:
        return key.record.read(v, err, where)
    if k == RECORDS:
        return [key.record.read(x, err, f"{where}[{i}]") for i, x in enumerate(_list(v, "objects", MAX_IPUS))]
    raise AssertionError(f"unknown kind {k!r}")  # pragma: no cover - a declaration error


def _plain(v):
    """A checked value back as JSON-able plain data (records and mapping proxies -> dicts, lists copied)."""
    if isinstance(v, Record):
        return v.to_dict()
    if isinstance(v, list | tuple):
        return [_plain(x) for x in v]
    if isinstance(v, Mapping):
        return {k: _plain(x) for k, x in v.items()}
    return v


_EMPTY: dict[type, Record] = {}


def _rebuild(cls, data: dict):
    return cls.read(data, ValueError, cls.WHERE)


class Record(Mapping):
    """A checked record: typed attributes for its declared keys (``rec.replicas``: the value, or the key's
    default when absent), ``"key" in rec`` for whether the file recorded it, and read-only mapping access to the
    keys it recorded (``rec["replicas"]``, ``dict(rec)``).  Build one with :meth:`read` (a file's value) or
    :meth:`build` (the emulator's)."""

    KEYS: ClassVar[dict[str, Key]] = {}
    __slots__ = ("_values",)

    def __init__(self, values: dict | None = None):
        object.__setattr__(self, "_values", dict(values or {}))

    @classmethod
    def declare(cls, keys: tuple[Key, ...]) -> dict[str, Key]:
        out = {k.name: k for k in keys}
        assert len(out) == len(keys), f"{cls.__name__}: a key is declared twice"
        return out

    @classmethod
    def read(cls, value, err: ErrorFactory, where: str):
        """``value`` (from a file: anything JSON) checked against the declarations; ``err(problem)`` builds the
        error.  None reads as an empty record (every key its default)."""
        if value is None:
            return cls()
        if isinstance(value, Record):
            value = value.to_dict()
        if not isinstance(value, Mapping):
            raise err(f"{where} must be an object, got {_shown(value)}")
        if len(value) > MAX_KEYS:
            raise err(f"{where} has {len(value):,} keys (at most {MAX_KEYS:,})")
        values = {}
        for name, key in cls.KEYS.items():
            if name not in value or value[name] is None:
                continue
            w = f"{where}['{name}']"
            try:
                values[name] = _checked(key, value[name], w, err)
            except _Bad as e:
                unit = f" {key.unit}" if key.unit and key.kind in (INT, FLOAT, NUMBER) else ""
                raise err(f"{w}: {e}; expected {key.describe()}{unit}") from None
        rec = cls(values)
        problem = rec.problem()
        if problem:
            raise err(f"{where}: {problem}")
        return rec

    @classmethod
    def build(cls, mapping: Mapping):
        """The emulator's record: ``mapping`` through the same checks a reader applies (a value out of its
        declared bounds is an ``EmulatorError``: the run cannot be written as a profile that opens)."""
        from popvision_lite.errors import EmulatorError

        undeclared = sorted(set(mapping) - set(cls.KEYS)) if isinstance(mapping, Mapping) else []
        if undeclared:  # a key no reader would check: declare it (one Key line) before the emulator writes it
            raise EmulatorError(f"{cls.WHERE}: key(s) {', '.join(map(repr, undeclared))} are not declared in "
                                f"profile/run_record.py ({cls.__name__}.KEYS); declare each with its kind and bounds")
        return cls.read(mapping, lambda problem: EmulatorError(f"the run's record cannot be stored: {problem}"),
                        cls.WHERE)

    WHERE: ClassVar[str] = "run"

    def problem(self) -> str:
        """What is wrong between the record's values ('' when nothing); overridden where values must agree."""
        return ""

    def __getattr__(self, name: str):
        key = type(self).KEYS.get(name)
        if key is None:
            raise AttributeError(f"{type(self).__name__} has no key {name!r}")
        v = self._values.get(name)
        if v is not None:
            return v
        if key.kind == RECORD:  # an absent record reads as the empty one (every key its default), one per type
            return _EMPTY.setdefault(key.record, key.record())
        return key.default

    def __setattr__(self, name, value):
        raise AttributeError(f"{type(self).__name__} is read-only")

    def __copy__(self):  # read-only: a copy is the record itself
        return self

    def __deepcopy__(self, memo):
        return self

    def __reduce__(self):  # pickled as its plain data, checked again when unpickled (another process, a cache)
        return _rebuild, (type(self), self.to_dict())

    def __getitem__(self, name: str):
        return self._values[name]

    def __iter__(self):
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __contains__(self, name) -> bool:
        return name in self._values

    def __eq__(self, other) -> bool:
        if isinstance(other, Record):
            return type(self) is type(other) and self._values == other._values
        if isinstance(other, Mapping):  # the plain data it was read from (or stores)
            return self.to_dict() == dict(other)
        return NotImplemented

    __hash__ = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self._values.items())})"

    def to_dict(self) -> dict:
        """The recorded keys as plain JSON-able data (what a profile stores)."""
        return {k: _plain(v) for k, v in self._values.items()}


# ------------------------------------------------------------------------------------------------ the schedule
_C, _S, _B = "cycles", "s", "bytes"
_G = MODEL_LIMITS["grad_accum"]
SCHEDULE_KEYS: tuple[Key, ...] = (
    # the step
    Key("replicas", INT, "", 1, MODEL_LIMITS["replicas"][1], 1, "data-parallel replicas of the run"),
    Key("stages", INT, "", 1, MAX_IPUS, 1, "IPUs of one replica (pipeline stages)"),
    Key("ipus", INT, "", 1, MAX_IPUS, 1, "IPUs of one replica, as configured"),
    Key("grad_accum", INT, "", 1, _G[1], 1, "micro-batches per step (gradient accumulation)"),
    Key("micro_batch", INT, "samples", 1, MAX_BATCH, 1, "samples of one micro-batch of one replica"),
    Key("packing", FLOAT, "", 1.0, MODEL_LIMITS["packing"][1], 1.0, "sequences per pack (BERT packing)"),
    Key("samples_per_step", FLOAT, "samples", 0.0, MAX_SAMPLES, 0.0, "samples of one step, all replicas"),
    Key("step_seconds", FLOAT, _S, 0.0, MAX_STEP_SECONDS, 0.0, "wall time of one step, host terms included"),
    Key("ipu_step_seconds", FLOAT, _S, 0.0, MAX_STEP_SECONDS, 0.0, "the step's IPU time (no host terms)"),
    Key("step_cycles", INT, _C, 0, STEP_LIMIT, 0, "IPU cycles of one step (no host terms)"),
    Key("per_step_terms", FLOAT_MAP, _S, 0.0, MAX_STEP_SECONDS, MappingProxyType({}),
        "host / runtime terms of a step {name: seconds}, each a phase"),
    Key("host_framework", TEXT, "", default="none", doc="the host framework whose per-step terms are added"),
    Key("host_framework_basis", TEXT, "", default="",
        doc="how the host framework was chosen: stated in the config, or inferred from the model (and why)"),
    Key("note", TEXT, "", default="", doc="how the step was composed"),
    Key("device_iterations", INT, "steps", 1, MODEL_LIMITS["device_iterations"][1], 1,
        "optimizer steps per call of the host framework (poptorch's device_iterations; absent: 1)"),
    # the pipeline
    Key("steady_cycles_per_microbatch", INT, _C, 0, STEP_LIMIT, 0, "a micro-batch's cycles in steady state"),
    Key("stage_cycles", INTS, _C, 0, STEP_LIMIT, (), "forward + backward cycles of each stage"),
    Key("stage_fwd_cycles", INTS, _C, 0, STEP_LIMIT, (), "forward cycles of each stage"),
    Key("stage_bwd_cycles", INTS, _C, 0, STEP_LIMIT, (), "backward cycles of each stage"),
    Key("layer_split", FLOATS, "layers", 0, MODEL_LIMITS["layers"][1], (),
        "layers on each IPU (pipelined runs; x.5: half a layer, its attention or its FFN block, as MLPerf BERT splits)"),
    Key("pipeline_placement", TEXT, "", default="sequential", doc="how stages are placed on the IPUs"),
    Key("stage_ipus", INTS, "", 0, MAX_IPUS - 1, (), "the IPU of each pipeline stage"),
    Key("pipeline_depth", INT, "", 1, MAX_IPUS, 1, "pipeline stages D (fill and drain are 2D - 2 cycles each)"),
    Key("blocks_per_ipu", INT_PAIRS, "blocks", 0, MODEL_LIMITS["layers"][1], (), "(attention, FFN) blocks per IPU"),
    Key("inter_ipu_copy_cycles", INT, _C, 0, STEP_LIMIT, 0, "the copy closing each pipeline cycle"),
    Key("pipeline_cycles", INT, "", 0, _G[1] + 2 * MAX_IPUS, 0, "pipeline cycles of a step (G + 2D - 2)"),
    Key("pipeline_total_cycles", INT, _C, 0, STEP_LIMIT, 0, "wall cycles of the whole pipeline"),
    Key("fill_drain_cycles", INT, _C, 0, STEP_LIMIT, 0, "fill + drain overhead over steady state"),
    Key("fill_cycles", INT, _C, 0, STEP_LIMIT, 0, "wall cycles of the first 2D - 2 pipeline cycles (2.2)"),
    Key("drain_cycles", INT, _C, 0, STEP_LIMIT, 0, "wall cycles of the last 2D - 2 pipeline cycles (2.2)"),
    Key("slowest_stage", INT, "", 0, MAX_IPUS - 1, 0, "the stage setting the steady state"),
    Key("stash_depth", INTS, "", 0, _G[1] + 2 * MAX_IPUS, (), "activations each stage stashes"),
    Key("phase_ipu_cycles", INT_MAP_MAP, _C, 0, STEP_LIMIT * MAX_IPUS, MappingProxyType({}),
        "{fill, steady, drain} -> busy IPU cycles of one run per step kind, summed over the IPUs (2.2)"),
    Key("profile_pipeline_cycles_shown", INT, "", 0, _G[1] + 2 * MAX_IPUS, 0, "pipeline cycles the timeline draws"),
    Key("profile_pipeline_cycles_elided", INT, "", 0, _G[1] + 2 * MAX_IPUS, 0, "pipeline cycles left out of it"),
    Key("elided_microbatches", INT, "", 0, _G[1] + 2 * MAX_IPUS, 0, "the same, under its 2.0 name"),
    Key("distinct_stage_programs", INT, "", 0, MAX_IPUS, 0, "stage programs built and compiled once each"),
    Key("outlined_ops", INT_MAP_MAP, "", 0, STEP_LIMIT, MappingProxyType({}),
        "per stage program: outlined compute sets and copies"),
    Key("phased_execution", BOOL, "", default=False, doc="weights streamed per phase (GPT-3 tensor parallel)"),
    Key("batch_serialised", BOOL, "", default=False, doc="layer inputs wait in streaming memory"),
    Key("tensor_parallel", INT, "", 1, MODEL_LIMITS["tensor_parallel"][1], 1, "IPUs each stage is sharded over"),
    Key("tensor_parallel_2", INT, "", *MODEL_LIMITS["tensor_parallel_2"], 1,
        "the second axis of 2-D tensor parallelism (PopXL GPT-3: tensor_parallel = first x this; absent: 1-D)"),
    Key("attention_serialisation", INT, "", *MODEL_LIMITS["attention_serialisation"], 1,
        "attention computed in this many serial slices (PopXL attention serialisation; absent: 1)"),
    Key("io_tiles", INT, "tiles", *MODEL_LIMITS["io_tiles"], 0, "tiles of each IPU kept for overlapped IO (PopXL io_tiles; absent: 0)"),
    Key("tensor_parallel_allreduce_cycles", INT_MAP, _C, 0, STEP_LIMIT, MappingProxyType({}),
        "cycles of each tensor-parallel all-reduce"),
    Key("tensor_parallel_allreduce_bytes", INT, _B, 0, MAX_BYTES, 0, "bytes of one tensor-parallel all-reduce"),
    # after the pipeline
    Key("optimizer_cycles", INT, _C, 0, STEP_LIMIT, 0, "the optimizer update, slowest IPU"),
    Key("allreduce_cycles", INT, _C, 0, STEP_LIMIT, 0, "the gradient all-reduce, slowest IPU"),
    Key("stream_cycles", INT, _C, 0, STEP_LIMIT, 0, "DDR streaming of the optimizer state, in and out"),
    Key("allreduce_bytes_per_ipu", INTS, _B, 0, MAX_BYTES, (), "gradient bytes each IPU all-reduces"),
    Key("stream_bytes_per_ipu", INTS, _B, 0, MAX_BYTES, (), "bytes each IPU streams to / from DDR"),
    Key("ddr_bytes_per_step_per_ipu", INTS, _B, 0, MAX_BYTES, (), "DDR bytes each IPU moves per step"),
    Key("allreduce_links", TEXT, "", default="", doc="the links the all-reduce runs over"),
    Key("ddr_gb_per_s_needed", FLOAT, "GB/s", 0.0, MAX_RATE, 0.0, "DDR bandwidth the step needs"),
    # the training state
    Key("optimizer", TEXT, "", default="", doc="the optimizer (sgd, momentum, adam, lamb, lars)"),
    Key("optimizer_state", TEXT, "", default="onchip", doc="where the optimizer state lives"),
    Key("optimizer_state_dtype", TEXT, "", default="", doc="the optimizer state's type"),
    Key("rts", BOOL, "", default=False, doc="replicated tensor sharding of the optimizer state"),
    Key("master_weights", BOOL, "", default=False, doc="fp32 master weights kept"),
    Key("available_memory_proportion", FLOAT_OR_FLOATS, "", 0.0, 1.0, None, "Poplar's memory proportion"),
)
MAX_PHASE_TERMS = 64  # per-step terms of a schedule (each one phase; today 3)


class Schedule(Record):
    """The training step's composition, ``run["schedule"]`` (docs/profile-format.md, "Run keys"): every key of
    :data:`SCHEDULE_KEYS` typed and bounded."""

    KEYS = Record.declare(SCHEDULE_KEYS)
    WHERE = "run['schedule']"
    __slots__ = ()

    @property
    def pipelined(self) -> bool:
        """A pipelined schedule (fill / steady state / drain), as ``profile/phases.py`` reads it."""
        return "pipeline_cycles" in self and "pipeline_total_cycles" in self

    @property
    def terms_seconds(self) -> float:
        """Seconds of the step's host terms, all together."""
        return float(sum(self.per_step_terms.values()))

    def problem(self) -> str:
        if len(self.per_step_terms) > MAX_PHASE_TERMS:
            return f"per_step_terms lists {len(self.per_step_terms)} terms (at most {MAX_PHASE_TERMS})"
        return ""


# ------------------------------------------------------------------------------------------------ op counts
OP_COUNT_KEYS: tuple[Key, ...] = (
    Key("runs_per_step", INTS, "runs", 0, MAX_OP_RUNS, (), "runs of each ops row per training step"),
    Key("calls_per_microbatch", INTS, "calls", 0, MAX_OP_CALLS, (), "calls of each op per micro-batch"),
    Key("runs_per_call", INTS, "runs", 0, 8, (), "runs per call (2: recomputed before its gradient)"),
    Key("table", TEXT, "", default="", doc="what the ops table's totals cover"),
)


class OpCountsRecord(Record):
    """``run["op_counts"]`` of a pipelined profile (format 2.1): one whole number per ``ops`` row each."""

    KEYS = Record.declare(OP_COUNT_KEYS)
    WHERE = "run['op_counts']"
    __slots__ = ()

    def problem(self) -> str:
        lengths = {k: len(getattr(self, k)) for k in ("runs_per_step", "calls_per_microbatch", "runs_per_call")
                   if k in self}
        if len(set(lengths.values())) > 1:
            return "runs_per_step, calls_per_microbatch and runs_per_call must each list one count per op; they list " \
                   f"{', '.join(f'{n} ({k})' for k, n in lengths.items())}"
        return ""


# ------------------------------------------------------------------------------------------------ config
def _model(name: str, kind: str = INT, doc: str = "") -> Key:
    lo, hi = MODEL_LIMITS[name]
    return Key(name, kind, "", lo, hi, None, doc)


CONFIG_KEYS: tuple[Key, ...] = (  # the config keys analysis reads; bounds of value_checks.MODEL_LIMITS
    Key("model", TEXT, "", default="", doc="the model family or name"),
    Key("batch", INT, "samples", 1, MAX_BATCH, None, "samples of one micro-batch"), _model("seq"), _model("hidden"), _model("heads"),
    _model("layers"), _model("ffn"), _model("vocab"), _model("image"), _model("ipus"),
    _model("packing", FLOAT, "sequences per pack"), _model("replicas"), _model("grad_accum"),
    Key("training", BOOL, "", default=True, doc="a training step (else inference)"),
    Key("recompute", BOOL, "", default=False, doc="recomputation of the forward pass"),
    Key("optimizer", TEXT, "", default="sgd", doc="the optimizer"),
    Key("precision", TEXT, "", default="fp16", doc="the run's precision"),
    Key("device", TEXT, "", default="", doc="the device spec id"),
    Key("host_framework", TEXT, "", default="", doc="the host framework whose per-step terms are added"),
    _model("head_dim", doc="size of one attention head (0: hidden / heads)"), _model("tensor_parallel"),
    Key("timing_only", BOOL, "", default=False, doc="no numerics run"),
)


class ConfigRecord(Record):
    """``run["config"]``: the keys analysis reads (the rest of the config is shown as text only)."""

    KEYS = Record.declare(CONFIG_KEYS)
    WHERE = "run['config']"
    __slots__ = ()


# ------------------------------------------------------------------------------------------------ training state
class MiBRecord(Record):
    KEYS = Record.declare(tuple(Key(n, FLOAT, "MiB", 0.0, 2.0 ** 40, 0.0, doc) for n, doc in (
        ("weights", "weights"), ("grad_accum", "gradient accumulators"),
        ("optimizer_state_onchip", "optimizer state in tile memory"),
        ("optimizer_state_offchip", "optimizer state in streaming memory"), ("master_weights", "fp32 master weights"),
        ("optimizer_moments", "optimizer moments"), ("stash", "stashed activations"),
        ("stream_buffer", "stream buffers"), ("code", "code"))))
    WHERE = "mib"
    __slots__ = ()


class TileBytesRecord(Record):
    KEYS = Record.declare(tuple(Key(n, INT, _B, 0, 2 ** 40, 0, doc) for n, doc in (
        ("need", "bytes the fullest tile needs"), ("code", "code"),
        ("optimizer_state_onchip", "optimizer state"), ("stash", "stash"), ("grad_accum", "accumulators"))))
    WHERE = "max_tile_bytes"
    __slots__ = ()


class TrainingStateIPU(Record):
    """One entry of ``run["training_state"]``: one IPU of one replica."""

    KEYS = Record.declare((
        Key("ipu", INT, "", 0, MAX_IPUS - 1, 0, "the IPU"),
        Key("layers", NUMBER, "layers", -1, MODEL_LIMITS["layers"][1], -1,
            "layers on it (-1: one whole graph; halves where attention and FFN are placed apart)"),
        Key("params", INT, "", 0, MAX_PARAMS, 0, "trained parameters on it"),
        Key("fits", BOOL, "", default=True, doc="whether its tiles hold it"),
        Key("mib", RECORD, "MiB", record=MiBRecord, doc="its memory by use"),
        Key("max_tile_bytes", RECORD, _B, record=TileBytesRecord, doc="its fullest tile by use"),
    ))
    WHERE = "run['training_state']"
    __slots__ = ()


# ------------------------------------------------------------------------------------------------ the run
RUN_KEYS: tuple[Key, ...] = (
    Key("model", TEXT, "", default="", doc="the model run"),
    Key("emulator_version", TEXT, "", default="", doc="the emulator that wrote it"),
    Key("fits", BOOL, "", default=True, doc="whether every tile's memory fits"),
    Key("timing_only", BOOL, "", default=False, doc="no numerics run"),
    Key("total_cycles", INT, _C, 0, STEP_LIMIT, 0, "wall cycles of the profiled run (one step)"),
    Key("seconds", FLOAT, _S, 0.0, MAX_STEP_SECONDS, 0.0, "its time"),
    Key("samples_per_second", FLOAT, "samples/s", 0.0, MAX_RATE, 0.0, "the whole system's throughput"),
    Key("replicas", INT, "", 1, MODEL_LIMITS["replicas"][1], 1, "replicas of the run (2.2)"),
    Key("stages", INT, "", 1, MAX_IPUS, 1, "IPUs of one replica (2.2)"),
    Key("profile_note", TEXT, "", default="", doc="what the timeline shows"),
    Key("schedule", RECORD, record=Schedule, doc="the training step's composition (2.0)"),
    Key("op_counts", RECORD, record=OpCountsRecord, doc="runs of each ops row (2.1, pipelined runs)"),
    Key("config", RECORD, record=ConfigRecord, doc="the run config"),
    Key("training_state", RECORDS, record=TrainingStateIPU, default=(), doc="per IPU of one replica (2.0)"),
)


class RunRecord(Record):
    """The header's ``run`` object, the part analysis reads, typed (``Profile.record``)."""

    KEYS = Record.declare(RUN_KEYS)
    WHERE = "run"
    __slots__ = ()

    @property
    def replicas_of_run(self) -> int:
        """Replicas: the schedule's (the composition the writer copies into ``run["replicas"]``), else
        ``run["replicas"]`` (2.2), else the config's, else 1."""
        if "replicas" in self.schedule:
            return self.schedule.replicas
        if "replicas" in self:
            return self.replicas
        return self.config.replicas or 1


def record_of(profile) -> RunRecord:
    """The checked run record of ``profile``: ``profile.record`` (a Profile checks it once, naming its file), or,
    for a stand-in with a ``run`` dict only, that dict checked now (a ``ProfileError`` naming its ``path``)."""
    rec = getattr(type(profile), "record", None)
    if rec is not None:
        return profile.record
    from popvision_lite.errors import ProfileError

    path = getattr(profile, "path", "profile")
    return RunRecord.read(dict(getattr(profile, "run", None) or {}), lambda problem: ProfileError(path, problem), "run")
