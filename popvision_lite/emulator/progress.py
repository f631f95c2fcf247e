"""The emulator's progress line on stderr: written by ``popvision-lite emulate`` (:class:`ProgressBar`),
read back by the desktop app's run actions, which start ``emulate`` in a child process
(:func:`parse_progress`).  One module holds both ends, so the format cannot drift between them::

    [#########.....................]  30% compiling stage program 1 (2.2 s, ETA 5.1 s)

The fraction is the share of the run's work done, each stage of an emulation owning the range of it that its
work takes (:func:`within` maps a stage's own 0..1 onto its range); the ETA is the time so far over the
fraction done, times what is left (:func:`eta_text`), shown once a twentieth is done and a second has passed.
"""

from __future__ import annotations

import re
import sys
import time

from popvision_lite.units import format_seconds

_PROGRESS = re.compile(r"\]\s*(\d+)%\s+(.*?)(?:\s+\([\d.]+ s(?:, ETA [^)]*)?\))?\s*$")
ETA_MIN_FRACTION = 0.05
ETA_MIN_SECONDS = 1.0


def eta_text(elapsed_s: float, fraction: float) -> str:
    """"ETA 12 s" from the time so far and the fraction of the work done (remaining = elapsed x (1 - f) / f);
    "" until ``ETA_MIN_FRACTION`` is done and ``ETA_MIN_SECONDS`` have passed (too early to say), or at the end."""
    if not (ETA_MIN_FRACTION <= fraction < 1.0) or elapsed_s < ETA_MIN_SECONDS:
        return ""
    return f"ETA {format_seconds(elapsed_s * (1.0 - fraction) / fraction)}"


def within(progress, stage: str, lo: float, hi: float):
    """A ``fraction`` callback for one stage of a run that owns ``lo .. hi`` of the whole: ``f`` in 0..1 reports
    ``progress(stage, lo + f * (hi - lo))``; None when ``progress`` is None."""
    if progress is None:
        return None
    return lambda f: progress(stage, lo + max(0.0, min(1.0, float(f))) * (hi - lo))


class ProgressBar:
    """``progress(stage, fraction)`` callback of the emulator that draws the line (``\\r`` on a terminal,
    one line per update otherwise); ``enabled=False`` draws nothing (``--quiet``)."""

    MIN_INTERVAL_S = 0.5  # off a terminal, a line per stage change or at most one per this interval

    def __init__(self, enabled: bool = True, stream=None):
        self.enabled = enabled
        self.stream = stream or sys.stderr
        self.t0 = time.perf_counter()
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self._last = (None, -1.0, -1)

    def __call__(self, stage: str, frac: float) -> None:
        if not self.enabled:
            return
        width = 30
        n = int(round(frac * width))
        elapsed = time.perf_counter() - self.t0
        pct = int(frac * 100)
        last_stage, last_t, last_pct = self._last
        if not self.tty and stage == last_stage and (pct == last_pct or elapsed - last_t < self.MIN_INTERVAL_S) \
                and frac < 1.0:
            return  # a log file gets the changes, not every tick
        self._last = (stage, elapsed, pct)
        eta = eta_text(elapsed, frac)
        line = f"[{'#' * n}{'.' * (width - n)}] {pct:3d}% {stage} ({elapsed:.1f} s{', ' + eta if eta else ''})"
        if self.tty:
            self.stream.write("\r" + line.ljust(78) + ("\n" if frac >= 1.0 else ""))
        else:
            self.stream.write(line + "\n")
        self.stream.flush()


def parse_progress(line: str) -> tuple[float, str] | None:
    """'[###...]  30% compiling (2.2 s, ETA 5.1 s)' -> (0.3, 'compiling'); None for other lines."""
    m = _PROGRESS.search(line.strip())
    if not m:
        return None
    return int(m.group(1)) / 100.0, m.group(2).strip()
