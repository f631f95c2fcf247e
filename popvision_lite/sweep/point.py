"""One sweep point: emulate, write its profile and its results row (runs on a Dask worker).

``run_point`` never raises for a problem of the point itself (invalid combination, emulator error,
unwritable folder): it returns a row with ``status = "failed"`` and the message.  A point that kills its
process (segfault, out of memory) is turned into a failed row by the client (``engine.py``).

Files, all written atomically (temp file + rename), in the sweep folder:
``profiles/<key>.pvl`` then ``rows/<key>.json`` (the row names its config hash; resume trusts a point
only when both exist and the hash matches).  ``profiles`` and ``rows`` must be real folders (``confined``: a
link out of the sweep folder fails the point, naming it); the commit renames and writes through their
descriptors, so nothing lands outside the folder.

``run_point_isolated`` runs a point in its own process forked from a fork server that has the emulator
imported (the ``--isolate process`` mode).  ``python -m popvision_lite.sweep.point SPEC_JSON OUT_DIR HASH
KEY`` runs one point from a shell and prints its row as JSON (debugging).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import socket
import sys
import time
from pathlib import Path

PROFILES = "profiles"
ROWS = "rows"
CANCELLED = "cancelled"  # a point of a cancelled sweep: nothing written, not a result
POINT_PROCESS = "sweep-point-"  # name prefix of a point's process
# how to start `dask worker`s whose worker processes may start a point's process (not daemonic)
NON_DAEMON_HINT = "DASK_DISTRIBUTED__WORKER__DAEMON=False dask worker ... (or 'dask worker --no-nanny')"
POLL_S = 0.2  # how often a worker looks at its point's process and at the sweep's run file


def profile_relpath(key: str) -> str:
    return f"{PROFILES}/{key}.pvl"


def row_name(key: str) -> str:
    """The name of point ``key``'s row in ``rows/``."""
    return f"{key}.json"


def price_per_chip_hour(device: str) -> tuple[float | None, str]:
    """(USD per chip-hour or None, where it comes from / why there is none): :func:`devices.chip_price`."""
    from popvision_lite.devices import chip_price, load_device
    from popvision_lite.errors import PopvisionError

    try:
        p = chip_price(load_device(device))
    except PopvisionError as e:
        return None, f"device spec unreadable: {e}"
    return (p.usd_per_chip_hour if p.known else None), p.source


def metrics(run, device: str, profile_path) -> dict:
    """Row numbers of a finished emulation (``RunResult``) whose profile was written to ``profile_path``; the
    compute / exchange / sync / stream / host shares are those of ``analysis.run_totals`` on that file (the shares of
    one whole step's IPU time that ``info`` and every view show)."""
    from popvision_lite.analysis.run_totals import run_totals
    from popvision_lite.emulator.run_summary import end_of_run_numbers
    from popvision_lite.profile.reader import open_profile

    s = end_of_run_numbers(run.profile_data, run)
    with open_profile(profile_path) as p:
        share = run_totals(p).part_share
    cfg = run.cfg
    chips = int(getattr(cfg, "ipus", 1) or 1)
    sps = getattr(run, "samples_per_second", None)
    if sps is not None and sps > 0:
        sps_basis = "emulator (RunResult.samples_per_second)"
    else:
        sps = cfg.batch / s["seconds"] if s["seconds"] > 0 else float("nan")
        sps_basis = "batch / step time (no samples_per_second from the emulator)"
    # the schedule (multi-IPU runs, CONTRACT.md) knows the real step time; else cycles / clock
    step = run.schedule.step_seconds or s["seconds"]
    price, why = price_per_chip_hour(device)
    if price is not None and sps > 0 and math.isfinite(sps):
        cost = price * chips * (1e6 / sps) / 3600.0
        cost_note = f"{price} USD/chip-hour x {chips} chip(s): {why}"
    else:
        cost = float("nan")
        cost_note = why or "no throughput"
    return dict(
        fits=bool(s["fits"]),
        chips=chips,
        peak_tile_memory_pct=100.0 * s["peak_bytes"] / s["capacity"],
        peak_tile=s["peak_tile"],
        samples_per_second=float(sps),
        samples_per_second_basis=sps_basis,
        total_cycles=int(s["total_cycles"]),
        step_seconds=float(step),
        compute_share=share["compute"],
        exchange_share=share["exchange"],
        sync_share=share["sync"],
        stream_copy_share=share["stream"],
        host_share=share["host"],  # the host's per-step terms (every IPU waiting): the five shares sum to 1
        usd_per_chip_hour=price if price is not None else float("nan"),
        cost_per_1m_samples_usd=cost,
        cost_note=cost_note,
    )


