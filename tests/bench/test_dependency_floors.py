"""bench/dependency_floors.py pins each runtime requirement of pyproject.toml to its floor (decision 0201)."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench import dependency_floors as df  # noqa: E402


def test_every_floor_is_pinned_and_a_requirement_without_one_is_left_to_pip(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\ndependencies = ["numpy>=1.26", "h5py >= 3.10", '
                                             '"PySide6-Essentials>=6.7,!=6.9.1,<6.12", "ml_dtypes<0.7", '
                                             '"dask[distributed]>=2024.1", "psutil>=5.9; sys_platform != \'win32\'"]\n')
    pins = df.floors(tmp_path / "pyproject.toml")
    assert pins == ["numpy==1.26", "h5py==3.10", "PySide6-Essentials==6.7", "ml_dtypes<0.7",
                    "dask[distributed]==2024.1", "distributed==2024.1", "psutil==5.9"]
    assert df.floors(tmp_path / "pyproject.toml", extra=["h5py==3.15.1"])[1] == "h5py==3.15.1"


def test_the_real_pyproject_has_a_floor_for_h5py():
    assert "h5py==3.10" in df.floors()  # the floor decision 0201 checked; move both together
