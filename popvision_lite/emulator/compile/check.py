"""Graph checks before costing: every tensor mapped, every vertex touching only its own tile's memory."""

from __future__ import annotations

import numpy as np

from popvision_lite.emulator import programs as P
from popvision_lite.emulator.compile.compiled import Compiled, cached_digest, field_content
from popvision_lite.emulator.compile.memory import note_rows_adjacent, remember_rows_adjacent
from popvision_lite.emulator.graph import Blocks, Regions, Windows
from popvision_lite.emulator.mapping import interval_index, own_blocks, own_windows
from popvision_lite.errors import EmulatorError


def check_program_graph(c: Compiled) -> None:
    """Every compute set and tensor a leaf program uses belongs to the graph being compiled."""
    graph = c.graph
    for pid in c.leaves:
        p = c.progs[pid].prog
        if isinstance(p, P.Execute) and p.cs not in graph.compute_sets:
            raise EmulatorError(f"Execute '{p.name}': compute set '{p.cs.name}' belongs to another graph")
        for ep in ((p.src, p.dst) if isinstance(p, P.Copy) else (p.view,) if isinstance(p, P.StreamCopy) else ()):
            if ep.tensor.graph is not graph:
                raise EmulatorError(f"{p.kind} '{p.name}': tensor '{ep.name}' belongs to another graph")


def check_graph(c: Compiled, used_cs: set, memo: dict | None = None) -> None:
    """Every tensor mapped, every vertex field on its vertex's tile (:func:`_check_local`), and for the
    fields of several rows per vertex whether those rows are adjacent in tile memory (for vertex_memory).
    ``memo``: {content key of a field and its tensor's mapping: that answer}, shared with the other graphs
    compiled with it (``copy_memo.CopyMemo``: the stage graphs of a pipelined run hold the same layer's
    fields); a field found there was checked with the same arrays on the same mapping already."""
    g = c.graph
    for t in g.tensors:
        if t.mapping is None:
            raise EmulatorError(
                f"tensor '{t.name}' {t.shape} is not mapped to any tile; fix: g.set_mapping(tensor, "
                f"mapping.linear(tensor.size, tiles=...)) or pass mapping= when adding it"
            )
        t.mapping.check(t.name, t.size, c.num_tiles)
    digests = {}  # per tensor: its mapping's tiles and interval starts (with the shape, the whole mapping: the
    # intervals cover [0, size) contiguously), by content (digest: also the key of answers kept across graphs)
    done: dict = {}
    memo_used = c.caches.check_keys_used
    for cs in g.compute_sets:
        if cs.id not in used_cs:
            continue
        for grp in cs.groups:
            for fname, f in grp.fields.items():
                mp = f.tensor.mapping
                if f.tensor.id not in digests:
                    digests[f.tensor.id] = cached_digest(c, mp.tile) + cached_digest(c, mp.start)
                # the same connections (arrays) on an identically mapped tensor were checked already
                key = (digests[f.tensor.id], id(grp.tiles)) + (
                    (id(f.starts), id(f.sizes)) if isinstance(f, Regions) else
                    (id(f.origins), f.block_shape) if isinstance(f, Windows) else (id(f.index), f.block_shape))
                if key in done:
                    if done[key][1].tensor.shape == f.tensor.shape:  # then the same run bounds
                        remember_rows_adjacent(c, f, done[key][2])
                    continue
                ck = None if memo is None else _content_key(c, f, grp, digests[f.tensor.id])
                if ck is not None:
                    memo_used.add(ck)
                    if ck in memo:
                        remember_rows_adjacent(c, f, memo[ck])
                        done[key] = (grp.tiles, f, memo[ck])
                        continue
                if split_local(grp, f):  # (a Regions field: no rows to note as adjacent)
                    flag = None
                elif local_by_construction(grp, f):
                    flag = True if f.regions_per_vertex() > 1 else None  # (note_rows_adjacent's answer)
                    remember_rows_adjacent(c, f, flag)
                else:
                    bounds = _check_local(grp, fname, f)
                    flag = None if bounds is None else note_rows_adjacent(c, f, *bounds)
                done[key] = (grp.tiles, f, flag)  # keep the arrays alive so ids stay unique
                if ck is not None:
                    memo[ck] = flag


