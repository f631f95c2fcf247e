"""The numbers of a finished emulation that ``emulate`` prints and a sweep's results row records."""

from __future__ import annotations

import numpy as np

from popvision_lite.profile.schema import MEMORY_CATEGORIES


def end_of_run_numbers(pd_, run) -> dict:
    """Numbers of the end-of-run summary, from the profile data (``pd_``) and the run (``RunResult``): fits,
    peak tile and its bytes, capacity, total cycles and seconds, clock.  Where the step's time goes (compute /
    exchange / sync / stream) is ``analysis.run_totals`` of the written profile, the one definition every view
    and command uses (the stored steps alone are a few representative pipeline cycles, not the step)."""
    mem = np.asarray(pd_.memory)
    per_tile = mem.sum(axis=(1, 2))
    peak_tile = int(per_tile.argmax())
    total = int(run.total_cycles)
    clock = float(pd_.target.clock_hz)
    # what fills the peak tile: its memory categories, largest first (why a run does or does not fit)
    cats = mem[peak_tile].sum(axis=1)
    order = np.argsort(-cats, kind="stable")
    peak_categories = [(MEMORY_CATEGORIES[i], int(cats[i])) for i in order[:3] if cats[i] > 0]
    return dict(fits=bool(run.fits), peak_tile=peak_tile, peak_bytes=int(per_tile[peak_tile]),
                peak_categories=peak_categories,
                capacity=int(pd_.target.sram_bytes_per_tile), total_cycles=total, seconds=total / clock,
                clock_hz=clock)
