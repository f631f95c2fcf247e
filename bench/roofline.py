"""Roofline analysis cost on small and large synthetic profiles (``python -m bench roofline``).

Prints, measured side by side in one run:
* ``analyze()`` time (median of 5) for 1 IPU x 1472 tiles and 16 IPUs x 1472 tiles x 10,000 steps, and
  the share of the 16-IPU time spent finding ops on over-capacity tiles;
* that full-tile lookup (numpy gather + scatter over dense ids) against the straightforward pandas
  version (``isin`` + ``unique``), on the same data (same answer asserted).
"""

from __future__ import annotations

import statistics
import time


def _median(fn, n=5):
    ts = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def _pandas_full_tile_ops(profile, capacity):
    arr = profile.memory
    full = (arr.sum(axis=(1, 2)) > capacity).nonzero()[0]
    verts, css = profile.stored_table("vertices"), profile.stored_table("compute_sets")
    cs = verts.loc[verts["tile"].isin(full), "cs_id"].unique()
    return {int(o) for o in css.loc[css["cs_id"].isin(cs), "op_id"] if o >= 0}


def main(argv=None) -> int:
    from popvision_lite.analysis import roofline as rl
    from popvision_lite.testing.synthetic import make_synthetic

    small = make_synthetic(num_ipus=1, tiles_per_ipu=1472, num_steps=2000, num_layers=8)
    t0 = time.perf_counter()
    big = make_synthetic(num_ipus=16, tiles_per_ipu=1472, num_steps=10000, num_layers=24)
    print(f"made 16 x 1472 x 10000 synthetic profile in {time.perf_counter() - t0:.1f} s "
          f"({len(big.stored_table('ops'))} ops, {len(big.stored_table('vertices')):,} vertex rows)")
    ts = _median(lambda: rl.analyze(small))
    tb = _median(lambda: rl.analyze(big))
    cap = big.target.sram_bytes_per_tile
    t_np = _median(lambda: rl._ops_on_full_tiles(big, cap))
    t_pd = _median(lambda: _pandas_full_tile_ops(big, cap))
    assert rl._ops_on_full_tiles(big, cap) == _pandas_full_tile_ops(big, cap)
    print(f"analyze 1 IPU x 1472 tiles:    {ts * 1e3:7.1f} ms")
    print(f"analyze 16 IPUs x 1472 tiles:  {tb * 1e3:7.1f} ms (full-tile lookup {t_np / tb:.0%} of it)")
    print(f"full-tile lookup numpy {t_np * 1e3:.1f} ms vs pandas isin/unique {t_pd * 1e3:.1f} ms "
          f"(pandas / numpy = {t_pd / t_np:.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
