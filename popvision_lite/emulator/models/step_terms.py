"""Per-step arithmetic shared by the stage pipeline (pipeline.py) and the whole-graph composition
(whole_graph.py): the cycles of one elementwise pass over a tensor spread on an IPU (gradient accumulation,
optimizer), and a sharded tensor's bytes spread evenly over an IPU's tiles."""

from __future__ import annotations

import numpy as np

from popvision_lite.emulator import mapping as M
from popvision_lite.emulator import programs as P
from popvision_lite.emulator.codelets import popops as CO
from popvision_lite.emulator.compile import compile_graph
from popvision_lite.emulator.graph import Graph
from popvision_lite.emulator.target import Target

MiB = 1024 * 1024

_PASS_CACHE: dict = {}


def elementwise_pass_cycles(target: Target, elements: int, dtype: str) -> int:
    """Cycles of one elementwise pass (out = a op b) over ``elements`` spread over the IPU's tiles,
    costed by the emulator's own elementwise codelet (so it follows the cost model)."""
    elements = int(elements)
    _cache = _PASS_CACHE
    key = (target.device, elements, dtype)
    if key in _cache:
        return _cache[key]
    if elements <= 0:
        return 0
    t1 = Target(target.spec, 1)
    g = Graph(t1)
    mp = M.linear(elements, range(t1.tiles_per_ipu))
    a = g.add_variable("acc", (elements,), dtype, mapping=mp)
    b = g.add_variable("grad", (elements,), dtype, mapping=mp)
    cs = g.add_compute_set("pass")
    tiles, starts, sizes = M.worker_split(a, workers=t1.threads_per_tile)
    g.add_vertices(cs, CO.ADD, tiles=tiles, fields={"a": a.regions(starts, sizes), "b": b.regions(starts, sizes),
                                                   "out": a.regions(starts, sizes)})
    c = compile_graph(g, P.Sequence([P.Execute(cs)]))
    _cache[key] = int(c.total_cycles)
    return _cache[key]


def even_bytes(total: int, tiles: int) -> np.ndarray:
    """``total`` bytes spread evenly over ``tiles`` (a sharded, flattened tensor: Poplar maps RTS
    shards linearly over the IPU's tiles)."""
    out = np.full(tiles, int(total) // tiles, np.int64)
    out[: int(total) % tiles] += 1
    return out

