"""Sweeps that stop cleanly and run on any Dask cluster: cancelling stops the points in flight in every isolation
mode (nothing is written after the cancel), a cluster of stock (daemonic) workers started by the `dask worker` command
runs a sweep or refuses it before any point runs naming the fix, and one folder takes one sweep at a time.

No test here depends on timing: points wait on a gate the test opens (tests/support/sweep_points.gated), the
tests wait on files, output lines and task results, and every wait has a generous bound.  The cancel tests run
under load (tests/support/load.py): a busy-loop process per core, or, for the real command's Ctrl+C, one on the
one core the command and its processes may use."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import popvision_lite as pvl
from popvision_lite.cli import main
from popvision_lite.errors import ConfigError
from popvision_lite.sweep import engine, folder
from popvision_lite.sweep import grid as g
from popvision_lite.sweep import point as pt
from tests.support import sweep_points as sweep_fixtures
from tests.support.load import busy_cpus, on_cores, one_core

TINY = {"hidden": 32, "layers": 2}
BOUND_S = 600  # every wait below ends when its event happens; this only stops a test that would hang
REPO = Path(__file__).resolve().parents[2]
ENV = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), *sys.path]))


def _points(grid):
    base = g.Base(model="mlp", model_args=dict(TINY))
    grid = g.check_grid(grid, "test")
    return g.expand(base, grid), list(grid)


def _wait_for(cond, what: str, bound: float = BOUND_S):
    t0 = time.monotonic()
    while not cond():
        assert time.monotonic() - t0 < bound, f"waited {bound} s for {what}"
        time.sleep(0.05)


def _drain(client):
    """Returns once every worker's (single) executor thread is free: a no-op task per worker queues behind
    whatever still runs there - here, points of a cancelled sweep that run on inside the worker."""
    workers = list(client.scheduler_info(n_workers=-1)["workers"])
    futs = [client.submit(os.getpid, workers=[w], allow_other_workers=False, pure=False) for w in workers]
    client.gather(futs)


def _point_processes(client) -> dict:
    import multiprocessing as mp

    def names():
        return [p.name for p in mp.active_children() if p.name.startswith(pt.POINT_PROCESS)]

    return client.run(names)


# ----------------------------------------------------------------------------- existing clusters
def test_isolation_choice_on_daemonic_workers():
    daemonic = {"tcp://a": {"daemon": True}, "tcp://b": {"daemon": False}}
    fine = {"tcp://a": {"daemon": False}}
    assert engine.choose_isolation(fine, "auto") == ("process", "")
    assert engine.choose_isolation(daemonic, "worker") == ("worker", "")
    mode, note = engine.choose_isolation(daemonic, "auto")
    assert mode == "worker" and "1 of the cluster's 2 worker(s) are daemonic" in note
    assert "DASK_DISTRIBUTED__WORKER__DAEMON=False dask worker" in note and "\n" not in note
    with pytest.raises(ConfigError, match="--isolate process needs a process per point.*DAEMON=False"):
        engine.choose_isolation(daemonic, "process")
    with pytest.raises(ConfigError, match="--point-timeout needs a process per point"):
        engine.choose_isolation(daemonic, "auto", point_timeout=5)


@contextlib.contextmanager
def dask_cluster(tmp_path, n_workers=2, env=None):
    """A cluster of stock workers on 127.0.0.1: one `dask worker --nworkers N` from the `dask` command line (its
    nanny makes the worker processes daemonic: what the tests are about), joined to a scheduler in this process
    (a `dask scheduler` process speaks the same protocol at an address, and cost ~0.7 s of CPU to start: a
    Python, distributed and the `dask` CLI's entry points); the worker's process group is killed and reaped
    afterwards, then the scheduler closed."""
    from distributed import Client, LocalCluster

    dask_cli = str(Path(sys.executable).with_name("dask"))
    log = None
    proc = None
    # its HTTP server (health checks) on a free loopback port, as the engine's own cluster has it (8787 may be taken)
    with LocalCluster(n_workers=0, processes=False, protocol="tcp", host="127.0.0.1", scheduler_port=0,
                      dashboard_address="127.0.0.1:0") as scheduler:
        address = scheduler.scheduler_address
        try:
            log = open(tmp_path / "worker.log", "w")  # noqa: SIM115 - closed below
            proc = subprocess.Popen([dask_cli, "worker", address, "--nworkers", str(n_workers), "--nthreads", "1",
                                     "--host", "127.0.0.1", "--no-dashboard"], stdout=log,
                                    stderr=subprocess.STDOUT, cwd=REPO, env=dict(ENV, **(env or {})),
                                    start_new_session=True)
            with Client(address, timeout=BOUND_S) as c:
                c.wait_for_workers(n_workers, timeout=BOUND_S)
                yield c, address
        finally:
            if proc is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=BOUND_S)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
            if log is not None:
                log.close()


def test_stock_dask_cluster_runs_in_worker_or_refuses_before_any_point(tmp_path, capsys):
    """`dask worker` gives daemonic worker processes (one here: the daemon flag is each worker's own, and
    test_isolation_choice_on_daemonic_workers counts them on mixed clusters), which may not start a process per
    point: without --isolate the sweep runs the points inside the workers and says so in one line; with
    --isolate process (or --point-timeout) it is refused before any point runs, naming the fix.  A cancel there
    leaves the point in flight running inside its worker: it finishes and writes nothing."""
    with dask_cluster(tmp_path, n_workers=1) as (client, address):
        assert all(w["daemon"] for w in client.run(pt.probe).values())
        # two points (a sweep of several rows, each run inside the worker); what a point emulates is not the claim
        base = ["sweep", "--model", "mlp", "--grid", "hidden=32", "--grid", "layers=2", "--grid", "batch=8,16",
                "--scheduler", address, "-q"]
        assert main([*base, "--isolate", "process", "-o", str(tmp_path / "refused")]) == 2
        err = capsys.readouterr().err
        assert "--isolate process needs a process per point, but 1 of the cluster's 1 worker(s) are daemonic" in err
        assert "DASK_DISTRIBUTED__WORKER__DAEMON=False dask worker" in err and "Traceback" not in err
        assert not (tmp_path / "refused").exists()  # no folder, no lock files left by a refused sweep
        (tmp_path / "refused2").mkdir()
        (tmp_path / "refused2" / "notes.txt").write_text("mine")
        assert main([*base, "--point-timeout", "60", "-o", str(tmp_path / "refused2")]) == 2
        assert "--point-timeout needs a process per point" in capsys.readouterr().err
        assert sorted(p.name for p in (tmp_path / "refused2").iterdir()) == ["notes.txt"]  # what was there stays

        assert main([*base[:-1], "-o", str(tmp_path / "ok")]) == 0  # (the note is a warning: -q leaves it out)
        err = capsys.readouterr().err
        notes = [line for line in err.splitlines() if "daemonic" in line]
        assert len(notes) == 1 and "running points inside the workers (--isolate worker" in notes[0]
        assert notes[0].startswith("popvision-lite sweep: warning: 1 of the cluster's 1 worker(s)"), notes
        df = pvl.open_sweep(tmp_path / "ok")
        assert len(df) == 2 and set(df["status"]) == {"ok"} and all(Path(p).is_file() for p in df["profile"])

        # cancel on this cluster: the point in flight cannot be stopped inside its worker
        out = tmp_path / "cancelled"
        gate = out / sweep_fixtures.GATE
        pts, names = _points({"batch": [8, 16, 24, 32]})
        o = engine.run_sweep(pts, out, grid_names=names, client=client, isolate="auto",
                             point_fn=sweep_fixtures.gated,
                             should_cancel=lambda: len(list(gate.glob("started-*"))) >= 1)
        assert o.cancelled and o.isolate == "worker" and o.ok == 0
        (gate / "open").touch()
        _drain(client)  # the point has now run to the end on its worker
        assert not list((out / "rows").iterdir()) and not list((out / "profiles").iterdir())


def test_workers_started_as_named_run_each_point_in_its_own_process(tmp_path, capsys):
    """The fix the refusal names works: workers started with DASK_DISTRIBUTED__WORKER__DAEMON=False take
    --isolate process (a crashing point fails alone: the one worker runs the points after it)."""
    with dask_cluster(tmp_path, n_workers=1, env={"DASK_DISTRIBUTED__WORKER__DAEMON": "False"}) as (client, _):
        assert not any(w["daemon"] for w in client.run(pt.probe).values())
        pts, names = _points({"batch": [8, 16, 32]})
        o = engine.run_sweep(pts, tmp_path / "p", grid_names=names, client=client, isolate="process",
                             point_fn=sweep_fixtures.crash_on_batch)
        by_batch = {r["batch"]: r for r in o.rows}
        assert (o.ok, o.failed, o.isolate) == (2, 1, "process")
        assert "killed by SIGSEGV" in by_batch[sweep_fixtures.CRASH_BATCH]["error"]
        # the points ran in processes forked from the worker's fork server, which imported the emulator: the worker
        # itself never did, nor pandas (the sweep package's results table), ~0.6 s of CPU a worker
        heavy = ["popvision_lite.emulator.models.emulated", "pandas"]
        imported = client.run(lambda: [m for m in heavy if m in sys.modules])
        assert list(imported.values()) == [[]], imported


# ----------------------------------------------------------------------------- on the module's local cluster
# The tests of the module's `client` come last: its cluster starts at its first user and idles (its scheduler's and
# workers' heartbeats cost CPU) until the module's last test has run.
# one sweep per folder
def test_a_second_sweep_into_the_same_folder_is_refused_until_the_first_ends(client, tmp_path, capsys):
    """Two sweeps into one folder: the second is refused (exit 2, naming the first) while the first holds
    the folder; a holder killed with SIGKILL leaves no stale lock behind.  (The sweep runs on the module's
    cluster: the lock is the client's, whatever cluster runs the points.)"""
    out = tmp_path / "s"
    out.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\n"
                               "from popvision_lite.sweep.folder import FolderLock\n"
                               "FolderLock(sys.argv[1]).acquire()\n"
                               "print('locked', flush=True)\n"
                               "time.sleep(3600)\n", str(out)],
                              stdout=subprocess.PIPE, text=True, env=ENV)
    try:
        assert holder.stdout.readline().strip() == "locked"
        argv = ["sweep", "--model", "mlp", "--grid", "hidden=32", "--grid", "layers=2", "--grid", "batch=8",
                "--scheduler", client.scheduler.address, "-q", "-o", str(out)]
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert f"another sweep is running into {out} (pid {holder.pid} on " in err and "Traceback" not in err
        assert not (out / "sweep.csv").exists() and not (out / "rows").exists()
        with pytest.raises(ConfigError, match="another sweep is running"):  # the engine refuses as well
            folder.FolderLock(out).acquire()
    finally:
        holder.kill()
        holder.wait()
    assert main(argv) == 0  # the kernel released the dead holder's lock
    assert set(pvl.open_sweep(out)["status"]) == {"ok"}


