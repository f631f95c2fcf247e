"""Memory accounting outside the steps: where a tensor's elements sit in tile memory, and vertex
state, field data, list descriptors and codelet code per tile."""

from __future__ import annotations

import numpy as np

from popvision_lite.emulator import cost_model as cm
from popvision_lite.emulator.compile.compiled import Compiled, digest
from popvision_lite.emulator.graph import Blocks, Regions, Windows
from popvision_lite.emulator.mapping import interval_index


def tile_offsets(c, mapping) -> np.ndarray:
    """Per mapping interval: its offset among the same tensor's elements on its tile.  Poplar keeps a
    variable's elements on one tile together in that tile's memory (in flat-index order), so
    intervals of a tensor that are apart in the flat index (the rows of a block) can be adjacent in
    tile memory."""
    return _tile_base(c, mapping) + mapping.start


def _tile_base(c, mapping, keep: bool = True) -> np.ndarray:
    """Per mapping interval: its tile offset (tile_offsets) less its first flat element, so that element
    e of interval k sits at ``base[k] + e`` in tile memory (one gather per element in tile_addr).  Cached
    for the compile; ``keep=False``: not added to the cache (the graph check's one-off use, so that the
    cache grows only as the copies and vertex memory read it), only the last one kept until the check ends,
    unless a copy's endpoint tensor has this mapping (``caches.copy_mappings``): a copy compiled afresh reads
    it again (tile_addr), so the check's base is kept rather than computed twice.  A kept base is found again
    for another mapping object of the same three arrays (the ResNet-50 row: 61 of its 421 mappings)."""
    cache = c.caches.tile_offsets
    key = id(mapping)
    if not keep and key in c.caches.copy_mappings:
        keep = True
    if key not in cache:
        last = c.caches.tile_base_last
        if not keep and last is not None and last[0] is mapping:
            return last[1]  # the graph check asks for one tensor's several fields in a row
        # another mapping object of the same arrays (held once: shared_arrays) has the same base
        akey = ("arrays", id(mapping.tile), id(mapping.start), id(mapping.stop))
        same = cache.get(akey) if keep else None
        if same is not None:
            cache[key] = (mapping, same[1])
            return same[1]
        rel = _base_of(mapping.tile, mapping.start, mapping.stop)
        if not keep:
            c.caches.tile_base_last = (mapping, rel)  # (one kept, not the cache: dropped after the check)
            return rel
        if len(rel) and mapping.stop[-1] <= np.iinfo(np.int32).max:
            rel = rel.astype(np.int32)  # within +-the tensor's size; tile_addr adds int64 elements to it
        cache[key] = cache[akey] = (mapping, rel)  # keep the mapping (and its arrays) alive while their ids are keys
    return cache[key][1]


def _base_of(t: np.ndarray, start: np.ndarray, stop: np.ndarray) -> np.ndarray:
    """_tile_base's values (int64) for the intervals ``start`` .. ``stop`` on tiles ``t``: interval k's offset
    among the intervals on its tile in (tile, start) order, less its start.  That offset is the elements of every
    interval before it in that order less those of the tiles before its tile: a cumulative sum in that order (a
    stable sort by tile, on 16-bit tiles numpy's radix sort; none where the tiles ascend with start, a linear
    mapping) less the tile's first element (a per-tile count of elements, summed), one gather per interval.  (The
    intervals are sorted by start already: Mapping.)"""
    n = len(t)
    sizes = stop - start
    nt = int(t.max()) + 1 if n else 1
    # (exact below 2**53 elements; on the tiles as held: bincount of 16-bit tiles is several times slower)
    per_tile = np.bincount(t, weights=sizes, minlength=nt)
    tile_first = np.cumsum(per_tile)
    tile_first -= per_tile
    if n < 2 or bool(np.all(t[1:] >= t[:-1])):
        rel = np.cumsum(sizes)
    else:
        o = np.argsort(t.astype(np.uint16) if nt <= 2**16 else t, kind="stable")
        rel = np.empty(n, np.int64)
        rel[o] = np.cumsum(sizes[o])
    rel -= sizes
    rel -= tile_first.astype(np.int64)[t]
    rel -= start
    return rel


def tile_addr(c, mapping, elems: np.ndarray, k: np.ndarray | None = None, keep: bool = True) -> np.ndarray:
    """Position of flat elements in their tile's memory block of the tensor (see tile_offsets);
    ``k``: each element's mapping interval where already known; ``keep``: see _tile_base."""
    if k is None:
        k = interval_index(mapping.start, elems)
    return _tile_base(c, mapping, keep)[k] + elems


