"""The entry point (popvision_lite/cli/main.py): a mistyped sub-command, a missing file or no display is
exit 2 with a message before Qt starts, never an empty window or a Qt abort."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _gui_main(monkeypatch, argv, env):
    """Run the GUI entry with a patched environment; run_app must never be reached."""
    import popvision_lite.gui.app as app
    from popvision_lite import cli

    for k in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM"):
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(app, "run_app", lambda args: (_ for _ in ()).throw(AssertionError("GUI started")))
    return cli.main(argv)


def test_mistyped_subcommand_is_exit_2_not_a_window(monkeypatch, capsys):
    import pytest

    with pytest.raises(SystemExit) as e:
        _gui_main(monkeypatch, ["emulat", "bert-tiny"], {"QT_QPA_PLATFORM": "offscreen"})
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "emulat: no such file" in err and "not a sub-command" in err and "emulate" in err


def test_missing_compare_file_is_exit_2(monkeypatch, capsys, tmp_path):
    import pytest

    a = ROOT / "sample_profiles" / "mlp_mk2.pvl"
    with pytest.raises(SystemExit) as e:
        _gui_main(monkeypatch, ["--compare", str(a), str(tmp_path / "b.pvl")], {"QT_QPA_PLATFORM": "offscreen"})
    assert e.value.code == 2
    assert f"{tmp_path / 'b.pvl'}: no such file" in capsys.readouterr().err


def test_no_display_is_a_clear_exit_2(monkeypatch, capsys):
    """Without a display Qt aborted the process (exit 134) with a plugin list."""
    import sys

    import pytest

    if not sys.platform.startswith("linux"):
        pytest.skip("the display check applies on Linux only")
    with pytest.raises(SystemExit) as e:
        _gui_main(monkeypatch, [str(ROOT / "sample_profiles" / "mlp_mk2.pvl")], {})
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "no display" in err and "popvision-lite export" in err


def test_version_without_a_display_and_as_a_module(monkeypatch, capsys):
    import subprocess
    import sys

    import pytest

    from popvision_lite import __version__

    with pytest.raises(SystemExit) as e:
        _gui_main(monkeypatch, ["--version"], {})  # no display needed, no window
    assert e.value.code == 0
    line = capsys.readouterr().out
    assert line.startswith(f"popvision-lite {__version__} (Python ") and "h5py " in line and "HDF5 " in line
    assert line.count("\n") == 1  # one line, however narrow the terminal
    # python -m popvision_lite is the same command (for an environment whose scripts are not on PATH)
    r = subprocess.run([sys.executable, "-m", "popvision_lite", "--version"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and r.stdout == line
    r = subprocess.run([sys.executable, "-m", "popvision_lite", "info"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "usage: popvision-lite info" in r.stderr
