"""Roofline analysis: ceilings and ridges vs the device specs, points never above their roofs,
speed-up / cost arithmetic, what-if, and the PyTorch trace importer."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from popvision_lite import devices
from popvision_lite.analysis import roofline as rl
from popvision_lite.analysis.torch_trace import TraceImportError, kernel_table, load_torch_trace, plottable
from popvision_lite.devices import load_device
from popvision_lite.profile import schema

MK2 = load_device("ipu-mk2")
A100 = load_device("a100-80gb")


def _target(num_ipus=1, tiles=None, device="ipu-mk2"):
    s = load_device(device)
    return schema.TargetInfo(device=device, name=s.name, num_ipus=num_ipus, tiles_per_ipu=tiles or s.tiles,
                             sram_bytes_per_tile=s.sram_bytes_per_tile, clock_hz=s.clock_hz,
                             threads_per_tile=s.threads_per_tile)


def _ops(rows):
    cols = schema.TABLE_COLUMNS["ops"]
    base = {c: 0 for c in cols}
    base.update(name="op", type="matmul", precision="fp16", plan="", ipu=-1)
    out = []
    for i, r in enumerate(rows):
        d = dict(base, op_id=i, name=f"op{i}")
        d.update(r)
        out.append(d)
    return pd.DataFrame(out, columns=cols)


def _fake(rows, num_ipus=1, tiles=None, memory=None):
    ops = _ops(rows)
    total = int(ops["cycles"].sum())
    steps = pd.DataFrame({"start_cycle": [0], "end_cycle": [total]})
    return SimpleNamespace(ops=ops, target=_target(num_ipus, tiles), steps=steps, memory=memory)


# ------------------------------------------------------------------ ceilings and ridges
def test_ipu_ceilings_match_spec():
    r = rl.ipu_roofline(MK2)
    assert r.peak("fp16") == MK2.peak_fp16_flops and r.peak("fp32") == MK2.peak_fp32_flops
    for lv in ("sram", "exchange", "ipu_link", "ddr"):
        assert r.bw(lv) == MK2.memory(lv).bandwidth_bytes_per_s
        assert r.ridge("fp16", lv) == pytest.approx(MK2.peak_fp16_flops / MK2.memory(lv).bandwidth_bytes_per_s)
    assert r.ridge("fp16", "sram") == pytest.approx(250 / 47.5)  # ~5 FLOP/B
    assert r.ridge("fp16", "ddr") > 1000                          # thousands vs streaming memory
    # every ceiling carries its spec source
    assert all(c.source == MK2.source("compute.peak_fp16_flops") for c in r.compute if c.key == "fp16")
    assert len(r.ridges()) == 2 * 4


def test_ipu_ceilings_scale_with_ipus_and_tiles():
    r = rl.ipu_roofline(MK2, num_ipus=4, tiles_per_ipu=368)  # quarter chips
    assert r.peak("fp16") == pytest.approx(MK2.peak_fp16_flops)          # 4 x 1/4
    assert r.bw("sram") == pytest.approx(MK2.memory("sram").bandwidth_bytes_per_s)
    assert r.bw("ipu_link") == pytest.approx(4 * MK2.memory("ipu_link").bandwidth_bytes_per_s)  # not per tile
    assert r.bw("ddr") == pytest.approx(4 * MK2.memory("ddr").bandwidth_bytes_per_s)
    assert "368 of 1472" in r.note and "368/1472 tiles" in r.name


def test_analysis_ceilings_are_per_chip_and_links_only_on_multi_ipu_runs():
    """The plotted IPU roofs are one chip's, as the GPU's are one GPU's; a one-IPU run has no IPU-Links roof
    and is not called pipelined."""
    rows = [dict(flops=10**9, cycles=20_000, bytes_sram=10**6, min_bytes=10**6)]
    four = rl.analyze(_fake(rows, num_ipus=4), gpus=("a100-80gb",))
    assert four.ipu.peak("fp16") == MK2.peak_fp16_flops and four.ipu.bw("sram") == MK2.memory("sram").bandwidth_bytes_per_s
    assert four.ipu.has("ipu_link") and four.ipu.name.endswith(", per chip")
    assert four.gpus[0].peak("fp16") == A100.peak_fp16_flops
    one = rl.analyze(_fake(rows, num_ipus=1), gpus=())
    assert not one.ipu.has("ipu_link") and "per chip" not in one.ipu.name
    assert not any("pipelined" in n for n in one.notes)
    # one IPU of each of 2 replicas: the links carry the all-reduce, so the roof is there
    f = _fake(rows, num_ipus=1)
    f.run = {"schedule": {"replicas": 2}}
    assert rl.analyze(f, gpus=()).ipu.has("ipu_link")


@pytest.mark.parametrize("gid", ["v100", "a100-80gb", "h100-sxm", "h200"])
def test_gpu_ceilings_and_ridge(gid):
    spec = load_device(gid)
    r = rl.gpu_roofline(spec)
    assert r.peak("fp16") == spec.peak_fp16_flops and r.peak("fp32") == spec.peak_fp32_flops
    assert r.ridge("fp16", "hbm") == pytest.approx(spec.peak_fp16_flops / spec.memory("hbm").bandwidth_bytes_per_s)
    assert r.has("l2") == (spec.memory("l2").bandwidth is not None)


def test_published_ridge_points():
    assert rl.gpu_roofline(A100).ridge("fp16", "hbm") == pytest.approx(153, rel=0.01)
    assert rl.gpu_roofline(load_device("h100-sxm")).ridge("fp16", "hbm") == pytest.approx(295, rel=0.01)


def test_attainable_is_min_of_roofs():
    r = rl.gpu_roofline(A100)
    x = np.array([1.0, 153.0, 1e4])
    att = r.attainable(x, "fp16", "hbm")
    assert att[0] == pytest.approx(A100.memory("hbm").bandwidth_bytes_per_s)
    assert att[2] == A100.peak_fp16_flops
    assert np.all(att <= A100.peak_fp16_flops)


# ------------------------------------------------------------------ per-op points (DataFrames)
def test_op_point_numbers_by_hand():
    clock = MK2.clock_hz
    # compute-heavy matmul: 1e9 flops over 1e4 cycles; 1e6 SRAM bytes, 4e5 exchange bytes
    a = rl.analyze(_fake([dict(flops=10**9, cycles=10_000, bytes_sram=10**6, bytes_exchange=4 * 10**5,
                               min_bytes=2 * 10**6)]), gpus=("a100-80gb",))
    o = a.ops.iloc[0]
    t = 10_000 / clock
    assert o.ipu_time_s == pytest.approx(t)
    assert o.achieved_flops == pytest.approx(1e9 / t)
    # exchange time 4e5/8e12 = 5e-8 > SRAM 1e6/47.5e12 = 2.1e-8 -> exchange bounds it
    assert o.level == "exchange"
    assert o.intensity == pytest.approx(1e9 / 4e5)
    comp = 1e9 / MK2.peak_fp16_flops
    assert o.bound == ("compute" if comp > 4e5 / 8e12 else "exchange")
    # GPU bound = max(flops / peak, min_bytes / HBM)
    g = max(1e9 / A100.peak_fp16_flops, 2e6 / A100.memory("hbm").bandwidth_bytes_per_s)
    assert o["a100-80gb_time_s"] == pytest.approx(g)
    assert o["a100-80gb_speedup"] == pytest.approx(t / g)
    assert o["a100-80gb_flops"] == pytest.approx(1e9 / g)
    assert o.share == pytest.approx(1.0)


def test_fp32_ops_use_fp32_peaks():
    a = rl.analyze(_fake([dict(precision="fp32", flops=10**12, cycles=10**8, min_bytes=1)]), gpus=("a100-80gb",))
    o = a.ops.iloc[0]
    assert o["a100-80gb_time_s"] == pytest.approx(1e12 / A100.peak_fp32_flops)
    assert o.bound == "compute"
    assert o.roof_time_s == pytest.approx(1e12 / MK2.peak_fp32_flops)


def test_speedup_and_cost_table_arithmetic():
    rows = [dict(flops=10**9, cycles=20_000, bytes_sram=10**6, min_bytes=10**6),
            dict(flops=10**7, cycles=5_000, bytes_sram=10**7, min_bytes=10**7, precision="fp32"),
            dict(type="stream_copy", flops=0, cycles=3_000, bytes_ddr=10**5, min_bytes=10**5)]
    a = rl.analyze(_fake(rows, num_ipus=2), gpus=("a100-80gb", "v100"))
    tab = a.table()
    body, tot = tab.iloc[:-1], tab.iloc[-1]
    assert tot["name"].startswith("TOTAL")
    assert tot.ipu_time_s == pytest.approx(body.ipu_time_s.sum())
    assert tot["a100-80gb_time_s"] == pytest.approx(body["a100-80gb_time_s"].sum())
    # the whole-run IPU-vs-GPU comparison is the verdict's alone: the TOTAL row carries no ratio of its own
    assert math.isnan(tot["a100-80gb_speedup"]) and math.isnan(tot["a100-80gb_est_speedup"])
    assert "a100-80gb_speedup" not in a.totals and "a100-80gb_est_speedup" not in a.totals
    assert tot.share == pytest.approx(1.0)
    assert tot.achieved_flops == pytest.approx((10**9 + 10**7) / tot.ipu_time_s)
    # cost = wall time x chips x price/hour; the Mk2 has no price so the Bow rate is used, for 2 IPUs
    bow = load_device("ipu-bow").usd_per_hour
    assert body.ipu_cost_usd.to_numpy() == pytest.approx(body.ipu_time_s.to_numpy() * 2 * bow / 3600)
    assert tot.ipu_cost_usd == pytest.approx(a.totals["run_time_s"] * 2 * bow / 3600)
    # GPU cost from the estimate (the bound is no price basis); the estimate is never faster than the bound
    est = body["a100-80gb_est_time_s"].to_numpy()
    assert body["a100-80gb_cost_usd"].to_numpy() == pytest.approx(est * 3.18 / 3600)
    assert (est > body["a100-80gb_time_s"].to_numpy()).all()
    assert body["v100_cost_usd"].isna().all()  # no published V100 price
    assert any("Bow" in n for n in a.notes)


def test_ipu_cost_counts_wall_time_not_summed_stage_time():
    # two ops on two different IPUs that overlap in time (a pipeline): the run lasts 10k cycles, not 20k
    rows = [dict(flops=10**9, cycles=10_000, ipu=0, min_bytes=10**6), dict(flops=10**9, cycles=10_000, ipu=1,
                                                                           min_bytes=10**6)]
    f = _fake(rows, num_ipus=2)
    f.steps = pd.DataFrame({"start_cycle": [0], "end_cycle": [10_000]})
    a = rl.analyze(f, gpus=("a100-80gb",))
    bow = load_device("ipu-bow").usd_per_hour
    wall = 10_000 / MK2.clock_hz
    assert a.totals["ipu_cost_usd"] == pytest.approx(wall * 2 * bow / 3600)
    assert a.ops["ipu_cost_usd"].sum() == pytest.approx(a.totals["ipu_cost_usd"])


def test_points_above_roof_are_flagged():
    # 1e6 exchange bytes in 10 cycles = far faster than 8 TB/s: inconsistent, must be flagged
    a = rl.analyze(_fake([dict(flops=10**6, cycles=10, bytes_exchange=10**6, min_bytes=1)]), gpus=())
    assert bool(a.ops.iloc[0].above_roof)
    assert any("faster than their IPU roofs" in n for n in a.notes)


def test_what_if_spill_to_ddr():
    cap = MK2.tiles * MK2.sram_bytes_per_tile
    rows = [dict(flops=10**9, cycles=10_000, bytes_sram=10**6, min_bytes=cap // 2),
            dict(flops=10**9, cycles=10_000, bytes_sram=10**6, min_bytes=10**6)]
    mem = np.zeros((MK2.tiles, len(schema.MEMORY_CATEGORIES), 2), dtype=np.int64)
    mem[:, 0, 0] = MK2.sram_bytes_per_tile // 4   # a quarter of SRAM always live
    a = rl.analyze(_fake(rows, memory=mem), gpus=())
    assert a.capacity_bytes == pytest.approx(cap - mem[:, :, 0].sum())
    assert not a.ops.spills.any()                 # half the chip fits in the 3/4 left
    b = rl.analyze(_fake(rows, memory=mem), gpus=(), capacity_scale=0.5)
    assert b.capacity_bytes == pytest.approx(cap / 2 - mem[:, :, 0].sum())   # half the SRAM, minus always-live
    assert list(b.ops.spills) == [True, False]
    o = b.ops.iloc[0]
    assert o.whatif_time_s == pytest.approx(max(o.ipu_time_s, (cap // 2) / MK2.memory("ddr").bandwidth_bytes_per_s))
    assert o.whatif_flops == pytest.approx(1e9 / o.whatif_time_s)
    # the what-if point lies on the DDR roof
    assert o.whatif_flops == pytest.approx(MK2.memory("ddr").bandwidth_bytes_per_s * o.whatif_intensity, rel=1e-6)


# ------------------------------------------------------------------ synthetic profiles
@pytest.mark.parametrize("kw", [dict(num_ipus=1, tiles_per_ipu=1472), dict(num_ipus=2, tiles_per_ipu=64),
                                dict(num_ipus=4, tiles_per_ipu=32, device="ipu-bow")])
def test_no_emulated_point_above_its_ceilings(kw):
    from popvision_lite.testing.synthetic import make_synthetic

    data = make_synthetic(num_steps=400, **kw)
    a = rl.analyze(data, gpus=("a100-80gb",))
    pts = a.points
    assert len(pts) > 0
    ipu = a.ipu  # one chip's roofs: each point is the op's FLOP/s per chip it ran on
    spec = devices.load_device(kw.get("device", "ipu-mk2"))
    assert ipu.peak("fp16") == pytest.approx(spec.peak_fp16_flops * kw["tiles_per_ipu"] / spec.tiles)
    for _, o in pts.iterrows():
        assert o.op_chips == (kw["num_ipus"] if o.ipu < 0 else 1)
        assert o.chip_flops == pytest.approx(o.achieved_flops / o.op_chips)
        assert o.chip_flops <= ipu.peak(o.precision) * (1 + 1e-9), o["name"]
        for lv, col in rl.BYTES_COLUMN.items():
            b = o[col]
            if b > 0 and ipu.has(lv):  # under every bandwidth roof at the op's intensity for that level
                assert o.chip_flops <= ipu.bw(lv) * (o.flops / b) * (1 + 1e-9), (o["name"], lv)
        assert o.achieved_flops <= o.roof_flops * (1 + 1e-9)
        assert not o.above_roof
    # GPU bound points lie on the GPU roof
    g = a.gpus[0]
    att = np.minimum([g.peak(p) for p in pts.precision], g.bw("hbm") * pts["a100-80gb_intensity"].to_numpy())
    assert pts["a100-80gb_flops"].to_numpy() == pytest.approx(att)
    assert a.ops.share.sum() <= 1 + 1e-9


def test_reads_written_profile(tmp_path):
    import popvision_lite as pvl
    from popvision_lite.profile.writer import write_profile
    from popvision_lite.testing.synthetic import make_synthetic

    data = make_synthetic(num_ipus=1, tiles_per_ipu=64, num_steps=120)
    path = tmp_path / "r.pvl"
    write_profile(path, data)
    with pvl.open(path) as p:
        a = rl.analyze(p, gpus=("h100-sxm",))
        assert len(a.ops) == len(p.stored_table("ops"))
        assert a.totals["run_time_s"] == pytest.approx(
            (p.stored_table("steps").end_cycle.max() - p.stored_table("steps").start_cycle.min()) / p.target.clock_hz)


# ------------------------------------------------------------------ torch trace importer
def _write_trace(tmp_path, obj, name="trace.json"):
    p = tmp_path / name
    p.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    return p


def test_torch_trace_import(tmp_path):
    ev = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 0, "dur": 50, "args": {"External id": 7, "flops": 2e9}},
        {"ph": "X", "cat": "kernel", "name": "gemm_a", "ts": 10, "dur": 30, "args": {"External id": 7}},
        {"ph": "X", "cat": "kernel", "name": "gemm_b", "ts": 45, "dur": 10, "args": {"External id": 7}},
        {"ph": "X", "cat": "kernel", "name": "own", "ts": 60, "dur": 4, "args": {"flops": 8e6, "bytes": 4e6}},
        {"ph": "X", "cat": "gpu_op", "name": "memcpy", "ts": 70, "dur": 2, "args": {}},
        {"ph": "X", "cat": "kernel", "name": "zero", "ts": 80, "dur": 0},
        {"ph": "M", "name": "process_name", "args": {"name": "GPU 0"}},
    ]
    df = load_torch_trace(_write_trace(tmp_path, {"traceEvents": ev}))
    # every kernel is listed; the zero-duration one with its reason and no FLOP/s
    assert list(df["name"]) == ["gemm_a", "gemm_b", "own", "memcpy", "zero"]
    assert df.iloc[4].drop_reason == "zero duration" and math.isnan(df.iloc[4].achieved_flops)
    listed = kernel_table(df).set_index("name")["plotted"]
    assert listed.to_dict() == {"gemm_a": "edge", "gemm_b": "edge", "own": "point", "memcpy": "no", "zero": "no"}
    a, b, own, cp = (df.iloc[i] for i in range(4))
    assert a.dur_s == pytest.approx(30e-6)
    assert a.flops == pytest.approx(2e9 * 30 / 40) and b.flops == pytest.approx(2e9 * 10 / 40)
    assert a.flops_from == "cpu_op" and own.flops_from == "kernel"
    assert own.achieved_flops == pytest.approx(8e6 / 4e-6) and own.intensity == pytest.approx(2.0)
    assert math.isnan(a.intensity) and math.isnan(cp.flops)
    known, unknown = plottable(df)
    assert list(known["name"]) == ["own"] and list(unknown["name"]) == ["gemm_a", "gemm_b"]
    # a bare event array is also accepted
    assert len(load_torch_trace(_write_trace(tmp_path, ev, "bare.json"))) == 5


@pytest.mark.parametrize("content, needle", [
    ("{not json", "not a JSON"),
    ({"foo": 1}, "traceEvents"),
    ({"traceEvents": {"a": 1}}, "must be an array"),
    ({"traceEvents": [1]}, "traceEvents[0]"),
    ({"traceEvents": [{"cat": "kernel", "name": "k", "ts": 0}]}, "without 'dur'"),
    ({"traceEvents": [{"cat": "kernel", "name": "k", "ts": 0, "dur": "abc"}]}, "traceEvents[0].dur"),
    ({"traceEvents": [{"cat": "kernel", "name": "k", "ts": 0, "dur": -3}]}, ">= 0"),
    ({"traceEvents": [{"cat": "kernel", "ts": 0, "dur": 3}]}, "without a 'name'"),
    ({"traceEvents": [{"cat": "cpu_op", "name": "x", "dur": 3}]}, "no GPU kernel events"),
    (3, "top level"),
])
def test_torch_trace_malformed(tmp_path, content, needle):
    p = _write_trace(tmp_path, content)
    with pytest.raises(TraceImportError) as ei:
        load_torch_trace(p)
    assert str(p) in str(ei.value) and needle in str(ei.value)


def test_torch_trace_missing_file(tmp_path):
    with pytest.raises(TraceImportError, match="cannot read"):
        load_torch_trace(tmp_path / "none.json")


def test_what_if_ops_on_full_tiles():
    """Ops with vertices on a tile whose bytes exceed its (scaled) capacity spill, others do not."""
    tiles = 8
    rows = [dict(flops=10**6, cycles=1000, bytes_sram=10**4, min_bytes=10**3),
            dict(flops=10**6, cycles=1000, bytes_sram=10**4, min_bytes=10**3),
            dict(flops=10**6, cycles=1000, bytes_sram=10**4, min_bytes=10**3)]
    mem = np.zeros((tiles, len(schema.MEMORY_CATEGORIES), 2), dtype=np.int64)
    mem[:, 0, 0] = MK2.sram_bytes_per_tile // 2
    mem[5, 1, 1] = MK2.sram_bytes_per_tile // 2 + 1        # tile 5 is one byte over
    f = _fake(rows, tiles=tiles, memory=mem)
    f.compute_sets = pd.DataFrame({"cs_id": [0, 1, 2], "name": ["a", "b", "c"], "op_id": [0, 1, 2],
                                   "num_vertices": [1, 1, 1], "num_tiles": [1, 1, 1]})
    f.vertices = pd.DataFrame({"cs_id": [0, 1, 1, 2], "codelet": ["x"] * 4, "tile": [0, 1, 5, 7],
                               "count": [1] * 4, "cycles": [1] * 4, "state_bytes": [0] * 4, "code_bytes": [0] * 4})
    a = rl.analyze(f, gpus=())
    assert list(a.ops.on_full_tiles) == [False, True, False]
    assert list(a.ops.spills) == [False, True, False]
    # with twice the SRAM nothing is over; with 40% every tile is over
    assert not rl.analyze(f, gpus=(), capacity_scale=2.0).ops.spills.any()
    assert rl.analyze(f, gpus=(), capacity_scale=0.4).ops.spills.all()


def test_torch_trace_gzip(tmp_path):
    import gzip

    ev = {"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 0, "dur": 2, "args": {"flops": 4e6}}]}
    p = tmp_path / "t.json.gz"
    p.write_bytes(gzip.compress(json.dumps(ev).encode()))
    df = load_torch_trace(p)
    assert list(df["name"]) == ["k"] and df.iloc[0].achieved_flops == pytest.approx(2e12)
    bad = tmp_path / "bad.json.gz"
    bad.write_bytes(gzip.compress(b"{}")[:8])
    with pytest.raises(TraceImportError, match="gzip"):
        load_torch_trace(bad)


def test_a_point_is_bound_by_the_dominant_part_of_its_own_time():
    """``bound`` is the part of the op's own emulated time that dominates (run_totals' split, as the Summary's);
    ``roof_bound`` the roof it sits under (ideal times); the summary line relates them to the run's bottleneck."""
    from pathlib import Path

    import popvision_lite as pvl
    from popvision_lite.analysis.run_totals import STEP_PARTS, run_totals

    sample = Path(__file__).resolve().parents[2] / "sample_profiles" / "bert_mini_4ipu_pipeline.pvl"
    with pvl.open(sample) as p:
        a = rl.analyze(p, gpus=())
        rt = run_totals(p)
        ops = a.ops
        part = rt.op_part_cycles
        has = part.sum(axis=1) > 0
        want = np.array(STEP_PARTS, dtype=object)[part.argmax(axis=1)]
        assert has.any() and (ops["bound"].to_numpy()[has] == want[has]).all()
        assert set(ops["roof_bound"]) <= {"compute", "sram", "exchange", "ipu_link", "ddr"}
        # the two answer different questions: some op sits under a memory roof yet spends its time computing
        assert ((ops["bound"] == "compute") & (ops["roof_bound"] != "compute")).any()
        rel = rl.bottleneck_relation(a, rt.bottleneck)
        assert rel.startswith("Ops' time by own bound: ") and f"run bottleneck {rt.bottleneck} (Summary)" in rel
        assert ("time no op owns" in rel) == (rt.bottleneck in ("sync", "host"))
