"""The fit advisor's search (sweep/fit.py; docs/decisions/0290-fit-advisor-search.md): chains of candidates
bisected for the first that fits, the phases that run them (the lean frontier, the savers, tuning the savers
that are not monotone, more replicas), each round's candidates run as sweep points into the search folder."""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from pathlib import Path

from popvision_lite.errors import ConfigError, PopvisionError
from popvision_lite.sweep import engine
from popvision_lite.sweep.fit_result import (
    BOUND,
    DOMINATED,
    FAILED,
    FITS,
    HOST,
    IMPLIED,
    INVALID,
    OVER,
    Trial,
    differs,
)
from popvision_lite.sweep.fit_space import (
    Candidate,
    Place,
    Space,
)
from popvision_lite.sweep.grid import Point, config_hash
from popvision_lite.units import format_seconds

log = logging.getLogger(__name__)

DEFAULT_BUDGET = 40         # emulations at most
RELAX_TOP = 2               # fitting placements relaxed
REPLICA_TOP = 2             # best answers tried with more replicas
MAX_BCHAINS = 3             # on-chip pipeline chains searched at once
PRUNE_BACK_WITHIN = 1.5     # savers are turned back off one by one only where the cost is within this of the best
CHAIN_PRUNE = 1.5           # a chain is abandoned once its cheapest emulated candidate costs this much of the best
FLAT = 0.85                 # ... or once more pipeline stages leave its fullest tile at this share or more
TUNE_ROUNDS = 2             # rounds of one-rung steps of the savers that are not monotone


class _Chain:
    """Candidates ordered so that tile memory falls along them; bisected for the first that fits."""

    def __init__(self, name: str, phase: str, cands: list[Candidate], first_low: bool = False,
                 cost_prune: bool = False):
        self.name, self.phase, self.cands, self.first_low = name, phase, list(cands), first_low
        self.cost_prune = cost_prune  # abandoned once its cheapest emulated candidate costs far more than the best
        self.lo, self.hi = 0, len(self.cands)
        self.started = False
        self.abandoned = ""

    def abandon(self, why: str) -> None:
        self.abandoned = why
        self.lo = self.hi = len(self.cands)

    def update(self, trials: dict) -> None:
        """Narrow [lo, hi) with what is known; drop candidates whose emulation failed."""
        changed = True
        while changed and self.lo < self.hi:
            changed = False
            for i in range(self.lo, self.hi):
                t = trials.get(self.cands[i])
                if t is None:
                    continue
                if t.status in (FAILED, INVALID, HOST):  # no answer from it: the chain goes on without it
                    del self.cands[i]
                    self.hi -= 1
                elif t.status in (FITS, IMPLIED):
                    self.hi = i
                else:  # over, or known not to fit before emulation (the lower bound, a leaner one that did not)
                    self.lo = i + 1
                changed = True
                break

    def probe(self, trials: dict) -> Candidate | None:
        self.update(trials)
        if self.lo >= self.hi:
            return None
        i = self.lo if (self.first_low and not self.started) else (self.lo + self.hi) // 2
        self.started = True
        return self.cands[i]

    @property
    def done(self) -> bool:
        return self.lo >= self.hi

    @property
    def answer(self) -> Candidate | None:
        return self.cands[self.hi] if self.done and self.hi < len(self.cands) else None

    def remaining_probes(self) -> int:
        n = self.hi - self.lo
        return 0 if n <= 0 else int(math.ceil(math.log2(n + 1)))


