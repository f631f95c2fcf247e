"""``engine.op_tables``: the ops and programs columns a graph's build fixes, without compiling, equal to the
compiled profile's (the GPU estimate's op list reads them: gpu_validation.op_list, emulated.op_profile)."""

from __future__ import annotations

import pandas as pd
import pytest

from popvision_lite.emulator import Engine, Graph, Target
from popvision_lite.emulator import mapping as M
from popvision_lite.emulator import programs as P
from popvision_lite.emulator.codelets import popops as CO
from popvision_lite.emulator.engine import op_tables


def _graph():
    g = Graph(Target.from_device("ipu-mk2", num_ipus=1))
    x = g.add_variable("x", (60,), "float32", mapping=M.linear(60, range(2)))
    y = g.add_variable("y", (600,), "float32", mapping=M.linear(600, range(3)))

    def cs_on(t, name, op):
        cs = g.add_compute_set(name, op=op)
        tiles, starts, sizes = M.worker_split(t)
        g.add_vertices(cs, CO.ADD, tiles, fields={"a": t.regions(starts, sizes), "b": t.regions(starts, sizes),
                                                 "out": t.regions(starts, sizes)})
        return cs

    for op, mb in (("inc", 720), ("big", 7200), ("other", 0)):
        g.add_op(op, type="add", precision="fp32", min_bytes=mb, plan=f"{op} plan")
    inc, big = cs_on(x, "inc", "inc"), cs_on(y, "big", "big")
    empty = g.add_compute_set("empty")
    shared = P.Execute(big, name="shared", op="big")
    inner = P.Repeat(3, P.Execute(inc, name="dbl"), name="inner")
    prog = P.Sequence([P.Repeat(2, P.Sequence([inner, P.Sync(), shared], name="outer_body"), name="outer"),
                       P.Repeat(0, P.Execute(inc, name="never"), name="zero"), P.Execute(empty),
                       # the same program object again, under another op: its step counts under its first use's op
                       P.Sequence([shared, P.Repeat(4, shared, name="again")], name="replay", op="other")])
    return g, prog


def test_op_tables_are_the_compiled_profiles_columns_with_repeats_and_replays():
    g, prog = _graph()
    ops, progs = op_tables(g, prog)
    full = Engine(g, prog, mode="timing").run().profile_data
    pd.testing.assert_frame_equal(ops, full.ops[list(ops.columns)])
    pd.testing.assert_frame_equal(progs, full.programs[list(progs.columns)])
    # inc: 2 x 3 runs (the zero Repeat's none); big: 2 + 1 + 4 runs of one program object, all under "big"
    one = {cs.name: sum(grp.codelet.flops(grp) for grp in cs.groups) for cs in g.compute_sets}
    f = ops.set_index("name")["flops"]
    assert one["inc"] > 0 and one["big"] > 0
    assert (f["inc"], f["big"], f["other"]) == (6 * one["inc"], 7 * one["big"], 0)


def test_an_op_whose_bytes_the_compile_would_decide_gives_none():
    g, prog = _graph()
    g.op_info["inc"].pop("min_bytes")
    assert op_tables(g, prog) is None


@pytest.mark.parametrize("missing", ["type", "precision"])
def test_an_op_without_its_type_or_precision_gives_none(missing):
    g, prog = _graph()
    g.op_info["big"].pop(missing)
    assert op_tables(g, prog) is None
