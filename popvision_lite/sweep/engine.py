"""Run the points of a sweep on Dask (``dask.distributed``): docs/decisions/0008-sweeps-on-dask.md.

* Default: a ``LocalCluster`` on loopback, one single-threaded worker *process* per core (at most one per
  point), each under a nanny, each holding one "sweep-slot" resource so it runs one point at a time.
  ``isolate="process"`` (the CLI default) runs every point in a child process of its worker: a crash
  (segfault, killed for memory) fails that point alone with the signal named, and the worker lives on.
  ``isolate="worker"`` runs points inside the workers (no interpreter start per point: faster for tiny
  points); a point that kills its worker is resubmitted once (``MAX_ATTEMPTS``) and then marked failed.
  Measured: the scheduler sometimes hands the dead worker's freed slot to another point before the worker
  is removed, so an innocent point can be blamed too (docs/decisions/0008-sweeps-on-dask.md) - hence
  the retry, and hence "process" as the default.
* ``scheduler="tcp://host:8786"``: an existing cluster.  Workers write profiles and rows *themselves* into
  the sweep folder, so that folder must be a path every worker sees (a shared file system).  Only the small
  rows travel back to the client.  The workers are probed before any point is submitted: a worker that
  cannot see the folder is named and the sweep refused; daemonic workers (stock ``dask worker``) cannot
  start a process per point (``choose_isolation``).
* Resume: a point whose ``rows/<key>.json`` holds its config hash with status ok and whose profile exists
  is not run again.  One sweep at a time per folder (``folder.FolderLock``).
* The folder stays inside itself (``confined``, decision 0210): its own files are regular files and its
  sub-folders real folders, or the sweep is refused (exit 2) before anything is written; a row is read through
  the ``input_files`` door (no link, bounded size, a FIFO never blocks) and checked like a new row
  (``results.check_row``); its profile must be ``profiles/<key>.pvl`` of its own point, a regular file reached
  without a link.  A row that fails is not resumed: its point runs again.
* Cancel (``should_cancel()`` true, or KeyboardInterrupt): the run is marked cancelled in the folder first,
  so from then on no point commits a row (``folder.commit``); points not yet running are dropped; with
  process isolation the workers stop their points' processes and the client waits for that
  (``_stop_points``); then the local cluster is closed, leftover temp files are removed and the table is
  written with every committed row.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from popvision_lite.errors import ConfigError
from popvision_lite.sweep import confined, folder, worker_watch
from popvision_lite.sweep import point as pt
from popvision_lite.sweep import results as res
from popvision_lite.sweep.grid import Point

log = logging.getLogger(__name__)

PROFILE_WORKERS = False
LOCAL_DASK_CONFIG = {
    # a worker death fails the task it ran at once (no silent retries by the scheduler): the engine decides
    # whether to run it again (MAX_ATTEMPTS) and reports it
    "distributed.scheduler.allowed-failures": 0,
    "distributed.scheduler.worker-saturation": 1.0,
}
# read by the nanny at every worker (re)start, so kept set in this process for the cluster's lifetime
WORKER_RESTART_CONFIG = {
    "distributed.worker.daemon": False,  # isolate="process" starts child processes from the worker
    # the statistical profiler samples the running task's stack every 10 ms for the dashboard's Profile page
    # (off: 107-115 vs 131-138 ms of CPU overhead per point in one paired run; noisy, see docs/performance.md); the
    # dashboard's other pages (task stream, progress, workers) do not need it
    "distributed.worker.profile.enabled": PROFILE_WORKERS,
}
# the local cluster's own processes log only what is CRITICAL to the terminal: the engine reports every point's
# failure, a worker's death and the cancel itself in its own words, and at a cancel (Ctrl+C) a worker still beating
# its heartbeat to a scheduler that has just closed logs "Failed to communicate with scheduler during heartbeat" at
# ERROR with a traceback (seen on a loaded machine: tests/sweep/test_cancel_and_clusters.py's Ctrl+C test)
WORKER_LOG_LEVEL = logging.CRITICAL
WRITE_EVERY_S = 2.0
# every local worker has one "sweep-slot" and every point needs one: the scheduler never queues a second point
# on a worker, so a worker that dies was running exactly one point, the one that gets the blame
SLOT = "sweep-slot"
MAX_ATTEMPTS = 2  # a point whose worker died is run once more before it is marked failed
# a cancelled sweep waits at most this long for its points' processes to be stopped by their workers (they
# notice within point.POLL_S; the bound only matters for a worker that hangs)
STOP_WAIT_S = 60.0


@dataclass
class Outcome:
    rows: list[dict] = field(default_factory=list)
    ok: int = 0
    failed: int = 0
    resumed: int = 0
    not_run: int = 0
    cancelled: bool = False
    workers: int = 0
    results_path: Path | None = None
    wall_seconds: float = 0.0
    isolate: str = ""
    notes: list[str] = field(default_factory=list)


def default_workers(n_points: int) -> int:
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    return max(1, min(cores, n_points))


def _ignore_sigint() -> None:
    import signal
    import threading

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def ignore_sigint_plugin():
    """A WorkerPlugin that makes a worker ignore SIGINT: Ctrl+C in a terminal reaches every process of the
    group, and the client (not each worker dying with a traceback) decides how the sweep stops."""
    from distributed import WorkerPlugin

    class IgnoreSigint(WorkerPlugin):
        name = "popvision-sweep-ignore-sigint"

        def setup(self, worker):
            _ignore_sigint()

    return IgnoreSigint()


def local_cluster(n_workers: int, memory_limit="auto"):
    """A LocalCluster of ``n_workers`` single-threaded worker processes on 127.0.0.1; its dashboard on a free
    loopback port when bokeh is installed (``dashboard_link``), none otherwise; its workers ignore SIGINT (Ctrl+C
    is handled by the client)."""
    import signal

    import dask
    from distributed import LocalCluster

    old = signal.getsignal(signal.SIGINT) if _main_thread() else None
    try:
        if old is not None:  # workers started now inherit "ignored" (one restarted later: the plugin)
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        # the nanny reads worker.daemon again at every worker restart (after a crash), so that one key stays
        # set in this process; the scheduler reads the others once, when it starts
        dask.config.set(WORKER_RESTART_CONFIG)
        with dask.config.set(LOCAL_DASK_CONFIG):
            # the dashboard needs bokeh (extra "dashboard"); without it the scheduler refuses to serve one, so it
            # is asked for only where bokeh is installed (it was never asked for: "dashboard": False).  The
            # scheduler always serves HTTP (health checks, and the dashboard's pages): on loopback, on a free port
            # (None would mean 8787, on any interface, clashing with a second sweep)
            return LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                                dashboard_address="127.0.0.1:0", scheduler_kwargs={"dashboard": _has_bokeh()},
                                memory_limit=memory_limit,
                                silence_logs=WORKER_LOG_LEVEL, resources={SLOT: 1})
    finally:
        if old is not None:
            signal.signal(signal.SIGINT, old)


def _main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def dashboard_link(client) -> str | None:
    """The dashboard URL of the client's scheduler, or None when it serves none (no bokeh there)."""
    try:
        services = client.scheduler_info(n_workers=0).get("services") or {}
    except Exception:  # noqa: BLE001 - a scheduler that cannot say has no dashboard we can name
        return None
    if "dashboard" not in services:
        return None
    try:  # the scheduler serves HTTP in any case; a dashboard only where it has bokeh
        if not client.run_on_scheduler(_has_bokeh):
            return None
        return client.dashboard_link
    except Exception:  # noqa: BLE001
        return None


