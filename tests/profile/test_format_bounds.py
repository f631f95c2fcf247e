"""The writer keeps to the HDF5 file format that the oldest supported h5py reads (decision 0201), and a reader
whose HDF5 is older than a file's format says what to install."""

from __future__ import annotations

import h5py
import pytest

import popvision_lite as pvl
from popvision_lite.errors import ProfileError
from popvision_lite.profile import reader, writer
from popvision_lite.testing.synthetic import make_synthetic


def test_profiles_are_written_with_the_hdf5_1_10_to_1_14_format(tmp_path, monkeypatch):
    seen, real = [], h5py.File

    def spy(*args, **kw):
        seen.append(kw.get("libver"))
        return real(*args, **kw)

    monkeypatch.setattr(writer.h5py, "File", spy)
    path = writer.write_profile(tmp_path / "run.pvl", make_synthetic(num_ipus=1, tiles_per_ipu=32, num_steps=40))
    assert seen == [("v110", "v114")] == [writer.LIBVER]  # nothing newer than HDF5 1.14 reads (h5py 3.10)
    monkeypatch.undo()
    with open(path, "rb") as f:
        assert f.read(9)[8] == 3  # superblock version 3: HDF5 1.10's format, not the 1.8 one "earliest" gives
    with pvl.open(path) as p:  # a finished file: HDF5 closed it before its bytes were taken
        assert len(p.steps) == 40


def test_an_hdf5_too_old_for_the_file_is_named_with_the_fix(monkeypatch, tmp_path):
    bad = OSError("Unable to synchronously open object (bad version number for datatype message)")
    monkeypatch.setattr(h5py.version, "hdf5_version_tuple", (1, 14, 2))
    monkeypatch.setattr(h5py.version, "hdf5_version", "1.14.2")
    hint = reader._format_hint(bad)
    assert "HDF5 1.14.2" in hint and "pip install 'h5py>=3.16'" in hint
    assert reader._format_hint(OSError("incorrect metadata checksum")) == ""  # a damaged file is not a version matter
    monkeypatch.setattr(h5py.version, "hdf5_version_tuple", (2, 0, 0))
    assert reader._format_hint(bad) == ""

    def too_new(*a, **kw):
        raise bad

    monkeypatch.setattr(h5py.version, "hdf5_version_tuple", (1, 14, 2))
    monkeypatch.setattr(h5py, "File", too_new)
    path = tmp_path / "old.pvl"
    path.write_bytes(b"\x89HDF\r\n\x1a\n" + bytes(100))
    with pytest.raises(ProfileError, match=r"old\.pvl: cannot open profile.*h5py>=3\.16"):
        pvl.open(path)
