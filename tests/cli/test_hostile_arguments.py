"""Command-line and TOML abuse (issue 19): every bad option, field, special file or destination exits 2
with a one-line message naming it, before any work; outputs never replace special files."""

from __future__ import annotations

import contextlib
import io
import os
import stat
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from popvision_lite import atomic_io as _atomic
from popvision_lite.cli import main
from popvision_lite.errors import ConfigError, ProfileError
from popvision_lite.profile.csv_export import neutralise_formulas, write_frame_csv

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = str(ROOT / "sample_profiles" / "mlp_mk2.pvl")


def _run(argv, tmp_path):
    err = io.StringIO()
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            try:
                rc = main(list(argv))
            except SystemExit as e:
                rc = e.code
    finally:
        os.chdir(cwd)
    return rc, err.getvalue().strip()


TOML = {
    "ffn.toml": 'model = "bert"\nffn = -5\n',
    "batch.toml": 'model = "mlp"\nbatch = 99999999999999999999\n',
    "lr.toml": 'model = "mlp"\nlr = inf\n',
    "nan.toml": 'model = "mlp"\n[model_args]\nlr = nan\n',
    "deep.toml": 'model = "mlp"\nx = ' + "[" * 50_000 + "]" * 50_000 + "\n",
    "nest.toml": 'model = "mlp"\n[model_args.a.b.c.d.e.f.g.h.i.j]\nx = 1\n',
    "float.toml": 'model = "mlp"\nbatch = 2.5\n',
    "mask.toml": 'model = "bert"\n[model_args]\nseq = 128\nmask_tokens = 4000\n',
}

CASES = [
    (["emulate", "mlp", "-o", "/dev/null"], "/dev/null"),
    (["emulate", "mlp", "-o", "/dev/full"], "/dev/full"),
    (["emulate", "mlp", "-o", "newdir/"], "newdir/"),
    (["emulate", "--config", "ffn.toml", "-o", "a.pvl"], "ffn"),
    (["emulate", "--config", "batch.toml", "-o", "a.pvl"], "batch"),
    (["emulate", "--config", "lr.toml", "-o", "a.pvl"], "lr"),
    (["emulate", "--config", "nan.toml", "-o", "a.pvl"], "lr"),
    (["emulate", "--config", "deep.toml", "-o", "a.pvl"], "deep.toml"),
    (["emulate", "--config", "nest.toml", "-o", "a.pvl"], "nest.toml"),
    (["emulate", "--config", "float.toml", "-o", "a.pvl"], "batch"),
    (["emulate", "mlp", "--config", "/dev/zero", "-o", "a.pvl"], "/dev/zero"),
    (["emulate", "mlp", "--batch", "1000000000", "-o", "a.pvl"], "--batch"),
    (["emulate", "mlp", "--hidden", "1000000", "-o", "a.pvl"], "--hidden"),
    (["emulate", "gnn", "--nodes", "1000000000", "-o", "a.pvl"], "--nodes"),
    (["emulate", "bert", "--layers", "100000", "-o", "a.pvl"], "--layers"),
    (["emulate", "bert", "--hidden", "60000", "--heads", "4", "-o", "a.pvl"], "--hidden"),
    # timing-only runs hold no values but still index their largest tensor per element
    (["emulate", "bert", "--timing-only", "--seq", "65536", "-o", "a.pvl"], "--seq"),
    (["emulate", "resnet", "--timing-only", "--image", "8192", "-o", "a.pvl"], "--image"),
    (["emulate", "--config", "mask.toml", "-o", "a.pvl"], "mask.toml: field 'mask_tokens'"),
    (["export", SAMPLE, "--view", "memory", "--dpi", "nan", "-o", "x.png"], "--dpi"),
    (["export", SAMPLE, "--view", "memory", "--dpi", "inf", "-o", "x.png"], "--dpi"),
    (["export", SAMPLE, "--view", "memory", "--dpi", "1e300", "-o", "x.png"], "--dpi"),
    (["export", SAMPLE, "--view", "memory", "--width", "1e9", "-o", "x.png"], "--width"),
    (["export", SAMPLE, "--chrome-trace", "--tiles", "0-99999999", "-o", "x.json"], "--tiles"),
    (["export", SAMPLE, "--chrome-trace", "--tiles", "0-1472", "-o", "x.json"], "--tiles"),
]