def _has_bokeh() -> bool:
    import importlib.util

    return importlib.util.find_spec("bokeh") is not None


ISOLATION_MODES = ("auto", "process", "worker")


def choose_isolation(workers: dict[str, dict], isolate: str, *, point_timeout=None, point_memory=None) -> tuple[str, str]:
    """(mode, notice) for the probed ``workers`` ({address: point.probe()}).

    "auto": "process" where every worker may start processes, else "worker" with a one-line notice naming the
    fix.  An explicit "process" (or --point-timeout / --point-memory, which need it) on daemonic workers is
    refused before any point runs (ConfigError naming the fix)."""
    if isolate not in ISOLATION_MODES:
        raise ConfigError(f"argument --isolate: {isolate!r}; expected one of {', '.join(ISOLATION_MODES)}")
    daemonic = sorted(a for a, w in workers.items() if w.get("daemon"))
    if not daemonic or isolate == "worker":
        return ("process" if isolate == "auto" else isolate), ""
    which = f"{len(daemonic)} of the cluster's {len(workers)} worker(s) are daemonic Dask worker processes " \
            f"(the default of 'dask worker'), which may not start a process per point"
    needs = [n for n, v in (("--point-timeout", point_timeout), ("--point-memory", point_memory)) if v]
    if isolate == "process" or needs:
        what = " and ".join(needs) if needs else "--isolate process"
        raise ConfigError(f"argument --scheduler: {what} needs a process per point, but {which}; restart the "
                          f"workers with {pt.NON_DAEMON_HINT}, or use --isolate worker"
                          + (f" without {what}" if needs else ""))
    return "worker", (f"note: {which}: running points inside the workers (--isolate worker; a crashing point "
                      f"restarts its worker). To isolate each point, start the workers with {pt.NON_DAEMON_HINT}.")


