"""Two commands writing the same output at the same time (`emulate -o same.pvl` twice, `export -o same.csv`
twice) leave one complete file - either writer's, never a mix - and no temp file.

The writers meet at a barrier just before their final rename (tests/support/concurrent_writer.py), so both
temp files are complete and both renames are pending at once: the overlap is forced, not hoped for.  Each writer
leaves a copy of the file it is about to rename at the barrier, so the result can be matched to a writer."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

from popvision_lite.cli import main

REPO = Path(__file__).resolve().parents[1]
ENV = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), *sys.path]))
SAMPLES = REPO / "sample_profiles"
BOUND_S = 600


def _together(tmp_path, target: Path, commands: list[list[str]]) -> tuple[list[subprocess.CompletedProcess],
                                                                          list[bytes]]:
    """Run the writers of ``commands`` at once into ``target``: their processes and the file each had finished
    (its temp file's bytes at the barrier)."""
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    procs = [subprocess.Popen([sys.executable, "-m", "tests.support.concurrent_writer", str(barrier),
                               str(len(commands)), str(target), "--", *c], cwd=REPO, env=ENV, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for c in commands]
    done = []
    for p in procs:
        out, err = p.communicate(timeout=BOUND_S)
        done.append(subprocess.CompletedProcess(p.args, p.returncode, out, err))
    assert len(list(barrier.glob("ready-*"))) == len(commands)  # every writer reached its rename before any went on
    return done, [p.read_bytes() for p in sorted(barrier.glob("file-*"))]


def _datasets(path: Path) -> dict[str, np.ndarray]:
    import hdf5plugin  # noqa: F401 - registers the Blosc filter the profiles are compressed with

    out = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda name, obj: out.__setitem__(name, obj[()]) if isinstance(obj, h5py.Dataset) else None)
    return out


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def test_two_emulations_into_one_profile_leave_one_whole_profile(tmp_path):
    import popvision_lite as pvl

    def cmd(batch, out):
        return ["emulate", "mlp", "--hidden", "32", "--layers", "2", "--batch", str(batch), "--timing-only",
                "-q", "-o", str(out)]

    refs = {}
    for batch in (8, 16):  # each writer's file, written alone (the same command, in this process)
        ref = tmp_path / f"ref{batch}.pvl"
        assert main(cmd(batch, ref)) == 0
        refs[batch] = _datasets(ref)
    assert not _same(refs[8], refs[16])  # the two writers' files differ, so a mix would show

    out_dir = tmp_path / "out"
    out_dir.mkdir()
    same = out_dir / "same.pvl"
    done, _ = _together(tmp_path, same, [cmd(8, same), cmd(16, same)])
    for r in done:
        assert r.returncode == 0, r.stderr
        assert "Traceback" not in r.stderr
    assert sorted(os.listdir(out_dir)) == ["same.pvl"]  # no temp file left by either writer
    p = pvl.open(same)
    try:
        batch = p.run["config"]["batch"]
    finally:
        p.close()
    assert batch in refs and _same(_datasets(same), refs[batch])  # one writer's file, whole


@pytest.mark.parametrize("suffix", [".csv", ".png"])
def test_two_exports_into_one_file_leave_one_writers_file(tmp_path, suffix):
    a, b = SAMPLES / "mlp_mk2.pvl", SAMPLES / "mlp_bow.pvl"

    def cmd(profile, out):
        return ["export", str(profile), "--view", "summary" if suffix == ".csv" else "roofline", "-o", str(out),
                "--width", "400", "--height", "300"]

    out_dir = tmp_path / "out"
    out_dir.mkdir()
    same = out_dir / f"same{suffix}"
    done, finished = _together(tmp_path, same, [cmd(a, same), cmd(b, same)])
    for r in done:
        assert r.returncode == 0, r.stderr
    if suffix == ".csv":  # each writer's file is the one the same command writes alone (in this process)
        refs = []
        for prof in (a, b):
            ref = tmp_path / f"ref-{prof.stem}{suffix}"
            assert main(cmd(prof, ref)) == 0
            refs.append(ref.read_bytes())
        assert sorted(finished) == sorted(refs)
    else:  # a PNG is drawn by a fresh app, as each writer draws it: each writer's finished file is a whole image
        refs = finished
        for png in refs:
            assert png[:8] == b"\x89PNG\r\n\x1a\n" and png[-8:-4] == b"IEND"
            assert struct.unpack(">II", png[16:24]) == (400, 300)  # the IHDR's width and height, as asked
    assert len(refs) == 2 and refs[0] != refs[1]  # the two writers' files differ, so a mix would show
    assert sorted(os.listdir(out_dir)) == [same.name]
    assert same.read_bytes() in refs  # one writer's file, whole
