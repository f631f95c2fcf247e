"""TOML run configs for repeatable ``emulate`` runs.

Example (``run.toml``)::

    model = "bert-base"       # mlp | bert | bert-tiny .. bert-large | conv | gnn
    device = "ipu-mk2"        # resources/devices/<id>.toml
    output = "bert_base.pvl"  # optional; -o wins
    timing_only = true

    [model_args]              # any ModelConfig field
    batch = 8
    seq = 128
    layers = 12
    recompute = true
    precision = "fp16"
    ipus = 1

Top-level keys may also hold model fields directly (``batch = 8``).  Every error is a
``ConfigError`` naming the file and the field.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from popvision_lite.emulator.models.workloads import MODEL_NAMES, ModelConfig
from popvision_lite.errors import ConfigError
from popvision_lite.validators import MODEL_LIMITS, check_number, read_toml

TOP_KEYS = {"model", "device", "output", "timing_only", "model_args"}
DEVICE_ALIASES = {"mk1": "ipu-mk1", "mk2": "ipu-mk2", "bow": "ipu-bow", "ipu-mk1": "ipu-mk1",
                  "ipu-mk2": "ipu-mk2", "ipu-bow": "ipu-bow"}
_TYPES = {"batch": int, "seq": int, "layers": int, "hidden": int, "heads": int, "head_dim": int, "ffn": int, "vocab": int,
          "image": int, "nodes": int, "edges": int, "ipus": int, "seed": int, "precision": str,
          "recompute": bool, "training": bool, "streaming_weights": bool, "lr": (int, float),
          "replicas": int, "pipeline_stages": int, "tensor_parallel": int, "layer_split": list, "grad_accum": int, "optimizer": str,
          "optimizer_state": str, "master_weights": bool, "optimizer_state_dtype": str, "rts": bool,
          "available_memory_proportion": (int, float, list), "packing": (int, float), "mask_tokens": int, "outline": bool,
          "pipeline_placement": str}


# Workload settings that only some model families read (from the build_* functions in
# models/workloads.py); every other ModelConfig field is read by all of them.  ``emulate`` refuses
# such an option on the command line for a model that ignores it (a silently ignored --seq on an
# mlp run looked like it had taken effect) and warns about such a field in a --config file (one
# TOML file may be shared by runs of several models).
ONLY_FOR = {"seq": ("bert", "gpt"), "heads": ("bert", "gpt"), "head_dim": ("bert", "gpt"), "ffn": ("bert", "gpt"), "vocab": ("bert", "gpt", "resnet"),
            "recompute": ("bert", "gpt", "resnet"), "image": ("conv", "resnet"), "nodes": ("gnn",), "edges": ("gnn",),
            "streaming_weights": ("bert", "gpt", "mlp"),
            # pipelined / replicated training composition (emulator/models/pipeline.py) is built for BERT
            **{k: ("bert", "gpt") for k in ("layer_split", "packing", "tensor_parallel")}, "outline": ("bert", "gpt", "resnet"),
            "mask_tokens": ("bert",),
            "pipeline_placement": ("bert",)}


def model_family(model: str) -> str:
    """'bert' for the BERT presets (bert-tiny .. bert-large), else the model name itself."""
    m = str(model)
    return "bert" if m.startswith("bert") else "gpt" if m.startswith("gpt") else "resnet" if m.startswith("resnet") else m


def unused_settings(model: str, keys) -> list[str]:
    """The settings among ``keys`` that ``model`` does not read, in the order given."""
    fam = model_family(model)
    return [k for k in keys if k in ONLY_FOR and fam not in ONLY_FOR[k]]


@dataclass
class RunConfig:
    model: str | None = None
    device: str = "ipu-mk2"
    output: str | None = None
    timing_only: bool = False
    model_args: dict = field(default_factory=dict)


def normalise_device(dev: str, where: str = "device") -> str:
    key = str(dev).lower()
    if key in DEVICE_ALIASES:
        return DEVICE_ALIASES[key]
    raise ConfigError(f"{where}: unknown device {dev!r}; choose one of ipu-mk1, ipu-mk2, ipu-bow")


def check_model_args(args: dict, where: str) -> dict:
    known = ModelConfig.field_names() - {"model"}
    out = {}
    for k, v in args.items():
        if k not in known:
            raise ConfigError(f"{where}: field '{k}': unknown setting; known: {', '.join(sorted(known))}")
        typ = _TYPES.get(k)
        if typ is not None:
            ok = isinstance(v, typ) and not (typ is int and isinstance(v, bool))
            if not ok:
                raise ConfigError(f"{where}: field '{k}': expected {getattr(typ, '__name__', 'a number')}, "
                                  f"got {v!r}")
        if k == "layer_split":  # layers per stage: whole or half layers, each a number
            if not v or len(v) > MODEL_LIMITS["layers"][1]:
                raise ConfigError(f"{where}: field 'layer_split': expected 1..{MODEL_LIMITS['layers'][1]} numbers")
            for i, x in enumerate(v):
                check_number(f"field 'layer_split[{i}]'", x, 0, MODEL_LIMITS["layers"][1], where=where)
        if k in MODEL_LIMITS and not isinstance(v, bool):  # finite, within bounds (ffn = -5, lr = inf ...)
            lo, hi = MODEL_LIMITS[k]
            check_number(f"field '{k}'", v, lo, hi, integer=isinstance(lo, int) and isinstance(hi, int), where=where)
        out[k] = v
    return out


def load_run_config(path) -> RunConfig:
    path = Path(path)
    raw = read_toml(path, "config file")  # regular file, size-limited: never /dev/zero or a FIFO
    rc = RunConfig()
    model_args = {}
    for k, v in raw.items():
        if k == "model":
            if not isinstance(v, str) or v not in MODEL_NAMES:
                raise ConfigError(f"{path}: field 'model': unknown model {v!r}; choose one of {', '.join(MODEL_NAMES)}")
            rc.model = v
        elif k == "device":
            rc.device = normalise_device(v, f"{path}: field 'device'")
        elif k == "output":
            if not isinstance(v, str) or not v:
                raise ConfigError(f"{path}: field 'output': expected a file name, got {v!r}")
            rc.output = v
        elif k == "timing_only":
            if not isinstance(v, bool):
                raise ConfigError(f"{path}: field 'timing_only': expected true or false, got {v!r}")
            rc.timing_only = v
        elif k == "model_args":
            if not isinstance(v, dict):
                raise ConfigError(f"{path}: field 'model_args': expected a table")
            model_args.update(check_model_args(v, f"{path}: [model_args]"))
        else:
            model_args.update(check_model_args({k: v}, str(path)))
    rc.model_args = model_args
    return rc