def connect(address: str, timeout: float = 10.0):
    """A Client of the Dask scheduler at ``address``; ConfigError naming the address when unreachable."""
    from distributed import Client

    if "://" not in address:
        raise ConfigError(f"argument --scheduler: {address!r} is not a scheduler address; "
                          "expected e.g. tcp://host:8786")
    try:
        return Client(address, timeout=timeout)
    except (OSError, TimeoutError, ValueError) as e:
        raise ConfigError(f"argument --scheduler: cannot reach the Dask scheduler at {address} "
                          f"within {timeout:g} s ({type(e).__name__}: {e})") from None


OWN_FILES = (folder.LOCK, folder.RUN, folder.COMMIT_LOCK, res.RESULTS, res.META)
OWN_FOLDERS = (pt.PROFILES, pt.ROWS)


def check_folder(out_dir) -> None:
    """Refuse (FolderError, exit 2) a sweep folder whose own files are not regular files or whose ``profiles`` /
    ``rows`` are not real folders (a link, a FIFO, a device ...), before the sweep writes anything."""
    confined.check_entries(out_dir, OWN_FILES, OWN_FOLDERS)


def read_row(out_dir, key: str) -> tuple[dict | None, str]:
    """(the row stored for point ``key``, "") or (None, why not): absent, not a regular file, over its size bound,
    not JSON, or a row that fails ``results.check_row``."""
    from popvision_lite import input_files

    name = f"{key}.json"
    try:
        with confined.folder_fd(out_dir, pt.ROWS, create=False) as fd:
            data = confined.read_small(fd, name, "sweep_row", Path(out_dir) / pt.ROWS)
        if data is None:
            return None, ""
        row = input_files.parse_json(data, f"{pt.ROWS}/{name}", lambda problem: ConfigError(f"{pt.ROWS}/{name}: {problem}"),
                                     allow_nan=True)
    except ConfigError as e:
        return None, str(e)
    problem = res.check_row(row)
    return (None, f"{pt.ROWS}/{name}: {problem}") if problem else (row, "")


