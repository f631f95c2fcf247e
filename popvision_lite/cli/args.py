"""Argument types and output checks shared by the sub-commands (one definition each).

Every ``type=`` here raises ``argparse.ArgumentTypeError``, so argparse names the option in its message
and exits 2; the output checks raise :class:`~popvision_lite.errors.ConfigError` naming the option.
Number checks with bounds use :func:`popvision_lite.validators.arg_number`.
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


def fraction(text: str):
    """A number in (0, 1] (a share of tile memory), or one per IPU of a pipelined replica: ``0.2,0.25,0.25``."""
    try:
        vals = [float(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in (0, 1] (or one per IPU, comma-separated), "
                                         f"got {text!r}") from None
    if not vals or not all(0 < v <= 1 for v in vals):
        raise argparse.ArgumentTypeError(f"expected numbers in (0, 1], got {text!r}")
    return vals[0] if len(vals) == 1 else vals


def at_least_one(text: str) -> float:
    """A number >= 1 (average sequences per pack)."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number >= 1, got {text!r}") from None
    if not v >= 1:
        raise argparse.ArgumentTypeError(f"expected a number >= 1 (average sequences per pack), got {v}")
    return v


def layer_split(text: str) -> list:
    """Layers per pipeline stage, PopART style: ``3,7,7,7``; whole layers or halves (``x.5``: the attention
    half of a layer ends the stage, its FFN half starts the next, as PopART's attention / FFN placement).
    With ``--pipeline-placement wrap`` the first and last entries (both IPU 0) may be 0."""
    try:
        raw = [float(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected layers per stage like 3,7,7,7 or 6.5,6.5,6.5,4.5, "
                                         f"got {text!r}") from None
    if not raw or min(raw) < 0 or max(raw) <= 0 or any(not math.isfinite(x) or (2 * x) % 1 for x in raw):
        raise argparse.ArgumentTypeError(f"expected layers per stage in steps of 0.5 like 3,7,7,7, "
                                         f"got {text!r}")
    return [int(x) if x == int(x) else x for x in raw]


def device(text: str) -> str:
    """A device spec name or alias (``mk2``, ``bow`` ...), normalised to its spec name."""
    from popvision_lite.emulator.run_config import normalise_device

    try:
        return normalise_device(text)
    except ConfigError as e:
        raise argparse.ArgumentTypeError(str(e).split(": ", 1)[-1]) from None


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


_KEEP = {"\n", "\t"}


def terminal_text(text) -> str:
    """``text`` without control characters (C0 and C1 except newline and tab: ESC, BEL, CSI ...), so
    names from a file printed to a terminal cannot move the cursor, retitle the window, clear the screen
    or write the clipboard (OSC 52).  Each removed character shows as U+FFFD."""
    import unicodedata

    s = str(text)
    if s.isprintable():
        return s
    return "".join("\ufffd" if unicodedata.category(c) == "Cc" and c not in _KEEP else c for c in s)
