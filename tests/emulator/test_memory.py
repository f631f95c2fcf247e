"""Emulator memory: placement by category, liveness, out-of-memory with a readable profile."""

from __future__ import annotations

import numpy as np
import pytest

import popvision_lite as pvl
from popvision_lite.emulator import Engine, Graph, Target
from popvision_lite.emulator import cost_model as cm
from popvision_lite.emulator import mapping as M
from popvision_lite.emulator import programs as P
from popvision_lite.emulator.codelets import popops as CO
from popvision_lite.errors import OutOfMemoryError
from popvision_lite.profile.schema import CATEGORY_CODE


@pytest.fixture(scope="module")
def mk2():
    return Target.from_device("ipu-mk2", num_ipus=1)


def _add(g, cs, out, a, b):
    tiles, starts, sizes = M.worker_split(out)
    return g.add_vertices(cs, CO.ADD, tiles, fields={"a": a.regions(starts, sizes), "b": b.regions(starts, sizes),
                                                    "out": out.regions(starts, sizes)})


def test_liveness_tensor_dies_midway(mk2):
    g = Graph(mk2)
    n = 600  # float32 over tiles 0..2: 800 B per tile per tensor
    mp = M.linear(n, range(3))
    x = g.add_variable("x", (n,), "float32", mapping=mp)
    t1 = g.add_variable("t1", (n,), "float32", mapping=mp)
    t2 = g.add_variable("t2", (n,), "float32", mapping=mp)
    y = g.add_variable("y", (n,), "float32", mapping=mp)
    steps = []
    for name, out, a, b in (("s0", t1, x, x), ("s1", t2, t1, x), ("s2", y, t2, t2), ("s3", y, y, x)):
        cs = g.add_compute_set(name)
        _add(g, cs, out, a, b)
        steps.append(P.Execute(cs))
    res = Engine(g, P.Sequence(steps), mode="timing").run()
    v = res.profile_data.variables.set_index("name")
    assert bool(v.loc["x", "always_live"])  # input: read before any write
    assert (v.loc["t1", "first_lstep"], v.loc["t1", "last_lstep"]) == (0, 1)  # dies after s1
    assert (v.loc["t2", "first_lstep"], v.loc["t2", "last_lstep"]) == (1, 2)
    assert (v.loc["y", "first_lstep"], v.loc["y", "last_lstep"]) == (2, 3)  # output: live to the end
    per = 800
    ltb = res.profile_data.liveness_tile_bytes
    assert ltb.shape == (4, mk2.num_tiles)
    np.testing.assert_array_equal(ltb[:, 0], [per, 2 * per, 2 * per, per])
    assert ltb[:, 3:].sum() == 0
    ls = res.profile_data.liveness_steps
    assert ls["total_bytes"].tolist() == [3 * per, 6 * per, 6 * per, 3 * per]
    mem = res.profile_data.memory
    var = CATEGORY_CODE["variable"]
    assert mem[0, var, 0] == per  # x always live
    assert mem[0, var, 1] == 2 * per  # peak of not-always-live