def resumable_row(out_dir, p: Point, notes: list[str] | None = None) -> dict | None:
    """The stored row of ``p`` when the point need not run again: a valid row (``read_row``) naming the same
    config hash, finished ok, whose profile is ``profiles/<key>.pvl`` and exists as a regular file.  The row's
    point fields are ``p``'s own (its grid values, never the file's).  ``notes`` gets why a row that is there
    was not taken."""
    row, why = read_row(out_dir, p.key)
    if row is None:
        if why and notes is not None:
            notes.append(f"point {p.index}: stored row not resumed, the point runs again ({why})")
        return None
    if row.get("config_hash") != p.config_hash or row.get("status") != "ok":
        return None
    if row.get("profile") != pt.profile_relpath(p.key) or not confined.exists_inside(out_dir, row["profile"]):
        if notes is not None and row.get("profile") != pt.profile_relpath(p.key):
            notes.append(f"point {p.index}: stored row names profile {str(row.get('profile'))[:80]!r}, not "
                         f"{pt.profile_relpath(p.key)!r}; the point runs again")
        return None
    return row | pt.base_row(p.spec, p.config_hash, p.key)


def remove_temp_files(out_dir) -> int:
    """Remove temp files a killed writer left (``.NAME.*.tmp``, regular files only) in the sweep folder and its
    ``profiles`` / ``rows`` (never through a link: a sub-folder that is not a real folder is left alone)."""
    n = 0
    for sub in (None, pt.PROFILES, pt.ROWS):
        try:
            with confined.folder_fd(out_dir, sub, create=False) as fd:
                n += confined.remove_temps(fd)
        except ConfigError:
            continue
    return n


def stored_row(out_dir, p: Point) -> dict | None:
    """The row a worker wrote for ``p`` (any status), when it is a valid row naming ``p``'s config hash."""
    row, _ = read_row(out_dir, p.key)
    if row is None or row.get("config_hash") != p.config_hash:
        return None
    if row.get("status") == "ok" and row.get("profile") != pt.profile_relpath(p.key):
        return None
    return row | pt.base_row(p.spec, p.config_hash, p.key)


def checked_row(row, p: Point) -> dict:
    """A row a worker sent back, through the same checks as a resumed one (``results.check_row``)."""
    problem = res.check_row(row)
    return _failed_row(p, f"the point's row is not valid: {problem}") if problem else row


def _is_killed_worker(exc) -> bool:
    from distributed import KilledWorker

    return isinstance(exc, KilledWorker)


def _failed_row(p: Point, message: str) -> dict:
    row = pt.base_row(p.spec, p.config_hash, p.key)
    row.update(status="failed", error=message, profile="")
    return row


def _error_message(exc: BaseException, attempts: int = 1) -> str:
    if _is_killed_worker(exc):
        return (f"the worker process died each time it ran this point ({attempts} tries): a crash such as a "
                "segfault, or killed for using too much memory; the worker was restarted and the sweep "
                "went on")
    return f"{type(exc).__name__}: {exc}"


class _SigintFlag:
    """While a sweep runs in the main thread, Ctrl+C (SIGINT) sets a flag that the loop polls, instead of
    raising KeyboardInterrupt wherever the main thread happens to be.  Raised inside a ``distributed``
    call that waits on its event loop (``Future.result()`` and every other ``Client.sync``), the
    KeyboardInterrupt made distributed schedule a cancel callback that failed with a NameError, and tornado
    printed its traceback on stderr ("Exception in callback ... sync.<locals>.cancel"): a race with the
    moment of the Ctrl+C (seen in 1 of 12 runs of the command's Ctrl+C test, since merged into
    tests/sweep/test_cancel_and_clusters.py::test_ctrl_c_under_load_stops_every_process_and_prints_no_traceback).  A
    second Ctrl+C while the first is being handled raises KeyboardInterrupt as usual (a user who insists)."""

    def __init__(self):
        self.set = False
        self._old = None

    def _handler(self, signum, frame):
        if self.set:
            raise KeyboardInterrupt
        self.set = True

    def install(self) -> None:
        import signal

        if _main_thread():
            self._old = signal.signal(signal.SIGINT, self._handler)

    def restore(self) -> None:
        import signal

        if self._old is not None:
            signal.signal(signal.SIGINT, self._old)
            self._old = None


