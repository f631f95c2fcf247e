"""compile.check.local_by_construction: a Blocks or Windows field whose vertices each see one of the blocks or
windows their tensor's mapping was built from (mapping.by_blocks / by_windows with every block on a tile of its
own), the one on the vertex's own tile, skips the graph check's interval search and rows-adjacent test.  The check
then records what the search would have: the same rows-adjacent answers for every field, and the fields pass
_check_local.  Anything else (a window off its tile, tiles that repeat, a tensor mapped again, another shape) is
searched as before and refused where a vertex reads another tile's memory."""

import numpy as np
import pytest

from popvision_lite.emulator import Target
from popvision_lite.emulator import mapping as M
from popvision_lite.emulator import programs as P
from popvision_lite.emulator.codelets.base import Codelet
from popvision_lite.emulator.compile import check
from popvision_lite.emulator.compile.compiled import Compiled
from popvision_lite.emulator.graph import Graph
from popvision_lite.errors import EmulatorError
from tests.support.window_splits import uneven as _uneven

TARGET = Target.from_device("ipu-mk2")


class _Touch(Codelet):
    """A vertex that reads one block or window and writes one (the graph check reads only the fields)."""

    name = "Touch"
    fields = {"in": "in", "out": "out"}


TOUCH = _Touch()
NT = TARGET.num_tiles


def _windows_graph(shape, shapes, origins, tiles, layouts=None, vertex_tiles=None):
    """A variable mapped by_windows, read by one vertex per window (one group per window shape, as matmul does)."""
    g = Graph(TARGET)
    t = g.add_variable("t", shape, "float32", mapping=M.by_windows(shape, shapes, origins, tiles, layouts))
    vt = tiles if vertex_tiles is None else vertex_tiles
    cs = g.add_compute_set("cs", op="op")
    keys, inv = M.unique_rows(shapes)
    for c, key in enumerate(keys):
        sel = np.nonzero(inv == c)[0]
        shp = tuple(int(x) for x in key)
        g.add_vertices(cs, TOUCH, np.asarray(vt)[sel], fields={"in": t.windows(shp, origins[sel]),
                                                                 "out": t.windows(shp, origins[sel])})
    return g, t, cs


def _checked(g, cs, fast: bool, monkeypatch):
    """The rows-adjacent answers the graph check records per field, with the fast path or without."""
    c = Compiled(g, P.Execute(cs))
    with monkeypatch.context() as mp:
        if not fast:
            mp.setattr(check, "local_by_construction", lambda grp, f: False)
        check.check_graph(c, {cs.id}, None)
    return [c.caches.rows_adjacent.get(id(f), (f, None))[1] for grp in cs.groups for f in grp.fields.values()]


@pytest.mark.parametrize("three_d", [False, True])
@pytest.mark.parametrize("with_layouts", [False, True])
def test_windows_on_their_own_tiles_match_the_search(three_d, with_layouts, monkeypatch):
    rng = np.random.default_rng(7 + 2 * three_d + with_layouts)
    layouts = {} if with_layouts else None
    for _ in range(12):
        shape, shapes, origins = _uneven(rng, three_d)
        tiles = rng.choice(NT, size=len(shapes), replace=False)  # distinct tiles, in no order
        g, t, cs = _windows_graph(shape, shapes, origins, tiles, layouts)
        for grp in cs.groups:
            for fname, f in grp.fields.items():
                assert check.local_by_construction(grp, f)
                check._check_local(grp, fname, f)  # the definition passes: every run inside its interval, on its tile
        assert _checked(g, cs, True, monkeypatch) == _checked(g, cs, False, monkeypatch)


