"""Faults: a killed `emulate` or `export` (kill -9 in the middle of writing) leaves no file at the target
that looks valid (and an older file there untouched); a full disk and an unwritable folder give a clear
error naming the path.  The full disk and read-only folder are real (small tmpfs mounts, we run as root);
where mounting is refused the OS error is simulated instead."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from popvision_lite.errors import ProfileError
from popvision_lite.profile.reader import open_profile


def _kill_when_temp_appears(cmd, folder: Path, prefix: str, min_bytes: int = 1, timeout: float = 1800.0):
    """Start cmd, wait until a temp file '<prefix>*.tmp' in folder has min_bytes, kill -9 it.

    Returns the temp files seen (paths).  Fails if the process ends before a temp file shows up.
    """
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    seen = []
    t0 = time.monotonic()
    try:
        while time.monotonic() - t0 < timeout:
            seen = [p for p in folder.iterdir() if p.name.startswith(prefix) and p.name.endswith(".tmp")]
            if seen and any(_size(p) >= min_bytes for p in seen):
                os.kill(proc.pid, signal.SIGKILL)
                break
            if proc.poll() is not None:
                pytest.fail(f"{cmd[-5:]} finished (rc {proc.returncode}) before its temp file was seen: "
                            f"{proc.stderr.read().decode()[-500:]}")
            time.sleep(0.002)
        else:
            pytest.fail("no temp file appeared")
        rc = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stderr.close()
    assert rc == -signal.SIGKILL
    return seen


def _size(p: Path) -> int:
    try:
        return p.stat().st_size
    except OSError:
        return 0


CLI = [sys.executable, "-m", "popvision_lite.cli"]


# The profile writer builds the HDF5 file in memory and writes it to its temp file only at the end (a 2-IPU
# timing-only MLP: ~250 KB in one write, far too quick to land a kill in; 0.5 s CPU to emulate).  So the child writes
# the image in 64 KiB pieces and, once it has written HOLD_PROFILE_AFTER bytes (half the image), stops there until it
# is killed: the kill always lands while the temp file holds part of the image, however slow or loaded the machine
# (no race with the last write).
HOLD_PROFILE_AFTER = 128 << 10
SLOW_EMULATE = textwrap.dedent(f"""
    import os, sys, time
    from popvision_lite.profile import writer
    _write = os.write
    _done = [0]
    def slow_write(fd, data):
        if _done[0] >= {HOLD_PROFILE_AFTER}:
            while True:  # hold the half-written temp file until the test kills this process
                time.sleep(1)
        n = _write(fd, data)
        _done[0] += n
        return n
    writer.WRITE_CHUNK = 64 << 10
    writer.os.write = slow_write
    from popvision_lite.cli import main
    sys.exit(main(sys.argv[1:]))
""")


@pytest.mark.parametrize("previous", [False, True], ids=["fresh", "over-older-file"])
def test_emulate_killed_mid_write(tmp_path, previous):
    target = tmp_path / "run.pvl"
    if previous:
        from popvision_lite.testing.synthetic import write_synthetic

        write_synthetic(target, num_ipus=1, tiles_per_ipu=8, num_steps=30, num_layers=1)
        before = target.read_bytes()
    cmd = [sys.executable, "-c", SLOW_EMULATE, "emulate", "mlp", "--ipus", "2", "--timing-only", "-q", "-o", str(target)]
    temps = _kill_when_temp_appears(cmd, tmp_path, ".run.pvl.", min_bytes=HOLD_PROFILE_AFTER)
    if previous:
        assert target.read_bytes() == before
        with open_profile(target) as p:
            assert p.num_steps == 30
    else:
        assert not target.exists()
    partial = [t for t in temps if t.exists() and 0 < _size(t)]
    assert partial, "the kill should land while the image is being written"
    for t in partial:  # the half-written temp file is never mistaken for a profile
        with pytest.raises(ProfileError) as ei:
            open_profile(t).close()
        assert str(t) in str(ei.value)


HOLD_AFTER = 320 << 10
# The Chrome trace is written as text through atomic_io's file handle: the child wraps each handle opened for
# writing so that, once HOLD_AFTER characters are written (and flushed to the temp file), it stops there until killed.
HELD_EXPORT = textwrap.dedent(f"""
    import os, sys, time
    _fdopen = os.fdopen
    class Held:
        def __init__(self, fh):
            self.fh, self.n = fh, 0
        def write(self, text):
            if self.n >= {HOLD_AFTER}:
                self.fh.flush()
                while True:  # hold the half-written temp file until the test kills this process
                    time.sleep(1)
            self.n += len(text)
            return self.fh.write(text)
        def __getattr__(self, name):
            return getattr(self.fh, name)
        def __enter__(self):
            return self
        def __exit__(self, *exc):
            return self.fh.__exit__(*exc)
    def fdopen(fd, mode="r", *args, **kwargs):
        fh = _fdopen(fd, mode, *args, **kwargs)
        return Held(fh) if "w" in mode else fh
    os.fdopen = fdopen
    from popvision_lite.cli import main
    sys.exit(main(sys.argv[1:]))
