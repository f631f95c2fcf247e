"""A sweep folder stays inside itself (issue 45, decision 0210): files planted in it - links to someone's file,
FIFOs, devices, a ``profiles`` link to another folder, rows that name other files or hold garbage - never make a
sweep write, create, delete or read anything outside it, and never hang it."""

from __future__ import annotations

import json
import os
import socket

import pytest

from popvision_lite.errors import ConfigError
from popvision_lite.sweep import confined, engine, folder
from popvision_lite.sweep import grid as g
from popvision_lite.sweep import point as pt

TINY = {"hidden": 32, "layers": 2}
VICTIM_TEXT = "precious 45 bytes of user data, do not lose!!\n"


def _points(grid=None):
    base = g.Base(model="mlp", model_args=dict(TINY))
    grid = g.check_grid(grid or {"batch": [8, 16]}, "test")
    return g.expand(base, grid), list(grid)


@pytest.fixture
def victim(tmp_path):
    v = tmp_path / "victim.txt"
    v.write_text(VICTIM_TEXT)
    return v


def _refused(out, needle):
    pts, names = _points()
    with pytest.raises(ConfigError) as e:
        engine.run_sweep(pts, out, grid_names=names, client=object())  # refused before the client is used
    assert needle in str(e.value) and "sweep folder file" in str(e.value)
    return str(e.value)


@pytest.mark.parametrize("name", [folder.LOCK, folder.COMMIT_LOCK, folder.RUN, "sweep.csv"])
def test_a_planted_link_in_place_of_a_folder_file_is_refused_and_its_target_untouched(tmp_path, victim, name):
    out = tmp_path / "s"
    out.mkdir()
    (out / name).symlink_to(victim)
    _refused(out, "is a symbolic link")
    assert victim.read_text() == VICTIM_TEXT
    # and a link to a file that does not exist yet is never created through
    (out / name).unlink()
    (out / name).symlink_to(tmp_path / "created")
    _refused(out, "is a symbolic link")
    assert not (tmp_path / "created").exists()


@pytest.mark.parametrize("name", [folder.LOCK, folder.RUN, folder.COMMIT_LOCK])
@pytest.mark.parametrize("kind", ["fifo", "folder"])
def test_a_fifo_or_folder_in_place_of_a_folder_file_is_refused_without_blocking(tmp_path, name, kind):
    out = tmp_path / "s"
    out.mkdir()
    (os.mkfifo if kind == "fifo" else os.mkdir)(out / name)
    _refused(out, "FIFO" if kind == "fifo" else "is a folder")


def test_the_lock_itself_refuses_what_the_folder_check_would_have_caught(tmp_path, victim):
    """The opens check the descriptor too (a file swapped in after the folder check): no link, no FIFO, no hard
    link to another file, never opened for writing."""
    out = tmp_path / "s"
    out.mkdir()
    (out / folder.LOCK).symlink_to(victim)
    with pytest.raises(ConfigError, match="symbolic link"):
        folder.FolderLock(out).acquire()
    (out / folder.LOCK).unlink()
    os.link(victim, out / folder.LOCK)  # a hard link to the user's file
    with pytest.raises(ConfigError, match="2 hard links"):
        folder.FolderLock(out).acquire()
    assert victim.read_text() == VICTIM_TEXT
    (out / folder.LOCK).unlink()
    os.mkfifo(out / folder.COMMIT_LOCK)
    with pytest.raises(ConfigError, match="FIFO"), folder.commit(out, "run"):
        pass
    os.unlink(out / folder.COMMIT_LOCK)
    os.mkfifo(out / folder.RUN)
    assert folder.is_current(out, "run") is False  # a FIFO run file: no run is current (and nothing blocks)
    os.unlink(out / folder.RUN)
    (out / folder.RUN).symlink_to("/dev/zero")
    assert folder.is_current(out, "run") is False