def run_sweep(points: list[Point], out_dir, *, grid_names: list[str], meta: dict | None = None,
              workers: int | None = None, scheduler: str | None = None, connect_timeout: float = 10.0,
              client=None, isolate: str = "process", point_fn: Callable | None = None, resume: bool = True,
              point_timeout: float | None = None, point_memory: int | None = None,
              progress: Callable[[Outcome, int], None] | None = None,
              should_cancel: Callable[[], bool] | None = None,
              notify: Callable[[str], None] | None = None,
              on_dashboard: Callable[[str], None] | None = None) -> Outcome:
    """Run ``points`` and write the sweep folder; returns the outcome (rows in point order).

    ``isolate``: "process" (each point in its own process), "worker" (inside the worker processes) or "auto"
    (process where the workers may start processes, else worker, saying so through ``notify``).  The workers
    are probed before any point is submitted: an explicit "process" on workers that cannot start processes is
    a ConfigError naming the fix.
    ``point_timeout``: seconds after which a point's process is killed and the point failed (process mode).
    ``point_memory``: bytes of address space a point's process may use (process mode; past it, MemoryError).
    ``client``: an existing ``distributed.Client`` to use as is (tests, notebooks).  ``on_dashboard(url)``: called
    once with the Dask dashboard's address when the cluster started here serves one (bokeh installed).  KeyboardInterrupt
    is handled like ``should_cancel()``: the outcome comes back with ``cancelled=True``.
    A second sweep into the same folder while this one runs is refused (ConfigError; sweep/folder.py)."""
    t0 = time.perf_counter()
    out = Path(out_dir)
    existed = out.is_dir()
    before = set(os.listdir(out)) if existed else set()
    out.mkdir(parents=True, exist_ok=True)
    check_folder(out)
    lock = folder.FolderLock(out).acquire()
    refused = False
    try:
        return _run_locked(points, out, t0, grid_names=grid_names, meta=meta, workers=workers, scheduler=scheduler,
                           connect_timeout=connect_timeout, client=client, isolate=isolate, point_fn=point_fn,
                           resume=resume, point_timeout=point_timeout, point_memory=point_memory,
                           progress=progress, should_cancel=should_cancel,
                           notify=notify or (lambda msg: log.warning("%s", msg)), on_dashboard=on_dashboard)
    except ConfigError:  # refused before any point ran (workers that cannot see the folder or isolate a point)
        refused = True
        raise
    finally:
        lock.release()
        if refused:
            _remove_what_a_refused_sweep_made(out, before, existed)


def _remove_what_a_refused_sweep_made(out: Path, before: set[str], existed: bool) -> None:
    """A refused sweep leaves no trace: the lock and run files, empty ``profiles/`` / ``rows/`` and ``sweep.json``
    it made go, and the folder too when it made it and nothing else is in it.  What was there before stays, and
    so does anything a point wrote (none runs before the refusal, but a row is never deleted)."""
    made = {folder.LOCK, folder.RUN, folder.COMMIT_LOCK, res.META, pt.PROFILES, pt.ROWS}
    for name in made - before:
        path = out / name
        with contextlib.suppress(OSError):  # a non-empty folder stays (rmdir refuses it)
            path.rmdir() if path.is_dir() and not path.is_symlink() else path.unlink()
    if not existed:
        with contextlib.suppress(OSError):
            out.rmdir()


def _prepare_folder(out: Path) -> None:
    """The sweep folder's sub-folders created (or refused when not a real folder: a link out of the folder), and
    temporary files of an earlier run removed."""
    for sub in (pt.PROFILES, pt.ROWS):
        with confined.folder_fd(out, sub):
            pass
    remove_temp_files(out)


def _grid_meta(points, grid_names) -> dict:
    """The sweep's meta when the caller gave none: each grid axis's values in first-seen order."""
    grid: dict[str, list] = {n: [] for n in grid_names}
    for p in points:
        for n in grid_names:
            if p.values.get(n) not in grid[n]:
                grid[n].append(p.values.get(n))
    return {"grid": grid, "points": len(points)}


