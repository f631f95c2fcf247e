"""The process entry point (cli.main.program): ``emulate`` leaves with os._exit once its profile is written and
renamed into place (cli.main.FAST_EXIT, decision 0420); nothing it writes may be lost on the way out."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import h5py

from popvision_lite.cli.main import FAST_EXIT


def test_emulate_in_its_own_process_loses_nothing_on_the_fast_exit(tmp_path):
    assert "emulate" in FAST_EXIT
    out = tmp_path / "run.pvl"
    r = subprocess.run([sys.executable, "-m", "popvision_lite.cli", "emulate", "mlp", "--hidden", "64", "--layers",
                        "1", "--batch", "4", "--timing-only", "-v", "-o", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    # stdout is a pipe (block-buffered): the whole end-of-run text came through, its last line included
    assert r.stdout.splitlines()[-1] == f"profile: {out}"
    assert "fits: yes" in r.stdout
    # the log handler's records (-v: info) reached stderr
    assert "popvision-lite emulate: emulated mlp" in r.stderr
    # the profile is complete and in place, and no temporary file is left beside it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.pvl"]
    with h5py.File(out, "r") as f:
        assert bool(f.attrs["complete"])


def test_an_error_exit_code_survives_the_fast_exit(tmp_path):
    """The console entry point (not just main()) exits 2 with a one-line message on stderr, no traceback, nothing
    on stdout and nothing written.  (The bad arguments one by one: tests/cli/test_argument_errors.py, in process.)"""
    out = tmp_path / "missing" / "run.pvl"
    r = subprocess.run([sys.executable, "-m", "popvision_lite.cli", "emulate", "mlp", "--timing-only", "-o",
                        str(out)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 2
    assert r.stderr.startswith("popvision-lite emulate: error: argument -o/--output:")
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr and r.stdout == ""
    assert list(tmp_path.iterdir()) == []


def test_leave_flushes_buffered_output_and_skips_the_exit_handlers(tmp_path):
    marker = tmp_path / "atexit-ran"
    script = textwrap.dedent(f"""
        import atexit, logging, sys
        from popvision_lite.cli import logs
        from popvision_lite.cli.main import leave
        atexit.register(lambda: open({str(marker)!r}, "w").close())
        logs.configure("prog")
        logging.getLogger("popvision_lite.x").warning("last words")
        sys.stdout.write("no newline, still buffered")
        leave(3)
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert r.returncode == 3
    assert r.stdout == "no newline, still buffered"
    assert r.stderr == "prog: warning: last words\n"
    assert not marker.exists()  # os._exit: what would have freed the process's objects did not run
