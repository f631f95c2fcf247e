"""Diagnostics go through ``logging`` under the ``popvision_lite`` logger; every sub-command maps ``-q`` / ``-v`` /
``-vv`` onto it (cli/logs.py), and a program that imports the package sees nothing until it configures logging."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_profiles" / "mlp_mk2.pvl"


def _config(tmp_path) -> Path:
    cfg = tmp_path / "run.toml"
    cfg.write_text('model = "mlp"\n[model_args]\nseq = 32\nbatch = 4\nhidden = 16\nlayers = 2\n')
    return cfg


def test_the_package_adds_only_a_null_handler():
    import popvision_lite  # noqa: F401

    handlers = logging.getLogger("popvision_lite").handlers
    assert [type(h) for h in handlers] == [logging.NullHandler]


@pytest.mark.parametrize("flags, warned", [([], True), (["-v"], True), (["-q"], False)])
def test_a_warning_of_emulate_follows_the_flags(cli, tmp_path, flags, warned):
    rc, out, err = cli(["emulate", "--config", _config(tmp_path), "--timing-only", "-o", tmp_path / "r.pvl", *flags])
    assert rc == 0, err
    line = "popvision-lite emulate: warning: " + str(_config(tmp_path)) + ": field 'seq' is ignored"
    assert (line in err) is warned, err
    assert ("% done" in err) is (flags != ["-q"]), err  # -q: no progress bar either
    assert ("emulated mlp on ipu-mk2" in err) is (flags == ["-v"]), err  # -v: the run's info record


def test_debug_records_name_their_module(cli):
    rc, out, err = cli(["info", SAMPLE, "-vv"])
    assert rc == 0
    assert "popvision-lite info: debug [popvision_lite.profile.reader]: opened " in err, err
    rc, out, err = cli(["info", SAMPLE])
    assert rc == 0 and "debug" not in err and err == "", err


def test_quiet_and_verbose_together_are_refused(cli):
    rc, out, err = cli(["info", SAMPLE, "-q", "-v"])
    assert rc == 2 and "not allowed with argument" in err, err


def test_a_library_user_routes_the_records(tmp_path, caplog):
    """Without the CLI the records reach whatever the program configured (here pytest's capture)."""
    from popvision_lite.emulator.models.config import make_config
    from popvision_lite.emulator.models.emulated import run_model

    with caplog.at_level(logging.INFO, logger="popvision_lite"):
        run_model(make_config("mlp", batch=4, hidden=16, layers=2), timing_only=True)
    recs = [r for r in caplog.records if r.name == "popvision_lite.emulator.models.emulated"]
    assert len(recs) == 1 and recs[0].levelno == logging.INFO
    assert "emulated mlp on ipu-mk2 (timing only)" in recs[0].getMessage()


def test_control_characters_in_a_record_are_not_written(cli, tmp_path):
    """Names in records come from files: the stderr handler writes them as terminal_text does."""
    from popvision_lite.cli import logs

    logs.configure("popvision-lite test")
    import sys
    from io import StringIO

    buf = StringIO()
    old, sys.stderr = sys.stderr, buf
    try:
        logging.getLogger("popvision_lite.test").warning("a name \x1b]52;c;aGk=\x07 here")
    finally:
        sys.stderr = old
    assert buf.getvalue() == "popvision-lite test: warning: a name \ufffd]52;c;aGk=\ufffd here\n"


def test_a_library_that_reconfigured_logging_does_not_silence_a_command(cli, tmp_path):
    """logging.config.dictConfig (import-linter's CLI runs it, in the same process as the tests) disables every
    logger that exists; a command's warnings still show."""
    import logging.config

    import popvision_lite.cli.emulate  # noqa: F401  (its logger exists before the reconfiguration)

    loggers = [lg for lg in logging.root.manager.loggerDict.values() if isinstance(lg, logging.Logger)]
    was = {lg: lg.disabled for lg in loggers}
    try:
        logging.config.dictConfig({"version": 1})
        assert logging.getLogger("popvision_lite.cli.emulate").disabled
        rc, out, err = cli(["emulate", "--config", _config(tmp_path), "--timing-only", "-o", tmp_path / "r.pvl"])
        assert rc == 0 and "popvision-lite emulate: warning: " in err, err
    finally:  # the other tests' loggers as they were
        for lg, disabled in was.items():
            lg.disabled = disabled
