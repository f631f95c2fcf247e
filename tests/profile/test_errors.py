"""Every kind of bad profile input raises a ProfileError subclass naming the file and the problem;
writes are atomic (a killed writer leaves no valid-looking file)."""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap

import h5py
import numpy as np
import pytest

from popvision_lite.errors import ProfileError, ProfileVersionError
from popvision_lite.profile import schema, writer
from popvision_lite.profile.reader import open_profile
from popvision_lite.profile.writer import write_profile
from popvision_lite.testing.synthetic import make_synthetic


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    p = tmp_path_factory.mktemp("good") / "good.pvl"
    write_profile(p, make_synthetic(num_ipus=1, tiles_per_ipu=32, num_steps=120, seed=0, num_layers=1))
    return p


@pytest.fixture
def copy(good, tmp_path):
    def make(name="bad.pvl"):
        dst = tmp_path / name
        shutil.copy(good, dst)
        return dst

    return make


def _expect(path, *words, cls=ProfileError):
    with pytest.raises(cls) as ei:
        with open_profile(path) as p:
            # some problems only show when data is read; read everything
            for name in schema.TABLE_COLUMNS:
                getattr(p, name)
            p.memory.array()
            p.step_tiles.window(0, p.num_steps)
    msg = str(ei.value)
    assert str(path) in msg, msg
    for w in words:
        assert w.lower() in msg.lower(), (w, msg)
    return ei.value


def test_good_file_opens(good):
    with open_profile(good) as p:
        assert p.num_steps == 120


def test_missing_file(tmp_path):
    _expect(tmp_path / "nope.pvl", "no such file")


def test_directory(tmp_path):
    _expect(tmp_path, "directory")


def test_empty_file(tmp_path):
    f = tmp_path / "empty.pvl"
    f.write_bytes(b"")
    _expect(f, "empty")


def test_not_a_profile_text(tmp_path):
    f = tmp_path / "notes.pvl"
    f.write_text("hello, I am not a profile\n" * 20)
    _expect(f, "not a popvision-lite profile")


def test_other_hdf5_file(tmp_path):
    f = tmp_path / "other.h5"
    with h5py.File(f, "w") as h:
        h["x"] = np.arange(3)
    _expect(f, "not a popvision-lite profile", "format attribute")


@pytest.mark.parametrize("keep", [0.02, 0.5, 0.9])
def test_truncated(good, tmp_path, keep):
    data = good.read_bytes()
    f = tmp_path / "trunc.pvl"
    f.write_bytes(data[: int(len(data) * keep)])
    _expect(f, "truncated")


def test_corrupt_chunk_in_data(copy):
    f = copy()
    with h5py.File(f, "r") as h:
        off = h["arrays/step_tile_cycles"].id.get_chunk_info(0).byte_offset
    with open(f, "r+b") as fh:  # scribble over the first compressed chunk of step_tile_cycles
        fh.seek(off)
        fh.write(b"\xff" * 64)
    with open_profile(f) as p:  # header is intact, so it opens
        with pytest.raises(ProfileError) as ei:
            p.step_tiles.window(0, 10)
    assert "step_tile_cycles" in str(ei.value) and str(f) in str(ei.value)


def test_newer_version(copy):
    f = copy()
    with h5py.File(f, "r+") as h:
        h.attrs["format_version"] = schema.FORMAT_VERSION + 1
    e = _expect(f, f"version {schema.FORMAT_VERSION + 1}", f"up to {schema.FORMAT_VERSION}",
                cls=ProfileVersionError)
    assert isinstance(e, ProfileError)


def test_incomplete_flag(copy):
    f = copy()
    with h5py.File(f, "r+") as h:
        h.attrs["complete"] = False
    _expect(f, "incomplete")


def test_bad_target_header(copy):
    f = copy()
    with h5py.File(f, "r+") as h:
        t = json.loads(h.attrs["target"])
        t["tiles_per_ipu"] = -4
        h.attrs["target"] = json.dumps(t)
    _expect(f, "target.tiles_per_ipu")
    with h5py.File(f, "r+") as h:
        h.attrs["target"] = "{not json"
    _expect(f, "target")