def test_blocks_on_their_own_tiles_match_the_search(monkeypatch):
    rng = np.random.default_rng(3)
    for shape, block in [((4, 24, 30), (1, 8, 10)), ((24, 30), (8, 30)), ((2, 12, 16), (1, 3, 4))]:
        nb = int(np.prod([s // b for s, b in zip(shape, block, strict=True)]))
        tiles = rng.choice(NT, size=nb, replace=False)
        g = Graph(TARGET)
        t = g.add_variable("t", shape, "float32", mapping=M.by_blocks(shape, block, tiles))
        grid = [s // b for s, b in zip(shape, block, strict=True)]
        index = np.indices(grid).reshape(len(grid), -1).T
        perm = rng.permutation(nb)  # vertices in another order than the blocks
        cs = g.add_compute_set("cs", op="op")
        g.add_vertices(cs, TOUCH, tiles[perm], fields={"in": t.blocks(block, index[perm]),
                                                              "out": t.blocks(block, index[perm])})
        grp = cs.groups[0]
        assert check.local_by_construction(grp, grp.fields["out"])
        check._check_local(grp, "out", grp.fields["out"])
        assert _checked(g, cs, True, monkeypatch) == _checked(g, cs, False, monkeypatch)


def test_a_window_off_its_tile_is_searched_and_refused():
    rng = np.random.default_rng(11)
    shape, shapes, origins = _uneven(rng, True)
    tiles = rng.choice(NT, size=len(shapes), replace=False)
    vt = tiles.copy()
    vt[[0, 1]] = vt[[1, 0]]  # two windows' vertices swapped: each reads the other's tile
    g, t, cs = _windows_graph(shape, shapes, origins, tiles, vertex_tiles=vt)
    found = [check.local_by_construction(grp, f) for grp in cs.groups for f in grp.fields.values()]
    assert not all(found)  # the groups of the two swapped vertices are searched
    c = Compiled(g, P.Execute(cs))
    with pytest.raises(EmulatorError, match="which lives on tile"):
        check.check_graph(c, {cs.id}, None)


def test_what_is_not_built_so_is_not_skipped():
    rng = np.random.default_rng(5)
    shape, shapes, origins = _uneven(rng, False)
    n = len(shapes)
    # tiles that repeat: a tile holds two windows, whose rows interleave in its memory
    rep = np.repeat(rng.choice(NT, size=(n + 1) // 2, replace=False), 2)[:n]
    g, t, cs = _windows_graph(shape, shapes, origins, rep)
    assert M.own_windows(t.mapping) is None
    assert not any(check.local_by_construction(grp, f) for grp in cs.groups for f in grp.fields.values())
    # own tiles, but the tensor mapped again afterwards with the same intervals: the record is the old mapping's
    tiles = rng.choice(NT, size=n, replace=False)
    g, t, cs = _windows_graph(shape, shapes, origins, tiles)
    grp = cs.groups[0]
    f = grp.fields["out"]
    assert check.local_by_construction(grp, f)
    m = t.mapping
    g.set_mapping(t, M.intervals(m.tile, m.start, m.stop))
    assert not check.local_by_construction(grp, f)
    # a window shifted by one column: not one of the mapping's windows
    g, t, cs = _windows_graph(shape, shapes, origins, tiles)
    grp = cs.groups[0]
    f = grp.fields["out"]
    moved = t.windows(f.block_shape, f.origins + np.array([0, 1]) * (f.origins[:, 1:] + f.block_shape[1] < shape[1]))
    if not np.array_equal(moved.origins, f.origins):
        assert not check.local_by_construction(grp, moved)
    # the same elements seen as a tensor of another shape (a reshape sharing the mapping)
    g2 = Graph(TARGET)
    flat = g2.add_variable("flat", (int(np.prod(shape)),), "float32", mapping=t.mapping)
    cs2 = g2.add_compute_set("cs", op="op")
    fw = flat.windows((1,), f.origins[:, :1] * 0)
    g2.add_vertices(cs2, TOUCH, grp.tiles, fields={"in": fw, "out": fw})
    assert not check.local_by_construction(cs2.groups[0], cs2.groups[0].fields["out"])


def test_blocks_with_a_shared_tile_or_another_block_shape_are_searched():
    shape, block = (4, 24, 30), (1, 8, 10)
    nb = 4 * 3 * 3
    rng = np.random.default_rng(9)
    tiles = rng.choice(NT, size=nb, replace=False)
    tiles[5] = tiles[4]  # two blocks on one tile
    g = Graph(TARGET)
    t = g.add_variable("t", shape, "float32", mapping=M.by_blocks(shape, block, tiles))
    assert M.own_blocks(t.mapping) is None
    tiles = rng.choice(NT, size=nb, replace=False)
    t2 = g.add_variable("t2", shape, "float32", mapping=M.by_blocks(shape, block, tiles))
    cs = g.add_compute_set("cs", op="op")
    idx = np.indices((4, 6, 3)).reshape(3, -1).T
    # each vertex a half of a recorded block, on that block's tile: local, but not a block the mapping was built from
    g.add_vertices(cs, TOUCH, tiles[np.ravel_multi_index((idx[:, 0], idx[:, 1] // 2, idx[:, 2]), (4, 3, 3))], fields={"in": t2.blocks((1, 4, 10), idx),
                                                           "out": t2.blocks((1, 4, 10), idx)})
    assert not check.local_by_construction(cs.groups[0], cs.groups[0].fields["out"])
    # blocks on a tiles list shorter than the blocks (wrapping): tiles repeat, nothing recorded
    t3 = g.add_variable("t3", shape, "float32", mapping=M.by_blocks(shape, block, tiles[:7]))
    assert M.own_blocks(t3.mapping) is None


def test_a_block_off_its_tile_is_searched_and_refused():
    shape, block = (4, 24, 30), (1, 8, 10)
    nb = 4 * 3 * 3
    tiles = np.random.default_rng(13).choice(NT, size=nb, replace=False)
    g = Graph(TARGET)
    t = g.add_variable("t", shape, "float32", mapping=M.by_blocks(shape, block, tiles))
    cs = g.add_compute_set("cs", op="op")
    idx = np.indices((4, 3, 3)).reshape(3, -1).T
    g.add_vertices(cs, TOUCH, np.roll(tiles, 1), fields={"in": t.blocks(block, idx), "out": t.blocks(block, idx)})
    assert not check.local_by_construction(cs.groups[0], cs.groups[0].fields["out"])
    with pytest.raises(EmulatorError, match="which lives on tile"):
        check.check_graph(Compiled(g, P.Execute(cs)), {cs.id}, None)
