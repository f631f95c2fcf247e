"""Import ONNX models (PyTorch / Hugging Face through ``torch.onnx.export`` / ``optimum-cli``) and
emulate them: ``emulate_onnx(path, ...)``; ``popvision-lite emulate --onnx model.onnx -o run.pvl``.

Modules: ``loader`` (read, check, fix dims, shape inference, dtype casts), ``lowering`` (ONNX nodes
-> backend ops, constant folding, fused patterns, IPU placement), ``ops`` (the extra elementwise /
concat ops on all three backends), ``run`` (emulate + ONNX Runtime numerics check + profile), ``cli``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .loader import OnnxImportError, load, parse_dims
    from .lowering import SUPPORTED_OPS
    from .run import emulate_onnx

__all__ = ["OnnxImportError", "SUPPORTED_OPS", "emulate_onnx", "load", "parse_dims"]

# imported when first asked for: a module of this package that another part reads at start-up (``config``: the
# ONNX options of ``emulate``'s command line and the run dialog) no longer imports the loader, the lowering and
# the run with it, which a bundled model's ``emulate`` never uses
_FROM = {"OnnxImportError": "loader", "load": "loader", "parse_dims": "loader", "SUPPORTED_OPS": "lowering",
         "emulate_onnx": "run"}


def __getattr__(name: str):
    if name not in _FROM:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_FROM[name]}"), name)
    globals()[name] = value
    return value