class _Search:
    def __init__(self, space: Space, out: Path, *, budget: int, client, isolate: str, progress, should_cancel,
                 workers: int):
        self.space, self.out, self.budget = space, out, budget
        self.client, self.isolate = client, isolate
        self.report = progress or (lambda f, m: None)
        self.should_cancel = should_cancel
        self.workers = workers
        self.trials: dict[Candidate, Trial] = {}
        self.order: list[Trial] = []
        self.emulations = 0
        self.resumed = 0
        self.notes: list[str] = []
        self.cancelled = False
        self.budget_reached = False
        self.next_point = 0
        self.t0 = time.perf_counter()
        self.planned = 0
        self.grid_names = ["tensor_parallel", "tensor_parallel_2", "pipeline_stages", "layer_split", "replicas", "batch", "grad_accum",
                           "ipus", *space.savers()]
        from popvision_lite.value_checks import host_memory_bytes

        self.host_bytes = host_memory_bytes()

    # ---- bookkeeping
    def add(self, cand: Candidate, phase: str, status: str, reason: str = "", row=None) -> Trial:
        t = Trial(cand, phase, status, reason, row)
        self.trials[cand] = t
        self.order.append(t)
        return t

    def fitting(self) -> list[Trial]:
        return sorted((t for t in self.order if t.fits), key=Trial.sort_key)

    def _screen(self, cand: Candidate, phase: str) -> Candidate | None:
        """``cand`` when it should be emulated; else its trial says why not (None)."""
        if cand in self.trials:
            return None
        try:
            cfg = self.space.check(cand)
        except ConfigError as e:  # the run's own checks; its host-memory check is this machine's limit, not the run's
            self.add(cand, phase, HOST if "of host memory" in str(e) else INVALID, str(e))
            return None
        lb = self.space.lower_bound(cand, cfg)
        if lb is not None and not lb["fits"]:
            self.add(cand, phase, BOUND, self.space.bound_text(lb))
            return None
        for t in self.order:
            if t.status == OVER and self.space.no_leaner(cand, t.cand):
                self.add(cand, phase, DOMINATED, f"no leaner than point {t.point} ({t.cand.text()}), which does "
                         "not fit")
                return None
            if t.status == FITS and self.space.no_leaner(t.cand, cand):
                self.add(cand, phase, IMPLIED, f"leaner than point {t.point} ({t.cand.text()}), which fits: it "
                         "fits too, and its savers only cost time")
                return None
        if self.host_bytes and self.space.transformer:
            from popvision_lite.emulator.models.host_memory import estimate

            need = estimate(cfg, timing_only=True).bytes
            room = self.host_bytes / (2 * self.workers)  # every worker may hold one such run, on a shared machine
            if need > room:
                self.add(cand, phase, HOST, f"emulating it needs about {need / 2**30:.1f} GiB of host memory "
                         f"(estimate), more than {room / 2**30:.1f} GiB per worker here")
                return None
        return cand

    def run(self, batch: list[tuple[Candidate, str]]) -> list[Trial]:
        """Screen and emulate ``batch`` ([(candidate, phase)]) as one round of sweep points."""
        todo: list[tuple[Candidate, str]] = []
        for cand, phase in batch:
            if any(cand == c for c, _ in todo):
                continue
            c = self._screen(cand, phase)
            if c is not None:
                todo.append((c, phase))
        room = self.budget - self.emulations
        if len(todo) > room:
            self.budget_reached = True
            todo = todo[:max(room, 0)]
        if not todo or self.cancelled:
            return []
        points = []
        for cand, _ in todo:
            spec = self.space.spec(cand)
            values = {k: v for k, v in spec["args"].items() if k in self.grid_names}
            points.append(Point(index=self.next_point, spec=spec, values=values, config_hash=config_hash(spec)))
            self.next_point += 1
        done_before = self.emulations

        def progress(o, total):
            n = done_before + o.ok + o.failed + o.resumed
            self._progress(n, f"round of {total}: {o.ok + o.failed + o.resumed}/{total}")

        # a round whose every point is on disk from an earlier search needs no cluster (the engine resumes them)
        fresh = any(engine.resumable_row(self.out, p) is None for p in points)
        o = engine.run_sweep(points, self.out, grid_names=self.grid_names, client=self.client.get() if fresh else None,
                             isolate=self.isolate,
                             resume=True, progress=progress, should_cancel=self.should_cancel,
                             meta={"fit": {"model": self.space.base.model, "max_ipus": self.space.max_ipus,
                                           "global_batch": self.space.global_batch}, "grid": {}})
        if o.cancelled:
            self.cancelled = True
        self.resumed += o.resumed
        rows = {r.get("point"): r for r in o.rows}
        out = []
        for p, (cand, phase) in zip(points, todo, strict=True):
            row = rows.get(p.index)
            if row is None:  # not run (cancelled)
                continue
            self.emulations += 1
            if row.get("status") != "ok":
                t = self.add(cand, phase, FAILED, str(row.get("error", "")), row)
            else:
                fits = str(row.get("fits")).lower() == "true" or row.get("fits") is True
                t = self.add(cand, phase, FITS if fits else OVER, "", row)
                if not fits:
                    t.binding = self._binding(row)
            t.point = p.index
            out.append(t)
        return out

    def _binding(self, row: dict):
        """The binding constraint of an emulated candidate's profile (None when it cannot be read)."""
        from popvision_lite.analysis.fit_constraint import binding_constraint
        from popvision_lite.profile.reader import open_profile

        path = self.out / str(row.get("profile", ""))
        try:
            with open_profile(path) as p:
                return binding_constraint(p)
        except PopvisionError as e:
            log.warning("fit: cannot read %s: %s", path, e)
            return None

    def _progress(self, done: int, what: str) -> None:
        total = max(done + self.remaining(), 1)
        frac = min(done / total, 0.99)
        el = time.perf_counter() - self.t0
        eta = el / done * (total - done) if done else math.nan
        self.report(frac, f"{done} of ~{total} emulations ({what})"
                    + (f", about {format_seconds(eta)} left" if math.isfinite(eta) else ""))

    def remaining(self) -> int:
        return max(0, min(self.planned, self.budget - self.emulations))


