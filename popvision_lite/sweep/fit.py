"""The fit advisor: when a model does not fit in tile memory, find the cheapest placement that does, emulated on
the sweep engine (docs/fit-advisor.md; the search strategy: docs/decisions/0290-fit-advisor-search.md).

``fit_advice(base, max_ipus=256, ...)`` searches the space of ``fit_space.Space`` (tensor parallelism, pipeline
stages and their layers, replicas, micro-batch, and every memory-saving setting declared in
``fit_space.FIT_ROLES``) in rounds; every round's candidates run as sweep points (``engine.run_sweep``: Dask,
a local cluster by default) into one folder, so a repeated search resumes.  Before anything is emulated a
candidate must pass the run's own checks and a lower bound of the bytes its fullest IPU must hold
(``Space.lower_bound``); a candidate no leaner than one that did not fit is not emulated either.

1. **Lean frontier.**  Chains of placements whose memory falls along the chain, every saver at its lean value:
   tensor parallelism ascending with the weights streamed (phased execution), and for each tensor-parallel
   degree pipeline stages ascending with the weights on chip, from the lower bound's fewest stages.  Each chain
   is bisected for its first placement that fits; a pipeline whose stage before that failed on its first or last
   IPU (embedding, head) is also tried with fewer layers there.
2. **Relax.**  From the cheapest fitting placements, each saver one step more relaxed (recomputation off, a larger
   matmul memory proportion, optimizer state on chip, a larger micro-batch ...); the cheapest that still fits is
   kept and relaxed again.
3. **Replicas.**  The best placements with more replicas (the same global batch): more samples/s.

The answer is the fitting candidate with the lowest cost per sample (the sweep row's ``cost_per_1m_samples_usd``:
``devices.chip_price`` x all chips x time, the price every view uses), each one emulated by the same code as
``popvision-lite emulate`` (``sweep/point.emulate``), so the configuration named fits when run by ``emulate``
(``best.toml`` in the folder is that run config).  When nothing fits up to ``max_ipus``, the binding constraint of
the leanest placements tried says why (``analysis/fit_constraint.py``).
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
from collections.abc import Callable
from pathlib import Path

from popvision_lite.emulator.run_config import RunConfig
from popvision_lite.errors import ConfigError
from popvision_lite.profile.run_record import record_of
from popvision_lite.sweep import engine
from popvision_lite.sweep.fit_result import (
    FitAdvice,
    Option,
    Trial,
    leanest,
    option_of,
    profile_path,
    ruled_out,
    write_folder,
)
from popvision_lite.sweep.fit_search import DEFAULT_BUDGET, search
from popvision_lite.sweep.fit_space import (
    Space,
    global_batch_of,
    run_config_from_profile,
    saver_text,
)

log = logging.getLogger(__name__)

DEFAULT_MAX_IPUS = 256      # an IPU-POD256
DEFAULT_OPTIONS = 5         # the answer and the next few


def fit_advice(base, *, max_ipus: int = DEFAULT_MAX_IPUS, global_batch: int | None = None,
               options: int = DEFAULT_OPTIONS, budget: int = DEFAULT_BUDGET, out=None, workers: int | None = None,
               scheduler: str | None = None, client=None, isolate: str = "worker",
               progress: Callable[[float, str], None] | None = None,
               should_cancel: Callable[[], bool] | None = None) -> FitAdvice:
    """What would make ``base`` fit: a :class:`RunConfig`, a run-config mapping ({model, device, model fields}),
    or a profile (an open one or a path) of a run that does not fit.  See the module docstring.

    ``max_ipus``: the largest system searched (default an IPU-POD256).  ``global_batch``: samples per optimizer
    step, kept across placements (default the base's replicas x gradient accumulation x micro-batch).
    ``budget``: emulations at most.  ``out``: the search folder (a sweep folder: profiles, rows, sweep.csv, plus
    fit.txt, fit.json and best.toml; default a new temporary folder).  ``workers`` / ``scheduler`` / ``client``:
    the Dask cluster (default a local one, one worker per core).  ``progress(fraction, text)`` and
    ``should_cancel()`` as for sweeps."""
    t0 = time.perf_counter()
    profile_binding = None
    rc, profile_binding, base_fits = _base_of(base)
    if max_ipus < 1 or budget < 1 or options < 1:
        raise ConfigError("fit: max_ipus, budget and options must be positive")
    cfg0 = rc.model_config(host_check=False)
    gb = int(global_batch) if global_batch else global_batch_of(cfg0)
    if gb < 1:
        raise ConfigError(f"argument --global-batch: must be positive, got {gb}")
    space = Space(rc, int(max_ipus), gb)
    if out is None:
        import tempfile

        out = tempfile.mkdtemp(prefix="pvl-fit-")
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"argument -o/--output: {out} exists and is not a folder")
    out.mkdir(parents=True, exist_ok=True)
    cluster = _Cluster(client, scheduler, workers)
    try:
        s, base_t = search(space, out, budget=budget, client=cluster, isolate=isolate, progress=progress,
                           should_cancel=should_cancel, workers=cluster.expected_workers(),
                           base_trial=profile_binding is None)
    finally:
        cluster.close()
    notes = list(s.notes)
    if s.budget_reached:
        notes.append(f"the search stopped at its budget of {budget} emulations (--budget); the placements it did not "
                     "reach are not claimed either way")
    if base_t is not None:
        base_fits = base_t.fits
        profile_binding = base_t.binding
    fitting = s.fitting()
    opts = [option_of(space, t, out) for t in fitting[:options]]
    fastest = max(fitting, key=lambda t: t.samples_per_second, default=None)
    if fastest is not None and all(o.profile != profile_path(out, fastest) for o in opts):
        opts.append(option_of(space, fastest, out))
        notes.append("the last option is the fastest that fits (more samples/s, at a higher cost per sample)")
    if base_fits and base_t is not None:
        opts = [option_of(space, base_t, out)]
    closest = []
    if not opts:
        closest = leanest(s.order)
        if not any(t.emulated for t in s.order):
            notes.append("no candidate could be emulated: every placement was ruled out before emulation "
                         "(see the trials' reasons)")
    if space.transformer and gb < 3:
        notes.append(f"the global batch is {gb}: a pipeline of S stages needs at least 2 x S - 1 micro-batches per "
                     "step, so only one-stage placements were searched; give a larger global batch to search "
                     "pipelines")
    adv = FitAdvice(model=rc.model, device=rc.device, max_ipus=space.max_ipus, global_batch=gb, base_fits=base_fits,
                    base_binding=profile_binding, best=opts[0] if opts else None, options=opts, trials=s.order,
                    leanest=closest, ruled_out=ruled_out(s.order) if not opts else [], folder=str(out.resolve()), emulations=s.emulations, resumed=s.resumed,
                    wall_seconds=time.perf_counter() - t0,
                    cpu_seconds=sum(t.metric("cpu_seconds") for t in s.order if t.emulated
                                    and math.isfinite(t.metric("cpu_seconds"))),
                    cancelled=s.cancelled, budget_reached=s.budget_reached, notes=notes)
    write_folder(adv, s.order, s.grid_names, out)
    return adv


class _Cluster:
    """The Dask client the search's rounds run on, started when a round first has a point to emulate (a search
    resumed from its folder starts none): the caller's client, a scheduler's, or a local cluster of its own."""

    def __init__(self, client=None, scheduler: str | None = None, workers: int | None = None):
        self.given, self.scheduler, self.workers = client, scheduler, workers
        self._client = self._cluster = None

    def expected_workers(self) -> int:
        if self.given is not None:
            return max(1, len(self.given.scheduler_info(n_workers=-1).get("workers", {})))
        return self.workers or engine.default_workers(64)

    def get(self):
        if self.given is not None:
            return self.given
        if self._client is None:
            if self.scheduler:
                self._client = engine.connect(self.scheduler)
            else:
                from distributed import Client

                self._cluster = engine.local_cluster(self.expected_workers())
                self._client = Client(self._cluster)
                self._client.register_plugin(engine.ignore_sigint_plugin())
        return self._client

    def close(self) -> None:
        for x in (self._client, self._cluster):
            if x is not None:
                with contextlib.suppress(Exception):
                    x.close()
        self._client = self._cluster = None


def _base_of(base) -> tuple[RunConfig, object, bool | None]:
    """(run config, binding constraint of a given profile or None, whether the given profile fits)."""
    if isinstance(base, RunConfig):
        return base, None, None
    if isinstance(base, dict):
        return RunConfig.from_mapping({k: v for k, v in base.items() if k != "output"}, "fit_advice"), None, None
    from popvision_lite.analysis.fit_constraint import binding_constraint
    from popvision_lite.profile.reader import open_profile

    if isinstance(base, str | bytes) or hasattr(base, "__fspath__"):
        with open_profile(base) as p:
            return run_config_from_profile(p), binding_constraint(p), record_of(p).fits
    return run_config_from_profile(base), binding_constraint(base), record_of(base).fits


__all__ = ["fit_advice", "FitAdvice", "Option", "Trial", "saver_text"]