@pytest.mark.parametrize("argv,name", CASES, ids=[" ".join(a[:3]) + " " + n for a, n in CASES])
def test_bad_input_exits_2_naming_it(tmp_path, argv, name):
    for fname, text in TOML.items():
        (tmp_path / fname).write_text(text)
    t0 = time.process_time()  # CPU time (all threads of this process): not stretched by a busy machine
    rc, msg = _run(argv, tmp_path)
    assert rc == 2, (rc, msg[-500:])
    assert name in msg, msg
    assert "Traceback" not in msg
    assert time.process_time() - t0 < 20  # refused before any long work
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)  # the device node is still a device


def test_dev_null_is_never_replaced_by_a_write():
    for fn in (lambda: _atomic.write_bytes_atomic("/dev/null", b"x"),
               lambda: _atomic.check_writable("/dev/null")):
        with pytest.raises(ProfileError, match="character device"):
            fn()
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX")
def test_fifo_destination_and_config_are_refused(tmp_path):
    fifo = tmp_path / "p.pvl"
    os.mkfifo(fifo)
    with pytest.raises(ProfileError, match="FIFO"):
        _atomic.write_bytes_atomic(fifo, b"x")
    from popvision_lite.emulator.run_config import load_run_config

    with pytest.raises(ConfigError, match="not a regular file"):
        load_run_config(fifo)  # used to block for ever


def test_trailing_slash_is_a_folder(tmp_path):
    (tmp_path / "out").mkdir()
    with pytest.raises(ProfileError, match="is a folder"):
        _atomic.check_destination(str(tmp_path / "out") + "/")
    with pytest.raises(ProfileError, match="trailing slash"):
        _atomic.check_destination(str(tmp_path / "newdir") + "/")
    assert not (tmp_path / "newdir").exists()


def test_stale_temp_files_of_a_killed_writer_are_removed_on_the_next_write(tmp_path):
    target = tmp_path / "run.csv"
    stale = tmp_path / ".run.csv.abcd1234.tmp"
    stale.write_bytes(b"complete but orphaned")
    other = tmp_path / ".other.csv.abcd1234.tmp"  # another target's: kept
    other.write_bytes(b"x")
    mine_alive = tmp_path / ".run.csv.zzzz9999.tmp"  # a live writer holds its lock: kept
    mine_alive.write_bytes(b"")
    fd = os.open(mine_alive, os.O_RDWR)
    _atomic.lock_temp(fd)
    try:
        _atomic.write_bytes_atomic(target, b"data")
        assert target.read_bytes() == b"data"
        assert not stale.exists()
        assert other.exists()
        if sys.platform != "win32":
            assert mine_alive.exists()
    finally:
        os.close(fd)


def test_csv_formula_injection_is_neutralised(tmp_path):
    df = pd.DataFrame({"name": ["=HYPERLINK(\"http://x\")", "+1", "-cmd", "@SUM(A1)", "ok", "\tx"],
                       "cycles": [-1, 2, 3, 4, 5, 6]})
    n = write_frame_csv(df, tmp_path / "t.csv")
    text = (tmp_path / "t.csv").read_text()
    assert n == 6
    for bad in ("=HYPERLINK", "+1", "-cmd", "@SUM"):
        assert f"\n'{bad}" in text or f"\n\"'{bad}" in text, text
    assert "\nok,5" in text and "-1" in text  # numbers untouched
    assert neutralise_formulas(df)["cycles"].tolist() == df["cycles"].tolist()


def test_export_csv_of_a_profile_neutralises_op_names(tmp_path):
    import sys as _sys

    _sys.path.insert(0, str(ROOT))
    from bench import fuzz_profiles as fz
    from popvision_lite.profile.csv_export import export_csv
    from popvision_lite.profile.reader import open_profile

    base = fz.make_base(tmp_path)
    import numpy as np

    with fz._h5(base) as h:
        cats = list(h["tables/ops/name.categories"][()])
        cats[0] = b"=HYPERLINK(\"http://evil\")"
        del h["tables/ops/name.categories"]
        h["tables/ops/name.categories"] = np.array(cats, dtype=f"S{max(map(len, cats))}")
    with open_profile(base) as p:
        export_csv(p, "ops", tmp_path / "ops.csv")
    text = (tmp_path / "ops.csv").read_text()
    assert "'=HYPERLINK" in text and ",=HYPERLINK" not in text