def _chains(space: Space, level: str) -> tuple[list[_Chain], list[_Chain]]:
    """Phase 1's chains, placements ordered so that memory falls along each; ``level`` "lean" (every saver lean) or
    "given" (the base run's savers).  Returns (one-stage chains, pipeline chains): tensor parallelism ascending on
    one stage (lean: weights streamed; given: as the run has them) - for a model without tensor parallelism but
    with streaming, pipeline stages ascending with the weights streamed (lean) - and per tensor-parallel degree
    pipeline stages ascending with the weights on chip.  With 2-D tensor parallelism each second-axis degree
    (``Space.second_axis_degrees``) has its own chains."""
    one, pipes = [], []
    tps = space.tensor_parallel_degrees()
    b = space.micro_batches()[0] if space.micro_batches() else 1
    streams = "streaming_weights" in space.savers()
    lean = level == "lean"

    def at(place: Place, streaming: bool | None) -> Candidate:
        return space.lean(place, streaming=streaming) if lean else space.as_given(place, streaming=streaming)

    for t2 in space.second_axis_degrees():
        x2 = f" x {t2}" if t2 > 1 else ""
        group = [t for t in tps if t * t2 <= space.max_ipus]
        if len(group) > 1 or t2 > 1:
            one.append(_Chain(f"tensor parallelism{f' (second axis {t2})' if t2 > 1 else ''} ({level})", level,
                              [at(Place(t, 1, 1, b, tp2=t2), True if (streams and lean) else None) for t in group]))
        elif streams and lean:
            one.append(_Chain(f"pipeline stages, weights streamed ({level})", level,
                              [at(Place(1, st, 1, b), True) for st in range(1, space.max_stages(1, 1, b) + 1)]))
        for t in group:
            smax = space.max_stages(t, 1, b, t2)
            cands = [at(Place(t, st, 1, b, tp2=t2), False if streams else None) for st in range(1, smax + 1)]
            pipes.append(_Chain(f"pipeline stages{f' at tensor parallel {t}{x2}' if t * t2 > 1 else ''}"
                                + (", weights on chip" if streams else "") + f" ({level})", level, cands,
                                first_low=True, cost_prune=True))
    return one, pipes


def _first_feasible(chain: _Chain, search: _Search) -> None:
    """Move a chain's start past the candidates the lower bound (or the run's checks) rule out, so its first probe
    is the fewest stages that can hold the weights."""
    while chain.lo < chain.hi:
        c = chain.cands[chain.lo]
        if search._screen(c, chain.phase) is not None:
            return
        t = search.trials.get(c)
        if t is not None and t.status in (BOUND, INVALID, HOST, DOMINATED):
            chain.lo += 1
            continue
        return


