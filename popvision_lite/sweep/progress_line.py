"""The sweep's one-line progress on stderr (what ``popvision-lite sweep`` prints while points run)."""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING

from popvision_lite.emulator.progress import eta_text

if TYPE_CHECKING:
    from popvision_lite.sweep.engine import Outcome


class ProgressLine:
    """``sweep: 5/8 (62%) | 4 ok, 1 failed, 3 remaining | 2 workers | 12.3 s, ETA 7.4 s`` on stderr (\\r on a
    terminal): the fraction is of the points, the ETA the time per point run so far (resumed points cost
    nothing) times the points remaining (emulator/progress.eta_text)."""

    def __init__(self, stream=None, enabled: bool = True):
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.t0 = time.perf_counter()
        self._last = ""

    def __call__(self, o: Outcome, total: int, final: bool = False) -> None:
        if not self.enabled:
            return
        done = o.ok + o.failed + o.resumed
        elapsed = time.perf_counter() - self.t0
        to_run = total - o.resumed
        eta = eta_text(elapsed, (o.ok + o.failed) / to_run) if to_run > 0 and not final else ""
        line = (f"sweep: {done}/{total} ({100 * done / total if total else 100:.0f}%) | {o.ok + o.resumed} ok"
                + (f" ({o.resumed} resumed)" if o.resumed else "")
                + f", {o.failed} failed, {total - done} remaining | {o.workers} worker(s) | "
                f"{elapsed:.1f} s{', ' + eta if eta else ''}")
        if line == self._last and not final:
            return
        self._last = line
        if self.tty:
            self.stream.write("\r" + line.ljust(80) + ("\n" if final else ""))
        elif final or done != getattr(self, "_done", -1):
            self.stream.write(line + "\n")
        self._done = done
        self.stream.flush()