""")


@pytest.fixture(scope="module")
def trace_source(tmp_path_factory):
    from popvision_lite.testing.synthetic import write_synthetic

    return write_synthetic(tmp_path_factory.mktemp("src") / "src.pvl", num_ipus=1, tiles_per_ipu=1472,
                           num_steps=600, num_layers=1)


@pytest.mark.parametrize("previous", [False, True], ids=["fresh", "over-older-file"])
def test_chrome_trace_export_killed_mid_write(tmp_path, trace_source, previous):
    target = tmp_path / "trace.json"
    if previous:
        target.write_text(json.dumps({"traceEvents": []}))
        before = target.read_bytes()
    # one lane per tile: ~900k events; the child holds its half-written temp file until it is killed
    cmd = [sys.executable, "-c", HELD_EXPORT, "export", str(trace_source), "--chrome-trace", "--tiles", "0-1471",
           "-o", str(target)]
    temps = _kill_when_temp_appears(cmd, tmp_path, ".trace.json.", min_bytes=64 << 10)
    if previous:
        assert target.read_bytes() == before
    else:
        assert not target.exists()
    for t in temps:  # what was written is an unfinished JSON document, under a hidden temp name
        if t.exists():
            with pytest.raises(ValueError):
                json.loads(t.read_text())


# ---- full disk and unwritable folders --------------------------------------------------------

@contextlib.contextmanager
def _tmpfs(path: Path, opts: str):
    path.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(path)], capture_output=True, text=True)
    if r.returncode:
        yield None
        return
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


# one child on a full 64 KiB tmpfs proves both full-disk tests below (one interpreter start, not two): a profile too
# large for it, twice (the temp file gone as soon as write_profile returns); then, with a filler so that even a
# small file cannot fit, a Chrome trace and a CSV; then a small profile elsewhere, and a normal exit
FULL_DISK_SCRIPT = textwrap.dedent("""
    import gc, json, os, sys
    from popvision_lite.errors import ProfileError
    from popvision_lite.testing.synthetic import write_synthetic
    from popvision_lite.profile.chrome_trace import export_chrome_trace
    from popvision_lite.profile.csv_export import export_csv
    import popvision_lite as pvl
    folder, src, ok = sys.argv[1], sys.argv[2], sys.argv[3]
    out = {"profile": []}
    for _ in range(2):
        try:
            write_synthetic(folder + "/run.pvl", num_ipus=1, tiles_per_ipu=1472, num_steps=400, noise=0.05)
            out["profile"].append("no error")
        except ProfileError as e:
            out["profile"].append(str(e))
        gc.collect()
    out["left"] = sorted(os.listdir(folder))
    try:  # filler so even the small CSV cannot fit
        with open(folder + "/filler", "wb") as fh:
            fh.write(b"\\0" * (60 << 10))
    except OSError:
        pass
    with pvl.open(src) as p:
        for name, fn in (("trace", lambda: export_chrome_trace(p, folder + "/t.json")),
                         ("csv", lambda: export_csv(p, "steps", folder + "/steps.csv"))):
            try:
                fn()
                out[name] = "no error"
            except ProfileError as e:
                out[name] = str(e)
    write_synthetic(ok, num_ipus=1, tiles_per_ipu=8, num_steps=20)
    out["small"] = "ok"
    print(json.dumps(out))