def test_liveness_call_arguments_are_written_as_the_call_starts(mk2):
    """A call of an outlined body (a replayed Sequence with call_args) fills its parameters with this
    call's values: the value the previous call left in a parameter is dead after its last read, not
    live until the next call reads the parameter again.  Without call_args the same tensor read by both
    calls is one value, live throughout."""
    def build(call_args):
        g = Graph(mk2)
        mp = M.linear(600, range(3))  # 800 B per tile
        x = g.add_variable("x", (600,), "float32", mapping=mp)
        arg = g.add_variable("arg", (600,), "float32", mapping=mp)
        out = g.add_variable("out", (600,), "float32", mapping=mp)
        other = g.add_variable("other", (600,), "float32", mapping=mp)
        cs = {n: g.add_compute_set(n) for n in ("make", "body", "gap1", "gap2")}
        _add(g, cs["make"], arg, x, x)       # lstep 0
        _add(g, cs["body"], out, arg, x)     # lstep 1 (first call), 4 (the call again)
        _add(g, cs["gap1"], other, out, x)   # lstep 2
        _add(g, cs["gap2"], x, other, x)     # lstep 3
        body = P.Execute(cs["body"])
        prog = P.Sequence([P.Execute(cs["make"]), body, P.Execute(cs["gap1"]), P.Execute(cs["gap2"]),
                           P.Sequence([body], name="body/replay", call_args=[arg] if call_args else ())])
        res = Engine(g, prog, mode="timing").run()
        pd_ = res.profile_data
        arg_id = int(pd_.variables.set_index("name").loc["arg", "var_id"])
        spans = pd_.variable_intervals
        return pd_.liveness_tile_bytes[:, 0] // 800, spans.loc[spans.var_id == arg_id, ["first_lstep", "last_lstep"]].values.tolist()

    kept, kept_spans = build(call_args=False)
    called, spans = build(call_args=True)
    assert kept.tolist() == [1, 2, 3, 2, 2]  # arg live at steps 0..4 (one value read by both calls)
    assert called.tolist() == [1, 2, 2, 1, 2]  # arg dead at steps 2-3, written again as the call starts
    assert kept_spans == [] and spans == [[0, 1], [4, 4]]  # the profile's intervals of arg


def test_liveness_loop_carried_and_read_in_loop(mk2):
    g = Graph(mk2)
    mp = M.linear(60, range(1))
    a = g.add_variable("a", (60,), "float32", mapping=mp)
    acc = g.add_variable("acc", (60,), "float32", mapping=mp)
    w = g.add_variable("w", (60,), "float32", mapping=mp)
    tmp = g.add_variable("tmp", (60,), "float32", mapping=mp)
    cs_w = g.add_compute_set("make_w")
    _add(g, cs_w, w, a, a)          # lstep 0: w written before the loop
    cs_t = g.add_compute_set("tmp")
    _add(g, cs_t, tmp, w, a)        # lstep 1 (in loop): reads w
    cs_acc = g.add_compute_set("acc")
    _add(g, cs_acc, acc, acc, tmp)  # lstep 2 (in loop): acc += tmp
    cs_end = g.add_compute_set("end")
    _add(g, cs_end, a, acc, acc)    # lstep 3
    prog = P.Sequence([P.Execute(cs_w), P.Repeat(3, P.Sequence([P.Execute(cs_t), P.Execute(cs_acc)])),
                       P.Execute(cs_end)])
    res = Engine(g, prog).run(inputs={"a": np.ones(60, np.float32)})
    np.testing.assert_array_equal(res.outputs["a"], np.full(60, 18.0))  # acc = 3 x 3, a = 2 acc
    v = res.profile_data.variables.set_index("name")
    assert (v.loc["w", "first_lstep"], v.loc["w", "last_lstep"]) == (0, 2)  # read again by later iterations
    assert (v.loc["tmp", "first_lstep"], v.loc["tmp", "last_lstep"]) == (1, 2)
    assert bool(v.loc["acc", "always_live"])  # read (acc += ...) before first written


def test_memory_categories(mk2):
    g = Graph(mk2)
    x = g.add_variable("x", (64, 64), "float32", mapping=M.single_tile(64 * 64, 0))
    k = g.add_constant("k", np.ones((64, 64), np.float32), mapping=M.single_tile(64 * 64, 0))
    y = g.add_variable("y", (64, 64), "float32", mapping=M.single_tile(64 * 64, 1))
    cs = g.add_compute_set("mm")
    # 2 matmul vertices on tile 0 reading 32x64 @ 64x... keep it simple: one elementwise group
    _add(g, cs, x, x, k)
    prog = P.Sequence([P.Execute(cs), P.Copy(x, y)])
    res = Engine(g, prog, mode="timing").run()
    mem = res.profile_data.memory
    cat = CATEGORY_CODE
    nv = 6  # 4096 elements split over 6 workers
    assert mem[0, cat["constant"], 0] == 64 * 64 * 4
    assert mem[0, cat["vertexCode"], 0] == CO.ADD.code_bytes
    assert mem[1, cat["vertexCode"], 0] == 0
    assert mem[0, cat["vertexInstanceState"], 0] == nv * (CO.ADD.state_bytes + 3 * cm.FIELD_POINTER_BYTES)
    assert mem[0, cat["internalExchangeCode"], 0] > 0 and mem[1, cat["internalExchangeCode"], 0] > 0
    assert mem[5, cat["internalExchangeCode"], 0] == 0
    assert (mem[:, cat["stack"], 0] == cm.stack_bytes(mk2.threads_per_tile)).all()
    assert (mem[:, cat["controlCode"], 0] > 0).all()  # every tile takes part in the sync