def _content_key(c: Compiled, f, grp, md: bytes) -> tuple | None:
    """Everything :func:`_check_local` and note_rows_adjacent read of field ``f`` of group ``grp``, by value:
    the field's connections (compiled.field_content), its tensor's shape and mapping (``md``: its digest), the
    vertices' tiles.  None (not memoised) for a kind of field field_content does not cover."""
    content = field_content(c, f)
    if content is None:
        return None
    return content + (tuple(f.tensor.shape), md, cached_digest(c, grp.tiles))


def split_local(grp, f) -> bool:
    """Whether field ``f`` of group ``grp`` is local by construction: a field marked by ``ops.common.mark_split``
    as pieces of its tensor's mapping on the group's tiles (each piece part of one mapping interval, its vertex on
    that interval's tile, so :func:`_check_local` finds every run inside its interval and on its tile): an
    elementwise op's or SgdUpdate's worker pieces, a K reduction's ReduceAdd fields (its gathered partials and
    output slices, each exactly one interval of its tensor's mapping: ops/matmul.py ``_reduce_vertices``,
    ops/conv_wu.py ``_reduce_partials``).  The mark counts only while the tensor still has that mapping (a mapping never
    changes; a set_mapping makes a new one) and the group those tiles (read-only arrays)."""
    of = getattr(f, "split_of", None)
    return of is not None and isinstance(f, Regions) and of[0] is f.tensor.mapping and of[1] is grp.tiles


def local_by_construction(grp, f) -> bool:
    """Whether every vertex of group ``grp`` sees through field ``f`` exactly one block or window of the blocks or
    windows its tensor's mapping was built from (``mapping.own_blocks`` / ``own_windows``: each on a tile of its
    own), the one on the vertex's tile.  Then :func:`_check_local` passes (each run of the block lies in one merged
    interval on that tile) and the block's rows are adjacent in tile memory (the tile holds that block's elements
    alone, in flat order), so neither is searched.  Found from the recorded blocks and the field's own arrays, one
    pass per vertex; anything else (another shape, tiles, window, a mapping made otherwise) is searched as before."""
    mp, t, tiles = f.tensor.mapping, f.tensor, grp.tiles
    if isinstance(f, Windows):
        rec = own_windows(mp)
        if rec is None or rec[0] != t.shape or rec[1].shape[1] != len(t.shape) or not f.n or int(tiles.min()) < 0:
            return False
        _shape, bs, org, wt = rec
        where = np.full(max(int(wt.max()), int(tiles.max())) + 1, -1, np.int64)
        where[wt] = np.arange(len(wt))
        w = where[tiles]
        return bool((w >= 0).all() and (bs[w] == np.array(f.block_shape)).all() and (org[w] == f.origins).all())
    if isinstance(f, Blocks):
        rec = own_blocks(mp)
        if rec is None or rec[0] != t.shape or rec[1] != f.block_shape or not f.n:
            return False
        strides = np.cumprod((f.grid[1:] + (1,))[::-1])[::-1]
        return bool(np.array_equal(rec[2][f.index @ strides], tiles))
    return False


def _check_local(grp, fname: str, f) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Poplar rule: a vertex only touches memory of its own tile.  Returns the field's run bounds and each
    run's mapping interval (None when every run is empty)."""
    s, e = f.run_bounds()
    mp = f.tensor.mapping
    nonempty = e > s
    if not nonempty.any():
        return None
    # the mapping covers [0, size) contiguously from 0, so ks >= 0 and "same interval" ==
    # "the run ends before that interval stops"
    ks = interval_index(mp.start, s)
    # (np.take: cheaper than fancy indexing by a 2-D index; the empty runs looked at only when a run fails)
    ok = np.take(mp.tile, ks) == grp.tiles[:, None]
    ok &= e <= np.take(mp.stop, ks)
    bad = None if ok.all() else nonempty & ~ok
    if bad is not None and bad.any():
        v, r = (int(x[0]) for x in np.nonzero(bad))
        elem = int(s[v, r])
        where = int(mp.tile_of(np.array([elem]))[0])
        raise EmulatorError(
            f"vertex {v} of '{grp.codelet.name}' in compute set '{grp.cs.name}' (tile {int(grp.tiles[v])}): "
            f"field '{fname}' touches element {elem} of tensor '{f.tensor.name}' which lives on tile {where}; "
            f"fix: map that data to the vertex's tile, or Copy it there first"
        )
    return s, e, ks