def _resumed_rows(points, out: Path, resume: bool, o: Outcome) -> tuple[dict[int, dict], list[Point]]:
    """(rows already on disk that a resume keeps, the points still to run)."""
    rows: dict[int, dict] = {}
    todo: list[Point] = []
    for p in points:
        row = resumable_row(out, p, o.notes) if resume else None
        if row is not None:
            rows[p.index] = row | {"point": p.index}
            o.resumed += 1
        else:
            todo.append(p)
    return rows, todo


@dataclass
class _Owned:
    """The Dask cluster and client a sweep started itself (closed when it ends); None where it was given them."""
    cluster: object = None
    client: object = None

    def close(self) -> None:
        if self.client is not None:
            with contextlib.suppress(Exception):
                self.client.close()
        if self.cluster is not None:
            with contextlib.suppress(Exception):
                self.cluster.close()


def _start_client(owned: _Owned, scheduler, connect_timeout, workers, n_todo: int, on_dashboard):
    """A client on the scheduler at ``scheduler``, or on a local cluster of ``workers`` (both kept in ``owned``)."""
    from distributed import Client

    if scheduler:
        owned.client = connect(scheduler, connect_timeout)
        return owned.client
    owned.cluster = local_cluster(workers or default_workers(n_todo))
    owned.client = client = Client(owned.cluster)
    client.register_plugin(ignore_sigint_plugin())
    link = dashboard_link(client)
    if link:
        log.info("Dask dashboard: %s", link)
        if on_dashboard is not None:
            on_dashboard(link)
    return client


def _check_workers(probed: dict, target: str, isolate, point_timeout, point_memory) -> tuple[str, str]:
    """(isolation, notice) for the ``probed`` workers; ConfigError when one cannot see the folder."""
    blind = sorted({w.get("host", a) for a, w in probed.items() if w.get("sees_folder") is False})
    if blind:
        raise ConfigError(f"argument -o/--output: the sweep folder {target} is not visible on worker "
                          f"host(s) {', '.join(blind)}; with --scheduler the folder must be a path every "
                          "worker shares (the same shared file system, mounted at the same path)")
    return choose_isolation(probed, isolate, point_timeout=point_timeout, point_memory=point_memory)


def _row_of(f, p: Point, out: Path, attempts: dict[int, int]) -> tuple[dict | None, bool]:
    """(row, run again) for the finished future ``f`` of point ``p``: no row for a cancelled point, or one to run
    again (its row lost with its worker, or its worker killed on a first try)."""
    if f.status == "finished":
        return checked_row(f.result(), p), False
    if f.status == "cancelled":
        return None, False
    if f.status == "lost":
        # finished, but its worker died (on a later point) before the row was fetched: the row
        # is on disk; if it is not, run the point again
        row = stored_row(out, p)
        return row, row is None
    exc = f.exception()
    if _is_killed_worker(exc) and attempts[p.index] < MAX_ATTEMPTS:
        return None, True  # maybe it only shared the worker with the point that crashed
    return _failed_row(p, _error_message(exc, attempts[p.index])), False


class _Submitter:
    """Submits a point to the workers (one per worker at a time where they offer the slot, as our LocalCluster
    does), counting its attempts and keeping its future in ``futures``."""

    def __init__(self, client, info: dict, futures: dict, *, target: str, run_id: str, point_fn, isolate: str,
                 point_timeout, point_memory):
        self.client, self.futures, self.target, self.run_id = client, futures, target, run_id
        self.point_fn, self.isolate = point_fn, isolate
        self.fn = pt.run_point_isolated if isolate == "process" else pt.run_point
        self.slots = bool(info) and all(SLOT in (w.get("resources") or {}) for w in info.values())
        self.extra = {}
        if isolate == "process":
            self.extra = {k: v for k, v in (("timeout", point_timeout), ("memory_bytes", point_memory)) if v}
        self.attempts: dict[int, int] = {}

    def __call__(self, p: Point):
        self.attempts[p.index] = self.attempts.get(p.index, 0) + 1
        f = self.client.submit(self.fn, p.spec, self.target, p.config_hash, p.key, self.point_fn, pure=False,
                               run_id=self.run_id, **self.extra, key=f"sweep-point-{p.key}-{time.time_ns()}",
                               resources={SLOT: 1} if self.slots else None)
        self.futures[f.key] = (f, p)
        return f


