"""A sweep results table written by hand (the columns ``sweep/results.py`` writes), for tests of how it reads."""

from __future__ import annotations

import csv
from pathlib import Path


def write_sweep_table(folder: Path, extra: list[str], rows: list[dict]) -> Path:
    """``folder``/sweep.csv with the lead, metric and tail columns plus ``extra`` (config fields), one line per
    dict of ``rows`` (a missing cell is empty, as for a failed point); returns the file."""
    from popvision_lite.sweep.results import LEAD, METRICS, RESULTS, TAIL

    cols = list(dict.fromkeys([*LEAD, *extra, *METRICS, *TAIL]))
    path = Path(folder) / RESULTS
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=cols)
        w.writeheader()
        w.writerows([{c: r.get(c, "") for c in cols} for r in rows])
    return path