def test_out_of_memory_raises_and_writes_readable_profile(tmp_path, mk2):
    g = Graph(mk2)
    cap = mk2.sram_bytes_per_tile
    n_big = cap // 4 + 1000  # float32 elements: more than one tile holds
    big = g.add_variable("big", (n_big,), "float32", mapping=M.single_tile(n_big, 7))
    small = g.add_variable("small", (100,), "float32", mapping=M.single_tile(100, 8))
    cs = g.add_compute_set("touch")
    _add(g, cs, small, small, small)
    path = tmp_path / "oom.pvl"
    eng = Engine(g, P.Sequence([P.Execute(cs), P.Copy(small, big.flat_slice(0, 100))]), model="oom-case")
    cg = eng.compile()
    assert not cg.fits and cg.oom_report[0][0] == 7
    with pytest.raises(OutOfMemoryError) as ei:
        eng.run(inputs={"small": np.ones(100, np.float32)}, profile_path=path)
    err = ei.value
    assert "tile 7" in str(err) and "IPU 0" in str(err) and f"{cap:,}" in str(err)
    assert err.worst_tiles[0][0] == 7 and err.worst_tiles[0][1] > cap
    assert err.profile_path == str(path) and path.exists()
    with pvl.open(path) as p:
        assert p.run["fits"] is False
        by_tile = p.stored_table("memory_by_tile")
        assert bool(by_tile.loc[7, "over_capacity"]) and not bool(by_tile.loc[8, "over_capacity"])
        assert by_tile.loc[7, "total"] > cap
        assert len(p.stored_table("steps")) > 0  # execution costs still computed without numerics
    # allow_out_of_memory: no raise, fits False
    res = eng.run(allow_out_of_memory=True)
    assert res.fits is False and res.profile_data.run["fits"] is False


def test_vertices_table_agrees_with_memory_and_compute_sets(mk2):
    g = Graph(mk2)
    x = g.add_variable("x", (900,), "float32", mapping=M.linear(900, range(5)))
    y = g.add_variable("y", (900,), "float32", mapping=M.linear(900, range(5)))
    cs = g.add_compute_set("two_codelets")
    _add(g, cs, y, x, x)
    tiles, starts, sizes = M.worker_split(x)
    g.add_vertices(cs, CO.SCALE, tiles, fields={"in": y.regions(starts, sizes), "out": x.regions(starts, sizes)},
                   params={"scale": np.full(len(tiles), 0.5, np.float32)})
    pdata = Engine(g, P.Execute(cs), mode="timing").run().profile_data
    v = pdata.stored_table("vertices")
    assert set(v["codelet"]) == {"Add", "Scale"}
    assert v["count"].sum() == pdata.stored_table("compute_sets").loc[0, "num_vertices"] == 2 * len(tiles)
    per_tile_state = v.groupby("tile")["state_bytes"].sum()
    mem_state = pdata.memory[:, CATEGORY_CODE["vertexInstanceState"], 0]
    np.testing.assert_array_equal(per_tile_state.to_numpy(), mem_state[per_tile_state.index])
    assert mem_state.sum() == per_tile_state.sum()
    # Scale carries a per-vertex parameter: 4 more bytes of state per vertex than its fields alone
    sc = v[v["codelet"] == "Scale"]
    assert (sc["state_bytes"] == sc["count"] * (CO.SCALE.state_bytes + 2 * cm.FIELD_POINTER_BYTES + 4)).all()


