"""A sweep whose cluster lost every worker stops waiting (worker_watch.NO_WORKER_S): the watch that decides it, on a
clock and a worker count the test sets, and the rows the points still to run are given.  No cluster: the rule is
about what the scheduler reports, so the test reports it."""

from __future__ import annotations

from popvision_lite.sweep import engine, worker_watch
from popvision_lite.sweep import grid as g


class _Clock:
    def __init__(self):
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


class _Count:
    """A scheduler's worker counts, one per question, counting the questions."""

    def __init__(self, *counts):
        self.counts, self.asked = list(counts), 0

    def __call__(self) -> int:
        self.asked += 1
        return self.counts.pop(0) if len(self.counts) > 1 else self.counts[0]


def test_a_cluster_that_lost_every_worker_is_lost_after_the_bound_and_not_before():
    clock, count = _Clock(), _Count(2, 0)
    w = worker_watch.WorkerWatch(count, bound_s=10.0, poll_s=1.0, clock=clock)
    assert not w.lost()  # two workers
    clock.t = 1.0
    assert not w.lost()  # none since t = 1
    clock.t = 10.9
    assert not w.lost()
    clock.t = 11.0
    assert w.lost()


def test_a_worker_coming_back_restarts_the_bound():
    clock, count = _Clock(), _Count(1, 0, 1, 0)
    w = worker_watch.WorkerWatch(count, bound_s=5.0, poll_s=1.0, clock=clock)
    for t in (0.0, 1.0, 5.5):  # 1 worker, none from t = 1, one back at 5.5 (before 1 + 5)
        clock.t = t
        assert not w.lost()
    clock.t = 7.0  # none again from t = 7
    assert not w.lost()
    clock.t = 11.9
    assert not w.lost()
    clock.t = 12.0
    assert w.lost()


def test_a_cluster_that_never_had_a_worker_is_waited_for():
    """Workers still starting, or a scheduler whose workers are started after the sweep: not lost."""
    clock, count = _Clock(), _Count(0)
    w = worker_watch.WorkerWatch(count, bound_s=1.0, poll_s=1.0, clock=clock)
    for t in range(0, 100, 7):
        clock.t = float(t)
        assert not w.lost()
    # ... unless the sweep began with workers (the engine passes what the scheduler said at its start)
    w = worker_watch.WorkerWatch(_Count(0), bound_s=1.0, poll_s=1.0, clock=clock, seen=True)
    assert not w.lost()
    clock.t += 1.0
    assert w.lost()


def test_the_scheduler_is_asked_once_per_poll_and_an_unanswered_question_is_not_a_loss():
    clock, count = _Clock(), _Count(3)
    w = worker_watch.WorkerWatch(count, bound_s=1.0, poll_s=2.0, clock=clock)
    for t in (0.0, 0.5, 1.0, 1.9):
        clock.t = t
        w.lost()
    assert count.asked == 1
    clock.t = 2.0
    w.lost()
    assert count.asked == 2

    def failing():
        raise OSError("scheduler gone")

    w = worker_watch.WorkerWatch(failing, bound_s=0.0, poll_s=1.0, clock=clock, seen=True)
    assert not w.lost()


class _Client:
    def __init__(self):
        self.cancelled = []

    def cancel(self, futures, force=False):
        self.cancelled += list(futures)


def test_points_still_to_run_are_failed_rows_saying_why_and_a_committed_one_is_kept(tmp_path, monkeypatch):
    pts = g.expand(g.Base(model="mlp", model_args={"hidden": 32, "layers": 2}), g.check_grid({"batch": [8, 16, 24]}, "t"))
    committed = pts[1]
    monkeypatch.setattr(engine, "stored_row", lambda out, p: {"status": "ok", "key": p.key} if p is committed else None)
    futures = {f"f{p.index}": (f"future{p.index}", p) for p in pts}
    rows, o, client, notes = {}, engine.Outcome(), _Client(), []
    engine._give_up_on_lost_workers(client, futures, rows, o, tmp_path, notes.append)
    assert sorted(client.cancelled) == ["future0", "future1", "future2"] and not futures
    assert (o.ok, o.failed) == (1, 2)
    assert notes == o.notes and notes[0].startswith("the sweep stopped: every worker of the cluster was lost")
    assert rows[1]["status"] == "ok"
    for i in (0, 2):
        assert rows[i]["status"] == "failed" and rows[i]["error"].startswith("every worker of the cluster was lost")
        assert rows[i]["batch"] == pts[i].spec["args"]["batch"] and rows[i]["point"] == i