@pytest.mark.parametrize("table", ["steps", "ops", "variables"])
def test_missing_table(copy, table):
    f = copy()
    with h5py.File(f, "r+") as h:
        del h["tables"][table]
    _expect(f, f"missing table '{table}'")


@pytest.mark.parametrize("array", ["memory", "step_tile_bytes_in", "liveness_tile_bytes"])
def test_missing_array(copy, array):
    f = copy()
    with h5py.File(f, "r+") as h:
        del h["arrays"][array]
    _expect(f, f"missing array '{array}'")


def test_missing_column(copy):
    f = copy()
    with h5py.File(f, "r+") as h:
        del h["tables/ops/flops"]
    _expect(f, "table 'ops'", "flops")


def test_step_tile_rows_disagree_with_their_steps_and_ipus(copy):
    """Format 4: an array's stored rows are named by '<array>.rows', one (step, IPU) each."""
    f = copy()
    with h5py.File(f, "r+") as h:
        n = h["arrays/step_tile_cycles"].shape[0]
        del h["arrays/step_tile_cycles"]
        h["arrays"].create_dataset("step_tile_cycles", data=np.zeros((n - 1, 32), np.uint32))
    _expect(f, "step_tile_cycles", f"({n - 1}, 32)", f"step_tile_cycles.rows' has shape ({n}, 2)",
            f"expected ({n - 1}, 2)")


def test_memory_tiles_disagree_with_target(copy):
    f = copy()
    with h5py.File(f, "r+") as h:
        del h["arrays/memory"]
        h["arrays"].create_dataset("memory", data=np.zeros((31, len(schema.MEMORY_CATEGORIES), 2), np.int64))
    _expect(f, "memory", "target tiles")


def test_table_columns_of_different_lengths(copy):
    f = copy()
    with h5py.File(f, "r+") as h:
        del h["tables/steps/end_cycle"]
        h["tables/steps"].create_dataset("end_cycle", data=np.zeros(7, np.int64))
    _expect(f, "table 'steps'", "different lengths")


def test_bad_array_dtype(copy):
    f = copy()
    with h5py.File(f, "r+") as h:
        del h["arrays/memory"]
        h["arrays"].create_dataset("memory", data=np.zeros((32, len(schema.MEMORY_CATEGORIES), 2), np.float32))
    _expect(f, "memory", "dtype", "float32")


def test_bad_column_dtype(copy):
    f = copy()
    with h5py.File(f, "r+") as h:
        n = h["tables/ops/flops"].shape[0]
        del h["tables/ops/flops"]
        h["tables/ops"].create_dataset("flops", data=np.array(["x"] * n, dtype="S1"))
    _expect(f, "table 'ops'", "flops", "dtype")


def test_dictionary_codes_out_of_range(copy):
    f = copy()
    with h5py.File(f, "r+") as h:
        h["tables/ops/name"][0] = 10_000
    _expect(f, "table 'ops'", "name", "categories")


def test_unknown_summary_level_and_table(good):
    with open_profile(good) as p:
        with pytest.raises(ProfileError, match="stored levels"):
            p.step_tiles.summary(3, 3)
        with pytest.raises(ProfileError, match="unknown table"):
            p.stored_table("nope")
        with pytest.raises(ValueError, match=r"tiles: tile 32 is out of range 0 \.\. 31"):  # the caller's mistake
            p.step_tiles.window(0, 10, tiles=[0, 32])
    with pytest.raises(ProfileError, match="closed"):
        p.memory.array()


# ---- writer errors and atomicity ------------------------------------------------------------

@pytest.fixture(scope="module")
def small_data():
    return make_synthetic(num_ipus=1, tiles_per_ipu=16, num_steps=40, num_layers=1)


def test_write_to_missing_folder(small_data, tmp_path):
    target = tmp_path / "no" / "such" / "run.pvl"
    with pytest.raises(ProfileError, match="does not exist"):
        write_profile(target, small_data)


def test_write_to_unwritable_folder(small_data, tmp_path, monkeypatch):
    # root ignores chmod, so simulate the OS refusing to create the temp file
    def refuse(*a, **k):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    with pytest.raises(ProfileError, match="cannot create a file in folder") as ei:
        write_profile(tmp_path / "run.pvl", small_data)
    assert str(tmp_path / "run.pvl") in str(ei.value)


