"""Property tests of the emulator on random small graphs (hypothesis): random shapes, tile mappings,
elementwise and matmul vertex groups and programs.

For every graph: numerics equal numpy; memory adds up (a variable's bytes equal the sum over the tiles
it is mapped to, which equals its mapping's element counts x itemsize; each tile's always-live
'variable' bytes equal the always-live variables on it); cycles are never below the compute bound
(FLOPs / peak FLOPs per cycle per tile, over the tiles used) nor the exchange bandwidth bound (bytes a
tile receives / exchange bytes per cycle per tile).  The device numbers come from the device spec
through ``Target.em``."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from popvision_lite.emulator import Engine, Graph, Target
from popvision_lite.emulator import mapping as M
from popvision_lite.emulator import programs as P
from popvision_lite.emulator.codelets import popops as CO
from popvision_lite.profile import schema
from popvision_lite.testing.microbench import matmul_output_mapping, planned_matmul

TARGET = Target.from_device("ipu-mk2", num_ipus=1)
NT = TARGET.num_tiles

ELEMENTWISE = {
    "add": (CO.ADD, lambda a, b: a + b),
    "sub": (CO.SUB, lambda a, b: a - b),
    "mul": (CO.MUL, lambda a, b: a * b),
    "max": (CO.MAX, np.maximum),
    "relu": (CO.RELU, lambda a: np.maximum(a, 0)),
    "neg": (CO.NEG, lambda a: -a),
}


def _tiles(draw, k_max):
    k = draw(st.integers(1, k_max))
    return sorted(draw(st.lists(st.integers(0, NT - 1), min_size=k, max_size=k, unique=True)))


@st.composite
def graphs(draw):
    spec = {}
    spec["n"] = draw(st.integers(6, 1500))
    spec["ew_tiles"] = _tiles(draw, 10)
    spec["op"] = draw(st.sampled_from(sorted(ELEMENTWISE)))
    spec["repeat"] = draw(st.integers(1, 3))
    spec["copy_tiles"] = _tiles(draw, 6) if draw(st.booleans()) else None
    b = draw(st.sampled_from([8, 16]))
    spec["blocks"] = (b, draw(st.sampled_from([8, 16])), draw(st.sampled_from([8, 16])))  # bm, bn, bk
    spec["mnk_blocks"] = (draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    spec["rows"] = draw(st.sampled_from([r for r in (2, 4, 8) if b % r == 0]))
    spec["a_tiles"] = _tiles(draw, 4)
    spec["b_tiles"] = _tiles(draw, 4)
    spec["mm_tiles"] = draw(st.lists(st.integers(0, NT - 1), min_size=9, max_size=9, unique=True))
    spec["matmul_first"] = draw(st.booleans())
    spec["seed"] = draw(st.integers(0, 2**31 - 1))
    return spec


def build(spec):
    g = Graph(TARGET)
    n = spec["n"]
    mp = M.linear(n, tiles=spec["ew_tiles"])
    x = g.add_variable("x", (n,), "float32", mapping=mp)
    w = g.add_variable("w", (n,), "float32", mapping=mp)
    y = g.add_variable("y", (n,), "float32", mapping=mp, op="ew")
    codelet, _ = ELEMENTWISE[spec["op"]]
    cs = g.add_compute_set("ew", op="ew")
    tl, starts, sizes = M.worker_split(x)
    fields = {"out": y.regions(starts, sizes)}
    if len(codelet.fields) == 3:
        fields.update(a=x.regions(starts, sizes), b=w.regions(starts, sizes))
    else:
        fields.update({"in": x.regions(starts, sizes)})
    g.add_vertices(cs, codelet, tiles=tl, fields=fields)
    ew = [P.Repeat(spec["repeat"], P.Execute(cs))] if spec["repeat"] > 1 else [P.Execute(cs)]
    if spec["copy_tiles"] is not None:
        z = g.add_variable("z", (n,), "float32", mapping=M.linear(n, tiles=spec["copy_tiles"]), op="copy")
        ew.append(P.Copy(y, z, op="copy"))
    bm, bn, bk = spec["blocks"]
    mb, nb, kb = spec["mnk_blocks"]
    m_, n_, k_ = mb * bm, nb * bn, kb * bk
    A = g.add_variable("A", (m_, k_), "float16", mapping=M.by_blocks((m_, k_), (bm, bk), spec["a_tiles"]))
    B = g.add_variable("B", (k_, n_), "float16", mapping=M.by_blocks((k_, n_), (bk, bn), spec["b_tiles"]))
    out_tiles = spec["mm_tiles"][: mb * nb]
    Cm = g.add_variable("C", (m_, n_), "float32", mapping=matmul_output_mapping(m_, n_, bm, bn, out_tiles), op="mm")
    mm = planned_matmul(g, A, B, Cm, out_tiles, bm, bn, bk, spec["rows"], op="mm")
    body = [mm, *ew] if spec["matmul_first"] else [*ew, mm]
    rng = np.random.default_rng(spec["seed"])
    inputs = {"x": rng.standard_normal(n).astype(np.float32), "w": rng.standard_normal(n).astype(np.float32),
              "A": rng.standard_normal((m_, k_)).astype(np.float16),
              "B": rng.standard_normal((k_, n_)).astype(np.float16)}
    return g, P.Sequence(body, name="main"), inputs


SETTINGS = settings(max_examples=40, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@SETTINGS
@given(spec=graphs())
def test_random_graphs(spec):
    g, prog, inputs = build(spec)
    res = Engine(g, prog, mode="full").run(inputs=inputs)
    check_numerics(spec, inputs, res)
    check_memory(g, res.profile_data)
    check_cycle_bounds(res)


def check_numerics(spec, inputs, res):
    _, fn = ELEMENTWISE[spec["op"]]
    x, w = inputs["x"], inputs["w"]
    want = fn(x, w) if spec["op"] in ("add", "sub", "mul", "max") else fn(x)
    np.testing.assert_array_equal(res.outputs["y"], want.astype(np.float32))
    if spec["copy_tiles"] is not None:
        np.testing.assert_array_equal(res.outputs["z"], res.outputs["y"])
    c = inputs["A"].astype(np.float32) @ inputs["B"].astype(np.float32)
    k = inputs["A"].shape[1]
    np.testing.assert_allclose(res.outputs["C"], c, rtol=1e-5, atol=1e-6 * k)


def check_memory(g, pd_):
    v, vt = pd_.variables, pd_.variable_tiles
    per_var = vt.groupby("var_id")["bytes"].sum()
    for _, row in v.iterrows():
        assert row["bytes"] == per_var.get(row["var_id"], 0), row["name"]
    # independently of the profile builder: each input's tile bytes from the mapping we gave
    for name in ("x", "w", "A", "B"):
        t = next(tt for tt in g.tensors if tt.name == name)
        m = t.mapping
        want = np.bincount(np.asarray(m.tile), weights=np.asarray(m.stop) - np.asarray(m.start),
                           minlength=NT) * t.itemsize
        vid = int(v.loc[v["name"] == name, "var_id"].iloc[0])
        got = np.zeros(NT)
        sub = vt[vt["var_id"] == vid]
        np.add.at(got, sub["tile"].to_numpy(), sub["bytes"].to_numpy())
        np.testing.assert_array_equal(got, want, err_msg=name)
        assert int(v.loc[v["var_id"] == vid, "bytes"].iloc[0]) == t.size * t.itemsize
    # per tile: the always-live 'variable' category is exactly the always-live variables mapped there
    mem = np.asarray(pd_.memory)
    al = v[v["always_live"] & (v["kind"] == "variable")]["var_id"]
    sub = vt[vt["var_id"].isin(al)]
    want = np.zeros(NT, np.int64)
    np.add.at(want, sub["tile"].to_numpy(), sub["bytes"].to_numpy())
    np.testing.assert_array_equal(mem[:, schema.CATEGORY_CODE["variable"], 0], want)
    assert (mem >= 0).all()
    # categories sum to the tile totals the liveness report uses
    nal = mem[:, :, 1].sum(axis=1)
    lv = np.asarray(pd_.liveness_tile_bytes)
    if lv.size:
        assert (lv.max(axis=0) <= nal).all()


def check_cycle_bounds(res):
    pd_ = res.profile_data
    em = TARGET.em
    fpc = {"fp16": em["fp16_flops_per_cycle_per_tile"], "fp32": em["fp32_flops_per_cycle_per_tile"]}
    ebpc = em["exchange_bytes_per_cycle"]
    ops = pd_.ops
    for _, op in ops.iterrows():
        if op["flops"] and op["precision"] in fpc:
            bound = op["flops"] / (fpc[op["precision"]] * max(int(op["tiles_used"]), 1))
            assert op["compute_cycles"] >= bound, (op["name"], op["compute_cycles"], bound)
    total_flops = {p: ops.loc[ops["precision"] == p, "flops"].sum() for p in fpc}
    assert res.total_cycles >= sum(f / (fpc[p] * NT) for p, f in total_flops.items())
    steps = pd_.steps
    cyc = np.asarray(pd_.step_tile_cycles[:])
    b_in = np.asarray(pd_.step_tile_bytes_in[:])
    b_out = np.asarray(pd_.step_tile_bytes_out[:])
    dur = (steps["end_cycle"] - steps["start_cycle"]).to_numpy()
    assert (dur >= cyc.max(axis=1)).all()  # a step lasts as long as its busiest tile
    ex = steps["kind"].isin([schema.STEP_KIND_CODE["exchange_internal"]]).to_numpy()
    # a tile can send at most exchange_bytes_per_cycle per cycle, and receive at most that times the
    # tiles sharing its exchange bus (two neighbours receiving the same data get it at twice the
    # rate: tiles_per_shared_exchange_bus, poplibs ExchangeEstimator)
    share = int(em.get("tiles_per_shared_exchange_bus", 1))
    assert (cyc[ex] >= np.floor(b_in[ex] / (ebpc * share))).all()
    assert (cyc[ex] >= np.ceil(b_out[ex] / ebpc)).all()
    assert (steps["start_cycle"].to_numpy()[1:] >= steps["end_cycle"].to_numpy()[:-1]).all()  # BSP: no overlap
