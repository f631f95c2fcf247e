"""Wrong arguments give the right errors, where the notebook calls in (api_args.py): a TypeError or ValueError naming
the argument and what it takes - also the package's ConfigError - never a letter-by-letter GPU list, a raw numpy
TypeError or an AttributeError from deep inside."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import popvision_lite as pvl
from popvision_lite.analysis import roofline as rl
from popvision_lite.errors import ConfigError

SAMPLE = Path(__file__).resolve().parents[2] / "sample_profiles" / "mlp_mk2.pvl"


@pytest.fixture(scope="module")
def p():
    with pvl.open(SAMPLE) as prof:
        yield prof


def test_one_gpu_name_is_one_gpu_not_its_letters(p):
    a = rl.analyze(p, gpus="a100-80gb")
    assert [g.device_id for g in a.gpus] == ["a100-80gb"]
    with pytest.raises(ValueError, match=r"gpus: unknown GPU 'a100'; bundled GPUs are a100-80gb, "):
        rl.analyze(p, gpus="a100")
    with pytest.raises(TypeError, match="gpus must be a GPU id or a list of them"):
        rl.analyze(p, gpus=5)
    with pytest.raises(TypeError, match=r"gpus must hold GPU ids \(str\) or DeviceSpecs, got int 3"):
        rl.analyze(p, gpus=["a100-80gb", 3])


def test_the_matplotlib_roofline_checks_its_arguments(p):
    pytest.importorskip("matplotlib")  # the notebook extra
    fig = pvl.plot.roofline(p, gpus="h100-sxm")
    assert fig.axes
    with pytest.raises(ValueError, match="gpus: unknown GPU 'a'"):
        pvl.plot.roofline(p, gpus=["a"])
    with pytest.raises(TypeError, match="ax must be a matplotlib Axes"):
        pvl.plot.roofline(p, ax="left")
    with pytest.raises(TypeError, match="trace must be a file path"):
        pvl.plot.roofline(p, trace=42)


def test_tiles_as_people_write_them(p):
    w = p.step_tiles.window(0, 5, tiles=range(3, 9))
    np.testing.assert_array_equal(p.step_tiles.window(0, 5, tiles=slice(3, 9)).cycles, w.cycles)
    np.testing.assert_array_equal(p.step_tiles.window(0, 5, tiles=np.arange(3, 9, dtype=np.int32)).cycles, w.cycles)
    mask = np.zeros(p.target.num_tiles, bool)
    mask[3:9] = True
    np.testing.assert_array_equal(p.step_tiles.window(0, 5, tiles=mask).cycles, w.cycles)
    assert p.step_tiles.window(0, 5, tiles=7).cycles.shape == (5, 1)
    with pytest.raises(TypeError, match=r"tiles must be tile ids \(ints, a range, a slice or a boolean mask\)"):
        p.step_tiles.window(0, 5, tiles="0-15")
    with pytest.raises(TypeError, match="tiles must be whole tile ids"):
        p.step_tiles.window(0, 5, tiles=[1.5])
    with pytest.raises(ValueError, match=r"tiles: a boolean mask must have one entry per tile"):
        p.step_tiles.window(0, 5, tiles=mask[:10])
    with pytest.raises(ValueError, match=r"tiles: tile 99999 is out of range"):
        p.step_tiles.cycles(0, 5, tiles=[99999])
    with pytest.raises(TypeError, match="start must be a whole number or None"):
        p.step_tiles.window("0", 5)
    with pytest.raises(TypeError, match="lstop must be a whole number"):
        p.liveness.tile_bytes(0, "9")


def test_top_level_calls_name_what_they_take(p, tmp_path):
    with pytest.raises(TypeError, match=r"profile must be a profile path or an open profile \(pvl.open\(path\)\), "
                                        r"got int 5"):
        pvl.insights(5)
    with pytest.raises(TypeError, match="spec must be a device id"):
        pvl.insights(p, spec=3)
    with pytest.raises(TypeError, match="gpus must be a whole number or None, got str '8'"):
        pvl.verdict(p, gpus="8")
    with pytest.raises(ValueError, match="samples must be a whole number >= 1, got 0"):
        pvl.verdict(p, samples=0)
    assert pvl.verdict(p, samples=1e6).samples == 1_000_000  # 1e6 is a whole number
    with pytest.raises(TypeError, match="b must be a profile path or an open profile"):
        pvl.compare(p, None)
    with pytest.raises(TypeError, match="path must be a file path"):
        pvl.open(3)
    with pytest.raises(TypeError, match="path must be a file path"):
        pvl.open_sweep(["a"])
    with pytest.raises(TypeError, match="table name must be text"):
        p.table(0)
    with pytest.raises(ConfigError):  # each is the package's ConfigError too: old handlers still catch it
        pvl.insights(5)