def test_vertex_instances_one_definition_for_memory_and_the_vertices_table(mk2):
    """A graph vertex is not always a Poplar vertex: poplin's ReduceAdd is ONE vertex per tile over all of
    its output regions there (lib/poplin/ConvReduce.cpp reduce()), and a multi-region codelet's pieces
    beyond the workers are regions of six 2D vertices.  Vertex state is charged per instance, and the
    vertices table says the same as the memory view."""
    from popvision_lite.emulator.codelets import popops_rows as CR

    g = Graph(mk2)
    pk, n_reg, ln = 3, 9, 8  # 9 output regions of 8 elements on each of tiles 0 and 1, 3 partials each
    tiles = np.repeat([0, 1], n_reg)
    st = np.arange(2 * n_reg) * ln
    lens = np.full(2 * n_reg, ln)
    n = int(lens.sum())
    src = g.add_variable("p", (pk * n,), "float32", mapping=M.intervals(tiles, pk * st, pk * (st + lens)))
    out = g.add_variable("o", (n,), "float16", mapping=M.intervals(tiles, st, st + lens))
    red = g.add_compute_set("reduce")
    grp = g.add_vertices(red, CR.CONV_REDUCE_PARTIALS, tiles, fields={"in": src.regions(pk * st, pk * lens),
                                                                       "out": out.regions(st, lens)},
                         params={"k": np.int64(pk)})
    a = g.add_variable("a", (4000,), "float32", mapping=M.linear(4000, [2]))
    add = g.add_compute_set("add")
    pieces = np.arange(20) * 200  # 20 pieces on tile 2: regions of 6 worker vertices
    g.add_vertices(add, CO.ADD, np.full(20, 2), fields={"a": a.regions(pieces, np.full(20, 200)),
                                                       "b": a.regions(pieces, np.full(20, 200)),
                                                       "out": a.regions(pieces, np.full(20, 200))})
    pdata = Engine(g, P.Sequence([P.Execute(red), P.Execute(add)]), mode="timing").run().profile_data
    mem_state = pdata.memory[:, CATEGORY_CODE["vertexInstanceState"], 0]
    one = cm.vertex_state_bytes(grp)
    assert mem_state[0] == mem_state[1] == one  # one ReduceAdd vertex a tile, not 9
    assert mem_state[2] == mk2.threads_per_tile * (CO.ADD.state_bytes + 3 * cm.FIELD_POINTER_BYTES)
    v = pdata.stored_table("vertices")
    per_tile_state = v.groupby("tile")["state_bytes"].sum()
    np.testing.assert_array_equal(per_tile_state.to_numpy(), mem_state[per_tile_state.index])
    # the table still counts the graph's vertices (regions), as the compute sets table does
    assert v.loc[v["codelet"] == "ReduceAdd", "count"].tolist() == [n_reg, n_reg]


def test_code_and_control_bytes_on_exactly_the_tiles_with_vertices(mk2):
    """vertexCode (one copy of a codelet on each tile that runs it) and controlCode (the compute set's call on each
    tile with vertices) land on the compute set's tiles, each tile once however many vertices it holds: an add
    over tiles 5, 9 and 12 with several worker pieces per tile (compile.memory.vertex_memory's tiles per codelet,
    compute_sets.compile_execute's tiles from its vertex counts)."""
    g = Graph(mk2)
    n = 3 * 600
    mp = M.Mapping(np.array([9, 5, 12]), np.array([0, 600, 1200]), np.array([600, 1200, 1800]))
    x = g.add_variable("x", (n,), "float32", mapping=mp)
    y = g.add_variable("y", (n,), "float32", mapping=mp)
    cs = g.add_compute_set("add")
    grp = _add(g, cs, y, x, x)
    assert grp.n > 3 * mk2.threads_per_tile - 1  # several pieces per tile
    res = Engine(g, P.Execute(cs), mode="timing").run()
    mem = res.profile_data.memory
    want = np.zeros(mk2.num_tiles, bool)
    want[[5, 9, 12]] = True
    for cat in ("vertexCode", "controlCode"):
        per_tile = mem[:, CATEGORY_CODE[cat], :].sum(axis=1)
        assert np.array_equal(per_tile > 0, want), cat
        assert len(set(per_tile[want].tolist())) == 1, cat  # the same bytes on each: one copy a tile
