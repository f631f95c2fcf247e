"""The run config of an emulation: one typed record (:class:`RunConfig`) and the one definition of every
field it holds (:data:`FIELDS`: type, bounds, allowed values, the models that read it, the message).

Every way of describing a run builds a :class:`RunConfig` and so gets the same checks and the same
message text: ``emulate`` flags (``cli/emulate.py``), TOML files (:func:`load_run_config`), the ONNX
branch's options (``cli/emulate_onnx.py``), sweep grids and base configs (``sweep/grid.py``) and the
desktop app's New emulation… / Re-run with… dialogs (``gui/actions/emulation.py``).  A message is
``<where>: <problem>``; ``<where>`` names the flag (``argument --batch``) or the file / dialog and the
field (``run.toml: field 'batch'``), and ``<problem>`` is the same text whatever the source
(``0 is outside 1 .. 65536``).  Checks of one field's value happen in :meth:`RunConfigField.check`; checks that
relate fields (heads dividing hidden, replicas dividing IPUs ...) are the workload's own
(``models/config.validate``), and :meth:`RunConfig.model_config` names the source of the field they
blame the same way.

Example TOML (``run.toml``)::

    model = "bert-base"       # mlp | bert | bert-tiny .. bert-large | conv | gnn | gpt* | resnet*
    device = "ipu-mk2"        # resources/devices/<id>.toml
    output = "bert_base.pvl"  # optional; -o wins
    timing_only = true

    [model_args]              # any ModelConfig field
    batch = 8
    seq = 128
    recompute = true

Top-level keys may also hold model fields directly (``batch = 8``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from popvision_lite.emulator.models.config import (
    MODEL_NAMES,
    TASK_HEADS,
    ModelConfig,
    make_config,
)
from popvision_lite.emulator.models.host_memory import check_host_memory
from popvision_lite.emulator.schedule import HOST_FRAMEWORK_CHOICES, OPTIMIZER_PASSES
from popvision_lite.errors import ConfigError, DeviceSpecError
from popvision_lite.value_checks import (
    MAX_NUMBER_CHARS,
    MODEL_LIMITS,
    check_number,
    read_toml,
)

TOP_KEYS = ("model", "device", "output", "timing_only", "model_args")
DEVICE_ALIASES = {"mk1": "ipu-mk1", "mk2": "ipu-mk2", "bow": "ipu-bow", "ipu-mk1": "ipu-mk1",
                  "ipu-mk2": "ipu-mk2", "ipu-bow": "ipu-bow"}
CLI = "argument"  # the source of a value given as a command-line flag: messages name the flag itself


@dataclass(frozen=True)
class RunConfigField:
    """One run-config field: ``kind`` is int | number | bool | choice | model | device | file |
    layer_split | fractions (a number, or one per IPU); bounds come from ``value_checks.MODEL_LIMITS``
    (shared with the ONNX loader's dims and the host-memory check); ``only_for`` lists the model families
    that read it (empty: every model).  ``label`` names it in the desktop app's run dialog, ``help`` says what
    it does (the ``emulate`` flag's help and the dialog's tooltip) and ``group`` is the part of the run it
    belongs to (:data:`GROUPS`: the dialog's sections).  ``switches``: a bool field's command-line switches,
    (flag, value) pairs (default: its flag sets it true), e.g. ``--inference`` sets ``training`` false."""

    name: str
    kind: str
    choices: tuple = ()
    only_for: tuple = ()
    label: str = ""
    help: str = ""
    group: str = "model"
    switches: tuple = ()

    @property
    def cli_switches(self) -> tuple[tuple[str, bool], ...]:
        """The (flag, value) switches of a bool field on the command line."""
        return self.switches or ((self.flag, True),)

    @property
    def bounds(self) -> tuple:
        return MODEL_LIMITS.get(self.name, (None, None))

    @property
    def flag(self) -> str:
        return "MODEL" if self.name == "model" else "--" + self.name.replace("_", "-")

    def metavar(self) -> str:
        """How ``--help`` shows the value: the choices, or the kind."""
        if self.choices:
            return "{" + ",".join(self.choices) + "}"
        return {"int": "N", "number": "X", "layer_split": "N,N,...", "fractions": "X[,X...]",
                "device": "DEVICE", "file": "FILE"}.get(self.kind, "VALUE")

    # ------------------------------------------------------------------ the one check of a value
    def check(self, value, where: str):
        """``value`` (as parsed from TOML / given by a caller) checked and normalised; ConfigError
        ``"<where>: <problem>"`` otherwise."""
        k = self.kind
        lo, hi = self.bounds
        if k == "int":
            if isinstance(value, float) or isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError(f"{where}: expected an integer, got {value!r}")
            return check_number(where, value, lo, hi, integer=True)
        if k == "number":
            return check_number(where, value, lo, hi)
        if k == "bool":
            if not isinstance(value, bool):
                raise ConfigError(f"{where}: expected bool (true or false), got {value!r}")
            return value
        if k == "choice":
            if not isinstance(value, str) or value not in self.choices:
                raise ConfigError(f"{where}: must be one of {', '.join(self.choices)}, got {value!r}")
            return value
        if k == "model":
            if not isinstance(value, str) or value not in MODEL_NAMES:
                raise ConfigError(f"{where}: unknown model {value!r}; choose one of {', '.join(MODEL_NAMES)}")
            return value
        if k == "device":
            return normalise_device(value, where)
        if k == "file":
            if not isinstance(value, str) or not value:
                raise ConfigError(f"{where}: expected a file name, got {value!r}")
            return value
        if k == "layer_split":  # layers per stage: whole or half layers (docs/emulator.md "Schedule model")
            top = MODEL_LIMITS["layers"][1]
            if not isinstance(value, list | tuple) or not value or len(value) > top:
                raise ConfigError(f"{where}: expected 1..{top} numbers of layers per stage like [3, 7, 7, 7], "
                                  f"got {value!r}")
            out = [check_number(_item(where, i), x, 0, top) for i, x in enumerate(value)]
            if any((2 * x) % 1 for x in out):
                raise ConfigError(f"{where}: expected layers per stage in steps of 0.5, got {list(value)!r}")
            return [int(x) if x == int(x) else x for x in out]
        if k == "fractions":  # one value, or one per IPU of a pipelined replica
            if isinstance(value, list | tuple):
                if not value:
                    raise ConfigError(f"{where}: expected a number or one per IPU, got an empty list")
                return [check_number(_item(where, i), x, lo, hi) for i, x in enumerate(value)]
            return check_number(where, value, lo, hi)
        raise AssertionError(f"field {self.name}: kind {k!r}")

    def parse(self, text, where: str):
        """A value typed as text (a command-line flag, a dialog's line edit) read as TOML would type it,
        then :meth:`check`ed: the same message as the value written in a file."""
        if not isinstance(text, str):
            return self.check(text, where)
        s = text.strip()
        if self.kind in ("int", "number"):
            return self.check(_number(s, where, self.kind == "int"), where)
        if self.kind in ("layer_split", "fractions"):
            parts = [p for p in s.replace(" ", "").split(",") if p]
            vals = [_number(p, _item(where, i), False) for i, p in enumerate(parts)]
            return self.check(vals[0] if self.kind == "fractions" and len(vals) == 1 else vals, where)
        if self.kind == "bool":
            low = s.lower()
            words = {"true": True, "on": True, "yes": True, "1": True, "false": False, "off": False, "no": False,
                     "0": False}
            return self.check(words.get(low, text), where)
        return self.check(s if self.kind != "device" else text, where)


def _item(where: str, i: int) -> str:
    """``where`` of a list's entry ``i``: ``run.toml: field 'layer_split[2]'``, ``argument --layer-split[2]``."""
    return f"{where[:-1]}[{i}]'" if where.endswith("'") else f"{where}[{i}]"


def _number(s: str, where: str, integer: bool):
    """Text -> int or float as TOML reads it (a word stays text, so the check names it); more than
    :data:`MAX_NUMBER_CHARS` characters is refused before any conversion."""
    if len(s) > MAX_NUMBER_CHARS:
        raise ConfigError(f"{where}: expected {'an integer' if integer else 'a number'}, got {len(s):,} "
                          f"characters ({s[:20]}...)")
    for conv in (int, float):
        try:
            return conv(s)
        except ValueError:
            pass
    return s


_OPTIMIZERS = tuple(OPTIMIZER_PASSES)
_TRANSFORMER = ("bert", "gpt")
# the parts of a run, in the order the run dialog shows them
GROUPS = {"run": "Run", "model": "Workload", "lowering": "Precision and memory", "scale": "Training at scale"}
FIELDS: dict[str, RunConfigField] = {f.name: f for f in (
    RunConfigField("model", "model", label="Model", help="bundled workload", group="run"),
    RunConfigField("device", "device", label="Device", group="run",
          help=f"device spec: {', '.join(sorted(set(DEVICE_ALIASES.values())))} (default ipu-mk2)"),
    RunConfigField("output", "file", label="Profile file", help="profile file to write (.pvl)", group="run"),
    RunConfigField("timing_only", "bool", label="Timing only", help="no numerics: same cycles and memory, for large targets",
          group="run"),
    RunConfigField("batch", "int", label="Batch", help="batch size"),
    RunConfigField("seq", "int", only_for=_TRANSFORMER, label="Sequence length", help="sequence length (bert, gpt)"),
    RunConfigField("layers", "int", label="Layers", help="number of layers / blocks"),
    RunConfigField("hidden", "int", label="Hidden size", help="hidden size (bert, mlp), channels (conv), features (gnn)"),
    RunConfigField("heads", "int", only_for=_TRANSFORMER, label="Attention heads", help="attention heads (bert, gpt)"),
    RunConfigField("head_dim", "int", only_for=_TRANSFORMER, label="Head width",
          help="width of one attention head (bert, gpt; default hidden / heads)"),
    RunConfigField("ffn", "int", only_for=_TRANSFORMER, label="FFN width",
          help="width of the feed-forward layer (bert, gpt; default 4 x hidden)"),
    RunConfigField("vocab", "int", only_for=("bert", "gpt", "resnet"), label="Vocabulary / classes",
          help="vocabulary size (bert, gpt; presets 30522, MLPerf 30912), classes (resnet)"),
    RunConfigField("image", "int", only_for=("conv", "resnet"), label="Image size", help="image height and width (conv, resnet)"),
    RunConfigField("nodes", "int", only_for=("gnn",), label="Graph nodes", help="graph nodes (gnn)"),
    RunConfigField("edges", "int", only_for=("gnn",), label="Graph edges", help="graph edges (gnn)"),
    RunConfigField("ipus", "int", label="IPUs", group="scale",
          help="number of IPUs (1, 2, 4, 8, 16); layers become pipeline stages"),
    RunConfigField("seed", "int", label="Seed", help="random seed of inputs and weights (default 0)"),
    RunConfigField("lr", "number", label="Learning rate", help="learning rate of the optimizer step (default 0.01)"),
    RunConfigField("precision", "choice", choices=("fp16", "fp32"), label="Precision", group="lowering",
          help="fp16 (AMP: FP32 accumulate) or fp32"),
    RunConfigField("recompute", "bool", only_for=("bert", "gpt", "resnet"), label="Recompute", group="lowering",
          help="recompute each layer's forward in the backward pass (activation checkpointing)"),
    RunConfigField("training", "bool", label="Training", switches=(("--training", True), ("--inference", False)),
          help="a training step (--training; the default of a bundled model) or the forward pass only "
               "(--inference; the default of an ONNX model)"),
    RunConfigField("streaming_weights", "bool", only_for=("bert", "gpt", "mlp"), label="Streaming weights", group="lowering",
          help="keep weights in streaming memory (DDR) and load them with StreamCopy"),
    # training at scale (emulator/models/pipeline.py; docs/emulator.md "Schedule model")
    RunConfigField("replicas", "int", label="Replicas", group="scale", help="data-parallel replicas (ipus = replicas x stages)"),
    RunConfigField("pipeline_stages", "int", label="Pipeline stages", group="scale",
          help="pipeline stages per replica (default: ipus / replicas)"),
    RunConfigField("tensor_parallel", "int", only_for=_TRANSFORMER, label="Tensor parallel", group="scale",
          help="IPUs each layer is sharded over (bert, gpt; Megatron-style: heads, FFN columns and vocabulary split; "
               "ipus = replicas x stages x this; default 1)"),
    RunConfigField("tensor_parallel_2", "int", only_for=_TRANSFORMER, label="Tensor parallel (2nd axis)", group="scale",
          help="2-D tensor parallelism's second axis (bert, gpt; Graphcore's PopXL GPT-3 tensor_parallel_2): each IPU "
               "also holds 1/N of the hidden dimension; ipus = replicas x stages x tensor_parallel x this; default 1"),
    RunConfigField("attention_serialisation", "int", only_for=_TRANSFORMER, label="Attention serialisation", group="lowering",
          help="compute the attention scores in N sequential blocks of query rows, one block's scores live at a time "
               "(bert, gpt; PopXL GPT-3 attention_serialisation; default 1)"),
    RunConfigField("io_tiles", "int", only_for=_TRANSFORMER, label="IO tiles", group="lowering",
          help="tiles per IPU reserved for streaming (bert, gpt with --streaming-weights; PopXL io_tiles): ops use the "
               "others, and the phases' weight and activation streams overlap with compute; default 0"),
    RunConfigField("layer_split", "layer_split", only_for=_TRANSFORMER, label="Layer split", group="scale",
          help="layers per pipeline stage, PopART-style (e.g. 3,7,7,7; 0 for an IPU without layers, as "
               "optimum-graphcore's layers_per_ipu 0,3,3,3,3,4,4,4)"),
    RunConfigField("grad_accum", "int", label="Gradient accumulation", group="scale",
          help="micro-batches per optimizer step (default 1; 2 x stages - 1 when pipelined)"),
    RunConfigField("optimizer", "choice", choices=_OPTIMIZERS, label="Optimizer", group="scale", help="optimizer (default sgd)"),
    RunConfigField("optimizer_state", "choice", choices=("onchip", "offchip"), label="Optimizer state", group="scale",
          help="keep optimizer state in tile SRAM or stream it from DDR once per step"),
    RunConfigField("optimizer_state_dtype", "choice", choices=("fp16", "fp32"), label="Optimizer state dtype", group="scale",
          help="dtype of optimizer moments (default fp32)"),
    RunConfigField("master_weights", "bool", label="Master weights", group="scale", help="fp32 master copy of fp16 weights"),
    RunConfigField("rts", "bool", label="Replicated tensor sharding", group="scale",
          help="replicated tensor sharding of the optimizer state across replicas"),
    RunConfigField("host_framework", "choice", choices=HOST_FRAMEWORK_CHOICES, label="Host framework", group="scale",
          help="the framework whose host step loop's per-step cost is added (calibrated, device spec); default auto: "
               "the framework Graphcore ran the model with (bert: popart, resnet: tensorflow), else unknown (no host "
               "step, said next to the throughput); none: the IPUs alone"),
    RunConfigField("device_iterations", "int", label="Device iterations", group="scale",
          help="optimizer steps per host call (poptorch deviceIterations, PopART batches per step; default 1): the "
               "host step loop's cost is shared by them"),
    RunConfigField("available_memory_proportion", "fractions", label="Available memory proportion", group="lowering",
          help="share of tile memory for matmul temporaries (Poplar default 0.6; or one per IPU, comma-separated)"),
    RunConfigField("partials_type", "choice", choices=("float", "half"), label="Partials type", group="lowering",
          help="type of matmul / convolution partials (poplin partialsType; default float; half for fp16 runs)"),
    RunConfigField("packing", "number", only_for=_TRANSFORMER, label="Packing",
          help="average sequences per pack (bert; 1 = unpacked)"),
    RunConfigField("mask_tokens", "int", only_for=("bert",), label="Mask tokens", help="MLM positions per pack (default 15 % of seq)"),
    RunConfigField("outline", "bool", only_for=("bert", "gpt", "resnet"), label="Outlining", group="lowering",
          switches=(("--outline", True), ("--no-outline", False)),
          help="share the code of structurally identical ops in a stage (PopART outlining; default on: "
               "--no-outline turns it off)"),
    RunConfigField("pipeline_placement", "choice", choices=("sequential", "wrap"), only_for=_TRANSFORMER,
          label="Pipeline placement", group="scale",
          help="sequential (embedding on the first IPU, heads on the last) or wrap (Graphcore's MLPerf BERT, "
               "optimum-graphcore's GPT-2: embedding and heads with the tied decoder / LM head on IPU 0, which may also "
               "run the first and the last layers; --layer-split then has S + 1 entries for S IPUs: IPU 0, IPU 1, ..., "
               "IPU S-1, IPU 0 again, e.g. 0,3,3,3,3,4,4,4,0)"),
    RunConfigField("embedding_serialization", "int", only_for=_TRANSFORMER, label="Embedding serialisation",
          group="lowering",
          help="vocabulary slices of the embedding and a tied LM head (optimum-graphcore's "
               "embedding_serialization_factor: the head's matmul runs one slice at a time; default 1)"),
    RunConfigField("task_head", "choice", choices=TASK_HEADS, only_for=_TRANSFORMER, label="Task head",
          help="the head the model ends in: pretraining (bert MLM + NSP, gpt causal LM; the default), "
               "question_answering (span start / end over every token) or sequence_classification (first token)"),
    RunConfigField("conv_lowering", "choice", choices=("im2col", "halo"), only_for=("resnet",), label="Convolution lowering",
          group="lowering",
          help="resnet: halo (each tile's input rows with halo exchanged once, read in place: emulator/ops/conv.py; "
               "the default) or im2col (windows gathered into an implicit-GEMM operand)"),
)}
MODEL_FIELDS = tuple(k for k in FIELDS if k not in TOP_KEYS)
# the models that read a field, for the fields only some models read (the others ignore it)
ONLY_FOR = {k: f.only_for for k, f in FIELDS.items() if f.only_for}


def naming(source: str | None, name: str) -> str:
    """What a message calls field ``name`` given by ``source``: the flag for the command line
    (``argument --batch``), else the file or dialog and the field (``run.toml: field 'batch'``)."""
    if source == CLI:
        return "argument " + (FIELDS[name].flag if name in FIELDS else "--" + name.replace("_", "-"))
    return f"{source}: field '{name}'" if source else f"field '{name}'"


def check_field(name: str, value, source: str | None, *, text: bool = False):
    """``value`` of field ``name`` from ``source`` checked (``text``: parsed from text first); the one
    entry point every source uses."""
    where = naming(source, name)
    f = FIELDS.get(name)
    if f is None:
        known = ", ".join(sorted(MODEL_FIELDS))
        raise ConfigError(f"{where}: unknown setting; known: {known}")
    return f.parse(value, where) if text else f.check(value, where)


def model_family(model: str) -> str:
    """'bert' for the BERT presets (bert-tiny .. bert-large), else the model name itself."""
    m = str(model)
    return "bert" if m.startswith("bert") else "gpt" if m.startswith("gpt") else "resnet" if m.startswith("resnet") else m


def unused_settings(model: str, keys) -> list[str]:
    """The settings among ``keys`` that ``model`` does not read, in the order given."""
    fam = model_family(model)
    return [k for k in keys if k in ONLY_FOR and fam not in ONLY_FOR[k]]


def normalise_device(dev, where: str = "device") -> str:
    """The bundled IPU id ``dev`` names (an alias: "mk2"), or an IPU spec's id this process made known with
    ``devices.register_device`` (the tests' device with fewer tiles); a new process knows only the bundled ids."""
    key = str(dev).lower()
    if key in DEVICE_ALIASES:
        return DEVICE_ALIASES[key]
    registered = _registered_ipu(str(dev))
    if registered is not None:
        return registered
    raise ConfigError(f"{where}: unknown device {dev!r}; choose one of ipu-mk1, ipu-mk2, ipu-bow")


def _registered_ipu(dev_id: str) -> str | None:
    """``dev_id`` if it is an IPU spec registered in this process (``devices.register_device``), else None."""
    from popvision_lite import devices

    if dev_id in devices.list_devices():  # a bundled id not in DEVICE_ALIASES is not an IPU
        return None
    try:
        spec = devices.load_bundled_device(dev_id)  # bundled or registered ids only, never a path
    except DeviceSpecError:
        return None
    return spec.id if spec.is_ipu else None


@dataclass
class RunConfig:
    """A bundled-model run: model, device, output, timing_only and the ModelConfig fields given
    (``model_args``); ``origins`` remembers where each given field came from, so a later check (one
    that relates fields) names the same flag or file."""

    model: str | None = None
    device: str = "ipu-mk2"
    output: str | None = None
    timing_only: bool = False
    model_args: dict = field(default_factory=dict)
    origins: dict = field(default_factory=dict, compare=False, repr=False)

    def set(self, name: str, value, source: str | None, *, text: bool = False) -> None:
        """Field ``name`` = ``value`` from ``source`` (checked; ``text``: typed as text)."""
        v = check_field(name, value, source, text=text)
        if name in TOP_KEYS:
            setattr(self, name, v)
        else:
            self.model_args[name] = v
        self.origins[name] = source

    @classmethod
    def from_mapping(cls, raw: dict, source: str) -> RunConfig:
        """From a parsed TOML file or a settings dict: the top-level keys, a ``[model_args]`` table, and
        model fields at the top level; every value checked, errors naming ``source`` and the field."""
        rc = cls()
        for k, v in raw.items():
            if k == "model_args":
                if not isinstance(v, dict):
                    raise ConfigError(f"{naming(source, 'model_args')}: expected a table")
                for kk, vv in v.items():
                    rc.set(kk, vv, source)
            else:
                rc.set(k, v, source)
        return rc

    def unused(self) -> list[tuple[str, str | None]]:
        """(field, source) of the given fields the model does not read."""
        return [(k, self.origins.get(k)) for k in unused_settings(self.model, self.model_args)]

    def model_config(self, *, host_check: bool = True) -> ModelConfig:
        """The ModelConfig of this run (preset defaults + the fields given), checked as a whole; with
        ``host_check`` also the host memory it needs (before anything is allocated).  A ConfigError names
        the source of the field it blames (``argument --heads``, ``run.toml: field 'heads'``)."""
        if self.model is None:
            raise ConfigError(f"{naming(CLI, 'model')}: required (or 'model' in the --config file)")
        try:
            cfg = make_config(self.model, **self.model_args)
            if host_check:
                check_host_memory(cfg, self.timing_only)
        except ConfigError as e:
            name, sep, problem = str(e).partition(": ")
            if sep and name in FIELDS:
                raise ConfigError(f"{naming(self.origins.get(name), name)}: {problem}") from None
            raise
        return cfg


def load_run_config(path) -> RunConfig:
    """A TOML run config read safely (regular file, size, nesting, numbers: ``value_checks.read_toml``) and
    checked field by field; errors name the file and the field."""
    raw = read_toml(Path(path), "config file")
    return RunConfig.from_mapping(raw, str(path))
