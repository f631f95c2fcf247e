"""The run config of an ONNX run: which settings it reads, the safe reader, and the TOML the desktop
app's run actions write for one (``popvision-lite emulate --config``).  The command line that reads it
is ``popvision_lite/cli/emulate_onnx.py``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from popvision_lite.value_checks import read_toml

# bundled-workload options that an ONNX file fixes itself
NOT_FOR_ONNX = ("layers", "hidden", "heads", "vocab", "image", "nodes", "edges", "streaming_weights")
# the multi-IPU emulator's pipelined-schedule options: built from the bundled transformers' stage programs
NOT_FOR_ONNX_SCALE = ("pipeline_stages", "layer_split", "pipeline_placement", "packing", "mask_tokens")
# ... and those that apply to an imported model (whole-graph path: run.py, pipeline.compose_whole_graph)
SCALE_KEYS = ("replicas", "grad_accum", "optimizer", "optimizer_state", "optimizer_state_dtype", "master_weights",
              "rts", "available_memory_proportion")
CONFIG_KEYS = {"onnx", "output", "device", "timing_only", "batch", "seq", "dims", "precision", "ipus", "seed",
               "inputs", "training", "loss_output", "ipu_split", "recompute", *SCALE_KEYS}




@dataclass(frozen=True)
class OnnxOption:
    """An option of ``emulate``'s ONNX branch that is not a run-config field: its flag, its key in a run-config
    TOML, how ``--help`` shows its value, its label in the app's run dialog and what it does (the flag's help and
    the dialog's tooltip): one definition for the command line (``cli/emulate_onnx.py``) and the dialog."""

    flag: str
    key: str
    metavar: str
    label: str
    help: str
    repeat: bool = False  # given once per value (--dim a=1 --dim b=2); the dialog takes them comma-separated

    @property
    def dest(self) -> str:
        return self.flag[2:].replace("-", "_")


ONNX_OPTIONS = (
    OnnxOption("--onnx", "onnx", "MODEL.onnx", "ONNX model",
               "emulate an ONNX model (PyTorch: torch.onnx.export; Hugging Face: optimum-cli export onnx) instead of "
               "a bundled MODEL"),
    OnnxOption("--dim", "dims", "NAME=VALUE", "Symbolic dims",
               "(--onnx) value of a symbolic input dimension, e.g. --dim sequence_length=128 (--batch and --seq set "
               "the usual batch / sequence names)", repeat=True),
    OnnxOption("--loss-output", "loss_output", "NAME", "Loss output",
               "(--onnx --training) the graph output whose mean is the loss"),
    OnnxOption("--ipu-split", "ipu_split", "NODE[,NODE...]", "IPU split",
               "(--onnx --ipus N) the ONNX node names where IPU 1, 2, ... start (default: layers balanced by weight "
               "bytes)"),
    OnnxOption("--inputs", "inputs", "INPUTS.npz", "Input arrays",
               "(--onnx) input arrays by input name (default: seeded random floats, token ids in range, masks of "
               "ones)"),
)


def read_config(path) -> dict:
    return read_toml(path, "config file")  # the same safe reader as every other run config


def parse_ipu_split(text: str) -> list[str]:
    """``--ipu-split`` text (``NODE[,NODE...]``, as typed on the command line or in the app's run dialog) -> the
    node names where IPU 1, 2, ... start."""
    return [x.strip() for x in str(text).split(",") if x.strip()]


def config_toml(settings: dict) -> str:
    """A run-config TOML for an ONNX run (``settings`` with an ``onnx`` path; the GUI's what-if runs):
    only the settings ONNX runs read (see CONFIG_KEYS)."""

    from popvision_lite.value_checks import toml_value as val
    # absolute paths: a config's relative file paths are read against the config's own folder
    settings = {**settings, **{k: str(Path(settings[k]).expanduser().resolve()) for k in ("onnx", "inputs")
                               if isinstance(settings.get(k), str) and settings[k]}}
    lines = [f"onnx = {val(settings['onnx'])}", f"device = {val(settings.get('device', 'ipu-mk2'))}",
             f"timing_only = {val(bool(settings.get('timing_only', False)))}"]
    if settings.get("output"):
        lines.append(f"output = {val(str(settings['output']))}")
    for k in ("batch", "seq", "ipus", "seed", "precision", "inputs", "training", "loss_output", "ipu_split",
              "recompute", *SCALE_KEYS):
        if k in ("grad_accum", "optimizer", "optimizer_state", "optimizer_state_dtype", "master_weights", "rts",
                 "recompute") \
                and not settings.get("training"):
            continue  # training-state settings of an inference run (a bundled profile's defaults): not read
        if settings.get(k) is not None and settings.get(k) != []:
            lines.append(f"{k} = {val(settings[k])}")
    dims = settings.get("dims") or {}
    if dims:
        lines += ["", "[dims]"] + [f"{val(str(k))} = {int(v)}" for k, v in dims.items()]
    return "\n".join(lines) + "\n"
