"""Tile-level IPU emulator: graph API, programs, compiler (memory, liveness), BSP engine.

See docs/emulator.md.  Typical use::

    from popvision_lite.emulator import Target, Graph, Engine, programs as P, codelets as C, mapping as M
"""

from __future__ import annotations

from popvision_lite.emulator import codelets, mapping, programs
from popvision_lite.emulator.engine import CompiledGraph, Engine
from popvision_lite.emulator.graph import Blocks, Graph, HostBuffer, Regions, Tensor, TensorView
from popvision_lite.emulator.run_result import RunResult
from popvision_lite.emulator.target import Target

__all__ = [
    "Target", "Graph", "Tensor", "TensorView", "Regions", "Blocks", "HostBuffer",
    "Engine", "CompiledGraph", "RunResult", "programs", "codelets", "mapping",
]
