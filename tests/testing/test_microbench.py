"""Microbenchmarks: the emulator reproduces the rates its device specs claim, and the GEMM plan
is computed correctly and lands in a plausible efficiency band."""

from __future__ import annotations

import numpy as np
import pytest

from popvision_lite.emulator import Engine, Graph, Target
from popvision_lite.emulator import mapping as M
from popvision_lite.testing import microbench as mb


def test_sram_read_rates_follow_the_spec():
    t = Target.from_device("ipu-mk1")
    asm = mb.sram_read("ipu-mk1", assembly=True)
    comp = mb.sram_read("ipu-mk1", assembly=False)
    peak = t.em["sram_load_bytes_per_cycle"]
    assert 0.95 * peak <= asm["bytes_per_cycle_per_tile"] <= peak
    # a compiled loop: a 64-bit load + an add per 8 bytes -> a quarter of the 128-bit peak
    assert comp["bytes_per_cycle_per_tile"] == pytest.approx(asm["bytes_per_cycle_per_tile"] / 4, rel=0.05)


def test_exchange_bandwidth_and_sync_latency():
    t = Target.from_device("ipu-mk2")
    x = mb.exchange_bandwidth("ipu-mk2", bytes_per_tile=16 * 1024)
    assert x["bytes_per_cycle_per_tile"] == pytest.approx(t.em["exchange_bytes_per_cycle"])
    assert x["aggregate_bytes_per_s_with_sync"] < x["aggregate_bytes_per_s"]
    assert mb.sync_latency("ipu-mk2", 1, count=10)["cycles_per_sync"] == t.em["max_ipu_sync_delay_cycles"]
    assert mb.sync_latency("ipu-mk2", 2, count=10)["cycles_per_sync"] == t.em["global_sync_cycles"]


def test_gemm_plan_efficiency_band():
    r = mb.gemm("ipu-mk2", n=1024, bm=64, bn=64, bk=128, rows_per_vertex=8)
    assert r["fits"] and r["tiles_used"] == (1024 // 64) ** 2
    # compute alone can never beat the AMP peak, and exchange + sync make it slower than compute alone.
    # This hand plan uses 256 of 1472 tiles and 8-row worker vertices, which poplin's AMP estimator
    # (codelets.amp_worker_cycles) charges at ~1/3 of the AMP rate: the chip fraction is small.
    t = Target.from_device("ipu-mk2")
    ideal = 2 * 1024 ** 3 / (r["tiles_used"] * t.em["fp16_flops_per_cycle_per_tile"])
    assert ideal < r["compute_cycles"] < 4 * ideal
    assert 0.01 < r["fraction_of_peak"] < 1.0
    assert r["compute_cycles"] + r["exchange_cycles"] + r["sync_cycles"] <= r["cycles"]


@pytest.mark.parametrize("c_dtype", ["float32", "float16"])
def test_planned_matmul_numerics(c_dtype):
    t = Target.from_device("ipu-mk2")
    g = Graph(t)
    tiles = np.arange(64)
    A = g.add_variable("A", (64, 96), "float16", mapping=M.by_blocks((64, 96), (32, 32), tiles))
    B = g.add_variable("B", (96, 64), "float16", mapping=M.by_blocks((96, 64), (32, 32), tiles[::-1]))
    C = g.add_variable("C", (64, 64), c_dtype, mapping=mb.matmul_output_mapping(64, 64, 32, 32, tiles))
    prog = mb.planned_matmul(g, A, B, C, tiles, 32, 32, 32, 8)
    rng = np.random.default_rng(5)
    a = rng.standard_normal((64, 96)).astype(np.float16)
    b = rng.standard_normal((96, 64)).astype(np.float16)
    tol = dict(rtol=1e-5, atol=1e-4) if c_dtype == "float32" else dict(rtol=1e-2, atol=2e-2)
    outs = []
    for lazy in (True, False):
        eng = Engine(g, prog)
        eng.lazy_copies = lazy
        outs.append(eng.run(inputs={"A": a, "B": b}).outputs["C"].astype(np.float32))
        np.testing.assert_allclose(outs[-1], a.astype(np.float32) @ b.astype(np.float32), **tol)
    # fp16 C is rounded after every K chunk in both modes
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-3 if c_dtype == "float16" else 1e-6, atol=1e-3)