def test_disk_full_leaves_nothing(small_data, tmp_path, monkeypatch):
    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(writer, "_write_table", full)
    with pytest.raises(ProfileError, match="disk full"):
        write_profile(tmp_path / "run.pvl", small_data)
    assert list(tmp_path.iterdir()) == []  # no target, and the temp file is removed at once


def test_disk_full_while_writing_the_image(small_data, tmp_path, monkeypatch):
    """ENOSPC from the plain write of the finished in-memory image, after a first piece went to disk."""
    calls = []
    real_write = os.write

    def fill_up(fd, data):
        calls.append(len(data))
        if len(calls) > 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(writer, "WRITE_CHUNK", 1024)
    monkeypatch.setattr(writer.os, "write", fill_up)
    with pytest.raises(ProfileError) as ei:
        write_profile(tmp_path / "run.pvl", small_data)
    monkeypatch.undo()
    assert str(ei.value) == f"{tmp_path / 'run.pvl'}: disk full while writing the profile"
    assert calls == [1024, 1024]
    assert list(tmp_path.iterdir()) == []
    write_profile(tmp_path / "run.pvl", small_data)  # and the next write works
    with open_profile(tmp_path / "run.pvl") as p:
        assert p.num_steps == len(small_data.steps)


def test_write_rejects_inconsistent_data(small_data, tmp_path):
    bad = schema.ProfileData(**{**small_data.__dict__,
                                "step_tile_cycles": np.zeros((39, 16), np.uint32)})
    with pytest.raises(ProfileError, match="step_tile_cycles"):
        write_profile(tmp_path / "run.pvl", bad)
    bad = schema.ProfileData(**{**small_data.__dict__, "ops": small_data.ops.drop(columns=["flops"])})
    with pytest.raises(ProfileError, match="table 'ops' lacks"):
        write_profile(tmp_path / "run.pvl", bad)
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ProfileError, match="directory"):
        write_profile(tmp_path, small_data)


@pytest.fixture(scope="module")
def killed_writers(tmp_path_factory, good):
    """One writer process killed with SIGKILL while two threads each hold a profile write in the middle of its
    file: one over an older, valid profile, one where there was none (a process each cost a second interpreter
    start and its imports for the same kill).  Returns the two targets and the older profile's bytes."""
    over = tmp_path_factory.mktemp("over") / "run.pvl"
    shutil.copy(good, over)  # an older, valid profile at the target survives the killed write
    before = over.read_bytes()
    fresh = tmp_path_factory.mktemp("fresh") / "fresh.pvl"
    script = textwrap.dedent("""
        import sys, threading
        from popvision_lite.testing.synthetic import write_synthetic
        said = threading.Lock()  # one whole line per writer (two print calls interleave their words)
        def write(target):
            def progress(done, total):
                with said:
                    print("batch", done, target, flush=True)
                threading.Event().wait()  # hold this writer mid-file until the test kills the process
            write_synthetic(target, num_ipus=1, tiles_per_ipu=64, num_steps=5000, progress=progress)
        writers = [threading.Thread(target=write, args=(t,)) for t in sys.argv[1:]]
        for w in writers:
            w.start()
        for w in writers:
            w.join()
    """)
    proc = subprocess.Popen([sys.executable, "-c", script, str(over), str(fresh)], stdout=subprocess.PIPE, text=True)
    try:
        held = []
        for _ in range(2):
            line = proc.stdout.readline()
            assert line.startswith("batch"), line
            held.append(line.split()[-1])
        assert sorted(held) == sorted([str(over), str(fresh)])  # both writers are mid-file
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL
    return over, before, fresh


def test_killed_writer_leaves_no_valid_file(killed_writers):
    target, before, _ = killed_writers
    assert target.read_bytes() == before
    leftovers = [p for p in target.parent.iterdir() if p != target]
    assert leftovers, "expected the killed writer's temp file"
    for p in leftovers:
        assert p.name.startswith(".run.pvl.") and p.suffix == ".tmp"
        with pytest.raises(ProfileError):
            open_profile(p).close()
    with open_profile(target) as p:
        assert p.num_steps == 120


def test_killed_writer_without_previous_file(killed_writers):
    _, _, target = killed_writers
    assert not target.exists()
    left = list(target.parent.iterdir())
    assert left and all(p.name.startswith(".fresh.pvl.") for p in left)