def _split_rescue(space: Space, chain: _Chain, search: _Search) -> list[Candidate]:
    """When a pipeline chain's answer has S stages and S - 1 stages failed on their first or last IPU (the
    embedding's, the head's): S - 1 stages with the embedding and the tied head on IPU 0 and the layers on the
    others (wrap), and with 1 and 2 layers moved off that IPU.  When nothing along the chain fit (a head too large
    for any last stage: GPT-2-medium's sequential POD16 placement, 230-252 % at 8-16 stages), the wrap at each
    stage count emulated that failed on its first or last IPU (the lower bound screens the ones with too many
    layers per IPU)."""
    if not space.transformer:
        return []
    L = space.cfg0.layers

    def at_an_end(c: Candidate) -> bool:
        t = search.trials.get(c)
        return (t is not None and t.status == OVER and t.binding is not None and t.binding.binding is not None
                and c.place.stages >= 2 and t.binding.binding.ipu in (0, c.place.stages - 1))

    def wrapped(c: Candidate) -> list[Candidate]:
        S = c.place.stages
        if not space.reads("pipeline_placement") or c.place.wrap:
            return []
        # the embedding and the tied head together on IPU 0, the layers on the others (optimum-graphcore's GPT-2),
        # and so with the vocabulary one rung more serialised: both of its matmuls sit on that IPU (the published
        # GPT-2-medium POD16 configuration serialises them 5 ways)
        rest = [L // (S - 1) + (1 if s < L % (S - 1) else 0) for s in range(S - 1)]
        w = c.with_place(split=(0, *rest, 0), wrap=True)
        out = [w]
        if "embedding_serialization" in space.savers():
            lean = space.leaner_rung("embedding_serialization", w.saver("embedding_serialization"))
            if lean is not None:
                out.append(space.canonical(w.with_savers(embedding_serialization=lean)))
        return out

    ans = chain.answer
    if ans is None:
        return [w for c in chain.cands if at_an_end(c) for w in wrapped(c)]
    below = next((c for c in chain.cands if c.place.stages == ans.place.stages - 1), None)
    if below is None or not at_an_end(below):
        return []
    S = below.place.stages
    ipu = search.trials[below].binding.binding.ipu
    even = [L // S + (1 if s < L % S else 0) for s in range(S)]
    out = wrapped(below)
    for d in (1, 2):
        sp = list(even)
        if sp[ipu] - d < 1:
            break
        sp[ipu] -= d
        others = sorted((s for s in range(S) if s != ipu), key=lambda s: -abs(s - ipu))  # the far end first
        for i in range(d):
            sp[others[i % len(others)]] += 1
        out.append(below.with_place(split=tuple(sp)))
    return out


def _run_chains(s: _Search, chains: list[_Chain], extra: Callable[[_Chain], list[Candidate]] | None = None,
                planned_after: int = 0) -> None:
    """Bisect ``chains`` concurrently, one probe per chain per round (``extra(chain)``: candidates to add once a
    chain is done)."""
    for c in chains:
        _first_feasible(c, s)
    extras_done: set[int] = set()
    while not s.cancelled:
        _prune_by_cost(s, chains)
        _prune_flat(s, chains)
        s.planned = sum(c.remaining_probes() for c in chains) + planned_after
        batch = []
        for c in chains:
            p = c.probe(s.trials)
            if p is not None:
                batch.append((p, c.phase))
            elif extra is not None and id(c) not in extras_done:
                extras_done.add(id(c))
                batch += [(x, "split") for x in extra(c)]
        if not batch:
            return
        if s.emulations >= s.budget:
            s.budget_reached = True
            return
        s.run(batch)


def _prune_flat(s: _Search, chains: list[_Chain]) -> None:
    """Abandon a pipeline chain whose fullest tile does not fall with more stages: two emulated candidates over
    capacity, the one with more stages still at least FLAT x the other's fullest tile (a first stage's stash of
    activations grows with the pipeline's depth as its layers shrink: what binds it does not go away)."""
    for c in chains:
        c.update(s.trials)
        if not c.first_low or c.done:
            continue
        over = [s.trials[x] for x in c.cands if x in s.trials and s.trials[x].status == OVER]
        if len(over) < 2:
            continue
        a, b = over[0], over[-1]
        pa, pb = a.metric("peak_tile_memory_pct"), b.metric("peak_tile_memory_pct")
        if math.isfinite(pa) and math.isfinite(pb) and pb >= FLAT * pa:
            c.abandon(f"its fullest tile does not fall with more stages: {pa:.0f}% at {a.cand.place.stages}, "
                      f"{pb:.0f}% at {b.cand.place.stages}")
            s.notes.append(f"{c.name}: not searched further: {c.abandoned}")


def _prune_by_cost(s: _Search, chains: list[_Chain]) -> None:
    """Abandon a chain of more and more chips once its cheapest emulated candidate - fitting or not: the emulator
    times a run that does not fit too - costs more than CHAIN_PRUNE x the best that fits: further along, more chips
    and a longer pipeline rarely cost less per sample (decision 0290)."""
    fit = s.fitting()
    if not fit:
        return
    best = fit[0].sort_key()[:2]
    for c in chains:
        c.update(s.trials)
        if not c.cost_prune or c.done:
            continue
        tried = [s.trials[x] for x in c.cands if x in s.trials and s.trials[x].emulated and s.trials[x].status != FAILED]
        if tried:
            cheapest = min(t.sort_key()[:2] for t in tried)
            if cheapest > tuple(CHAIN_PRUNE * x for x in best):
                c.abandon(f"its cheapest candidate costs {cheapest[0] / best[0]:.1f}x the best that fits")
                s.notes.append(f"{c.name}: not searched further: {c.abandoned}")


def _lean_frontier(s: _Search, space: Space) -> list[_Chain]:
    """Phase 1: the frontiers of the placement chains, as given and lean: the run as given before the lean one
    (a lean candidate where the run as given fits is implied: it fits and is not faster); the lean chains returned."""
    one_given, pipes_given = _chains(space, "given")
    one_lean, pipes_lean = _chains(space, "lean")
    for c in pipes_lean:
        _first_feasible(c, s)
    pipes_lean = sorted((c for c in pipes_lean if not c.done), key=lambda c: (c.cands[c.lo].place.chips,
                                                                              -c.cands[c.lo].place.tp))[:MAX_BCHAINS]
    kept_tps = {(c.cands[0].place.tp, c.cands[0].place.tp2) for c in pipes_lean}
    pipes_given = [c for c in pipes_given if c.cands and (c.cands[0].place.tp, c.cands[0].place.tp2) in kept_tps]
    lean = one_lean + pipes_lean
    after = RELAX_TOP * 3 + (REPLICA_TOP * 2 if space.global_batch > 1 else 0)
    rescue = lambda c: _split_rescue(space, c, s)  # noqa: E731
    groups = [one_given, pipes_given, pipes_lean, one_lean]  # weights on chip before streamed: a streamed candidate
    for i, group in enumerate(groups):                        # where the on-chip one fits is implied
        _run_chains(s, group, extra=rescue if group in (pipes_given, pipes_lean) else None,
                    planned_after=after + sum(c.remaining_probes() for g in groups[i + 1:] for c in g))
    return lean


def _savers(s: _Search, space: Space, lean: list[_Chain]) -> None:
    """Phase 2: at the cheapest lean answers, the fewest savers that fit, then each saver back to as given."""
    answers = [c.answer for c in lean if c.answer is not None]
    fits_at = {t.cand.place for t in s.order if t.fits and t.phase == "given"}
    answers = [a for a in dict.fromkeys(answers) if a.place not in fits_at]
    answers.sort(key=lambda a: s.trials[a].sort_key() if a in s.trials and s.trials[a].fits else (math.inf,))
    # a placement whose run as given (no savers: the fastest it can be) costs more than the best found cannot win
    answers = [a for a in answers if not _beaten(s, space.as_given(a.place))][:RELAX_TOP]
    if answers and not s.cancelled:
        level_chains = []
        for a in answers:
            streaming = a.saver("streaming_weights") if a.saver("streaming_weights") is False else None
            level_chains.append(_Chain(f"savers at {a.place.text()}", "savers", space.levels(a.place, streaming)))
        _run_chains(s, level_chains, planned_after=RELAX_TOP * len(space.savers()) + REPLICA_TOP * 2)
        batch = []
        for c in level_chains:
            a = c.answer
            if a is None or a not in s.trials or not s.trials[a].fits:
                continue
            best = s.fitting()[0]
            if s.trials[a].sort_key()[:2] > tuple(PRUNE_BACK_WITHIN * x for x in best.sort_key()[:2]):
                continue  # far costlier than the best: turning a cheap saver off again will not close the gap
            for k in space.savers():
                if differs(a.saver(k), space.base_saver(k)):
                    batch.append((space.reverted(a, k), "savers"))
        if batch and not s.cancelled and s.emulations < s.budget:
            s.planned = len(batch) + REPLICA_TOP * 2
            s.run(batch)


def _tune(s: _Search, space: Space) -> None:
    """Phase 2b: the savers whose lean value is not always the leanest (the matmul memory proportion, the
    embedding serialisation), one rung either way: around the best answer and around the near misses (over, but
    the least over, that could still be cheaper than the best); again from a variant that fits more cheaply or
    is less over than where it came from, TUNE_ROUNDS times at most."""
    if any(not r.monotone for r in space.savers().values()):
        fit = s.fitting()
        near, places = [], set()
        for t in sorted((t for t in s.order if t.status == OVER and t.phase in ("as given", "given", "lean", "savers")
                         and not (fit and _beaten(s, t.cand))), key=lambda t: t.metric("peak_tile_memory_pct")):
            if t.cand.place not in places:  # the least over of each placement
                places.add(t.cand.place)
                near.append(t.cand)
        targets = [(t.cand, True) for t in fit[:1]] + [(c, False) for c in near[:RELAX_TOP]]
        for _ in range(TUNE_ROUNDS):
            if not targets or s.cancelled or s.emulations >= s.budget:
                break
            tried = {c: space.variants(c, relaxed_only=fits) for c, fits in dict.fromkeys(targets)}
            batch = [(v, "tune") for vs in tried.values() for v in vs]
            s.planned = len(batch) + REPLICA_TOP * 2
            s.run(batch)
            fitted = {v.place for vs in tried.values() for v in vs if v in s.trials and s.trials[v].fits}
            targets = [(v, s.trials[v].fits) for c, vs in tried.items() for v in vs
                       if _better(s, v, c) and (s.trials[v].fits or v.place not in fitted)][:RELAX_TOP + 1]
        # a best found here may carry monotone savers it no longer needs: each back to as given, once
        best = s.fitting()[0] if s.fitting() else None
        if best is not None and best.phase == "tune" and not s.cancelled and s.emulations < s.budget:
            s.run([(space.reverted(best.cand, k), "savers") for k, r in space.savers().items()
                   if r.monotone and differs(best.cand.saver(k), space.base_saver(k))])


def _more_replicas(s: _Search, space: Space) -> None:
    """Phase 3: more replicas for the best."""
    if not s.cancelled and s.emulations < s.budget:
        batch = []
        for t in s.fitting()[:REPLICA_TOP]:
            p = t.cand.place
            r = p.replicas * 2
            n = 0
            while p.chips // p.replicas * r <= space.max_ipus and space.global_batch % (r * p.batch) == 0 and n < 2:
                c = t.cand.with_place(replicas=r)
                if "rts" in space.savers():
                    c = c.with_savers(rts=True)
                batch.append((space.canonical(c), "replicas"))
                n += 1
                r *= 2
        s.planned = len(batch)
        s.run(batch)


def search(space: Space, out: Path, *, budget: int = DEFAULT_BUDGET, client=None, isolate: str = "worker",
           progress=None, should_cancel=None, workers: int = 1, base_trial: bool = True) -> tuple[_Search, object]:
    """Run the phases (module docstring); returns the search state and the base run's trial (or None)."""
    s = _Search(space, out, budget=budget, client=client, isolate=isolate, progress=progress,
                should_cancel=should_cancel, workers=workers)
    base = None
    if base_trial:  # the run as given, so the report starts from its binding constraint
        c0 = _base_candidate(space)
        s.planned = 10
        got = s.run([(c0, "as given")])
        base = got[0] if got else s.trials.get(c0)
        if base is not None and base.fits:
            return s, base
    lean = _lean_frontier(s, space)
    _savers(s, space, lean)
    _tune(s, space)
    _more_replicas(s, space)
    s.planned = 0
    return s, base


def _better(s: _Search, v: Candidate, origin: Candidate) -> bool:
    """Whether variant ``v`` improved on ``origin``: it fits at a lower cost than the best, or it is over but less
    so than ``origin``."""
    tv, to = s.trials.get(v), s.trials.get(origin)
    if tv is None or to is None or not tv.emulated or tv.status == FAILED:
        return False
    if tv.fits:
        return tv.sort_key() <= s.fitting()[0].sort_key() and (not to.fits or tv.sort_key() < to.sort_key())
    return to.status == OVER and tv.metric("peak_tile_memory_pct") < to.metric("peak_tile_memory_pct")


def _beaten(s: _Search, cand: Candidate) -> bool:
    """Whether ``cand`` was emulated (fitting or not) at a cost above the best fitting candidate's."""
    t = s.trials.get(cand)
    fit = s.fitting()
    if t is None or not t.emulated or t.status == FAILED or not fit:
        return False
    return t.sort_key()[:2] > fit[0].sort_key()[:2]


def _base_candidate(space: Space) -> Candidate:
    """The base run as a candidate (its placement and its own saver values)."""
    c = space.cfg0
    split = tuple(c.layer_split) if c.layer_split else None
    place = Place(tp=int(c.tensor_parallel), stages=int(c.stages), replicas=int(c.replicas), batch=int(c.batch),
                  split=split, wrap=c.pipeline_placement == "wrap", tp2=int(c.tensor_parallel_2))
    sv = {k: space.base_saver(k) for k in space.savers()}
    if isinstance(c.available_memory_proportion, list | tuple) and "available_memory_proportion" in sv:
        sv["available_memory_proportion"] = list(c.available_memory_proportion)
    return Candidate(place, tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in sv.items())))
