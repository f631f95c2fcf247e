"""Whether a sweep's cluster has lost every worker for good (the engine then stops waiting for its points).

A nanny restarts a crashed worker within seconds, but
a nanny whose restart fails closes itself, and on a loaded machine that was seen to leave a local cluster with no
worker at all (tests/sweep/test_sweep.py's crash test, twice, 2026-12-07), the sweep then waiting without end.
The engine (``engine._run_locked``) asks ``WorkerWatch.lost()`` while it waits for points and, once it says so,
fails the points still to run with a row saying why."""

from __future__ import annotations

import time
from collections.abc import Callable

# a sweep whose cluster had workers and has lost every one waits this long for one to come back
NO_WORKER_S = 300.0
NO_WORKER_POLL_S = 1.0


class WorkerWatch:
    """Whether a cluster that had workers has had none for ``bound_s``: ``count()`` (the scheduler's worker
    count) is asked at most every ``poll_s`` of ``clock``.  A cluster that never had a worker is not "lost" (a
    scheduler whose workers are still starting, or are started after the sweep)."""

    def __init__(self, count: Callable[[], int], bound_s: float, poll_s: float = NO_WORKER_POLL_S,
                 clock: Callable[[], float] = time.monotonic, seen: bool = False):
        self.count, self.bound_s, self.poll_s, self.clock = count, bound_s, poll_s, clock
        self.seen = seen
        self.asked = None
        self.none_since = None

    def lost(self) -> bool:
        now = self.clock()
        if self.asked is not None and now - self.asked < self.poll_s:
            return self.none_since is not None and now - self.none_since >= self.bound_s
        self.asked = now
        try:
            n = int(self.count())
        except Exception:  # noqa: BLE001 - a scheduler that cannot answer now is asked again at the next poll
            return False
        if n > 0:
            self.seen, self.none_since = True, None
        elif self.seen and self.none_since is None:
            self.none_since = now
        return self.none_since is not None and now - self.none_since >= self.bound_s


def of_client(client, seen: bool) -> WorkerWatch:
    """A watch on ``client``'s scheduler (its worker count), ``seen``: whether the sweep began with workers."""
    return WorkerWatch(lambda: len(client.scheduler_info(n_workers=-1).get("workers", {})), NO_WORKER_S, seen=seen)