def test_writer_casts_to_schema_dtypes_and_refuses_bad_values(small_data, tmp_path):
    ops = small_data.ops.copy()
    ops["op_id"] = ops["op_id"].astype(np.int64)        # wider than the schema's int32: cast
    ops["flops"] = ops["flops"].astype(np.float64)      # integral floats: cast
    ops["plan"] = np.arange(len(ops))                   # text column given numbers: stored as text
    out = write_profile(tmp_path / "ok.pvl", schema.ProfileData(**{**small_data.__dict__, "ops": ops}))
    with open_profile(out) as p:
        assert p.stored_table("ops")["op_id"].dtype == np.int32 and p.stored_table("ops")["flops"].dtype == np.int64
        assert list(p.stored_table("ops")["plan"]) == [str(i) for i in range(len(ops))]
    for col, bad, words in (("flops", np.nan, "NaN"), ("flops", 0.5, "fractional"),
                            ("ipu", 40_000, "outside int16"), ("cycles", "lots", "numeric")):
        o = small_data.ops.copy()
        o[col] = o[col].astype(object)
        o.loc[0, col] = bad
        with pytest.raises(ProfileError, match=words) as ei:
            write_profile(tmp_path / "bad.pvl", schema.ProfileData(**{**small_data.__dict__, "ops": o}))
        assert f"table 'ops' column '{col}'" in str(ei.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ok.pvl"]


def test_reader_casts_wider_ints_and_rejects_text_for_numbers(copy):
    f = copy()
    with h5py.File(f, "r+") as h:
        v = h["tables/steps/op_id"][()]
        del h["tables/steps/op_id"]
        h["tables/steps"].create_dataset("op_id", data=v.astype(np.int64))
    with open_profile(f) as p:
        assert p.stored_table("steps")["op_id"].dtype == np.int32
        np.testing.assert_array_equal(p.stored_table("steps")["op_id"], v)
    with h5py.File(f, "r+") as h:
        h["tables/steps/op_id"].attrs["encoding"] = "dictionary"
        h["tables/steps"].create_dataset("op_id.categories", data=np.array(["a"], dtype=object),
                                         dtype=h5py.string_dtype())
    _expect(f, "table 'steps' column 'op_id'", "expected int32")


def test_cancel_from_progress_propagates_and_cleans_up(tmp_path):
    from popvision_lite.testing.synthetic import write_synthetic

    class Cancelled(Exception):
        pass

    def cancel(done, total):
        raise Cancelled("user pressed cancel")

    with pytest.raises(Cancelled):
        write_synthetic(tmp_path / "c.pvl", num_ipus=1, tiles_per_ipu=8, num_steps=3000, progress=cancel)
    assert list(tmp_path.iterdir()) == []


def test_real_write_failure_inside_hdf5_is_clean(tmp_path):
    """A real write failure (here: a 400 kB file size limit, EFBIG - like a full disk, without needing root
    to mount a small filesystem) gives a ProfileError, leaves no file, does not crash the process (HDF5 2.0
    segfaulted when the writer still let HDF5 write to disk and a failed file was closed), and later
    writes work."""
    script = textwrap.dedent(f"""
        import resource, signal, os, gc
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (400_000, resource.RLIM_INFINITY))
        from popvision_lite.errors import ProfileError
        from popvision_lite.testing.synthetic import write_synthetic
        for i in range(2):
            try:
                write_synthetic({str(tmp_path / 'big.pvl')!r}, num_ipus=1, tiles_per_ipu=1472, num_steps=2000,
                                noise=0.05)
                print("NO ERROR")
            except ProfileError as e:
                print("ERR", e)
            gc.collect()
        write_synthetic({str(tmp_path / 'small.pvl')!r}, num_ipus=1, tiles_per_ipu=8, num_steps=20)
        print("SMALL OK")
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    assert lines[:2] == [f"ERR {tmp_path / 'big.pvl'}: file size limit reached while writing the profile"] * 2
    assert lines[2] == "SMALL OK"
    # the failed temp files are gone
    assert sorted(p.name for p in tmp_path.iterdir()) == ["small.pvl"]
    assert "Traceback" not in out.stderr
