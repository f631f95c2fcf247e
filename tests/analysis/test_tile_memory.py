"""analysis.tile_memory and analysis.floor_plan against brute-force computations."""

from __future__ import annotations

import numpy as np
import pytest

from popvision_lite.analysis.floor_plan import GAP, floor_plan_layout, grid_layout
from popvision_lite.analysis.tile_memory import MEASURES, PERCENT, TileMemory
from popvision_lite.profile import schema


@pytest.fixture(scope="module")
def prof(synthetic_profile):
    return synthetic_profile(num_ipus=3, tiles_per_ipu=80, num_steps=80, seed=2, over_capacity_tiles=2)


def test_values_match_by_tile(prof):
    tm = TileMemory(prof)
    bt = prof.stored_table("memory_by_tile")
    for m in ("total", "always_live", "not_always_live") + schema.MEMORY_CATEGORIES:
        np.testing.assert_array_equal(tm.values(m), bt[m].to_numpy(np.float64))
    np.testing.assert_allclose(tm.values(PERCENT), 100 * bt["total"] / prof.target.sram_bytes_per_tile)
    np.testing.assert_array_equal(tm.over_capacity, bt["over_capacity"].to_numpy())
    assert tm.over_capacity.any()
    assert len(MEASURES) == len(set(MEASURES))
    with pytest.raises(ValueError, match="unknown memory measure"):
        tm.values("bogus")


def test_breakdown_and_variables_on_tile(prof):
    tm = TileMemory(prof)
    vt, var = prof.stored_table("variable_tiles"), prof.stored_table("variables")
    arr = prof.memory.array()
    for tile in (0, 79, 80, int(np.argmax(tm.total)), tm.num_tiles - 1):
        bd = tm.breakdown(tile)
        np.testing.assert_array_equal(bd["always_live"], arr[tile, :, 0])
        np.testing.assert_array_equal(bd["total"], arr[tile].sum(axis=1))
        df = tm.variables_on(tile)
        expect = vt[vt["tile"] == tile].groupby("var_id")["bytes"].sum()
        got = df.set_index("var_id")["bytes_on_tile"]
        assert got.sort_index().to_dict() == expect.sort_index().to_dict()
        assert list(df["bytes_on_tile"]) == sorted(df["bytes_on_tile"], reverse=True)
        names = var.set_index("var_id").loc[df["var_id"], "name"]
        assert list(df["name"]) == list(names)
        # always-live variables on the tile never exceed its always-live variable+constant bytes
        assert df.loc[df["always_live"], "bytes_on_tile"].sum() <= arr[tile, [0, 1], 0].sum()


def _check_bijective(lay, num_tiles):
    assert lay.pixel_tile.shape == (lay.height, lay.width)
    placed = lay.pixel_tile[lay.pixel_tile >= 0]
    assert sorted(placed.tolist()) == list(range(num_tiles))
    np.testing.assert_array_equal(lay.pixel_tile[lay.row, lay.col], np.arange(num_tiles))
    img = lay.image(np.arange(num_tiles, dtype=float))
    assert np.isnan(img[lay.pixel_tile < 0]).all()
    for t in (0, num_tiles // 2, num_tiles - 1):
        assert lay.tile_at(lay.row[t] + 0.5, lay.col[t] + 0.5) == t
    assert lay.tile_at(-1, 0) == -1 and lay.tile_at(0, lay.width + 3) == -1


def test_floor_plan_follows_device_spec():
    from popvision_lite.devices import load_device
    from popvision_lite.testing.synthetic import default_target

    spec = load_device("ipu-mk2")
    t = default_target("ipu-mk2", 16, None)
    assert t.tiles_per_ipu == spec.tiles
    lay = floor_plan_layout(t)
    _check_bijective(lay, t.num_tiles)
    col, row = spec.tile_position(np.arange(t.tiles_per_ipu))
    for ipu in (0, 5, 15):
        r0, c0 = lay.ipu_origin(ipu)
        g = ipu * t.tiles_per_ipu + np.arange(t.tiles_per_ipu)
        np.testing.assert_array_equal(lay.row[g] - r0, row)
        np.testing.assert_array_equal(lay.col[g] - c0, col)
    assert lay.ipu_rows * lay.ipu_cols >= 16
    # IPU blocks never overlap and are separated by the gap
    assert lay.width == lay.ipu_cols * lay.block_width + (lay.ipu_cols - 1) * GAP
    assert "schematic" in lay.note


def test_floor_plan_without_spec_and_grid(prof):
    from dataclasses import replace

    t = replace(prof.target, device="no-such-device")
    lay = floor_plan_layout(t)
    _check_bijective(lay, t.num_tiles)
    assert "no [floorplan]" in lay.note
    g = grid_layout(prof.target, width=16)
    _check_bijective(g, prof.target.num_tiles)
    assert (g.block_height, g.block_width) == (5, 16)
    assert g.row[17] == 1 and g.col[17] == 1  # tile 17 of IPU 0: second row, second column
