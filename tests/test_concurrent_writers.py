"""Two commands writing the same output at the same time (`emulate -o same.pvl` twice, `export -o same.csv`
twice) leave one complete file - either writer's, never a mix - and no temp file.

The writers meet at a barrier just before their final rename (tests/support/concurrent_writer.py), so both
temp files are complete and both renames are pending at once: the overlap is forced, not hoped for.  Each writer
leaves a copy of the file it is about to rename at the barrier, so the result can be matched to a writer."""

from __future__ import annotations

import json
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


KINDS = (".pvl", ".csv", ".png")


def _command(kind: str, writer: int, out: Path) -> list[str]:
    """Writer 0's or 1's command writing ``out``: two emulations of other batches, two exports of other profiles."""
    if kind == ".pvl":
        return ["emulate", "mlp", "--hidden", "32", "--layers", "2", "--batch", str((8, 16)[writer]), "--timing-only",
                "-q", "-o", str(out)]
    profile = (SAMPLES / "mlp_mk2.pvl", SAMPLES / "mlp_bow.pvl")[writer]
    # the PNG: the Memory view's heatmap, the cheapest plot that differs between the two profiles (the race is in
    # the rename every export shares; a Roofline PNG cost each writer 0.13 s more)
    return ["export", str(profile), "--view", "summary" if kind == ".csv" else "memory", "-o", str(out),
            "--width", "400", "--height", "300"]


@pytest.fixture(scope="module")
def raced(tmp_path_factory):
    """Two writer processes started together, each running the three commands of ``KINDS`` in turn into the
    same three files (``out<kind>/same<kind>``), the two meeting at each file's barrier: ``{kind: (target,
    [each writer's exit code], [each writer's finished file], [each process's stderr])}``.  One pair of
    processes races over the three kinds of file (tests/support/concurrent_writer.py), instead of a pair per
    kind: a writer's start and imports are most of a command this small."""
    root = tmp_path_factory.mktemp("raced")
    jobs = {}
    for kind in KINDS:
        (root / f"out{kind}").mkdir()
        (root / f"barrier{kind}").mkdir()
        jobs[kind] = root / f"barrier{kind}", root / f"out{kind}" / f"same{kind}"
    argv = [[sys.executable, "-m", "tests.support.concurrent_writer", "2"] for _ in range(2)]
    for writer in range(2):
        for kind, (barrier, target) in jobs.items():
            argv[writer] += [str(barrier), str(target), json.dumps(_command(kind, writer, target))]
    procs = [subprocess.Popen(a, cwd=REPO, env=ENV, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for a in argv]
    stderr = [p.communicate(timeout=BOUND_S)[1] for p in procs]
    out = {}
    for kind, (barrier, target) in jobs.items():
        # every writer reached its rename before any went on
        assert len(list(barrier.glob("ready-*"))) == 2, (kind, stderr)
        codes = [int(p.read_text()) for p in sorted(barrier.glob("code-*"))]
        out[kind] = target, codes, [p.read_bytes() for p in sorted(barrier.glob("file-*"))], stderr
    return out


def _writers_done(raced, kind: str) -> tuple[Path, list[bytes]]:
    target, codes, finished, stderr = raced[kind]
    assert codes == [0, 0], stderr
    assert all("Traceback" not in e for e in stderr), stderr
    return target, finished


def _datasets(path: Path) -> dict[str, np.ndarray]:
    import hdf5plugin  # noqa: F401 - registers the Blosc filter the profiles are compressed with

    out = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda name, obj: out.__setitem__(name, obj[()]) if isinstance(obj, h5py.Dataset) else None)
    return out


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def test_two_emulations_into_one_profile_leave_one_whole_profile(tmp_path, raced):
    import popvision_lite as pvl

    refs = {}
    for writer, batch in enumerate((8, 16)):  # each writer's file, written alone (the same command, in this process)
        ref = tmp_path / f"ref{batch}.pvl"
        assert main(_command(".pvl", writer, ref)) == 0
        refs[batch] = _datasets(ref)
    assert not _same(refs[8], refs[16])  # the two writers' files differ, so a mix would show

    same, _ = _writers_done(raced, ".pvl")
    assert sorted(os.listdir(same.parent)) == ["same.pvl"]  # no temp file left by either writer
    p = pvl.open(same)
    try:
        batch = p.run["config"]["batch"]
    finally:
        p.close()
    assert batch in refs and _same(_datasets(same), refs[batch])  # one writer's file, whole


@pytest.mark.parametrize("suffix", [".csv", ".png"])
def test_two_exports_into_one_file_leave_one_writers_file(tmp_path, raced, suffix):
    same, finished = _writers_done(raced, suffix)
    if suffix == ".csv":  # each writer's file is the one the same command writes alone (in this process)
        refs = []
        for writer in range(2):
            ref = tmp_path / f"ref{writer}{suffix}"
            assert main(_command(suffix, writer, ref)) == 0
            refs.append(ref.read_bytes())
        assert sorted(finished) == sorted(refs)
    else:  # a PNG is drawn by an app of its own, as each writer draws it: each writer's finished file is a whole image
        refs = finished
        for png in refs:
            assert png[:8] == b"\x89PNG\r\n\x1a\n" and png[-8:-4] == b"IEND"
            assert struct.unpack(">II", png[16:24]) == (400, 300)  # the IHDR's width and height, as asked
    assert len(refs) == 2 and refs[0] != refs[1]  # the two writers' files differ, so a mix would show
    assert sorted(os.listdir(same.parent)) == [same.name]
    assert same.read_bytes() in refs  # one writer's file, whole
