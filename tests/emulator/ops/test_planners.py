"""Tile planners: plans fit the SRAM budget, use the tiles, and say what they chose."""

import math

import pytest

from popvision_lite.emulator.ops.planners import (
    PlanTarget,
    plan_conv2d,
    plan_elementwise,
    plan_matmul,
    plan_reduction,
    split_even,
)

MK2 = PlanTarget(tiles=1472, sram_bytes_per_tile=624 * 1024, flops_per_cycle_fp16=128,
                 flops_per_cycle_fp32=32, exchange_bytes_per_cycle=4)
SMALL = PlanTarget(tiles=16, sram_bytes_per_tile=64 * 1024, flops_per_cycle_fp16=64,
                   flops_per_cycle_fp32=16, exchange_bytes_per_cycle=4)


@pytest.mark.parametrize("shape", [(1024, 3072, 768), (1024, 768, 768), (4096, 4096, 4096), (7, 13, 5)])
def test_matmul_plan_fits_and_covers(shape):
    M, N, K = shape
    p = plan_matmul(M, N, K, MK2)
    assert p.fits and p.bytes_per_tile <= MK2.budget_bytes
    assert p.tiles_used <= MK2.tiles
    # blocks cover the whole problem
    assert p.bm * p.pm >= M and p.bn * p.pn >= N and p.bk * p.pk >= K
    # compute estimate: never faster than the block's FLOPs at the AMP peak, and the per-vertex
    # overheads (a few % for big blocks) do not dominate
    ideal = math.ceil(2 * p.bm * p.bn * p.bk / 128)
    assert ideal <= p.compute_cycles
    if ideal > 10_000:
        assert p.compute_cycles < 1.5 * ideal
    text = p.describe()
    assert f"M={p.pm} N={p.pn} K={p.pk} split" in text and "KiB/tile" in text and "compute" in text


def test_big_matmul_uses_most_tiles_and_serialises_when_needed():
    p = plan_matmul(4096, 4096, 4096, MK2)
    assert p.tiles_used > 0.6 * MK2.tiles
    # the whole thing in one pass needs ~1 MiB/tile, over the budget: the planner must serialise
    assert p.ps > 1 and "serial passes" in p.describe()


def test_matmul_plan_is_fastest_fitting():
    # brute force over all splits on a small target agrees with the planner's choice of cost
    from popvision_lite.emulator.ops.planners import _matmul_cost, rearrangements

    M, N, K = 64, 48, 96
    p = plan_matmul(M, N, K, SMALL, precision="fp32")
    best = None
    for pm in range(1, 17):
        for pn in range(1, 17):
            for pk in range(1, 17):
                if pm * pn * pk > 16:
                    continue
                # the cost function now takes the precision and which operands are rearranged
                *_, per, c, e, r = _matmul_cost(M, N, K, pm, pn, pk, 1, SMALL, 4, "fp32",
                                                *rearrangements(pk, pn, 1, False, False))
                if per <= SMALL.budget_bytes and (best is None or c + e + r < best):
                    best = c + e + r
    assert best is not None
    assert p.total_cycles <= best * 1.25  # candidate grid may skip odd splits, but stays close


def test_matmul_nothing_fits_reports_it():
    tiny = PlanTarget(tiles=2, sram_bytes_per_tile=1024, flops_per_cycle_fp16=64, flops_per_cycle_fp32=16,
                      exchange_bytes_per_cycle=4)
    p = plan_matmul(512, 512, 512, tiny)
    assert not p.fits and "no split fits" in p.describe()


def test_matmul_fp32_slower_than_fp16():
    a = plan_matmul(1024, 1024, 1024, MK2, precision="fp16")
    b = plan_matmul(1024, 1024, 1024, MK2, precision="fp32")
    assert b.compute_cycles > a.compute_cycles


def test_bad_dims():
    with pytest.raises(ValueError, match="N=0"):
        plan_matmul(4, 0, 4, MK2)


def test_conv_plan_is_implicit_gemm():
    c = plan_conv2d(8, 32, 32, 64, 128, 3, 3, MK2, padding=1)
    assert (c.out_h, c.out_w) == (32, 32)
    assert (c.gemm.M, c.gemm.N, c.gemm.K) == (8 * 32 * 32, 128, 9 * 64)
    assert "implicit GEMM" in c.describe() and c.fits
    with pytest.raises(ValueError, match="does not fit input"):
        plan_conv2d(1, 2, 2, 1, 1, 5, 5, MK2)


def test_elementwise_plan_covers_all_elements():
    for n in (1, 100, 786432, 10_000_019):
        p = plan_elementwise(n, MK2)
        r = p.tile_ranges()
        assert r[0][0] == 0 and r[-1][1] == n and len(r) == p.tiles_used <= MK2.tiles
        assert all(a[1] == b[0] for a, b in zip(r, r[1:], strict=False))


def test_reduction_two_stage_when_few_rows():
    p = plan_reduction(4, 100_000, MK2)
    assert p.stages == 2 and p.tiles_used <= MK2.tiles and p.parts > 1
    q = plan_reduction(4096, 768, MK2)
    assert q.stages == 1 and q.rows_per_tile * q.tiles_used >= 4096


def test_split_even():
    s = split_even(10, 3)
    assert s == [(0, 4), (4, 7), (7, 10)]
    assert split_even(2, 5) == [(0, 1), (1, 2)]


def test_from_spec_derives_flops_per_cycle():
    spec = dict(tiles_per_ipu=1472, clock_hz=1.325e9, peak_fp16_flops=250e12, peak_fp32_flops=62.5e12,
                sram_bytes_per_tile=638976, exchange_bytes_per_cycle=4)
    t = PlanTarget.from_spec(spec)
    assert t.flops_per_cycle_fp16 == pytest.approx(128.2, rel=0.01)
    assert t.flops_per_cycle_fp32 == pytest.approx(32.0, rel=0.01)


@pytest.mark.parametrize("target", [MK2, SMALL], ids=["mk2", "small"])
@pytest.mark.parametrize("options", [
    dict(), dict(exact=True), dict(exact_k=True), dict(exact_k=True, ta=True), dict(exact_k=True, b_laid_out=True),
    dict(max_pk=4, tb=True), dict(precision="fp32"), dict(tiles=92, exact_k=True)])
@pytest.mark.parametrize("shape", [(1024, 3072, 768), (12544, 64, 576), (50176, 256, 64), (2048, 2048, 4608),
                                   (8, 1000, 2048), (7, 13, 5), (4096, 4096, 4096)])
def test_vectorised_matmul_search_chooses_what_the_split_by_split_scan_chooses(shape, options, target):
    # plan_matmul costs only each (pm, pn, pk)'s fewest fitting serial passes, found with numpy; the scan
    # (_plan_matmul_scan, its answer when nothing fits) costs split by split.  Same plan, same count.
    from popvision_lite.emulator.ops.planners import _plan_matmul_scan

    options = dict(options)
    precision = options.pop("precision", "fp16")
    tiles = options.pop("tiles", target.tiles)
    args = dict(exact=False, max_pk=None, ta=False, tb=False, b_laid_out=False, exact_k=False) | options
    fast = plan_matmul(*shape, target, precision, tiles=tiles, **args)
    scan = _plan_matmul_scan(*shape, target, precision, tiles, args["exact"], args["max_pk"], args["ta"],
                             args["tb"], args["b_laid_out"], args["exact_k"])
    assert fast == scan
    assert fast.fits == ("no split fits" not in fast.describe())
