"""The emulator's progress line on stderr: written by ``popvision-lite emulate`` (:class:`ProgressBar`),
read back by the desktop app's run actions, which start ``emulate`` in a child process
(:func:`parse_progress`).  One module holds both ends, so the format cannot drift between them::

    [#########.....................]  30% compiling (2.2 s)
"""

from __future__ import annotations

import re
import sys
import time

_PROGRESS = re.compile(r"\]\s*(\d+)%\s+(.*?)(?:\s+\([\d.]+ s\))?\s*$")


class ProgressBar:
    """``progress(stage, fraction)`` callback of the emulator that draws the line (``\\r`` on a terminal,
    one line per update otherwise); ``enabled=False`` draws nothing (``--quiet``)."""

    def __init__(self, enabled: bool = True, stream=None):
        self.enabled = enabled
        self.stream = stream or sys.stderr
        self.t0 = time.perf_counter()
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()

    def __call__(self, stage: str, frac: float) -> None:
        if not self.enabled:
            return
        width = 30
        n = int(round(frac * width))
        line = f"[{'#' * n}{'.' * (width - n)}] {int(frac * 100):3d}% {stage} ({time.perf_counter() - self.t0:.1f} s)"
        if self.tty:
            self.stream.write("\r" + line.ljust(78) + ("\n" if frac >= 1.0 else ""))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()


def parse_progress(line: str) -> tuple[float, str] | None:
    """'[###...]  30% compiling (2.2 s)' -> (0.3, 'compiling'); None for other lines."""
    m = _PROGRESS.search(line.strip())
    if not m:
        return None
    return int(m.group(1)) / 100.0, m.group(2).strip()
