"""Command line entry point ``popvision-lite``.

Each sub-command is one module of this package (``popvision_lite.cli.<name>``) with
``add_arguments(parser)`` and ``run(args) -> int``.  Modules are imported lazily so
that ``popvision-lite emulate`` never imports Qt and ``--help`` stays fast.

Every sub-command takes ``-q`` (errors only) and ``-v`` / ``-vv`` (more): ``cli/logs.py`` maps them onto the
``popvision_lite`` logger.

Exit codes: 0 ok, 2 bad arguments / bad input file, 3 out of memory (profile written),
1 unexpected internal error.

:func:`program` is the process's entry point (the ``popvision-lite`` script, ``python -m popvision_lite.cli``):
:func:`main`, then the exit (:func:`leave`); :func:`main` itself only returns the exit code, for callers in a
process that goes on (the tests).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from typing import NoReturn

from popvision_lite.cli import logs

# sub-command -> (module, one-line help)
_C = "popvision_lite.cli."
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "emulate": (_C + "emulate", "run a bundled workload on the emulator and write a profile"),
    "make-samples": (_C + "make_samples", "regenerate the bundled sample profiles"),
    "export": (_C + "export", "export a view (png/svg/csv) or a Chrome trace, headless"),
    "info": (_C + "info", "print a profile's summary"),
    "verdict": (_C + "verdict", "IPU or GPU? the emulated run next to an estimated GPU run, with cost"),
    "validate": (_C + "validate", "emulate the measured MLPerf IPU runs and compare throughput"),
    "sweep": (_C + "sweep", "emulate a grid of run configs on Dask; one results table"),
    "fit": (_C + "fit", "a run that does not fit in tile memory: find the cheapest configuration that does"),
}


# Sub-commands whose process leaves with os._exit once main() has returned (:func:`leave`): every file they
# write is closed and renamed into place before their run() returns (profile.writer.write_profile), no thread or
# child process of theirs outlives it, and no atexit handler of theirs has work left.  Freeing a run's objects
# one by one at interpreter exit cost 0.3-0.4 s CPU of each large emulate row (docs/decisions/0420).
FAST_EXIT = frozenset({"emulate"})


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse exits 2 already; keep the message clear
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}\n")


def _gui_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="popvision-lite",  # also under python -m popvision_lite
        description="Open profiles in the desktop app. Sub-commands: "
        + ", ".join(f"{k} ({v[1]})" for k, v in SUBCOMMANDS.items())
        + ". Run 'popvision-lite SUBCOMMAND --help' for each.",
    )
    p.add_argument("profiles", nargs="*", help="profile files (.pvl) to open")
    p.add_argument("--compare", nargs=2, metavar=("A", "B"), help="open two profiles in compare mode")
    p.add_argument("--sample", action="store_true", help="open a bundled sample profile")
    logs.add_arguments(p)
    p.add_argument("--version", action=_Version, help="print the version and exit")
    return p


class _Version(argparse.Action):
    """``--version``: one line, unwrapped (argparse's own action wraps it at the terminal width)."""

    def __init__(self, option_strings, dest, **kw):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kw)

    def __call__(self, parser, namespace, values, option_string=None):
        print(_version_text())
        parser.exit(0)


def _version_text() -> str:
    """``popvision-lite X.Y.Z`` and the libraries a bug report needs (the profile format depends on HDF5)."""
    import platform
    from importlib import metadata

    from popvision_lite import __version__

    libs = []
    for name in ("numpy", "pandas", "h5py", "PySide6-Essentials"):
        try:
            libs.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            libs.append(f"{name} not installed")
    try:
        import h5py

        libs.append(f"HDF5 {h5py.version.hdf5_version}")
    except ImportError:
        pass
    return f"popvision-lite {__version__} (Python {platform.python_version()}; {', '.join(libs)})"


def _check_gui_args(parser: argparse.ArgumentParser, args) -> None:
    """Refuse, before Qt starts, what would otherwise end in a Qt abort or an empty window: a
    mistyped sub-command or missing file on the command line, and no display to draw on."""
    from pathlib import Path

    for path in [*args.profiles, *(args.compare or [])]:
        if not Path(path).exists():
            hint = "" if Path(path).suffix else f" (and not a sub-command: {', '.join(SUBCOMMANDS)})"
            parser.error(f"{path}: no such file{hint}")
    env = os.environ
    if (sys.platform.startswith("linux") and not env.get("QT_QPA_PLATFORM")
            and not env.get("DISPLAY") and not env.get("WAYLAND_DISPLAY")):
        parser.error("no display to open the desktop app on (DISPLAY and WAYLAND_DISPLAY are unset); "
                     "headless, use 'popvision-lite export' or 'popvision-lite info'")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in SUBCOMMANDS:
        name = argv.pop(0)
        module_name, help_text = SUBCOMMANDS[name]
        module = importlib.import_module(module_name)
        parser = _Parser(prog=f"popvision-lite {name}", description=help_text)
        module.add_arguments(parser)
        logs.add_arguments(parser)
        args = parser.parse_args(argv)
        logs.configure(parser.prog, args.quiet, args.verbose)
        try:
            return int(module.run(args) or 0)
        except BrokenPipeError:  # output piped into `head` that stopped reading: not an error
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 0
    parser = _gui_parser()
    args = parser.parse_args(argv)
    logs.configure(parser.prog, args.quiet, args.verbose)
    _check_gui_args(parser, args)
    from popvision_lite.gui.app import run_app

    return int(run_app(args) or 0)


def program() -> NoReturn:
    """Run the command line of this process (:func:`main` on ``sys.argv``) and exit with its code: through
    :func:`leave` for a sub-command in FAST_EXIT, else as Python exits (``sys.exit``)."""
    argv = sys.argv[1:]
    rc = main(argv)
    if argv and argv[0] in FAST_EXIT:
        leave(rc)
    sys.exit(rc)


def leave(rc: int) -> NoReturn:
    """Exit now with ``rc``: the log handlers and the standard streams flushed, then ``os._exit``, without
    freeing the process's objects one by one or running atexit handlers.  Only for a process whose files are
    all closed (FAST_EXIT)."""
    logging.shutdown()  # flushes and closes the handlers (the cli's goes to stderr)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: what Python's own exit would have lost too
            pass
    os._exit(rc)


if __name__ == "__main__":
    program()