def _json_default(o):
    if hasattr(o, "item"):  # numpy scalars
        return o.item()
    return str(o)


def base_row(spec: dict, config_hash: str, key: str) -> dict:
    return {"config_hash": config_hash, "key": key, "model": spec["model"], "device": spec["device"],
            "timing_only": spec["timing_only"], **spec["args"]}


def staging_path(out_dir, key: str) -> Path:
    """Where a point writes its profile before it commits it (a ``.*.tmp`` name: the client removes any a
    stopped point left)."""
    return Path(out_dir) / PROFILES / f".{key}.{os.getpid()}.stage.tmp"


def run_point(spec: dict, out_dir: str, config_hash: str, key: str, point_fn=None, run_id: str | None = None) -> dict:
    """Emulate ``spec`` and write ``profiles/<key>.pvl`` and ``rows/<key>.json`` under ``out_dir``.

    ``point_fn(spec, profile_path) -> RunResult`` replaces the emulation (tests, benchmarks).  ``run_id``: the
    sweep run this point belongs to; once that run is cancelled (``folder.cancel_run``) the point writes
    nothing and returns a row with status "cancelled" (``None``: always write)."""
    from popvision_lite.sweep import confined, folder

    t0 = time.perf_counter()
    c0 = time.process_time()
    row = base_row(spec, config_hash, key)
    row.update(status="failed", error="", profile="", host=socket.gethostname(), pid=os.getpid())
    out = Path(out_dir)
    if out.is_dir() and not folder.is_current(out, run_id):
        return row | {"status": CANCELLED, "error": "the sweep was cancelled before this point started"}
    staged = staging_path(out, key)
    try:
        if not out.is_dir():
            raise FileNotFoundError(f"sweep folder {out_dir} is not visible on worker host {socket.gethostname()}; "
                                    "with --scheduler the folder must be a path every worker shares")
        for sub in (PROFILES, ROWS):  # real folders inside the sweep folder, or the point fails naming them
            with confined.folder_fd(out, sub):
                pass
        rel = profile_relpath(key)
        run = (point_fn or emulate)(spec, str(staged))
        # every resolved model field (defaults included); 'model' stays the name given (bert-base, not bert)
        row.update({k: v for k, v in run.cfg.to_dict().items() if k != "model"})
        row.update(metrics(run, spec["device"], staged))
        row.update(status="ok", profile=rel)
    except Exception as e:  # noqa: BLE001 - every failure of a point becomes its row, never the sweep's end
        row["error"] = _message(e)
    row["wall_seconds"] = time.perf_counter() - t0
    row["cpu_seconds"] = time.process_time() - c0
    try:
        with folder.commit(out, run_id) as ok:
            if not ok:
                row.update(status=CANCELLED, error="the sweep was cancelled while this point ran", profile="")
            else:
                if row["status"] == "ok":
                    with confined.folder_fd(out, PROFILES, create=False) as pfd:
                        os.replace(staged.name, f"{key}.pvl", src_dir_fd=pfd, dst_dir_fd=pfd)
                with confined.folder_fd(out, ROWS, create=False) as rfd:
                    confined.write_atomic(rfd, row_name(key), json.dumps(row, default=_json_default).encode(), out)
    except Exception as e:  # noqa: BLE001
        row.update(status="failed", error=f"{row['error']}; row not written: {_message(e)}".lstrip("; "))
    finally:
        with contextlib.suppress(Exception), confined.folder_fd(out, PROFILES, create=False) as pfd:
            os.unlink(staged.name, dir_fd=pfd)
    return row


