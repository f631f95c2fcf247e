"""The fit verdict of ResNet-50 in both directions on the outlined replica graph (timing-only): the
configuration of an MLPerf submission that trained fits, the same graph with more on-chip training state does
not, each naming its fullest tile.  One ResNet-50 graph is emulated: the second run changes only what the
composition applies (optimizer and its state) and reuses it, as the validation report's rows do.  Both runs are
the report's, without the profile's tables (``profile=False``): the fit and the fullest tile are read from the
memory per tile, which the tables do not change (tests/test_validation_no_profile.py)."""

import numpy as np
import pytest

from popvision_lite import mlperf_validation as V
from popvision_lite.emulator.models import emulated as E
from popvision_lite.emulator.models.config import make_config
from popvision_lite.emulator.models.emulated import run_model


def _fullest(run):
    need = np.asarray(run.profile_data.memory).sum(axis=(1, 2))
    return int(np.argmax(need)), int(need.max()), int(run.profile_data.target.sram_bytes_per_tile)


@pytest.fixture(scope="module")
def submission():
    """(ModelConfig fields, device, run) of the MLPerf v1.1 IPU-POD16 submission (configs.yml
    mk2_resnet50_mlperf_pod16_lars: micro-batch 20, the seven recomputed stages, AMP 0.15, LARS with fp16 state,
    half partials)."""
    rows = V.load_rows(V.data_dir(None))
    case = next(c for c in V.build_cases(rows, overrides=V.row_configs()) if c.id == "gc-v1.1-pod16-resnet")
    kept, _ = V.supported_config(case.config, set(make_config("resnet50").field_names()))
    E._GRAPH_CACHE.clear()
    yield kept, case.device, run_model(make_config(case.model, **kept), case.device, timing_only=True, profile=False)
    E.release_graphs()


@pytest.mark.slow
def test_resnet50_at_a_submissions_configuration_fits(submission):
    """The submission trained, so it fits, its fullest tile named."""
    _, _, run = submission
    tile, need, cap = _fullest(run)
    assert run.fits and need <= cap and not run.oom_report
    assert f"peak tile {tile} " in V.peak_tile_text(run)


@pytest.mark.slow
def test_resnet50_with_adams_fp32_state_on_chip_does_not_fit(submission):
    """Adam's two fp32 moments on chip instead of LARS's one fp16 momentum: 6 more bytes per parameter on the
    tiles that hold the weights, over the 624 KiB the submission's graph leaves room for.  (Activation memory
    driving a ResNet-50 out of memory - micro-batch 64 without recomputation, 49 s CPU - is run outside the
    suite: docs/performance.md, "Test suite CPU"; the activation accounting itself is tested on resnet-tiny.)"""
    kept, device, fits = submission
    run = run_model(make_config("resnet50", **(kept | dict(optimizer="adam", optimizer_state_dtype="fp32"))), device,
                    timing_only=True, profile=False)
    assert run.wall.get("reused") is True  # the same replica graph: only the composition changed
    tile, need, cap = _fullest(run)
    assert not run.fits and need > cap > _fullest(fits)[1]
    assert run.oom_report and run.oom_report[0][0] == tile and run.oom_report[0][2] == need
    assert f"peak tile {tile} " in V.peak_tile_text(run)
