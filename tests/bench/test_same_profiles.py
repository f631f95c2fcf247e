"""bench/same_profiles.py: the check every emulator speed change runs to show it left cycles and bytes as they were."""

import shutil
from pathlib import Path

import h5py
import hdf5plugin  # noqa: F401
import numpy as np

from bench import same_profiles

SAMPLE = Path(__file__).resolve().parents[2] / "sample_profiles" / "mlp_mk2.pvl"


def test_a_copy_is_the_same_and_one_changed_value_is_found(tmp_path):
    a, b = tmp_path / "a.pvl", tmp_path / "b.pvl"
    shutil.copyfile(SAMPLE, a)
    shutil.copyfile(SAMPLE, b)
    assert same_profiles.main([str(a), str(b)]) == 0
    with h5py.File(b, "r+") as f:
        cycles = f["arrays/step_tile_cycles"]
        row = np.asarray(cycles[0])
        row[0] += 1
        cycles[0] = row
    found = same_profiles.differences(a, b)
    assert found == ["arrays/step_tile_cycles: 1 value(s) differ"]
    assert same_profiles.main([str(a), str(b)]) == 1


def test_the_run_records_time_stamp_is_the_one_field_allowed_to_differ(tmp_path):
    a, b = tmp_path / "a.pvl", tmp_path / "b.pvl"
    shutil.copyfile(SAMPLE, a)
    shutil.copyfile(SAMPLE, b)
    import json

    with h5py.File(b, "r+") as f:
        run = json.loads(bytes(f.attrs["run"]))
        run["created"] = "1999-01-01T00:00:00Z"
        f.attrs["run"] = np.bytes_(json.dumps(run))
    assert same_profiles.differences(a, b) == []
    with h5py.File(b, "r+") as f:
        run["fits"] = not run["fits"]
        f.attrs["run"] = np.bytes_(json.dumps(run))
    assert same_profiles.differences(a, b) == ["/: attribute 'run' differs"]