def _message(e: BaseException) -> str:
    from popvision_lite.errors import PopvisionError

    if isinstance(e, PopvisionError):
        return str(e)
    if isinstance(e, MemoryError):
        return "out of host memory (MemoryError: an allocation failed; raise --point-memory or use fewer workers)"
    return f"{type(e).__name__}: {e}"


def emulate(spec: dict, profile_path: str):
    """The default point: ``run_model`` of the spec, profile written to ``profile_path``."""
    from popvision_lite.emulator.models.emulated import run_model
    from popvision_lite.emulator.run_config import RunConfig

    # the grid's values were checked field by field when the grid was read; the combination is checked here
    cfg = RunConfig.from_mapping({"model": spec["model"], **spec["args"]}, "sweep point").model_config(
        host_check=False)
    return run_model(cfg, device=spec["device"], timing_only=spec["timing_only"], profile_path=profile_path)


_CONTEXT = None
# imported once by the fork server, so a point's process starts in milliseconds instead of paying an
# interpreter start and these imports (~0.5 s idle, seconds on a loaded machine: docs/performance.md)
PRELOAD = ["popvision_lite.sweep.point", "popvision_lite.emulator.models.emulated",
           "popvision_lite.emulator.run_summary", "popvision_lite.analysis.run_totals", "popvision_lite.profile.reader",
           "popvision_lite.profile.writer", "popvision_lite.devices", "popvision_lite.sweep.folder"]


def _context():
    """multiprocessing's fork server with the emulator preloaded (spawn where there is no fork server)."""
    global _CONTEXT
    if _CONTEXT is None:
        import multiprocessing as mp

        try:
            ctx = mp.get_context("forkserver")
            ctx.set_forkserver_preload(PRELOAD)
        except ValueError:
            ctx = mp.get_context("spawn")
        _CONTEXT = ctx
    return _CONTEXT


def warm_up(isolate: str = "process") -> None:
    """Before the first point: with ``--isolate process``, start this worker's fork server (which imports the
    emulator, ``PRELOAD``, once; every point's process is forked from it); in-worker, import the emulator here.
    Either way the first point does not pay the imports, and a worker that only starts point processes never
    imports the emulator itself (where there is no fork server, each spawned point imports it)."""
    if isolate == "process":
        ctx = _context()
        if ctx.get_start_method() == "forkserver":
            from multiprocessing import forkserver

            forkserver.ensure_running()
        return
    import importlib

    for m in PRELOAD:
        importlib.import_module(m)


def _child(conn, spec, out_dir, config_hash, key, point_fn, memory_bytes=None, run_id=None) -> None:
    _child_setup()
    try:
        if memory_bytes:  # address-space cap: an allocation past it raises MemoryError -> a failed row saying so
            import resource

            resource.setrlimit(resource.RLIMIT_AS, (int(memory_bytes), int(memory_bytes)))
        row = run_point(spec, out_dir, config_hash, key, point_fn=point_fn, run_id=run_id)
    except BaseException as e:  # noqa: BLE001 - run_point returns rows; anything else is reported, not printed
        row = base_row(spec, config_hash, key) | {"status": "failed", "profile": "", "error": _message(e)}
    try:
        conn.send(row)
        conn.close()
    except OSError:  # the worker stopped listening (it only does after killing this process): nothing to say
        pass


