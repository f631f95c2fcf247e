"""ONNX nodes -> backend ops.

Modules, one job each: ``values`` (:class:`Act`, handle shapes, window indices), ``layout`` (constants,
weights and views between layouts), ``tape`` (the backward pass of ``--training``), ``fusion`` (GELU /
layer-norm patterns fused back into one op), ``fold`` (constant folding), ``blocks`` (repeated layers),
``table`` (``LOWERINGS``: op type -> lowering, attributes, trainable; the supported op lists derive from it),
the lowerings by family (``elementwise``, ``matmul``, ``rows``, ``conv``, ``views``) and ``lowerer`` (the walk
over the graph, placement on IPUs, dispatch).
"""

from __future__ import annotations

from .blocks import find_blocks
from .fold import evaluate_node
from .lowerer import Lowerer
from .table import DEVICE_OPS, FOLD_ONLY_OPS, KNOWN_ATTRS, LOWERINGS, SUPPORTED_OPS, TRAINABLE_OPS, Lowering
from .values import Act, canon, windows

__all__ = ["DEVICE_OPS", "FOLD_ONLY_OPS", "KNOWN_ATTRS", "LOWERINGS", "SUPPORTED_OPS", "TRAINABLE_OPS", "Act",
           "Lowerer", "Lowering", "canon", "evaluate_node", "find_blocks", "windows"]
