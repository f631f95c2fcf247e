"""Import ONNX models (PyTorch / Hugging Face through ``torch.onnx.export`` / ``optimum-cli``) and
emulate them: ``emulate_onnx(path, ...)``; ``popvision-lite emulate --onnx model.onnx -o run.pvl``.

Modules: ``loader`` (read, check, fix dims, shape inference, dtype casts), ``lowering`` (ONNX nodes
-> backend ops, constant folding, fused patterns, IPU placement), ``ops`` (the extra elementwise /
concat ops on all three backends), ``run`` (emulate + ONNX Runtime numerics check + profile), ``cli``.
"""

from __future__ import annotations

from .loader import OnnxImportError, load, parse_dims
from .lowering import SUPPORTED_OPS
from .run import emulate_onnx

__all__ = ["OnnxImportError", "SUPPORTED_OPS", "emulate_onnx", "load", "parse_dims"]
