"""Argument types and output checks shared by the sub-commands (one definition each).

Every ``type=`` here raises ``argparse.ArgumentTypeError``, so argparse names the option in its message
and exits 2; the output checks raise :class:`~popvision_lite.errors.ConfigError` naming the option.
Number checks with bounds use :func:`popvision_lite.value_checks.arg_number`; the flags of run-config fields
(``emulate --batch`` ...) are :func:`field_flag`, checked by the field's own definition
(``emulator/run_config.py``) so that a flag and a TOML field share one check and one message.
"""

from __future__ import annotations

import argparse
import math

from popvision_lite.errors import ConfigError, ProfileError


def whole_number(lo: int = 1, *, exponent: bool = False):
    """An argparse ``type=``: a whole number ``>= lo``.  ``exponent`` also takes ``1e6`` and ``16.0``
    (counts a person writes in scientific notation, e.g. ``verdict --samples 1e6``)."""

    def parse(text: str) -> int:
        try:
            if exponent:
                f = float(text)
                if not math.isfinite(f) or f != int(f):
                    raise ValueError
                v = int(f)
            else:
                v = int(text)
        except (ValueError, OverflowError):
            raise argparse.ArgumentTypeError(f"expected a whole number >= {lo}, got {text!r}") from None
        if v < lo:
            raise argparse.ArgumentTypeError(f"expected a whole number >= {lo}, got {v}")
        return v

    parse.__name__ = "whole number"
    return parse


positive_int = whole_number(1)
count = whole_number(0)


class _FieldTexts(argparse.Action):
    """Keeps every text given for a run-config field's flag, in order (``--hidden 1.5 --hidden 16``): each
    is checked by the field's definition, not only the last."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, (*(getattr(namespace, self.dest, None) or ()), values))


def field_flag(p, name: str, help_text: str) -> None:
    """A flag of run-config field ``name`` (``emulator/run_config.FIELDS``): its texts are parsed and checked
    by the field's definition (:func:`field_value`), the one check a TOML file's value also gets."""
    from popvision_lite.emulator.run_config import FIELDS

    f = FIELDS[name]
    lo, hi = f.bounds
    if lo is not None:  # the accepted range, from the same definition the check reads
        help_text += f" [{lo:g} .. {hi:g}]" if f.kind != "int" else f" [{lo} .. {hi:,}]"
    p.add_argument(f.flag, dest=name, action=_FieldTexts, metavar=f.metavar(), help=help_text.replace("%", "%%"))


class _Switch(argparse.Action):
    """A bool run-config field's switch (``Field.cli_switches``): keeps every (flag, value) given, in order."""

    def __init__(self, option_strings, dest, value: bool, **kw):
        super().__init__(option_strings, dest, nargs=0, default=None, **kw)
        self.value = value

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, (*(getattr(namespace, self.dest, None) or ()), (option_string, self.value)))


def field_switches(p, name: str) -> None:
    """The switches of bool run-config field ``name`` (``--recompute``; ``--training`` / ``--inference``), their
    help from the field's definition."""
    from popvision_lite.emulator.run_config import FIELDS

    f = FIELDS[name]
    first = f.cli_switches[0][0]
    for flag, value in f.cli_switches:
        text = f.help if flag == first else f"{name.replace('_', ' ')} {'on' if value else 'off'} (see {first})"
        p.add_argument(flag, dest=name, action=_Switch, value=value, help=text.replace("%", "%%"))


def switch_value(args, name: str) -> bool | None:
    """The value the switches of bool field ``name`` give (None: none given); ConfigError when two given
    disagree (``--training --inference``)."""
    given = getattr(args, name, None)
    if not given:
        return None
    if isinstance(given, bool):  # (a namespace built by hand: the value itself)
        return given
    flags = {v: f for f, v in given}
    if len(flags) > 1:
        raise ConfigError(f"argument {flags[given[-1][1]]}: not allowed with {flags[not given[-1][1]]}")
    return given[-1][1]


def field_value(args, name: str):
    """The value of a :func:`field_flag` flag, every text given checked (ConfigError naming the flag); the
    last wins.  None when not given."""
    from popvision_lite.emulator.run_config import CLI, check_field

    texts = getattr(args, name, None)
    if texts is None:
        return None
    values = [check_field(name, t, CLI, text=True) for t in texts]
    return values[-1]


def check_new_file(out, option: str = "-o/--output", example: str = "run.pvl") -> None:
    """Refuse an output path that cannot be written before spending minutes on the work: a folder (also
    a trailing slash), a device or FIFO (``-o /dev/null`` would replace the device node), a missing
    folder, a folder where no file can be created.  ConfigError names ``option``."""
    from popvision_lite.atomic_io import check_writable

    try:
        check_writable(out, example=example)
    except ProfileError as e:
        raise ConfigError(f"argument {option}: {e}") from None


def check_destination(out, option: str = "-o") -> None:
    """A device, FIFO or folder as the destination is refused before any work (``-o /dev/null`` would be
    replaced); ConfigError ``"-o <reason>"``."""
    from popvision_lite.atomic_io import check_destination as _check

    try:
        _check(out)
    except ProfileError as e:
        raise ConfigError(f"{option} {e}") from None
