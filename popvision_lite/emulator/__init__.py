"""Tile-level IPU emulator: graph API, programs, compiler (memory, liveness), BSP engine.

See docs/emulator.md.  Typical use::

    from popvision_lite.emulator import Target, Graph, Engine, programs as P, codelets as C, mapping as M
"""

from __future__ import annotations

import importlib

# The exports are imported on first use (PEP 562): importing any module of this package (run_config, for the
# command line's flags) runs this file first, and the engine, the graph and the compiler behind these names cost
# 0.1-0.2 s CPU of every process that only reads a run config or prints --help.
_LAZY = {
    "CompiledGraph": "popvision_lite.emulator.engine",
    "Engine": "popvision_lite.emulator.engine",
    "Blocks": "popvision_lite.emulator.graph",
    "Graph": "popvision_lite.emulator.graph",
    "HostBuffer": "popvision_lite.emulator.graph",
    "Regions": "popvision_lite.emulator.graph",
    "Tensor": "popvision_lite.emulator.graph",
    "TensorView": "popvision_lite.emulator.graph",
    "RunResult": "popvision_lite.emulator.run_result",
    "Target": "popvision_lite.emulator.target",
}
_SUBMODULES = ("programs", "codelets", "mapping")

__all__ = [
    "Target", "Graph", "Tensor", "TensorView", "Regions", "Blocks", "HostBuffer",
    "Engine", "CompiledGraph", "RunResult", "programs", "codelets", "mapping",
]


def __getattr__(name):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
    elif name in _SUBMODULES:
        value = importlib.import_module(f"{__name__}.{name}")
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value