def test_profiles_linking_to_another_folder_is_refused_and_nothing_there_is_deleted(tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    for n in (".keep.tmp", ".model.abc.tmp", "data.pvl"):
        (other / n).write_text("theirs")
    out = tmp_path / "s"
    out.mkdir()
    (out / pt.PROFILES).symlink_to(other, target_is_directory=True)
    _refused(out, "/profiles': it is a symbolic link, not a folder")
    assert sorted(p.name for p in other.iterdir()) == [".keep.tmp", ".model.abc.tmp", "data.pvl"]
    # the clean-up alone does not reach through it either, and leaves a FIFO or a link of a temp name alone
    (out / pt.ROWS).mkdir()
    os.mkfifo(out / pt.ROWS / ".fifo.tmp")
    (out / pt.ROWS / ".link.tmp").symlink_to(other / ".keep.tmp")
    (out / ".left.x.tmp").write_text("")
    assert engine.remove_temp_files(out) == 1
    assert sorted(p.name for p in other.iterdir()) == [".keep.tmp", ".model.abc.tmp", "data.pvl"]
    assert {p.name for p in (out / pt.ROWS).iterdir()} == {".fifo.tmp", ".link.tmp"}


def test_a_point_whose_profiles_folder_is_a_link_fails_and_writes_nothing_there(tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    out = tmp_path / "s"
    out.mkdir()
    (out / pt.PROFILES).symlink_to(other, target_is_directory=True)
    p = _points()[0][0]
    row = pt.run_point(p.spec, str(out), p.config_hash, p.key)
    assert row["status"] == "failed" and "/profiles': it is a symbolic link" in row["error"]
    assert list(other.iterdir()) == []


# ----------------------------------------------------------------------------- resume
def _stored(tmp_path, p, **change):
    """A sweep folder holding a valid ok row of point ``p`` and a (stand-in) profile file, the row changed."""
    out = tmp_path / "s"
    (out / pt.ROWS).mkdir(parents=True, exist_ok=True)
    (out / pt.PROFILES).mkdir(exist_ok=True)
    (out / pt.profile_relpath(p.key)).write_bytes(b"stand-in profile")
    row = pt.base_row(p.spec, p.config_hash, p.key) | dict(
        status="ok", error="", profile=pt.profile_relpath(p.key), fits=True, chips=1, samples_per_second=123.0,
        step_seconds=0.01, total_cycles=1000, cost_per_1m_samples_usd=float("nan"), host=socket.gethostname())
    row.update(change)
    (out / pt.ROWS / pt.row_name(p.key)).write_text(json.dumps(row))
    return out


def test_a_valid_stored_row_is_resumed_with_the_points_own_grid_values(tmp_path):
    p = _points()[0][0]
    out = _stored(tmp_path, p, batch=999, model="planted")  # the file's grid values are not the point's
    row = engine.resumable_row(out, p)
    assert row is not None and row["samples_per_second"] == 123.0
    assert row["batch"] == p.spec["args"]["batch"] and row["model"] == "mlp"


@pytest.mark.parametrize("change, needle", [
    (dict(profile="/etc/passwd"), "names profile '/etc/passwd'"),
    (dict(profile="../victim.txt"), "names profile '../victim.txt'"),
    (dict(samples_per_second="x"), "'samples_per_second' is 'x', not a number"),
    (dict(total_cycles=10 ** 30), "not a finite number below 2^63"),
    (dict(fits="yes"), "'fits' is 'yes'"),
    (dict(error="e" * 5000), "5,000 characters"),
    (dict(status="resumed"), "'status' is 'resumed'"),
    (dict(layer_split=[{"a": 1}]), "not a config value"),
])
def test_a_stored_row_that_fails_the_row_checks_is_not_resumed(tmp_path, change, needle):
    p = _points()[0][0]
    out = _stored(tmp_path, p, **change)
    notes: list[str] = []
    assert engine.resumable_row(out, p, notes) is None
    assert len(notes) == 1 and needle in notes[0], notes


@pytest.mark.parametrize("plant", ["fifo", "dev_zero", "link_to_valid_row", "huge", "deep"])
def test_a_stored_row_that_is_not_a_small_regular_file_is_not_read(tmp_path, plant):
    """A FIFO row hung resume for ever and a link to /dev/zero read 3 GiB: now neither is opened past its check."""
    p = _points()[0][0]
    out = _stored(tmp_path, p)
    rowfile = out / pt.ROWS / pt.row_name(p.key)
    good = rowfile.read_text()
    rowfile.unlink()
    if plant == "fifo":
        os.mkfifo(rowfile)
    elif plant == "dev_zero":
        rowfile.symlink_to("/dev/zero")
    elif plant == "link_to_valid_row":
        (tmp_path / "elsewhere.json").write_text(good)
        rowfile.symlink_to(tmp_path / "elsewhere.json")
    elif plant == "huge":
        rowfile.write_text(good[:-1] + ', "pad": "' + "x" * (2 << 20) + '"}')
    else:
        rowfile.write_text("[" * 100 + "]" * 100)
    notes: list[str] = []
    assert engine.resumable_row(out, p, notes) is None
    want = {"fifo": "FIFO", "dev_zero": "symbolic link", "link_to_valid_row": "symbolic link",
            "huge": "allowed for a sweep_row file", "deep": "nested more than"}[plant]
    assert want in notes[0], notes


def test_a_row_whose_profile_is_a_link_is_not_resumed(tmp_path, victim):
    p = _points()[0][0]
    out = _stored(tmp_path, p)
    prof = out / pt.profile_relpath(p.key)
    prof.unlink()
    prof.symlink_to(victim)
    assert engine.resumable_row(out, p) is None
    assert not confined.exists_inside(out, pt.profile_relpath(p.key))


def test_the_lock_holders_text_reaches_the_message_without_control_characters(tmp_path):
    out = tmp_path / "s"
    out.mkdir()
    held = folder.FolderLock(out).acquire()
    try:
        os.pwrite(held._fd, "pid 1 \x1b]0;pwned\x07\x1b[2J\u202eevil\r\u009b31m".encode(), 0)
        with pytest.raises(ConfigError) as e:
            folder.FolderLock(out).acquire()
    finally:
        held.release()
    msg = str(e.value)
    assert "another sweep is running" in msg and "pwned" in msg
    assert not any(c in msg for c in "\x1b\x07\r\u202e\u009b")


def test_open_sweep_of_a_folder_does_not_follow_its_files_out_of_it(tmp_path):
    from popvision_lite.errors import ProfileError
    from popvision_lite.sweep.results import open_sweep

    elsewhere = tmp_path / "elsewhere.csv"
    elsewhere.write_text("point,status,error,profile,config_hash,samples_per_second,fits\n0,ok,,p.pvl,h,1.0,True\n")
    out = tmp_path / "s"
    out.mkdir()
    (out / "sweep.csv").symlink_to(elsewhere)
    with pytest.raises(ProfileError, match="symbolic link"):
        open_sweep(out)
    assert len(open_sweep(elsewhere)) == 1  # the file itself, named by the user, opens