""")


@pytest.fixture(scope="module")
def full_disk(tmp_path_factory, trace_source):
    """(the child's result, the full folder, the small profile written elsewhere), or None where no tmpfs mounts."""
    base = tmp_path_factory.mktemp("full")
    with _tmpfs(base / "small", "size=64k") as folder:
        if folder is None:
            yield None
            return
        r = subprocess.run([sys.executable, "-c", FULL_DISK_SCRIPT, str(folder), str(trace_source), str(base / "ok.pvl")],
                           capture_output=True, text=True, timeout=300)
        yield r, folder, sorted(p.name for p in folder.iterdir()), base / "ok.pvl"


def test_full_disk_gives_a_clear_error_and_no_file(full_disk):
    if full_disk is None:
        pytest.skip("cannot mount a tmpfs here; tests/profile/test_errors.py covers ENOSPC simulated")
    r, folder, left, _ = full_disk
    assert r.stdout.strip(), r.stderr[-2000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    for name, fname in (("profile", "run.pvl"), ("trace", "t.json"), ("csv", "steps.csv")):
        for msg in (out[name] if name == "profile" else [out[name]]):
            assert msg.startswith(str(folder / fname) + ": "), (name, msg)
            assert "disk full" in msg or "No space left" in msg or "File too large" in msg, (name, msg)
        assert fname not in left
    # nothing left behind but the filler (temp files removed)
    assert left == ["filler"]


def test_full_disk_process_exits_cleanly(full_disk):
    """A real ENOSPC while writing a profile: a clear error, nothing left behind, the process goes on writing
    (a small profile elsewhere) and exits normally.  (Before the writer built the HDF5 image in memory, HDF5
    itself hit the ENOSPC and HDF5 2.0 then segfaulted at exit when it closed the failed file.)"""
    if full_disk is None:
        pytest.skip("cannot mount a tmpfs here")
    r, folder, _, ok = full_disk
    assert r.returncode == 0, f"exit code {r.returncode}: {r.stderr[-2000:]}"
    out = json.loads(r.stdout.strip().splitlines()[-1])
    # the temp file is gone as soon as write_profile returns (not left for exit), and nothing else is there
    assert out["profile"] == [f"{folder / 'run.pvl'}: disk full while writing the profile"] * 2
    assert out["left"] == [] and out["small"] == "ok"
    assert "Traceback" not in r.stderr and "HDF5" not in r.stderr, r.stderr[-2000:]
    with open_profile(ok) as p:
        assert p.num_steps == 20


def test_read_only_folder_gives_a_clear_error(tmp_path, trace_source):
    import popvision_lite as pvl
    from popvision_lite.profile.chrome_trace import export_chrome_trace
    from popvision_lite.profile.writer import write_profile
    from popvision_lite.testing.synthetic import make_synthetic

    data = make_synthetic(num_ipus=1, tiles_per_ipu=8, num_steps=20, num_layers=1)
    with _tmpfs(tmp_path / "ro", "size=1m,ro") as folder:
        if folder is None:  # simulate what the OS says for a folder we may not write
            folder = tmp_path / "ro"

            def refuse(*a, **k):
                raise OSError(errno.EROFS, "Read-only file system")

            import tempfile
            mp = pytest.MonkeyPatch()
            mp.setattr(tempfile, "mkstemp", refuse)
        else:
            mp = None
        try:
            with pytest.raises(ProfileError) as ei:
                write_profile(folder / "run.pvl", data)
            msg = str(ei.value)
            assert str(folder / "run.pvl") in msg and "Read-only file system" in msg, msg
            with pvl.open(trace_source) as p, pytest.raises(ProfileError) as ei:
                export_chrome_trace(p, folder / "t.json", step_range=(0, 10))
            assert str(folder / "t.json") in str(ei.value) and "Read-only" in str(ei.value)
        finally:
            if mp:
                mp.undo()
        assert list(folder.iterdir()) == []


def test_parent_is_a_regular_file(tmp_path, trace_source):
    """Root ignores chmod, so the other 'unwritable folder': the parent path is a file."""
    import popvision_lite as pvl
    from popvision_lite.profile.csv_export import export_csv
    from popvision_lite.profile.writer import write_profile
    from popvision_lite.testing.synthetic import make_synthetic

    f = tmp_path / "notes.txt"
    f.write_text("x")
    with pytest.raises(ProfileError) as ei:
        write_profile(f / "run.pvl", make_synthetic(num_ipus=1, tiles_per_ipu=8, num_steps=20, num_layers=1))
    assert str(f / "run.pvl") in str(ei.value) and str(f) in ei.value.problem
    with pvl.open(trace_source) as p, pytest.raises(ProfileError) as ei:
        export_csv(p, "ops", f / "ops.csv")
    assert str(f / "ops.csv") in str(ei.value)
    assert f.read_text() == "x"
