"""The vertices table (profile_builder._compute_set_tables): per (compute set, codelet, tile) the vertices, their
cycles and their state, whichever groups they were added in."""

from __future__ import annotations

import numpy as np
import pandas as pd

from popvision_lite.emulator import Engine, Graph, Target
from popvision_lite.emulator import mapping as M
from popvision_lite.emulator import programs as P
from popvision_lite.emulator.codelets import popops as CO


def test_groups_of_one_codelet_in_one_compute_set_are_one_row_per_tile():
    target = Target.from_device("ipu-mk2", num_ipus=1)
    g = Graph(target)
    x = g.add_variable("x", (900,), "float32", mapping=M.linear(900, range(5)))
    y = g.add_variable("y", (900,), "float32", mapping=M.linear(900, range(5)))
    z = g.add_variable("z", (600,), "float32", mapping=M.linear(600, range(2, 6)))
    cs = g.add_compute_set("three_groups")
    groups = []
    for out, a in ((y, x), (z, z)):  # two Add groups, on tiles 0-4 and 2-5
        tiles, starts, sizes = M.worker_split(out)
        groups.append(g.add_vertices(cs, CO.ADD, tiles, fields={"a": a.regions(starts, sizes),
                                                                "b": a.regions(starts, sizes),
                                                                "out": out.regions(starts, sizes)}))
    tiles, starts, sizes = M.worker_split(x)
    groups.append(g.add_vertices(cs, CO.SCALE, tiles, fields={"in": y.regions(starts, sizes),
                                                             "out": x.regions(starts, sizes)},
                                 params={"scale": np.full(len(tiles), 0.5, np.float32)}))
    empty = g.add_compute_set("no_vertices")
    pdata = Engine(g, P.Sequence([P.Execute(cs), P.Execute(empty)]), mode="timing").run().profile_data

    # what the table must say, from every vertex of every group
    per_vertex = pd.concat([pd.DataFrame({"codelet": grp.codelet.name, "tile": np.asarray(grp.tiles),
                                          "cycles": np.asarray(grp.cycles(target), np.int64)}) for grp in groups])
    want = per_vertex.groupby(["codelet", "tile"]).agg(count=("cycles", "size"), cycles=("cycles", "sum"))
    v = pdata.stored_table("vertices")
    assert (v["cs_id"] == cs.id).all()
    got = v.set_index(["codelet", "tile"])[["count", "cycles"]].sort_index()
    np.testing.assert_array_equal(got.index.to_frame(index=False).to_numpy(),
                                  want.index.to_frame(index=False).to_numpy())
    np.testing.assert_array_equal(got.to_numpy(), want.to_numpy())
    assert len(v) == len(want)  # one row per (codelet, tile): the two Add groups' tiles 2-4 are not listed twice

    sets = pdata.stored_table("compute_sets").set_index("cs_id")
    assert sets.loc[cs.id, "num_vertices"] == len(per_vertex)
    assert sets.loc[cs.id, "num_tiles"] == per_vertex["tile"].nunique() == 6
    assert sets.loc[empty.id, "num_vertices"] == sets.loc[empty.id, "num_tiles"] == 0
