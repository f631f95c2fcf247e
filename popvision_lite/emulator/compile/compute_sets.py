"""The BSP step template of a compute set (:func:`compile_execute`): vertex cycles per tile and worker,
replayed from a memo where the same vertices were compiled for this target before."""

from __future__ import annotations

import numpy as np

from popvision_lite.emulator import cost_model as cm
from popvision_lite.emulator.compile.compiled import (
    K_COMPUTE,
    Compiled,
    ProgInfo,
    cached_digest,
    field_content,
)


def compile_execute(c: Compiled, info: ProgInfo) -> None:
    cs = info.prog.cs
    em = c.target.em
    if not cs.groups or cs.num_vertices == 0:
        return
    memo = c.caches.exec_memo
    key = _execute_key(c, cs) if memo is not None else None
    hit = memo.get(key) if key is not None else None
    if hit is not None and all(g.codelet is k for g, k in zip(cs.groups, hit[0], strict=True)):
        # a compute set of the same vertices (codelets, tiles, fields, parameters) in a graph compiled before
        # for this target (the same layer in another stage graph): its costs and its groups' vertex cycles
        _codelets, group_cycles, busy, flops, sram, utiles = hit
        for g, cy in zip(cs.groups, group_cycles, strict=True):
            g._cycles = cy  # VertexGroup.cycles' cache (read-only arrays, shared)
    else:
        tiles, cyc = _joined([g.tiles for g in cs.groups]), _joined([g.cycles(c.target) for g in cs.groups])
        # a compute set of one group whose codelet counted its vertices per tile (Elementwise.cycles): that count
        known = getattr(cs.groups[0], "tile_counts", None) if len(cs.groups) == 1 else None
        for g in cs.groups:
            g.tile_counts = None  # (read once: not kept with the graph)
        busy, count = cm.compute_tile_cycles(tiles, cyc, c.num_tiles, c.target.threads_per_tile,
                                             int(em["vertex_launch_cycles"]), supervisor=_flags(cs, "supervisor"),
                                             regions=_flags(cs, "multi_region"), known=known)
        flops = sum(g.codelet.flops(g) for g in cs.groups)
        sram = sum(g.codelet.sram_bytes(g) for g in cs.groups)
        utiles = np.nonzero(count)[0]  # (count: every vertex per tile, as distinct_tiles would count them again)
        if key is not None:
            group_cycles = []
            for g in cs.groups:
                cy = g.cycles(c.target)
                cy.setflags(write=False)
                group_cycles.append(cy)
            busy.setflags(write=False)
            utiles.setflags(write=False)
            memo[key] = (tuple(g.codelet for g in cs.groups), group_cycles, busy, flops, sram, utiles)
    c.add_template(info, K_COMPUTE, busy, ipu=c.ipu_of_tiles(utiles), flops=int(flops), bytes_sram=int(sram))
    # control code: call of the compute set on every tile with vertices
    c.add_mem("controlCode", utiles, cm.CONTROL_CODE_EXECUTE)
    c.add_mem("controlId", utiles, cm.CONTROL_ID_BYTES)
    info.code_bytes += len(utiles) * cm.CONTROL_CODE_EXECUTE


def _joined(arrays: list) -> np.ndarray:
    """The groups' per-vertex arrays end to end: a compute set of one group (a large elementwise op's) reads its
    group's array as it is, without a copy."""
    return arrays[0] if len(arrays) == 1 else np.concatenate(arrays)


def _flags(cs, attr: str) -> np.ndarray | None:
    """Each vertex's codelet flag ``attr`` (supervisor, multi-region), for compute_tile_cycles: None where no
    group's codelet has it (what an all-False array gives there), one array where every group's has it."""
    on = [bool(getattr(g.codelet, attr, False)) for g in cs.groups]
    if not any(on):
        return None
    if all(on):
        return np.ones(cs.num_vertices, bool)
    return np.concatenate([np.full(g.n, f) for g, f in zip(cs.groups, on, strict=True)])


def _execute_key(c: Compiled, cs) -> tuple | None:
    """Everything compile_execute reads of compute set ``cs``, by value: per group its codelet (by identity:
    a codelet object may carry its own settings), the vertices' tiles, per field its kind, tensor dtype and
    shape, the field's arrays and which of the compute set's tensors it is on (two fields on one tensor stay
    apart from two on two), and the parameters.  None when a field or parameter is of a kind not covered
    (not memoised)."""
    tensor_no: dict = {}
    parts = []
    for g in cs.groups:
        desc: list = [g.codelet.name, id(g.codelet)]
        arrays = [g.tiles]  # (hashed by cached_digest: the graph check hashed most of them already)
        for name in sorted(g.fields):
            f = g.fields[name]
            t = f.tensor
            content = field_content(c, f)
            if content is None:
                return None
            desc.append((name, tensor_no.setdefault(t.id, len(tensor_no)), str(t.dtype), tuple(t.shape)) + content)
        for k in sorted(g.params):
            v = np.asarray(g.params[k])
            if v.dtype == object:
                return None
            desc.append(("param", k))
            arrays.append(v)
        parts.append((tuple(desc),) + tuple(cached_digest(c, a) for a in arrays))
    return tuple(parts)