def _cs_signature(cs):
    """Structure of a compute set: per group the codelet, tiles, per-vertex field sizes and params."""
    parts = []
    for g in cs.groups:
        fs = []
        for name in sorted(g.fields):
            f = g.fields[name]
            fs.append(f.sizes if isinstance(f, Regions) else np.array(f.block_shape + (f.n,)))
        ps = [np.asarray(g.params[k]) for k in sorted(g.params)]
        parts.append(g.codelet.name.encode() + digest(g.tiles, *fs, *ps))
    return b"".join(parts)


def _block_rows_adjacent(c: Compiled, f) -> bool:
    """True when every vertex's block rows are adjacent in its tile's memory (tile_offsets): the
    field is then one contiguous region (as in Poplar's grouped layouts), not a list of rows.  The
    graph check records the answer for the fields it checks (:func:`note_rows_adjacent`)."""
    hit = c.caches.rows_adjacent.get(id(f))
    if hit is not None and hit[0] is f:
        return hit[1]
    try:
        s, e = f.run_bounds()
    except Exception:  # noqa: BLE001 - a field without run bounds: keep the row-list cost
        return False
    return _rows_adjacent(c, f, s, e)


def _rows_adjacent(c: Compiled, f, s: np.ndarray, e: np.ndarray, k: np.ndarray | None = None) -> bool:
    """_block_rows_adjacent from the field's run bounds ``s``, ``e`` (and their mapping intervals ``k``: then
    the graph check asks, and the tile offsets it computes are not kept)."""
    if s.ndim != 2 or s.shape[1] < 2:
        return True
    addr = tile_addr(c, f.tensor.mapping, s.ravel(), None if k is None else k.ravel(),
                     keep=k is None).reshape(s.shape)
    return bool(np.all(addr[:, 1:] == addr[:, :-1] + (e - s)[:, :-1]))


def note_rows_adjacent(c: Compiled, f, s: np.ndarray, e: np.ndarray, k: np.ndarray) -> bool | None:
    """For a block or window field of several rows per vertex, whose run bounds and mapping intervals the graph
    check has in hand: record (and return) whether its rows are adjacent in tile memory, so that
    vertex_memory does not search the intervals again; None for other fields."""
    if not (isinstance(f, Blocks | Windows) and f.regions_per_vertex() > 1):
        return None
    flag = _rows_adjacent(c, f, s, e, k)
    c.caches.rows_adjacent[id(f)] = (f, flag)  # the field kept alive while its id is a key
    return flag


def remember_rows_adjacent(c: Compiled, f, flag: bool | None) -> None:
    """note_rows_adjacent's answer for another field object with the same arrays on an identically mapped
    tensor (the graph check skips such a field as checked already)."""
    if flag is not None and isinstance(f, Blocks | Windows):
        c.caches.rows_adjacent[id(f)] = (f, flag)


def vertex_memory(c: Compiled, used_cs: set) -> None:
    code_tiles: dict[str, tuple[object, np.ndarray]] = {}
    seen_cs: set = set()
    for cs in c.graph.compute_sets:
        if cs.id not in used_cs:
            continue
        if c.outline:
            sig = _cs_signature(cs)
            if sig in seen_cs:
                c.outlined_cs += 1
                continue  # an outlined op: its vertices (state, field data) exist once
            seen_cs.add(sig)
        for g in cs.groups:
            if g.n == 0:
                continue
            state = cm.vertex_state_bytes(g)
            # vertex instances per tile (cost_model.vertex_instances): a multi-region codelet's pieces
            # beyond ``threads`` and a one-vertex-per-tile codelet's regions add no instance; the pieces of
            # a tensor on one tile are adjacent in tile memory (tile_offsets), so a worker's regions
            # merge into one and extra pieces add no list entries
            ut, inst = cm.vertex_instances(g, c.num_tiles, c.target.threads_per_tile)
            c.add_mem("vertexInstanceState", ut, inst * state)
            fdata = 0
            vlist = 0
            for f in g.fields.values():
                rpv = f.regions_per_vertex()
                if isinstance(f, Blocks | Windows) and rpv > 1 and not _block_rows_adjacent(c, f):
                    vlist += cm.LIST_DESCRIPTOR_BYTES
                    fdata += cm.LIST_ENTRY_BYTES * rpv
                elif isinstance(f, Regions) and not f.regular:
                    fdata += cm.FIELD_SIZE_BYTES
            if fdata:
                c.add_mem("vertexFieldData", ut, inst * fdata)
            if vlist:
                c.add_mem("vectorListDescriptor", g.tiles, vlist)
            name = g.codelet.name
            prev = code_tiles.get(name)
            mask = np.zeros(c.num_tiles, bool) if prev is None else prev[1]
            mask[ut] = True  # (the group's tiles: ``ut`` is each once, not each vertex's)
            code_tiles[name] = (g.codelet, mask)
    for codelet, mask in code_tiles.values():
        c.add_mem("vertexCode", np.nonzero(mask)[0], int(codelet.code_bytes))
