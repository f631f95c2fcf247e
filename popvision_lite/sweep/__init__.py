"""Sweeps: emulate a grid of run configs on Dask and compare the results (``popvision-lite sweep``).

* :mod:`.grid` - grid fields (read from the run-config definitions), parsing, expansion, config hashes;
* :mod:`.point` - one point: emulate, write its profile and its row (runs on a worker);
* :mod:`.engine` - the Dask side: local cluster or existing scheduler, failures, resume, cancel;
* :mod:`.results` - the results table (``sweep.csv``), :func:`open_sweep`, the Pareto front;
* :mod:`.cli` - the sub-command.
"""

from __future__ import annotations

__all__ = ["open_sweep", "pareto_front"]


def __getattr__(name: str):
    """``open_sweep`` and ``pareto_front`` from :mod:`.results`, imported when first asked for: a Dask worker that
    only starts point processes (``--isolate process``) imports :mod:`.point` and so this package, and needs
    neither them nor pandas (docs/performance.md, "Ninth pass: sweep, profile, CLI, ...")."""
    if name in __all__:
        from popvision_lite.sweep import results

        return getattr(results, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