@pytest.mark.parametrize("isolate", ["process", "worker"])
def test_cancel_stops_points_in_flight_and_nothing_is_written_after_it(client, tmp_path, isolate):
    """Two points are running (one per worker, held at the gate) when the sweep is cancelled.  Process mode:
    their workers stop their processes before run_sweep returns.  Worker mode: they cannot be stopped inside
    the worker, so the test opens the gate after the cancel and lets them finish - they write nothing."""
    out = tmp_path / "s"
    gate = out / sweep_fixtures.GATE
    pts, names = _points({"batch": [8, 16, 24, 32, 40, 48]})
    with busy_cpus():
        o = engine.run_sweep(pts, out, grid_names=names, client=client, isolate=isolate,
                             point_fn=sweep_fixtures.gated,
                             should_cancel=lambda: len(list(gate.glob("started-*"))) >= 2)
        assert o.cancelled and (o.ok, o.failed, o.not_run) == (0, 0, 6)
        if isolate == "process":  # stopped by their workers, before the sweep returned
            assert all(v == [] for v in _point_processes(client).values())
        (gate / "open").touch()
        _drain(client)
    assert (out / folder.RUN).read_text().startswith(folder.CANCELLED)
    assert not list((out / "rows").iterdir())
    assert not list((out / "profiles").iterdir())
    assert len(pvl.open_sweep(out)) == 0
    # the next run of the same folder is a new run: it commits, and resumes nothing
    again = engine.run_sweep(pts[:2], out, grid_names=names, client=client, isolate=isolate)
    assert (again.ok, again.resumed) == (2, 0) and len(list((out / "rows").iterdir())) == 2


