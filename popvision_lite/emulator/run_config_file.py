"""A run config as a TOML file, read and written in one place.

``popvision-lite emulate --config RUN.toml`` reads it: a bundled model's through
:func:`run_config.load_run_config`, an ONNX model's (``onnx = "model.onnx"``) through :func:`read_onnx_config`.
The desktop app's run dialog loads the same file (:func:`read_settings`, which calls those two) and saves it
(:func:`save_settings`); its what-if runs hand the emulator process the text :func:`config_toml` writes, and the
fit advisor's options print it.  So a file saved from the dialog is the file the command line reads, and one
written by hand opens in the dialog with the command line's checks and messages.

*Settings* are the flat dict the app holds: ``model`` (or ``onnx``), ``device``, ``timing_only``, ``output`` and
every model field given; an ONNX run's own keys (``dims`` {name: value}, ``loss_output``, ``ipu_split`` [node, ...],
``inputs``) besides.
"""

from __future__ import annotations

from pathlib import Path

from popvision_lite.atomic_io import atomic_text
from popvision_lite.emulator.models.config import MODEL_NAMES, ModelConfig
from popvision_lite.emulator.onnx_import.config import CONFIG_KEYS as ONNX_KEYS
from popvision_lite.emulator.onnx_import.config import config_toml as onnx_toml
from popvision_lite.emulator.run_config import check_field, load_run_config
from popvision_lite.errors import ConfigError
from popvision_lite.value_checks import read_toml, toml_value

ONNX_FILES = ("onnx", "inputs")  # file paths an ONNX config holds: a relative one is read beside the config


def config_toml(settings: dict) -> str:
    """The run-config TOML of ``settings`` (an ONNX run's when it has ``onnx``), which ``emulate --config``
    reads back to the same run; ``output`` is written when given (``-o`` still wins)."""
    if settings.get("onnx"):
        return onnx_toml(settings)
    model = settings.get("model")
    if model not in MODEL_NAMES:
        raise ConfigError(f"model: unknown model {model!r}; choose one of {', '.join(MODEL_NAMES)}")
    known = ModelConfig.field_names() - {"model"}
    lines = [f"model = {toml_value(model)}", f"device = {toml_value(settings.get('device', 'ipu-mk2'))}"]
    if settings.get("output"):
        lines.append(f"output = {toml_value(str(settings['output']))}")
    lines += [f"timing_only = {toml_value(bool(settings.get('timing_only', False)))}", "", "[model_args]"]
    lines += [f"{k} = {toml_value(v)}" for k, v in settings.items() if k in known and v is not None]
    return "\n".join(lines) + "\n"


def save_settings(path, settings: dict) -> None:
    """``settings`` written to ``path`` as a run-config TOML (whole or not at all: temp file, then rename)."""
    text = config_toml(settings)
    with atomic_text(path) as fh:
        fh.write(text)


def read_settings(path) -> dict:
    """The settings of the run-config TOML at ``path``, every value checked as ``emulate --config`` checks it
    (ConfigError naming the file and the field)."""
    raw = read_toml(Path(path), "config file")
    if "onnx" in raw:
        return check_onnx_config(raw, path)
    rc = load_run_config(path)
    s = {"device": rc.device, "timing_only": rc.timing_only, **rc.model_args}
    if rc.model is not None:
        s["model"] = rc.model
    if rc.output:
        s["output"] = rc.output
    return s


def read_onnx_config(path) -> dict:
    """The settings of an ONNX run's TOML (``emulate --onnx``'s ``--config``), checked: :func:`check_onnx_config`."""
    return check_onnx_config(read_toml(Path(path), "config file"), path)


def check_onnx_config(raw: dict, path) -> dict:
    """An ONNX run's TOML table checked key by key: only settings ONNX runs read (``onnx_import.config.CONFIG_KEYS``),
    run-config fields by their definition, ``dims`` by the symbolic dims' bounds, file paths resolved against the
    config's folder (a config and its model are kept and moved together)."""
    from popvision_lite.emulator.onnx_import.loader import check_dim

    where = f"{path}: "
    unknown = sorted(set(raw) - ONNX_KEYS)
    if unknown:
        raise ConfigError(f"{where}field '{unknown[0]}': not a setting of ONNX runs (settings: "
                          f"{', '.join(sorted(ONNX_KEYS))})")
    out = {}
    for k, v in raw.items():
        if k in ONNX_FILES:
            if not isinstance(v, str) or not v:
                what = "a path to an .onnx file" if k == "onnx" else f"the path of an .npz file, got {str(v)[:60]!r}"
                raise ConfigError(f"{where}field '{k}': expected {what}")
            p = Path(v).expanduser()
            out[k] = str(p if p.is_absolute() else Path(path).parent / p)
        elif k == "dims":
            if not isinstance(v, dict) or not all(isinstance(x, int) and x > 0 for x in v.values()):
                raise ConfigError(f"{where}field 'dims': expected a table of positive integers, e.g. "
                                  "[dims] sequence_length = 128")
            out[k] = {name: check_dim(name, x, f"{where}[dims]") for name, x in v.items()}
        elif k == "ipu_split":
            if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
                raise ConfigError(f"{where}field 'ipu_split': expected a list of node names")
            out[k] = list(v)
        elif k == "loss_output":
            if not isinstance(v, str) or not v:
                raise ConfigError(f"{where}field 'loss_output': expected the name of a graph output, got {v!r}")
            out[k] = v
        else:  # a run-config field (output, device, batch ...): its own check
            out[k] = check_field(k, v, str(path))
    return out