def run_point_isolated(spec: dict, out_dir: str, config_hash: str, key: str, point_fn=None,
                       timeout: float | None = None, memory_bytes: int | None = None,
                       run_id: str | None = None) -> dict:
    """:func:`run_point` in a child process (forked from a fork server that has the emulator imported): a
    crash there (segfault, killed for memory) fails only this point, with the signal named, and the worker
    goes on.  ``point_fn`` must be importable by name.

    This worker stops the child itself - after ``timeout`` seconds, or as soon as the sweep run ``run_id`` is
    cancelled (checked every ``POLL_S``) - and closes the pipe only after the child is gone, so the child
    never writes into a closed pipe.  The child ignores SIGINT: a terminal's Ctrl+C reaches it too, but the
    sweep decides what stops."""
    import multiprocessing as mp
    import signal

    from popvision_lite.sweep import folder

    t0 = time.perf_counter()
    if mp.current_process().daemon:
        row = base_row(spec, config_hash, key)
        row.update(status="failed", profile="", error="--isolate process needs workers that may start processes: "
                   f"start them with {NON_DAEMON_HINT}, or use --isolate worker")
        return row
    if not folder.is_current(out_dir, run_id):
        return base_row(spec, config_hash, key) | {"status": CANCELLED, "profile": "",
                                                  "error": "the sweep was cancelled before this point started"}
    ctx = _context()
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(send, spec, str(out_dir), config_hash, key, point_fn, memory_bytes,
                                            run_id), name=f"{POINT_PROCESS}{key}")
    proc.start()
    send.close()
    row = None
    stopped = ""
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        while True:
            wait = POLL_S if deadline is None else max(0.0, min(POLL_S, deadline - time.monotonic()))
            if recv.poll(wait):
                row = recv.recv()
                break
            if deadline is not None and time.monotonic() >= deadline:
                stopped = f"timed out after {timeout} s"
                break
            if not folder.is_current(out_dir, run_id):
                stopped = CANCELLED
                break
    except (EOFError, OSError):
        row = None  # the child died before sending its row
    finally:
        # the child goes first, then the pipe: never the other way round
        if row is None and proc.is_alive():
            proc.kill()
        proc.join(None if row is None else 60)
        if proc.is_alive():  # sent its row but did not exit
            proc.kill()
            proc.join()
        recv.close()
    if row is not None:
        return row
    if not stopped and not folder.is_current(out_dir, run_id):
        stopped = CANCELLED
    row = base_row(spec, config_hash, key)
    code = proc.exitcode
    if stopped == CANCELLED:
        row.update(status=CANCELLED, profile="", error="the sweep was cancelled while this point ran")
        return row
    if stopped:
        why = stopped
    elif code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        why = f"the point's process was killed by {name}" + (" (out of memory?)" if name == "SIGKILL" else "")
    else:
        why = f"the point's process exited with status {code} without a result"
    row.update(status="failed", error=why, profile="", host=socket.gethostname(), pid=os.getpid(),
               wall_seconds=time.perf_counter() - t0)
    return row


def probe(out_dir: str | None = None) -> dict:
    """What the client needs to know about a worker before submitting points: may it start processes
    (``daemon``), which host it is on, and whether it sees the sweep folder."""
    import multiprocessing as mp

    return {"daemon": bool(mp.current_process().daemon), "host": socket.gethostname(), "pid": os.getpid(),
            "sees_folder": None if out_dir is None else Path(out_dir).is_dir()}


def _child_setup() -> None:
    """In the point's process: ignore SIGINT (a terminal's Ctrl+C reaches the whole process group; the worker,
    which also ignores it, stops this process when the sweep is cancelled), and die with the fork server it
    was forked from (Linux PR_SET_PDEATHSIG; the fork server exits when its worker does) instead of running on
    after a cluster that went away."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG = 1
        except (OSError, AttributeError):
            pass


def _main(argv: list[str]) -> int:
    import importlib

    spec, out_dir, h, key = json.loads(argv[0]), argv[1], argv[2], argv[3]
    fn = None
    if len(argv) > 4 and argv[4]:
        mod, _, name = argv[4].partition(":")
        fn = getattr(importlib.import_module(mod), name)
    row = run_point(spec, out_dir, h, key, point_fn=fn)
    print(json.dumps(row, default=_json_default))
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
