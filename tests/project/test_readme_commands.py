"""The README's two set-up commands are the contract with a new user, and CI must run the same
test command (a command that drifts from CI's would fail on a fresh machine unnoticed)."""

import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _readme_commands():
    text = (ROOT / "README.md").read_text()
    section = text.split("## Set up", 1)[1].split("\n## ", 1)[0]
    return [b.strip() for b in re.findall(r"```\n(.*?)```", section, re.S) if "pip install" in b]


def test_readme_has_exactly_two_setup_commands():
    cmds = _readme_commands()
    assert len(cmds) == 2, cmds
    app, tests = cmds
    assert "popvision-lite" in app and "sample_profiles/" in app
    assert "pytest" in tests


def test_readme_app_command_opens_a_bundled_sample():
    app = _readme_commands()[0]
    sample = shlex.split(app.split("&&")[-1])[-1]
    assert (ROOT / sample).is_file(), sample


def test_ci_runs_the_readme_test_command():
    tests = _readme_commands()[1]
    ci = (ROOT / ".ci" / "run").read_text()
    assert tests in ci.splitlines()
    assert "QT_QPA_PLATFORM=offscreen" in ci and "rm -rf .venv" in ci
