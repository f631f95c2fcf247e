"""The ``-q`` / ``-v`` flags every sub-command has, and where the library's log records go on the command line.

The library logs through :mod:`logging` under the ``popvision_lite`` logger (each module's logger is
``logging.getLogger(__name__)``, a child of it; the package adds only a ``NullHandler``, so a notebook or a
program that imports it decides what is shown).  A command's own output (its results, its progress line, its
error message and exit code) stays ``print``; its diagnostics (warnings, notes, what it is doing) are log
records, which this module sends to stderr::

    (default)  warnings and errors          popvision-lite emulate: warning: ...
    -q         errors only, no progress line
    -v         + what the command is doing (info: each stage's wall time, each sweep point, each validate row)
    -vv        + debug records, each with the module that logged it
"""

from __future__ import annotations

import argparse
import logging
import sys

from popvision_lite.terminal import terminal_text

LOGGER = "popvision_lite"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """``-q/--quiet`` and ``-v/--verbose`` (repeatable) on a sub-command's parser."""
    g = p.add_mutually_exclusive_group()
    g.add_argument("-q", "--quiet", action="store_true", help="errors only: no progress line, no warnings")
    g.add_argument("-v", "--verbose", action="count", default=0,
                   help="say what is being done (-v: info, -vv: debug, with the module that logged it)")


def level(quiet: bool, verbose: int) -> int:
    """The ``popvision_lite`` logger's level for these flags."""
    if quiet:
        return logging.ERROR
    return {0: logging.WARNING, 1: logging.INFO}.get(verbose, logging.DEBUG)


class _Formatter(logging.Formatter):
    """``<prog>: warning: message`` (the form the commands' own messages have), control characters removed."""

    def __init__(self, prog: str):
        super().__init__()
        self.prog = prog

    def format(self, record: logging.LogRecord) -> str:
        msg = record.getMessage()
        if record.exc_info:
            msg += "\n" + self.formatException(record.exc_info)
        if record.levelno >= logging.WARNING:
            head = f"{self.prog}: {record.levelname.lower()}: "
        elif record.levelno >= logging.INFO:
            head = f"{self.prog}: "
        else:
            head = f"{self.prog}: debug [{record.name}]: "
        return terminal_text(head + msg)


class _StderrHandler(logging.StreamHandler):
    """Writes to the ``sys.stderr`` of the moment (tests and the GUI's child processes replace it)."""

    def __init__(self):
        super().__init__(sys.stderr)

    def emit(self, record):
        self.setStream(sys.stderr)
        super().emit(record)


_HANDLER_ATTR = "_popvision_cli_handler"


def configure(prog: str, quiet: bool = False, verbose: int = 0) -> logging.Logger:
    """Send the ``popvision_lite`` logger's records of the flags' level to stderr, formatted for ``prog``;
    calling it again (several commands in one process, as the tests do) replaces the handler it added.  Loggers of
    the package that another library's ``dictConfig`` disabled are enabled again."""
    log = logging.getLogger(LOGGER)
    # a library that configured logging in this process with logging.config.dictConfig (import-linter's CLI does)
    # disabled every logger that existed then, ours included: the command's own diagnostics are shown again
    for name, lg in list(logging.root.manager.loggerDict.items()):
        if isinstance(lg, logging.Logger) and (name == LOGGER or name.startswith(LOGGER + ".")):
            lg.disabled = False
    for h in list(log.handlers):
        if getattr(h, _HANDLER_ATTR, False):
            log.removeHandler(h)
    h = _StderrHandler()
    setattr(h, _HANDLER_ATTR, True)
    h.setFormatter(_Formatter(prog))
    log.addHandler(h)
    log.setLevel(level(quiet, verbose))
    return log
