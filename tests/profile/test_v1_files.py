"""Profiles written before format v2 (one global timeline, no schedule) still open."""

from pathlib import Path

import numpy as np
import pytest

from popvision_lite.profile import open_profile, schema

V1 = Path(__file__).resolve().parents[1] / "fixtures" / "v1"


@pytest.mark.parametrize("name", ["bert_tiny_mk2.pvl", "bert_mini_4ipu_pipeline.pvl"])
def test_v1_profiles_open(name):
    assert schema.FORMAT_VERSION >= 2
    with open_profile(V1 / name) as p:
        assert p.format_version == 1
        assert "schedule" not in p.run
        steps = p.steps
        assert len(steps) > 10
        # v1: one global timeline, steps back to back
        assert np.all(steps.start_cycle.to_numpy()[1:] >= steps.end_cycle.to_numpy()[:-1])
        assert p.memory.by_tile()["total_bytes"].max() > 0
