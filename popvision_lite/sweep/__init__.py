"""Sweeps: emulate a grid of run configs on Dask and compare the results (``popvision-lite sweep``).

* :mod:`.grid` - grid fields (read from the run-config definitions), parsing, expansion, config hashes;
* :mod:`.point` - one point: emulate, write its profile and its row (runs on a worker);
* :mod:`.engine` - the Dask side: local cluster or existing scheduler, failures, resume, cancel;
* :mod:`.results` - the results table (``sweep.csv``), :func:`open_sweep`, the Pareto front;
* :mod:`.cli` - the sub-command.
"""

from __future__ import annotations

from popvision_lite.sweep.results import open_sweep, pareto_front

__all__ = ["open_sweep", "pareto_front"]