def _give_up_on_lost_workers(client, futures: dict, rows: dict[int, dict], o: Outcome, out: Path, notify) -> None:
    """The cluster lost every worker and none came back (``worker_watch``): every point still in ``futures`` is
    given its committed row (a point can commit just before its worker is lost) or a failed row saying why, and
    cancelled on the scheduler; the sweep says why it stopped."""
    message = (f"every worker of the cluster was lost and none came back within {worker_watch.NO_WORKER_S:g} s (a "
               "crashed worker whose restart failed); this point did not run")
    log.error("sweep: %s", message)
    o.notes.append(f"the sweep stopped: {message}")
    notify(o.notes[-1])
    with contextlib.suppress(Exception):
        client.cancel([f for f, _ in futures.values()], force=True)
    for _, p in list(futures.values()):
        _take_row(rows, o, p, stored_row(out, p) or _failed_row(p, message))
    futures.clear()


def _take_row(rows: dict[int, dict], o: Outcome, p: Point, row: dict) -> None:
    """A point's result row kept and counted (ok or failed) and logged."""
    rows[p.index] = row | {"point": p.index}
    if row.get("status") == "ok":
        o.ok += 1
    else:
        o.failed += 1
    log.info("point %d (%s): %s", p.index, p.key, row.get("status") if row.get("status") == "ok"
             else f"failed: {row.get('error')}")


def _recover_committed(todo: list[Point], rows: dict[int, dict], out: Path, o: Outcome) -> None:
    """Rows of points that committed on a worker after a cancelled client stopped listening, kept as ok."""
    for p in todo:
        row = resumable_row(out, p) if p.index not in rows else None
        if row is not None:
            rows[p.index] = row | {"point": p.index}
            o.ok += 1


def _open_folder(points, out: Path, meta, grid_names, resume, notify) -> tuple[Outcome, dict[int, dict], list]:
    """The sweep folder made ready and its meta written: (the outcome so far, the rows resumed from it, the points
    still to run); each note on a stored row not resumed told through ``notify``."""
    _prepare_folder(out)
    res.write_meta(out, meta if meta is not None else _grid_meta(points, grid_names))
    o = Outcome()
    rows, todo = _resumed_rows(points, out, resume, o)
    for note in o.notes:
        notify(note)
    return o, rows, todo