def test_ctrl_c_under_load_stops_every_process_and_prints_no_traceback(client, tmp_path, capsys):
    """The real command on its own LocalCluster (one worker: its process, its fork server and the point in flight
    are the kinds of process a Ctrl+C must stop; a second worker adds one more of each and ~2 s of CPU), with
    every core it may run on busy (one, shared with a busy loop): Ctrl+C (SIGINT to the
    process group, as a terminal sends it) ends it with status 130 and one line, no traceback, no temp files;
    once the command has exited no process of its group is left and no row appears after the table was
    written.  The same command then resumes the folder."""
    out = tmp_path / "s"
    n = 8
    cmd = [sys.executable, "-m", "popvision_lite.cli", "sweep", "--model", "mlp", "--grid", "hidden=32",
           "--grid", "layers=2", "--grid", "batch=" + ",".join(str(8 + 8 * i) for i in range(n)),
           "--workers", "1", "-o", str(out)]
    # the command and every process it starts run on one core, and the load is one busy loop on that core: every
    # core the sweep may use is busy (one per core of the machine cost the other cores' CPU for no other claim)
    core = one_core()
    with on_cores(core):
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV,
                                start_new_session=True)
    try:
        _wait_for(lambda: list((out / "rows").glob("*.json")) or proc.poll() is not None, "a first row")
        # the load is on from the Ctrl+C until the last process of the group has exited (the cancel, the
        # points in flight, the cluster's shutdown); the cluster's start before it is not what is tested
        with busy_cpus(cores=core):
            os.killpg(proc.pid, signal.SIGINT)
            _, err = proc.communicate(timeout=BOUND_S)
            _wait_for(lambda: not _group_alive(proc.pid), "the sweep's processes to exit")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err
    assert "cancelled; finished rows kept" in err
    for word in ("Traceback", "Error", "Exception"):
        assert word not in err, err
    assert not list(out.rglob("*.tmp"))
    kept = pvl.open_sweep(out)
    assert 1 <= len(kept) < n and set(kept["status"]) == {"ok"}
    on_disk = {json.loads(f.read_text())["key"] for f in (out / "rows").glob("*.json")}
    assert on_disk == set(kept["key"])  # every committed row is in the table, and none came after it
    assert {Path(p).stem for p in kept["profile"]} == {f.stem for f in (out / "profiles").glob("*.pvl")}
    # the local cluster's dashboard, where bokeh is installed, with its address (without it: none, none named)
    import importlib.util

    assert ("popvision-lite sweep: Dask dashboard: http://127.0.0.1:" in err) is \
        (importlib.util.find_spec("bokeh") is not None), err
    # the same command resumes, in the faster in-worker mode (how points are isolated is not part of what they
    # emulate); in process: the process boundary was what the Ctrl+C above was about.  It resumes on the
    # module's running cluster (--scheduler: its --workers is then unused) rather than starting a second local
    # one: where the points run is not what the resume is about
    assert main([*cmd[3:], "-q", "--isolate", "worker", "--scheduler", client.scheduler.address]) == 0
    stdout = capsys.readouterr().out
    df = pvl.open_sweep(out)
    assert len(df) == n and set(df["status"]) == {"ok"} and f"results: {out / 'sweep.csv'} ({n} ok (" in stdout
    resumed = int(stdout.split(f"({n} ok (")[1].split(" resumed")[0])
    assert len(kept) <= resumed < n


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def test_local_cluster_serves_its_dashboard_where_bokeh_is_installed(client):
    """The dashboard needs bokeh (extra "dashboard"): with it the local cluster serves one on loopback and its
    address is named; without it there is none and none is named.  The scheduler's own HTTP server (health checks,
    the dashboard's pages) listens on loopback only."""
    import importlib.util
    import urllib.request

    def http_hosts(dask_scheduler):
        return {s.getsockname()[0] for s in dask_scheduler.http_server._sockets.values()}

    assert client.run_on_scheduler(http_hosts) == {"127.0.0.1"}
    link = engine.dashboard_link(client)
    if importlib.util.find_spec("bokeh") is None:
        assert link is None
    else:
        assert link is not None and link.startswith("http://127.0.0.1:") and link.endswith("/status")
        with urllib.request.urlopen(link, timeout=30) as r:  # the page is served
            assert r.status == 200 and b"Dask" in r.read()


def test_the_local_clusters_workers_print_only_what_is_critical(client):
    """A worker's shutdown noise (a heartbeat to a scheduler that has just closed, logged at ERROR with a
    traceback) never reaches the terminal of a cancelled sweep: the engine's own cluster sets its workers'
    ``distributed`` loggers to CRITICAL, and the engine reports failures, deaths and the cancel itself."""
    import logging

    def handler_levels():
        return [h.level for h in logging.getLogger("distributed").handlers if isinstance(h, logging.StreamHandler)]

    levels = client.run(handler_levels)
    assert levels and all(lv and set(lv) == {logging.CRITICAL} for lv in levels.values()), levels
