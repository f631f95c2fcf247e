"""The fit verdict of ResNet-50 in both directions on the outlined replica graph (timing-only): the
configuration of an MLPerf submission that trained fits, an oversized one does not, each naming its
fullest tile."""

import numpy as np
import pytest

from popvision_lite import mlperf_validation as V
from popvision_lite.emulator.models.config import make_config
from popvision_lite.emulator.models.emulated import run_model


def _fullest(run):
    need = np.asarray(run.profile_data.memory).sum(axis=(1, 2))
    return int(np.argmax(need)), int(need.max()), int(run.profile_data.target.sram_bytes_per_tile)


@pytest.mark.slow
def test_resnet50_far_above_the_submissions_micro_batch_without_recompute_does_not_fit():
    """Micro-batch 64 (the submissions ran 16-20) and every activation kept for the backward pass."""
    cfg = make_config("resnet50", batch=64, recompute=False, replicas=16, ipus=16, grad_accum=4, optimizer="lars",
                      optimizer_state_dtype="fp16", available_memory_proportion=0.15)
    run = run_model(cfg, "ipu-mk2", timing_only=True)
    tile, need, cap = _fullest(run)
    assert not run.fits and need > cap
    assert run.oom_report and run.oom_report[0][0] == tile and run.oom_report[0][2] == need
    assert f"peak tile {tile} " in V.peak_tile_text(run)


@pytest.mark.slow
def test_resnet50_at_a_submissions_configuration_fits():
    """The MLPerf v1.1 IPU-POD16 submission (configs.yml mk2_resnet50_mlperf_pod16_lars: micro-batch 20, the
    seven recomputed stages, AMP 0.15, LARS with fp16 state, half partials) trained, so it fits, its fullest
    tile named."""
    rows = V.load_rows(V.data_dir(None))
    case = next(c for c in V.build_cases(rows, overrides=V.row_configs()) if c.id == "gc-v1.1-pod16-resnet")
    kept, _ = V.supported_config(case.config, set(make_config("resnet50").field_names()))
    run = run_model(make_config(case.model, **kept), case.device, timing_only=True)
    tile, need, cap = _fullest(run)
    assert run.fits and need <= cap and not run.oom_report
    assert f"peak tile {tile} " in V.peak_tile_text(run)