def _run_locked(points, out: Path, t0, *, grid_names, meta, workers, scheduler, connect_timeout, client, isolate,
                point_fn, resume, point_timeout, point_memory, progress, should_cancel, notify,
                on_dashboard=None) -> Outcome:
    o, rows, todo = _open_folder(points, out, meta, grid_names, resume, notify)
    total = len(points)

    write_cost = [0.0]

    def write_table():
        t = time.perf_counter()
        o.rows = [rows[i] for i in sorted(rows)]
        o.results_path = res.write_results(out, o.rows, grid_names)
        write_cost[0] = time.perf_counter() - t

    report = progress or (lambda *_: None)
    if not todo:
        write_table()
        report(o, total)
        o.wall_seconds = time.perf_counter() - t0
        return o

    owned = _Owned()
    futures = {}
    interrupted = _SigintFlag()
    run_id = folder.start_run(out)
    refused = False

    def cancel_requested() -> bool:
        return interrupted.set or (should_cancel is not None and bool(should_cancel()))

    try:
        interrupted.install()
        from distributed import as_completed

        if client is None:
            client = _start_client(owned, scheduler, connect_timeout, workers, len(todo), on_dashboard)
        target = str(out.resolve())
        probed = client.run(pt.probe, target)
        try:
            isolate, notice = _check_workers(probed, target, isolate, point_timeout, point_memory)
        except ConfigError:
            refused = True  # before any point was submitted: nothing to write
            raise
        if notice:
            o.notes.append(notice)
            notify(notice)
        info = client.scheduler_info(n_workers=-1).get("workers", {})
        o.workers = len(info)
        o.isolate = isolate
        with contextlib.suppress(Exception):  # imports (and fork servers) on every worker at once, not per point
            client.run(pt.warm_up, isolate)
        submit = _Submitter(client, info, futures, target=target, run_id=run_id, point_fn=point_fn, isolate=isolate,
                            point_timeout=point_timeout, point_memory=point_memory)
        ac = as_completed([submit(p) for p in todo])
        last_write = time.perf_counter()
        report(o, total)
        watch = worker_watch.of_client(client, seen=bool(info))
        while not ac.is_empty():
            if cancel_requested():
                raise KeyboardInterrupt
            for f in ac.next_batch(block=False):
                if interrupted.set:  # rows of points the Ctrl+C itself killed are not results; ok rows come
                    raise KeyboardInterrupt  # back from disk below
                _, p = futures.pop(f.key)
                row, again = _row_of(f, p, out, submit.attempts)
                if again:
                    ac.add(submit(p))
                if row is None or row.get("status") == pt.CANCELLED:  # not a result (only seen in a race with
                    continue                                           # a cancel)
                _take_row(rows, o, p, row)
                report(o, total)
            if cancel_requested():
                raise KeyboardInterrupt
            if futures and watch.lost():
                _give_up_on_lost_workers(client, futures, rows, o, out, notify)
                break
            # the table is rewritten while the sweep runs (finished rows survive a crash of the client too), at
            # most ~10 % of the client's time: 10,000 rows take ~1 s to write as CSV on a loaded 2-core machine
            if time.perf_counter() - last_write > max(WRITE_EVERY_S, 10 * write_cost[0]):
                write_table()
                last_write = time.perf_counter()
            time.sleep(0.02)
    except KeyboardInterrupt:
        o.cancelled = True
        _stop_points(client, out, run_id, futures, wait=o.isolate == "process")
    finally:
        interrupted.restore()
        owned.close()
        remove_temp_files(out)
        if not refused:  # (a refused sweep raises its ConfigError with nothing written)
            if o.cancelled:  # points that committed on a worker after the client stopped listening
                _recover_committed(todo, rows, out, o)
            o.not_run = total - len(rows)
            write_table()
            report(o, total)
        o.wall_seconds = time.perf_counter() - t0
    return o


def _stop_points(client, out: Path, run_id: str, futures: dict, wait: bool, bound_s: float = STOP_WAIT_S) -> None:
    """Cancel a sweep: first the run (from here on no point commits: sweep/folder.py), then the points not yet
    running (dropped by the scheduler); with process isolation, wait (up to ``bound_s``) until each running point
    has had its process stopped by its worker (they look at the run file every ``point.POLL_S``), so no point's
    process outlives the sweep and nothing is killed under a pipe.  Points running inside workers
    (``--isolate worker``) cannot be stopped without killing their worker: they run to the end and write
    nothing; the local cluster, closed next, stops them."""
    folder.cancel_run(out, run_id)
    if client is None or not futures:
        return
    pending = [f for f, _ in futures.values() if not f.done()]
    running: list = []
    if wait:
        with contextlib.suppress(Exception):
            on_workers = {k for keys in client.processing().values() for k in keys}
            running = [f for f in pending if f.key in on_workers]
    running_keys = {f.key for f in running}
    with contextlib.suppress(Exception):
        client.cancel([f for f in pending if f.key not in running_keys], force=True)
    if running:
        from distributed import wait as wait_futures

        with contextlib.suppress(Exception):
            wait_futures(running, timeout=bound_s)
        with contextlib.suppress(Exception):
            client.cancel(running, force=True)
