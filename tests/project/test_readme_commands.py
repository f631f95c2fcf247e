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


# ---------------------------------------------------------------- every command of the README, checked for drift
FILE_SUFFIXES = (".pvl", ".toml", ".onnx", ".json", ".csv")
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _cli_commands(text: str = README) -> list[tuple[str, list[str], str]]:
    """(line, argv after the program, comment) of every ``popvision-lite`` / ``python -m popvision_lite``
    command in the README's shell blocks, continuation lines joined, each ``&&`` segment on its own."""
    out = []
    blocks = [body for lang, body in re.findall(r"```(\w*)\n(.*?)```", text, re.S) if lang in ("", "sh", "bash", "shell")]
    # inline code in the prose too: `popvision-lite emulate --config ...` (a span may wrap over lines)
    blocks.append("\n".join(" ".join(m.split()) for m in re.findall(r"(?<!`)`(popvision-lite [^`]+)`",
                                                                       re.sub(r"```.*?```", "", text, flags=re.S))))
    for body in blocks:
        for line in re.sub(r"\\\n\s*", " ", body).splitlines():
            m = re.search(r"\s#\s", line)
            cmd, comment = (line[:m.start()], line[m.end():].strip()) if m else (line, "")
            for seg in cmd.split("&&"):
                words = shlex.split(seg)
                if words and Path(words[0]).name == "popvision-lite":
                    out.append((line.strip(), words[1:], comment))
                elif words[1:3] == ["-m", "popvision_lite"] and Path(words[0]).name.startswith("python"):
                    out.append((line.strip(), words[3:], comment))
    return out


def _parse(argv: list[str]):
    """(sub-command or None for the app, namespace) through the real parsers: an option the command does not
    have any more, or a value it refuses, is argparse's exit 2 here."""
    import importlib

    from popvision_lite.cli.main import SUBCOMMANDS, _gui_parser, _Parser

    if argv and argv[0] in SUBCOMMANDS:
        module = importlib.import_module(SUBCOMMANDS[argv[0]][0])
        parser = _Parser(prog=f"popvision-lite {argv[0]}")
        module.add_arguments(parser)
        return argv[0], parser.parse_args(argv[1:])
    return None, _gui_parser().parse_args(argv)


def _strings(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list | tuple):
        return [x for v in value for x in _strings(v)]
    return []


def test_the_command_finder_sees_blocks_continuations_and_chains():
    text = "```\npython3 -m venv .venv && .venv/bin/popvision-lite a.pvl\npopvision-lite emulate mlp \\\n" \
           "    -o b.pvl   # note\npython -m popvision_lite --version\n```\n```python\npopvision-lite x\n```\n"
    assert [(argv, comment) for _, argv, comment in _cli_commands(text)] == [
        (["a.pvl"], ""), (["emulate", "mlp", "-o", "b.pvl"], "note"), (["--version"], "")]


def test_every_readme_command_parses_and_its_input_files_exist(capsys):
    """Options parse with today's parsers, and each file a command reads ships in the repository, is written by
    another README command (its -o, or under its output folder), or the line says it is the reader's own."""
    commands = _cli_commands()
    assert len(commands) >= 20, commands
    parsed, produced = [], set()
    for line, argv, comment in commands:
        if argv == ["--version"]:
            continue  # prints and exits 0: tests/cli/test_main.py runs it
        try:
            sub, ns = _parse(argv)
        except SystemExit as e:
            raise AssertionError(f"README: {line!r} does not parse: {capsys.readouterr().err.strip()}") from e
        out = getattr(ns, "output", None)
        if out:
            produced.add(out.rstrip("/"))
        if getattr(ns, "config", None) and sub == "emulate" and (ROOT / ns.config).is_file():
            # (a run config an earlier command writes, fit's best.toml, is checked below as a produced file)
            import tomllib

            produced.add(tomllib.loads((ROOT / ns.config).read_text()).get("output", ""))
        parsed.append((line, ns, out, comment))
    missing = []
    for line, ns, _out, comment in parsed:
        for value in (v for k, val in vars(ns).items() if k != "output" for v in _strings(val)):
            if not value.endswith(FILE_SUFFIXES) or (ROOT / value).exists() or "your own" in comment:
                continue
            if value in produced or any(value.startswith(p + "/") for p in produced if p):
                continue
            missing.append(f"{line!r}: {value}")
    assert not missing, "README commands read files that a fresh clone does not have (ship one, write it with " \
        "an earlier command, or say it is the reader's own):\n" + "\n".join(missing)


def test_readme_notebook_block_runs_as_written(monkeypatch):
    """The ``python`` block, statement by statement, in a clone's root (matplotlib: the test extra has it)."""
    import matplotlib

    matplotlib.use("Agg")
    code = re.search(r"```python\n(.*?)```", README, re.S).group(1)
    monkeypatch.chdir(ROOT)
    scope: dict = {}
    exec(compile(code, "README.md (python block)", "exec"), scope)  # noqa: S102 - the README's own example
    p = scope["p"]
    assert scope["cycles"].shape == scope["bytes_in"].shape == (100, p.target.num_ipus * p.target.tiles_per_ipu)
    p.close()


def test_readme_numbers_match_what_they_state():
    """The README's numbers that are cheap to check: measured runs, the POD16 configuration's shape, the
    ResNet-50 default layout, the Mk2 tile count and capacity."""
    from popvision_lite import mlperf_validation as V
    from popvision_lite.devices import load_device
    from popvision_lite.emulator.models.config import make_config
    from popvision_lite.emulator.run_config import load_run_config

    rows = V.measured_rows()
    held = sum(bool(r.get("_held_out")) for r in rows)
    assert f"Checked against {len(rows)} measured MLPerf training runs" in README
    assert f"emulates the {len(rows)} measured MLPerf training runs" in README
    assert f"the {held} held-out rows" in README and len(rows) - held == 2 and "the two IPU-POD16 rows" in README
    rc = load_run_config(ROOT / "sample_configs" / "mlperf_v1.1_pod16_bert_large.toml")
    cfg = make_config(rc.model, **rc.model_args)
    assert f"{cfg.replicas} replicas x {cfg.stages} stages = {cfg.replicas * cfg.stages} IPUs" in README
    rn = make_config("resnet50")
    assert f"MLPerf layout: {rn.batch} images, {rn.ipus} IPU" in README
    mk2 = load_device("ipu-mk2")
    assert f"{mk2.tiles} tiles" in README and f"{mk2.sram_bytes_per_tile // 1024} KiB tile capacity" in README
