"""Step windows and tile subsets as people type them (``--steps 100:200``, ``--tiles 0-15,100``), parsed
once for the command line and the desktop app's export dialogs.  ``ConfigError`` names the option."""

from __future__ import annotations

from popvision_lite.errors import ConfigError
from popvision_lite.value_checks import parse_int_ranges

MAX_TILES = 1024 * 1472  # the largest IPU system (Bow Pod1024); a tile list longer than this is a typo


def parse_steps(text: str | None) -> tuple[int | None, int | None] | None:
    """'A:B' -> (A, B) (either side may be empty); None -> None."""
    if text is None or text == "":
        return None
    if ":" not in text:
        raise ConfigError(f"--steps {text!r}: expected START:STOP, e.g. 100:200 or :500")
    a, b = text.split(":", 1)
    try:
        return (int(a) if a.strip() else None, int(b) if b.strip() else None)
    except ValueError:
        raise ConfigError(f"--steps {text!r}: START and STOP must be integers") from None


def parse_tiles(text: str | None, num_tiles: int | None = None) -> list[int] | None:
    """'0-15,100,200-203' -> [0..15, 100, 200..203]; None -> None.  Ids are checked against
    ``num_tiles`` (and the count against the largest target) before any range is expanded."""
    if text is None or text == "":
        return None
    hi = None if num_tiles is None else num_tiles - 1
    return parse_int_ranges(text, f"--tiles {text[:60]!r}", 0, hi, max_count=MAX_TILES)


def check_tiles_syntax(text: str) -> None:
    """Syntax and size of a tile list now (ids are checked against a profile's tiles once it is open)."""
    parse_int_ranges(text, f"--tiles {text[:60]!r}", 0, MAX_TILES - 1, max_count=MAX_TILES, expand=False)
