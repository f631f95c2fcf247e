"""Tests of popvision_lite/cli: every sub-command's output, exit codes (0 ok, 2 bad input, 3 out of memory)
and messages, in process through ``main(argv)`` or as a child process where a kill or a missing display
is the point.  ``cli(argv)`` runs ``main`` in process and returns (exit code, stdout, stderr)."""

from __future__ import annotations

import pytest


@pytest.fixture
def cli(capsys):
    from popvision_lite.cli import main

    def run(argv) -> tuple[int, str, str]:
        try:
            rc = main([str(a) for a in argv])
        except SystemExit as e:  # argparse errors
            rc = e.code
        cap = capsys.readouterr()
        return rc, cap.out, cap.err

    return run
