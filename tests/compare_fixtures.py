"""Run pairs for the compare / export / what-if tests.

``run_pairs`` gives {"mk2", "mk2_recompute", "bow"} -> .pvl paths of the same small BERT training
step (timing-only), emulated once per test session: the recompute on/off pair and the Mk2 vs Bow
pair of the bundled samples, at a size that runs in seconds.  ``tile_mismatch`` is a synthetic
Mk1 profile with 2 x 1216 tiles (vs 1 x 1472 for Mk2).
"""

from __future__ import annotations

import pytest

BERT = dict(batch=2, seq=64, hidden=64, layers=2, heads=2)


@pytest.fixture(scope="session")
def run_pairs(tmp_path_factory):
    from popvision_lite.emulator.models.emulated import run_model
    from popvision_lite.emulator.models.workloads import make_config

    d = tmp_path_factory.mktemp("runs")
    out = {}
    for key, device, extra in (("mk2", "ipu-mk2", {}), ("mk2_recompute", "ipu-mk2", {"recompute": True}),
                               ("bow", "ipu-bow", {})):
        path = d / f"bert_{key}.pvl"
        run_model(make_config("bert", **BERT, **extra), device=device, timing_only=True, profile_path=path)
        out[key] = path
    return out


@pytest.fixture(scope="session")
def tile_mismatch(tmp_path_factory):
    from popvision_lite.profile.synthetic import write_synthetic

    d = tmp_path_factory.mktemp("synthetic")
    mk1 = d / "mk1_2ipu.pvl"
    write_synthetic(mk1, num_ipus=2, tiles_per_ipu=1216, num_steps=60, seed=1, device="ipu-mk1")
    mk2 = d / "mk2_1ipu.pvl"
    write_synthetic(mk2, num_ipus=1, tiles_per_ipu=1472, num_steps=60, seed=2, device="ipu-mk2")
    return mk2, mk1
