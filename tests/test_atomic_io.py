"""popvision_lite/atomic_io.py: files written atomically get the mode a plain open() would give."""

from __future__ import annotations


def _expected_mode() -> int:
    import os

    umask = os.umask(0o022)
    os.umask(umask)
    return 0o666 & ~umask


def test_profiles_and_exports_get_the_usual_file_mode(tmp_path):
    """mkstemp makes 0600 files: profiles and exports were unreadable by other users."""
    import stat
    import sys

    import pytest

    if sys.platform.startswith("win"):
        pytest.skip("POSIX modes")
    from popvision_lite.atomic_io import atomic_text, write_bytes_atomic
    from popvision_lite.profile import open_profile
    from popvision_lite.profile.csv_export import export_csv
    from popvision_lite.testing.synthetic import write_synthetic

    pvl = tmp_path / "run.pvl"
    write_synthetic(pvl, num_ipus=1, tiles_per_ipu=16, num_steps=8, seed=1)
    png = write_bytes_atomic(tmp_path / "a.png", b"\x89PNG")
    with atomic_text(tmp_path / "b.txt") as fh:
        fh.write("x")
    with open_profile(pvl) as p:
        export_csv(p, "ops", tmp_path / "ops.csv")
    for f in (pvl, png, tmp_path / "b.txt", tmp_path / "ops.csv"):
        assert stat.S_IMODE(f.stat().st_mode) == _expected_mode(), f
