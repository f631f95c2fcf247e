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


def test_another_writers_clean_up_between_creation_and_lock_leaves_the_temp_file(tmp_path, monkeypatch):
    """Two writers of one path: the other's clean-up of dead writers' temp files, run at the worst moment (this
    writer's temp file made, not yet locked), removed it, and this writer's rename failed (seen under load in
    tests/test_concurrent_writers.py).  The file is made under a name the clean-up does not take until locked."""
    import os

    from popvision_lite import atomic_io

    target = tmp_path / "out.pvl"
    real_lock = atomic_io.lock_temp
    cleaned = []

    def lock_after_another_writers_clean_up(fd):
        cleaned.extend(atomic_io.clean_stale_temps(target, tmp_path))
        real_lock(fd)

    monkeypatch.setattr(atomic_io, "lock_temp", lock_after_another_writers_clean_up)
    fd, tmp = atomic_io.make_temp(target, tmp_path)
    assert cleaned == [] and os.path.basename(tmp).endswith(".tmp")
    assert atomic_io.clean_stale_temps(target, tmp_path) == []  # locked now: a live writer's, kept
    os.write(fd, b"whole")
    atomic_io.replace_locked(fd, tmp, target)
    assert target.read_bytes() == b"whole" and sorted(tmp_path.iterdir()) == [target]


def test_a_temp_name_in_use_is_never_replaced(tmp_path, monkeypatch):
    """The temp name is taken by a hard link, which fails where another writer's live temp file has that name."""
    import os
    import tempfile

    from popvision_lite import atomic_io

    target = tmp_path / "out.pvl"
    names = iter(["aaaaaaaa", "bbbbbbbb"])
    real_mkstemp = tempfile.mkstemp

    def mkstemp(prefix, suffix, dir):
        name = os.path.join(dir, f"{prefix}{next(names)}{suffix}")
        return os.open(name, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600), name

    (tmp_path / ".out.pvl.aaaaaaaa.tmp").write_bytes(b"another writer's")
    monkeypatch.setattr(atomic_io, "clean_stale_temps", lambda path, folder: [])  # (that writer is alive)
    monkeypatch.setattr(tempfile, "mkstemp", mkstemp)
    try:
        fd, tmp = atomic_io.make_temp(target, tmp_path)
    finally:
        monkeypatch.setattr(tempfile, "mkstemp", real_mkstemp)
    os.close(fd)
    assert os.path.basename(tmp) == ".out.pvl.bbbbbbbb.tmp"
    assert (tmp_path / ".out.pvl.aaaaaaaa.tmp").read_bytes() == b"another writer's"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".out.pvl.aaaaaaaa.tmp", ".out.pvl.bbbbbbbb.tmp"]
